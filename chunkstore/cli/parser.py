"""The command line's parser: the commands, their options, and the option values (chunk and
shard shapes, compressors, dtypes)."""

from __future__ import annotations

import argparse

import numpy as np

from chunkstore.cli.common import PROG, UsageError
from chunkstore.cli.convert import cmd_convert
from chunkstore.cli.cp import cmd_cp
from chunkstore.cli.inspect import cmd_consolidate, cmd_info, cmd_ls, cmd_rm, cmd_tree
from chunkstore.cli.verify import VERIFY_DESCRIPTION, cmd_verify
from chunkstore.codecs.registry import parse_spelling, spelling_int


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message, no SystemExit here
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ------------------------------------------------------------------------------ option values
# The compressor spellings ('zstd:5', 'blosc:lz4:5:shuffle', ...) live in the codec registry,
# next to the codecs they build.
parse_compressor = parse_spelling
_int_arg = spelling_int  # an integer option value in lo..hi, or an argparse error


def parse_chunks(spec):
    """'100,100' -> (100, 100); '100' -> 100 (every dimension); 'auto' -> True; -1 = whole."""
    text = spec.strip().lower()
    if text == "auto":
        return True
    out = []
    for part in text.strip("()").split(","):
        part = part.strip()
        if part in ("-1", "none", "full"):
            out.append(None)
            continue
        try:
            v = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid chunks {spec!r}: expected comma-separated positive integers "
                f"(-1 for a whole dimension), e.g. 100,100") from None
        if v < 1:
            raise argparse.ArgumentTypeError(
                f"invalid chunks {spec!r}: chunk sizes must be positive (-1 for a whole "
                f"dimension)")
        out.append(v)
    if len(out) == 1 and out[0] is not None:
        return out[0]
    return tuple(out)


def parse_shards(spec):
    """'1000,1000' -> (1000, 1000); '1000' -> 1000 (every dimension); 'none' -> no sharding."""
    if spec.strip().lower() in ("none", "no", "0"):
        return "none"
    if spec.strip().lower() == "auto":
        raise argparse.ArgumentTypeError(f"invalid shards {spec!r}: give a shape, e.g. "
                                         f"1000,1000, or none")
    try:
        return parse_chunks(spec)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(str(e).replace("chunks", "shards", 1)) from None


def parse_dtype(spec):
    """The NumPy dtype named by the command-line value *spec*.

    Raises ``argparse.ArgumentTypeError`` for an invalid dtype or an object dtype.
    """
    try:
        dt = np.dtype(spec)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"invalid dtype {spec!r}") from None
    if dt.hasobject:
        raise argparse.ArgumentTypeError(f"dtype {spec!r}: object dtypes are not supported")
    return dt


def _version():
    from chunkstore import __version__
    return f"{PROG} {__version__}"


def build_parser():
    """The ``chunkstore`` command's ``argparse`` parser, with a subcommand for each command (its
    handler in ``func``).
    """
    from chunkstore.cli.options import STORAGE_OPTION_HELP, parse_storage_option
    p = _Parser(prog=PROG, description="Inspect, copy, convert and verify Zarr v2 and v3 "
                "stores (directories, .zip, .sqlite, .lmdb, URLs).")
    p.add_argument("--version", action="version", version=_version(),
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND",
                           help="what to do (each command has its own --help)")
    sub.required = True

    def storage_option(sp, flag="--storage-option", dest="storage_options", extra=""):
        sp.add_argument(flag, dest=dest, metavar="KEY=VALUE", action="append",
                        type=parse_storage_option, default=None,
                        help=STORAGE_OPTION_HELP + extra)

    def add(name, func, help_, store=True, description=None):
        sp = sub.add_parser(name, help=help_, description=description or help_,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        if store:
            sp.add_argument("store", metavar="PATH",
                            help="the store: a directory, .zip, .sqlite/.db, .lmdb, or a URL "
                                 "(s3://bucket/key, gcs://..., memory://...)")
            sp.add_argument("--path", default="",
                            help="the array or group inside the store (default: its root)")
            storage_option(sp)
        sp.set_defaults(func=func)
        return sp

    def progress(sp, unit="bytes with throughput"):
        g = sp.add_mutually_exclusive_group()
        g.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help=f"show a progress bar, in {unit} (default: when stderr is a "
                            f"terminal; needs tqdm, the [cli] extra)")
        g.add_argument("--no-progress", dest="progress", action="store_false",
                       help="never show a progress bar")

    def if_exists(sp, what):
        sp.add_argument("--if-exists", choices=("raise", "replace", "skip"), default="raise",
                        help=f"when {what} already holds an array or group: raise (the "
                             f"default: an error, nothing written), replace it, or skip it")

    add("info", cmd_info, "what .info shows for the array or group")
    sp = add("tree", cmd_tree, "the hierarchy as a tree")
    sp.add_argument("--level", type=lambda s: _int_arg(s, "--level", 1, 10**6), default=None,
                    help="depth to show (default: all)")
    sp = add("ls", cmd_ls, "members: name, kind, shape, dtype")
    sp.add_argument("-r", "--recursive", action="store_true", help="list all descendants")
    sp = add("rm", cmd_rm, "remove the array or group at --path (everything without --path)",
             description="Remove the array or group at --path (everything without --path). "
                         "Asks for confirmation when stdin is a terminal; otherwise needs "
                         "-f/--yes.")
    sp.add_argument("-f", "--yes", "--force", dest="yes", action="store_true",
                    help="remove without asking (needed when stdin is not a terminal)")
    add("consolidate", cmd_consolidate,
        "write consolidated metadata (v2: .zmetadata; v3: into the group's zarr.json)")
    sp = add("verify", cmd_verify, "decode every stored chunk; exit 1 if any is bad",
             description=VERIFY_DESCRIPTION)
    progress(sp, "stored objects checked (chunks; the shards of a sharded array)")
    sp.add_argument("--remove-strays", action="store_true",
                    help="delete stray temporary files of interrupted writes older than "
                         "--older-than seconds")
    sp.add_argument("--older-than", type=float, default=600.0, metavar="SECONDS",
                    help="with --remove-strays: the age a temporary file must have (600)")

    codec_help = "zstd[:LEVEL], blosc[:CNAME[:LEVEL[:SHUFFLE]]], gzip[:LEVEL], zlib, bz2, " \
                 "lzma, lz4, or none (default: as the source)"
    sp = add("cp", cmd_cp, "copy an array or group from any store to any store", store=False,
             description="Copy an array or group from any store to any store. Without "
                         "recoding options the keys are copied as they are; with them the "
                         "data is decoded and encoded again. Every option is checked against "
                         "every array before anything is written, and a failed copy removes "
                         "what it wrote.")
    sp.add_argument("src", metavar="SRC", help="the source store (path or URL)")
    sp.add_argument("dst", metavar="DST", help="the destination store (path or URL); "
                                               "created if absent")
    sp.add_argument("--src-path", default="", help="location inside SRC (default: its root)")
    sp.add_argument("--dst-path", default="", help="location inside DST (default: its root)")
    sp.add_argument("--chunks", type=parse_chunks, default=None,
                    help="new chunk shape, e.g. 100,100 (rechunks while copying)")
    # a one-element list so that "none" (None) differs from "not given"
    sp.add_argument("--compressor", type=lambda s: [parse_compressor(s)], default=None,
                    help=codec_help)
    sp.add_argument("--dtype", type=parse_dtype, default=None, help="new data type, e.g. f4")
    sp.add_argument("--casting", choices=("no", "equiv", "safe", "same_kind", "unsafe"),
                    default="same_kind",
                    help="which --dtype casts are allowed, NumPy's rule (default same_kind: "
                         "f8 -> f4 yes, f8 -> i1 or S3 no; unsafe allows any)")
    sp.add_argument("--zarr-format", type=int, choices=(2, 3), default=None,
                    help="write the copy in this Zarr format (default: as the source)")
    sp.add_argument("--shards", dest="shard_shape", type=parse_shards, default=None,
                    help="shard shape of Zarr v3 copies, a multiple of the chunks, e.g. "
                         "1000,1000 (none: unsharded; default: as the source)")
    sp.add_argument("--checksum", action="store_true",
                    help="add a crc32c checksum to every chunk of the copy (Zarr v3; needs "
                         "--zarr-format 3 for a v2 source), so that verify detects any "
                         "corruption of the copy's data")
    if_exists(sp, "DST at --dst-path")
    storage_option(sp, extra="; for both SRC and DST")
    for which in ("src", "dst"):
        sp.add_argument(f"--{which}-storage-option", dest=f"{which}_storage_options",
                        metavar="KEY=VALUE", action="append", type=parse_storage_option,
                        default=None, help=f"as --storage-option, for {which.upper()} only "
                                           f"(wins over --storage-option)")
    progress(sp)

    sp = add("convert", cmd_convert, "convert .npy, .npz or HDF5 into a store", store=False,
             description="Convert a .npy, .npz or HDF5 file into a store. Every dataset is "
                         "checked against the options before anything is written, and a "
                         "failed conversion removes what it wrote.")
    sp.add_argument("input", metavar="IN", help=".npy, .npz, or HDF5 (.h5/.hdf5) file")
    sp.add_argument("output", metavar="OUT", help="the store to write (path or URL)")
    sp.add_argument("--path", default="", help="location inside OUT (default: its root)")
    sp.add_argument("--chunks", type=parse_chunks, default=None,
                    help="chunk shape, e.g. 100,100 (default: HDF5's chunks, else automatic)")
    sp.add_argument("--compressor", type=lambda s: [parse_compressor(s)], default=None,
                    help=codec_help.replace("as the source", "Blosc lz4"))
    sp.add_argument("--zarr-format", type=int, choices=(2, 3), default=None,
                    help="Zarr format of the new arrays and groups (default 2)")
    if_exists(sp, "OUT at --path")
    storage_option(sp, extra="; for OUT")
    progress(sp)
    return p


