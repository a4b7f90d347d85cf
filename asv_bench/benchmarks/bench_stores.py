"""Per-key overhead of the stores: set and get 10,000 small (100-byte) values.

Each benchmark is parametrised over the store kind; ``setup`` creates a fresh store in a
temporary directory (and, for the read benchmarks, fills it first).
"""

import os
import shutil
import tempfile

from chunkstore.storage import (
    DirectoryStore,
    FSStore,
    LMDBStore,
    LRUStoreCache,
    MemoryStore,
    NestedDirectoryStore,
    SQLiteStore,
    ZipStore,
)

N = 10_000
VALUE = bytes(range(100))
KINDS = [
    "memory",
    "directory",
    "nested_directory",
    "zip",
    "sqlite",
    "lmdb",
    "fsspec_file",
    "fsspec_memory",
    "lru_directory",
]


def make_store(kind, tmp):
    if kind == "memory":
        return MemoryStore()
    if kind == "directory":
        return DirectoryStore(os.path.join(tmp, "d"))
    if kind == "nested_directory":
        return NestedDirectoryStore(os.path.join(tmp, "n"))
    if kind == "zip":
        return ZipStore(os.path.join(tmp, "s.zip"))
    if kind == "sqlite":
        return SQLiteStore(os.path.join(tmp, "s.sqlite"))
    if kind == "lmdb":
        return LMDBStore(os.path.join(tmp, "s.lmdb"), sync=False)
    if kind == "fsspec_file":
        return FSStore("file://" + os.path.join(tmp, "f"))
    if kind == "fsspec_memory":
        return FSStore("memory://bench-" + os.path.basename(tmp))
    if kind == "lru_directory":
        return LRUStoreCache(DirectoryStore(os.path.join(tmp, "c")), max_size=2**30)
    raise ValueError(kind)


# keys shaped like the chunk keys of a 100 x 100 chunk grid inside an array
KEYS = [f"arr/{i // 100}.{i % 100}" for i in range(N)]


class _StoreBench:
    params = [KINDS]
    param_names = ["store"]
    timeout = 300
    number = 1
    repeat = (1, 5, 30.0)

    fill = False

    def setup(self, kind):
        self.tmp = tempfile.mkdtemp(prefix="chunkstore-bench-")
        self.kind = kind
        self.store = make_store(kind, self.tmp)
        if self.fill:
            self.store.setitems({k: VALUE for k in KEYS})
            self.store.flush()
            if isinstance(self.store, LRUStoreCache):
                self.store.invalidate()

    def teardown(self, kind):
        store = getattr(self, "store", None)  # (None where setup failed before making it)
        try:
            if store is not None:
                if kind == "fsspec_memory":
                    store.rmdir()
                store.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


class SetEach(_StoreBench):
    """10,000 individual ``store[key] = value`` (one transaction / file each)."""

    def time_set_each(self, kind):
        s = self.store
        for k in KEYS:
            s[k] = VALUE
        s.flush()


class SetBatch(_StoreBench):
    """``store.setitems`` of 10,000 values at once."""

    def time_setitems(self, kind):
        self.store.setitems({k: VALUE for k in KEYS})
        self.store.flush()


class GetEach(_StoreBench):
    """10,000 individual ``store[key]``."""

    fill = True

    def time_get_each(self, kind):
        s = self.store
        for k in KEYS:
            s[k]

    def time_contains_each(self, kind):
        s = self.store
        for k in KEYS:
            k in s


class GetBatch(_StoreBench):
    """``store.getitems`` of 10,000 keys at once (plus 10% missing keys)."""

    fill = True

    def setup(self, kind):
        super().setup(kind)
        self.keys = KEYS + [f"arr/missing.{i}" for i in range(N // 10)]

    def time_getitems(self, kind):
        self.store.getitems(self.keys)

    def time_listdir(self, kind):
        self.store.listdir("arr")
