"""Array-to-array assignment in bounded memory: ``out[box] = z`` with z a chunkstore Array.

Instead of reading all of z into memory and then writing it, the box is cut into blocks
along the destination's chunk boundaries (so that every block covers whole destination
chunks where the box does, and needs no read-modify-write), each block at most about one
batch of chunks per pool thread; each block is read from z and written to out, both on the
thread pool. Peak memory is one block plus what its read and write hold at once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

from chunkstore import config

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
    for blk in _blocks(box, chunks, itemsize, budget):
        dsel = tuple(slice(a, b) for a, b in blk)
        ssel = tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(blk, box))
        dst[dsel] = src[ssel]
