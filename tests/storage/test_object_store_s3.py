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
    assert s3.requests() == [("GET", f"/{BUCKET}/{prefix}/.zarray")]
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
