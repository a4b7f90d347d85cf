"""A shrink whose trim fails midway (README "Shape changes"): the new shape is written
first, so the chunks past it (and the cut-off part of boundary chunks) may keep their old
values. A later grow must never show them: the shrink leaves a marker
(``<array>/.chunkstore-trim``, chunkstore.engine.trim) that every later resize, append or fill
value change completes first, through any handle or process. Each store failure point of
the trim is tried in turn (the n-th chunk write or delete fails), in Zarr v2, v3 and
sharded v3, with write_empty_chunks both ways."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.metadata.formats import stray_chunk_keys
from faults import FaultyStore, NthChunk, faulty_memory_store, is_chunk

MARKER = ".chunkstore-trim"
FORMATS = {"v2": dict(zarr_format=2), "v3": dict(zarr_format=3),
           "sharded": dict(zarr_format=3, shards=(4, 6))}
SHAPE, CHUNKS, NEW = (10, 9), (2, 3), (5, 4)  # the shrink cuts chunks in both dimensions
FILL = -1
DATA = np.arange(1, 91, dtype="i4").reshape(SHAPE)  # (no element is the fill value)


def _array(fmt, wec, store=None):
    store = faulty_memory_store() if store is None else store
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="i4", fill_value=FILL, store=store, path="a",
                  write_empty_chunks=wec, **FORMATS[fmt])
    z[...] = DATA
    return store, z


def _model(shape, data=DATA):
    """What the array reads after shrinking data to NEW and growing to shape."""
    out = np.full(shape, FILL, dtype="i4")
    box = tuple(slice(0, min(a, b, c)) for a, b, c in zip(shape, NEW, data.shape))
    out[box] = data[box]
    return out


def _shrink_failing(store, z):
    """Shrink z to NEW with its trim's first chunk delete failing (its marker left
    pending); the store's faults are off afterwards."""
    store.fail = NthChunk("del", 1)
    with pytest.raises(OSError):
        z.resize(NEW)
    store.fail = lambda op, key: False


def _failed_shrinks(fmt, wec, op):
    """(store, array) after a shrink to NEW whose n-th chunk op failed, for n = 1, 2, ...
    until the shrink goes through (the last one yielded has no fault)."""
    for n in range(1, 100):
        store, z = _array(fmt, wec)
        rule = store.fail = NthChunk(op, n)
        notes = []
        try:
            z.resize(NEW)
        except OSError as e:
            assert e.errno == errno.EIO
            notes = e.__notes__
        store.fail = lambda op, key: False
        assert z.shape == NEW  # the shape was written first: the shrink stands
        yield n, rule.hit, store, z
        # (checked after the grow, whose data is what matters)
        assert not rule.hit or any(MARKER in note for note in notes), notes
        if not rule.hit:
            return
    raise AssertionError("the trim never went through")


@pytest.mark.parametrize("wec", [False, True], ids=["wec0", "wec1"])
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("op", ["set", "del"])
@pytest.mark.parametrize("grow", ["resize", "append", "other_handle", "fill_value"])
def test_a_grow_after_a_failed_trim_shows_the_fill_value(fmt, wec, op, grow):
    failures = 0
    for n, hit, store, z in _failed_shrinks(fmt, wec, op):
        failures += hit
        what = f"{fmt} wec={wec}: chunk {op} #{n} failed={hit}, then {grow}"
        marked = ("a/" + MARKER) in store
        # a read of the array is never affected (the stale chunks lie past its end)
        np.testing.assert_array_equal(z[...], DATA[:5, :4], err_msg=what)
        if grow == "resize":
            z.resize(SHAPE)
            np.testing.assert_array_equal(z[...], _model(SHAPE), err_msg=what)
        elif grow == "append":
            z.append(np.full((5, 5), 7, dtype="i4"), axis=1)   # (5, 9)
            expected = _model((5, 9))
            expected[:, 4:] = 7
            np.testing.assert_array_equal(z[...], expected, err_msg=what)
            z.resize(SHAPE)
            expected = np.vstack([expected, np.full((5, 9), FILL, dtype="i4")])
            np.testing.assert_array_equal(z[...], expected, err_msg=what)
        elif grow == "other_handle":
            # another store object on the same data, no state shared in this process (as
            # another process's handle)
            other = cs.open_array(dict(store._data), path="a", mode="r+")
            other.resize(SHAPE)
            np.testing.assert_array_equal(other[...], _model(SHAPE), err_msg=what)
            assert not any(k.endswith(MARKER) for k in other.store)
            assert marked == hit, what
            continue
        else:
            z.fill_value = 5   # the edge chunks' padding takes the new fill value
            z.resize(SHAPE)
            expected = _model(SHAPE)
            expected[expected == FILL] = 5
            np.testing.assert_array_equal(z[...], expected, err_msg=what)
        assert marked == hit and ("a/" + MARKER) not in store, what
        # every chunk past the shape is gone: the stored ones are the written ones
        z.resize(NEW)
        assert z.nchunks_initialized == 6
    assert failures >= 1


def test_a_grow_whose_completion_fails_changes_nothing():
    for fmt in FORMATS:
        store, z = _array(fmt, False)
        _shrink_failing(store, z)
        store.fail = lambda op, key: True   # the store refuses every write now
        with pytest.raises(OSError) as info:
            z.resize(SHAPE)
        assert any("completing the trim" in n for n in info.value.__notes__)
        with pytest.raises(OSError):
            z.append(np.zeros((1, 4), dtype="i4"))
        store.fail = lambda op, key: False
        assert z.shape == NEW and ("a/" + MARKER) in store
        np.testing.assert_array_equal(z[...], DATA[:5, :4])
        z.append(np.zeros((5, 4), dtype="i4"))   # completes it, then appends
        z.resize(SHAPE)
        expected = _model(SHAPE)
        expected[5:, :4] = 0
        np.testing.assert_array_equal(z[...], expected, err_msg=fmt)


def test_a_second_shrink_then_a_grow():
    # the second shrink completes the first's trim (its marker) before its own
    for fmt in FORMATS:
        store, z = _array(fmt, False)
        _shrink_failing(store, z)
        store.fail = NthChunk("set", 1)
        with pytest.raises(OSError):
            z.resize(3, 9)     # fails while completing the first trim: nothing changes
        assert z.shape == NEW
        store.fail = lambda op, key: False
        z.resize(3, 2)
        z.resize(SHAPE)
        expected = np.full(SHAPE, FILL, dtype="i4")
        expected[:3, :2] = DATA[:3, :2]
        np.testing.assert_array_equal(z[...], expected, err_msg=fmt)


def test_a_failed_fill_value_trim_then_a_grow():
    store, z = _array("v2", False)
    z.resize(NEW)
    store.fail = NthChunk("set", 1)
    with pytest.raises(OSError) as info:
        z.fill_value = 3
    store.fail = lambda op, key: False
    z.resize(SHAPE)
    expected = _model(SHAPE)
    expected[expected == FILL] = 3
    np.testing.assert_array_equal(z[...], expected)
    assert any(MARKER in n for n in info.value.__notes__)


def test_the_marker_is_no_chunk_and_goes_with_the_array():
    store, z = _array("v3", False)
    _shrink_failing(store, z)
    doc = json.loads(store["a/" + MARKER])
    assert doc == {"chunkstore_pending_trim": {"from": list(SHAPE), "to": list(NEW)}}
    assert z.nchunks_initialized == 6
    assert not any(k.endswith(MARKER) for k in stray_chunk_keys(list(store), "a"))
    assert not is_chunk("a/" + MARKER)
    # copied raw with the array (copy_store): the copy's next grow completes the trim
    dest = cs.MemoryStore()
    cs.copy_store(store, dest)
    assert ("a/" + MARKER) in dest
    copy = cs.open_array(dest, path="a", mode="r+")
    copy.resize(SHAPE)
    np.testing.assert_array_equal(copy[...], _model(SHAPE))
    z.resize(z.shape)   # (README: how to complete it before another tool grows the array)
    assert ("a/" + MARKER) not in store and z.nchunks_initialized == 6
    # deleted with the array
    g = cs.open_group(store, mode="r+")
    del g["a"]
    assert not any(k.startswith("a/") for k in store)


def test_a_marker_that_cannot_be_read_trims_everything_past_the_end():
    for fmt in FORMATS:
        store, z = _array(fmt, True)
        _shrink_failing(store, z)
        store["a/" + MARKER] = b"{torn"
        z.resize(SHAPE)
        np.testing.assert_array_equal(z[...], _model(SHAPE), err_msg=fmt)
        assert ("a/" + MARKER) not in store


def test_no_marker_written_where_nothing_lies_past_the_new_end():
    store, z = _array("v2", False)
    seen = []
    store.fail = lambda op, key: seen.append((op, key)) and False
    z.resize(SHAPE[0], 3)   # chunk columns 1 and 2 lie past the new end: marked
    assert ("set", "a/" + MARKER) in seen and ("del", "a/" + MARKER) in seen
    z[...] = FILL           # (every chunk deleted)
    seen.clear()
    z.resize(4, 3)         # every chunk is missing (all fill): nothing to trim
    assert not any(k.endswith(MARKER) for _, k in seen), seen


def test_zarr_python_reads_an_array_with_a_marker(tmp_path):
    zarr = pytest.importorskip("zarr")
    if int(zarr.__version__.split(".")[0]) < 3:
        pytest.skip("zarr-python 3 is checked")
    for fmt in (2, 3):
        path = str(tmp_path / f"f{fmt}.zarr")
        z = cs.create(SHAPE, chunks=CHUNKS, dtype="i4", fill_value=FILL, store=path,
                      path="a", zarr_format=fmt)
        z[...] = DATA
        failing = FaultyStore(cs.DirectoryStore(path))
        failing.fail_write(is_chunk)
        with pytest.raises(OSError):
            cs.open_array(failing, path="a", mode="r+").resize(NEW)
        assert os.path.exists(os.path.join(path, "a", MARKER))
        a = zarr.open_array(path, path="a", mode="r")
        np.testing.assert_array_equal(a[...], DATA[:5, :4])
        assert a.nchunks_initialized == 6
        assert list(zarr.open_group(path, mode="r").array_keys()) == ["a"]


_GROW = textwrap.dedent("""
    import sys
    import chunkstore as cs
    z = cs.open_array(sys.argv[1], path="a", mode="r+")
    z.resize(10, 9)
    print(z[...].tolist())
""")


def test_another_process_completes_the_trim(tmp_path):
    path = str(tmp_path / "d.zarr")
    _array("v2", False, store=path)
    failing = FaultyStore(cs.DirectoryStore(path))
    failing.fail_write(is_chunk)   # the boundary chunks cannot be rewritten
    with pytest.raises(OSError):
        cs.open_array(failing, path="a", mode="r+").resize(NEW)
    root = os.path.dirname(os.path.dirname(os.path.abspath(cs.__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _GROW, path], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(np.array(json.loads(out.stdout)), _model(SHAPE))
    assert not os.path.exists(os.path.join(path, "a", MARKER))


class _SlotDisk(cs.storage.MemoryStore):
    """A full disk counted in objects: every write (a new key, or one replaced: an atomic
    rename writes a new file first) needs a free slot of ``capacity``."""

    capacity: int | None = None

    def __setitem__(self, key, value):
        if self.capacity is not None and len(self._data) + 1 > self.capacity:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), key)
        super().__setitem__(key, value)

    def setitems(self, mapping):
        for k, v in dict(mapping).items():
            self[k] = v


@pytest.mark.parametrize("fmt", ["v2", "v3", "sharded"])
def test_failed_append_on_full_disk_restores_old_shape(fmt):
    """An append whose second chunk finds the disk full, where no boundary chunk is
    shared with the old shape: the roll-back's deletes free the one slot the old shape's
    document needs. The trim marker, written always, took it: the array kept the new shape,
    the appended values reading as the fill value (and a retried append put fill values in
    the middle)."""
    kw = dict(zarr_format=3, shards=(2,)) if fmt == "sharded" else FORMATS[fmt]
    store = _SlotDisk()
    z = cs.create((8,), chunks=(1,) if fmt == "sharded" else (2,), dtype="u1",
                  fill_value=3, store=store, write_empty_chunks=True, compressor=None, **kw)
    z[5] = 0
    before = z[...]
    store.capacity = len(store._data) + 1  # one free slot
    with pytest.raises(OSError) as info:
        z.append(np.array([0, 9, 0], dtype="u1"))
    assert info.value.errno == errno.ENOSPC
    assert not any("also failed" in n for n in getattr(info.value, "__notes__", []))
    store.capacity = None
    assert MARKER not in store
    assert z.shape == (8,)
    assert cs.open_array(store, mode="r").shape == (8,)
    np.testing.assert_array_equal(z[...], before)
    z.append(np.array([0, 9, 0], dtype="u1"))  # retried: lands whole
    np.testing.assert_array_equal(z[...], np.r_[before, [0, 9, 0]])


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("change", ["shrink", "fill"])
def test_a_metadata_write_whose_answer_is_lost_keeps_the_trim_marker(fmt, change):
    """A shrink or fill value change whose new document reached the store but whose answer
    was lost (an S3 reply dropped) raised, and removed its trim marker taking the old shape
    (or fill value) to stand: the new one stood, and a grow showed the old values past the
    end (or the old fill value in edge chunks). The marker is kept; the next change
    completes it."""
    from chunkstore.storage import MemoryStore

    class LosesAnswer(MemoryStore):
        lose = False

        def __setitem__(self, k, v):
            super().__setitem__(k, v)
            if self.lose and k.endswith((".zarray", "zarr.json")):
                self.lose = False
                raise OSError("connection dropped after the write (simulated)")

    s = LosesAnswer()
    z = cs.create(shape=(10, 7), chunks=(4, 3), dtype="i4", fill_value=-3, store=s,
                  zarr_format=fmt)
    z[:] = np.arange(70).reshape(10, 7)
    s.lose = True
    with pytest.raises(OSError, match="simulated"):
        if change == "shrink":
            z.resize(5, 5)
        else:
            z.fill_value = 7
    r = cs.open_array(s, mode="r+")
    if change == "shrink":
        assert r.shape == (5, 5)
        r.resize(10, 7)
        assert (r[5:, :] == -3).all() and (r[:5, 5:] == -3).all()
        np.testing.assert_array_equal(r[:5, :5], np.arange(70).reshape(10, 7)[:5, :5])
    else:
        assert r.fill_value == 7
        r.resize(12, 9)
        assert (r[10:, :] == 7).all() and (r[:, 7:] == 7).all()
        np.testing.assert_array_equal(r[:10, :7], np.arange(70).reshape(10, 7))


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_shrink_or_fill_change_refused_by_a_consolidated_snapshot_stores_nothing(fmt):
    """Through a consolidated snapshot's handle, the trim marker (a key the view passes
    through) was stored and then the metadata write refused (ReadOnlyError): the refused
    change left the marker behind."""
    import chunkstore as cs
    store = cs.MemoryStore()
    g = cs.group(store=store, zarr_format=fmt)
    g.create_array("c", shape=(6,), chunks=(4,), dtype="i4", fill_value=0)[...] = 1
    h = cs.consolidate_metadata(store)["c"]
    before = dict(store)
    with pytest.raises(cs.errors.ReadOnlyError):
        h.resize(1)
    with pytest.raises((cs.errors.ReadOnlyError, ValueError)):
        h.fill_value = 3
    with pytest.raises(cs.errors.ReadOnlyError):
        h.append(np.arange(3, dtype="i4"))
    assert dict(store) == before
    # (a cache in front of the snapshot: the append was refused after writing its data)
    c = cs.LRUStoreCache(cs.open_consolidated(store, mode="r+").store, max_size=2**20)
    with pytest.raises(cs.errors.ReadOnlyError) as info:
        cs.open_array(c, path="c", mode="r+").append(np.arange(3, dtype="i4"))
    assert not any("also failed" in n for n in getattr(info.value, "__notes__", []))
    assert dict(store) == before
