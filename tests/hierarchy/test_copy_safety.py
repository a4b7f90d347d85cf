"""copy / copy_all / save_group where they lost or tore data (found by a hunt; each test
failed on the code before): a copy onto its own ancestor deleted its source, into its own
subtree it recursed; a copy failing midway left a half-written array that read as valid;
a raw copy racing an append took the new shape without the new chunks; a recoding copy
stored the fill value of an object array with fill None as ''; a raw copy to a nested name
made no groups above it; save_group wiped the store before finding an array it refused."""

import errno

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.hierarchy.convenience import CopyError
from faults import FaultyStore


def _tree():
    store = {}
    g = cs.group(store, zarr_format=2)
    g.create_group("a").create_dataset("b", data=np.arange(20), chunks=(8,))
    g["a"].create_dataset("c", data=np.arange(5) * 2, chunks=(2,))
    return store, g


@pytest.mark.parametrize("how", ["onto parent", "onto itself", "into own subgroup",
                                 "copy_all onto itself", "root into a subgroup"])
def test_copies_that_overlap_their_source_are_refused_with_nothing_changed(how):
    store, g = _tree()
    before = dict(store)
    with pytest.raises(CopyError, match="one holds the other"):
        if how == "onto parent":
            cs.copy(g["a/b"], g, name="a", if_exists="replace")
        elif how == "onto itself":
            cs.copy(g["a/b"], g["a"], name="b", if_exists="replace", chunks=(3,))
        elif how == "into own subgroup":
            cs.copy(g["a"], g["a"], name="x")
        elif how == "copy_all onto itself":
            cs.copy_all(g["a"], g["a"], if_exists="replace")
        else:
            cs.copy(g, g["a"], name="root")
    assert store == before
    # a copy beside its source in the same store is fine
    cs.copy(g["a/b"], g, name="b2")
    np.testing.assert_array_equal(g["b2"][:], np.arange(20))


def test_v3_string_array_in_f_order_copies_and_makes_likes():
    src = cs.create_array({}, shape=(4, 3), chunks=(2, 3), dtype=str, order="F")
    src[:] = np.array([["a", "bb", "c"]] * 4, dtype=object)
    for fmt in (3, 2):
        dst = cs.group({}, zarr_format=fmt)
        cs.copy(src, dst, name="s", chunks=(4, 3))
        assert dst["s"][:].tolist() == src[:].tolist()
    assert cs.zeros_like(src, store={}).shape == (4, 3)


def test_a_copy_refused_while_planning_writes_nothing():
    src = cs.group({}, zarr_format=2)
    src.create_dataset("a", data=np.arange(4))
    src.create_dataset("s", shape=(2,), dtype=[("f", "<f4", (2,))])
    src.attrs["x"] = 1
    store = {}
    dst = cs.group(store, zarr_format=3)
    before = dict(store)
    with pytest.raises(ValueError, match="unsupported data type"):
        cs.copy_all(src, dst, chunks=(2,))
    assert store == before


@pytest.mark.parametrize("kws", [{}, {"chunks": 20}])
def test_a_copy_failing_midway_leaves_no_half_written_array(kws):
    src = cs.group({}, zarr_format=2)
    src.create_dataset("a", data=np.arange(100), chunks=10)
    src.create_dataset("b", data=np.arange(100), chunks=10)
    st = FaultyStore(cs.MemoryStore())
    dst = cs.group(st, zarr_format=2)
    st.fail_write(lambda key: True, errno.ENOSPC, after=5)  # (a disk filling up)
    with pytest.raises(OSError):
        cs.copy_all(src, dst, **kws)
    assert sorted(st.inner) == [".zgroup"]


def test_a_raw_copy_racing_an_append_copies_one_version():
    class Store(cs.MemoryStore):
        hook = None

        def keys(self):
            ks = list(super().keys())
            if Store.hook:
                h, Store.hook = Store.hook, None
                h()  # another handle appends between the listing and the reads
            return iter(ks)

    st = Store()
    src = cs.group(st, zarr_format=2)
    z = src.create_dataset("a", data=np.arange(10), chunks=5, fill_value=-1)
    other = cs.open_array(st, path="a", mode="a")
    Store.hook = lambda: other.append(np.arange(10, 20))
    dst = cs.group({}, zarr_format=2)
    cs.copy(z, dst)
    got = dst["a"][:]
    # the version the copy started from (its metadata is read first), never shape 20
    # with elements 10..19 missing (read as -1)
    np.testing.assert_array_equal(got, np.arange(10))
    assert sorted(k for k in dst.store if k.startswith("a/")) == ["a/.zarray", "a/0", "a/1"]


def test_a_recoding_copy_writes_no_chunks_the_source_does_not_store():
    import numcodecs

    src = cs.group({}, zarr_format=2)
    a = src.create_dataset("c", shape=(4,), chunks=(2,), dtype=object,
                           object_codec=numcodecs.VLenUTF8(), fill_value=None)
    n = src.create_dataset("n", shape=(1000,), chunks=(10,), dtype="f8", fill_value=np.nan)
    n[500:505] = 1.0
    dst = cs.group({}, zarr_format=2)
    cs.copy_all(src, dst, compressor=numcodecs.GZip(1))
    assert dst["c"][:].tolist() == a[:].tolist() == [""] * 4  # (zarr-python 3 reads "")
    assert dst["c"].nchunks_initialized == 0
    np.testing.assert_array_equal(dst["n"][:], n[:])
    assert dst["n"].nchunks_initialized == 1
    # another fill value in the copy: the source's fill is written where it reads it
    f = cs.group({}, zarr_format=2)
    cs.copy(n, f, name="n", fill_value=0.0)
    np.testing.assert_array_equal(f["n"][:], n[:])


def test_a_raw_copy_to_a_nested_name_makes_the_groups_above():
    src = cs.zeros(6, chunks=3, dtype="i8", store={})
    src[:] = np.arange(6)
    dst = cs.group({}, zarr_format=2)
    cs.copy(src, dst, name="x/y")
    assert "x" in dst and list(dst["x"].array_keys()) == ["y"]
    np.testing.assert_array_equal(dst["x/y"][:], np.arange(6))


@pytest.mark.parametrize("fmt", [2, 3])
def test_save_group_refusing_an_array_keeps_the_store(tmp_path, fmt):
    p = str(tmp_path / "sg.zarr")
    cs.save_group(p, keep=np.arange(3), zarr_format=fmt)
    # (v2 refuses the array's metadata: no object codec for ints; v3 takes it, vlen-utf8,
    # and refuses the int when it encodes it: refused before the store is overwritten all
    # the same)
    for b in (np.array([1, "x"], dtype=object), np.array(["x", 1], dtype=object)):
        with pytest.raises((TypeError, ValueError),
                           match="cannot save array 'b' .*nothing was changed"):
            cs.save(p, a=np.arange(2), b=b, zarr_format=fmt)
    g = cs.open_group(p, mode="r")
    assert list(g.array_keys()) == ["keep"]
    np.testing.assert_array_equal(g["keep"][:], np.arange(3))


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_creation_refused_because_a_node_is_there_keeps_that_node(fmt):
    # (the clean-up of a failed creation removes only what the creation made)
    store = {}
    g = cs.group(store, zarr_format=fmt)
    g.create_group("x").attrs["k"] = 1
    g.create_dataset("a", data=np.arange(3))
    before = dict(store)
    with pytest.raises(cs.errors.ContainsGroupError):
        g.array("x", np.zeros((2, 3)))
    with pytest.raises(cs.errors.ContainsArrayError):
        cs.array(np.zeros(2), store=store, path="a")
    with pytest.raises(CopyError):
        cs.copy(g["a"], g, name="x")
    assert store == before


def test_a_raw_copy_of_a_legacy_nested_array_records_its_separator(tmp_path):
    # a .zarray naming no dimension_separator (zarr-python < 2.8), read through a
    # NestedDirectoryStore by its "/": copied as it was into a plain store, the document
    # meant "." there, and the copy read as all fill value
    import json

    p = tmp_path / "legacy"
    p.mkdir()
    (p / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [2, 2], "chunks": [1, 2], "dtype": "<i4",
        "compressor": None, "fill_value": 0, "order": "C", "filters": None}))
    for i in (0, 1):
        (p / str(i)).mkdir()
        (p / str(i) / "0").write_bytes(np.array([2 * i + 1, 2 * i + 2], "<i4").tobytes())
    src = cs.open_array(cs.NestedDirectoryStore(str(p)), mode="r")
    want = [[1, 2], [3, 4]]
    np.testing.assert_array_equal(src[:], want)
    dst = cs.group(str(tmp_path / "copy"), zarr_format=2)
    cs.copy(src, dst, name="a")
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "copy"), path="a")[:], want)


@pytest.mark.parametrize("how", ["into own subgroup", "onto parent"])
def test_overlap_is_found_through_stores_of_nested_directories(tmp_path, how):
    """The source opened from the store of its own directory, the destination from the
    store of the root above it: one node seen from two roots. Compared by each store and
    the path as given, they seemed apart: the copy into its own subtree recursed, the one
    onto its parent deleted its source first."""
    root = str(tmp_path / "root.zarr")
    g = cs.open_group(root, mode="w", zarr_format=2)
    g.create_group("a").create_dataset("b", data=np.arange(20), chunks=(8,))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(CopyError, match="one holds the other"):
        if how == "into own subgroup":
            cs.copy(cs.open_group(str(tmp_path / "root.zarr" / "a"), mode="r"), g["a"],
                    name="x")
        else:
            cs.copy(cs.open_array(str(tmp_path / "root.zarr" / "a" / "b"), mode="r"), g,
                    name="a", if_exists="replace")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    np.testing.assert_array_equal(g["a/b"][:], np.arange(20))


@pytest.mark.parametrize("consolidated", [False, True])
def test_copy_store_keeps_the_separator_a_document_took_from_its_store(tmp_path, consolidated):
    """A Zarr v2 .zarray naming no dimension_separator (zarr-python < 2.8) is read by its
    store's separator: copied as it was from a NestedDirectoryStore into a store of "."
    keys, its chunks ("0/0") read as missing, every element the fill value with no error
    (zarr-python 2's copy_store does the same; copy() already wrote the document whole).
    The copy's documents now name the separator, consolidated metadata's too."""
    import json
    src = cs.NestedDirectoryStore(str(tmp_path / "src"))
    g = cs.open_group(src, mode="w")
    a = g.create_dataset("a", shape=(2, 4), chunks=(1, 2), dtype="i4", fill_value=0)
    a[...] = [[1, 2, 3, 4], [5, 6, 7, 8]]
    doc = json.loads(src["a/.zarray"])
    del doc["dimension_separator"]
    src["a/.zarray"] = json.dumps(doc).encode()
    if consolidated:
        cs.consolidate_metadata(src)
    want = cs.open_array(src, path="a", mode="r")[...]
    assert want.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]]
    for dest in (cs.DirectoryStore(str(tmp_path / "dst")), cs.MemoryStore()):
        cs.copy_store(src, dest)
        opened = cs.open_consolidated(dest)["a"] if consolidated else \
            cs.open_array(dest, path="a", mode="r")
        np.testing.assert_array_equal(opened[...], want)


# ------------------------------------------------------------------------------ h5py copies
def _h5_with_scales(path):
    """An HDF5 file as netCDF4 writes them: dimension scales attached (DIMENSION_LIST, an
    attribute of object references), a number and a string variable."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "t"
        x = f.create_dataset("x", data=np.arange(4.0))
        x.make_scale("x")
        v = f.create_dataset("v", data=np.arange(4.0) + 10, chunks=(2,))
        v.dims[0].attach_scale(x)
        v.attrs["units"] = "m"
        s = f.create_dataset("s", data=["a", "bé", "c", "d"], dtype=h5py.string_dtype())
        s.dims[0].attach_scale(x)
    return h5py


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("how", ["copy", "copy_all"])
def test_copy_from_h5py_gives_dimension_scales_as_dimension_names(tmp_path, fmt, how):
    """Copying a dataset with a dimension scale attached raised TypeError (its
    DIMENSION_LIST attribute holds references, no JSON) and left an array reading its fill
    value; the scales are the copy's dimensions, as `chunkstore convert` makes them
    (Zarr v3's dimension_names, v2's _ARRAY_DIMENSIONS)."""
    h5py = _h5_with_scales(tmp_path / "in.h5")
    g = cs.group({}, zarr_format=fmt)
    with h5py.File(tmp_path / "in.h5", "r") as f:
        if how == "copy":
            for name in ("x", "v", "s"):
                cs.copy(f[name], g, name=name)
        else:
            cs.copy_all(f, g)
            assert g.attrs.asdict() == {"title": "t"}
    np.testing.assert_array_equal(g["v"][...], np.arange(4.0) + 10)
    assert g["s"][...].tolist() == ["a", "bé", "c", "d"]
    for name, attrs in (("v", {"units": "m"}), ("x", {}), ("s", {})):
        a = g[name]
        if fmt == 3:
            assert a.metadata.dimension_names == ("x",) and a.attrs.asdict() == attrs
        else:
            assert a.attrs.asdict() == {**attrs, "_ARRAY_DIMENSIONS": ["x"]}


@pytest.mark.parametrize("name", ["v", "s"])
def test_a_copy_from_h5py_failing_midway_leaves_no_array(tmp_path, name):
    """A dataset's copy failing midway (a full disk) left an array whose uncopied chunks
    read as its fill value; it is removed again, as an Array's copy is (a sliceable
    dataset, and one of strings, read whole)."""
    h5py = _h5_with_scales(tmp_path / "in.h5")
    st = FaultyStore(cs.MemoryStore())
    g = cs.group(st, zarr_format=2)
    st.fail_write(lambda key: True, errno.ENOSPC, after=1)
    with h5py.File(tmp_path / "in.h5", "r") as f, pytest.raises(OSError):
        cs.copy(f[name], g, name=name, chunks=(1,))
    assert sorted(st.inner) == [".zgroup"]


def test_a_copy_from_h5py_refuses_an_attribute_json_cannot_hold_before_writing(tmp_path):
    """An attribute JSON has no place for (a compound value) is refused naming it, the
    dataset and its file, before anything is written (no array reading its fill value);
    without_attrs=True copies the data."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f.create_dataset("a", data=np.arange(3))
        f.create_dataset("b", data=np.arange(3)).attrs["c"] = np.array(
            (1, 2.5), dtype=[("p", "i4"), ("q", "f8")])
    store = {}
    g = cs.group(store, zarr_format=2)
    before = dict(store)
    with h5py.File(tmp_path / "in.h5", "r") as f:
        with pytest.raises(TypeError, match=r"attribute 'c' of '/b' in .*in\.h5"):
            cs.copy_all(f, g)
        assert store == before
        cs.copy_all(f, g, without_attrs=True)
    np.testing.assert_array_equal(g["b"][...], np.arange(3))


@pytest.mark.parametrize("how", ["copy", "copy_all"])
def test_a_copy_into_h5py_refuses_an_attribute_hdf5_cannot_store_before_writing(tmp_path,
                                                                               how):
    """An attribute HDF5 has no type for (a dict) raised h5py's TypeError naming neither
    the attribute nor the array, after the dataset was made: it read zeros. Refused naming
    both before anything is written (copy_all: no member, no attribute of the root)."""
    h5py = pytest.importorskip("h5py")
    src = cs.group({}, zarr_format=2)
    src.attrs["title"] = "t"
    src.array("a", np.arange(1, 5), chunks=2)
    src.array("v", np.arange(1, 5), chunks=2).attrs["meta"] = {"units": "m"}
    with h5py.File(tmp_path / "out.h5", "w") as f:
        with pytest.raises(TypeError, match=r"attribute 'meta' of array '/v' to '/v'"):
            if how == "copy":
                cs.copy(src["v"], f)
            else:
                cs.copy_all(src, f)
        assert list(f) == [] and dict(f.attrs) == {}
        cs.copy_all(src, f, without_attrs=True)
        np.testing.assert_array_equal(f["v"][()], np.arange(1, 5))


def test_a_copy_into_h5py_failing_midway_leaves_no_dataset(tmp_path):
    """A dataset whose copy into an h5py file fails midway (a chunk that cannot be read)
    is deleted again: it read h5py's fill value where the data was not copied."""
    h5py = pytest.importorskip("h5py")
    st = FaultyStore(cs.MemoryStore())
    src = cs.group(st, zarr_format=2)
    src.array("v", np.arange(1, 101), chunks=10)
    st.fail_read(lambda key: key == "v/5")
    with h5py.File(tmp_path / "out.h5", "w") as f:
        with pytest.raises(OSError):
            cs.copy(src["v"], f, chunks=(10,))
        assert list(f) == []


def test_a_copy_from_h5py_of_strings_labelled_utf8_that_are_not_names_the_dataset(tmp_path):
    """UTF-8-labelled strings that are not UTF-8: a UnicodeDecodeError naming nothing; the
    refusal names the dataset and its file, and no array is left."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f.create_dataset("g/bad", data=np.array([b"caf\xe9", b"b"], dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
    store = {}
    g = cs.group(store, zarr_format=2)
    with h5py.File(tmp_path / "in.h5", "r") as f, \
            pytest.raises(ValueError, match=r"dataset '/g/bad' of .*in\.h5.*not UTF-8"):
        cs.copy(f["g/bad"], g, name="bad")
    assert sorted(store) == [".zgroup"]
