"""chunkstore reads every golden Zarr v2 store written by zarr-python 2.18 exactly.

The expectations (.npy/.npz) and descriptive fields come from the fixture manifest; nothing
here is derived from chunkstore's own output.
"""

from __future__ import annotations

import ast
import zlib

import numpy as np
import pytest

import chunkstore as cs
from conftest import (FIXTURES_V2, array_cases_v2, assert_same, chunk_files, group_cases_v2,
                      manifest_value)

ARRAY_CASES = array_cases_v2()
GROUP_CASES = group_cases_v2()
# zip/sqlite/lmdb group stores are covered once those stores are implemented.
DIR_GROUP_CASES = [c for c in GROUP_CASES if c["store"] not in ("zip", "sqlite", "lmdb")]

pytestmark = pytest.mark.skipif(not ARRAY_CASES, reason=f"no fixtures at {FIXTURES_V2}")


def _ids(cases):
    return [c["name"] for c in cases]


def _manifest_dtype(text):
    if text.startswith("["):
        return np.dtype(ast.literal_eval(text))
    return np.dtype(text)


def _expected(case):
    return np.load(FIXTURES_V2 / case["expected"], allow_pickle=True)


def _open(case, **kwargs):
    return cs.open_array(str(FIXTURES_V2 / case["path"]), mode="r", path=case["array"], **kwargs)


def _fill_equal(actual, expected, dtype):
    if expected is None:
        return actual is None
    if actual is None:
        return False
    if dtype.hasobject:
        return type(actual) is type(expected) and actual == expected
    # Bytewise in the array's dtype: NaN == NaN, and -0.0 != 0.0.
    return (np.array(actual, dtype=dtype).tobytes() == np.array(expected, dtype=dtype).tobytes())


# ------------------------------------------------------------------------------------ arrays

@pytest.mark.parametrize("case", ARRAY_CASES, ids=_ids(ARRAY_CASES))
def test_array_reads_as_expected(case):
    z = _open(case)
    expected = _expected(case)
    data = z[...]
    assert isinstance(data, np.ndarray)
    assert_same(data, expected)
    # the same through the other whole-array entry points
    assert_same(np.asarray(z), expected)
    assert_same(z.get_basic_selection(...), expected)


@pytest.mark.parametrize("case", ARRAY_CASES, ids=_ids(ARRAY_CASES))
def test_array_metadata_matches_manifest(case):
    z = _open(case)
    dtype = _manifest_dtype(case["dtype"])
    assert z.dtype == dtype
    assert z.shape == tuple(case["shape"])
    assert z.chunks == tuple(case["chunks"])
    assert z.order == case["order"]
    assert z.ndim == len(case["shape"])
    assert z.read_only
    fill = manifest_value(case["fill_value"])
    assert _fill_equal(z.fill_value, fill, dtype), (z.fill_value, fill)
    if case["compressor"] is None:
        assert z.compressor is None
    else:
        assert z.compressor.get_config() == case["compressor"]
    filters = [f.get_config() for f in (z.filters or [])]
    assert filters == (case["filters"] or [])


@pytest.mark.parametrize("case", [c for c in ARRAY_CASES if c["missing_chunks"]],
                         ids=_ids([c for c in ARRAY_CASES if c["missing_chunks"]]))
def test_missing_chunks_read_as_fill(case):
    z = _open(case)
    root = FIXTURES_V2 / case["path"] / case["array"]
    stored = chunk_files(root)
    assert 0 < len(stored) < z.nchunks  # the fixture really has absent chunks
    assert z.nchunks_initialized == len(stored)
    fill = manifest_value(case["fill_value"])
    data = z[...]
    # every element of an absent chunk is the fill value
    present = {tuple(int(p) for p in k.replace("/", ".").split(".")) for k in stored}
    for coords in np.ndindex(z.cdata_shape):
        if coords in present:
            continue
        region = tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, z.chunks))
        block = data[region]
        assert block.size
        want = np.full(block.shape, fill, dtype=z.dtype)
        assert_same(block, want)
        assert_same(z.blocks[coords], want)


@pytest.mark.parametrize("case", ARRAY_CASES, ids=_ids(ARRAY_CASES))
def test_nchunks_initialized_counts_files(case):
    z = _open(case)
    root = FIXTURES_V2 / case["path"] / case["array"]
    assert z.nchunks_initialized == len(chunk_files(root))
    assert z.nchunks == int(np.prod([-(-s // c) for s, c in zip(z.shape, z.chunks)]))


# ------------------------------------------------------------------------------------ groups

@pytest.mark.parametrize("case", DIR_GROUP_CASES, ids=_ids(DIR_GROUP_CASES))
def test_group_arrays_read_as_expected(case):
    store_dir = str(FIXTURES_V2 / case["path"])
    with np.load(FIXTURES_V2 / case["expected"], allow_pickle=True) as npz:
        expected = {k: npz[k] for k in npz.files}
    assert case["arrays"]
    for path in case["arrays"]:
        z = cs.open_array(store_dir, mode="r", path=path)
        assert z.path == path
        assert z.name == "/" + path
        assert_same(z[...], expected[path.replace("/", "__")])
        assert dict(z.attrs) == case["attrs"].get(path, {})


@pytest.mark.parametrize("case", DIR_GROUP_CASES, ids=_ids(DIR_GROUP_CASES))
def test_group_paths_are_not_arrays(case):
    store_dir = str(FIXTURES_V2 / case["path"])
    for path in case["groups"]:
        with pytest.raises(cs.ArrayNotFoundError):
            cs.open_array(store_dir, mode="r", path=path)


# ------------------------------------------------------------------------------ selections

def _selection_cases():
    wanted = ["dtype_le_i4", "order_F", "order_F_3d", "shape_4d", "nested_separator",
              "fill_nan_missing", "fill_42_missing", "object_vlen_utf8", "dtype_structured",
              "filter_delta", "shape_1d", "dtype_be_f8", "chunks_larger_than_shape"]
    by_name = {c["name"]: c for c in ARRAY_CASES}
    return [by_name[n] for n in wanted if n in by_name]


SEL_CASES = _selection_cases()


def _random_slice(rng, n):
    start = int(rng.integers(-n, n + 1))
    stop = int(rng.integers(-n, n + 1))
    step = int(rng.choice([1, 1, 2, 3, -1, -2, 5]))
    return slice(start, stop, step)


@pytest.mark.parametrize("case", SEL_CASES, ids=_ids(SEL_CASES))
def test_basic_selections_match_numpy(case):
    z = _open(case)
    e = _expected(case)
    rng = np.random.default_rng(zlib.crc32(case["name"].encode()))
    for _ in range(25):
        sel = []
        for n in e.shape:
            r = rng.random()
            if r < 0.25:
                sel.append(int(rng.integers(-n, n)))
            elif r < 0.35:
                sel.append(slice(None))
            else:
                sel.append(_random_slice(rng, n))
        sel = tuple(sel)
        assert_same(np.asarray(z[sel]), np.asarray(e[sel]))
    # ellipsis forms and single integers
    assert_same(z[..., -1], e[..., -1])
    assert_same(z[0, ...], e[0, ...])
    assert_same(z[::-1], e[::-1])


@pytest.mark.parametrize("case", SEL_CASES, ids=_ids(SEL_CASES))
def test_orthogonal_selections_match_numpy(case):
    z = _open(case)
    e = _expected(case)
    rng = np.random.default_rng(1 + zlib.crc32(case["name"].encode()))
    for _ in range(15):
        sel = []
        for n in e.shape:
            r = rng.random()
            if r < 0.35:  # unsorted ints, with repeats and negatives
                sel.append(rng.integers(-n, n, size=int(rng.integers(1, 2 * n + 1))))
            elif r < 0.6:
                sel.append(rng.random(n) < 0.5)
            elif r < 0.75:
                sel.append(int(rng.integers(-n, n)))
            else:
                sel.append(_random_slice(rng, n))
        sel = tuple(sel)
        want = e[np.ix_(*[_as_index(s, n) for s, n in zip(sel, e.shape)])]
        want = want.reshape([len(_as_index(s, n)) for s, n in zip(sel, e.shape)
                             if not isinstance(s, int)])
        assert_same(np.asarray(z.oindex[sel]), want)
        assert_same(np.asarray(z.get_orthogonal_selection(sel)), want)


def _as_index(s, n):
    if isinstance(s, int):
        return np.array([s])
    if isinstance(s, slice):
        return np.arange(n)[s]
    return np.asarray(s) if np.asarray(s).dtype != bool else np.flatnonzero(s)


@pytest.mark.parametrize("case", SEL_CASES, ids=_ids(SEL_CASES))
def test_vindex_and_mask_selections_match_numpy(case):
    z = _open(case)
    e = _expected(case)
    rng = np.random.default_rng(2 + zlib.crc32(case["name"].encode()))
    for _ in range(10):
        npts = int(rng.integers(0, 40))
        coords = tuple(rng.integers(-n, n, size=npts) for n in e.shape)
        assert_same(np.asarray(z.vindex[coords]), e[coords])
        assert_same(np.asarray(z.get_coordinate_selection(coords)), e[coords])
        # multi-dimensional coordinate arrays keep their shape
        coords2 = tuple(rng.integers(0, n, size=(3, 4)) for n in e.shape)
        assert_same(np.asarray(z.vindex[coords2]), e[coords2])
        m = rng.random(e.shape) < 0.3
        assert_same(np.asarray(z.vindex[m]), e[m])
        assert_same(np.asarray(z.get_mask_selection(m)), e[m])


@pytest.mark.parametrize("case", SEL_CASES, ids=_ids(SEL_CASES))
def test_block_selections_match_numpy(case):
    z = _open(case)
    e = _expected(case)
    for coords in np.ndindex(z.cdata_shape):
        region = tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, z.chunks))
        assert_same(z.blocks[coords], e[region])
    # a slice of blocks along the first dimension
    nb = z.cdata_shape[0]
    lo, hi = (1, nb) if nb > 1 else (0, 1)
    want = e[lo * z.chunks[0]: hi * z.chunks[0]]
    assert_same(z.blocks[lo:hi], want)
    assert_same(z.get_block_selection(slice(lo, hi)), want)
    assert_same(z.blocks[-1], e[(nb - 1) * z.chunks[0]:])


def test_fancy_getitem_matches_numpy():
    by_name = {c["name"]: c for c in ARRAY_CASES}
    case = by_name["dtype_le_i4"]
    z, e = _open(case), _expected(case)
    idx = np.array([5, -1, 0, 5, 22])
    assert_same(z[idx], e[idx])
    assert_same(z[:, idx[:3] % 17], e[:, idx[:3] % 17])
    assert_same(z[idx, 3], e[idx, 3])
    assert_same(z[e[:, 0] > 0], e[e[:, 0] > 0])
    assert_same(z[idx, idx % 17], e[idx, idx % 17])


def test_getitem_with_nd_boolean_mask_matches_numpy():
    by_name = {c["name"]: c for c in ARRAY_CASES}
    for name in ("dtype_le_i4", "order_F_3d"):
        z, e = _open(by_name[name]), _expected(by_name[name])
        m = e % 3 == 0
        assert_same(z[m], e[m])        # NumPy: a boolean array spanning all dimensions
        if e.ndim == 3:
            assert_same(z[m[..., 0]], e[m[..., 0]])  # spanning the first two dimensions
            with pytest.raises(IndexError):          # NumPy refuses a mask of the wrong shape
                e[m[0]]
            with pytest.raises(IndexError, match="does not match"):
                z[m[0]]
            assert_same(z[1, m[0, :, 0]], e[1, m[0, :, 0]])


@pytest.mark.parametrize("case", [c for c in SEL_CASES if c["name"] == "dtype_structured"],
                         ids=["dtype_structured"])
def test_structured_fields_from_fixture(case):
    z = _open(case)
    e = _expected(case)
    for name in e.dtype.names:
        assert_same(z[name], e[name])
        assert_same(z.get_basic_selection(slice(2, 9), fields=name), e[2:9][name])
    assert_same(z[3:5, "x"], e[3:5]["x"])
    got = z.get_basic_selection(..., fields=["x", "s"])
    assert got.dtype.names == ("x", "s")
    assert_same(got["x"], e["x"])
    assert_same(got["s"], e["s"])


@pytest.mark.parametrize("case", [c for c in ARRAY_CASES if c["missing_chunks"]],
                         ids=_ids([c for c in ARRAY_CASES if c["missing_chunks"]]))
def test_missing_chunks_error_mode_on_fixture(case):
    z = _open(case, missing_chunks="error")
    e = _expected(case)
    with pytest.raises(cs.ChunkNotFoundError):
        z[...]
    stored = chunk_files(FIXTURES_V2 / case["path"] / case["array"])
    first = tuple(int(p) for p in stored[0].replace("/", ".").split("."))
    assert_same(z.blocks[first], e[tuple(slice(c * n, (c + 1) * n)
                                         for c, n in zip(first, z.chunks))])


@pytest.mark.parametrize("case", [c for c in ARRAY_CASES if not c["missing_chunks"]
                                  and c["shape"] and 0 not in c["shape"]][:12],
                         ids=lambda c: c["name"])
def test_fixture_read_into_out(case):
    z = _open(case)
    e = _expected(case)
    out = np.empty(e.shape, dtype=e.dtype)
    assert z.get_basic_selection(..., out=out) is out
    assert_same(out, e)
