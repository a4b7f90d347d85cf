"""FSStore (s3fs, HTTP) and ObjectStore (obstore, what ``s3://`` URLs open) on remote stores: requests per operation (counted by the server), requests in
flight at once, retries of transient errors, and errors that must never read as missing.

S3 is moto's server app on loopback behind a small WSGI wrapper that records every request
and can answer some with an error or hold them; HTTP is a local read-only file server over a
directory store."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
import time
import uuid

import numpy as np
import pytest

import chunkstore as cs
from chunkstore import config
from chunkstore.hierarchy.convenience import CopyError
from chunkstore.errors import ReadOnlyError
from chunkstore.storage import DirectoryStore, FSStore, ObjectStore, normalize_store
from faults import serving, stop_server

pytest.importorskip("s3fs")
pytest.importorskip("moto")

BUCKET = "requests-test"


class Recorder:
    """WSGI middleware: logs (method, path) of every request, injects faults, and tracks
    how many requests are being answered at once."""

    def __init__(self, app):
        self.app = app
        self.log: list[tuple[str, str]] = []
        self.faults: list[dict] = []
        self.hold = 0.0  # seconds every GET of a chunk key is held (to see concurrency)
        self.active = self.max_active = 0
        self.lock = threading.Lock()

    def reset(self):
        with self.lock:
            self.log.clear()
            self.faults.clear()
            self.hold = 0.0
            self.active = self.max_active = 0

    def requests(self, method=None):
        with self.lock:
            return [(m, p) for m, p in self.log if method is None or m == method]

    def fail(self, method, suffix, status=500, times=1, code="InternalError", sleep=0.0,
             headers=()):
        self.faults.append(dict(method=method, suffix=suffix, status=status, left=times,
                                code=code, sleep=sleep, headers=list(headers)))

    def __call__(self, environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        with self.lock:
            if not path.startswith("/moto-api"):
                self.log.append((method, path))
            fault = next((f for f in self.faults if f["left"] > 0 and f["method"] == method
                          and path.endswith(f["suffix"])), None)
            if fault is not None:
                fault["left"] -= 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if fault is not None:
                if fault["sleep"]:
                    time.sleep(fault["sleep"])
                if fault["status"]:
                    body = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{fault['code']}"
                            f"</Code><Message>injected</Message></Error>").encode()
                    start_response(f"{fault['status']} Injected", [
                        ("Content-Type", "application/xml"),
                        ("Content-Length", str(len(body))), *fault["headers"]])
                    return [body]
            if self.hold and method == "GET" and not path.rsplit("/", 1)[-1].startswith("."):
                time.sleep(self.hold)  # a chunk, not metadata
            return self.app(environ, start_response)
        finally:
            with self.lock:
                self.active -= 1


@pytest.fixture(scope="module")
def s3():
    from moto.moto_server.werkzeug_app import (DomainDispatcherApplication,
                                                MotoRequestHandler, create_backend_app)
    from werkzeug.serving import make_server

    rec = Recorder(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, rec, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    import boto3

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                 region_name="us-east-1").create_bucket(Bucket=BUCKET)
    rec.endpoint = endpoint
    yield rec
    stop_server(server)
    thread.join(5)


def options(endpoint, **config_kwargs):
    return {"key": "k", "secret": "s", "skip_instance_cache": True,
            "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
            # one attempt per call in botocore, so that the requests counted are ours
            "config_kwargs": {"retries": {"max_attempts": 1, "mode": "standard"},
                              **config_kwargs}}


@pytest.fixture
def url(s3):
    s3.reset()
    return f"s3://{BUCKET}/{uuid.uuid4().hex}"


CLIENTS = pytest.mark.parametrize("client", ["obstore", "s3fs"])


def store(s3, url, mode="a", client="obstore", **kw):
    """A store on the test server as the top-level functions open ``s3://`` URLs (obstore's
    client, s3fs's options translated), or *client* "s3fs": an FSStore."""
    so = options(s3.endpoint, **kw)
    if client == "s3fs":
        return FSStore(url, mode=mode, storage_options=so)
    st = normalize_store(url, mode=mode, storage_options=so)
    assert isinstance(st, ObjectStore)
    return st


def make_array(s3, url, shape=(64, 64), chunks=(8, 8), missing=()):
    data = np.arange(np.prod(shape), dtype="i4").reshape(shape)
    z = cs.open_array(store(s3, url), mode="w", shape=shape, chunks=chunks, dtype="i4")
    z[...] = data
    st = store(s3, url)
    for k in missing:
        del st[k]
        data[tuple(slice(int(i) * c, (int(i) + 1) * c)
                   for i, c in zip(k.split("."), chunks))] = 0
    s3.reset()
    return data


# ---------------------------------------------------------------------- requests per operation
@CLIENTS
def test_array_open_and_chunk_reads_are_one_request_each(s3, url, client):
    data = make_array(s3, url, missing=["3.4"])
    st = store(s3, url, client=client)
    # Without zarr_format, open reads both formats' documents in one round trip (where both
    # lie, the v3 one is used with zarr-python 3's warning): both GETs held, they overlap
    s3.fail("GET", "/zarr.json", status=0, sleep=0.3)
    s3.fail("GET", "/.zarray", status=0, sleep=0.3)
    z = cs.open_array(st, mode="r")
    assert sorted(s3.requests()) == [("GET", url[4:] + "/.zarray"),
                                     ("GET", url[4:] + "/zarr.json")]
    assert s3.max_active == 2
    s3.reset()
    assert cs.open_array(st, mode="r", zarr_format=2).zarr_format == 2  # the format known
    assert s3.requests() == [("GET", url[4:] + "/.zarray")]
    s3.reset()
    assert z[9, 9] == data[9, 9]
    assert s3.requests() == [("GET", url[4:] + "/1.1")]
    s3.reset()
    np.testing.assert_array_equal(z[...], data)
    reqs = s3.requests()
    # 64 chunks: one GET each (the missing one is a single 404, read as the fill value)
    assert len(reqs) == 64 and {m for m, _ in reqs} == {"GET"}
    assert len({p for _, p in reqs}) == 64
    s3.reset()
    np.testing.assert_array_equal(z[8:24, 8:24], data[8:24, 8:24])
    assert len(s3.requests("GET")) == 4 and len(s3.requests()) == 4
    s3.reset()
    z.attrs.asdict()  # attributes are read when asked for, not at open
    assert s3.requests() == [("GET", url[4:] + "/.zattrs")]
    assert isinstance(st, FSStore if client == "s3fs" else ObjectStore)


def test_open_autodetect_and_consolidated_are_one_request(s3, url):
    make_array(s3, url)
    s3.fail("GET", "/zarr.json", status=0, sleep=0.3)  # (both held: they overlap)
    s3.fail("GET", "/.zarray", status=0, sleep=0.3)
    assert isinstance(cs.open(store(s3, url), mode="r"), cs.Array)
    # both formats' documents, in one round trip
    assert sorted(p for _, p in s3.requests("GET")) == [url[4:] + "/.zarray",
                                                        url[4:] + "/zarr.json"]
    assert len(s3.requests()) == 2 and s3.max_active == 2
    s3.reset()
    g = cs.open_group(store(s3, url + "g"), mode="w")
    for i in range(5):
        g.zeros(f"a{i}", shape=(10,), chunks=(5,), dtype="f8")
    cs.consolidate_metadata(store(s3, url + "g"))
    s3.reset()
    g = cs.open_consolidated(store(s3, url + "g"), mode="r+")
    names = sorted(n for n, _ in g.arrays())
    assert names == [f"a{i}" for i in range(5)]
    assert [a.shape for _, a in g.arrays()] == [(10,)] * 5
    assert s3.requests() == [("GET", url[4:] + "g/.zmetadata")]
    s3.reset()
    a = g["a1"]
    a[...] = np.arange(10.0)  # chunk writes and reads pass through to the store
    np.testing.assert_array_equal(a[...], np.arange(10.0))
    # (and the first write reads the array's stored document: the snapshot may be older)
    assert sorted(s3.requests()) == sorted([("GET", url[4:] + "g/a1/.zarray")] + [
        (m, url[4:] + f"g/a1/{i}") for m in ("GET", "PUT") for i in (0, 1)])
    s3.reset()
    a[...] = np.arange(10.0)
    assert sorted(m for m, _ in s3.requests()) == ["PUT", "PUT"]  # (checked once)


@CLIENTS
def test_both_formats_at_one_path_open_the_v3_array_with_a_warning(s3, url, client):
    # the batch of both documents tells the v3 array from the v2 one beside it, with no
    # further request, and zarr-python 3's warning names both
    from chunkstore.errors import ZarrUserWarning
    st = store(s3, url, client=client)
    cs.create_array(st, shape=(4,), chunks=(2,), dtype="i4", fill_value=3, zarr_format=3)
    cs.open_array(store(s3, url + "v2"), mode="w", shape=(4,), chunks=(2,), dtype="i4",
                  fill_value=2)
    st[".zarray"] = store(s3, url + "v2")[".zarray"]
    s3.reset()
    with pytest.warns(ZarrUserWarning, match=r"zarr.json \(Zarr format 3\) and \.zarray"):
        z = cs.open_array(store(s3, url, client=client), mode="r")
    assert z.zarr_format == 3 and z[...].tolist() == [3, 3, 3, 3]
    assert len(s3.requests("GET")) == 2 + 2 and len(s3.requests("HEAD")) == 0  # +2 chunks
    assert cs.open_array(store(s3, url, client=client), mode="r",
                         zarr_format=2)[...].tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("fmt", [2, 3])
def test_group_open_is_one_round_trip_in_either_format(s3, url, fmt):
    # the documents that tell a node's kind and format are fetched at once: opening a group
    # or a member costs one round trip, not one per probe
    g = cs.open_group(store(s3, url), mode="w", zarr_format=fmt)
    g.zeros("a", shape=(4,), chunks=(2,), dtype="i4")
    s3.reset()
    for name in ("zarr.json", ".zarray", ".zgroup"):  # each held: at once, they overlap
        s3.fail("GET", "/" + name, status=0, sleep=0.3)
    g = cs.open_group(store(s3, url), mode="r")
    # the three documents at once, then the group's own document (parsed: validated)
    assert s3.max_active == 3 and {m for m, _ in s3.requests()} == {"GET"}
    assert len(s3.requests()) == 4
    assert g.metadata.zarr_format == fmt
    s3.reset()
    for name in ("zarr.json", ".zarray", ".zgroup"):
        s3.fail("GET", "a/" + name, status=0, sleep=0.3)
    assert g["a"].zarr_format == fmt  # (a member: the group's format preferred, one batch)
    assert s3.max_active == 3


@CLIENTS
def test_writes_are_one_put_per_chunk(s3, url, client):
    z = cs.open_array(store(s3, url, client=client), mode="w", shape=(64, 64), chunks=(8, 8),
                      dtype="i4")
    s3.reset()
    z[...] = 1
    reqs = s3.requests()
    assert len(reqs) == 64 and {m for m, _ in reqs} == {"PUT"}
    s3.reset()
    z[0:8, 0:8] = 2  # a whole chunk: no read first
    assert [m for m, _ in s3.requests()] == ["PUT"]
    np.testing.assert_array_equal(z[0:9, 0:9], np.pad(np.full((8, 8), 2), ((0, 1), (0, 1)),
                                                      constant_values=1))


@CLIENTS
def test_sharded_read_has_no_head_or_listing(s3, url, client):
    st = store(s3, url, client=client)
    z = cs.create_array(st, shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="i4")
    data = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    z[...] = data
    s3.reset()
    z2 = cs.open_array(store(s3, url, client=client), mode="r", zarr_format=3)
    assert s3.requests() == [("GET", url[4:] + "/zarr.json")]
    s3.reset()
    cs.open_array(store(s3, url, client=client), mode="r")  # both formats' keys at once
    assert sorted(p for _, p in s3.requests()) == [url[4:] + "/.zarray", url[4:] + "/zarr.json"]
    s3.reset()
    assert z2[40, 40] == data[40, 40]
    reqs = s3.requests()
    # obstore: the index, then the chunk, If-Match the index's ETag (one version of the
    # shard); through s3fs, which cannot send If-Match, the whole shard in one GET
    assert {m for m, _ in reqs} == {"GET"} and len(reqs) == (1 if client == "s3fs" else 2)


# ---------------------------------------------------------------------- concurrency
def test_chunk_requests_are_in_flight_at_once_up_to_the_limit(s3, url):
    data = make_array(s3, url, shape=(32, 32), chunks=(8, 8))
    z = cs.open_array(store(s3, url), mode="r")
    s3.reset()
    s3.hold = 0.2
    np.testing.assert_array_equal(z[...], data)
    assert s3.max_active >= 12  # 16 chunks; the pool has 2 threads
    try:
        config.set(io_concurrency=3)
        s3.reset()
        s3.hold = 0.05
        np.testing.assert_array_equal(z[...], data)
        assert 2 <= s3.max_active <= 3
    finally:
        config.set(io_concurrency=None)
    assert config.get("io_concurrency") == 64


def test_config_validation():
    with pytest.raises(ValueError, match="io_concurrency"):
        config.set(io_concurrency=0)
    with pytest.raises(ValueError, match="io_retries"):
        config.set(io_retries=-1)
    threads = config.get("threads")
    config.set(io_retries=2)
    try:
        assert config.get("io_retries") == 2 and config.get("threads") == threads
    finally:
        config.set(io_retries=None)
    assert config.get("io_retries") == 5


# ---------------------------------------------------------------------- errors
@CLIENTS
def test_500_then_success_is_retried(s3, url, client):
    data = make_array(s3, url)
    z = cs.open_array(store(s3, url, client=client), mode="r")
    s3.reset()
    s3.fail("GET", "/2.3", status=500, times=2)
    s3.fail("GET", "/5.5", status=503, times=1, code="SlowDown")
    np.testing.assert_array_equal(z[...], data)
    gets = [p for _, p in s3.requests("GET")]
    assert gets.count(url[4:] + "/2.3") == 3 and gets.count(url[4:] + "/5.5") == 2
    s3.reset()
    s3.fail("PUT", "/1.1", status=500, times=1)
    w = cs.open_array(store(s3, url, client=client), mode="r+")
    w[8:16, 8:16] = 7
    assert [m for m, _ in s3.requests()].count("PUT") == 2
    assert (z[8:16, 8:16] == 7).all()


def test_persistent_500_raises_naming_the_key(s3, url):
    make_array(s3, url)
    z = cs.open_array(store(s3, url), mode="r")
    try:
        # the S3 client's own attempts per call (botocore may retry a 500 itself)
        config.set(io_retries=0)
        s3.reset()
        s3.fail("GET", "/4.4", status=500, times=100)
        with pytest.raises(OSError, match="4.4"):
            store(s3, url)["4.4"]
        per_call = len(s3.requests())
        config.set(io_retries=2)
        s3.reset()
        s3.fail("GET", "/4.4", status=500, times=100)
        with pytest.raises(OSError, match="4.4") as info:
            z[...]
        assert not isinstance(info.value, (FileNotFoundError, KeyError))
        assert [p for _, p in s3.requests("GET")].count(url[4:] + "/4.4") == 3 * per_call
        s3.reset()
        s3.fail("PUT", "/0.0", status=500, times=100)
        w = cs.open_array(store(s3, url), mode="r+")
        with pytest.raises(OSError, match="0.0"):
            w[0:8, 0:8] = 3
    finally:
        config.set(io_retries=None)
        s3.faults.clear()


@CLIENTS
def test_403_raises_naming_the_key(s3, url, client):
    make_array(s3, url)
    z = cs.open_array(store(s3, url, client=client), mode="r")
    s3.reset()
    s3.fail("GET", "/6.6", status=403, times=100, code="AccessDenied")
    with pytest.raises(PermissionError, match="6.6"):
        z[...]
    assert [p for _, p in s3.requests("GET")].count(url[4:] + "/6.6") == 1  # no retries
    with pytest.raises(PermissionError, match="6.6"):
        store(s3, url, client=client)["6.6"]


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_a_redirect_to_another_host_carries_no_credentials(s3, url, method):
    """A 307 (S3's TemporaryRedirect) to another host: obstore's client follows it (as s3fs
    does, and HTTP allows), but the request's signature does not go with it. (The session
    token header does, in obstore 0.x: README, "S3".)"""
    seen = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            seen.append((self.command, {k.lower() for k in self.headers}))
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            self.send_response(200)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"elsewhere")

        do_GET = do_PUT = _answer

        def log_message(self, *args):
            pass

    with serving(Elsewhere) as port:
        st = normalize_store(url, storage_options={**options(s3.endpoint),
                                                   "token": "session-token"})
        st["k"] = b"here"
        s3.reset()
        location = f"http://127.0.0.1:{port}/{BUCKET}/k"
        s3.fail(method, "/k", status=307, code="TemporaryRedirect",
                headers=[("Location", location)])
        with contextlib.suppress(OSError):
            if method == "GET":
                st["k"]
            else:
                st["k"] = b"new"
        for _, headers in seen:
            assert "authorization" not in headers, headers


@CLIENTS
def test_timeout_is_retried_then_raises(s3, url, client):
    data = make_array(s3, url)
    st = store(s3, url, mode="r", client=client, read_timeout=0.2)
    if client == "s3fs":
        st.fs.retries = 1  # s3fs's own retries of timeouts (5 by default): ours are counted
    z = cs.open_array(st, mode="r")
    s3.reset()
    s3.fail("GET", "/7.7", status=0, times=2, sleep=0.5)  # slow answers, then a quick one
    np.testing.assert_array_equal(z[56:, 56:], data[56:, 56:])
    assert len(s3.requests()) == 3
    config.set(io_retries=1)
    try:
        s3.reset()
        s3.fail("GET", "/7.0", status=0, times=100, sleep=0.5)
        with pytest.raises(TimeoutError, match="7.0"):
            z[56:, :8]
        # two calls (io_retries=1); through s3fs each is two botocore attempts
        assert len(s3.requests()) == (4 if client == "s3fs" else 2)
    finally:
        config.set(io_retries=None)
        s3.faults.clear()


# ---------------------------------------------------------------------- http://
class _Handler(http.server.SimpleHTTPRequestHandler):
    log = None
    fail_once: set = set()

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.log.append(self.path)
        if self.path in self.fail_once:
            self.fail_once.discard(self.path)
            self.send_error(500)
            return
        super().do_GET()


@pytest.fixture
def http_store(tmp_path):
    log = []
    handler = type("H", (_Handler,), {"log": log, "fail_once": set()})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path, log, handler
    stop_server(server)
    thread.join(5)


def test_http_read_only_store(http_store):
    base, root, log, handler = http_store
    data = np.arange(40 * 40, dtype="f8").reshape(40, 40)
    z = cs.open_array(DirectoryStore(root / "a.zarr"), mode="w", shape=data.shape,
                      chunks=(10, 10), dtype="f8", fill_value=-1)
    z[...] = data
    del DirectoryStore(root / "a.zarr")["2.2"]
    data[20:30, 20:30] = -1
    st = FSStore(f"{base}/a.zarr", mode="r")
    r = cs.open_array(st, mode="r")
    assert sorted(log) == ["/a.zarr/.zarray", "/a.zarr/zarr.json"]  # (one batch)
    log.clear()
    handler.fail_once.add("/a.zarr/1.3")
    np.testing.assert_array_equal(r[...], data)
    assert len(log) == 17 and log.count("/a.zarr/1.3") == 2  # 16 chunks + one retry
    with pytest.raises(ReadOnlyError):
        st["x"] = b"1"


def test_copy_store_to_and_from_s3_without_per_key_checks(s3, url, tmp_path):
    src = DirectoryStore(tmp_path / "src")
    z = cs.open_array(src, mode="w", shape=(64, 64), chunks=(8, 8), dtype="i4")
    z[...] = np.arange(64 * 64).reshape(64, 64)
    s3.reset()
    n, skipped, _ = cs.copy_store(src, store(s3, url))
    assert n == 65 and skipped == 0
    methods = [m for m, _ in s3.requests()]
    # one PUT per key, plus the destination's listing (s3fs: up to 3 requests when empty)
    assert methods.count("PUT") == 65 and len(methods) <= 68
    s3.reset()
    back = DirectoryStore(tmp_path / "back")
    assert cs.copy_store(store(s3, url), back)[0] == 65
    methods = [m for m, _ in s3.requests()]
    assert methods.count("GET") >= 65 and len(methods) <= 68  # the listing, then 65 GETs
    np.testing.assert_array_equal(cs.open_array(back, mode="r")[...], z[...])
    with pytest.raises(CopyError):
        cs.copy_store(src, store(s3, url))  # every key exists: raise, found by the listing


def test_bounded_read_ahead_and_write_behind(s3, url, monkeypatch):
    """With a small window (a few chunks ahead, a few KiB of uploads in flight) every chunk
    is still requested exactly once and the data round-trips."""
    from chunkstore.storage import pipelining

    monkeypatch.setattr(pipelining, "_AHEAD_BYTES", 1000)
    data = make_array(s3, url)
    z = cs.open_array(store(s3, url), mode="r+")
    config.set(io_concurrency=2)  # 4 chunks ahead
    s3.reset()
    try:
        np.testing.assert_array_equal(z[...], data)
        paths = [p for _, p in s3.requests()]
        assert len(paths) == 64 and len(set(paths)) == 64
        s3.reset()
        z[...] = data + 1
        assert len(s3.requests("PUT")) == 64 and len(s3.requests()) == 64
    finally:
        config.set(io_concurrency=None)
    np.testing.assert_array_equal(z[...], data + 1)


def test_split_locked_write_waits_for_its_puts_and_raises_their_errors(s3, url):
    # A region-locked write covering many chunks whole and some in part (Array._split_locks)
    # runs its batches in several steps; its write-behind PUTs must all have landed, and a
    # failed one must raise, before the write returns (and its locks are released).
    sync = cs.ThreadSynchronizer()
    z = cs.open_array(store(s3, url), mode="w", shape=(80, 80), chunks=(8, 8), dtype="i4",
                      synchronizer=sync)
    z[...] = 1
    data = np.ones((80, 80), dtype="i4")
    data[4:76, 4:76] = np.arange(72 * 72, dtype="i4").reshape(72, 72)
    s3.reset()
    s3.fail("PUT", "/4.4", status=403, code="AccessDenied", times=100)
    try:
        with pytest.raises(OSError, match="4.4"):
            z[4:76, 4:76] = data[4:76, 4:76]
    finally:
        s3.faults.clear()
    z[4:76, 4:76] = data[4:76, 4:76]
    np.testing.assert_array_equal(cs.open_array(store(s3, url), mode="r")[...], data)


def test_split_locked_write_reads_partial_chunks_only_under_their_locks(s3, url):
    # Another process may update a partial chunk (disjoint elements) until this write holds
    # that chunk's lock: the read-modify-write must read it after taking the lock, not use
    # bytes prefetched when the write began. The other process's write is simulated as it
    # would land: just before the chunk's lock is granted, through a store of no location
    # (a wrapper: it shares none of this process's in-process locks, as another process;
    # a handle of this process on the URL would wait for the write's locks, for ever).
    from faults import FaultyStore

    sync = cs.ThreadSynchronizer()
    z = cs.open_array(store(s3, url), mode="w", shape=(80, 80), chunks=(8, 8), dtype="i4",
                      synchronizer=sync)
    z[...] = 0
    other = cs.open_array(FaultyStore(store(s3, url)), mode="r+")
    split_locks = sync.split_locks

    def patched(*args):
        held, window = split_locks(*args)

        @contextlib.contextmanager
        def racing_window(coords):
            if any(tuple(c) == (9, 9) for c in coords.tolist()):
                # let any GET of the chunk already in flight finish first
                deadline = time.monotonic() + 1
                while time.monotonic() < deadline and not (
                        s3.active == 0 and any(p.endswith("/9.9") for _, p in
                                               s3.requests("GET"))):
                    time.sleep(0.01)
                other[79, 79] = 7     # outside the write's box, in its partial chunk 9.9
            with window(coords):
                yield
        return held, racing_window

    sync.split_locks = patched
    s3.reset()
    z[4:76, 4:76] = 1
    expected = np.zeros((80, 80), dtype="i4")
    expected[4:76, 4:76] = 1
    expected[79, 79] = 7
    np.testing.assert_array_equal(cs.open_array(store(s3, url), mode="r")[...], expected)


def test_failed_append_rolls_back_after_its_puts_settled(s3, url):
    # The append's chunks go out write-behind; one PUT failing must raise, and the rollback
    # (old shape, boundary chunk's old bytes, new chunks deleted) must come after every PUT
    # of the append settled, so that none lands after it.
    sync = cs.ThreadSynchronizer()
    z = cs.open_array(store(s3, url), mode="w", shape=(20, 8), chunks=(8, 8), dtype="i4",
                      synchronizer=sync)
    data = np.arange(160, dtype="i4").reshape(20, 8)
    z[...] = data
    s3.reset()
    s3.fail("PUT", "/4.0", status=403, code="AccessDenied", times=100)
    try:
        with pytest.raises(OSError, match="4.0"):
            z.append(np.full((20, 8), 5, dtype="i4"))
    finally:
        s3.faults.clear()
    r = cs.open_array(store(s3, url), mode="r")
    assert r.shape == (20, 8)
    np.testing.assert_array_equal(r[...], data)
    assert sorted(k for k in store(s3, url) if not k.startswith(".")) == ["0.0", "1.0", "2.0"]


def test_write_behind_reports_a_cancelled_put_as_an_error():
    # A PUT whose future was cancelled never landed: flush raises naming its key.
    import concurrent.futures

    from chunkstore.storage.pipelining import WriteBehind

    class Batch:
        def __init__(self, n):
            self.futures = [concurrent.futures.Future() for _ in range(n)]

    class Store:
        def start_put(self, keys, values):
            b = Batch(len(keys))
            b.futures[0].set_result(None)
            b.futures[1].cancel()
            return b

        def put_error(self, key, exc):
            return OSError(f"{key!r}: {exc!r}")

    wb = WriteBehind(Store())
    wb.setitems({"a": b"1", "b": b"2"})
    with pytest.raises(OSError, match="'b'"):
        wb.flush()


def test_overwriting_an_array_is_one_listing_and_one_bulk_delete(s3, url):
    make_array(s3, url, shape=(32, 32), chunks=(8, 8))  # 16 chunks + .zarray
    z = cs.open_array(store(s3, url), mode="w", shape=(8,), chunks=(4,), dtype="u1")
    methods = [m for m, _ in s3.requests()]
    # a listing (GET), one DeleteObjects POST, the new .zarray PUT: no HEAD and no DELETE
    # per key (the one HEAD and the other GETs are the opening's checks of the path)
    assert methods.count("POST") == 1 and "DELETE" not in methods
    assert methods.count("HEAD") <= 1 and methods.count("PUT") == 1 and len(methods) <= 6
    assert sorted(store(s3, url)) == [".zarray"] and z.shape == (8,)


# ---------------------------------------------------------------------- shard versions
def _shard_array(s3, url, old):
    z = cs.create_array(store(s3, url), shape=old.shape, chunks=(8,), shards=old.shape,
                        dtype="i4", compressors=[cs.codecs.ZstdCodec(level=1)])
    z[...] = old
    return z


def test_a_cached_shard_index_is_read_with_if_match(s3, url):
    """A handle's cached index goes with the shard's ETag: a shard rewritten behind its back
    (to the same size) answers its chunk GET with 412, and the index is read anew."""
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 2**30, 8).astype("i4")
    old = np.concatenate([np.full(8, 7, "i4"), noise])
    a = _shard_array(s3, url, old)
    np.testing.assert_array_equal(a[...], old)  # caches the index
    s3.reset()
    np.testing.assert_array_equal(a[...], old)
    assert len(s3.requests("GET")) == 1  # the cached index: the chunks only
    new = np.concatenate([noise, np.full(8, 7, "i4")])  # chunks swapped: the same size
    cs.open_array(store(s3, url), mode="r+")[...] = new
    s3.reset()
    np.testing.assert_array_equal(a[...], new)
    # the chunks (412 Precondition Failed), then the new index, then the chunks
    assert len(s3.requests("GET")) == 3


def test_a_shard_rewritten_between_its_index_and_chunks_is_read_again(s3, url, monkeypatch):
    from chunkstore.format.sharded_view import ShardedStoreView

    old = np.arange(32, dtype="i4")
    new = old[::-1].copy() * 3
    _shard_array(s3, url, old)
    r = cs.open_array(store(s3, url), mode="r")
    b = cs.open_array(store(s3, url), mode="r+")
    real, done = ShardedStoreView._index_of, []

    def index_of(self, skey, reader):
        index = real(self, skey, reader)
        if not done:
            done.append(1)
            b[...] = new
        return index

    monkeypatch.setattr(ShardedStoreView, "_index_of", index_of)
    s3.reset()
    np.testing.assert_array_equal(r[...], new)
    assert done
    assert len([p for m, p in s3.requests("GET") if p.endswith("/c/0")]) == 4


@CLIENTS
def test_a_missing_bucket_is_an_error_never_missing_keys(s3, client):
    """A bucket that does not exist, or is deleted under an open handle, raises
    NoSuchBucketError naming the store, through s3fs as through obstore: s3fs's
    FileNotFoundError read as a missing key gave "no array here", an empty listing and,
    for an open array, fill values."""
    import boto3

    from chunkstore.errors import NoSuchBucketError

    missing = f"s3://no-such-{uuid.uuid4().hex[:12]}/a"
    st = store(s3, missing, client=client)
    with pytest.raises(NoSuchBucketError, match="no-such-"):
        cs.open_array(st, mode="r")
    with pytest.raises(NoSuchBucketError):
        st[".zarray"]
    with pytest.raises(NoSuchBucketError):
        list(st)
    if client == "s3fs":  # (obstore's HEAD answers 404 without the code)
        with pytest.raises(NoSuchBucketError):
            ".zarray" in st
    bucket = f"gone-{uuid.uuid4().hex[:12]}"
    boto = boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id="k",
                        aws_secret_access_key="s", region_name="us-east-1")
    boto.create_bucket(Bucket=bucket)
    z = cs.open_array(store(s3, f"s3://{bucket}/a", client=client), mode="w", shape=(8,),
                      chunks=(4,), dtype="i4", fill_value=0)
    z[...] = np.arange(1, 9)
    reader = cs.open_array(store(s3, f"s3://{bucket}/a", client=client), mode="r")
    for obj in boto.list_objects_v2(Bucket=bucket).get("Contents", []):
        boto.delete_object(Bucket=bucket, Key=obj["Key"])
    boto.delete_bucket(Bucket=bucket)
    with pytest.raises(NoSuchBucketError, match=bucket):
        reader[...]


def test_http_store_answers_membership_and_refuses_writes_before_any_request(http_store):
    """Over http(s) an FSStore is read-only: `key in store` is answered (HTTP's info() took
    refresh= to aiohttp, whose error made every key missing), and writes, deletes and
    mode "w" raise ReadOnlyError naming the store before any PUT or DELETE is sent (a bare
    NotImplementedError from fsspec, or PUTs sent to the server)."""
    base, root, log, handler = http_store
    z = cs.open_array(DirectoryStore(root / "a.zarr"), mode="w", shape=(8,), chunks=(4,),
                      dtype="i4")
    z[...] = np.arange(8)
    st = FSStore(f"{base}/a.zarr")
    assert st.read_only
    assert ".zarray" in st and "0" in st and "5" not in st
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    for write in (lambda: st.__setitem__("0", b"x"), lambda: st.__delitem__("0"),
                  lambda: cs.open_array(FSStore(f"{base}/a.zarr"), mode="w", shape=(2,),
                                        dtype="i4"),
                  lambda: cs.open_group(f"{base}/g", mode="w")):
        with pytest.raises(ReadOnlyError, match="127.0.0.1"):
            write()
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    np.testing.assert_array_equal(cs.open_array(st, mode="r")[...], np.arange(8))


@CLIENTS
def test_failed_listings_and_bulk_deletes_name_what_and_the_store(s3, url, client):
    """A LIST or a bulk DELETE that fails raises an OSError (PermissionError for a 403)
    naming the listing or the keys and the store: obstore's own GenericError went out as it
    was, and s3fs's as "[Errno ...] injected"."""
    g = cs.open_group(store(s3, url, client=client), mode="w")
    z = g.create_array("x", shape=(8,), chunks=(2,), dtype="i4")
    z[...] = np.arange(8)
    for status, error in ((500, OSError), (403, PermissionError)):
        s3.reset()
        s3.fail("GET", "/" + BUCKET, status=status, times=100,
                code="AccessDenied" if status == 403 else "InternalError")
        with pytest.raises(error, match="listing .* in (ObjectStore|FSStore)"):
            list(g.keys())
    s3.reset()
    s3.fail("POST", "/" + BUCKET, status=500, times=100)
    with pytest.raises(OSError, match="deleting .* in (ObjectStore|FSStore)"):
        z.resize((2,))
    s3.reset()
    z.resize((2,))
    z.resize((8,))
    np.testing.assert_array_equal(z[...], [0, 1] + [0] * 6)


def test_http_get_partial_of_a_server_ignoring_range_reads_the_ranges(http_store):
    """Python's http.server ignores the Range header and answers with the whole object,
    which fsspec handed on as the range: every get_partial range read as all 40 bytes."""
    url, root, _, _ = http_store
    (root / "a.zarr").mkdir()
    value = bytes(range(40))
    (root / "a.zarr" / "k").write_bytes(value)
    st = FSStore(f"{url}/a.zarr", mode="r")
    for ranges in ([(0, 4)], [(10, 5)], [(-3, None)], [(38, None)], [(0, None)],
                   [(5, 100)], [(-50, None)], [(2, 3), (-4, None), (30, None)]):
        want = [value[o:] if n is None else value[o:o + n] for o, n in ranges]
        assert st.get_partial("k", ranges) == want, ranges


@CLIENTS
def test_a_failed_delete_names_the_key_and_the_store(s3, url, client):
    """s3fs's DELETE failing (HTTP 500) raised its bare OSError ("[Errno 121] ...") from a
    write that empties a shard, a shrinking resize and del store[key]; the data stays."""
    config.set(io_retries=0)
    try:
        st = store(s3, url, client=client)
        for op in (lambda a: a.__setitem__(slice(0, 4), 0), lambda a: a.resize((2,)),
                   lambda a: st.__delitem__("c/1")):
            a = cs.create_array(st, shape=(8,), chunks=(2,), shards=(4,), dtype="i4",
                                fill_value=0, overwrite=True)
            a[...] = np.arange(1, 9)
            s3.reset()
            s3.fail("DELETE", "", status=500, times=100)
            s3.fail("POST", "", status=500, times=100)  # (a bulk DeleteObjects)
            with pytest.raises(OSError, match=r"'c/[01]'.* in (FSStore|ObjectStore)"):
                op(a)
            s3.faults.clear()
            # (a failed shrink keeps its new shape, and its trim marker: grown again, the
            # elements past it read the fill value, never the old ones)
            b = cs.open_array(store(s3, url, client=client), mode="r+")
            n = b.shape[0]
            assert b[:].tolist() == list(range(1, n + 1))
            b.resize(8)
            assert b[:].tolist() == list(range(1, n + 1)) + [0] * (8 - n)
    finally:
        config.set(io_retries=None)
        s3.faults.clear()
