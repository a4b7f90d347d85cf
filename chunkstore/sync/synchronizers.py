"""Synchronizers: locks that make concurrent writes to one array safe.

The protocol is in chunkstore.sync.locking: a write holds, for all of it, the chunks it touches,
as a handful of byte ranges of one lock file however many chunks it spans; a large write
that covers some chunks only in part holds instead its box of elements and its whole chunks,
and takes the partial chunks only around their read-modify-write. All ranges are taken in
ascending order so two writers can never deadlock. Writes of disjoint regions run in
parallel, even when they share chunks (only those chunks' read-modify-writes take turns);
two writers of overlapping regions are serialized (each region ends up wholly one writer's
value), and updates to disjoint elements of one chunk are never lost. resize, append and
metadata updates lock the whole lock space, so they exclude every write.

ThreadSynchronizer: the in-process lock table alone, for threads of one process.
ProcessSynchronizer(path): the same table plus POSIX byte-range locks (fcntl) on one lock
file per array in `path`, for many processes, on one machine or on a shared filesystem with
working byte-range locks (see README). Zarr-style single-key locks (`sync[key]`: attribute
updates, node creation, shards) stay one fasteners lock file per key: whole-file locks on
few files are what fasteners does. The region file cannot go through fasteners: it has no
byte-range API, and it closes its descriptor on release, which would drop every other lock
this process holds on the file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import weakref
from urllib.parse import quote

import fasteners

from chunkstore.errors import ReadOnlyError
from chunkstore.storage import protocol
from chunkstore.sync.locking import (F_BASE, FULL, P_BASE, RegionLock, box_ranges, chunk_ranges,
                                     open_region_file)

__all__ = ["ThreadSynchronizer", "ProcessSynchronizer", "handle_locks", "layered_locks"]


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


# Lock objects of ProcessSynchronizers, per lock file, shared by every instance in this
# process. Unpickling makes a new instance per task (dask, multiprocessing); if each had its
# own lock table, two threads of one process could both "hold" a file lock (POSIX locks
# belong to the process) and updates would be lost. Region files stay open for the life of
# the process (closing one would drop all of this process's locks on it). Reset after fork:
# the child holds none of the parent's fcntl locks, and in-process locks held at fork time by
# the parent's other threads would otherwise stay held forever in the child.
_registry_guard = threading.Lock()
_registry: dict = {}
_thread_syncs: "weakref.WeakSet" = weakref.WeakSet()


def _reset_after_fork():
    global _registry_guard, _registry, _handle_locks_guard
    _handle_locks_guard = threading.Lock()
    for lock in _registry.values():
        fd = getattr(lock, "_fd", None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # the child's own copy: it holds no locks on it
    _registry_guard = threading.Lock()
    _registry = {}
    for s in list(_thread_syncs):
        s._reset()


os.register_at_fork(after_in_child=_reset_after_fork)


class _Base:
    # Most byte ranges one write locks; a write needing more merges its closest ranges
    # (locking more than it touches, never less). The name is kept from the per-chunk
    # protocol, where it bounded the number of chunk lock files held.
    max_chunk_locks = 256

    def __init__(self, max_chunk_locks=None):
        if max_chunk_locks is not None:
            if max_chunk_locks < 1:
                raise ValueError("max_chunk_locks must be at least 1")
            self.max_chunk_locks = max_chunk_locks
        self._reset()

    def _reset(self):
        self._guard = threading.Lock()
        self._mutexes = {}
        self._regions = {}
        self._generations = {}

    def _lock_path(self, name):
        return None

    def __getitem__(self, key):
        """The exclusive lock of key (zarr-python's synchronizer interface)."""
        path = self._lock_path(key)
        if path is None:  # thread locks: this instance's own table
            with self._guard:
                lock = self._mutexes.get(key)
                if lock is None:
                    lock = self._mutexes[key] = _Mutex(None)
                return lock
        with _registry_guard:  # file locks: one object per lock file in the process
            lock = _registry.get(path)
            if lock is None:
                lock = _registry[path] = _Mutex(path)
            return lock

    def _region_lock(self, array_path):
        lock = self._regions.get(array_path)   # (made once: every write asks)
        if lock is not None:
            return lock
        with self._guard:
            lock = self._regions.get(array_path)
            if lock is None:
                lock = self._regions[array_path] = RegionLock()
            return lock

    def hold(self, array_path, ranges):
        """Hold ranges (sorted, disjoint, inclusive) of the array's lock space (a context
        manager)."""
        return _Held(self, array_path, ranges)

    def chunk_ranges(self, coords, grid):
        """What a write holds, for all of it, to own the chunks at coords ((n, ndim) grid
        coordinates; grid: the chunk grid's shape): both chunk spaces."""
        # (the two spaces lay chunks out alike: work the ranges out once, then place them)
        rel = chunk_ranges(coords, grid, self.max_chunk_locks, 0)
        return ([(F_BASE + a, F_BASE + b) for a, b in rel]
                + [(P_BASE + a, P_BASE + b) for a, b in rel])

    def split_locks(self, array_path, lo, hi, shape, whole_coords, partial_coords, grid):
        """The locks of a split write: (what to hold for all of it: its box of elements
        (inclusive bounds) and the chunks it covers whole; a function giving, for some of
        its partial chunks' coordinates, what to hold around their read-modify-write).

        The partial chunks are reserved in the in-process table for all of the write (so no
        thread waits in-process while holding kernel locks) and taken from the kernel only
        around their read-modify-write."""
        m = self.max_chunk_locks
        whole = box_ranges(lo, hi, shape, m) + chunk_ranges(whole_coords, grid, m, F_BASE)
        partial = chunk_ranges(partial_coords, grid, m, P_BASE)
        taken: list = []  # (the lock, looked up as it is taken: see _Held)

        @contextlib.contextmanager
        def held():
            lock = self._region_lock(array_path)
            lock.acquire(whole + partial, whole)
            taken.append(lock)
            try:
                yield
            finally:
                lock.release(whole + partial, whole)

        @contextlib.contextmanager
        def window(coords):
            some = chunk_ranges(coords, grid, len(coords) + 1, P_BASE)
            mine = [r for r in partial if any(r[0] <= e and s <= r[1] for s, e in some)]
            lock = taken[-1]
            lock.kernel_acquire(mine)
            try:
                yield
            finally:
                lock.kernel_release(mine)

        return held(), window

    def exclusive(self, array_path):
        """The array's whole lock space: no other write of it runs meanwhile. Leaving it
        counts a new generation of the array's metadata (see generation)."""
        return _Exclusive(self, array_path)

    def guard_busy(self, array_path):
        """Whether a change of the array's metadata (its whole lock space) is in flight in
        this process: its guard held or waited for (nothing taken)."""
        return self._region_lock(array_path).guard_busy()

    def changing_elsewhere(self, array_path):
        """Whether another thread of this process is changing the array's metadata (holds
        its whole lock space: RegionLock.changing_elsewhere)."""
        return self._region_lock(array_path).changing_elsewhere()

    @property
    def counter(self):
        """The table whose count generation() reads: this one."""
        return self

    def generation(self, array_path):
        """How many times the array's whole lock space was held and left (resizes, appends,
        metadata changes through this table's handles): an engine made before the last of
        them may have a stale shape (chunkstore.engine.chunk_io.EngineState.check_metadata)."""
        return self._generations.get(array_path, 0)

    def count_change(self, array_path):
        """Count a change of the array's metadata (leaving its whole lock space does; a
        creation, and a change made under other locks than this table's, a zarr-style
        synchronizer's, call it): this table's handles read the metadata again."""
        with self._guard:
            self._generations[array_path] = self._generations.get(array_path, 0) + 1


class _Held:
    """Ranges of an array's RegionLock held for a with block. The lock is looked up as it is
    taken, not when the block is made: a thread waiting on the in-process table first
    (_Layered) holds no region file then, which a group's delete may close meanwhile
    (replacing: a write holding the closed file's lock failed, Bad file descriptor)."""

    __slots__ = ("_sync", "_path", "_ranges", "_lock")

    def __init__(self, sync, array_path, ranges):
        self._sync, self._path, self._ranges = sync, array_path, ranges

    def __enter__(self):
        self._lock = self._sync._region_lock(self._path)
        self._lock.acquire(self._ranges)
        return self

    def __exit__(self, *exc):
        self._lock.release(self._ranges)


class _Exclusive(_Held):
    """The whole lock space of an array, held for a with block; leaving it counts a new
    generation of the array's metadata (before the space is free again, so a write that
    takes it next sees the new generation)."""

    __slots__ = ("counts",)

    def __init__(self, sync, array_path):
        super().__init__(sync, array_path, FULL)
        self.counts = True  # (replacing clears it when what it guarded changed nothing)

    def __exit__(self, *exc):
        try:
            if self.counts:
                self._sync.count_change(self._path)
        finally:
            super().__exit__(*exc)


class ThreadSynchronizer(_Base):
    """Locks for the threads of one process. Pickles to a fresh, independent synchronizer
    (thread locks cannot cross processes: use ProcessSynchronizer there)."""

    def __init__(self, max_chunk_locks=None):
        super().__init__(max_chunk_locks)
        _thread_syncs.add(self)

    def __getstate__(self):
        return {"max_chunk_locks": self.max_chunk_locks}

    def __setstate__(self, state):
        self.__init__(**state)

    def __repr__(self):
        return "ThreadSynchronizer()"


class _NodeLocks(ThreadSynchronizer):
    """This process's in-process locks of one node (handle_locks), shared by its handles
    through stores of any root above it: each names the node by its own path in its store
    (``sub/arr`` from the root's store, nothing from the store of the node's directory), so
    the table holds one lock space whatever array path it is given, and a document's lock
    by the document's name (``sub/arr/zarr.json`` and ``zarr.json`` are one)."""

    def __init__(self, location=None, max_chunk_locks=None):
        super().__init__(max_chunk_locks)
        # (its handle_locks key: the node's changes are dated by it, see count_change)
        self.location = location

    def __getitem__(self, key):
        return super().__getitem__(key.rpartition("/")[2])

    def _region_lock(self, array_path):
        return super()._region_lock("")

    def generation(self, array_path):
        return super().generation("")

    def count_change(self, array_path):
        super().count_change("")
        # (dated for consolidated-metadata views, whose snapshot of the node may be older:
        # protocol.snapshot_stale; the table itself goes with the node's last handle)
        protocol.note_metadata_change(self.location)

    def __repr__(self):
        return "ThreadSynchronizer() (this process's locks of the node)"


# The locks of handles opened without a synchronizer, per node (protocol.node_location),
# shared by the handles of one process on one store (stores equal by location:
# DirectoryStore('/x') twice is one store), or on stores of roots one inside the other, and
# dropped with the last of them.
_handle_locks_guard = threading.Lock()
_handle_locks: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def handle_locks(store, path):
    """The in-process locks of an array opened without a synchronizer: a ThreadSynchronizer
    shared by every handle of this process on the same array of one store: the same store
    object, or stores equal by location (a directory, a URL, a database file: two
    DirectoryStore objects of one directory). Writes through handles sharing it never lose
    each other's updates to one chunk; other processes need a synchronizer for that
    (README, "What is safe")."""
    return _locks_at(protocol.node_location(store, path), store)


def layered_locks(store, path, synchronizer):
    """What a handle of the node at path of store opened with synchronizer locks: the
    in-process locks every handle of this process on it takes (handle_locks), then the
    synchronizer's, for a region-locking synchronizer (Thread/ProcessSynchronizer: a
    _Layered); a zarr-style synchronizer (only ``sync[key]``) is used alone, as zarr does.

    With the synchronizer's locks alone, a handle of the process opened with another
    synchronizer, or with none, wrote the same chunk at once, and one of the writes of
    disjoint elements was lost (README, "What is safe")."""
    if not all(hasattr(synchronizer, a) for a in ("hold", "exclusive", "split_locks")):
        return synchronizer
    return _Layered(handle_locks(store, path), synchronizer)


class _Layered:
    """A synchronizer's locks under this process's in-process locks of one node
    (layered_locks): every lock is taken in the in-process table first, then in the
    synchronizer, over the same ranges (worked out once, by the synchronizer), and let go of
    in reverse. A thread thus never waits in-process while it holds a synchronizer's lock
    that another thread of the process wants first: threads that meet in the synchronizer
    met in the table before (the same ranges), and the kernel locks come last."""

    __slots__ = ("inner", "outer")

    def __init__(self, inner, outer):
        self.inner, self.outer = inner, outer

    @property
    def max_chunk_locks(self):
        """The synchronizer's (the ranges both layers hold are its)."""
        return self.outer.max_chunk_locks

    def __getitem__(self, key):
        """The exclusive lock of key: both layers' (a context manager, as zarr's)."""
        return _Pair(self.inner[key], self.outer[key])

    def hold(self, array_path, ranges):
        """Hold ranges of the array's lock space in both layers (a context manager)."""
        return _Pair(self.inner.hold(array_path, ranges), self.outer.hold(array_path, ranges))

    def guard_under_groups(self, node_path):
        """What an attribute update of the node at node_path holds: its metadata guard in
        this process's table, then, in the synchronizer, the guards of the groups above it
        (the root first) and its own. A delete or move of any of those groups in another
        process holds that group's whole space (replacing), so the update ends before it or
        finds the node gone: with only its own guard, an update of a member wrote the
        member's document back after its group was deleted (a deleted v3 array came back,
        its chunks gone). Every thread takes the synchronizer's guards in path order, the
        order a delete takes a group's space and then its members'."""
        from chunkstore.sync.locking import GUARD
        held = self.outer.hold(node_path, GUARD)
        for a in reversed(protocol.ancestors(node_path)):  # (pairs nested: taken in order, let go of in reverse)
            held = _Pair(self.outer.hold(a, GUARD), held)
        return _Pair(self.inner.hold(node_path, GUARD), held)

    def chunk_ranges(self, coords, grid):
        """The synchronizer's ranges for the chunks at coords (both layers hold these)."""
        return self.outer.chunk_ranges(coords, grid)

    def split_locks(self, array_path, lo, hi, shape, whole_coords, partial_coords, grid):
        """Both layers' split locks (see _Base.split_locks): the in-process table's held
        first; the partial chunks' windows of the table take nothing more (it holds them
        for all of the write), the synchronizer's take its kernel locks."""
        args = (array_path, lo, hi, shape, whole_coords, partial_coords, grid)
        held_in, window_in = self.inner.split_locks(*args)
        held_out, window_out = self.outer.split_locks(*args)
        return _Pair(held_in, held_out), lambda coords: _Pair(window_in(coords),
                                                              window_out(coords))

    def exclusive(self, array_path):
        """The array's whole lock space in both layers (each counts a generation)."""
        return _Pair(self.inner.exclusive(array_path), self.outer.exclusive(array_path))

    @property
    def counter(self):
        """The table whose count generation() reads: the in-process one."""
        return self.inner

    def generation(self, array_path):
        """The in-process table's count of metadata changes (see _Base.generation)."""
        return self.inner.generation(array_path)

    def guard_busy(self, array_path):
        """Whether a change of the array's metadata is in flight in this process (the
        in-process table's guard: see _Base.guard_busy)."""
        return self.inner.guard_busy(array_path)

    def __repr__(self):
        return f"{self.outer!r} (under this process's locks of the node)"


class _Pair:
    """Two locks (context managers) held as one: the first taken first, let go of last."""

    __slots__ = ("first", "second")

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __enter__(self):
        self.first.__enter__()
        try:
            self.second.__enter__()
        except BaseException:
            self.first.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.second.__exit__(*exc)
        finally:
            self.first.__exit__(*exc)

    def acquire(self):
        """Take both (a lock's interface, as a synchronizer's ``sync[key]`` has)."""
        self.__enter__()
        return True

    def release(self):
        """Let go of both."""
        self.__exit__(None, None, None)


# The synchronizers (with a lock space: exclusive) of this process's handles opened with one,
# per array (stores equal by location, as above); replacing holds them too.
_synced: dict = {}


def register_synchronizer(store, path, synchronizer):
    """Note that a handle of the array at path of store writes under synchronizer's locks
    (replacing then waits for its writes too)."""
    if not hasattr(synchronizer, "exclusive"):
        return  # (a zarr-style synchronizer: no lock space to hold)
    key = protocol.node_location(store, path)
    with _handle_locks_guard:
        syncs = _synced.get(key)
        if syncs is None:
            syncs = _synced[key] = weakref.WeakKeyDictionary()
        # (the path as the handle names the array: the synchronizer's locks are keyed so)
        syncs.setdefault(synchronizer, set()).add(path)


@contextlib.contextmanager
def replacing(store, path, synchronizer=None):
    """Around deleting, replacing or moving the node at path of store (a path, or several:
    their lock spaces are taken together, in one order, as one path's are; taken path by
    path, two changes of crossing paths each held one and waited for the other's): the
    whole lock space
    of every array at or below path that this process's handles hold in-process locks for
    (handle_locks), so that writes through them end first and none starts meanwhile, each
    counting a new metadata generation when left. A handle opened before then finds, at its
    next write, that the metadata moved on and reads it again: it writes by the new array's
    metadata, or fails where there is no array any more, instead of writing the old layout's
    chunks into the new array (decoded by the new dtype: wrong values) or as orphans that a
    later array at that path would show. Handles with a synchronizer read the stored
    metadata under their locks, once they hold them; so the whole lock space of each
    synchronizer this process's handles of those arrays were opened with is held too (a
    synchronized write that had checked the metadata before the change used to store chunks
    of the old layout into the new array: undecodable, or read by another dtype).

    The node's own in-process table is held whether or not a handle keeps it (and
    synchronizer's lock space of the node, where one is given: the handle's doing the
    change): an attribute update of the node holds its guard there (hierarchy.attrs), so it
    ends before, or finds the node gone after (it wrote the document back: a deleted or
    moved node came back, or a v2 .zattrs was left for the next node there)."""
    paths = [path] if isinstance(path, str) else list(path)
    tops = [protocol.node_location(store, p) for p in paths]
    # (made if no handle keeps them, and kept alive while held: the WeakValueDictionary's;
    # the listing below takes them, a node being below itself)
    own = [handle_locks(store, p) for p in paths]
    # The tables of the groups above too (held without counting a change of them): a move
    # of a group and a delete of one of its members in two threads each held its own
    # node's, and both returned with the deleted member moved along (or the move failed on
    # a key deleted under it).
    above = {(place, a) for place, p in tops for a in protocol.ancestors(p)} - set(tops)
    own += [_locks_at(node) for node in above]  # noqa: F841

    def below(node):
        return any(protocol.node_below(node, top) for top in tops)

    with _handle_locks_guard:
        tables = sorted(((node[1], "", t) for node, t in list(_handle_locks.items())
                         if below(node) or node in above), key=lambda nt: nt[0])
        uncounted = {id(_handle_locks[node]) for node in above}
        for key in [k for k, syncs in _synced.items() if not syncs]:
            del _synced[key]
        synced = sorted(((node[1], p, s) for node, syncs in _synced.items()
                         if below(node)
                         for s, ps in list(syncs.items()) for p in ps),
                        key=lambda nps: (nps[0], id(nps[2]), nps[1]))
    if hasattr(synchronizer, "exclusive"):
        synced = sorted(synced + [(top[1], p, synchronizer) for top, p in zip(tops, paths)],
                        key=lambda nps: (nps[0], id(nps[2]), nps[1]))
    # One entry per lock space: two ProcessSynchronizer objects of one lock directory share
    # its region files (one lock per file in the process, not re-entrant), and holding one
    # twice made the thread wait for itself (a handle opened with one, a delete with the
    # other).
    seen: set = set()
    once = []
    for nps in synced:
        space = _space_of(nps[2], nps[1])
        if space not in seen:
            seen.add(space)
            once.append(nps)
    synced = once
    with contextlib.ExitStack() as held:
        locks = []
        for _, p, t in tables:
            lock = held.enter_context(t.exclusive(p))
            if id(t) in uncounted:
                lock.counts = False  # (a group above: nothing of it changes)
            else:
                locks.append(lock)
        # The region files opened for this change alone (the lock spaces of members no
        # handle of this process uses: a group's delete or move holds each of its arrays')
        # are closed again once their locks are let go of, while the in-process tables,
        # which every synchronized lock of this process takes first, are still held: a
        # group of 1,000 members kept 1,000 files open (past the usual limit).
        held.callback(_close_idle, _not_yet_open(synced))
        locks += [held.enter_context(t.exclusive(p)) for _, p, t in synced]
        try:
            yield
        except ReadOnlyError:
            # refused before anything changed (a read-only store or a consolidated view
            # refuses the first change): nothing to tell the handles (a handle of a
            # consolidated snapshot would else read the live store and miss its array)
            for lock in locks:
                lock.counts = False
            raise
        # The tables of handles opened below meanwhile (after the listing above, before
        # the documents went): told too, so that their next operation reads the metadata
        # again (a handle another thread opened while its group was moved or deleted read
        # the fill value for every element, with no error, ever after).
        held_ids = {id(t) for _, _, t in tables}
        with _handle_locks_guard:
            newer = [t for node, t in list(_handle_locks.items())
                     if below(node) and id(t) not in held_ids]
        for t in newer:
            t.count_change("")


def _unlinked(lock):
    """Whether the lock file a RegionLock holds open has been removed (one fstat)."""
    fd = getattr(lock, "_fd", None)
    if fd is None:
        return False
    try:
        return os.fstat(fd).st_nlink == 0
    except OSError:
        return True


def _locks_at(node, store=None):
    """The in-process table of the node at a node location (handle_locks by location; made
    through store, the place's change dates go with it)."""
    with _handle_locks_guard:
        locks = _handle_locks.get(node)
        if locks is None:
            locks = _handle_locks[node] = _NodeLocks(node)
            if store is not None:
                protocol.watch_place(store)
        return locks


def _region_file(synchronizer, array_path):
    """The region lock file of the array at array_path in a ProcessSynchronizer."""
    return os.path.join(synchronizer.path, quote(array_path, safe="") + ".regions")


def _not_yet_open(synced):
    """The region files of synced's (node, path, synchronizer) that this process has not
    opened (no RegionLock in the registry)."""
    with _registry_guard:
        return [f for f in (_region_file(s, p) for _, p, s in synced
                            if isinstance(s, ProcessSynchronizer))
                if f not in _registry]


def _close_idle(files):
    """Close the region files of files that no thread holds or waits for, and forget them
    (the next user opens the file again)."""
    with _registry_guard:
        for f in files:
            lock = _registry.get(f)
            if lock is None or not lock.idle():
                continue
            del _registry[f]
            fd = getattr(lock, "_fd", None)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _space_of(synchronizer, path):
    """What identifies the lock space of the node at path in synchronizer: a process
    synchronizer's region file (shared by every such object of its directory), else the
    object's own table."""
    where = synchronizer.path if isinstance(synchronizer, ProcessSynchronizer) else \
        id(synchronizer)
    return where, path


class ProcessSynchronizer(_Base):
    """Locks shared by processes through lock files in `path` (created if absent).

    One region lock file per array (`<array path>.regions`, byte-range fcntl locks) and one
    fasteners lock file per single-key lock, reused across writes. The directory must be on
    a filesystem where byte-range fcntl locks work across all the processes involved (see
    the README). It must not be inside the store (lock files would look like data):
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

    def _region_lock(self, array_path):
        path = _region_file(self, array_path)
        with _registry_guard:
            lock = _registry.get(path)
            if lock is not None and not _unlinked(lock):
                return lock
            # (a lock file removed since it was opened, `rm -r` of the directory: locked
            # still, it excluded nobody, since other processes lock the file made anew;
            # their writes and this process's to one chunk lost a third of the elements.
            # The old descriptor stays open for any thread still holding ranges of it.)
            _fence_old_protocol(self.path, array_path)
            fd = open_region_file(path)
            lock = _registry[path] = RegionLock(fd, path)
            return lock

    def clear(self):
        """Remove all lock files. Only while no process is using this synchronizer."""
        with _registry_guard:
            for p in [p for p in _registry if os.path.dirname(p) == self.path]:
                lock = _registry.pop(p)
                fd = getattr(lock, "_fd", None)
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        for name in os.listdir(self.path):
            p = os.path.join(self.path, name)
            if name.endswith((".lock", ".regions")) and not os.path.isdir(p):
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


def _fence_old_protocol(lock_dir, array_path):
    """Refuse a lock directory in use by the per-chunk protocol of chunkstore before the
    region locks (it and this one would not exclude each other), and fence it off for such
    writers: their array lock file `<prefix>.array-rw.lock` becomes a directory here, so
    an old writer fails on opening it instead of writing unlocked."""
    prefix = array_path + "/" if array_path else ""
    old = os.path.join(lock_dir, quote(prefix + ".array-rw", safe="") + ".lock")
    if os.path.exists(old) and not os.path.isdir(old):
        raise ValueError(
            f"the lock directory {lock_dir!r} holds {os.path.basename(old)!r}, a lock file of "
            f"the per-chunk locking of older chunkstore versions, for array {array_path!r}; "
            f"writers of both versions would not exclude each other. Stop every writer of "
            f"an older chunkstore, then call ProcessSynchronizer({lock_dir!r}).clear() "
            f"(or use a new lock directory)")
    os.makedirs(old, exist_ok=True)


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
