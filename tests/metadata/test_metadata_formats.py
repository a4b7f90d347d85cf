"""metadata.formats: the one table of what each Zarr format stores where, checked against what
zarr-python writes; and the import paths kept when normalize_store and open() moved."""

import json

import numpy as np
import pytest
import zarr

import chunkstore
from chunkstore.compat import dtype as zdtype
from chunkstore.hierarchy.attrs import Attributes
from chunkstore.errors import MetadataError
from chunkstore.metadata.formats import FORMATS, format_of, node_at, node_document_names


@pytest.mark.parametrize("fmt", [2, 3])
def test_key_names_match_zarr_python(fmt):
    written = {}
    root = zarr.open_group(store=zarr.storage.MemoryStore(written), mode="w", zarr_format=fmt)
    root.create_array("a", shape=(2,), dtype="i4")
    root.attrs["x"] = 1
    store = {k: v.to_bytes() for k, v in written.items()}
    f = format_of(fmt)
    assert f.zarr_format == fmt
    assert f.metadata_key("group") in store
    assert "a/" + f.metadata_key("array") in store
    assert f.attrs_key in store
    assert f.read_attributes(store[f.attrs_key], f.attrs_key) == {"x": 1}
    assert node_at(store, "") == ("group", fmt)
    assert node_at(store, "a") == ("array", fmt)
    assert node_at(store, "missing") == (None, None)
    assert {k.rsplit("/", 1)[-1] for k in store} <= node_document_names()


@pytest.mark.parametrize("bad", [1, 4, None, "3", True])
def test_format_of_rejects_other_formats(bad):
    with pytest.raises(ValueError, match="zarr_format must be 2 or 3"):
        format_of(bad)


def test_v3_attributes_keep_the_rest_of_zarr_json(tmp_path):
    g = chunkstore.group(str(tmp_path / "g.zarr"), zarr_format=3)
    g.create_dataset("a", shape=(3,), chunks=(2,), dtype="f4")
    before = json.loads(g.store["a/zarr.json"])
    attrs = Attributes(g.store, "a/zarr.json", zarr_format=3)
    attrs.update(units="m", scale=np.float32(2.0))
    after = json.loads(g.store["a/zarr.json"])
    assert after.pop("attributes") == {"units": "m", "scale": 2.0}
    before.pop("attributes")
    assert after == before
    assert zarr.open_array(str(tmp_path / "g.zarr"), path="a", mode="r").attrs.asdict() == {"units": "m", "scale": 2.0}


def test_v2_attributes_are_their_own_document():
    g = chunkstore.group(zarr_format=2)
    attrs = Attributes(g.store, ".zattrs", zarr_format=2)
    attrs["k"] = [1, 2]
    assert json.loads(g.store[".zattrs"]) == {"k": [1, 2]}
    assert json.loads(g.store[".zgroup"]) == {"zarr_format": 2}


def test_invalid_zarr_json_names_the_key():
    store = {"g/zarr.json": b"{not json"}
    with pytest.raises(MetadataError, match="g/zarr.json"):
        node_at(store, "g")
    with pytest.raises(MetadataError, match="g/zarr.json"):
        FORMATS[3].read_attributes(store["g/zarr.json"], "g/zarr.json")


_BOTH = ["int32", "<f8", "bool", "complex64", str, [("a", "<i4"), ("b", "<f8")]]
# no Zarr v3 spelling here; v3 data types have no byte order (the bytes codec has it)
_V2_ONLY = [bytes, "S4", "<M8[ns]", ">f8"]


@pytest.mark.parametrize("fmt, spec", [(2, s) for s in _BOTH + _V2_ONLY] + [(3, s) for s in _BOTH])
def test_dtype_json_round_trips_through_the_table(fmt, spec):
    d = zdtype.parse_dtype(np.dtype(spec) if isinstance(spec, list) else spec)
    doc = d.to_json(fmt)
    assert zdtype.ZDType.from_json(doc, fmt) == d


def test_dtype_json_spellings():
    assert zdtype.parse_dtype(">f8").to_json(2) == {"name": ">f8", "object_codec_id": None}
    assert zdtype.parse_dtype(">f8").to_json(3) == "float64"
    assert zdtype.parse_dtype(str).to_json(2) == {"name": "|O", "object_codec_id": "vlen-utf8"}
    assert zdtype.parse_dtype(str).to_json(3) == "string"


def test_moved_functions_keep_their_import_paths():
    from chunkstore.hierarchy.group import open as group_open
    from chunkstore.storage import normalize_store as a
    from chunkstore.storage.normalize import normalize_store as c
    assert a is c
    assert chunkstore.open is group_open
    s = {}
    chunkstore.zeros((2,), chunks=(1,), store=s, path="x")
    assert isinstance(chunkstore.open(s, mode="r", path="x"), chunkstore.Array)
    assert isinstance(chunkstore.open(s, mode="r"), chunkstore.Group)


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidate_through_the_table_is_read_by_zarr_python(fmt, tmp_path):
    from chunkstore.metadata.formats import is_consolidated, kind_of_document
    store = chunkstore.DirectoryStore(str(tmp_path))
    g = chunkstore.group(store=store, zarr_format=fmt, path="top")
    g.create_group("sub").zeros("x", shape=(4,), chunks=(2,), dtype="i2")
    g.zeros("y", shape=(3,), chunks=(3,), dtype="f4")
    f = format_of(fmt)
    assert not is_consolidated(store, "top")
    key, n = f.consolidate(store, "top", ".zmetadata")
    assert key == "top/" + (".zmetadata" if fmt == 2 else "zarr.json")
    doc = json.loads(store[key])
    entries = doc["metadata"] if fmt == 2 else doc["consolidated_metadata"]["metadata"]
    assert n == len(entries) and n >= 3  # sub, sub/x, y (v2 also the group's own .zgroup)
    assert is_consolidated(store, "top") and not is_consolidated(store, "top/sub")
    theirs = zarr.open_consolidated(str(tmp_path), path="top", zarr_format=fmt)
    assert theirs["sub/x"].shape == (4,) and theirs["y"].dtype == np.float32
    kinds = {k: kind_of_document(store, k) for k in store}
    assert kinds["top/sub/x/" + f.array_key] == "array"
    assert kinds["top/sub/" + f.group_key] == "group"
    assert kinds[key] == ("group" if fmt == 3 else None)


def test_kind_of_a_v3_document_is_one_read():
    from chunkstore.metadata.formats import kind_of_document

    class Counting(dict):
        probes = 0

        def __contains__(self, key):
            Counting.probes += 1
            return super().__contains__(key)

        def __getitem__(self, key):
            Counting.probes += 1
            return super().__getitem__(key)

    store = Counting()
    chunkstore.zeros(shape=(2,), store=store, path="a", zarr_format=3)
    Counting.probes = 0
    assert kind_of_document(store, "a/zarr.json") == "array"
    assert Counting.probes == 1  # the document itself, no probe for .zarray/.zgroup
