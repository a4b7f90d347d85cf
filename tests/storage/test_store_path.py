"""zarr-python 3's StorePath (issue 28): a store and a path, given wherever a store goes;
nodes made or opened through one sit at its path, and their store_path gives it back."""

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import MemoryStore, StorePath


@pytest.fixture(params=["memory", "directory"])
def root(request, tmp_path):
    store = MemoryStore() if request.param == "memory" else cs.DirectoryStore(str(tmp_path))
    return StorePath(store)


def test_paths_join_and_compare(root):
    assert (root / "a" / "b").path == "a/b" == (root / "a/b/").path
    assert StorePath(root / "a", "b") == root / "a" / "b"
    assert root / "a" != root / "b" and hash(root / "a") == hash(StorePath(root.store, "a"))
    assert "a/b" in str(root / "a" / "b")
    with pytest.raises(TypeError):
        StorePath(root.store, 3)


@pytest.mark.parametrize("fmt", [2, 3])
def test_every_entry_point_takes_a_store_path(root, fmt):
    g = cs.open_group(root / "g", mode="w", zarr_format=fmt)
    assert g.path == "g" and g.store_path == root / "g"
    a = cs.create_array(root / "g", name="a", shape=(3,), dtype="i4", zarr_format=fmt)
    assert a.path == "g/a" and a.store_path == root / "g" / "a"
    b = cs.create_array(root / "g" / "b", shape=(2,), dtype="f4", zarr_format=fmt)
    assert b.path == "g/b"
    a[...] = [1, 2, 3]
    np.testing.assert_array_equal(cs.open_array(root / "g" / "a", mode="r")[...], [1, 2, 3])
    np.testing.assert_array_equal(cs.open_array(root / "g", path="a", mode="r")[...],
                                  [1, 2, 3])
    assert cs.open(root / "g", mode="r") == g
    assert cs.open_group(a.store_path.store, path="g", mode="r") == g
    z = cs.zeros((4,), store=root / "z", zarr_format=fmt)
    assert z.path == "z" and (cs.open(root / "z", mode="r")[...] == 0).all()
    x = cs.array(np.arange(3), store=root / "q", path="x", zarr_format=fmt)
    assert x.path == "q/x"
    f = cs.from_array(root / "f", data=x, zarr_format=fmt)
    assert f.path == "f" and list(f[...]) == [0, 1, 2]
    h = cs.create_group(root / "h", zarr_format=fmt)
    assert h.path == "h"
    assert cs.group(root / "k").path == "k"
    cs.consolidate_metadata(root / "g")
    cons = cs.open_consolidated(root / "g", mode="r")
    assert cons.path == "g" and sorted(cons.array_keys()) == ["a", "b"]
    cs.save_array(root / "s", np.arange(2))
    np.testing.assert_array_equal(cs.load(root / "s"), np.arange(2))
