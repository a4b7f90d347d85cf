"""A copy killed half-way (SIGKILL, a lost machine: nothing runs to undo it) leaves no node
that reads as complete: `chunkstore cp` (raw and recoding), `chunkstore convert` and the
API's recoding copy() write their node documents once the chunks are stored
(chunkstore.hierarchy.staging), so a killed one leaves keys of no node, which chunkstore
and zarr-python both refuse to open, and a re-run refuses (or, replacing, removes).

Each copy runs in a child process whose DirectoryStore ends the process (os._exit, no
cleanup) at its Nth chunk write."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.cli as cli
from chunkstore.errors import NodeNotFoundError

KILL = """
import os, sys
from chunkstore.storage.directory import DirectoryStore
from chunkstore.metadata.formats import document_rank
written = [0]
_put = DirectoryStore.__setitem__
def put(self, key, value):
    _put(self, key, value)
    if document_rank(key) == 2:
        written[0] += 1
        if written[0] == {after}:
            os._exit(9)  # killed: nothing runs after this
def puts(self, mapping):
    for k, v in mapping.items():
        put(self, k, v)
DirectoryStore.__setitem__ = put
DirectoryStore.setitems = puts
"""


def run_killed(body: str, after: int) -> None:
    """Run body in a child whose directory stores die at their after-th chunk write; it
    must have died there (exit status 9)."""
    code = KILL.format(after=after) + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 9, (r.returncode, r.stdout, r.stderr)


def cli_killed(args, after):
    run_killed(f"from chunkstore.cli import main\nsys.exit(main({[str(a) for a in args]!r}))",
               after)


def chunk_files(path):
    return [p for p in path.rglob("*") if p.is_file() and not p.name.startswith((".z", "zarr"))]


def assert_no_node(path, sub=""):
    """Neither chunkstore nor zarr-python opens anything at path/sub (and chunks are
    there: the copy was killed midway, not before its first write)."""
    assert chunk_files(path)
    with pytest.raises(NodeNotFoundError):
        cs.open(str(path), mode="r", path=sub)
    zarr = pytest.importorskip("zarr")
    with pytest.raises(Exception) as e:
        zarr.open(str(path), mode="r", path=sub)
    assert "not found" in str(e.value).lower() or "no " in str(e.value).lower(), e.value


@pytest.fixture
def data():
    return np.arange(40 * 40, dtype="f8").reshape(40, 40) + 1


@pytest.fixture
def src(tmp_path, data):
    path = tmp_path / "src.zarr"
    root = cs.group(str(path))
    root.attrs["title"] = "source"
    root.array("a", data, chunks=(10, 10))
    root.array("b", data[::2] * 2, chunks=(5, 40))
    return path


@pytest.mark.parametrize("opts", [
    ["--chunks", "4,4"],                                   # recoded, same format
    ["--zarr-format", "3"],                                # recoded into v3
    ["--zarr-format", "3", "--chunks", "4,4", "--shards", "8,8"],
    [],                                                    # raw: documents last as well
])
def test_cp_of_an_array_killed_leaves_no_array(src, tmp_path, capsys, data, opts):
    dst = tmp_path / "dst.zarr"
    cli_killed(["cp", src, dst, "--src-path", "a", *opts], after=5)
    assert_no_node(dst)
    # a re-run refuses the keys left (they would read as its chunks) unless replacing
    assert cli.main([str(a) for a in ["cp", src, dst, "--src-path", "a", *opts]]) == 1
    assert "of no node" in capsys.readouterr().err
    assert cli.main([str(a) for a in ["cp", src, dst, "--src-path", "a", *opts,
                                      "--if-exists", "replace"]]) == 0
    np.testing.assert_array_equal(cs.open_array(str(dst), mode="r")[:], data)


@pytest.mark.parametrize("opts", [["--chunks", "4,4"], ["--zarr-format", "3"]])
def test_cp_of_a_group_killed_in_its_second_array_leaves_no_node(src, tmp_path, opts):
    dst = tmp_path / "dst.zarr"
    # a has 100 chunks of 4x4 (or 16 of 10x10), b 20 x 10 or 4: killed inside b's
    cli_killed(["cp", src, dst, *opts], after=110 if "--chunks" in opts else 18)
    assert (dst / "a").is_dir() and chunk_files(dst / "b")
    assert_no_node(dst)
    for sub in ("a", "b"):  # the array copied whole is not shown either: nothing is
        with pytest.raises(NodeNotFoundError):
            cs.open(str(dst), mode="r", path=sub)


def test_cp_into_an_existing_group_killed_shows_no_new_member(src, tmp_path, data):
    dst = tmp_path / "dst.zarr"
    g = cs.group(str(dst))
    g.array("kept", data[:2], chunks=(2, 2))
    cli_killed(["cp", src, dst, "--src-path", "a", "--dst-path", "copy", "--chunks", "4,4"],
               after=7)
    g = cs.open_group(str(dst), mode="r")
    assert list(g) == ["kept"]
    np.testing.assert_array_equal(g["kept"][:], data[:2])
    assert chunk_files(dst / "copy")


def test_convert_killed_leaves_no_node(tmp_path, data):
    npz = tmp_path / "in.npz"
    np.savez(npz, x=data, y=data[:5])
    out = tmp_path / "out.zarr"
    cli_killed(["convert", npz, out, "--chunks", "4,4"], after=20)
    assert_no_node(out)


def test_api_copy_with_new_encoding_killed_leaves_no_member(src, tmp_path):
    dst = tmp_path / "dst.zarr"
    cs.group(str(dst))
    run_killed(f"""
        import chunkstore as cs
        src = cs.open_array({str(src)!r}, mode="r", path="a")
        cs.copy(src, cs.open_group({str(dst)!r}), name="c", chunks=(4, 4))
        """, after=9)
    g = cs.open_group(str(dst), mode="r")
    assert "c" not in g and list(g) == []
    assert chunk_files(dst / "c")


COUNT_ALL = """
import os, sys
from chunkstore.storage.directory import DirectoryStore
written = [0]
_put = DirectoryStore.__setitem__
def put(self, key, value):
    _put(self, key, value)
    written[0] += 1
    if written[0] == {after}:
        os._exit(9)
def puts(self, mapping):
    for k, v in mapping.items():
        put(self, k, v)
DirectoryStore.__setitem__ = put
DirectoryStore.setitems = puts
import atexit
atexit.register(lambda: print("WRITES", written[0]))
"""


@pytest.mark.parametrize("opts", [["--chunks", "20,20"], ["--zarr-format", "3"]])
def test_cp_killed_at_every_write_leaves_only_whole_nodes(tmp_path, data, opts):
    """A recoding cp of a group killed at each of its writes in turn, the documents' too
    (published last: deepest first, an array's attributes before its document): whatever
    opens in the destination is whole, and reads as its source."""
    src = tmp_path / "src.zarr"
    root = cs.group(str(src))
    root.attrs["title"] = "source"
    g = root.create_group("g")
    g.attrs["k"] = 1
    g.array("a", data, chunks=(20, 20)).attrs["units"] = "m"
    root.array("b", data[:5], chunks=(5, 20))
    args = ["cp", str(src), None, *opts]

    def run(after, dst):
        code = COUNT_ALL.format(after=after) + (
            f"from chunkstore.cli import main\nmain({[str(dst) if a is None else a for a in args]!r})")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120)

    total = int(run(0, tmp_path / "count.zarr").stdout.split("WRITES")[-1])
    assert total > 8
    want = {"": root, "g": g, "g/a": g["a"], "b": root["b"]}
    for after in range(1, total):
        dst = tmp_path / f"d{after}.zarr"
        assert run(after, dst).returncode == 9
        for path, source in want.items():
            try:
                node = cs.open(str(dst), mode="r", path=path)
            except NodeNotFoundError:
                continue
            assert node.attrs.asdict() == source.attrs.asdict(), (after, path)
            if isinstance(source, cs.Array):
                np.testing.assert_array_equal(node[...], source[...], err_msg=f"{after} {path}")
            else:  # a group shown: every member below it is there, whole
                assert sorted(node) == sorted(source), (after, path)


@pytest.mark.parametrize("opts", [[], ["--chunks", "4,4"]])
def test_cp_of_a_consolidated_group_killed_leaves_no_consolidated_metadata(src, tmp_path,
                                                                          data, opts):
    """The v2 consolidated-metadata document is written after every node document (it
    lists the nodes: written among the chunks, it opened a killed copy's array through
    open_consolidated, reading fill values for the chunks not copied)."""
    cs.consolidate_metadata(str(src))
    dst = tmp_path / "dst.zarr"
    cli_killed(["cp", src, dst, *opts], after=3)
    assert chunk_files(dst) and not (dst / ".zmetadata").exists()
    with pytest.raises(Exception, match="onsolidated metadata|not found|no "):
        cs.open_consolidated(str(dst), mode="r")
    assert cli.main([str(a) for a in ["cp", src, dst, *opts, "--if-exists", "replace"]]) == 0
    np.testing.assert_array_equal(cs.open_consolidated(str(dst), mode="r")["a"][:], data)


def _old_values_or_refused(dst, old):
    """What open_consolidated gives of dst/a: the old array whole, or an error (never the
    fill value where its data was, nor new chunks decoded by the old metadata)."""
    try:
        a = cs.open_consolidated(str(dst), mode="r")["a"]
        got = a[:]
    except Exception:  # noqa: BLE001 - refused: the set-aside consolidated metadata
        return
    np.testing.assert_array_equal(got, old)


@pytest.mark.parametrize("fmt", [2, 3])
def test_cp_replace_into_a_consolidated_group_killed_never_reads_fill(src, tmp_path, data,
                                                                       fmt):
    """`cp --if-exists replace` into a consolidated group, killed after the old array was
    removed: the group's consolidated metadata still listed it, and open_consolidated
    (xarray's default) read the fill value where its data was, or the new chunks decoded
    by its old metadata. The consolidated metadata is now set aside while the copy runs
    (and made anew after it)."""
    dst = tmp_path / "dst.zarr"
    old = data * 10
    cs.group(str(dst), zarr_format=fmt).array("a", old, chunks=(8, 8))
    cs.consolidate_metadata(str(dst))
    _killed_removing(["cp", src, dst, "--src-path", "a", "--dst-path", "a", "--if-exists",
                      "replace", "--zarr-format", str(fmt)])
    _old_values_or_refused(dst, old)
    assert cli.main([str(a) for a in ["cp", src, dst, "--src-path", "a", "--dst-path", "a",
                                      "--if-exists", "replace", "--zarr-format",
                                      str(fmt)]]) == 0
    np.testing.assert_array_equal(cs.open_consolidated(str(dst), mode="r")["a"][:], data)


_RM_KILLED = """
import os, sys
import chunkstore.storage.directory as d
def remove_tree(path, keep_root=False):  # a node's chunks deleted, killed midway
    for root, _, files in os.walk(path):
        for f in sorted(files)[:5]:
            os.unlink(os.path.join(root, f))
        os._exit(9)
d.remove_tree = remove_tree
from chunkstore.cli import main
sys.exit(main({args!r}))
"""


def _killed_removing(args):
    """Run the command in a child killed while it deletes a node's chunks (5 files gone)."""
    r = subprocess.run([sys.executable, "-c", _RM_KILLED.format(
        args=[str(a) for a in args])], capture_output=True, text=True, timeout=120)
    assert r.returncode == 9, (r.returncode, r.stderr)


def test_rm_in_a_consolidated_group_killed_never_reads_fill(tmp_path, data):
    dst = tmp_path / "dst.zarr"
    g = cs.group(str(dst))
    g.array("a", data, chunks=(8, 8))
    g.array("b", data, chunks=(8, 8))
    cs.consolidate_metadata(str(dst))
    _killed_removing(["rm", dst, "--path", "a", "-f"])
    _old_values_or_refused(dst, data)
    np.testing.assert_array_equal(cs.open_group(str(dst), mode="r")["b"][:], data)


def test_cp_replace_of_a_consolidated_root_killed_never_reads_fill(src, tmp_path, data):
    """The same for a whole consolidated group replaced (its own .zmetadata listed the old
    array until the end)."""
    dst = tmp_path / "dst.zarr"
    old = data * 10
    cs.group(str(dst)).array("a", old, chunks=(8, 8))
    cs.consolidate_metadata(str(dst))
    _killed_removing(["cp", src, dst, "--if-exists", "replace"])
    _old_values_or_refused(dst, old)
    assert cli.main([str(a) for a in ["cp", src, dst, "--if-exists", "replace"]]) == 0
    np.testing.assert_array_equal(cs.open_group(str(dst), mode="r")["a"][:], data)


def test_cp_merge_into_a_consolidated_group_keeps_it_consolidated(src, tmp_path, data):
    """A copy that finishes leaves the groups it set aside consolidated, listing it."""
    dst = tmp_path / "dst.zarr"
    g = cs.group(str(dst))
    g.array("b", data, chunks=(8, 8))
    g.create_group("sub").array("c", data, chunks=(8, 8))
    cs.consolidate_metadata(str(dst))
    assert cli.main([str(a) for a in ["cp", src, dst, "--src-path", "a", "--dst-path",
                                      "sub/c", "--if-exists", "replace"]]) == 0
    c = cs.open_consolidated(str(dst), mode="r")
    np.testing.assert_array_equal(c["sub/c"][:], data)
    np.testing.assert_array_equal(c["b"][:], data)
