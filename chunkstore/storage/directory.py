"""Stores keeping one file per key in a local directory tree."""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .._core.batch import Files
from ._fileio import key_paths, read_files, read_files_into
from ._filewrite import write_files
from .base import (BaseStore, ValueVersion, ensure_bytes, normalize_prefix, read_spans,
                   validate_key)
from .local_files import (TEMP_SUFFIX, atomic_write, check_inside, fsync_dir, is_temp_name,
                          remove_tree, unlink_files,
                          reserve_tokens)
from ._fileio import open_ident, pread_ranges, read_ranges, read_ranges_at

__all__ = ["DirectoryStore", "NestedDirectoryStore", "is_temp_name"]

# errors meaning "this key is not a file in the store"
_MISSING = (FileNotFoundError, NotADirectoryError, IsADirectoryError)


def _open_fd(path: str) -> tuple[int, os.stat_result]:
    """A descriptor for reading path, and its stat. Opened without blocking (a FIFO where a
    file should be would block the open until some process writes to it; regular files are
    not affected); a directory raises IsADirectoryError, a FIFO or socket OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
                 | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO or socket)", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


#: how long after its last change (ctime) a file's identity is trusted to tell it from any
#: later version. A rewrite replaces the file by rename, and the next one may reuse the
#: freed inode number: with the same size and a timestamp of the same tick (a jiffy on Linux
#: before multigrain timestamps, a second on ext3 and some NFS servers), the identity would
#: match, and an index cached for the first version would be taken for the third's. Files
#: older than this (git's "racily clean" rule) are safe; younger ones are read afresh.
SETTLE_NS = 2_000_000_000


class _FileVersion(ValueVersion):
    """One version of a file: an open descriptor (a rewrite replaces the file by rename, so
    what this reads is the version it opened); version = its identity (device, inode, size,
    mtime and ctime in ns)."""

    @property
    def settled(self) -> bool:
        """Whether the file last changed SETTLE_NS or more ago (see SETTLE_NS)."""
        return time.time_ns() - int(self.version[4]) >= SETTLE_NS

    def __init__(self, fd: int, ident: tuple, path: bytes) -> None:
        self._fd: int | None = fd
        self.version: tuple = ident
        self._path = path

    @property
    def size(self) -> int:
        return int(self.version[2])

    def read(self, ranges: Iterable[tuple[int, int]]) -> list[bytes]:
        if self._fd is None:
            raise ValueError(f"read of a closed file version of {os.fsdecode(self._path)!r}")
        return pread_ranges(self._fd, list(ranges), self._path)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _read_file(path: str) -> bytes:
    """A whole file in 4 system calls (open, fstat, read, close); buffered open() takes ~7."""
    fd, st = _open_fd(path)
    try:
        size = st.st_size
        data = os.read(fd, size + 1)  # one byte more than expected detects growth
        if len(data) <= size:
            return data
        parts = [data]
        while True:
            more = os.read(fd, 1 << 20)
            if not more:
                return b"".join(parts)
            parts.append(more)
    finally:
        os.close(fd)


class DirectoryStore(BaseStore):
    """A store keeping each key as a file under a root directory.

    ``DirectoryStore(path, fsync=False, dimension_separator=None, mode="a")``

    - Key ``"a/b/.zarray"`` is the file ``<root>/a/b/.zarray``. Keys are validated before any
      I/O, so no key can reach outside the root (symbolic links placed in the tree by its
      owner are followed).
    - Writes are atomic: the value is written to a temporary file
      ``.<name>.<random hex>.partial`` in the target directory, then moved over the target
      with ``os.replace`` (``setitems``: exchanged with the old file, which is then
      unlinked; on ext4 that costs less than a rename over it, see the README). Readers see either the old or the new value, never a torn one,
      even if the writer is killed. With ``fsync=True`` the file and its directory are
      fsynced before the write returns (durable across power loss).
    - Temporary files are never listed, iterated, counted or sized; leftovers of a killed
      writer are ignored (and removed by ``rmdir``). Keys whose last segment looks like a
      temporary file name are refused.
    - Deleting the last key of a nested directory removes the empty parent directories up
      to (not including) the root.
    - A missing key raises ``KeyError``; every other ``OSError`` (permission denied, EIO...)
      propagates unchanged.
    - The root directory is created on the first write, never by opening: a missing root is
      an empty store (so the array/group layer reports "array not found" itself). Mode ``"r"``
      refuses writes; ``"r+"``, ``"w"``, ``"w-"`` and ``"x"`` behave like ``"a"`` at the store
      level (requiring, clearing or refusing existing nodes is done by the array and group
      layer, per path).
    - *dimension_separator* (``"."``, ``"/"`` or ``None``) is only recorded for the array
      layer; keys are used as given, unless *normalize_keys* is true: then every key is
      lower-cased before use (as zarr-python 2's ``normalize_keys=True``).
    """

    # Byte ranges of a file are read one pread each in one GIL-free call, so callers need not
    # merge neighbouring ranges (ShardedStoreView reads each inner chunk on its own).
    coalesce_ranges = False

    def __init__(
        self,
        path: str | os.PathLike,
        fsync: bool = False,
        dimension_separator: str | None = None,
        mode: str = "a",
        normalize_keys: bool = False,
    ):
        super().__init__(mode)
        self.normalize_keys = bool(normalize_keys)
        if dimension_separator not in (None, ".", "/"):
            raise ValueError(
                f"dimension_separator must be '.', '/' or None, not {dimension_separator!r}"
            )
        self.path = os.path.abspath(os.fspath(path))
        if "\0" in self.path:
            raise ValueError(f"embedded null byte in store path {self.path!r}")
        self.fsync = bool(fsync)
        self._dimension_separator = dimension_separator
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise NotADirectoryError(
                errno.ENOTDIR, f"{type(self).__name__} root is not a directory", self.path
            )

    @property
    def dimension_separator(self) -> str | None:
        """The chunk key separator new v2 arrays in this store get by default (None: ".")."""
        return self._dimension_separator

    # -- identity / pickling ---------------------------------------------------------------

    def _where(self) -> str:
        return self.path

    def _identity(self) -> tuple[Any, ...]:
        return (self._real_path(self.path),)  # (the directory through any link: base.py)

    def _nesting(self) -> tuple[Any, str]:
        """The directories of this machine, and this one's real path (a node's directory is
        the same reached from any directory above it: protocol.node_location)."""
        return (None, self._real_path(self.path))

    def _location_kind(self) -> type:
        return DirectoryStore  # (LocalStore, NestedDirectoryStore, TempStore: one directory)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "fsync": self.fsync,
            "dimension_separator": self._dimension_separator,
            "mode": "r" if self._mode == "r" else "a",
            "normalize_keys": self.normalize_keys,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.normalize_keys = state.get("normalize_keys", False)
        self.path = state["path"]
        self.fsync = state["fsync"]
        self._dimension_separator = state["dimension_separator"]
        self._mode = state["mode"]

    # -- paths -----------------------------------------------------------------------------

    def _norm(self, keys: list[str]) -> list[str]:
        return [k.lower() for k in keys] if self.normalize_keys else keys

    def _path(self, key: str) -> str:
        validate_key(key)
        if self.normalize_keys:
            key = key.lower()
        return os.path.join(self.path, *key.split("/")) if "/" in key else os.path.join(
            self.path, key
        )

    def _dir(self, prefix: str) -> str:
        prefix = normalize_prefix(prefix)
        if not prefix:
            return self.path
        if self.normalize_keys:
            prefix = prefix.lower()
        return os.path.join(self.path, *prefix.split("/"))

    def _check_inside(self, paths: Iterable[str], keys: Iterable[str]) -> None:
        check_inside(self.path, paths, keys)

    # -- reads -----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return _read_file(path)
        except _MISSING:
            raise KeyError(key) from None

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* whose files exist; absent keys are omitted.

        Every key is validated before any file is read (``ValueError`` for an invalid one); I/O
        errors other than a missing file propagate.
        """
        keys = list(keys)
        paths = key_paths(self.path, self._norm(keys))  # validate every key before any I/O
        # One batch of system calls without the GIL (see _fileio): threads scale on small chunks.
        return {k: v for k, v in zip(keys, read_files(paths)) if v is not None}

    def file_paths(self, keys: list[str]) -> list[bytes] | None:
        """The file (bytes path) of each key, every key validated, for readers that read the
        files themselves (a read's decode kernel reads and decodes a batch in one GIL-free
        call); None where keys are not plainly files (a subclass reading them its own way:
        getitems for chunks, get_partial or _path for the ranges of shards)."""
        if self._own_reads:
            return None
        return key_paths(self.path, self._norm(list(keys)))

    def chunk_files(self, keys: list[str], maxlen: int) -> Files | None:
        """The keys' files as chunkstore._core.batch.Files (files over maxlen bytes are left
        to getitems), or None (see file_paths)."""
        paths = self.file_paths(keys)
        return None if paths is None else Files(paths, maxlen)

    def read_into(self, keys: list[str], buffers: list) -> list[int]:
        """Read each key's file straight into buffers[k] (a writable buffer of any strides,
        filled in C order of its shape) when it holds exactly that many bytes. Per key: 0
        read, 1 absent, 2 not taken (another size, not a regular file: read it with
        getitems). Used for uncompressed chunks a read takes whole: no bytes object and no
        copy between the file and the output."""
        return read_files_into(key_paths(self.path, self._norm(list(keys))), list(buffers))

    #: Whether this class reads keys its own way (a subclass defining __getitem__,
    #: getitems, get_partial or _path; set once per class): then it offers no file paths and
    #: no versioned reads, which would bypass its reads (a sharded array reads its shards
    #: whole through it).
    _own_reads: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._own_reads = cls._own_reads or any(
            n in vars(cls) for n in ("__getitem__", "getitems", "get_partial", "_path"))

    @property
    def open_version(self) -> Any:
        """``open_version(key)``: the key's file as it is now, held open (a ValueVersion,
        versioned by the file's identity); KeyError if absent. None for a subclass with
        reads of its own."""
        return None if self._own_reads else self._open_version

    @property
    def read_if_version(self) -> Any:
        """``read_if_version(key, version, ranges)``: the ranges of the key's file if it is
        still ``version`` (an identity from open_version), else None; KeyError if absent.
        One GIL-free call (open, fstat, reads, close): a read through a cached shard index
        costs what it did without the check. None for a subclass with reads of its own."""
        return None if self._own_reads else self._read_if_version

    def _open_version(self, key: str) -> ValueVersion:
        path = os.fsencode(self._path(key))
        got = open_ident(path)
        if got is None:
            raise KeyError(key)
        return _FileVersion(got[0], got[1], path)

    def _read_if_version(self, key: str, version: Any,
                         ranges: Iterable[tuple[int, int]]) -> list[bytes] | None:
        parts, ident = read_ranges_at(self._path(key), list(ranges), version)
        if ident is None:
            raise KeyError(key)
        return parts

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """Read byte ranges of one file.

        *ranges* is a sequence of ``(offset, length)``; ``length=None`` reads to the end and a
        negative offset counts from the end. Ranges past the end are truncated. Raises ``KeyError``
        if the key is absent and ``ValueError`` for a negative length.
        """
        path = self._path(key)
        ranges = list(ranges)
        if all(off >= 0 and n is not None and n >= 0 for off, n in ranges):
            # Plain ranges (a sharded read's chunks): one GIL-free call.
            out = read_ranges(path, ranges)
            if out is None:
                raise KeyError(key)
            return out
        try:
            fd, st = _open_fd(path)
        except _MISSING:
            raise KeyError(key) from None
        with os.fdopen(fd, "rb") as f:
            return read_spans(f, st.st_size, ranges)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        path = self._path(key)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return stat.S_ISREG(st.st_mode)

    def stray_temporaries(self, prefix: str = "") -> list[str]:
        """Paths of the temporary files of interrupted writes under ``prefix``: reads and
        listings ignore them; ``chunkstore verify`` reports them."""
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self._dir(prefix)):
            out.extend(os.path.join(dirpath, n) for n in filenames if is_temp_name(n))
        return sorted(out)

    def _walk(self, top: str, rel: str) -> Iterator[str]:
        try:
            it = os.scandir(top)
        except (FileNotFoundError, NotADirectoryError):
            return
        with it:
            entries = list(it)
        for e in entries:
            name = e.name
            key = f"{rel}/{name}" if rel else name
            try:
                is_dir = e.is_dir(follow_symlinks=False)
                if not is_dir and e.is_symlink() and e.is_dir():
                    continue  # a symlink to a directory: not followed (no cycles), not a key
            except FileNotFoundError:  # pragma: no cover - vanished concurrently
                continue
            if is_temp_name(name) and not is_dir:
                # (temporary files only: a node so named, made by another library, is a
                # directory, and was left out of every listing and copy)
                continue
            if is_dir:
                yield from self._walk(e.path, key)
            else:
                try:
                    validate_key(key)
                except ValueError:
                    continue  # not addressable as a key (e.g. backslash in a file name)
                yield key

    def __iter__(self) -> Iterator[str]:
        return self._walk(self.path, "")

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """Iterate over every key at or under *prefix* (recursively, by walking the directory
        tree).
        """
        prefix = normalize_prefix(prefix)
        if self.normalize_keys:
            prefix = prefix.lower()
        if not prefix:
            yield from self._walk(self.path, "")
            return
        d = self._dir(prefix)
        if os.path.isfile(d):
            yield prefix
            return
        yield from self._walk(d, prefix)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the entries of the directory *prefix* (temporary files left out;
        directories of such names are nodes, listed).

        Returns ``[]`` where the directory does not exist.
        """
        d = self._dir(prefix)
        try:
            names = os.listdir(d)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(n for n in names
                      if not is_temp_name(n) or os.path.isdir(os.path.join(d, n)))

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the file *prefix*, or of the files under the directory *prefix*.

        Returns 0 where nothing exists at *prefix*.
        """
        d = self._dir(prefix)
        try:
            st = os.stat(d)
        except (FileNotFoundError, NotADirectoryError):
            return 0
        if stat.S_ISREG(st.st_mode):
            return st.st_size
        total = 0
        for dirpath, dirnames, filenames in os.walk(d):
            for n in filenames:
                if is_temp_name(n):
                    continue
                try:
                    total += os.stat(os.path.join(dirpath, n)).st_size
                except FileNotFoundError:  # pragma: no cover - deleted concurrently
                    pass
        return total

    # -- writes ----------------------------------------------------------------------------

    def __setitem__(self, key: str, value: Any) -> None:
        path = self._path(key)
        self._check_writable(key)
        name = os.path.basename(path)
        if is_temp_name(name):
            raise ValueError(
                f"invalid store key {key!r}: the name is reserved for temporary files"
            )
        if "/" in key:
            self._check_inside((path,), (key,))
        self._write(path, ensure_bytes(value))

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Write every ``key: value`` of *mapping* to its file, creating directories as needed.

        Keys and values are all checked before any file is written. Raises
        :class:`~chunkstore.errors.ReadOnlyError` on a read-only store and ``ValueError`` for an
        invalid key (a name reserved for temporary files included).
        """
        self._check_writable()
        keys = list(mapping)
        # validate every key (and value) before any I/O
        paths = key_paths(self.path, self._norm(keys))
        for k in keys:
            if k.endswith(TEMP_SUFFIX) and is_temp_name(k.rsplit("/", 1)[-1]):
                raise ValueError(
                    f"invalid store key {k!r}: the name is reserved for temporary files"
                )
        self._check_inside(map(os.fsdecode, paths), keys)
        values = [v if type(v) is bytes else ensure_bytes(v) for v in mapping.values()]
        # One batch of system calls without the GIL (see _filewrite); an item the batch cannot
        # write (a missing directory, a temp-name clash) is retried by _write, which creates
        # directories and raises the proper error, and the batch goes on after it.
        pos, dirs = 0, set[str]()
        while pos < len(paths):
            prefix, first = reserve_tokens(len(paths) - pos)
            failed, err = write_files(paths[pos:], values[pos:], prefix, first, self.fsync)
            if self.fsync:  # the directories of the files this call wrote
                end = len(paths) if failed < 0 else pos + failed
                dirs.update(os.path.dirname(p) for p in paths[pos:end])
            if failed < 0:
                break
            k = pos + failed
            if err not in (errno.ENOENT, errno.EEXIST):
                raise OSError(err, os.strerror(err), os.fsdecode(paths[k]))
            self._write(os.fsdecode(paths[k]), values[k])
            pos = k + 1
        for d in dirs:
            fsync_dir(os.fsdecode(d))

    def _write(self, path: str, data: bytes) -> None:
        atomic_write(path, data, fsync=self.fsync)

    def __delitem__(self, key: str) -> None:
        path = self._path(key)
        self._check_writable(key)
        if "/" in key:
            self._check_inside((path,), (key,))
        try:
            os.unlink(path)
        except _MISSING:
            raise KeyError(key) from None
        except PermissionError:
            # unlink of a directory gives EPERM/EISDIR depending on the platform
            if os.path.isdir(path):
                raise KeyError(key) from None
            raise
        self._prune(os.path.dirname(path))

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete the files of *keys*, then the directories that emptied; absent keys are ignored.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        keys = self._norm(list(keys))
        paths = [os.fsdecode(p) for p in key_paths(self.path, keys)]
        self._check_inside(paths, keys)
        dirs = unlink_files(paths, _MISSING)
        # deepest first so that parents emptied by their children are removed too
        for d in sorted(dirs, key=len, reverse=True):
            self._prune(d)

    def _prune(self, dirname: str) -> None:
        """Remove empty directories from *dirname* up to (not including) the root."""
        root = self.path
        d = dirname
        while len(d) > len(root) and d.startswith(root + os.sep):
            try:
                os.rmdir(d)
            except OSError:
                return  # not empty (or already gone / concurrently refilled)
            d = os.path.dirname(d)
        if self.fsync:
            fsync_dir(d)

    def rmdir(self, prefix: str = "") -> None:
        """Delete the directory *prefix* and everything under it (all contents if *prefix* is
        empty).

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        prefix = normalize_prefix(prefix)
        d = self._dir(prefix)
        if not prefix:
            remove_tree(d, keep_root=True)
            return
        self._check_inside((d,), (prefix,))
        if os.path.isdir(d) and not os.path.islink(d):
            remove_tree(d, keep_root=False)
            self._prune(os.path.dirname(d))

    def clear(self) -> None:
        """Delete every key (``rmdir("")``); the root directory itself is kept."""
        self.rmdir("")


class NestedDirectoryStore(DirectoryStore):
    """A :class:`DirectoryStore` for arrays whose chunk keys use ``"/"`` as the dimension
    separator (``"0/1/2"``), stored as nested directories. It only records
    ``dimension_separator="/"``: in Zarr v2 the array layer already builds such keys."""

    def __init__(
        self,
        path: str | os.PathLike,
        fsync: bool = False,
        dimension_separator: str | None = "/",
        mode: str = "a",
        normalize_keys: bool = False,
    ):
        if dimension_separator not in (None, "/"):
            raise ValueError(
                f"NestedDirectoryStore only supports dimension_separator='/', "
                f"not {dimension_separator!r}"
            )
        super().__init__(path, fsync=fsync, dimension_separator="/", mode=mode,
                         normalize_keys=normalize_keys)

    def listdir(self, prefix: str = "") -> list[str]:
        """As DirectoryStore.listdir, except in an array's directory (one holding .zarray):
        there the nested chunk files are listed by their keys below it ("0/1"), as
        zarr-python 2.18 lists them: names the store can get, and code counting chunk names
        finds them."""
        children = super().listdir(prefix)
        if ".zarray" not in children:
            return children
        root = self._dir(prefix)
        out = []
        for name in children:
            top = os.path.join(root, name)
            if not (name.isdigit() and os.path.isdir(top)):
                out.append(name)
                continue
            for dirpath, _, files in os.walk(top):
                rel = os.path.relpath(dirpath, root).split(os.sep)
                out.extend("/".join(rel + [f]) for f in files if not is_temp_name(f))
        return sorted(out)
