"""An in-memory store."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from chunkstore.forksafe import fork_safe
from .base import BaseStore, ValueVersion, _listdir_keys, _under, ensure_bytes, normalize_prefix, validate_key

__all__ = ["MemoryStore"]


class MemoryStore(BaseStore):
    """A store holding its values in a ``dict`` in memory. Thread-safe.

    ``MemoryStore(data=None, mode="a")``: *data* is an optional mapping to start from (its
    items are copied and validated); zarr-python 3's ``MemoryStore(store_dict=,
    read_only=)`` spelling is taken too. Pickling copies the contents. Two memory stores
    compare equal when they hold the same items.
    """

    #: (a pickled copy holds a copy of the data: protocol.copies_share_data)
    copies_share_data = False

    def __init__(self, data: Mapping[str, Any] | None = None, mode: str = "a",
                 dimension_separator: str | None = None, *, read_only: bool = False,
                 store_dict: Mapping[str, Any] | None = None):
        # read_only, store_dict: zarr-python 3's MemoryStore(store_dict, read_only=)
        if store_dict is not None:
            if data is not None:
                raise TypeError("MemoryStore: give data or store_dict (the same argument, "
                                "zarr-python 3's name), not both")
            data = store_dict
        super().__init__("r" if read_only else mode)
        self._set_dimension_separator(dimension_separator)
        self._data: dict[str, bytes] = {}
        self._lock = fork_safe(self, "_lock", threading.RLock)  # (anew in a forked child)
        if data:
            for k, v in data.items():
                self._data[validate_key(k)] = ensure_bytes(v)

    def __repr__(self) -> str:
        ro = ", mode='r'" if self.read_only else ""
        return f"MemoryStore(<{len(self._data)} keys at {id(self):#x}>{ro})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MemoryStore):
            with self._lock:
                mine = dict(self._data)
            with other._lock:
                theirs = dict(other._data)
            return mine == theirs
        return NotImplemented

    __hash__ = BaseStore.__hash__

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"data": dict(self._data), "mode": self._mode,
                    "dimension_separator": self._dimension_separator}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._mode = state["mode"]
        self._dimension_separator = state.get("dimension_separator")
        self._data = state["data"]
        self._lock = fork_safe(self, "_lock", threading.RLock)  # (anew in a forked child)

    # -- mapping ---------------------------------------------------------------------------

    def __getitem__(self, key: str) -> bytes:
        validate_key(key)
        return self._data[key]

    def open_version(self, key: str) -> ValueVersion:
        """The key's value as it is now (values are replaced, never changed in place, so
        every read of it sees that version); version None: no index is cached over it,
        as re-reading one from memory costs next to nothing."""
        validate_key(key)
        return ValueVersion(self._data[key])

    def __setitem__(self, key: str, value: Any) -> None:
        validate_key(key)
        self._check_writable(key)
        value = ensure_bytes(value)
        with self._lock:
            self._data[key] = value

    def __delitem__(self, key: str) -> None:
        validate_key(key)
        self._check_writable(key)
        with self._lock:
            del self._data[key]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        validate_key(key)
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            keys = list(self._data)
        return iter(keys)

    def __len__(self) -> int:
        return len(self._data)

    # -- extras ----------------------------------------------------------------------------

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* present; absent keys are omitted.

        Raises ``TypeError`` or ``ValueError`` for an invalid key (checked before any lookup).
        """
        keys = list(keys)
        for k in keys:
            validate_key(k)
        data = self._data
        with self._lock:
            return {k: data[k] for k in keys if k in data}

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Store every ``key: value`` of *mapping* at once.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store, and ``TypeError`` /
        ``ValueError`` for an invalid key or a value that is not bytes-like (nothing is written
        then).
        """
        self._check_writable()
        items = {validate_key(k): ensure_bytes(v) for k, v in mapping.items()}
        with self._lock:
            self._data.update(items)

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete *keys*; absent keys are ignored.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        keys = [validate_key(k) for k in keys]
        with self._lock:
            for k in keys:
                self._data.pop(k, None)

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the immediate children of *prefix* (keys or "directories")."""
        prefix = normalize_prefix(prefix)
        with self._lock:
            keys = list(self._data)
        return _listdir_keys(keys, prefix)

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """Every key at or under *prefix* (one pass over the keys, under the lock)."""
        prefix = normalize_prefix(prefix)
        with self._lock:
            if not prefix:
                return iter(list(self._data))
            p = prefix + "/"
            return iter([k for k in self._data if k.startswith(p) or k == prefix])

    def rmdir(self, prefix: str = "") -> None:
        """Delete every key under *prefix* (all keys if *prefix* is empty).

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        prefix = normalize_prefix(prefix)
        with self._lock:
            if not prefix:
                self._data.clear()
                return
            p = prefix + "/"
            for k in [k for k in self._data if k.startswith(p)]:
                del self._data[k]

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the values at or under *prefix*."""
        prefix = normalize_prefix(prefix)
        with self._lock:
            return sum(len(v) for k, v in self._data.items() if _under(k, prefix))

    def clear(self) -> None:
        """Delete every key (``rmdir("")``)."""
        self.rmdir("")
