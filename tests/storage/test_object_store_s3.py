"""ObjectStore over obstore's S3 client, against moto on loopback (the request-counting server
of test_fsspec_requests): one request per chunk, every request of a selection in flight at
once, concurrent writes, bulk deletes, and errors that name the key and never read as
missing."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest

import chunkstore as cs
from chunkstore import config
from chunkstore.storage import ObjectStore

pytest.importorskip("obstore")
from obstore.store import S3Store  # noqa: E402

from . import test_fsspec_requests as _requests  # noqa: E402

BUCKET = _requests.BUCKET
s3 = _requests.s3  # the request-counting moto server (a module-scoped fixture)


@pytest.fixture
def prefix(s3):
    s3.reset()
    return uuid.uuid4().hex


def store(s3, prefix, read_only=False, retries=0):
    client = S3Store(BUCKET, prefix=prefix, endpoint=s3.endpoint, access_key_id="k",
                     secret_access_key="s", region="us-east-1",
                     client_options={"allow_http": True},
                     retry_config={"max_retries": retries, "retry_timeout": timedelta(seconds=5),
                                   "backoff": {"init_backoff": timedelta(milliseconds=10),
                                               "max_backoff": timedelta(milliseconds=50),
                                               "base": 2}})
    return ObjectStore(client, read_only=read_only)


def make_array(s3, prefix, shape=(32, 32), chunks=(8, 8)):
    data = np.arange(np.prod(shape), dtype="i4").reshape(shape)
    z = cs.open_array(store(s3, prefix), mode="w", shape=shape, chunks=chunks, dtype="i4")
    z[...] = data
    s3.reset()
    return data


def test_reads_are_one_get_per_chunk_all_in_flight(s3, prefix):
    data = make_array(s3, prefix)
    z = cs.open_array(store(s3, prefix, read_only=True), mode="r")
    # (no zarr_format: both formats' documents, in one batch)
    assert sorted(s3.requests()) == [("GET", f"/{BUCKET}/{prefix}/.zarray"),
                                     ("GET", f"/{BUCKET}/{prefix}/zarr.json")]
    s3.reset()
    s3.hold = 0.2
    np.testing.assert_array_equal(z[...], data)
    gets = s3.requests()
    assert len(gets) == 16 and {m for m, _ in gets} == {"GET"}
    assert s3.max_active >= 12  # 16 chunks at once, not a batch at a time
    try:
        config.set(io_concurrency=3)
        s3.reset()
        s3.hold = 0.05
        np.testing.assert_array_equal(z[...], data)
        assert 2 <= s3.max_active <= 3
    finally:
        config.set(io_concurrency=None)
        s3.reset()


def test_missing_chunk_is_one_404_read_as_fill(s3, prefix):
    data = make_array(s3, prefix)
    st = store(s3, prefix)
    del st["1.2"]
    data[8:16, 16:24] = 0
    s3.reset()
    z = cs.open_array(st, mode="r")
    np.testing.assert_array_equal(z[...], data)
    assert [p for _, p in s3.requests("GET")].count(f"/{BUCKET}/{prefix}/1.2") == 1


def test_writes_are_one_put_per_chunk_and_deletes_one_request(s3, prefix):
    data = make_array(s3, prefix)
    z = cs.open_array(store(s3, prefix), mode="r+")
    s3.reset()
    z[...] = data + 1
    assert [m for m, _ in s3.requests()] == ["PUT"] * 16
    np.testing.assert_array_equal(z[...], data + 1)
    st = store(s3, prefix)
    s3.reset()
    st.delitems([f"{i}.{j}" for i in range(4) for j in range(4)] + ["absent.key"])
    assert [m for m, _ in s3.requests()] == ["POST"]  # S3 DeleteObjects: one request
    assert sorted(st) == [".zarray"]


def test_errors_name_the_key_and_never_read_as_missing(s3, prefix):
    make_array(s3, prefix)
    z = cs.open_array(store(s3, prefix, read_only=True), mode="r")
    try:
        config.set(io_retries=0)
        s3.reset()
        s3.fail("GET", "/2.2", status=403, times=100, code="AccessDenied")
        with pytest.raises(OSError, match="2.2") as info:
            z[...]
        assert not isinstance(info.value, (FileNotFoundError, KeyError))
        s3.reset()
        s3.fail("PUT", "/0.0", status=403, times=100, code="AccessDenied")
        w = cs.open_array(store(s3, prefix), mode="r+")
        with pytest.raises(OSError, match="0.0"):
            w[...] = 5
    finally:
        config.set(io_retries=None)
        s3.faults.clear()


def test_a_500_then_success_is_retried_by_the_client(s3, prefix):
    # obstore retries transient errors itself (its retry_config): one more GET, no error
    data = make_array(s3, prefix)
    z = cs.open_array(store(s3, prefix, read_only=True, retries=2), mode="r")
    s3.reset()
    s3.fail("GET", "/3.1", status=503, times=1, code="SlowDown")
    np.testing.assert_array_equal(z[...], data)
    assert [p for _, p in s3.requests("GET")].count(f"/{BUCKET}/{prefix}/3.1") == 2


# ------------------------------------------------------------------ s3:// URLs (from_url)
def _so(s3, **extra):
    return {"key": "k", "secret": "s",
            "client_kwargs": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"},
            **extra}


def test_s3_urls_open_an_object_store_with_s3fs_options(s3, prefix):
    url = f"s3://{BUCKET}/{prefix}"
    z = cs.open_array(url, mode="w", shape=(20, 20), chunks=(5, 5), dtype="i2",
                      storage_options=_so(s3))
    assert isinstance(z.store, ObjectStore) and repr(z.store) == f"ObjectStore({url!r})"
    z[...] = np.arange(400, dtype="i2").reshape(20, 20)
    # the same bytes seen through s3fs (FSStore): a plain Zarr store
    fs = cs.open_array(cs.storage.FSStore(url, storage_options=_so(s3)), mode="r")
    np.testing.assert_array_equal(fs[...], np.arange(400).reshape(20, 20))
    ro = cs.open_array(url, mode="r", storage_options=_so(s3))
    assert ro.store.read_only
    with pytest.raises(cs.errors.ReadOnlyError):
        ro[0, 0] = 1


def test_an_object_store_from_a_url_pickles_by_its_url(s3, prefix):
    import pickle

    url = f"s3://{BUCKET}/{prefix}"
    z = cs.open_array(url, mode="w", shape=(4,), chunks=(2,), dtype="f8",
                      storage_options=_so(s3))
    z[...] = [1, 2, 3, 4]
    again = pickle.loads(pickle.dumps(z))
    assert repr(again.store) == repr(z.store) and list(again[...]) == [1, 2, 3, 4]


def test_s3fs_options_are_translated():
    from chunkstore.storage.object_store import s3_config

    kw = s3_config("s3://b/p", {
        "key": "K", "secret": "S", "token": "T", "endpoint_url": "http://h:9000",
        "client_kwargs": {"region_name": "eu-west-1", "verify": False},
        "config_kwargs": {"retries": {"max_attempts": 3, "mode": "standard"},
                          "connect_timeout": 2, "read_timeout": 7,
                          "s3": {"addressing_style": "virtual"},
                          "max_pool_connections": 50},
        "requester_pays": True, "skip_instance_cache": True})
    assert kw["config"] == {"access_key_id": "K", "secret_access_key": "S",
                            "session_token": "T", "endpoint": "http://h:9000",
                            "region": "eu-west-1", "request_payer": True,
                            "virtual_hosted_style_request": True}
    assert kw["client_options"] == {"allow_invalid_certificates": True, "allow_http": True,
                                    "connect_timeout": "2.0s", "timeout": "7.0s"}
    assert kw["retry_config"] == {"max_retries": 2}
    assert s3_config("s3://b", {"anon": True, "use_ssl": False})["client_options"] == {
        "allow_http": True}
    anon = s3_config("s3://b", {"anon": True})
    assert anon["config"] == {"skip_signature": True} and "credential_provider" not in anon


def test_s3fs_options_are_read_and_never_changed():
    """s3_config emptied the caller's nested config_kwargs dicts (retries, s3): the same
    options then opened a second store without its retries."""
    import copy

    from chunkstore.storage.object_store import s3_config
    options = {"anon": True, "client_kwargs": {"region_name": "eu-west-1"},
               "config_kwargs": {"retries": {"max_attempts": 3, "mode": "standard"},
                                 "s3": {"addressing_style": "virtual"}}}
    before = copy.deepcopy(options)
    first = s3_config("s3://b/p", options)
    assert options == before
    assert s3_config("s3://b/p", options) == first


@pytest.mark.parametrize("bad, named", [
    ({"bogus": 1}, "'bogus'"),
    ({"version_aware": True}, "'version_aware'"),  # it changes what is read: never ignored
    ({"client_kwargs": {"proxies": {}}}, "client_kwargs['proxies']"),
    ({"config_kwargs": {"retries": {"total_max_attempts": 2}}},
     "config_kwargs['retries']['total_max_attempts']"),
])
def test_an_option_obstore_cannot_honour_is_named(bad, named):
    from chunkstore.storage.object_store import s3_config

    with pytest.raises(ValueError, match="FSStore") as info:
        s3_config("s3://b/p", bad)
    assert named in str(info.value) and "s3://b/p" in str(info.value)
    with pytest.raises(ValueError, match="FSStore"):
        cs.open_array("s3://b/p", mode="r", storage_options=bad)


def test_a_bucket_gone_under_an_open_sharded_array_is_an_error_not_fill(s3):
    """Reads of a sharded array take shards by ranged GETs (open_version); once the bucket
    is gone they raise NoSuchBucketError, never the fill value of a "missing" shard."""
    import boto3

    from chunkstore.storage.object_store import NoSuchBucketError

    bucket = f"gone-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id="k",
                          aws_secret_access_key="s", region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/a.zarr"
    z = cs.create_array(url, shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="i4",
                        fill_value=-1, storage_options=_so(s3))
    z[...] = 5
    reader = cs.open_array(url, mode="r", storage_options=_so(s3))
    assert (reader[0:2, 0:2] == 5).all()
    for obj in client.list_objects_v2(Bucket=bucket).get("Contents", []):
        client.delete_object(Bucket=bucket, Key=obj["Key"])
    client.delete_bucket(Bucket=bucket)
    with pytest.raises(NoSuchBucketError, match=bucket):
        reader[4:6, 4:6]


# ------------------------------------------------------------------ the asynchronous API


def _record_loops(monkeypatch):
    """Patch obstore's get_async/put_async to note each request's key and the event loop it
    runs on."""
    import asyncio

    import obstore
    seen = {"get": [], "put": []}
    get, put = obstore.get_async, obstore.put_async

    async def get_async(store, key, *a, **kw):
        seen["get"].append((key, asyncio.get_running_loop()))
        return await get(store, key, *a, **kw)

    async def put_async(store, key, *a, **kw):
        seen["put"].append((key, asyncio.get_running_loop()))
        return await put(store, key, *a, **kw)
    monkeypatch.setattr(obstore, "get_async", get_async)
    monkeypatch.setattr(obstore, "put_async", put_async)
    return seen


@pytest.mark.parametrize("layout", ["chunks", "shards"])
def test_async_reads_run_their_requests_on_the_callers_loop(s3, prefix, monkeypatch, layout):
    """AsyncArray reads send every GET of a selection to the awaiting coroutine's own event
    loop (natively; decoding stays on worker threads), one chunk or many, sharded or not,
    and the loop keeps running other tasks while they are in flight. Writes send theirs to
    the store's own I/O loop (they wait for requests under chunk locks)."""
    import asyncio

    data = np.arange(32 * 32, dtype="i4").reshape(32, 32)
    z = cs.create_array(store(s3, prefix), shape=(32, 32), chunks=(8, 8), dtype="i4",
                        shards=(16, 16) if layout == "shards" else None)
    z[...] = data
    seen = _record_loops(monkeypatch)
    s3.hold = 0.05

    async def main():
        a = cs.AsyncArray(cs.open_array(store(s3, prefix), mode="r"))
        loop = asyncio.get_running_loop()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1
        t = asyncio.create_task(ticker())
        whole = await a.getitem(slice(None))
        one = await a.getitem((slice(0, 8), slice(0, 8)))
        points = await a.get_coordinate_selection(([1, 30], [2, 31]))
        t.cancel()
        w = cs.AsyncArray(cs.open_array(store(s3, prefix), mode="r+"))
        await w.setitem((slice(0, 16), slice(0, 16)), -data[:16, :16])
        return loop, ticks, whole, one, points

    loop, ticks, whole, one, points = asyncio.run(main())
    np.testing.assert_array_equal(whole, data)
    np.testing.assert_array_equal(one, data[:8, :8])
    np.testing.assert_array_equal(points, data[[1, 30], [2, 31]])
    # (opening an array reads its metadata synchronously, on the store's own loop)
    chunk_gets = [(k, x) for k, x in seen["get"] if k.startswith("c/")]
    assert len(chunk_gets) >= 4 and all(x is loop for _, x in chunk_gets), chunk_gets
    assert ticks >= 5
    # (an unsharded write's PUTs go out together on the store's loop; a sharded one's
    # whole shards are single synchronous PUTs)
    assert all(x is not loop for _, x in seen["put"])
    assert seen["put"] or layout == "shards"
    np.testing.assert_array_equal(z[:16, :16], -data[:16, :16])


def test_sync_reads_keep_the_stores_own_loop(s3, prefix, monkeypatch):
    make_array(s3, prefix)
    seen = _record_loops(monkeypatch)
    z = cs.open_array(store(s3, prefix, read_only=True), mode="r")
    z[...]
    assert seen["get"] and len({id(x) for _, x in seen["get"]}) == 1


def test_abandoned_async_reads_free_their_workers(s3, prefix):
    """asyncio.run ending while a read's GETs are in flight on its loop: the worker waiting
    for them is freed (an error nobody awaits), and later reads still get workers."""
    import asyncio

    from chunkstore.aio import run as aio_run
    data = make_array(s3, prefix)
    s3.hold = 0.3

    async def abandon():
        a = cs.AsyncArray(cs.open_array(store(s3, prefix, read_only=True), mode="r"))
        asyncio.get_running_loop().create_task(a.getitem(slice(None)))
        await asyncio.sleep(0.05)          # its GETs are in flight: then the loop ends

    for _ in range(aio_run.WORKERS + 2):
        asyncio.run(abandon())
    s3.hold = 0

    async def read():
        a = cs.AsyncArray(cs.open_array(store(s3, prefix, read_only=True), mode="r"))
        return await asyncio.wait_for(a.getitem(slice(None)), 20)

    np.testing.assert_array_equal(asyncio.run(read()), data)


def test_waiting_on_a_stopped_callers_loop_raises():
    import asyncio
    import concurrent.futures

    from chunkstore.storage import fsspec_io
    loop = asyncio.new_event_loop()         # never run: as a loop that stopped
    fut = concurrent.futures.Future()
    fut.chunkstore_loop = loop
    with pytest.raises(RuntimeError, match="event loop awaiting this read stopped"):
        fsspec_io.result(fut)
    assert fut.cancelled()
    loop.close()
    done = concurrent.futures.Future()
    done.set_result(3)
    assert fsspec_io.result(done) == 3


# ------------------------------------------------------------------ in-process locks
def _one_bucket_store(kind, s3, prefix, gated=False):
    """A store of kind on the server's bucket and prefix (as a gated_store that holds its
    first chunk write where gated)."""
    from faults import gated_store, is_chunk

    so = _so(s3)
    if kind.startswith("obstore"):
        cls = gated_store(ObjectStore, is_chunk) if gated else ObjectStore
        if kind == "obstore-url":       # (what cs.open_array("s3://...") opens)
            return cls.from_url(f"s3://{BUCKET}/{prefix}", so)
        creds = dict(access_key_id="k", secret_access_key="s", region="us-east-1")
        if kind == "obstore-credentials":   # another key pair, another region, same objects
            creds = dict(access_key_id="k2", secret_access_key="s2", region="eu-west-1")
        return cls(S3Store(BUCKET, prefix=prefix, endpoint=s3.endpoint + "/",
                           client_options={"allow_http": True}, **creds))
    cls = gated_store(cs.storage.FSStore, is_chunk) if gated else cs.storage.FSStore
    if kind == "fsspec-options":        # endpoint given at the top, other credentials
        so = {"key": "k2", "secret": "s2", "endpoint_url": s3.endpoint,
              "skip_instance_cache": True}
    return cls(f"s3://{BUCKET}/{prefix}/", storage_options=so)


_BUCKET_PAIRS = [("obstore", "obstore-credentials"), ("obstore-url", "obstore"),
                 ("fsspec", "fsspec-options"), ("obstore", "fsspec"), ("fsspec", "obstore-url")]


@pytest.mark.parametrize("kinds", _BUCKET_PAIRS, ids=["-".join(k) for k in _BUCKET_PAIRS])
@pytest.mark.parametrize("layout", ["v2", "sharded"])
def test_stores_of_one_bucket_and_prefix_share_in_process_locks(s3, prefix, kinds, layout):
    """Two handles of one array, each on its own store object of one bucket and prefix:
    obstore's client with other credentials or another region, one made from the s3:// URL,
    s3fs with other options, or one of each client. A write of element 1 waits for a write
    of element 0 of the same chunk (shard) that is between its read and its PUT. The stores'
    locations took the clients' configuration (credentials, region, every s3fs option) and
    their class: the two handles took separate in-process locks, the second write went
    through, and the first then stored element 1's old value ([1, 0])."""
    from faults import second_write_waits

    from chunkstore.sync.synchronizers import handle_locks
    kw = dict(zarr_format=3, shards=(8,)) if layout == "sharded" else dict(zarr_format=2)
    cs.create_array(_one_bucket_store(kinds[0], s3, prefix), shape=(16,), chunks=(4,),
                    dtype="i4", fill_value=0, **kw)
    held = _one_bucket_store(kinds[0], s3, prefix, gated=True)
    other = _one_bucket_store(kinds[1], s3, prefix)
    a, b = cs.open_array(held, mode="r+"), cs.open_array(other, mode="r+")
    waited = second_write_waits(held, a, b)
    np.testing.assert_array_equal(cs.open_array(store(s3, prefix), mode="r")[:2], [1, 2])
    assert waited and handle_locks(held, "") is handle_locks(other, "")


@pytest.mark.parametrize("kinds", [("obstore", "obstore"), ("obstore", "fsspec"),
                                   ("fsspec", "obstore-url")], ids="-".join)
def test_stores_of_nested_prefixes_share_the_nodes_locks(s3, prefix, kinds):
    """The array at sub/arr of the store of a prefix, and at arr of the store of the prefix
    /sub: one array. Keyed by each store's prefix and the path as given, the two handles
    took separate in-process locks, and a write of element 1 went through while a write of
    element 0 of the same chunk was between its read and its PUT ([1, 0])."""
    from faults import second_write_waits

    from chunkstore.sync.synchronizers import handle_locks
    cs.create_array(_one_bucket_store(kinds[0], s3, prefix), name="sub/arr", shape=(16,),
                    chunks=(4,), dtype="i4", fill_value=0, zarr_format=3)
    held = _one_bucket_store(kinds[0], s3, prefix, gated=True)
    other = _one_bucket_store(kinds[1], s3, prefix + "/sub")
    a = cs.open_array(held, path="sub/arr", mode="r+")
    b = cs.open_array(other, path="arr", mode="r+")
    waited = second_write_waits(held, a, b)
    np.testing.assert_array_equal(
        cs.open_array(store(s3, prefix), path="sub/arr", mode="r")[:2], [1, 2])
    assert waited and handle_locks(held, "sub/arr") is handle_locks(other, "arr")
