"""The read path of an Array: a selection's plan (chunkstore.engine.indexing) becomes an output
array, chunk batches fetched (prefetched on remote stores), decoded (in one GIL-free call a
batch where the codec has a batch kernel; straight into the output when a chunk lands there
whole and contiguous) and merged into it with the Cython kernels."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkstore.engine import scheduling
import chunkstore._core.merge as merge  # (mypy sees no attribute of the package: compiled)
from chunkstore._core.batch import Files
from chunkstore.engine.chunk_io import EngineState
from chunkstore.storage.base import getitems
from chunkstore.storage.pipelining import prefetch

if TYPE_CHECKING:
    from chunkstore._core.projection import OrthoPlan, PointsPlan
    from chunkstore.codecs.fastpath import BloscPath, ZPath
    from chunkstore.engine.indexing import Selection

    # files(idx, keys): the Files of a batch's chunks (see ReadPath._files)
    FilesMaker = Callable[[Sequence[int], list[str]], Files]

# Reads do less work per chunk than writes: helpers join only larger ones (see scheduling).
_INLINE = scheduling.READ_INLINE_BYTES


def _same_versions(a: Files, b: Files) -> bool:
    """Whether two Files of one batch read the same ranges of the same file versions."""
    return bool(np.array_equal(a.ranges, b.ranges) and np.array_equal(a.idents, b.idents))


class ReadPath(EngineState):
    """The read path of a ChunkEngine: :meth:`read` (a selection -> an array)."""

    def _read_ortho(self, plan: OrthoPlan, dest: np.ndarray) -> None:
        """Fill dest (shape plan.sel_shape, array dtype) with the selection."""
        n = plan.nchunks
        if n == 0:
            return
        keys, seq, groups = self._schedule(plan, inline_bytes=_INLINE)
        chunks, order, codec = self.chunks, self.order, self.codec
        direct = not self.is_object and not codec.filters
        obj = self.is_object

        fast = getattr(codec, "fast", None)
        # Uncompressed chunks that land whole in dest go from the file straight into it.
        read_into = (getattr(self.chunk_store, "read_into", None)
                     if fast is not None and fast.raw else None)
        files, src = self._sources(fast, keys, seq)

        def work(lo: int, hi: int) -> None:
            idx = seq[lo:hi]
            if read_into is not None:
                idx = self._read_into(plan, idx, keys, dest, read_into)
            if files is not None:
                batch = files(idx, keys)
                if batch is None:  # (shards too fresh for the kernels' check of their file)
                    self._refetched(plan, idx, keys, dest)
                    return
                self._fast_decode(plan, idx, batch, dest, keys, files=files)
                return
            got = getitems(src, [keys[i] for i in idx])
            buf = None  # one decode buffer per batch, reused chunk after chunk
            todo_i, todo_d = [], []
            for i in idx:
                k = keys[i]
                data = got.pop(k, None)  # drop encoded bytes as soon as they are used
                if data is None:
                    self._fill_missing(plan, i, dest, k)
                    continue
                if fast is not None:
                    todo_i.append(i)
                    todo_d.append(data)
                    continue
                view = merge.out_block(plan, i, dest, chunks, order) if direct else None
                if view is not None:
                    self._decode(data, k, out=view)
                    continue
                if obj:
                    chunk = self._decode(data, k)
                    csel, osel = plan.selections(i)
                    dest[osel] = chunk[csel]
                    continue
                if buf is None and not codec.check_stored(data, k, self.store):
                    chunk = self._decode(data, k)  # size unknown until decoded: no buffer
                else:
                    if buf is None:
                        buf = scheduling.take_scratch(chunks, self.dtype, order)
                    chunk = self._decode(data, k, out=buf)
                merge.gather(plan, i, chunk, dest)
            if buf is not None:
                scheduling.give_scratch(buf)
            if todo_i:
                self._fast_decode(plan, todo_i, todo_d, dest, keys)
        self._run_io(n, work, self._read_groups(groups), src, inline_bytes=_INLINE)

    def _read_into(self, plan: OrthoPlan, idx: Sequence[int], keys: list[str], dest: np.ndarray,
                   read_into: Callable[[list[str], list[np.ndarray]], list[int]]) -> list[int]:
        """Read the chunks of idx that the selection takes whole straight from their files
        into dest (store.read_into: preadv into the strided region); the rest, and any the
        store did not take, are returned for the ordinary path."""
        from chunkstore._core.zcodecs import whole_block
        rest, views, took = [], [], []
        for i in idx:
            v = whole_block(plan, i, dest, self.chunks)
            if v is not None and self.order == "F":
                v = v.T         # the file holds the chunk in F order: C order of the transpose
            if v is None:
                rest.append(i)
            else:
                views.append(v)
                took.append(i)
        if took:
            for i, status in zip(took, read_into([keys[i] for i in took], views)):
                if status != 0:
                    rest.append(i)
        return rest

    def _sources(self, fast: BloscPath | ZPath | None, keys: list[str], seq: Sequence[int]
                 ) -> tuple[FilesMaker | None, Any]:
        """(files, src): the kernels' Files maker (see _files), or None and the mapping to
        fetch chunks from (prefetching the touched keys in order where the store can)."""
        files = self._files(fast)
        if files is not None:  # local files, read by the kernels: nothing to fetch ahead
            return files, self.chunk_store
        return None, prefetch(self.chunk_store, [keys[i] for i in seq], self.codec.nbytes)

    def _files(self, fast: BloscPath | ZPath | None) -> FilesMaker | None:
        """files(idx, keys): the Files of a batch's chunks, for decode kernels that read them
        themselves (one GIL-free call a batch: reads scale over threads), where the chunk
        store is plain files (a directory, shards in one) and the codec has a batch kernel;
        else None. Worked out once per engine (its chunk store and codec never change)."""
        cached = self._files_for
        if cached is not None:
            return cached[0]
        chunk_files = getattr(self.chunk_store, "chunk_files", None)
        nbytes = self.codec.nbytes
        fn = None
        if (fast is not None and chunk_files is not None and nbytes <= self.codec.SMALL_CHUNK
                and chunk_files([], 0) is not None):
            # Larger files than a chunk can plausibly encode to go through the store and codec.
            maxlen = 2 * nbytes + 2**16
            fn = lambda idx, keys: chunk_files([keys[i] for i in idx], maxlen)  # noqa: E731
        self._files_for = (fn,)
        return fn

    def _fast_decode(self, plan: OrthoPlan | PointsPlan, idx: Sequence[int],
                     datas: Any, dest: np.ndarray, keys: list[str],
                     points: bool = False, files: FilesMaker | None = None) -> None:
        """The chunks of a batch decoded and merged in one GIL-free call (the codec's batch
        path, chunkstore.codecs.fastpath); datas: their bytes, or their Files, which the
        kernel reads itself. A chunk the kernel does not take (or cannot read) goes through
        the store and the codec, which decode it or raise the proper error for it. files:
        the function that made datas (see _files), to make them anew when the store re-read a
        shard's index meanwhile."""
        from_files = isinstance(datas, Files)
        if not from_files:
            for data, i in zip(datas, idx):  # a no-op for chunks of ordinary size
                self.codec.check_stored(data, keys[i], self.store)
        scratch = scheduling.take_scratch(self.chunks, self.dtype, self.order)
        fast = self.codec.fast
        kernel = fast.decode_points if points else fast.decode
        gather = merge.gather_points if points else merge.gather
        pos = restarts = 0
        got = None  # a batch of shards' inner chunks through getitems (see below)
        while pos < len(idx):
            failed = (kernel(plan, idx, datas, dest, scratch) if pos == 0 else
                      kernel(plan, idx[pos:], datas[pos:], dest, scratch))
            if failed < 0:
                break
            k = pos + failed
            i, key = idx[k], keys[idx[k]]
            shards = from_files and files is not None and datas.ranges is not None
            if not from_files:
                data = datas[k]
            elif shards and datas.ranges[k, 0] >= 0:
                if got is None:
                    # The whole batch through getitems, as before the file kernels: a range
                    # past a shard's end makes it re-read that shard's index and every chunk
                    # of the shard with it (a shard rewritten under a cached index). The
                    # kernel read the batch's other chunks from the versions it had, those
                    # already merged included: when a version changed, redo the batch.
                    got = getitems(self.chunk_store, [keys[j] for j in idx])
                    fresh = files(idx, keys)  # type: ignore[misc]
                    if fresh is None or not _same_versions(fresh, datas):
                        if fresh is None or restarts >= 2:
                            self._refetched(plan, idx, keys, dest, points)
                            break
                        datas, pos, got = fresh, 0, None
                        restarts += 1
                        continue
                data = got.get(key)
            else:
                data = getitems(self.chunk_store, [key]).get(key)
                if data is not None and shards:
                    # A chunk absent from its shard's version the batch was planned by (or
                    # the shard absent) is there now: the shard was written since, and the
                    # chunks of it merged already may be of the version before (a read
                    # showed a shard half old, half new). The batch again, each shard's
                    # chunks from one version.
                    self._refetched(plan, idx, keys, dest, points)
                    break
            if data is None:
                self._fill_missing(plan, i, dest, key, points)
            else:
                if from_files:
                    self.codec.check_stored(data, key, self.store)
                gather(plan, i, self._decode(data, key, out=scratch), dest)
            pos = k + 1
        scheduling.give_scratch(scratch)  # (not on error: the buffer is simply dropped)

    def _refetched(self, plan: OrthoPlan | PointsPlan, idx: Sequence[int], keys: list[str],
                   dest: np.ndarray, points: bool = False) -> None:
        """A batch's chunks read again through the store (each shard's from one version of
        it: see ShardedView.getitems), decoded and merged over whatever was merged before."""
        batch_i, batch_d = self._fetched(plan, idx, keys, dest, points)
        if batch_i:
            self._fast_decode(plan, batch_i, batch_d, dest, keys, points)

    def _fetched(self, plan: OrthoPlan | PointsPlan, idx: Sequence[int], keys: list[str],
                 dest: np.ndarray, points: bool = False) -> tuple[list[int], list[Any]]:
        """A batch's chunks through the store, for the batch kernel on their bytes (the file
        kernels could not take them, see chunk_files): (indices, bytes) of the present
        ones; the missing ones' part of dest filled."""
        got = getitems(self.chunk_store, [keys[i] for i in idx])
        batch_i, batch_d = [], []
        for i in idx:
            data = got.pop(keys[i], None)
            if data is None:
                self._fill_missing(plan, i, dest, keys[i], points)
            else:
                batch_i.append(i)
                batch_d.append(data)
        return batch_i, batch_d

    def _fill_missing(self, plan: OrthoPlan | PointsPlan, i: int, dest: np.ndarray, key: str,
                      points: bool = False) -> None:
        """A missing chunk: the fill value in its part of dest (or ChunkNotFoundError)."""
        self._missing(key)
        if self.is_object:
            # (the 0-d object_missing into a view, even of one element: assigned to an
            # element itself, the element became that 0-d array)
            sel = plan.selections(i)[1]
            sel = sel if isinstance(sel, tuple) else (sel,)
            if not any(s is Ellipsis for s in sel):
                sel = sel + (Ellipsis,)
            if self.object_missing_copied:
                fill = self.object_missing[()]
                copies = np.empty(dest[sel].shape, dtype=object)
                for i in range(copies.size):
                    copies.flat[i] = copy.deepcopy(fill)
                dest[sel] = copies
            else:
                dest[sel] = self.object_missing
        elif points:
            merge.fill_points(plan, i, dest, self.fill_item)
        else:
            merge.fill(plan, i, dest, self.fill_item)

    def _read_points(self, plan: PointsPlan, flat: np.ndarray) -> None:
        n = plan.nchunks
        keys, seq, groups = self._schedule(plan, inline_bytes=_INLINE)

        fast = getattr(self.codec, "fast", None)
        files, src = self._sources(fast, keys, seq)

        def work(lo: int, hi: int) -> None:
            idx = seq[lo:hi]
            if files is not None:
                batch = files(idx, keys)
                if batch is None:  # (shards too fresh for the kernels' check of their file)
                    self._refetched(plan, idx, keys, flat, points=True)
                    return
                self._fast_decode(plan, idx, batch, flat, keys, points=True, files=files)
                return
            got = getitems(src, [keys[g] for g in idx])
            todo_i, todo_d = [], []
            for g in idx:
                data = got.pop(keys[g], None)
                if data is None:
                    self._fill_missing(plan, g, flat, keys[g], points=True)
                    continue
                if fast is not None:
                    todo_i.append(g)
                    todo_d.append(data)
                    continue
                chunk = self._decode(data, keys[g])
                if self.is_object:
                    csel, pts = plan.selections(g)
                    flat[pts] = chunk[csel]
                else:
                    merge.gather_points(plan, g, chunk, flat)
            if todo_i:
                self._fast_decode(plan, todo_i, todo_d, flat, keys, points=True)
        self._run_io(n, work, self._read_groups(groups), src, inline_bytes=_INLINE)

    def read(self, sel: Selection, out: Any = None, fields: FieldNames = None) -> Any:
        """The values of a normalized selection (chunkstore.engine.indexing), read chunk by
        chunk: a new array, a scalar, or ``out`` filled; ``fields`` of a structured dtype
        (one name: that field's values; a list, even of one: a structured array, as NumPy's
        ``a["f"]`` and ``a[["f"]]``)."""
        dtype = self.dtype
        rdtype = dtype if fields is None else _field_dtype(dtype, fields, self.name)
        # (straight into out only of the very dtype: the kernels copy whole records, and a
        # structured out of the same fields at other offsets, or NumPy's aligned layout,
        # got them swapped or failed in a kernel; such an out is assigned field by field)
        if out is not None and not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, got {type(out).__name__} (reading "
                            f"array {self.name!r})")
        dest: Any = out  # (an ndarray or None, as checked)
        direct_out = (dest is not None and fields is None and sel.post is None
                      and dest.dtype == rdtype)
        if out is not None:
            if out.shape != sel.shape:
                raise ValueError(f"out has shape {out.shape}, but the selection has shape "
                                 f"{sel.shape} (reading array {self.name!r})")
            if out.dtype != rdtype and not _same_fields(out.dtype, rdtype):
                raise ValueError(f"out has dtype {out.dtype}, expected {rdtype} (reading "
                                 f"array {self.name!r})")
            if not out.flags.writeable:
                raise ValueError(f"out is read-only (reading array {self.name!r})")
        if sel.kind == "ortho":
            if direct_out:
                buf = np.expand_dims(dest, sel.drop) if sel.drop else dest
            else:
                # F-ordered arrays read back F-ordered, as in zarr-python 2.
                buf = np.empty(sel.plan.sel_shape, dtype=dtype, order=self.order)
            self._read_ortho(sel.plan, buf)
            # (a 0-d array, not a scalar, when every axis is dropped)
            result = np.squeeze(buf, axis=sel.drop) if sel.drop else buf
            result = _apply_post(result, sel.post)
        else:
            if direct_out and dest.flags.c_contiguous:
                flat = dest.reshape(-1)
            else:
                flat = np.empty(sel.plan.npoints, dtype=dtype)
                direct_out = False
            self._read_points(sel.plan, flat)
            result = flat.reshape(sel.shape)
        if fields is not None:
            result = _select_fields(result, fields)
        if out is not None:
            if not direct_out:
                out[...] = result
            return out
        if sel.scalar:
            return result[()]
        return result


#: field names of a structured selection: one name (that field's values) or a list of
#: names (a structured array of those fields, even of one), as NumPy's a["f"] / a[["f"]]
FieldNames = str | list[str] | None


def _field_dtype(dtype: np.dtype, fields: str | list[str], name: str | None = None
                 ) -> np.dtype:
    """The dtype of fields of dtype (name: the array's, for errors)."""
    names = [fields] if isinstance(fields, str) else fields
    where = "" if name is None else f" (array {name!r})"
    if dtype.names is None:
        raise IndexError(f"field selection {fields!r} needs a structured dtype, not "
                         f"{dtype}{where}")
    for f in names:
        if f not in dtype.names:
            raise IndexError(f"no field {f!r} in dtype {dtype}{where}; fields are "
                             f"{dtype.names}")
    if isinstance(fields, str):
        return dtype[fields]
    return np.dtype([(f, dtype[f]) for f in names])


def _same_fields(a: np.dtype, b: np.dtype) -> bool:
    """Whether two structured dtypes have the same fields in the same order, offsets and
    padding aside (NumPy's a[["f", "g"]] keeps the whole record's layout)."""
    return (a.names is not None and a.names == b.names
            and all(a[n] == b[n] for n in a.names))


def _select_fields(a: np.ndarray, fields: str | list[str]) -> np.ndarray:
    if isinstance(fields, str):
        return a[fields]
    out = np.empty(a.shape, dtype=_field_dtype(a.dtype, fields))
    for f in fields:
        out[f] = a[f]
    return out


def _apply_post(a: np.ndarray, post: tuple[str, Any] | None) -> np.ndarray:
    if post is None:
        return a
    kind, arg = post
    if kind == "newaxis":
        return a.reshape(arg)
    if kind == "transpose":
        return a.transpose(arg)
    return a[arg]
