"""The Cython core on its own: radix grouping, projection tables and the all-fill test."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore._core import merge
from chunkstore._core.kernels import argsort_uint64
from chunkstore._core.projection import ARRAY, SLICE, OrthoPlan, PointsPlan


@given(st.lists(st.integers(0, 2**64 - 1), max_size=300))
@settings(max_examples=200, deadline=None)
def test_radix_argsort_is_a_stable_sort(keys):
    k = np.array(keys, dtype=np.uint64)
    np.testing.assert_array_equal(argsort_uint64(k), np.argsort(k, kind="stable"))


def test_radix_argsort_small_key_range_and_duplicates():
    rng = np.random.default_rng(1)
    k = rng.integers(0, 5, 10_000).astype(np.uint64)
    np.testing.assert_array_equal(argsort_uint64(k), np.argsort(k, kind="stable"))


@given(n=st.integers(1, 60), L=st.integers(1, 9), start=st.integers(0, 59),
       step=st.integers(-7, 7).filter(bool), count=st.integers(0, 30))
@settings(max_examples=300, deadline=None)
def test_slice_projection_covers_each_element_once(n, L, start, step, count):
    start = min(start, n - 1)
    count = min(count, len(range(start, -1 if step < 0 else n, step)))
    plan = OrthoPlan((n,), (L,), [(SLICE, start, step, count)])
    # Gather from a chunked copy of arange and compare with the slice.
    a = np.arange(n, dtype=np.int64)
    out = np.full(count, -1, dtype=np.int64)
    for i, (c,) in enumerate(plan.chunk_coords()):
        chunk = np.zeros(L, dtype=np.int64)
        part = a[c * L:(c + 1) * L]
        chunk[:len(part)] = part
        merge.gather(plan, i, chunk, out)
    np.testing.assert_array_equal(out, a[start::step][:count])
    assert plan.nchunks <= count


def test_index_array_projection_groups_by_chunk_and_flags_full_coverage():
    plan = OrthoPlan((10,), (4,), [(ARRAY, np.array([9, 0, 1, 2, 3, 3, 8], dtype=np.int64))])
    np.testing.assert_array_equal(plan.chunk_coords()[:, 0], [0, 2])
    # chunk 0 covers 0..3 fully; chunk 2 holds 8, 9 (extent 2) fully too
    np.testing.assert_array_equal(plan.full_mask(), [True, True])
    plan = OrthoPlan((10,), (4,), [(ARRAY, np.array([9, 0, 1, 3], dtype=np.int64))])
    np.testing.assert_array_equal(plan.full_mask(), [False, False])


def test_points_plan_scales_with_points_not_chunks():
    # A 10^6 x 10^6 grid of 32x32 chunks (~10^9 chunks): three points touch three chunks.
    plan = PointsPlan((10**6, 10**6), (32, 32),
                      np.array([[5, 999_999, 5], [7, 0, 500_000]], dtype=np.int64))
    assert plan.nchunks == 3
    assert sorted(map(tuple, plan.chunk_coords().tolist())) == [(0, 0), (0, 15625), (31249, 0)]


def test_out_of_bounds_points_are_rejected():
    with pytest.raises(IndexError, match="dimension 1 of length 5"):
        PointsPlan((4, 5), (2, 2), np.array([[0], [5]], dtype=np.int64))


@pytest.mark.parametrize("dtype", ["<f2", "<f4", ">f4", "<f8", ">f8"])
def test_all_fill_nan_aware_for_any_byte_order(dtype):
    nan = np.array([np.nan], dtype=dtype)
    assert merge.is_all_fill(np.full(50, np.nan, dtype=dtype), nan)
    # A NaN with another payload is still NaN.
    other = np.full(50, np.nan, dtype=dtype)
    other.view(np.uint8)[:] = np.full(50, -np.nan, dtype=dtype).view(np.uint8)
    assert merge.is_all_fill(other, nan)
    a = np.full(50, np.nan, dtype=dtype)
    a[49] = 1
    assert not merge.is_all_fill(a, nan)


def test_all_fill_is_bytewise_for_non_nan():
    zero = np.array([0.0])
    assert merge.is_all_fill(np.zeros((7, 3)), zero)
    assert not merge.is_all_fill(np.array([0.0, -0.0]), zero)  # -0.0 is data, kept
    a = np.zeros(1000, dtype="i4")
    a[-1] = 1
    assert not merge.is_all_fill(a, np.array([0], dtype="i4"))
    assert merge.is_all_fill(np.full((4, 4), 42, dtype=">i8", order="F"), np.array([42], dtype=">i8"))


def test_all_fill_complex_nan_component():
    fill = np.array([complex(np.nan, 1.0)], dtype="c16")
    assert merge.is_all_fill(np.full(9, complex(np.nan, 1.0)), fill)
    assert not merge.is_all_fill(np.full(9, complex(np.nan, 2.0)), fill)


def test_merge_refuses_object_arrays_and_readonly_outputs():
    plan = OrthoPlan((4,), (2,), [(SLICE, 0, 1, 4)])
    with pytest.raises(TypeError):
        merge.gather(plan, 0, np.empty(2, dtype=object), np.empty(4, dtype=object))
    out = np.empty(4)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        merge.gather(plan, 0, np.zeros(2), out)
