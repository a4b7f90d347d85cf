"""Keys of no node where an array is made or a node moved to: a delete that failed midway
(remove_node takes the node's documents first) leaves its chunks behind, and an array made
there without overwrite=True read them as its own (old values where its fill value belongs);
a move onto them mixed them in. Both are refused now, naming the keys; overwrite=True (or
the store's rmdir) clears them. Each test failed on the code before."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import StrayChunksError
from chunkstore.storage.memory import MemoryStore

from faults import LostAnswerStore, SecondChunk, SortedFaultStore


def _failed_delete(fmt: int, path: str = "sub/a", chunks: tuple = (2,),
                   shape: tuple = (8,)) -> tuple[SortedFaultStore, cs.Group]:
    """A store where deleting the array at path failed after its documents went."""
    store = SortedFaultStore()
    g = cs.group(store=store, zarr_format=fmt)
    g.zeros(path, shape=shape, chunks=chunks, dtype="i4")[...] = 7
    store.fail = SecondChunk("del")
    with pytest.raises(OSError):
        del g[path]
    store.fail = lambda op, key: False
    return store, g


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("how", ["zeros", "create_array", "require_dataset", "open_array"])
def test_an_array_made_over_a_failed_deletes_chunks_is_refused(fmt, how):
    store, g = _failed_delete(fmt)
    stray = sorted(k for k in store.data if k.startswith("sub/a/"))
    assert stray and "a" not in g["sub"]
    before = dict(store.data)
    with pytest.raises(StrayChunksError, match=r"path 'sub/a'.*overwrite=True") as info:
        if how == "zeros":
            g.zeros("sub/a", shape=(8,), chunks=(2,), dtype="i4")
        elif how == "create_array":
            g.create_array("sub/a", shape=(8,), chunks=(2,), dtype="i4")
        elif how == "require_dataset":
            g.require_dataset("sub/a", shape=(8,), chunks=(2,), dtype="i4")
        else:
            cs.open_array(store, mode="a", path="sub/a", shape=(8,), chunks=(2,), dtype="i4",
                          zarr_format=fmt)
    assert repr(stray[0]) in str(info.value)
    assert store.data == before  # nothing written, nothing removed
    # overwrite=True clears them: the new array reads its fill value
    z = g.zeros("sub/a", shape=(8,), chunks=(2,), dtype="i4", overwrite=True)
    np.testing.assert_array_equal(z[...], 0)
    np.testing.assert_array_equal(cs.open_array(store, path="sub/a", mode="r")[...], 0)


@pytest.mark.parametrize("fmt", [2, 3])
def test_setitem_overwrites_them(fmt):
    """g[name] = data overwrites (as in zarr-python): the leftovers go."""
    store, g = _failed_delete(fmt)
    g["sub/a"] = np.zeros(3, dtype="i4")
    np.testing.assert_array_equal(cs.open_array(store, path="sub/a", mode="r")[...], 0)


@pytest.mark.parametrize("fmt, chunk_keys", [
    (2, ["x/0"]), (2, ["x/0.1"]), (2, ["x/0/1"]), (3, ["x/c"]), (3, ["x/c/0/1"]),
    (3, ["x/c.0.1"]), (3, ["x/0.1"])])
def test_every_chunk_key_encoding_counts(fmt, chunk_keys):
    store = MemoryStore()
    cs.group(store=store, zarr_format=fmt)
    for k in chunk_keys:
        store[k] = b"\x01" * 8
    with pytest.raises(StrayChunksError):
        cs.group(store=store).zeros("x", shape=(2, 2), chunks=(1, 1), dtype="i4")


@pytest.mark.parametrize("fmt", [2, 3])
def test_keys_that_are_no_chunks_or_belong_to_a_node_below_do_not_block(fmt):
    """A file of another kind (notes.txt), and the chunks of an array below the path (y/s,
    whose chunk y/s/0 is named as a chunk of some array: its documents tell it owns them),
    are nobody's leftovers."""
    store = MemoryStore()
    root = cs.group(store=store, zarr_format=fmt)
    store["x/notes.txt"] = b"hello"
    root.zeros("x", shape=(4,), chunks=(2,), dtype="i4")[...] = 1
    assert store["x/notes.txt"] == b"hello"
    root.zeros("y/s", shape=(4,), chunks=(2,), dtype="i4")[...] = 3
    del store[{2: "y/.zgroup", 3: "y/zarr.json"}[fmt]]  # y: a path, no group document
    root.zeros("y", shape=(4,), chunks=(2,), dtype="i4")
    np.testing.assert_array_equal(cs.open_array(store, path="y", mode="r")[...], 0)
    np.testing.assert_array_equal(cs.open_array(store, path="y/s", mode="r")[...], 3)


@pytest.mark.parametrize("fmt", [2, 3])
def test_an_array_over_a_failed_deletes_chunks_that_a_group_below_seems_to_own(fmt):
    """A v3 array at y deleted up to its documents leaves y/c/0, y/c/1; a group made at y/c
    then seemed to own them, and a new array at y read them as its chunks ([9 9 9 9])."""
    store = MemoryStore()
    root = cs.group(store=store, zarr_format=fmt)
    root.zeros("y", shape=(4,), chunks=(2,), dtype="i4", zarr_format=3)[...] = 9
    del store["y/zarr.json"]        # a delete failing after the documents: y/c/0, y/c/1 left
    root.create_group("y/c")
    del store[{2: "y/.zgroup", 3: "y/zarr.json"}[fmt]]  # y: a path, no group document
    before = dict(store.items())
    with pytest.raises(cs.errors.ContainsGroupError, match="'y/c'"):
        root.zeros("y", shape=(4,), chunks=(2,), dtype="i4", zarr_format=3)
    assert dict(store.items()) == before
    z = root.zeros("y", shape=(4,), chunks=(2,), dtype="i4", zarr_format=3, overwrite=True)
    np.testing.assert_array_equal(z[...], 0)


@pytest.mark.parametrize("kind", ["group", "array"])
@pytest.mark.parametrize("below", ["0", "c", "1/0"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_an_array_over_a_node_where_its_chunks_go_is_refused(fmt, below, kind):
    """A node below the path where a new array keeps chunks (y/0, y/c, y/1/0): the array's
    chunk keys and the node's would be one namespace (y's chunk 0 of Zarr v2 with "/" keys
    is y/0, the node's document y/0/.zarray ...): refused, nothing written."""
    store = MemoryStore()
    root = cs.group(store=store, zarr_format=fmt)
    if kind == "group":
        root.create_group("y/" + below)
    else:
        root.zeros("y/" + below, shape=(2,), chunks=(2,), dtype="i4")[...] = 5
    del store[{2: "y/.zgroup", 3: "y/zarr.json"}[fmt]]  # y: a path, no group document
    before = dict(store.items())
    first = "y/" + below.split("/")[0]  # (y/1/0's parent group y/1 is named first)
    with pytest.raises(cs.errors.ContainsGroupError, match=f"'{first}'"):
        root.zeros("y", shape=(4,), chunks=(2,), dtype="i4")
    assert dict(store.items()) == before


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_move_onto_a_failed_deletes_chunks_is_refused(fmt):
    """Moving an array whose second chunk was never written onto the leftovers read the
    leftover as that chunk ([1, 2, 7, 7] where [1, 2, 0, 0] was moved)."""
    store, g = _failed_delete(fmt, path="b", shape=(4,))
    a = g.zeros("a", shape=(4,), chunks=(2,), dtype="i4")
    a[:2] = [1, 2]
    before = dict(store.data)
    with pytest.raises(StrayChunksError, match=r"cannot move 'a' to 'b'.*rmdir"):
        g.move("a", "b")
    assert store.data == before
    np.testing.assert_array_equal(g["a"][...], [1, 2, 0, 0])
    for k in [k for k in store.data if k.startswith("b/")]:
        del store[k]
    g.move("a", "b")
    np.testing.assert_array_equal(cs.open_group(store, mode="r")["b"][...], [1, 2, 0, 0])


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_move_to_a_path_inside_an_array_is_refused_as_below_an_array(fmt):
    """A move to g/c/0 where g/c is an array (its chunk 0 there, in Zarr v2) is refused as a
    node below an array (ContainsArrayError, as creation there), not taken for a move onto a
    failed delete's chunks (StrayChunksError: those keys are the array's)."""
    store = MemoryStore()
    g = cs.group(store=store, zarr_format=fmt)
    g.create_group("a")
    g.zeros("c", shape=(4,), chunks=(2,), dtype="i4")[...] = 1
    before = dict(store)
    with pytest.raises(cs.errors.ContainsArrayError, match="'c'"):
        g.move("a", "c/0")
    with pytest.raises(cs.errors.ContainsArrayError, match="'c'"):
        g.move("a", "c/c/0")
    assert dict(store) == before


@pytest.mark.parametrize("fmt", [2, 3])
def test_creation_through_a_consolidated_view_is_refused_as_read_only(fmt):
    """An array made in the store after the snapshot was consolidated (by another process:
    this process's own changes are read live through the view) is not in the view, but its
    chunks are listed through it: creating it again through the view raised
    StrayChunksError (its chunks seemed keys of no node, left by a failed delete). A view
    never creates a node: ReadOnlyError, the store unchanged."""
    store = MemoryStore()
    cs.group(store=store, zarr_format=fmt)
    cs.consolidate_metadata(store)
    elsewhere = MemoryStore()  # (its keys copied in as another process would write them)
    cs.group(store=elsewhere, zarr_format=fmt).zeros(
        "b", shape=(4,), chunks=(2,), dtype="i4")[...] = 3
    for k, v in elsewhere.items():
        if k.startswith("b/"):
            store[k] = v
    view = cs.open_consolidated(store, mode="r+")
    assert "b" not in view
    before = dict(store)
    with pytest.raises(cs.errors.ReadOnlyError, match="consolidated snapshot"):
        view.require_dataset("b", shape=(4,), chunks=(2,), dtype="i4")
    with pytest.raises(cs.errors.ReadOnlyError, match="consolidated snapshot"):
        view.create_group("b2")
    assert dict(store) == before


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("what", ["array", "group"])
def test_a_move_whose_document_write_lost_its_answer_leaves_no_node_at_dest(fmt, what):
    """A move through a store without rename copies keys, documents last; the write of a
    document that landed but raised (a lost answer) was not in the clean-up's list: dest was
    left an array whose chunks the clean-up had deleted (every element read the fill value),
    and a retry of the move was refused."""
    store = LostAnswerStore()
    g = cs.group(store=store, zarr_format=fmt)
    x = g.create_array("a/x", shape=(6,), chunks=(2,), dtype="i4", fill_value=-1)
    x[...] = np.arange(6)
    src, dst = ("a/x", "b") if what == "array" else ("a", "b")
    doc = ".zarray" if fmt == 2 else "zarr.json"
    lost = f"b/{doc}" if what == "array" else f"b/x/{doc}"
    store.lost = lambda key: key == lost
    with pytest.raises(OSError, match="answer lost"):
        g.move(src, dst)
    store.lost = lambda key: False
    assert not [k for k in store.data if k.startswith("b/")]
    np.testing.assert_array_equal(g["a/x"][...], np.arange(6))
    g.move(src, dst)  # (nothing left in the way)
    np.testing.assert_array_equal(g["b"][...] if what == "array" else g["b/x"][...],
                                  np.arange(6))


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_creation_whose_parent_group_write_lost_its_answer_leaves_no_group(fmt):
    """The groups a failed creation wrote above it are removed again, the one whose write
    landed but raised included (it was not listed: left as an empty group)."""
    store = LostAnswerStore()
    g = cs.group(store=store, zarr_format=fmt)
    before = dict(store.data)
    doc = ".zgroup" if fmt == 2 else "zarr.json"
    store.lost = lambda key: key == f"p/q/{doc}"
    with pytest.raises(OSError, match="answer lost"):
        g.create_array("p/q/a", shape=(2,), dtype="i4")
    assert store.data == before
