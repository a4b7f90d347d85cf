"""Property-based oracle: every selection kind, on get and on set, must match NumPy exactly.

Each example builds a random array (0-d to 4-d, zero-length dims, chunks larger than the
array, many dtypes, fill values, C/F order), writes part of it so some chunks stay missing,
then applies the same operation to a NumPy reference and to the chunkstore array.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from model_support import draw_ortho, ortho_ix

DTYPES = ["|b1", "|i1", "<u2", "<i4", ">i4", "<i8", "<f2", "<f4", ">f8", "<c8", "<c16",
          "|S3", "<U2", "<M8[s]", "<m8[ms]", [("a", "<i2"), ("b", ">f4", (2,))]]

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check(got, expected):
    """Equal values and dtype; NaN equals NaN, also inside structured fields."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if expected.dtype.names:
        for name in expected.dtype.names:
            check(got[name], expected[name])
    else:
        np.testing.assert_array_equal(got, expected)


def random_values(rng, dtype, shape):
    dtype = np.dtype(dtype)
    if dtype.names:
        out = np.zeros(shape, dtype)
        for name in dtype.names:
            out[name] = random_values(rng, dtype[name].base, out[name].shape)
        return out
    k = dtype.kind
    if k == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if k in "iu":
        lo = 0 if k == "u" else -100
        return rng.integers(lo, 100, shape).astype(dtype)
    if k == "f":
        v = np.round(rng.normal(0, 10, shape), 1).astype(dtype)
        if v.size:
            v.reshape(-1)[rng.integers(0, v.size, max(1, v.size // 10))] = np.nan
        return v
    if k == "c":
        return (rng.normal(0, 1, shape) + 1j * rng.normal(0, 1, shape)).astype(dtype)
    if k in "SU":
        letters = np.array(list("abcxyz"))
        n = dtype.itemsize if k == "S" else dtype.itemsize // 4
        s = ["".join(rng.choice(letters, rng.integers(0, n + 1))) for _ in range(int(np.prod(shape)))]
        return np.array(s, dtype=dtype).reshape(shape)
    if k in "mM":
        return rng.integers(-1000, 1000, shape).astype(dtype)
    raise AssertionError(dtype)


@st.composite
def arrays(draw):
    ndim = draw(st.integers(0, 4))
    max_len = {0: 1, 1: 40, 2: 14, 3: 7, 4: 5}[ndim]
    shape = tuple(draw(st.integers(0, max_len)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, max_len + 3)) for _ in range(ndim))
    dtype = draw(st.sampled_from(DTYPES))
    dt = np.dtype(dtype)
    fills = [None]
    if dt.kind in "iuf":
        fills = [0, 42]
    if dt.kind == "f":
        fills.append(np.nan)
    if dt.kind == "c":
        fills = [0, complex(1, -1)]
    if dt.kind == "b":
        fills = [False, True]
    if dt.kind == "S":
        fills = [b"", b"ab"]
    if dt.kind == "U":
        fills = ["", "q"]
    if dt.kind in "mM":
        fills = [0, 7]
    fill = draw(st.sampled_from(fills))
    order = draw(st.sampled_from("CF"))
    seed = draw(st.integers(0, 2**32 - 1))
    threads = draw(st.sampled_from([1, 2]))
    # Zarr v2, Zarr v3, or Zarr v3 with shards of 1-3 chunks per dimension (v3 takes the
    # bool/int/float/complex types here).
    layout = draw(st.sampled_from(["v2", "v3", "v3-sharded"]))
    if layout != "v2" and dt.kind not in "biufc":
        layout = "v2"
    shards = None
    if layout == "v3-sharded":
        shards = tuple(c * draw(st.integers(1, 3)) for c in chunks)
    return shape, chunks, dtype, fill, order, seed, threads, layout, shards


def reference_fill(dtype, fill, shape):
    dt = np.dtype(dtype)
    ref = np.zeros(shape, dtype=dt)
    if fill is not None:
        ref[...] = fill
    return ref


def make(setup, write_fraction_region=True):
    shape, chunks, dtype, fill, order, seed, threads, layout, shards = setup
    cs.config.set(threads=threads)
    rng = np.random.default_rng(seed)
    z = cs.full(shape, fill_value=fill, chunks=chunks, dtype=dtype, order=order, store={},
                zarr_format=2 if layout == "v2" else 3, shards=shards)
    if layout != "v2":  # v3 data types are native; the bytes codec keeps the byte order
        dtype = np.dtype(dtype).newbyteorder("=")
    assert z.zarr_format == (2 if layout == "v2" else 3) and z.shards == shards
    ref = reference_fill(dtype, fill, shape)
    data = random_values(rng, dtype, shape)
    # Write a random box so some chunks stay missing (and read as fill).
    box = tuple(slice(int(rng.integers(0, s + 1)), None) if s else slice(None) for s in shape)
    z[box] = data[box]
    ref[box] = data[box]
    return z, ref, rng


def dim_slice(draw, n):
    start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
    stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
    step = draw(st.one_of(st.none(), st.integers(-4, 4).filter(lambda s: s != 0)))
    return slice(start, stop, step)


@st.composite
def basic_selection(draw, shape):
    sel = []
    for n in shape:
        if n and draw(st.booleans()) and draw(st.booleans()):
            sel.append(draw(st.integers(-n, n - 1)))
        else:
            sel.append(dim_slice(draw, n))
    if shape and draw(st.booleans()):
        # Replace a run of trailing full slices by an Ellipsis, or drop them.
        k = draw(st.integers(0, len(sel)))
        sel = sel[:k] + ([Ellipsis] if draw(st.booleans()) else [])
    return tuple(sel)


@st.composite
def ortho_selection(draw, shape):
    # (the model tests' strategy, with this file's slices and longer index arrays)
    return draw_ortho(draw, shape, max_len=12, slice_of=dim_slice)


@given(setup=arrays(), data=st.data())
@SETTINGS
def test_basic_get_set(setup, data):
    z, ref, rng = make(setup)
    sel = data.draw(basic_selection(ref.shape))
    check(z[sel], ref[sel])
    expected = ref[sel]
    value = random_values(rng, ref.dtype, np.shape(expected))
    ref[sel] = value
    z[sel] = value
    check(z[...], ref)
    # Scalar broadcast.
    if ref.size:
        scalar = random_values(rng, ref.dtype, ())
        ref[sel] = scalar
        z[sel] = scalar
        check(z[...], ref)


@given(setup=arrays(), data=st.data())
@SETTINGS
def test_orthogonal_get_set(setup, data):
    z, ref, rng = make(setup)
    if not ref.ndim:
        return
    sel = data.draw(ortho_selection(ref.shape))
    nsel, drop = ortho_ix(sel, ref.shape)
    expected = ref[nsel]
    expected = expected.reshape([n for d, n in enumerate(expected.shape) if d not in drop])
    got = z.oindex[sel]
    check(got, expected)
    check(z.get_orthogonal_selection(sel), expected)
    value = random_values(rng, ref.dtype, expected.shape)
    ref[nsel] = value.reshape(ref[nsel].shape)
    z.oindex[sel] = value
    check(z[...], ref)


@st.composite
def coord_selection(draw, shape):
    k = draw(st.integers(0, 25))
    two_d = draw(st.booleans()) and k % 5 == 0 and k
    arrs = []
    for n in shape:
        a = np.array(draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k)), dtype=np.int64)
        arrs.append(a.reshape(5, -1) if two_d else a)
    return tuple(arrs)


@given(setup=arrays(), data=st.data())
@SETTINGS
def test_coordinate_get_set(setup, data):
    z, ref, rng = make(setup)
    if not ref.ndim or not ref.size:
        return
    sel = data.draw(coord_selection(ref.shape))
    check(z.vindex[sel], ref[sel])
    check(z.get_coordinate_selection(sel), ref[sel])
    value = random_values(rng, ref.dtype, ref[sel].shape)
    ref[sel] = value
    z.vindex[sel] = value
    check(z[...], ref)


@given(setup=arrays(), data=st.data())
@SETTINGS
def test_mask_get_set(setup, data):
    z, ref, rng = make(setup)
    if not ref.ndim:
        return
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=ref.size, max_size=ref.size)),
                    dtype=bool).reshape(ref.shape)
    check(z.vindex[mask], ref[mask])
    check(z.get_mask_selection(mask), ref[mask])
    value = random_values(rng, ref.dtype, ref[mask].shape)
    ref[mask] = value
    z.set_mask_selection(mask, value)
    check(z[...], ref)


@given(setup=arrays(), data=st.data())
@SETTINGS
def test_block_get_set(setup, data):
    z, ref, rng = make(setup)
    if not ref.ndim:
        return
    sel, nsel = [], []
    for n, c in zip(ref.shape, z.chunks):
        nb = -(-n // c)
        if nb and data.draw(st.booleans()):
            b = data.draw(st.integers(-nb, nb - 1))
            sel.append(b)
            b = b + nb if b < 0 else b
            nsel.append(slice(b * c, (b + 1) * c))
        else:
            # (a slice starting at or past the last block is zarr-python's BoundsCheckError)
            lo = data.draw(st.integers(0, max(nb - 1, 0)))
            hi = data.draw(st.integers(lo, nb + 1))
            sel.append(slice(lo, hi))
            nsel.append(slice(lo * c, hi * c))
    sel, nsel = tuple(sel), tuple(nsel)
    check(z.blocks[sel], ref[nsel])
    past = next((d for d, (n, c) in enumerate(zip(ref.shape, z.chunks)) if n), None)
    if past is not None:
        nb = -(-ref.shape[past] // z.chunks[past])
        with pytest.raises(cs.BoundsCheckError, match=f"dimension {past}"):
            z.blocks[(slice(None),) * past + (slice(nb, nb + 1),)]
    value = random_values(rng, ref.dtype, ref[nsel].shape)
    ref[nsel] = value
    z.set_block_selection(sel, value)
    check(z[...], ref)


@given(setup=arrays(), data=st.data())
@SETTINGS
def test_fancy_getitem_numpy_semantics(setup, data):
    """z[...] with index arrays follows NumPy's advanced-indexing rules."""
    z, ref, rng = make(setup)
    if not ref.ndim or not ref.size:
        return
    sel = []
    for n in ref.shape:
        kind = data.draw(st.sampled_from(["int", "slice", "array"]))
        if kind == "int":
            sel.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "array":
            sel.append(np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=3, max_size=3))))
        else:
            sel.append(dim_slice(data.draw, n))
    sel = tuple(sel)
    check(z[sel], ref[sel])
    value = random_values(rng, ref.dtype, ref[sel].shape)
    # Duplicate coordinates make NumPy's own result order-dependent; keep them unique.
    if len({tuple(np.broadcast_to(s, (3,))) for s in sel if isinstance(s, np.ndarray)}) and \
            all(len(set(np.broadcast_to(s, (3,)) % ref.shape[d])) == 3
                for d, s in enumerate(sel) if isinstance(s, np.ndarray)):
        ref[sel] = value
        z[sel] = value
        check(z[...], ref)


@pytest.fixture(autouse=True)
def _restore_threads():
    yield
    cs.config.set(threads=None)
