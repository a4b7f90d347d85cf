"""The one table of codec names: every name that leads to a codec is looked up here.

- A Zarr v3 name (``"blosc"``, ``"sharding_indexed"``, ``"numcodecs.lzma"``...) leads to the
  one codec class of that name (:func:`register`, :data:`CODECS`): the public zarr-python 3
  class users name, which for the codecs the chain runs natively is also the codec
  :class:`~chunkstore.codecs.v3.ChunkCodecV3` runs (:func:`chain_codec`).
- A numcodecs id leads to the codec class writing the same frames, which turns a numcodecs
  codec into its v3 document (:func:`v3_of_numcodec`: Zarr v2 -> v3).
- A command-line spelling (``zstd:5``, ``blosc:lz4:5:shuffle``, ``gzip:6``, ``none``) leads to
  a numcodecs codec (:func:`register_spelling`, :func:`parse_spelling`).

Nothing here imports a codec module: the codec modules register themselves when imported,
and ``chunkstore.codecs`` imports the built-in ones.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from chunkstore.codecs.common import SHUFFLE_NAMES, SHUFFLES

if TYPE_CHECKING:
    from chunkstore.codecs._public import Codec

__all__ = ["CODECS", "register", "chain_codec", "v3_names", "kind_of", "v3_of_numcodec",
           "register_spelling", "parse_spelling", "SpellingError"]

# ------------------------------------------------------------------------ v3 codecs

#: v3 name -> codec class; numcodecs id -> codec class writing the same frames
_CODECS: dict[str, type[Codec]] = {}
#: (classes with ``numcodecs_id`` and ``from_numcodec``, which Codec does not declare)
_BY_NUMCODECS_ID: dict[str, Any] = {}
#: the registry, read-only by convention (chunkstore.codecs.normalize looks names up here)
CODECS = _CODECS

KINDS = ("array_array", "array_bytes", "bytes_bytes")


def register(cls: type[Codec]) -> type[Codec]:
    """Class decorator: ``cls`` (a :class:`chunkstore.codecs._public.Codec`) is the codec
    named ``cls.name``.

    It has ``kind`` ("array_array", "array_bytes" or "bytes_bytes"). It runs in a Zarr v3
    codec chain when it implements the classmethod ``from_config(conf, ctx)`` building it
    from its ``configuration`` and the chain's state
    (``chunkstore.codecs.chain_codecs.ChainContext``). Optional: ``compresses = True``
    (``.info`` shows it as the compressor), and ``numcodecs_id`` with a classmethod
    ``from_numcodec(codec, typesize, auto_shuffle)`` giving the v3 document of a numcodecs
    codec of that id."""
    if cls.kind not in KINDS:
        raise ValueError(f"codec class {cls.__name__}: kind must be one of "
                         f"{', '.join(KINDS)}, got {cls.kind!r}")
    if _CODECS.get(cls.name, cls) is not cls:
        raise ValueError(f"codec {cls.name!r} is registered twice "
                         f"({_CODECS[cls.name].__name__}, {cls.__name__})")
    _CODECS[cls.name] = cls
    numcodecs_id = getattr(cls, "numcodecs_id", None)
    if numcodecs_id:
        _BY_NUMCODECS_ID[numcodecs_id] = cls
    return cls


def chain_codec(name: str) -> type[Codec] | None:
    """The codec class a v3 chain runs under the name ``name``, or None."""
    cls = _CODECS.get(name)
    return cls if cls is not None and cls.runs_in_chain() else None


def did_you_mean(name: str, known: Any = None) -> str:
    """"; did you mean 'zstd'?" for the closest of the known names (default: the v3 codec
    names), or where the names are listed when none is close (the whole list is long)."""
    import difflib
    close = difflib.get_close_matches(name, sorted(CODECS if known is None else known), n=3,
                                      cutoff=0.6)
    if close:
        return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "; chunkstore.codecs.registry.CODECS lists the known names"


def v3_names() -> tuple[str, ...]:
    """The v3 codec names the chain runs natively (registration order)."""
    return tuple(n for n, cls in _CODECS.items() if cls.runs_in_chain())


def kind_of(name: str) -> str | None:
    """"array_array", "array_bytes" or "bytes_bytes" for a registered v3 name, else None."""
    cls = _CODECS.get(name)
    return None if cls is None else cls.kind


def v3_of_numcodec(codec: Any, typesize: int, *, auto_shuffle: str | None = None
                   ) -> dict | None:
    """The Zarr v3 document of a numcodecs bytes -> bytes codec that a native v3 codec writes
    the same frames of (Blosc, Zstd, GZip, CRC32C), for items of ``typesize`` bytes; None for
    any other codec. ``auto_shuffle``: the Blosc shuffle to write for numcodecs' AUTOSHUFFLE
    (None: what numcodecs does, by the item size)."""
    cls = _BY_NUMCODECS_ID.get(getattr(codec, "codec_id", ""))
    if cls is None or cls.kind != "bytes_bytes":
        return None
    return cls.from_numcodec(codec, int(typesize), auto_shuffle)


# ------------------------------------------------------------------------ CLI spellings

class SpellingError(argparse.ArgumentTypeError, ValueError):
    """A compressor spelling that does not parse (argparse shows the message as is)."""


class _Spelling(NamedTuple):
    maxargs: int
    build: Callable[[list, str], Any]


_SPELLINGS: dict[str, _Spelling] = {}

#: the shuffle spellings: Blosc's names and numbers, and short words
_SHUFFLE_SPELLINGS = {**SHUFFLES, **{str(v): v for v in SHUFFLE_NAMES},
                      "none": 0, "byte": 1, "bit": 2}


def register_spelling(name: str, maxargs: int, build: Callable[[list, str], Any]) -> None:
    """``name[:field...]`` (at most ``maxargs`` fields) is ``build(fields, spec)``: a numcodecs
    codec, or None for no compressor. ``build`` raises :class:`SpellingError`."""
    _SPELLINGS[name.lower()] = _Spelling(maxargs, build)


def spelling_int(text: str, what: str, lo: int, hi: int) -> int:
    """An integer field of a spelling, in lo..hi."""
    try:
        v = int(text)
    except ValueError:
        raise SpellingError(f"{what} must be an integer, got {text!r}") from None
    if not lo <= v <= hi:
        raise SpellingError(f"{what} must be in {lo}..{hi}, got {v}")
    return v


def parse_spelling(spec: str) -> Any:
    """A numcodecs codec (or None) from 'zstd:5', 'blosc:lz4:5:shuffle', 'gzip:6', 'none'...
    Raises :class:`SpellingError` (an argparse.ArgumentTypeError and a ValueError)."""
    parts = spec.strip().split(":")
    name, args = parts[0].lower(), parts[1:]
    if name not in _SPELLINGS:
        raise SpellingError(
            f"unknown compressor {parts[0]!r} in {spec!r}; choose from "
            f"{', '.join(_SPELLINGS)} (e.g. zstd:5, blosc:lz4:5:shuffle, gzip:6, none)")
    entry = _SPELLINGS[name]
    if len(args) > entry.maxargs:
        raise SpellingError(
            f"too many fields in compressor {spec!r}: {name} takes at most {entry.maxargs}")
    if any(a == "" for a in args):
        raise SpellingError(f"empty field in compressor {spec!r}")
    return entry.build(args, spec)


def _level(cls_name: str, what: str, lo: int, hi: int, default: Any, keyword: str = "level"
           ) -> Callable[[list, str], Any]:
    """A spelling ``name[:N]`` for numcodecs.<cls_name>(keyword=N)."""
    def build(args: list, spec: str) -> Any:
        import numcodecs
        value = spelling_int(args[0], what, lo, hi) if args else default
        return getattr(numcodecs, cls_name)(**{keyword: value})
    return build


def _blosc(args: list, spec: str) -> Any:
    import numcodecs
    cnames = numcodecs.blosc.list_compressors()
    cname = args[0].lower() if args else "lz4"
    if cname not in cnames:
        raise SpellingError(f"unknown blosc compressor {cname!r} in {spec!r}; choose from "
                            f"{', '.join(cnames)}")
    clevel = spelling_int(args[1], "blosc level", 0, 9) if len(args) > 1 else 5
    shuffle = args[2].lower() if len(args) > 2 else "shuffle"
    if shuffle not in _SHUFFLE_SPELLINGS:
        raise SpellingError(f"unknown blosc shuffle {args[2]!r} in {spec!r}; choose from "
                            f"{', '.join(SHUFFLES)}")
    return numcodecs.Blosc(cname=cname, clevel=clevel, shuffle=_SHUFFLE_SPELLINGS[shuffle])


register_spelling("none", 0, lambda args, spec: None)
register_spelling("zstd", 1, _level("Zstd", "zstd level", -131072, 22, 3))
register_spelling("blosc", 3, _blosc)
register_spelling("gzip", 1, _level("GZip", "gzip level", 0, 9, 5))
register_spelling("zlib", 1, _level("Zlib", "zlib level", 0, 9, 5))
register_spelling("bz2", 1, _level("BZ2", "bz2 level", 1, 9, 9))
register_spelling("lzma", 1, _level("LZMA", "lzma preset", 0, 9, None, "preset"))
register_spelling("lz4", 1, _level("LZ4", "lz4 acceleration", 1, 2**16, 1, "acceleration"))
