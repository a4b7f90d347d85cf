# The merge kernels other core modules call without the GIL (chunkfiles.pyx).

from chunkstore._core.projection cimport OrthoPlan, PointsPlan

ctypedef int (*blosc_validate_fn)(const void*, size_t, size_t*) noexcept nogil
ctypedef int (*blosc_decompress_fn)(const void*, void*, size_t, int) noexcept nogil

cdef int _ortho_copy_ptr(OrthoPlan plan, Py_ssize_t i, char* cdata, Py_ssize_t* cstr,
                         char* odata, Py_ssize_t* ostr, Py_ssize_t itemsize,
                         int mode) except -1 nogil
cdef int _points_copy_ptr(PointsPlan plan, Py_ssize_t g, char* cdata, Py_ssize_t* cstr,
                          char* fdata, Py_ssize_t fstr, Py_ssize_t itemsize,
                          int mode) except -1 nogil
cdef Py_ssize_t _block_offset(OrthoPlan plan, Py_ssize_t i, Py_ssize_t* ostr,
                             Py_ssize_t* chunk_shape, Py_ssize_t itemsize,
                             bint c_order) noexcept nogil
