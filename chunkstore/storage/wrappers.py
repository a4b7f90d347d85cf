"""zarr-python 3's store wrappers: WrapperStore (every operation passed to the store it
wraps: subclass it to intercept some) and LoggingStore (each operation logged and counted)."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from . import base as _base
from .kvstore import KVStore

__all__ = ["WrapperStore", "LoggingStore"]


class WrapperStore(KVStore):
    """A store that passes every operation, the batch ones included, to ``store`` (zarr-python
    3's ``WrapperStore``). Subclass it and override what you want to intercept."""

    def __init__(self, store: Any) -> None:
        super().__init__(store, mode="r" if getattr(store, "read_only", False) else "a")

    @property
    def store(self) -> Any:
        """The wrapped store."""
        return self._mutable_mapping

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._mutable_mapping!r})"

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The wrapped store's batch read."""
        return _base.getitems(self._mutable_mapping, list(keys))

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """The wrapped store's batch write."""
        self._check_writable()
        _base.setitems(self._mutable_mapping, mapping)

    def delitems(self, keys: Iterable[str]) -> None:
        """The wrapped store's batch delete."""
        self._check_writable()
        _base.delitems(self._mutable_mapping, list(keys))

    def listdir(self, prefix: str = "") -> list[str]:
        """The wrapped store's listing of prefix's children."""
        return _base.listdir(self._mutable_mapping, prefix)

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """The wrapped store's keys at or under prefix."""
        return iter(_base.keys_under(self._mutable_mapping, prefix))

    def close(self) -> None:
        """Close the wrapped store (where it can be closed)."""
        close = getattr(self._mutable_mapping, "close", None)
        if callable(close):
            close()


class LoggingStore(WrapperStore):
    """A WrapperStore that logs each operation (its name, key or count of keys, and how long
    it took) at ``log_level`` to the logger ``chunkstore.storage.LoggingStore`` (with
    ``log_handler`` added to it if given), and counts the calls per operation in
    ``counter`` (zarr-python 3's ``LoggingStore``)."""

    def __init__(self, store: Any, log_level: str | int = "DEBUG",
                 log_handler: logging.Handler | None = None) -> None:
        super().__init__(store)
        self.counter: defaultdict[str, int] = defaultdict(int)
        self.log_level = logging.getLevelName(log_level) if isinstance(log_level, str) \
            else log_level
        self.logger = logging.getLogger("chunkstore.storage.LoggingStore")
        if log_handler is not None:
            self.logger.addHandler(log_handler)
            self.logger.setLevel(self.log_level)

    def _log(self, op: str, what: str, fn: Any, *args: Any) -> Any:
        self.counter[op] += 1
        self.logger.log(self.log_level, "Calling %s.%s(%s)",
                        type(self._mutable_mapping).__name__, op, what)
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.logger.log(self.log_level, "Finished %s(%s) [%.4f s]", op, what,
                            time.perf_counter() - t0)

    def __getitem__(self, key: str) -> bytes:
        return self._log("get", key, super().__getitem__, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._log("set", key, super().__setitem__, key, value)

    def __delitem__(self, key: str) -> None:
        self._log("delete", key, super().__delitem__, key)

    def __contains__(self, key: object) -> bool:
        return self._log("exists", str(key), super().__contains__, key)

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The wrapped store's batch read, logged."""
        keys = list(keys)
        return self._log("getitems", f"{len(keys)} keys", super().getitems, keys)

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """The wrapped store's batch write, logged."""
        self._log("setitems", f"{len(mapping)} keys", super().setitems, mapping)

    def delitems(self, keys: Iterable[str]) -> None:
        """The wrapped store's batch delete, logged."""
        keys = list(keys)
        self._log("delitems", f"{len(keys)} keys", super().delitems, keys)

    def listdir(self, prefix: str = "") -> list[str]:
        """The wrapped store's listing, logged."""
        return self._log("list_dir", prefix, super().listdir, prefix)

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """The wrapped store's keys under prefix, logged."""
        return iter(self._log("list_prefix", prefix,
                              lambda p: list(WrapperStore.keys_under(self, p)), prefix))
