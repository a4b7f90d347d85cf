"""HeldDocuments: node documents held in memory until publish(), everything else the
store's; arrays made through it work as through the store, and nothing of them is a node
in the store before publish."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import NodeNotFoundError
from chunkstore.hierarchy.staging import HeldDocuments
from chunkstore.storage import protocol
from chunkstore.storage.directory import DirectoryStore
from chunkstore.storage.memory import MemoryStore


class Recording(MemoryStore):
    """A MemoryStore that records the order of its writes."""

    def __init__(self):
        super().__init__()
        self.order = []

    def __setitem__(self, key, value):
        self.order.append(key)
        super().__setitem__(key, value)


def test_documents_below_the_path_are_held_the_rest_written():
    store = MemoryStore()
    view = HeldDocuments(store, "g")
    view["g/a/.zarray"] = b"{}"
    view["g/a/0.0"] = b"chunk"
    view["top/.zgroup"] = b"{}"          # outside the path: the store's
    view["g2/.zattrs"] = b"{}"           # a sibling sharing the prefix is outside too
    assert set(store) == {"g/a/0.0", "top/.zgroup", "g2/.zattrs"}
    assert view.held == {"g/a/.zarray": b"{}"}
    assert view["g/a/.zarray"] == b"{}" and "g/a/.zarray" in view
    assert "g/a/.zarray" not in store
    assert view.getitems(["g/a/.zarray", "g/a/0.0", "missing"]) == {
        "g/a/.zarray": b"{}", "g/a/0.0": b"chunk"}
    assert sorted(view.keys_under("g")) == ["g/a/.zarray", "g/a/0.0"]
    assert view.listdir("g") == ["a"] and view.listdir("") == ["g", "g2", "top"]
    assert view.getsize("g/a") == 2 + 5
    assert len(view) == 4 and sorted(view) == sorted(["g/a/.zarray", *store])


def test_deletes_drop_held_documents_or_reach_the_store():
    store = MemoryStore()
    store["g/x/.zarray"] = b"old"
    view = HeldDocuments(store, "g")
    view["g/a/zarr.json"] = b"{}"
    del view["g/a/zarr.json"]
    assert view.held == {}
    del view["g/x/.zarray"]                # not held: the store's
    assert "g/x/.zarray" not in store
    with pytest.raises(KeyError):
        del view["g/none"]
    view.setitems({"g/b/.zarray": b"{}", "g/b/0": b"c"})
    view.delitems(["g/b/.zarray", "g/b/0"])
    assert view.held == {} and "g/b/0" not in store
    view["g/c/.zattrs"] = b"{}"
    view["g/c/0"] = b"c"
    view.rmdir("g/c")
    assert view.held == {} and list(store) == []


def test_publish_writes_deepest_first_attributes_before_the_node_document():
    store = Recording()
    view = HeldDocuments(store, "g")
    for k in ["g/.zgroup", "g/.zattrs", "g/a/.zattrs", "g/a/.zarray", "g/a/b/zarr.json",
              "g/a/0.0"]:
        view[k] = b"{}"
    assert store.order == ["g/a/0.0"]
    view.publish()
    assert store.order == ["g/a/0.0", "g/a/b/zarr.json", "g/a/.zattrs", "g/a/.zarray",
                           "g/.zattrs", "g/.zgroup"]
    assert view.held == {}


def test_hooks_and_location_are_the_stores(tmp_path):
    store = DirectoryStore(str(tmp_path / "d"))
    view = HeldDocuments(store, "x")
    # in-process locks are shared with handles of the store itself
    assert protocol.node_location(view, "x/a") == protocol.node_location(store, "x/a")
    assert protocol.live_store(view) is view  # its documents are read from the view
    assert view.dimension_separator == store.dimension_separator
    assert protocol.local_files(view) is not None  # the fast paths stay


@pytest.mark.parametrize("fmt,extra", [(2, {}), (3, {}), (3, {"shards": (4, 4)})])
@pytest.mark.parametrize("directory", [False, True])
def test_an_array_made_through_the_view_writes_and_reads_then_appears_on_publish(
        tmp_path, fmt, extra, directory):
    store = DirectoryStore(str(tmp_path / "d")) if directory else MemoryStore()
    cs.group(store=store)
    view = HeldDocuments(store, "a")
    data = np.arange(64, dtype="i4").reshape(8, 8)
    z = cs.create(shape=(8, 8), chunks=(2, 2), dtype="i4", store=view, path="a",
                  zarr_format=fmt, cache_metadata=False, **extra)
    z.attrs["units"] = "m"
    z[:] = data
    z[1:3, 1:3] = -1                        # read-modify-write, metadata checked again
    want = data.copy()
    want[1:3, 1:3] = -1
    np.testing.assert_array_equal(z[:], want)
    assert z.nchunks_initialized == 16  # (inner chunks, where sharded)
    # nothing at "a" is a node in the store yet, and the group lists no member
    with pytest.raises(NodeNotFoundError):
        cs.open(store=store, path="a", mode="r")
    assert list(cs.open_group(store=store, mode="r")) == []
    view.publish()
    a = cs.open_array(store=store, path="a", mode="r")
    np.testing.assert_array_equal(a[:], want)
    assert a.attrs["units"] == "m" and a.zarr_format == fmt


def test_a_failed_api_copy_removes_its_chunks(tmp_path, monkeypatch):
    """A copy that fails with an error (not killed) removes what it wrote: with its
    documents held, that is chunks of no node, which a later copy would refuse."""
    from chunkstore.hierarchy import convenience
    src = cs.array(np.arange(100.0).reshape(10, 10), chunks=(2, 2))
    g = cs.group()
    calls = []

    def failing(source, dst, **kw):
        dst[:5] = source[:5]
        calls.append(1)
        raise OSError("disk full")

    monkeypatch.setattr(convenience, "copy_array_data", failing)
    with pytest.raises(OSError, match="disk full"):
        cs.copy(src, g, name="c", chunks=(5, 5))
    assert calls and "c" not in g
    assert [k for k in g.store if k.startswith("c/")] == []


def test_consolidated_metadata_is_held_and_published_last():
    store = Recording()
    view = HeldDocuments(store, "")
    for k in [".zmetadata", ".zgroup", "a/.zarray", "a/0"]:
        view[k] = b"{}"
    view.publish()
    assert store.order == ["a/0", "a/.zarray", ".zgroup", ".zmetadata"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_copy_into_a_consolidated_view_is_refused_before_any_write(fmt):
    """A consolidated snapshot seen through the view is one still: the copy's creation is
    refused up front (it wrote every chunk, then failed to publish, leaving them)."""
    from chunkstore.errors import ReadOnlyError
    store = {}
    g = cs.open_group(store, mode="w", zarr_format=fmt)
    g.create_dataset("x", data=np.arange(4), chunks=(2,))
    cs.consolidate_metadata(store)
    before = dict(store)
    with pytest.raises(ReadOnlyError, match="consolidated snapshot"):
        cs.copy(cs.array(np.arange(10.0), chunks=(3,)), cs.open_consolidated(store, mode="r+"),
                name="b", chunks=(5,))
    assert store == before


def test_a_delete_through_the_view_reaches_the_stores_older_document():
    store = MemoryStore()
    store["g/.zattrs"] = b'{"old": 1}'
    view = HeldDocuments(store, "g")
    view["g/.zattrs"] = b'{"new": 1}'
    del view["g/.zattrs"]      # the attributes removed: the older ones must not show
    view.publish()
    assert "g/.zattrs" not in store
    store["g/a/.zattrs"] = b"{}"
    view["g/a/.zattrs"] = b'{"x": 1}'
    view.delitems(["g/a/.zattrs"])
    view.publish()
    assert "g/a/.zattrs" not in store
