"""zarr.open(mode="w") makes the node asked for, whatever was at the path (zarr-python 2 and 3:
an array where a shape is given, else a group); mode="a" with a shape over a group is refused."""

import pytest

import chunkstore as cs
from chunkstore.storage import MemoryStore


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_w_with_shape_replaces_group_by_array(fmt):
    store = MemoryStore()
    g = cs.open_group(store, mode="w", zarr_format=fmt)
    g.create_array("sub/x", shape=(2,), dtype="i1")[:] = 1
    a = cs.open(store, mode="w", shape=(3,), dtype="i4", zarr_format=fmt)
    assert isinstance(a, cs.Array)
    assert a.shape == (3,) and a[:].tolist() == [0, 0, 0]
    assert isinstance(cs.open(store, mode="r"), cs.Array)
    assert not any(k.startswith("sub") for k in store.keys())


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_w_without_shape_replaces_array_by_group(fmt):
    store = MemoryStore()
    cs.create_array(store, name="a", shape=(5,), dtype="i4", zarr_format=fmt)[:] = 9
    g = cs.open(store, mode="w", path="a", zarr_format=fmt)
    assert isinstance(g, cs.Group)
    assert isinstance(cs.open(store, mode="r", path="a"), cs.Group)


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_a_with_shape_on_group_is_refused(fmt):
    """open(mode="a", shape=...) over a group asks for an array: ContainsGroupError naming
    the path (zarr-python 2 raises it; 3 a TypeError), the group and its members kept; it
    returned the group with the shape ignored."""
    store = MemoryStore()
    g = cs.open_group(store, mode="w", zarr_format=fmt)
    g.create_array("h/x", shape=(2,), dtype="i1")[:] = 1
    before = dict(store.items())
    with pytest.raises(cs.ContainsGroupError, match="'h'"):
        cs.open(store, mode="a", path="h", shape=(3,), dtype="i4", zarr_format=fmt)
    assert dict(store.items()) == before
    assert isinstance(cs.open(store, mode="a", path="h"), cs.Group)
