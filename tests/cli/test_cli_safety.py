"""The CLI's writing commands never leave half a store: options are checked against every
array before the first write (errors name the array or dataset at fault), what a failed
command created is removed, and errors never show temporary file names. Progress bars
count bytes and move per batch of chunks. (In-process: main() returns the exit status.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.cli as cli


def fail(capsys, *args, code=1):
    assert cli.main([str(a) for a in args]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("chunkstore: error: "), err
    return err[0]


def ok(capsys, *args):
    assert cli.main([str(a) for a in args]) == 0, capsys.readouterr().err
    return capsys.readouterr()


def snapshot(path):
    return {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def src(tmp_path):
    """A v2 group: g/a (2-d, chunks 10,10), g/b (1-d) and a root attribute."""
    path = tmp_path / "src.zarr"
    root = cs.group(str(path))
    root.attrs["title"] = "source"
    g = root.create_group("g")
    g.array("a", np.arange(400, dtype="f4").reshape(20, 20), chunks=(10, 10))
    g.array("b", np.arange(30, dtype="i2"), chunks=(10,))
    return path


@pytest.mark.parametrize("opts,words", [
    (["--shards", "20,20"], ["--shards needs Zarr v3", "/g/a"]),
    (["--zarr-format", "3", "--shards", "15,15"], ["multiple", "/g/a"]),
    (["--chunks", "5,5"], ["--chunks", "/g/b"]),  # a is 2-d and fine; b is 1-d
    (["--zarr-format", "3", "--chunks", "5,5", "--shards", "10,10"], ["/g/b"]),
])
def test_cp_bad_options_leave_no_destination(src, tmp_path, capsys, opts, words):
    dst = tmp_path / "dst.zarr"
    line = fail(capsys, "cp", src, dst, *opts)
    for w in words:
        assert w in line, line
    assert not dst.exists()
    # Nothing was left behind to trip a corrected rerun ("already holds a group").
    if "--shards" in opts:
        ok(capsys, "cp", src, dst, "--src-path", "g/a", "--zarr-format", "3", "--shards", "20,20")
    else:
        ok(capsys, "cp", src, dst, "--src-path", "g/b", "--chunks", "5")


def test_cp_bad_options_leave_existing_store_as_it_was(src, tmp_path, capsys):
    dst = tmp_path / "dst.zarr"
    ok(capsys, "cp", src, dst)
    before = snapshot(dst)
    fail(capsys, "cp", src, dst, "--dst-path", "copy/deeper", "--chunks", "5,5")
    assert snapshot(dst) == before
    fail(capsys, "cp", src, dst)  # already holds a group: nothing changes either
    assert snapshot(dst) == before
    zdst = tmp_path / "dst.zip"
    fail(capsys, "cp", src, zdst, "--shards", "4,4")
    assert not zdst.exists()


def test_failure_while_writing_removes_what_was_made(src, tmp_path, capsys, monkeypatch):
    import chunkstore.hierarchy.convenience as conv
    real = conv.copy_array_data
    calls = []

    def flaky(source, dst, **kw):
        calls.append(dst.path)
        if len(calls) == 2:
            raise OSError("disk full (simulated)")
        return real(source, dst, **kw)

    monkeypatch.setattr(conv, "copy_array_data", flaky)
    dst = tmp_path / "dst.zarr"
    assert "disk full" in fail(capsys, "cp", src, dst, "--chunks", "5")
    assert len(calls) == 2 and not dst.exists()
    # Into an existing store: only the new node (and the parent groups made for it) goes.
    other = cs.group(str(tmp_path / "other.zarr"))
    other.array("keep", np.arange(5), chunks=5)
    before = snapshot(tmp_path / "other.zarr")
    calls.clear()
    fail(capsys, "cp", src, tmp_path / "other.zarr", "--dst-path", "new/copy", "--chunks", "5")
    assert snapshot(tmp_path / "other.zarr") == before


@pytest.mark.parametrize("mode", ["replace", "raise", "skip"])
def test_a_recoding_cp_refused_by_a_node_among_its_chunk_keys_keeps_that_node(
        tmp_path, capsys, mode):
    """A recoding cp to a path with no node but an array below it among its chunk keys
    (g, with g/c: an implicit group's member) was refused by the creation, and the clean-up
    of what the copy had made removed the path, g/c with it: the refusal lost that array.
    Refused before anything is written now, as a raw copy is."""
    src = cs.open_group(str(tmp_path / "src.zarr"), mode="w", zarr_format=2)
    src.create_array("a", shape=(4,), chunks=(2,), dtype="f8")[:] = 1
    dst = tmp_path / "dst.zarr"
    cs.open_group(str(dst), mode="w", zarr_format=2)
    cs.copy_store(str(tmp_path / "src.zarr"), str(dst), source_path="a", dest_path="g/c")
    before = snapshot(dst)
    assert "among the array's chunk keys" in fail(
        capsys, "cp", tmp_path / "src.zarr", dst, "--src-path", "a", "--dst-path", "g",
        "--if-exists", mode, "--chunks", "3")
    assert snapshot(dst) == before
    np.testing.assert_array_equal(cs.open_array(str(dst), path="g/c", mode="r")[:], [1.0] * 4)


def test_convert_hdf5_scalar_with_chunks_names_dataset(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "in.h5"
    with h5py.File(path, "w") as f:
        f.create_group("grp").create_dataset("img", data=np.ones((10, 10)))
        f["grp"].create_dataset("scalar", data=3.5)
    out = tmp_path / "out.zarr"
    line = fail(capsys, "convert", path, out, "--chunks", "5,5")
    assert "dataset /grp/scalar" in line and "0 dimensions" in line, line
    assert not out.exists()
    # The same into an existing store at a path: the store stays as it was.
    cs.group(str(out)).array("keep", np.arange(3), chunks=3)
    before = snapshot(out)
    fail(capsys, "convert", path, out, "--path", "h5/here", "--chunks", "5,5")
    assert snapshot(out) == before


def test_convert_npz_bad_member_reads_headers_only(tmp_path, capsys, monkeypatch):
    np.savez(tmp_path / "in.npz", one=np.ones((4, 4)), two=np.arange(10))
    out = tmp_path / "out.zarr"
    loaded = []
    real_getitem = np.lib.npyio.NpzFile.__getitem__
    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__",
                        lambda self, k: (loaded.append(k), real_getitem(self, k))[1])
    line = fail(capsys, "convert", tmp_path / "in.npz", out, "--chunks", "5,5")
    assert "member 'two'" in line, line
    assert loaded == [] and not out.exists()
    ok(capsys, "convert", tmp_path / "in.npz", out, "--chunks", "5", "--no-progress")
    assert sorted(loaded) == ["one", "two"]


def test_error_lines_never_show_temporary_names(src, tmp_path, capsys, monkeypatch):
    tmp = f"{tmp_path}/dst.zarr/g/..zattrs.{'9d02' * 8}.partial"
    assert cli._one_line(f"[Errno 28] No space left on device: '{tmp}'") == \
        f"No space left on device: '{tmp_path}/dst.zarr/g/.zattrs'"

    def boom(*a, **k):
        raise OSError(28, "No space left on device", tmp)

    monkeypatch.setattr("chunkstore.storage.directory.DirectoryStore.__setitem__", boom)
    line = fail(capsys, "cp", src, tmp_path / "dst.zarr", "--chunks", "5")
    assert ".partial" not in line and "9d02" not in line and "g/.zattrs" in line, line


class Bar:
    """Records what a tqdm bar is given."""
    made = []

    def __init__(self, total=None, unit=None, **kw):
        self.total, self.unit, self.updates = total, unit, []
        Bar.made.append(self)

    def update(self, n):
        self.updates.append(n)

    def close(self):
        pass


def test_progress_counts_bytes_per_batch(tmp_path, capsys, monkeypatch):
    tqdm = pytest.importorskip("tqdm")
    monkeypatch.setattr(tqdm, "tqdm", Bar)
    Bar.made.clear()
    monkeypatch.setattr(cli.common, "PROGRESS_BLOCK_BYTES", 2 * 2**20)
    data = np.arange(2000 * 1000, dtype="f8").reshape(2000, 1000)  # 16 MB
    np.save(tmp_path / "a.npy", data)
    ok(capsys, "convert", tmp_path / "a.npy", tmp_path / "a.zarr", "--chunks", "100,1000",
       "--progress")
    bar = Bar.made[-1]
    assert bar.unit == "B" and bar.total == data.nbytes
    assert sum(bar.updates) == data.nbytes
    # 16 MB in 800 kB chunks: updated per batch of chunks, not once per 256 MiB block.
    assert len(bar.updates) >= 8 and max(bar.updates) <= cli.common.PROGRESS_BLOCK_BYTES
    ok(capsys, "cp", tmp_path / "a.zarr", tmp_path / "b.zarr", "--dtype", "f4", "--progress")
    bar = Bar.made[-1]
    assert bar.unit == "B" and bar.total == data.size * 4 == sum(bar.updates)
    assert len(bar.updates) >= 4
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "b.zarr"), mode="r")[...],
                                  data.astype("f4"))


# ------------------------------------------------------------------------------ verify, --checksum
def flip_byte(path, offset):
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_verify_help_says_what_it_cannot_detect(capsys):
    with pytest.raises(SystemExit):
        cli.main(["verify", "--help"])
    out = capsys.readouterr().out
    assert "Not detected" in out and "stored uncompressed" in out and "--checksum" in out


def test_checksum_copy_makes_silent_corruption_detectable(tmp_path, capsys):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=4096, dtype="u1")  # incompressible: Blosc memcpys it
    src = tmp_path / "src.zarr"
    cs.array(data, store=str(src), chunks=4096)
    chunk = src / "0"
    assert len(chunk.read_bytes()) == 4096 + 16  # header + the bytes as they are
    # The limit verify documents: a changed byte in an uncompressed Blosc chunk decodes.
    flip_byte(chunk, 2000)
    assert "OK" in ok(capsys, "verify", src).out
    corrupted = cs.open_array(str(src), mode="r")[...]
    assert (corrupted != data).sum() == 1
    # A copy with --checksum: the same damage is reported, by key.
    cs.array(data, store=str(src), chunks=4096, overwrite=True)
    dst = tmp_path / "dst.zarr"
    ok(capsys, "cp", src, dst, "--zarr-format", "3", "--checksum")
    z = cs.open_array(str(dst), mode="r")
    assert [c["name"] for c in z.metadata.codecs][-1] == "crc32c"
    np.testing.assert_array_equal(z[...], data)
    zarr = pytest.importorskip("zarr")
    np.testing.assert_array_equal(zarr.open_array(str(dst), mode="r")[...], data)
    flip_byte(dst / "c" / "0", 2000)
    assert cli.main(["verify", str(dst)]) == 1
    out = capsys.readouterr().out
    assert "corrupt chunk 'c/0'" in out and "FAILED" in out


def test_checksum_on_sharded_copy_and_v2_refused(tmp_path, capsys):
    src = tmp_path / "src.zarr"
    cs.array(np.arange(64, dtype="i4").reshape(8, 8), store=str(src), chunks=(2, 2))
    dst = tmp_path / "dst.zarr"
    ok(capsys, "cp", src, dst, "--zarr-format", "3", "--shards", "4,4", "--checksum")
    z = cs.open_array(str(dst), mode="r")
    inner = z.metadata.codecs[0]["configuration"]["codecs"]
    assert inner[-1]["name"] == "crc32c"
    np.testing.assert_array_equal(z[...], np.arange(64).reshape(8, 8))
    assert "--checksum needs Zarr v3" in fail(capsys, "cp", src, tmp_path / "x.zarr",
                                              "--checksum")
    assert not (tmp_path / "x.zarr").exists()
    fail(capsys, "cp", src, tmp_path / "y.zarr", "--checksum", "--zarr-format", "2", code=2)


# ------------------------------------------------------------------------------ rm, options
class Terminal:
    """stdin as a terminal that answers `answer`."""

    def __init__(self, answer):
        self.answer = answer

    def isatty(self):
        return True

    def readline(self):
        return self.answer + "\n"


def test_rm_confirmation(src, capsys, monkeypatch):
    before = snapshot(src)
    # No terminal to ask on (stdin is pytest's): refused without -f/--yes.
    line = fail(capsys, "rm", src, "--path", "g/a", code=2)
    assert "-f/--yes" in line and "'g/a'" in line
    assert snapshot(src) == before
    monkeypatch.setattr("sys.stdin", Terminal("n"))
    assert cli.main(["rm", str(src), "--path", "g/a"]) == 1
    captured = capsys.readouterr()
    assert "remove array 'g/a'" in captured.err and "[y/N]" in captured.err
    assert "nothing removed" in captured.out and snapshot(src) == before
    monkeypatch.setattr("sys.stdin", Terminal("y"))
    assert cli.main(["rm", str(src), "--path", "g/a"]) == 0
    assert not (src / "g" / "a").exists() and (src / "g" / "b").exists()
    monkeypatch.setattr("sys.stdin", Terminal(""))  # just Enter: the default is no
    assert cli.main(["rm", str(src)]) == 1 and (src / "g" / "b").exists()
    capsys.readouterr()
    ok(capsys, "rm", src, "-f")
    assert list(cs.DirectoryStore(str(src), mode="r").keys()) == []


def test_every_option_has_help():
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = []
    for name, sp in subs.choices.items():
        for action in sp._actions:
            if not action.help:
                missing.append(f"{name} {action.option_strings or action.dest}")
    assert missing == []
    assert all(a.help for a in parser._actions)


def test_storage_option_parsing(capsys):
    from chunkstore.cli.options import parse_storage_option, storage_options
    pairs = [parse_storage_option(t) for t in
             ["anon=true", "client_kwargs.endpoint_url=http://h:9000", "n=3", "s=abc",
              "client_kwargs.region_name=eu"]]
    assert storage_options(pairs, [("n", 4)]) == {
        "anon": True, "n": 4, "s": "abc",
        "client_kwargs": {"endpoint_url": "http://h:9000", "region_name": "eu"}}
    assert storage_options([], None) is None
    assert "KEY=VALUE" in fail(capsys, "info", "s3://b/x", "--storage-option", "novalue",
                               code=2)
    assert "URL stores" in fail(capsys, "info", ".", "--storage-option", "anon=true", code=2)


@pytest.mark.parametrize("opts", [[], ["--chunks", "2"]])
def test_cp_refused_by_keys_of_no_node_gives_the_cli_remedy(tmp_path, capsys, opts):
    """A raw cp refused for keys of no node where it copies an array gave the Python API's
    remedy (if_exists='replace', the store's rmdir) where a recoding one gave the command's;
    both give --if-exists replace, which copies over them."""
    cs.group(str(tmp_path / "src.zarr")).array("a", np.arange(4), chunks=2)
    dst = tmp_path / "dst.zarr"
    (dst / "a").mkdir(parents=True)
    (dst / "a" / "0").write_bytes(b"junk")  # a killed copy's chunk
    line = fail(capsys, "cp", tmp_path / "src.zarr", dst, *opts)
    assert "'a/0'" in line and "use --if-exists replace" in line, line
    assert "if_exists=" not in line and "rmdir" not in line, line
    assert snapshot(dst) == {Path("a/0"): b"junk"}
    ok(capsys, "cp", tmp_path / "src.zarr", dst, *opts, "--if-exists", "replace")
    np.testing.assert_array_equal(cs.open_array(str(dst), path="a", mode="r")[:], np.arange(4))


def test_convert_npz_of_clashing_member_names_names_the_output(tmp_path, capsys):
    """Members 'a' and 'a/b' clash (an array cannot hold one): the refusal named the dry
    run's scratch MemoryStore, a store the user never saw; it names the output."""
    np.savez(tmp_path / "clash.npz", a=np.arange(3), **{"a/b": np.ones(2)})
    out = tmp_path / "out.zarr"
    line = fail(capsys, "convert", tmp_path / "clash.npz", out)
    assert "member 'a/b' of" in line and f"in {out}" in line, line
    assert "MemoryStore" not in line, line
    assert not out.exists()


def test_convert_hdf5_strings_labelled_ascii_stay_bytes(tmp_path, capsys):
    """An ASCII-labelled string dataset may hold any bytes: convert decoded it as ASCII and
    failed on b'caf\\xe9' naming neither dataset nor file; it keeps the bytes, as copy()
    does. A UTF-8-labelled one that is not UTF-8 is refused naming the dataset and file."""
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "a.h5"
    names = np.array([b"caf\xe9", b"b"], dtype=object)
    with h5py.File(path, "w") as f:
        f.create_dataset("grp/names", data=names, dtype=h5py.string_dtype("ascii"))
    ok(capsys, "convert", path, tmp_path / "a.zarr")
    z = cs.open_array(str(tmp_path / "a.zarr"), path="grp/names", mode="r")
    assert z[...].tolist() == [b"caf\xe9", b"b"]
    g = cs.group(store={})
    with h5py.File(path, "r") as f:
        cs.copy(f["grp/names"], g, name="names")
    assert g["names"][...].tolist() == z[...].tolist() and g["names"].filters == z.filters
    with h5py.File(tmp_path / "u.h5", "w") as f:
        f.create_dataset("grp/bad", data=names, dtype=h5py.string_dtype("utf-8"))
    line = fail(capsys, "convert", tmp_path / "u.h5", tmp_path / "u.zarr")
    assert "dataset /grp/bad" in line and "u.h5" in line and "UTF-8" in line, line
    assert not (tmp_path / "u.zarr").exists()
