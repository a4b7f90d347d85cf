"""The one base class of the codecs: each codec is one class that is both the public value
users name (zarr-python 3's name, constructor signature, ``to_dict``/``from_dict``) and the
codec a Zarr v3 chain runs (``from_config``, ``encode``/``decode``).

A codec object is immutable once built. Built by its constructor it is a value: ``to_dict()``
gives the JSON zarr-python 3 writes, ``from_dict()`` reads it back, and ``spec(dtype)`` is the
internal form the creation code uses (the same JSON, with the settings that depend on the
data type, such as Blosc's ``typesize``, filled in). Built by ``from_config(conf, ctx)``
(:mod:`chunkstore.codecs.v3`) it is also bound to the chain's data type and chunk shape and
encodes and decodes. Classes register in :mod:`chunkstore.codecs.registry`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np


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


class _FrozenAfterInit(type):
    """Metaclass: an instance takes no new attribute values once its constructor returned."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        obj = super().__call__(*args, **kwargs)
        object.__setattr__(obj, "_frozen", True)
        return obj


class _ClassName:
    """``codec_name``: the class's v3 ``name``, on the class and on its instances."""

    def __get__(self, obj: Any, cls: type[Codec]) -> str:
        return cls.name


class Codec(metaclass=_FrozenAfterInit):
    """A codec. ``name`` is its Zarr v3 name (``codec_name`` too), ``kind`` "array_array",
    "array_bytes" or "bytes_bytes"; ``compresses``: ``.info`` shows the first bytes -> bytes
    codec that compresses as the compressor."""

    name: ClassVar[str] = ""
    codec_name = _ClassName()
    kind: ClassVar[str] = ""
    compresses: ClassVar[bool] = False
    #: the constructor's keyword arguments, which are also the ``configuration`` fields
    _fields: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen"):
            raise AttributeError(f"{type(self).__name__} is immutable")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, **values: Any) -> None:
        """Set attributes of a built codec (what ``from_config`` binds to the chain)."""
        for k, v in values.items():
            object.__setattr__(self, k, v)

    @classmethod
    def from_config(cls, conf: dict, ctx: Any) -> "Codec":
        """The codec of a v3 chain from its ``configuration`` and the chain's state
        (``chunkstore.codecs.chain_codecs.ChainContext``)."""
        raise NotImplementedError(f"codec {cls.name!r} does not run in a Zarr v3 chain here")

    @classmethod
    def runs_in_chain(cls) -> bool:
        """True when the class builds codecs a v3 chain runs (it implements ``from_config``)."""
        return cls.from_config.__func__ is not Codec.from_config.__func__  # type: ignore

    def to_dict(self) -> dict:
        """The codec's JSON document, as zarr-python 3 writes it."""
        conf = {f: getattr(self, f) for f in self._fields}
        return {"name": self.name, "configuration": conf}

    @classmethod
    def from_dict(cls, data: Mapping) -> "Codec":
        """The codec of a JSON document (what ``to_dict`` writes)."""
        return cls(**named_configuration(data, cls.name))

    def spec(self, dtype: np.dtype | None = None) -> dict:
        """The internal (JSON) form for arrays of ``dtype``."""
        return self.to_dict()

    def to_numcodecs(self) -> Any:
        """The numcodecs codec for a Zarr v2 array (``compressor`` or ``filters``)."""
        raise ValueError(f"{self!r} has no Zarr v2 (numcodecs) equivalent")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Codec):
            return type(other) is type(self) and other.to_dict() == self.to_dict()
        # another library's codec object (zarr-python 3's) is equal when its JSON document
        # is: a dataset's encoding compares equal whichever library read it
        to_dict = getattr(other, "to_dict", None)
        if not callable(to_dict) or not getattr(type(other), "__module__", "").startswith(
                "zarr."):
            return NotImplemented
        try:
            theirs = json.loads(json.dumps(to_dict(), default=str))
        except (TypeError, ValueError):
            return NotImplemented
        return bool(theirs == json.loads(json.dumps(self.to_dict(), default=str)))

    def __hash__(self) -> int:
        return hash((type(self).__name__, json.dumps(self.to_dict(), sort_keys=True,
                                                     default=repr)))

    def __repr__(self) -> str:
        if self._fields:
            args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
            return f"{type(self).__name__}({args})"
        conf = self.to_dict().get("configuration")
        return f"{type(self).__name__}({conf!r})" if conf else f"{type(self).__name__}()"
