"""A fork while another thread of the parent is inside a database store's transaction (a
chunkstore write on a pool thread, say): SQLite and LMDB keep a process's locks in its
memory, so the child inherited locks held by a thread it does not have. LMDB: the child
hung for good opening the environment by path; SQLite: every write of the child failed
("database is locked"). The fork now waits for transactions in flight
(chunkstore.storage.forkgate.ForkGate), and the child writes."""

from __future__ import annotations

import os
import threading

import pytest

import chunkstore as cs


@pytest.mark.parametrize("kind", ["sqlite", "lmdb"])
def test_a_child_forked_during_a_parent_transaction_writes(tmp_path, kind):
    path = str(tmp_path / ("x.sqlite" if kind == "sqlite" else "x.lmdb"))
    store = cs.SQLiteStore(path) if kind == "sqlite" else cs.LMDBStore(path)
    store["a"] = b"1"
    inside, release = threading.Event(), threading.Event()

    def body(txn):
        if kind == "sqlite":
            txn.execute("INSERT OR REPLACE INTO zarr VALUES ('b', x'30')")
        else:
            txn.put(b"b", b"0")
        inside.set()
        release.wait(10)

    def background():  # a write transaction in flight in a parent thread
        store._write_txn(body) if kind == "sqlite" else store._run(body, write=True)

    t = threading.Thread(target=background)
    t.start()
    inside.wait(10)
    threading.Timer(0.2, release.set).start()  # (it ends by itself, soon)
    pid = os.fork()  # (waits for the transaction)
    if pid == 0:  # pragma: no cover - the child
        code = 2
        try:
            import signal
            signal.alarm(20)  # (a hang fails the test instead of the suite)
            s = cs.SQLiteStore(path, timeout=3) if kind == "sqlite" else cs.LMDBStore(path)
            s["c"] = b"child"
            code = 0 if s["c"] == b"child" and s["b"] == b"0" else 3
        finally:
            os._exit(code)
    t.join()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert store["c"] == b"child"
    store.close()


def test_a_fork_from_inside_a_transaction_does_not_wait_for_itself(tmp_path):
    """The thread that forks while itself inside a transaction passes its gate (waiting for
    itself, it hung)."""
    store = cs.LMDBStore(str(tmp_path / "y.lmdb"))
    store["a"] = b"1"

    def body(txn):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0)
        os.waitpid(pid, 0)
        return txn.get(b"a")

    assert store._run(body, write=False) == b"1"
    store.close()
