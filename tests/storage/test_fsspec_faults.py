"""FSStore under network faults (issue 16), through a fault-injecting proxy in front of the
test S3 server: a transient 500/503 is retried, a connection dropped mid-body and a timeout
are errors (never a short or missing chunk), and 403 is an error, not the fill value."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import store_name
from chunkstore.storage import FSStore
from faults import FaultProxy


@pytest.fixture
def proxy(s3_server):
    p = FaultProxy(s3_server.endpoint)
    yield p
    p.close()


def _opts(s3_server, proxy, **config):
    opts = dict(s3_server.storage_options)
    opts["client_kwargs"] = {"endpoint_url": proxy.endpoint, "region_name": "us-east-1"}
    opts["config_kwargs"] = config
    opts["skip_instance_cache"] = True
    return opts


@pytest.fixture
def array_url(s3_server):
    """An array written straight to the server (no proxy): 4 chunks of 25 int32."""
    url = s3_server.url()
    z = cs.open(FSStore(url, storage_options=s3_server.storage_options), mode="w",
                shape=(100,), chunks=(25,), dtype="i4")
    z[:] = np.arange(100)
    return url


def _chunk(key):
    return lambda method, path: method == "GET" and path.split("?")[0].endswith("/" + key)


@pytest.mark.parametrize("code", [500, 503])
def test_transient_server_error_is_retried(s3_server, proxy, array_url, code):
    store = FSStore(array_url, storage_options=_opts(
        s3_server, proxy, retries={"max_attempts": 4, "mode": "standard"}))
    z = cs.open(store, mode="r")
    proxy.add(_chunk("1"), ("status", code), times=2)
    np.testing.assert_array_equal(z[:], np.arange(100))
    assert proxy.hits == 2
    proxy.add(_chunk("2"), ("status", code), times=2)
    np.testing.assert_array_equal(z[50:75], np.arange(50, 75))  # the single-key path


def test_persistent_server_error_raises_not_fill(s3_server, proxy, array_url):
    store = FSStore(array_url, storage_options=_opts(
        s3_server, proxy, retries={"max_attempts": 2, "mode": "standard"}))
    store.fs.retries = 1
    z = cs.open(store, mode="r")
    proxy.add(_chunk("1"), ("status", 503))
    with pytest.raises(Exception) as info:
        z[:]
    assert not isinstance(info.value, KeyError)
    with pytest.raises(Exception) as info:
        z[30]
    assert not isinstance(info.value, KeyError)


def test_connection_dropped_mid_body_is_an_error_not_a_short_chunk(s3_server, proxy,
                                                                    array_url):
    store = FSStore(array_url, storage_options=_opts(
        s3_server, proxy, retries={"max_attempts": 2, "mode": "standard"}))
    store.fs.retries = 1
    z = cs.open(store, mode="r")
    proxy.add(_chunk("1"), ("drop",))
    for read in (lambda: z[:], lambda: z[30], lambda: store["1"],
                 lambda: store.getitems(["0", "1"])):
        with pytest.raises(Exception) as info:
            read()
        assert not isinstance(info.value, KeyError)
    assert proxy.hits >= 4
    # a single drop is retried and the data is whole
    store.fs.retries = 3
    proxy.clear()
    proxy.add(_chunk("1"), ("drop",), times=1)
    np.testing.assert_array_equal(z[:], np.arange(100))


def test_timeout_is_an_error_naming_the_key(s3_server, proxy, array_url):
    store = FSStore(array_url, storage_options=_opts(
        s3_server, proxy, read_timeout=0.5, connect_timeout=2,
        retries={"max_attempts": 1, "mode": "standard"}))
    store.fs.retries = 1
    z = cs.open(store, mode="r")
    proxy.add(_chunk("2"), ("delay", 3))
    for read in (lambda: z[60], lambda: store["2"]):
        with pytest.raises(Exception) as info:
            read()
        assert not isinstance(info.value, KeyError)
        assert "2" in str(info.value) and array_url.split("/")[-1] in str(info.value)


def test_403_on_a_chunk_is_an_error_not_fill(s3_server, proxy, array_url):
    store = FSStore(array_url, storage_options=_opts(
        s3_server, proxy, retries={"max_attempts": 1, "mode": "standard"}))
    z = cs.open(store, mode="r")
    proxy.add(_chunk("3"), ("status", 403))
    with pytest.raises(PermissionError):
        z[:]
    with pytest.raises(PermissionError):
        z[80]
    np.testing.assert_array_equal(z[:75], np.arange(75))


def _deletes(method, path):
    # (s3fs: a bulk delete is a POST ?delete, a lone one a DELETE)
    return method == "DELETE" or (method == "POST" and "delete" in path)


def test_delete_whose_answer_is_lost_is_retried(s3_server, proxy, array_url):
    """A delete the server applied but whose answer was lost (the connection closed: botocore's
    ConnectionClosedError, not an OSError) is sent again: deleting again is harmless."""
    store = FSStore(array_url, storage_options=_opts(
        s3_server, proxy, retries={"max_attempts": 1, "mode": "standard"}))
    z = cs.open(store, mode="r+")
    proxy.add(_deletes, ("lost",), times=1)
    z.resize((30,))  # deletes chunks 2 and 3 (one bulk request)
    assert proxy.hits == 1
    np.testing.assert_array_equal(z[:], np.arange(30))
    assert sorted(k for k in store if k != ".zarray") == ["0", "1"]
    proxy.add(_deletes, ("lost",), times=1)
    del store["1"]  # the single-key path
    assert "1" not in store


def test_delete_that_keeps_failing_names_the_key_and_store(s3_server, proxy, array_url):
    store = FSStore(array_url, storage_options=_opts(
        s3_server, proxy, retries={"max_attempts": 1, "mode": "standard"}))
    store.fs.retries = 1  # (s3fs's own retries, with their pauses)
    cs.config.set(io_retries=1)
    try:
        proxy.add(_deletes, ("lost",))
        for delete, key in ((lambda: store.delitems(["2", "3"]), "'2' and 1 more"),
                            (lambda: store.__delitem__("1"), "'1'")):
            with pytest.raises(OSError) as info:
                delete()
            msg = str(info.value)
            assert f"deleting {key}" in msg and store_name(store) in msg, msg
            assert "ConnectionClosedError" in msg and array_url.split("://")[1] not in (
                msg.split(" in ")[0]), msg  # the store's key, not the bucket's path
    finally:
        cs.config.set(io_retries=5)
