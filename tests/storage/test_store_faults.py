"""Stores under faults (issue 16): a full disk, I/O errors, symlinks, killed flushes.

Every I/O failure surfaces as an OSError (StoreError for database stores) keeping its errno,
names the store or key, and leaves what was stored before intact."""

from __future__ import annotations

import errno
import os
import time
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import StoreError
from chunkstore.storage.memory import MemoryStore
from faults import FaultyStore, is_chunk

# where chunkstore is imported from (the installed package in CI, not the source tree)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cs.__file__)))

# A child that fills a store past RLIMIT_FSIZE: the kernel then fails writes with EFBIG,
# a real I/O error from the filesystem layer (like ENOSPC, without needing a full disk).
_FILL = textwrap.dedent("""
    import os, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "lmdb":
        from chunkstore.storage.lmdb_store import LMDBStore as S
    else:
        from chunkstore.storage.sqlite import SQLiteStore as S
    s = S(path)
    s["kept"] = b"k" * 1000
    s.flush() if hasattr(s, "flush") else None
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(path)
               for f in fs) if os.path.isdir(path) else os.path.getsize(path)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4096, size + 4096))
    try:
        for i in range(200):
            s[f"k{i}"] = os.urandom(50_000)
    except OSError as e:
        print("OSError", type(e).__name__, e.errno, str(e))
        sys.exit(0)
    except BaseException as e:
        print("OTHER", type(e).__name__, str(e))
        sys.exit(0)
    print("NOERROR")
""")


@pytest.mark.parametrize("kind", ["lmdb", "sqlite"])
def test_database_store_on_full_filesystem_raises_oserror_with_errno(tmp_path, kind):
    if kind == "lmdb":
        pytest.importorskip("lmdb")
    path = str(tmp_path / ("db.lmdb" if kind == "lmdb" else "db.sqlite"))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _FILL, kind, path], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    assert words[:2] == ["OSError", "StoreError"], out.stdout
    assert int(words[2]) in (errno.EFBIG, errno.ENOSPC, errno.EIO), out.stdout
    assert path in out.stdout
    # what was stored before is intact
    if kind == "lmdb":
        from chunkstore.storage.lmdb_store import LMDBStore as S
    else:
        from chunkstore.storage.sqlite import SQLiteStore as S
    s = S(path)
    assert s["kept"] == b"k" * 1000
    s.close()


def test_lmdb_no_space_keeps_enospc(tmp_path, monkeypatch):
    lmdb = pytest.importorskip("lmdb")
    from chunkstore.storage.lmdb_store import LMDBStore
    s = LMDBStore(str(tmp_path / "db"))
    s["a"] = b"1"
    env = s.env

    class Txn:
        def __enter__(self):
            raise lmdb.Error("mdb_txn_commit: No space left on device")

        def __exit__(self, *a):
            return False

    class Env:
        def __getattr__(self, name):
            return getattr(env, name)

        def begin(self, **kw):
            return Txn()

    monkeypatch.setattr(s._sh(), "env", Env())
    with pytest.raises(OSError) as info:
        s["b"] = b"2"
    assert isinstance(info.value, StoreError)
    assert info.value.errno == errno.ENOSPC
    assert "No space left" in str(info.value)


# ---------------------------------------------------------------- 10. symlinks out of the root
@pytest.mark.parametrize("cls", ["DirectoryStore", "NestedDirectoryStore"])
def test_writes_through_a_symlink_leaving_the_root_are_refused(tmp_path, cls):
    from chunkstore.storage import directory
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"precious")
    s = getattr(directory, cls)(str(root))
    s["a/x"] = b"1"
    os.symlink(outside, root / "link")
    os.symlink(outside, root / "a" / "deeper")
    assert s["link/victim"] == b"precious"  # reading through the link is allowed
    attempts = [lambda: s.__setitem__("link/new", b"2"),
                lambda: s.__setitem__("a/deeper/new", b"2"),
                lambda: s.setitems({"a/y": b"3", "link/new": b"2"}),
                lambda: s.__delitem__("link/victim"),
                lambda: s.delitems(["link/victim"]),
                lambda: s.rmdir("link/sub")]
    for f in attempts:
        with pytest.raises(StoreError, match="symlink") as info:
            f()
        assert isinstance(info.value, PermissionError) or info.value.errno == errno.EPERM
        assert "link" in str(info.value) or "deeper" in str(info.value)
    assert sorted(os.listdir(outside)) == ["victim"]
    assert (outside / "victim").read_bytes() == b"precious"
    assert "a/y" not in s  # a refused batch writes nothing
    # a symlink that stays inside the root is fine
    os.symlink(root / "a", root / "alias")
    s["alias/z"] = b"4"
    assert s["a/z"] == b"4"


def test_array_write_through_escaping_symlink_refused(tmp_path):
    root, outside = tmp_path / "root.zarr", tmp_path / "outside"
    outside.mkdir()
    g = cs.open_group(str(root), mode="w")
    g.zeros("a", shape=(4,), chunks=(2,))
    os.rename(root / "a", outside / "a")
    os.symlink(outside / "a", root / "a")
    z = cs.open_group(str(root), mode="r+")["a"]
    np.testing.assert_array_equal(z[:], 0)
    with pytest.raises(StoreError, match="symlink"):
        z[:] = 1
    assert sorted(os.listdir(outside / "a")) == [".zarray"]


# ---------------------------------------------------------------- 12. leftovers of killed writers
_KILLED_FLUSH = textwrap.dedent("""
    import os, sys, zipfile
    from chunkstore.storage.zip import ZipStore
    s = ZipStore(sys.argv[1], mode="a")
    s["b"] = b"new"
    real = zipfile.ZipFile.writestr
    def die(*a, **k):
        real(*a, **k)
        os._exit(9)  # as kill -9 in the middle of the flush
    zipfile.ZipFile.writestr = die
    s.flush()
""")


def test_killed_zip_flush_leftover_removed_by_next_writer(tmp_path):
    from chunkstore.cli import main
    from chunkstore.storage.zip import ZipStore
    path = str(tmp_path / "data.zip")
    with ZipStore(path, mode="w") as s:
        s["a"] = b"old"
        s[".zgroup"] = b'{"zarr_format": 2}'
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _KILLED_FLUSH, path], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 9, out.stderr
    leftovers = [n for n in os.listdir(tmp_path) if n.endswith(".partial")]
    assert len(leftovers) == 1
    # the archive itself is the complete old one
    with ZipStore(path, mode="r") as s:
        assert s["a"] == b"old" and "b" not in s
        assert s.stray_temporaries() == [str(tmp_path / leftovers[0])]
    # verify reports it (without failing: readers ignore it)
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["verify", path])
    assert leftovers[0] in buf.getvalue()
    # a fresh leftover may belong to a live writer on another host: kept; an old one goes
    with ZipStore(path, mode="a"):
        pass
    assert leftovers[0] in os.listdir(tmp_path)
    old = os.path.getmtime(tmp_path / leftovers[0]) - 3600
    os.utime(tmp_path / leftovers[0], (old, old))
    with ZipStore(path, mode="a") as s:
        assert s["a"] == b"old"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".partial")]


def test_zip_temp_of_a_live_flush_is_not_removed(tmp_path):
    fcntl = pytest.importorskip("fcntl")
    from chunkstore.storage.zip import ZipStore
    path = str(tmp_path / "data.zip")
    with ZipStore(path, mode="w") as s:
        s["a"] = b"old"
    live = tmp_path / (".data.zip." + "0" * 32 + ".partial")
    with open(live, "wb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        os.utime(live, (0, 0))
        with ZipStore(path, mode="a"):
            pass
        assert live.exists()


def test_verify_reports_stray_temporaries_in_directory_store(tmp_path):
    import contextlib
    import io
    from chunkstore.cli import main
    path = tmp_path / "d.zarr"
    z = cs.open(str(path), mode="w", shape=(4,), chunks=(2,), dtype="i4")
    z[:] = 1
    stray = path / (".0." + "a" * 32 + ".partial")
    stray.write_bytes(b"torn")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["verify", str(path)])
    assert rc == 2  # sound, but a stray is left (issue 29: it exited 0)
    assert str(stray) in buf.getvalue()
    assert "OK, 1 stray temporary file left" in buf.getvalue()
    # --remove-strays keeps a young one (a writer may be writing it), removes an old one
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["verify", str(path), "--remove-strays"])
    assert rc == 2 and stray.exists() and "a writer may still be writing it" in buf.getvalue()
    old = time.time() - 3600
    os.utime(stray, (old, old))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["verify", str(path), "--remove-strays"])
    assert rc == 0 and not stray.exists() and "removed stray temporary file" in buf.getvalue()
    np.testing.assert_array_equal(cs.open_array(str(path), mode="r")[...], 1)


# ---------------------------------------------------------------- EIO through a faulty store
@pytest.mark.parametrize("fmt", [2, 3])
def test_eio_on_read_raises_naming_the_key_never_fill(fmt):
    store = FaultyStore(MemoryStore())
    z = cs.zeros((12, 12), chunks=(4, 4), dtype="i4", store=store, zarr_format=fmt)
    z[:] = np.arange(144).reshape(12, 12)
    bad = "1.2" if fmt == 2 else "c/1/2"
    store.fail_read(lambda k: k == bad, errno.EIO)
    for read in (lambda: z[:], lambda: z[5, 9], lambda: z.oindex[[5], [9]],
                 lambda: z.vindex[[5, 0], [9, 0]], lambda: z[4:8, 8:12]):
        with pytest.raises(OSError) as info:
            read()
        assert info.value.errno == errno.EIO
        assert bad in str(info.value)
    # other chunks still read
    np.testing.assert_array_equal(z[:4], np.arange(48).reshape(4, 12))
    # a read-modify-write that meets the failing chunk changes nothing
    before = dict(store.inner)
    with pytest.raises(OSError):
        z[5, 9] = -1
    assert dict(store.inner) == before


@pytest.mark.parametrize("fmt", [2, 3])
def test_eio_on_write_leaves_earlier_chunks_intact(fmt):
    store = FaultyStore(MemoryStore())
    z = cs.zeros((12, 12), chunks=(4, 4), dtype="i4", store=store, zarr_format=fmt)
    z[:] = 1
    before = {k: v for k, v in store.inner.items() if is_chunk(k)}
    store.fail_write(is_chunk, errno.EIO)
    with pytest.raises(OSError) as info:
        z[:] = 2
    assert info.value.errno == errno.EIO
    # nothing torn: every chunk holds either its old bytes or a whole new chunk
    store.heal()
    after = {k: v for k, v in store.inner.items() if is_chunk(k)}
    assert after == before
    np.testing.assert_array_equal(z[:], 1)
    # a partial failure: what landed is whole, the rest is the old data
    store.fail_write(is_chunk, errno.EIO, after=3)
    with pytest.raises(OSError):
        z[:] = 3
    store.heal()
    v = z[:]
    for i in range(3):
        for j in range(3):
            block = v[4 * i:4 * i + 4, 4 * j:4 * j + 4]
            assert (block == 1).all() or (block == 3).all()
    assert (v == 3).sum() == 3 * 16
