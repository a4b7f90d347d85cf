# cython: language_level=3
"""What the batch codec kernels (chunkstore._core.merge's Blosc ones, chunkstore._core.zcodecs)
share around their nogil loops: a batch's encoded chunks and its encoded results as C arrays,
and the checks of their arguments."""

from libc.stdlib cimport malloc, free, realloc
from libc.string cimport strcmp
from libc.errno cimport errno, EINTR
from libc.stdint cimport int64_t

cimport numpy as cnp

from chunkstore._core.projection cimport OrthoPlan, PointsPlan

cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject** b, Py_ssize_t n) except -1
    void Py_XDECREF(PyObject* o)
    void Py_INCREF(object o)

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING

import numpy as np

cnp.import_array()

# One read buffer kept per thread between batches: a batch reading chunk files into a fresh
# buffer paid the kernel's page faults (and zeroing) for every batch: for large chunks read
# one a call (a dask task per chunk) that was a third of the page faults of a whole-array
# read. A thread keeps at most one buffer of at most KEPT_MAX bytes; it is freed when the
# thread exits (a pthread key's destructor).
cdef extern from *:
    """
    #include <pthread.h>
    #include <stdlib.h>
    typedef struct { char* buf; size_t cap; } chunkstore_kept_t;
    static pthread_key_t chunkstore_kept_key;
    static pthread_once_t chunkstore_kept_once = PTHREAD_ONCE_INIT;
    static void chunkstore_kept_free(void* p) {
        chunkstore_kept_t* k = (chunkstore_kept_t*)p;
        if (k) { free(k->buf); free(k); }
    }
    static void chunkstore_kept_init(void) {
        pthread_key_create(&chunkstore_kept_key, chunkstore_kept_free);
    }
    static chunkstore_kept_t* chunkstore_kept(void) {
        chunkstore_kept_t* k;
        pthread_once(&chunkstore_kept_once, chunkstore_kept_init);
        k = (chunkstore_kept_t*)pthread_getspecific(chunkstore_kept_key);
        if (k == NULL) {
            k = (chunkstore_kept_t*)calloc(1, sizeof(chunkstore_kept_t));
            if (k != NULL && pthread_setspecific(chunkstore_kept_key, k) != 0) {
                free(k);
                k = NULL;
            }
        }
        return k;
    }
    /* This thread's kept buffer if it holds at least n bytes (its size in *cap), handed
       over (the thread keeps none until one is given back); else NULL. */
    static char* chunkstore_kept_take(size_t n, size_t* cap) {
        chunkstore_kept_t* k = chunkstore_kept();
        char* b;
        if (k == NULL || k->buf == NULL || k->cap < n) return NULL;
        b = k->buf; *cap = k->cap; k->buf = NULL; k->cap = 0;
        return b;
    }
    /* Keep b (cap bytes) for this thread's next batch where it is the larger and at most
       limit bytes; free what is not kept. */
    static void chunkstore_kept_give(char* b, size_t cap, size_t limit) {
        chunkstore_kept_t* k;
        if (b == NULL) return;
        k = cap <= limit ? chunkstore_kept() : NULL;
        if (k != NULL && cap > k->cap) {
            free(k->buf); k->buf = b; k->cap = cap;
        } else {
            free(b);
        }
    }
    """
    char* chunkstore_kept_take(size_t n, size_t* cap) nogil
    void chunkstore_kept_give(char* b, size_t cap, size_t limit) nogil

# the largest read buffer a thread keeps between batches (a C value: __dealloc__ may run
# while the interpreter shuts down, when module globals are gone)
cdef size_t _KEPT_MAX = 32 * 2**20
KEPT_MAX = _KEPT_MAX


from chunkstore._core.sysio cimport (
    IDENT_LEN, S_ISREG, _fstat_retry, _open_read, chunkstore_stat_ident, close, fstat, pread,
    read, stat)


cdef class Files:
    """The files that hold a batch's encoded chunks (bytes paths, one per chunk, already
    validated by the store), for the decode kernels to read themselves (see _Batch.load). A
    file that is absent, unreadable, not a regular file, over maxlen bytes or changing size
    while read stops the kernel at that chunk, like a chunk that fails to decode: the caller
    reads that chunk through the store, which reports it properly. Slicing gives the Files
    of a tail of the batch.

    ranges (inner chunks of shards): an (n, 2) int64 array of each chunk's offset and length
    in its file; a chunk is then those bytes (fewer there, or a negative offset, stops the
    kernel at it as above).

    idents (with ranges): an (n, 5) int64 array, the identity of the version of each file
    that the ranges were taken from (its shard index); a file that is not that version any
    more (rewritten by replace-by-rename) stops the kernel at the chunk as above, so a
    range is never read from another version of the shard than its index."""

    def __init__(self, list paths, size_t maxlen, ranges=None, idents=None):
        paths = list(paths)  # (a copy: the kernels trust its length and types)
        for p in paths:
            if type(p) is not bytes or b"\0" in p:
                raise TypeError("Files takes bytes paths without NUL bytes")
        if ranges is not None:
            ranges = np.array(ranges, dtype=np.int64, order="C")  # (a copy, as paths)
            if ranges.shape != (len(paths), 2):
                raise ValueError(f"ranges must have shape ({len(paths)}, 2), "
                                 f"not {ranges.shape}")
        if idents is not None:
            if ranges is None:
                raise ValueError("idents need ranges")
            idents = np.array(idents, dtype=np.int64, order="C")
            if idents.shape != (len(paths), IDENT_LEN):
                raise ValueError(f"idents must have shape ({len(paths)}, {IDENT_LEN}), "
                                 f"not {idents.shape}")
        self.paths = paths
        self.maxlen = maxlen
        self.ranges = ranges
        self.idents = idents

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, s):
        if not isinstance(s, slice):
            raise TypeError("Files only slices")
        return Files(self.paths[s], self.maxlen,
                     None if self.ranges is None else self.ranges[s],
                     None if self.idents is None else self.idents[s])


cdef class _Batch:
    """A batch's encoded chunks as C arrays for a nogil loop: pointers and lengths of the
    bytes (converted to bytes where needed, and pinned in datas; a None entry, where
    allowed, gives NULL), and the touched-chunk index of each. datas may also be Files: the
    chunks are then read one by one into a buffer of the batch by load(k). Freed with the
    object."""

    def __cinit__(self, idx, datas, Py_ssize_t nchunks, bint allow_none=False):
        cdef Py_ssize_t n = len(datas), k, ii
        cdef Files files = datas if isinstance(datas, Files) else None
        if len(idx) != n:
            raise ValueError("one touched-chunk index per chunk is needed")
        self.src = <const char**>malloc((n + 1) * sizeof(char*))
        self.srclen = <size_t*>malloc((n + 1) * sizeof(size_t))
        self.ids = <int64_t*>malloc((n + 1) * sizeof(int64_t))
        if self.src == NULL or self.srclen == NULL or self.ids == NULL:
            raise MemoryError()
        if files is not None:
            self.paths = <const char**>malloc((n + 1) * sizeof(char*))
            if self.paths == NULL:
                raise MemoryError()
            self.maxlen = files.maxlen
            if files.ranges is not None:
                self.ranges = <int64_t*>cnp.PyArray_DATA(files.ranges)  # pinned by files
            if files.idents is not None:
                self.idents = <int64_t*>cnp.PyArray_DATA(files.idents)  # pinned by files
        for k in range(n):
            if files is not None:
                self.paths[k] = <const char*>(<bytes>files.paths[k])  # pinned by files
                self.src[k] = NULL
                self.srclen[k] = 0
            else:
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

    cdef int load(self, Py_ssize_t k) noexcept nogil:
        """Chunk k's bytes: read from its file into buf (batches of Files), or already there.
        0, or -1 when the file cannot be taken here (see Files)."""
        if self.paths == NULL:
            return 0
        if self.ranges != NULL:
            return self._load_range(k)
        cdef int fd = _open_read(self.paths[k])
        if fd < 0:
            return -1
        cdef stat st
        cdef size_t size, got = 0
        cdef ssize_t r = 0
        if (fstat(fd, &st) != 0 or not S_ISREG(st.st_mode) or st.st_size < 0
                or <size_t>st.st_size > self.maxlen
                or not self._reserve(<size_t>st.st_size + 1)):
            close(fd)
            return -1
        size = <size_t>st.st_size
        while got < size + 1:          # one byte more than fstat said: a growing file shows
            r = read(fd, self.buf + got, size + 1 - got)
            if r < 0:
                if errno == EINTR:
                    continue
                break
            if r == 0:
                break
            got += r
            if got == size:            # the common case: no further read call (a short
                break                  # read of a regular file is its end)
        close(fd)
        if r < 0 or got != size:
            return -1
        self.src[k] = self.buf
        self.srclen[k] = size
        return 0

    cdef int _load_range(self, Py_ssize_t k) noexcept nogil:
        cdef int64_t off = self.ranges[2 * k], n = self.ranges[2 * k + 1]
        cdef size_t got = 0
        cdef ssize_t r
        if off < 0 or n < 0 or <size_t>n > self.maxlen or not self._reserve(<size_t>n):
            return -1
        cdef int fd = self._file_of(k)
        cdef stat st
        cdef long long ident[IDENT_LEN]
        cdef int j
        if fd < 0:
            return -1
        if self.idents != NULL and not self._checked_as(k):
            # the file must be the version whose index gave the range: checked once for the
            # descriptor (it pins that version; a replaced shard is a new file)
            if _fstat_retry(fd, &st) != 0:
                return -1
            chunkstore_stat_ident(&st, ident)
            for j in range(IDENT_LEN):
                if ident[j] != self.idents[IDENT_LEN * k + j]:
                    return -1
            self.held_checked = k
        while got < <size_t>n:
            r = pread(fd, self.buf + got, <size_t>n - got, off + got)
            if r < 0 and errno == EINTR:
                continue
            if r <= 0:
                break
            got += r
        if got != <size_t>n:
            return -1
        self.src[k] = self.buf
        self.srclen[k] = got
        return 0

    cdef int _file_of(self, Py_ssize_t k) noexcept nogil:
        """A descriptor of chunk k's file: the one the batch holds when the last chunk read
        was in the same file (a shard's inner chunks come in a row: one open(2) a shard and
        batch, not one a chunk; on the development VM open and close are most of the
        system time of a small read); else the file opened now, held instead. -1: it cannot
        be opened."""
        if self.held and strcmp(self.held_path, self.paths[k]) == 0:
            return self.held_fd
        self._let_go()
        cdef int fd = _open_read(self.paths[k])
        if fd >= 0:
            self.held, self.held_fd, self.held_path = True, fd, self.paths[k]
            self.held_checked = -1
        return fd

    cdef bint _checked_as(self, Py_ssize_t k) noexcept nogil:
        """Was the held file found to be the version chunk k's range is of (the identity
        row of an earlier chunk read through it equals k's)?"""
        cdef Py_ssize_t c = self.held_checked
        cdef int j
        if c < 0:
            return False
        for j in range(IDENT_LEN):
            if self.idents[IDENT_LEN * c + j] != self.idents[IDENT_LEN * k + j]:
                return False
        return True

    cdef void _let_go(self) noexcept nogil:
        if self.held:
            close(self.held_fd)
            self.held = False

    cdef bint _reserve(self, size_t n) noexcept nogil:
        """buf holds at least n bytes (False: out of memory)."""
        cdef char* nb
        cdef size_t kept_cap = 0
        if n > self.cap:
            if self.buf == NULL:
                nb = chunkstore_kept_take(n, &kept_cap)
                if nb != NULL:
                    self.buf, self.cap = nb, kept_cap
                    return True
            nb = <char*>realloc(self.buf, n)
            if nb == NULL:
                return False
            self.buf, self.cap = nb, n
        return True

    def __dealloc__(self):
        self._let_go()
        free(self.src)
        free(self.srclen)
        free(self.ids)
        free(self.paths)
        chunkstore_kept_give(self.buf, self.cap, _KEPT_MAX)


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


cdef int check_ortho_shapes(OrthoPlan plan, cnp.ndarray chunk, cnp.ndarray other,
                            str other_what) except -1:
    """chunk (None: not checked) has the plan's chunk shape and other the selection's
    shape (both of plan.ndim dimensions, checked before): the plan's local and output
    indices lie within them. Buffers of another shape (metadata that changed between
    planning and decoding, say) would be read or written out of bounds: an error instead."""
    cdef int d
    for d in range(plan.ndim):
        if other.shape[d] != plan.sel_shape[d]:
            raise ValueError(f"{other_what} of shape {(<object>other).shape} does not match "
                             f"the selection's shape {plan.sel_shape}")
        if chunk is not None and chunk.shape[d] != plan.dims[d].chunk_len:
            raise ValueError(f"chunk buffer of shape {(<object>chunk).shape} does not match "
                             f"the plan's chunk shape "
                             f"{tuple([plan.dims[k].chunk_len for k in range(plan.ndim)])}")
    return 0


cdef int check_points_shapes(PointsPlan plan, cnp.ndarray chunk, cnp.ndarray flat) except -1:
    """check_ortho_shapes for points: chunk (None: not checked) has the plan's chunk shape,
    flat (1-d) room for every point."""
    cdef int d
    if flat.shape[0] < plan.npoints:
        raise ValueError(f"points buffer of {flat.shape[0]} elements is shorter than the "
                         f"{plan.npoints} points")
    if chunk is None:
        return 0
    for d in range(plan.ndim):
        if chunk.shape[d] != plan.chunk_lens[d]:
            raise ValueError(f"chunk buffer of shape {(<object>chunk).shape} does not match "
                             f"the plan's chunk shape "
                             f"{tuple([plan.chunk_lens[k] for k in range(plan.ndim)])}")
    return 0


cdef int _check_decode_args(object plan, cnp.ndarray out, cnp.ndarray scratch, int nd,
                            bint points) except -1:
    """The argument checks of the batch decoders: out (nd dimensions of the selection's
    shape, or a flat buffer with room for the points) and scratch (of the plan's chunk
    shape, contiguous) writable, of one fixed itemsize."""
    if (not points and nd > 64) or scratch.ndim != nd or out.ndim != (1 if points else nd):
        raise ValueError("dimension mismatch")
    if points:
        check_points_shapes(<PointsPlan>plan, scratch, out)
    else:
        check_ortho_shapes(<OrthoPlan>plan, scratch, out, "output")
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
    """The argument checks of the batch encoders (see zcodecs.scatter_encode)."""
    cdef int nd = plan.ndim
    if nd > 64 or scratch.ndim != nd or value.ndim != nd:
        raise ValueError("dimension mismatch")
    check_ortho_shapes(plan, scratch, value, "value")
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
