"""zarr-python 3's ``zarr.codecs.numcodecs`` wrappers: numcodecs codecs named
``"numcodecs.<id>"`` in a Zarr v3 chain (``LZMA(preset=1)`` -> ``{"name": "numcodecs.lzma",
"configuration": {"preset": 1}}``).

The bytes -> bytes ones (compressors and checksums) work in v3 chains here; the array -> array
ones (``Delta``, ``FixedScaleOffset``, ...) and ``PCodec``/``ZFPY`` are accepted for Zarr v2
arrays only (as their numcodecs codec)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chunkstore.codecs._public import Codec, named_configuration
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


def _make(class_name: str, codec_id: str) -> type:
    kind = ("bytes_bytes" if codec_id in BYTES_BYTES else
            "array_array" if codec_id in ARRAY_ARRAY else "array_bytes")
    return register(type(class_name, (_Numcodec,), {
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
