"""The GIL-free batch paths of the chunk codecs: one small object per codec kind.

A codec chain that is one plain compressor over the chunk's raw bytes (or no compressor at
all) gets a ``fast`` object from :func:`for_v2` / :func:`for_v3`; the Array hands it whole
batches of chunks:

- ``decode(plan, idx, datas, out, scratch)`` / ``decode_points(...)``: decode and merge,
  returning -1 or the position of the first chunk it did not take;
- ``encode(plan, idx, value, scratch, prefill, olds, fill_item, drop_fill, out)``: merge and
  encode (None when the codec cannot encode on this path).

A chunk the kernel does not take (an unusual frame, corrupt data) goes through the codec
itself, which decodes it or raises the error naming the chunk key, so numcodecs stays the
reference for everything. Kinds: Blosc, raw, zstd, gzip and zlib, all in the one batch loop
of chunkstore._core.zcodecs. The libraries are the ones numcodecs and Python use, found with
ctypes; each is checked once against numcodecs (same bytes out, same bytes back) before it
is used, and a library that cannot be found or disagrees leaves that codec on numcodecs.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.util
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkstore._core import zcodecs

if TYPE_CHECKING:
    from chunkstore._core.projection import OrthoPlan, PointsPlan

__all__ = ["for_v2", "for_v3", "zstd_ready", "zlib_ready"]

# A buffer for the one-time agreement checks: a few kinds of runs and noise.
_PROBE = (np.arange(20000, dtype="<u4") % 251).tobytes() + bytes(range(256)) * 40 + b"\0" * 999


#: libzstd's decoding functions (the rest are the encoder's); ZSTD_isError reads an error
#: code the same way in every version.
_ZSTD_DECODER = frozenset(("ZSTD_createDCtx", "ZSTD_freeDCtx", "ZSTD_decompressDCtx",
                           "ZSTD_getFrameContentSize", "ZSTD_findFrameCompressedSize",
                           "ZSTD_isError"))


@functools.lru_cache(maxsize=1)
def zstd_ready() -> bool:
    """libzstd's functions are installed in the kernels: the encoder from the newest
    libzstd at hand, numcodecs' own zstd extension or the ``zstandard`` package's (zstd
    1.5.7 compresses ~15% faster than numcodecs' 1.5.6), the decoder from numcodecs' build
    (the library zarr-python reads with: the ``zstandard`` package's build decodes float
    chunks 5-10% slower here, its objects call ``ZSTD_isError`` once a sequence instead of
    inlining it). Each pairing is checked once: the kernels' frames decode through
    numcodecs, and numcodecs' frames through the kernels, to the same bytes. A frame's
    bytes may differ from numcodecs' where the encoder is newer (both are valid zstd frames,
    decoded by any zstd reader)."""
    try:
        from numcodecs import zstd as nz
    except ImportError:
        return False
    for addr in _zstd_pairings(_zstd_libraries(nz.__file__), nz.__file__):
        try:
            zcodecs.set_zstd(addr)
            if all(_round_trips((zcodecs.ZSTD, level, checksum, 0),
                                nz.Zstd(level=level, checksum=checksum))
                   for level, checksum in ((0, False), (5, True), (-3, False))):
                return True
        except Exception:
            pass
        zcodecs.clear_zstd()
    return False


def _zstd_pairings(libs: Sequence[ctypes.CDLL],
                   numcodecs_file: str) -> list[dict[str, int | None]]:
    """The function tables to try, best first: the newest library's encoder with numcodecs'
    decoder, then each library whole (newest first)."""
    tables: list[tuple[ctypes.CDLL, dict[str, int | None]]] = []
    for lib in libs:
        try:
            tables.append((lib, _addresses(lib, zcodecs._ZSTD_NAMES)))
        except AttributeError:
            continue
    wholes = [table for _, table in tables]
    decoder = next((table for lib, table in tables if lib._name == numcodecs_file), None)
    if decoder is None or decoder is wholes[0]:
        return wholes
    paired = {name: (decoder if name in _ZSTD_DECODER else wholes[0])[name]
              for name in zcodecs._ZSTD_NAMES}
    return [paired] + wholes


def _zstd_libraries(numcodecs_file: str) -> list[ctypes.CDLL]:
    """The libzstd builds at hand, newest first (ZSTD_versionNumber)."""
    paths = [numcodecs_file]
    spec = importlib.util.find_spec("zstandard")
    if spec is not None and spec.origin:
        # the package's cffi backend exports libzstd's functions (its C backend does not)
        paths += glob.glob(os.path.join(os.path.dirname(spec.origin), "_cffi*.so"))
    libs: list[tuple[int, int, ctypes.CDLL]] = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            version = int(lib.ZSTD_versionNumber())
        except (OSError, AttributeError):
            continue
        libs.append((version, -len(libs), lib))
    return [lib for _, _, lib in sorted(libs, key=lambda v: v[:2], reverse=True)]


def _round_trips(spec: tuple, codec: Any) -> bool:
    """Whether the kernels' frame of _PROBE (codec spec) decodes through numcodecs' *codec*
    to _PROBE, and numcodecs' frame through the kernels."""
    ours = zcodecs.encode_bytes(spec, _PROBE)
    theirs = codec.encode(_PROBE)
    return (bytes(codec.decode(ours)) == _PROBE
            and zcodecs.decode_bytes(spec, theirs, len(_PROBE)) == _PROBE
            and zcodecs.decode_bytes(spec, ours, len(_PROBE)) == _PROBE)


def _agrees(spec: tuple, reference: bytes) -> bool:
    """Whether the kernels encode _PROBE with codec spec as *reference* (what numcodecs or
    Python writes) and decode that back to _PROBE."""
    ours = zcodecs.encode_bytes(spec, _PROBE)
    return ours == reference and zcodecs.decode_bytes(spec, ours, len(_PROBE)) == _PROBE


def _addresses(lib: ctypes.CDLL, names: Iterable[str]) -> dict[str, int | None]:
    """{name: address} of the functions a kernel module calls through pointers."""
    return {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in names}


def _zlib_library() -> tuple[ctypes.CDLL, bytes]:
    """The zlib Python's zlib module runs on: its symbols resolve through the module's own
    handle when it links libz dynamically (the usual build)."""
    import zlib

    lib = ctypes.CDLL(zlib.__file__)
    version = ctypes.cast(lib.zlibVersion, ctypes.CFUNCTYPE(ctypes.c_char_p))()
    if version.decode() != zlib.ZLIB_RUNTIME_VERSION:
        raise RuntimeError("a different zlib")
    return lib, version


@functools.lru_cache(maxsize=1)
def zlib_ready() -> bool:
    """zlib's functions (the library Python's zlib module uses) are installed in the
    kernels and write what numcodecs' Zlib and GZip write."""
    try:
        import gzip
        import io
        import zlib

        lib, version = _zlib_library()
        zcodecs.set_zlib(_addresses(lib, zcodecs._ZLIB_NAMES), version)
        for level in (1, 6, 9):
            f = io.BytesIO()
            with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=level, mtime=0) as g:
                g.write(_PROBE)
            if not (_agrees((zcodecs.ZLIB, level, False, 0), zlib.compress(_PROBE, level))
                    and _agrees((zcodecs.GZIP, level, False, 0), f.getvalue())):
                return False
        return True
    except Exception:
        return False


class BloscPath:
    """Blosc through c-blosc's functions in numcodecs' extension, in zcodecs' batch loop
    (the one every codec here shares)."""

    __slots__ = ("_spec", "_enc")
    raw = False
    # what decodes these chunks: any Blosc frame, whatever it was encoded with (see
    # EngineState.encoding_form)
    family: tuple = ("blosc",)

    def __init__(self, decode_syms: tuple, encode_params: tuple | None) -> None:
        self._spec = (zcodecs.BLOSC, decode_syms, encode_params)
        self._enc = encode_params

    def decode(self, plan: OrthoPlan, idx: Sequence[int], datas: Any, out: np.ndarray,
               scratch: np.ndarray) -> int:
        """Decode and merge a batch; -1, or the position of the first chunk not taken."""
        return zcodecs.decode_gather(self._spec, plan, idx, datas, out, scratch)

    def decode_points(self, plan: PointsPlan, idx: Sequence[int], datas: Any, out: np.ndarray,
                      scratch: np.ndarray) -> int:
        """Decode a batch and gather single points; as :meth:`decode`."""
        return zcodecs.decode_gather_points(self._spec, plan, idx, datas, out, scratch)

    @property
    def can_encode(self) -> bool:
        """True when the encoder's c-blosc symbol was found."""
        return self._enc is not None

    def encode(self, plan: OrthoPlan, idx: Sequence[int], value: np.ndarray, scratch: np.ndarray,
               prefill: np.ndarray, olds: Sequence[bytes | None], fill_item: np.ndarray,
               drop_fill: bool, out: list[bytes | None]) -> int:
        """Merge ``value`` into a batch of chunks and encode them."""
        return zcodecs.scatter_encode(self._spec, plan, idx, value, scratch, prefill, olds,
                                      fill_item, drop_fill, out)


class ZPath:
    """Raw, zstd, gzip or zlib chunks through chunkstore._core.zcodecs."""

    __slots__ = ("kind", "level", "checksum")
    can_encode = True

    def __init__(self, kind: int, level: int = 0, checksum: bool = False) -> None:
        self.kind, self.level, self.checksum = kind, int(level), bool(checksum)

    @property
    def raw(self) -> bool:
        """Stored bytes are the chunk's bytes: a file can be read straight into the output."""
        return self.kind == zcodecs.RAW

    @property
    def family(self) -> tuple:
        """What decodes these chunks: the kind alone (a zstd frame decodes the same whatever
        its level or checksum flag; so do gzip and zlib streams)."""
        return ("z", self.kind)

    def _spec(self) -> tuple:
        # gzip's header time is 0 (numcodecs' GZip stamps the current second): equal chunks
        # encode to equal bytes whenever they are written
        return (self.kind, self.level, self.checksum, 0)

    def decode(self, plan: OrthoPlan, idx: Sequence[int], datas: Any, out: np.ndarray,
               scratch: np.ndarray) -> int:
        """Decode and merge a batch; -1, or the position of the first chunk not taken."""
        return zcodecs.decode_gather(self._spec(), plan, idx, datas, out, scratch)

    def decode_points(self, plan: PointsPlan, idx: Sequence[int], datas: Any, out: np.ndarray,
                      scratch: np.ndarray) -> int:
        """Decode a batch and gather single points; as :meth:`decode`."""
        return zcodecs.decode_gather_points(self._spec(), plan, idx, datas, out, scratch)

    def encode(self, plan: OrthoPlan, idx: Sequence[int], value: np.ndarray, scratch: np.ndarray,
               prefill: np.ndarray, olds: Sequence[bytes | None], fill_item: np.ndarray,
               drop_fill: bool, out: list[bytes | None]) -> int:
        """Merge ``value`` into a batch of chunks and encode them."""
        return zcodecs.scatter_encode(self._spec(), plan, idx, value, scratch, prefill, olds,
                                      fill_item, drop_fill, out)

    def __repr__(self) -> str:
        return f"ZPath(kind={self.kind}, level={self.level}, checksum={self.checksum})"


def _deflate_path(kind: int, level: Any) -> ZPath | None:
    # Level 0 (stored blocks) splits its blocks by the output buffer's size, which Python
    # grows in steps: its bytes are left to numcodecs. Out-of-range levels raise there too.
    if not isinstance(level, int) or isinstance(level, bool) or not (
            level == -1 or 1 <= level <= 9) or not zlib_ready():
        return None
    return ZPath(kind, level)


def _zstd_path(level: Any, checksum: Any) -> ZPath | None:
    if not isinstance(level, int) or isinstance(level, bool) or not zstd_ready():
        return None
    from numcodecs import zstd as nz

    return ZPath(zcodecs.ZSTD, min(level, nz.MAX_CLEVEL), bool(checksum))


def for_v2(compressor: Any, nbytes: int, blosc: tuple | None,
           blosc_encode: tuple | None) -> Any:
    """The batch path of a v2 chunk of nbytes bytes with no filters and this compressor (an
    exact numcodecs type), or None. blosc / blosc_encode: the Blosc symbols and encode
    parameters the codec resolved (None where Blosc does not apply)."""
    if nbytes <= 0 or nbytes >= 2**31:
        return None
    if blosc is not None:
        return BloscPath(blosc, blosc_encode)
    if compressor is None:
        return ZPath(zcodecs.RAW)
    import numcodecs

    t = type(compressor)
    if t is numcodecs.Zstd:
        return _zstd_path(compressor.level, getattr(compressor, "checksum", False))
    if t is numcodecs.GZip:
        return _deflate_path(zcodecs.GZIP, compressor.level)
    if t is numcodecs.Zlib:
        return _deflate_path(zcodecs.ZLIB, compressor.level)
    return None


def for_v3(bb: tuple, nbytes: int, blosc: tuple | None, blosc_encode: tuple | None) -> Any:
    """The batch path of a v3 chunk whose array -> bytes codec is ``bytes`` in native order
    with no transpose it cannot follow (checked by the caller), and whose bytes -> bytes
    codecs are bb, or None."""
    if nbytes <= 0 or nbytes >= 2**31:
        return None
    if blosc is not None:
        return BloscPath(blosc, blosc_encode)
    if not bb:
        return ZPath(zcodecs.RAW)
    if len(bb) != 1:
        return None
    c = bb[0]
    if c.name == "zstd":
        return _zstd_path(c.level, c.checksum)
    if c.name == "gzip":
        return _deflate_path(zcodecs.GZIP, c.level)
    return None
