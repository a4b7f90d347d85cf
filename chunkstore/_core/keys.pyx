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
