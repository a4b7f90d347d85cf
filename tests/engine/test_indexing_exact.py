"""Selections touch exactly the chunks holding selected elements, and agree with NumPy.

Issue 25 ("never wrong data"): a write mixing several index arrays with a slice rewrote
every chunk of the arrays' orthogonal box (spurious chunks stored, and a concurrent
writer's update of a chunk without a selected element lost); a 1-d boolean next to other
index arrays raised instead of standing for its nonzero() positions; a value with fewer
dims than a selection with an integer index failed to broadcast. NumPy is the oracle.
"""

import re
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from model_support import DictMapping

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_CHUNK_KEY = re.compile(r"^\d+(\.\d+)*$")


class RecordingStore(DictMapping):
    """A dict store recording the chunk keys read, stored and deleted (whole values only).
    on_get, when set, runs after each chunk read (to interleave another writer)."""

    def __init__(self):
        self.d = {}
        self.gets, self.sets, self.dels = [], [], []
        self.on_get = None
        self._lock = threading.Lock()

    def reset(self):
        self.gets, self.sets, self.dels = [], [], []

    def __getitem__(self, k):
        if _CHUNK_KEY.match(k):
            with self._lock:
                self.gets.append(k)
            if self.on_get is not None:
                self.on_get(k)
        return self.d[k]

    def __setitem__(self, k, v):
        if _CHUNK_KEY.match(k):
            with self._lock:
                self.sets.append(k)
        self.d[k] = bytes(v)

    def __delitem__(self, k):
        if _CHUNK_KEY.match(k):
            with self._lock:
                self.dels.append(k)
        del self.d[k]

    def __contains__(self, k):
        return k in self.d


def selected_chunk_keys(shape, chunks, np_sel):
    """Keys of the chunks holding an element that the NumPy index np_sel selects."""
    grid = np.indices(shape)
    coords = [grid[d][np_sel].reshape(-1) // chunks[d] for d in range(len(shape))]
    return {".".join(str(int(c)) for c in t) for t in zip(*coords)}


def filled(shape, chunks, store=None, write_empty_chunks=True):
    """An int32 array with distinct values in every element (all chunks stored), and its
    NumPy twin; the store's records are then cleared."""
    store = RecordingStore() if store is None else store
    z = cs.zeros(shape, chunks=chunks, dtype="i4", store=store,
                 write_empty_chunks=write_empty_chunks)
    a = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape) + 1
    z[...] = a
    store.reset()
    return z, a, store


# ---------------------------------------------------------------- 1. exact chunks, mixed
def test_mixed_write_stores_only_chunks_with_selected_elements():
    N, M = 4, 3
    store = RecordingStore()
    z = cs.zeros((2 * N, 2, M), chunks=(N, 1, M), dtype="i4", store=store,
                 write_empty_chunks=True)
    a = np.zeros((2 * N, 2, M), dtype="i4")
    sel = (np.array([0, 2 * N - 1]), np.array([0, 1]), slice(None))
    z[sel] = 7
    a[sel] = 7
    # elements (0, 0, :) and (2N-1, 1, :): chunks 0.0.0 and 1.1.0, not 0.1.0 nor 1.0.0
    assert sorted(store.sets) == ["0.0.0", "1.1.0"]
    assert not store.dels
    np.testing.assert_array_equal(z[...], a)
    assert sorted(k for k in store.d if _CHUNK_KEY.match(k)) == ["0.0.0", "1.1.0"]


def test_mixed_read_fetches_only_chunks_with_selected_elements():
    N, M = 4, 3
    z, a, store = filled((2 * N, 2, M), (N, 1, M))
    sel = (np.array([0, 2 * N - 1]), np.array([0, 1]), slice(None))
    np.testing.assert_array_equal(z[sel], a[sel])
    assert sorted(set(store.gets)) == ["0.0.0", "1.1.0"]


def test_mixed_write_keeps_concurrent_update_of_other_chunk():
    """Another writer replacing a chunk with no selected element, between this write's
    reads and stores, keeps its data (the box read-modify-write put the old bytes back)."""
    N, M = 4, 3
    z, a, store = filled((2 * N, 2, M), (N, 1, M))
    other = cs.open_array(store, mode="r+")
    done = []

    def interleave(key):
        if key == "1.1.0" and not done:  # (the box read 0.1.0 before that)
            done.append(key)
            other[0:N, 1, :] = -9  # the whole chunk 0.1.0

    store.on_get = interleave
    sel = (np.array([0, 2 * N - 1]), np.array([0, 1]), slice(None))
    z[sel] = 7
    store.on_get = None
    assert done
    a[sel] = 7
    a[0:N, 1, :] = -9
    np.testing.assert_array_equal(z[...], a)


def test_mixed_box_still_used_when_exact():
    """When every chunk of the box holds a selected element the orthogonal box is kept."""
    from chunkstore.engine import indexing as ix
    s = ix.basic_or_fancy((np.array([0, 5]), np.array([[0], [1]]), slice(None)),
                          (8, 2, 3), (4, 1, 3))
    assert s.kind == "ortho" and s.post[0] == "index"
    s = ix.basic_or_fancy((np.array([0, 7]), np.array([0, 1]), slice(None)), (8, 2, 3),
                          (4, 1, 3))
    assert s.kind == "points" and s.shape == (2, 3)


@pytest.mark.parametrize("sel", [
    (np.array([0, 7]), slice(None), np.array([0, 1])),       # not adjacent: advanced first
    (slice(1, None, 2), np.array([[0], [7]]), np.array([0, 1])),  # adjacent, in place
    (np.array([[0, 7]]), 1, slice(None, None, -1)),         # int broadcast with the array
    (slice(None), np.array([7, 0, 7]), np.array([1, 0, 1])),  # duplicate points
    (np.array([7, 0]), slice(2, 0, -1), np.array([-1, 0])),
])
def test_mixed_points_match_numpy_and_touch_exact_chunks(sel):
    shape, chunks = (8, 8, 2), (4, 3, 1)
    z, a, store = filled(shape, chunks)
    expected = selected_chunk_keys(shape, chunks, sel)
    np.testing.assert_array_equal(z[sel], a[sel])
    assert set(store.gets) == expected
    store.reset()
    v = -np.arange(a[sel].size, dtype="i4").reshape(a[sel].shape) - 1
    z[sel] = v
    a[sel] = v
    assert set(store.sets) == expected and not store.dels
    np.testing.assert_array_equal(z[...], a)
    # a broadcast value (the last axis only) too
    z[sel] = v[(0,) * (v.ndim - 1)] * 3
    a[sel] = v[(0,) * (v.ndim - 1)] * 3
    np.testing.assert_array_equal(z[...], a)


def _oindex_np(a, sel):
    """NumPy's equivalent of a.oindex[sel]: one dimension at a time, last first (so an
    int dropping its axis leaves the earlier dimensions' positions as they are)."""
    for d in reversed(range(len(sel))):
        a = a[(slice(None),) * d + (sel[d],)]
    return a


def _oindex_keys(shape, chunks, sel):
    """Keys of the chunks an orthogonal selection touches: per dimension its chunks."""
    per = []
    for d, s in enumerate(sel):
        idx = np.arange(shape[d])[s]
        per.append(np.unique(np.atleast_1d(idx) // chunks[d]))
    if any(len(p) == 0 for p in per):
        return set()
    mesh = np.meshgrid(*per, indexing="ij")
    return {".".join(str(int(c)) for c in t) for t in zip(*(m.reshape(-1) for m in mesh))}


@pytest.mark.parametrize("kind,sel", [
    ("basic", (slice(1, 7, 5), slice(None), 1)),
    ("basic", (Ellipsis, slice(5, 6))),
    ("basic", (slice(3, 3), 0, 0)),
    ("basic", (np.array([0, 7]), 1, 1)),
    ("basic", (1, slice(None), np.array([1]))),
    ("basic", (np.array([True, False, False, False, False, False, False, True]), 1)),
    ("oindex", (np.array([0, 7]), slice(None), np.array([1]))),
    ("oindex", (np.array([True] + [False] * 7), 2, slice(None))),
    ("vindex", (np.array([0, 7]), np.array([0, 7]), np.array([1, 0]))),
    ("mask", None),
])
def test_every_selection_kind_touches_exact_chunks(kind, sel):
    shape, chunks = (8, 8, 2), (4, 3, 1)
    z, a, store = filled(shape, chunks)
    if kind == "mask":
        m = np.zeros(shape, dtype=bool)
        m[0, 0, 0] = m[7, 7, 1] = m[5, 4, 1] = True
        sel, np_sel, get, put = m, m, z.vindex.__getitem__, z.vindex.__setitem__
        expected = selected_chunk_keys(shape, chunks, m)
    elif kind == "oindex":
        np_sel = None
        get, put = z.oindex.__getitem__, z.oindex.__setitem__
        expected = _oindex_keys(shape, chunks, sel)
    elif kind == "vindex":
        np_sel = sel
        get, put = z.vindex.__getitem__, z.vindex.__setitem__
        expected = selected_chunk_keys(shape, chunks, sel)
    else:
        np_sel = sel
        get, put = z.__getitem__, z.__setitem__
        expected = selected_chunk_keys(shape, chunks, sel)
    want = _oindex_np(a, sel) if np_sel is None else a[np_sel]
    np.testing.assert_array_equal(get(sel), want)
    assert set(store.gets) == expected
    store.reset()
    put(sel, -5)
    assert set(store.sets) == expected and not store.dels
    if np_sel is None:
        b = np.arange(a.size).reshape(shape)
        touched = _oindex_np(b, sel).reshape(-1)
        a.reshape(-1)[touched] = -5
    else:
        a[np_sel] = -5
    np.testing.assert_array_equal(z[...], a)


# ---------------------------------------------------------------- property test, mixed
@st.composite
def mixed_cases(draw):
    """(shape, chunks, selection, value): a random mixed selection on a small array with at
    least one index array and one slice, and a value NumPy can assign to it."""
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, s)) for s in shape)
    kinds = draw(st.lists(st.sampled_from(["arr", "int", "slice"]), min_size=ndim,
                          max_size=ndim))
    a_pos = draw(st.integers(0, ndim - 1))
    s_pos = draw(st.integers(0, ndim - 2))
    s_pos += s_pos >= a_pos
    kinds[a_pos], kinds[s_pos] = "arr", "slice"
    bshape = tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=2)))
    sel = []
    for d, k in enumerate(kinds):
        n = shape[d]
        if k == "slice":
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            sel.append(slice(start, stop, step))
        elif k == "int":
            sel.append(draw(st.integers(-n, n - 1)))
        elif len(bshape) == 1 and bshape[0] <= n and draw(st.booleans()):
            # a 1-d boolean with as many True as the broadcast length: its nonzero()
            m = np.zeros(n, dtype=bool)
            m[draw(st.permutations(range(n)))[:bshape[0]]] = True
            sel.append(m)
        else:
            # a shape broadcasting to bshape: trailing axes, each full or 1
            k_dims = draw(st.integers(0, len(bshape)))
            sub = tuple(b if draw(st.booleans()) else 1 for b in bshape[len(bshape) - k_dims:])
            vals = draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(sub)),
                                 max_size=int(np.prod(sub))))
            sel.append(np.array(vals, dtype=np.int64).reshape(sub))
    if draw(st.booleans()):
        # an Ellipsis standing for no dimension: between two advanced indices it parts them
        # (NumPy then puts the broadcast axes first)
        sel.insert(draw(st.integers(0, len(sel))), Ellipsis)
    sel = tuple(sel)
    rshape = np.empty(shape, dtype=np.uint8)[sel].shape
    # a value NumPy broadcasts: leading axes dropped, some axes 1, or a scalar
    keep = draw(st.integers(0, len(rshape)))
    vshape = tuple(n if draw(st.booleans()) else 1 for n in rshape[len(rshape) - keep:])
    value = -1 - np.arange(int(np.prod(vshape)), dtype="i4").reshape(vshape)
    if draw(st.booleans()):
        value = value.reshape((1,) + vshape)  # NumPy strips leading unit axes
    return shape, chunks, sel, value


@SETTINGS
@given(mixed_cases())
def test_mixed_selections_property(case):
    shape, chunks, sel, value = case
    z, a, store = filled(shape, chunks)
    expected = selected_chunk_keys(shape, chunks, sel)
    np.testing.assert_array_equal(z[sel], a[sel])
    assert set(store.gets) == expected
    store.reset()
    z[sel] = value
    a[sel] = value
    assert set(store.sets) == expected and not store.dels
    np.testing.assert_array_equal(z[...], a)


# ---------------------------------------------------------------- 2. 1-d boolean + arrays
def test_bool_next_to_index_array_reads_and_writes_as_numpy():
    z, a, _ = filled((3, 2), (2, 1))
    m = np.array([True, False, True])
    np.testing.assert_array_equal(z[m, [0, 1]], a[m, [0, 1]])
    z[m, [0, 1]] = [40, 50]
    a[m, [0, 1]] = [40, 50]
    np.testing.assert_array_equal(z[...], a)
    z[m, np.array([[1], [0]])] = 9
    a[m, np.array([[1], [0]])] = 9
    np.testing.assert_array_equal(z[...], a)
    np.testing.assert_array_equal(z[m, np.array([[1], [0]])], a[m, np.array([[1], [0]])])


def test_bool_with_arrays_and_slice_as_numpy():
    z, a, _ = filled((4, 3, 5), (3, 2, 2))
    sel = (np.array([True, False, True, False]), slice(None), np.array([4, 0]))
    np.testing.assert_array_equal(z[sel], a[sel])
    z[sel] = np.array([1, 2, 3])
    a[sel] = np.array([1, 2, 3])
    np.testing.assert_array_equal(z[...], a)
    sel = (slice(1, None), np.array([False, True, True]), np.array([[3], [1]]))
    np.testing.assert_array_equal(z[sel], a[sel])


@pytest.mark.parametrize("sel", [
    (np.array([True, False, True]), [0, 1, 1]),     # 2 positions against 3
    (np.array([True, False]), [0, 1]),              # wrong length for the dimension
    (np.array([True, True, True, False]), [0, 1]),
    (np.array([True, False, True]), slice(None), [0, 1, 1]),
    (np.array([True, False]), slice(None), [0]),    # wrong length, next to a slice
])
def test_bool_with_arrays_refused_as_numpy(sel):
    shape = (3, 2) if len(sel) == 2 else (3, 4, 3)
    z, a, _ = filled(shape, (2, 1) + (2,) * (len(shape) - 2))
    with pytest.raises(IndexError):
        a[sel]
    with pytest.raises(IndexError):
        z[sel]
    with pytest.raises(IndexError):
        z[sel] = 1


# ---------------------------------------------------------------- 3. value broadcasting
def _setters(z):
    return {"basic": z.__setitem__, "oindex": z.oindex.__setitem__,
            "vindex": z.vindex.__setitem__}


@pytest.mark.parametrize("kind,sel,np_sel", [
    ("basic", (slice(None), slice(None), 1), None),
    ("basic", (1, slice(None), slice(None)), None),
    ("basic", (slice(None), 2, slice(None)), None),
    ("basic", (Ellipsis, 0), None),
    ("basic", (slice(None), None, slice(None), 1), None),
    ("basic", (0, slice(None), np.array([0, 1])), None),     # advanced axis moved first
    ("basic", (np.array([0, 2]), slice(None), 1), None),
    ("basic", (np.array([0, 2]), np.array([1, 3]), slice(None)), None),  # points
    ("basic", (np.array([0, 2]), np.array([0, 1]), slice(None)), None),  # exact box
    ("oindex", (slice(None), slice(None), 1), (slice(None), slice(None), 1)),
    ("oindex", (np.array([0, 2]), slice(None), 1), (np.array([0, 2]), slice(None), 1)),
    ("vindex", (np.array([[0], [2]]), np.array([1, 3]), np.array([0, 1])), None),
])
@pytest.mark.parametrize("vshape", ["last", "ones", "lead1", "full"])
def test_value_broadcasts_as_numpy(kind, sel, np_sel, vshape):
    z, a, _ = filled((3, 4, 2), (2, 3, 1))
    target = a[sel if np_sel is None else np_sel].shape
    if vshape == "last":
        v = np.arange(target[-1]) + 100
    elif vshape == "ones":
        v = (np.arange(target[-1]) + 100).reshape((1,) * (len(target) - 1) + target[-1:])
    elif vshape == "lead1":
        v = (np.arange(int(np.prod(target))) + 100).reshape((1, 1) + target)
    else:
        v = np.arange(int(np.prod(target))).reshape(target) + 100
    _setters(z)[kind](sel, v)
    a[sel if np_sel is None else np_sel] = v
    np.testing.assert_array_equal(z[...], a)


def test_issue_example_int_index_with_short_value():
    z = cs.zeros((3, 4, 2), chunks=(2, 2, 2), dtype="i4")
    a = np.zeros((3, 4, 2), dtype="i4")
    z[:, :, 1] = np.array([5, 6, 7, 8])
    a[:, :, 1] = np.array([5, 6, 7, 8])
    np.testing.assert_array_equal(z[...], a)


def test_value_broadcast_for_mask_and_fields():
    z, a, _ = filled((3, 4), (2, 3))
    m = a % 3 == 0
    z.vindex[m] = np.array([7])
    a[m] = np.array([7])
    np.testing.assert_array_equal(z[...], a)
    dt = np.dtype([("x", "i4"), ("y", "f8")])
    s = cs.zeros((3, 4), chunks=(2, 3), dtype=dt)
    r = np.zeros((3, 4), dtype=dt)
    s.set_basic_selection((slice(None), 1), np.array([1, 2, 3]), fields="x")
    r["x"][:, 1] = np.array([1, 2, 3])
    np.testing.assert_array_equal(s[...], r)


@st.composite
def basic_value_cases(draw):
    """(shape, chunks, selection of ints and slices, value) with a value of any shape near
    the selection's: broadcastable or not."""
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, s)) for s in shape)
    sel = []
    for n in shape:
        if draw(st.booleans()):
            sel.append(draw(st.integers(-n, n - 1)))
        else:
            sel.append(slice(draw(st.one_of(st.none(), st.integers(-n, n))),
                             draw(st.one_of(st.none(), st.integers(-n, n))),
                             draw(st.sampled_from([None, 1, 2, -1]))))
    if draw(st.booleans()) and len(sel) > 1:
        sel = [Ellipsis] + sel[draw(st.integers(1, len(sel) - 1)):]
    sel = tuple(sel)
    rshape = np.empty(shape, dtype=np.uint8)[sel].shape
    keep = draw(st.integers(0, len(rshape) + 1))
    vshape = [draw(st.sampled_from([n, 1, n + 1])) for n in
              ((1,) * max(0, keep - len(rshape)) + rshape)[-keep:]] if keep else []
    value = np.arange(int(np.prod(vshape)), dtype="i4").reshape(vshape) - 50
    return shape, chunks, sel, value


@SETTINGS
@given(basic_value_cases())
def test_value_broadcast_property(case):
    """Any value NumPy accepts for a[sel] = value is written alike; any it refuses with
    ValueError is refused with ValueError, and the array is left as it was."""
    shape, chunks, sel, value = case
    z, a, _ = filled(shape, chunks)
    try:
        a[sel] = value
    except ValueError:
        with pytest.raises(ValueError):
            z[sel] = value
    else:
        z[sel] = value
    np.testing.assert_array_equal(z[...], a)


def test_index_arrays_keep_numpy_meaning_where_zarr3_differs():
    """README Differences: several index arrays broadcast as NumPy's (zarr-python 3 reads
    two boolean masks as np.ix_ and refuses integer arrays next to implicit slices)."""
    a = np.arange(125.0).reshape(5, 5, 5)
    z = cs.array(a, chunks=(2, 2, 2))
    m1 = np.array([1, 0, 1, 0, 1], bool)
    m2 = np.array([0, 1, 1, 0, 1], bool)
    for sel in ([[1, 2, 3], [1, 2, 3]], (Ellipsis, [1, 2, 3]), (m1, m2), (m1, slice(None), m2)):
        np.testing.assert_array_equal(z[tuple(sel)], a[tuple(sel)])
    assert z[m1, m2].shape == (3, 5)     # points of both masks; np.ix_ would give (3, 3, 5)
    for sel, v in ((([1, 2, 3], [1, 2, 3]), -1.0), ((Ellipsis, [0, 4]), -2.0), ((m1, m2), -3.0)):
        z[sel] = v
        a[sel] = v
    np.testing.assert_array_equal(z[...], a)
    b = np.arange(10000).reshape(1000, 10)
    zb = cs.array(b, chunks=(300, 3))
    with pytest.raises(IndexError):
        zb[np.tile([True, False], 500), np.tile([True, False], 5)]  # NumPy: no broadcast
    with pytest.raises(IndexError):
        b[np.tile([True, False], 500), np.tile([True, False], 5)]


_A = np.arange(4 * 5 * 6).reshape(4, 5, 6)
NEWAXIS_KEYS = [
    (None, [0, 1]), ([0, 1], None), (None, [0, 2], slice(None), [1, 3]),
    ([0, 1], None, [1, 2]), (0, None, [1, 2]), (Ellipsis, None, [1, 2]),
    (None, Ellipsis, [0, 5]), ([1, 0], [2, 2], None),
    (np.array([[0, 1], [2, 3]]), None, slice(1, 3)), (None, None, [3], [1], [2]),
    (slice(None), None, [0, 1], None, [2, 3]), (_A[:, :, 0] > 30, None),
    (None, _A[:, :, 0] > 30, [1]), (None, 1, slice(None), [1, 2]),
]


ELLIPSIS_KEYS = [
    (slice(None), [0, 1], Ellipsis, 2), ([1, 2], Ellipsis, [0, 4], [1, 2]),
    (0, Ellipsis, [1, 2], slice(None)), (slice(None), 0, Ellipsis, [1, 2]),
    (None, [0, 1], Ellipsis, 1, 2), ([0, 3], Ellipsis, slice(1, 4), [2, 5]),
    (_A[:, :, 0] > 30, Ellipsis, [1]), ([[0], [1]], 2, Ellipsis, [0, 1, 2]),
]


@pytest.mark.parametrize("key", ELLIPSIS_KEYS, ids=range(len(ELLIPSIS_KEYS)))
def test_an_ellipsis_parts_advanced_indices_as_numpy(key):
    """An Ellipsis between advanced indices parts them even where it stands for no
    dimension: NumPy puts the broadcast axes first (the values came back transposed, and
    writes landed transposed)."""
    z = cs.array(_A, chunks=(2, 3, 4))
    want = _A[key]
    got = z[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    value = np.arange(want.size).reshape(want.shape) + 1000
    model = _A.copy()
    model[key] = value
    w = cs.array(_A, chunks=(2, 3, 4))
    w[key] = value
    np.testing.assert_array_equal(w[...], model)


@pytest.mark.parametrize("key", NEWAXIS_KEYS, ids=range(len(NEWAXIS_KEYS)))
def test_none_beside_index_arrays_and_masks_as_numpy(key):
    """None (np.newaxis) beside index arrays or masks: NumPy's shape and axis order (the
    advanced indices' axes go first where a None parts them), for reads and for writes of
    arrays and scalars (duplicates: the last value wins)."""
    z = cs.array(_A, chunks=(2, 3, 4))
    want = _A[key]
    got = z[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    for value in (np.arange(want.size).reshape(want.shape) + 1000, 7):
        model = _A.copy()
        model[key] = value
        w = cs.array(_A, chunks=(2, 3, 4))
        w[key] = value
        np.testing.assert_array_equal(w[...], model)


def test_a_zero_d_boolean_index_is_refused_with_what_to_use_instead():
    z = cs.array(np.arange(3))
    for key in (True, (False, 0), (Ellipsis, np.bool_(True))):
        with pytest.raises(IndexError, match="0-d boolean index.*z\\[None\\]"):
            z[key]
        with pytest.raises(IndexError, match="0-d boolean index"):
            z[key] = 1
    np.testing.assert_array_equal(z[...], np.arange(3))


def test_field_names_as_numpy_reads_them():
    # a one-name list is a structured array of that field (NumPy's a[["f"]], zarr-python
    # 2's fields=["f"]); it came back as the bare field; fields=[] is every field
    a = np.array([(b"aaa", 1, 4.5), (b"bbb", 2, 8.5)],
                 dtype=[("foo", "S3"), ("bar", "<i4"), ("baz", "<f8")])
    z = cs.array(a, chunks=1)
    for get in (lambda f: z.get_basic_selection(..., fields=f),
                lambda f: z.get_orthogonal_selection(([1, 0],), fields=f)[::-1],
                lambda f: z.get_coordinate_selection([0, 1], fields=f)):
        one = get(["foo"])
        assert one.dtype == np.dtype([("foo", "S3")]) and one.tolist() == a[["foo"]].tolist()
        assert get("foo").dtype == np.dtype("S3") and get("foo").tolist() == [b"aaa", b"bbb"]
        assert get([]).dtype == a.dtype and get([]).tolist() == a.tolist()
    assert z[["foo"]].tolist() == a[["foo"]].tolist() and z["foo"].dtype == np.dtype("S3")
    assert z["foo", 1] == b"bbb" and z[1, "bar"] == 2
    # out= with NumPy's own (padded) layout of those fields
    out = np.zeros_like(a[["foo", "bar"]])
    z.get_basic_selection(..., out=out, fields=["foo", "bar"])
    assert out.tolist() == a[["foo", "bar"]].tolist()
    # writes: one name takes values of the field, a list takes records of those fields
    z.set_basic_selection(0, b"zz", fields="foo")
    z.set_basic_selection(1, np.array((b"yy",), dtype=[("foo", "S3")]), fields=["foo"])
    z.set_basic_selection(..., a, fields=[])  # (every field: whole records)
    assert z[:].tolist() == a.tolist()


@pytest.mark.parametrize("key", [([0, 1], slice(1, 3)), (Ellipsis, [0, 1]), ([0], None)])
def test_vindex_names_a_slice_ellipsis_or_none_as_what_it_does_not_take(key):
    z = cs.array(np.arange(12).reshape(3, 4))
    with pytest.raises(IndexError, match="takes an integer array .* for every dimension"):
        z.vindex[key]


SUBARRAY = np.dtype([("a", "<i4"), ("b", "<f8", (2,)), ("c", "<i2", (2, 3))])


@pytest.mark.parametrize("key", [
    (None, 1, [0, 3]),
    ([0, 2], None, slice(1, 3)),
    (np.array([True, False, True]), None),
    (None, [2, 0], None, [1, 3]),
    (slice(None), None, np.array([[0], [3]])),
])
@pytest.mark.parametrize("field", ["a", "b", "c"])
def test_none_beside_index_arrays_with_a_subarray_field(key, field):
    """A sub-array field's own axes trail NumPy's result axes, None and index arrays
    included: reads and writes equal NumPy's (both raised: 'axes don't match array').
    (Zarr v2: v3 has no sub-array fields.)"""
    a = np.zeros((3, 4), dtype=SUBARRAY)
    a["a"] = np.arange(12).reshape(3, 4)
    a["b"] = np.arange(24).reshape(3, 4, 2)
    a["c"] = np.arange(72).reshape(3, 4, 2, 3)
    z = cs.array(a, chunks=(2, 2), zarr_format=2)
    np.testing.assert_array_equal(z[key + (field,)], a[key][field])
    want = a.copy()
    value = np.arange(want[key][field].size, dtype="f8").reshape(want[key][field].shape) + 100
    want[field][key] = value  # (NumPy: the field's view, then the key)
    z[key + (field,)] = value
    np.testing.assert_array_equal(z[:], want)


# --- values NumPy refuses, refused before anything is stored (found by a NumPy-oracle fuzz)

SCALARS_NUMPY_REFUSES = [
    ("i2", np.int64(70000)), ("i4", np.float64("nan")), ("i4", np.float32("inf")),
    ("i4", np.float64(1e20)), ("i4", np.uint64(2**64 - 1)), ("i8", np.float64("-inf")),
]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("dtype,value", SCALARS_NUMPY_REFUSES)
@pytest.mark.parametrize("key", [1, slice(0, 2), Ellipsis])
def test_a_numpy_scalar_that_does_not_fit_is_refused_as_numpy_refuses_it(fmt, dtype, value,
                                                                          key):
    # asarray(value, dtype) casts a NumPy scalar unsafely (70000 -> 4464, NaN -> INT_MIN);
    # NumPy's setitem converts it as a Python number and raises
    ref = np.arange(3, dtype=dtype)
    with pytest.raises((OverflowError, ValueError)) as want:
        ref[key] = value
    a = cs.open_array({}, mode="w", shape=(3,), chunks=(2,), dtype=dtype, zarr_format=fmt)
    a[:] = np.arange(3, dtype=dtype)
    with pytest.raises(want.type, match="array '/'"):
        a[key] = value
    np.testing.assert_array_equal(a[:], np.arange(3, dtype=dtype))


def test_numpy_scalars_that_fit_and_zero_d_arrays_store_as_numpy():
    for dtype, value in [("i2", np.int64(-7)), ("f4", np.float64(1e300)), ("u1", np.uint64(5)),
                         ("i2", np.array(70000)), ("i4", np.str_("12")), ("?", np.int8(3))]:
        ref = np.zeros(3, dtype=dtype)
        with np.errstate(all="ignore"):
            ref[0:2] = value
            a = cs.open_array({}, mode="w", shape=(3,), chunks=(2,), dtype=dtype)
            a[0:2] = value
        np.testing.assert_array_equal(a[:], ref)


@pytest.mark.parametrize("dtype,value", [("S5", "é"), ("U3", b"\xff")])
def test_text_that_cannot_be_converted_raises_a_value_error_naming_the_array(dtype, value):
    ref = np.zeros(3, dtype=dtype)
    with pytest.raises(ValueError):  # (NumPy: UnicodeEncodeError / UnicodeDecodeError)
        ref[1] = value
    a = cs.open_array({}, mode="w", shape=(3,), chunks=(2,), dtype=dtype, fill_value=None)
    a[:] = np.array(["ab", "c", "d"], dtype=dtype)
    with pytest.raises(ValueError, match=f"array '/' of dtype .{dtype}"):
        a[1] = value
    np.testing.assert_array_equal(a[:], np.array(["ab", "c", "d"], dtype=dtype))


@pytest.mark.parametrize("value", [[[1]], [[1, 2]], [[[5]]]])
def test_a_list_nested_deeper_than_the_selection_is_refused_as_numpy_refuses_it(value):
    ref = np.zeros(2)
    with pytest.raises(ValueError):
        ref[0:2] = value
    a = cs.open_array({}, mode="w", shape=(2,), chunks=(2,), dtype="f8")
    with pytest.raises(ValueError, match="nested"):
        a[0:2] = value
    a[0:2] = np.ones((1, 1, 2))  # an array's leading unit dimensions drop, as in NumPy
    np.testing.assert_array_equal(a[:], np.ones(2))


@pytest.mark.parametrize("key", [(10, np.array([], dtype=int)), (np.array([], dtype=int), 5),
                                 (np.int64(-9), np.zeros((0, 2), dtype=int))])
def test_an_out_of_bounds_index_beside_an_empty_index_array_is_refused(key):
    ref = np.zeros((8, 3))
    with pytest.raises(IndexError):
        ref[key]
    a = cs.open_array({}, mode="w", shape=(8, 3), chunks=(2, 2), dtype="f8")
    for op in (lambda: a[key], lambda: a.vindex[key], lambda: a.__setitem__(key, 1.0),
               lambda: a.vindex.__setitem__(key, 1.0)):
        with pytest.raises(IndexError, match="out of bounds for dimension"):
            op()


@pytest.mark.parametrize("fmt", [2, 3])
def test_vindex_write_of_a_zero_d_string_array_stores_the_string(fmt):
    a = cs.open_array({}, mode="w", shape=(), chunks=(), dtype=str, zarr_format=fmt)
    a.vindex[()] = "a"
    assert a[()] == "a"
    b = cs.open_array({}, mode="w", shape=(2,), chunks=(1,), dtype=str, zarr_format=fmt)
    b.vindex[[1]] = "xy"
    assert b[1] == "xy"


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_0d_arrays_mask_selects_its_element_as_numpy(fmt):
    """np.nonzero of a 0-d mask raised NumPy's "Calling nonzero on 0d arrays" error."""
    z = cs.create_array({}, shape=(), dtype="i4", zarr_format=fmt)
    z[...] = 5
    a = np.array(5, dtype="i4")
    for m in (np.array(True), np.array(False)):
        np.testing.assert_array_equal(z.vindex[m], a[m])
        np.testing.assert_array_equal(z.get_mask_selection(m), a[m])
    z.set_mask_selection(np.array(True), 7)
    z.vindex[np.array(False)] = 9
    assert z[()] == 7


def test_bad_coordinate_and_field_selections_name_the_array():
    z = cs.create_array({}, shape=(4, 4), dtype="i4", name="named")
    with pytest.raises(IndexError, match="'/named'"):
        z.vindex[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="'/named'"):
        z.get_basic_selection(..., fields="a")
    s = cs.create_array({}, shape=(4,), dtype=[("a", "i4")], name="rec")
    with pytest.raises(IndexError, match="'/rec'"):
        s.get_basic_selection(..., fields="nope")
    with pytest.raises(IndexError, match="'/rec'"):
        s.set_basic_selection(..., 1, fields="nope")
