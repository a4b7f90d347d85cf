"""``BloscCodec``: Blosc compression, with zarr-python 3's signature."""

from __future__ import annotations

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


_SHUFFLE_INT = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


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
                                        else _SHUFFLE_INT[self.shuffle]),
                               blocksize=self.blocksize)


__all__ = ["BloscCodec", "BloscCname", "BloscShuffle"]
