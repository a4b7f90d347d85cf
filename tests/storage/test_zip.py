"""ZipStore specifics: no duplicate members, truncated archives, modes, atomic flush."""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import threading
import zipfile

import pytest

from chunkstore.errors import ReadOnlyError, StoreError
from chunkstore.storage import ZipStore


def names(path):
    with zipfile.ZipFile(path) as zf:
        return zf.namelist()


def test_rewrite_never_duplicates(tmp_path):
    p = tmp_path / "s.zip"
    with ZipStore(p, mode="w") as s:
        s["a"] = b"1"
        s["a"] = b"2"  # rewritten before the flush
        s["b/c"] = b"x"
    assert sorted(names(p)) == ["a", "b/c"]
    with ZipStore(p) as s:
        s["a"] = b"3"  # rewrite a key already in the archive
        s["d"] = b"new"
        del s["b/c"]
        assert s["a"] == b"3" and "b/c" not in s  # pending changes are visible at once
    assert sorted(names(p)) == ["a", "d"]
    with zipfile.ZipFile(p) as zf:
        assert zf.read("a") == b"3"
    with ZipStore(p, mode="r") as s:
        assert dict(s.items()) == {"a": b"3", "d": b"new"}
    assert os.listdir(tmp_path) == ["s.zip"]  # no temporary files left


def test_changes_reach_disk_on_flush_only(tmp_path):
    p = tmp_path / "s.zip"
    s = ZipStore(p, mode="w")
    s["a"] = b"1"
    assert s.dirty
    assert names(p) == []  # the empty archive written by mode "w"
    s.flush()
    assert not s.dirty
    assert names(p) == ["a"]
    s["b"] = b"2"
    assert names(p) == ["a"]
    s.close()
    assert sorted(names(p)) == ["a", "b"]
    with pytest.raises(StoreError):
        s["a"]
    s.close()  # idempotent


def _disk_full_on_replace(monkeypatch):
    """The flush's move of its new archive into place fails, as on a full disk."""
    def boom(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)


def test_failed_flush_keeps_old_archive(tmp_path, monkeypatch):
    p = tmp_path / "s.zip"
    with ZipStore(p, mode="w") as s:
        s["a"] = b"old"
    s = ZipStore(p)
    s["a"] = b"new"
    _disk_full_on_replace(monkeypatch)
    with pytest.raises(OSError):
        s.flush()
    monkeypatch.undo()
    with zipfile.ZipFile(p) as zf:
        assert zf.read("a") == b"old"
    assert os.listdir(tmp_path) == ["s.zip"]
    s.flush()  # the pending change was kept and can be retried
    with zipfile.ZipFile(p) as zf:
        assert zf.read("a") == b"new"
    s.close()


def test_truncated_archive_is_a_clear_error(tmp_path):
    good = tmp_path / "good.zip"
    with ZipStore(good, mode="w") as s:
        s["a/.zarray"] = b"{}" * 100
        s["a/0"] = b"x" * 1000
    data = good.read_bytes()
    bad = tmp_path / "truncated.zip"
    bad.write_bytes(data[: len(data) - 30])  # central directory cut off
    for mode in ("r", "a", "r+"):
        with pytest.raises(StoreError) as ei:
            ZipStore(bad, mode=mode)
        assert str(bad) in str(ei.value)
    assert isinstance(ei.value, OSError)


def test_never_closed_archive_is_a_clear_error(tmp_path):
    # an archive whose writer died before close(): members written, no central directory
    src = tmp_path / "writing.zip"
    f = open(src, "wb")
    zf = zipfile.ZipFile(f, "w")
    zf.writestr("a/.zarray", b"{}")
    zf.writestr("a/0", b"x" * 100)
    f.flush()
    unclosed = tmp_path / "unclosed.zip"
    shutil.copyfile(src, unclosed)
    zf.close()
    f.close()
    with pytest.raises(StoreError) as ei:
        ZipStore(unclosed, mode="r")
    assert str(unclosed) in str(ei.value)
    # not a zip at all
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"this is not a zip file" * 10)
    with pytest.raises(StoreError):
        ZipStore(junk, mode="r")


def test_modes(tmp_path):
    p = tmp_path / "s.zip"
    with ZipStore(p, mode="r") as s:  # a missing archive is an empty store
        assert list(s) == []
    with ZipStore(p, mode="r+") as s:
        assert list(s) == []
    assert not p.exists()
    with ZipStore(p, mode="x") as s:
        s["a"] = b"1"
    with pytest.raises(FileExistsError):
        ZipStore(p, mode="x")
    with pytest.raises(FileExistsError):
        ZipStore(p, mode="w-")
    with ZipStore(p, mode="r+") as s:
        s["b"] = b"2"
    with ZipStore(p, mode="a") as s:
        assert sorted(s) == ["a", "b"]
    with ZipStore(p, mode="w") as s:  # truncates
        assert list(s) == []
        s["c"] = b"3"
    assert names(p) == ["c"]
    r = ZipStore(p, mode="r")
    with pytest.raises(ReadOnlyError) as ei:
        r["c"] = b"x"
    assert str(p) in str(ei.value)
    r.close()
    assert names(p) == ["c"]
    # an empty file (e.g. from tempfile) is an empty archive in the writable modes
    e = tmp_path / "empty.zip"
    e.write_bytes(b"")
    with ZipStore(e) as s:
        assert len(s) == 0
        s["k"] = b"v"
    assert names(e) == ["k"]


def test_compression_and_partial_reads(tmp_path):
    p = tmp_path / "c.zip"
    payload = bytes(range(256)) * 40
    with ZipStore(p, mode="w", compression=zipfile.ZIP_DEFLATED) as s:
        s["k"] = payload
    with zipfile.ZipFile(p) as zf:
        assert zf.getinfo("k").compress_type == zipfile.ZIP_DEFLATED
    with ZipStore(p) as s:
        assert s["k"] == payload
        assert s.get_partial("k", [(10, 5), (-3, None)]) == [payload[10:15], payload[-3:]]
        s["other"] = b"1"  # forces a rewrite: the deflated member is kept deflated
    with zipfile.ZipFile(p) as zf:
        assert zf.getinfo("k").compress_type == zipfile.ZIP_DEFLATED
        assert zf.read("k") == payload
    p2 = tmp_path / "s.zip"
    with ZipStore(p2, mode="w") as s:
        s["k"] = payload
    with ZipStore(p2, mode="r") as s:
        assert s.get_partial("k", [(1000, 24), (0, 2), (len(payload), 4)]) == [
            payload[1000:1024],
            payload[:2],
            b"",
        ]
        assert s.getsize() == len(payload)


def test_foreign_archive_with_duplicates_last_wins(tmp_path):
    p = tmp_path / "dup.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("a", b"first")
        with pytest.warns(UserWarning):
            zf.writestr("a", b"second")
        zf.writestr("dir/", b"")  # directory entries are not keys
        zf.writestr("dir/k", b"k")
    with ZipStore(p, mode="r") as s:
        assert s["a"] == b"second"
        assert sorted(s) == ["a", "dir/k"]
    with ZipStore(p) as s:
        s["b"] = b"1"
    assert sorted(names(p)) == ["a", "b", "dir/k"]


def test_threads(tmp_path):
    p = tmp_path / "t.zip"
    s = ZipStore(p, mode="w")
    errors = []

    def work(t):
        try:
            for i in range(50):
                s[f"{t}/{i}"] = bytes([t]) * i
                assert s[f"{t}/{i}"] == bytes([t]) * i
                if i % 10 == 0:
                    s.flush()
                    s.listdir(str(t))
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    ths = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    s.close()
    assert not errors
    with ZipStore(p, mode="r") as r:
        assert len(r) == 200
        assert r["3/49"] == bytes([3]) * 49
    assert len(names(p)) == 200


def test_pickle_flushes_and_reopens(tmp_path):
    p = tmp_path / "p.zip"
    s = ZipStore(p, mode="w")
    s["a"] = b"1"
    s2 = pickle.loads(pickle.dumps(s))  # pending writes are flushed first
    assert s2.mode == "a"  # never reopened with "w" (which would truncate)
    assert s2["a"] == b"1"
    s2.close()
    s.close()
    assert names(p) == ["a"]


def test_corrupt_member_is_an_error_not_missing(tmp_path):
    p = tmp_path / "c.zip"
    with ZipStore(p, mode="w") as s:
        s["a/0"] = b"A" * 1000
        s["a/1"] = b"B" * 1000
    data = bytearray(p.read_bytes())
    i = data.index(b"A" * 1000)
    data[i + 500] ^= 0xFF  # flip a byte of the stored member: CRC mismatch
    p.write_bytes(bytes(data))
    with ZipStore(p, mode="r") as s:
        with pytest.raises(StoreError) as ei:
            s["a/0"]
        assert "a/0" in str(ei.value) and str(p) in str(ei.value)
        with pytest.raises(StoreError):
            s.getitems(["a/1", "a/0"])
        assert s.getitems(["a/1", "a/2"]) == {"a/1": b"B" * 1000}


def test_stores_flushing_in_turn_keep_each_others_writes_in_one_chunk(tmp_path):
    # a write's read-modify-write read chunk 0 from s2's snapshot of the archive (taken at
    # open), before its claim reread the archive: s1's flushed element came back as 0
    import numpy as np

    import chunkstore as cs

    p = str(tmp_path / "a.zip")
    with ZipStore(p, mode="w") as s:
        cs.zeros(6, chunks=6, dtype="i4", store=s)
    s1, s2 = ZipStore(p, mode="a"), ZipStore(p, mode="a")
    a1, a2 = cs.open_array(s1, mode="r+"), cs.open_array(s2, mode="r+")
    a1[0] = 1
    s1.flush()
    a2[1] = 2
    s2.flush()
    a1.append(np.array([7], "i4"))  # a metadata change read by s1 after s2's flush
    s1.flush()
    a2[2] = 3
    s2.flush()
    for s in (s1, s2):
        s.close()
    with ZipStore(p, mode="r") as s:
        np.testing.assert_array_equal(cs.open_array(s, mode="r")[:], [1, 2, 3, 0, 0, 0, 7])
    # a store that can write reads what was flushed after its open; a mode "r" one keeps
    # the archive as of its open (no stat a read)
    r, a = ZipStore(p, mode="r"), ZipStore(p, mode="a")
    w = ZipStore(p, mode="a")
    cs.open_array(w, mode="r+")[5] = 5
    w.close()
    np.testing.assert_array_equal(cs.open_array(a, mode="r")[:], [1, 2, 3, 0, 0, 5, 7])
    np.testing.assert_array_equal(cs.open_array(r, mode="r")[:], [1, 2, 3, 0, 0, 0, 7])
    r.close()
    a.close()


def test_mode_w_with_a_path_replaces_that_node_only(tmp_path):
    # a ZipStore's own mode "w" truncates the archive: open_array(zip, mode="w", path="y")
    # lost the sibling array x, where a directory or SQLite store keeps it
    import numpy as np

    import chunkstore as cs

    p = str(tmp_path / "f.zip")
    x = cs.open_array(p, mode="w", path="x", shape=(2,), dtype="i4")
    x[:] = 5
    x.store.close()
    y = cs.open_array(p, mode="w", path="y", shape=(3,), dtype="i4")
    y[:] = 7
    y.store.close()
    g = cs.open_group(p, mode="w", path="g")
    g.store.close()
    with ZipStore(p, mode="r") as s:
        np.testing.assert_array_equal(cs.open_array(s, path="x", mode="r")[:], [5, 5])
        np.testing.assert_array_equal(cs.open_array(s, path="y", mode="r")[:], [7, 7, 7])
    # mode "w" at the root still replaces everything
    z = cs.open_array(p, mode="w", shape=(1,), dtype="i4")
    z.store.close()
    assert sorted(names(p)) == [".zarray"]


def test_a_failed_close_keeps_the_changes_for_a_retry(tmp_path, monkeypatch):
    """close() whose flush fails raises and keeps the store open with its changes (it was
    marked closed whatever happened: the changes were dropped)."""
    p = tmp_path / "s.zip"
    s = ZipStore(p, mode="w")
    s["a"] = b"new"
    _disk_full_on_replace(monkeypatch)
    with pytest.raises(OSError):
        s.close()
    monkeypatch.undo()
    s.close()
    with zipfile.ZipFile(p) as zf:
        assert zf.read("a") == b"new"


def test_a_change_read_before_another_stores_flush_is_refused(tmp_path):
    """A write whose read-modify-write read the chunk, then another store flushed its own
    write to that chunk, then this one claimed the archive: the claim reread the archive and
    the change put the stale chunk back (the other's element lost, both returning). Refused
    with a StoreError; a retry reads the new archive."""
    import numpy as np

    import chunkstore as cs
    p = str(tmp_path / "a.zip")
    with ZipStore(p, mode="w") as s:
        cs.zeros(4, chunks=4, dtype="i4", store=s)
    s1, s2 = ZipStore(p, mode="a"), ZipStore(p, mode="a")
    a1, a2 = cs.open_array(s1, mode="r+"), cs.open_array(s2, mode="r+")
    a1[0] = 1  # pending in s1, which holds the claim
    orig = s2._claim

    def claim_after_the_other_flushes():  # (the other writer flushes right here)
        if s1.dirty:
            s1.flush()
        return orig()

    s2._claim = claim_after_the_other_flushes
    with pytest.raises(StoreError, match="rewritten by another store"):
        a2[1] = 2
    s2._claim = orig
    a2[1] = 2  # retried
    s2.close()
    s1.close()
    assert cs.open_array(p, mode="r")[:].tolist() == [1, 2, 0, 0]


def _child_writes(store, q):
    try:
        store["child"] = b"c"
        store.close()
        q.put("wrote")
    except StoreError as e:
        q.put(f"refused: {e}")


def _child_reads(store, q):
    bad = 0
    for _ in range(400):
        for k, b in (("a", b"A"), ("b", b"B")):
            bad += store.get_partial(k, [(1000, 4000)])[0] != b * 4000
            bad += store[k] != b * 100_000
    q.put(bad)


def test_a_store_inherited_by_forked_children_holding_changes(tmp_path):
    """A ZipStore holding unflushed changes (and so the write claim) inherited by forked
    children: each child took itself for the one writer, and every flush rewrote the
    archive from its own view (the children's writes lost, or the parent's). A child now
    claims the archive anew (the parent holds it: StoreError) and never flushes the
    parent's changes."""
    import multiprocessing as mp
    p = tmp_path / "a.zip"
    s = ZipStore(p, mode="w")
    s["parent"] = b"p"  # pending: the parent holds the claim
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child_writes, args=(s, q)) for _ in range(3)]
    for proc in procs:
        proc.start()
    results = [q.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(30)
    assert all(r.startswith("refused: ") and "another process" in r for r in results), results
    s.close()
    with zipfile.ZipFile(p) as zf:
        assert zf.namelist() == ["parent"]


def test_a_store_inherited_by_forked_readers_reads_right(tmp_path):
    """Forked processes reading one inherited ZipStore at once shared its open archive's
    file offset: partial reads returned other members' bytes (about 1 in 10), whole reads
    failed CRC checks."""
    import multiprocessing as mp
    p = tmp_path / "a.zip"
    with ZipStore(p, mode="w") as s:
        s["a"], s["b"] = b"A" * 100_000, b"B" * 100_000
    s = ZipStore(p, mode="r")
    assert s["a"][:1] == b"A"  # (opened and read in the parent)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child_reads, args=(s, q)) for _ in range(3)]
    for proc in procs:
        proc.start()
    _child_reads(s, q)
    bad = [q.get(timeout=120) for _ in range(len(procs) + 1)]
    for proc in procs:
        proc.join(30)
    assert bad == [0] * (len(procs) + 1)


def test_a_change_made_from_a_missing_chunk_is_refused_after_another_stores_flush(tmp_path):
    """A read-modify-write found the chunk missing (an answer from the archive, as a
    member's bytes are), then another store flushed its write of that chunk: only reads of
    bytes counted as reads, so the claim reread the archive quietly and the chunk built
    from "missing" replaced the other's (its elements lost, both writes returning). The
    absence, `in` and listings count now: StoreError, and the retry keeps both writes."""
    import numpy as np

    import chunkstore as cs
    import subprocess
    import sys
    p = str(tmp_path / "a.zip")
    with ZipStore(p, mode="w") as s:
        cs.zeros(8, chunks=8, dtype="i4", store=s, zarr_format=2)
    s2 = ZipStore(p, mode="a")
    a2 = cs.open_array(s2, mode="r+")
    orig = s2._claim

    def claim_after_the_other_writes():  # (after s2 read chunk 0 missing; another process:
        # this one's handles on the archive would wait for a2's chunk lock)
        subprocess.run([sys.executable, "-c", "import chunkstore as cs; "
                        f"a = cs.open_array({p!r}, mode='r+'); a[:4] = 1; a.store.close()"],
                       check=True, timeout=120)
        return orig()

    s2._claim = claim_after_the_other_writes
    with pytest.raises(StoreError, match="rewritten by another store"):
        a2[4:] = 2
    s2._claim = orig
    a2[4:] = 2  # retried
    s2.close()
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], [1] * 4 + [2] * 4)
    # the same at the store's level: an absence, a membership test, a listing
    for look in (lambda s: s.getitems(["k"]), lambda s: "k" in s, lambda s: list(s),
                 lambda s: s.getsize()):
        with ZipStore(p, mode="a") as first:
            first.pop("k", None)
        first, second = ZipStore(p, mode="a"), ZipStore(p, mode="a")
        look(second)
        first["k"] = b"first's"
        first.close()
        with pytest.raises(StoreError, match="rewritten by another store"):
            second["k"] = b"second's, made from k missing"
        second.close()
        assert ZipStore(p, mode="r")["k"] == b"first's"


def test_a_blind_write_retried_after_the_refusal_goes_through(tmp_path):
    """The refusal says "retry (it reads the new archive)", but nothing reread it: a write
    of whole values (no read of its own) was refused again at every retry."""
    p = str(tmp_path / "a.zip")
    with ZipStore(p, mode="w") as s:
        s["k"] = b"0"
    first, second = ZipStore(p), ZipStore(p)
    assert second["k"] == b"0"
    first["j"] = b"1"
    first.close()
    with pytest.raises(StoreError, match="retry"):
        second["k"] = b"second's"
    second["k"] = b"second's"
    second.close()
    with ZipStore(p, mode="r") as s:
        assert dict(s.items()) == {"k": b"second's", "j": b"1"}


def test_a_dropped_store_whose_archive_cannot_be_written_warns(tmp_path, monkeypatch):
    """A store dropped unclosed writes its archive in __del__; a failure there was swallowed:
    an array written through a handle opened from a .zip path vanished without a word."""
    import gc

    store = ZipStore(str(tmp_path / "a.zip"), mode="w")
    store["k"] = b"v"

    def fail(*args, **kwargs):
        raise OSError(errno.EFBIG, "File too large")
    monkeypatch.setattr(ZipStore, "_write_archive", fail)  # (the class: the store is dropped)
    with pytest.warns(RuntimeWarning, match=r"a\.zip.*writes since the last flush are lost"):
        del store
        gc.collect()


def test_a_failed_archive_write_names_the_archive(tmp_path, monkeypatch):
    store = ZipStore(str(tmp_path / "a.zip"), mode="w")
    store["k"] = b"v"
    real = zipfile.ZipFile.writestr

    def full(self, *args, **kwargs):  # (zipfile's OSError names no file)
        raise OSError(errno.EFBIG, "File too large")
    monkeypatch.setattr(zipfile.ZipFile, "writestr", full)
    with pytest.raises(OSError, match=r"writing the archive of ZipStore\(.*a\.zip"):
        store.flush()
    monkeypatch.setattr(zipfile.ZipFile, "writestr", real)
    store.close()
    assert ZipStore(str(tmp_path / "a.zip"), mode="r")["k"] == b"v"
