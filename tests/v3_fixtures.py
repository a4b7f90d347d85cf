"""Zarr v3 golden fixtures and reference pieces for tests: the v3 manifest, and an array
read or written chunk by chunk with the codec and sharding pieces alone (no Array), to check
the Array against."""

from __future__ import annotations

import itertools
import json

import numpy as np

from chunkstore.codecs.v3 import ChunkCodecV3
from chunkstore.format.sharded_view import ShardedStoreView
from chunkstore.metadata.v3 import encode_array_metadata_v3
from conftest import FIXTURES

FIXTURES_V3 = FIXTURES / "v3"


def load_manifest_v3():
    path = FIXTURES_V3 / "manifest.json"
    if not path.exists():
        return []
    with open(path) as f:
        return json.load(f)["cases"]


def array_cases_v3():
    """Every array case except the format-2 tensorstore one."""
    return [c for c in load_manifest_v3()
            if c.get("kind") != "group" and c["name"] != "ts_zarr2_blosc"]


def grid_coords(grid):
    return list(itertools.product(*[range(g) for g in grid]))


def _region(coords, chunks, shape):
    return tuple(slice(i * n, min((i + 1) * n, s)) for i, n, s in zip(coords, chunks, shape))


def read_v3(store, meta, prefix=""):
    """The whole array, assembled chunk by chunk with the pieces (missing -> fill_value).

    Unsharded: ``ChunkCodecV3(meta)`` on each stored chunk. Sharded: a ShardedStoreView and
    its inner codec, inner chunk by inner chunk.
    """
    pre = prefix.strip("/") + "/" if prefix.strip("/") else ""
    if meta.sharding is not None:
        view = ShardedStoreView(store, meta, prefix)
        codec, chunks, grid, keyf, src = (view.codec, view.inner_chunks, view.inner_grid_shape,
                                          view.inner_key, view)
    else:
        codec, chunks, grid, src = ChunkCodecV3(meta), meta.chunks, meta.chunk_grid_shape, store
        keyf = lambda c: pre + meta.chunk_key(c)  # noqa: E731
    out = np.empty(meta.shape, dtype=meta.dtype)
    coords = grid_coords(grid)
    keys = [keyf(c) for c in coords]
    got = src.getitems(keys) if hasattr(src, "getitems") else {
        k: src[k] for k in keys if k in src}
    for c, k in zip(coords, keys):
        reg = _region(c, chunks, meta.shape)
        if k in got:
            chunk = codec.decode(got[k], key=k, store=store)
            assert chunk.shape == tuple(chunks)
            out[reg] = chunk[tuple(slice(0, r.stop - r.start) for r in reg)]
        else:
            out[reg] = meta.fill_value
    return out


def _chunk_of(data, meta, c, chunks):
    reg = _region(c, chunks, meta.shape)
    full = np.full(chunks, meta.fill_value, dtype=meta.dtype)
    full[tuple(slice(0, r.stop - r.start) for r in reg)] = data[reg]
    return full


def _is_fill(chunk, fill):
    if chunk.dtype.hasobject:
        return bool((chunk == fill).all())
    return chunk.tobytes() == np.full(chunk.shape, fill, dtype=chunk.dtype).tobytes()


def write_v3(store, meta, data, prefix="", skip_fill=True):
    """Write zarr.json and every chunk of ``data`` with the pieces (all-fill chunks skipped)."""
    pre = prefix.strip("/") + "/" if prefix.strip("/") else ""
    store[pre + "zarr.json"] = encode_array_metadata_v3(meta)
    if meta.sharding is not None:
        view = ShardedStoreView(store, meta, prefix)
        codec, chunks, grid, keyf, dst = (view.codec, view.inner_chunks,
                                          view.inner_grid_shape, view.inner_key, view)
    else:
        codec, chunks, grid, dst = ChunkCodecV3(meta), meta.chunks, meta.chunk_grid_shape, store
        keyf = lambda c: pre + meta.chunk_key(c)  # noqa: E731
    items = {}
    for c in grid_coords(grid):
        chunk = _chunk_of(data, meta, c, chunks)
        if skip_fill and _is_fill(chunk, meta.fill_value):
            continue
        items[keyf(c)] = codec.encode(chunk)
    if hasattr(dst, "setitems"):
        dst.setitems(items)
    else:
        for k, v in items.items():
            dst[k] = v


def assert_array_same(actual, expected):
    """Equal shape and values (NaN == NaN, bitwise for floats); strings compared as str."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    if actual.dtype.kind in "OUT" or expected.dtype.kind in "OUT":  # T: numpy StringDType
        as_str = lambda a: [str(v) for v in a.astype(object).ravel().tolist()]  # noqa: E731
        assert as_str(actual) == as_str(expected)
        return
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if actual.dtype.kind in "fc":
        np.testing.assert_array_equal(actual, expected)  # NaN-aware
        # and bitwise where not NaN (-0.0 vs 0.0)
        mask = ~np.isnan(actual) if actual.dtype.kind == "f" else ~np.isnan(actual.real)
        assert np.array_equal(np.signbit(actual.real[mask]), np.signbit(expected.real[mask]))
    else:
        assert np.array_equal(actual, expected)


