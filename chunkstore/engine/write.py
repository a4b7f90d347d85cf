"""The write path of an Array: each chunk a selection touches is built whole from the value,
or read-modified-written, encoded (in one GIL-free call a batch where the codec has a batch
kernel) and stored, or deleted when it is all fill value; plus what resize and append need
(trimming cut chunks, rolling back a failed append)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkstore.engine import indexing as ix
from chunkstore.engine import scheduling
import chunkstore._core.merge as merge  # (mypy sees no attribute of the package: compiled)
from chunkstore.engine.read import FieldNames, ReadPath, _field_dtype
from chunkstore.engine.chunk_io import object_element
from chunkstore.errors import with_context
from chunkstore.storage.base import delitems, getitems
from chunkstore.storage.pipelining import prefetch, store_items, write_behind

if TYPE_CHECKING:
    from chunkstore._core.projection import OrthoPlan, PointsPlan
    from chunkstore.engine.chunk_io import PartialLocks
    from chunkstore.engine.indexing import Selection
    from chunkstore.storage.pipelining import WriteBehind


def object_all_fill(chunk: np.ndarray, fill: Any) -> bool:
    """True when every element of an object chunk is the fill value, so that the chunk can
    be left out of the store (it then reads back as the fill value, element for element).

    A None fill value (Zarr v2 ``fill_value: null``) matches nothing, as in zarr-python 2:
    such an array has no fill value, and its missing chunks read as None, which no codec
    stores as such. Otherwise an element matches when it is the fill value or equals it
    with the same type (a str fill such as ``""`` matches str elements, NumPy's ``np.str_``
    included), compared with ``==`` as zarr-python 3 does for ``string`` and object data,
    but never across types (``0`` is not a ``False`` or ``0.0`` fill) nor through an
    element's elementwise ``==`` (an ndarray element never matches)."""
    if fill is None:
        return False
    for e in chunk.ravel(order="K"):
        if e is not fill and not _same_value(e, fill):
            return False
    return True


def _plain_elements(chunk: np.ndarray) -> np.ndarray | None:
    """An object chunk's copy with NumPy's str_ and bytes_ elements as str and bytes, or
    None where it has none."""
    if chunk.dtype.names is not None or not any(
            isinstance(e, (np.str_, np.bytes_)) for e in chunk.flat):
        return None
    out = np.empty(chunk.shape, dtype=object)
    for i, e in enumerate(chunk.flat):
        out.flat[i] = str(e) if isinstance(e, np.str_) else \
            bytes(e) if isinstance(e, np.bytes_) else e
    return out


def _same_value(e: Any, fill: Any) -> bool:
    """Whether object element e is fill value fill, as a reader would tell them apart: of
    the same type (str and bytes: of their kind), equal, floats with the same sign (-0.0 is
    not a 0.0 fill), and lists, tuples and dicts item by item so (``[0.0]`` is not a
    ``[0]`` fill, nor ``{"a": True}`` a ``{"a": 1}`` one: by ``==`` they were, the chunk
    was left out, and they read back as the fill value)."""
    if isinstance(fill, (str, bytes)):
        if not isinstance(e, str if isinstance(fill, str) else bytes):
            return False
    elif type(e) is not type(fill):
        return False
    elif isinstance(fill, float):
        return bool(e == fill) and math.copysign(1.0, e) == math.copysign(1.0, fill)
    elif isinstance(fill, complex):
        return _same_value(e.real, fill.real) and _same_value(e.imag, fill.imag)
    elif isinstance(fill, (list, tuple)):
        return len(e) == len(fill) and all(_same_value(a, b) for a, b in zip(e, fill))
    elif isinstance(fill, dict):
        return e.keys() == fill.keys() and all(_same_value(e[k], fill[k]) for k in fill)
    try:
        same = e == fill
    except Exception:
        return False
    return (type(same) is bool or isinstance(same, np.bool_)) and bool(same)



def by_dtype(value: Any, dtype: np.dtype) -> np.ndarray:
    """value (not an ndarray) converted with dtype as NumPy converts it into an array of
    that dtype: a list element by element (converted by itself first, [2**64 - 1, 5] became
    float64, [300] int64, and lost values or wrapped in the cast), a scalar by NumPy's
    scalar rule, which refuses what does not fit (np.int64(300) into i1). Raises NumPy's
    errors."""
    if isinstance(value, (int, float, complex, np.generic)):
        one = np.empty((), dtype=dtype)
        one[()] = value
        return one
    return np.asarray(value, dtype=dtype)

class WritePath(ReadPath):
    """The write path of a ChunkEngine: :meth:`write` (a value into a selection), and
    what resize and append need. Built on the read path (a read-modify-write of some fields,
    or of an object array, reads the selection first)."""

    def value_array(self, value: Any, fields: FieldNames = None) -> np.ndarray:
        """value as an ndarray of the dtype its elements are stored as (the array's, or the
        field's; an object array's: as NumPy makes it), before a reshaping of it: a list
        converted as it is first ([2**64 - 1, 5] as float64, [300] as int64) lost values,
        or wrapped, in the cast to the array's dtype. A value that does not fit is an
        error naming the array."""
        dtype = self.dtype if fields is None else _field_dtype(self.dtype, fields, self.name)
        if dtype.subdtype is not None:
            dtype = dtype.subdtype[0]
        if dtype.kind == "O" or isinstance(value, np.ndarray):
            return np.asanyarray(value)
        try:
            return by_dtype(value, dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise with_context(e, f"cannot store value in array {self.name!r} of dtype "
                                   f"{dtype}: {e}") from e

    def _prepare_value(self, value: Any, shape: tuple[int, ...], fields: FieldNames = None,
                       element: bool = False) -> np.ndarray:
        """Convert value to the array dtype and check it broadcasts, before any I/O.
        element: the selection is one element, by an int for every dimension (no Ellipsis),
        which NumPy fills by its scalar-assignment rule, not by broadcasting."""
        dtype = self.dtype if fields is None else _field_dtype(self.dtype, fields, self.name)
        shape = tuple(shape)
        if dtype.subdtype is not None:
            # A sub-array field: values carry the field's own trailing dimensions.
            dtype, sub = dtype.subdtype
            shape = shape + sub
        if dtype.kind == "O" and not shape and not (isinstance(value, np.ndarray) and
                                                   value.ndim == 0):
            # One element of an object array: the value itself (a list, an ndarray) is the
            # element, as in NumPy; a NumPy str or bytes scalar as the Python one (the vlen
            # codecs take str and bytes only)
            v: np.ndarray = np.empty((), dtype=object)
            v[()] = value.item() if isinstance(value, (np.str_, np.bytes_)) else value
            return v
        try:
            if dtype.kind != "O" and isinstance(value, (np.generic, int, float, complex)):
                # A scalar (a NumPy one too) converts by NumPy's scalar rule, which refuses
                # what does not fit (np.int64(70000) into int16, NaN into int32), where
                # asarray's cast would store a wrapped value
                v = np.empty((), dtype=dtype)
                v[()] = value
            else:
                v = np.asarray(value, dtype=dtype)
        except (ValueError, TypeError, OverflowError) as e:
            if dtype.kind == "O":
                return self._object_elements(value, shape)
            raise with_context(e, f"cannot store value in array {self.name!r} of dtype "
                                   f"{dtype}: {e}") from e
        if element and v.ndim and v.size == 1 and not shape:
            # A sequence of one item for one element: NumPy 2 refuses it, NumPy 1 takes it
            # with a warning; assign it to a one-element probe to do as this NumPy does.
            # (Larger sequences fail the broadcast check below.)
            try:
                np.empty(1, dtype=dtype)[0] = value
            except (ValueError, TypeError) as e:
                raise ValueError(f"could not broadcast value of shape {v.shape} to one "
                                 f"element of array {self.name!r}: {e}") from e
        elif v.ndim > len(shape) and isinstance(value, (list, tuple)) and dtype.kind != "O":
            # nested lists deeper than the selection: NumPy refuses them (an array's
            # leading unit dimensions are dropped below, as NumPy drops them)
            raise ValueError(f"could not broadcast a list of {v.ndim} nested levels (shape "
                             f"{v.shape}) to a selection of shape {shape} in array "
                             f"{self.name!r}: setting an array element with a sequence")
        while v.ndim > len(shape) and v.shape[0] == 1:
            v = v[0]
        if v.ndim:
            try:
                ok = np.broadcast_shapes(v.shape, shape) == shape
            except ValueError:
                ok = False
            if not ok:
                if dtype.kind == "O":
                    return self._object_elements(value, shape)
                # zarr-python 3's opening words, then which shapes and where
                raise ValueError(f"Attempting to set a selection of shape {shape} with a "
                                 f"value of shape {v.shape}: could not broadcast the value "
                                 f"to the selection in array {self.name!r}")
        return v

    def _object_elements(self, value: Any, shape: tuple[int, ...]) -> np.ndarray:
        """value as an object array of the selection's shape by NumPy's own assignment rule
        (sequences that do not broadcast become elements, e.g. one list per element)."""
        v = np.empty(shape, dtype=object)
        try:
            v[...] = value
        except (ValueError, TypeError) as e:
            raise ValueError(f"could not store value in selection of shape {shape} in array "
                             f"{self.name!r}: {e}") from e
        return v

    def write(self, sel: Selection, value: Any, fields: FieldNames = None) -> None:
        """Write value into a normalized selection: each touched chunk built whole or
        read-modified-written, encoded and stored (or deleted when all fill value), under the
        write's locks."""
        self.check_data_writable()
        v = self._prepare_value(value, sel.shape, fields, element=sel.scalar)
        if fields is not None:
            # Structured field write: read the selection, update the fields, write back.
            with self.locked(sel):
                self.check_metadata()
                cur = np.array(self.read(sel), dtype=self.dtype, copy=True)
                if isinstance(fields, str):
                    cur[fields] = v
                else:
                    for f in fields:
                        cur[f] = v[f]
                self._set_prepared(sel, cur, locked=True)
            return
        self._set_prepared(sel, v)

    def write_encoded(self, sel: Selection, encoded: dict[str, Any]) -> None:
        """Store chunks already encoded, under the write's locks: ``encoded`` maps the key
        of every chunk the ortho selection sel covers (each whole, or reaching the array's
        end) to its stored bytes. The caller vouches for them: their encoding form equals
        this array's (:meth:`encoding_form`), they decode, and none is all fill where empty
        chunks are not written (see chunkstore.engine.streaming). MetadataChanged when
        another handle changed the metadata meanwhile (nothing is written then)."""
        self.check_data_writable()
        with self.locked(sel, list(encoded)):
            self.check_metadata()
            self._store_chunks(encoded, [])

    def _set_prepared(self, sel: Selection, v: np.ndarray, locked: bool = False) -> None:
        post = sel.post
        if post is not None and post[0] == "index":
            # Mixed fancy assignment: read the orthogonal box, assign in memory, write it.
            box = ix.Selection("ortho", sel.plan, tuple(
                n for d, n in enumerate(sel.plan.sel_shape) if d not in sel.drop), sel.drop)
            with (contextlib.nullcontext() if locked else self.locked(sel)):
                if not locked:
                    self.check_metadata()
                cur = np.array(self.read(box), copy=True)
                cur[post[1]] = v
                self._set_prepared(box, cur, locked=True)
            return
        if post is not None and post[0] == "transpose":
            v = np.broadcast_to(v, sel.shape).transpose(np.argsort(post[1]))
        elif post is not None and post[0] == "newaxis":
            v = np.broadcast_to(v, sel.shape).reshape(
                tuple(n for d, n in enumerate(sel.plan.sel_shape) if d not in sel.drop))
        elif v.ndim and v.shape != sel.shape:
            # A value of fewer dims broadcasts against the selection's shape (as NumPy's):
            # give it that shape first, so _write_ortho's unit axes for the dropped (int)
            # dimensions land in the right places.
            v = np.broadcast_to(v, sel.shape)
        keys = self._touched_keys(sel)
        split = None if locked else self._split_locks(sel)
        with (contextlib.nullcontext() if locked else split[0] if split
              else self.locked(sel, keys)):
            if not locked:
                self.check_metadata()
            if sel.kind == "ortho":
                self._write_ortho(sel.plan, keys, v, sel.drop, split and split[1])
            else:
                self._write_points(sel.plan, keys, v, sel.shape)

    def _store_chunks(self, to_set: dict[str, bytes], to_del: list[str],
                      sink: WriteBehind | None = None) -> None:
        if to_set:
            store_items(self.chunk_store, sink, to_set)
        if to_del:
            delitems(self.chunk_store, to_del)

    def _finish_chunk(self, key: str, chunk: np.ndarray, to_set: dict[str, bytes],
                      to_del: list[str]) -> None:
        if not self.write_empty_chunks and (
                object_all_fill(chunk, self.fill_value) if self.is_object
                else merge.is_all_fill(chunk, self.fill_item)):
            to_del.append(key)
        else:
            to_set[key] = self._encode(key, chunk)

    def _encode(self, key: str, chunk: np.ndarray) -> bytes:
        """chunk encoded for the store key key; a codec's error says which array and
        chunk it was (as a decode's ChunkDecodeError does)."""
        try:
            return self.codec.encode(chunk)
        except TypeError as e:
            # (NumPy's str_ and bytes_ among the elements, as list(u_array) gives them: the
            # vlen codecs of numcodecs 0.16 take str and bytes alone; the elements as those)
            plain = _plain_elements(chunk) if self.is_object else None
            if plain is not None:
                try:
                    return self.codec.encode(plain)
                except Exception:
                    pass
            raise with_context(e, f"cannot encode chunk {key!r} of array {self.name!r}: "
                                  f"{e}") from e
        except Exception as e:
            raise with_context(e, f"cannot encode chunk {key!r} of array {self.name!r}: "
                                  f"{e}") from e

    def _write_ortho(self, plan: OrthoPlan, keys: list[str], v: np.ndarray,
                     drop: tuple[int, ...], partial_locks: PartialLocks | None = None) -> None:
        n = plan.nchunks
        if n == 0:
            return
        full = self.covered(plan)
        edge = self._edges(plan.chunk_coords())
        # chunks that start as fill when nothing is stored: partly covered or at the edge
        prefill = (edge.astype(bool) | ~full).view(np.uint8)
        scalar = v.ndim == 0
        value = np.broadcast_to(np.expand_dims(v, drop) if drop and v.ndim else v,
                                plan.sel_shape)
        # A scalar covering interior chunks: every such chunk encodes to the same bytes.
        shared: bytes | None = None
        if scalar and not self.is_object and full.any():
            if not self.write_empty_chunks and merge.is_all_fill(v.reshape(1), self.fill_item):
                shared = None
            else:
                c = np.empty(self.chunks, dtype=self.dtype, order=self.order)
                c[...] = v
                shared = self._encode(keys[int(np.flatnonzero(full)[0])], c)
        scalar_is_fill = scalar and not self.is_object and shared is None and full.any()
        errors_first = self.is_object  # object encoders may fail on values: encode all first
        # The chunks of an array with a batch path (Blosc, zstd, gzip, zlib, raw) are decoded
        # (if partly covered and stored), merged with the value and encoded in one GIL-free
        # call a batch.
        # (not for a view padding new edge chunks with the array's fill value: _new_chunk)
        fast = None if self.is_object or self.pad_fill is not None else \
            getattr(self.codec, "fast", None)
        if fast is not None and not fast.can_encode:
            fast = None
        coords = plan.chunk_coords() if self.pad_fill is not None else None

        _, seq, groups = self._schedule(plan, keys)
        split = partial_locks is not None and groups is None and not errors_first
        # (a split write reads each partial chunk only once it holds that chunk's lock)
        # the chunk store, or a pipelining.Prefetch over it (no Mapping: it has getitems)
        # (read as the store holds them now: live_chunk_store, past any cache)
        live = self.layout.live_chunk_store
        src: Any = live if split else prefetch(
            live, [keys[i] for i in seq if not full[i]], self.codec.nbytes)
        sink = None if errors_first else write_behind(self.chunk_store)

        # work returns (to_set, to_del) when errors_first (stored by the caller), else None
        def work(lo: int, hi: int) -> Any:
            idx = seq[lo:hi]
            need = [keys[i] for i in idx if not full[i]]
            existing = getitems(src, need) if need else {}
            to_set: dict[str, bytes] = {}
            to_del: list[str] = []
            todo, olds = [], []
            for i in idx:
                k = keys[i]
                if full[i] and scalar and not edge[i] and not self.is_object:
                    if scalar_is_fill:
                        to_del.append(k)
                    else:
                        # (mypy: shared is not None when the scalar is not all fill)
                        to_set[k] = shared  # type: ignore[assignment]
                    continue
                if fast is not None:
                    todo.append(i)
                    olds.append(None if full[i] else existing.get(k))
                    continue
                at = None if coords is None else coords[i]
                if full[i]:
                    chunk = self._new_chunk(at) if edge[i] else np.empty(
                        self.chunks, dtype=self.dtype, order=self.order)
                else:
                    data = existing.get(k)
                    chunk = (self._new_chunk(at) if data is None
                             else self._decode(data, k, writable=True))
                if self.is_object:
                    csel, osel = plan.selections(i)
                    chunk[csel] = value[osel]
                else:
                    merge.scatter(plan, i, value, chunk)
                self._finish_chunk(k, chunk, to_set, to_del)
            if todo:
                self._fast_encode(plan, todo, olds, value, keys, prefill, to_set, to_del)
            if errors_first:
                return to_set, to_del
            self._store_chunks(to_set, to_del, sink)

        if split:
            # The whole chunks first, then the partly covered ones under their chunk locks,
            # all at once: the write takes locks and releases none before the end (two-phase),
            # so it is serialized with every write it overlaps. (Partial chunks taken in two
            # groups, the first chunk row before the whole chunks and the last row after,
            # let a write that touches the box's first and last rows but none of its whole
            # chunks (points, index arrays, strided slices, in another process) land between
            # the groups: one write's value in one part of the overlap, the other's in the
            # other part.)
            coords = plan.chunk_coords()
            part = ~full

            def step(locked: bool) -> None:
                # Partial chunks are fetched only now (under their locks), and every PUT of
                # a locked step lands (or raises) before its locks are released.
                nonlocal src
                src = prefetch(live, [keys[i] for i in seq if not full[i]], self.codec.nbytes)
                self._run_io(len(seq), work, None, src, sink, flush=locked)

            try:
                for sub in (None, part):
                    seq = np.flatnonzero(full if sub is None else sub).tolist()
                    if seq and sub is None:
                        step(False)
                    elif seq:
                        # (mypy: split implies partial_locks is not None)
                        with partial_locks(coords[seq]):  # type: ignore[misc]
                            step(True)
            except BaseException:
                if sink is not None:  # no write may land after the call returned
                    with contextlib.suppress(Exception):
                        sink.flush()
                raise
            if sink is not None:
                sink.flush()
            return
        if errors_first:
            try:
                results = [work(lo, min(n, lo + scheduling.MAX_BATCH))
                           for lo in range(0, n, scheduling.MAX_BATCH)]
            finally:
                if src is not live:
                    src.close()
            for to_set, to_del in results:
                self._store_chunks(to_set, to_del)
        else:
            self._run_io(n, work, groups, src, sink)

    def _fast_encode(self, plan: OrthoPlan, idx: list[int], olds: list[bytes | None],
                     value: np.ndarray, keys: list[str], prefill: np.ndarray,
                     to_set: dict[str, bytes], to_del: list[str]) -> None:
        """Chunks idx (olds: their stored bytes where partly covered, else None) merged with
        value and encoded in one GIL-free call (the codec's batch path). A chunk the kernel
        cannot decode or encode goes through the codec, which raises the proper error for
        it (or takes data the kernel does not)."""
        scratch = scheduling.take_scratch(self.chunks, self.dtype, self.order)
        drop = not self.write_empty_chunks
        fast = self.codec.fast
        pos = 0
        while pos < len(idx):
            out: list[bytes | None] = []
            failed = fast.encode(plan, idx[pos:], value, scratch, prefill, olds[pos:],
                                 self.fill_item, drop, out)
            for i, data in zip(idx[pos:], out):
                if data is None:
                    to_del.append(keys[i])
                else:
                    to_set[keys[i]] = data
            if failed < 0:
                break
            i, old = idx[pos + failed], olds[pos + failed]
            chunk = (self._new_chunk() if old is None
                     else self._decode(old, keys[i], writable=True))
            merge.scatter(plan, i, value, chunk)
            self._finish_chunk(keys[i], chunk, to_set, to_del)
            pos += failed + 1
        scheduling.give_scratch(scratch)

    def _write_points(self, plan: PointsPlan, keys: list[str], v: np.ndarray,
                      shape: tuple[int, ...]) -> None:
        flat = np.ascontiguousarray(np.broadcast_to(v, shape)).reshape(-1)
        n = plan.nchunks
        results = []

        _, seq, groups = self._schedule(plan)

        src = prefetch(self.layout.live_chunk_store, [keys[g] for g in seq], self.codec.nbytes)
        coords = plan.chunk_coords() if self.pad_fill is not None else None

        def work(lo: int, hi: int) -> None:
            idx = seq[lo:hi]
            existing = getitems(src, [keys[g] for g in idx])
            to_set: dict[str, bytes] = {}
            to_del: list[str] = []
            for g in idx:
                k = keys[g]
                data = existing.get(k)
                chunk = (self._new_chunk(None if coords is None else coords[g]) if data is None
                         else self._decode(data, k, writable=True))
                if self.is_object:
                    csel, pts = plan.selections(g)
                    if chunk.ndim:
                        chunk[csel] = flat[pts]
                    else:  # (the one element: as an array it would be stored as the element)
                        chunk[()] = flat[pts].reshape(-1)[-1]
                else:
                    merge.scatter_points(plan, g, flat, chunk)
                self._finish_chunk(k, chunk, to_set, to_del)
            if self.is_object:
                results.append((to_set, to_del))
            else:
                self._store_chunks(to_set, to_del)
        self._run_io(n, work, groups, src)
        for to_set, to_del in results:
            self._store_chunks(to_set, to_del)

    def trim_plan(self, old: Sequence[int], new: Sequence[int], chunks: Sequence[int]
                  ) -> tuple[list[str], list[tuple[int, ...]]]:
        """(keys of the stored chunks wholly past ``new``, coords of those it cuts)."""
        stale, cut = [], []
        for c in self.stored_chunks():
            starts = [ci * L for ci, L in zip(c, chunks)]
            if any(s >= n for s, n in zip(starts, new)):
                stale.append(self._chunk_key(c))
            elif any(s + L > n and n < o for s, L, n, o in zip(starts, chunks, new, old)):
                cut.append(c)
        return stale, cut

    def trim_chunks(self, old: Sequence[int], new: Sequence[int], chunks: Sequence[int],
                    plan: tuple[list[str], list[tuple[int, ...]]] | None = None,
                    keep: bool = False) -> None:
        """After a shrink from ``old`` to ``new``: delete the chunks wholly past the new shape
        and reset the cut-off part of boundary chunks to the fill value (a boundary chunk
        then all fill value is dropped, as any chunk written so, unless write_empty_chunks).
        keep: stored whatever it holds (a new fill value's reset of the edge chunks'
        padding: their values inside were written as data, unequal to the fill value
        then; dropped, they read as the next fill value set)."""
        stale, cut = plan if plan is not None else self.trim_plan(old, new, chunks)
        delitems(self.chunk_store, stale)
        for c in cut:  # the caller holds the array's exclusive lock
            k = self._chunk_key(c)
            try:
                data = self.layout.live_chunk_store[k]
            except KeyError:
                continue
            chunk = self._decode(data, k, writable=True)
            for d, (ci, L, n) in enumerate(zip(c, chunks, new)):
                if ci * L + L > n:
                    idx = [slice(None)] * self.ndim
                    idx[d] = slice(n - ci * L, None)
                    # (mypy: fill_item is None only for object arrays)
                    chunk[tuple(idx)] = (
                        object_element(self.fill_value) if self.is_object
                        else self.fill_item.reshape(()))  # type: ignore[union-attr]
            to_set: dict[str, bytes] = {}
            to_del: list[str] = []
            if keep:
                to_set[k] = self._encode(k, chunk)
            else:
                self._finish_chunk(k, chunk, to_set, to_del)
            self._store_chunks(to_set, to_del)
