"""Blosc in one place: ``BloscCodec`` (zarr-python 3's signature, and the codec a Zarr v3 chain
runs), the shuffle table (``SHUFFLES``, ``SHUFFLE_NAMES``, defined in ``common``), and the
c-blosc functions the GIL-free batch kernels (chunkstore._core.merge) call."""

from __future__ import annotations

import functools
import numbers
from enum import Enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numcodecs
import numpy as np

from chunkstore.codecs._public import named_configuration
from chunkstore.codecs.chain_codecs import BytesBytesCodec, ChainContext, _check_keys, _int
# the shuffle table lives in common, where the registry's command-line spellings read it too
from chunkstore.codecs.common import SHUFFLE_NAMES, SHUFFLES, blosc_decoded_size
from chunkstore.codecs.registry import register

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


class BloscShuffle(str, Enum):
    """Blosc's shuffle names (zarr-python 3's enum)."""
    noshuffle = "noshuffle"
    shuffle = "shuffle"
    bitshuffle = "bitshuffle"


class BloscCname(str, Enum):
    """The compressors inside Blosc (zarr-python 3's enum)."""
    lz4 = "lz4"
    lz4hc = "lz4hc"
    blosclz = "blosclz"
    zstd = "zstd"
    snappy = "snappy"
    zlib = "zlib"


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
    """Arguments for the GIL-free batch encoder (chunkstore._core.zcodecs.scatter_encode):
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


def _enum_value(value: object, enum: type[Enum], what: str) -> str:
    if isinstance(value, enum):
        return value.value
    if isinstance(value, str) and value in enum.__members__:
        return value
    raise ValueError(f"BloscCodec {what} must be one of {', '.join(enum.__members__)}, "
                     f"got {value!r}")


@register
class BloscCodec(BytesBytesCodec):
    """Blosc. As in zarr-python 3, ``typesize=None`` and ``shuffle=None`` are filled in from
    the array's data type (its item size; "shuffle", or "bitshuffle" for 1-byte items)."""

    name = "blosc"
    numcodecs_id = "blosc"
    compresses = True
    size_reader = staticmethod(blosc_decoded_size)
    _fields = ("typesize", "cname", "clevel", "shuffle", "blocksize")

    def __init__(self, *, typesize: int | None = None, cname: BloscCname | str = "zstd",
                 clevel: int = 5, shuffle: BloscShuffle | str | None = None,
                 blocksize: int = 0) -> None:
        tunable: set[str] = set()
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
        self.typesize, self.cname = int(typesize), _enum_value(cname, BloscCname, "cname")
        self.clevel, self.shuffle = int(clevel), _enum_value(shuffle, BloscShuffle, "shuffle")
        self.blocksize, self._tunable = int(blocksize), frozenset(tunable)
        self.numcodec = numcodecs.Blosc(
            cname=self.cname, clevel=self.clevel, shuffle=SHUFFLES[self.shuffle],
            blocksize=self.blocksize, typesize=self.typesize)

    @classmethod
    def from_dict(cls, data: Mapping) -> BloscCodec:
        """The codec of its JSON document."""
        return cls(**named_configuration(data, "blosc"))

    @classmethod
    def from_config(cls, conf: Mapping, ctx: ChainContext) -> "BloscCodec":
        """The codec of a v3 chain: ``typesize`` defaults to the item size of the bytes the
        chain's array -> bytes codec writes (errors name the codec as the chain's parser
        does)."""
        _check_keys(conf, ("cname", "clevel", "shuffle", "typesize", "blocksize"), "blosc")
        cname = conf.get("cname", "zstd")
        if cname not in CNAMES:
            raise ValueError(f"codec 'blosc': unknown cname {cname!r}")
        clevel = _int(conf.get("clevel", 5), "codec 'blosc' clevel", 0, 9)
        shuffle = conf.get("shuffle")
        typesize = conf.get("typesize")
        if typesize is None:
            typesize = ctx.typesize if ctx.typesize is not None else 1
        typesize = _int(typesize, "codec 'blosc' typesize", 1, 255)
        if shuffle is None:
            shuffle = "shuffle" if typesize > 1 else "bitshuffle"
        if isinstance(shuffle, numbers.Integral) and not isinstance(shuffle, bool):
            shuffle = SHUFFLE_NAMES.get(int(shuffle), shuffle)
        if shuffle not in SHUFFLES:
            raise ValueError(
                f"codec 'blosc': shuffle must be 'noshuffle', 'shuffle' or 'bitshuffle', "
                f"got {shuffle!r}"
            )
        blocksize = _int(conf.get("blocksize", 0), "codec 'blosc' blocksize", 0)
        return cls(typesize=typesize, cname=cname, clevel=clevel, shuffle=shuffle,
                   blocksize=blocksize)

    @classmethod
    def from_numcodec(cls, codec: Any, typesize: int, auto_shuffle: str | None) -> dict:
        """The v3 document of a numcodecs Blosc for items of ``typesize`` bytes."""
        shuffle = shuffle_name(codec.shuffle, typesize)
        if auto_shuffle is not None and codec.shuffle not in SHUFFLE_NAMES:
            shuffle = auto_shuffle
        cname = codec.cname.decode() if isinstance(codec.cname, bytes) else codec.cname
        return {"name": "blosc", "configuration": {
            "typesize": typesize, "cname": cname, "clevel": int(codec.clevel),
            "shuffle": shuffle, "blocksize": int(codec.blocksize)}}

    def spec(self, dtype: DTypeLike | None = None) -> dict:
        """The JSON document with ``typesize``/``shuffle`` filled in from ``dtype`` when they
        were not given."""
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

    def to_numcodecs(self) -> Any:
        """The numcodecs Blosc for a Zarr v2 array (byte shuffle when no shuffle was given)."""
        return numcodecs.Blosc(cname=self.cname, clevel=self.clevel,
                               shuffle=(numcodecs.Blosc.SHUFFLE if "shuffle" in self._tunable
                                        else SHUFFLES[self.shuffle]),
                               blocksize=self.blocksize)


__all__ = ["BloscCodec", "BloscCname", "BloscShuffle"]
