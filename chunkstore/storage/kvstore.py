"""KVStore: any mapping-like object as a store (zarr-python 2's ``KVStore``).

zarr-python 2 accepts any object with the mapping methods as a store, even one that is not a
``collections.abc.MutableMapping`` (no ``keys``/``get`` mixins, no registration). Wrapping it
gives the rest of chunkstore a real ``MutableMapping`` with the store extras.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from chunkstore.errors import store_name

from .base import BaseStore

# What an object needs to be used as a store: reads, writes, deletes and membership, plus a
# way to list keys (iteration or keys()).
_REQUIRED = ("__getitem__", "__setitem__", "__delitem__", "__contains__")


def is_mapping_like(obj: Any) -> bool:
    """True when obj has the methods a store needs (see module docstring)."""
    return (all(hasattr(obj, m) for m in _REQUIRED)
            and (hasattr(obj, "__iter__") or hasattr(obj, "keys"))
            and not isinstance(obj, (Sequence, bytearray)))  # a list is not a store


class KVStore(BaseStore):
    """A store over a mapping-like object: every operation is passed to it.

    ``dimension_separator`` is taken from the wrapped object when it has one."""

    #: (what a copy of the wrapped object reaches is not known: protocol.copies_share_data)
    copies_share_data = False

    def __init__(self, mutable_mapping: Any, mode: str = "a", *, closes_mapping: bool = True):
        if not is_mapping_like(mutable_mapping):
            raise TypeError(
                f"cannot use {type(mutable_mapping).__name__} as a store: it needs "
                f"{', '.join(_REQUIRED)} and __iter__ or keys()")
        super().__init__(mode)
        self._mutable_mapping = mutable_mapping
        # (False where chunkstore wrapped a mapping it was given: closing the wrapper leaves
        # the caller's object open)
        self._closes_mapping = closes_mapping
        self._set_dimension_separator(getattr(mutable_mapping, "dimension_separator", None))

    def __repr__(self) -> str:
        return f"KVStore({store_name(self._mutable_mapping)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KVStore) and other._mutable_mapping is self._mutable_mapping

    def __hash__(self) -> int:
        return hash(("KVStore", id(self._mutable_mapping)))

    def __getitem__(self, key: str) -> bytes:
        return self._mutable_mapping[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._check_writable(key)
        self._mutable_mapping[key] = value

    def __delitem__(self, key: str) -> None:
        self._check_writable(key)
        del self._mutable_mapping[key]

    def __contains__(self, key: object) -> bool:
        return key in self._mutable_mapping

    def __iter__(self) -> Iterator[str]:
        m = self._mutable_mapping
        return iter(m) if hasattr(m, "__iter__") else iter(m.keys())

    def __len__(self) -> int:
        m = self._mutable_mapping
        return len(m) if hasattr(m, "__len__") else sum(1 for _ in self)

    def flush(self) -> None:
        """The wrapped object's ``flush()``, where it has one."""
        f = getattr(self._mutable_mapping, "flush", None)
        if callable(f):
            f()

    def close(self) -> None:
        """The wrapped object's ``close()``, where it has one: a wrapped store's unflushed
        writes (a ZipStore's) are written, and what it holds let go, as closing it would.
        (Not for a KVStore that chunkstore made of a mapping passed as a store: that stays
        open, as every store passed in does.)"""
        c = getattr(self._mutable_mapping, "close", None)
        if callable(c) and self._closes_mapping:
            c()
