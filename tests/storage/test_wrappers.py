"""zarr-python 3's WrapperStore and LoggingStore: arrays and groups work through them as
through the store they wrap; LoggingStore logs and counts each operation."""

import logging

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import LoggingStore, MemoryStore, WrapperStore


@pytest.mark.parametrize("wrap", [WrapperStore, LoggingStore])
def test_arrays_work_through_a_wrapper(tmp_path, wrap):
    inner = cs.DirectoryStore(str(tmp_path / "d"))
    store = wrap(inner)
    a = cs.create_array(store, name="g/a", shape=(10, 10), chunks=(3, 3), dtype="i4")
    a[...] = np.arange(100).reshape(10, 10)
    np.testing.assert_array_equal(cs.open_array(inner, path="g/a", mode="r")[...],
                                  np.arange(100).reshape(10, 10))
    assert a.nchunks_initialized == 16 and sorted(cs.open_group(store, path="g").array_keys()) == ["a"]
    del store["g/a/c/0/0"]
    assert "g/a/c/0/0" not in inner and store.store is inner


def test_logging_store_logs_and_counts(caplog):
    store = LoggingStore(MemoryStore(), log_level="INFO")
    with caplog.at_level(logging.INFO, logger="chunkstore.storage.LoggingStore"):
        a = cs.zeros((4,), chunks=(2,), store=store, zarr_format=3)
        a[:] = 1
        a[...]
    assert store.counter["set"] + store.counter["setitems"] >= 2
    assert store.counter["get"] + store.counter["getitems"] >= 1
    text = caplog.text
    assert "Calling MemoryStore." in text and "Finished" in text
    assert LoggingStore(MemoryStore()).counter == {}  # counted per store
