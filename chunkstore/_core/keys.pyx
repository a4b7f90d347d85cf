# cython: language_level=3
"""Chunk key strings for many chunk grid coordinates at once.

A whole-array read or write of a 4096 x 4096 array in 64 x 64 chunks touches 4096 chunks; built
in Python ("0." + ".".join(map(str, c)) per chunk) their keys cost about 1 us each, all of it
holding the GIL. Here each key is formatted into a C buffer and becomes one str object.
"""

from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import numpy as np


cdef inline Py_ssize_t _write_int(char* p, int64_t v) noexcept nogil:
    """Decimal digits of v at p (a '-' first if negative); returns the length."""
    cdef char tmp[24]
    cdef Py_ssize_t n = 0, k
    cdef unsigned long long u
    cdef Py_ssize_t neg = 0
    if v < 0:
        p[0] = 45  # '-'
        neg = 1
        u = <unsigned long long>(-(v + 1)) + 1
    else:
        u = <unsigned long long>v
    while True:
        tmp[n] = <char>(48 + u % 10)  # '0' + digit
        n += 1
        u //= 10
        if u == 0:
            break
    for k in range(n):
        p[neg + k] = tmp[n - 1 - k]
    return neg + n


def format_keys(coords, str sep, list heads, head_of=None):
    """[heads[h] + sep.join(str(c) for c in coords[i]) for each row i], where h is
    head_of[i] (an integer array, one entry per row) or 0 when head_of is None.

    coords is an (n, ndim) integer array; sep and the heads are any str (ASCII ones are
    formatted straight into the key's buffer, others are joined the Python way)."""
    cdef const int64_t[:, ::1] c = np.ascontiguousarray(coords, dtype=np.int64)
    cdef Py_ssize_t n = c.shape[0], nd = c.shape[1], i, d, pos, h, hlen
    cdef const int64_t[::1] hof
    if head_of is not None:
        hof = np.ascontiguousarray(head_of, dtype=np.int64)
        if hof.shape[0] != n:
            raise ValueError("head_of needs one entry per row of coords")
    if n and not heads:
        raise ValueError("heads must not be empty")
    if not sep.isascii():
        raise ValueError(f"separator {sep!r} is not ASCII")
    cdef bytes sepb = sep.encode("ascii")
    cdef const char* sp = sepb
    cdef Py_ssize_t slen = len(sepb)
    # ASCII heads go into the buffer; None marks a head joined in Python
    cdef list hb = [hd.encode("ascii") if hd.isascii() else None for hd in heads]
    cdef Py_ssize_t maxh = max([len(b) for b in hb if b is not None] or [0])
    cdef Py_ssize_t nheads = len(heads)
    cdef char* buf = <char*>malloc(maxh + nd * (24 + slen) + 1)
    if buf == NULL:
        raise MemoryError()
    cdef list out = [None] * n
    cdef bytes head_b
    try:
        for i in range(n):
            h = hof[i] if head_of is not None else 0
            if h < 0 or h >= nheads:
                raise IndexError(f"head index {h} out of range")
            head = hb[h]
            pos = 0
            if head is not None:
                head_b = <bytes>head
                hlen = len(head_b)
                memcpy(buf, <const char*>head_b, hlen)
                pos = hlen
            for d in range(nd):
                if d:
                    memcpy(buf + pos, sp, slen)
                    pos += slen
                pos += _write_int(buf + pos, c[i, d])
            key = PyUnicode_DecodeASCII(buf, pos, NULL)
            out[i] = key if head is not None else heads[h] + key
    finally:
        free(buf)
    return out


def parse_keys(list names, Py_ssize_t skip, str sep, grid):
    """Grid coordinates of the names that are block keys: after their first ``skip``
    characters, ``ndim`` decimal numbers joined by ``sep`` (one character), each below its
    ``grid`` extent. Anything else (metadata, other paths, out-of-grid blocks, numbers with
    signs, spaces or leading zeros) is left out. An (n, ndim) int64 array, in the order of names.

    The inverse of format_keys for one listing of an array's keys: 62,500 keys of a 2-d grid
    parse in about a millisecond, where split and int in Python take tens."""
    cdef Py_ssize_t nd = len(grid), n = len(names), k, i, d, length
    cdef int64_t[::1] g = np.asarray(grid, dtype=np.int64)
    out_arr = np.empty((n, max(nd, 1)), dtype=np.int64)
    cdef int64_t[:, ::1] out = out_arr
    cdef Py_ssize_t count = 0
    cdef const unsigned char[:] raw
    cdef bytes b
    cdef int64_t v
    cdef Py_ssize_t start
    cdef bint ok, digit
    if len(sep) != 1:
        raise ValueError("sep must be one character")
    cdef unsigned char s = ord(sep)
    for k in range(n):
        b = (<str>names[k]).encode("ascii", "replace")
        raw = b
        length = len(b)
        i = skip
        ok = length > skip and nd > 0
        d = 0
        while ok and d < nd:
            v = 0
            digit = False
            start = i
            while i < length and raw[i] >= 48 and raw[i] <= 57:
                # (exact: v * 10 + digit must fit int64; grids reach 2**63 - 1 chunks, so
                # coordinates of 19 digits are real, not overflow)
                if v > (9223372036854775807 - (raw[i] - 48)) // 10:
                    ok = False
                    break
                v = v * 10 + (raw[i] - 48)
                digit = True
                i += 1
            if not ok or not digit or v >= g[d] or (i - start > 1 and raw[start] == 48):
                # (a leading zero: "00" is no chunk's key, as zarr-python writes and counts
                # them; counted, a chunk's keys of every spelling made more chunks
                # initialized than the grid has)
                ok = False
                break
            out[count, d] = v
            d += 1
            if d < nd:
                if i < length and raw[i] == s:
                    i += 1
                else:
                    ok = False
        if ok and i == length:
            count += 1
    return out_arr[:count, :nd]
