"""Synchronizers: locks that make concurrent writes to one array safe.

A write holds, for its whole read-modify-write, the array's lock in shared mode plus the
exclusive lock of every chunk it touches, taken in sorted key order so two writers can never
deadlock. A write touching more than `max_chunk_locks` chunks takes the array's lock in
exclusive mode instead (bounding the number of lock files held at once). resize, append and
metadata updates take the array's lock exclusively. So two writers of overlapping regions are
serialized (each region ends up wholly one writer's value), and updates to disjoint elements
of one chunk are never lost.

ThreadSynchronizer: locks for threads of one process.
ProcessSynchronizer(path): the same, plus POSIX file locks (fasteners) in `path`, for many
processes, on one machine or on a shared filesystem with working POSIX locks (see README).

POSIX record locks belong to a process, and closing any descriptor of a file drops all the
process's locks on it. So each lock file is used by at most one thread of a process at a time
(a thread lock is always taken first), and the array's shared lock is reference-counted
in-process: the first reader takes the file lock and the last one releases it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from urllib.parse import quote

import fasteners

__all__ = ["ThreadSynchronizer", "ProcessSynchronizer"]


class _Mutex:
    """An exclusive lock: a thread lock, plus a file lock when path is given."""

    def __init__(self, path=None):
        self._thread = threading.Lock()
        self._file = fasteners.InterProcessLock(path) if path else None

    def acquire(self):
        self._thread.acquire()
        if self._file is not None:
            try:
                self._file.acquire()
            except BaseException:
                self._thread.release()
                raise
        return True

    def release(self):
        try:
            if self._file is not None:
                self._file.release()
        finally:
            self._thread.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


class _SharedExclusive:
    """A reader-writer lock for threads, mirrored onto one file lock for processes."""

    def __init__(self, path=None):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._file = fasteners.InterProcessReaderWriterLock(path) if path else None

    def acquire_shared(self):
        with self._cond:
            while self._writer:
                self._cond.wait()
            if self._readers == 0 and self._file is not None:
                self._file.acquire_read_lock()
            self._readers += 1

    def release_shared(self):
        with self._cond:
            self._readers -= 1
            if self._readers == 0:
                if self._file is not None:
                    self._file.release_read_lock()
                self._cond.notify_all()

    def acquire_exclusive(self):
        with self._cond:
            while self._writer or self._readers:
                self._cond.wait()
            self._writer = True
        if self._file is not None:
            try:
                self._file.acquire_write_lock()
            except BaseException:
                with self._cond:
                    self._writer = False
                    self._cond.notify_all()
                raise

    def release_exclusive(self):
        try:
            if self._file is not None:
                self._file.release_write_lock()
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()

    @contextlib.contextmanager
    def shared(self):
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    @contextlib.contextmanager
    def exclusive(self):
        self.acquire_exclusive()
        try:
            yield
        finally:
            self.release_exclusive()


# Lock objects of ProcessSynchronizers, per lock file, shared by every instance in this process.
# Unpickling makes a new instance per task (dask, multiprocessing); if each had its own thread
# locks, two threads of one process could both "hold" a file lock (POSIX locks belong to the
# process) and updates would be lost. Reset after fork: locks held at fork time by the
# parent's other threads would otherwise stay locked forever in the child.
_registry_guard = threading.Lock()
_registry: dict = {}


def _reset_registry():
    global _registry_guard, _registry
    _registry_guard = threading.Lock()
    _registry = {}


os.register_at_fork(after_in_child=_reset_registry)


class _Base:
    max_chunk_locks = 256

    def __init__(self, max_chunk_locks=None):
        if max_chunk_locks is not None:
            if max_chunk_locks < 1:
                raise ValueError("max_chunk_locks must be at least 1")
            self.max_chunk_locks = max_chunk_locks
        self._guard = threading.Lock()
        self._mutexes = {}
        self._rw = {}

    def _lock_path(self, name):
        return None

    def _lock(self, table, name, make):
        path = self._lock_path(name)
        if path is None:  # thread locks: this instance's own table
            with self._guard:
                lock = table.get(name)
                if lock is None:
                    lock = table[name] = make(None)
                return lock
        with _registry_guard:  # file locks: one object per lock file in the process
            lock = _registry.get(path)
            if lock is None:
                lock = _registry[path] = make(path)
            return lock

    def __getitem__(self, key):
        """The exclusive lock of key (zarr-python's synchronizer interface)."""
        return self._lock(self._mutexes, key, _Mutex)

    def _array_lock(self, array_path):
        return self._lock(self._rw, (array_path + "/" if array_path else "") + ".array-rw",
                          _SharedExclusive)

    @contextlib.contextmanager
    def write_locks(self, array_path, keys):
        """Hold what a write of the given chunk keys of the array needs."""
        keys = sorted(set(keys))
        rw = self._array_lock(array_path)
        if len(keys) > self.max_chunk_locks:
            with rw.exclusive():
                yield
            return
        with rw.shared(), contextlib.ExitStack() as stack:
            for k in keys:
                stack.enter_context(self[k])
            yield

    def exclusive(self, array_path):
        """The array's lock in exclusive mode: no other write of it runs meanwhile."""
        return self._array_lock(array_path).exclusive()


class ThreadSynchronizer(_Base):
    """Locks for the threads of one process. Pickles to a fresh, independent synchronizer
    (thread locks cannot cross processes: use ProcessSynchronizer there)."""

    def __getstate__(self):
        return {"max_chunk_locks": self.max_chunk_locks}

    def __setstate__(self, state):
        self.__init__(**state)

    def __repr__(self):
        return "ThreadSynchronizer()"


class ProcessSynchronizer(_Base):
    """Locks shared by processes through lock files in `path` (created if absent).

    One lock file per chunk key and per array, reused across writes. The directory must be
    on a filesystem where fcntl/POSIX locks work across all the processes involved (see the
    README). It must not be inside the store (lock files would look like data):
    passing the store's own directory raises ValueError when the array is opened.
    `clear()` removes the lock files when no writer is running.
    """

    def __init__(self, path, max_chunk_locks=None):
        super().__init__(max_chunk_locks)
        self.path = os.path.abspath(os.fspath(path))
        os.makedirs(self.path, exist_ok=True)

    def _lock_path(self, name):
        # One flat directory; quote() makes every key a single safe file name.
        return os.path.join(self.path, quote(name, safe="") + ".lock")

    def clear(self):
        """Remove all lock files. Only while no process is using this synchronizer."""
        with _registry_guard:
            for p in [p for p in _registry if os.path.dirname(p) == self.path]:
                del _registry[p]
        for name in os.listdir(self.path):
            p = os.path.join(self.path, name)
            if name.endswith(".lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(p)
            elif os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)

    def __getstate__(self):
        return {"path": self.path, "max_chunk_locks": self.max_chunk_locks}

    def __setstate__(self, state):
        self.__init__(**state)

    def __repr__(self):
        return f"ProcessSynchronizer({self.path!r})"


def check_synchronizer_path(synchronizer, store):
    """ValueError if a ProcessSynchronizer's lock directory is the store or inside it."""
    spath = getattr(synchronizer, "path", None)
    root = getattr(store, "path", None)
    if not spath or not isinstance(root, str) or "://" in root:
        return
    root = os.path.abspath(root)
    if os.path.commonpath([spath, root]) == root:
        raise ValueError(f"the synchronizer's lock directory {spath!r} is inside the store "
                         f"{root!r}; put lock files outside the store")
