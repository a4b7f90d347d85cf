"""The batch file I/O behind DirectoryStore: reads, atomic writes and key paths."""

import errno
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.storage._fileio import key_paths, read_files
from chunkstore.storage._filewrite import write_files
from chunkstore.storage.base import validate_key


def test_reads_files_and_reports_missing(tmp_path):
    (tmp_path / "a").write_bytes(b"alpha")
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "big").write_bytes(bytes(range(256)) * 4096)
    (tmp_path / "dir").mkdir()
    paths = [str(tmp_path / n) for n in ("a", "missing", "empty", "dir", "a/under-a-file", "big")]
    got = read_files(paths)
    assert got == [b"alpha", None, b"", None, None, bytes(range(256)) * 4096]


def test_real_io_error_propagates_naming_the_path(tmp_path):
    # /proc/self/mem reads at offset 0 fail with EIO: a real kernel error, not a missing file.
    link = tmp_path / "eio"
    os.symlink("/proc/self/mem", link)
    with pytest.raises(OSError) as ei:
        read_files([str(tmp_path / "missing"), str(link)])
    assert ei.value.errno == errno.EIO and str(link) in str(ei.value)


def test_empty_batch():
    assert read_files([]) == []


# ------------------------------------------------------------------ reads in groups, /proc

def test_more_files_than_one_open_group(tmp_path):
    # read_files opens files in groups (bounding its descriptors); results keep their order.
    names = [f"f{i}" for i in range(200)]
    before = set(os.listdir("/proc/self/fd"))  # earlier tests' clients may hold sockets
    for i, n in enumerate(names):
        if i % 7:
            (tmp_path / n).write_bytes(str(i).encode() * (i % 50))
    got = read_files([str(tmp_path / n) for n in names])
    assert got == [None if i % 7 == 0 else str(i).encode() * (i % 50) for i in range(200)]
    # no descriptor is left open
    assert len(set(os.listdir("/proc/self/fd")) - before) == 0


def test_file_longer_than_fstat_says_is_read_whole():
    # /proc files report size 0 but have content: the reader sees the extra byte and
    # re-reads the file whole instead of returning a truncated value.
    got = read_files([b"/proc/self/status"])[0]
    assert got.startswith(b"Name:") and len(got) > 100


# ------------------------------------------------------------------ key paths

KEY_CHARS = st.sampled_from(list("ab0./\\\x00é-_"))


@given(st.lists(st.text(KEY_CHARS, max_size=8), max_size=20))
@settings(max_examples=300, deadline=None)
def test_key_paths_validate_like_validate_key(keys):
    root = "/some/root"
    for k in keys:
        try:
            validate_key(k)
            ok = True
        except ValueError:
            ok = False
        if ok:
            assert key_paths(root, [k]) == [os.fsencode(os.path.join(root, *k.split("/")))]
        else:
            with pytest.raises(ValueError, match="invalid store key"):
                key_paths(root, [k])


def test_key_paths_batch_and_types():
    assert key_paths("/r/", ["a/b", "0.0"]) == [b"/r/a/b", b"/r/0.0"]
    with pytest.raises(ValueError, match="'ok/../x'"):
        key_paths("/r", ["fine", "ok/../x"])
    with pytest.raises(TypeError, match="must be str"):
        key_paths("/r", [b"bytes"])


# ------------------------------------------------------------------ batch writes

TOKEN = b"0123456789abcdef"


def temp_files(root):
    return [n for _, _, fs in os.walk(root) for n in fs if n.endswith(".partial")]


def test_write_files_replaces_atomically_and_leaves_no_temp(tmp_path):
    paths = [os.fsencode(tmp_path / f"k{i}") for i in range(70)]
    (tmp_path / "k3").write_bytes(b"old")
    datas = [bytes([i]) * (i * 1000) for i in range(70)]
    assert write_files(paths, datas, TOKEN, 1, False) == (-1, 0)
    assert read_files(paths) == datas
    assert temp_files(tmp_path) == []
    assert write_files(paths[:2], [b"x", b"y"], TOKEN, 1000, True) == (-1, 0)  # with fsync
    assert read_files(paths[:2]) == [b"x", b"y"]


def test_write_files_stops_at_a_failure_and_cleans_up(tmp_path):
    (tmp_path / "isdir").mkdir()
    (tmp_path / "isdir" / "inner").write_bytes(b"keep")
    paths = [os.fsencode(tmp_path / n) for n in ("a", "missing/b", "c", "isdir", "d")]
    datas = [b"1", b"2", b"3", b"4", b"5"]
    k, err = write_files(paths, datas, TOKEN, 1, False)
    assert (k, err) == (1, errno.ENOENT)          # the missing directory: nothing after it
    assert (tmp_path / "a").read_bytes() == b"1" and not (tmp_path / "c").exists()
    k, err = write_files(paths[2:], datas[2:], TOKEN, 10, False)
    assert (k, err) == (1, errno.EISDIR)          # rename over a directory fails
    assert (tmp_path / "c").read_bytes() == b"3" and not (tmp_path / "d").exists()
    assert (tmp_path / "isdir" / "inner").read_bytes() == b"keep"
    assert temp_files(tmp_path) == []


def test_write_files_temp_name_clash_is_reported(tmp_path):
    # The temp name is .<name>.<prefix><counter as 16 hex digits>.partial; O_EXCL refuses a
    # name that exists, and the caller retries that item under a fresh token.
    # (Only an overwrite uses a temp name; a new file is written unnamed and linked in.)
    clash = tmp_path / f".x.{TOKEN.decode()}{5:016x}.partial"
    clash.write_bytes(b"someone else's")
    (tmp_path / "x").write_bytes(b"old")
    assert write_files([os.fsencode(tmp_path / "x")], [b"v"], TOKEN, 5, False) == (
        0, errno.EEXIST)
    assert clash.read_bytes() == b"someone else's" and (tmp_path / "x").read_bytes() == b"old"


@pytest.mark.parametrize("sync", [False, True])
def test_write_files_new_files_leave_no_temp_names(tmp_path, sync):
    """New files are linked in whole (O_TMPFILE + linkat where the filesystem has them):
    nothing but the targets appears in the directory, with the umask's permissions, and a
    mix of new and existing targets is written in order."""
    (tmp_path / "b").write_bytes(b"old")
    paths = [os.fsencode(tmp_path / n) for n in ("a", "b", "c")]
    assert write_files(paths, [b"1" * 5000, b"2", b""], TOKEN, 0, sync) == (-1, 0)
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "c"]
    assert [(tmp_path / n).read_bytes() for n in "abc"] == [b"1" * 5000, b"2", b""]
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o666 & ~umask
    # a missing directory fails that item with ENOENT (the store then makes it and retries)
    missing = os.fsencode(tmp_path / "no" / "d")
    assert write_files([paths[0], missing], [b"x", b"y"], TOKEN, 9, sync) == (1, errno.ENOENT)
    assert (tmp_path / "a").read_bytes() == b"x" and sorted(os.listdir(tmp_path)) == [
        "a", "b", "c"]


_LINK_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* linkat from /proc/self/fd/N fails with errno $SHIM_LINK_ERRNO (EINTR: every other
   call); with $SHIM_RACE, another writer creates the target just before the link. */
static int calls;
int linkat(int od, const char* op, int nd, const char* np, int flags) {
    static int (*real)(int, const char*, int, const char*, int);
    const char* e = getenv("SHIM_LINK_ERRNO");
    if (!real) real = (int (*)(int, const char*, int, const char*, int))dlsym(RTLD_NEXT, "linkat");
    if (strncmp(op, "/proc/self/fd/", 14) == 0) {
        if (e && *e && (atoi(e) != EINTR || calls++ % 2 == 0)) { errno = atoi(e); return -1; }
        if (getenv("SHIM_RACE") && !strstr(np, ".partial")) {
            int fd = open(np, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (fd >= 0) { if (write(fd, "theirs", 6) != 6) {} close(fd); }
        }
    }
    return real(od, op, nd, np, flags);
}
"""

_LINK_CHILD = r"""
import os, sys
from chunkstore.storage._filewrite import write_files
d, token, clash = sys.argv[1], sys.argv[2].encode(), sys.argv[3] == "1"
if clash:   # the temp name the fallback would take for "x": refused by O_EXCL
    open(os.path.join(d, ".x." + token.decode() + "%016x.partial" % 7), "wb").close()
paths = [os.fsencode(os.path.join(d, n)) for n in ("x", "y")]
print(write_files(paths, [b"mine-x", b"mine-y"], token, 7, False))
print(open(paths[0], "rb").read(), open(paths[1], "rb").read())
"""


@pytest.fixture(scope="module")
def link_shim(tmp_path_factory):
    import shutil
    import subprocess
    import sys
    cc = shutil.which("cc") or shutil.which("gcc")
    if not sys.platform.startswith("linux") or cc is None:
        pytest.skip("needs Linux and a C compiler (LD_PRELOAD shim)")
    d = tmp_path_factory.mktemp("shim")
    (d / "shim.c").write_text(_LINK_SHIM)
    r = subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "shim.so"), str(d / "shim.c"),
                        "-ldl"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot build the shim: {r.stderr}")
    return str(d / "shim.so")


def _run_link_child(shim, d, env_extra, clash=False):
    import subprocess
    import sys

    from ._subproc import env
    e = env()
    e.update(env_extra, LD_PRELOAD=shim)
    r = subprocess.run([sys.executable, "-c", _LINK_CHILD, str(d), TOKEN.decode(),
                        "1" if clash else "0"], env=e, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


@pytest.mark.parametrize("err", ["EACCES", "EXDEV", "ENOSYS", "ELOOP", "EPERM", "ENOENT"])
def test_write_files_new_file_falls_back_when_the_link_is_refused(tmp_path, link_shim, err):
    """A link from /proc/self/fd refused for any reason (a security module or seccomp
    filter, /proc replaced, the directory removed meanwhile) is no failure of the write:
    the named temp file takes over (and reports the error where there really is one)."""
    out = _run_link_child(link_shim, tmp_path, {"SHIM_LINK_ERRNO": str(getattr(errno, err))})
    assert out == ["(-1, 0)", "b'mine-x' b'mine-y'"]
    assert sorted(os.listdir(tmp_path)) == ["x", "y"]


def test_write_files_link_interrupted_is_retried(tmp_path, link_shim):
    # EINTR (a signal during a link on FUSE) is retried, as every other call here: the
    # unnamed file is still linked (the clash at the temp name shows no fallback was taken)
    out = _run_link_child(link_shim, tmp_path, {"SHIM_LINK_ERRNO": str(errno.EINTR)},
                          clash=True)
    assert out == ["(-1, 0)", "b'mine-x' b'mine-y'"]


def test_write_files_new_file_created_meanwhile_is_replaced(tmp_path, link_shim):
    # another writer creates the target between the lstat and the link: ours replaces it
    # (last writer wins, as an overwrite), and no temp name is left
    out = _run_link_child(link_shim, tmp_path, {"SHIM_RACE": "1"})
    assert out == ["(-1, 0)", "b'mine-x' b'mine-y'"]
    assert sorted(os.listdir(tmp_path)) == ["x", "y"]


def test_write_files_argument_checks(tmp_path):
    with pytest.raises(ValueError, match="differ in length"):
        write_files([b"/a"], [], TOKEN, 0, False)
    with pytest.raises(ValueError, match="16 bytes"):
        write_files([], [], b"short", 0, False)
    with pytest.raises(TypeError, match="bytes"):
        write_files([str(tmp_path / "a")], [b"1"], TOKEN, 0, False)


def test_paths_with_nul_are_refused(tmp_path):
    with pytest.raises(ValueError, match="null byte"):
        read_files([os.fsencode(tmp_path) + b"/a\0b"])
    with pytest.raises(ValueError, match="null byte"):
        key_paths(str(tmp_path) + "\0x", ["k"])
    with pytest.raises(ValueError, match="null byte"):
        write_files([os.fsencode(tmp_path) + b"/a\0b"], [b"1"], TOKEN, 0, False)
    assert os.listdir(tmp_path) == []


def test_a_name_too_long_for_a_temp_name_fails_alike_new_or_not(tmp_path):
    """A key whose temp name would pass 255 bytes cannot be overwritten (nor written by
    __setitem__), so it is not created either: the same ENAMETOOLONG on every path."""
    name = "k" * 230
    target = os.fsencode(tmp_path / name)
    assert write_files([target], [b"1"], TOKEN, 0, False) == (0, errno.ENAMETOOLONG)
    assert os.listdir(tmp_path) == []
    short = os.fsencode(tmp_path / ("k" * 213))  # 213 + 42 = 255: fits
    assert write_files([short], [b"1"], TOKEN, 0, False) == (-1, 0)
    assert write_files([short], [b"2"], TOKEN, 1, False) == (-1, 0)
    assert open(short, "rb").read() == b"2"
