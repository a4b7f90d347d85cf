"""A handle's cached metadata (cache_metadata=True, the default) is never trusted for a
synchronized write: under the write's locks the stored metadata is checked, and a write whose
handle missed another handle's resize is planned again with the new shape (issue 25)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import chunkstore as cs


def syncs(tmp_path):
    return {"thread": cs.ThreadSynchronizer(),
            "process": cs.ProcessSynchronizer(str(tmp_path / "locks"))}


@pytest.mark.parametrize("kind", ["thread", "process"])
@pytest.mark.parametrize("fmt", ["v2", "v3", "sharded"])
def test_a_write_through_a_handle_that_missed_an_append(tmp_path, kind, fmt):
    sync = syncs(tmp_path)[kind]
    path = str(tmp_path / "a.zarr")
    kw = {"v2": dict(zarr_format=2), "v3": {}, "sharded": dict(shards=(8,))}[fmt]
    a = cs.create_array(path, shape=(6,), chunks=(4,), dtype="i4", synchronizer=sync, **kw)
    a[...] = 1
    b = cs.open_array(path, mode="r+", synchronizer=sync)
    b.append(np.array([7, 7], dtype="i4"))
    # a still knows shape (6,): its edge chunk 4..8 looks whole to it, and writing it whole
    # would clear b's appended 7s
    a[4:6] = 5
    np.testing.assert_array_equal(b[...], [1, 1, 1, 1, 5, 5, 7, 7])
    assert a.shape == (8,)  # a planned the write again with the new metadata
    a.oindex[[0, 7]] = 3
    a.vindex[[1]] = 4
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[...],
                                  [3, 4, 1, 1, 5, 5, 7, 3])


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_write_past_the_new_end_after_another_handle_shrank(tmp_path, kind):
    sync = syncs(tmp_path)[kind]
    path = str(tmp_path / "a.zarr")
    a = cs.create_array(path, shape=(12,), chunks=(4,), dtype="i4", synchronizer=sync)
    a[...] = 1
    cs.open_array(path, mode="r+", synchronizer=sync).resize((6,))
    with pytest.raises(IndexError):
        a[10] = 5  # outside the array now: refused, no chunk written past the end
    assert not os.path.exists(os.path.join(path, "c", "2"))
    a[5] = 5
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[...], [1, 1, 1, 1, 1, 5])


def test_attribute_updates_by_another_handle_do_not_replan(tmp_path, monkeypatch):
    from chunkstore.engine import chunk_io as array_chunks
    sync = cs.ThreadSynchronizer()
    path = str(tmp_path / "a.zarr")
    a = cs.create_array(path, shape=(4,), chunks=(2,), dtype="i4", synchronizer=sync)
    cs.open_array(path, mode="r+", synchronizer=sync).attrs["x"] = 1
    seen = []
    real = array_chunks.EngineState.check_metadata

    def check(self):
        try:
            real(self)
        except array_chunks.MetadataChanged:
            seen.append(1)
            raise

    monkeypatch.setattr(array_chunks.EngineState, "check_metadata", check)
    a[...] = 2
    assert not seen
    np.testing.assert_array_equal(a[...], 2)


@pytest.mark.parametrize("shards", [None, (4,)])
def test_threads_and_tasks_sharing_a_handle_that_reloads_its_metadata(shards):
    # cache_metadata=False: every operation reloads the metadata; a reload used to replace
    # the chunk store under the other threads' operations, one of which then "closed" the
    # (sharded) chunk store view it had not made: AttributeError. Found by
    # tests/storage/test_remote_shared_model.py.
    import asyncio
    import threading
    store = cs.MemoryStore()
    cs.create_array(store, shape=(8,), chunks=(2,), shards=shards, dtype="u1",
                    fill_value=0)[...] = 1
    h = cs.open_array(store, mode="r", cache_metadata=False)
    errors = []

    def reads():
        try:
            for _ in range(500):
                assert h[0] == 1 and (h[:] == 1).all()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=reads) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    a = cs.AsyncArray(h)

    async def main():
        for _ in range(100):
            got = await asyncio.gather(*(a.getitem(slice(None)) for _ in range(4)))
            assert all((g == 1).all() for g in got)
    asyncio.run(main())
    # a change is still seen: another handle's resize
    cs.open_array(store, mode="r+").resize((10,))
    assert h.shape == (10,) and (h[:8] == 1).all() and (h[8:] == 0).all()
