# Shared nogil kernels: strided N-d byte copies and radix grouping.
# The Cython core sees only integers and raw buffers: no dtypes, stores or policy.

from libc.stdint cimport int64_t, uint64_t

# One dimension of a copy. Affine dims describe offsets as start + k*step (bytes);
# indexed dims carry explicit per-element byte offsets (soff/doff, length count).
cdef struct DimCopy:
    Py_ssize_t count
    bint indexed
    Py_ssize_t sstart
    Py_ssize_t sstep
    Py_ssize_t dstart
    Py_ssize_t dstep
    Py_ssize_t* soff
    Py_ssize_t* doff

cdef int copy_nd(const char* src, char* dst, DimCopy* dims, int ndim,
                 Py_ssize_t itemsize) except -1 nogil

cdef int radix_argsort(const uint64_t* keys, Py_ssize_t n, int64_t* perm) except -1 nogil
