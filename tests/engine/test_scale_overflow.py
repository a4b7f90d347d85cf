"""Selections of arrays whose extents, chunk counts or indices come near int64's limits: the
projection's int64 arithmetic must never wrap (a write of 2**64 chunks did nothing and
returned; slices reaching the last chunk of a dimension near 2**63 crashed the process;
edge chunks there were taken for interior ones, stored from uninitialized memory). The
arrays are sparse (a dict store, mostly fill value): nothing big is allocated. Oracle:
Python ints."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.errors import BoundsCheckError

BIG = 2**63 - 1
FORMATS = [dict(zarr_format=2), dict(zarr_format=3)]


@pytest.mark.parametrize("fmt", FORMATS, ids=["v2", "v3"])
def test_a_write_of_2_to_the_64_chunks_is_refused_not_dropped(fmt):
    store: dict = {}
    z = cs.create_array(store, shape=(2**20,) * 4, chunks=(16,) * 4, dtype="i1",
                        fill_value=0, **fmt)
    z[1, 2, 3, 4] = 9
    for write in (lambda: z.__setitem__(Ellipsis, 0), lambda: z.oindex.__setitem__(
            (slice(None),) * 4, 3), lambda: z.blocks.__setitem__(Ellipsis, 4)):
        with pytest.raises(ValueError, match="more than .* chunks"):
            write()
    assert z[1, 2, 3, 4] == 9  # (the count wrapped to 0: the writes returned, doing nothing)


@pytest.mark.parametrize("fmt", FORMATS, ids=["v2", "v3"])
def test_slices_reaching_the_last_chunk_of_a_dimension_near_int64(fmt):
    z = cs.create_array({}, shape=(BIG,), chunks=(3,), dtype="i1", fill_value=3, **fmt)
    np.testing.assert_array_equal(z[0::BIG - 1], [3, 3])
    z[0::BIG - 1] = 5
    assert z[0] == 5 and z[BIG - 1] == 5 and z[1] == 3 and z[BIG - 2] == 3
    y = cs.create_array({}, shape=(4, BIG), chunks=(2, 5), dtype="i1", fill_value=3, **fmt)
    np.testing.assert_array_equal(y.oindex[[0, 3], 0::BIG - 1], [[3, 3], [3, 3]])


@pytest.mark.parametrize("fmt", FORMATS, ids=["v2", "v3"])
def test_selections_of_too_many_chunks_raise_memory_error_naming_the_array(fmt):
    z = cs.create_array({}, shape=(2**62,), chunks=(2,), dtype="i1", name="big", **fmt)
    with pytest.raises(MemoryError, match="'/big'"):
        z[:]
    with pytest.raises(MemoryError, match="'/big'"):
        z[...] = 0


@pytest.mark.parametrize("fmt", FORMATS, ids=["v2", "v3"])
def test_an_empty_selection_of_a_huge_dimension_plans_no_chunks(fmt):
    z = cs.create_array({}, shape=(10, 2**62), chunks=(1, 2), dtype="i1", fill_value=3, **fmt)
    assert z[0:0, :].shape == (0, 2**62)
    z[0:0, :] = 5  # nothing to write
    assert z.nchunks_initialized == 0


@pytest.mark.parametrize("fmt", FORMATS, ids=["v2", "v3"])
def test_edge_chunks_at_the_far_end_are_padded_with_the_fill_value(fmt):
    store: dict = {}
    z = cs.create_array(store, shape=(BIG,), chunks=(3,), dtype="i8", fill_value=-1,
                        compressors=None, **fmt)
    z[-1:] = [5]
    key = [k for k in store if not k.endswith((".zarray", "zarr.json", ".zattrs"))]
    assert len(key) == 1
    np.testing.assert_array_equal(np.frombuffer(store[key[0]], "i8"), [5, -1, -1])
    z[-1:] = 6  # (a scalar: the shared encoding of interior chunks was used)
    np.testing.assert_array_equal(np.frombuffer(store[key[0]], "i8"), [6, -1, -1])


@pytest.mark.parametrize("how", ["oindex", "vindex", "getitem"])
def test_uint64_indices_past_int64_are_out_of_bounds_not_wrapped(how):
    z = cs.create_array({}, shape=(10,), chunks=(4,), dtype="i4", fill_value=0)
    z[:] = np.arange(10)
    idx = np.array([2**64 - 1], dtype="u8")
    view = {"oindex": z.oindex, "vindex": z.vindex, "getitem": z}[how]
    with pytest.raises(BoundsCheckError, match="18446744073709551615"):
        view[idx]
    with pytest.raises(BoundsCheckError, match="9223372036854775808"):
        view[np.array([2**63], dtype="u8")] = 1
    with pytest.raises(BoundsCheckError):
        view[idx] = 99
    np.testing.assert_array_equal(z[:], np.arange(10))  # (2**64 - 1 wrote the last one)


def test_steps_past_int64_selecting_one_element():
    z = cs.create_array({}, shape=(5,), chunks=(2,), dtype="i4")
    z[:] = np.arange(5)
    for step in (2**63, 2**70):
        np.testing.assert_array_equal(z[::step], np.arange(5)[::step])
        np.testing.assert_array_equal(z[::-step], np.arange(5)[::-step])


def test_append_past_the_largest_extent_is_refused_with_the_shape_kept():
    store: dict = {}
    z = cs.create_array(store, shape=(BIG, 2), chunks=(4, 2), dtype="i4")
    with pytest.raises(ValueError, match="largest supported extent"):
        z.append(np.ones((1, 2), dtype="i4"))
    assert cs.open_array(store, mode="r").shape == (BIG, 2)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_slices_of_huge_dimensions_against_python_ints(data):
    """Random slices of a dimension of up to 2**63 - 1 with chunks of any length: points
    written at the selected places (and just beside them) read back as Python's range
    says. (Chunks past 2**16 elements are only read: all fill value, as a write holds its
    chunks whole.)"""
    n = data.draw(st.one_of(st.integers(1, 50), st.integers(BIG - 50, BIG),
                            st.integers(1, BIG)), label="n")
    chunk = data.draw(st.one_of(st.integers(1, 7), st.integers(1, n),
                                st.sampled_from([2**62 + 1, 2**61 + 3, 2**40])),
                      label="chunk")
    # (steps near n reach the last chunk from the first: where (c + 1) * L wrapped)
    near_n = st.integers(max(1, n - 8), n).flatmap(lambda k: st.sampled_from([k, -k]))
    step = data.draw(st.one_of(st.integers(-2**63 + 1, 2**63 - 1).filter(bool),
                               st.integers(-5, 5).filter(bool), near_n), label="step")
    start = data.draw(st.one_of(st.none(), st.integers(-n, n)), label="start")
    stop = data.draw(st.one_of(st.none(), st.integers(-n, n)), label="stop")
    r = range(n)[slice(start, stop, step)]
    if len(r) > 6:  # (only a few points: the selection is read whole)
        r = range(r.start, r.start + 6 * r.step, r.step)
    sel = slice(r.start, r.stop if r.stop >= 0 else None, r.step) if len(r) else \
        slice(start, stop, step)
    assert range(n)[sel] == r
    writable = chunk <= 2**16
    z = cs.create_array({}, shape=(n,), chunks=(chunk,), dtype="i1", fill_value=-1,
                        zarr_format=data.draw(st.sampled_from([2, 3]), label="format"))
    points = sorted({p for i in r for p in (i - 1, i, i + 1) if 0 <= p < n}) \
        if writable else []
    value = {p: k for k, p in enumerate(points)}
    if points:
        z.vindex[np.array(points, dtype=np.int64)] = np.arange(len(points))
    want = np.array([value.get(i, -1) for i in r], dtype="i1")
    np.testing.assert_array_equal(z[sel], want)
    if writable:
        z[sel] = 100
        for i in points:
            assert z[i] == (100 if i in r else value[i])


class _FailsOneChunkWrite(dict):
    """A dict store whose next chunk write fails once (fail set)."""
    fail = False

    def __setitem__(self, key, value):
        if self.fail and not key.startswith(".") and "zarr" not in key:
            self.fail = False
            raise OSError("transient store error (simulated)")
        super().__setitem__(key, value)


def test_a_failed_fill_value_change_at_the_largest_extent_leaves_the_array_changeable():
    """The pending-trim marker of a failed fill value change recorded the chunk grid's
    extent rounded up past 2**63 - 1: every later resize, append and fill value change
    completed the trim first through metadata of that shape, which is refused: the array
    could never change again. Nothing past 2**63 - 1 is ever part of the array, so the
    extent stops there (and there is no padding to reset)."""
    big = 2**63 - 1
    store = _FailsOneChunkWrite()
    z = cs.create_array(store, shape=(big,), chunks=(2,), dtype="i2", fill_value=-1,
                        zarr_format=2)
    z[-1] = 5
    store.fail = True
    z.fill_value = 3
    assert store.fail  # (no padding past the end to reset: no chunk was written)
    store.fail = False
    store[".chunkstore-trim"] = b"torn"  # (an unreadable marker: the listing's extent)
    z.resize((10,))
    z.append(np.array([7], "i2"))
    z.fill_value = 4
    np.testing.assert_array_equal(z[:], [4] * 10 + [7])


def test_a_plan_numpy_cannot_allocate_raises_memory_error():
    """NumPy's allocation error (a MemoryError made from a shape and a dtype) was given the
    array's name as a ValueError: `except MemoryError` missed it."""
    z = cs.create_array({}, shape=(2**40, 2**40), chunks=(1, 1), dtype="i2", name="big",
                        zarr_format=3)
    with pytest.raises(MemoryError, match="'/big'"):
        z[0]


@pytest.mark.parametrize("sep", [".", "/"])
def test_chunk_keys_of_other_spellings_are_not_counted(sep):
    """Keys of a chunk's coordinates with leading zeros ("00"), other scripts' digits or a
    trailing newline were counted as chunks, once per spelling: more chunks initialized
    than the grid has. zarr-python counts the keys it writes alone."""
    from model_support import DictMapping  # (no keys_under: the tree walk of "/" keys)

    for store in ({}, DictMapping()):
        z = cs.create_array(store, shape=(2, 2), chunks=(1, 1), dtype="i2",
                            chunk_key_encoding={"name": "v2", "separator": sep},
                            zarr_format=2)
        z[0, 0] = 7
        chunk = store[f"0{sep}0"]
        for k in (f"00{sep}0", f"0{sep}01", f"\u0661{sep}0", f"0{sep}0\n"):
            store[k] = chunk
        assert z.nchunks_initialized == 1
        np.testing.assert_array_equal(z[:], [[7, 0], [0, 0]])
