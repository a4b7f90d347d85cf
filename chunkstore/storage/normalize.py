"""``normalize_store``: a store from a store-like argument (None, a mapping, a path or a URL).

Kept apart from :mod:`.base` because it knows every concrete store, and every concrete store
builds on :mod:`.base`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Union

from .base import check_mode
from .directory import DirectoryStore
from .fsspec_store import FSStore
from .kvstore import KVStore, is_mapping_like
from .lmdb_store import LMDBStore
from .memory import MemoryStore
from .object_store import ObjectStore
from .sqlite import SQLiteStore
from .zip import ZipStore

__all__ = ["StoreLike", "normalize_store"]

#: What every function taking a store accepts (an object with the mapping methods also works).
StoreLike = Union[Mapping[str, bytes], str, os.PathLike, None]


def normalize_store(store_like: StoreLike = None, mode: str = "a",
                    storage_options: dict | None = None,
                    for_node: bool = False) -> Mapping[str, bytes]:
    """Turn a store-like argument into a store.

    - ``None`` -> a new :class:`MemoryStore` (read-only if ``mode == "r"``);
    - a ``MutableMapping`` (or any ``Mapping``) -> itself, unchanged;
    - any other object with the mapping methods (``__getitem__``, ``__setitem__``,
      ``__delitem__``, ``__contains__`` and ``__iter__`` or ``keys``) -> a :class:`KVStore`
      over it;
    - a ``str`` / ``os.PathLike``: ``s3://bucket/...`` -> :class:`ObjectStore` (obstore's S3
      client, *storage_options* in s3fs's names translated by ``ObjectStore.from_url``; where
      obstore is not installed, :class:`FSStore` over s3fs); any other ``scheme://...`` or a
      URL containing ``::`` -> :class:`FSStore`;
      ``*.zip`` -> :class:`ZipStore`; ``*.sqlite``/``*.db`` -> :class:`SQLiteStore`;
      ``*.lmdb`` -> :class:`LMDBStore`; anything else -> :class:`DirectoryStore`.

    ``mode="r"`` opens the store read-only. *storage_options* are passed to ``FSStore`` (and
    rejected for the other kinds). ``for_node``: mode is a node opener's, whose ``"r+"``
    opens a node that exists, so a missing database file (``*.sqlite``, ``*.db``,
    ``*.lmdb``, which their stores create as they open) is opened read-only: the open finds
    no node and creates nothing (an empty database was left behind the not-found error).
    """
    check_mode(mode)
    if store_like is None:
        return MemoryStore(mode=mode)
    if isinstance(store_like, Mapping):
        return store_like
    if is_mapping_like(store_like) and not isinstance(store_like, (str, bytes)):
        # duck-typed mapping, as zarr-python 2 accepts: the caller's object, which closing
        # the wrapper (a function that opened its store closes it) must leave open
        return KVStore(store_like, closes_mapping=False)
    if isinstance(store_like, os.PathLike):
        store_like = os.fspath(store_like)
    if isinstance(store_like, bytes):
        store_like = os.fsdecode(store_like)
    if not isinstance(store_like, str):
        raise TypeError(
            f"cannot make a store from {type(store_like).__name__} {store_like!r}; expected "
            f"None, a MutableMapping (or an object with its methods), a path or a URL"
        )
    path = store_like
    if "://" in path or "::" in path:
        if path.split("://", 1)[0].lower() in ("s3", "s3a") and "::" not in path \
                and _has_obstore():
            return ObjectStore.from_url(path, storage_options, read_only=mode == "r")
        return FSStore(path, mode=mode, storage_options=storage_options)
    if storage_options:
        raise ValueError(
            f"storage_options were given but {path!r} is a local path, not an fsspec URL"
        )
    low = path.rstrip("/\\").lower()
    if low.endswith(".zip"):
        # A call's mode is about the node it opens: "w" replaces it (the open removes what
        # is at its path), "w-"/"x" refuse it if it exists. A ZipStore's own modes are about
        # the archive ("w" truncates it, siblings of that node included; "w-" refuses an
        # existing archive), so those open it to append, and the node check decides, as in
        # a directory or SQLite store.
        return ZipStore(path, mode="a" if mode in ("w", "w-", "x") else mode)
    # (see for_node)
    db_mode = "r" if for_node and mode == "r+" and not os.path.exists(path) else mode
    if low.endswith(".sqlite") or low.endswith(".db"):
        return SQLiteStore(path, mode=db_mode)
    if low.endswith(".lmdb"):
        return LMDBStore(path, mode=db_mode)
    return DirectoryStore(path, mode=mode)


def _has_obstore() -> bool:
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True
