"""The format-specific half of the recode planner (chunkstore.hierarchy.recode, used by copy, copy_all,
the *_like functions and `chunkstore cp`): what a copy can keep of its source's Zarr v2 or v3
encoding, and how the create() arguments of a copy are completed for a Zarr v2 or v3 target.

The planner itself never asks which format it holds; it looks the format up in the tables
here (SOURCES, TARGETS, UNSUPPORTED)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from chunkstore.metadata import extension_v3 as _extension

from chunkstore.errors import ChunkstoreError
from chunkstore.metadata._common import guess_chunks
from chunkstore.metadata.v2 import StoredFill, normalize_chunks

# The names of the changes, as the library spells them in messages; the CLI renders the same
# messages with its own spellings ({"chunks": "--chunks", ...}).
LIBRARY_NAMES = {"chunks": "chunks", "shards": "shards", "shards none": "shards=None",
                 "checksum": "checksum=True", "compressor": "compressor=",
                 "zarr_format 2": "zarr_format=2", "zarr_format 3": "zarr_format=3"}


class RecodeError(ChunkstoreError, ValueError):
    """A copy cannot be made as asked (an option the target format has no place for, a shape
    of the wrong length, shards that are no multiple of the chunks...).

    The message names the options through placeholders, so that each caller shows them as
    its users spell them: str(e) in the library's words, e.render(names) in others."""

    def __init__(self, template: str, **values: Any):
        self.template, self.values = template, values
        super().__init__(self.render(LIBRARY_NAMES))

    def render(self, names: dict) -> str:
        """The message with the options spelled as in *names* (option key -> how the caller
        spells it).
        """
        return self.template.format(**{f"opt_{k.replace(' ', '_')}": v
                                       for k, v in names.items()}, **self.values)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass
class Source:
    """What a copy may keep of the source array's encoding."""
    zarr_format: int
    codecs: list | None = None          # v3: the chain of one chunk (inner chunk if sharded)
    shards: tuple | None = None         # v3: the shard shape, None if unsharded
    key_encoding: Any = None            # v3: chunk_key_encoding; v2: dimension separator
    dimension_names: tuple | list | None = None
    crc32c: bool = False                # each chunk carries a crc32c checksum
    # v2: an object array's first filter is its object codec (v3: filters are the chain's
    # array -> array codecs, a transpose say; the serializer is the object codec)
    object_codec_first: bool = False


def _v2_source(meta) -> Source:
    return Source(2, key_encoding=meta.dimension_separator, object_codec_first=True)


def _v3_source(meta) -> Source:
    sharded = meta.sharding is not None
    chain = meta.inner_codecs if sharded else meta.codecs
    return Source(3, codecs=chain, shards=tuple(meta.chunks) if sharded else None,
                  key_encoding=meta.chunk_key_encoding, dimension_names=meta.dimension_names,
                  crc32c=any(c.get("name") == "crc32c" for c in chain))


SOURCES = {2: _v2_source, 3: _v3_source}


def source_of(meta) -> Source:
    """What a copy of the array with this metadata may keep."""
    return SOURCES[meta.zarr_format](meta)


def dims_attr(names: Any, ndim: int) -> list | None:
    """A valid list of dimension names (xarray's _ARRAY_DIMENSIONS), else None."""
    if isinstance(names, (list, tuple)) and len(names) == ndim and \
            all(isinstance(n, str) for n in names):
        return list(names)
    return None


@dataclass
class Plan:
    """A copy being planned: the create() arguments so far (kw) and what completes them."""
    name: str                        # the source array's name, for messages
    shape: tuple
    source: Source
    kw: dict
    changes: dict                    # what the caller asked to change
    filters: list                    # the source's filters still to place (v2)
    attrs: dict                      # the source's attributes (for _ARRAY_DIMENSIONS)
    dtype_changed: bool
    encoding_changed: bool           # the codec chain cannot be kept as it is
    keep_checksum: bool = True       # a rebuilt chain keeps the source's crc32c
    like: bool = False               # for a *_like function (see create_kwargs_like)
    note: Callable[[str], None] | None = None
    dropped_attrs: list = field(default_factory=list)  # attributes the copy does not repeat

    def say(self, text: str) -> None:
        """Pass *text* to the plan's ``note`` callback, if it has one."""
        if self.note is not None:
            self.note(text)


def placed_dimension_names(attrs: dict, dims: list,
                           zarr_format: int) -> tuple[dict, list | None]:
    """(attributes, dimension names) of a new array of zarr_format whose dimensions are
    named dims: Zarr v3's dimension_names (an _ARRAY_DIMENSIONS attribute dropped), or in
    Zarr v2 xarray's _ARRAY_DIMENSIONS attribute (dimension names None)."""
    if zarr_format == 3:
        return {k: v for k, v in attrs.items() if k != "_ARRAY_DIMENSIONS"}, dims
    return {**attrs, "_ARRAY_DIMENSIONS": dims}, None


def _v3_compressor(comp: Any, itemsize: int) -> dict:
    """The v3 codec of a compressor, as create() puts it in a chain; ValueError if it has none
    of its own (zarr-python 3's numcodecs.* wrappers are not written here)."""
    from chunkstore.codecs.normalize import codec_json
    doc = codec_json(comp, "compressor", np.dtype(f"V{max(int(itemsize), 1)}"))
    if str(doc.get("name", "")).startswith(("numcodecs.", "vlen-")):
        raise ValueError(f"{comp!r} has no Zarr v3 codec")
    return doc


def _to_v3(p: Plan) -> None:
    """Complete p.kw for a Zarr v3 copy. Kept from a v3 source unless changed: the codec
    chain (checksum, blosc settings, transposes), the shards, the chunk key encoding and the
    dimension names. From a v2 source: the compressor, and dimension names from
    _ARRAY_DIMENSIONS. v2 filters are dropped (the data is decoded and encoded again)."""
    kw, ch, src, name, ndim = p.kw, p.changes, p.source, p.name, len(p.shape)
    if np.dtype(kw["dtype"]).hasobject:
        oc = kw.pop("object_codec", None)
        codec_id = getattr(oc, "codec_id", None)
        if codec_id == "vlen-bytes":
            kw["dtype"] = _extension.VLEN_BYTES  # v3 "variable_length_bytes"
        elif oc is not None and codec_id != "vlen-utf8":
            raise RecodeError(f"array {name!r} holds {oc.codec_id} objects; Zarr v3 stores "
                              f"strings (vlen-utf8) and bytes (vlen-bytes) only")
    if p.filters:
        p.say(f"dropping the filters of {name!r}: Zarr v3 has no place for them (the data "
              f"is re-encoded without)")
    comp = kw["compressor"]
    if comp is not None and comp != "default":
        try:
            _v3_compressor(comp, np.dtype(kw["dtype"]).itemsize)
        except (TypeError, ValueError):
            raise RecodeError(f"the compressor of {name!r} ({comp!r}) has no Zarr v3 codec; "
                              f"choose one with {{opt_compressor}} (blosc, zstd, gzip or "
                              f"none)") from None
    itemsize = np.dtype(kw["dtype"]).itemsize
    chunks = normalize_chunks(kw["chunks"], p.shape, itemsize)
    guessed = ch.get("chunks") is True or (isinstance(ch.get("chunks"), str)
                                           and ch["chunks"] == "auto")
    if guessed and "shards" not in ch and src.shards is not None:
        # the shards kept: chunks guessed within a shard, not the array (guessed for the
        # array they outgrew small shards, and the copy was refused), aiming at 1 MiB as
        # create_array's inner chunks do
        inner = guess_chunks(tuple(src.shards), itemsize, max_bytes=2 ** 20)
        if all(s % c == 0 for s, c in zip(src.shards, inner)):
            chunks = inner
    kw["chunks"] = chunks
    checksum = ch.get("checksum")
    if src.codecs is not None:  # a v3 source
        if not p.encoding_changed:
            kw["codecs"] = src.codecs  # as it is: checksum, blosc settings, transposes
            if checksum and not src.crc32c:
                kw["codecs"] = list(src.codecs) + [{"name": "crc32c"}]
        elif (src.crc32c and p.keep_checksum) or checksum:
            import numcodecs
            kw["filters"] = [numcodecs.CRC32C()]
        kw["dimension_separator"] = src.key_encoding
        if src.dimension_names is not None:
            kw["dimension_names"] = src.dimension_names
    else:
        dims = dims_attr(p.attrs.get("_ARRAY_DIMENSIONS"), ndim)
        if dims is not None:
            kw["dimension_names"] = dims
            p.dropped_attrs.append("_ARRAY_DIMENSIONS")
        if checksum:
            import numcodecs
            kw["filters"] = [numcodecs.CRC32C()]
    shards = src.shards
    if "shards" in ch:
        shards = ch["shards"]
        if shards is None or shards == "none":
            shards = None
        elif isinstance(shards, int):
            shards = (shards,) * ndim
        elif len(shards) != ndim:
            raise RecodeError(f"{{opt_shards}} has {_plural(len(shards), 'value')} but array "
                              f"{name!r} has {_plural(ndim, 'dimension')}")
        if shards is not None:  # None entries: the whole dimension, in whole chunks
            shards = tuple(-(-n // c) * c if s is None else s
                           for s, n, c in zip(shards, p.shape, chunks))
    elif shards is not None and "chunks" in ch:
        if any(s % c for s, c in zip(shards, chunks)):
            raise RecodeError(f"the shards {shards} of {name!r} are not a multiple of the new "
                              f"chunks {chunks}; give {{opt_shards}} too (or "
                              f"{{opt_shards_none}})")
    if shards is not None and any(s % c for s, c in zip(shards, chunks)):
        raise RecodeError(f"{{opt_shards}} {shards} must be a multiple of the chunks {chunks} "
                          f"of {name!r} in every dimension")
    kw["shards"] = shards


def _to_v2(p: Plan) -> None:
    """Complete p.kw for a Zarr v2 copy: no checksum codec and no shards; a v3 source's
    dimension names go to _ARRAY_DIMENSIONS, its strings to VLenUTF8."""
    kw, ch, src, name = p.kw, p.changes, p.source, p.name
    if ch.get("checksum"):
        raise RecodeError(f"{{opt_checksum}} needs Zarr v3 (add {{opt_zarr_format_3}}); array "
                          f"{name!r} would be Zarr v2, which has no checksum codec")
    if ch.get("shards") not in (None, "none"):
        raise RecodeError(f"{{opt_shards}} needs Zarr v3 (add {{opt_zarr_format_3}}); array "
                          f"{name!r} would be Zarr v2")
    if src.zarr_format == 3:
        if src.crc32c:
            p.say(f"dropping the crc32c checksum of {name!r}: Zarr v2 has no checksum codec")
        # (numcodecs filters of a v3 chain, zarr-python 3's numcodecs.<id> wrappers, as the
        # numcodecs codecs a v2 document names: the wrappers crashed the copy)
        p.filters = [f.to_numcodecs() if hasattr(f, "to_numcodecs") else f
                     for f in p.filters if not _v2_order_of_transpose(f, kw, name)]
        dims = dims_attr(src.dimension_names, len(p.shape))
        if dims is not None and "_ARRAY_DIMENSIONS" not in p.attrs:
            p.attrs["_ARRAY_DIMENSIONS"] = dims
        elif dims is not None and p.attrs["_ARRAY_DIMENSIONS"] != dims:
            p.say(f"dropping the dimension names {dims} of {name!r}: its attribute "
                  f"_ARRAY_DIMENSIONS ({p.attrs['_ARRAY_DIMENSIONS']!r}), which Zarr v2 "
                  f"keeps them in, says otherwise and is kept")
        elif dims is None and src.dimension_names is not None:
            p.say(f"dropping the dimension names {list(src.dimension_names)} of {name!r}: "
                  f"Zarr v2 keeps them (as xarray's _ARRAY_DIMENSIONS) only when every "
                  f"dimension has one")
    else:
        if not (p.like and "dimension_separator" not in ch):  # (*_like: the store's default)
            kw["dimension_separator"] = src.key_encoding
        if np.dtype(kw["dtype"]).hasobject:
            kw["fill_value"] = StoredFill(kw["fill_value"])  # read as the source reads it
    if np.dtype(kw["dtype"]).hasobject and "object_codec" not in kw:
        import numcodecs  # a v3 string (or variable-length bytes) array: the same in v2
        vlen_bytes = _extension.is_vlen_bytes(np.dtype(kw["dtype"]))
        kw["object_codec"] = numcodecs.VLenBytes() if vlen_bytes else numcodecs.VLenUTF8()
        kw["dtype"] = np.dtype(object)
    kw["filters"] = p.filters or None
    if p.like and src.zarr_format == 2 and "object_codec" not in ch and \
            kw.get("object_codec") is not None:
        # zarr-python 2's *_like: the object codec stays the first filter, object_codec is
        # None (zeros_like of strings then fills with None); filters= replaces all filters
        codec, kw["object_codec"] = kw["object_codec"], None
        if "filters" not in ch:
            kw["filters"] = [codec] + p.filters


def _v2_order_of_transpose(codec: Any, kw: dict, name: str) -> bool:
    """True for a v3 transpose codec that a Zarr v2 copy has as its order instead (the
    axes reversed: order "F", as create(order="F", zarr_format=3) writes it), which then
    goes to kw unless the caller gave an order; RecodeError for any other transpose (v2
    has C and F order only); False for other codecs."""
    if getattr(codec, "name", None) != "transpose":
        return False
    axes = tuple(codec.order)
    if axes != tuple(range(len(axes)))[::-1]:
        raise RecodeError(f"array {name!r} has a transpose codec with order {list(axes)}, "
                          f"which Zarr v2 cannot express (its only layouts are C and F "
                          f"order)")
    kw["order"] = "F"
    return True


TARGETS = {2: _to_v2, 3: _to_v3}

# Changes a target format has no place for, whatever the source: (change, message).
UNSUPPORTED: dict[int | None, tuple[tuple[str, str], ...]] = {
    2: (("shards", "{opt_shards} needs Zarr v3; it cannot go with {opt_zarr_format_2}"),
        ("checksum", "{opt_checksum} needs Zarr v3; it cannot go with {opt_zarr_format_2}")),
    3: (),
}


def complete(zarr_format: int, plan: Plan) -> None:
    """Complete plan.kw for a copy in zarr_format."""
    TARGETS[zarr_format](plan)


def check_target(zarr_format: int | None, changes: dict) -> None:
    """RecodeError if changes ask for what zarr_format has no place for (None: any format)."""
    for option, text in UNSUPPORTED.get(zarr_format, ()):
        if changes.get(option) not in (None, False, "none"):
            raise RecodeError(text)


def attributes_copied_raw(source_key: str, dest_key: str) -> bool:
    """Both attribute documents hold nothing but attributes (Zarr v2's .zattrs): a copy
    takes the document as it is, bytes and all."""
    return all(k.rsplit("/", 1)[-1] == ".zattrs" for k in (source_key, dest_key))
