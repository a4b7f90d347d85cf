"""LMDBStore specifics: growing map, read-only fixture, processes, shared environments."""

from __future__ import annotations

import numpy as np
import os
import sys

import pytest

pytest.importorskip("lmdb")

from chunkstore.errors import ReadOnlyError, StoreError
from chunkstore.storage import LMDBStore
from chunkstore.storage.lmdb_store import DEFAULT_MAP_SIZE

from ._subproc import spawn, wait_ok
from .conftest import FIXTURES

MiB = 2**20


def test_default_map_is_small(tmp_path):
    with LMDBStore(tmp_path / "d.lmdb") as s:
        assert DEFAULT_MAP_SIZE == 64 * MiB
        assert s.env.info()["map_size"] == 64 * MiB


def test_map_grows(tmp_path):
    s = LMDBStore(tmp_path / "g.lmdb", map_size=MiB)
    assert s.env.info()["map_size"] == MiB
    block = os.urandom(256 * 1024)
    for i in range(24):  # 6 MiB one by one
        s[f"a/{i}"] = block
    s.setitems({f"b/{i}": block for i in range(16)})  # 4 MiB in one transaction
    s["huge"] = os.urandom(9 * MiB)  # one value larger than twice the map
    assert s.env.info()["map_size"] >= 16 * MiB
    assert s["a/23"] == block and s["b/15"] == block and len(s["huge"]) == 9 * MiB
    assert len(s) == 41
    s.close()
    with LMDBStore(tmp_path / "g.lmdb", mode="r") as r:  # reopened at the grown size
        assert r["a/0"] == block


def test_map_grown_by_another_process(tmp_path):
    path = tmp_path / "p.lmdb"
    s = LMDBStore(path, map_size=MiB)
    s["first"] = b"1"
    code = r"""
import sys, os
from chunkstore.storage import LMDBStore
s = LMDBStore(sys.argv[1], map_size=2**20)
for i in range(32):
    s[f"child/{i}"] = bytes([i]) * (256 * 1024)
s.close()
"""
    wait_ok([spawn(code, path)])
    # this process's map is still 1 MiB: reading and writing must adopt the new size
    assert s["child/31"] == bytes([31]) * (256 * 1024)
    assert len(s) == 33
    s["after"] = os.urandom(2 * MiB)
    assert len(s["after"]) == 2 * MiB
    s.close()


def test_one_writer_many_readers_across_processes(tmp_path):
    path = tmp_path / "mp.lmdb"
    LMDBStore(path).close()
    writer = r"""
import sys
from chunkstore.storage import LMDBStore
s = LMDBStore(sys.argv[1], map_size=2**20)
w = int(sys.argv[2])
for i in range(200):
    s[f"w{w}/{i}"] = bytes([w]) * (1000 + i)
s.close()
"""
    reader = r"""
import sys
from chunkstore.storage import LMDBStore
s = LMDBStore(sys.argv[1], mode="r")
for it in range(200):
    got = s.getitems([f"w{w}/{i}" for w in range(2) for i in range(0, 200, 13)])
    for k, v in got.items():
        w, i = int(k[1]), int(k.split("/")[1])
        assert v == bytes([w]) * (1000 + i), k
    s.listdir("w0")
s.close()
"""
    procs = [spawn(writer, path, w) for w in range(2)] + [spawn(reader, path) for _ in range(2)]
    wait_ok(procs, timeout=120)
    with LMDBStore(path, mode="r") as s:
        assert len(s) == 400
        assert s["w1/199"] == bytes([1]) * 1199


def test_read_only_fixture_without_lock():
    d = FIXTURES / "v2" / "group_lmdb" / "data.lmdb"
    before = sorted(os.listdir(d))
    with LMDBStore(d, mode="r") as s:
        assert s.read_only
        assert s[".zgroup"]
        assert s.listdir() == [".zattrs", ".zgroup", "a", "empty", "g1"]
        with pytest.raises(ReadOnlyError):
            s["x"] = b"1"
    assert sorted(os.listdir(d)) == before  # no lock.mdb created in the fixture
    with LMDBStore(d, mode="r", lock=False) as s:
        assert "g1/g2/.zattrs" in s


def test_same_path_twice_in_one_process(tmp_path):
    path = tmp_path / "two.lmdb"
    a = LMDBStore(path)
    b = LMDBStore(path)  # LMDB forbids opening one environment twice: it is shared
    a["k"] = b"1"
    assert b["k"] == b"1"
    r = LMDBStore(path, mode="r")
    assert r["k"] == b"1"
    with pytest.raises(ReadOnlyError):
        r["k"] = b"2"
    a.close()
    b["k2"] = b"2"  # still open for b
    b.close()
    assert r["k2"] == b"2"
    r.close()
    ro = LMDBStore(path, mode="r")
    with pytest.raises(StoreError):
        LMDBStore(path)  # cannot upgrade an environment already open read-only
    ro.close()
    with LMDBStore(path) as w:
        assert w["k2"] == b"2"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_usable_after_fork(tmp_path):
    s = LMDBStore(tmp_path / "f.lmdb")
    s["parent"] = b"1"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            s["child"] = b"2"
            code = 0 if s["parent"] == b"1" else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert s["child"] == b"2"
    s.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("child_writes", [False, True])
def test_the_parents_reads_go_on_after_a_forked_child_used_the_path(tmp_path, child_writes):
    """A forked child opening the environment itself (as a multiprocessing worker does)
    closes the one it inherited, which used to release the parent's reader slots held by
    spare read transactions: the parent's next read failed with MDB_BAD_RSLOT (with a read
    in flight, LMDB would no longer have protected the pages it read)."""
    import threading
    import chunkstore as cs
    path = str(tmp_path / "p.lmdb")
    z = cs.open_array(LMDBStore(path), mode="w", shape=(8,), chunks=(4,), dtype="i8")
    z[...] = 1
    for _ in range(3):  # reads from this thread and another: spare transactions before
        t = threading.Thread(target=lambda: z[...])
        t.start()
        t.join()
        assert (z[...] == 1).all()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            c = cs.open_array(LMDBStore(path), mode="r+")
            if child_writes:
                c[...] = 7
            code = 0 if (c[...] == (7 if child_writes else 1)).all() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_array_equal(z[...], np.full(8, 7 if child_writes else 1))


def test_long_keys_and_closed(tmp_path):
    s = LMDBStore(tmp_path / "k.lmdb")
    with pytest.raises(ValueError) as ei:
        s["k" * 600] = b"1"
    assert "key" in str(ei.value)
    s.close()
    with pytest.raises(StoreError):
        s["a"]
    s.close()


def test_missing_environment(tmp_path):
    with LMDBStore(tmp_path / "missing.lmdb", mode="r") as s:
        assert len(s) == 0 and list(s) == [] and s.listdir() == []
        assert s.getitems(["a"]) == {} and "a" not in s and s.getsize() == 0
        with pytest.raises(KeyError):
            s.get_partial("a", [(0, 1)])
        with pytest.raises(FileNotFoundError):
            s.env
    assert not (tmp_path / "missing.lmdb").exists()


def test_clear_import_error_without_lmdb(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "lmdb", None)
    with pytest.raises(ImportError) as ei:
        LMDBStore(tmp_path / "x.lmdb")
    assert "chunkstore[lmdb]" in str(ei.value)


def test_a_store_collected_while_another_opens_does_not_deadlock(tmp_path, monkeypatch):
    """Opening an environment (under the registry's lock) may run the garbage collector,
    whose collection of a dropped store closes that store under the same lock: with a plain
    lock the thread waited for itself, for good (seen in the suite)."""
    import gc
    import threading

    from chunkstore.storage import lmdb_store
    dropped = LMDBStore(str(tmp_path / "dropped.lmdb"))
    dropped.cycle = dropped  # (freed by the collector only)
    del dropped
    real = lmdb_store.LMDBStore._open_env

    def open_env_collecting(self):
        gc.collect()
        return real(self)

    monkeypatch.setattr(lmdb_store.LMDBStore, "_open_env", open_env_collecting)
    done = []
    t = threading.Thread(target=lambda: done.append(LMDBStore(str(tmp_path / "new.lmdb"))),
                         daemon=True)
    gc.disable()
    try:
        t.start()
        t.join(20)
    finally:
        gc.enable()
    assert done, "opening a store hung"
    done[0].close()
