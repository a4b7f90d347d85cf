"""zarr-python 3 names of issue 28 on the synchronous API: Group.from_store / Group.open,
array_values / group_values, zarr.errors' names (the same classes, raised where zarr raises
them), warning categories."""

import json
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore import errors


def test_group_from_store_and_open(tmp_path):
    path = str(tmp_path / "g.zarr")
    g = cs.Group.from_store(path, attributes={"a": 1})
    assert g.zarr_format == 3 and dict(g.attrs) == {"a": 1}
    with pytest.raises(errors.ContainsGroupError):
        cs.Group.from_store(path)
    g2 = cs.Group.from_store(path, overwrite=True, zarr_format=2)
    assert g2.zarr_format == 2 and dict(g2.attrs) == {}
    g2.zeros("x", shape=(2,))
    opened = cs.Group.open(path)
    assert opened == g2 and list(opened.array_keys()) == ["x"]
    with pytest.raises(errors.GroupNotFoundError):
        cs.Group.open(str(tmp_path / "none.zarr"))
    with pytest.raises(errors.GroupNotFoundError):
        cs.Group.open(path, zarr_format=3)
    cs.consolidate_metadata(path)
    assert "Consolidated" in type(cs.Group.open(path, use_consolidated=True).store).__name__


def test_array_values_and_group_values_in_name_order():
    g = cs.group()
    for n in ("b", "a"):
        g.zeros(n, shape=(1,))
    g.create_group("z")
    g.create_group("y")
    assert [a.basename for a in g.array_values()] == ["a", "b"]
    assert [s.basename for s in g.group_values()] == ["y", "z"]


def test_zarr_error_names_are_chunkstores_classes():
    import zarr.errors as ze
    assert errors.MetadataValidationError is errors.MetadataError
    assert errors.BaseZarrError is errors.ChunkstoreError
    assert errors.NodeNotFoundError is errors.PathNotFoundError
    assert issubclass(errors.ArrayIndexError, IndexError)
    assert issubclass(errors.NodeTypeValidationError, errors.MetadataValidationError)
    for name in ("ZarrUserWarning", "ZarrDeprecationWarning", "ZarrFutureWarning",
                 "ZarrRuntimeWarning"):
        assert issubclass(getattr(errors, name), getattr(ze, name).__mro__[1])


@pytest.mark.parametrize("doc", [{"zarr_format": 3, "node_type": "grop"},
                                 {"zarr_format": 3, "node_type": 5}])
def test_a_wrong_node_type_is_a_node_type_validation_error(doc):
    st = {"zarr.json": json.dumps(doc).encode()}
    with pytest.raises(errors.NodeTypeValidationError, match="zarr.json"):
        cs.open(st, mode="r")


def test_the_h5py_compression_warning_is_a_zarr_user_warning():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cs.zeros((4,), compression="gzip", compressor=None, store={})
    assert any(issubclass(x.category, errors.ZarrUserWarning) for x in w)
    np.testing.assert_array_equal(cs.zeros((2,), store={})[...], [0, 0])


def test_an_empty_dimension_with_chunks_of_0_as_zarr_python_3_writes_it():
    zarr = pytest.importorskip("zarr")
    from zarr.core.buffer.cpu import Buffer
    st = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.create_array(st, shape=(0, 3), chunks=(0, 3), dtype="f4")
    raw = {k: v.to_bytes() for k, v in st.items()}
    a = cs.open_array(raw, mode="r")
    assert a.shape == (0, 3) and a[...].shape == (0, 3) and a.nchunks_initialized == 0
    from chunkstore.metadata.v3 import encode_array_metadata_v3, parse_array_metadata_v3
    assert encode_array_metadata_v3(parse_array_metadata_v3(raw["zarr.json"])) == \
        raw["zarr.json"]  # written back as it was, 0 included
    mine = {}
    cs.create_array(mine, shape=(0, 3), chunks=(0, 3), dtype="f4")
    assert json.loads(mine["zarr.json"])["chunk_grid"]["configuration"]["chunk_shape"] == [0, 3]
    z = zarr.open_array({k: Buffer.from_bytes(v) for k, v in mine.items()}, mode="r")
    assert z.shape == (0, 3)
    grown = cs.open_array(mine, mode="r+")
    grown.resize((2, 3))
    grown[...] = 5
    np.testing.assert_array_equal(cs.open_array(mine, mode="r")[...], np.full((2, 3), 5.0))
    with pytest.raises(ValueError, match="positive"):
        cs.create_array({}, shape=(4, 3), chunks=(0, 3), dtype="f4")
    bad = json.loads(raw["zarr.json"])
    bad["shape"] = [4, 3]
    with pytest.raises(errors.MetadataError, match="only an empty dimension"):
        cs.open_array({**raw, "zarr.json": json.dumps(bad).encode()}, mode="r")


@pytest.mark.parametrize("fmt", [2, 3])
def test_chunks_of_0_are_kept_while_their_dimension_stays_empty(fmt):
    """zarr-python 3 writes chunks of 0 for an empty dimension in both formats (v2's
    "chunks": [0, 3] too, which chunkstore refused to open). Opened, resized with that
    dimension still empty, or its attributes changed, the document keeps the 0 (zarr-python
    reads it back); grown, the dimension has chunks of 1, and both libraries read the values."""
    zarr = pytest.importorskip("zarr")
    from zarr.core.buffer.cpu import Buffer
    doc = ".zarray" if fmt == 2 else "zarr.json"

    def chunks_of(store):
        d = json.loads(store[doc])
        return d["chunks"] if fmt == 2 else d["chunk_grid"]["configuration"]["chunk_shape"]

    def zarr_reads(store):
        return zarr.open_array({k: Buffer.from_bytes(v) for k, v in store.items()}, mode="r")

    st = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.create_array(st, shape=(0, 3), chunks=(0, 3), dtype="f4", zarr_format=fmt)
    raw = {k: v.to_bytes() for k, v in st.items()}
    assert chunks_of(raw) == [0, 3]
    a = cs.open_array(raw, mode="r+")
    assert a.shape == (0, 3) and a[...].shape == (0, 3)
    a.attrs["k"] = 1
    a.resize((0, 5))
    assert chunks_of(raw) == [0, 3]
    assert zarr_reads(raw).shape == (0, 5)
    a.resize((2, 5))
    assert chunks_of(raw) == [1, 3]
    a[...] = np.arange(10).reshape(2, 5)
    np.testing.assert_array_equal(zarr_reads(raw)[...], np.arange(10).reshape(2, 5))
    np.testing.assert_array_equal(cs.open_array(raw, mode="r")[...],
                                  np.arange(10).reshape(2, 5))
    mine = {}
    cs.create_array(mine, shape=(0, 3), chunks=(0, 3), dtype="f4", zarr_format=fmt)
    assert chunks_of(mine) == [0, 3]
    assert zarr_reads(mine).shape == (0, 3)


ZDTYPE_CASES = [("Int32", {}, [7, -3]), ("UInt8", {}, [0, 255]), ("Float64", {}, [1.5, np.nan]),
                ("Float32", {}, [np.inf, -0.0]), ("Complex64", {}, [1 + 2j]),
                ("Bool", {}, [True]), ("NullTerminatedBytes", {"length": 4}, [b"ab"]),
                ("FixedLengthUTF32", {"length": 3}, ["xyz"]),
                ("DateTime64", {"unit": "s"}, [np.datetime64(5, "s")]),
                ("VariableLengthUTF8", {}, ["héllo"])]


@pytest.mark.parametrize("name,kw,values", ZDTYPE_CASES)
@pytest.mark.parametrize("fmt", [2, 3])
def test_zdtype_scalar_methods_match_zarr_python(name, kw, values, fmt):
    zdt = pytest.importorskip("zarr.core.dtype")
    import chunkstore.dtype as ours
    mine, theirs = getattr(ours, name)(**kw), getattr(zdt, name)(**kw)
    if name == "VariableLengthUTF8":  # object arrays here, NumPy's StringDType there
        assert mine.dtype_cls is np.dtypes.ObjectDType
    else:
        assert mine.dtype_cls is theirs.dtype_cls
    d_mine, d_theirs = mine.default_scalar(), theirs.default_scalar()
    assert type(d_mine) is type(d_theirs) and (
        d_mine == d_theirs or (d_mine != d_mine and d_theirs != d_theirs))
    for v in values:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = theirs.to_json_scalar(theirs.cast_scalar(v), zarr_format=fmt)
        got = mine.to_json_scalar(mine.cast_scalar(v), zarr_format=fmt)
        assert got == want, (name, v, got, want)
        back = mine.from_json_scalar(got, zarr_format=fmt)
        assert back == mine.cast_scalar(v) or (back != back and v != v)
    annotated: ours.ZDType[np.dtype, np.generic] = mine  # subscriptable, as zarr's
    assert annotated is mine


def test_zarr_version_is_zarr_formats_old_name_not_ignored():
    """zarr_version=3 used to be accepted and ignored (a v2 array made); it means
    zarr_format, as zarr-python takes it, and both given must agree."""
    assert cs.create((3,), store={}, zarr_version=3).zarr_format == 3
    assert cs.zeros((2,), store={}, zarr_version=3).zarr_format == 3
    assert cs.open_array({}, shape=(2,), mode="w", zarr_version=3).zarr_format == 3
    assert cs.open_group({}, mode="w", zarr_version=3).zarr_format == 3
    with pytest.raises(ValueError, match="disagree"):
        cs.create((3,), store={}, zarr_version=3, zarr_format=2)


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_takes_config_and_create_order_none_is_the_configured_order(fmt):
    """zarr.open(..., config={...}) as zarr-python 3 (it was an unknown keyword), and
    create(order=None) means array.order, not an error."""
    store = cs.MemoryStore()
    cs.create(store=store, path="a", shape=(10,), chunks=(5,), dtype="f8", fill_value=0.0,
              zarr_format=fmt)
    a = cs.open(store=store, path="a", config={"write_empty_chunks": True})
    assert a.config.write_empty_chunks is True
    a[0:5] = np.zeros(5)
    assert a.nchunks_initialized == 1
    b = cs.open_array(store=store, path="a", mode="r", config={"write_empty_chunks": False})
    assert b.config.write_empty_chunks is False
    assert cs.create(shape=(4, 4), order=None, zarr_format=fmt).order == "C"
    with cs.config.set({"array.order": "F"}):
        assert cs.create(shape=(4, 4), order=None, zarr_format=fmt).order == "F"
