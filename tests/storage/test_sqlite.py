"""SQLiteStore specifics: WAL, many processes and threads, bad files, read-only fixture."""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest

from chunkstore.errors import StoreError
from chunkstore.storage import SQLiteStore

from ._subproc import spawn, wait_ok
from .conftest import FIXTURES

WRITER = r"""
import sys
from chunkstore.storage import SQLiteStore
path, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = SQLiteStore(path, timeout=60)
for i in range(n):
    if i % 10 == 0:
        s.setitems({f"w{w}/b{i}/{j}": bytes([w, j]) * 50 for j in range(5)})
    s[f"w{w}/{i}"] = bytes([w]) * (100 + i)
s.close()
"""

READER = r"""
import sys
from chunkstore.storage import SQLiteStore
path, iters = sys.argv[1], int(sys.argv[2])
s = SQLiteStore(path, timeout=60)
seen = 0
for it in range(iters):
    got = s.getitems([f"w{w}/{i}" for w in range(3) for i in range(0, 60, 7)])
    for k, v in got.items():
        w = int(k[1])
        i = int(k.split("/")[1])
        assert v == bytes([w]) * (100 + i), k  # never a torn or foreign value
    seen = max(seen, len(got))
    s.listdir("w0")
    s.getsize("w1")
    len(s)
s.close()
print(seen)
"""


def test_multiprocess_writers_and_readers(tmp_path):
    path = tmp_path / "mp.sqlite"
    SQLiteStore(path).close()  # create it (WAL + table) up front
    n = 60
    procs = [spawn(WRITER, path, w, n) for w in range(3)]
    procs += [spawn(READER, path, 40) for _ in range(2)]
    wait_ok(procs, timeout=120)
    with SQLiteStore(path, mode="r") as s:
        for w in range(3):
            for i in range(n):
                assert s[f"w{w}/{i}"] == bytes([w]) * (100 + i)
        assert len(s) == 3 * n + 3 * (n // 10) * 5


def test_concurrent_creation(tmp_path):
    # several processes creating the same new database at once (WAL switch + CREATE TABLE)
    path = tmp_path / "new.sqlite"
    code = (
        "import sys\nfrom chunkstore.storage import SQLiteStore\n"
        "s = SQLiteStore(sys.argv[1]); s[f'k{sys.argv[2]}'] = b'1'; s.close()"
    )
    wait_ok([spawn(code, path, i) for i in range(4)])
    with SQLiteStore(path, mode="r") as s:
        assert sorted(s) == ["k0", "k1", "k2", "k3"]


def test_wal_mode_and_schema(tmp_path):
    path = tmp_path / "w.sqlite"
    with SQLiteStore(path) as s:
        s["a"] = b"1"
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        cols = [(r[1], r[2].upper(), r[5]) for r in con.execute("PRAGMA table_info(zarr)")]
        assert cols == [("k", "TEXT", 1), ("v", "BLOB", 0)]
        assert con.execute("SELECT v FROM zarr WHERE k='a'").fetchone()[0] == b"1"
    finally:
        con.close()


def test_many_threads(tmp_path):
    s = SQLiteStore(tmp_path / "t.sqlite")
    errors = []

    def work(t):
        try:
            for i in range(40):
                s[f"{t}/{i}"] = bytes([t]) * 10
                if i % 8 == 0:
                    s.setitems({f"{t}/batch{i}/{j}": b"b" for j in range(4)})
                assert s.getitems([f"{t}/{i}"]) == {f"{t}/{i}": bytes([t]) * 10}
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    ths = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors, errors
    assert len(s) == 8 * 40 + 8 * 5 * 4
    s.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_usable_after_fork(tmp_path):
    s = SQLiteStore(tmp_path / "f.sqlite")
    s["parent"] = b"1"
    pid = os.fork()
    if pid == 0:  # child: the inherited connection must not be reused
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


def test_large_batches(tmp_path):
    s = SQLiteStore(tmp_path / "b.sqlite")
    data = {f"c/{i}": str(i).encode() for i in range(2500)}  # more than one IN (...) batch
    s.setitems(data)
    assert s.getitems(list(data) + ["missing"]) == data
    s.delitems(list(data)[:1000] + ["missing"])
    assert len(s) == 1500
    s.close()


def test_listdir_range_edge_cases(tmp_path):
    s = SQLiteStore(tmp_path / "e.sqlite")
    s.setitems({"a/x": b"1", "a0": b"2", "a.b": b"3", "a/y/z": b"4", "a%/q": b"5", "a_/r": b"6"})
    assert s.listdir("a") == ["x", "y"]
    assert s.listdir("a%") == ["q"]  # LIKE wildcards are not special
    assert s.listdir("a_") == ["r"]
    assert s.getsize("a") == 2
    s.rmdir("a")
    assert sorted(s) == ["a%/q", "a.b", "a0", "a_/r"]
    s.close()


def test_bad_files(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"definitely not a database" * 100)
    with pytest.raises(StoreError) as ei:
        SQLiteStore(junk)
    assert str(junk) in str(ei.value)
    with pytest.raises(StoreError):
        SQLiteStore(junk, mode="r")
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(StoreError) as ei:
        SQLiteStore(other, mode="r")
    assert "zarr" in str(ei.value)
    with SQLiteStore(tmp_path / "missing.sqlite", mode="r") as s:
        assert len(s) == 0 and s.getitems(["a"]) == {}
    assert not (tmp_path / "missing.sqlite").exists()


def test_read_only_fixture_untouched():
    d = FIXTURES / "v2" / "group_sqlite"
    before = sorted(os.listdir(d))
    mtime = (d / "data.sqlite").stat().st_mtime_ns
    with SQLiteStore(d / "data.sqlite", mode="r") as s:
        assert s[".zgroup"]
        assert "a" in s.listdir()
    assert sorted(os.listdir(d)) == before
    assert (d / "data.sqlite").stat().st_mtime_ns == mtime


def test_closed_store(tmp_path):
    s = SQLiteStore(tmp_path / "c.sqlite")
    s["a"] = b"1"
    s.close()
    with pytest.raises(StoreError):
        s["a"]


def test_corrupt_database_is_an_error_not_missing(tmp_path):
    path = tmp_path / "c.sqlite"
    with SQLiteStore(path) as s:
        s.setitems({f"k{i}": os.urandom(3000) for i in range(50)})
    size = path.stat().st_size
    with open(path, "r+b") as f:  # scribble over every page after the first
        f.seek(4096)
        f.write(b"\xde\xad\xbe\xef" * ((size - 4096) // 4))
    s = SQLiteStore(path, mode="r")
    try:
        with pytest.raises(StoreError) as ei:
            s.getitems([f"k{i}" for i in range(50)])
        assert isinstance(ei.value.__cause__, sqlite3.DatabaseError)
        assert str(path) in str(ei.value)
        with pytest.raises(StoreError):
            s["k7"]
    finally:
        s.close()


def test_connections_of_finished_threads_are_released(tmp_path):
    s = SQLiteStore(tmp_path / "t.sqlite")
    s["a"] = b"1"
    for _ in range(20):
        th = threading.Thread(target=lambda: s["a"])
        th.start()
        th.join()
    s["b"] = b"2"
    assert len(s._all_conns) <= 3  # not one per thread ever started
    s.close()


@pytest.mark.parametrize("name", ["x.sqlite", "x.db", "x.lmdb"])
@pytest.mark.parametrize("opener", ["open_array", "open_group", "open", "async"])
def test_r_plus_open_of_a_missing_database_creates_nothing(tmp_path, name, opener):
    """mode "r+" opens what exists: on a missing database file the open is refused as
    not found (as zarr-python's), and no empty database is left behind (one was: the
    store created the file as it opened)."""
    import asyncio

    import chunkstore as cs
    import chunkstore.api.asynchronous as aapi
    path = str(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        if opener == "async":
            asyncio.run(aapi.open_array(store=path, mode="r+"))
        else:
            getattr(cs, opener)(path, mode="r+")
    assert os.listdir(tmp_path) == []
    # an existing database opens read-write with "r+"
    cs.zeros((4,), chunks=(2,), store=path, path="a")
    z = cs.open_array(path, mode="r+", path="a")
    z[1] = 7
    assert cs.open_array(path, mode="r", path="a")[1] == 7


_CLOSE_UNDER_WRITERS = r"""
import os, sys, threading, time
import chunkstore as cs
from chunkstore.errors import StoreError
from chunkstore.storage import SQLiteStore
for rep in range(5):
    st = SQLiteStore(os.path.join(sys.argv[1], f"s{rep}.db"))
    a = cs.zeros((64, 64), chunks=(8, 8), dtype="i4", store=st, path="a")
    closed = threading.Event()
    late = []  # writes that began after close() returned and did not raise StoreError

    def write(t):
        while True:
            after = closed.is_set()
            try:
                a[t * 16:(t + 1) * 16, :] = t
            except StoreError:
                return
            if after:
                late.append(t)
                return

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    st.close()
    closed.set()
    for t in threads:
        t.join()
    assert not late, late
print("ok")
"""


def test_close_while_other_threads_write(tmp_path):
    """close() closed every thread's connection under their statements in flight: the
    interpreter crashed (SIGSEGV). A thread could also open a new connection after close()
    and go on writing. Statements in flight now end first; later ones raise StoreError."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _CLOSE_UNDER_WRITERS, str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])
