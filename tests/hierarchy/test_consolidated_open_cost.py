"""Opening a consolidated hierarchy costs one parse of each member it opens and no probe of
the store behind per member; tree() describes arrays from their metadata documents without
opening them (issue 30). Counted with patched parsers, store probes and Array.__init__."""

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.engine.array import Array
from chunkstore.metadata import v3 as meta_v3
from chunkstore.storage.directory import DirectoryStore

N = 40


@pytest.fixture(params=[2, 3])
def hierarchy(tmp_path, request):
    path = str(tmp_path / "h.zarr")
    g = cs.open_group(path, mode="w", zarr_format=request.param)
    sub = g.create_group("sub")
    for i in range(N):
        a = g.create_array(f"a{i:02d}", shape=(4, i + 1), chunks=(2, 2), dtype="f4" if i % 2
                           else "S3")
        a.attrs["i"] = i
    sub.create_array("x", shape=(3,), dtype="i2")
    g["a01"][...] = np.arange(8, dtype="f4").reshape(4, 2)
    cs.consolidate_metadata(path)
    return path, request.param


def test_listing_a_consolidated_hierarchy_parses_each_member_once(hierarchy, monkeypatch):
    path, fmt = hierarchy
    parses = []
    real = meta_v3._parse_array_doc
    monkeypatch.setattr(meta_v3, "_parse_array_doc",
                        lambda doc, *a: parses.append(1) or real(doc, *a))
    probes = []
    real_contains = DirectoryStore.__contains__
    monkeypatch.setattr(DirectoryStore, "__contains__",
                        lambda self, key: probes.append(key) or real_contains(self, key))
    g = cs.open_consolidated(path, mode="r")
    arrays = dict(g.arrays())
    assert len(arrays) == N
    if fmt == 3:
        assert len(parses) == N  # one each (it was three)
    assert [k for k in probes if k.endswith(("zarr.json", ".zarray", ".zgroup"))] == [] \
        if fmt == 3 else True
    np.testing.assert_array_equal(arrays["a01"][...], np.arange(8, dtype="f4").reshape(4, 2))
    assert arrays["a07"].attrs["i"] == 7 and arrays["a06"].dtype == np.dtype("S3")


def test_tree_describes_arrays_without_opening_them(hierarchy, monkeypatch):
    path, _ = hierarchy
    want = str(cs.open_group(path, mode="r").tree())
    assert "a01 (4, 2) float32" in want and "x (3,) int16" in want and "a00 (4, 1) |S3" in want
    g = cs.open_consolidated(path, mode="r")
    opened = []
    real = Array.__init__
    monkeypatch.setattr(Array, "__init__",
                        lambda self, *a, **kw: opened.append(1) or real(self, *a, **kw))
    assert str(g.tree()) == want
    assert "a01" in g.tree()._repr_html_()
    assert opened == []


def test_a_broken_member_document_is_named_by_tree(tmp_path):
    path = str(tmp_path / "b.zarr")
    g = cs.open_group(path, mode="w", zarr_format=3)
    g.create_array("a", shape=(2,), dtype="f4")
    (tmp_path / "b.zarr" / "a" / "zarr.json").write_text(
        '{"zarr_format": 3, "node_type": "array", "data_type": "float32"}')
    with pytest.raises(cs.errors.MetadataError, match="a/zarr.json"):
        str(cs.open_group(path, mode="r").tree())


def test_tree_max_nodes_truncates_as_zarr_python_3():
    g = cs.group()
    for i in range(5):
        g.zeros(f"a{i}", shape=(1,))
    text = str(g.tree(max_nodes=3))
    assert text.splitlines()[0] == ("Truncated at max_nodes=3, some nodes and their children "
                                    "may be missing")
    assert text.count("(1,) float64") == 3
    assert "Truncated" not in str(g.tree(max_nodes=5)) and str(g.tree(plain=True)) == \
        str(g.tree())
    assert "Truncated" in bytes(g.tree(max_nodes=1)).decode()
    with pytest.raises(ValueError, match="max_nodes"):
        g.tree(max_nodes=-1)
