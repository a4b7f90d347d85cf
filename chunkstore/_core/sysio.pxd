# cython: language_level=3
"""The system calls of the GIL-free file code (chunkstore.storage._fileio: batch reads and key
paths; _filewrite: atomic batch writes; batch.Files: the decode kernels' own chunk reads),
retried on EINTR, and the path check."""

from libc.errno cimport EINTR, errno
from libc.string cimport strlen


cdef extern from "<fcntl.h>" nogil:
    int open(const char* path, int flags, ...)
    int O_RDONLY
    int O_WRONLY
    int O_CREAT
    int O_EXCL
    int O_CLOEXEC
    int O_NONBLOCK

cdef extern from "<unistd.h>" nogil:
    ssize_t read(int fd, void* buf, size_t n)
    ssize_t pread(int fd, void* buf, size_t n, long off)
    ssize_t write(int fd, const void* buf, size_t n)
    int fsync(int fd)
    int close(int fd)
    int unlink(const char* path)

cdef extern from "<sys/stat.h>" nogil:
    struct stat:
        long st_size
        unsigned int st_mode
    int fstat(int fd, stat* st)
    int lstat(const char* path, stat* st)
    bint S_ISREG(unsigned int mode)
    bint S_ISDIR(unsigned int mode)
    bint S_ISFIFO(unsigned int mode)
    bint S_ISSOCK(unsigned int mode)

cdef extern from "<stdio.h>" nogil:
    int rename(const char* old, const char* new)
    int snprintf(char* buf, size_t n, const char* fmt, ...)

cdef extern from *:
    """
    #include <fcntl.h>
    #ifndef O_TMPFILE
    #define O_TMPFILE 0
    #endif
    #ifndef AT_SYMLINK_FOLLOW
    #define AT_SYMLINK_FOLLOW 0x400
    #endif
    #ifndef AT_FDCWD
    #define AT_FDCWD -100
    #endif
    """
    int O_TMPFILE
    int AT_FDCWD
    int AT_SYMLINK_FOLLOW

cdef extern from "<unistd.h>" nogil:
    int linkat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
               int flags)


# The system calls below retried on EINTR, as Python's own os functions do (PEP 475): a
# signal during an open on a FUSE or NFS mount must not fail the read or write.
cdef inline int _open_retry(const char* path, int flags, int mode) noexcept nogil:
    cdef int fd
    while True:
        fd = open(path, flags, mode)
        if fd >= 0 or errno != EINTR:
            return fd


cdef inline int _fstat_retry(int fd, stat* st) noexcept nogil:
    cdef int r
    while True:
        r = fstat(fd, st)
        if r == 0 or errno != EINTR:
            return r


cdef inline int _fsync_retry(int fd) noexcept nogil:
    cdef int r
    while True:
        r = fsync(fd)
        if r == 0 or errno != EINTR:
            return r


cdef inline int _rename_retry(const char* old, const char* new) noexcept nogil:
    cdef int r
    while True:
        r = rename(old, new)
        if r == 0 or errno != EINTR:
            return r


cdef inline const char* _c_path(bytes path) except NULL:
    """The path for the C calls. One with a NUL byte would be cut short there: refuse it,
    as Python's os functions do (strlen of a short path costs less than a search)."""
    cdef const char* c = path
    if strlen(c) != <size_t>len(path):
        raise ValueError(f"embedded null byte in path {path!r}")
    return c


cdef extern from *:
    """
    #include <sys/stat.h>
    /* A file's identity as five integers: device, inode, size, mtime and ctime in ns. A
       rewrite by replace-by-rename gives a new inode (and ctime); a reused inode number has
       a new ctime unless written in the same clock tick with the same size. */
    static inline void chunkstore_stat_ident(const struct stat* st, long long* out) {
        out[0] = (long long)st->st_dev;
        out[1] = (long long)st->st_ino;
        out[2] = (long long)st->st_size;
    #if defined(__APPLE__)
        out[3] = (long long)st->st_mtimespec.tv_sec * 1000000000LL + st->st_mtimespec.tv_nsec;
        out[4] = (long long)st->st_ctimespec.tv_sec * 1000000000LL + st->st_ctimespec.tv_nsec;
    #else
        out[3] = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
        out[4] = (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
    #endif
    }
    """
    void chunkstore_stat_ident(const stat* st, long long* out) nogil

# Integers in a file identity (see chunkstore_stat_ident).
cdef enum:
    IDENT_LEN = 5


cdef inline int _open_read(const char* path) noexcept nogil:
    """open(2) for reading, retried on EINTR, without blocking: a FIFO where a chunk file
    should be would otherwise block the open until some process writes to it (O_NONBLOCK
    changes nothing for regular files)."""
    return _open_retry(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0)
