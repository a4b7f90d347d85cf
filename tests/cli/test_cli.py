"""The `chunkstore` command line, run as `python -m chunkstore ...` in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from conftest import FIXTURES_V2, assert_same, group_cases_v2

REPO = Path(cs.__file__).resolve().parents[1]  # where chunkstore is imported from (installed in CI)
GROUP_CASES = {c["name"]: c for c in group_cases_v2()}
needs_fixtures = pytest.mark.skipif(not GROUP_CASES, reason=f"no fixtures at {FIXTURES_V2}")


def run(*args, ok=True, code=None, env=None, python_args=()):
    """Run `python -m chunkstore args...`; check the exit status; return the result."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("CHUNKSTORE_TRACEBACK", None)
    e.update(env or {})
    r = subprocess.run([sys.executable, *python_args, "-m", "chunkstore", *map(str, args)],
                       capture_output=True, text=True, env=e, timeout=120)
    if code is not None:
        assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    elif ok:
        assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def run_error(*args, code=1):
    """A failing command: the given status, one `chunkstore: error:` line on stderr."""
    r = run(*args, code=code)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("chunkstore: error: "), r.stderr
    return lines[0]


def fixture_path(name):
    return FIXTURES_V2 / GROUP_CASES[name]["path"]


def all_paths(grp):
    out = []
    grp.visit(out.append)
    return out


@pytest.fixture
def src(tmp_path):
    """A directory store holding a hierarchy with attributes."""
    path = tmp_path / "src.zarr"
    g = cs.group(str(path))
    g.attrs["title"] = "t"
    a = g.array("a", np.arange(10000, dtype="i4").reshape(100, 100), chunks=(10, 10),
                compressor=numcodecs.Blosc("lz4", 5))
    a.attrs["units"] = "m"
    g.create_group("g1/g2").array("b", np.linspace(0, 1, 50), chunks=7, fill_value=np.nan)
    g.create_group("empty")
    return path


# ------------------------------------------------------------------------------ basics
def test_version_and_help():
    r = run("--version")
    assert r.stdout.strip() == f"chunkstore {cs.__version__}"
    r = run("--help")
    for cmd in ["info", "tree", "ls", "cp", "convert", "rm", "consolidate", "verify"]:
        assert cmd in r.stdout
    assert "--compressor" in run("cp", "--help").stdout


@needs_fixtures
def test_info_group_and_array():
    out = run("info", fixture_path("group_zip")).stdout
    rows = {k.strip(): v.strip() for k, v in (ln.split(" : ", 1) for ln in out.splitlines())}
    assert rows["Type"] == "chunkstore.Group" and rows["Name"] == "/"
    assert rows["No. arrays"] == "1" and rows["Groups"] == "empty, g1"
    out = run("info", fixture_path("group_zip"), "--path", "g1/g2/b").stdout
    rows = {k.strip(): v.strip() for k, v in (ln.split(" : ", 1) for ln in out.splitlines())}
    assert rows["Type"] == "chunkstore.Array" and rows["Name"] == "/g1/g2/b"
    assert rows["Shape"] == "(50,)" and rows["Data type"] == "float64"


@needs_fixtures
@pytest.mark.parametrize("name", ["group_lmdb", "group_sqlite", "group_nested"])
def test_tree(name):
    out = run("tree", fixture_path(name)).stdout
    assert out.splitlines() == [
        "/",
        "├── a (10, 10) int32",
        "├── empty",
        "└── g1",
        "    └── g2",
        "        └── b (50,) float64",
    ]


def test_tree_subpath_level_and_array(src):
    assert run("tree", src, "--path", "g1").stdout.splitlines() == [
        "/g1", "└── g2", "    └── b (50,) float64"]
    assert run("tree", src, "--level", "1").stdout.splitlines() == [
        "/", "├── a (100, 100) int32", "├── empty", "└── g1"]
    assert run("tree", src, "--path", "a").stdout.strip() == "/a (100, 100) int32"


@needs_fixtures
def test_ls():
    lines = run("ls", fixture_path("group_sqlite")).stdout.splitlines()
    rows = [ln.split(None, 2) for ln in lines]
    assert rows == [["a", "array", "(10, 10)  int32"], ["empty", "group"], ["g1", "group"]]
    lines = run("ls", "-r", fixture_path("group_directory")).stdout.splitlines()
    assert [ln.split()[:2] for ln in lines] == [
        ["a", "array"], ["empty", "group"], ["g1", "group"], ["g1/g2", "group"],
        ["g1/g2/b", "array"]]
    assert lines[-1].split()[-1] == "float64"
    assert run("ls", fixture_path("group_directory"), "--path", "g1/g2").stdout.split() == [
        "b", "array", "(50,)", "float64"]


# ------------------------------------------------------------------------------ cp
def test_cp_raw_copies_bytes(src, tmp_path):
    dst = tmp_path / "dst.zip"
    r = run("cp", src, dst)
    assert "2 arrays" in r.stdout and "4 groups" in r.stdout
    s = cs.DirectoryStore(str(src), mode="r")
    with cs.ZipStore(str(dst), mode="r") as d:
        assert sorted(d.keys()) == sorted(s.keys())
        for k in s.keys():
            assert bytes(d[k]) == bytes(s[k]), k
    g = cs.open_group(str(dst), mode="r")
    assert all_paths(g) == ["a", "empty", "g1", "g1/g2", "g1/g2/b"]
    assert g.attrs["title"] == "t" and g["a"].attrs["units"] == "m"


@needs_fixtures
@pytest.mark.parametrize("name,dst_name", [("group_lmdb", "out.sqlite"),
                                           ("group_zip", "out.lmdb"),
                                           ("group_sqlite", "out.zarr")])
def test_cp_any_store_to_any_store(tmp_path, name, dst_name):
    if "lmdb" in name + dst_name:
        pytest.importorskip("lmdb")
    case = GROUP_CASES[name]
    dst = tmp_path / dst_name
    run("cp", fixture_path(name), dst)
    g = cs.open_group(str(dst), mode="r")
    expected = np.load(FIXTURES_V2 / case["expected"])
    for p in case["arrays"]:
        assert_same(g[p][...], expected[p.replace("/", "__")])
    for p, attrs in case["attrs"].items():
        assert (g[p] if p else g).attrs.asdict() == attrs


def test_cp_rechunk_recompress_array(src, tmp_path):
    dst = tmp_path / "rc.zarr"
    run("cp", src, dst, "--src-path", "a", "--chunks", "30,25", "--compressor", "zstd:5")
    z = cs.open_array(str(dst), mode="r")
    assert z.chunks == (30, 25)
    assert z.compressor == numcodecs.Zstd(level=5)
    assert z.dtype == np.int32 and z.attrs["units"] == "m"
    np.testing.assert_array_equal(z[...], np.arange(10000, dtype="i4").reshape(100, 100))
    assert z.nchunks_initialized == 16
    keys = sorted(k for k in os.listdir(dst) if not k.startswith("."))
    assert keys == sorted(f"{i}.{j}" for i in range(4) for j in range(4))


@pytest.mark.parametrize("spec,expected", [
    ("blosc:zstd:3:bitshuffle", numcodecs.Blosc("zstd", 3, shuffle=numcodecs.Blosc.BITSHUFFLE)),
    ("gzip:6", numcodecs.GZip(6)),
    ("none", None),
])
def test_cp_compressor_specs(src, tmp_path, spec, expected):
    dst = tmp_path / "c.zarr"
    run("cp", src, dst, "--src-path", "g1/g2/b", "--compressor", spec)
    z = cs.open_array(str(dst), mode="r")
    assert z.compressor == expected and z.chunks == (7,)
    np.testing.assert_array_equal(z[...], np.linspace(0, 1, 50))


def test_cp_group_recode_with_dtype(src, tmp_path):
    dst = tmp_path / "g.sqlite"
    run("cp", src, dst, "--chunks", "20", "--dtype", "f4", "--compressor", "blosc:lz4:5:shuffle")
    g = cs.open_group(str(dst), mode="r")
    assert all_paths(g) == ["a", "empty", "g1", "g1/g2", "g1/g2/b"]
    assert g["a"].chunks == (20, 20) and g["g1/g2/b"].chunks == (20,)
    assert g["a"].dtype == np.float32 and g["g1/g2/b"].dtype == np.float32
    assert g["a"].compressor == numcodecs.Blosc("lz4", 5, shuffle=numcodecs.Blosc.SHUFFLE)
    np.testing.assert_array_equal(g["a"][...], np.arange(10000).reshape(100, 100).astype("f4"))
    np.testing.assert_array_equal(g["g1/g2/b"][...], np.linspace(0, 1, 50).astype("f4"))
    assert np.isnan(g["g1/g2/b"].fill_value)
    assert g.attrs["title"] == "t" and g["a"].attrs["units"] == "m"


def test_cp_paths_and_if_exists(src, tmp_path):
    dst = tmp_path / "d.zarr"
    run("cp", src, dst, "--src-path", "g1", "--dst-path", "x/y")
    g = cs.open_group(str(dst), mode="r")
    assert all_paths(g) == ["x", "x/y", "x/y/g2", "x/y/g2/b"]
    line = run_error("cp", src, dst, "--src-path", "g1", "--dst-path", "x/y")
    assert "already" in line and "x/y" in line
    # skip: nothing changes
    cs.open_group(str(dst))["x/y/g2/b"][0] = -5.0
    run("cp", src, dst, "--src-path", "g1", "--dst-path", "x/y", "--if-exists", "skip")
    assert cs.open_array(str(dst), mode="r", path="x/y/g2/b")[0] == -5.0
    # replace: the source's data, and members only in the destination stay
    cs.open_group(str(dst))["x/y"].array("own", np.arange(2))
    run("cp", src, dst, "--src-path", "g1", "--dst-path", "x/y", "--if-exists", "replace")
    g = cs.open_group(str(dst), mode="r")
    assert g["x/y/g2/b"][0] == 0.0 and "x/y/own" in g
    # replace an array by a group: the array is gone
    run("cp", src, dst, "--src-path", "a", "--dst-path", "arr")
    run("cp", src, dst, "--src-path", "g1", "--dst-path", "arr", "--if-exists", "replace")
    g = cs.open_group(str(dst), mode="r")
    assert isinstance(g["arr"], cs.Group) and "arr/g2/b" in g
    assert not (dst / "arr" / ".zarray").exists() and not (dst / "arr" / "0.0").exists()


def test_cp_consolidated_source_stays_consolidated(src, tmp_path):
    cs.consolidate_metadata(str(src))
    for args in ([], ["--chunks", "50"]):
        dst = tmp_path / f"c{len(args)}.zip"
        run("cp", src, dst, *args)
        g = cs.open_consolidated(str(dst), mode="r")
        assert all_paths(g) == ["a", "empty", "g1", "g1/g2", "g1/g2/b"]
        np.testing.assert_array_equal(g["a"][...], np.arange(10000).reshape(100, 100))
        if args:
            assert g["a"].chunks == (50, 50)


def test_cp_within_one_store(src):
    run("cp", src, src, "--src-path", "g1", "--dst-path", "copy")
    g = cs.open_group(str(src), mode="r")
    np.testing.assert_array_equal(g["copy/g2/b"][...], np.linspace(0, 1, 50))
    assert "one holds the other" in run_error("cp", src, src, "--src-path", "g1",
                                              "--dst-path", "g1/inner")
    # onto an ancestor of the source: replacing the destination deleted the source first
    # (the store was left with its root only, and the command said it copied nothing)
    before = sorted(os.listdir(src / "g1"))
    for dst in ("", "g1"):
        assert "one holds the other" in run_error(
            "cp", src, src, "--src-path", "g1/g2", "--dst-path", dst,
            "--if-exists", "replace")
    assert sorted(os.listdir(src / "g1")) == before
    np.testing.assert_array_equal(cs.open_group(str(src), mode="r")["g1/g2/b"][...],
                                  np.linspace(0, 1, 50))
    # a destination directory inside the source's (or the reverse): written into the
    # source's array a, which verify then failed
    for dst in (src / "a" / "inner", src / "g1"):
        assert "lies inside the other store" in run_error("cp", src, dst)
    assert "lies inside the other store" in run_error("cp", src / "g1", src)
    assert not (src / "a" / "inner").exists()


def test_cp_chunks_must_match_ndim(src, tmp_path):
    line = run_error("cp", src, tmp_path / "x.zarr", "--chunks", "5,5")
    assert "--chunks" in line and "/g1/g2/b" in line


def test_cp_progress_bar(src, tmp_path):
    r = run("cp", src, tmp_path / "p.zarr", "--chunks", "50", "--progress")
    assert "cp" in r.stderr and "100%" in r.stderr
    r = run("cp", src, tmp_path / "q.zarr")  # stderr is not a terminal: no bar
    assert r.stderr == ""


# ------------------------------------------------------------------------------ convert
def test_convert_npy(tmp_path):
    data = np.arange(120000, dtype="f8").reshape(300, 400)
    np.save(tmp_path / "a.npy", data)
    run("convert", tmp_path / "a.npy", tmp_path / "a.zarr", "--chunks", "100,150",
        "--compressor", "zstd:3")
    z = cs.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert z.chunks == (100, 150) and z.compressor == numcodecs.Zstd(3)
    assert_same(z[...], data)
    # Fortran order, into a path of a zip store
    f = np.asfortranarray(np.arange(60, dtype=">i2").reshape(6, 10))
    np.save(tmp_path / "f.npy", f)
    run("convert", tmp_path / "f.npy", tmp_path / "f.zip", "--path", "in/here")
    assert_same(cs.open_array(str(tmp_path / "f.zip"), mode="r", path="in/here")[...], f)


def test_convert_npy_memory_is_bounded(tmp_path, monkeypatch):
    # In-process: a 32 MB .npy converted with 1 MiB blocks never holds much more than a block.
    import tracemalloc

    import chunkstore.cli as cli
    import chunkstore.hierarchy.convenience as conv
    data = np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype="f8",
                                     shape=(2000, 2000))
    data[:] = 1.5
    data[7, 11] = -1
    data.flush()
    del data
    monkeypatch.setattr(conv, "copy_block_bytes", lambda: 2**20)
    tracemalloc.start()
    try:
        status = cli.main(["convert", str(tmp_path / "big.npy"), str(tmp_path / "big.zarr"),
                           "--chunks", "250,250", "--no-progress"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 0
    assert peak < 12 * 2**20, peak  # the whole array is 32 MB
    z = cs.open_array(str(tmp_path / "big.zarr"), mode="r")
    assert z[7, 11] == -1 and z[1999, 1999] == 1.5 and z.nchunks_initialized == 64


def test_convert_npz(tmp_path):
    arrays = {"x": np.arange(10), "y": np.ones((3, 4), "f4"), "s": np.array([b"ab", b"c"])}
    np.savez_compressed(tmp_path / "b.npz", **arrays)
    run("convert", tmp_path / "b.npz", tmp_path / "b.sqlite", "--path", "grp")
    g = cs.open_group(str(tmp_path / "b.sqlite"), mode="r")
    assert all_paths(g) == ["grp", "grp/s", "grp/x", "grp/y"]
    for k, v in arrays.items():
        assert_same(g["grp"][k][...], v)


def test_convert_hdf5(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "c.h5"
    data = np.arange(100, dtype="i4").reshape(10, 10)
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "hello"
        f.attrs["arr"] = np.arange(3)
        f.attrs["raw"] = b"bytes"
        g = f.create_group("grp/sub")
        g.attrs["x"] = 1.5
        d = g.create_dataset("data", data=data, chunks=(5, 5), compression="gzip",
                             fillvalue=7)
        d.attrs["units"] = "m"
        f.create_dataset("strings", data=["a", "bc", "déf"], dtype=h5py.string_dtype())
        f.create_dataset("scalar", data=3.5)
        f.create_dataset("fixed", data=np.array([b"ab", b"cd"]))
        f.create_dataset("x", data=np.arange(4.0))
        f["x"].make_scale("x")
        f.create_dataset("t", data=np.arange(3.0))
        f["t"].make_scale("t")
        v = f.create_dataset("v", data=np.ones((3, 4)))
        v.dims[0].attach_scale(f["t"])
        v.dims[1].attach_scale(f["x"])
    run("convert", path, tmp_path / "c.zarr", "--compressor", "zstd:1")
    g = cs.open_group(str(tmp_path / "c.zarr"), mode="r")
    assert all_paths(g) == ["fixed", "grp", "grp/sub", "grp/sub/data", "scalar", "strings",
                            "t", "v", "x"]
    assert g.attrs.asdict() == {"title": "hello", "arr": [0, 1, 2], "raw": "bytes"}
    assert g["grp/sub"].attrs.asdict() == {"x": 1.5}
    d = g["grp/sub/data"]
    assert_same(d[...], data)
    assert d.chunks == (5, 5) and d.fill_value == 7 and d.compressor == numcodecs.Zstd(1)
    assert d.attrs.asdict() == {"units": "m"}
    assert list(g["strings"][...]) == ["a", "bc", "déf"]
    assert g["scalar"][...] == 3.5 and g["scalar"].shape == ()
    assert_same(g["fixed"][...], np.array([b"ab", b"cd"]))
    # HDF5 dimension scales become xarray's _ARRAY_DIMENSIONS.
    assert g["v"].attrs["_ARRAY_DIMENSIONS"] == ["t", "x"]
    assert g["x"].attrs["_ARRAY_DIMENSIONS"] == ["x"]
    assert "DIMENSION_LIST" not in g["v"].attrs and "CLASS" not in g["x"].attrs


@pytest.mark.parametrize("fmt", ["2", "3"])
def test_convert_hdf5_compound_keeps_its_fill_value(tmp_path, fmt):
    """A compound dataset's fill value is the array's (it was dropped: the default read
    where HDF5 reads its fill), a string field's too."""
    h5py = pytest.importorskip("h5py")
    dt = np.dtype([("a", "<i4"), ("b", "<f8"), ("s", "S5")])
    fill = np.array((7, 2.5, b"xy"), dtype=dt)[()]
    with h5py.File(tmp_path / "c.h5", "w") as f:
        d = f.create_dataset("x", shape=(10,), dtype=dt, chunks=(5,), fillvalue=fill)
        d[:3] = np.array([(1, 1.0, b"a")] * 3, dtype=dt)
        want = d[:]
    run("convert", tmp_path / "c.h5", tmp_path / "c.zarr", "--zarr-format", fmt)
    z = cs.open_array(str(tmp_path / "c.zarr"), path="x", mode="r")
    assert z.fill_value == fill
    assert_same(z[:], want)


def test_convert_existing_output(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(5))
    np.save(tmp_path / "b.npy", np.arange(7))
    out = tmp_path / "o.zarr"
    run("convert", tmp_path / "a.npy", out)
    assert "already" in run_error("convert", tmp_path / "b.npy", out)
    run("convert", tmp_path / "b.npy", out, "--if-exists", "skip")
    assert cs.open_array(str(out), mode="r").shape == (5,)
    run("convert", tmp_path / "b.npy", out, "--if-exists", "replace")
    np.testing.assert_array_equal(cs.open_array(str(out), mode="r")[...], np.arange(7))


def test_convert_bad_inputs(tmp_path):
    assert "no such file" in run_error("convert", tmp_path / "nope.npy", tmp_path / "o.zarr")
    (tmp_path / "junk.txt").write_text("not an array")
    assert "format" in run_error("convert", tmp_path / "junk.txt", tmp_path / "o.zarr")
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    assert "bad.npy" in run_error("convert", tmp_path / "bad.npy", tmp_path / "o.zarr")


# ------------------------------------------------------------------------------ rm / consolidate
def test_rm(src):
    r = run("rm", src, "--path", "g1/g2", "-f")
    assert "g1/g2" in r.stdout
    g = cs.open_group(str(src), mode="r")
    assert all_paths(g) == ["a", "empty", "g1"]
    assert not (src / "g1" / "g2").exists()
    assert "g1/g2" in run_error("rm", src, "--path", "g1/g2", "-f")
    run("rm", src, "--yes")
    assert list(cs.DirectoryStore(str(src), mode="r").keys()) == []


def test_rm_keeps_consolidated_metadata_true(src):
    cs.consolidate_metadata(str(src))
    run("rm", src, "--path", "a", "-f")
    meta = json.loads((src / ".zmetadata").read_text())["metadata"]
    assert "a/.zarray" not in meta and "g1/g2/b/.zarray" in meta
    assert "a" not in cs.open_consolidated(str(src), mode="r")


def test_consolidate(src):
    r = run("consolidate", src)
    assert ".zmetadata" in r.stdout
    meta = json.loads((src / ".zmetadata").read_text())
    assert meta["zarr_consolidated_format"] == 1
    assert {"a/.zarray", "a/.zattrs", "g1/g2/b/.zarray", ".zgroup", ".zattrs"} <= \
        set(meta["metadata"])
    g = cs.open_consolidated(str(src), mode="r")
    assert all_paths(g) == ["a", "empty", "g1", "g1/g2", "g1/g2/b"]
    run("consolidate", src, "--path", "g1")
    assert (src / "g1" / ".zmetadata").exists()
    assert "array" in run_error("consolidate", src, "--path", "a")


# ------------------------------------------------------------------------------ verify
@needs_fixtures
@pytest.mark.parametrize("name", ["group_directory", "group_nested", "group_zip"])
def test_verify_ok(name):
    r = run("verify", fixture_path(name))
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(": OK"), r.stdout
    assert "2 arrays" in lines[0] and "19 chunks" in lines[0]


def test_verify_finds_corrupt_chunk(src, tmp_path):
    (src / "a" / "3.4").write_bytes(b"this is not a blosc frame at all")
    r = run("verify", src, code=1)
    bad = [ln for ln in r.stdout.splitlines() if "a/3.4" in ln]
    assert len(bad) == 1 and "corrupt" in bad[0]
    assert "FAILED" in r.stdout.splitlines()[-1] and "1 corrupt" in r.stdout
    # Only the array holding it fails.
    run("verify", src, "--path", "g1")
    run("verify", src, "--path", "a", code=1)


@needs_fixtures
def test_verify_corrupt_chunk_in_a_nested_copy(tmp_path):
    copy = tmp_path / "copy.zarr"
    shutil.copytree(fixture_path("group_nested"), copy)
    chunk = copy / "g1" / "g2" / "b" / "1"
    chunk.write_bytes(os.urandom(len(chunk.read_bytes())))
    r = run("verify", copy, code=1)
    assert "'g1/g2/b/1'" in r.stdout
    assert r.stdout.strip().splitlines()[-1].count("FAILED") == 1


def test_verify_wrong_size_and_outside_grid(tmp_path):
    path = tmp_path / "v.zarr"
    z = cs.create((100,), chunks=10, dtype="i4", store=str(path), compressor=numcodecs.Zstd())
    z[:] = np.arange(100)
    # A validly compressed chunk of the wrong size, and chunk keys beyond the grid.
    (path / "3").write_bytes(numcodecs.Zstd().encode(np.arange(5, dtype="i4").tobytes()))
    (path / "10").write_bytes((path / "0").read_bytes())
    (path / "0.0").write_bytes((path / "0").read_bytes())
    r = run("verify", path, code=1)
    out = r.stdout
    assert "wrong-size chunk '3'" in out and "expected 40" in out
    assert "outside the grid '10'" in out and "outside the grid '0.0'" in out
    assert out.strip().splitlines()[-1].endswith("1 wrong size, 2 outside the grid")


def test_verify_progress_and_no_tqdm(src):
    r = run("verify", src, "--progress")
    assert "verify" in r.stderr and "object" in r.stderr  # stored objects: chunks or shards
    # Without tqdm, --progress says it shows no bar (it was silently ignored: issue 29).
    code = ("import sys; sys.modules['tqdm'] = None; from chunkstore.cli import main; "
            f"sys.exit(main(['verify', {str(src)!r}, '--progress']))")
    e = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK")
    assert r.stderr.strip() == "chunkstore: --progress needs tqdm (pip install tqdm): no " \
                               "progress bar shown"


# ------------------------------------------------------------------------------ errors
def main_error(capsys, *args, code=1):
    """In-process (fast) twin of run_error: the exit status and one stderr line."""
    from chunkstore.cli import main
    assert main([str(a) for a in args]) == code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chunkstore: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_errors_are_one_line(src, tmp_path):
    missing = tmp_path / "missing.zarr"
    for cmd in ("info", "verify", "rm"):
        assert "missing.zarr" in run_error(cmd, missing)
    assert "'..'" in run_error("ls", src, "--path", "../x", code=2)
    assert "unknown compressor" in run_error("cp", src, tmp_path / "o", "--compressor",
                                             "snappy9", code=2)
    assert not missing.exists() and not (tmp_path / "o").exists()


def test_missing_things(src, tmp_path, capsys):
    missing = tmp_path / "missing.zarr"
    for cmd in ("tree", "ls", "consolidate"):
        assert "missing.zarr" in main_error(capsys, cmd, missing)
    assert not missing.exists()
    assert "nope" in main_error(capsys, "info", src, "--path", "nope")
    assert "not a Zarr" in main_error(capsys, "info", tmp_path)
    assert "missing.zarr" in main_error(capsys, "cp", missing, tmp_path / "o.zarr")


def test_usage_errors_exit_2(src, tmp_path, capsys):
    def err(*args):
        return main_error(capsys, *args, code=2)
    line = err("cp", src, tmp_path / "o", "--compressor", "zstd:fast")
    assert "--compressor" in line and "zstd" in line
    assert "blosc" in err("cp", src, tmp_path / "o", "--compressor", "blosc:nope")
    assert "gzip" in err("cp", src, tmp_path / "o", "--compressor", "gzip:1:2")
    assert "--chunks" in err("cp", src, tmp_path / "o", "--chunks", "10,x")
    assert "--chunks" in err("cp", src, tmp_path / "o", "--chunks", "0")
    assert "--dtype" in err("cp", src, tmp_path / "o", "--dtype", "float99")
    assert "--if-exists" in err("cp", src, tmp_path / "o", "--if-exists", "maybe")
    assert "--bogus" in err("info", src, "--bogus")
    assert "frobnicate" in err("frobnicate")
    assert "required" in err()
    assert "'.'" in err("info", src, "--path", "a/./b")
    assert not (tmp_path / "o").exists()


def test_corrupt_metadata_is_an_error_line(src):
    (src / "a" / ".zarray").write_text("{ not json")
    line = run_error("info", src, "--path", "a")
    assert ".zarray" in line
    r = run("verify", src, code=1)
    assert "invalid metadata 'a/.zarray'" in r.stdout


@needs_fixtures
def test_verify_stale_consolidated_metadata(tmp_path):
    copy = tmp_path / "copy.zarr"
    shutil.copytree(fixture_path("group_consolidated"), copy)
    run("verify", copy)
    (copy / "a" / ".zattrs").write_text('{"units": "km"}')
    shutil.rmtree(copy / "empty")
    r = run("verify", copy, code=1)
    line = next(ln for ln in r.stdout.splitlines() if "stale" in ln)
    assert "'.zmetadata'" in line and "a/.zattrs" in line and "empty/.zgroup" in line
    assert r.stdout.strip().splitlines()[-1].endswith("FAILED, 1 stale .zmetadata")
    run("consolidate", copy)
    run("verify", copy)


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_progress_bar_when_stderr_is_a_terminal(src):
    pytest.importorskip("tqdm")
    import fcntl
    import struct
    import termios
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        e = dict(os.environ, PYTHONPATH=str(REPO))
        p = subprocess.run([sys.executable, "-m", "chunkstore", "verify", str(src)],
                           stdout=subprocess.PIPE, stderr=slave, env=e, timeout=120)
        os.close(slave)
        slave = None
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    err = b"".join(chunks).decode("utf-8", "replace")
    assert p.returncode == 0 and b"OK" in p.stdout
    assert "verify" in err and "100%" in err


def test_human_bytes_both_styles():
    from chunkstore.engine._text import human_bytes
    assert [human_bytes(n) for n in (0, 1023, 1536, 3 * 2**30)] == \
        ["0 B", "1023 B", "1.5 KiB", "3.0 GiB"]
    # compact: Array.info's style (zarr-python's), bytes as a bare number
    assert [human_bytes(n, compact=True) for n in (1023, 1536, 5 * 2**50)] == \
        ["1023", "1.5K", "5.0P"]


def test_chunks_value_starting_with_minus_one(tmp_path):
    """`--chunks -1,100` (a whole dimension first) works as `--chunks=-1,100` does; argparse
    refused it as an unknown option (issue 29)."""
    src = tmp_path / "s.zarr"
    cs.array(np.arange(600).reshape(6, 100), store=str(src), chunks=(2, 10))
    run("cp", src, tmp_path / "o.zarr", "--chunks", "-1,50")
    assert cs.open_array(str(tmp_path / "o.zarr"), mode="r").chunks == (6, 50)


def test_cp_dtype_refuses_unsafe_casts_unless_asked(tmp_path):
    """Issue 29: --dtype cast f8 -> i1 (zeros) and f8 -> S3 silently. NumPy's casting rule
    (default same_kind) now decides; --casting unsafe casts anyway; nothing is written when
    refused."""
    src = tmp_path / "s.zarr"
    cs.array(np.arange(10) / 4, store=str(src), chunks=5)
    for dtype in ("i1", "S3", "M8[s]"):
        r = run("cp", src, tmp_path / "bad.zarr", "--dtype", dtype, ok=False, code=1)
        assert "casting rule" in r.stderr and "--casting unsafe" in r.stderr
        assert not (tmp_path / "bad.zarr").exists()
    run("cp", src, tmp_path / "f4.zarr", "--dtype", "f4")
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "f4.zarr"), mode="r")[...],
                                  (np.arange(10) / 4).astype("f4"))
    run("cp", src, tmp_path / "i1.zarr", "--dtype", "i1", "--casting", "unsafe")
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "i1.zarr"), mode="r")[...],
                                  (np.arange(10) / 4).astype("i1"))


@pytest.mark.parametrize("values,src_dtype,dtype,shown", [
    ([1, 300, -5, 2**40], "i8", "i1", "300 becomes 44"),        # wrapped
    (["abcdefgh", "xy"], "U8", "U4", "'abcdefgh' becomes 'abcd'"),  # cut short
    ([b"abc", b"x"], "S3", "S2", "b'abc' becomes b'ab'"),
    ([0.1, 1e300, np.nan], "f8", "f4", "1e+300 becomes inf"),   # overflowed
    (["3000-01-01", "NaT"], "M8[s]", "M8[ns]", "3000-01-01"),   # out of the unit's range
    ([70000, 2], "i4", "i2", "70000 becomes 4464"),
    ([2**64 - 1, 1], "u8", "i8", "18446744073709551615 becomes -1"),  # casts back to itself
    ([200, 1], "u1", "i1", "200 becomes -56"),
])
def test_cp_dtype_refuses_values_the_cast_changes(tmp_path, values, src_dtype, dtype, shown):
    """NumPy's same_kind (cp's default rule) lets i8 -> i1 wrap 300 to 44, U8 -> U4 cut
    strings, M8[s] -> M8[ns] turn 3000 into 1830: cp wrote those values without a word.
    Under a casting rule, a value the cast changes is refused, naming the array and the
    block, and nothing is written; --casting unsafe casts as NumPy does."""
    src = tmp_path / "s.zarr"
    data = np.array(values, dtype=src_dtype)
    cs.array(data, store=str(src), chunks=2)
    r = run("cp", src, tmp_path / "bad.zarr", "--dtype", dtype, ok=False, code=1)
    assert "array '/'" in r.stderr and shown in r.stderr and str(src) in r.stderr
    assert not (tmp_path / "bad.zarr").exists()
    run("cp", src, tmp_path / "u.zarr", "--dtype", dtype, "--casting", "unsafe")
    with np.errstate(over="ignore", invalid="ignore"):
        want = data.astype(dtype)
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "u.zarr"), mode="r")[...],
                                  want)


def test_cp_dtype_of_0d_and_structured_arrays(tmp_path):
    """A 0-d array's changed value is the CastError naming the array (NumPy's nonzero of
    a 0-d array failed); a structured cast is judged field by field, NaN equal to NaN and
    floating-point rounding no change, as for plain arrays."""
    zero = tmp_path / "zero.zarr"
    cs.array(np.array(300), store=str(zero))
    r = run("cp", zero, tmp_path / "z1.zarr", "--dtype", "i1", ok=False, code=1)
    assert "array '/'" in r.stderr and "300 becomes 44" in r.stderr
    from chunkstore.hierarchy.recode import read_as
    dt = np.dtype([("a", "<f8"), ("b", "<i4")])
    data = np.array([(np.nan, 1), (0.1, 2)], dtype=dt)
    src = cs.array(data, store=cs.MemoryStore(), chunks=2)
    swapped = np.dtype([("a", ">f8"), ("b", ">i4")])
    got = read_as(src, swapped, exact=True)[0:2]
    assert got.dtype == swapped and np.isnan(got["a"][0]) and got["b"].tolist() == [1, 2]
    narrower = np.dtype([("a", "<f4"), ("b", "<i4")])
    assert read_as(src, narrower, exact=True)[0:2]["a"][1] == np.float32(0.1)
    wraps = np.dtype([("a", "<f8"), ("b", "i1")])
    big = cs.array(np.array([(0.5, 300)], dtype=dt), store=cs.MemoryStore(), chunks=1)
    with pytest.raises(ValueError, match="becomes"):
        read_as(big, wraps, exact=True)[0:1]


def test_cp_dtype_casts_values_that_fit(tmp_path):
    """Values the narrower dtype holds are copied under the default rule (rounding of
    floating-point values is the cast asked for, not a change refused)."""
    src = tmp_path / "s.zarr"
    cs.array(np.array([1, -2, 100, 127, -128]), store=str(src), chunks=2)
    run("cp", src, tmp_path / "i1.zarr", "--dtype", "i1")
    got = cs.open_array(str(tmp_path / "i1.zarr"), mode="r")
    assert got.dtype == np.dtype("i1")
    np.testing.assert_array_equal(got[...], [1, -2, 100, 127, -128])
    f = tmp_path / "f.zarr"
    cs.array(np.array([0.1, np.nan, -np.inf, 1e30]), store=str(f), chunks=2)
    run("cp", f, tmp_path / "f4.zarr", "--dtype", "f4")
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "f4.zarr"), mode="r")[...],
                                  np.array([0.1, np.nan, -np.inf, 1e30], dtype="f4"))
    t = tmp_path / "t.zarr"
    cs.array(np.array(["2020-01-01T00:00:01", "NaT"], dtype="M8[ms]"), store=str(t), chunks=2)
    run("cp", t, tmp_path / "ts.zarr", "--dtype", "M8[s]")
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "ts.zarr"), mode="r")[...],
                                  np.array(["2020-01-01T00:00:01", "NaT"], dtype="M8[s]"))


def test_a_cast_that_fails_on_the_values_names_the_array_and_writes_nothing(tmp_path):
    """An unsafe cast NumPy refuses for the values themselves (a str that is no number)
    failed with NumPy's bare "invalid literal for int()", naming no array; copy() the same."""
    src = tmp_path / "s.zarr"
    g = cs.open_group(str(src), mode="w")
    g.array("words", np.array(["ab", "cd", "ef"]), chunks=2)
    r = run("cp", src, tmp_path / "bad.zarr", "--dtype", "i4", "--casting", "unsafe",
            ok=False, code=1)
    assert "array '/words'" in r.stderr and "[0:3]" in r.stderr and "int32" in r.stderr
    assert str(src) in r.stderr and "invalid literal" in r.stderr
    assert not (tmp_path / "bad.zarr").exists()
    dest = cs.group()
    with pytest.raises(ValueError, match=r"array '/words' in \[0:3\] from <U2 to int32"):
        cs.copy(g["words"], dest, name="w", dtype="i4")
    assert "w" not in dest


@pytest.mark.parametrize("name", ["a.zarr", "b.zip", "c.sqlite", "d.lmdb"])
def test_rm_of_everything_removes_the_store_itself(tmp_path, name):
    """Issue 29: `rm` of a whole store left an empty directory, a 22-byte zip or an 864 KB
    SQLite file behind."""
    from chunkstore.storage import normalize_store
    path = str(tmp_path / name)
    st = normalize_store(path, mode="w")
    cs.array(np.arange(10), store=st, chunks=5, path="x")
    st.close()
    r = run("rm", path, "-f")
    assert "and the store itself" in r.stdout
    assert not os.path.exists(path)



def test_progress_counts_are_whole_numbers(src, tmp_path):
    """Issue 29: a raw copy's key count showed as '16.0/128'."""
    import re
    r = run("cp", src, tmp_path / "k.zarr", "--progress")  # a raw copy: a count of keys
    assert re.search(r"\b(\d+)/\1\b", r.stderr) and not re.search(r"\d\.\d/\d", r.stderr)


def test_cp_takes_the_destination_groups_format(src, tmp_path):
    # a v2 source copied below a v3 group without --zarr-format was written as v2 (with v2
    # groups above it): invisible from the v3 root, to zarr-python 3 and xarray
    dst = tmp_path / "v3.zarr"
    cs.group(str(dst), zarr_format=3)
    run("cp", src, dst, "--src-path", "a", "--dst-path", "x/y")
    g = cs.open_group(str(dst), mode="r")
    assert g["x"].metadata.zarr_format == 3 and g["x/y"].metadata.zarr_format == 3
    assert list(g["x"].array_keys()) == ["y"]
    np.testing.assert_array_equal(g["x/y"][...],
                                  np.arange(10000, dtype="i4").reshape(100, 100))
    # into a new store (no group above): the source's own format, raw
    run("cp", src, tmp_path / "new.zarr", "--src-path", "a", "--dst-path", "a")
    assert (tmp_path / "new.zarr" / "a" / ".zarray").exists()


@pytest.mark.parametrize("root, asked", [(2, 3), (3, 2)])
def test_cp_zarr_format_below_a_group_of_the_other_format_is_refused(tmp_path, root, asked):
    """`cp --zarr-format 3 --dst-path sub/arr` into a v2 hierarchy wrote a v3 group and
    array there, which zarr-python cannot reach from the root (a KeyError), where copy()
    refuses the same request. Refused naming the group and both formats, nothing written;
    the group's own format is taken."""
    dst, src = tmp_path / "d.zarr", tmp_path / "s.zarr"
    cs.open_group(str(dst), mode="w", zarr_format=root)
    cs.array(np.arange(4), store=str(src), zarr_format=asked)
    r = run("cp", src, dst, "--dst-path", "sub/arr", "--zarr-format", str(asked),
            ok=False, code=1)
    assert f"Zarr v{asked}" in r.stderr and f"group '/', which is Zarr v{root}" in r.stderr
    assert sorted(os.listdir(dst)) == sorted([".zgroup"] if root == 2 else ["zarr.json"])
    run("cp", src, dst, "--dst-path", "sub/arr", "--zarr-format", str(root))
    g = cs.open_group(str(dst), mode="r")
    assert g["sub/arr"].metadata.zarr_format == root
    np.testing.assert_array_equal(g["sub/arr"][...], np.arange(4))


def test_cp_to_v2_says_when_dimension_names_and_the_attribute_disagree(tmp_path):
    """A v3 array with dimension_names (time, x) and an attribute _ARRAY_DIMENSIONS (p, q)
    copied to v2 kept the attribute and dropped the names without a word."""
    src = tmp_path / "s.zarr"
    z = cs.create_array(str(src), shape=(2, 2), dtype="i4", zarr_format=3,
                        dimension_names=["time", "x"])
    z.attrs["_ARRAY_DIMENSIONS"] = ["p", "q"]
    r = run("cp", src, tmp_path / "d.zarr", "--zarr-format", "2")
    assert "dropping the dimension names ['time', 'x']" in r.stderr
    assert cs.open_array(str(tmp_path / "d.zarr"), mode="r").attrs["_ARRAY_DIMENSIONS"] == \
        ["p", "q"]


def test_cp_string_cast_refusal_says_whose_rule(tmp_path):
    """S5 -> U5 is refused by chunkstore's rule, which NumPy's same_kind allows: the
    message blamed NumPy's rule."""
    src = tmp_path / "s.zarr"
    cs.array(np.array([b"ab"], dtype="S5"), store=str(src))
    r = run("cp", src, tmp_path / "d.zarr", "--dtype", "U5", ok=False, code=1)
    assert "chunkstore's 'same_kind' casting rule, stricter than NumPy's" in r.stderr
    r = run("cp", src, tmp_path / "d.zarr", "--dtype", "i4", ok=False, code=1)
    assert "under the 'same_kind' casting rule (NumPy's)" in r.stderr


def test_verify_reports_a_pending_trim_as_such_not_as_damage(tmp_path, monkeypatch):
    """A shrink interrupted after its new shape was written records its trim and leaves the
    chunks past the shape (never read; the next resize or append deletes them first):
    verify reported them as keys outside the grid, FAILED; it now says a trim is pending
    (exit 2, as for strays), and OK once a resize completed it."""
    from chunkstore.engine import write as write_mod

    path = tmp_path / "t.zarr"
    z = cs.create((100,), chunks=10, dtype="i4", store=str(path))
    z[:] = np.arange(100)

    def failing_delete(store, keys):
        raise OSError(5, "injected: the trim's delete fails")

    monkeypatch.setattr(write_mod, "delitems", failing_delete)
    with pytest.raises(OSError):
        z.resize(50)
    monkeypatch.undo()
    r = run("verify", path, code=2)
    assert "a shrink, append or fill value change was interrupted, its trim is pending" in r.stdout
    assert "outside the grid" not in r.stdout
    assert r.stdout.strip().splitlines()[-1].endswith("OK, 1 pending trim left")
    z = cs.open_array(str(path), mode="r+")
    z.resize(z.shape)
    r = run("verify", path, code=0)
    assert r.stdout.strip().endswith(": OK")


@pytest.mark.parametrize("how", ["rm", "cp replace", "convert replace"])
def test_a_replace_or_rm_interrupted_midway_leaves_no_array_with_chunks_gone(
        tmp_path, monkeypatch, capsys, how):
    """rm, cp --if-exists replace and convert --if-exists replace deleted the node with the
    store's rmdir (a directory's tree walk, in the filesystem's order): interrupted there
    (Ctrl-C, an I/O error), the array's .zarray stayed with some chunks gone, and it read
    the fill value there. The node documents now go first, as the library's deletes."""
    from chunkstore.cli import main
    p = str(tmp_path / "s.zarr")
    data = np.arange(1.0, 101.0)
    cs.open_group(p, mode="w").array("a", data, chunks=(10,), fill_value=0)
    cs.open_group(str(tmp_path / "o.zarr"), mode="w").array("a", data * 2, chunks=(10,))
    np.save(tmp_path / "n.npy", data * 3)
    real, seen = os.unlink, [0]

    def unlink(path, *a, **k):
        if not os.fsdecode(path).rsplit("/", 1)[-1].startswith("."):  # a chunk file
            seen[0] += 1
            if seen[0] == 4:
                raise KeyboardInterrupt
        return real(path, *a, **k)

    monkeypatch.setattr(os, "unlink", unlink)
    args = {"rm": ["rm", p, "--path", "a", "-f"],
            "cp replace": ["cp", str(tmp_path / "o.zarr"), p, "--src-path", "a",
                           "--dst-path", "a", "--if-exists", "replace"],
            "convert replace": ["convert", str(tmp_path / "n.npy"), p, "--path", "a",
                                "--if-exists", "replace"]}[how]
    assert main(args) == 130
    monkeypatch.setattr(os, "unlink", real)
    assert seen[0] >= 4
    g = cs.open_group(p, mode="r")
    if "a" in g:  # whole, old or new; never with holes
        got = g["a"][:]
        assert any(np.array_equal(got, d) for d in (data, data * 2, data * 3))


def test_cp_sees_a_file_url_and_its_path_as_one_location(tmp_path):
    """cp file:///x/u.zarr /x/u.zarr --if-exists replace took the two for two stores: it
    deleted the destination, its own source, and the array was lost. Now refused, as two
    spellings of one path are; a store inside the other is refused the same way."""
    p = tmp_path / "u.zarr"
    cs.open_group(str(p), mode="w").array("a", np.arange(100.0), chunks=(10,))
    r = run("cp", f"file://{p}", p, "--src-path", "a", "--dst-path", "a",
            "--if-exists", "replace", ok=False, code=1)
    assert "one holds the other" in r.stderr
    r = run("cp", f"file://{p}", p / "inner.zarr", ok=False, code=1)
    assert "lies inside the other store" in r.stderr
    np.testing.assert_array_equal(cs.open_group(str(p), mode="r")["a"][:], np.arange(100.0))
    assert not (p / "inner.zarr").exists()


@pytest.mark.parametrize("if_exists", ["skip", "replace"])
def test_a_cp_merging_into_an_existing_group_that_fails_removes_its_new_members(
        tmp_path, monkeypatch, capsys, if_exists):
    """A cp into an existing group failing midway (a full disk at the 3rd chunk) left the
    chunks of the members it was making as keys of no node: the existing group was not as
    it was, and the same cp, run again, refused them (its advice, --if-exists replace,
    replaces the existing members)."""
    import errno
    from chunkstore.cli import main
    from chunkstore.metadata.formats import document_rank
    from chunkstore.storage.directory import DirectoryStore
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    cs.open_group(src, mode="w").array("a", np.arange(100.0), chunks=(10,))
    cs.open_group(dst, mode="w").array("keep", np.arange(5.0), chunks=(5,))
    before = sorted(p.relative_to(dst).as_posix() for p in Path(dst).rglob("*"))
    put, seen = DirectoryStore.__setitem__, [0]

    def full(self, k, v):
        if document_rank(k) == 2 and k.startswith("a/"):
            seen[0] += 1
            if seen[0] == 3:
                raise OSError(errno.ENOSPC, "No space left on device", k)
        return put(self, k, v)

    monkeypatch.setattr(DirectoryStore, "__setitem__", full)
    monkeypatch.setattr(DirectoryStore, "setitems",
                        lambda self, m: [full(self, k, v) for k, v in m.items()] and None)
    assert main(["cp", src, dst, "--if-exists", if_exists]) == 1
    assert "No space left" in capsys.readouterr().err
    monkeypatch.undo()
    assert sorted(p.relative_to(dst).as_posix() for p in Path(dst).rglob("*")) == before
    assert main(["cp", src, dst, "--if-exists", if_exists]) == 0  # the disk has room again
    g = cs.open_group(dst, mode="r")
    np.testing.assert_array_equal(g["a"][:], np.arange(100.0))
    np.testing.assert_array_equal(g["keep"][:], np.arange(5.0))


@pytest.mark.parametrize("opts, words", [
    (["--chunks", "2,2"], "--chunks has 2 values but array '/sub dir/b' has 1 dimension"),
    (["--dtype", "i4", "--casting", "unsafe"], "cannot change the dtype of object array '/sub dir/o'"),
])
def test_cp_planning_errors_name_the_store_besides_the_array(tmp_path, opts, words):
    """The recode planner's refusals named the array but not the store it is in (the
    command line's other errors name both)."""
    src = tmp_path / "s.zarr"
    g = cs.open_group(str(src), mode="w")
    g.array("sub dir/b", np.arange(4))
    g.array("sub dir/o", np.array(["a", "b"], dtype=object), object_codec=numcodecs.VLenUTF8())
    path = "sub dir/b" if opts[0] == "--chunks" else "sub dir/o"
    r = run("cp", src, tmp_path / "d.zarr", "--src-path", path, *opts, ok=False, code=1)
    assert words in r.stderr and f"(in {src})" in r.stderr
    assert not (tmp_path / "d.zarr").exists()
