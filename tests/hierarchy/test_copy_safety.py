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
