"""Issue 25 (never wrong data; nothing already stored is lost), items 10 and 11.

10. Two ZipStores writing one archive: the second writer is refused (in-process and
    cross-process) instead of silently dropping the first one's writes; stores that flush in
    turn keep each other's writes; readers still open at once.
11. An explicit zarr_format binds when opening: a node of the other format is not opened as
    it (a not-found error, as zarr-python 3 raises), and mode "a" neither converts it nor
    writes a node of the asked format beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import zarr

import chunkstore as cs
from chunkstore.errors import (ArrayFormatMismatchError, ArrayNotFoundError,
                               ContainsArrayError, ContainsGroupError,
                               GroupFormatMismatchError, GroupNotFoundError,
                               PathNotFoundError, StoreError)
from chunkstore.storage import DirectoryStore, ZipStore

# where the chunkstore under test is importable from (the installed package in CI, not this
# source tree, which has no compiled core)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cs.__file__)))


def _names(path) -> list[str]:
    with zipfile.ZipFile(path) as zf:
        return sorted(zf.namelist())


# ------------------------------------------------------------------ 10: ZipStore writers
def test_second_zip_writer_in_process_is_refused_and_nothing_is_lost(tmp_path):
    p = tmp_path / "data.zip"
    s1 = ZipStore(p, mode="w")
    first = cs.create(shape=(4,), chunks=(2,), dtype="i4", store=s1, path="first")
    first[:] = [1, 2, 3, 4]  # unflushed writes: s1 is the archive's writer
    with pytest.raises(StoreError) as ei:
        ZipStore(p, mode="w")  # would truncate the archive s1 is writing
    assert str(p) in str(ei.value) and "another ZipStore" in str(ei.value)
    s2 = ZipStore(p, mode="a")  # opening to read is fine ...
    with pytest.raises(StoreError) as ei:  # ... its first change is refused, at once
        cs.create(shape=(3,), chunks=(3,), dtype="f8", store=s2, path="second")
    assert str(p) in str(ei.value)
    assert not s2.dirty
    s1.close()  # the first writer's array reaches the archive
    second = cs.create(shape=(3,), chunks=(3,), dtype="f8", store=s2, path="second")
    second[:] = 7.5  # s1 has flushed: s2 writes now, over the current archive
    s2.close()
    with ZipStore(p, mode="r") as r:
        np.testing.assert_array_equal(cs.open_array(r, mode="r", path="first")[:], [1, 2, 3, 4])
        np.testing.assert_array_equal(cs.open_array(r, mode="r", path="second")[:], [7.5] * 3)


def test_zip_writers_that_flush_in_turn_keep_each_others_writes(tmp_path):
    p = tmp_path / "turns.zip"
    s1 = ZipStore(p, mode="a")  # both open before either writes
    s2 = ZipStore(p, mode="a")
    s1["x"] = b"1"
    s1.flush()
    s2["y"] = b"2"  # the claim rereads the archive: s1's x is kept
    assert s2["x"] == b"1"
    s2.close()
    s1["z"] = b"3"  # and s1 sees y when it writes again
    s1.close()
    assert _names(p) == ["x", "y", "z"]
    with ZipStore(p, mode="r") as r:
        assert dict(r.items()) == {"x": b"1", "y": b"2", "z": b"3"}


def test_zip_readers_open_at_once_beside_a_writer(tmp_path):
    p = tmp_path / "r.zip"
    with ZipStore(p, mode="w") as s:
        s["a"] = b"old"
    w = ZipStore(p, mode="a")
    w["a"] = b"new"  # a writer with unflushed changes
    readers = [ZipStore(p, mode="r"), ZipStore(p, mode="r"), ZipStore(p, mode="a")]
    # mode "r": the archive as of its open; a writable store of this process: the writer's
    # view, unflushed changes included (one location: see the test below)
    assert [r["a"] for r in readers] == [b"old", b"old", b"new"]
    w.close()
    for r in readers:
        r.close()
    assert ZipStore(p, mode="r")["a"] == b"new"


_CHILD_WRITER = r"""
import sys
from chunkstore.storage import ZipStore
s = ZipStore(sys.argv[1], mode="a")
s["child"] = b"from the child"  # the claim: held until the flush
print("ready", flush=True)
sys.stdin.readline()
s.close()
"""


def test_second_zip_writer_in_another_process_is_refused(tmp_path):
    p = tmp_path / "shared.zip"
    with ZipStore(p, mode="w") as s:
        s["base"] = b"0"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", _CHILD_WRITER, str(p)], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        s = ZipStore(p, mode="a")
        with pytest.raises(StoreError) as ei:
            s["parent"] = b"from the parent"
        assert str(p) in str(ei.value) and "another process" in str(ei.value)
        with pytest.raises(StoreError):
            ZipStore(p, mode="w")  # no truncation under the other writer
        # readers are never refused, and read at once
        r1, r2 = ZipStore(p, mode="r"), ZipStore(p, mode="r")
        assert r1["base"] == r2["base"] == b"0"
        r1.close()
        r2.close()
        child.communicate("go\n", timeout=60)
        assert child.returncode == 0
        s["parent"] = b"from the parent"  # the child has flushed and closed
        s.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with ZipStore(p, mode="r") as r:
        assert dict(r.items()) == {"base": b"0", "child": b"from the child",
                                   "parent": b"from the parent"}


# ------------------------------------------------------------------ 11: zarr_format binds
def _array(tmp_path, fmt):
    p = str(tmp_path / f"a{fmt}.zarr")
    a = cs.open_array(p, mode="w", shape=(4,), chunks=(2,), dtype="i4", zarr_format=fmt)
    a[:] = [1, 2, 3, 4]
    return p


def _group(tmp_path, fmt):
    p = str(tmp_path / f"g{fmt}.zarr")
    g = cs.open_group(p, mode="w", zarr_format=fmt)
    g.create_dataset("x", data=np.arange(3), chunks=(3,))
    return p


def _snapshot(path):
    s = DirectoryStore(path, mode="r")
    return {k: s[k] for k in s}


def _names_formats(err, p, asked, found):
    msg = str(err)
    assert p in msg, msg
    assert f"Zarr format {asked}" in msg and f"Zarr format {found}" in msg, msg


FORMATS = [(3, 2), (2, 3)]  # (stored, asked)


@pytest.mark.parametrize("stored,asked", FORMATS)
@pytest.mark.parametrize("mode", ["r", "r+"])
def test_open_array_of_the_other_format_is_not_found(tmp_path, stored, asked, mode):
    p = _array(tmp_path, stored)
    with pytest.raises(ArrayNotFoundError) as ei:
        cs.open_array(p, mode=mode, zarr_format=asked)
    assert isinstance(ei.value, FileNotFoundError)  # as zarr-python 3 raises
    _names_formats(ei.value, p, asked, stored)
    with pytest.raises(FileNotFoundError):
        zarr.open_array(p, mode=mode, zarr_format=asked)  # the reference
    # the format asked for, or none, opens it
    assert cs.open_array(p, mode=mode, zarr_format=stored).zarr_format == stored
    assert cs.open_array(p, mode=mode)[:].tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("stored,asked", FORMATS)
@pytest.mark.parametrize("mode", ["r", "r+"])
def test_open_group_of_the_other_format_is_not_found(tmp_path, stored, asked, mode):
    p = _group(tmp_path, stored)
    with pytest.raises(GroupNotFoundError) as ei:
        cs.open_group(p, mode=mode, zarr_format=asked)
    assert isinstance(ei.value, FileNotFoundError)
    _names_formats(ei.value, p, asked, stored)
    with pytest.raises(FileNotFoundError):
        zarr.open_group(p, mode=mode, zarr_format=asked)  # the reference
    assert cs.open_group(p, mode=mode, zarr_format=stored).zarr_format == stored
    with pytest.raises(ArrayNotFoundError) as ei:  # a group, asked for as an array
        cs.open_array(p, mode=mode, zarr_format=asked)
    _names_formats(ei.value, p, asked, stored)


@pytest.mark.parametrize("stored,asked", FORMATS)
@pytest.mark.parametrize("kind", ["array", "group"])
def test_open_and_open_consolidated_of_the_other_format(tmp_path, stored, asked, kind):
    p = _array(tmp_path, stored) if kind == "array" else _group(tmp_path, stored)
    for mode in ("r", "r+"):
        with pytest.raises(PathNotFoundError) as ei:
            cs.open(p, mode=mode, zarr_format=asked)
        assert isinstance(ei.value, FileNotFoundError)
        _names_formats(ei.value, p, asked, stored)
    assert cs.open(p, mode="r", zarr_format=stored).zarr_format == stored
    if kind == "group":
        cs.consolidate_metadata(p)
        for mode in ("r", "r+"):
            with pytest.raises(FileNotFoundError) as ei:
                cs.open_consolidated(p, mode=mode, zarr_format=asked)
            _names_formats(ei.value, p, asked, stored)
        assert cs.open_consolidated(p, mode="r", zarr_format=stored).zarr_format == stored


@pytest.mark.parametrize("stored,asked", FORMATS)
def test_mode_a_never_converts_nor_writes_beside_the_other_format(tmp_path, stored, asked):
    pa, pg = _array(tmp_path, stored), _group(tmp_path, stored)
    before = _snapshot(pa), _snapshot(pg)
    calls = [
        (ArrayFormatMismatchError, lambda: cs.open_array(pa, mode="a", shape=(3,), chunks=(3,),
                                                         dtype="f8", zarr_format=asked)),
        (ArrayFormatMismatchError, lambda: cs.open_array(pa, zarr_format=asked)),  # default "a"
        (ArrayFormatMismatchError, lambda: cs.open(pa, mode="a", zarr_format=asked)),
        (GroupFormatMismatchError, lambda: cs.open_group(pg, mode="a", zarr_format=asked)),
        (GroupFormatMismatchError, lambda: cs.open(pg, mode="a", zarr_format=asked)),
        (ContainsGroupError, lambda: cs.open_array(pg, mode="a", shape=(3,), dtype="f8",
                                                   zarr_format=asked)),
        (ContainsArrayError, lambda: cs.open_group(pa, mode="a", zarr_format=asked)),
        (ContainsArrayError, lambda: cs.open_array(pa, mode="w-", shape=(3,), dtype="f8",
                                                   zarr_format=asked)),
    ]
    for cls, call in calls:
        with pytest.raises(cls) as ei:
            call()
        assert isinstance(ei.value, FileExistsError)  # something is there, kept
        if cls in (ArrayFormatMismatchError, GroupFormatMismatchError):
            # and nothing of the asked format is there, as zarr-python 3 reports
            assert isinstance(ei.value, FileNotFoundError)
            _names_formats(ei.value, pa if cls is ArrayFormatMismatchError else pg,
                           asked, stored)
    assert (_snapshot(pa), _snapshot(pg)) == before  # nothing written, converted or removed
    assert cs.open_array(pa, mode="r")[:].tolist() == [1, 2, 3, 4]
    assert cs.open_array(pa, mode="a", zarr_format=stored).zarr_format == stored
    # mode "w" asks for replacement explicitly
    assert cs.open_array(pa, mode="w", shape=(2,), dtype="u1",
                         zarr_format=asked).zarr_format == asked


def test_asked_format_is_found_where_both_formats_documents_lie(tmp_path):
    # (zarr-python 3's mode "a" can leave a node of each format at one path)
    p = str(tmp_path / "both.zarr")
    cs.open_array(p, mode="w", shape=(2,), dtype="i4", zarr_format=3)[:] = [3, 3]
    s = DirectoryStore(p)
    v2 = DirectoryStore(str(tmp_path / "v2.zarr"))
    cs.open_array(v2, mode="w", shape=(2,), dtype="i4", zarr_format=2)[:] = [2, 2]
    s.setitems({k: v2[k] for k in v2})
    for fmt in (2, 3):
        for mode in ("r", "r+", "a"):
            a = cs.open_array(p, mode=mode, zarr_format=fmt)
            assert a.zarr_format == fmt and a[:].tolist() == [fmt, fmt]
        assert cs.open(p, mode="a", zarr_format=fmt).zarr_format == fmt



def test_every_opener_given_zarr_format_binds(tmp_path):
    """Array(store, zarr_format=), Array.open(zarr_format=) and group(zarr_format=) open that
    format's node where both lie, and refuse a node of the other format alone (they opened
    the v3 node either way, as if zarr_format had not been given)."""
    from chunkstore.errors import ArrayNotFoundError, GroupFormatMismatchError
    both_a, both_g = _both_formats(tmp_path / "a", "array"), _both_formats(tmp_path / "g", "group")
    assert cs.Array(DirectoryStore(both_a), zarr_format=2)[:].tolist() == [2, 2]
    assert cs.Array.open(both_a, zarr_format=2)[:].tolist() == [2, 2]
    assert cs.group(both_g, zarr_format=2).attrs["f"] == 2
    assert cs.group(both_g, zarr_format=3).attrs["f"] == 3
    only3 = str(tmp_path / "only3.zarr")
    cs.open_array(only3, mode="w", shape=(2,), dtype="i4", zarr_format=3)
    for opener in (lambda: cs.Array(DirectoryStore(only3), zarr_format=2),
                   lambda: cs.Array.open(only3, zarr_format=2)):
        with pytest.raises(ArrayNotFoundError, match="Zarr format 3"):
            opener()
    g3 = str(tmp_path / "g3.zarr")
    cs.open_group(g3, mode="w", zarr_format=3)
    with pytest.raises(GroupFormatMismatchError):
        cs.group(g3, zarr_format=2)


def test_require_group_and_require_dataset_take_the_member_of_the_groups_format(tmp_path):
    """Where another tool left a v3 node beside a v2 group's member, require_group and
    require_dataset return the v2 member, as g[name] and zarr-python 3 do (they returned the
    v3 node); a node of the other format alone is a member as before (README, Differences),
    and a creation of the group's format there is refused, naming the format found."""
    from chunkstore.errors import ContainsArrayError, ContainsGroupError
    root, scratch = str(tmp_path / "r.zarr"), str(tmp_path / "s.zarr")
    g2 = cs.open_group(root, mode="w", zarr_format=2)
    g2.create_array(name="x", shape=(3,), chunks=(2,), dtype="i4")[:] = 2
    g2.create_group("sub").attrs["who"] = "v2"
    g3 = cs.open_group(scratch, mode="w", zarr_format=3)
    g3.create_array(name="x", shape=(3,), chunks=(2,), dtype="i4")[:] = 3
    g3.create_group("sub").attrs["who"] = "v3"
    g3.create_group("only3").attrs["who"] = "v3"
    g3.create_array(name="y3", shape=(1,), dtype="i4")
    src, dst = DirectoryStore(scratch), DirectoryStore(root)
    dst.setitems({k: src[k] for k in src if k != "zarr.json"})
    g = cs.open_group(root, zarr_format=2)
    assert g.require_dataset("x", shape=(3,), dtype="i4")[:].tolist() == [2, 2, 2]
    assert g.require_array("x", shape=(3,), dtype="i4")[:].tolist() == [2, 2, 2]
    assert dict(g.require_group("sub").attrs) == {"who": "v2"}
    assert sorted(g) == ["only3", "sub", "x", "y3"] and g["y3"].zarr_format == 3
    assert dict(g.require_group("only3").attrs) == {"who": "v3"}
    assert g.require_dataset("y3", shape=(1,), dtype="i4").zarr_format == 3
    with pytest.raises(ContainsGroupError, match="Zarr format 3 group"):
        g.create_group("only3")
    with pytest.raises(ContainsArrayError, match="Zarr format 3 array"):
        g.create_dataset("y3", shape=(1,), dtype="i4")


def test_a_handle_from_an_async_one_takes_no_other_arguments():
    """Array(async_array, read_only=True) returned a writable handle (the arguments were
    dropped); zarr-python 3 refuses them, and so does chunkstore now."""
    import asyncio
    a = cs.create_array(cs.MemoryStore(), shape=(2,), dtype="i4")
    aa = cs.AsyncArray(a)
    assert cs.Array(aa)[:].tolist() == [0, 0]
    with pytest.raises(TypeError, match="no other arguments"):
        cs.Array(aa, read_only=True)
    from chunkstore.api import asynchronous
    ag = asyncio.run(asynchronous.open_group(store=cs.MemoryStore(), mode="w"))
    assert isinstance(cs.Group(ag), cs.Group)
    with pytest.raises(TypeError, match="no other arguments"):
        cs.Group(ag, read_only=True)

def _both_formats(tmp_path, kind):
    """A store with a v3 node (3s) and a v2 node (2s) of kind at its root, as a migration
    tool or zarr-python 3's mode "a" leaves them."""
    p, v2 = str(tmp_path / "both.zarr"), str(tmp_path / "v2.zarr")
    if kind == "array":
        cs.open_array(p, mode="w", shape=(2,), dtype="i4", zarr_format=3)[:] = [3, 3]
        cs.open_array(v2, mode="w", shape=(2,), dtype="i4", zarr_format=2)[:] = [2, 2]
    else:
        cs.open_group(p, mode="w", zarr_format=3).attrs["f"] = 3
        cs.open_group(v2, mode="w", zarr_format=2).attrs["f"] = 2
    s, src = DirectoryStore(p), DirectoryStore(v2)
    s.setitems({k: src[k] for k in src})
    return p


def test_unasked_format_where_both_lie_is_v3_with_zarr3s_warning(tmp_path):
    # zarr-python 3 reads the v3 node and warns; chunkstore read the v2 one silently, so
    # the two libraries (and a handle of each) disagreed about the data at one path
    from chunkstore.errors import ZarrUserWarning
    p = _both_formats(tmp_path, "array")
    openers = [lambda: cs.open_array(p, mode="r"), lambda: cs.open_array(p, mode="r+"),
               lambda: cs.open_array(p, mode="a"), lambda: cs.open(p, mode="r"),
               lambda: cs.open(p, mode="a"), lambda: cs.Array(DirectoryStore(p))]
    # (through a group, the member of the group's format: test_format_resolution_model.py)
    for opener in openers:
        with pytest.warns(ZarrUserWarning, match=r"Both zarr.json \(Zarr format 3\) and "
                          r"\.zarray \(Zarr format 2\).*'(both.zarr)?' in DirectoryStore.*Zarr format 3 "
                          r"will be used") as rec:
            a = opener()
        assert len([w for w in rec if w.category is ZarrUserWarning]) == 1, opener
        assert a.zarr_format == 3 and a[:].tolist() == [3, 3]
    a = cs.open_array(p, mode="r+")
    a.resize(3)  # a reload of the handle's metadata stays on the document it opened
    a[2] = 4
    assert cs.open_array(p, mode="r", zarr_format=3)[:].tolist() == [3, 3, 4]
    assert cs.open_array(p, mode="r", zarr_format=2)[:].tolist() == [2, 2]  # untouched
    # asked for, either format opens without a warning
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZarrUserWarning)
        assert cs.open_array(p, mode="r", zarr_format=2)[:].tolist() == [2, 2]
        assert cs.open_array(p, mode="r", zarr_format=3).shape == (3,)
    # zarr-python 3 agrees about which node is there
    with pytest.warns(UserWarning):
        assert zarr.open_array(p, mode="r")[:].tolist() == [3, 3, 4]
    # mode "w" makes a new node in the configured format, not the one found there
    assert cs.open(p, mode="w", shape=(2,), dtype="i4").zarr_format == 2
    assert cs.open_array(p, mode="w", shape=(2,), dtype="i4", zarr_format=3).zarr_format == 3


def test_unasked_group_format_where_both_lie_is_v3_with_zarr3s_warning(tmp_path):
    from chunkstore.errors import ZarrUserWarning
    p = _both_formats(tmp_path, "group")
    for opener in (lambda: cs.open_group(p, mode="r"), lambda: cs.open_group(p, mode="a"),
                   lambda: cs.open(p, mode="r"), lambda: cs.open(p, mode="a")):
        with pytest.warns(ZarrUserWarning, match=r"\.zgroup \(Zarr format 2\)") as rec:
            g = opener()
        assert len([w for w in rec if w.category is ZarrUserWarning]) == 1, opener
        assert g.metadata.zarr_format == 3 and g.attrs["f"] == 3
    assert cs.open_group(p, mode="r", zarr_format=2).attrs["f"] == 2


def test_zip_stores_of_one_archive_in_one_process_see_each_others_changes(tmp_path):
    """Two writable ZipStores of one archive are one location: their handles share
    in-process locks and follow each other's metadata changes. One handle reloaded the
    array's metadata, after the other's resize was counted, from the file the resize had
    not reached yet (unflushed): it kept the old shape for good, a write past the new end
    went through, and a later grow showed it where the fill value belongs."""
    for fmt in (2, 3):
        p = str(tmp_path / f"a{fmt}.zip")
        z1 = ZipStore(p, mode="w")
        a = cs.create(store=z1, shape=(10,), chunks=(4,), dtype="i4", fill_value=-1,
                      zarr_format=fmt)
        a[:] = np.arange(10)
        z1.flush()
        z2 = ZipStore(p, mode="a")
        b = cs.open_array(z2, mode="r+")
        b.resize(3)  # unflushed in z2
        assert a.shape == (3,)
        assert z1.listdir() == z2.listdir()
        z2.flush()
        assert a.shape == (3,)
        with pytest.raises(IndexError):
            a[8] = 5
        np.testing.assert_array_equal(a[:], [0, 1, 2])
        b.resize(10)
        z2.close()
        z1.close()
        np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], [0, 1, 2] + [-1] * 7)
