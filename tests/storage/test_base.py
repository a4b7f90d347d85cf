"""Helpers that work on any MutableMapping, key validation and normalize_store."""

from __future__ import annotations

import errno
import pickle
from collections.abc import MutableMapping
from pathlib import Path

import numpy as np
import pytest

from chunkstore.errors import ReadOnlyError
from chunkstore.storage import (
    BaseStore,
    DirectoryStore,
    FSStore,
    LMDBStore,
    MemoryStore,
    SQLiteStore,
    ZipStore,
    delitems,
    getitems,
    getsize,
    listdir,
    normalize_store,
    rmdir,
    setitems,
    validate_key,
)
from chunkstore.storage.base import ensure_bytes

GOOD_KEYS = [
    ".zarray",
    "a/.zattrs",
    "a/b/c/0.0.0",
    "0/1/2",
    "..a",
    "a..",
    "a/..b/c",
    ".x/y.",
    "ünï/çødé",
    "sp ace",
]
BAD_KEYS = ["..", ".", "../a", "a/..", "a/../b", "./a", "a/./b", "/a", "a\\b", "a\x00", "", "a//b", "a/"]


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_validate_key_accepts(key):
    assert validate_key(key) == key


@pytest.mark.parametrize("key", BAD_KEYS)
def test_validate_key_rejects(key):
    with pytest.raises(ValueError) as ei:
        validate_key(key)
    assert repr(key) in str(ei.value)


def test_validate_key_type():
    with pytest.raises(TypeError):
        validate_key(b"a")
    with pytest.raises(TypeError):
        validate_key(None)


def test_ensure_bytes():
    assert ensure_bytes(b"a") == b"a"
    assert type(ensure_bytes(bytearray(b"a"))) is bytes
    assert ensure_bytes(memoryview(b"abc")[1:]) == b"bc"
    a = np.arange(4, dtype=">i2")
    assert ensure_bytes(a) == a.tobytes()
    f = np.asfortranarray(np.arange(6, dtype="u1").reshape(2, 3))
    assert ensure_bytes(f) == bytes([0, 3, 1, 4, 2, 5])  # raw (Fortran-order) memory
    with pytest.raises(ValueError):
        ensure_bytes(np.arange(8, dtype="u1")[::2])
    with pytest.raises(TypeError):
        ensure_bytes("str")
    with pytest.raises(TypeError):
        ensure_bytes(3.0)


# -- helpers on a plain dict -------------------------------------------------------------


@pytest.fixture
def d():
    return {
        ".zgroup": b"{}",
        "a/.zarray": b"12345",
        "a/0.0": b"xx",
        "g/b/0/0": b"zzzz",
        "ab": b"1",
    }


def test_helpers_on_dict(d):
    assert getitems(d, ["a/0.0", "missing", "ab"]) == {"a/0.0": b"xx", "ab": b"1"}
    assert listdir(d) == [".zgroup", "a", "ab", "g"]
    assert listdir(d, "a") == [".zarray", "0.0"]
    assert listdir(d, "a/") == [".zarray", "0.0"]
    assert listdir(d, "g/b") == ["0"]
    assert listdir(d, "zz") == []
    assert getsize(d) == 2 + 5 + 2 + 4 + 1
    assert getsize(d, "a") == 7
    assert getsize(d, "a/0.0") == 2
    setitems(d, {"n/1": b"1", "n/2": b"2"})
    assert d["n/1"] == b"1"
    delitems(d, ["n/1", "missing"])
    assert "n/1" not in d and "n/2" in d
    rmdir(d, "a")
    assert "a/.zarray" not in d and "ab" in d
    rmdir(d)
    assert d == {}


def test_getitems_propagates_other_errors():
    class Broken(dict):
        def __getitem__(self, k):
            if k == "bad":
                raise OSError(errno.EIO, "I/O error", k)
            return super().__getitem__(k)

    b = Broken({"ok": b"1"})
    assert getitems(b, ["ok", "missing"]) == {"ok": b"1"}
    with pytest.raises(OSError) as ei:
        getitems(b, ["ok", "bad"])
    assert ei.value.errno == errno.EIO
    assert not isinstance(ei.value, KeyError)


def test_getitems_uses_store_method():
    calls = []

    class S(dict):
        def getitems(self, keys):
            calls.append(list(keys))
            return {k: self[k] for k in keys if k in self}

    s = S({"a": b"1"})
    assert getitems(s, ["a", "b"]) == {"a": b"1"}
    assert calls == [["a", "b"]]


def test_listdir_on_mapping_with_tuple_keys_is_not_supported():
    # only str keys are meaningful: a mapping with other keys is the caller's problem
    with pytest.raises(Exception):
        listdir({("a",): b"1"})


# -- BaseStore defaults ------------------------------------------------------------------


class DictStore(BaseStore):
    """A minimal BaseStore subclass relying on every default."""

    def __init__(self, mode="a"):
        super().__init__(mode)
        self.d = {}

    def __getitem__(self, k):
        return self.d[validate_key(k)]

    def __setitem__(self, k, v):
        validate_key(k)
        self._check_writable(k)
        self.d[k] = ensure_bytes(v)

    def __delitem__(self, k):
        validate_key(k)
        self._check_writable(k)
        del self.d[k]

    def __iter__(self):
        return iter(list(self.d))

    def __len__(self):
        return len(self.d)


def test_basestore_defaults():
    s = DictStore()
    assert isinstance(s, MutableMapping)
    s.setitems({"a/b": b"12", "a/c": b"3", "d": b""})
    assert s.getitems(["a/b", "x"]) == {"a/b": b"12"}
    assert s.listdir() == ["a", "d"]
    assert s.listdir("a") == ["b", "c"]
    assert s.getsize("a") == 3
    assert s.get_partial("a/b", [(1, None), (0, 1)]) == [b"2", b"1"]
    s.delitems(["a/c", "nope"])
    s.rmdir("a")
    assert list(s) == ["d"]
    with s as s2:
        assert s2 is s
    assert not s.read_only
    r = DictStore(mode="r")
    with pytest.raises(ReadOnlyError):
        r["a"] = b"1"
    with pytest.raises(ReadOnlyError):
        r.rmdir()
    with pytest.raises(ValueError):
        DictStore(mode="bogus")


def test_memory_store_specifics():
    m = MemoryStore({"a": b"1"})
    m2 = pickle.loads(pickle.dumps(m))
    assert m2 == m and m2 is not m
    m2["b"] = b"2"
    assert "b" not in m
    assert MemoryStore({"a": bytearray(b"1")}) == m
    with pytest.raises(ValueError):
        MemoryStore({"../x": b"1"})
    r = MemoryStore({"a": b"1"}, mode="r")
    assert r.read_only and r["a"] == b"1"
    assert "MemoryStore" in repr(r)


# -- normalize_store ---------------------------------------------------------------------


def test_normalize_store_none_and_mapping():
    s = normalize_store(None)
    assert isinstance(s, MemoryStore) and not s.read_only
    assert normalize_store(None, mode="r").read_only
    d = {}
    assert normalize_store(d) is d
    m = MemoryStore()
    assert normalize_store(m) is m
    with pytest.raises(TypeError):
        normalize_store(42)
    with pytest.raises(ValueError):
        normalize_store(None, mode="bogus")


@pytest.mark.parametrize(
    "name, cls",
    [
        ("x.zip", ZipStore),
        ("x.ZIP", ZipStore),
        ("x.sqlite", SQLiteStore),
        ("x.db", SQLiteStore),
        ("x.lmdb", LMDBStore),
        ("x.zarr", DirectoryStore),
        ("plain", DirectoryStore),
    ],
)
@pytest.mark.parametrize("as_path", [False, True])
def test_normalize_store_dispatch(tmp_path, name, cls, as_path):
    p = tmp_path / name
    s = normalize_store(p if as_path else str(p))
    try:
        assert type(s) is cls
        assert not s.read_only
        s["a/b"] = b"1"
    finally:
        s.close()
    r = normalize_store(str(p), mode="r")
    try:
        assert type(r) is cls and r.read_only
        assert r["a/b"] == b"1"
        with pytest.raises(ReadOnlyError):
            r["a/b"] = b"2"
    finally:
        r.close()


def test_normalize_store_urls(tmp_path):
    s = normalize_store(f"file://{tmp_path}/u")
    assert type(s) is FSStore
    s["k"] = b"v"
    assert (tmp_path / "u" / "k").read_bytes() == b"v"
    m = normalize_store("memory://normalize-test", storage_options={})
    assert type(m) is FSStore
    # chained URL -> FSStore
    import zipfile

    zp = tmp_path / "c.zip"
    with zipfile.ZipFile(zp, "w") as zf:
        zf.writestr("a/.zgroup", b"{}")
    z = normalize_store(f"zip::file://{zp}", mode="r")
    assert type(z) is FSStore and z.read_only
    assert z["a/.zgroup"] == b"{}"
    with pytest.raises(ValueError):
        normalize_store(str(tmp_path / "d"), storage_options={"anon": True})


def test_normalize_store_read_only_missing(tmp_path):
    """A read-only open of a missing location is an empty store and creates nothing (the
    array/group layer then reports the missing node itself)."""
    for name in ["missing.zarr", "missing.zip", "missing.sqlite", "missing.lmdb"]:
        s = normalize_store(str(tmp_path / name), mode="r")
        try:
            assert s.read_only
            assert list(s) == [] and len(s) == 0
            assert ".zarray" not in s
            with pytest.raises(KeyError):
                s[".zarray"]
            assert s.getitems([".zarray", "a/0"]) == {}
            assert s.listdir() == [] and s.listdir("a") == []
            assert s.getsize() == 0
            with pytest.raises(ReadOnlyError):
                s["k"] = b"v"
        finally:
            s.close()
    s = normalize_store(f"file://{tmp_path}/missing-fs", mode="r")
    assert list(s) == [] and s.listdir() == []
    assert not any(Path(tmp_path).iterdir())


@pytest.mark.parametrize("name", ["late.zarr", "late.zip", "late.sqlite", "late.lmdb"])
def test_read_only_store_sees_location_created_later(tmp_path, name):
    r = normalize_store(str(tmp_path / name), mode="r")
    try:
        assert r.getitems(["k"]) == {}
        with normalize_store(str(tmp_path / name), mode="a") as w:
            w["k"] = b"v"
        assert r["k"] == b"v"
        assert list(r) == ["k"]
    finally:
        r.close()


@pytest.mark.parametrize("name", ["rp.zarr", "rp.zip", "rp.sqlite", "rp.lmdb"])
def test_r_plus_on_missing_location_is_writable(tmp_path, name):
    with normalize_store(str(tmp_path / name), mode="r+") as s:
        assert not s.read_only and len(s) == 0
        s["a/b"] = b"1"
    with normalize_store(str(tmp_path / name), mode="r") as s:
        assert s["a/b"] == b"1"


@pytest.mark.parametrize("name", ["wd.zarr", "wd.zip", "wd.sqlite", "wd.lmdb"])
@pytest.mark.parametrize("mode", ["w-", "x"])
def test_create_only_mode_checks_the_node_not_the_store(tmp_path, name, mode):
    """open_array(mode="w-"/"x") refuses an existing node, not an existing store: a new node
    in an existing archive or directory is created, and the siblings are kept."""
    import chunkstore as cs
    from chunkstore.errors import ContainsArrayError
    p = str(tmp_path / name)
    y = cs.open_array(p, mode="w", path="y", shape=(3,), dtype="i4")
    y[:] = 7
    y.store.close()
    x = cs.open_array(p, mode=mode, path="new", shape=(2,), dtype="i4")
    x[:] = [1, 2]
    x.store.close()
    with pytest.raises(ContainsArrayError):
        cs.open_array(p, mode=mode, path="y", shape=(3,), dtype="i4")
    r = cs.open_group(p, mode="r")
    np.testing.assert_array_equal(r["y"][:], [7, 7, 7])
    np.testing.assert_array_equal(r["new"][:], [1, 2])
    r.store.close()
