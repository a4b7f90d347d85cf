"""Counting stored chunks from one listing (issue 30): the C key parser against Python's
reading of the same keys, and nchunks_initialized / the stored chunk coordinates on every
kind of store and key encoding against the set of chunks written (a model)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore._core.keys import parse_keys


def _python_parse(names, skip, sep, grid):
    out = []
    for name in names:
        rest = name[skip:]
        parts = rest.split(sep)
        if len(name) <= skip or len(parts) != len(grid):
            continue
        if not all(p.isascii() and p.isdigit() and (p == "0" or p[0] != "0") for p in parts):
            continue  # (a key as written: no leading zeros)
        c = tuple(int(p) for p in parts)
        if all(x < g for x, g in zip(c, grid)):
            out.append(c)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789./c-+ a", max_size=12), max_size=30),
       st.sampled_from([".", "/"]), st.integers(0, 2),
       st.lists(st.integers(1, 50), min_size=1, max_size=3))
def test_parse_keys_reads_keys_as_python_does(names, sep, skip, grid):
    got = [tuple(r) for r in parse_keys(names, skip, sep, grid).tolist()]
    assert got == _python_parse(names, skip, sep, grid)


def test_parse_keys_edges():
    grid = (10, 10)
    got = parse_keys(["c/1/2", "c/1/2/3", "c/1", "c/10/0", "c/01/9", "c/+1/2", "c/1/2 ",
                      "c/99999999999999999999/1", "c/ä/1", "zarr.json"], 2, "/", grid)
    assert got.tolist() == [[1, 2]]  # ("c/01/9": no chunk's key as written)
    assert parse_keys(["0", "5"], 0, ".", (3,)).tolist() == [[0]]
    # coordinates of 19 digits are real (a grid reaches 2**63 - 1 chunks): they were left
    # out, so resize never deleted such chunks and a later grow showed their old data
    top = 2 ** 63 - 1
    names = [str(top - 1), str(top), str(top) + "0", str(2 ** 64 + 1), "12"]
    assert parse_keys(names, 0, ".", (top,)).tolist() == [[top - 1], [12]]
    assert parse_keys([f"{top - 1}.{10 ** 18}"], 0, ".", (top, top)).tolist() == \
        [[top - 1, 10 ** 18]]


def test_chunks_at_coordinates_of_19_digits_are_counted_and_trimmed():
    n = 2 ** 62
    z = cs.zeros((n,), chunks=(1,), dtype="i4", store={})
    z[n - 1] = 7
    assert z.nchunks_initialized == 1
    z.resize(10)
    z.resize(n)
    assert z[n - 1] == 0
    with pytest.raises(ValueError):
        parse_keys(["1"], 0, "//", (3,))


STORES = ["memory", "dict", "directory", "nested", "zip", "sqlite"]
ENCODINGS = [(2, "."), (2, "/"), (3, "/"), (3, ".")]


def _store(kind, tmp_path):
    if kind == "memory":
        return cs.MemoryStore()
    if kind == "dict":
        return {}
    if kind == "directory":
        return cs.DirectoryStore(str(tmp_path / "d"))
    if kind == "nested":
        return cs.NestedDirectoryStore(str(tmp_path / "n"))
    if kind == "zip":
        return cs.ZipStore(str(tmp_path / "z.zip"), mode="a")
    return cs.SQLiteStore(str(tmp_path / "s.db"))


# (a NestedDirectoryStore keys chunks with "/" whatever the separator: no "." case for it)
CASES = [(k, f, s) for k in STORES for f, s in ENCODINGS if not (k == "nested" and s == ".")]


@pytest.mark.parametrize("kind,fmt,sep", CASES)
@pytest.mark.parametrize("path", ["", "g/a"])
def test_counts_match_the_chunks_written(tmp_path, kind, fmt, sep, path):
    store = _store(kind, tmp_path)
    a = cs.create(shape=(9, 7), chunks=(2, 3), dtype="i2", store=store, path=path or None,
                  zarr_format=fmt, dimension_separator=sep, fill_value=0)
    if path:  # an array beside it: its chunk keys are not counted
        other = cs.create(shape=(4,), chunks=(1,), dtype="i2", store=store, path="g/zz",
                          zarr_format=fmt, fill_value=0)
        other[...] = 1
    else:  # keys of no array beside the chunks of a root array: not counted either
        store["notes.txt"] = b"x"
        store["1.x"] = b"x"
    rng = np.random.default_rng(len(path) + fmt)
    written = set()
    for _ in range(8):
        i, j = int(rng.integers(0, 5)), int(rng.integers(0, 3))
        a[i * 2:(i + 1) * 2, j * 3:(j + 1) * 3] = 7
        written.add((i, j))
    assert a.nchunks_initialized == len(written)
    assert set(a._engine.stored_chunks()) == written
    a.resize((4, 7))  # chunks outside the new grid are gone, and not counted
    assert a.nchunks_initialized == len({c for c in written if c[0] < 2})
    if hasattr(store, "close"):
        store.close()
