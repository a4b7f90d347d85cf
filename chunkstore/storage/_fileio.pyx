# cython: language_level=3
"""Read many small files with three GIL transitions in all, not four per file.

DirectoryStore.getitems reads whole batches of chunk files. From Python, each file costs four
short GIL-releasing system calls (open, fstat, read, close); with several threads the GIL then
ping-pongs between them, and small-chunk reads stop scaling. Here the system calls of a whole
batch run without the GIL: open+fstat all, allocate the bytes objects, read+close all.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.errno cimport ENOENT, ENOTDIR, EINTR, errno
from libc.stdlib cimport free, malloc
from libc.string cimport strerror


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

import os


def read_files(list paths):
    """Contents of each path as bytes, or None where there is no file (ENOENT, ENOTDIR, or
    a directory: a key prefix, not a key). Any other error raises OSError naming the path. Non-regular files (or files
    that change size while being read) are read with Python's own I/O instead."""
    cdef Py_ssize_t n = len(paths), i
    cdef list encoded = [os.fsencode(p) for p in paths]
    cdef const char** cpaths = <const char**>malloc((n + 1) * sizeof(char*))
    cdef int* fds = <int*>malloc((n + 1) * sizeof(int))
    cdef long* sizes = <long*>malloc((n + 1) * sizeof(long))
    cdef int* errs = <int*>malloc((n + 1) * sizeof(int))
    cdef char** bufs = <char**>malloc((n + 1) * sizeof(char*))
    cdef stat st
    cdef ssize_t got, r
    if not (cpaths and fds and sizes and errs and bufs):
        free(cpaths); free(fds); free(sizes); free(errs); free(bufs)
        raise MemoryError()
    out = [None] * n
    try:
        for i in range(n):
            cpaths[i] = encoded[i]
            fds[i] = -1
            sizes[i] = -1
            errs[i] = 0
        with nogil:
            for i in range(n):
                fds[i] = open(cpaths[i], O_RDONLY | O_CLOEXEC)
                if fds[i] < 0:
                    errs[i] = errno
                elif fstat(fds[i], &st) != 0:
                    errs[i] = errno
                elif S_ISREG(st.st_mode):
                    sizes[i] = st.st_size
                elif S_ISDIR(st.st_mode):
                    errs[i] = ENOENT
        for i in range(n):
            if sizes[i] >= 0:
                b = PyBytes_FromStringAndSize(NULL, sizes[i])
                out[i] = b
                bufs[i] = PyBytes_AS_STRING(b)
            else:
                bufs[i] = NULL
        with nogil:
            for i in range(n):
                if bufs[i] == NULL:
                    continue
                got = 0
                while got < sizes[i]:
                    r = read(fds[i], bufs[i] + got, sizes[i] - got)
                    if r < 0:
                        if errno == EINTR:
                            continue
                        errs[i] = errno
                        break
                    if r == 0:
                        break
                    got += r
                if errs[i] == 0 and got != sizes[i]:
                    errs[i] = -1          # shrank while reading: redo in Python
                elif errs[i] == 0:
                    # One byte more than fstat said means the file grew: redo in Python.
                    r = read(fds[i], &st, 1)
                    if r < 0:
                        errs[i] = errno
                    elif r > 0:
                        errs[i] = -1
        for i in range(n):
            e = errs[i]
            if e == ENOENT or e == ENOTDIR:
                out[i] = None
            elif e == -1 or (e == 0 and sizes[i] < 0 and fds[i] >= 0):
                try:                               # growing, shrinking or not a regular file
                    with open_py(paths[i]) as f:
                        out[i] = f.read()
                except OSError as err:
                    if err.filename is None:
                        raise OSError(err.errno, err.strerror, paths[i]) from err
                    raise
            elif e != 0:
                out[i] = None
                raise OSError(e, strerror(e).decode(errors="replace"), paths[i])
    finally:
        for i in range(n):
            if fds[i] >= 0:
                close(fds[i])
        free(cpaths); free(fds); free(sizes); free(errs); free(bufs)
    return out


def open_py(path):
    import builtins
    return builtins.open(path, "rb")
