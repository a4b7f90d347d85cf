"""The batch file reader behind DirectoryStore.getitems."""

import errno
import os

import pytest

from chunkstore.storage._fileio import read_files


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
