# cython: language_level=3
"""What the batch codec kernels (chunkstore._core.merge's Blosc ones, chunkstore._core.zcodecs)
share around their nogil loops: a batch's encoded chunks and its encoded results as C arrays,
and the checks of their arguments."""

from libc.stdlib cimport malloc, free
from libc.stdint cimport int64_t

cimport numpy as cnp

from chunkstore._core.projection cimport OrthoPlan

cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject** b, Py_ssize_t n) except -1
    void Py_XDECREF(PyObject* o)
    void Py_INCREF(object o)

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING

cnp.import_array()


cdef class _Batch:
    """A batch's encoded chunks as C arrays for a nogil loop: pointers and lengths of the
    bytes (converted to bytes where needed, and pinned in datas; a None entry, where
    allowed, gives NULL), and the touched-chunk index of each. Freed with the object."""

    def __cinit__(self, idx, list datas, Py_ssize_t nchunks, bint allow_none=False):
        cdef Py_ssize_t n = len(datas), k, ii
        if len(idx) != n:
            raise ValueError("one touched-chunk index per chunk is needed")
        self.src = <const char**>malloc((n + 1) * sizeof(char*))
        self.srclen = <size_t*>malloc((n + 1) * sizeof(size_t))
        self.ids = <int64_t*>malloc((n + 1) * sizeof(int64_t))
        if self.src == NULL or self.srclen == NULL or self.ids == NULL:
            raise MemoryError()
        for k in range(n):
            b = datas[k]
            if b is None and allow_none:
                self.src[k] = NULL
                self.srclen[k] = 0
            elif not isinstance(b, bytes):
                b = bytes(b)
                datas[k] = b          # the caller's list keeps it alive for the nogil loop
            if b is not None or not allow_none:
                self.src[k] = <const char*>(<bytes>b)
                self.srclen[k] = len(<bytes>b)
            ii = idx[k]
            if ii < 0 or ii >= nchunks:
                raise IndexError(f"touched-chunk index {ii} out of range")
            self.ids[k] = ii

    def __dealloc__(self):
        free(self.src)
        free(self.srclen)
        free(self.ids)


cdef class _Dests:
    """n bytes objects of cap bytes that a nogil loop encodes chunks into (ptr[k]), with
    their sizes (sizes[k] < 0: no chunk, it was all fill). Each is owned only here (refcount
    1), so collect can shrink it in place to its size."""

    def __cinit__(self, Py_ssize_t n, size_t cap):
        cdef Py_ssize_t k
        self.n = 0
        self.objs = <PyObject**>malloc((n + 1) * sizeof(PyObject*))
        self.ptr = <char**>malloc((n + 1) * sizeof(char*))
        self.sizes = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
        if self.objs == NULL or self.ptr == NULL or self.sizes == NULL:
            raise MemoryError()
        for k in range(n):
            b = PyBytes_FromStringAndSize(NULL, cap)
            Py_INCREF(b)
            self.objs[k] = <PyObject*>b
            self.ptr[k] = PyBytes_AS_STRING(b)
            self.sizes[k] = 0
            self.n = k + 1

    cdef int collect(self, list out, Py_ssize_t upto) except -1:
        """Append the results of chunks 0..upto-1 to out (None for an all-fill chunk)."""
        cdef Py_ssize_t k
        for k in range(upto):
            if self.sizes[k] < 0:
                out.append(None)
                continue
            _PyBytes_Resize(&self.objs[k], self.sizes[k])
            out.append(<object>self.objs[k])
        return 0

    def __dealloc__(self):
        cdef Py_ssize_t k
        if self.objs != NULL:
            for k in range(self.n):
                Py_XDECREF(self.objs[k])
        free(self.objs); free(self.ptr); free(self.sizes)


cdef int _check_decode_args(cnp.ndarray out, cnp.ndarray scratch, int nd,
                            bint points) except -1:
    """The argument checks of the batch decoders: out (nd dimensions, or a flat buffer for
    points) and scratch (chunk-shaped, contiguous) writable, of one fixed itemsize."""
    if (not points and nd > 64) or scratch.ndim != nd or out.ndim != (1 if points else nd):
        raise ValueError("dimension mismatch")
    if out.dtype.itemsize != scratch.dtype.itemsize or out.dtype.hasobject:
        raise ValueError("out and scratch must share a fixed itemsize")
    if not out.flags.writeable or not scratch.flags.writeable:
        raise ValueError("out and scratch must be writable")
    if not (scratch.flags.c_contiguous or scratch.flags.f_contiguous):
        raise ValueError("scratch must be contiguous")
    return 0


cdef int _check_encode_args(OrthoPlan plan, cnp.ndarray value, cnp.ndarray scratch,
                            const unsigned char[:] pre, Py_ssize_t nolds, Py_ssize_t n,
                            cnp.ndarray fill_item) except -1:
    """The argument checks of the batch encoders (see blosc_scatter_encode)."""
    cdef int nd = plan.ndim
    if nd > 64 or scratch.ndim != nd or value.ndim != nd:
        raise ValueError("dimension mismatch")
    if value.dtype.itemsize != scratch.dtype.itemsize or scratch.dtype.hasobject:
        raise ValueError("value and scratch must share a fixed itemsize")
    if not scratch.flags.writeable:
        raise ValueError("scratch must be writable")
    if not (scratch.flags.c_contiguous or scratch.flags.f_contiguous):
        raise ValueError("scratch must be contiguous")
    if fill_item.size != 1 or fill_item.dtype.itemsize != scratch.dtype.itemsize:
        raise ValueError("fill_item must be one element of the chunk's itemsize")
    if pre.shape[0] != plan.nchunks:
        raise ValueError("prefill needs one flag per touched chunk")
    if nolds != n:
        raise ValueError("olds needs one entry per chunk")
    return 0
