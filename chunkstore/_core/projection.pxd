from libc.stdint cimport int64_t

# The projection of one dimension's selection onto that dimension's chunks.
# For touched chunk j (0 <= j < m): chunk index cid[j], cnt[j] selected elements, and
#   affine:  local index lstart[j] + k*step, output index ostart[j] + k   (k < cnt[j])
#   indexed: local index lidx[ptr[j] + k],   output index oidx[ptr[j] + k]
# full[j] says the selection covers every in-bounds element of that chunk along this dim.
cdef struct DimPlan:
    Py_ssize_t m
    bint indexed
    int64_t step
    int64_t chunk_len
    int64_t* cid
    int64_t* cnt
    int64_t* lstart
    int64_t* ostart
    int64_t* ptr
    int64_t* lidx
    int64_t* oidx
    unsigned char* full


cdef class OrthoPlan:
    cdef readonly int ndim
    cdef readonly Py_ssize_t nchunks
    cdef DimPlan* dims
    cdef list _keep          # numpy arrays owning the memory the DimPlans point into
    cdef readonly tuple sel_shape
    cdef void unravel(self, Py_ssize_t i, Py_ssize_t* j) noexcept nogil
    cdef int64_t* _alloc(self, Py_ssize_t n) except NULL
    cdef Py_ssize_t _project_slice(self, int d, int64_t dimlen, int64_t L, int64_t start,
                                   int64_t step, int64_t n) except -1
    cdef Py_ssize_t _project_array(self, int d, int64_t dimlen, int64_t L, idx_in) except -1


cdef class PointsPlan:
    cdef readonly int ndim
    cdef readonly Py_ssize_t npoints
    cdef readonly Py_ssize_t nchunks
    cdef int64_t* coords     # ndim x npoints, C order
    cdef int64_t* perm       # point order grouped by chunk (stable)
    cdef int64_t* ptr        # nchunks + 1
    cdef int64_t* gcoords    # nchunks x ndim chunk grid coordinates
    cdef int64_t* chunk_lens # ndim
    cdef list _keep
    cdef object _coords_arr
    cdef object _gcoords_arr
    cdef bint _same_chunk(self, Py_ssize_t k) noexcept nogil
