"""Creations that must refuse with the store as it was, and creation arguments that must not
be dropped (found by comparing every creation function with zarr-python 2 and 3 over
existing nodes). Each test compares every key and value of the store before and after."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ArrayNotFoundError, ContainsGroupError, CopyError


def _hierarchy(fmt):
    store = cs.MemoryStore()
    g = cs.group(store, zarr_format=fmt)
    g.create_dataset("a", shape=(4,), chunks=(2,), dtype="i4")[:] = [1, 2, 3, 4]
    g.create_group("g").create_dataset("x", shape=(2,), dtype="i4")[:] = [7, 8]
    return store, g


def _snapshot(store):
    return {k: bytes(store[k]) for k in store}


BAD_OBJECTS = np.array([1, "x", None], dtype=object)  # (vlen-utf8 refuses the int)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("call", ["save", "save_array", "save_array over a group", "array",
                                  "create_array", "from_array"])
def test_object_data_a_codec_refuses_leaves_the_replaced_node(fmt, call):
    # found only when the data was written, after overwrite=True had removed the node there
    store, _ = _hierarchy(fmt)
    before = _snapshot(store)
    v2 = {"object_codec": __import__("numcodecs").VLenUTF8()} if fmt == 2 else {}
    calls = {
        "save": lambda: cs.save(store, BAD_OBJECTS, path="a", zarr_format=fmt, **v2),
        "save_array": lambda: cs.save_array(store, BAD_OBJECTS, path="a", zarr_format=fmt,
                                            **v2),
        "save_array over a group": lambda: cs.save_array(store, BAD_OBJECTS, path="g",
                                                         zarr_format=fmt, **v2),
        "array": lambda: cs.array(BAD_OBJECTS, store=store, path="a", overwrite=True,
                                  zarr_format=fmt, **v2),
        "create_array": lambda: cs.create_array(store, name="a", data=BAD_OBJECTS,
                                                overwrite=True, zarr_format=fmt),
        "from_array": lambda: cs.from_array(store, name="a", data=BAD_OBJECTS,
                                            overwrite=True, zarr_format=fmt),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (v2 with no object codec given: refused for that, before anything, too)
        with pytest.raises((TypeError, ValueError),
                           match="nothing was changed|needs an object_codec"):
            calls[call]()
    assert _snapshot(store) == before


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("call", ["create_array", "Group.create_array", "create_group",
                                  "Group.create_group", "open_group", "group", "from_array",
                                  "Group.from_store"])
def test_attributes_json_cannot_hold_refuse_the_creation_before_anything_is_removed(fmt,
                                                                                     call):
    # they were set after the creation: the node replaced was gone when they raised
    store, root = _hierarchy(fmt)
    before = _snapshot(store)
    bad = {"when": {1, 2}}
    calls = {
        "create_array": lambda: cs.create_array(store, name="a", shape=(2,), dtype="i4",
                                                attributes=bad, overwrite=True,
                                                zarr_format=fmt),
        "Group.create_array": lambda: root.create_array("a", shape=(2,), dtype="i4",
                                                        attributes=bad, overwrite=True),
        "create_group": lambda: cs.create_group(store, path="g", attributes=bad,
                                                overwrite=True, zarr_format=fmt),
        "Group.create_group": lambda: root.create_group("g", attributes=bad, overwrite=True),
        "open_group": lambda: cs.open_group(store, path="g", mode="w", attributes=bad,
                                            zarr_format=fmt),
        "group": lambda: cs.group(store, path="g", overwrite=True, attributes=bad,
                                  zarr_format=fmt),
        "from_array": lambda: cs.from_array(store, name="a", data=np.arange(3),
                                            attributes=bad, overwrite=True, zarr_format=fmt),
        "Group.from_store": lambda: cs.Group.from_store(store, attributes=bad,
                                                        overwrite=True, zarr_format=fmt),
    }
    with pytest.raises((TypeError, ValueError), match="set"):
        calls[call]()
    assert _snapshot(store) == before


@pytest.mark.parametrize("call", ["create", "zeros", "array", "create_dataset",
                                  "create_array"])
def test_v2_array_attributes_are_written(call):
    # create(attributes=) was dropped for Zarr v2 (no .zattrs); zarr-python 3 writes them
    store = cs.MemoryStore()
    attrs = {"k": 1, "units": "m"}
    g = cs.group(store, zarr_format=2)
    made = {
        "create": lambda: cs.create(shape=(3,), store=store, path="a", attributes=attrs,
                                    zarr_format=2),
        "zeros": lambda: cs.zeros((3,), store=store, path="a", attributes=attrs,
                                  zarr_format=2),
        "array": lambda: cs.array(np.arange(3), store=store, path="a", attributes=attrs,
                                  zarr_format=2),
        "create_dataset": lambda: g.create_dataset("a", shape=(3,), attributes=attrs),
        "create_array": lambda: cs.create_array(store, name="a", shape=(3,), dtype="i4",
                                                attributes=attrs, zarr_format=2),
    }[call]()
    assert dict(made.attrs) == attrs
    assert dict(cs.open_array(store, path="a", mode="r").attrs) == attrs
    zarr = pytest.importorskip("zarr")
    from zarr.core.buffer.cpu import Buffer
    theirs = zarr.storage.MemoryStore({k: Buffer.from_bytes(bytes(v)) for k, v in store.items()})
    assert dict(zarr.open_array(store=theirs, path="a", mode="r").attrs) == attrs



@pytest.mark.parametrize("fmt", [2, 3])
def test_open_array_takes_the_attributes_of_an_array_it_creates(fmt):
    """open_array(mode="w"/"w-"/"a", attributes=) as zarr-python 3's: the attributes of the
    array created (it was refused as an unknown keyword); an existing array opened with mode
    "a" keeps its own, and attributes JSON cannot hold leave the replaced array as it was."""
    store = cs.MemoryStore()
    made = cs.open_array(store, path="a", mode="w", shape=(3,), dtype="i4",
                         attributes={"u": 1}, zarr_format=fmt)
    made[:] = [1, 2, 3]
    assert dict(cs.open_array(store, path="a", mode="r").attrs) == {"u": 1}
    assert dict(cs.open_array(store, path="a", mode="a", attributes={"u": 2}).attrs) == {"u": 1}
    fresh = cs.open_array(store, path="b", mode="w-", shape=(2,), dtype="i4",
                          attributes={"v": [1]}, zarr_format=fmt)
    assert dict(fresh.attrs) == {"v": [1]}
    before = _snapshot(store)
    with pytest.raises(TypeError, match="attributes"):
        cs.open_array(store, path="a", mode="w", shape=(3,), dtype="i4",
                      attributes={"u": {1}}, zarr_format=fmt)
    assert _snapshot(store) == before

def test_v2_dimension_names_of_the_wrong_length_are_refused():
    store = cs.MemoryStore()
    with pytest.raises(ValueError, match="dimension_names has 3 entries"):
        cs.create_array(store, name="a", shape=(10,), dtype="i4", zarr_format=2,
                        dimension_names=["p", "q", "r"])
    assert len(store) == 0
    z = cs.create_array(store, name="a", shape=(10,), dtype="i4", zarr_format=2,
                        dimension_names=["p"])
    assert z.attrs["_ARRAY_DIMENSIONS"] == ["p"]


@pytest.mark.parametrize("dry_run", [False, True])
def test_copy_skip_initialized_refuses_an_array_onto_a_group(dry_run):
    # an array copied onto a group replaced the group and its arrays' data
    store, root = _hierarchy(2)
    src = cs.group(cs.MemoryStore())
    src.create_dataset("g", shape=(3,), dtype="i4")[:] = 5
    before = _snapshot(store)
    with pytest.raises(CopyError, match="skip_initialized"):
        cs.copy(src["g"], root, if_exists="skip_initialized", dry_run=dry_run)
    with pytest.raises(CopyError, match="skip_initialized"):
        cs.copy_all(src, root, if_exists="skip_initialized", dry_run=dry_run)
    assert _snapshot(store) == before


def test_like_functions_take_a_zarr_python_array():
    zarr = pytest.importorskip("zarr")
    z = zarr.create_array(store={}, shape=(8, 6), chunks=(2, 3), dtype="f4", fill_value=1.5)
    for fn, fill in [(cs.zeros_like, 0), (cs.ones_like, 1), (cs.full_like, 1.5)]:
        a = fn(z)
        assert (a.shape, a.chunks, a.dtype) == ((8, 6), (2, 3), np.dtype("f4"))
        np.testing.assert_array_equal(a[...], np.full((8, 6), fill, "f4"))
    assert cs.empty_like(z).shape == (8, 6)


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_open_with_a_shape_over_a_group_raises_array_not_found(mode):
    # it returned the group, the array arguments ignored (zarr-python 3: ArrayNotFoundError)
    store, _ = _hierarchy(3)
    with pytest.raises(ArrayNotFoundError):
        cs.open(store, mode=mode, path="g", shape=(20,), dtype="f8")
    assert isinstance(cs.open(store, mode=mode, path="g"), cs.Group)


def test_require_dataset_over_a_group_is_a_type_error_too():
    store, root = _hierarchy(2)
    with pytest.raises(ContainsGroupError) as e:
        root.require_dataset("g", shape=(2,), dtype="i4")
    assert isinstance(e.value, TypeError)


def test_from_array_keeps_what_zarr_python_3_keeps():
    # from NumPy in Zarr v2: the data type's default fill value (it wrote null, and with
    # write_data=False the array had no fill value at all)
    z = cs.from_array(cs.MemoryStore(), name="a", data=np.arange(4.0), zarr_format=2,
                      write_data=False)
    assert z.fill_value == 0.0
    np.testing.assert_array_equal(z[...], np.zeros(4))
    # from an Array: its dimension names, and a v2 source's order
    src = cs.create_array(cs.MemoryStore(), shape=(4, 2), dtype="i4",
                          dimension_names=["y", "x"], attributes={"k": 1})
    z = cs.from_array(cs.MemoryStore(), data=src)
    assert z.metadata.dimension_names == ("y", "x")
    f = cs.create_array(cs.MemoryStore(), shape=(4, 2), dtype="i4", order="F", zarr_format=2)
    f[...] = np.arange(8).reshape(4, 2)
    z = cs.from_array(cs.MemoryStore(), data=f, zarr_format=2)
    assert z.order == "F"
    np.testing.assert_array_equal(z[...], np.arange(8).reshape(4, 2))


def test_object_data_that_cannot_be_utf8_encoded_is_a_value_error_naming_the_array():
    # a lone surrogate: the codec's UnicodeEncodeError cannot be rebuilt from one message
    # (it was a TypeError, "function takes exactly 5 arguments")
    store, _ = _hierarchy(3)
    before = _snapshot(store)
    with pytest.raises(ValueError, match="path 'a'.*surrogates.*nothing was changed"):
        cs.save_array(store, np.array(["\ud800", "x"], dtype=object), path="a",
                      zarr_format=3)
    assert _snapshot(store) == before


_ONTO_ITSELF = {
    "save_array": lambda root, g: cs.save_array(root, g["x"], path="x"),
    "save root": lambda root, g: cs.save(root, g["x"]),
    "array": lambda root, g: cs.array(g["x"], store=root, path="x", overwrite=True),
    "group.array": lambda root, g: g.array("x", g["x"], overwrite=True),
    "create_array": lambda root, g: cs.create_array(root, name="x", data=g["x"],
                                                    overwrite=True),
    "group above": lambda root, g: cs.create_array(root, name="", data=g["x"],
                                                   overwrite=True),
}


@pytest.mark.parametrize("how", list(_ONTO_ITSELF))
def test_an_array_written_over_itself_or_its_group_is_refused_and_kept(tmp_path, how):
    """save / array(overwrite=True) / create_array(data=) of an Array onto its own path (or a
    group above it) replaced it first, then read it: every element stored as the fill value
    (zarr-python 2's save does the same). Refused, naming both, with the data kept."""
    root = str(tmp_path / "r.zarr")
    g = cs.open_group(root, mode="w")
    g.array("x", np.arange(6), chunks=4)
    with pytest.raises(ValueError, match=r"cannot overwrite the node at path '(x)?' .*with "
                                         r"array '/x', which it (is|holds)"):
        _ONTO_ITSELF[how](root, g)
    np.testing.assert_array_equal(cs.open_array(root, path="x", mode="r")[:], np.arange(6))
    # a copy to another path of the same store is no overwrite of its source
    cs.array(g["x"], store=root, path="y", overwrite=True)
    np.testing.assert_array_equal(cs.open_array(root, path="y", mode="r")[:], np.arange(6))


@pytest.mark.parametrize("kind", ["array", "array with data", "group"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_a_creation_whose_own_document_fails_removes_the_groups_it_made(kind, fmt):
    """The groups missing above a new node were written first; where the node's own
    document then failed (an I/O error; a name the filesystem refuses), they stayed behind
    as empty groups: the store was not as it was."""
    import errno

    class Flaky(cs.MemoryStore):
        def __setitem__(self, k, v):
            if k.startswith("p/q/x/"):
                raise OSError(errno.EIO, "injected", k)
            super().__setitem__(k, v)

    st = Flaky()
    root = cs.open_group(st, mode="w", zarr_format=fmt)
    root.require_group("keep")
    before = dict(st)
    with pytest.raises(OSError, match="injected"):
        if kind == "array":
            root.create_array("p/q/x", shape=(4,), dtype="i4")
        elif kind == "array with data":
            root.create_dataset("p/q/x", data=np.arange(4), chunks=2)
        else:
            root.create_group("p/q/x")
    assert dict(st) == before


def test_a_creation_refused_by_the_filesystem_leaves_no_groups(tmp_path):
    st = cs.DirectoryStore(str(tmp_path / "s.zarr"))
    root = cs.open_group(st, mode="w")
    with pytest.raises(OSError):
        root.create_dataset("p/q/" + "x" * 300, data=np.arange(4), chunks=2)
    assert sorted(st) == [".zgroup"]


def test_a_creation_failing_on_a_full_disk_leaves_no_groups_in_a_directory(tmp_path,
                                                                           monkeypatch):
    """The write of the new array's document failed (ENOSPC) after its directory was made:
    the empty directory was taken for a member of the group made above, which stayed."""
    import errno
    from chunkstore.storage import local_files
    st = cs.DirectoryStore(str(tmp_path / "s.zarr"))
    root = cs.open_group(st, mode="w")
    real = local_files.atomic_write

    def full(path, data, **kw):
        if "/x/" in path:  # (the directory made, as atomic_write makes it, then no room)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(path, data, **kw)

    monkeypatch.setattr(local_files, "atomic_write", full)
    import chunkstore.storage.directory as directory
    monkeypatch.setattr(directory, "atomic_write", full)
    with pytest.raises(OSError, match="No space"):
        root.create_array("p/q/x", shape=(4,), dtype="i4")
    assert sorted(st) == [".zgroup"]
