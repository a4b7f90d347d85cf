# cython: language_level=3
"""Batch GIL-free decode + merge and merge + encode for Blosc, raw, zstd, gzip and zlib chunks.

The one batch loop of every codec numcodecs writes with one library call: a whole batch of
chunks is decoded (straight into the output when a chunk lands there whole and contiguous)
or encoded without the GIL.

The compression libraries are the ones numcodecs and Python already load: c-blosc and
libzstd inside numcodecs' extensions, and the zlib that Python's zlib module uses. Their functions
come in as addresses (chunkstore.codecs.fastpath finds them with ctypes and checks them
against numcodecs once), so building this module needs no headers or libraries.

One codec is one ``kind`` here: a decode function, an encode function and a bound on the
encoded size (see _decode_one, _encode_one, _encode_bound).
"""

from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.stdint cimport int64_t, uint32_t

import numpy as np
cimport numpy as cnp

from chunkstore._core.projection cimport OrthoPlan, PointsPlan, DimPlan
from chunkstore._core.merge cimport (FillTest, _ortho_copy_ptr, _points_copy_ptr,
                                     _block_offset, _fill_test_init, _all_fill, _repeat_item)
from chunkstore._core.batch cimport (_Batch, _Dests, _check_decode_args,
                                     _check_encode_args, _data)

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING

cnp.import_array()


RAW, ZSTD, GZIP, ZLIB, BLOSC = KIND_RAW, KIND_ZSTD, KIND_GZIP, KIND_ZLIB, KIND_BLOSC

# c-blosc adds at most this many bytes to incompressible data (BLOSC_MAX_OVERHEAD).
cdef enum:
    _BLOSC_OVERHEAD = 16


# ---------------------------------------------------------------- libzstd (stable API)

cdef enum:
    _ZSTD_C_LEVEL = 100         # ZSTD_c_compressionLevel
    _ZSTD_C_CHECKSUM = 201      # ZSTD_c_checksumFlag

cdef ZstdApi _zstd
cdef bint _have_zstd = False

_ZSTD_NAMES = ("ZSTD_createDCtx", "ZSTD_freeDCtx", "ZSTD_decompressDCtx",
               "ZSTD_getFrameContentSize", "ZSTD_findFrameCompressedSize", "ZSTD_isError",
               "ZSTD_createCCtx", "ZSTD_freeCCtx", "ZSTD_CCtx_setParameter", "ZSTD_compress2",
               "ZSTD_compressBound")


cdef int _take_addresses(tuple names, dict addr, size_t* a) except -1:
    """a[k] = the address of names[k] in addr; ValueError for a missing one."""
    for k, name in enumerate(names):
        a[k] = addr[name]
        if a[k] == 0:
            raise ValueError(f"no address for {name}")
    return 0


# Idle contexts, taken and given back with the GIL held (so no lock is needed).
cdef enum:
    _POOL_MAX = 16

cdef Ctx* _pool[16]
cdef int _npool = 0


cdef void _drop_zstd_contexts() noexcept:
    """Free the idle contexts' zstd objects with the library that made them (before the
    library is replaced: another library's free would crash on them)."""
    cdef int i
    for i in range(_npool):
        if _pool[i].dctx != NULL:
            _zstd.freeDCtx(_pool[i].dctx)
            _pool[i].dctx = NULL
        if _pool[i].cctx != NULL:
            _zstd.freeCCtx(_pool[i].cctx)
            _pool[i].cctx = NULL
            _pool[i].clevel = 0
            _pool[i].cchecksum = -1


def clear_zstd():
    """Uninstall libzstd (zstd chunks then go through numcodecs). Only while no batch runs:
    the idle contexts' zstd objects are freed."""
    global _have_zstd
    if _have_zstd:
        _drop_zstd_contexts()
    _have_zstd = False


def set_zstd(dict addr):
    """Install libzstd's functions (addresses by name, the names of _ZSTD_NAMES), replacing
    any installed before. Only while no batch runs: the idle contexts' zstd objects are freed
    with the library that made them."""
    global _have_zstd
    cdef size_t a[11]
    _take_addresses(_ZSTD_NAMES, addr, a)
    if _have_zstd:
        _drop_zstd_contexts()
    _zstd.createDCtx = <zstd_create_fn><void*>a[0]
    _zstd.freeDCtx = <zstd_free_fn><void*>a[1]
    _zstd.decompressDCtx = <zstd_decompress_fn><void*>a[2]
    _zstd.getFrameContentSize = <zstd_content_size_fn><void*>a[3]
    _zstd.findFrameCompressedSize = <zstd_frame_size_fn><void*>a[4]
    _zstd.isError = <zstd_is_error_fn><void*>a[5]
    _zstd.createCCtx = <zstd_create_fn><void*>a[6]
    _zstd.freeCCtx = <zstd_free_fn><void*>a[7]
    _zstd.setParameter = <zstd_set_param_fn><void*>a[8]
    _zstd.compress2 = <zstd_compress2_fn><void*>a[9]
    _zstd.compressBound = <zstd_bound_fn><void*>a[10]
    _have_zstd = True


# ---------------------------------------------------------------- zlib (stable ABI since 1.0)

cdef enum:
    _Z_OK = 0
    _Z_STREAM_END = 1
    _Z_FINISH = 4
    _Z_DEFLATED = 8

cdef ZlibApi _zlib
cdef bint _have_zlib = False

_ZLIB_NAMES = ("deflateInit2_", "deflate", "deflateReset", "deflateEnd", "inflateInit2_",
               "inflate", "inflateReset", "inflateEnd", "crc32")


def set_zlib(dict addr, bytes version):
    """Install zlib's functions (addresses by name, the names of _ZLIB_NAMES) and the
    version string its init functions are given (zlibVersion() of that library)."""
    global _have_zlib
    cdef size_t a[9]
    _take_addresses(_ZLIB_NAMES, addr, a)
    if len(version) >= 32:
        raise ValueError("zlib version string too long")
    _zlib.deflateInit2_ = <z_deflate_init_fn><void*>a[0]
    _zlib.deflate = <z_step_fn><void*>a[1]
    _zlib.deflateReset = <z_end_fn><void*>a[2]
    _zlib.deflateEnd = <z_end_fn><void*>a[3]
    _zlib.inflateInit2_ = <z_inflate_init_fn><void*>a[4]
    _zlib.inflate = <z_step_fn><void*>a[5]
    _zlib.inflateReset = <z_end_fn><void*>a[6]
    _zlib.inflateEnd = <z_end_fn><void*>a[7]
    _zlib.crc32 = <z_crc32_fn><void*>a[8]
    memcpy(_zlib.version, <const char*>version, len(version) + 1)
    _have_zlib = True


# ---------------------------------------------------------------- one codec

cdef void _ctx_free(Ctx* x) noexcept nogil:
    if x.dctx != NULL:
        _zstd.freeDCtx(x.dctx)
    if x.cctx != NULL:
        _zstd.freeCCtx(x.cctx)
    if x.zi_wbits != 0:
        _zlib.inflateEnd(&x.zi)
    if x.zd_wbits != 0:
        _zlib.deflateEnd(&x.zd)
    _ctx_init(x)


cdef void _ctx_init(Ctx* x) noexcept nogil:
    x.dctx = NULL
    x.cctx = NULL
    x.clevel = 0
    x.cchecksum = -1
    x.zi_wbits = 0
    x.zd_wbits = 0
    x.zd_level = 0



cdef Ctx* _ctx_take() except NULL:
    global _npool
    cdef Ctx* x
    if _npool > 0:
        _npool -= 1
        return _pool[_npool]
    x = <Ctx*>malloc(sizeof(Ctx))
    if x == NULL:
        raise MemoryError()
    _ctx_init(x)
    return x


cdef void _ctx_give(Ctx* x) noexcept:
    global _npool
    if _npool < _POOL_MAX:
        _pool[_npool] = x
        _npool += 1
    else:
        _ctx_free(x)
        free(x)


cdef inline uint32_t _le32(const char* p) noexcept nogil:
    cdef const unsigned char* u = <const unsigned char*>p
    return u[0] | (<uint32_t>u[1] << 8) | (<uint32_t>u[2] << 16) | (<uint32_t>u[3] << 24)


cdef inline void _put_le32(char* p, uint32_t v) noexcept nogil:
    p[0] = <char>(v & 0xff)
    p[1] = <char>((v >> 8) & 0xff)
    p[2] = <char>((v >> 16) & 0xff)
    p[3] = <char>((v >> 24) & 0xff)


cdef bint _inflate(Ctx* x, int wbits, const char* src, size_t srclen, char* dest,
                   size_t expected) noexcept nogil:
    """One whole zlib (wbits 15) or gzip (31) stream of exactly expected bytes, nothing after
    it. zlib checks the adler32 / crc32 and ISIZE trailers itself."""
    cdef int r
    if x.zi_wbits != 0 and x.zi_wbits != wbits:
        _zlib.inflateEnd(&x.zi)
        x.zi_wbits = 0
    if x.zi_wbits == 0:
        x.zi.zalloc = NULL
        x.zi.zfree = NULL
        x.zi.opaque = NULL
        x.zi.next_in = NULL
        x.zi.avail_in = 0
        if _zlib.inflateInit2_(&x.zi, wbits, _zlib.version, sizeof(z_stream)) != _Z_OK:
            return False
        x.zi_wbits = wbits
    elif _zlib.inflateReset(&x.zi) != _Z_OK:
        return False
    x.zi.next_in = <const unsigned char*>src
    x.zi.avail_in = <unsigned>srclen
    x.zi.next_out = <unsigned char*>dest
    x.zi.avail_out = <unsigned>expected
    r = _zlib.inflate(&x.zi, _Z_FINISH)
    return r == _Z_STREAM_END and x.zi.total_out == expected and x.zi.avail_in == 0


cdef Py_ssize_t _deflate(Ctx* x, int level, int wbits, const char* src, size_t n, char* dest,
                         size_t cap) noexcept nogil:
    """Deflate src in one call (as zlib.compress and GzipFile do, with zlib's defaults for
    memLevel and strategy); the size written, or -1."""
    if x.zd_wbits != 0 and (x.zd_wbits != wbits or x.zd_level != level):
        _zlib.deflateEnd(&x.zd)
        x.zd_wbits = 0
    if x.zd_wbits == 0:
        x.zd.zalloc = NULL
        x.zd.zfree = NULL
        x.zd.opaque = NULL
        if _zlib.deflateInit2_(&x.zd, level, _Z_DEFLATED, wbits, 8, 0, _zlib.version,
                               sizeof(z_stream)) != _Z_OK:
            return -1
        x.zd_wbits = wbits
        x.zd_level = level
    elif _zlib.deflateReset(&x.zd) != _Z_OK:
        return -1
    x.zd.next_in = <const unsigned char*>src
    x.zd.avail_in = <unsigned>n
    x.zd.next_out = <unsigned char*>dest
    x.zd.avail_out = <unsigned>cap
    if _zlib.deflate(&x.zd, _Z_FINISH) != _Z_STREAM_END:
        return -1
    return <Py_ssize_t>x.zd.total_out


cdef bint _decode_one(const Codec* c, Ctx* x, const char* src, size_t srclen, char* dest,
                      size_t expected) noexcept nogil:
    """Decode one chunk of exactly expected bytes into dest. False when the data is not
    one plain frame of that size (the caller then asks numcodecs, for data we do not take
    or for the proper error)."""
    cdef unsigned long long fcs
    cdef size_t r
    cdef size_t nbytes
    if src == NULL:
        return False
    if c.kind == KIND_BLOSC:
        # One Blosc frame of exactly this size (too short, an invalid header, another size
        # or a decompression error: numcodecs decides)
        return (srclen >= 16 and c.bvalidate(src, srclen, &nbytes) == 0
                and nbytes == expected
                and c.bdecompress(src, dest, expected, 1) == <int>expected)
    if c.kind == KIND_RAW:
        if srclen != expected:
            return False
        memcpy(dest, src, expected)
        return True
    if c.kind == KIND_ZSTD:
        # One frame declaring exactly this content size and ending at the data's end.
        fcs = _zstd.getFrameContentSize(src, srclen)
        if fcs != expected:
            return False
        r = _zstd.findFrameCompressedSize(src, srclen)
        if _zstd.isError(r) or r != srclen:
            return False
        if x.dctx == NULL:
            x.dctx = _zstd.createDCtx()
            if x.dctx == NULL:
                return False
        r = _zstd.decompressDCtx(x.dctx, dest, expected, src, srclen)
        return not _zstd.isError(r) and r == expected
    if c.kind == KIND_GZIP:
        # A single member with no optional fields (what numcodecs writes) whose ISIZE
        # trailer is this chunk's size; anything else goes to numcodecs.
        if (srclen < 18 or <unsigned char>src[0] != 0x1f or <unsigned char>src[1] != 0x8b
                or src[2] != 8 or src[3] != 0
                or _le32(src + srclen - 4) != <uint32_t>(expected & 0xffffffffu)):
            return False
        return _inflate(x, 31, src, srclen, dest, expected)
    if c.kind == KIND_ZLIB:
        if srclen < 6:
            return False
        return _inflate(x, 15, src, srclen, dest, expected)
    return False


cdef size_t _encode_bound(const Codec* c, size_t n) noexcept nogil:
    """Room enough for the encoded chunk (a short one fails the encode, then numcodecs
    encodes it)."""
    if c.kind == KIND_RAW:
        return n
    if c.kind == KIND_BLOSC:
        return n + _BLOSC_OVERHEAD
    if c.kind == KIND_ZSTD:
        return _zstd.compressBound(n)
    # zlib's compressBound plus the gzip header and trailer, with room to spare
    return n + (n >> 12) + (n >> 14) + (n >> 25) + 64


cdef Py_ssize_t _encode_one(const Codec* c, Ctx* x, const char* src, size_t n, char* dest,
                            size_t cap) noexcept nogil:
    """Encode n bytes into dest as numcodecs would; the size written, or -1."""
    cdef size_t r
    cdef Py_ssize_t m
    cdef char xfl
    cdef int b
    if c.kind == KIND_RAW:
        memcpy(dest, src, n)
        return <Py_ssize_t>n
    if c.kind == KIND_BLOSC:
        if c.bcompress == NULL:
            return -1
        b = c.bcompress(c.level, c.bshuffle, c.btypesize, n, src, dest, cap, c.bcname,
                        c.bblocksize, 1)
        return b if b > 0 else -1
    if c.kind == KIND_ZSTD:
        if x.cctx == NULL:
            x.cctx = _zstd.createCCtx()
            if x.cctx == NULL:
                return -1
            x.cchecksum = -1
        if x.cchecksum != <int>c.checksum or x.clevel != c.level:
            if (_zstd.isError(_zstd.setParameter(x.cctx, _ZSTD_C_LEVEL, c.level))
                    or _zstd.isError(_zstd.setParameter(x.cctx, _ZSTD_C_CHECKSUM,
                                                        1 if c.checksum else 0))):
                x.cchecksum = -1
                return -1
            x.clevel = c.level
            x.cchecksum = <int>c.checksum
        r = _zstd.compress2(x.cctx, dest, cap, src, n)
        if _zstd.isError(r):
            return -1
        return <Py_ssize_t>r
    if c.kind == KIND_ZLIB:
        return _deflate(x, c.level, 15, src, n, dest, cap)
    if c.kind == KIND_GZIP:
        # Python's GzipFile header: no name, the mtime, XFL 2 at level 9 and 4 at level 1,
        # OS 255; then raw deflate, the crc32 and the size mod 2**32.
        if cap < 18:
            return -1
        xfl = 2 if c.level == 9 else (4 if c.level == 1 else 0)
        dest[0] = <char>0x1f
        dest[1] = <char>0x8b
        dest[2] = 8
        dest[3] = 0
        _put_le32(dest + 4, c.mtime)
        dest[8] = xfl
        dest[9] = <char>0xff
        m = _deflate(x, c.level, -15, src, n, dest + 10, cap - 18)
        if m < 0:
            return -1
        _put_le32(dest + 10 + m, <uint32_t>_zlib.crc32(0, <const unsigned char*>src,
                                                       <unsigned>n))
        _put_le32(dest + 14 + m, <uint32_t>(n & 0xffffffffu))
        return m + 18
    return -1


cdef int _codec_from(tuple spec, Codec* c) except -1:
    """spec: (kind, level, checksum, mtime), as chunkstore.codecs.fastpath builds it; for
    Blosc (BLOSC, (validate_addr, decompress_addr), encode) with encode None or
    (compress_addr, clevel, shuffle, typesize, cname bytes, blocksize): c-blosc's
    blosc_compress_ctx and its arguments, resolved as numcodecs would."""
    cdef size_t addr
    if spec[0] == KIND_BLOSC:
        _, (validate_addr, decompress_addr), enc = spec
        c.kind = KIND_BLOSC
        addr = validate_addr
        c.bvalidate = <blosc_validate_fn><void*>addr
        addr = decompress_addr
        c.bdecompress = <blosc_decompress_fn><void*>addr
        c.bcompress = NULL
        if enc is not None:
            compress_addr, clevel, shuffle, typesize, cname, blocksize = enc
            try:
                c.level, c.bshuffle = clevel, shuffle
                c.btypesize, c.bblocksize = typesize, blocksize
            except (OverflowError, TypeError):
                # arguments c-blosc cannot take (metadata out of range): no kernel encode;
                # every chunk goes through numcodecs, which raises the proper error
                return 0
            c.bcname = <bytes>cname
            addr = compress_addr
            c.bcompress = <blosc_compress_fn><void*>addr
        return 0
    kind, level, checksum, mtime = spec
    c.kind = kind
    c.level = level
    c.checksum = checksum
    c.mtime = <uint32_t>(mtime & 0xffffffff)
    if c.kind == KIND_ZSTD and not _have_zstd or (
            (c.kind == KIND_GZIP or c.kind == KIND_ZLIB) and not _have_zlib):
        raise RuntimeError("the library of this codec was not installed")
    if c.kind < KIND_RAW or c.kind > KIND_ZLIB:  # (Blosc returned above)
        raise ValueError(f"unknown codec kind {c.kind}")
    return 0


# ---------------------------------------------------------------- the kernels

def decode_gather(tuple spec, OrthoPlan plan, idx, datas, cnp.ndarray out,
                  cnp.ndarray scratch):
    """Decode chunks of codec spec and merge them into out, a whole batch without the GIL.

    idx[k] is the touched-chunk index of the encoded bytes datas[k]. scratch is a chunk-shaped
    buffer in the chunk's order; a chunk that lands whole and contiguous in out is decoded
    straight into it. Returns -1 when every chunk was merged, else the position k of the first
    chunk not decoded (the caller decodes that one through numcodecs, which takes it or raises
    the proper error, and continues after it).
    """
    cdef Codec c
    _codec_from(spec, &c)
    cdef int nd = plan.ndim, d
    cdef Py_ssize_t n = len(datas), k
    _check_decode_args(plan, out, scratch, nd, False)
    cdef bint c_order = scratch.flags.c_contiguous
    cdef Py_ssize_t itemsize = out.dtype.itemsize
    cdef size_t expected = scratch.nbytes
    cdef Py_ssize_t cshape[64]
    for d in range(nd):
        cshape[d] = scratch.shape[d]
    cdef _Batch batch = _Batch(idx, datas, plan.nchunks, True)
    cdef const char** src = batch.src
    cdef size_t* srclen = batch.srclen
    cdef int64_t* ids = batch.ids
    cdef char* odata = _data(out)
    cdef char* sdata = _data(scratch)
    cdef Py_ssize_t* ostr = <Py_ssize_t*>out.strides
    cdef Py_ssize_t* sstr = <Py_ssize_t*>scratch.strides
    cdef Py_ssize_t failed = -1, off
    cdef Ctx* x = _ctx_take()
    try:
        with nogil:
            for k in range(n):
                off = _block_offset(plan, ids[k], ostr, cshape, itemsize, c_order)
                if batch.load(k) != 0 or not _decode_one(
                        &c, x, src[k], srclen[k], odata + off if off >= 0 else sdata, expected):
                    failed = k
                    break
                if off < 0:
                    _ortho_copy_ptr(plan, ids[k], sdata, sstr, odata, ostr, itemsize, 0)
    finally:
        _ctx_give(x)
    return failed


def decode_gather_points(tuple spec, PointsPlan plan, idx, datas, cnp.ndarray out_flat,
                         cnp.ndarray scratch):
    """decode_gather for a coordinate selection: decode each chunk into scratch and copy its
    points into out_flat. Returns -1, or the position of the first chunk not decoded."""
    cdef Codec c
    _codec_from(spec, &c)
    cdef int nd = plan.ndim
    cdef Py_ssize_t n = len(datas), k
    _check_decode_args(plan, out_flat, scratch, nd, True)
    cdef Py_ssize_t itemsize = out_flat.dtype.itemsize
    cdef size_t expected = scratch.nbytes
    cdef _Batch batch = _Batch(idx, datas, plan.nchunks, True)
    cdef const char** src = batch.src
    cdef size_t* srclen = batch.srclen
    cdef int64_t* ids = batch.ids
    cdef char* fdata = _data(out_flat)
    cdef char* sdata = _data(scratch)
    cdef Py_ssize_t fstr = out_flat.strides[0]
    cdef Py_ssize_t* sstr = <Py_ssize_t*>scratch.strides
    cdef Py_ssize_t failed = -1
    cdef Ctx* x = _ctx_take()
    try:
        with nogil:
            for k in range(n):
                if batch.load(k) != 0 or not _decode_one(&c, x, src[k], srclen[k], sdata,
                                                         expected):
                    failed = k
                    break
                _points_copy_ptr(plan, ids[k], sdata, sstr, fdata, fstr, itemsize, 0)
    finally:
        _ctx_give(x)
    return failed


def scatter_encode(tuple spec, OrthoPlan plan, idx, cnp.ndarray value, cnp.ndarray scratch,
                   prefill, list olds, cnp.ndarray fill_item, bint drop_fill, list out):
    """Build chunks from value and encode them with codec spec, a batch without the GIL.

    As merge.blosc_scatter_encode: chunk idx[k] is built in scratch (decoded from olds[k]
    when that is not None; else pre-filled with fill_item where prefill[idx[k]] is set),
    value's block is scattered in, and out gets its encoded bytes, or None when drop_fill is
    set and the chunk is all fill (the caller deletes it). Returns -1 when every chunk was
    done, else the position k of the first chunk whose old bytes did not decode or which did
    not encode; out then holds the results before k (the caller builds chunk k through
    numcodecs, for the proper error or data we do not take, and continues).
    """
    cdef Codec c
    _codec_from(spec, &c)
    cdef Py_ssize_t n = len(idx), k
    cdef const unsigned char[:] pre = prefill
    _check_encode_args(plan, value, scratch, pre, len(olds), n, fill_item)
    fb = np.ascontiguousarray(fill_item).tobytes()
    cdef const char* fp = fb
    cdef FillTest ft
    _fill_test_init(&ft, scratch.dtype, fp)
    cdef Py_ssize_t itemsize = scratch.dtype.itemsize, nitems = scratch.size
    cdef size_t nbytes = scratch.nbytes, cap = _encode_bound(&c, nbytes)
    cdef _Batch batch = _Batch(idx, olds, plan.nchunks, True)
    cdef const char** src = batch.src
    cdef size_t* srclen = batch.srclen
    cdef int64_t* ids = batch.ids
    cdef _Dests dests = _Dests(n, cap)
    cdef char** dptr = dests.ptr
    cdef Py_ssize_t* sizes = dests.sizes
    cdef char* sdata = _data(scratch)
    cdef char* vdata = _data(value)
    cdef Py_ssize_t* sstr = <Py_ssize_t*>scratch.strides
    cdef Py_ssize_t* vstr = <Py_ssize_t*>value.strides
    cdef Py_ssize_t failed = -1
    cdef Ctx* x = _ctx_take()
    try:
        with nogil:
            for k in range(n):
                if src[k] != NULL:
                    if not _decode_one(&c, x, src[k], srclen[k], sdata, nbytes):
                        failed = k
                        break
                elif pre[ids[k]]:
                    _repeat_item(sdata, fp, itemsize, nitems)
                _ortho_copy_ptr(plan, ids[k], sdata, sstr, vdata, vstr, itemsize, 1)
                if drop_fill and _all_fill(&ft, sdata, nitems):
                    sizes[k] = -1
                    continue
                sizes[k] = _encode_one(&c, x, sdata, nbytes, dptr[k], cap)
                if sizes[k] < 0:
                    failed = k
                    break
    finally:
        _ctx_give(x)
    dests.collect(out, n if failed < 0 else failed)
    return failed


def encode_bytes(tuple spec, data):
    """One buffer encoded with codec spec (the kernels' encoder; for tests and checks)."""
    cdef Codec c
    _codec_from(spec, &c)
    cdef const unsigned char[:] mv = memoryview(data).cast("B")
    cdef size_t n = mv.shape[0]
    cdef size_t cap = _encode_bound(&c, n)
    b = PyBytes_FromStringAndSize(NULL, cap)
    cdef char* dp = PyBytes_AS_STRING(b)
    cdef const char* sp = <const char*>&mv[0] if n else <const char*>dp
    cdef Py_ssize_t m
    cdef Ctx* x = _ctx_take()
    with nogil:
        m = _encode_one(&c, x, sp, n, dp, cap)
    _ctx_give(x)
    if m < 0:
        return None
    return b[:m]


def decode_bytes(tuple spec, data, Py_ssize_t expected):
    """One buffer decoded with codec spec to exactly expected bytes, or None (the kernels'
    decoder; for tests and checks)."""
    cdef Codec c
    _codec_from(spec, &c)
    cdef const unsigned char[:] mv = memoryview(data).cast("B")
    cdef size_t n = mv.shape[0]
    out = bytearray(expected)
    cdef char* dp = <char*>out if expected else NULL
    cdef char dummy[1]
    cdef const char* sp = <const char*>&mv[0] if n else <const char*>dummy
    cdef bint ok
    cdef Ctx* x = _ctx_take()
    with nogil:
        ok = _decode_one(&c, x, sp, n, dp if dp != NULL else dummy, expected)
    _ctx_give(x)
    return bytes(out) if ok else None


def whole_block(OrthoPlan plan, Py_ssize_t i, cnp.ndarray out, chunk_shape):
    """The view of out that touched chunk i fills, when the selection takes that chunk whole
    (step 1, the full chunk shape), whatever out's strides; else None."""
    cdef int nd = plan.ndim, d
    cdef Py_ssize_t j[64]
    cdef DimPlan* p
    if nd > 64 or i < 0 or i >= plan.nchunks:
        return None
    plan.unravel(i, j)
    for d in range(nd):
        p = &plan.dims[d]
        if (p.indexed or p.step != 1 or p.lstart[j[d]] != 0
                or p.cnt[j[d]] != chunk_shape[d]):
            return None
    return out[tuple(slice(plan.dims[d].ostart[j[d]],
                           plan.dims[d].ostart[j[d]] + plan.dims[d].cnt[j[d]])
                     for d in range(nd)) + (Ellipsis,)]
