"""Blosc in one place: the public ``BloscCodec`` (zarr-python 3's signature), the one shuffle
table, and the c-blosc functions the GIL-free batch kernels (chunkstore._core.merge) call."""

from __future__ import annotations

import functools
from enum import Enum

import numpy as np

from chunkstore.codecs._public import Codec, named_configuration, register


class BloscShuffle(str, Enum):
    noshuffle = "noshuffle"
    shuffle = "shuffle"
    bitshuffle = "bitshuffle"


class BloscCname(str, Enum):
    lz4 = "lz4"
    lz4hc = "lz4hc"
    blosclz = "blosclz"
    zstd = "zstd"
    snappy = "snappy"
    zlib = "zlib"


#: Blosc's shuffle names and numbers (numcodecs.Blosc takes the number, Zarr v3 the name)
SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
SHUFFLE_NAMES = {v: k for k, v in SHUFFLES.items()}
#: numcodecs.Blosc's AUTOSHUFFLE: bit shuffle for 1-byte items, else byte shuffle
AUTOSHUFFLE = -1
CNAMES = tuple(m.value for m in BloscCname)


def shuffle_name(shuffle: int, typesize: int) -> str:
    """The Zarr v3 shuffle name of numcodecs' shuffle number; AUTOSHUFFLE (any other number)
    as numcodecs resolves it: bit shuffle for 1-byte items, else byte shuffle."""
    if shuffle in SHUFFLE_NAMES:
        return SHUFFLE_NAMES[shuffle]
    return "shuffle" if typesize > 1 else "bitshuffle"


@functools.lru_cache(maxsize=1)
def _blosc_functions() -> dict | None:
    """Addresses of c-blosc functions inside numcodecs' own Blosc extension (the same
    library numcodecs.Blosc uses), or None if they cannot be found."""
    try:
        import ctypes

        from numcodecs import blosc as _nb

        lib = ctypes.CDLL(_nb.__file__)
        return {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                for name in ("blosc_cbuffer_validate", "blosc_decompress_ctx",
                             "blosc_compress_ctx")}
    except Exception:
        return None


def blosc_symbols() -> tuple[int, int] | None:
    """Addresses of c-blosc's blosc_cbuffer_validate and blosc_decompress_ctx, or None.

    The batch kernel in chunkstore._core.merge calls them without the GIL for a whole batch
    of chunks; numcodecs' Python wrapper costs ~2 us per call holding the GIL, which is what
    limits thread scaling on small chunks. Anything unexpected means: use the wrapper."""
    f = _blosc_functions()
    return None if f is None else (f["blosc_cbuffer_validate"], f["blosc_decompress_ctx"])


def blosc_encode_params(cname: str, clevel: int, shuffle: int, typesize: int,
                        blocksize: int) -> tuple | None:
    """Arguments for the GIL-free batch encoder (chunkstore._core.merge.blosc_scatter_encode):
    the address of c-blosc's blosc_compress_ctx, then clevel, shuffle, typesize, cname and
    blocksize as that function takes them. The frames are the ones numcodecs.Blosc writes
    (the tests compare them byte for byte). None if the symbol cannot be found: then chunks
    are encoded through numcodecs."""
    f = _blosc_functions()
    if f is None:
        return None
    if shuffle == AUTOSHUFFLE:
        shuffle = SHUFFLES[shuffle_name(shuffle, typesize)]
    return (f["blosc_compress_ctx"], int(clevel), int(shuffle), int(typesize),
            cname.encode("ascii"), int(blocksize))


def _enum_value(value, enum, what):
    if isinstance(value, enum):
        return value.value
    if isinstance(value, str) and value in enum.__members__:
        return value
    raise ValueError(f"BloscCodec {what} must be one of {', '.join(enum.__members__)}, "
                     f"got {value!r}")


@register
class BloscCodec(Codec):
    """Blosc. As in zarr-python 3, ``typesize=None`` and ``shuffle=None`` are filled in from
    the array's data type (its item size; "shuffle", or "bitshuffle" for 1-byte items)."""

    codec_name = "blosc"
    kind = "bytes_bytes"
    _fields = ("typesize", "cname", "clevel", "shuffle", "blocksize")

    def __init__(self, *, typesize=None, cname="zstd", clevel=5, shuffle=None, blocksize=0):
        tunable = set()
        if typesize is None:
            typesize, tunable = 1, tunable | {"typesize"}
        if shuffle is None:
            shuffle, tunable = "bitshuffle", tunable | {"shuffle"}
        for v, what, lo, hi in ((typesize, "typesize", 1, 255), (clevel, "clevel", 0, 9),
                                (blocksize, "blocksize", 0, None)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo or (
                    hi is not None and v > hi):
                rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
                raise ValueError(f"BloscCodec {what} must be an integer {rng}, got {v!r}")
        self._set(typesize=int(typesize), cname=_enum_value(cname, BloscCname, "cname"),
                  clevel=int(clevel), shuffle=_enum_value(shuffle, BloscShuffle, "shuffle"),
                  blocksize=int(blocksize), _tunable=frozenset(tunable))

    @classmethod
    def from_dict(cls, data):
        return cls(**named_configuration(data, "blosc"))

    def spec(self, dtype=None):
        d = self.to_dict()
        conf = d["configuration"]
        if dtype is not None:
            dtype = np.dtype(dtype)
            size = 1 if dtype.hasobject else dtype.itemsize
            if "typesize" in self._tunable:
                conf["typesize"] = size
            if "shuffle" in self._tunable:
                conf["shuffle"] = "shuffle" if size > 1 else "bitshuffle"
        return d

    def to_numcodecs(self):
        import numcodecs
        return numcodecs.Blosc(cname=self.cname, clevel=self.clevel,
                               shuffle=(numcodecs.Blosc.SHUFFLE if "shuffle" in self._tunable
                                        else SHUFFLES[self.shuffle]),
                               blocksize=self.blocksize)


__all__ = ["BloscCodec", "BloscCname", "BloscShuffle"]
