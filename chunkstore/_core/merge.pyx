# cython: language_level=3
"""Merge chunk regions into outputs and values into chunks, fill, and the all-fill test.

All functions copy raw items (any itemsize, any strides, C or F order) and release the GIL
for the copy. Object arrays must not come here: raw copies of PyObject pointers would break
reference counts; the array layer uses NumPy indexing for them.
"""

from libc.stdlib cimport malloc, free
from libc.string cimport memcmp, memcpy
from libc.stdint cimport int64_t, uint16_t, uint32_t, uint64_t
from libc.stddef cimport size_t

import numpy as np
cimport numpy as cnp

from chunkstore._core.kernels cimport DimCopy, copy_nd
from chunkstore._core.projection cimport OrthoPlan, PointsPlan, DimPlan
from chunkstore._core.batch cimport _data, check_ortho_shapes, check_points_shapes

cnp.import_array()


cdef int _check(cnp.ndarray a, int ndim, Py_ssize_t itemsize, str what) except -1:
    if a.ndim != ndim:
        raise ValueError(f"{what} has {a.ndim} dimensions, expected {ndim}")
    if a.dtype.itemsize != itemsize:
        raise ValueError(f"{what} itemsize {a.dtype.itemsize} != {itemsize}")
    if a.dtype.hasobject:
        raise TypeError(f"{what}: object arrays cannot be merged by raw copy")
    return 0


cdef int _ortho_copy_ptr(OrthoPlan plan, Py_ssize_t i, char* cdata, Py_ssize_t* cstr,
                         char* odata, Py_ssize_t* ostr, Py_ssize_t itemsize,
                         int mode) except -1 nogil:
    """The copy behind gather (mode 0: chunk -> output), scatter (1: output-shaped value ->
    chunk) and fill (2: a one-item chunk, all strides 0 -> output) for touched chunk i."""
    cdef int nd = plan.ndim, d
    cdef Py_ssize_t j[64]
    cdef DimCopy dims[64]
    cdef Py_ssize_t* tabs[64]
    cdef DimPlan* p
    cdef Py_ssize_t jj, k, n, lo, cs, os_
    if nd > 64:
        with gil:
            raise ValueError("at most 64 dimensions")
    for d in range(nd):
        tabs[d] = NULL
    plan.unravel(i, j)
    try:
        for d in range(nd):
            p = &plan.dims[d]
            jj = j[d]
            n = p.cnt[jj]
            cs = cstr[d] if mode != 2 else 0
            os_ = ostr[d]
            dims[d].count = n
            dims[d].indexed = p.indexed
            if p.indexed:
                tabs[d] = <Py_ssize_t*>malloc(2 * n * sizeof(Py_ssize_t) + 1)
                if tabs[d] == NULL:
                    with gil:
                        raise MemoryError()
                lo = p.ptr[jj]
                for k in range(n):          # chunk side first, output side second
                    tabs[d][k] = p.lidx[lo + k] * cs
                    tabs[d][n + k] = p.oidx[lo + k] * os_
                if mode == 1:
                    dims[d].soff = tabs[d] + n
                    dims[d].doff = tabs[d]
                else:
                    dims[d].soff = tabs[d]
                    dims[d].doff = tabs[d] + n
            elif mode == 1:
                dims[d].sstart = p.ostart[jj] * os_
                dims[d].sstep = os_
                dims[d].dstart = p.lstart[jj] * cs
                dims[d].dstep = p.step * cs
            else:
                dims[d].sstart = p.lstart[jj] * cs
                dims[d].sstep = p.step * cs
                dims[d].dstart = p.ostart[jj] * os_
                dims[d].dstep = os_
        if mode == 1:
            copy_nd(odata, cdata, dims, nd, itemsize)
        else:
            copy_nd(cdata, odata, dims, nd, itemsize)
    finally:
        for d in range(nd):
            free(tabs[d])
    return 0


cdef int _check_copy(int nd, int other_nd, Py_ssize_t i, Py_ssize_t nchunks,
                     cnp.ndarray chunk, cnp.ndarray other, int mode, str other_what) except -1:
    """The checks of a copy between a chunk (nd dims; absent for mode 2) and another array
    (other_nd dims): dtypes, dimensions, the writable side, the touched-chunk index i."""
    cdef Py_ssize_t itemsize = other.dtype.itemsize
    if mode != 2:
        _check(chunk, nd, itemsize, "chunk")
    _check(other, other_nd, itemsize, other_what)
    if mode != 1 and not other.flags.writeable:
        raise ValueError(f"{other_what} array is read-only")
    if mode == 1 and not chunk.flags.writeable:
        raise ValueError("chunk buffer is read-only")
    if i < 0 or i >= nchunks:
        raise IndexError(f"touched-chunk index {i} out of range [0, {nchunks})")
    return 0


cdef int _ortho_copy(OrthoPlan plan, Py_ssize_t i, cnp.ndarray chunk, cnp.ndarray other,
                     int mode) except -1:
    """mode 0: gather chunk -> other(out); 1: scatter other(value) -> chunk; 2: fill other(out)
    from chunk, a 1-element array."""
    cdef Py_ssize_t itemsize = other.dtype.itemsize
    _check_copy(plan.ndim, plan.ndim, i, plan.nchunks, chunk, other, mode,
                "output" if mode != 1 else "value")
    check_ortho_shapes(plan, chunk if mode != 2 else None, other,
                       "output" if mode != 1 else "value")
    cdef Py_ssize_t* cstr = <Py_ssize_t*>chunk.strides
    cdef Py_ssize_t* ostr = <Py_ssize_t*>other.strides
    cdef char* cdata = _data(chunk)
    cdef char* odata = _data(other)
    with nogil:
        _ortho_copy_ptr(plan, i, cdata, cstr, odata, ostr, itemsize, mode)
    return 0


def gather(OrthoPlan plan, Py_ssize_t i, cnp.ndarray chunk, cnp.ndarray out):
    """out[output region of touched chunk i] = chunk[selection inside chunk i].

    chunk has the chunk's full shape; out has the selection's shape with one axis per array
    dimension (integer selections kept as length-1 axes).
    """
    _ortho_copy(plan, i, chunk, out, 0)


def scatter(OrthoPlan plan, Py_ssize_t i, cnp.ndarray value, cnp.ndarray chunk):
    """chunk[selection inside chunk i] = value[output region of touched chunk i].

    value is selection-shaped (broadcast views with zero strides are fine)."""
    _ortho_copy(plan, i, chunk, value, 1)


def fill(OrthoPlan plan, Py_ssize_t i, cnp.ndarray out, cnp.ndarray fill_item):
    """out[output region of touched chunk i] = fill_item (a 1-element array of out's dtype)."""
    if fill_item.size != 1 or fill_item.dtype.itemsize != out.dtype.itemsize:
        raise ValueError("fill_item must be one element of the output's itemsize")
    item = np.ascontiguousarray(fill_item).reshape((1,) * plan.ndim)
    _ortho_copy(plan, i, item, out, 2)


def out_block(OrthoPlan plan, Py_ssize_t i, cnp.ndarray out, chunk_shape, str order):
    """The view of out that chunk i covers, if the chunk can be decoded straight into it.

    That needs the selection to take the chunk whole (step 1, full chunk shape in bounds)
    and the output region to be one contiguous block laid out in the chunk's order.
    Returns None otherwise. The checks run on strides first, so the common "no" is cheap.
    """
    cdef int nd = plan.ndim, d
    cdef Py_ssize_t j[64]
    cdef DimPlan* p
    cdef Py_ssize_t jj, expect, n
    cdef Py_ssize_t* ostr = <Py_ssize_t*>out.strides
    if nd > 64:
        return None
    plan.unravel(i, j)
    for d in range(nd):
        p = &plan.dims[d]
        jj = j[d]
        if p.indexed or p.step != 1 or p.lstart[jj] != 0 or p.cnt[jj] != chunk_shape[d]:
            return None
    # Contiguous in the chunk's order: each dim's stride is the product of the faster dims.
    expect = out.dtype.itemsize
    for k in range(nd):
        d = nd - 1 - k if order == "C" else k
        n = plan.dims[d].cnt[j[d]]
        if n > 1 and ostr[d] != expect:
            return None
        expect *= n
    index = tuple(slice(plan.dims[d].ostart[j[d]], plan.dims[d].ostart[j[d]]
                        + plan.dims[d].cnt[j[d]]) for d in range(nd))
    return out[index + (Ellipsis,)]


cdef int _points_copy_ptr(PointsPlan plan, Py_ssize_t g, char* cdata, Py_ssize_t* cstr,
                          char* fdata, Py_ssize_t fstr, Py_ssize_t itemsize,
                          int mode) except -1 nogil:
    """mode 0: gather chunk -> flat; 1: scatter flat -> chunk; 2: fill flat from chunk[0]."""
    cdef int nd = plan.ndim, d
    cdef Py_ssize_t lo = plan.ptr[g], n = plan.ptr[g + 1] - lo, k, pt, off
    cdef Py_ssize_t K = plan.npoints
    cdef Py_ssize_t* tab = <Py_ssize_t*>malloc(2 * n * sizeof(Py_ssize_t) + 1)
    cdef DimCopy dim
    if tab == NULL:
        with gil:
            raise MemoryError()
    try:
        for k in range(n):
            pt = plan.perm[lo + k]
            off = 0
            if mode != 2:
                for d in range(nd):
                    off += (plan.coords[d * K + pt]
                            - plan.gcoords[g * nd + d] * plan.chunk_lens[d]) * cstr[d]
            tab[k] = off
            tab[n + k] = pt * fstr
        dim.count = n
        dim.indexed = True
        if mode == 1:
            dim.soff = tab + n
            dim.doff = tab
            copy_nd(fdata, cdata, &dim, 1, itemsize)
        else:
            dim.soff = tab
            dim.doff = tab + n
            copy_nd(cdata, fdata, &dim, 1, itemsize)
    finally:
        free(tab)
    return 0


cdef int _points_copy(PointsPlan plan, Py_ssize_t g, cnp.ndarray chunk, cnp.ndarray flat,
                      int mode) except -1:
    cdef Py_ssize_t itemsize = flat.dtype.itemsize
    _check_copy(plan.ndim, 1, g, plan.nchunks, chunk, flat, mode, "points buffer")
    check_points_shapes(plan, chunk if mode != 2 else None, flat)
    cdef Py_ssize_t* cstr = <Py_ssize_t*>chunk.strides
    cdef Py_ssize_t fstr = flat.strides[0]
    cdef char* cdata = _data(chunk)
    cdef char* fdata = _data(flat)
    with nogil:
        _points_copy_ptr(plan, g, cdata, cstr, fdata, fstr, itemsize, mode)
    return 0


def gather_points(PointsPlan plan, Py_ssize_t g, cnp.ndarray chunk, cnp.ndarray out_flat):
    """out_flat[p] = chunk[local coords of p] for the points of touched chunk g."""
    _points_copy(plan, g, chunk, out_flat, 0)


def scatter_points(PointsPlan plan, Py_ssize_t g, cnp.ndarray values_flat, cnp.ndarray chunk):
    """chunk[local coords of p] = values_flat[p] for the points of touched chunk g, in order."""
    _points_copy(plan, g, chunk, values_flat, 1)


def fill_points(PointsPlan plan, Py_ssize_t g, cnp.ndarray out_flat, cnp.ndarray fill_item):
    """out_flat[p] = fill_item for the points of touched chunk g."""
    item = np.ascontiguousarray(fill_item).reshape((1,) * plan.ndim)
    _points_copy(plan, g, item, out_flat, 2)


# ---------------------------------------------------------------- fill-value test

cdef extern from *:
    uint32_t __builtin_bswap32(uint32_t) nogil
    uint64_t __builtin_bswap64(uint64_t) nogil


cdef inline bint _is_nan_bits(const char* p, int size, bint swap) noexcept nogil:
    cdef uint16_t h
    cdef uint32_t f
    cdef uint64_t q
    if size == 2:
        h = (<const uint16_t*>p)[0]
        if swap:
            h = ((h & 0xff) << 8) | (h >> 8)
        return (h & 0x7c00) == 0x7c00 and (h & 0x03ff) != 0
    if size == 4:
        f = (<const uint32_t*>p)[0]
        if swap:
            f = __builtin_bswap32(f)
        return (f & 0x7f800000u) == 0x7f800000u and (f & 0x007fffffu) != 0
    q = (<const uint64_t*>p)[0]
    if swap:
        q = __builtin_bswap64(q)
    return (q & 0x7ff0000000000000ull) == 0x7ff0000000000000ull and (q & 0x000fffffffffffffull) != 0


# FillTest (how items are compared with the fill value) is declared in merge.pxd.


cdef int _fill_test_init(FillTest* t, dt, const char* fp) except -1:
    """Set up t for dtype dt and the fill item's bytes fp (kept alive by the caller)."""
    cdef int c
    t.fill = fp
    t.itemsize = dt.itemsize
    t.ncomp = 0
    t.comp_size = 0
    t.swap = False
    if dt.kind in "fc":
        t.comp_size = dt.itemsize if dt.kind == "f" else dt.itemsize // 2
        t.swap = not dt.isnative
        for c in range(1 if dt.kind == "f" else 2):
            if t.comp_size in (2, 4, 8) and _is_nan_bits(fp + c * t.comp_size, t.comp_size,
                                                         t.swap):
                t.nan_comp[t.ncomp] = c
                t.ncomp += 1
    return 0


cdef bint _all_fill(const FillTest* t, const char* buf, Py_ssize_t n) noexcept nogil:
    """True when all n items at buf equal the fill (see FillTest)."""
    cdef Py_ssize_t itemsize = t.itemsize, i
    cdef int c, k, cs = t.comp_size
    cdef bint plain
    if n == 0:
        return True
    if t.ncomp == 0:
        # a[0] == fill and a[i] == a[i+1] for all i  <=>  all equal to fill; memcmp on
        # the buffer against itself shifted by one item is vectorised by libc.
        return memcmp(buf, t.fill, itemsize) == 0 and (
            n == 1 or memcmp(buf, buf + itemsize, (n - 1) * itemsize) == 0)
    for i in range(n):
        for c in range(itemsize // cs):
            plain = True
            for k in range(t.ncomp):
                if t.nan_comp[k] == c:
                    plain = False
            if plain:
                if memcmp(buf + i * itemsize + c * cs, t.fill + c * cs, cs) != 0:
                    return False
            elif not _is_nan_bits(buf + i * itemsize + c * cs, cs, t.swap):
                return False
    return True


def is_all_fill(cnp.ndarray chunk, cnp.ndarray fill_item):
    """True when every item of chunk equals fill_item.

    Equality is bytewise (so -0.0 is not the 0.0 fill, and every bit of data is kept), except
    that for float and complex dtypes a NaN component of the fill matches any NaN.
    chunk must be contiguous (either order); fill_item is one element of the same dtype.
    """
    dt = chunk.dtype
    if dt.hasobject:
        raise TypeError("is_all_fill does not take object arrays")
    if fill_item.dtype.itemsize != dt.itemsize or fill_item.size != 1:
        raise ValueError("fill_item must be one element of the chunk's itemsize")
    if not (chunk.flags.c_contiguous or chunk.flags.f_contiguous):
        chunk = np.ascontiguousarray(chunk)
    fb = np.ascontiguousarray(fill_item).tobytes()
    cdef FillTest t
    _fill_test_init(&t, dt, fb)
    cdef const char* buf = _data(chunk)
    cdef Py_ssize_t n = chunk.size
    cdef bint result
    with nogil:
        result = _all_fill(&t, buf, n)
    return result


# ---------------------------------------------------------------- batch helpers

cdef Py_ssize_t _block_offset(OrthoPlan plan, Py_ssize_t i, Py_ssize_t* ostr,
                             Py_ssize_t* chunk_shape, Py_ssize_t itemsize,
                             bint c_order) noexcept nogil:
    """Byte offset in the output where chunk i lands whole and contiguous, or -1."""
    cdef int nd = plan.ndim, d, k
    cdef Py_ssize_t j[64]
    cdef Py_ssize_t expect = itemsize, n, off = 0
    cdef DimPlan* p
    plan.unravel(i, j)
    for d in range(nd):
        p = &plan.dims[d]
        if p.indexed or p.step != 1 or p.lstart[j[d]] != 0 or p.cnt[j[d]] != chunk_shape[d]:
            return -1
        off += p.ostart[j[d]] * ostr[d]
    for k in range(nd):
        d = nd - 1 - k if c_order else k
        n = chunk_shape[d]
        if n > 1 and ostr[d] != expect:
            return -1
        expect *= n
    return off


cdef void _repeat_item(char* dst, const char* item, Py_ssize_t itemsize,
                       Py_ssize_t n) noexcept nogil:
    """dst[0:n] = item: one copy, then doubling copies of what is already there."""
    cdef Py_ssize_t done = itemsize, total = itemsize * n, step
    if n == 0:
        return
    memcpy(dst, item, itemsize)
    while done < total:
        step = done if done < total - done else total - done
        memcpy(dst + done, dst, step)
        done += step
