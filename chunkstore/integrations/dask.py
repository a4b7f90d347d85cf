"""dask integration: chunkstore arrays as dask arrays, and dask arrays written to chunkstore.

Beyond one machine, dask.distributed schedules the work; chunkstore arrays, stores and
synchronizers pickle, so tasks on other processes or hosts open the same store.

Unaligned writes: when the dask chunks do not line up with the store's chunks, two tasks
would read-modify-write the same store chunk and one update could be lost. to_chunkstore
then rechunks the dask array to the store's chunk grid (so every store chunk is written by
exactly one task), unless a ProcessSynchronizer is given, in which case the locks make the
overlapping writes safe and no rechunk is done (a ThreadSynchronizer's locks do not reach
the processes of the processes scheduler or of dask.distributed).

Stores whose pickled copies do not reach the same data (a MemoryStore copies its contents,
a ZipStore's copy keeps its writes until it is closed: protocol.copies_share_data) cannot
take writes from tasks that run on copies of the graph (the processes scheduler, and
dask.distributed, which pickles the graph even for workers in this process): such a
task raises, naming the store, where its writes would be lost without a word.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import dask.array as da
import numpy as np

from chunkstore.engine.array import Array
from chunkstore.errors import ArrayMetadataChangedError, store_name
from chunkstore.hierarchy.creation import create, normalize_path, open_array
from chunkstore.hierarchy.nodes import holds
from chunkstore.storage import protocol
from chunkstore.storage.normalize import normalize_store
from chunkstore.storage.store_path import split_store_path
from chunkstore.sync.synchronizers import ProcessSynchronizer

__all__ = ["from_chunkstore", "to_chunkstore", "aligned", "rechunk_to_grid", "Target",
           "StaleDaskArrayError"]


class StaleDaskArrayError(ArrayMetadataChangedError):
    """A dask array made by :func:`from_chunkstore` read its array after the array's layout
    changed (shrunk in any dimension, or re-created with another dtype, chunks or shards): its
    tasks would put the new array's blocks in the old graph's layout, so they raise instead."""


class _BlockReader:
    """The getter of from_chunkstore's tasks: reads a block only while the array still has
    the layout the graph was built by (dtype, chunks and shards, and a shape holding the
    graph's region: growing is allowed). Writes are data, read as they are now."""

    def __init__(self, z: Array) -> None:
        self.shape, self.dtype = z.shape, z.dtype
        self.grid = self._grid(z)

    @staticmethod
    def _grid(z: Array) -> tuple:
        """The chunks and the stored objects' shape (the shards of a sharded array)."""
        return z.chunks, z.layout.write_chunks

    def _stale(self, z: Array, what: str) -> StaleDaskArrayError:
        return StaleDaskArrayError(
            f"array {z.path or '/'!r} of {store_name(z.store)} changed since from_chunkstore "
            f"built the dask array over it ({what}): its tasks would read the new array into "
            f"the old graph's layout; call from_chunkstore again to read it as it is now")

    def __call__(self, z: Array, key: tuple, asarray: bool = False, lock: Any = None) -> Any:
        shape, dtype, grid = z.shape, z.dtype, self._grid(z)
        if len(shape) != len(self.shape) or any(n < m for n, m in zip(shape, self.shape)):
            raise self._stale(z, f"shape {self.shape} -> {shape}")
        if dtype != self.dtype:
            raise self._stale(z, f"dtype {self.dtype} -> {dtype}")
        # (other chunks read the same values, but only a re-created array has them: another
        # array than the graph's, whatever its shape)
        if grid != self.grid:
            raise self._stale(z, f"chunks and stored objects {self.grid} -> {grid}")
        if lock:
            lock.acquire()
        try:
            block = z[key]
        finally:
            if lock:
                lock.release()
        # A read works with one version of the metadata from start to end: a change between
        # the checks above and the read shows in what it returns (a shrink clips the block)
        want = tuple(len(range(*k.indices(n))) for k, n in zip(key, self.shape)
                     if isinstance(k, slice))
        got = getattr(block, "shape", ()), getattr(block, "dtype", None)
        if got != (want, self.dtype):
            raise self._stale(z, f"a block of shape {want} and dtype {self.dtype} read as "
                                 f"{got[0]} and {got[1]}")
        return np.asarray(block) if asarray else block


def from_chunkstore(store_or_array: Any, path: str | None = None, chunks: Any = None,
                    name: str | None = None, **open_kwargs: Any) -> da.Array:
    """A dask array over a chunkstore array (or the array at path in a store), chunked like
    the stored objects unless chunks is given: the shards of a sharded array (one task reads
    a shard, as dask's own from_array sizes them), else the chunks.

    Its name is new at each call (a random uuid) unless name is given: dask takes two arrays
    of one name for one, and neither the handle (its id() is reused once it is freed) nor
    the metadata tells whether the data changed between two calls (a snapshot persisted
    before a write would stand for the blocks read after it).

    Its tasks read the array as it is when they run (writes since included) and raise
    :class:`StaleDaskArrayError`, naming the array, where its layout changed since: shrunk
    in any dimension, or re-created with another dtype, chunks or shards. An array grown
    (append, resize) still holds the graph's region, which its tasks read."""
    z = store_or_array if isinstance(store_or_array, Array) else \
        open_array(store_or_array, mode="r", path=path, **open_kwargs)
    chunks = chunks or z.layout.write_chunks  # (the shards of a sharded array)
    if name is None:
        name = f"chunkstore-{z.path or 'root'}-{uuid.uuid4().hex}"
    return da.from_array(z, chunks=chunks, name=name, lock=False, fancy=False, asarray=False,
                         getitem=_BlockReader(z))


def aligned(dask_chunks, store_chunks, shape=None, offsets=None):
    """True when every boundary between dask chunks, shifted by offsets (where the dask
    array lands in the stored array, default 0), is a boundary of the stored blocks
    (store_chunks: the chunks, or a sharded array's shards): then no two tasks write one
    stored block. (shape: accepted for compatibility; the last chunk's end needs no check.)"""
    offsets = offsets or (0,) * len(store_chunks)
    for sizes, block, start in zip(dask_chunks, store_chunks, offsets):
        pos = start
        for size in sizes[:-1]:
            pos += size
            if pos % block:
                return False
    return True


def rechunk_to_grid(darr, store_chunks, offsets=None):
    """darr rechunked so that its chunk boundaries, shifted by offsets (default 0), fall on
    the stored blocks' boundaries: each stored block is then written by exactly one task."""
    offsets = offsets or (0,) * darr.ndim
    new = []
    for n, block, start in zip(darr.shape, store_chunks, offsets):
        first = min(n, (-start) % block or block)
        sizes = [first] if n else []
        left = n - first
        while left > 0:
            sizes.append(min(block, left))
            left -= sizes[-1]
        new.append(tuple(sizes) or (0,))
    return darr.rechunk(tuple(new))


class Target:
    """The array a dask write stores into, as the tasks get it: where the graph was copied
    to run them (pickled) and the array's store does not share its data with its copies
    (protocol.copies_share_data), a write raises instead of landing in a copy."""

    def __init__(self, z: Array) -> None:
        self.z = z
        self.copied = False
        self.shape, self.dtype, self.ndim = z.shape, z.dtype, z.ndim
        # (the layout the graph's blocks were cut for: to_chunkstore rechunks them to it)
        self.grid = _BlockReader._grid(z)

    def __getstate__(self) -> dict:
        if not protocol.copies_share_data(self.z.store):
            # (the array itself not pickled: its copy would open a store of its own, where
            # it is missing (ArrayNotFoundError), or not pickle at all (obstore's
            # MemoryStore); the tasks raise the error that says why)
            return {"copied_from": (store_name(self.z.store), self.z.path)}
        return {"z": self.z, "shape": self.shape, "dtype": self.dtype, "grid": self.grid}

    def __setstate__(self, state: dict) -> None:
        if "copied_from" in state:
            self.copied_from = state["copied_from"]
            self.copied = True
            return
        self.__init__(state["z"])  # type: ignore[misc]
        # (the graph's, not the array's now)
        self.shape = state.get("shape", self.shape)
        self.dtype = state.get("dtype", self.dtype)
        self.grid = state.get("grid", self.grid)
        self.copied = not protocol.copies_share_data(self.z.store)

    def _check(self) -> None:
        if self.copied:
            name, path = getattr(self, "copied_from", None) or (self.z.store, self.z.path)
            raise _copies_lose_writes(name, path)
        # Another array than the graph's (re-created meanwhile, by any handle or process):
        # its blocks were cut for the old grid, and tasks sharing one of the new chunks lost
        # each other's updates on the processes scheduler; values cast to a new dtype
        # (1e6 into i2) stored wrapped. Grown is fine; shrunk, the write says so.
        z = self.z
        what = None
        if z.dtype != self.dtype:
            what = f"dtype {self.dtype} -> {z.dtype}"
        elif _BlockReader._grid(z) != self.grid:
            what = f"chunks and stored objects {self.grid} -> {_BlockReader._grid(z)}"
        if what is not None:
            raise StaleDaskArrayError(
                f"array {z.path or '/'!r} of {store_name(z.store)} changed since the dask "
                f"write to it was built ({what}): the write was planned for the old array; "
                f"build the write again")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check()
        try:
            self.z[key] = value
        except (ValueError, IndexError) as e:
            now = self.z.shape
            if len(now) == len(self.shape) and all(n >= m for n, m in zip(now, self.shape)):
                raise
            # (the write's own error spoke of a selection of shape (0,) and a value that
            # cannot be broadcast to it, not of the resize that caused it)
            raise StaleDaskArrayError(
                f"array {self.z.path or '/'!r} of {store_name(self.z.store)} changed since the "
                f"dask write to it was built (shape {self.shape} -> {now}): its blocks no "
                f"longer fit; build the write again") from e

    def __getitem__(self, key: Any) -> Any:
        if self.copied:
            self._check()
        return self.z[key]


def _copies_lose_writes(store: Any, path: str | None) -> RuntimeError:
    where = store if isinstance(store, str) else store_name(store)
    return RuntimeError(
        f"cannot write array {path or '/'!r} of {where} from a copy of the dask "
        f"graph (the processes scheduler, or dask.distributed, pickles it): this store's "
        f"copies do not share its data, so the writes would be lost; use the threaded "
        f"scheduler, or a store at a location (a directory, a database file, a URL)")


def _runs_on_copies(darr: da.Array) -> bool:
    """Whether the scheduler that computing darr now would use runs its tasks on pickled
    copies of the graph (the processes scheduler, dask.distributed)."""
    import dask.base
    import dask.multiprocessing
    scheduler = dask.base.get_scheduler(collections=[darr])
    if scheduler is dask.multiprocessing.get:
        return True
    owner = getattr(scheduler, "__self__", None)  # (a distributed Client's get)
    return type(owner).__module__.split(".")[0] == "distributed"


def _unwrapped(v: Any) -> Array | None:
    """The chunkstore Array that v is or wraps (xarray's lazy arrays: adapters whose .array
    leads to the engine's backend array, whose get_array() is the Array), else None."""
    for _ in range(32):
        if isinstance(v, Array):
            return v
        get = getattr(v, "get_array", None)
        inner = get() if callable(get) else getattr(v, "array", None)
        if inner is None or inner is v:
            return None
        v = inner
    return None


#: values of a graph that hold no array: not looked into
_LEAVES = (str, bytes, int, float, complex, type(None), slice, np.ndarray, np.generic)


def _layer_values(layer: Any) -> list:
    """What a graph layer's tasks hold: a Blockwise layer's task, its constant arguments
    (inline_array=True's array) and its io_deps, looked at without making its tasks (a
    dask array of 120,000 blocks took 1.1 s to materialize); any other layer's tasks."""
    if hasattr(layer, "indices") and hasattr(layer, "task"):
        return [layer.task, [v for v, _ in layer.indices],
                list(getattr(layer, "io_deps", {}).values())]
    return list(layer.values())


def _held(values: list) -> Iterator[tuple[Any, Array]]:
    """(what holds it, the chunkstore Array) for each array that values hold, looked for in
    tasks' arguments, containers, and the wrappers _unwrapped follows."""
    stack, seen = list(values), set()
    while stack:
        v = stack.pop()
        if isinstance(v, _LEAVES) or id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, Array) or hasattr(v, "get_array") or hasattr(v, "array"):
            a = _unwrapped(v)
            if a is not None:
                yield v, a
                continue
        if isinstance(v, (tuple, list, set, frozenset)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        else:  # a task (dask's Task, DataNode), a functools.partial...
            for attr in ("args", "kwargs", "keywords", "value"):
                inner = getattr(v, attr, None)
                if inner is not None:
                    stack.append(inner)


def _sources(darr: da.Array) -> Iterator[Array]:
    """The chunkstore arrays darr's graph reads, wherever its tasks hold them: under a key
    of their own (from_array's layer original-...), or inside the tasks' arguments
    (from_array(inline_array=True), a graph dask.optimize inlined; xarray's lazy arrays
    too). Looked at in the original- layers alone, an inlined array went unseen, and an
    overwrite of it was not refused: its tasks then read the fill value."""
    graph: Any = darr.__dask_graph__()
    for layer in getattr(graph, "layers", {"": graph}).values():
        for _, a in _held(_layer_values(layer)):
            yield a


def _reads(layer: Any, store: Any, path: str) -> bool | None:
    """Whether a graph layer holds the array at path of store (under its own key, or as a
    constant of its tasks): True as a whole, False through a view of part of it (a lazy
    selection), None not at all."""
    found = None
    for v, a in _held(_layer_values(layer)):
        if holds(store, path, a.store, a.path):
            if not _whole_view(v):
                return False
            found = True
    return found


def source_under(darr: da.Array, store: Any, path: str) -> Array | None:
    """A chunkstore array that darr reads at path of store or below it (one that replacing
    the node at path deletes), else None."""
    return next((a for a in _sources(darr) if holds(store, path, a.store, a.path)), None)


def _whole_view(v: Any) -> bool | None:
    """Whether v is, or wraps, a chunkstore Array as a whole, element for element (xarray's
    lazy arrays: each key on the way a full slice of every dimension, no transposition or
    vectorized index); None where it wraps none."""
    for _ in range(32):
        if isinstance(v, Array):
            return True
        name = type(v).__name__
        if "Transposed" in name or "Vectorized" in name:
            return False
        get = getattr(v, "get_array", None)
        inner = get() if callable(get) else getattr(v, "array", None)
        key = getattr(getattr(v, "key", None), "tuple", None)
        if key is not None:
            shape = getattr(inner, "shape", None) or ()
            for k, n in zip(key, shape):
                if not (isinstance(k, slice) and k.step in (None, 1) and not k.start
                        and (k.stop is None or k.stop >= n)):
                    return False
        if inner is None or inner is v:
            return None
        v = inner
    return None


def blockwise_in_place(darr: da.Array, store: Any, path: str,
                       offsets: Sequence[int] | None = None) -> bool:
    """Whether each block of darr that depends on the array at path of store is computed
    from the same block of it, the same region: every layer between that array (read whole,
    by from_array or xarray's lazy arrays) and darr is elementwise (a Blockwise layer whose
    inputs derived from it have the output's indices and blocks; other inputs, NumPy
    weights, a mask, a variable of another shape, broadcast freely), or a layer whose every
    task takes only the same block of what it depends on (apply_ufunc's). Written back into
    that array (rechunked to the stored grid or not), each write then reads all of its
    region before it writes it, and nothing else reads that region. A reversal, a shift,
    a transpose, a slice, a rechunk of the caller's, an overlap or a reduction reads other
    blocks' regions, which other tasks may have written already. offsets: where darr is
    written in the array; a block then lies where it was read only at offsets of 0 (a
    slice of the leading blocks written further on read regions other tasks write)."""
    graph: Any = darr.__dask_graph__()
    layers = getattr(graph, "layers", None)
    depends = getattr(graph, "dependencies", None)
    if layers is None or depends is None:  # (a graph of no layers: in place if it reads none)
        return source_under(darr, store, path) is None
    derived = set()
    for name, layer in layers.items():
        r = _reads(layer, store, path)
        if r is False:
            return False
        if r:
            derived.add(name)
    if not derived:
        return True
    if offsets is not None and any(offsets):
        return False
    # (the layers that depend on those, in the graph's order: a layer after its inputs)
    changed = True
    while changed:
        changed = False
        for name in layers:
            if name not in derived and depends.get(name, set()) & derived:
                derived.add(name)
                changed = True
    blocks = tuple(darr.numblocks)
    for name in derived:
        layer = layers[name]
        if str(name).startswith("original-"):
            continue  # (from_array's array under a key of its own)
        if hasattr(layer, "indices") and hasattr(layer, "output_indices"):
            if getattr(layer, "new_axes", None) or getattr(layer, "concatenate", None):
                return False
            out, numblocks = tuple(layer.output_indices), getattr(layer, "numblocks", {})
            for v, idx in layer.indices:
                if idx is None or not isinstance(v, str) or v not in derived:
                    continue  # (a constant, an io dependency, or an input of another origin)
                if tuple(idx) != out or tuple(numblocks.get(v, blocks)) != blocks:
                    return False
            continue
        for key, task in layer.items():  # (a materialized layer: each task looked at)
            if not isinstance(key, tuple):
                return False
            for dep in _task_keys(task, layers):
                if dep[0] in derived and dep[1:] != key[1:]:
                    return False
    return True


def _task_keys(task: Any, layers: Any) -> set:
    """The keys (name, *block) of layers that a task takes: its dependencies, or, in a
    task of dask's older tuple form ((getitem, (name, i, j), 0)), the tuples naming one."""
    deps = getattr(task, "dependencies", None)
    if deps is not None:
        return {d for d in deps if isinstance(d, tuple) and d}
    found, stack = set(), [task]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple) and v and isinstance(v[0], str) and v[0] in layers:
            found.add(v)
        elif isinstance(v, (tuple, list)):
            stack.extend(v)
    return found


def _check_overwrite(darr: da.Array, store: Any, path: str) -> None:
    """Refuse, before anything is deleted, an overwrite of the array (or of a group above
    it) that darr reads: re-created empty, its tasks read the fill value (silently, the
    layout being the same), and the data was gone either way."""
    a = source_under(darr, store, path)
    if a is not None:
        what = "array" if (a.path or "") == path else "the group above array"
        raise ValueError(
            f"cannot overwrite {what} {a.path or '/'!r} of {store_name(a.store)}: the dask "
            f"array being written reads it (from_chunkstore), and re-created first, it would "
            f"read as the fill value; write to another path, or compute the values first")


def to_chunkstore(darr, store, path=None, synchronizer=None, overwrite=False, compute=True,
                  chunks=None, return_stored=False, **create_kwargs):
    """Write a dask array to a new chunkstore array with da.store; returns the Array.

    chunks: the store's chunk shape (default: the dask array's first chunk in each dim).
    Unaligned dask chunks are rechunked to the store's grid, unless a synchronizer that
    works across processes (ProcessSynchronizer) is given.
    compute=False returns the dask Delayed of the store operation instead of writing.
    A store whose pickled copies do not share its data (MemoryStore, ZipStore) takes the
    writes of the threaded scheduler; tasks on copies of the graph raise (module docstring).
    """
    if any(math.isnan(c) for sizes in darr.chunks for c in sizes):
        raise ValueError(f"cannot write a dask array of unknown chunk sizes {darr.chunks} "
                         f"to chunkstore: call its compute_chunk_sizes() first")
    if chunks is None:
        # (the first non-empty chunk's size: a leading empty chunk is no chunk shape)
        chunks = tuple(next((c for c in sizes if c), 1) for sizes in darr.chunks)
    store, path = split_store_path(store, path)
    store = normalize_store(store, mode="a",
                            storage_options=create_kwargs.pop("storage_options", None))
    if compute and _runs_on_copies(darr) and not protocol.copies_share_data(store):
        raise _copies_lose_writes(store, normalize_path(path))  # (before any overwrite)
    if overwrite:
        _check_overwrite(darr, store, normalize_path(path))
    z = create(shape=darr.shape, chunks=chunks, dtype=create_kwargs.pop("dtype", darr.dtype),
               store=store, path=path, synchronizer=synchronizer, overwrite=overwrite,
               **create_kwargs)
    # (the stored blocks are the shards of a sharded array: two tasks writing inner chunks
    # of one shard would both rewrite it, and processes share no in-process shard lock).
    # Only a ProcessSynchronizer's locks reach the processes of the processes scheduler or
    # dask.distributed (a ThreadSynchronizer pickles to a fresh one, and so may others):
    # there tasks sharing a block would lose updates.
    if not isinstance(synchronizer, ProcessSynchronizer) and not aligned(darr.chunks,
                                                                         z.write_chunks):
        darr = rechunk_to_grid(darr, z.write_chunks)
    result = da.store(darr, Target(z), lock=False, compute=compute,
                      return_stored=return_stored)
    return z if compute and not return_stored else result
