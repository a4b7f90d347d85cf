# cython: language_level=3
"""Batches of small-file reads, and the paths of store keys, with the GIL released for all
the system calls of a batch (atomic batch writes: _filewrite).

DirectoryStore reads and writes whole batches of chunk files. From Python, each file costs
four short GIL-releasing system calls (open, fstat, read, close; or open, write, close,
rename) and a few microseconds of path handling holding the GIL; with several threads the
GIL then ping-pongs between them, and small-chunk I/O stops scaling. Here a batch's paths are
built in C and its system calls run without the GIL.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.errno cimport EEXIST, EINTR, EISDIR, ENOENT, ENOTDIR, errno
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, strerror, strlen


cdef extern from "Python.h":
    ctypedef struct PyObject
    bint PyUnicode_IS_ASCII(object o)
    int _PyBytes_Resize(PyObject** b, Py_ssize_t n) except -1
    void Py_XDECREF(PyObject* o)
    void Py_INCREF(object o)

from chunkstore._core.sysio cimport (
    IDENT_LEN, S_ISDIR, S_ISFIFO, S_ISREG, S_ISSOCK, _c_path, _fstat_retry, _open_read, close,
    chunkstore_stat_ident, read, stat)


import errno as errno_mod
import os

from chunkstore.storage.base import validate_key


# Files a read_files call holds open at once: bounds its file descriptors (threads x this in
# all) while keeping the GIL hand-offs few (three per group of files).
cdef enum:
    _OPEN_GROUP = 64


def read_files(list paths):
    """Contents of each path (str or bytes) as bytes, or None where there is no file (ENOENT,
    ENOTDIR, or a directory: a key prefix, not a key). Any other error raises OSError naming
    the path. Non-regular files (or files that change size while being read) are read with
    Python's own I/O instead.

    Per group of files: open and fstat them all without the GIL, allocate the bytes objects
    (one byte longer than fstat said), then read and close them all without the GIL. A read
    that fills the extra byte means the file grew; one that ends early means it shrank."""
    cdef Py_ssize_t n = len(paths), i, g0, g1
    cdef list encoded = [p if type(p) is bytes else os.fsencode(p) for p in paths]
    cdef const char** cpaths = <const char**>malloc((n + 1) * sizeof(char*))
    cdef int* fds = <int*>malloc((n + 1) * sizeof(int))
    cdef long* sizes = <long*>malloc((n + 1) * sizeof(long))
    cdef int* errs = <int*>malloc((n + 1) * sizeof(int))
    cdef char** bufs = <char**>malloc((n + 1) * sizeof(char*))
    # the bytes objects, owned here alone (refcount 1) until they are shrunk to size
    cdef PyObject** objs = <PyObject**>malloc((n + 1) * sizeof(PyObject*))
    cdef stat st
    cdef ssize_t got, r, want
    if not (cpaths and fds and sizes and errs and bufs and objs):
        free(cpaths); free(fds); free(sizes); free(errs); free(bufs); free(objs)
        raise MemoryError()
    out = [None] * n
    try:
        for i in range(n):
            fds[i] = -1
            sizes[i] = -1
            errs[i] = 0
            objs[i] = NULL
        for i in range(n):  # after the above: the cleanup below reads them if this raises
            cpaths[i] = _c_path(encoded[i])
        for g0 in range(0, n, _OPEN_GROUP):
            g1 = min(n, g0 + _OPEN_GROUP)
            with nogil:
                for i in range(g0, g1):
                    fds[i] = _open_read(cpaths[i])
                    if fds[i] < 0:
                        errs[i] = errno
                    elif _fstat_retry(fds[i], &st) != 0:
                        errs[i] = errno
                    elif S_ISREG(st.st_mode):
                        sizes[i] = st.st_size
                    elif S_ISDIR(st.st_mode):
                        errs[i] = ENOENT
                    elif S_ISFIFO(st.st_mode) or S_ISSOCK(st.st_mode):
                        errs[i] = -2              # never a chunk: refused below
            for i in range(g0, g1):
                bufs[i] = NULL
                if sizes[i] >= 0:
                    b = PyBytes_FromStringAndSize(NULL, sizes[i] + 1)
                    Py_INCREF(b)
                    objs[i] = <PyObject*>b
                    bufs[i] = PyBytes_AS_STRING(b)
            b = None
            with nogil:
                for i in range(g0, g1):
                    if bufs[i] != NULL:
                        got = 0
                        want = sizes[i] + 1
                        while got < want:
                            r = read(fds[i], bufs[i] + got, want - got)
                            if r < 0:
                                if errno == EINTR:
                                    continue
                                errs[i] = errno
                                break
                            got += r
                            # A short read of a regular file is its end; at fstat's size
                            # (the common case) that needs no further read call.
                            if r == 0 or got == sizes[i]:
                                break
                        if errs[i] == 0 and got != sizes[i]:
                            errs[i] = -1      # grew or shrank while reading: redo in Python
                    if fds[i] >= 0:
                        close(fds[i])
                        fds[i] = -1
        for i in range(n):
            e = errs[i]
            if e == ENOENT or e == ENOTDIR:
                out[i] = None
            elif e == -2:
                out[i] = None
                raise OSError(errno_mod.EINVAL, "not a regular file (a FIFO or socket)",
                              os.fsdecode(paths[i]))
            elif e == -1 or (e == 0 and sizes[i] < 0):
                try:                               # growing, shrinking or not a regular file
                    with open_py(paths[i]) as f:
                        out[i] = f.read()
                except OSError as err:
                    if err.filename is None:
                        raise OSError(err.errno, err.strerror, os.fsdecode(paths[i])) from err
                    raise
            elif e != 0:
                out[i] = None
                raise OSError(e, strerror(e).decode(errors="replace"), os.fsdecode(paths[i]))
            else:
                _PyBytes_Resize(&objs[i], sizes[i])
                out[i] = <object>objs[i]
    finally:
        for i in range(n):
            if fds[i] >= 0:
                close(fds[i])
            Py_XDECREF(objs[i])
        free(cpaths); free(fds); free(sizes); free(errs); free(bufs); free(objs)
    return out


def open_py(path):
    import builtins
    return builtins.open(path, "rb")


cdef bint _valid_key(const char* k, Py_ssize_t n) noexcept nogil:
    """The rules of chunkstore.storage.base.validate_key, for an ASCII key: not empty, no
    leading '/', no backslash or NUL, and no empty, '.' or '..' path segment."""
    cdef Py_ssize_t i, seg = 0
    cdef char ch
    if n == 0 or k[0] == 47:                        # '/'
        return False
    for i in range(n + 1):
        ch = k[i] if i < n else 47
        if ch == 92 or ch == 0:                     # backslash, NUL
            return False
        if ch == 47:
            # segment k[seg:i] must not be "", "." or ".."
            if i == seg or (i - seg == 1 and k[seg] == 46) or (
                    i - seg == 2 and k[seg] == 46 and k[seg + 1] == 46):
                return False
            seg = i + 1
    return True


def key_paths(str root, list keys):
    """The file path (bytes) of each store key under the directory root: root/key, with the
    key's '/' separators as directory separators. Every key is validated first, as
    chunkstore.storage.base.validate_key does (which raises the error for a bad one)."""
    cdef bytes rootb = os.fsencode(root)
    _c_path(rootb)
    if not rootb.endswith(b"/"):
        rootb += b"/"
    cdef Py_ssize_t rlen = len(rootb), n = len(keys), i, klen
    cdef const char* kp
    cdef list out = [None] * n
    cdef bytes b
    for i in range(n):
        k = keys[i]
        if type(k) is str and PyUnicode_IS_ASCII(k):
            kp = PyUnicode_AsUTF8AndSize(k, &klen)   # an ASCII str's own buffer: no copy
            if _valid_key(kp, klen):
                b = PyBytes_FromStringAndSize(NULL, rlen + klen)
                memcpy(PyBytes_AS_STRING(b), <const char*>rootb, rlen)
                memcpy(PyBytes_AS_STRING(b) + rlen, kp, klen)
                out[i] = b
                continue
        validate_key(k)                              # raises for a bad key
        out[i] = os.fsencode(os.path.join(root, *k.split("/")))
    return out


from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE,
                             PyBUF_STRIDES)


cdef extern from "<sys/uio.h>" nogil:
    struct iovec:
        void* iov_base
        size_t iov_len
    ssize_t preadv(int fd, const iovec* iov, int iovcnt, long offset)


cdef enum:
    _IOV_BATCH = 512          # iovecs per preadv call (IOV_MAX is 1024 on Linux)


cdef int _read_strided(int fd, Py_buffer* v, iovec* iov) noexcept nogil:
    """Read the file (v.len bytes, the buffer's items in C order of its shape) into the
    possibly strided buffer v with preadv, a run of contiguous bytes per iovec. 0 when
    done, 2 when the file ended early, or an errno (negated)."""
    cdef int nd = v.ndim, d, m = 0
    cdef Py_ssize_t run = v.itemsize, nruns = 1, k, j, off
    cdef Py_ssize_t idx[64]
    cdef long fpos = 0
    cdef ssize_t r
    cdef size_t want, left
    cdef int inner = nd      # dims [inner, nd) form one contiguous run
    while inner > 0 and v.strides[inner - 1] == run:
        inner -= 1
        run *= v.shape[inner]
    for d in range(inner):
        nruns *= v.shape[d]
        idx[d] = 0
    k = 0
    while k < nruns:
        m = 0
        want = 0
        while m < _IOV_BATCH and k < nruns:
            off = 0
            for d in range(inner):
                off += idx[d] * v.strides[d]
            iov[m].iov_base = <char*>v.buf + off
            iov[m].iov_len = run
            want += run
            m += 1
            k += 1
            d = inner - 1
            while d >= 0:                       # odometer over the outer dims
                idx[d] += 1
                if idx[d] < v.shape[d]:
                    break
                idx[d] = 0
                d -= 1
        j = 0
        left = want
        while left > 0:
            r = preadv(fd, iov + j, m - j, fpos)
            if r < 0:
                if errno == EINTR:
                    continue
                return -errno
            if r == 0:
                return 2
            fpos += r
            left -= r
            while j < m and <size_t>r >= iov[j].iov_len:    # skip what was filled
                r -= iov[j].iov_len
                j += 1
            if r > 0:
                iov[j].iov_base = <char*>iov[j].iov_base + r
                iov[j].iov_len -= r
    return 0


def read_files_into(list paths, list buffers):
    """Read each file (bytes path) whole into buffers[k], a writable buffer of any strides
    whose items, in C order of its shape, are the file's bytes, when the file is a regular
    file of exactly that many bytes: the bytes go from the file straight into the caller's
    memory (preadv, one iovec per contiguous run), with no bytes object between. Returns
    one status per path: 0 read, 1 no such file (ENOENT, ENOTDIR, a directory), 2 anything
    else the caller should read the ordinary way (another size, not a regular file, a short
    read). Any other error raises OSError naming the path. No GIL for the system calls."""
    cdef Py_ssize_t n = len(paths), k
    if len(buffers) != n:
        raise ValueError("paths and buffers differ in length")
    cdef const char** cpaths = <const char**>malloc((n + 1) * sizeof(char*))
    cdef Py_buffer* views = <Py_buffer*>malloc((n + 1) * sizeof(Py_buffer))
    cdef int* errs = <int*>malloc((n + 1) * sizeof(int))
    cdef int* status = <int*>malloc((n + 1) * sizeof(int))
    cdef iovec* iov = <iovec*>malloc(_IOV_BATCH * sizeof(iovec))
    cdef Py_ssize_t nviews = 0
    cdef stat st
    cdef int fd, rc
    if not (cpaths and views and errs and status and iov):
        free(cpaths); free(views); free(errs); free(status); free(iov)
        raise MemoryError()
    try:
        for k in range(n):
            p = paths[k]
            if type(p) is not bytes:
                raise TypeError("read_files_into takes bytes paths")
            cpaths[k] = _c_path(p)
        for k in range(n):
            PyObject_GetBuffer(buffers[k], &views[k], PyBUF_WRITABLE | PyBUF_STRIDES)
            nviews += 1
            if views[k].ndim > 64:
                raise ValueError("at most 64 dimensions")
        with nogil:
            for k in range(n):
                errs[k] = 0
                status[k] = 0
                fd = _open_read(cpaths[k])
                if fd < 0:
                    errs[k] = errno
                    continue
                if _fstat_retry(fd, &st) != 0:
                    errs[k] = errno
                elif S_ISDIR(st.st_mode):
                    errs[k] = ENOENT
                elif not S_ISREG(st.st_mode) or st.st_size != views[k].len:
                    status[k] = 2
                else:
                    rc = _read_strided(fd, &views[k], iov)
                    if rc < 0:
                        errs[k] = -rc
                    else:
                        status[k] = rc
                close(fd)
        out = [0] * n
        for k in range(n):
            e = errs[k]
            if e == ENOENT or e == ENOTDIR:
                out[k] = 1
            elif e != 0:
                raise OSError(e, strerror(e).decode(errors="replace"), os.fsdecode(paths[k]))
            else:
                out[k] = status[k]
        return out
    finally:
        for k in range(nviews):
            PyBuffer_Release(&views[k])
        free(cpaths); free(views); free(errs); free(status); free(iov)

cdef extern from "<unistd.h>" nogil:
    ssize_t pread(int fd, void* buf, size_t n, long offset)


cdef int _pread_all(int fd, Py_ssize_t n, const long* offs, const long* lens, long* gots,
                    char** bufs) noexcept nogil:
    """pread each range fully (a short count only at the end of the file): 0, or errno."""
    cdef Py_ssize_t i
    cdef ssize_t r
    cdef long got
    for i in range(n):
        got = 0
        while got < lens[i]:
            r = pread(fd, bufs[i] + got, lens[i] - got, offs[i] + got)
            if r < 0:
                if errno == EINTR:
                    continue
                return errno
            if r == 0:
                break
            got += r
        gots[i] = got
    return 0


cdef class _Ranges:
    """A list of (offset, nbytes) ranges as C arrays, with a bytes object allocated for each."""
    cdef Py_ssize_t n
    cdef long* offs
    cdef long* lens
    cdef long* gots
    cdef char** bufs
    cdef list out

    def __cinit__(self, list ranges):
        cdef Py_ssize_t i, n = len(ranges)
        self.n = n
        self.offs = <long*>malloc((n + 1) * sizeof(long))
        self.lens = <long*>malloc((n + 1) * sizeof(long))
        self.gots = <long*>malloc((n + 1) * sizeof(long))
        self.bufs = <char**>malloc((n + 1) * sizeof(char*))
        if not (self.offs and self.lens and self.gots and self.bufs):
            raise MemoryError()
        self.out = []
        for i in range(n):
            off, nb = ranges[i]
            if off < 0 or nb < 0:
                raise ValueError(f"byte range {ranges[i]!r} must have offset and length >= 0")
            self.offs[i], self.lens[i], self.gots[i] = off, nb, 0
            b = PyBytes_FromStringAndSize(NULL, nb)
            self.out.append(b)
            self.bufs[i] = PyBytes_AS_STRING(b)

    cdef list result(self):
        """The bytes read (cut where the file ended first)."""
        cdef Py_ssize_t i
        for i in range(self.n):
            if self.gots[i] != self.lens[i]:
                self.out[i] = self.out[i][:self.gots[i]]
        return self.out

    def __dealloc__(self):
        free(self.offs); free(self.lens); free(self.gots); free(self.bufs)


cdef tuple _ident_tuple(const long long* ident):
    return (ident[0], ident[1], ident[2], ident[3], ident[4])


def read_ranges(path, list ranges):
    """Byte ranges (offset >= 0, nbytes >= 0) of one file, as bytes (shorter where the file
    ends first), or None if there is no file. Open, reads and close in one GIL-free call: a
    sharded read's chunks cost one GIL hand-off, not four."""
    return read_ranges_at(path, ranges)[0]


cdef int _open_ident(const char* cpath, int* fd, long long* ident) noexcept nogil:
    """Open a regular file for reading and take its identity (sysio.chunkstore_stat_ident):
    0 with fd open, else an errno (EISDIR for a directory, -1 for another non-regular file)
    with nothing left open."""
    cdef stat st
    cdef int err
    fd[0] = _open_read(cpath)
    if fd[0] < 0:
        return errno
    if _fstat_retry(fd[0], &st) != 0:
        err = errno
    elif not S_ISREG(st.st_mode):
        err = EISDIR if S_ISDIR(st.st_mode) else -1
    else:
        chunkstore_stat_ident(&st, ident)
        return 0
    close(fd[0])
    fd[0] = -1
    return err


cdef bint _absent(int err, bytes path) except -1:
    """True where err means no file (a missing path, a directory: a key prefix); raise
    OSError naming the path for any other failure; False for none."""
    if err == ENOENT or err == ENOTDIR or err == EISDIR:
        return True
    if err == -1:
        raise OSError(errno_mod.EINVAL, "not a regular file", os.fsdecode(path))
    if err:
        raise OSError(err, strerror(err).decode(errors="replace"), os.fsdecode(path))
    return False


def read_ranges_at(path, list ranges, expect=None):
    """Byte ranges of one version of a file: ``(parts, ident)``, ident being the open file's
    identity (device, inode, size, mtime ns, ctime ns; see sysio.chunkstore_stat_ident).
    ``(None, None)`` if there is no file. With ``expect`` (an earlier ident) and a file that
    is not that version any more, ``(None, ident)`` and nothing is read. Open, fstat, reads
    and close in one GIL-free call."""
    cdef bytes enc = path if type(path) is bytes else os.fsencode(path)
    cdef const char* cpath = _c_path(enc)
    cdef _Ranges rs = _Ranges(ranges)
    cdef long long ident[IDENT_LEN]
    cdef long long want[IDENT_LEN]
    cdef bint check = expect is not None, same = True
    cdef int fd = -1, err = 0, k
    if check:
        if len(expect) != IDENT_LEN:
            raise ValueError(f"a file identity has {IDENT_LEN} integers, not {expect!r}")
        for k in range(IDENT_LEN):
            want[k] = expect[k]
    with nogil:
        err = _open_ident(cpath, &fd, ident)
        if err == 0:
            if check:
                for k in range(IDENT_LEN):
                    if ident[k] != want[k]:
                        same = False
            if same:
                err = _pread_all(fd, rs.n, rs.offs, rs.lens, rs.gots, rs.bufs)
            close(fd)
    if _absent(err, enc):
        return None, None
    if not same:
        return None, _ident_tuple(ident)
    return rs.result(), _ident_tuple(ident)


def open_ident(path):
    """Open a file for reading: ``(fd, ident)`` (see read_ranges_at), or None if there is no
    file; OSError naming the path for any other failure or a file that is not regular. The
    caller closes fd (os.close)."""
    cdef bytes enc = path if type(path) is bytes else os.fsencode(path)
    cdef const char* cpath = _c_path(enc)
    cdef long long ident[IDENT_LEN]
    cdef int fd = -1, err
    with nogil:
        err = _open_ident(cpath, &fd, ident)
    if _absent(err, enc):
        return None
    return fd, _ident_tuple(ident)


def pread_ranges(int fd, list ranges, path=None):
    """Byte ranges (offset >= 0, nbytes >= 0) of an open file, in one GIL-free call (shorter
    where the file ends first). path: named in an error."""
    cdef _Ranges rs = _Ranges(ranges)
    cdef int err
    with nogil:
        err = _pread_all(fd, rs.n, rs.offs, rs.lens, rs.gots, rs.bufs)
    if err:
        raise OSError(err, strerror(err).decode(errors="replace"),
                      None if path is None else os.fsdecode(path))
    return rs.result()
