# Declarations of chunkstore._core.batch: a batch's encoded chunks and encoded results as C
# arrays for the nogil loops of the batch codec kernels, and the checks of their arguments.

from libc.stdint cimport int64_t

cimport numpy as cnp

from chunkstore._core.projection cimport OrthoPlan, PointsPlan

cdef extern from "Python.h":
    ctypedef struct PyObject


cdef inline char* _data(cnp.ndarray a) noexcept:
    return <char*>cnp.PyArray_DATA(a)


cdef class Files:
    cdef list paths            # bytes: the file of each chunk
    cdef size_t maxlen         # larger files are not read here (the caller reads them)
    cdef readonly object ranges  # None, or int64 (n, 2): each chunk's offset and length in
                               # its file (inner chunks of shards)
    cdef readonly object idents  # None, or int64 (n, 5): the identity (sysio's
                               # chunkstore_stat_ident) of the file version the ranges are of


cdef class _Batch:
    cdef const char** src
    cdef size_t* srclen
    cdef int64_t* ids
    # From Files: chunk k is read into buf by load(k) just before it is decoded (src[k],
    # srclen[k] then point into buf), so a whole batch's reads and decodes take one GIL-free
    # section and one reused buffer instead of a bytes object per chunk.
    cdef const char** paths
    cdef int64_t* ranges
    cdef int64_t* idents
    cdef char* buf
    cdef size_t cap
    cdef size_t maxlen
    # The shard file that _load_range read last, kept open for the batch's next chunks in
    # it (held is False until one is: a zero-initialized object holds no descriptor).
    cdef bint held
    cdef int held_fd
    cdef const char* held_path
    cdef Py_ssize_t held_checked  # the chunk whose identity row the held file matched
                                  # (-1: none yet)
    cdef int load(self, Py_ssize_t k) noexcept nogil
    cdef int _load_range(self, Py_ssize_t k) noexcept nogil
    cdef int _file_of(self, Py_ssize_t k) noexcept nogil
    cdef bint _checked_as(self, Py_ssize_t k) noexcept nogil
    cdef void _let_go(self) noexcept nogil
    cdef bint _reserve(self, size_t n) noexcept nogil


cdef class _Dests:
    cdef PyObject** objs
    cdef char** ptr
    cdef Py_ssize_t* sizes
    cdef Py_ssize_t n
    cdef int collect(self, list out, Py_ssize_t upto) except -1


cdef int check_ortho_shapes(OrthoPlan plan, cnp.ndarray chunk, cnp.ndarray other,
                            str other_what) except -1
cdef int check_points_shapes(PointsPlan plan, cnp.ndarray chunk, cnp.ndarray flat) except -1
cdef int _check_decode_args(object plan, cnp.ndarray out, cnp.ndarray scratch, int nd,
                            bint points) except -1
cdef int _check_encode_args(OrthoPlan plan, cnp.ndarray value, cnp.ndarray scratch,
                            const unsigned char[:] pre, Py_ssize_t nolds, Py_ssize_t n,
                            cnp.ndarray fill_item) except -1
