"""The `chunkstore` command line on Zarr v3 stores: info, tree, ls, cp (v3 -> v3, v2 <-> v3 with
--zarr-format, --shards), verify (corrupt inner chunks of shards, corrupt shard indexes,
corrupt v3 chunks, each named by key), consolidate, rm, convert --zarr-format 3.

Most commands run in-process through `chunkstore.cli.main` (fast); one runs as
`python -m chunkstore` to check the real entry point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.cli import main
from conftest import FIXTURES

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FIXTURES_V3 = FIXTURES / "v3"
REPO = Path(cs.__file__).resolve().parents[1]


@pytest.fixture
def cli(capsys):
    """cli(*args, code=0) -> (stdout, stderr); checks the exit status."""
    def run(*args, code=0):
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        assert rc == code, (rc, out, err)
        assert "Traceback" not in err
        if code:
            lines = err.strip().splitlines()
            if lines:  # usage/other errors: one line
                assert len(lines) == 1 and lines[0].startswith("chunkstore: error: "), err
        return out, err
    return run


def files(root):
    root = Path(root)
    return {str(p.relative_to(root)).replace(os.sep, "/"): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def meta_names(root):
    return sorted({Path(k).name for k in files(root)} & {".zarray", ".zgroup", ".zattrs",
                                                         ".zmetadata", "zarr.json"})


def flip(path, pos):
    raw = bytearray(Path(path).read_bytes())
    raw[pos] ^= 0x01
    Path(path).write_bytes(bytes(raw))


SH = np.arange(400, dtype="i4").reshape(20, 20)
U = np.arange(10, dtype="f4")


@pytest.fixture
def v3src(tmp_path):
    """A v3 hierarchy: a sharded array with crc32c and dimension names, a plain array in a
    subgroup, attributes."""
    p = tmp_path / "v3.zarr"
    r = cs.group(str(p), zarr_format=3)
    r.attrs["title"] = "t"
    a = r.create_array("sh", shape=(20, 20), dtype="i4", chunks=(5, 5), shards=(10, 10),
                       compressors=[numcodecs.Zstd(1), numcodecs.CRC32C()],
                       dimension_names=["y", "x"], attributes={"units": "m"})
    a[...] = SH
    b = r.create_group("sub").create_array("u", shape=(10,), dtype="f4", chunks=(3,),
                                           compressors=[numcodecs.Zstd(1),
                                                        numcodecs.CRC32C()])
    b[...] = U
    return p


@pytest.fixture
def v2src(tmp_path):
    p = tmp_path / "v2.zarr"
    g = cs.group(str(p))
    g.attrs["title"] = "v2"
    a = g.array("a", np.arange(100, dtype="i8").reshape(10, 10), chunks=(5, 5),
                compressor=numcodecs.Blosc("lz4", 5), fill_value=-1)
    a.attrs.update({"units": "s", "_ARRAY_DIMENSIONS": ["t", "x"]})
    g.create_group("g").array("f", np.linspace(0, 1, 9), chunks=4, fill_value=np.nan,
                              filters=[numcodecs.Delta("f8")])
    g.array("s", np.array(["a", "bé", "", "ccc"], dtype=object), chunks=3,
            object_codec=numcodecs.VLenUTF8())
    return p


# ------------------------------------------------------------------------------ info/tree/ls
def test_info_tree_ls(cli, v3src):
    out, _ = cli("info", v3src)
    assert re.search(r"^Zarr format\s*: 3$", out, re.M)
    assert re.search(r"^Arrays\s*: sh$", out, re.M)
    out, _ = cli("info", v3src, "--path", "sh")
    assert re.search(r"^Zarr format\s*: 3$", out, re.M)
    assert re.search(r"^Chunk shape\s*: \(5, 5\)$", out, re.M)
    assert re.search(r"^Shard shape\s*: \(10, 10\)$", out, re.M)
    assert re.search(r"^Chunks initialized\s*: 16/16$", out, re.M)
    out, _ = cli("tree", v3src)
    assert out == "/\n├── sh (20, 20) int32\n└── sub\n    └── u (10,) float32\n"
    out, _ = cli("tree", v3src, "--path", "sub/u")
    assert out == "/sub/u (10,) float32\n"
    out, _ = cli("ls", v3src)
    assert [line.split() for line in out.splitlines()] == [["sh", "array", "(20,", "20)",
                                                            "int32"], ["sub", "group"]]
    out, _ = cli("ls", "-r", v3src)
    assert out.splitlines()[-1].split() == ["sub/u", "array", "(10,)", "float32"]


def test_entry_point_on_v3(v3src):
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "chunkstore", "info", str(v3src), "--path",
                        "sh"], capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^Shard shape\s*: \(10, 10\)$", r.stdout, re.M)


# ------------------------------------------------------------------------------ cp
def test_cp_v3_raw_is_byte_identical(cli, v3src, tmp_path):
    dst = tmp_path / "copy.zarr"
    out, _ = cli("cp", v3src, dst)
    assert out.startswith("copied 2 arrays and 2 groups (")
    assert files(dst) == files(v3src)
    # a member into another v3 store, under a new path: the groups on the way are v3
    other = tmp_path / "other.zarr"
    cs.group(str(other), zarr_format=3)
    out, _ = cli("cp", v3src, other, "--src-path", "sh", "--dst-path", "x/y/sh")
    assert out.startswith("copied 1 array (")
    assert meta_names(other) == ["zarr.json"]
    g = zarr.open_group(str(other), mode="r")
    np.testing.assert_array_equal(g["x/y/sh"][...], SH)
    assert g["x/y/sh"].shards == (10, 10)
    # exists: refused, then replaced
    cli("cp", v3src, other, "--src-path", "sh", "--dst-path", "x/y/sh", code=1)
    cli("cp", v3src, other, "--src-path", "sub", "--dst-path", "x/y/sh", "--if-exists",
        "replace")
    assert isinstance(cs.open(str(other), mode="r", path="x/y/sh"), cs.Group)


def test_cp_v3_recode_keeps_v3_layout(cli, v3src, tmp_path):
    dst = tmp_path / "re.zarr"
    cli("cp", v3src, dst, "--src-path", "sh", "--chunks", "2,5", "--shards", "4,20")
    z = cs.open_array(str(dst), mode="r")
    assert z.zarr_format == 3 and z.chunks == (2, 5) and z.shards == (4, 20)
    np.testing.assert_array_equal(z[...], SH)
    meta = json.loads((dst / "zarr.json").read_text())
    inner = meta["codecs"][0]["configuration"]["codecs"]
    assert [c["name"] for c in inner] == ["bytes", "zstd", "crc32c"]  # checksum kept
    assert meta["dimension_names"] == ["y", "x"]
    assert meta["attributes"] == {"units": "m"}
    np.testing.assert_array_equal(zarr.open_array(str(dst), mode="r")[...], SH)
    # a new compressor: the checksum stays; --shards none unshards
    dst2 = tmp_path / "re2.zarr"
    cli("cp", v3src, dst2, "--compressor", "gzip:1", "--shards", "none")
    g = cs.open_group(str(dst2), mode="r")
    assert g["sh"].shards is None and g["sh"].chunks == (5, 5)
    for path in ("sh", "sub/u"):
        chain = json.loads((dst2 / path / "zarr.json").read_text())["codecs"]
        assert [c["name"] for c in chain] == ["bytes", "gzip", "crc32c"], chain
    np.testing.assert_array_equal(g["sh"][...], SH)
    np.testing.assert_array_equal(g["sub/u"][...], U)
    assert dict(g.attrs) == {"title": "t"} and meta_names(dst2) == ["zarr.json"]
    # new chunks that don't divide the shards: a clear error, nothing half-made
    out, err = cli("cp", v3src, tmp_path / "bad.zarr", "--src-path", "sh", "--chunks", "4,4",
                   code=1)
    assert "--shards" in err and "'/sh'" in err
    # chunks that divide the shards keep them
    cli("cp", v3src, tmp_path / "ok.zarr", "--src-path", "sh", "--chunks", "10,2")
    z = cs.open_array(str(tmp_path / "ok.zarr"), mode="r")
    assert z.chunks == (10, 2) and z.shards == (10, 10)
    np.testing.assert_array_equal(z[...], SH)


def test_cp_v2_to_v3(cli, v2src, tmp_path):
    dst = tmp_path / "to3.zarr"
    out, err = cli("cp", v2src, dst, "--zarr-format", "3")
    assert out.startswith("copied 3 arrays and 2 groups")
    assert "dropping the filters of '/g/f'" in err  # Delta has no v3 codec; data is kept
    assert meta_names(dst) == ["zarr.json"]
    g = cs.open_group(str(dst), mode="r")
    assert g.zarr_format == 3
    assert all(node.zarr_format == 3 for _, node in g.arrays(recurse=True))
    np.testing.assert_array_equal(g["a"][...], np.arange(100).reshape(10, 10))
    np.testing.assert_array_equal(g["g/f"][...], np.linspace(0, 1, 9))
    assert list(g["s"][...]) == ["a", "bé", "", "ccc"]
    assert g["a"].fill_value == -1 and np.isnan(g["g/f"].fill_value)
    assert dict(g.attrs) == {"title": "v2"}
    # _ARRAY_DIMENSIONS becomes dimension_names
    assert dict(g["a"].attrs) == {"units": "s"}
    assert g["a"].metadata.dimension_names == ("t", "x")
    zg = zarr.open_group(str(dst), mode="r")
    np.testing.assert_array_equal(zg["a"][...], np.arange(100).reshape(10, 10))
    assert zg["a"].metadata.dimension_names == ("t", "x")
    assert [str(x) for x in zg["s"][...]] == ["a", "bé", "", "ccc"]
    # with shards
    dst2 = tmp_path / "to3s.zarr"
    cli("cp", v2src, dst2, "--src-path", "a", "--zarr-format", "3", "--shards", "10,10")
    z = cs.open_array(str(dst2), mode="r")
    assert z.chunks == (5, 5) and z.shards == (10, 10)
    np.testing.assert_array_equal(z[...], np.arange(100).reshape(10, 10))
    # a compressor Zarr v3 cannot hold
    bad = tmp_path / "zlib.zarr"
    cs.array(np.arange(5), store=str(bad), compressor=numcodecs.Zlib(1))
    out, err = cli("cp", bad, tmp_path / "x.zarr", "--zarr-format", "3", code=1)
    assert "--compressor" in err
    cli("cp", bad, tmp_path / "y.zarr", "--zarr-format", "3", "--compressor", "zstd:1")
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "y.zarr"), mode="r")[...],
                                  np.arange(5))


def test_cp_v3_to_v2(cli, v3src, tmp_path):
    dst = tmp_path / "to2.zarr"
    out, err = cli("cp", v3src, dst, "--zarr-format", "2")
    assert "crc32c" in err  # the checksum cannot come along: said so
    assert set(meta_names(dst)) <= {".zarray", ".zgroup", ".zattrs"}
    g = cs.open_group(str(dst), mode="r")
    assert g.zarr_format == 2 and g["sh"].zarr_format == 2 and g["sub/u"].zarr_format == 2
    np.testing.assert_array_equal(g["sh"][...], SH)
    assert dict(g["sh"].attrs) == {"units": "m", "_ARRAY_DIMENSIONS": ["y", "x"]}
    assert dict(g.attrs) == {"title": "t"}
    zg = zarr.open_group(str(dst), mode="r", zarr_format=2)
    np.testing.assert_array_equal(zg["sub/u"][...], U)
    cli("cp", v3src, tmp_path / "x.zarr", "--zarr-format", "2", "--shards", "4,4", code=2)


# ------------------------------------------------------------------------------ verify
def test_verify_clean_v3(cli, v3src):
    out, _ = cli("verify", v3src)
    assert out.strip().endswith("verified 2 arrays, 20 chunks in " + str(v3src) + ": OK")
    out, _ = cli("verify", v3src, "--path", "sh")
    assert "verified 1 array, 16 chunks" in out and out.strip().endswith(": OK")


def test_verify_finds_corrupt_inner_chunk_shard_index_and_chunk(cli, v3src):
    flip(v3src / "sh" / "c" / "1" / "0", 3)       # first inner chunk of shard (1, 0)
    size = (v3src / "sh" / "c" / "0" / "1").stat().st_size
    flip(v3src / "sh" / "c" / "0" / "1", size - 7)  # the index of shard (0, 1)
    flip(v3src / "sub" / "u" / "c" / "2", 3)       # a plain v3 chunk
    out, _ = cli("verify", v3src, code=1)
    lines = out.strip().splitlines()
    assert any(line.startswith("corrupt chunk 'sh/c/1/0|0.0'") and "crc32c" in line
               for line in lines), out
    assert any(line.startswith("corrupt shard 'sh/c/0/1'") for line in lines), out
    assert any(line.startswith("corrupt chunk 'sub/u/c/2'") for line in lines), out
    # the other 3 inner chunks of shard (1, 0), shard (0, 0) and (1, 1), the other 3 chunks
    assert lines[-1] == (f"verified 2 arrays, 16 chunks in {v3src}: FAILED, 2 corrupt, "
                         f"1 corrupt shard index")
    assert len(lines) == 4


def test_verify_corrupt_inner_chunk_without_checksum(cli, tmp_path):
    p = tmp_path / "n.zarr"
    z = cs.create_array(str(p), shape=(40, 40), dtype="f8", chunks=(10, 10),
                        shards=(20, 20), compressors=numcodecs.Zstd(1))
    z[...] = np.random.default_rng(0).standard_normal((40, 40))
    raw = bytearray((p / "c" / "1" / "1").read_bytes())
    raw[1] ^= 0xFF  # zstd magic of the first inner chunk
    (p / "c" / "1" / "1").write_bytes(bytes(raw))
    out, _ = cli("verify", p, code=1)
    assert out.splitlines()[0].startswith("corrupt chunk 'c/1/1|0.0'")
    assert out.strip().endswith("FAILED, 1 corrupt")


def test_verify_v3_metadata_and_grid_problems(cli, v3src):
    (v3src / "sh" / "c" / "5").mkdir()
    (v3src / "sh" / "c" / "5" / "0").write_bytes(b"stray")
    (v3src / "sub" / "u" / "c.3").write_bytes(b"wrong separator")
    doc = json.loads((v3src / "sub" / "u" / "zarr.json").read_text())
    out, _ = cli("verify", v3src, code=1)
    assert "chunk key outside the grid 'sh/c/5/0': the shard grid of '/sh' is (2, 2)" in out
    assert "chunk key outside the grid 'sub/u/c.3'" in out
    doc["codecs"].append({"name": "frobnicate"})
    (v3src / "sub" / "u" / "zarr.json").write_text(json.dumps(doc))
    out, _ = cli("verify", v3src, code=1)
    bad = [line for line in out.splitlines() if line.startswith("invalid metadata")]
    assert len(bad) == 1 and "'sub/u/zarr.json'" in bad[0] and "frobnicate" in bad[0], out
    assert "verified 1 array, 16 chunks" in out


@pytest.mark.skipif(not (FIXTURES_V3 / "manifest.json").exists(), reason="no v3 fixtures")
def test_verify_v3_fixtures(cli):
    cases = json.loads((FIXTURES_V3 / "manifest.json").read_text())["cases"]
    for case in cases:
        store = FIXTURES_V3 / case["path"]
        out, _ = cli("verify", store)
        g = cs.open(str(store), mode="r")
        arrays = [g] if isinstance(g, cs.Array) else [a for _, a in g.arrays(recurse=True)]
        n = sum(a.nchunks_initialized for a in arrays)
        assert out.strip() == (f"verified {len(arrays)} array{'s' if len(arrays) > 1 else ''}"
                               f", {n} chunk{'s' if n != 1 else ''} in {store}: OK"), out


# ------------------------------------------------------------------------------ consolidate / rm
def test_consolidate_v3(cli, v3src):
    out, _ = cli("consolidate", v3src)
    assert out.strip() == f"consolidated the metadata of 3 members into zarr.json in {v3src}"
    assert meta_names(v3src) == ["zarr.json"]
    doc = json.loads((v3src / "zarr.json").read_text())
    assert set(doc["consolidated_metadata"]["metadata"]) == {"sh", "sub", "sub/u"}
    g = cs.open_consolidated(str(v3src), mode="r")
    np.testing.assert_array_equal(g["sh"][...], SH)
    np.testing.assert_array_equal(zarr.open_consolidated(str(v3src), mode="r")["sub/u"][...], U)
    cli("verify", v3src)
    # a change after consolidating is found stale, and consolidate fixes it
    cs.open_group(str(v3src))["sh"].attrs["new"] = 1
    out, _ = cli("verify", v3src, code=1)
    assert "stale consolidated metadata 'zarr.json': 'sh' differs" in out
    assert out.strip().endswith("FAILED, 1 stale consolidated metadata")
    cli("consolidate", v3src)
    cli("verify", v3src)
    out, err = cli("consolidate", v3src, "--path", "sh", code=1)
    assert "holds an array" in err


def test_rm_and_cp_keep_v3_consolidated_metadata_true(cli, v3src, tmp_path):
    cli("consolidate", v3src)
    out, _ = cli("rm", v3src, "--path", "sub/u", "-f")
    assert "removed array 'sub/u'" in out
    members = json.loads((v3src / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    assert set(members) == {"sh", "sub"}
    assert "u" not in cs.open_consolidated(str(v3src), mode="r")["sub"]
    cli("verify", v3src)
    # a copy into a consolidated v3 hierarchy refreshes it
    cli("cp", v3src, v3src, "--src-path", "sh", "--dst-path", "sub/sh2")
    members = json.loads((v3src / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    assert "sub/sh2" in members
    cli("verify", v3src)
    # a recoded copy of a consolidated hierarchy is consolidated too
    dst = tmp_path / "re.zarr"
    cli("cp", v3src, dst, "--compressor", "none")
    np.testing.assert_array_equal(cs.open_consolidated(str(dst), mode="r")["sub/sh2"][...], SH)


# ------------------------------------------------------------------------------ convert
def test_convert_below_a_v3_group_makes_v3_nodes(cli, tmp_path):
    """Without --zarr-format, convert made Zarr v2 nodes under a v3 root, which zarr-python
    (and the root's consolidated metadata) does not see; it now takes the format of the
    group above the destination, as cp and the API do."""
    out_store = tmp_path / "s.zarr"
    cs.open_group(str(out_store), mode="w", zarr_format=3).zeros("a", shape=3)
    np.save(tmp_path / "x.npy", np.arange(5))
    np.savez(tmp_path / "m.npz", p=np.ones(2), q=np.arange(3))
    cli("convert", tmp_path / "x.npy", out_store, "--path", "new")
    cli("convert", tmp_path / "m.npz", out_store, "--path", "deep/er")
    zg = zarr.open_group(str(out_store), mode="r")
    assert sorted(k for k, _ in zg.members(max_depth=None)) == \
        ["a", "deep", "deep/er", "deep/er/p", "deep/er/q", "new"]
    np.testing.assert_array_equal(zg["new"][...], np.arange(5))
    np.testing.assert_array_equal(zg["deep/er/q"][...], np.arange(3))
    assert not list(out_store.rglob(".z*"))


def test_convert_onto_keys_of_no_node_refuses_before_writing_or_replaces(cli, tmp_path):
    """Keys a failed delete left at an array's path: the array's creation refused them
    only after the convert had written the arrays before it (left behind), and
    --if-exists replace could not remove them. Now refused before anything is written, and
    removed with --if-exists replace, as cp does."""
    out_store = tmp_path / "s.zarr"
    g = cs.open_group(str(out_store), mode="w", zarr_format=2)
    g.array("g/b", np.arange(4.0) + 7, chunks=(4,))
    os.remove(out_store / "g" / "b" / ".zarray")  # chunk g/b/0 left with no node
    os.remove(out_store / "g" / ".zgroup")
    np.savez(tmp_path / "m.npz", a=np.ones(3), b=np.zeros(4))
    before = sorted(p.relative_to(out_store) for p in out_store.rglob("*") if p.is_file())
    _, err = cli("convert", tmp_path / "m.npz", out_store, "--path", "g", code=1)
    assert "'g/b/0'" in err and "--if-exists replace" in err
    assert sorted(p.relative_to(out_store) for p in out_store.rglob("*")
                  if p.is_file()) == before
    cli("convert", tmp_path / "m.npz", out_store, "--path", "g", "--if-exists", "replace")
    np.testing.assert_array_equal(cs.open_array(str(out_store), path="g/b")[...], np.zeros(4))
    np.testing.assert_array_equal(cs.open_array(str(out_store), path="g/a")[...], np.ones(3))


# ------------------------------------------------------------------------------ convert
def test_convert_to_v3(cli, tmp_path):
    npy = tmp_path / "a.npy"
    np.save(npy, np.arange(24, dtype="i2").reshape(4, 6))
    out_store = tmp_path / "c.zarr"
    cli("convert", npy, out_store, "--zarr-format", "3", "--chunks", "2,3")
    z = cs.open_array(str(out_store), mode="r")
    assert z.zarr_format == 3 and z.chunks == (2, 3)
    np.testing.assert_array_equal(z[...], np.arange(24).reshape(4, 6))
    npz = tmp_path / "b.npz"
    np.savez(npz, x=np.ones(3), y=np.arange(4))
    cli("convert", npz, tmp_path / "d.zarr", "--zarr-format", "3", "--path", "g/h")
    assert meta_names(tmp_path / "d.zarr") == ["zarr.json"]
    zg = zarr.open_group(str(tmp_path / "d.zarr"), mode="r")
    np.testing.assert_array_equal(zg["g/h/y"][...], np.arange(4))


def test_convert_hdf5_to_v3_gives_dimension_scales_as_dimension_names(cli, tmp_path):
    """--zarr-format 3 wrote HDF5 dimension scales into an _ARRAY_DIMENSIONS attribute, which
    Zarr v3 readers (xarray) do not look at: they are the arrays' dimension_names now, as
    copy() makes them."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "b.h5", "w") as f:
        x = f.create_dataset("x", data=np.arange(4.0))
        x.make_scale("x")
        v = f.create_dataset("v", data=np.arange(4.0) + 10)
        v.dims[0].attach_scale(x)
        v.attrs["units"] = "m"
    cli("convert", tmp_path / "b.h5", tmp_path / "b.zarr", "--zarr-format", "3")
    for name, attrs in (("v", {"units": "m"}), ("x", {})):
        meta = json.loads((tmp_path / "b.zarr" / name / "zarr.json").read_text())
        assert meta["dimension_names"] == ["x"] and meta.get("attributes", {}) == attrs, meta
    xr = pytest.importorskip("xarray")
    with xr.open_zarr(tmp_path / "b.zarr", consolidated=False) as ds:
        assert ds["v"].dims == ("x",)
        np.testing.assert_array_equal(ds["v"].values, np.arange(4.0) + 10)
