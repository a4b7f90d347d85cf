# Types of chunkstore._core.zcodecs: the C APIs of libzstd and zlib it calls through
# function pointers (their stable, documented signatures and zlib's z_stream layout, so no
# header is needed to build), one codec's parameters and a kernel call's state.

from libc.stdint cimport uint32_t

cdef enum:
    KIND_RAW = 0
    KIND_ZSTD = 1
    KIND_GZIP = 2
    KIND_ZLIB = 3
    KIND_BLOSC = 4

# c-blosc's blosc_cbuffer_validate, blosc_decompress_ctx and blosc_compress_ctx (from the
# c-blosc inside numcodecs' extension)
ctypedef int (*blosc_validate_fn)(const void*, size_t, size_t*) noexcept nogil
ctypedef int (*blosc_decompress_fn)(const void*, void*, size_t, int) noexcept nogil
ctypedef int (*blosc_compress_fn)(int, int, size_t, size_t, const void*, void*, size_t,
                                  const char*, size_t, int) noexcept nogil

ctypedef void* (*zstd_create_fn)() noexcept nogil
ctypedef size_t (*zstd_free_fn)(void*) noexcept nogil
ctypedef size_t (*zstd_decompress_fn)(void*, void*, size_t, const void*, size_t) noexcept nogil
ctypedef unsigned long long (*zstd_content_size_fn)(const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_frame_size_fn)(const void*, size_t) noexcept nogil
ctypedef unsigned (*zstd_is_error_fn)(size_t) noexcept nogil
ctypedef size_t (*zstd_set_param_fn)(void*, int, int) noexcept nogil
ctypedef size_t (*zstd_compress2_fn)(void*, void*, size_t, const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_bound_fn)(size_t) noexcept nogil

cdef struct ZstdApi:
    zstd_create_fn createDCtx
    zstd_free_fn freeDCtx
    zstd_decompress_fn decompressDCtx
    zstd_content_size_fn getFrameContentSize
    zstd_frame_size_fn findFrameCompressedSize
    zstd_is_error_fn isError
    zstd_create_fn createCCtx
    zstd_free_fn freeCCtx
    zstd_set_param_fn setParameter
    zstd_compress2_fn compress2
    zstd_bound_fn compressBound


ctypedef void* (*alloc_func)(void*, unsigned, unsigned) noexcept nogil
ctypedef void (*free_func)(void*, void*) noexcept nogil

cdef struct z_stream:               # the layout of zlib.h's z_stream
    const unsigned char* next_in
    unsigned avail_in
    unsigned long total_in
    unsigned char* next_out
    unsigned avail_out
    unsigned long total_out
    const char* msg
    void* state
    alloc_func zalloc
    free_func zfree
    void* opaque
    int data_type
    unsigned long adler
    unsigned long reserved

ctypedef int (*z_deflate_init_fn)(z_stream*, int, int, int, int, int, const char*,
                                  int) noexcept nogil
ctypedef int (*z_inflate_init_fn)(z_stream*, int, const char*, int) noexcept nogil
ctypedef int (*z_step_fn)(z_stream*, int) noexcept nogil
ctypedef int (*z_end_fn)(z_stream*) noexcept nogil
ctypedef unsigned long (*z_crc32_fn)(unsigned long, const unsigned char*,
                                     unsigned) noexcept nogil

cdef struct ZlibApi:
    z_deflate_init_fn deflateInit2_
    z_step_fn deflate
    z_end_fn deflateReset
    z_end_fn deflateEnd
    z_inflate_init_fn inflateInit2_
    z_step_fn inflate
    z_end_fn inflateReset
    z_end_fn inflateEnd
    z_crc32_fn crc32
    char version[32]


cdef struct Codec:
    int kind
    int level               # zstd, gzip, zlib; Blosc: clevel
    bint checksum           # zstd: write a content checksum
    uint32_t mtime          # gzip: the header's modification time (numcodecs: time.time())
    blosc_validate_fn bvalidate     # Blosc: c-blosc's functions and compress arguments
    blosc_decompress_fn bdecompress
    blosc_compress_fn bcompress     # NULL: decode only
    int bshuffle
    size_t btypesize
    size_t bblocksize
    const char* bcname      # into the spec's bytes, alive for the kernel call


cdef struct Ctx:
    # A kernel call's library state, made on first use and kept in a small pool between
    # calls (creating a zstd context costs ~100 us, more than decoding a small chunk).
    void* dctx
    void* cctx
    int clevel              # the level and checksum flag cctx is set to
    int cchecksum           # (-1: not set yet)
    z_stream zi             # inflate state, zi_wbits 0 until initialised
    int zi_wbits
    z_stream zd             # deflate state for zd_level / zd_wbits (zd_wbits 0: none)
    int zd_wbits
    int zd_level
