# cython: language_level=3
"""The lock-space ranges of a write touching few chunks (chunkstore.sync.locking).

Every write holds the ranges of the chunks it touches (with a synchronizer, and in the
in-process locks of handles without one), so this runs once per write: most writes touch a
handful of chunks, and worked out in Python their ranges cost several microseconds per
write, holding the GIL. The layout of the lock space is chunkstore.sync.locking's; this is
its few-chunk case, exactly.
"""

from libc.stdint cimport int64_t

cdef enum:
    _MAX_FEW = 8      # chunks handled here (locking.FEW_CHUNKS)
    _MAX_DIM = 64


cdef list _runs(int64_t* offs, int64_t* keys, Py_ssize_t m):
    """(first, last) offsets of each run of consecutive keys (m sorted entries)."""
    out = []
    cdef Py_ssize_t i = 0, j
    while i < m:
        j = i
        while j + 1 < m and keys[j + 1] == keys[j] + 1:
            j += 1
        out.append((offs[i], offs[j]))
        i = j + 1
    return out


def few_chunk_ranges(const int64_t[:, ::1] coords, tuple grid, int bits):
    """Sorted, disjoint inclusive (start, end) ranges, from the space's base, covering the
    chunks at coords (at most 8 rows of ndim >= 1 grid coordinates); grid: the chunk grid's
    shape as the caller knows it. Each coordinate takes bits // ndim bits of an offset.
    Coordinates that fit: chunks consecutive in the C-order grid (grid clipped to the bits,
    and grown to hold the coordinates) share a range, as every offset between them belongs
    to no chunk. Any that wraps: ranges of consecutive offsets alone."""
    cdef Py_ssize_t n = coords.shape[0], ndim = coords.shape[1]
    if n > _MAX_FEW or ndim < 1 or ndim > _MAX_DIM or len(grid) != ndim:
        raise ValueError(f"few_chunk_ranges: {n} chunks of {ndim} dimensions "
                         f"(grid of {len(grid)})")
    cdef int b = bits // ndim
    cdef int64_t mask = (<int64_t>1 << b) - 1
    cdef Py_ssize_t rows[_MAX_FEW]
    cdef int64_t offs[_MAX_FEW]
    cdef int64_t lins[_MAX_FEW]
    cdef int64_t g[_MAX_DIM]
    cdef Py_ssize_t i, k, d, m = 0
    cdef int64_t off, lin, top, x
    cdef bint wraps = False
    for i in range(n):
        for d in range(ndim):
            if coords[i, d] < 0 or coords[i, d] > mask:
                wraps = True
    # each chunk's offset, sorted, without repeats (insertion sort: n <= 8); where nothing
    # wraps, offset order is the rows' order (each coordinate in its own bits)
    for i in range(n):
        off = 0
        for d in range(ndim):
            off = (off << b) | (coords[i, d] & mask)
        k = m
        while k > 0 and offs[k - 1] > off:
            k -= 1
        if k > 0 and offs[k - 1] == off:
            continue
        for d in range(m, k, -1):
            offs[d] = offs[d - 1]
            rows[d] = rows[d - 1]
        offs[k] = off
        rows[k] = i
        m += 1
    if wraps:
        return _runs(offs, offs, m)
    # the grid, grown to hold the coordinates and clipped to the bits; runs in its C order
    for d in range(ndim):
        x = int(grid[d])
        top = 0
        for i in range(n):
            if coords[i, d] + 1 > top:
                top = coords[i, d] + 1
        if top > x:
            x = top
        if x > (<int64_t>1 << b):
            x = <int64_t>1 << b
        g[d] = x
    for k in range(m):
        lin = 0
        for d in range(ndim):
            lin = lin * g[d] + coords[rows[k], d]
        lins[k] = lin
    return _runs(offs, lins, m)
