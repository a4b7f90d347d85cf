# cython: language_level=3
"""Project normalized selections onto the chunk grid.

OrthoPlan: an orthogonal selection (per dimension a slice with any nonzero step, or an
array of in-bounds indices). Each dimension is projected on its own in O(touched chunks) for
slices and O(n) for index arrays (radix-sorted); the touched chunks of the whole selection are
the Cartesian product, enumerated lazily, so nothing costs O(total chunks).

PointsPlan: a coordinate selection (K points). Points are grouped by chunk with a stable
O(K) radix sort on the chunk's linear index, so duplicates keep their order (last write wins).

The plans create no Python object per chunk or element; the merge module reads their C tables.
"""

from libc.stdlib cimport malloc, free
from libc.string cimport memset
from libc.stdint cimport int64_t, uint64_t
from cpython.pyport cimport PY_SSIZE_T_MAX

import numpy as np
cimport numpy as cnp

from chunkstore._core.kernels cimport radix_argsort

# Loops over fewer items than this keep the GIL: releasing it costs a hand-off to a waiting
# thread (and back), which with many user threads costs more than the loop.
cdef enum:
    _NOGIL_MIN = 4096

cdef extern from "Python.h":
    ctypedef struct PyThreadState
    PyThreadState* PyEval_SaveThread()
    void PyEval_RestoreThread(PyThreadState* ts)


cdef inline PyThreadState* _release_if(bint big):
    # The loops between _release_if and _restore use C data only and cannot raise.
    return PyEval_SaveThread() if big else NULL


cdef inline void _restore(PyThreadState* ts):
    if ts != NULL:
        PyEval_RestoreThread(ts)

cnp.import_array()

# Selection kinds as given by chunkstore.engine.indexing.
SLICE = 0
ARRAY = 1


cdef int64_t* _ptr(object arr):
    return <int64_t*>cnp.PyArray_DATA(arr)


cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a // b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q


cdef class OrthoPlan:
    """Orthogonal selection projected on a chunk grid.

    OrthoPlan(shape, chunks, specs): specs has one entry per dimension, either
    (SLICE, start, step, n), meaning indices start + k*step for k < n, all in bounds, or
    (ARRAY, idx) with idx an int64 array of in-bounds indices (any order, duplicates allowed).
    """

    def __cinit__(self):
        self.dims = NULL

    def __init__(self, shape, chunks, specs):
        self.ndim = len(shape)
        if len(chunks) != self.ndim or len(specs) != self.ndim:
            raise ValueError("shape, chunks and specs must have the same length")
        self._keep = []
        self.dims = <DimPlan*>malloc(max(self.ndim, 1) * sizeof(DimPlan))
        if self.dims == NULL:
            raise MemoryError()
        cdef int d
        cdef Py_ssize_t total = 1, m
        # An empty selection of one dimension touches no chunk: the others' slices are not
        # projected (z[0:0, :] of a dimension of 2**40 chunks built its table of them).
        cdef bint empty = False
        for spec in specs:
            if (spec[0] == SLICE and spec[3] == 0) or (spec[0] == ARRAY and len(spec[1]) == 0):
                empty = True
                break
        sel_shape = []
        for d in range(self.ndim):
            spec = specs[d]
            if spec[0] == SLICE:
                self._project_slice(d, int(shape[d]), int(chunks[d]), int(spec[1]),
                                    int(spec[2]), 0 if empty else int(spec[3]))
                n = int(spec[3])
            elif spec[0] == ARRAY:
                n = self._project_array(d, int(shape[d]), int(chunks[d]), spec[1])
            else:
                raise ValueError(f"unknown selection kind {spec[0]!r}")
            sel_shape.append(n)
            m = self.dims[d].m
            if m and total > PY_SSIZE_T_MAX // m:
                # (wrapped, 2**64 chunks made 0: a write of them did nothing and returned)
                raise ValueError(f"the selection touches more than {PY_SSIZE_T_MAX} chunks "
                                 f"({' x '.join(str(self.dims[k].m) for k in range(d + 1))}"
                                 f" along the first {d + 1} dimensions)")
            total *= m
        self.nchunks = total
        self.sel_shape = tuple(sel_shape)

    def __dealloc__(self):
        free(self.dims)

    cdef int64_t* _alloc(self, Py_ssize_t n) except NULL:
        """n int64 (at least one) owned by the plan."""
        a = np.empty(max(n, 1), dtype=np.int64)
        self._keep.append(a)
        return _ptr(a)

    cdef Py_ssize_t _project_slice(self, int d, int64_t dimlen, int64_t L, int64_t start,
                                   int64_t step, int64_t n) except -1:
        cdef DimPlan* p = &self.dims[d]
        p.indexed = False
        p.step = step
        p.chunk_len = L
        p.ptr = p.lidx = p.oidx = NULL
        if step == 0:
            raise ValueError("slice step cannot be zero")
        # Upper bound on touched chunks: one per element, or the span of chunks crossed.
        cdef int64_t first = start, last = start + (n - 1) * step if n > 0 else start
        cdef int64_t lo = first if first < last else last
        cdef int64_t hi = last if first < last else first
        cdef Py_ssize_t cap = 0
        if n > 0:
            cap = min(n, hi // L - lo // L + 1)
        if cap > (PY_SSIZE_T_MAX - 8) // 5:  # (the allocation below would wrap)
            raise MemoryError(f"a selection touching {cap} chunks of dimension {d} (its "
                              f"plan: about 32 bytes a chunk)")
        # One allocation for the dimension's four index arrays and its full-chunk flags (a
        # tile's plan is built on every read: five allocations a dimension cost more).
        cdef int64_t* base = self._alloc(4 * cap + (cap + 7) // 8)
        p.cid = base; p.cnt = base + cap; p.lstart = base + 2 * cap; p.ostart = base + 3 * cap
        p.full = <unsigned char*>(base + 4 * cap)
        memset(p.full, 0, cap)
        cdef int64_t i = 0, idx, c, last_i, extent
        cdef Py_ssize_t m = 0
        _ts = _release_if(cap > _NOGIL_MIN)
        while i < n:
            idx = start + i * step
            c = idx // L
            # the last i' whose index is in chunk c, counted from idx's place in it ((c + 1)
            # * L - 1 - start wrapped past int64 in the last chunk of a dimension near 2**63,
            # and the loop then wrote past its tables)
            if step > 0:
                last_i = i + _floordiv(L - 1 - (idx - c * L), step)
            else:
                last_i = i + _floordiv(idx - c * L, -step)
            if last_i > n - 1:
                last_i = n - 1
            p.cid[m] = c
            p.cnt[m] = last_i - i + 1
            p.lstart[m] = idx - c * L
            p.ostart[m] = i
            extent = dimlen - c * L
            if extent > L:
                extent = L
            p.full[m] = (step == 1 or step == -1) and p.cnt[m] == extent
            m += 1
            i = last_i + 1
        _restore(_ts)
        p.m = m
        return n

    cdef Py_ssize_t _project_array(self, int d, int64_t dimlen, int64_t L, idx_in) except -1:
        cdef DimPlan* p = &self.dims[d]
        p.indexed = True
        p.step = 1
        p.chunk_len = L
        p.lstart = p.ostart = NULL
        idx_arr = np.ascontiguousarray(idx_in, dtype=np.int64)
        cdef Py_ssize_t n = idx_arr.shape[0]
        self._keep.append(idx_arr)
        cdef int64_t* idx = _ptr(idx_arr)
        cdef int64_t* pp = self._alloc(n)
        cdef int64_t* lp = self._alloc(n)
        # Sorting by the index itself groups by chunk and orders local indices, so
        # coverage (distinct count) is one pass; stability keeps duplicates in order.
        keys = idx_arr.view(np.uint64)
        cdef uint64_t* kp = <uint64_t*>cnp.PyArray_DATA(keys)
        cdef Py_ssize_t k, m = 0, distinct = 0
        cdef int64_t c, prevc = -1, v, prevv = -1, extent
        for k in range(n):
            if idx[k] < 0 or idx[k] >= dimlen:
                raise IndexError(f"index {idx[k]} out of bounds for dimension {d} of length {dimlen}")
        _ts = _release_if(n > _NOGIL_MIN)
        if n:
            radix_argsort(kp, n, pp)
        for k in range(n):
            c = idx[pp[k]] // L
            if c != prevc:
                m += 1
                prevc = c
        _restore(_ts)
        cdef int64_t* base = self._alloc(3 * m + 1 + (m + 7) // 8)
        p.cid = base; p.cnt = base + m; p.ptr = base + 2 * m
        p.lidx = lp; p.oidx = pp
        p.full = <unsigned char*>(base + 3 * m + 1)
        memset(p.full, 0, m)
        cdef Py_ssize_t j = -1
        prevc = -1
        _ts = _release_if(n > _NOGIL_MIN)
        for k in range(n):
            v = idx[pp[k]]
            c = v // L
            if c != prevc:
                if j >= 0:
                    p.cnt[j] = k - p.ptr[j]
                    extent = min(L, dimlen - prevc * L)
                    p.full[j] = distinct == extent
                j += 1
                p.cid[j] = c
                p.ptr[j] = k
                prevc = c
                distinct = 0
                prevv = -1
            if v != prevv:
                distinct += 1
                prevv = v
            lp[k] = v - c * L
        if j >= 0:
            p.cnt[j] = n - p.ptr[j]
            extent = min(L, dimlen - prevc * L)
            p.full[j] = distinct == extent
        p.ptr[m] = n
        _restore(_ts)
        p.m = m
        return n

    cdef void unravel(self, Py_ssize_t i, Py_ssize_t* j) noexcept nogil:
        cdef int d
        for d in range(self.ndim - 1, -1, -1):
            j[d] = i % self.dims[d].m
            i = i // self.dims[d].m

    def chunk_coords(self):
        """(nchunks, ndim) int64 array: grid coordinates of every touched chunk, C order."""
        out = np.empty((self.nchunks, self.ndim), dtype=np.int64)
        cdef int64_t[:, ::1] o = out
        cdef Py_ssize_t i
        cdef int d
        cdef Py_ssize_t* j = <Py_ssize_t*>malloc(max(self.ndim, 1) * sizeof(Py_ssize_t))
        try:
            _ts = _release_if(self.nchunks > _NOGIL_MIN)
            for i in range(self.nchunks):
                self.unravel(i, j)
                for d in range(self.ndim):
                    o[i, d] = self.dims[d].cid[j[d]]
            _restore(_ts)
        finally:
            free(j)
        return out

    def full_mask(self):
        """(nchunks,) bool array: the selection covers every in-bounds element of the chunk."""
        out = np.empty(self.nchunks, dtype=np.bool_)
        cdef unsigned char[::1] o = out.view(np.uint8)
        cdef Py_ssize_t i
        cdef int d
        cdef unsigned char f
        cdef Py_ssize_t* j = <Py_ssize_t*>malloc(max(self.ndim, 1) * sizeof(Py_ssize_t))
        try:
            _ts = _release_if(self.nchunks > _NOGIL_MIN)
            for i in range(self.nchunks):
                self.unravel(i, j)
                f = 1
                for d in range(self.ndim):
                    f = f and self.dims[d].full[j[d]]
                o[i] = f
            _restore(_ts)
        finally:
            free(j)
        return out

    def selections(self, Py_ssize_t i):
        """(chunk_selection, output_selection) for touched chunk i, as NumPy index tuples.

        The slow path for object dtype, where raw byte copies are not allowed.
        """
        cdef Py_ssize_t* j = <Py_ssize_t*>malloc(max(self.ndim, 1) * sizeof(Py_ssize_t))
        cdef DimPlan* p
        csel = []
        osel = []
        try:
            self.unravel(i, j)
            for d in range(self.ndim):
                p = &self.dims[d]
                jj = j[d]
                if p.indexed:
                    lo = p.ptr[jj]
                    hi = p.ptr[jj + 1]
                    csel.append(np.asarray(<int64_t[:p.ptr[p.m]]>p.lidx)[lo:hi].copy())
                    osel.append(np.asarray(<int64_t[:p.ptr[p.m]]>p.oidx)[lo:hi].copy())
                else:
                    s0 = p.lstart[jj]
                    n = p.cnt[jj]
                    stop = s0 + n * p.step
                    csel.append(slice(s0, stop if stop >= 0 else None, p.step))
                    osel.append(slice(p.ostart[jj], p.ostart[jj] + n))
        finally:
            free(j)
        if any(isinstance(s, np.ndarray) for s in csel):
            # Orthogonal (outer-product) indexing in NumPy terms.
            csel = np.ix_(*[np.arange(s.start, s.stop if s.stop is not None else -1, s.step)
                            if isinstance(s, slice) else s for s in csel])
            osel = np.ix_(*[np.arange(s.start, s.stop) if isinstance(s, slice) else s
                            for s in osel])
        return tuple(csel), tuple(osel)


cdef class PointsPlan:
    """Coordinate selection grouped by chunk.

    PointsPlan(shape, chunks, coords): coords is an (ndim, K) int64 array of in-bounds,
    non-negative coordinates. Touched chunk g holds points perm[ptr[g]:ptr[g+1]].
    """

    def __init__(self, shape, chunks, coords):
        self.ndim = len(shape)
        coords_arr = np.ascontiguousarray(coords, dtype=np.int64)
        if coords_arr.ndim != 2 or coords_arr.shape[0] != self.ndim:
            raise ValueError("coords must have shape (ndim, npoints)")
        self.npoints = coords_arr.shape[1]
        lens = np.asarray(chunks, dtype=np.int64)
        cdata = [-(-int(s) // int(c)) if c else 0 for s, c in zip(shape, chunks)]
        self._keep = [coords_arr, lens]
        self._coords_arr = coords_arr
        self.coords = _ptr(coords_arr)
        self.chunk_lens = _ptr(lens)
        cdef Py_ssize_t K = self.npoints, k
        cdef int d, nd = self.ndim
        for d in range(nd):
            row = coords_arr[d]
            if K and (row.min() < 0 or row.max() >= shape[d]):
                bad = row[(row < 0) | (row >= shape[d])][0]
                raise IndexError(f"index {bad} out of bounds for dimension {d} "
                                 f"of length {shape[d]}")
        perm = np.empty(K, dtype=np.int64)
        self._keep.append(perm)
        self.perm = _ptr(perm)
        total = 1
        for c in cdata:
            total *= c
        cdef uint64_t* kp
        cdef int64_t* strides
        if total < (1 << 62):
            # Linear chunk index as the sort key: one stable O(K) radix sort.
            keys = np.zeros(K, dtype=np.uint64)
            gstride = np.ones(max(nd, 1), dtype=np.int64)
            for d in range(nd - 2, -1, -1):
                gstride[d] = gstride[d + 1] * cdata[d + 1]
            self._keep.append(gstride)
            kp = <uint64_t*>cnp.PyArray_DATA(keys)
            strides = _ptr(gstride)
            _ts = _release_if(K > _NOGIL_MIN)
            for d in range(nd):
                for k in range(K):
                    kp[k] += <uint64_t>((self.coords[d * K + k] // self.chunk_lens[d])
                                        * strides[d])
            if K:
                radix_argsort(kp, K, self.perm)
            _restore(_ts)
        else:
            # Grids too large for a 64-bit linear index: stable lexicographic sort.
            gc = coords_arr // lens[:, None]
            perm[:] = np.lexsort(gc[::-1]) if nd else np.arange(K)
        # Group boundaries and each group's chunk coordinates.
        cdef Py_ssize_t m = 0
        cdef bint newgroup
        _ts = _release_if(K > _NOGIL_MIN)
        for k in range(K):
            newgroup = k == 0 or not self._same_chunk(k)
            if newgroup:
                m += 1
        _restore(_ts)
        self.nchunks = m
        ptr = np.empty(m + 1, dtype=np.int64)
        gco = np.empty((m, max(nd, 1)), dtype=np.int64)
        self._keep += [ptr, gco]
        self._gcoords_arr = gco
        self.ptr = _ptr(ptr)
        self.gcoords = _ptr(gco)
        cdef Py_ssize_t g = -1
        _ts = _release_if(K > _NOGIL_MIN)
        for k in range(K):
            newgroup = k == 0 or not self._same_chunk(k)
            if newgroup:
                g += 1
                self.ptr[g] = k
                for d in range(nd):
                    self.gcoords[g * nd + d] = self.coords[d * K + self.perm[k]] // self.chunk_lens[d]
        self.ptr[m] = K
        _restore(_ts)

    cdef bint _same_chunk(self, Py_ssize_t k) noexcept nogil:
        """Points perm[k-1] and perm[k] lie in the same chunk."""
        cdef int d
        cdef Py_ssize_t K = self.npoints
        for d in range(self.ndim):
            if (self.coords[d * K + self.perm[k]] // self.chunk_lens[d]
                    != self.coords[d * K + self.perm[k - 1]] // self.chunk_lens[d]):
                return False
        return True

    def chunk_coords(self):
        """(nchunks, ndim) int64 array of touched chunks' grid coordinates."""
        return np.asarray(self._gcoords_arr)[:, :self.ndim].copy()

    def selections(self, Py_ssize_t g):
        """(chunk_selection, output_positions) for group g, for the object-dtype slow path."""
        K = self.npoints
        pts = np.asarray(<int64_t[:self.npoints]>self.perm)[self.ptr[g]:self.ptr[g + 1]].copy() \
            if K else np.empty(0, np.int64)
        coords = np.asarray(self._coords_arr)
        csel = tuple(coords[d, pts] - self.gcoords[g * self.ndim + d] * self.chunk_lens[d]
                     for d in range(self.ndim))
        return csel, pts
