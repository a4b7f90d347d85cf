"""Store behaviour zarr-python 2 users rely on (issue 11): duck-typed mappings as stores,
FSStore(fs=), normalize_keys, dimension_separator on every store, file path components,
NestedDirectoryStore listing dotted chunk keys."""

import json
import os
import pickle

import fsspec
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import (DirectoryStore, FSStore, KVStore, LMDBStore, MemoryStore,
                                NestedDirectoryStore, SQLiteStore, ZipStore, normalize_store)


class DuckStore:
    """Has the mapping methods but is no collections.abc.MutableMapping."""

    def __init__(self):
        self.d = {}

    def __getitem__(self, k):
        return self.d[k]

    def __setitem__(self, k, v):
        self.d[k] = v

    def __delitem__(self, k):
        del self.d[k]

    def __contains__(self, k):
        return k in self.d

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


class KeysOnly:
    """zarr-python 2's minimum: keys() instead of __iter__."""

    def __init__(self):
        self.d = {}

    def keys(self):
        return self.d.keys()

    def __getitem__(self, k):
        return self.d[k]

    def __setitem__(self, k, v):
        self.d[k] = v

    def __delitem__(self, k):
        del self.d[k]

    def __contains__(self, k):
        return k in self.d


@pytest.mark.parametrize("cls", [DuckStore, KeysOnly])
def test_duck_typed_mapping_is_a_store(cls):
    duck = cls()
    a = cs.zeros((4, 4), chunks=(2, 2), dtype="i4", store=duck)
    a[:3] = 5
    assert isinstance(a.store, KVStore) and a.store._mutable_mapping is duck
    assert json.loads(duck.d[".zarray"])["shape"] == [4, 4]
    np.testing.assert_array_equal(cs.open_array(duck, mode="r")[:], np.r_[[[5] * 4] * 3,
                                                                          [[0] * 4]])
    g = cs.group(store=cls())
    g.create_group("sub").ones("x", shape=3)
    assert g["sub/x"][:].tolist() == [1, 1, 1] and list(g) == ["sub"]
    cs.copy_all(g, cs.group(store=cls()))


def test_kvstore_closes_and_flushes_what_it_wraps(tmp_path):
    """KVStore(ZipStore).close() did nothing: the zip kept its unflushed writes and its
    write claim (the next writer of the archive refused) until it was garbage-collected."""
    from chunkstore.storage import ZipStore
    p = str(tmp_path / "a.zip")
    kv = KVStore(ZipStore(p, mode="w"))
    cs.zeros(4, chunks=2, dtype="i4", store=kv)[:] = 3
    kv.flush()
    assert not kv._mutable_mapping.dirty
    cs.open_array(kv, mode="r+")[0] = 7
    kv.close()
    with ZipStore(p, mode="a") as z:  # (the claim was let go)
        z["x"] = b"1"
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], [7, 3, 3, 3])
    KVStore(DuckStore()).close()  # (a mapping without close(): nothing to do)


def test_a_mapping_passed_as_a_store_stays_open():
    """A mapping chunkstore wraps in a KVStore is the caller's: save_array and load, which
    close the stores they open, closed it through the wrapper."""
    class Closable(DuckStore):
        closed = False

        def close(self):
            self.closed = True

    duck = Closable()
    cs.save_array(duck, np.arange(4))
    np.testing.assert_array_equal(cs.load(duck), np.arange(4))
    assert not duck.closed


def test_non_mappings_are_still_refused():
    for bad in ([], 3, object()):
        with pytest.raises(TypeError, match="cannot make a store"):
            normalize_store(bad)
    with pytest.raises(TypeError):
        KVStore([])


def test_fsstore_with_fs():
    fs = fsspec.filesystem("memory")
    s = FSStore("/i11b-fs/data.zarr", fs=fs)
    assert s.fs is fs
    a = cs.zeros(6, chunks=3, store=s)
    a[:] = 2
    assert fs.cat("/i11b-fs/data.zarr/.zarray")
    assert cs.open_array(FSStore("memory://i11b-fs/data.zarr"), mode="r")[:].tolist() == [2] * 6
    p = pickle.loads(pickle.dumps(s))
    assert p["0"] == s["0"]
    with pytest.raises(ValueError, match="fs or storage_options"):
        FSStore("/x", fs=fs, storage_options={"anon": True})


@pytest.mark.parametrize("make", [
    lambda p: DirectoryStore(p, normalize_keys=True),
    lambda p: NestedDirectoryStore(p, normalize_keys=True),
    lambda p: FSStore(p, normalize_keys=True),
])
def test_normalize_keys(tmp_path, make):
    s = make(str(tmp_path / "n"))
    s["Foo/BAR"] = b"x"
    assert os.path.exists(tmp_path / "n" / "foo" / "bar")
    assert s["foo/bar"] == s["FOO/Bar"] == b"x" and "fOo/bAr" in s
    assert list(s) == ["foo/bar"] and s.listdir("FOO") == ["bar"]
    assert s.getitems(["FOO/BAR", "nope"]) == {"FOO/BAR": b"x"}
    s.setitems({"A": b"1"})
    assert s["a"] == b"1"
    del s["FOO/BAR"]
    s.delitems(["A"])
    assert list(s) == []
    p = pickle.loads(pickle.dumps(s))
    p["Q"] = b"2"
    assert s["q"] == b"2"
    # Without it, keys are case-sensitive as given.
    plain = DirectoryStore(str(tmp_path / "plain"))
    plain["Foo"] = b"x"
    assert "foo" not in plain and list(plain) == ["Foo"]


STORES = {
    "memory": lambda p, **kw: MemoryStore(**kw),
    "directory": lambda p, **kw: DirectoryStore(p, **kw),
    "fsspec": lambda p, **kw: FSStore(p, **kw),
    "zip": lambda p, **kw: ZipStore(p + ".zip", mode="w", **kw),
    "sqlite": lambda p, **kw: SQLiteStore(p + ".db", **kw),
    "lmdb": lambda p, **kw: LMDBStore(p + ".lmdb", **kw),
}


@pytest.mark.parametrize("kind", list(STORES))
def test_dimension_separator_on_every_store(tmp_path, kind):
    s = STORES[kind](str(tmp_path / "s"), dimension_separator="/")
    try:
        assert s.dimension_separator == "/"
        a = cs.zeros((2, 2), chunks=(1, 1), dtype="u1", store=s)
        a[:] = 1
        assert json.loads(s[".zarray"])["dimension_separator"] == "/"
        assert "1/1" in s and "1.1" not in s
        if kind != "zip":  # (an open zip archive does not pickle its pending writes)
            assert pickle.loads(pickle.dumps(s)).dimension_separator == "/"
    finally:
        getattr(s, "close", lambda: None)()
    with pytest.raises(ValueError, match="dimension_separator"):
        STORES[kind](str(tmp_path / "bad"), dimension_separator="-")
    assert STORES[kind](str(tmp_path / "d"),).dimension_separator is None


@pytest.mark.parametrize("make", [DirectoryStore, FSStore])
def test_file_as_path_component_is_missing_not_an_error(tmp_path, make):
    (tmp_path / "file").write_bytes(b"hi")
    for root, key in [(tmp_path, "file/x"), (tmp_path / "file" / "sub", "x"),
                      (tmp_path / "file" / "sub", "a/b")]:
        s = make(str(root))
        with pytest.raises(KeyError):
            s[key]
        assert key not in s and s.getitems([key]) == {}
        assert s.listdir(key) == [] and s.getsize(key) == 0
        with pytest.raises(KeyError):
            del s[key]
        with pytest.raises(cs.ArrayNotFoundError):
            cs.open_array(s, mode="r", path="file" if root == tmp_path else "")


def test_nested_directory_store_lists_chunk_keys_below_an_array(tmp_path):
    # as zarr-python 2.18 lists them: "0/1/0", names the store can get (dotted names, which
    # it could not, were listed before)
    s = NestedDirectoryStore(str(tmp_path / "n"))
    a = cs.zeros((4, 6, 2), chunks=(2, 2, 2), store=s, path="g/arr")
    a[:3] = 1
    assert os.path.isfile(tmp_path / "n" / "g" / "arr" / "1" / "2" / "0")
    assert s.listdir("g/arr") == [".zarray"] + [f"{i}/{j}/0" for i in (0, 1) for j in (0, 1, 2)]
    assert all(f"g/arr/{k}" in s for k in s.listdir("g/arr"))
    assert s.listdir("g") == [".zgroup", "arr"]        # outside arrays: as on disk
    assert s.listdir("g/arr/1") == ["0", "1", "2"]
    assert a.nchunks_initialized == 6
    a.resize(2, 6, 2)
    assert a.nchunks_initialized == 3 and s.listdir("g/arr") == [".zarray", "0/0/0", "0/1/0",
                                                                 "0/2/0"]
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "n"), path="g/arr")[:],
                                  np.ones((2, 6, 2)))


@pytest.mark.parametrize("make", [
    lambda p: DirectoryStore(p, normalize_keys=True),
    lambda p: NestedDirectoryStore(p, normalize_keys=True),
    lambda p: FSStore(p, normalize_keys=True),
], ids=["directory", "nested", "fsstore"])
@pytest.mark.parametrize("fmt, name", [(2, "G/X"), (3, "G/X"), (2, "İ")])
def test_nodes_at_upper_case_paths_of_a_normalize_keys_store(tmp_path, make, fmt, name):
    """The store lower-cases every key, and lists them so; a handle at "G/X" made its keys
    and filtered its listings by the path as given: a shrink left the chunks past the new
    shape (a grow brought the old values back), a copy took the document alone (the copy
    read the fill value), a move moved nothing, without an error."""
    s = make(str(tmp_path / "n"))
    root = cs.open_group(s, mode="w", zarr_format=fmt)
    kw = {"chunk_key_encoding": {"name": "default", "separator": "."}} if fmt == 3 else {}
    z = root.create_array(name, shape=(6,), chunks=(2,), dtype="i4", **kw)
    z[:] = np.arange(1, 7)
    z.resize(2)
    z.resize(6)
    assert root[name][:].tolist() == [1, 2, 0, 0, 0, 0] == z[:].tolist()
    assert z.nchunks_initialized == 1
    cs.copy(root[name], root, name="Copy")
    assert root["Copy"][:].tolist() == [1, 2, 0, 0, 0, 0]
    top = name.split("/")[0]
    n, _, _ = cs.copy_store(s, cs.MemoryStore(), source_path=top)  # ("G" copied nothing)
    assert n == len([k for k in s.keys() if k.startswith(top.lower() + "/")]) > 0
    root.move(top, "Moved")
    assert "moved" in root and top.lower() not in root
    rest = name.split("/", 1)[1] if "/" in name else ""
    assert root["Moved" + ("/" + rest if rest else "")][:].tolist() == [1, 2, 0, 0, 0, 0]
