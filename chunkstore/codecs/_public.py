"""Base of the public codec classes (zarr-python 3's names and signatures).

A public codec is a small immutable value: its constructor takes zarr-python 3's keyword
arguments, ``to_dict()`` gives the JSON zarr-python 3 writes and ``from_dict()`` reads it back.
``spec(dtype)`` is the internal form the creation code uses (the same JSON, with the settings
that depend on the data type, such as Blosc's ``typesize``, filled in)."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import numpy as np

#: name -> public codec class, filled by ``register``; read by chunkstore.codecs.normalize
REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    REGISTRY[cls.codec_name] = cls
    return cls


def named_configuration(data: Any, name: str) -> dict:
    """The configuration of a ``{"name": ..., "configuration": {...}}`` document for ``name``."""
    if not isinstance(data, Mapping):
        raise TypeError(f"a codec document must be a dict, got {data!r}")
    if data.get("name") != name:
        raise ValueError(f"expected a {name!r} codec document, got name {data.get('name')!r}")
    conf = data.get("configuration", {})
    if not isinstance(conf, Mapping):
        raise ValueError(f"codec {name!r}: configuration must be a dict, got {conf!r}")
    return dict(conf)


class Codec:
    """A zarr-python 3 codec: ``kind`` is "array_array", "array_bytes" or "bytes_bytes"."""

    codec_name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    _fields: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, **values: Any) -> None:
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def to_dict(self) -> dict:
        conf = {f: getattr(self, f) for f in self._fields}
        return {"name": self.codec_name, "configuration": conf}

    @classmethod
    def from_dict(cls, data: Mapping) -> "Codec":
        return cls(**named_configuration(data, cls.codec_name))

    def spec(self, dtype: np.dtype | None = None) -> dict:
        """The internal (JSON) form for arrays of ``dtype``."""
        return self.to_dict()

    def to_numcodecs(self) -> Any:
        """The numcodecs codec for a Zarr v2 array (``compressor`` or ``filters``)."""
        raise ValueError(f"{self!r} has no Zarr v2 (numcodecs) equivalent")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({args})"
