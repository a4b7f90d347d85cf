"""DirectoryStore / NestedDirectoryStore specifics: atomic writes, temp files, empty
directories, and "missing versus broken"."""

from __future__ import annotations

import builtins
import errno
import os
import pickle

import pytest

from chunkstore.errors import ReadOnlyError
from chunkstore.storage import DirectoryStore, NestedDirectoryStore, getitems
from chunkstore.storage.local_files import is_temp_name

LEFTOVER = ".0.0.0123456789abcdef0123456789abcdef.partial"


def test_layout_and_repr(tmp_path):
    s = DirectoryStore(tmp_path / "d")
    assert not (tmp_path / "d").exists()  # created on first write only
    s["a/b/.zarray"] = b"{}"
    assert (tmp_path / "d" / "a" / "b" / ".zarray").read_bytes() == b"{}"
    assert repr(s) == f"DirectoryStore({str(tmp_path / 'd')!r})"
    assert repr(DirectoryStore(tmp_path / "d", mode="r")).endswith("mode='r')")
    assert s == DirectoryStore(str(tmp_path / "d"))
    assert s.path == str(tmp_path / "d")


def test_relative_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = DirectoryStore("rel")
    s["k"] = b"v"
    assert s.path == str(tmp_path / "rel")
    monkeypatch.chdir("/")
    assert pickle.loads(pickle.dumps(s))["k"] == b"v"


def test_temp_files_are_invisible(tmp_path):
    s = DirectoryStore(tmp_path)
    s["0.0"] = b"abc"
    s["sub/x"] = b"12"
    # leftovers of a killed writer
    (tmp_path / LEFTOVER).write_bytes(b"torn")
    (tmp_path / "sub" / ".x.fedcba9876543210fedcba9876543210.partial").write_bytes(b"t")
    assert sorted(s) == ["0.0", "sub/x"]
    assert len(s) == 2
    assert s.listdir() == ["0.0", "sub"]
    assert s.listdir("sub") == ["x"]
    assert s.getsize() == 5
    assert s.getsize("sub") == 2
    assert s["0.0"] == b"abc"
    assert is_temp_name(LEFTOVER) and not is_temp_name(".zarray") and not is_temp_name("a.partial")
    # such names cannot be used as keys
    with pytest.raises(ValueError):
        s[LEFTOVER] = b"x"
    with pytest.raises(ValueError):
        s.setitems({f"sub/{LEFTOVER}": b"x"})
    # rmdir removes them with the directory
    s.rmdir("sub")
    assert not (tmp_path / "sub").exists()


def test_writes_leave_no_temp_files(tmp_path):
    s = DirectoryStore(tmp_path, fsync=True)
    for i in range(5):
        s[f"a/{i}"] = bytes([i]) * 1000
        s[f"a/{i}"] = bytes([i + 1]) * 10
    s.setitems({"b/1": b"1", "b/2": b"2"})
    names = [n for _, _, fs in os.walk(tmp_path) for n in fs]
    assert not [n for n in names if n.endswith(".partial")]
    assert s["a/3"] == bytes([4]) * 10


def test_failed_write_leaves_old_value_and_no_temp(tmp_path, monkeypatch):
    s = DirectoryStore(tmp_path)
    s["k"] = b"old"

    def boom(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError) as ei:
        s["k"] = b"new"
    assert ei.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert s["k"] == b"old"
    assert os.listdir(tmp_path) == ["k"]


def test_delete_removes_empty_parents(tmp_path):
    root = tmp_path / "root"
    s = DirectoryStore(root)
    s["a/b/c/d"] = b"1"
    s["a/x"] = b"2"
    del s["a/b/c/d"]
    assert sorted(os.listdir(root / "a")) == ["x"]  # b/ and b/c/ are gone
    del s["a/x"]
    assert os.listdir(root) == []  # a/ is gone, the root stays
    assert root.is_dir()
    s.setitems({"p/q/1": b"1", "p/q/2": b"2", "p/r": b"3"})
    s.delitems(["p/q/1", "p/q/2", "p/r"])
    assert os.listdir(root) == []
    s["m/n/o"] = b"1"
    s.rmdir("m/n")
    assert os.listdir(root) == []


def test_key_that_is_a_directory(tmp_path):
    s = DirectoryStore(tmp_path)
    s["a/b"] = b"1"
    with pytest.raises(KeyError):
        s["a"]
    assert "a" not in s
    with pytest.raises(KeyError):
        del s["a"]
    assert getitems(s, ["a", "a/b"]) == {"a/b": b"1"}
    s["f"] = b"file"
    with pytest.raises(KeyError):
        s["f/below"]  # NotADirectoryError means: no such key
    assert "f/below" not in s


def test_no_io_for_bad_keys(tmp_path):
    s = DirectoryStore(tmp_path / "never")
    for bad in ["../x", "a/../../x", "/etc/passwd", "a\\b"]:
        with pytest.raises(ValueError):
            s[bad] = b"1"
    assert not (tmp_path / "never").exists()
    assert not (tmp_path / "x").exists()


def test_modes(tmp_path):
    assert list(DirectoryStore(tmp_path / "missing", mode="r")) == []
    assert list(DirectoryStore(tmp_path / "missing", mode="r+")) == []
    assert not (tmp_path / "missing").exists()
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        DirectoryStore(tmp_path / "file")
    s = DirectoryStore(tmp_path / "w", mode="w")
    s["k"] = b"1"
    r = DirectoryStore(tmp_path / "w", mode="r")
    assert r["k"] == b"1"
    with pytest.raises(ReadOnlyError) as ei:
        r["k"] = b"2"
    assert str(tmp_path / "w") in str(ei.value)
    with pytest.raises(ValueError):
        DirectoryStore(tmp_path, dimension_separator="-")


def test_nested_store(tmp_path):
    s = NestedDirectoryStore(tmp_path)
    assert s.dimension_separator == "/"
    assert DirectoryStore(tmp_path).dimension_separator is None
    s["arr/0/1/2"] = b"c"
    assert (tmp_path / "arr" / "0" / "1" / "2").read_bytes() == b"c"
    assert s.listdir("arr/0") == ["1"]
    assert isinstance(s, DirectoryStore)
    assert repr(s).startswith("NestedDirectoryStore(")
    s2 = pickle.loads(pickle.dumps(s))
    assert type(s2) is NestedDirectoryStore and s2.dimension_separator == "/"
    with pytest.raises(ValueError):
        NestedDirectoryStore(tmp_path, dimension_separator=".")


# -- missing versus broken ---------------------------------------------------------------


def test_real_eio_propagates(tmp_path):
    """A chunk file whose read fails with a real EIO (a symlink to /proc/self/mem, which
    cannot be read at offset 0) must raise that OSError, not KeyError, and getitems must not
    treat it as missing."""
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("needs /proc/self/mem")
    s = DirectoryStore(tmp_path)
    s["ok"] = b"1"
    os.symlink("/proc/self/mem", tmp_path / "broken")
    with pytest.raises(OSError) as ei:
        s["broken"]
    assert ei.value.errno == errno.EIO
    assert not isinstance(ei.value, KeyError)
    with pytest.raises(OSError) as ei:
        s.getitems(["ok", "broken", "missing"])
    assert ei.value.errno == errno.EIO
    with pytest.raises(OSError):
        getitems(s, ["broken"])


@pytest.mark.parametrize(
    "err", [errno.EIO, errno.EACCES, errno.EPERM, errno.ESTALE, errno.ENOMEM]
)
def test_open_errors_propagate(tmp_path, monkeypatch, err):
    s = DirectoryStore(tmp_path)
    s["a/chunk"] = b"1"
    s["a/good"] = b"2"
    real_open, real_os_open = builtins.open, os.open
    bad = str(tmp_path / "a" / "chunk")

    def fake_open(file, *args, **kwargs):
        if str(file) == bad:
            raise OSError(err, os.strerror(err), file)
        return real_open(file, *args, **kwargs)

    def fake_os_open(file, *args, **kwargs):
        if str(file) == bad:
            raise OSError(err, os.strerror(err), file)
        return real_os_open(file, *args, **kwargs)

    # Inject at every layer a read may use: buffered open, raw os.open, and the batch reader
    # behind getitems (C system calls, so it is wrapped at the Python boundary).
    import chunkstore.storage.directory as directory_mod
    real_read_files = directory_mod.read_files

    def fake_read_files(paths):
        if bad in map(os.fsdecode, paths):
            raise OSError(err, os.strerror(err), bad)
        return real_read_files(paths)

    real_read_ranges = directory_mod.read_ranges

    def fake_read_ranges(path, ranges):  # the GIL-free byte-range reader behind get_partial
        if os.fsdecode(path) == bad:
            raise OSError(err, os.strerror(err), bad)
        return real_read_ranges(path, ranges)

    monkeypatch.setattr(directory_mod, "read_ranges", fake_read_ranges)
    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(directory_mod, "read_files", fake_read_files)
    with pytest.raises(OSError) as ei:
        s["a/chunk"]
    assert ei.value.errno == err and not isinstance(ei.value, KeyError)
    with pytest.raises(OSError) as ei:
        s.getitems(["a/good", "a/chunk"])
    assert ei.value.errno == err
    with pytest.raises(OSError) as ei:
        s.get_partial("a/chunk", [(0, 1)])
    assert ei.value.errno == err
    # missing keys are still just missing
    assert s.getitems(["a/good", "a/nope"]) == {"a/good": b"2"}
    with pytest.raises(KeyError):
        s["a/nope"]


def test_stat_errors_propagate_from_contains(tmp_path, monkeypatch):
    s = DirectoryStore(tmp_path)
    s["k"] = b"1"
    real_stat = os.stat

    def fake_stat(p, *a, **kw):
        if str(p).endswith(os.sep + "k"):
            raise OSError(errno.EIO, "Input/output error", p)
        return real_stat(p, *a, **kw)

    monkeypatch.setattr(os, "stat", fake_stat)
    with pytest.raises(OSError):
        "k" in s


def test_list_errors_propagate(tmp_path, monkeypatch):
    s = DirectoryStore(tmp_path)
    s["a/b"] = b"1"

    def fake_listdir(p):
        raise OSError(errno.EIO, "Input/output error", p)

    monkeypatch.setattr(os, "listdir", fake_listdir)
    with pytest.raises(OSError):
        s.listdir("a")


# ------------------------------------------------------------------ batch writes (setitems)

def test_setitems_creates_directories_and_takes_any_buffer(tmp_path):
    import numpy as np
    s = DirectoryStore(tmp_path / "root")
    values = {"a/b/c/0.0": b"1", "a/b/c/0.1": bytearray(b"22"), "x": memoryview(b"333"),
              "a/d": np.arange(3, dtype="<u2"), "a/b/c/0.2": b"4"}
    s.setitems(values)
    assert s["a/b/c/0.1"] == b"22" and s["x"] == b"333" and s["a/b/c/0.2"] == b"4"
    assert s["a/d"] == np.arange(3, dtype="<u2").tobytes()
    names = [n for _, _, fs in os.walk(tmp_path) for n in fs]
    assert not [n for n in names if n.endswith(".partial")]


def test_setitems_checks_every_key_and_value_before_writing(tmp_path):
    s = DirectoryStore(tmp_path)
    tmpname = f".k.{'a' * 32}.partial"
    for bad in ({"ok": b"1", "../x": b"2"}, {"ok": b"1", tmpname: b"2"},
                {"ok": b"1", "v": "a str"}):
        with pytest.raises((ValueError, TypeError)):
            s.setitems(bad)
        assert os.listdir(tmp_path) == []


def test_setitems_error_names_the_path_and_keeps_old_values(tmp_path):
    s = DirectoryStore(tmp_path)
    s["a"] = b"old"
    (tmp_path / "blocker").mkdir()
    (tmp_path / "blocker" / "f").write_bytes(b"")
    with pytest.raises(IsADirectoryError) as ei:
        s.setitems({"a": b"new", "blocker": b"x", "c": b"never"})
    assert str(tmp_path / "blocker") in str(ei.value)
    assert s["a"] == b"new" and "c" not in s            # written in order up to the failure
    names = [n for _, _, fs in os.walk(tmp_path) for n in fs]
    assert not [n for n in names if n.endswith(".partial")]


def test_setitems_retries_a_temp_name_clash(tmp_path, monkeypatch):
    import chunkstore.storage.directory as directory_mod
    s = DirectoryStore(tmp_path)
    prefix = b"feedfacefeedface"
    # Another writer's temp file sits exactly where this writer's next temp file would go.
    clash = tmp_path / f".k.{prefix.decode()}{1:016x}.partial"
    clash.write_bytes(b"theirs")
    real = directory_mod.reserve_tokens
    calls = []

    def tokens(n):
        calls.append(n)
        return (prefix, 1) if len(calls) == 1 else real(n)

    monkeypatch.setattr(directory_mod, "reserve_tokens", tokens)
    s.setitems({"k": b"mine", "k2": b"two"})
    assert s["k"] == b"mine" and s["k2"] == b"two" and clash.read_bytes() == b"theirs"


def test_fsync_store_batch_writes(tmp_path):
    s = DirectoryStore(tmp_path, fsync=True)
    s.setitems({f"d{i % 3}/k{i}": bytes([i]) for i in range(10)})
    assert s.getitems([f"d{i % 3}/k{i}" for i in range(10)]) == {
        f"d{i % 3}/k{i}": bytes([i]) for i in range(10)}


def test_store_path_with_nul_is_refused(tmp_path):
    with pytest.raises(ValueError, match="null byte"):
        DirectoryStore(str(tmp_path / "a") + "\0b")


def test_subclass_with_custom_reads_keeps_them(tmp_path):
    # A subclass overriding reads (auditing, decryption, ...) sees every chunk read.
    import numpy as np

    import chunkstore as cs

    class Audited(DirectoryStore):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.seen = []

        def getitems(self, keys):
            keys = list(keys)
            self.seen.extend(keys)
            return super().getitems(keys)

    store = Audited(tmp_path / "a")
    z = cs.zeros((40,), chunks=(4,), dtype="f8", store=store)
    z[...] = np.arange(40.0)
    store.seen.clear()
    np.testing.assert_array_equal(z[...], np.arange(40.0))
    assert sorted(store.seen, key=int) == [str(i) for i in range(10)]


def test_setitems_overwrite_swaps_in_a_new_file(tmp_path):
    """An overwrite (exchange with the old file, then unlink of it) is atomic: a reader
    holding the old file still reads the whole old value, the key holds the new one, the
    old inode is gone from the directory and no temporary file is left."""
    s = DirectoryStore(tmp_path)
    s.setitems({"k": b"old value", "d/k2": b"x" * 5000})
    old_ino = os.stat(tmp_path / "k").st_ino
    with open(tmp_path / "k", "rb") as reader:
        s.setitems({"k": b"new", "d/k2": b"y" * 10})
        assert reader.read() == b"old value"
    assert s["k"] == b"new" and s["d/k2"] == b"y" * 10
    assert os.stat(tmp_path / "k").st_ino != old_ino
    assert sorted(n for _, _, fs in os.walk(tmp_path) for n in fs) == ["k", "k2"]
    # a symbolic link at the key is replaced by the file, as a rename replaces it
    (tmp_path / "target").write_bytes(b"kept")
    os.symlink(tmp_path / "target", tmp_path / "link")
    s.setitems({"link": b"file now"})
    assert not os.path.islink(tmp_path / "link") and s["link"] == b"file now"
    assert (tmp_path / "target").read_bytes() == b"kept"


def test_get_partial_plain_ranges_in_one_call(tmp_path):
    # Plain (offset >= 0, length) ranges go through the GIL-free reader: same answers as the
    # general path, a key prefix (a directory) is missing, ranges past the end come back short.
    s = DirectoryStore(tmp_path)
    s["a/k"] = bytes(range(100))
    assert s.get_partial("a/k", [(90, 20), (0, 3), (100, 5), (5, 0)]) == [
        bytes(range(90, 100)), b"\x00\x01\x02", b"", b""]
    with pytest.raises(KeyError):
        s.get_partial("a", [(0, 1)])
    with pytest.raises(KeyError):
        s.get_partial("a/nope", [(0, 1)])


@pytest.mark.parametrize("make", [
    lambda p: NestedDirectoryStore(p),
    lambda p: DirectoryStore(p, dimension_separator="/"),
])
def test_legacy_v2_array_without_separator_reads_by_the_stores(tmp_path, make):
    # zarr-python < 2.8 wrote nested chunks (0/0) with no dimension_separator in .zarray;
    # zarr-python 2 reads (and writes) them by its store's separator: read as all fill
    # value, and the next write put a dotted 0.0 beside the nested 0/0
    import json

    import numpy as np

    import chunkstore as cs

    p = tmp_path / "legacy"
    p.mkdir()
    doc = {"zarr_format": 2, "shape": [4, 4], "chunks": [2, 2], "dtype": "<i4",
           "compressor": None, "fill_value": 0, "order": "C", "filters": None}
    (p / ".zarray").write_text(json.dumps(doc))
    want = np.arange(16, dtype="<i4").reshape(4, 4)
    for i in range(2):
        for j in range(2):
            (p / str(i)).mkdir(exist_ok=True)
            (p / str(i) / str(j)).write_bytes(want[2 * i:2 * i + 2, 2 * j:2 * j + 2].tobytes())
    z = cs.open_array(make(p), mode="r+")
    np.testing.assert_array_equal(z[:], want)
    z[0, 0] = 99
    assert not (p / "0.0").exists() and np.frombuffer((p / "0" / "0").read_bytes(), "<i4")[0] == 99
    # a plain store reads the document as zarr-python 2 does: "." keys, none stored
    assert cs.open_array(DirectoryStore(p), mode="r").nchunks_initialized == 0


def test_removing_a_tree_that_others_write_into_walks_it_again(tmp_path, monkeypatch):
    """rmdir of a node's directory while another writer touches it: a file gone meanwhile
    (another writer's temporary file renamed away) is no error, and a directory found not
    empty (a file written into it just after it was emptied) is walked again; both made
    del g[name] fail half done."""
    import errno
    import shutil

    from chunkstore.storage import local_files

    store = DirectoryStore(str(tmp_path / "d"))
    store["a/x"] = b"1"
    store["a/b/y"] = b"2"
    real, calls = shutil.rmtree, []

    def racing_rmtree(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            (tmp_path / "d" / "a" / "late").write_bytes(b"3")  # written meanwhile
            raise OSError(errno.ENOTEMPTY, "Directory not empty", path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(local_files.shutil, "rmtree", racing_rmtree)
    store.rmdir("a")
    assert len(calls) == 2 and list(store) == []
    monkeypatch.setattr(local_files.shutil, "rmtree", real)
    # a file another writer renames away during the walk is no error either
    store["a/x"] = b"1"
    real_unlink, seen = os.unlink, []

    def vanishing_unlink(p, *args, **kwargs):
        if not seen:
            seen.append(p)
            real_unlink(p, *args, **kwargs)
        return real_unlink(p, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", vanishing_unlink)
    store.rmdir("a")
    assert list(store) == []


@pytest.mark.parametrize("kind", ["directory", "nested", "fsspec"])
def test_a_node_named_like_a_temporary_file_is_listed_and_copied(tmp_path, kind):
    """A directory whose name has the form of the stores' temporary files (a node so named,
    as zarr-python 3 lists it) was left out of listdir, iteration and so of members, copies
    and consolidated metadata; only temporary files are left out."""
    import numpy as np
    import chunkstore as cs
    from chunkstore.storage import FSStore
    name = ".x." + "0" * 32 + ".partial"
    assert is_temp_name(name)
    path = str(tmp_path / "s.zarr")
    store = {"directory": DirectoryStore, "nested": NestedDirectoryStore,
             "fsspec": FSStore}[kind](path)
    root = cs.open_group(store, mode="w")
    root.array(name, np.arange(4), chunks=2)
    root.array("b", np.arange(4), chunks=2)
    temp = ".b." + "1" * 32 + ".partial"
    assert is_temp_name(temp)
    (tmp_path / "s.zarr" / temp).write_bytes(b"tmp")  # a temporary file: left out
    assert sorted(root.array_keys()) == sorted([name, "b"])
    assert store.listdir("") == sorted([".zgroup", name, "b"])
    assert f"{name}/0" in set(store.keys())
    dst = cs.group()
    cs.copy_all(root, dst)
    assert dst[name][:].tolist() == [0, 1, 2, 3]
