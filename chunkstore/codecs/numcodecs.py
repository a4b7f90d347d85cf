"""zarr-python 3's ``zarr.codecs.numcodecs`` wrappers: numcodecs codecs named
``"numcodecs.<id>"`` in a Zarr v3 chain (``LZMA(preset=1)`` -> ``{"name": "numcodecs.lzma",
"configuration": {"preset": 1}}``).

The bytes -> bytes ones (compressors and checksums) and the array -> array ones (``Delta``,
``FixedScaleOffset``, ``Quantize``, ``BitRound``, ``PackBits``, ``AsType``: filters) work in
v3 chains here, with zarr-python 3's bytes (the filter gets the chunk as a C-ordered array,
and its output, in the data type and shape zarr-python 3 resolves, goes on down the chain);
``PCodec``/``ZFPY`` are accepted for Zarr v2 arrays only (as their numcodecs codec)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkstore.codecs._public import Codec, named_configuration
from chunkstore.codecs.chain_codecs import ChainContext, _native
from chunkstore.codecs.common import CastRange, cast_range, filter_io, filter_misreads
from chunkstore.codecs.registry import register

if TYPE_CHECKING:
    from typing import Self

#: numcodecs ids that are bytes -> bytes codecs (what the v3 chain here can run)
BYTES_BYTES = ("blosc", "lz4", "zstd", "zlib", "gzip", "bz2", "lzma", "shuffle", "crc32",
               "crc32c", "adler32", "fletcher32", "jenkins_lookup3")
ARRAY_ARRAY = ("delta", "fixedscaleoffset", "quantize", "bitround", "packbits", "astype")
ARRAY_BYTES = ("pcodec", "zfpy")


class _Numcodec(Codec):
    codec_id = ""

    def __init__(self, **config: Any) -> None:
        self.config = dict(config)

    @classmethod
    def from_dict(cls, data: Mapping) -> Self:
        return cls(**named_configuration(data, cls.name))

    def to_dict(self) -> dict:
        return {"name": self.name, "configuration": dict(self.config)}

    def to_numcodecs(self) -> Any:
        import numcodecs
        try:
            return numcodecs.get_codec({"id": self.codec_id, **self.config})
        except Exception as e:
            raise ValueError(f"{self!r}: {e}") from None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"{type(self).__name__}({args})"


class _NumcodecFilter(_Numcodec):
    """An array -> array numcodecs codec bound, in a v3 chain, to the data type and shape it
    gets (``from_config``): it encodes to, and decodes from, the data type and shape that
    zarr-python 3's wrapper resolves (``encoded_dtype``, ``encoded_shape``)."""

    # Set by from_config: the input's data type and shape; the output's data type in native
    # byte order (the chain goes on in it: the bytes codec writes the order it names) and
    # as the codec declares it (the byte order it reads its input in when decoding), and its
    # shape; the numcodecs codec (None: not bound to a chain).
    in_dtype = out_dtype = declared_dtype = filter_dtype = np.dtype(object)
    in_shape: tuple[int, ...] = ()
    out_shape: tuple[int, ...] = ()
    numcodec: Any = None
    # FixedScaleOffset's and AsType's range check where they cast into an integer type
    # (common.CastRange), and the fill value it lets through (see _fill_let_through)
    cast_check: CastRange | None = None
    cast_skip: Any = None

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> Self:
        """The codec of a v3 chain whose input is ``ctx.dtype`` chunks of ``ctx.shape``; the
        data-type fields zarr-python 3 fills in from the array (FixedScaleOffset's and
        Quantize's ``dtype``, AsType's ``decode_dtype``) filled in likewise."""
        conf = dict(conf)
        name = cls.name
        dtype, shape = ctx.dtype, tuple(ctx.shape)
        if cls.codec_id in ("fixedscaleoffset", "quantize") and conf.get("dtype") is None:
            conf["dtype"] = dtype.str
        if cls.codec_id == "astype":
            if conf.get("encode_dtype") is None:
                raise ValueError(f"codec {name!r}: missing configuration field 'encode_dtype'")
            if conf.get("decode_dtype") is None:
                conf["decode_dtype"] = dtype.str
        if cls.codec_id == "packbits" and dtype != np.dtype(bool):
            raise ValueError(f"codec {name!r} takes a bool data type, got {dtype}")
        codec = cls(**conf)
        out_shape = shape
        try:
            # The data type the codec reads its input as (numcodecs views the chunk's bytes
            # as it): the chunk is handed over in it. A codec declaring the other byte order
            # ('>i4' over the chain's native int32) gets the values (zarr-python 3 hands it
            # the native bytes, which it reads swapped: wrong values, zeros through
            # FixedScaleOffset); one of another integer kind of the same size (Delta('i8')
            # over uint64 or datetime64) the bytes, as numcodecs and zarr-python read them
            # (lossless both ways); any other is refused (common.filter_misreads).
            io = filter_io(cls.codec_id, conf)
            if io is not None:
                # (numcodecs' output: astype, else its dtype, in the order it names; taken
                # for the chain's, the output was read back in the other byte order, and
                # quantize's of another astype could not be read back at all)
                filter_dtype, declared = io
                if filter_misreads(filter_dtype, dtype):
                    raise ValueError(f"codec {name!r}: its data type {filter_dtype} is not "
                                     f"the data type of the chunks it gets, {dtype} (it "
                                     f"would read their bytes as other values)")
            elif cls.codec_id == "packbits":
                filter_dtype, declared = dtype, np.dtype("u1")
                out_shape = (1 + math.ceil(math.prod(shape) / 8),)
            else:
                filter_dtype = declared = dtype
        except (TypeError, KeyError) as e:
            raise ValueError(f"codec {name!r}: {e}") from None
        check = cast_range(cls.codec_id, conf)
        skip = None if check is None else _fill_let_through(check, ctx, filter_dtype)
        codec._set(in_dtype=dtype, in_shape=shape, out_dtype=_native(declared),
                   declared_dtype=declared, filter_dtype=filter_dtype, out_shape=out_shape,
                   numcodec=codec.to_numcodecs(), cast_check=check, cast_skip=skip)
        return codec

    def _check_bound(self) -> None:
        if self.numcodec is None:
            raise ValueError(f"{self!r} is not bound to a chain (from_config)")

    def encoded_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the codec's output (PackBits: the packed bytes, with their header)."""
        self._check_bound()
        return self.out_shape

    def encoded_dtype(self, dtype: np.dtype) -> np.dtype:
        """The data type of the codec's output."""
        self._check_bound()
        return self.out_dtype

    def encode_array(self, arr: np.ndarray) -> np.ndarray:
        """The chunk (its input data type and shape) encoded."""
        self._check_bound()
        arr = np.ascontiguousarray(arr)
        f = self.filter_dtype
        if arr.dtype != f:  # (see from_config: bytes of its kind, values in its order)
            arr = arr.view(_native(f)).astype(f)
        if self.cast_check is not None:
            self.cast_check.refuse(arr, self.cast_skip, f"codec {self!r}")
        return _as(np.asarray(self.numcodec.encode(arr)), self.out_dtype, self.out_shape)

    def decode_array(self, arr: np.ndarray) -> np.ndarray:
        """The chunk decoded back to the codec's input data type and shape."""
        self._check_bound()
        # (its values in the byte order the codec declares, which it reads its input as)
        given = _as(arr, self.declared_dtype, arr.shape)
        out = np.asarray(self.numcodec.decode(np.ascontiguousarray(given)))
        if out.size != math.prod(self.in_shape):
            raise ValueError(f"codec {self.name!r} decoded {out.size} elements, expected "
                             f"{math.prod(self.in_shape)} (a chunk of shape {self.in_shape})")
        return _as(out, self.in_dtype, self.in_shape)


def _fill_let_through(check: CastRange, ctx: ChainContext, filter_dtype: np.dtype) -> Any:
    """The array's fill value as the codec gets it where it cannot store it (else None): let
    through, stored as zarr-python stores it, for an array made elsewhere (refused, each
    resize and fill value change, which rewrite the padding of edge chunks, failed for
    good)."""
    fill = ctx.fill_value
    if fill is None:
        return None
    try:
        one = np.array([fill], dtype=ctx.dtype)
        if one.dtype != filter_dtype:
            one = one.view(_native(filter_dtype)).astype(filter_dtype)
    except (TypeError, ValueError, OverflowError):
        return None
    return one[0] if check.problem(one) is not None else None


def _as(out: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """A codec's output as the data type and shape the chain resolved for it: its bits where
    the item sizes agree (BitRound hands back the integer view of the floats it rounded,
    which zarr-python stores as they are), else its values cast."""
    out = out.reshape(shape)
    if out.dtype == dtype:
        return out
    if _native(out.dtype) == _native(dtype):
        return out.astype(dtype)  # (the byte order alone differs: the values kept)
    if out.dtype.itemsize == dtype.itemsize and not out.dtype.hasobject:
        # (the bits, each side in its own byte order: values in their order, then viewed)
        return out.astype(_native(out.dtype)).view(_native(dtype)).astype(dtype)
    return out.astype(dtype)


def _make(class_name: str, codec_id: str) -> type:
    kind = ("bytes_bytes" if codec_id in BYTES_BYTES else
            "array_array" if codec_id in ARRAY_ARRAY else "array_bytes")
    base = _NumcodecFilter if kind == "array_array" else _Numcodec
    return register(type(class_name, (base,), {
        "codec_id": codec_id, "name": "numcodecs." + codec_id, "kind": kind,
        "__doc__": f"numcodecs' {codec_id!r} codec."}))


_CLASSES = {"Blosc": "blosc", "LZ4": "lz4", "Zstd": "zstd", "Zlib": "zlib", "GZip": "gzip",
            "BZ2": "bz2", "LZMA": "lzma", "Shuffle": "shuffle", "CRC32": "crc32",
            "CRC32C": "crc32c", "Adler32": "adler32", "Fletcher32": "fletcher32",
            "JenkinsLookup3": "jenkins_lookup3", "Delta": "delta",
            "FixedScaleOffset": "fixedscaleoffset", "Quantize": "quantize",
            "BitRound": "bitround", "PackBits": "packbits", "AsType": "astype",
            "PCodec": "pcodec", "ZFPY": "zfpy"}

for _cls_name, _cid in _CLASSES.items():
    globals()[_cls_name] = _make(_cls_name, _cid)


__all__ = list(_CLASSES)
