"""The store contract, run against every store class."""

from __future__ import annotations

import os
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest

from chunkstore.errors import ReadOnlyError
from chunkstore.storage import (
    LRUStoreCache,
    MemoryStore,
    delitems,
    getitems,
    getsize,
    listdir,
    rmdir,
    setitems,
)

from .conftest import Kind

BAD_KEYS = [
    "../escape",
    "a/../../escape",
    "..",
    ".",
    "a/./b",
    "a/..",
    "/abs/escape",
    "a\\..\\escape",
    "a\x00b",
    "",
    "a//b",
    "a/",
]


def snapshot(root: Path | None) -> set[str]:
    if root is None:
        return set()
    out = set()
    for dirpath, dirnames, filenames in os.walk(root.parent):
        for n in dirnames + filenames:
            out.add(os.path.join(dirpath, n))
    return out


def read_only_store(kind: Kind, data: dict):
    if kind.persistent:
        s = kind.make()
        s.setitems(data)
        s.close()
        return kind.make(mode="r")
    if kind.name == "memory":
        return MemoryStore(data, mode="r")
    if kind.name == "lru_memory":
        return LRUStoreCache(MemoryStore(data, mode="r"), max_size=1 << 20)
    raise AssertionError(kind.name)


# -----------------------------------------------------------------------------------------


def test_get_set_delete_contains_iter_len(store):
    assert len(store) == 0
    assert list(store) == []
    assert "a" not in store
    with pytest.raises(KeyError):
        store["a"]
    with pytest.raises(KeyError):
        del store["a"]

    store["a"] = b"1"
    store["b/c"] = b"22"
    store["b/d/e"] = b"333"
    assert store["a"] == b"1"
    assert type(store["b/c"]) is bytes
    assert "a" in store and "b/c" in store and "b/d/e" in store
    assert "b" not in store  # a "directory" is not a key
    assert "b/d" not in store
    assert sorted(store) == ["a", "b/c", "b/d/e"]
    assert len(store) == 3
    assert dict(store.items()) == {"a": b"1", "b/c": b"22", "b/d/e": b"333"}

    store["a"] = b"overwritten"
    assert store["a"] == b"overwritten"
    assert len(store) == 3

    del store["b/d/e"]
    assert "b/d/e" not in store
    with pytest.raises(KeyError):
        store["b/d/e"]
    assert sorted(store) == ["a", "b/c"]
    assert store.get("nope") is None
    assert store.pop("a") == b"overwritten"
    assert sorted(store) == ["b/c"]


def test_value_types(store):
    store["bytes"] = b"abc"
    store["bytearray"] = bytearray(b"abc")
    store["memoryview"] = memoryview(b"xabcx")[1:4]
    arr = np.arange(6, dtype="<u2")
    store["numpy"] = arr
    store["numpy2d"] = np.arange(6, dtype="u1").reshape(2, 3)
    for k in ["bytes", "bytearray", "memoryview"]:
        v = store[k]
        assert type(v) is bytes and v == b"abc"
    assert store["numpy"] == arr.tobytes()
    assert type(store["numpy"]) is bytes
    assert store["numpy2d"] == bytes(range(6))
    with pytest.raises(ValueError):
        store["strided"] = np.arange(10, dtype="u1")[::2]
    with pytest.raises(TypeError):
        store["str"] = "text"
    with pytest.raises(TypeError):
        store["int"] = 5
    assert "strided" not in store and "str" not in store


def test_empty_binary_unicode(store):
    store["empty"] = b""
    assert store["empty"] == b""
    assert "empty" in store
    allbytes = bytes(range(256)) * 4
    store["bin"] = allbytes
    assert store["bin"] == allbytes
    keys = ["ünï/çødé", "☃/❄.0", "日本/語", "sp ace/x y"]
    for i, k in enumerate(keys):
        store[k] = str(i).encode()
    for i, k in enumerate(keys):
        assert store[k] == str(i).encode()
        assert k in store
    assert set(keys) <= set(store)
    assert "☃" in store.listdir()
    assert store.listdir("☃") == ["❄.0"]
    assert store.getitems(keys + ["nope"]) == {k: str(i).encode() for i, k in enumerate(keys)}


def test_batch_operations(store):
    store.setitems({"x/0": b"0", "x/1": b"1", "x/2": b"22", "y": b""})
    assert store.getitems(["x/0", "x/2", "missing", "y", "x/missing/deep"]) == {
        "x/0": b"0",
        "x/2": b"22",
        "y": b"",
    }
    assert store.getitems([]) == {}
    store.delitems(["x/0", "missing", "x/1"])
    assert sorted(store) == ["x/2", "y"]
    # module-level helpers dispatch to the store's methods
    setitems(store, {"z/a": b"a"})
    assert getitems(store, ["z/a", "q"]) == {"z/a": b"a"}
    delitems(store, ["z/a", "q"])
    assert "z/a" not in store


def test_listdir_rmdir_getsize(store):
    store.setitems(
        {
            ".zgroup": b"{}",
            "a/.zarray": b"12345",
            "a/0.0": b"xx",
            "a/0.1": b"yyy",
            "g/b/.zarray": b"1",
            "g/b/0/0": b"zzzz",
            "g/.zgroup": b"22",
            "ab": b"1",
        }
    )
    assert store.listdir() == [".zgroup", "a", "ab", "g"]
    assert store.listdir("") == store.listdir("/") == store.listdir()
    assert store.listdir("a") == [".zarray", "0.0", "0.1"]
    assert store.listdir("a/") == [".zarray", "0.0", "0.1"]
    assert store.listdir("g") == [".zgroup", "b"]
    # zarr-python 2.18's NestedDirectoryStore lists an array's nested chunks by their keys
    # below it (it listed dotted names, which it could not get, before 2.11)
    nested = type(store).__name__ == "NestedDirectoryStore"
    assert store.listdir("g/b") == [".zarray", "0/0" if nested else "0"]
    if nested:
        assert all(f"g/b/{k}" in store for k in store.listdir("g/b"))
    assert store.listdir("g/b/0") == ["0"]
    assert store.listdir("nothing") == []
    assert store.listdir("a/0.0") == []  # a key is not a directory
    assert listdir(store, "a") == [".zarray", "0.0", "0.1"]

    assert store.getsize() == 2 + 5 + 2 + 3 + 1 + 4 + 2 + 1
    assert store.getsize("a") == 10
    assert store.getsize("g") == 7
    assert store.getsize("g/b/0/0") == 4  # a single key
    assert store.getsize("nothing") == 0
    assert getsize(store, "a") == 10

    store.rmdir("g/b")
    assert store.listdir("g") == [".zgroup"]
    assert "g/b/0/0" not in store and "g/.zgroup" in store
    store.rmdir("a")
    assert sorted(store) == [".zgroup", "ab", "g/.zgroup"]  # "ab" is not under "a"
    store.rmdir("nothing")
    rmdir(store, "g")
    assert sorted(store) == [".zgroup", "ab"]
    store.rmdir()
    assert list(store) == [] and len(store) == 0
    assert store.listdir() == []
    assert store.getsize() == 0


@pytest.mark.parametrize("name", ["a*", "a?", "a[b]"])
def test_deleting_keys_with_glob_characters_deletes_only_them(store, name):
    """fsspec's rm reads paths as glob patterns: FSStore's rmdir and bulk delete of a key
    of array "a*" deleted the keys of "a" and "ab" too (on S3: every write of fill values,
    resize, delete, move and overwrite of such an array). Keys are literal names."""
    others = {"a/0": b"a", "ab/0": b"ab", "a/zarr.json": b"{}", "ab/zarr.json": b"{}"}
    store.setitems({**others, f"{name}/0": b"x", f"{name}/1": b"y", f"{name}/zarr.json": b"{}"})
    store.delitems([f"{name}/0"])
    assert {k: store[k] for k in others} == others
    assert f"{name}/1" in store and f"{name}/0" not in store
    store.rmdir(name)
    assert {k: store[k] for k in others} == others
    assert not [k for k in store.keys() if k.startswith(name + "/")]


def test_get_partial(store):
    store["k"] = bytes(range(100))
    assert store.get_partial("k", [(0, 10), (90, None), (-5, None), (95, 10), (200, 5)]) == [
        bytes(range(10)),
        bytes(range(90, 100)),
        bytes(range(95, 100)),
        bytes(range(95, 100)),
        b"",
    ]
    assert store.get_partial("k", [(10, 0)]) == [b""]
    # prefixes and suffixes alone (no size lookup needed on object stores)
    assert store.get_partial("k", [(0, 10)]) == [bytes(range(10))]
    assert store.get_partial("k", [(0, 1000)]) == [bytes(range(100))]
    assert store.get_partial("k", [(-3, None), (0, None), (0, 0)]) == [
        bytes(range(97, 100)),
        bytes(range(100)),
        b"",
    ]
    with pytest.raises(KeyError):
        store.get_partial("missing", [(0, 1)])


def test_pickle(kind, store):
    store.setitems({"a": b"1", "b/c": b"22"})
    s2 = pickle.loads(pickle.dumps(store))
    try:
        assert type(s2) is type(store)
        assert s2["a"] == b"1"
        assert sorted(s2) == ["a", "b/c"]
        assert s2.read_only == store.read_only
    finally:
        s2.close()


def test_read_only(kind):
    s = read_only_store(kind, {"a": b"1", "b/c": b"22"})
    try:
        assert s.read_only
        assert s["a"] == b"1" and sorted(s) == ["a", "b/c"]
        with pytest.raises(ReadOnlyError) as ei:
            s["a"] = b"2"
        assert type(s).__name__ in str(ei.value)
        assert isinstance(ei.value, PermissionError)
        with pytest.raises(ReadOnlyError):
            s["new"] = b"2"
        with pytest.raises(ReadOnlyError):
            del s["a"]
        with pytest.raises(ReadOnlyError):
            s.setitems({"x": b"1"})
        with pytest.raises(ReadOnlyError):
            setitems(s, {"x": b"1"})
        with pytest.raises(ReadOnlyError):
            s.delitems(["a"])
        with pytest.raises(ReadOnlyError):
            s.rmdir("b")
        with pytest.raises(ReadOnlyError):
            s.rmdir()
        assert dict(s.items()) == {"a": b"1", "b/c": b"22"}
    finally:
        s.close()


def test_close_reopen_persistence(persistent_kind):
    kind = persistent_kind
    assert kind.persistent
    s = kind.make()
    s.setitems({"a": b"1", "b/c": b"22", "e": b""})
    s["b/c"] = b"333"
    del s["a"]
    s.close()
    s.close()  # idempotent
    with kind.make() as s2:
        assert dict(s2.items()) == {"b/c": b"333", "e": b""}
        s2["z"] = b"z"
    with kind.make(mode="r") as s3:
        assert dict(s3.items()) == {"b/c": b"333", "e": b"", "z": b"z"}


def test_context_manager(kind):
    with kind.make() as s:
        s["a"] = b"1"
        assert s["a"] == b"1"


def test_repr(kind, store):
    r = repr(store)
    assert type(store).__name__ in r
    if kind.root is not None:
        assert str(kind.root) in r


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_key_safety(kind, store, bad):
    before = snapshot(kind.root)
    ops = [
        lambda: store[bad],
        lambda: store.__setitem__(bad, b"x"),
        lambda: store.__delitem__(bad),
        lambda: bad in store,
        lambda: store.getitems(["ok", bad]),
        lambda: store.setitems({"ok": b"1", bad: b"x"}),
        lambda: store.delitems([bad]),
        lambda: store.get_partial(bad, [(0, 1)]),
    ]
    for op in ops:
        with pytest.raises(ValueError) as ei:
            op()
        if bad:
            assert repr(bad)[1:-1] in str(ei.value) or bad in str(ei.value)
    # nothing was written, in the store or anywhere around it
    assert snapshot(kind.root) == before
    assert "ok" not in store
    assert list(store) == []
    if kind.root is not None:
        assert not list(kind.root.parent.rglob("escape"))


def test_non_string_keys(store):
    with pytest.raises(TypeError):
        store[b"bytes"] = b"1"
    with pytest.raises(TypeError):
        store[1]
    assert 1 not in store


def test_threads(kind, store):
    n = 10 if kind.name == "fs_s3" else 25  # every S3 call is an HTTP round trip
    errors = []

    def work(t):
        try:
            for i in range(n):
                k = f"t{t}/{i}"
                store[k] = f"{t}-{i}".encode() * 10
                assert store[k] == f"{t}-{i}".encode() * 10
                store.getitems([k, f"t{(t + 1) % 4}/{i}"])
                store.listdir(f"t{t}")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(store) == 4 * n
    for t in range(4):
        assert len(store.listdir(f"t{t}")) == n


def test_pickle_to_another_process(cross_process_kind):
    """A pickled store reopens in a fresh interpreter and sees the same data."""
    kind = cross_process_kind
    from ._subproc import spawn, wait_ok

    s = kind.make()
    s.setitems({"a": b"1", "b/c": bytes(range(256))})
    payload = pickle.dumps(s)
    s.close()
    code = (
        "import pickle, sys\n"
        "s = pickle.loads(sys.stdin.buffer.read())\n"
        "assert s['b/c'] == bytes(range(256)), s['b/c']\n"
        "assert sorted(s) == ['a', 'b/c'], sorted(s)\n"
        "if not s.read_only:\n"
        "    s['from-child'] = b'x'\n"
        "s.close()\n"
    )
    import subprocess

    p = spawn(code, stdin=subprocess.PIPE)
    p.stdin.write(payload)
    p.stdin.close()
    wait_ok([p])
    with kind.make() as s2:
        assert s2["from-child"] == b"x"
