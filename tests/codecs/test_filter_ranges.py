"""Filters that cast into an integer type (numcodecs' FixedScaleOffset with an integer astype,
AsType narrowing): values they would store wrapped around are refused before any chunk is
stored (zarr-python stores them wrapped: 5000.0 read back as -1553.6), in Zarr v2 filters and
v3 numcodecs.* codecs; a fill value they cannot store is let through (an array made
elsewhere), so resizes and fill value changes of such arrays go on working."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs.common import cast_range
from chunkstore.codecs.v2 import ChunkCodecV2, unstorable_fill
from chunkstore.metadata.v2 import ArrayMetadataV2

FSO = numcodecs.FixedScaleOffset(offset=0, scale=10, dtype="<f8", astype="<i2")
AST = numcodecs.AsType(encode_dtype="<i1", decode_dtype="<i4")


def _snapshot(store: dict) -> dict:
    return {k: bytes(v) for k, v in store.items()}


def test_fso_v2_refuses_wrapping_values_and_stores_nothing() -> None:
    store: dict = {}
    z = cs.create(shape=(4,), chunks=(2,), dtype="<f8", fill_value=0, filters=[FSO],
                  store=store, path="g/a")
    z[:] = [1.0, 2.0, 3.0, 4.0]
    before = _snapshot(store)
    # (both chunks in one write: the refusal comes before either is stored)
    with pytest.raises(ValueError, match=r"array '/g/a'.*FixedScaleOffset.*5000\.0.*int16"):
        z[:] = [1.5, 2.5, 5000.0, 3.5]
    assert _snapshot(store) == before
    np.testing.assert_array_equal(z[:], [1.0, 2.0, 3.0, 4.0])
    for bad in (np.nan, np.inf, -np.inf, 3276.75, -3276.9):
        with pytest.raises(ValueError, match="cannot be stored"):
            z[1] = bad
    assert _snapshot(store) == before
    # the extremes that fit, rounding included
    z[:] = [3276.7, -3276.8, 3276.74, -3276.84]
    np.testing.assert_allclose(z[:], [3276.7, -3276.8, 3276.7, -3276.8])


def test_astype_v2_refuses_wrapping_values() -> None:
    store: dict = {}
    z = cs.create(shape=(4,), chunks=(3,), dtype="<i4", fill_value=0, filters=[AST],
                  store=store, path="b")
    z[:] = [127, -128, 0, 1]
    before = _snapshot(store)
    for value in ([1, 300, 2, -200], [1, 2, 3, -129]):
        with pytest.raises(ValueError, match=r"array '/b'.*AsType.*int8 \(-128\.\.127\)"):
            z[:] = value
    assert _snapshot(store) == before
    np.testing.assert_array_equal(z[:], [127, -128, 0, 1])


def test_astype_float_to_int_and_unsigned() -> None:
    f = numcodecs.AsType(encode_dtype="<u1", decode_dtype="<f4")
    codec = ChunkCodecV2("<f4", (3,), filters=[f])
    codec.encode(np.array([0.0, 255.9, 17.5], "<f4"))  # (truncated, as the cast does)
    for bad in (-1.0, 256.0, np.nan):
        with pytest.raises(ValueError, match="uint8"):
            codec.encode(np.array([1.0, bad, 2.0], "<f4"))
    # widening casts are not checked at all
    assert cast_range("astype", {"encode_dtype": "<i8", "decode_dtype": "<i4"}) is None
    assert cast_range("fixedscaleoffset", {"dtype": "<f8", "astype": "<f4", "scale": 1,
                                           "offset": 0}) is None


def test_fso_integer_arithmetic_that_wraps_is_refused() -> None:
    # numcodecs computes (x - offset) * scale in int32 here: 3e8 * 10 wrapped to -1294967296,
    # though int64 (astype) holds 3e9
    f = numcodecs.FixedScaleOffset(offset=0, scale=10, dtype="<i4", astype="<i8")
    codec = ChunkCodecV2("<i4", (2,), filters=[f])
    with pytest.raises(ValueError, match="300000000.*int32"):
        codec.encode(np.array([1, 300_000_000], "<i4"))
    codec.encode(np.array([1, 200_000_000], "<i4"))


def test_widening_view_refuses_what_the_array_cannot_hold() -> None:
    store: dict = {}
    z = cs.create(shape=(4,), chunks=(2,), dtype="<i2", fill_value=0, store=store)
    v = z.view(dtype="<i8", filters=[numcodecs.AsType(encode_dtype="<i2",
                                                      decode_dtype="<i8")])
    v[:2] = [1, -2]
    before = _snapshot(store)
    with pytest.raises(ValueError, match="100000"):
        v[:] = [1, 100_000, 2, 3]
    assert _snapshot(store) == before
    assert z[:].tolist() == [1, -2, 0, 0]


@pytest.mark.parametrize("filt", [
    numcodecs.FixedScaleOffset(offset=0, scale=10, dtype="<f8", astype="<i2"),
    numcodecs.AsType(encode_dtype="<i1", decode_dtype="<f8"),
])
@pytest.mark.parametrize("shards", [None, (4,)])
def test_v3_numcodecs_filters_refuse_wrapping_values(filt, shards) -> None:
    store: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = cs.create_array(store, name="v", shape=(8,), chunks=(2,), shards=shards,
                            dtype="<f8", fill_value=0, filters=[filt], zarr_format=3)
    z[:] = np.arange(8.0)
    before = _snapshot(store)
    with pytest.raises(ValueError, match=r"array '/v'.*5000\.0 cannot be stored"):
        z[:] = [0, 1, 2, 3, 4, 5000.0, 6, 7]
    assert _snapshot(store) == before
    np.testing.assert_array_equal(z[:], np.arange(8.0))


def test_unstorable_fill_is_named() -> None:
    meta = ArrayMetadataV2(shape=(4,), chunks=(2,), dtype="<f8", fill_value=float("nan"),
                           filters=[FSO])
    problem = unstorable_fill(meta, "/x")
    assert problem is not None and "fill value nan of array '/x'" in problem
    assert unstorable_fill(dataclasses.replace(meta, fill_value=1.0), "/x") is None
    assert unstorable_fill(dataclasses.replace(meta, filters=None), "/x") is None


def test_array_made_elsewhere_with_unstorable_fill_keeps_working() -> None:
    # zarr-python writes such an array (AsType to int8, fill value 1000): its fill value is
    # stored as zarr-python stores it; resizes and fill value changes must not fail for good
    store: dict = {}
    cs.create(shape=(4,), chunks=(3,), dtype="<i4", fill_value=0, filters=[AST], store=store)
    doc = json.loads(store[".zarray"])
    doc["fill_value"] = 1000
    store[".zarray"] = json.dumps(doc).encode()
    z = cs.open_array(store)
    z[:2] = [5, 6]
    with pytest.raises(ValueError, match="300"):
        z[3] = 300  # (other values are refused all the same)
    z.resize(5)
    z.fill_value = 7
    z.resize(6)
    assert z[:2].tolist() == [5, 6] and z[5] == 7


def test_creation_and_fill_value_change_refuse_a_fill_the_filters_would_wrap():
    """Every chunk not written whole holds the fill value: one the filters store wrapped
    (1000 through AsType into int8) read back as another value (-24) where nothing was
    written, after a fill value change and a grow."""
    ast = [numcodecs.AsType(encode_dtype="<i1", decode_dtype="<i4")]
    with pytest.raises(ValueError, match=r"path 'x'.*fill value 1000 .*int8"):
        cs.create(shape=(4,), chunks=(3,), dtype="<i4", fill_value=1000, filters=ast,
                  store={}, path="x")
    z = cs.create(shape=(4,), chunks=(3,), dtype="<i4", fill_value=0, filters=ast, store={})
    z[:] = [1, 2, 3, 4]
    with pytest.raises(ValueError, match=r"invalid fill_value 1000 .*int8"):
        z.fill_value = 1000
    assert z.fill_value == 0 and cs.open_array(z.store).fill_value == 0
    z.resize(6)
    np.testing.assert_array_equal(z[...], [1, 2, 3, 4, 0, 0])
    z.fill_value = 100  # (one it can store)
    z.resize(8)
    np.testing.assert_array_equal(z[...], [1, 2, 3, 4, 0, 0, 100, 100])


def test_a_null_fill_value_lets_the_padding_of_a_partial_edge_chunk_through():
    """With fill_value None, the padding past the end of a partial last chunk (zeros) is no
    value of the user's: refused (0 - 1000 cannot be stored in u1), a write of numcodecs'
    own FixedScaleOffset example over an array of 8 in chunks of 5 failed."""
    fso = [numcodecs.FixedScaleOffset(offset=1000, scale=1, dtype="<i4", astype="u1")]
    a = cs.create(8, chunks=5, dtype="i4", fill_value=None, filters=fso, store={})
    a[:] = np.arange(1000, 1008)
    np.testing.assert_array_equal(a[:], np.arange(1000, 1008))
    with pytest.raises(ValueError, match="cannot be stored"):
        a[0] = 2000
