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
    return sorted(k for k in snapshot_dir(root) if not Path(k).name.startswith("."))
