"""Shared test helpers: golden fixture locations, manifest loading, value comparison."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(os.environ.get("CHUNKSTORE_FIXTURES", "/work/shared/fixtures"))
FIXTURES_V2 = FIXTURES / "v2"


def load_manifest_v2():
    """The v2 manifest's cases, or [] when the fixtures are not available."""
    path = FIXTURES_V2 / "manifest.json"
    if not path.exists():
        return []
    with open(path) as f:
        return json.load(f)["cases"]


def array_cases_v2():
    return [c for c in load_manifest_v2() if c.get("kind") != "group"]


def group_cases_v2():
    return [c for c in load_manifest_v2() if c.get("kind") == "group"]


@pytest.fixture(scope="session")
def manifest_v2():
    cases = load_manifest_v2()
    if not cases:
        pytest.skip(f"golden fixtures not found at {FIXTURES_V2}")
    return cases


def manifest_value(text):
    """The Python value of a manifest's repr-style field ("np.int32(42)", "nan", "None"...)."""
    return eval(text, {"__builtins__": {}}, {"np": np, "nan": np.nan, "inf": np.inf})


def assert_same(actual, expected):
    """Equal shape, dtype and values; NaN equals NaN; object arrays compared elementwise."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if expected.dtype.hasobject:
        for idx in np.ndindex(expected.shape):
            a, e = actual[idx], expected[idx]
            assert type(a) is type(e) and a == e, (idx, a, e)
    elif expected.dtype.names is not None:
        for name in expected.dtype.names:
            assert_same(actual[name], expected[name])
    else:
        np.testing.assert_array_equal(actual, expected)


def snapshot_dir(root):
    """{relative path: bytes} of every file under root (chunk files and metadata)."""
    root = Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def chunk_files(root):
    """Relative paths of the chunk files under an array directory (no metadata files)."""
    return sorted(k for k in snapshot_dir(root)
                  if not Path(k).name.startswith(".") and Path(k).name != "zarr.json")


# ------------------------------------------------------------------ array layouts
LAYOUTS = ["v2", "v3", "v3-sharded"]


class Layout:
    """Builds arrays in one layout - Zarr v2, Zarr v3, or Zarr v3 with shards - and reads back
    what that layout puts in the store, so that one test of the public API covers all three.

    `layout(shape, chunks, dtype=..., **kw)` is `cs.create` in this layout; in the sharded one
    a shard holds 2 chunks per dimension (so edge shards and partly covered shards occur),
    unless `shards=` says otherwise."""

    def __init__(self, name):
        self.name = name
        self.zarr_format = 2 if name == "v2" else 3
        self.sharded = name == "v3-sharded"

    def __repr__(self):
        return f"Layout({self.name!r})"

    def shards_for(self, chunks):
        return tuple(2 * c for c in chunks) if self.sharded else None

    def format_kwargs(self, chunks, /, **kw):
        """The keywords that put an array with these chunks in this layout."""
        kw["zarr_format"] = self.zarr_format
        if self.sharded:
            kw.setdefault("shards", self.shards_for(chunks))
        return kw

    def __call__(self, shape, chunks, dtype="i4", **kw):
        import chunkstore as cs
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        chunks = (chunks,) * len(shape) if isinstance(chunks, int) else tuple(chunks)
        return cs.create(shape, chunks=chunks, dtype=dtype, **self.format_kwargs(chunks, **kw))

    def open(self, store, mode="r", **kw):
        """cs.open_array in this layout (creating: the layout's format and shards)."""
        import chunkstore as cs
        if "chunks" in kw:
            chunks = kw["chunks"]
            chunks = (chunks,) * len(kw["shape"]) if isinstance(chunks, int) else tuple(chunks)
            kw = self.format_kwargs(chunks, **kw)
        return cs.open_array(store, mode=mode, **kw)

    # ---- what the layout stores
    @property
    def metadata_name(self):
        return ".zarray" if self.zarr_format == 2 else "zarr.json"

    def metadata(self, array_dir):
        """The array's metadata document in a directory store."""
        return json.loads((Path(array_dir) / self.metadata_name).read_text())

    def attributes(self, array_dir):
        """The array's stored attributes in a directory store ({} when none are stored)."""
        if self.zarr_format == 3:
            return self.metadata(array_dir).get("attributes", {})
        path = Path(array_dir) / ".zattrs"
        return json.loads(path.read_text()) if path.exists() else {}

    def stored_key(self, chunk_coords, sep=None):
        """The store key (relative to the array) holding the chunk at chunk_coords: the chunk's
        own key, or in the sharded layout its shard's key (shards of 2 chunks per dimension)."""
        if self.sharded:
            chunk_coords = tuple(c // 2 for c in chunk_coords)
        if self.zarr_format == 2:
            return (sep or ".").join(map(str, chunk_coords)) if chunk_coords else "0"
        sep = sep or "/"
        return sep.join(("c",) + tuple(map(str, chunk_coords)))

    def read_by_others(self, path, expected):
        """zarr-python and tensorstore read the array at path (a directory) as expected."""
        import tensorstore as ts
        import zarr
        np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], expected)
        driver = "zarr" if self.zarr_format == 2 else "zarr3"
        t = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": str(path)}}).result()
        got = t.read().result()
        assert got.dtype == np.asarray(expected).dtype
        np.testing.assert_array_equal(got, expected)


@pytest.fixture(params=LAYOUTS)
def layout(request):
    """One of the three array layouts (see Layout); tests taking it run once per layout."""
    return Layout(request.param)


@pytest.fixture
def settled_files(monkeypatch):
    """Shard files count as settled at once (chunkstore.storage.directory.SETTLE_NS = 0): for
    tests of what a handle does with the shard indexes it keeps, which it keeps only of
    files that last changed SETTLE_NS ago (tests/format/test_shard_versions.py)."""
    from chunkstore.storage import directory
    monkeypatch.setattr(directory, "SETTLE_NS", 0)
