"""Stores under faults (issue 16): a full disk, I/O errors, symlinks, killed flushes.

Every I/O failure surfaces as an OSError (StoreError for database stores) keeping its errno,
names the store or key, and leaves what was stored before intact."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import StoreError
from chunkstore.storage.memory import MemoryStore
from faults import FaultyStore, is_chunk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
