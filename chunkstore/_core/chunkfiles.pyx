# cython: language_level=3
"""Read Blosc chunk files, decompress them and merge them into the output: a whole batch in
one pass without the GIL.

For an array in a local directory, reading a batch through the store and then decoding it
costs a bytes object and a dict entry per chunk and several GIL hand-offs per batch; with two
threads the hand-offs and the allocator traffic are what keeps small-chunk reads from
scaling. Here one reusable buffer takes each file in turn (open, fstat, read, close), and the
chunk goes straight on to c-blosc and the merge kernel. Nothing here knows about stores: the
caller gives file paths (DirectoryStore.file_paths) and handles every chunk this pass
reports as missing or could not take (status codes below), through the store and codec,
which raise the proper errors.
"""

from libc.errno cimport EINTR, ENOENT, ENOTDIR, errno
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc, realloc

cimport numpy as cnp

from chunkstore._core.merge cimport (_block_offset, _ortho_copy_ptr, _points_copy_ptr,
                                     blosc_decompress_fn, blosc_validate_fn)
from chunkstore._core.projection cimport OrthoPlan, PointsPlan

cnp.import_array()


cdef extern from "<fcntl.h>" nogil:
    int open(const char* path, int flags)
    int O_RDONLY
    int O_CLOEXEC

cdef extern from "<unistd.h>" nogil:
    ssize_t read(int fd, void* buf, size_t n)
    int close(int fd)

cdef extern from "<sys/stat.h>" nogil:
    struct stat:
        long st_size
        unsigned int st_mode
    int fstat(int fd, stat* st)
    bint S_ISREG(unsigned int mode)
    bint S_ISDIR(unsigned int mode)


# Status of each chunk after a pass.
cdef enum:
    _DONE = 0      # merged into the output
    _MISSING = 1   # no file (ENOENT, ENOTDIR, or a directory: a key prefix)
    _REDO = 2      # anything else (I/O error, not a regular file, changed while read, a
                   # frame c-blosc rejects): the caller reads and decodes it the usual way

DONE, MISSING, REDO = _DONE, _MISSING, _REDO


cdef struct FileBuf:
    char* data
    size_t cap


cdef int _read_file(const char* path, FileBuf* buf, size_t* length) noexcept nogil:
    """The whole file at path into buf (grown as needed). Returns _DONE, _MISSING or _REDO."""
    cdef int fd
    cdef stat st
    cdef size_t want, got = 0
    cdef ssize_t r
    cdef char* grown
    cdef int status = _DONE
    while True:                                # EINTR is retried, as Python's os.open does
        fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd >= 0 or errno != EINTR:
            break
    if fd < 0:
        return _MISSING if errno == ENOENT or errno == ENOTDIR else _REDO
    if fstat(fd, &st) != 0:
        status = _REDO
    elif S_ISDIR(st.st_mode):
        status = _MISSING
    elif not S_ISREG(st.st_mode):
        status = _REDO
    else:
        want = <size_t>st.st_size + 1          # one byte more: detects a file that grew
        if want > buf.cap:
            grown = <char*>realloc(buf.data, want)
            if grown == NULL:
                status = _REDO
            else:
                buf.data = grown
                buf.cap = want
        while status == _DONE and got < want:
            r = read(fd, buf.data + got, want - got)
            if r < 0:
                if errno == EINTR:
                    continue
                status = _REDO
                break
            got += r
            # A read that returns fewer bytes than asked has reached the file's end (regular
            # files); one that fills the extra byte means the file grew since fstat.
            if r == 0 or got == want - 1:
                break
        if status == _DONE and got != want - 1:
            status = _REDO                      # grew or shrank while being read
    close(fd)
    length[0] = got
    return status


cdef int _prepare(list paths, const char*** cpaths) except -1:
    cdef Py_ssize_t n = len(paths), k
    cpaths[0] = <const char**>malloc((n + 1) * sizeof(char*))
    if cpaths[0] == NULL:
        raise MemoryError()
    for k in range(n):
        p = paths[k]
        if type(p) is not bytes or b"\0" in <bytes>p:
            free(cpaths[0])
            if type(p) is not bytes:
                raise TypeError("paths must be bytes")
            raise ValueError(f"embedded null byte in path {p!r}")
        cpaths[0][k] = <bytes>p
    return 0


def read_blosc_gather(list paths, idx, OrthoPlan plan, cnp.ndarray out, cnp.ndarray scratch,
                      size_t validate_addr, size_t decompress_addr, int32_t[::1] status):
    """For each k: read the Blosc chunk file paths[k], decompress it and merge it into out as
    touched chunk idx[k] of plan (straight into out where the chunk lands whole and
    contiguous, else through scratch, a chunk-shaped buffer in the chunk's order), all
    without the GIL. status[k] is set to DONE, MISSING or REDO (see above); the caller
    handles the chunks that are not DONE. validate_addr/decompress_addr are c-blosc's
    blosc_cbuffer_validate and blosc_decompress_ctx."""
    cdef int nd = plan.ndim, d
    cdef Py_ssize_t n = len(paths), k
    if nd > 64 or scratch.ndim != nd or out.ndim != nd:
        raise ValueError("dimension mismatch")
    if out.dtype.itemsize != scratch.dtype.itemsize or out.dtype.hasobject:
        raise ValueError("out and scratch must share a fixed itemsize")
    if not out.flags.writeable or not scratch.flags.writeable:
        raise ValueError("out and scratch must be writable")
    cdef bint c_order = scratch.flags.c_contiguous
    if not c_order and not scratch.flags.f_contiguous:
        raise ValueError("scratch must be contiguous")
    if len(idx) != n or status.shape[0] != n:
        raise ValueError("paths, idx and status differ in length")
    cdef int64_t[::1] ids = cnp.PyArray_FROMANY(idx, cnp.NPY_INT64, 1, 1,
                                                cnp.NPY_ARRAY_C_CONTIGUOUS)
    for k in range(n):
        if ids[k] < 0 or ids[k] >= plan.nchunks:
            raise IndexError(f"touched-chunk index {ids[k]} out of range")
    cdef blosc_validate_fn validate = <blosc_validate_fn><void*>validate_addr
    cdef blosc_decompress_fn decompress = <blosc_decompress_fn><void*>decompress_addr
    cdef Py_ssize_t itemsize = out.dtype.itemsize, off
    cdef size_t expected = scratch.nbytes, nbytes, length
    cdef Py_ssize_t cshape[64]
    for d in range(nd):
        cshape[d] = scratch.shape[d]
    cdef char* odata = <char*>cnp.PyArray_DATA(out)
    cdef char* sdata = <char*>cnp.PyArray_DATA(scratch)
    cdef Py_ssize_t* ostr = <Py_ssize_t*>out.strides
    cdef Py_ssize_t* sstr = <Py_ssize_t*>scratch.strides
    cdef const char** cpaths
    cdef FileBuf buf
    buf.data = NULL
    buf.cap = 0
    _prepare(paths, &cpaths)
    try:
        with nogil:
            for k in range(n):
                status[k] = _read_file(cpaths[k], &buf, &length)
                if status[k] != _DONE:
                    continue
                if length < 16 or validate(buf.data, length, &nbytes) != 0 \
                        or nbytes != expected:
                    status[k] = _REDO
                    continue
                off = _block_offset(plan, ids[k], ostr, cshape, itemsize, c_order)
                if off >= 0:
                    if decompress(buf.data, odata + off, expected, 1) != <int>expected:
                        status[k] = _REDO
                    continue
                if decompress(buf.data, sdata, expected, 1) != <int>expected:
                    status[k] = _REDO
                    continue
                _ortho_copy_ptr(plan, ids[k], sdata, sstr, odata, ostr, itemsize, 0)
    finally:
        free(buf.data)
        free(cpaths)


def read_blosc_gather_points(list paths, idx, PointsPlan plan, cnp.ndarray out_flat,
                             cnp.ndarray scratch, size_t validate_addr,
                             size_t decompress_addr, int32_t[::1] status):
    """read_blosc_gather for a coordinate selection: each chunk's points go to out_flat."""
    cdef int nd = plan.ndim
    cdef Py_ssize_t n = len(paths), k
    if scratch.ndim != nd or out_flat.ndim != 1:
        raise ValueError("dimension mismatch")
    if out_flat.dtype.itemsize != scratch.dtype.itemsize or out_flat.dtype.hasobject:
        raise ValueError("out and scratch must share a fixed itemsize")
    if not out_flat.flags.writeable or not scratch.flags.writeable:
        raise ValueError("out and scratch must be writable")
    if not (scratch.flags.c_contiguous or scratch.flags.f_contiguous):
        raise ValueError("scratch must be contiguous")
    if len(idx) != n or status.shape[0] != n:
        raise ValueError("paths, idx and status differ in length")
    cdef int64_t[::1] ids = cnp.PyArray_FROMANY(idx, cnp.NPY_INT64, 1, 1,
                                                cnp.NPY_ARRAY_C_CONTIGUOUS)
    for k in range(n):
        if ids[k] < 0 or ids[k] >= plan.nchunks:
            raise IndexError(f"touched-chunk index {ids[k]} out of range")
    cdef blosc_validate_fn validate = <blosc_validate_fn><void*>validate_addr
    cdef blosc_decompress_fn decompress = <blosc_decompress_fn><void*>decompress_addr
    cdef Py_ssize_t itemsize = out_flat.dtype.itemsize
    cdef size_t expected = scratch.nbytes, nbytes, length
    cdef char* fdata = <char*>cnp.PyArray_DATA(out_flat)
    cdef char* sdata = <char*>cnp.PyArray_DATA(scratch)
    cdef Py_ssize_t fstr = out_flat.strides[0]
    cdef Py_ssize_t* sstr = <Py_ssize_t*>scratch.strides
    cdef const char** cpaths
    cdef FileBuf buf
    buf.data = NULL
    buf.cap = 0
    _prepare(paths, &cpaths)
    try:
        with nogil:
            for k in range(n):
                status[k] = _read_file(cpaths[k], &buf, &length)
                if status[k] != _DONE:
                    continue
                if length < 16 or validate(buf.data, length, &nbytes) != 0 \
                        or nbytes != expected \
                        or decompress(buf.data, sdata, expected, 1) != <int>expected:
                    status[k] = _REDO
                    continue
                _points_copy_ptr(plan, ids[k], sdata, sstr, fdata, fstr, itemsize, 0)
    finally:
        free(buf.data)
        free(cpaths)
