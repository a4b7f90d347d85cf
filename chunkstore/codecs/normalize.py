"""One place that turns every accepted spelling of a codec into the internal form.

Accepted for a codec: the public classes of ``chunkstore.codecs`` (zarr-python 3's), zarr-python
3's own codec objects (through their ``to_dict()``), numcodecs codecs, JSON documents
(``{"name": ..., "configuration": ...}`` for Zarr v3, ``{"id": ...}`` for numcodecs) and codec
names ("zstd", "blosc", ...). The internal form is the Zarr v3 JSON document for v3 arrays
(what ``chunkstore.codecs.v3`` parses) and a numcodecs codec for v2 arrays.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from chunkstore.codecs import _public, registry
from chunkstore.codecs.bytes import multibyte
from chunkstore.codecs.sharding_indexed import ShardingCodec
from chunkstore.codecs.zstd import zstd_v2

_KIND_WORDS: dict[str | None, str] = {"array_array": "array -> array", "array_bytes": "array -> bytes",
               "bytes_bytes": "bytes -> bytes"}
ACCEPTED = ("a codec object (chunkstore.codecs or zarr.codecs), a numcodecs codec, a JSON dict "
            "({'name': ..., 'configuration': ...}), or a codec name")


def _registry() -> dict:
    """v3 name -> codec class (filled when the package chunkstore.codecs, which imports
    every codec module, is imported: always before this module)."""
    return registry.CODECS


def _is_numcodec(obj: Any) -> bool:
    try:
        from numcodecs.abc import Codec as Numcodec
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, Numcodec)


def as_public(obj: Any, argument: str) -> Any:
    """The public codec object for obj, or a numcodecs codec left as is; a JSON document with
    an unknown name is returned unchanged (the v3 parser then names it)."""
    reg = _registry()
    if isinstance(obj, _public.Codec) or _is_numcodec(obj):
        return obj
    if isinstance(obj, str):
        cls = reg.get(obj)
        if cls is None:
            try:
                import numcodecs
                return numcodecs.get_codec({"id": obj})
            except Exception:
                raise ValueError(f"{argument}: unknown codec name {obj!r}"
                                 f"{registry.did_you_mean(obj, reg)}") from None
        try:
            return cls()
        except TypeError as e:
            raise ValueError(f"{argument}: codec {obj!r} needs a configuration ({e})") from None
    if isinstance(obj, Mapping):
        if "id" in obj and "name" not in obj:
            import numcodecs
            try:
                return numcodecs.get_codec(dict(obj))
            except Exception as e:
                known = set(numcodecs.registry.codec_registry)
                hint = registry.did_you_mean(str(obj["id"]), known) \
                    if obj["id"] not in known else f": {e}"
                raise ValueError(f"{argument}: {dict(obj)!r} is not a numcodecs codec{hint}") \
                    from None
        name = obj.get("name")
        if not isinstance(name, str):
            raise ValueError(f"{argument}: a codec dict needs a string 'name', got {dict(obj)!r}")
        cls = reg.get(name)
        return cls.from_dict(obj) if cls is not None else dict(obj)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):  # zarr-python 3's codec objects, or any look-alike
        doc = to_dict()
        cls = reg.get(doc.get("name")) if isinstance(doc, Mapping) else None
        if cls is None:
            raise ValueError(f"{argument}: {obj!r} is not a codec this library implements "
                             f"(known: {', '.join(sorted(reg))})")
        # zarr-python fills typesize/shuffle from the data type when they were not given
        tunable = getattr(obj, "_tunable_attrs", ())
        conf = {k: v for k, v in dict(doc.get("configuration") or {}).items()
                if k not in tunable}
        return cls.from_dict({"name": doc["name"], "configuration": conf})
    raise TypeError(f"{argument}: cannot use {obj!r} as a codec; expected {ACCEPTED}")


def _numcodec_json(codec: Any, argument: str, dtype: np.dtype | None) -> dict:
    cid = codec.codec_id
    itemsize = 1 if dtype is None or dtype.hasobject else dtype.itemsize
    doc = registry.v3_of_numcodec(codec, itemsize)  # Blosc, Zstd, GZip, CRC32C
    if doc is not None:
        return doc
    if cid in ("vlen-utf8", "vlen-bytes"):
        return {"name": cid, "configuration": {}}
    conf = {k: v for k, v in codec.get_config().items() if k != "id"}
    return {"name": f"numcodecs.{cid}", "configuration": conf}  # zarr-python 3's wrapper


def _checked_numcodec(doc: dict, argument: str) -> dict:
    kind = codec_kind(doc)
    if doc["name"].startswith("numcodecs.") and kind not in ("bytes_bytes", "array_array"):
        raise ValueError(f"{argument}: {doc['name']!r} is an {_KIND_WORDS.get(kind, 'unknown')} "
                         f"numcodecs codec; only numcodecs filters, compressors and checksums "
                         f"work in a Zarr v3 chain here (use zarr_format=2 for it)")
    return doc


def codec_json(obj: Any, argument: str, dtype: Any = None) -> dict:
    """The Zarr v3 JSON document of one codec in any accepted spelling, with the settings that
    depend on ``dtype`` filled in (when given). Errors name ``argument``."""
    dtype = None if dtype is None else np.dtype(dtype)
    c = as_public(obj, argument)
    if isinstance(c, dict):
        return c
    if _is_numcodec(c):
        return _checked_numcodec(_numcodec_json(c, argument, dtype), argument)
    if getattr(c, "codec_name", "").startswith("numcodecs."):
        return _checked_numcodec(c.to_dict(), argument)
    if isinstance(c, ShardingCodec):  # inner codecs in any spelling, for the inner chunks
        d = c.to_dict()
        conf = d["configuration"]
        conf["codecs"] = [codec_json(x, f"{argument} codecs[{i}]", dtype)
                          for i, x in enumerate(c.codecs)]
        conf["index_codecs"] = [codec_json(x, f"{argument} index_codecs[{i}]", "<u8")
                                for i, x in enumerate(c.index_codecs)]
        return d
    return c.spec(dtype)


def codec_kind(doc: Mapping) -> str | None:
    """The kind of a codec document's name (None for a name no codec class has)."""
    name = doc.get("name")
    return registry.kind_of(name) if isinstance(name, str) else None


def numcodecs_codec(obj: Any, argument: str) -> Any:
    """The numcodecs codec (Zarr v2's internal form) of one codec in any accepted spelling."""
    c = as_public(obj, argument)
    if _is_numcodec(c):
        return c
    if isinstance(c, dict):
        raise ValueError(f"{argument}: the Zarr v3 codec {c.get('name')!r} has no Zarr v2 "
                         f"equivalent here")
    try:
        return c.to_numcodecs()
    except ValueError as e:
        raise ValueError(f"{argument}: {e}") from None


def _as_list(value: Any, argument: str) -> list:
    if value is None:
        return []
    if isinstance(value, (str, Mapping)) or _is_numcodec(value) or not hasattr(value, "__iter__"):
        return [value]
    return list(value)


def default_serializer(dtype: np.dtype) -> dict:
    """The array -> bytes codec a Zarr v3 chain gets by default for ``dtype`` (the one place
    that chooses it): ``vlen-utf8`` for strings, ``vlen-bytes`` for variable-length bytes,
    ``bytes`` (no configuration for 1-byte and
    structured types and byte strings, else the byte order ``dtype`` has)."""
    if dtype.hasobject:
        # (variable-length bytes: an object dtype marked {"vlen": bytes}, see
        # metadata.extension_v3.VLEN_BYTES; else strings)
        vlen_bytes = dtype.metadata is not None and dtype.metadata.get("vlen") is bytes
        return {"name": "vlen-bytes" if vlen_bytes else "vlen-utf8", "configuration": {}}
    if dtype.fields is not None or not multibyte(dtype):
        return {"name": "bytes"}
    # v3 data types have no byte order: the bytes codec keeps the one asked for
    big = dtype.byteorder == ">" or (dtype.byteorder == "=" and sys.byteorder == "big")
    return {"name": "bytes", "configuration": {"endian": "big" if big else "little"}}


DEFAULT_V3_COMPRESSOR = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}


def _checked(obj: Any, argument: str, dtype: np.dtype, kinds: tuple[str, ...],
             role: str) -> dict:
    doc = codec_json(obj, argument, dtype)
    kind = codec_kind(doc)
    if kind is not None and kind not in kinds:
        raise ValueError(f"{argument}: {doc['name']!r} is an {_KIND_WORDS[kind]} codec; "
                         f"{role}")
    return doc


def chunk_encoding_v3(dtype: Any, *, codecs: Any = None, filters: Any = "auto",
                      serializer: Any = "auto", compressors: Any = "auto") -> list[dict]:
    """The Zarr v3 codec chain for zarr-python 3's arguments: either ``codecs`` (the whole
    chain), or ``filters`` (array -> array), ``serializer`` (array -> bytes) and
    ``compressors`` (bytes -> bytes), each "auto" for zarr-python 3's default."""
    dtype = np.dtype(dtype)
    if codecs is not None:
        given = [n for n, v in (("filters", filters), ("serializer", serializer),
                                ("compressors", compressors)) if v not in ("auto", None)]
        if given:
            raise ValueError(f"codecs (the whole chain) cannot be combined with "
                             f"{', '.join(given)}")
        items = _as_list(codecs, "codecs")
        chain = [codec_json(c, f"codecs[{i}]", dtype) for i, c in enumerate(items)]
        if not any(codec_kind(d) == "array_bytes" for d in chain):
            # zarr-python 3 fills in the serializer when the chain has none
            pos = sum(1 for d in chain if codec_kind(d) == "array_array")
            chain.insert(pos, default_serializer(dtype))
        return chain
    aa = [] if filters in ("auto", None) else [
        _checked(f, f"filters[{i}]", dtype, ("array_array",),
                 "filters takes array -> array codecs (TransposeCodec) for Zarr v3")
        for i, f in enumerate(_as_list(filters, "filters"))]
    if serializer in ("auto", None):
        ab = default_serializer(dtype)
    else:
        ab = _checked(serializer, "serializer", dtype, ("array_bytes",),
                      "serializer takes one array -> bytes codec (BytesCodec, VLenUTF8Codec, "
                      "VLenBytesCodec, ShardingCodec)")
    if isinstance(compressors, str) and compressors == "auto":
        bb = [dict(DEFAULT_V3_COMPRESSOR)]
    else:
        bb = [_checked(c, f"compressors[{i}]", dtype, ("bytes_bytes",),
                       "compressors takes bytes -> bytes codecs (BloscCodec, ZstdCodec, "
                       "GzipCodec, Crc32cCodec, numcodecs compressors and checksums)")
              for i, c in enumerate(_as_list(compressors, "compressors"))]
    return aa + [ab] + bb


def _as_zarr3_writes(codec: Any) -> Any:
    """A new Zarr v2 array's compressor as zarr-python 3's create_array writes it: numcodecs'
    own Zstd without ``"checksum": false`` (zstd_v2; tensorstore refuses the member), any
    other codec as it is. (zarr-python 2's create() writes the member: its compressor= is
    taken as given, see chunkstore.hierarchy.creation.)"""
    import numcodecs
    if type(codec) is numcodecs.Zstd:  # (exact type: a subclass may write more)
        return zstd_v2(level=codec.level, checksum=bool(getattr(codec, "checksum", False)))
    return codec


def chunk_encoding_v2(dtype: Any, *, filters: Any = "auto", compressors: Any = "auto",
                      compressor: Any = "auto") -> tuple[Any, list]:
    """(compressor, filters) as numcodecs codecs for a Zarr v2 array, from zarr-python 3's
    arguments ("auto": Zstd level 0 as zarr-python 3; VLenUTF8 for strings)."""
    dtype = np.dtype(dtype)
    if compressor not in ("auto",) and compressors not in ("auto",):
        raise ValueError("give compressor= or compressors=, not both")
    arg, value = ("compressor", compressor) if compressor != "auto" else \
        ("compressors", compressors)
    if isinstance(value, str) and value == "auto":
        comp = zstd_v2(level=0)
    else:
        items = _as_list(value, arg)
        if len(items) > 1:
            raise ValueError(f"{arg}: Zarr v2 takes one compressor, got {len(items)}")
        comp = _as_zarr3_writes(numcodecs_codec(items[0], arg)) if items else None
    if isinstance(filters, str) and filters == "auto":
        import numcodecs
        flt = [numcodecs.VLenUTF8()] if dtype.hasobject else []
    else:
        flt = [numcodecs_codec(f, f"filters[{i}]")
               for i, f in enumerate(_as_list(filters, "filters"))]
    return comp, flt
