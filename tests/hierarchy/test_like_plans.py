"""Behaviour the issue-12 refactor (format layer, array split, recode planner, CLI package)
must keep: each test here failed on the merged tree before its fix."""

from __future__ import annotations


import chunkstore as cs
from chunkstore.storage import MemoryStore


def test_nchunks_initialized_sees_a_resize_by_another_handle(layout):
    # cache_metadata=False: every property reads the current metadata; the chunks counted
    # are those of the current grid, not of the grid the handle last saw.
    store = MemoryStore()
    a = layout((8, 8), (2, 2), store=store)
    a[:] = 1
    b = cs.open_array(store, mode="r+", cache_metadata=False)
    a.resize(16, 8)
    a[8:] = 2
    assert b.nchunks_initialized == a.nchunks_initialized == 32
    assert b.nchunks == 32


def test_like_of_an_object_array_keeps_zarr_python_2s_filters_and_fill():
    import numcodecs
    o = cs.create(4, chunks=2, dtype=object, object_codec=numcodecs.VLenUTF8(),
                  store=MemoryStore())
    z = cs.zeros_like(o)
    assert z.filters == [numcodecs.VLenUTF8()]
    # (fill null; a missing chunk reads as "", as zarr-python 3 reads it)
    assert z.fill_value is None and z[0] == ""
    # filters= replaces every filter (the object codec is not added twice)
    z = cs.zeros_like(o, filters=[numcodecs.VLenUTF8()])
    assert z.filters == [numcodecs.VLenUTF8()]


def test_like_of_a_v2_array_takes_the_default_dimension_separator():
    a = cs.create((4, 4), chunks=2, dtype="i4", dimension_separator="/", store=MemoryStore())
    assert cs.zeros_like(a).dimension_separator == "."
    assert cs.zeros_like(a, dimension_separator="/").dimension_separator == "/"


def test_full_like_with_another_dtype_checks_the_source_fill_value():
    import pytest
    a = cs.full(4, -1.5, chunks=2, dtype="f8", store=MemoryStore())
    with pytest.raises(ValueError, match="not an integer"):
        cs.full_like(a, dtype="i4")
    assert cs.full_like(a, dtype="f4").fill_value == -1.5


def test_like_with_another_shape_plans_the_chunks_for_it(layout):
    a = layout((8, 6), (2, 3), store=MemoryStore())
    z = cs.zeros_like(a, shape=(3, 3))
    assert z.shape == (3, 3) and z.chunks == (2, 3)
    if not layout.sharded:
        z = cs.zeros_like(a, shape=(10,), chunks=5)
        assert (z.shape, z.chunks) == ((10,), (5,))
        z = cs.zeros_like(a, shape=(1000, 1000), chunks=True)
        assert z.chunks == cs.zeros((1000, 1000), chunks=True, dtype="i4",
                                    zarr_format=layout.zarr_format).chunks


def test_cp_under_an_array_names_the_path_the_array_and_the_store(tmp_path, capsys):
    from chunkstore.cli import main
    src, dst = str(tmp_path / "s.zarr"), str(tmp_path / "d.zarr")
    cs.zeros(4, chunks=2, store=src, path="a")
    cs.zeros(4, chunks=2, store=dst, path="c")
    assert main(["cp", src, dst, "--src-path", "a", "--dst-path", "c/inside"]) == 1
    err = capsys.readouterr().err
    assert "cannot create 'c/inside': an array exists at 'c' in DirectoryStore(" in err
