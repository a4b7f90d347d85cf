# The nogil building blocks of chunkstore._core.merge that the batch codec kernels
# (chunkstore._core.zcodecs) share: region copies, the whole-chunk placement test, the
# all-fill test and the fill pattern.

from chunkstore._core.projection cimport OrthoPlan, PointsPlan


cdef struct FillTest:
    # How to compare items with the fill value: bytewise, except the float components
    # (nan_comp[:ncomp], comp_size bytes each) whose fill is NaN, which match any NaN.
    const char* fill
    Py_ssize_t itemsize
    int ncomp
    int comp_size
    int nan_comp[2]
    bint swap


cdef int _ortho_copy_ptr(OrthoPlan plan, Py_ssize_t i, char* cdata, Py_ssize_t* cstr,
                         char* odata, Py_ssize_t* ostr, Py_ssize_t itemsize,
                         int mode) except -1 nogil
cdef int _points_copy_ptr(PointsPlan plan, Py_ssize_t g, char* cdata, Py_ssize_t* cstr,
                          char* fdata, Py_ssize_t fstr, Py_ssize_t itemsize,
                          int mode) except -1 nogil
cdef Py_ssize_t _block_offset(OrthoPlan plan, Py_ssize_t i, Py_ssize_t* ostr,
                              Py_ssize_t* chunk_shape, Py_ssize_t itemsize,
                              bint c_order) noexcept nogil
cdef int _fill_test_init(FillTest* t, dt, const char* fp) except -1
cdef bint _all_fill(const FillTest* t, const char* buf, Py_ssize_t n) noexcept nogil
cdef void _repeat_item(char* dst, const char* item, Py_ssize_t itemsize,
                       Py_ssize_t n) noexcept nogil
