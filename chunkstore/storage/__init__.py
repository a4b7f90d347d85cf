"""Stores: ``MutableMapping[str, bytes]`` implementations and helpers that work on any mapping."""

from .base import (
    MAPPING_HELPERS,
    BaseStore,
    delitems,
    ensure_bytes,
    getitems,
    getsize,
    keys_under,
    listdir,
    rmdir,
    setitems,
    validate_key,
)
from .cache import LRUStoreCache
from .consolidated import ConsolidatedMetadataStore, consolidate_metadata
from .directory import DirectoryStore, NestedDirectoryStore
from .fsspec_store import FSStore
from .kvstore import KVStore
from .lmdb_store import LMDBStore
from .memory import MemoryStore
from .sqlite import SQLiteStore
from .temp import TempStore
from .zip import ZipStore
from .zarr3_names import FsspecStore, LocalStore
from .object_store import ObjectStore
from .normalize import StoreLike, normalize_store
from .store_path import StorePath
from .wrappers import LoggingStore, WrapperStore

__all__ = [
    "StorePath", "WrapperStore", "LoggingStore",
    "BaseStore",
    "MemoryStore",
    "DirectoryStore",
    "NestedDirectoryStore",
    "ZipStore",
    "SQLiteStore",
    "TempStore",
    "LMDBStore",
    "FSStore",
    "FsspecStore",
    "LocalStore",
    "ObjectStore",
    "KVStore",
    "LRUStoreCache",
    "ConsolidatedMetadataStore",
    "consolidate_metadata",
    "validate_key",
    "normalize_store",
    "StoreLike",
    "ensure_bytes",
    *MAPPING_HELPERS,
]
