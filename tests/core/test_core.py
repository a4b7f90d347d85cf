"""The Cython core on its own: radix grouping, projection tables, the all-fill test, chunk
keys and the batch scatter + Blosc encode kernel."""

import os

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.engine import indexing as ix
from chunkstore._core import merge, zcodecs
from chunkstore._core.keys import format_keys
from chunkstore.codecs.v2 import ChunkCodecV2
from chunkstore.codecs.v3 import ChunkCodecV3
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



def test_merge_and_decode_kernels_refuse_buffers_of_other_shapes():
    # The plan's local and output indices are trusted by the copies (no bounds checks in
    # the GIL-free loops): a chunk buffer or output of another shape than the plan's would
    # be read or written out of bounds. Metadata that changed between planning and decoding
    # once did this (heap corruption); the kernels now refuse it.
    plan = ix.basic_or_fancy((slice(1, 7), slice(0, 5)), (8, 8), (4, 4), "t").plan
    good_chunk, good_out = np.zeros((4, 4)), np.zeros((6, 5))
    merge.gather(plan, 0, good_chunk, good_out)
    merge.scatter(plan, 0, good_out, good_chunk)
    with pytest.raises(ValueError, match="chunk buffer of shape \\(2, 8\\)"):
        merge.gather(plan, 0, np.zeros((2, 8)), good_out)
    with pytest.raises(ValueError, match="chunk buffer"):
        merge.scatter(plan, 3, good_out, np.zeros((4, 2)))
    with pytest.raises(ValueError, match="output of shape \\(3, 5\\)"):
        merge.gather(plan, 0, good_chunk, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="output"):
        merge.fill(plan, 1, np.zeros((6, 4)), np.zeros(1))
    with pytest.raises(ValueError, match="value of shape"):
        merge.scatter(plan, 0, np.zeros((5, 5)), good_chunk)
    points = ix.coordinate(([1, 6, 7], [0, 4, 7]), (8, 8), (4, 4), "t").plan
    merge.gather_points(points, 0, good_chunk, np.zeros(3))
    with pytest.raises(ValueError, match="chunk buffer"):
        merge.gather_points(points, 0, np.zeros((8, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="shorter than the 3 points"):
        merge.gather_points(points, 0, good_chunk, np.zeros(2))
    # the batch decoder (the codec's fast path): its scratch is the chunk buffer
    fast = ChunkCodecV2(np.dtype("<f8"), (4, 4), "C", numcodecs.Blosc(), None).fast
    data = [numcodecs.Blosc().encode(np.ones((4, 4)))] * plan.nchunks
    idx = list(range(plan.nchunks))
    out = np.zeros((6, 5))
    assert fast.decode(plan, idx, data, out, np.zeros((4, 4))) == -1
    assert (out == 1).all()
    with pytest.raises(ValueError, match="chunk buffer"):
        fast.decode(plan, idx, data, out, np.zeros((2, 8)))
    with pytest.raises(ValueError, match="output"):
        fast.decode(plan, idx, data, np.zeros((7, 5)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="chunk buffer"):
        fast.decode_points(points, [0, 1], data[:2], np.zeros(3), np.zeros((16, 1)))

# ------------------------------------------------------------------ chunk keys

@given(st.lists(st.lists(st.integers(-2**63, 2**63 - 1), min_size=3, max_size=3), max_size=40),
       st.sampled_from([".", "/", "::"]), st.sampled_from(["", "a/b/", "c/", "é/"]))
@settings(max_examples=200, deadline=None)
def test_format_keys_matches_python_join(rows, sep, head):
    coords = np.array(rows, dtype=np.int64).reshape(-1, 3)
    expected = [head + sep.join(map(str, r)) for r in coords.tolist()]
    assert format_keys(coords, sep, [head]) == expected


def test_format_keys_per_row_heads_and_errors():
    coords = np.array([[0, 1], [2, 3], [4, 5]])
    assert format_keys(coords, ".", ["s0|", "sé|"], np.array([1, 0, 1])) == [
        "sé|0.1", "s0|2.3", "sé|4.5"]
    assert format_keys(np.zeros((2, 0), dtype=np.int64), ".", ["c"]) == ["c", "c"]
    assert format_keys(np.zeros((0, 2), dtype=np.int64), ".", []) == []  # no chunks touched
    with pytest.raises(IndexError):
        format_keys(coords, ".", ["a"], np.array([0, 1, 0]))
    with pytest.raises(ValueError, match="one entry per row"):
        format_keys(coords, ".", ["a"], np.array([0]))
    with pytest.raises(ValueError, match="not ASCII"):
        format_keys(coords, "é", ["a"])


# ------------------------------------------------------------------ batch scatter + encode

_DECODE = ChunkCodecV2(np.dtype("<f4"), (4,), "C", numcodecs.Blosc(), None).fast_blosc


def _encode_all(value, chunk_shape, params, fill, drop_fill=False, order="C"):
    """Whole-array plan over value; every touched chunk built and compressed by the kernel."""
    sel = ix.basic_or_fancy(Ellipsis, value.shape, chunk_shape, "t")
    plan = sel.plan
    coords = plan.chunk_coords()
    edge = np.any((coords + 1) * np.array(chunk_shape) > np.array(value.shape),
                  axis=1).astype(np.uint8)
    scratch = np.empty(chunk_shape, value.dtype, order=order)
    out = []
    failed = zcodecs.scatter_encode((zcodecs.BLOSC, _DECODE, params), plan,
                                    list(range(plan.nchunks)), value, scratch, edge,
                                    [None] * plan.nchunks, np.array([fill], value.dtype),
                                    drop_fill, out)
    return failed, coords.tolist(), out


def _reference_chunk(value, c, chunk_shape, fill, order="C"):
    ref = np.full(chunk_shape, fill, value.dtype, order=order)
    block = value[tuple(slice(i * n, (i + 1) * n) for i, n in zip(c, chunk_shape))]
    ref[tuple(slice(0, s) for s in block.shape)] = block
    return ref


@pytest.mark.parametrize("dtype", ["|u1", "<f4", ">i8", "<c16", "|S3", "<M8[s]", "|b1"])
@pytest.mark.parametrize("cname", ["lz4", "zstd", "blosclz", "zlib"])
@pytest.mark.parametrize("shuffle", [-1, 0, 1, 2])
def test_blosc_scatter_encode_writes_numcodecs_frames(dtype, cname, shuffle):
    rng = np.random.default_rng(1)
    value = rng.integers(0, 60, (21, 30)).astype(dtype)
    comp = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuffle, blocksize=0)
    for order in "CF":
        codec = ChunkCodecV2(np.dtype(dtype), (8, 16), order, comp, None)
        failed, coords, out = _encode_all(value, (8, 16), codec.fast_blosc_encode,
                                          np.zeros((), dtype)[()], order=order)
        assert failed == -1 and len(out) == len(coords) == 6
        for c, got in zip(coords, out):
            ref = _reference_chunk(value, c, (8, 16), np.zeros((), dtype)[()], order)
            assert got == codec.encode(ref)          # byte for byte what numcodecs writes


def test_blosc_scatter_encode_v3_params_match_the_v3_codec():
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
              {"name": "blosc", "configuration": {"typesize": 4, "cname": "zstd", "clevel": 3,
                                                  "shuffle": "bitshuffle", "blocksize": 0}}]
    codec = ChunkCodecV3(np.dtype("<f4"), (5, 7), codecs)
    value = np.arange(13 * 9, dtype="<f4").reshape(13, 9)
    failed, coords, out = _encode_all(value, (5, 7), codec.fast_blosc_encode, 0.0)
    assert failed == -1
    for c, got in zip(coords, out):
        assert got == codec.encode(_reference_chunk(value, c, (5, 7), 0.0))


def test_blosc_scatter_encode_fill_handling():
    comp = numcodecs.Blosc()
    params = ChunkCodecV2(np.dtype("<f8"), (4, 4), "C", comp, None).fast_blosc_encode
    value = np.full((6, 8), np.nan)
    value[0, 0] = 1.0                   # chunk (0, 0) has data; the rest is all NaN fill
    failed, coords, out = _encode_all(value, (4, 4), params, np.nan, drop_fill=True)
    assert failed == -1
    assert [o is None for o in out] == [c != [0, 0] for c in coords]
    # Edge chunks are padded with the fill value, not with leftovers of earlier chunks.
    failed, coords, out = _encode_all(np.arange(48.0).reshape(6, 8), (4, 4), params, -7.0)
    for c, got in zip(coords, out):
        chunk = np.frombuffer(comp.decode(got), "<f8").reshape(4, 4)
        np.testing.assert_array_equal(
            chunk, _reference_chunk(np.arange(48.0).reshape(6, 8), c, (4, 4), -7.0))


def test_blosc_scatter_encode_reports_the_first_failure():
    comp = numcodecs.Blosc()
    addr, clevel, shuffle, typesize, _, blocksize = ChunkCodecV2(
        np.dtype("<f4"), (4,), "C", comp, None).fast_blosc_encode
    bad = (addr, clevel, shuffle, typesize, b"no-such-codec", blocksize)
    failed, _, out = _encode_all(np.arange(10, dtype="<f4"), (4,), bad, 0.0)
    assert failed == 0 and out == []


def test_array_whole_write_skips_fill_chunks_and_pads_edges(tmp_path):
    import chunkstore as cs
    z = cs.open_array(str(tmp_path / "a"), mode="w", shape=(10, 10), chunks=(4, 4),
                      dtype="<i4", fill_value=5, write_empty_chunks=False)
    data = np.full((10, 10), 5, dtype="<i4")
    data[9, 9] = 1
    z[...] = data
    assert sorted(k for k in os.listdir(tmp_path / "a") if not k.startswith(".")) == ["2.2"]
    np.testing.assert_array_equal(z[...], data)
    raw = np.frombuffer(z.compressor.decode((tmp_path / "a" / "2.2").read_bytes()), "<i4")
    assert (raw.reshape(4, 4)[2:, :] == 5).all() and raw.reshape(4, 4)[1, 1] == 1


# ------------------------------------------------------------------ read errors

def test_array_reads_report_corrupt_and_missing_chunks(tmp_path):
    import chunkstore as cs
    from chunkstore.errors import ChunkDecodeError, ChunkNotFoundError
    z = cs.open_array(str(tmp_path / "a"), mode="w", shape=(12,), chunks=(3,), dtype="<f8",
                      fill_value=-1.0)
    z[:9] = np.arange(9.0)
    np.testing.assert_array_equal(z[...], np.r_[np.arange(9.0), [-1.0] * 3])
    np.testing.assert_array_equal(z.vindex[[10, 1, 7]], [-1.0, 1.0, 7.0])
    (tmp_path / "a" / "1").write_bytes(b"garbage")     # a corrupt frame: the codec says so
    with pytest.raises(ChunkDecodeError, match="'1'"):
        z[...]
    with pytest.raises(ChunkDecodeError, match="'1'"):
        z.vindex[[4]]
    z2 = cs.open_array(str(tmp_path / "a"), mode="r", missing_chunks="error")
    with pytest.raises(ChunkNotFoundError, match="'3'"):
        z2[9:]


def test_blosc_scatter_encode_merges_into_stored_chunks():
    # A window over partly covered chunks: stored ones are decompressed and updated, missing
    # ones start as fill; a stored frame that does not decompress is reported by position.
    comp = numcodecs.Blosc(cname="zstd")
    codec = ChunkCodecV2(np.dtype("<i4"), (4, 4), "C", comp, None)
    stored = np.arange(64, dtype="<i4").reshape(8, 8)
    sel = ix.basic_or_fancy((slice(2, 7), slice(1, 6)), (8, 8), (4, 4), "t")
    plan = sel.plan
    coords = plan.chunk_coords().tolist()
    value = np.full((5, 5), -1, dtype="<i4")
    olds = [comp.encode(np.ascontiguousarray(stored[r * 4:r * 4 + 4, c * 4:c * 4 + 4]))
            if (r, c) != (1, 1) else None for r, c in coords]
    prefill = np.ones(plan.nchunks, dtype=np.uint8)
    out = []
    failed = zcodecs.scatter_encode((zcodecs.BLOSC, codec.fast_blosc, codec.fast_blosc_encode),
                                    plan, list(range(plan.nchunks)), value,
                                    np.empty((4, 4), "<i4"), prefill, olds,
                                    np.array([7], "<i4"), False, out)
    assert failed == -1
    expected = stored.copy()
    expected[4:8, 4:8] = 7                      # the missing chunk starts as fill
    expected[2:7, 1:6] = -1
    for (r, c), got in zip(coords, out):
        np.testing.assert_array_equal(
            codec.decode(got), expected[r * 4:r * 4 + 4, c * 4:c * 4 + 4])
    olds[2] = b"\x02\x01" + bytes(30)            # not a valid frame
    out = []
    failed = zcodecs.scatter_encode((zcodecs.BLOSC, codec.fast_blosc, codec.fast_blosc_encode),
                                    plan, list(range(plan.nchunks)), value,
                                    np.empty((4, 4), "<i4"), prefill, olds,
                                    np.array([7], "<i4"), False, out)
    assert failed == 2 and len(out) == 2


def test_array_partial_write_over_a_corrupt_chunk_names_it(tmp_path):
    import chunkstore as cs
    from chunkstore.errors import ChunkDecodeError
    z = cs.open_array(str(tmp_path / "a"), mode="w", shape=(8, 8), chunks=(4, 4), dtype="<i4")
    z[...] = 1
    (tmp_path / "a" / "0.1").write_bytes(b"garbage")
    with pytest.raises(ChunkDecodeError, match="'0.1'"):
        z[1:3, 1:7] = 5
    assert (tmp_path / "a" / "0.1").read_bytes() == b"garbage"   # left as it was
    # every other chunk still decodes, holding either its old or its new values
    block = z[0:4, 0:4]
    assert set(np.unique(block)) <= {1, 5} and (block[[0, 3], :] == 1).all()
    np.testing.assert_array_equal(z[4:, :], 1)
    z[1:3, 1:3] = 5                             # chunks that decode are still writable
    assert (z[1:3, 1:3] == 5).all()


def test_blosc_arguments_out_of_range_leave_encoding_to_numcodecs():
    """Encode arguments c-blosc cannot take (from corrupt metadata: a clevel past int) do not
    stop the kernels: they decode as before and encode nothing (numcodecs then raises the
    proper error). Found by the metadata fuzz test: the decode kernel raised OverflowError."""
    codec = ChunkCodecV2(np.dtype("<f4"), (16,), "C", numcodecs.Blosc("lz4"), None)
    enc = list(codec.fast_blosc_encode)
    enc[1] = 10 ** 20  # clevel
    spec = (zcodecs.BLOSC, codec.fast_blosc, tuple(enc))
    values = np.arange(16, dtype="<f4")
    frame = numcodecs.Blosc("lz4").encode(values)
    assert zcodecs.decode_bytes(spec, frame, values.nbytes) == values.tobytes()
    assert zcodecs.encode_bytes(spec, values.tobytes()) is None
