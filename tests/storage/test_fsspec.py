"""FSStore specifics: S3 (moto server) errors versus missing keys, batch reads, chained URLs."""

from __future__ import annotations

import errno
import os
import pickle
import socket
import time
import zipfile

import pytest

from chunkstore.errors import ReadOnlyError
from chunkstore.storage import FSStore, getitems


@pytest.fixture
def s3store(s3_server):
    s = FSStore(s3_server.url(), storage_options=s3_server.storage_options)
    yield s
    s.close()


def test_s3_layout_and_batch_reads(s3_server, s3store):
    import s3fs

    data = {f"arr/{i // 10}.{i % 10}": os.urandom(50 + i) for i in range(60)}
    s3store.setitems(data)
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_server.storage_options)
    root = s3store.root
    assert fs.cat_file(f"{root}/arr/3.4") == data["arr/3.4"]
    keys = list(data) + [f"arr/missing{i}" for i in range(10)]
    got = s3store.getitems(keys)
    assert got == data
    assert getitems(s3store, ["arr/0.0", "nope"]) == {"arr/0.0": data["arr/0.0"]}
    assert len(s3store.listdir("arr")) == 60
    # keys written by somebody else are seen by listings (the listing cache is invalidated)
    fs.pipe_file(f"{root}/arr/extra", b"x")
    assert "extra" in s3store.listdir("arr")
    assert "arr/extra" in set(s3store)


def test_s3_keys_written_elsewhere_after_a_listing_are_found(s3_server, s3store):
    # s3fs answers info() from its directory cache: after a listing, a key another process
    # wrote was "not in" the store, and deleting it raised KeyError (the remote model test)
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_server.storage_options)
    s3store["arr/0"] = b"a"
    assert s3store.listdir("arr") == ["0"]  # (fills the directory cache)
    fs.pipe_file(f"{s3store.root}/arr/1", b"b")
    assert "arr/1" in s3store
    del s3store["arr/1"]
    assert "arr/1" not in s3store and s3store.listdir("arr") == ["0"]


def test_s3_pickle(s3_server, s3store):
    s3store["k"] = b"v"
    s2 = pickle.loads(pickle.dumps(s3store))
    assert s2["k"] == b"v"
    assert repr(s2) == repr(s3store) and repr(s2).startswith("FSStore('s3://")


def test_s3_403_is_not_missing(s3_server, s3store):
    """With authentication switched on in the server, our dummy credentials get HTTP 403:
    that must surface as PermissionError from every read path, never as a missing key."""
    s3store.setitems({"a/0": b"0", "a/1": b"1"})
    s3_server.set_auth(True)
    try:
        with pytest.raises(PermissionError):
            s3store["a/0"]
        with pytest.raises(PermissionError):
            s3store["a/never-written"]  # S3 answers 403 for absent keys too, here
        with pytest.raises(PermissionError):
            s3store.getitems(["a/0", "a/1"])
        with pytest.raises(PermissionError):
            getitems(s3store, ["a/1", "a/missing"])
        with pytest.raises(PermissionError):
            s3store.get_partial("a/0", [(0, 1)])
        with pytest.raises(PermissionError):
            "a/0" in s3store
        with pytest.raises(PermissionError):
            s3store.listdir("a")
        with pytest.raises(PermissionError):
            s3store["a/2"] = b"2"
    finally:
        s3_server.set_auth(False)
    assert s3store.getitems(["a/0", "a/1", "a/missing"]) == {"a/0": b"0", "a/1": b"1"}


def test_s3_unreachable_endpoint_is_not_missing(s3_server):
    # a port nobody listens on: connection refused must propagate
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    opts = dict(s3_server.storage_options)
    opts["client_kwargs"] = {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"}
    opts["skip_instance_cache"] = True
    s = FSStore(f"s3://{s3_server.bucket}/x", storage_options=opts)
    s.fs.retries = 1  # s3fs retries with back-off; keep the test fast
    from chunkstore import config
    config.set(io_retries=0)  # (and none of ours on top: this is about the error, not retries)
    try:
        t = time.monotonic()
        with pytest.raises(Exception) as ei:
            s["k"]
        assert not isinstance(ei.value, KeyError)
        with pytest.raises(Exception) as ei:
            s.getitems(["k", "j"])
        assert not isinstance(ei.value, KeyError)
        assert time.monotonic() - t < 60  # an error, not minutes of retries
    finally:
        config.set(io_retries=None)


def test_local_eio_is_not_missing(tmp_path):
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("needs /proc/self/mem")
    s = FSStore(f"file://{tmp_path}")
    s["ok"] = b"1"
    os.symlink("/proc/self/mem", tmp_path / "broken")  # reading it fails with EIO
    # (fsspec's local reader seeks first, which fails with EINVAL; plain reads give EIO)
    with pytest.raises(OSError) as ei:
        s["broken"]
    assert ei.value.errno in (errno.EIO, errno.EINVAL) and not isinstance(ei.value, KeyError)
    with pytest.raises(OSError) as ei:
        s.getitems(["ok", "broken", "missing"])
    assert ei.value.errno in (errno.EIO, errno.EINVAL)
    assert s.getitems(["ok", "missing"]) == {"ok": b"1"}


def test_memory_errors_and_missing_exceptions():
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    class Flaky(MemoryFileSystem):
        protocol = "flakymem"

        def cat_file(self, path, start=None, end=None, **kwargs):
            if "bad" in path:
                raise TimeoutError("network timeout")
            return super().cat_file(path, start=start, end=end, **kwargs)

    fsspec.register_implementation("flakymem", Flaky, clobber=True)
    s = FSStore("flakymem://errs")
    s.setitems({"good": b"1", "bad": b"2"})
    with pytest.raises(TimeoutError):
        s["bad"]
    with pytest.raises(TimeoutError):
        s.getitems(["good", "bad", "missing"])
    assert s.getitems(["good", "missing"]) == {"good": b"1"}
    # a store may be told that some other exception also means "absent"
    s2 = FSStore("flakymem://errs", missing_exceptions=(FileNotFoundError, TimeoutError))
    assert s2.getitems(["good", "bad"]) == {"good": b"1"}
    with pytest.raises(KeyError):
        s2["bad"]
    s.rmdir()


def test_chained_zip_url_read_only(tmp_path):
    zp = tmp_path / "a.zip"
    with zipfile.ZipFile(zp, "w") as zf:
        zf.writestr(".zgroup", b'{"zarr_format": 2}')
        zf.writestr("x/.zarray", b"{}")
        zf.writestr("x/0.0", b"\x00" * 16)
    s = FSStore(f"zip::file://{zp}", mode="r")
    assert s[".zgroup"] == b'{"zarr_format": 2}'
    assert sorted(s) == [".zgroup", "x/.zarray", "x/0.0"]
    assert s.listdir() == [".zgroup", "x"]
    assert s.listdir("x") == [".zarray", "0.0"]
    assert s.getitems(["x/0.0", "x/1.0"]) == {"x/0.0": b"\x00" * 16}
    with pytest.raises(KeyError):
        s["x/1.0"]
    with pytest.raises(ReadOnlyError):
        s["y"] = b"1"


def test_local_writes_are_atomic_and_prune(tmp_path):
    s = FSStore(str(tmp_path / "r"))  # a plain path works too
    s["a/b/c"] = b"1"
    s["a/b/c"] = b"2"
    names = [n for _, _, fs in os.walk(tmp_path) for n in fs]
    assert names == ["c"]
    (tmp_path / "r" / "a" / ".c.0123456789abcdef0123456789abcdef.partial").write_bytes(b"x")
    assert sorted(s) == ["a/b/c"]
    assert s.listdir("a") == ["b"]
    os.unlink(tmp_path / "r" / "a" / ".c.0123456789abcdef0123456789abcdef.partial")
    del s["a/b/c"]
    assert os.listdir(tmp_path / "r") == []
    assert list(FSStore(str(tmp_path / "missing"), mode="r")) == []
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("other", ["thread", "skip_instance_cache", "fs"])
def test_memory_stores_made_apart_share_their_locations_locks(other):
    """Two handles of one array on fsspec's memory filesystem, each on its own FSStore of
    one URL: one made on another thread (as a thread pool's worker opening the array), with
    skip_instance_cache, or on a filesystem object given. A write of element 1 waits for a
    write of element 0 of the same chunk that is between its read and its store. The
    location was the filesystem object, equal by fsspec's token, which holds the thread that
    made it (and every option): the handles took separate in-process locks, the second
    write went through and the first then stored element 1's old value ([1, 0])."""
    import threading
    import uuid

    import fsspec
    import numpy as np

    import chunkstore as cs
    from chunkstore.sync.synchronizers import handle_locks
    from faults import gated_store, is_chunk, second_write_waits

    url = f"memory://locks-{uuid.uuid4().hex}"
    cs.create_array(FSStore(url), shape=(16,), chunks=(8,), dtype="i4", fill_value=0,
                    zarr_format=2)
    held = gated_store(FSStore, is_chunk)(url)
    if other == "thread":
        made: list = []
        t = threading.Thread(target=lambda: made.append(FSStore(url)))
        t.start()
        t.join()
        store = made[0]
    elif other == "fs":
        store = FSStore(url.split("://")[1],
                        fs=fsspec.filesystem("memory", skip_instance_cache=True))
    else:
        store = FSStore(url, storage_options={"skip_instance_cache": True})
    try:
        a, b = cs.open_array(held, mode="r+"), cs.open_array(store, mode="r+")
        waited = second_write_waits(held, a, b)
        np.testing.assert_array_equal(cs.open_array(FSStore(url), mode="r")[:2], [1, 2])
        assert waited and handle_locks(held, "") is handle_locks(store, "")
    finally:
        FSStore(url).rmdir()


def test_s3_deletes_in_a_missing_bucket_name_it_whatever_the_keys(s3_server):
    """A key with a glob character is deleted on its own (fsspec's bulk rm would expand
    it), and its delete in a missing bucket was silently ignored; it raises as the bulk
    delete does."""
    from chunkstore.storage.object_store import NoSuchBucketError
    s = FSStore("s3://no-such-bucket-here/r", storage_options=s3_server.storage_options)
    try:
        for keys in (["plain/0"], ["glob*/0"], ["a/0", "b[1]/0"]):
            with pytest.raises(NoSuchBucketError, match="does not exist"):
                s.delitems(keys)
    finally:
        s.close()
