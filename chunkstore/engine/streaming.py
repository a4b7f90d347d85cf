"""Array-to-array assignment in bounded memory: ``out[box] = z`` with z a chunkstore Array.

Instead of reading all of z into memory and then writing it, the box is cut into blocks
along the destination's chunk boundaries (so that every block covers whole destination
chunks where the box does, and needs no read-modify-write), each block at most about one
batch of chunks per pool thread; each block is read from z and written to out, both on the
thread pool. Peak memory is one block plus what its read and write hold at once.

Where the two arrays store chunks alike (equal encoding forms: the same chunk shape, stored
dtype and order, and compressors of one family, say a Zarr v2 zstd array copied into a
sharded v3 zstd array of the same inner chunks) and the box lies on the chunk grid, a block's
stored chunks are copied as they are instead of decoded and encoded again. Each is still
decoded once, on the pool, to check it: a chunk that does not decode raises the read's error
naming its key, and a block with a missing chunk, a chunk that is all the destination's fill
value (which the destination would not store), or one whose part past the destination's end
is not its fill value (it would show if the array grew) is read and written the ordinary way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

import chunkstore._core.merge as merge  # (mypy sees no attribute of the package: compiled)
from chunkstore import config
from chunkstore.engine import indexing as ix
from chunkstore.engine import scheduling
from chunkstore.engine.chunk_io import MetadataChanged
from chunkstore.storage.base import getitems

# Bytes of one block per pool thread (at least one destination chunk per thread is taken).
BLOCK_BYTES_PER_THREAD = 4 * 2**20


def slice_box(selection: Any, shape: Sequence[int]) -> list[tuple[int, int]] | None:
    """[(start, stop)] per dimension for a selection made only of step-1 slices and at most
    one Ellipsis, else None (the caller then takes the ordinary path)."""
    sel = selection if isinstance(selection, tuple) else (selection,)
    if any(s is not Ellipsis and not isinstance(s, slice) for s in sel):
        return None
    if sum(s is Ellipsis for s in sel) > 1:
        return None
    if Ellipsis in sel:
        i = sel.index(Ellipsis)
        sel = sel[:i] + (slice(None),) * (len(shape) - len(sel) + 1) + sel[i + 1:]
    if len(sel) > len(shape):
        return None
    sel = sel + (slice(None),) * (len(shape) - len(sel))
    box = []
    for s, n in zip(sel, shape):
        start, stop, step = s.indices(n)
        if step != 1:
            return None
        box.append((start, max(start, stop)))
    return box


def _blocks(box: Sequence[tuple[int, int]], chunks: Sequence[int], itemsize: int,
            budget: int) -> Iterator[list[tuple[int, int]]]:
    """Boxes covering box, cut at multiples of chunks: whole along the trailing dimensions,
    chunk rows along the leading ones, as many chunk rows in the last cut dimension as fit
    the budget."""
    nd = len(box)
    ext = [b - a for a, b in box]
    # the first dimension d whose chunk-row block (one chunk along 0..d, all after d) fits
    d = 0
    while d < nd - 1 and math.prod(ext[d + 1:]) * min(chunks[d], ext[d]) * math.prod(
            min(c, e) for c, e in zip(chunks[:d], ext[:d])) * itemsize > budget:
        d += 1
    row = math.prod(min(c, e) for c, e in zip(chunks[:d], ext[:d])) * math.prod(ext[d + 1:])
    per = max(1, budget // max(1, row * chunks[d] * itemsize))  # chunks along d per block

    def cuts(k: int, step: int) -> list[tuple[int, int]]:
        a, b = box[k]
        out, x = [], a
        while x < b:
            y = min(b, (x // step + 1) * step)
            out.append((x, y))
            x = y
        return out

    lead = [cuts(k, chunks[k]) for k in range(d)] + [cuts(d, chunks[d] * per)]
    for parts in itertools.product(*lead):
        yield list(parts) + list(box[d + 1:])


# (dst and src are Arrays, typed Any: chunkstore.engine.array imports this module, and
# tests/test_import_cycles.py counts type-checking imports too)
def assign(dst: Any, box: Sequence[tuple[int, int]], src: Any) -> None:
    """dst[box] = src[...] block by block (src: an Array of the box's shape)."""
    if not box:   # 0-d
        dst[...] = src[...]
        return
    chunks = dst.write_chunks    # whole shards, not inner chunks, are what a write stores
    threads = max(1, config.get("threads") or 1)
    itemsize = max(1, dst.dtype.itemsize)
    chunk_bytes = math.prod(chunks) * itemsize
    # a batch's worth per thread, and at least a chunk per thread so the pool has work
    budget = max(BLOCK_BYTES_PER_THREAD, chunk_bytes) * threads
    as_stored = _stored_alike(dst, box, src)
    for blk in _blocks(box, chunks, itemsize, budget):
        dsel = tuple(slice(a, b) for a, b in blk)
        ssel = tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(blk, box))
        # (each block with one engine of each array: see chunkstore.engine.core)
        d, s = dst._handle.current(), src._handle.current()
        encoded = (_stored_chunks(d, dsel, s, ssel)
                   if as_stored and _same_form(d, s) else None)
        if encoded is not None:
            sel = ix.basic_or_fancy(dsel, d.shape, d.chunks, dst.name)
            try:
                d.write_encoded(sel, encoded)
                continue
            except MetadataChanged:
                pass   # another handle resized dst: the ordinary write plans again
        # (reading the next block while writing this one was measured slower: the read
        # takes the pool's idle threads, and the write then runs its shards on one thread)
        dst[dsel] = src[ssel]


def _stored_alike(dst: Any, box: Sequence[tuple[int, int]], src: Any) -> bool:
    """Can dst[box] = src copy src's stored chunks as they are? Equal encoding forms, and
    the box on dst's chunk grid: it starts on a chunk boundary, and where src's last chunk
    is partial, the box ends at dst's end (so that chunk is dst's partial last chunk too)."""
    d, s = dst._engine, src._engine
    if not _same_form(d, s):
        return False
    return all(a % c == 0 and ((b - a) % c == 0 or b == n)
               for (a, b), c, n in zip(box, d.chunks, dst.shape))


def _same_form(d: Any, s: Any) -> bool:
    """Do engines d and s (ChunkEngines) store chunks alike (chunk shape and encoding)?"""
    form = d.encoding_form()
    return form is not None and form == s.encoding_form() and d.chunks == s.chunks


def _stored_chunks(d: Any, dsel: tuple[slice, ...], s: Any,
                   ssel: tuple[slice, ...]) -> dict[str, Any] | None:
    """{dst chunk key: src's stored bytes} for the chunks of dst[dsel] = src[ssel] (d, s:
    their engines), each decoded once to check it (see the module's docstring); None where
    the block must go the ordinary way."""
    chunks = d.chunks
    ranges = [range(x.start // c, -(-x.stop // c)) for x, c in zip(ssel, chunks)]
    scoords = np.array(list(itertools.product(*ranges)), dtype=np.int64).reshape(
        -1, len(chunks))
    shift = np.array([(a.start - b.start) // c for a, b, c in zip(dsel, ssel, chunks)],
                     dtype=np.int64)
    dcoords = scoords + shift
    skeys = s._chunk_keys(scoords)
    got = getitems(s.chunk_store, skeys)
    if len(got) != len(skeys):
        return None   # a missing chunk reads as src's fill value (or raises): the usual way
    datas = [got[k] for k in skeys]
    drop_fill = not d.write_empty_chunks
    fill = d.fill_item
    ends = np.asarray(d.shape, dtype=np.int64) - dcoords * np.asarray(chunks, np.int64)
    bad: list[int] = []

    def check(lo: int, hi: int) -> None:
        scratch = scheduling.take_scratch(chunks, s.dtype, s.order)
        try:
            for i in range(lo, hi):
                chunk = s._decode(datas[i], skeys[i], out=scratch)
                if drop_fill and merge.is_all_fill(chunk, fill):
                    bad.append(i)
                    return
                for axis, (end, c) in enumerate(zip(ends[i].tolist(), chunks)):
                    if end < c and not merge.is_all_fill(np.ascontiguousarray(
                            chunk[(slice(None),) * axis + (slice(end, None),)]), fill):
                        bad.append(i)
                        return
        finally:
            scheduling.give_scratch(scratch)

    scheduling.run(len(datas), check, s.codec.nbytes)
    if bad:
        return None
    return dict(zip(d._chunk_keys(dcoords), datas))
