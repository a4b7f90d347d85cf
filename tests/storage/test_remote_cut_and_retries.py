"""Remote stores through a fault-injecting proxy: a ranged GET whose body comes back cut
short (its length honest: nothing in the answer tells) is an error naming the key, never a
short value; a lone PUT, DELETE or HEAD of ObjectStore is retried ``io_retries`` times as
batched requests are (a shard's or zarr.json's PUT failed on one 500)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest

import chunkstore as cs
from chunkstore import config
from chunkstore.storage import FSStore
from faults import FaultProxy

pytest.importorskip("obstore")
from obstore.store import S3Store  # noqa: E402

from .conftest import S3_KEY, S3_SECRET  # noqa: E402


@pytest.fixture
def proxy(s3_server):
    p = FaultProxy(s3_server.endpoint)
    yield p
    p.close()


def _object_store(s3_server, proxy, prefix):
    from chunkstore.storage import ObjectStore
    client = S3Store(s3_server.bucket, prefix=prefix, endpoint=proxy.endpoint,
                     access_key_id=S3_KEY, secret_access_key=S3_SECRET, region="us-east-1",
                     client_options={"allow_http": True},
                     retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=2),
                                   "backoff": {"init_backoff": timedelta(milliseconds=10),
                                               "max_backoff": timedelta(milliseconds=20),
                                               "base": 2}})
    return ObjectStore(client)


def _fsstore(s3_server, proxy, prefix):
    opts = dict(s3_server.storage_options)
    opts["client_kwargs"] = {"endpoint_url": proxy.endpoint, "region_name": "us-east-1"}
    opts["skip_instance_cache"] = True
    return FSStore(f"s3://{s3_server.bucket}/{prefix}", storage_options=opts)


def _gets(key):
    return lambda method, path: method == "GET" and path.split("?")[0].endswith("/" + key)


@pytest.mark.parametrize("make", [_object_store, _fsstore], ids=["obstore", "fsspec"])
def test_a_range_cut_short_on_the_way_is_an_error(s3_server, proxy, make):
    store = make(s3_server, proxy, uuid.uuid4().hex)
    value = bytes(range(200))
    store["k"] = value
    # (a HEAD through the proxy gives the object's size: a length of 0 read as empty)
    assert store.get_partial("k", [(10, 20)]) == [value[10:30]]
    proxy.add(_gets("k"), ("cut",), times=1)
    with pytest.raises(OSError, match="'k'") as info:
        store.get_partial("k", [(10, 20)])
    assert "10 bytes" in str(info.value)  # (of the 20 asked)
    # a range past the object's end is still the object's end, not an error
    assert store.get_partial("k", [(190, 50)]) == [value[190:]]
    assert store.get_partial("k", [(10, 20), (0, 5)]) == [value[10:30], value[:5]]


@pytest.mark.parametrize("what", ["attrs", "shard", "delete", "contains"])
def test_lone_obstore_requests_are_retried(s3_server, proxy, what):
    prefix = uuid.uuid4().hex
    store = _object_store(s3_server, proxy, prefix)
    z = cs.create_array(store, shape=(64,), chunks=(8,), shards=(32,), dtype="i4",
                        zarr_format=3)
    z[:] = np.arange(64)
    if what == "attrs":
        proxy.add(lambda m, p: m == "PUT" and p.split("?")[0].endswith("/zarr.json"),
                  ("status", 500), times=1)
    elif what == "shard":
        proxy.add(lambda m, p: m == "PUT" and p.split("?")[0].endswith("/c/1"),
                  ("status", 503), times=1)
    else:
        # (obstore deletes with DELETE, or a bulk POST ?delete)
        proxy.add(lambda m, p: (m in ("DELETE", "POST") if what == "delete" else m == "HEAD"),
                  ("status", 500), times=1)
    with config.set(io_retries=2):
        if what == "attrs":
            z.attrs["a"] = 1
        elif what == "shard":
            z[40] = -1  # one shard rewritten: one PUT
        elif what == "delete":
            store["extra"] = b"x"
            del store["extra"]
        else:
            assert "zarr.json" in store
    assert proxy.hits == 1
    fresh = cs.open_array(_object_store(s3_server, proxy, prefix), mode="r")
    want = np.arange(64)
    if what == "shard":
        want[40] = -1
    np.testing.assert_array_equal(fresh[:], want)
    if what == "attrs":
        assert fresh.attrs["a"] == 1
    if what == "delete":
        assert "extra" not in store
