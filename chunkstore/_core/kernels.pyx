# cython: language_level=3
"""Low-level nogil kernels: a strided N-d byte copy and a stable O(n) radix argsort.

Everything here works on raw pointers, byte offsets and integer keys. The copy is the single
primitive behind gather (chunk -> output), scatter (value -> chunk) and fill (a stride-0
source of one element); the radix sort groups selected indices and points by chunk.
"""

from libc.stdlib cimport malloc, free, calloc
from libc.string cimport memcpy
from libc.stdint cimport int64_t, uint64_t, uint16_t, uint32_t

import numpy as np


cdef inline void _copy_item(char* dst, const char* src, Py_ssize_t itemsize) noexcept nogil:
    # Constant-size memcpy compiles to a single move for the common itemsizes.
    if itemsize == 4:
        memcpy(dst, src, 4)
    elif itemsize == 8:
        memcpy(dst, src, 8)
    elif itemsize == 1:
        dst[0] = src[0]
    elif itemsize == 2:
        memcpy(dst, src, 2)
    elif itemsize == 16:
        memcpy(dst, src, 16)
    else:
        memcpy(dst, src, itemsize)


cdef inline Py_ssize_t _soff(DimCopy* d, Py_ssize_t k) noexcept nogil:
    return d.soff[k] if d.indexed else d.sstart + k * d.sstep


cdef inline Py_ssize_t _doff(DimCopy* d, Py_ssize_t k) noexcept nogil:
    return d.doff[k] if d.indexed else d.dstart + k * d.dstep


cdef int _coalesce(DimCopy* dims, int ndim, Py_ssize_t* sbase, Py_ssize_t* dbase) noexcept nogil:
    """Fold count-1 dims into base offsets and merge adjacent affine dims whose steps chain.

    Returns the new ndim; dims is compacted in place. Merging turns e.g. whole-row copies of a
    C-contiguous chunk into one long memcpy run.
    """
    cdef int d, n = 0
    for d in range(ndim):
        if dims[d].count == 1:
            sbase[0] += _soff(&dims[d], 0)
            dbase[0] += _doff(&dims[d], 0)
        else:
            if n != d:
                dims[n] = dims[d]
            n += 1
    cdef int w = 0
    for d in range(1, n):
        # Try to merge dims[d] (inner) into dims[w] (outer).
        if (not dims[w].indexed and not dims[d].indexed
                and dims[w].sstep == dims[d].count * dims[d].sstep
                and dims[w].dstep == dims[d].count * dims[d].dstep):
            dims[w].count = dims[w].count * dims[d].count
            dims[w].sstart = dims[w].sstart + dims[d].sstart
            dims[w].dstart = dims[w].dstart + dims[d].dstart
            dims[w].sstep = dims[d].sstep
            dims[w].dstep = dims[d].dstep
        else:
            w += 1
            if w != d:
                dims[w] = dims[d]
    return w + 1 if n > 0 else 0


cdef int copy_nd(const char* src, char* dst, DimCopy* dims, int ndim,
                 Py_ssize_t itemsize) except -1 nogil:
    """Copy the N-d region described by dims from src to dst. dims may be modified."""
    cdef int d
    for d in range(ndim):
        if dims[d].count <= 0:
            return 0
    cdef Py_ssize_t sbase = 0, dbase = 0
    ndim = _coalesce(dims, ndim, &sbase, &dbase)
    if ndim == 0:
        _copy_item(dst + dbase, src + sbase, itemsize)
        return 0

    cdef DimCopy* inner = &dims[ndim - 1]
    cdef Py_ssize_t n_inner = inner.count, k
    cdef bint contiguous = (not inner.indexed and inner.sstep == itemsize
                            and inner.dstep == itemsize)
    cdef bint fill_run = (not inner.indexed and inner.sstep == 0 and inner.dstep == itemsize)
    cdef Py_ssize_t* idx = <Py_ssize_t*>calloc(ndim, sizeof(Py_ssize_t))
    if idx == NULL:
        with gil:
            raise MemoryError()
    cdef Py_ssize_t so, do_, done, run
    cdef const char* s
    cdef char* t
    try:
        while True:
            so = sbase
            do_ = dbase
            for d in range(ndim - 1):
                so += _soff(&dims[d], idx[d])
                do_ += _doff(&dims[d], idx[d])
            if contiguous:
                memcpy(dst + do_ + inner.dstart, src + so + inner.sstart, n_inner * itemsize)
            elif fill_run:
                # Fill a contiguous run from one item by doubling memcpy.
                t = dst + do_ + inner.dstart
                _copy_item(t, src + so + inner.sstart, itemsize)
                done = 1
                while done < n_inner:
                    run = done if done <= n_inner - done else n_inner - done
                    memcpy(t + done * itemsize, t, run * itemsize)
                    done += run
            elif inner.indexed:
                for k in range(n_inner):
                    _copy_item(dst + do_ + inner.doff[k], src + so + inner.soff[k], itemsize)
            else:
                s = src + so + inner.sstart
                t = dst + do_ + inner.dstart
                for k in range(n_inner):
                    _copy_item(t + k * inner.dstep, s + k * inner.sstep, itemsize)
            # Advance the odometer over the outer dims.
            d = ndim - 2
            while d >= 0:
                idx[d] += 1
                if idx[d] < dims[d].count:
                    break
                idx[d] = 0
                d -= 1
            if d < 0:
                break
    finally:
        free(idx)
    return 0


cdef enum:
    RADIX_BITS = 11
    RADIX_SIZE = 2048


cdef int radix_argsort(const uint64_t* keys, Py_ssize_t n, int64_t* perm) except -1 nogil:
    """Stable argsort of keys into perm in O(n * passes), passes = ceil(bits(max key) / 11)."""
    cdef Py_ssize_t i
    cdef uint64_t kmax = 0
    cdef bint is_sorted = True
    for i in range(n):
        perm[i] = i
        if keys[i] > kmax:
            kmax = keys[i]
        if i > 0 and keys[i] < keys[i - 1]:
            is_sorted = False
    if is_sorted or n < 2:
        return 0
    cdef int64_t* tmp = <int64_t*>malloc(n * sizeof(int64_t))
    cdef Py_ssize_t* counts = <Py_ssize_t*>malloc(RADIX_SIZE * sizeof(Py_ssize_t))
    if tmp == NULL or counts == NULL:
        free(tmp)
        free(counts)
        with gil:
            raise MemoryError()
    cdef int shift = 0
    cdef Py_ssize_t total, c, b
    cdef int64_t* a = perm
    cdef int64_t* bbuf = tmp
    cdef int64_t* swap
    while shift < 64 and (kmax >> shift) != 0:
        for b in range(RADIX_SIZE):
            counts[b] = 0
        for i in range(n):
            counts[(keys[a[i]] >> shift) & (RADIX_SIZE - 1)] += 1
        total = 0
        for b in range(RADIX_SIZE):
            c = counts[b]
            counts[b] = total
            total += c
        for i in range(n):
            b = (keys[a[i]] >> shift) & (RADIX_SIZE - 1)
            bbuf[counts[b]] = a[i]
            counts[b] += 1
        swap = a
        a = bbuf
        bbuf = swap
        shift += RADIX_BITS
    if a != perm:
        memcpy(perm, a, n * sizeof(int64_t))
    free(tmp)
    free(counts)
    return 0


def argsort_uint64(keys):
    """Stable argsort of a 1-d uint64 array (Python entry point, used by tests)."""
    cdef const uint64_t[::1] k = np.ascontiguousarray(keys, dtype=np.uint64)
    perm = np.empty(k.shape[0], dtype=np.int64)
    cdef int64_t[::1] p = perm
    if k.shape[0]:
        with nogil:
            radix_argsort(&k[0], k.shape[0], &p[0])
    return perm
