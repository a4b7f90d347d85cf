"""The golden v2 fixtures (written by zarr-python 2) read at the raw store level."""

from __future__ import annotations

import itertools
import json
import math
import os

import pytest

from chunkstore.storage import (
    ConsolidatedMetadataStore,
    DirectoryStore,
    LMDBStore,
    SQLiteStore,
    ZipStore,
    normalize_store,
)

from .conftest import FIXTURES

V2 = FIXTURES / "v2"
MANIFEST = json.loads((V2 / "manifest.json").read_text())
GROUPS = [c for c in MANIFEST["cases"] if c.get("kind") == "group"]
ARRAYS = [c for c in MANIFEST["cases"] if c.get("kind") != "group"]
EXPECTED_CLASS = {"zarr": DirectoryStore, "zip": ZipStore, "sqlite": SQLiteStore, "lmdb": LMDBStore}


def tree_state(path):
    """Names, sizes and mtimes of everything under a fixture (to prove it is untouched)."""
    out = {}
    if os.path.isfile(path):
        st = os.stat(path)
        return {str(path): (st.st_size, st.st_mtime_ns)}
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


def chunk_keys(meta: dict, prefix: str) -> list[str]:
    shape, chunks = meta["shape"], meta["chunks"]
    sep = meta.get("dimension_separator") or "."
    grid = [math.ceil(s / c) if c else 0 for s, c in zip(shape, chunks)]
    if not shape:
        idx = ["0"]
    else:
        idx = [sep.join(map(str, i)) for i in itertools.product(*map(range, grid))]
    return [f"{prefix}/{i}" if prefix else i for i in idx]


def test_manifest_has_every_group_store_kind():
    assert {c["name"] for c in GROUPS} >= {
        "group_directory",
        "group_nested",
        "group_zip",
        "group_sqlite",
        "group_lmdb",
        "group_consolidated",
    }


@pytest.mark.parametrize("case", GROUPS, ids=lambda c: c["name"])
def test_group_fixture_raw(case):
    path = V2 / case["path"]
    before = tree_state(path.parent)
    store = normalize_store(str(path), mode="r")
    try:
        assert type(store) is EXPECTED_CLASS[case["store"]]
        assert store.read_only
        for g in case["groups"]:
            key = f"{g}/.zgroup" if g else ".zgroup"
            assert json.loads(store[key])["zarr_format"] == 2, key
        for p, attrs in case["attrs"].items():
            key = f"{p}/.zattrs" if p else ".zattrs"
            assert json.loads(store[key]) == attrs, key
        n_chunks = 0
        for a in case["arrays"]:
            meta = json.loads(store[f"{a}/.zarray"])
            assert meta["zarr_format"] == 2
            keys = chunk_keys(meta, a)
            got = store.getitems(keys)
            assert got, f"no chunk of {a} found among {keys[:3]}..."
            for k, v in got.items():
                assert store[k] == v and type(v) is bytes
            n_chunks += len(got)
        assert n_chunks > 0
        # the hierarchy can be walked from the root
        top = store.listdir()
        assert ".zgroup" in top
        for a in case["arrays"]:
            assert a.split("/")[0] in top
        assert store.getsize() > 0
        if case["consolidated"]:
            c = ConsolidatedMetadataStore(store)
            for a in case["arrays"]:
                assert json.loads(c[f"{a}/.zarray"]) == json.loads(store[f"{a}/.zarray"])
    finally:
        store.close()
    assert tree_state(path.parent) == before  # the fixture was not modified


@pytest.mark.parametrize("case", ARRAYS, ids=lambda c: c["name"])
def test_array_fixture_raw(case):
    path = V2 / case["path"]
    store = normalize_store(str(path), mode="r")
    try:
        prefix = case.get("array", "")
        meta = json.loads(store[f"{prefix}/.zarray" if prefix else ".zarray"])
        keys = chunk_keys(meta, prefix)
        got = store.getitems(keys)
        if not case.get("missing_chunks") and math.prod(meta["shape"]) > 0:
            assert set(got) == set(keys)
        for k in list(got)[:5]:
            assert store[k] == got[k]
    finally:
        store.close()
