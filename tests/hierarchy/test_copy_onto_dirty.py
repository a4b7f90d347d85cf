"""Copies into a destination that already holds keys at the copy's path: the chunks of an
older array there (of another shape, dtype, chunk grid or format), or the chunks a failed
delete left with no node (remove_node takes the documents first). A copied array whose
source does not store some chunk reads its fill value there, so any key the destination
still holds under that name read as the copy's data: old values, no error. The copy now
reads exactly as its source, or raises before anything in the destination changes
(README "Differences from zarr-python": copy_store works array by array). Each test
failed on the code before (NumPy is the oracle)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.cli as cli
from chunkstore.errors import StrayChunksError
from chunkstore.storage.memory import MemoryStore

WANT = np.array([1, 2, 0, 0], dtype="i4")   # the source: chunk 1 never written


def _source(fmt: int, **kw) -> tuple[MemoryStore, cs.Group]:
    store = MemoryStore()
    g = cs.group(store=store, zarr_format=fmt)
    a = g.zeros("a", shape=(4,), chunks=(2,), dtype="i4", **kw)
    a[:2] = [1, 2]
    return store, g


def _leftovers(store: MemoryStore, path: str, fmt: int, **kw) -> None:
    """The chunks of an array at path (all 9) whose documents are gone: a failed delete."""
    kw = {"shape": (4,), "chunks": (2,), "dtype": "i4", **kw}
    z = cs.zeros(store=store, path=path, zarr_format=fmt, **kw)
    z[...] = 9
    for k in [k for k in store.keys() if k.startswith(path + "/")
              and k.rsplit("/", 1)[-1] in (".zarray", ".zattrs", "zarr.json")]:
        del store[k]


def _dest(fmt: int) -> tuple[MemoryStore, cs.Group]:
    store = MemoryStore()
    return store, cs.group(store=store, zarr_format=fmt)


def _reads(store, path, want=WANT) -> None:
    np.testing.assert_array_equal(cs.open_array(store, path=path, mode="r")[...], want)


def _snap(store) -> dict:
    return {k: bytes(store[k]) for k in store.keys()}


def _keys_under(store, path) -> dict:
    return {k[len(path):]: bytes(store[k]) for k in store.keys() if k.startswith(path + "/")}


# ------------------------------------------------------------------ copy_store (raw keys)
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("if_exists", ["raise", "skip"])
def test_copy_store_onto_leftover_chunks_is_refused(fmt, if_exists):
    """[1, 2, 9, 9] was read where [1, 2, 0, 0] was copied ('skip': [9, 9, 9, 9])."""
    src, _ = _source(fmt)
    dst, _ = _dest(fmt)
    _leftovers(dst, "b", fmt)
    before = _snap(dst)
    with pytest.raises(StrayChunksError, match=r"'b'.*'b/(c/)?0'"):
        cs.copy_store(src, dst, source_path="a", dest_path="b", if_exists=if_exists)
    assert _snap(dst) == before


@pytest.mark.parametrize("fmt", [2, 3])
def test_copy_store_replace_clears_leftover_chunks(fmt):
    src, _ = _source(fmt)
    dst, _ = _dest(fmt)
    _leftovers(dst, "b", fmt)
    cs.copy_store(src, dst, source_path="a", dest_path="b", if_exists="replace")
    _reads(dst, "b")
    assert _keys_under(dst, "b") == _keys_under(src, "a")


OLDER = [  # an older array at the destination path, each chunk stored (no fill value)
    {"shape": (4,), "chunks": (2,), "dtype": "i4"},
    {"shape": (6,), "chunks": (1,), "dtype": "i4"},
    {"shape": (3,), "chunks": (2,), "dtype": "f8"},
    {"shape": (4, 2), "chunks": (2, 1), "dtype": "i2"},
    {"shape": (8,), "chunks": (2,), "shards": (4,), "dtype": "i4"},
]


# (older array, its format): sharded ones only in Zarr v3
_OLDER_CASES = [(i, f) for i, kw in enumerate(OLDER) for f in (2, 3)
                if f == 3 or "shards" not in kw]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(("older", "older_fmt"), _OLDER_CASES)
def test_copy_store_replace_of_an_older_array_reads_as_the_source(fmt, older, older_fmt):
    """Replacing key by key left the older array's other chunks (and, of another format,
    its document) under the copy: [1, 2, 9, 9]."""
    kw = dict(OLDER[older])
    src, _ = _source(fmt)
    dst, _ = _dest(fmt)
    cs.zeros(store=dst, path="b", zarr_format=older_fmt, **kw)[...] = 9
    cs.copy_store(src, dst, source_path="a", dest_path="b", if_exists="replace")
    _reads(dst, "b")
    assert _keys_under(dst, "b") == _keys_under(src, "a")


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("group", [False, True])
def test_a_handle_of_an_array_copy_store_replaced_follows_it(tmp_path, fmt, group):
    """A handle opened before copy_store(if_exists="replace") put another dtype's array in
    its place read the new chunks by its old dtype (f8 bytes of ints: tiny floats) and wrote
    f8 bytes into the new i8 array, which every reader then read as huge ints. Its handles
    are now told, as by a delete or an overwrite: the old handle reads and writes the new
    array. (group: the array replaced as a member of a copied group.)"""
    dst_store = cs.DirectoryStore(str(tmp_path / "dst"))
    src_store = cs.DirectoryStore(str(tmp_path / "src"))
    old = cs.open_array(dst_store, path="g/a" if group else "a", mode="w", shape=(6,),
                        chunks=(3,), dtype="f8", zarr_format=fmt)
    old[...] = np.arange(6.0)
    new = cs.open_array(src_store, path="g/a" if group else "a", mode="w", shape=(6,),
                        chunks=(3,), dtype="i8", zarr_format=fmt)
    new[...] = np.arange(100, 106)
    cs.copy_store(src_store, dst_store, if_exists="replace")
    np.testing.assert_array_equal(old[...], np.arange(100, 106))
    assert old.dtype == np.dtype("i8")
    old[0] = 1
    fresh = cs.open_array(dst_store, path="g/a" if group else "a", mode="r")
    np.testing.assert_array_equal(fresh[...], [1, *range(101, 106)])


def test_replacing_copies_whose_paths_cross_do_not_wait_for_each_other(monkeypatch):
    """copy_store held the lock space of each replaced path in turn, in path order; but the
    space of "a" holds "a/x" too, so a copy replacing "a" and "a-b" held "a/x" before "a-b"
    and one replacing "a-b" and "a/x" held "a-b" before "a/x": each waited for the other.
    The spaces are now taken at once, in one order. (A pause after each is taken forces
    the interleaving.)"""
    import contextlib
    import threading
    import time
    from chunkstore.hierarchy import convenience
    real = convenience.replacing

    @contextlib.contextmanager
    def slow(*args, **kwargs):
        with real(*args, **kwargs):
            time.sleep(0.3)
            yield

    monkeypatch.setattr(convenience, "replacing", slow)
    dest = MemoryStore()
    g = cs.group(store=dest, zarr_format=2)
    handles = [g.create_group("a").create_array("x", shape=(4,), chunks=(2,), dtype="i4"),
               g.create_array("a-b", shape=(4,), chunks=(2,), dtype="i4")]
    for h in handles:
        h[...] = 1
    sources = []
    for layout in (("a", "a-b"), ("a/x", "a-b")):
        src = MemoryStore()
        sg = cs.group(store=src, zarr_format=2)
        for path in layout:
            sg.create_array(path, shape=(3,), chunks=(3,), dtype="f8")[...] = len(sources) + 2
        sources.append(src)
    done = []
    threads = [threading.Thread(target=lambda s=s: done.append(
        cs.copy_store(s, dest, if_exists="replace")), daemon=True) for s in sources]
    threads[0].start()
    time.sleep(0.1)
    threads[1].start()
    for t in threads:
        t.join(20)
    assert len(done) == 2, "the copies wait for each other"
    np.testing.assert_array_equal(cs.open_array(dest, path="a-b")[...], [3.0] * 3)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("older_fmt", [2, 3])
def test_copy_store_skip_keeps_an_older_array_whole(fmt, older_fmt):
    """'skip' kept the older array's document and chunk 1 but wrote the source's chunk 0
    where the older array had none: [1, 2, 9, 9] read as the older array."""
    src, _ = _source(fmt)
    dst, _ = _dest(fmt)
    old = cs.zeros(store=dst, path="b", zarr_format=older_fmt, shape=(4,), chunks=(2,),
                   dtype="i4")
    old[2:] = 9
    before = _snap(dst)
    copied, skipped, _ = cs.copy_store(src, dst, source_path="a", dest_path="b",
                                       if_exists="skip")
    assert _snap(dst) == before
    assert copied == 0 and skipped == len(_keys_under(src, "a"))
    _reads(dst, "b", [0, 0, 9, 9])


@pytest.mark.parametrize("fmt", [2, 3])
def test_copy_store_raise_refuses_a_node_of_the_other_format(fmt):
    """No key is shared between a v2 and a v3 array at one path: 'raise' wrote the copy's
    documents beside the older array's."""
    src, _ = _source(fmt)
    dst, _ = _dest(fmt)
    cs.zeros(store=dst, path="b", zarr_format=5 - fmt, shape=(4,), chunks=(2,), dtype="i4")
    before = _snap(dst)
    with pytest.raises(cs.CopyError, match="'b'"):
        cs.copy_store(src, dst, source_path="a", dest_path="b", if_exists="raise")
    assert _snap(dst) == before


@pytest.mark.parametrize("fmt", [2, 3])
def test_copy_store_of_a_group_checks_each_array_below(fmt):
    """Leftovers at a member's path deep below the copied group count too."""
    src, g = _source(fmt)
    g.create_group("sub").zeros("c", shape=(4,), chunks=(2,), dtype="i4")[:2] = [1, 2]
    dst, _ = _dest(fmt)
    _leftovers(dst, "x/sub/c", fmt)
    for k in ("x/.zgroup", "x/zarr.json", "x/sub/.zgroup", "x/sub/zarr.json"):
        dst.pop(k, None)   # (no node above them either)
    before = _snap(dst)
    with pytest.raises(StrayChunksError, match="x/sub/c"):
        cs.copy_store(src, dst, dest_path="x", if_exists="raise")
    assert _snap(dst) == before
    cs.copy_store(src, dst, dest_path="x", if_exists="replace")
    _reads(dst, "x/sub/c")
    _reads(dst, "x/a")


# ------------------------------------------------------------------ copy / copy_all
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("kws", [{}, {"chunks": (2,)}], ids=["raw", "recoded"])
@pytest.mark.parametrize("if_exists", ["raise", "skip", "skip_initialized"])
@pytest.mark.parametrize("how", ["copy", "copy_all"])
def test_copy_onto_leftover_chunks_is_refused(fmt, kws, if_exists, how):
    """A raw copy read [1, 2, 9, 9]; a recoded one raised only after copy_all had written
    the members before."""
    _, g = _source(fmt)
    g.zeros("0first", shape=(2,), dtype="i4")  # (a member copied before "a")
    dst, dg = _dest(fmt)
    _leftovers(dst, "a", fmt)
    before = _snap(dst)
    with pytest.raises(StrayChunksError, match=r"to '/a'.*'a/(c/)?0'"):
        if how == "copy":
            cs.copy(g["a"], dg, "a", if_exists=if_exists, **kws)
        else:
            cs.copy_all(g, dg, if_exists=if_exists, **kws)
    assert _snap(dst) == before


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("kws", [{}, {"chunks": (2,)}], ids=["raw", "recoded"])
@pytest.mark.parametrize("how", ["copy", "copy_all"])
def test_copy_replace_clears_leftover_chunks(fmt, kws, how):
    _, g = _source(fmt)
    dst, dg = _dest(fmt)
    _leftovers(dst, "a", fmt)
    if how == "copy":
        cs.copy(g["a"], dg, "a", if_exists="replace", **kws)
    else:
        cs.copy_all(g, dg, if_exists="replace", **kws)
    _reads(dst, "a")
    assert not [k for k in dst.keys() if k.rsplit("/", 1)[-1] in ("1", "c/1")]


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_copied_group_over_leftovers_below_is_refused(fmt):
    """The group is new in the destination, its member's path holds leftovers."""
    _, g = _source(fmt)
    dst, dg = _dest(fmt)
    _leftovers(dst, "g/a", fmt)
    before = _snap(dst)
    with pytest.raises(StrayChunksError, match="g/a"):
        cs.copy(g, dg, "g")
    assert _snap(dst) == before


# ------------------------------------------------------------------ chunkstore cp
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("opts", [[], ["--chunks", "2"]], ids=["raw", "recoded"])
@pytest.mark.parametrize("what", ["array", "group"])
def test_cp_onto_leftover_chunks(tmp_path, capsys, fmt, opts, what):
    """cp read [1, 2, 9, 9] (raw), or raised after writing the groups above (recoded)."""
    src_path, dst_path = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    _, g = _source(fmt)
    cs.copy_store(g.store, cs.DirectoryStore(src_path))
    dst = cs.DirectoryStore(dst_path)
    cs.group(store=dst, zarr_format=fmt)
    sp, dp, at = ("a", "b", "b") if what == "array" else ("", "x", "x/a")
    _leftovers(dst, at, fmt)
    for k in ("x/.zgroup", "x/zarr.json"):  # (x: no node, a path below the root)
        dst.pop(k, None)
    before = _snap(dst)
    rc = cli.main(["cp", src_path, dst_path, "--src-path", sp, "--dst-path", dp,
                   "--no-progress", *opts])
    err = capsys.readouterr().err
    assert rc == 1 and at in err and "of no node" in err, err
    assert _snap(dst) == before
    rc = cli.main(["cp", src_path, dst_path, "--src-path", sp, "--dst-path", dp,
                   "--no-progress", "--if-exists", "replace", *opts])
    assert rc == 0, capsys.readouterr().err
    _reads(dst_path, at)
    assert os.path.isdir(dst_path)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("if_exists", ["replace", "skip_initialized"])
def test_a_group_replacing_an_array_is_not_refused_for_that_arrays_chunks(fmt, if_exists):
    """The plan saw the v3 array's chunk 'a/c/0' as leftovers at the member path 'a/c' of
    the group replacing it (the real copy removes the array first)."""
    _, g = _source(fmt)
    g.zeros("g/c", shape=(4,), chunks=(2,), dtype="i4")[:2] = [1, 2]
    dst, dg = _dest(3)
    dg.zeros("a", shape=(4,), chunks=(2,), dtype="i4")[:2] = 9   # (not all chunks stored)
    cs.copy(g["g"], dg, "a", if_exists=if_exists)
    _reads(dst, "a/c")
    assert not [k for k in dst.keys() if k in ("a/c/0", "a/c/1")]


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_node_below_a_path_with_no_group_is_seen_by_the_plan(fmt):
    """An array at 'g/c' with no group document at 'g': copy_all planned 'g' as new (so
    nothing below it), wrote 'a', then raised CopyError at 'g/c' (now refused first)."""
    _, g = _source(fmt)
    g.zeros("g/c", shape=(4,), chunks=(2,), dtype="i4")[:2] = [1, 2]
    dst, dg = _dest(fmt)
    cs.zeros(store=dst, path="g/c", shape=(3,), chunks=(3,), dtype="i4", zarr_format=fmt)[:] = 9
    for k in ("g/.zgroup", "g/zarr.json"):
        dst.pop(k, None)
    before = _snap(dst)
    with pytest.raises(cs.CopyError, match="'c'"):
        cs.copy_all(g, dg)
    assert _snap(dst) == before
    cs.copy_all(g, dg, if_exists="replace")
    _reads(dst, "g/c")
    _reads(dst, "a")


@pytest.mark.parametrize("if_exists", ["raise", "skip", "replace"])
def test_copy_store_of_a_group_onto_a_v3_array(if_exists):
    """Both documents are zarr.json: the group was taken for one to merge into ('skip'
    kept the array's document and wrote the member below it)."""
    src, g = _source(3)
    g.zeros("g/c", shape=(4,), chunks=(2,), dtype="i4")[:2] = [1, 2]
    dst, dg = _dest(3)
    dg.zeros("x", shape=(4,), chunks=(2,), dtype="i4")[...] = 9
    before = _snap(dst)
    if if_exists == "raise":
        with pytest.raises(cs.CopyError, match="'x'"):
            cs.copy_store(src, dst, source_path="g", dest_path="x", if_exists=if_exists)
        assert _snap(dst) == before
    elif if_exists == "skip":
        cs.copy_store(src, dst, source_path="g", dest_path="x", if_exists=if_exists)
        assert _snap(dst) == before
    else:
        cs.copy_store(src, dst, source_path="g", dest_path="x", if_exists=if_exists)
        assert isinstance(cs.open(dst, path="x", mode="r"), cs.Group)
        _reads(dst, "x/c")
        assert _keys_under(dst, "x") == _keys_under(src, "g")


@pytest.mark.parametrize("if_exists", ["raise", "skip"])
def test_cp_of_a_group_keeps_a_node_below_a_path_with_no_group(tmp_path, capsys, if_exists):
    """An array at 'g/c' and no group at 'g': cp replaced it whatever --if-exists said."""
    src_path, dst_path = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    _, g = _source(2)
    g.zeros("g/c", shape=(4,), chunks=(2,), dtype="i4")[:2] = [1, 2]
    cs.copy_store(g.store, cs.DirectoryStore(src_path))
    dst = cs.DirectoryStore(dst_path)
    cs.group(store=dst, zarr_format=2)
    cs.zeros(store=dst, path="g/c", shape=(3,), chunks=(3,), dtype="i4")[:] = 9
    del dst["g/.zgroup"]
    before = _snap(dst)
    rc = cli.main(["cp", src_path, dst_path, "--src-path", "g", "--dst-path", "g",
                   "--no-progress", "--if-exists", if_exists])
    err = capsys.readouterr().err
    if if_exists == "raise":
        assert rc == 1 and "'g/c'" in err, err
        assert _snap(dst) == before
    else:
        assert rc == 0, err
    _reads(dst_path, "g/c", [9, 9, 9])


def _array_below_an_undocumented_path() -> tuple[dict, cs.Group, cs.Array]:
    """A source array (2-d, Zarr v2, "/" chunk keys: its chunk (0, 1) is "0/1") and a
    destination holding a v2 array at g/0 (its chunk 1 is g/0/1) with no group document at
    g, as another tool or a failed delete leaves it."""
    src: dict = {}
    a = cs.create_array(src, name="x", shape=(2, 4), chunks=(1, 2), dtype="i4", fill_value=0,
                        zarr_format=2, dimension_separator="/")
    a[:] = np.arange(8).reshape(2, 4) + 100
    dst: dict = {}
    cs.group(dst, zarr_format=2)
    cs.create_array(dst, name="g/0", shape=(4,), chunks=(2,), dtype="i4", fill_value=0,
                    zarr_format=2)[:] = [1, 2, 3, 4]
    del dst["g/.zgroup"]
    return dst, cs.open_group(dst, mode="r+"), a


@pytest.mark.parametrize("how", ["copy", "copy recoded", "copy_all", "copy_store raise",
                                 "copy_store replace"])
def test_a_copy_onto_a_path_with_a_node_among_its_chunk_keys_is_refused(how):
    """The copy's chunk keys (g/0/1) are that node's (its chunk 1): a raw copy wrote the
    source's chunk over it, and the array at g/0 read [100 101 102 103] where [1 2 3 4]
    was stored, with no error. Refused as creation refuses an array there
    (ContainsGroupError), the destination unchanged."""
    dst, root, a = _array_below_an_undocumented_path()
    before = dict(dst)
    with pytest.raises(cs.errors.ContainsGroupError, match="'g/0'"):
        if how == "copy":
            cs.copy(a, root, name="g")
        elif how == "copy recoded":
            cs.copy(a, root, name="g", chunks=(2, 2))
        elif how == "copy_all":
            src = cs.group({}, zarr_format=2)
            src.create_array("g", data=np.ones((2, 4), "i4"), chunks=(1, 2))
            cs.copy_all(src, root)
        else:
            cs.copy_store(a.store, dst, source_path="x", dest_path="g",
                          if_exists=how.split()[1])
    assert dst == before
    np.testing.assert_array_equal(cs.open_array(dst, path="g/0", mode="r")[:], [1, 2, 3, 4])
