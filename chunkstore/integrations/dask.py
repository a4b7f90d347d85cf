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


def reads_back_unchanged(darr: da.Array, store: Any, path: str) -> bool:
    """Whether darr is the array at path of store as stored, read whole by blocks and
    changed in nothing (xarray's lazy variable of it, opened with chunks=): written back
    over the whole array, each element gets its own value again, so another task reading
    that array meanwhile reads the same values either way (a chunk is replaced whole)."""
    graph: Any = darr.__dask_graph__()
    layers = getattr(graph, "layers", None)
    depends = getattr(graph, "dependencies", None)
    if layers is None or depends is None:
        return False
    source = [n for n, layer in layers.items() if _reads(layer, store, path)]
    if len(source) != 1:
        return False
    for name, layer in layers.items():
        if name == source[0]:
            continue
        func = getattr(getattr(layer, "task", None), "func", None)
        if (name != darr.name or set(depends.get(name, ())) != set(source)
                or getattr(func, "__module__", None) != "dask.array.core"
                or getattr(func, "__name__", None) not in _GETTERS):
            return False
    return True


#: from_array's block readers (dask.array.core): each task reads its block, nothing else
_GETTERS = frozenset({"getter", "getter_inline", "getter_nofancy"})


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
    """Whether darr, written into the array at path of store at offsets (where its first
    element lands, default 0), reads of the region it writes only what each of its blocks
    writes: every block of darr is computed from reads (from_array's tasks, over the array
    whole or xarray's lazy arrays of all of it) of no element that another block writes.
    Each write then comes after every read of its region, whatever order the tasks run in
    (a rechunk to the stored grid keeps this: a stored block's task waits on every block of
    darr it holds part of); the rows around a region, which no task writes, may be read.
    The regions are followed through the graph: a Blockwise layer maps its inputs' blocks
    by its indices (elementwise, broadcast, transposed), any other layer's tasks by the
    keys they take (a slice, a concatenation, a rechunk); a read bounds the regions of
    every block that takes it. An elementwise update, a slice written back where it was
    read, a permutation within one block, a rechunk into larger blocks go on; a reversal,
    a shift, a slice written over rows it reads, an overlap or a reduction reads regions
    other blocks write. Anything not followed (a task taking the array itself, a Blockwise
    layer that adds or contracts dimensions, a graph dask.optimize fused, a lazy selection
    of part of the array) answers False."""
    graph: Any = darr.__dask_graph__()
    layers = getattr(graph, "layers", None)
    depends = getattr(graph, "dependencies", None)
    if layers is None or depends is None:  # (a graph of no layers: in place if it reads none)
        return source_under(darr, store, path) is None
    holders = set()
    for name, layer in layers.items():
        r = _reads(layer, store, path)
        if r is False:
            return False
        if r:
            holders.add(name)
    if not holders:
        return True
    if darr.name not in layers:
        return False  # (its blocks' keys in no layer of their name: not followed)
    offsets = tuple(offsets or (0,) * darr.ndim)
    edges = [np.cumsum((0, *sizes)) + start for sizes, start in zip(darr.chunks, offsets)]
    try:
        box_of = _read_regions(layers, depends, holders)
        for idx in np.ndindex(*darr.numblocks):
            box = box_of((darr.name, *idx))
            if box is None:
                continue  # (reads none of the array)
            if len(box) != darr.ndim:
                return False
            # (what it reads outside the region written, no task writes: a stored block
            # across the region's edge is rewritten whole, but with the values it held)
            box = [(max(lo, e[0]), min(hi, e[-1])) for (lo, hi), e in zip(box, edges)]
            if any(lo >= hi for lo, hi in box):
                continue
            if any(lo < e[i] or hi > e[i + 1] for (lo, hi), e, i in zip(box, edges, idx)):
                return False
    except _NOT_FOLLOWED:
        return False
    return True


class _Unfollowed(Exception):
    """A layer whose reads of the array blockwise_in_place cannot follow."""


#: what following a graph of unexpected form raises (a tuple of strings taken for a key,
#: a block index past a layer's blocks): answered as not followed
_NOT_FOLLOWED = (_Unfollowed, LookupError, TypeError, ValueError, RecursionError)


#: the region of the array that a task reads, ((start, stop) for each of its dimensions),
#: or None where it reads none
_Box = tuple | None


def _union(a: _Box, b: _Box) -> _Box:
    if a is None or b is None:
        return a if b is None else b
    if len(a) != len(b):
        raise _Unfollowed
    return tuple((min(a0, b0), max(a1, b1)) for (a0, a1), (b0, b1) in zip(a, b))


def _read_regions(layers: Any, depends: Any, holders: set) -> Any:
    """The function of a key of the graph to the region of the array (held by the layers
    holders) that its task reads, directly or through the tasks it takes (None: none).
    Raises _Unfollowed where a layer's reads cannot be told."""
    derived = set(holders)
    changed = True
    while changed:
        changed = False
        for name in layers:
            if name not in derived and depends.get(name, set()) & derived:
                derived.add(name)
                changed = True
    # (the layers in an order that puts each after those it takes)
    order, seen = [], set()
    for root in derived:
        stack = [(root, False)]
        while stack:
            name, done = stack.pop()
            if done:
                order.append(name)
                continue
            if name in seen:
                continue
            seen.add(name)
            stack.append((name, True))
            stack.extend((d, False) for d in depends.get(name, ()) if d in derived)
    sources: set = set()  # from_array's array under a key of its own (original-...)
    names = set(derived)  # the key names of those layers (a rechunk's layer holds two)
    for name in derived:
        if not _is_blockwise(layers[name]):
            names.update(k[0] if isinstance(k, tuple) and k else k for k in layers[name])
    maps: dict = {}  # Blockwise layer -> function of a block's index to its region
    boxes: dict = {}  # other layers' keys -> their regions

    def box_of_key(key: Any) -> _Box:
        name = key[0] if isinstance(key, tuple) and key else key
        if name in sources:
            raise _Unfollowed  # (a task taking the array itself: what it reads is not told)
        if key in boxes:
            return boxes[key]
        if name in maps and isinstance(key, tuple):
            # (kept: asked again by every task that takes it, a layer used twice made
            # the walk exponential, 55 s for 22 such layers)
            boxes[key] = box = maps[name](key[1:])
            return box
        if name in names:
            raise _Unfollowed
        return None  # (a key of another origin)

    for name in order:
        layer = layers[name]
        if not _is_blockwise(layer):
            if name in holders:
                if list(layer.keys()) != [name]:
                    raise _Unfollowed  # (the array inside tasks of other kinds)
                sources.add(name)
                continue
            _follow_tasks(layer, names, boxes, box_of_key)
            continue
        maps[name] = _blockwise_regions(layer, name in holders or bool(
            depends.get(name, set()) & sources), derived, sources, box_of_key, maps)
    return box_of_key


def _is_blockwise(layer: Any) -> bool:
    return hasattr(layer, "indices") and hasattr(layer, "output_indices")


def _blockwise_regions(layer: Any, reader: bool, derived: set, sources: set,
                       box_of_key: Any, maps: dict) -> Any:
    """The function of a Blockwise layer's block index to the region its task reads: where
    it reads the array (reader: from_array's layer, getter(array, slices)), the slices its
    ArraySliceDep gives the block; else the union of its inputs' blocks' regions (an
    input's block index taken from the output's by the input's indices, 0 along a
    dimension it broadcasts)."""
    from dask.layers import ArraySliceDep
    # (concatenate: blocks joined along an index the output contracts, which the inputs'
    # check below refuses; with every index kept, as apply_ufunc's core dimensions in one
    # block, it joins nothing)
    if getattr(layer, "new_axes", None):
        raise _Unfollowed
    out = tuple(layer.output_indices)
    numblocks = getattr(layer, "numblocks", {})
    io_deps = getattr(layer, "io_deps", {})
    if reader:
        # (from_array's layer alone: the array, then the slices; a layer that fused more
        # into it, or a function of the array of the caller's, reads what it is not told)
        indexed = [(v, idx) for v, idx in layer.indices if idx is not None]
        if len(layer.indices) != 2 or len(indexed) != 1 or \
                not isinstance(io_deps.get(indexed[0][0]), ArraySliceDep):
            raise _Unfollowed
        v, idx = indexed[0]
        if any(c not in out for c in idx):
            raise _Unfollowed
        dep, pos = io_deps[v], tuple(out.index(c) for c in idx)
        return lambda i: tuple((s.start, s.stop) for s in dep[tuple(i[p] for p in pos)])
    inputs: list[tuple[Any, tuple, tuple]] = []
    for v, idx in layer.indices:
        if idx is None:  # a constant: a key every block takes, or a value
            ref = getattr(v, "key", None)
            if ref is not None:
                if (ref[0] if isinstance(ref, tuple) else ref) in sources:
                    raise _Unfollowed
                inputs.append((lambda i, ref=ref: box_of_key(ref), (), ()))
            continue
        if not isinstance(v, str) or v in io_deps or v not in derived:
            continue  # (block ids, block info; an input of another origin)
        if v in sources:
            raise _Unfollowed
        nb = tuple(numblocks.get(v, ()))
        if len(nb) != len(idx):
            raise _Unfollowed
        # (an index the output contracts: a block takes all of the input's blocks along
        # it, followed only where there is one, as apply_ufunc's core dimension in one
        # block: its block 0)
        if any(c not in out and n != 1 for c, n in zip(idx, nb)):
            raise _Unfollowed
        inputs.append((lambda i, v=v: box_of_key((v, *i)),
                       tuple(out.index(c) if c in out else -1 for c in idx), nb))
    whole = tuple(layer.dims[c] for c in out)
    one = [v for v, idx in layer.indices if isinstance(v, str) and v in maps]
    if len(inputs) == 1 and len(one) == 1 and inputs[0][1:] == (tuple(range(len(out))),
                                                                whole):
        return maps[one[0]]  # (elementwise on one input: its blocks' regions)

    def regions(i: tuple) -> _Box:
        box = None
        for get, pos, nb in inputs:
            box = _union(box, get(tuple(0 if n == 1 or q < 0 else i[q]
                                        for q, n in zip(pos, nb))))
        return box
    return regions


def _follow_tasks(layer: Any, names: set, boxes: dict, box_of_key: Any) -> None:
    """The regions of a (materialized) layer's tasks, in boxes: each the union of the
    regions of the keys it takes (the layer's own keys first where it takes them)."""
    for key in layer:
        stack, on = [key], set()
        while stack:
            k = stack[-1]
            if k in boxes:
                stack.pop()
                continue
            deps = _task_keys(layer[k], names)
            inner = [d for d in deps if d in layer and d not in boxes]
            if inner:
                if k in on:
                    raise _Unfollowed  # (a cycle: no graph dask runs)
                on.add(k)
                stack.extend(inner)
                continue
            box = None
            for d in deps:
                box = _union(box, box_of_key(d))
            boxes[k] = box
            stack.pop()


def _task_keys(task: Any, names: set) -> set:
    """The keys a task takes: its dependencies, or, in a task of dask's older tuple form
    ((getitem, (name, i, j), 0)), the tuples (name, *block) and strings naming one of
    names."""
    deps = getattr(task, "dependencies", None)
    if deps is not None:
        return set(deps)
    found: set = set()
    stack = [task]
    while stack:
        v = stack.pop()
        if isinstance(v, str) and v in names:
            found.add(v)
        elif isinstance(v, tuple) and v and isinstance(v[0], str) and v[0] in names:
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
