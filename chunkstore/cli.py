"""The ``chunkstore`` command line: inspect, copy, convert, remove and verify Zarr v2 and v3
stores.

    chunkstore info PATH [--path P]
    chunkstore tree PATH [--path P] [--level N]
    chunkstore ls PATH [--path P] [-r]
    chunkstore cp SRC DST [--src-path P] [--dst-path P] [--chunks 100,100]
                  [--compressor zstd:5|blosc:lz4:5:shuffle|gzip:6|none] [--dtype f4]
                  [--zarr-format 2|3] [--shards 1000,1000|none]
                  [--if-exists raise|replace|skip]
    chunkstore convert IN OUT [--path P] [--chunks ...] [--compressor ...] [--zarr-format 2|3]
    chunkstore rm PATH [--path P]
    chunkstore consolidate PATH [--path P]
    chunkstore verify PATH [--path P]

A store is a path or URL, dispatched like everywhere else in chunkstore (``*.zip``,
``*.sqlite``/``*.db``, ``*.lmdb``, ``scheme://...``, else a directory). Errors print one line,
``chunkstore: error: ...``, and exit with status 2 (usage) or 1 (anything else).

Zarr v3: every command reads v3 nodes (``zarr.json``) and sharded arrays. ``cp`` copies v3
raw (shards as they are) or recodes; ``--zarr-format`` converts between v2 and v3 and
``--shards`` sets the shard shape of v3 copies. ``consolidate`` writes v3 consolidated
metadata into the group's ``zarr.json``. ``verify`` decodes every inner chunk of every shard,
and reports a corrupt shard index by its shard key.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import os
import re
import sys

import numpy as np

__all__ = ["main"]

PROG = "chunkstore"


# ------------------------------------------------------------------------------ errors
class CLIError(Exception):
    """An error reported to the user as one line, exit status 1."""


class UsageError(CLIError):
    """A bad command line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message, no SystemExit here
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _one_line(text):
    from chunkstore.cli_safety import scrub_temp_names
    text = re.sub(r"^\[Errno \d+\] ", "", scrub_temp_names(str(text)))
    return " ".join(text.split())


def _message(e):
    if isinstance(e, KeyError) and len(e.args) == 1 and isinstance(e.args[0], str):
        return e.args[0]
    msg = str(e)
    return msg if msg else type(e).__name__


def _err(text):
    print(f"{PROG}: error: {_one_line(text)}", file=sys.stderr)


def _note(text):
    from chunkstore.cli_safety import is_quiet
    if is_quiet():
        return
    print(f"{PROG}: {_one_line(text)}", file=sys.stderr)


# ------------------------------------------------------------------------------ parsing
_SHUFFLES = {"noshuffle": 0, "0": 0, "none": 0, "shuffle": 1, "1": 1, "byte": 1,
             "bitshuffle": 2, "2": 2, "bit": 2}


def _int_arg(text, what, lo, hi):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
    if not lo <= v <= hi:
        raise argparse.ArgumentTypeError(f"{what} must be in {lo}..{hi}, got {v}")
    return v


def parse_compressor(spec):
    """A numcodecs codec (or None) from 'zstd:5', 'blosc:lz4:5:shuffle', 'gzip:6', 'none'..."""
    import numcodecs
    parts = spec.strip().split(":")
    name, args = parts[0].lower(), parts[1:]
    maxargs = {"none": 0, "zstd": 1, "blosc": 3, "gzip": 1, "zlib": 1, "bz2": 1, "lzma": 1,
               "lz4": 1}
    if name not in maxargs:
        raise argparse.ArgumentTypeError(
            f"unknown compressor {parts[0]!r} in {spec!r}; choose from "
            f"{', '.join(maxargs)} (e.g. zstd:5, blosc:lz4:5:shuffle, gzip:6, none)")
    if len(args) > maxargs[name]:
        raise argparse.ArgumentTypeError(
            f"too many fields in compressor {spec!r}: {name} takes at most {maxargs[name]}")
    if any(a == "" for a in args):
        raise argparse.ArgumentTypeError(f"empty field in compressor {spec!r}")
    if name == "none":
        return None
    if name == "zstd":
        return numcodecs.Zstd(level=_int_arg(args[0], "zstd level", -131072, 22) if args else 3)
    if name == "blosc":
        cnames = numcodecs.blosc.list_compressors()
        cname = args[0].lower() if args else "lz4"
        if cname not in cnames:
            raise argparse.ArgumentTypeError(
                f"unknown blosc compressor {cname!r} in {spec!r}; choose from "
                f"{', '.join(cnames)}")
        clevel = _int_arg(args[1], "blosc level", 0, 9) if len(args) > 1 else 5
        shuffle = args[2].lower() if len(args) > 2 else "shuffle"
        if shuffle not in _SHUFFLES:
            raise argparse.ArgumentTypeError(
                f"unknown blosc shuffle {args[2]!r} in {spec!r}; choose from noshuffle, "
                f"shuffle, bitshuffle")
        return numcodecs.Blosc(cname=cname, clevel=clevel, shuffle=_SHUFFLES[shuffle])
    if name == "gzip":
        return numcodecs.GZip(level=_int_arg(args[0], "gzip level", 0, 9) if args else 5)
    if name == "zlib":
        return numcodecs.Zlib(level=_int_arg(args[0], "zlib level", 0, 9) if args else 5)
    if name == "bz2":
        return numcodecs.BZ2(level=_int_arg(args[0], "bz2 level", 1, 9) if args else 9)
    if name == "lzma":
        return numcodecs.LZMA(preset=_int_arg(args[0], "lzma preset", 0, 9) if args else None)
    return numcodecs.LZ4(acceleration=_int_arg(args[0], "lz4 acceleration", 1, 2**16)
                         if args else 1)


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
    try:
        dt = np.dtype(spec)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"invalid dtype {spec!r}") from None
    if dt.hasobject:
        raise argparse.ArgumentTypeError(f"dtype {spec!r}: object dtypes are not supported")
    return dt


# ------------------------------------------------------------------------------ helpers
def _is_url(spec):
    return "://" in spec or "::" in spec


def _open_store(spec, mode, options=None):
    """The store at spec; for reading, a local path must exist. options: fsspec storage
    options (--storage-option), for URLs only."""
    from chunkstore.storage.base import normalize_store
    if options and not _is_url(spec):
        raise UsageError(f"--storage-option applies to URL stores (s3://..., gcs://...), "
                         f"not to {spec}")
    if not _is_url(spec) and mode in ("r", "r+") and not os.path.exists(spec):
        raise CLIError(f"no such file or directory: {spec}")
    return normalize_store(spec, mode=mode, storage_options=options)


def _close(store):
    close = getattr(store, "close", None)
    if close is not None:
        close()


def _norm(path):
    from chunkstore.creation import normalize_path
    try:
        return normalize_path(path)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None


def _join(a, b):
    return f"{a}/{b}" if a else b


def _kind(store, path):
    from chunkstore import nodes
    return nodes.node_kind(store, path)[0]


def _format(store, path):
    """2 or 3 for the node at path (None if there is none)."""
    from chunkstore import nodes
    return nodes.node_kind(store, path)[1]


def _is_meta_key(key):
    return key.rsplit("/", 1)[-1] in (".zarray", ".zgroup", ".zattrs", "zarr.json")


def _count_nodes(store, keys):
    """(arrays, groups) among the metadata documents in keys (v2 and v3)."""
    arrays = groups = 0
    for k in keys:
        name = k.rsplit("/", 1)[-1]
        if name == ".zarray":
            arrays += 1
        elif name == ".zgroup":
            groups += 1
        elif name == "zarr.json":
            kind = _kind(store, k[: -len("zarr.json")].rstrip("/"))
            arrays += kind == "array"
            groups += kind == "group"
    return arrays, groups


def _v3_consolidated(store, path):
    """The v3 group at path keeps consolidated metadata in its zarr.json."""
    import json
    try:
        doc = json.loads(store[_join(path, "zarr.json")])
    except Exception:  # noqa: BLE001 - absent or unreadable: not consolidated
        return False
    return (isinstance(doc, dict) and doc.get("node_type") == "group"
            and isinstance(doc.get("consolidated_metadata"), dict))


def _consolidated(store, path):
    return _join(path, ".zmetadata") in store or _v3_consolidated(store, path)


def _consolidate(store, path):
    """Consolidate the group at path in its own format (v2 .zmetadata, v3 zarr.json)."""
    if _format(store, path) == 3:
        from chunkstore.metadata.v3 import consolidate_v3
        return len(consolidate_v3(store, path)["consolidated_metadata"])
    from chunkstore.storage.consolidated import consolidate_metadata
    consolidate_metadata(store, path=path)
    return None


def _where(spec, path):
    return f"{spec} (path {path!r})" if path else spec


def _open_node(store, spec, path, read_only=True):
    from chunkstore.array import Array
    from chunkstore.group import Group
    kind = _kind(store, path)
    if kind == "array":
        return Array(store, path=path, read_only=read_only)
    if kind == "group":
        return Group(store, path=path, read_only=read_only)
    if path:
        raise CLIError(f"no array or group at path {path!r} in {spec}")
    raise CLIError(f"no array or group at the root of {spec} (not a Zarr store?)")


def _keys_under(store, prefix):
    fn = getattr(store, "keys_under", None)
    if fn is not None:
        return list(fn(prefix))
    if not prefix:
        return list(store)
    return [k for k in list(store) if k == prefix or k.startswith(prefix + "/")]


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _a(word):
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@contextlib.contextmanager
def _stores(*specs_modes):
    opened = []
    try:
        for spec, mode, *options in specs_modes:
            opened.append(_open_store(spec, mode, *options))
        yield opened
    finally:
        error = None
        for s in reversed(opened):
            try:
                _close(s)
            except Exception as e:  # report the first close failure (e.g. zip rewrite)
                error = error or e
        if error is not None and sys.exc_info()[0] is None:
            raise error


# With a progress bar, data is copied in blocks of about this many decoded bytes (a batch of
# chunks, at least one), so the bar moves per batch instead of per 256 MiB block.
PROGRESS_BLOCK_BYTES = 16 * 2**20


class Progress:
    """A tqdm bar on stderr when enabled and tqdm is importable, else nothing."""

    def __init__(self, enabled, total=None, desc=None, unit="it"):
        self._bar = None
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        # unit "B": bytes, shown with binary prefixes and a throughput (e.g. 45.2MB/s).
        self._bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr,
                         dynamic_ncols=True, unit_divisor=1024 if unit == "B" else 1000)

    @property
    def shown(self):
        return self._bar is not None

    def update(self, n=1):
        if self._bar is not None:
            self._bar.update(n)

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _progress_enabled(args):
    if getattr(args, "progress", None) is not None:
        return args.progress
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _refresh_consolidated(store, path, include_self=True):
    """Rewrite the consolidated metadata of path and of each ancestor that has some (v2
    .zmetadata, or v3 consolidated_metadata in the group's zarr.json): keeps them true."""
    parts = path.split("/") if path else []
    n = len(parts) + (1 if include_self else 0)
    for i in range(n):
        p = "/".join(parts[:i])
        if _consolidated(store, p):
            _consolidate(store, p)


# ------------------------------------------------------------------------------ info / tree / ls
def cmd_info(args):
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        print(repr(_open_node(store, args.store, path).info))
    return 0


def cmd_tree(args):
    from chunkstore.array import Array
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        node = _open_node(store, args.store, path)
        if isinstance(node, Array):
            print(f"{node.name} {node.shape} {node.dtype}")
        else:
            print(repr(node.tree(level=args.level)))
    return 0


def _ls_rows(grp, recursive, prefix=""):
    from chunkstore.array import Array
    for name, node in grp.items():
        rel = _join(prefix, name)
        if isinstance(node, Array):
            yield rel, "array", str(node.shape), str(node.dtype)
        else:
            yield rel, "group", "", ""
            if recursive:
                yield from _ls_rows(node, recursive, rel)


def cmd_ls(args):
    from chunkstore.array import Array
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        node = _open_node(store, args.store, path)
        if isinstance(node, Array):
            rows = [(node.basename or "/", "array", str(node.shape), str(node.dtype))]
        else:
            rows = list(_ls_rows(node, args.recursive))
        if not rows:
            return 0
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


# ------------------------------------------------------------------------------ rm / consolidate
def cmd_rm(args):
    from chunkstore.cli_options import confirm
    from chunkstore.storage.base import rmdir
    path = _norm(args.path)
    with _stores((args.store, "r+", _options(args))) as (store,):
        kind = _kind(store, path)
        if kind is None:
            _open_node(store, args.store, path)  # raises the "nothing there" error
        what = f"{kind} {path!r} from {args.store}" if path else f"everything in {args.store}"
        answer = confirm(f"remove {what}?", args.yes)
        if answer is None:
            raise UsageError(f"rm removes {what}: confirm with -f/--yes (stdin is not a "
                             f"terminal to ask on)")
        if not answer:
            print("nothing removed")
            return 1
        if path:
            rmdir(store, path)
            _refresh_consolidated(store, path.rsplit("/", 1)[0] if "/" in path else "")
            print(f"removed {kind} {path!r} from {args.store}")
        else:
            rmdir(store, "")
            print(f"removed everything from {args.store}")
    return 0


def cmd_consolidate(args):
    path = _norm(args.path)
    with _stores((args.store, "r+", _options(args))) as (store,):
        if _kind(store, path) != "group":
            _open_node(store, args.store, path)
            raise CLIError(f"{_where(args.store, path)} holds an array; consolidate a group")
        members = _consolidate(store, path)
        if members is not None:  # v3: inside the group's own zarr.json
            print(f"consolidated the metadata of {_plural(members, 'member')} into "
                  f"{_join(path, 'zarr.json')} in {args.store}")
            return 0
        n = sum(1 for k in _keys_under(store, path)
                if k.rsplit("/", 1)[-1] in (".zarray", ".zgroup", ".zattrs"))
        print(f"consolidated {_plural(n, 'metadata document')} into "
              f"{_join(path, '.zmetadata')} in {args.store}")
    return 0


# ------------------------------------------------------------------------------ cp
class _Cast:
    """Array-like view of src whose reads are cast to dtype (for copy_array_data)."""

    def __init__(self, src, dtype):
        self._src, self.dtype = src, np.dtype(dtype)
        self.shape, self.size = src.shape, src.size

    def __getitem__(self, sel):
        a = np.asarray(self._src[sel])
        return a if a.dtype == self.dtype else a.astype(self.dtype)


def _cast_fill(fill, old, new):
    """fill converted to the new dtype, or 0 when it has no exact equivalent there."""
    if fill is None:
        return None
    try:
        with np.errstate(all="ignore"):
            v = np.asarray(fill, dtype=old).astype(new)
            back = v.astype(old)
        same = back == np.asarray(fill, dtype=old)
        if old.kind in "fc" and new.kind in "fc":
            same = same or bool(np.isnan(back) and np.isnan(np.asarray(fill, dtype=old)))
        if bool(same):
            return v[()]
    except (TypeError, ValueError):
        pass
    return 0


def _dims_attr(names, ndim):
    """A valid list of dimension names (xarray's _ARRAY_DIMENSIONS), else None."""
    if isinstance(names, (list, tuple)) and len(names) == ndim and \
            all(isinstance(n, str) for n in names):
        return list(names)
    return None


class Copier:
    """Copies nodes between stores: raw (copy_store) or recoded (create + copy_array_data).

    recode: None (raw copies) or a dict of chunks / compressor / dtype / zarr_format / shards.
    An array is copied raw when nothing about it changes (same format, no other option).

    dry=True checks everything a copy would do without writing (see cli_safety): the
    destination's state, every option against every array, each new array's metadata built
    in a scratch store; it counts what would be copied (keys, and decoded bytes to recode)
    for the progress bar's total."""

    def __init__(self, src, dst, src_spec, dst_spec, recode, if_exists, progress, dry=False):
        self.src, self.dst = src, dst
        self.src_spec, self.dst_spec = src_spec, dst_spec
        self.recode = recode
        self.if_exists = if_exists
        self.progress = progress
        self.dry = dry
        self.arrays = self.groups = self.skipped = self.keys = self.bytes = 0
        self.raw_keys = self.recode_bytes = 0  # what a dry run found to copy
        self.count_keys = False

    def _target_format(self, sp):
        fmt = (self.recode or {}).get("zarr_format")
        return fmt or _format(self.src, sp) or 2

    def _changes_array(self, sp):
        if self.recode is None:
            return False
        if set(self.recode) - {"zarr_format"}:
            return True
        return self._target_format(sp) != _format(self.src, sp)

    def copy(self, sp, dp):
        from chunkstore.creation import _require_parent_groups
        from chunkstore.storage.base import rmdir
        src_kind = _kind(self.src, sp)
        dst_kind = _kind(self.dst, dp)
        if dst_kind is not None:
            if self.if_exists == "raise":
                raise CLIError(f"{_where(self.dst_spec, dp)} already holds {_a(dst_kind)}; "
                               f"use --if-exists replace or --if-exists skip")
            if src_kind == "group" and dst_kind == "group":
                self._merge_group(sp, dp)
                return
            if self.if_exists == "skip":
                self.skipped += 1
                return
            if not self.dry:
                rmdir(self.dst, dp)
        # groups created on the way get the format of what is copied there
        if not self.dry:
            _require_parent_groups(self.dst, dp, self._target_format(sp))
        if self.recode is None or (src_kind == "array" and not self._changes_array(sp)):
            self._raw(sp, dp)
        elif src_kind == "array":
            self._recode_array(sp, dp)
        else:
            self._recode_group(sp, dp)

    def _members(self, path):
        from chunkstore.storage.base import listdir
        out = []
        for name in listdir(self.src, path):
            if _kind(self.src, _join(path, name)) is not None:
                out.append(name)
        return sorted(out)

    def _copy_attrs(self, sp, dp, attrs=None):
        """dp's attributes become sp's (or attrs, if given), in each node's own format."""
        from chunkstore import nodes
        from chunkstore.attrs import Attributes
        sf, df = _format(self.src, sp), _format(self.dst, dp)
        if attrs is None and sf == 2 and df == 2:  # the document as it is
            key = _join(sp, ".zattrs")
            dkey = _join(dp, ".zattrs")
            if key in self.src:
                self.dst[dkey] = self.src[key]
            elif dkey in self.dst:
                del self.dst[dkey]
            return
        if attrs is None:
            attrs = Attributes(self.src, nodes.attrs_key(sp, sf), zarr_format=sf).asdict()
        dst_attrs = Attributes(self.dst, nodes.attrs_key(dp, df), zarr_format=df)
        if attrs or df == 3 or nodes.attrs_key(dp, df) in self.dst:
            dst_attrs.put(attrs)

    def _merge_group(self, sp, dp):
        if self.if_exists == "replace" and not self.dry:
            self._copy_attrs(sp, dp)
        for name in self._members(sp):
            self.copy(_join(sp, name), _join(dp, name))

    def _raw(self, sp, dp):
        from chunkstore.convenience import copy_store
        if self.dry:
            if self.count_keys:  # listing a big remote store costs: only for a bar
                self.raw_keys += len(_keys_under(self.src, sp))
            return
        keys = _keys_under(self.src, sp)
        arrays, groups = _count_nodes(self.src, [k for k in keys if _is_meta_key(k)])
        self.arrays += arrays
        self.groups += groups
        per_key = 1 if self.recode is None else 0  # a recoding copy's bar counts bytes
        n, _, nbytes = copy_store(self.src, self.dst, source_path=sp, dest_path=dp,
                                  if_exists="replace",
                                  log=lambda _msg: self.progress.update(per_key))
        self.keys += n
        self.bytes += nbytes

    def _recode_group(self, sp, dp):
        from chunkstore.group import open_group
        if not self.dry:
            open_group(self.dst, mode="a", path=dp, zarr_format=self._target_format(sp))
            self._copy_attrs(sp, dp)
            self.groups += 1
        for name in self._members(sp):
            self.copy(_join(sp, name), _join(dp, name))

    def _recode_array(self, sp, dp):
        from chunkstore.array import Array
        from chunkstore.convenience import copy_array_data
        from chunkstore.creation import create
        a = Array(self.src, path=sp, read_only=True)
        src_fmt, fmt = a.zarr_format, self._target_format(sp)
        attrs = a.attrs.asdict()
        filters = list(a.filters) if a.filters else []
        kw = dict(shape=a.shape, chunks=a.chunks, dtype=a.dtype, compressor=a.compressor,
                  fill_value=a.fill_value, order=a.order)
        if src_fmt == fmt == 2:
            kw["dimension_separator"] = a.dimension_separator
        if a.dtype.hasobject and filters:
            kw["object_codec"] = filters.pop(0)
        chunks = self.recode.get("chunks")
        if chunks is not None:
            if isinstance(chunks, tuple) and len(chunks) != a.ndim:
                raise CLIError(f"--chunks has {_plural(len(chunks), 'value')} but array "
                               f"{a.name!r} has {_plural(a.ndim, 'dimension')}")
            kw["chunks"] = chunks
        if "compressor" in self.recode:
            kw["compressor"] = self.recode["compressor"]
        source = a
        dtype = self.recode.get("dtype")
        if dtype is not None and dtype != a.dtype:
            if a.dtype.hasobject:
                raise CLIError(f"cannot change the dtype of object array {a.name!r}")
            kw["dtype"] = dtype
            kw["fill_value"] = _cast_fill(a.fill_value, a.dtype, dtype)
            if filters:
                _note(f"dropping the filters of {a.name!r}: they are specific to its dtype "
                      f"{a.dtype}")
                filters = []
            source = _Cast(a, dtype)
        if fmt == 3:
            attrs = self._v3_layout(a, kw, filters, attrs, dtype is not None
                                    and dtype != a.dtype)
        else:
            if self.recode.get("checksum"):
                raise CLIError(f"--checksum needs Zarr v3 (add --zarr-format 3); array "
                               f"{a.name!r} would be Zarr v2, which has no checksum codec")
            if a.shards is not None or self.recode.get("shards") not in (None, "none"):
                if self.recode.get("shards") not in (None, "none"):
                    raise CLIError(f"--shards needs Zarr v3 (add --zarr-format 3); array "
                                   f"{a.name!r} would be Zarr v2")
            if src_fmt == 3:
                if _has_crc32c(a):
                    _note(f"dropping the crc32c checksum of {a.name!r}: Zarr v2 has no "
                          f"checksum codec")
                dims = _dims_attr(a.metadata.dimension_names, a.ndim)
                if dims is not None:
                    attrs.setdefault("_ARRAY_DIMENSIONS", dims)
            if a.dtype.hasobject and "object_codec" not in kw:
                import numcodecs  # a v3 string array: variable-length UTF-8 in v2
                kw["object_codec"] = numcodecs.VLenUTF8()
            kw["filters"] = filters or None
        if self.dry:  # the metadata alone, in a scratch store: checks every argument
            from chunkstore.storage.memory import MemoryStore
            try:
                create(store=MemoryStore(), path=dp, zarr_format=fmt, **kw)
            except (TypeError, ValueError) as e:
                raise CLIError(f"cannot copy array {a.name!r} of {self.src_spec}: "
                               f"{_message(e)}") from None
            self.recode_bytes += a.size * np.dtype(kw["dtype"]).itemsize
            return
        dst = create(store=self.dst, path=dp, zarr_format=fmt, **kw)
        self._copy_attrs(sp, dp, attrs)
        itemsize = dst.dtype.itemsize
        copy_array_data(source, dst, progress=lambda n: self.progress.update(n * itemsize),
                        block_bytes=PROGRESS_BLOCK_BYTES if self.progress.shown else None)
        self.arrays += 1
        self.bytes += dst.nbytes_stored

    def _v3_layout(self, a, kw, filters, attrs, dtype_changed):
        """Fill kw (in place) with the Zarr v3 layout of the copy of a; returns its attrs.

        Kept from a v3 source unless changed: the codec chain (checksum, blosc settings,
        transposes), the shards, the chunk key encoding and dimension_names. From a v2
        source: the compressor (Blosc, Zstd, GZip or none), and dimension_names from
        _ARRAY_DIMENSIONS. v2 filters are dropped (the data is decoded and encoded again)."""
        from chunkstore.creation import v3_codec
        from chunkstore.metadata.v2 import normalize_chunks
        name = a.name
        if a.dtype.hasobject:
            oc = kw.pop("object_codec", None)
            if oc is not None and getattr(oc, "codec_id", None) != "vlen-utf8":
                raise CLIError(f"array {name!r} holds {oc.codec_id} objects; Zarr v3 stores "
                               f"strings only (vlen-utf8)")
        if filters:
            _note(f"dropping the filters of {name!r}: Zarr v3 has no place for them (the "
                  f"data is re-encoded without)")
        comp = kw["compressor"]
        if comp is not None and comp != "default":
            try:
                v3_codec(comp, np.dtype(kw["dtype"]).itemsize)
            except ValueError:
                raise CLIError(f"the compressor of {name!r} ({comp!r}) has no Zarr v3 codec; "
                               f"choose one with --compressor (blosc, zstd, gzip or none)") \
                    from None
        chunks = normalize_chunks(kw["chunks"], a.shape, np.dtype(kw["dtype"]).itemsize)
        kw["chunks"] = chunks
        changed = {"chunks", "compressor", "dtype"} & set(self.recode)
        if a.zarr_format == 3:
            meta = a.metadata
            chain = meta.inner_codecs if a.shards is not None else meta.codecs
            if "compressor" not in self.recode and not dtype_changed:
                kw["codecs"] = chain  # as it is: checksum, blosc settings, transposes
                if self.recode.get("checksum") and not _has_crc32c(a):
                    kw["codecs"] = list(chain) + [{"name": "crc32c"}]
            elif _has_crc32c(a) or self.recode.get("checksum"):
                import numcodecs
                kw["filters"] = [numcodecs.CRC32C()]
            kw["dimension_separator"] = meta.chunk_key_encoding
            if meta.dimension_names is not None:
                kw["dimension_names"] = meta.dimension_names
            shards = a.shards
        else:
            dims = _dims_attr(attrs.get("_ARRAY_DIMENSIONS"), a.ndim)
            if dims is not None:
                kw["dimension_names"] = dims
                attrs = {k: v for k, v in attrs.items() if k != "_ARRAY_DIMENSIONS"}
            shards = None
            if self.recode.get("checksum"):
                import numcodecs
                kw["filters"] = [numcodecs.CRC32C()]
        if "shards" in self.recode:
            shards = self.recode["shards"]
            if shards == "none":
                shards = None
            elif isinstance(shards, int):
                shards = (shards,) * a.ndim
            elif len(shards) != a.ndim:
                raise CLIError(f"--shards has {_plural(len(shards), 'value')} but array "
                               f"{name!r} has {_plural(a.ndim, 'dimension')}")
            if shards is not None:  # None entries: the whole dimension, in whole chunks
                shards = tuple(-(-n // c) * c if s is None else s
                               for s, n, c in zip(shards, a.shape, chunks))
        elif shards is not None and "chunks" in changed:
            if any(s % c for s, c in zip(shards, chunks)):
                raise CLIError(f"the shards {shards} of {name!r} are not a multiple of the new "
                               f"chunks {chunks}; give --shards too (or --shards none)")
        if shards is not None and any(s % c for s, c in zip(shards, chunks)):
            raise CLIError(f"--shards {shards} must be a multiple of the chunks {chunks} of "
                           f"{name!r} in every dimension")
        kw["shards"] = shards
        return attrs


def _has_crc32c(a):
    if a.zarr_format != 3:
        return False
    meta = a.metadata
    chain = meta.inner_codecs if a.shards is not None else meta.codecs
    return any(c.get("name") == "crc32c" for c in chain)


def _same_location(a, b):
    if _is_url(a) or _is_url(b):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(a) == os.path.realpath(b)


def cmd_cp(args):
    sp, dp = _norm(args.src_path), _norm(args.dst_path)
    recode = {}
    if args.chunks is not None:
        recode["chunks"] = args.chunks
    if args.compressor is not None:
        recode["compressor"] = args.compressor[0]
    if args.dtype is not None:
        recode["dtype"] = args.dtype
    if args.zarr_format is not None:
        recode["zarr_format"] = args.zarr_format
    if args.shards is not None:
        if args.zarr_format == 2 and args.shards != "none":
            raise UsageError("--shards needs Zarr v3; it cannot go with --zarr-format 2")
        recode["shards"] = args.shards
    if args.checksum:
        if args.zarr_format == 2:
            raise UsageError("--checksum needs Zarr v3; it cannot go with --zarr-format 2")
        recode["checksum"] = True
    same = _same_location(args.src, args.dst)
    if same and (sp == dp or not sp or dp.startswith(sp + "/")):
        raise CLIError(f"cannot copy {_where(args.src, sp)} into itself "
                       f"({_where(args.dst, dp)})")
    # --storage-option goes to whichever of SRC and DST are URLs; the specific ones must
    # name a URL store.
    src_opts = _options(args, "src_storage_options") \
        if _is_url(args.src) or args.src_storage_options else None
    dst_opts = _options(args, "dst_storage_options") \
        if _is_url(args.dst) or args.dst_storage_options else None
    specs = [(args.src, "r+", src_opts)] if same else \
        [(args.src, "r", src_opts), (args.dst, "a", dst_opts)]
    from chunkstore.cli_safety import quiet, remove_node_if_new, remove_store_if_new
    with contextlib.nullcontext() if same else remove_store_if_new(args.dst), \
            _stores(*specs) as opened:
        src = opened[0]
        dst = opened[0] if same else opened[1]
        src_kind = _kind(src, sp)
        if src_kind is None:
            _open_node(src, args.src, sp)
        show = _progress_enabled(args)
        # Everything is checked before the first write: a bad option, or an existing
        # destination, fails here with the store untouched.
        plan = Copier(src, dst, args.src, args.dst, recode or None, args.if_exists,
                      Progress(False), dry=True)
        plan.count_keys = show
        with quiet():
            plan.copy(sp, dp)
        total = (plan.recode_bytes if recode else plan.raw_keys) if show else None
        with remove_node_if_new(dst, dp), \
                Progress(show, total=total, desc="cp", unit="B" if recode else "key") as bar:
            copier = Copier(src, dst, args.src, args.dst, recode or None, args.if_exists, bar)
            copier.copy(sp, dp)
            if recode and _consolidated(src, sp) and _kind(dst, dp) == "group":
                _consolidate(dst, dp)
            _refresh_consolidated(dst, dp)
    what = []
    if copier.arrays:
        what.append(_plural(copier.arrays, "array"))
    if copier.groups:
        what.append(_plural(copier.groups, "group"))
    msg = f"copied {' and '.join(what) or 'nothing'}"
    if not recode and copier.keys:
        msg += f" ({_plural(copier.keys, 'key')}, {_human(copier.bytes)})"
    elif copier.bytes:
        msg += f" ({_human(copier.bytes)} stored)"
    if copier.skipped:
        msg += f"; skipped {copier.skipped} existing"
    print(f"{msg}: {_where(args.src, sp)} -> {_where(args.dst, dp)}")
    return 0


# ------------------------------------------------------------------------------ convert
_H5_MAGIC = b"\x89HDF\r\n\x1a\n"


def _input_kind(path):
    if not os.path.exists(path):
        raise CLIError(f"no such file: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{path} is a directory; convert reads .npy, .npz and HDF5 files "
                       f"(use 'cp' to copy a store)")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK"):
        return "npz"
    if head == _H5_MAGIC:
        return "hdf5"
    ext = os.path.splitext(path)[1].lower()
    if ext in (".h5", ".hdf5", ".hdf", ".he5", ".nc", ".nc4"):
        return "hdf5"  # HDF5 allows a user block before the signature
    raise CLIError(f"cannot tell the format of {path}: expected a .npy, .npz or HDF5 file")


class Converter:
    """Writes the arrays and groups of one input file into a store.

    dry=True: the same walk into a scratch MemoryStore with no data copied, which checks
    every option against every dataset before the real store is touched (see cli_safety)
    and sums the bytes to convert for the progress bar."""

    def __init__(self, store, args, progress, dry=False):
        self.dry = dry
        if dry:
            from chunkstore.storage.memory import MemoryStore
            store = MemoryStore()
        self.store, self.args, self.progress = store, args, progress
        self.arrays = self.groups = 0
        self.nbytes = 0

    def _kw(self, shape, chunks, what):
        kw = {"chunks": self.args.chunks if self.args.chunks is not None else chunks}
        if isinstance(kw["chunks"], tuple) and len(kw["chunks"]) != len(shape):
            raise CLIError(f"--chunks has {_plural(len(kw['chunks']), 'value')} but {what} "
                           f"has {_plural(len(shape), 'dimension')} (shape {tuple(shape)})")
        if self.args.compressor is not None:
            kw["compressor"] = self.args.compressor[0]
        return kw

    def array(self, path, source, dtype=None, chunks=True, what=None, **extra):
        """Create an array at path and fill it from source in bounded blocks. what names
        the source in errors (e.g. "dataset /a/b of in.h5")."""
        from chunkstore.convenience import copy_array_data
        from chunkstore.creation import create
        what = what or f"array {path!r}"
        dtype = np.dtype(dtype if dtype is not None else source.dtype)
        kw = self._kw(source.shape, chunks, what)
        kw.update(extra)
        fmt = getattr(self.args, "zarr_format", None) or 2
        try:
            z = create(shape=source.shape, dtype=dtype, store=self.store, path=path,
                       zarr_format=fmt, **kw)
        except (TypeError, ValueError) as e:
            if not self.dry:
                raise
            raise CLIError(f"cannot convert {what}: {_message(e)}") from None
        self.arrays += 1
        if self.dry:
            self.nbytes += int(np.prod(source.shape)) * dtype.itemsize
            return z
        itemsize = dtype.itemsize
        copy_array_data(source, z, progress=lambda n: self.progress.update(n * itemsize),
                        block_bytes=PROGRESS_BLOCK_BYTES if self.progress.shown else None)
        return z

    def group(self, path):
        from chunkstore.group import open_group
        self.groups += 1
        return open_group(self.store, mode="a", path=path,
                          zarr_format=getattr(self.args, "zarr_format", None) or 2)


def _h5_json(v):
    """A JSON-able value of an HDF5 attribute (TypeError if there is none)."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        if v.dtype.names is not None:
            raise TypeError(f"compound attribute of dtype {v.dtype}")
        return [_h5_json(x) for x in v.tolist()] if v.ndim else _h5_json(v[()])
    if isinstance(v, np.generic):
        if isinstance(v, np.void):
            raise TypeError(f"attribute of dtype {v.dtype}")
        return _h5_json(v.item())
    if isinstance(v, (list, tuple)):
        return [_h5_json(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"attribute of type {type(v).__name__}")


_H5_SCALE_ATTRS = {"DIMENSION_LIST", "REFERENCE_LIST"}


def _h5_attrs(obj, is_scale):
    out = {}
    for k in obj.attrs.keys():
        if k in _H5_SCALE_ATTRS or (is_scale and k in ("CLASS", "NAME")):
            continue
        try:
            out[k] = _h5_json(obj.attrs[k])
        except Exception as e:  # noqa: BLE001 - skip what JSON cannot hold, say so
            _note(f"skipping attribute {k!r} of {obj.name}: {_message(e)}")
    return out


def _h5_dims(ds):
    """xarray's _ARRAY_DIMENSIONS from HDF5 dimension scales in the same group, or None."""
    try:
        parent = ds.parent.name
        if ds.attrs.get("CLASS") in (b"DIMENSION_SCALE", "DIMENSION_SCALE"):
            return [ds.name.rsplit("/", 1)[-1]] if ds.ndim == 1 else None
        names = []
        for dim in ds.dims:
            scales = list(dim.values())
            if not scales or scales[0].parent.name != parent:
                return None
            names.append(scales[0].name.rsplit("/", 1)[-1])
        return names if names else None
    except Exception:  # noqa: BLE001 - dimension scales are optional sugar
        return None


class _H5Str:
    """Array-like over a variable-length string dataset, reading Python str."""

    def __init__(self, ds):
        self._ds = ds.asstr()
        self.shape, self.size, self.dtype = ds.shape, ds.size, np.dtype(object)

    def __getitem__(self, sel):
        return np.asarray(self._ds[sel], dtype=object)


def _convert_hdf5(conv, path, root):
    try:
        import h5py
    except ImportError:
        raise CLIError("reading HDF5 needs h5py (pip install h5py)") from None
    import numcodecs
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise CLIError(f"cannot open {path} as HDF5: {_message(e)}") from None
    with f:
        g = conv.group(root)
        g.attrs.put(_h5_attrs(f, False))
        items = []
        f.visititems(lambda name, obj: items.append((name, obj)))
        for name, obj in items:
            dest = _join(root, name)
            if isinstance(obj, h5py.Group):
                conv.group(dest).attrs.put(_h5_attrs(obj, False))
                continue
            if not isinstance(obj, h5py.Dataset):
                continue
            if obj.shape is None:
                _note(f"skipping empty dataset {obj.name} (no shape)")
                continue
            dt = obj.dtype
            chunks = obj.chunks if obj.chunks else True
            extra = {}
            source = obj
            if dt.hasobject:
                info = h5py.check_string_dtype(dt)
                if info is None:
                    _note(f"skipping dataset {obj.name}: unsupported dtype {dt}")
                    continue
                source = _H5Str(obj)
                extra = {"object_codec": numcodecs.VLenUTF8(), "fill_value": ""}
                dt = np.dtype(object)
            else:
                fv = obj.fillvalue
                if fv is not None and dt.names is None:
                    extra["fill_value"] = fv
            is_scale = obj.attrs.get("CLASS") in (b"DIMENSION_SCALE", "DIMENSION_SCALE")
            z = conv.array(dest, source, dtype=dt, chunks=chunks,
                           what=f"dataset {obj.name} of {path}", **extra)
            attrs = _h5_attrs(obj, is_scale)
            dims = _h5_dims(obj)
            if dims is not None and "_ARRAY_DIMENSIONS" not in attrs:
                attrs["_ARRAY_DIMENSIONS"] = dims
            if attrs:
                z.attrs.put(attrs)


def _convert_npz(conv, path, root):
    try:
        npz = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - np.load raises many types for bad files
        raise CLIError(f"cannot read {path} as .npz: {_message(e)}") from None
    with npz:
        conv.group(root)
        for name in npz.files:
            # one member in memory at a time (npz members cannot be mapped); a dry run
            # reads only each member's header
            arr = _npz_header(npz, name) if conv.dry else npz[name]
            conv.array(_join(root, _norm(name)), arr, what=f"member {name!r} of {path}")


class _Header:
    """Shape and dtype of an array not read (a dry run's stand-in)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.size = int(np.prod(self.shape))


def _npz_header(npz, name):
    key = name if name in npz.zip.namelist() else name + ".npy"
    with npz.zip.open(key) as f:
        fmt = np.lib.format
        version = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(f)
    return _Header(shape, dtype)


def _convert_npy(conv, path, root):
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        raise CLIError(f"cannot read {path} as .npy: {_message(e)}") from None
    conv.array(root, arr, what=path)


def cmd_convert(args):
    from chunkstore.cli_safety import quiet, remove_node_if_new, remove_store_if_new
    from chunkstore.storage.base import rmdir
    kind = _input_kind(args.input)
    root = _norm(args.path)
    convert = {"npy": _convert_npy, "npz": _convert_npz, "hdf5": _convert_hdf5}[kind]
    with remove_store_if_new(args.output), \
            _stores((args.output, "a", _options(args))) as (store,):
        existing = _kind(store, root)
        if existing is not None:
            if args.if_exists == "raise":
                raise CLIError(f"{_where(args.output, root)} already holds {_a(existing)}; use "
                               f"--if-exists replace or --if-exists skip")
            if args.if_exists == "skip":
                print(f"skipped: {_where(args.output, root)} already holds {_a(existing)}")
                return 0
        # A dry run first: every dataset checked against the options, nothing written yet.
        plan = Converter(store, args, Progress(False), dry=True)
        with quiet():
            convert(plan, args.input, root)
        if existing is not None:
            rmdir(store, root)
        show = _progress_enabled(args)
        with remove_node_if_new(store, root), \
                Progress(show, total=plan.nbytes if show else None, desc="convert",
                         unit="B") as bar:
            conv = Converter(store, args, bar)
            convert(conv, args.input, root)
            _refresh_consolidated(store, root)
    what = [_plural(conv.arrays, "array")]
    if conv.groups:
        what.append(_plural(conv.groups, "group"))
    print(f"converted {args.input} ({kind}) into {' and '.join(what)}: "
          f"{_where(args.output, root)}")
    return 0


# ------------------------------------------------------------------------------ verify
VERIFY_DESCRIPTION = """\
Read every metadata document and decode every stored chunk (every inner chunk of every
shard); print each problem with its key; exit 1 if there is any.

Detected:
  - invalid metadata (.zarray, .zgroup, .zattrs, zarr.json) and stale consolidated metadata
  - chunk keys outside the array's chunk grid
  - chunks that fail to decode, or decode to the wrong size
  - corruption of a chunk that carries a checksum: any changed byte of a Zarr v3 chunk
    with the crc32c codec and of every shard index (it carries crc32c); a damaged
    compressed stream of gzip (CRC-32), zlib (Adler-32), bz2 (CRC) or lzma (xz check)
  - unreadable keys (the store raises on reading them)

Not detected:
  - changed bytes in a chunk without a checksum that still decodes to the right size:
    uncompressed chunks, Blosc chunks that Blosc stored uncompressed (data that did not
    compress), and often Blosc, LZ4 or Zstd chunks (a damaged stream usually fails to
    decode, but nothing guarantees it); in a sharded array without crc32c on its inner
    chunks, the same for the inner chunks behind an intact index
  - missing chunks: an absent chunk reads as the fill value, like one never written
  - data that was already wrong when it was written

To make data fully verifiable, copy it with a checksum on every chunk:
  chunkstore cp SRC DST --zarr-format 3 --checksum
"""

_CHUNKLIKE = re.compile(r"^\d+([./]\d+)*$")
_SIZE_PROBLEM = re.compile(r"has \d+ (bytes|items), expected \d+")
_METADATA = (".zarray", ".zgroup", ".zattrs", ".zmetadata")


class Verifier:
    def __init__(self, store, progress, batch=64):
        self.store, self.progress, self.batch = store, progress, batch
        self.problems = {"corrupt": 0, "wrong size": 0, "outside the grid": 0, "metadata": 0,
                         "consolidated": 0, "consolidated v3": 0, "unreadable": 0,
                         "corrupt shard": 0}
        self.chunks = self.arrays = 0
        self.bad_metadata = set()  # array paths whose metadata was already reported

    def report(self, kind, key, text):
        self.problems[kind] += 1
        label = {"corrupt": "corrupt chunk", "wrong size": "wrong-size chunk",
                 "outside the grid": "chunk key outside the grid",
                 "metadata": "invalid metadata", "unreadable": "unreadable chunk",
                 "consolidated": "stale consolidated metadata",
                 "consolidated v3": "stale consolidated metadata",
                 "corrupt shard": "corrupt shard"}[kind]
        print(f"{label} {key!r}: {_one_line(text)}", flush=True)

    def classify(self, arr, keys_by_array, path):
        """[(key, grid coordinates)] of the stored chunks (shards, for a sharded array) of
        one array; reports keys outside the grid. Other keys are ignored."""
        meta = arr.metadata
        nd, sep = arr.ndim, meta.dimension_separator
        v3 = arr.zarr_format == 3
        default = v3 and meta.chunk_key_encoding["name"] == "default"
        grid = meta.chunk_grid_shape if v3 else arr.cdata_shape
        what = "shard" if arr.shards is not None else "chunk"
        shape_of = arr.shards if arr.shards is not None else arr.chunks
        prefix = path + "/" if path else ""
        chunks = []
        for key in keys_by_array:
            rel = key[len(prefix):]
            if rel in _METADATA or rel == "zarr.json":
                continue
            if default:  # "c" + sep + coordinates ("c" for 0-d)
                if nd == 0 and rel == "c":
                    chunks.append((key, ()))
                    continue
                if len(rel) < 2 or rel[0] != "c" or rel[1] not in "./" or \
                        not _CHUNKLIKE.match(rel[2:]):
                    continue  # not a chunk key (ignored, like every Zarr reader ignores it)
                if rel[1] != sep:
                    self.report("outside the grid", key,
                                f"uses separator {rel[1]!r} but the array's chunk key "
                                f"separator is {sep!r}")
                    continue
                rel = rel[2:]
                if nd == 0:
                    self.report("outside the grid", key, "a 0-d array has a single chunk 'c'")
                    continue
            elif not _CHUNKLIKE.match(rel):
                continue
            if nd == 0:
                if rel == "0":
                    chunks.append((key, ()))
                else:
                    self.report("outside the grid", key,
                                "a 0-d array has a single chunk '0'")
                continue
            other = "/" if sep == "." else "."
            if other in rel:
                self.report("outside the grid", key,
                            f"uses separator {other!r} but the array's dimension separator "
                            f"is {sep!r}")
                continue
            coords = tuple(int(p) for p in rel.split(sep))
            if len(coords) != nd:
                self.report("outside the grid", key,
                            f"{_plural(len(coords), 'coordinate')} for an array of "
                            f"{_plural(nd, 'dimension')}")
            elif any(c >= g for c, g in zip(coords, grid)):
                self.report("outside the grid", key, f"the {what} grid of {arr.name!r} is "
                            f"{grid} (shape {arr.shape}, {what}s {shape_of})")
            else:
                chunks.append((key, coords))
        return chunks

    def _decode_all(self, codec, items):
        """Decode (key, bytes) items on the pool; report the ones that fail."""
        from chunkstore import config
        from chunkstore.errors import ChunkDecodeError

        def decode(item):
            key, data = item
            try:
                codec.decode(data, key=key, writable=False)
            except ChunkDecodeError as e:
                cause = e.__cause__
                text = _message(cause) if cause is not None else _message(e)
                kind = "wrong size" if _SIZE_PROBLEM.search(text) else "corrupt"
                return key, kind, text
            except Exception as e:  # noqa: BLE001 - anything else is corruption too
                return key, "corrupt", _message(e)
            return key, None, None

        pool = config.executor()
        parallel = pool is not None and not codec.dtype.hasobject and len(items) > 1
        results = pool.map(decode, items) if parallel else map(decode, items)
        for key, kind, text in results:
            self.chunks += 1
            if kind is not None:
                self.report(kind, key, text)

    def check_chunks(self, codec, keys):
        from chunkstore.storage.base import getitems
        for lo in range(0, len(keys), self.batch):
            part = keys[lo:lo + self.batch]
            try:
                data = getitems(self.store, part)
            except Exception:  # noqa: BLE001 - read one by one to name the bad key
                data = {}
                for k in part:
                    try:
                        data[k] = self.store[k]
                    except KeyError:
                        pass
                    except Exception as e:  # noqa: BLE001
                        self.report("unreadable", k, _message(e))
            self._decode_all(codec, [(k, data[k]) for k in part if k in data])
            self.progress.update(len(part))

    def check_shards(self, view, shards):
        """Each stored shard: its index, then every inner chunk inside the array, decoded
        with the inner codec. A bad index is reported by the shard key; a bad inner chunk
        by its inner key ``<shard key>|<i>.<j>`` (coordinates within the shard)."""
        import itertools

        from chunkstore.errors import ChunkDecodeError
        per, inner_grid = view.chunks_per_shard, view.inner_grid_shape
        for skey, scoords in shards:
            keys = []
            for within in itertools.product(*[range(n) for n in per]):
                g = tuple(s * n + w for s, n, w in zip(scoords, per, within))
                if all(x < n for x, n in zip(g, inner_grid)):
                    keys.append(view.inner_key(g))
            try:
                data = view.getitems(keys)
            except ChunkDecodeError as e:
                cause = e.__cause__
                self.report("corrupt shard", skey,
                            _message(cause) if cause is not None else _message(e))
                self.progress.update(1)
                continue
            except Exception as e:  # noqa: BLE001
                self.report("unreadable", skey, _message(e))
                self.progress.update(1)
                continue
            self._decode_all(view.codec, [(k, data[k]) for k in keys if k in data])
            self.progress.update(1)

    def run(self, arrays, keys):
        from chunkstore import nodes
        from chunkstore.array import Array
        from chunkstore.codecs.v2 import ChunkCodecV2
        from chunkstore.codecs.v3 import ChunkCodecV3
        plans = []
        array_set = set(arrays)
        for path in arrays:
            if path in self.bad_metadata:
                continue
            prefix = path + "/" if path else ""
            lo = bisect.bisect_left(keys, prefix)
            hi = bisect.bisect_left(keys, prefix + "\U0010ffff") if prefix else len(keys)
            fmt = _format(self.store, path) or 2
            try:
                arr = Array(self.store, path=path, read_only=True)
                if arr.shards is not None:
                    codec = arr._chunk_store  # the ShardedStoreView: inner keys and codec
                elif fmt == 3:
                    codec = ChunkCodecV3.from_metadata(arr.metadata)
                else:
                    codec = ChunkCodecV2.from_metadata(arr.metadata)
            except Exception as e:  # noqa: BLE001 - bad metadata: reported, not verified
                self.report("metadata", nodes.metadata_key(path, fmt, "array"), _message(e))
                continue
            own = [k for k in keys[lo:hi] if not _inside_other(k, prefix, array_set)]
            plans.append((arr, codec, self.classify(arr, own, path)))
            self.arrays += 1
        self.progress.total(sum(len(c) for _, _, c in plans))
        for arr, codec, chunks in plans:
            if arr.shards is not None:
                self.check_shards(codec, chunks)
            else:
                self.check_chunks(codec, [k for k, _ in chunks])


def _inside_other(key, prefix, arrays):
    # A key under a deeper array belongs to that array (only in unusual hierarchies).
    rest = key[len(prefix):]
    parts = rest.split("/")
    for i in range(1, len(parts)):
        if _join(prefix.rstrip("/"), "/".join(parts[:i])) in arrays:
            return True
    return False


class _VerifyProgress(Progress):
    def __init__(self, enabled):
        super().__init__(enabled, total=None, desc="verify", unit="chunk")

    def total(self, n):
        if self._bar is not None:
            self._bar.total = n
            self._bar.refresh()


def _check_consolidated(v, store, mkey, keys):
    """Report a .zmetadata whose documents differ from the ones in the store (stale)."""
    import json
    base = mkey[: -len(".zmetadata")].rstrip("/")
    prefix = base + "/" if base else ""
    try:
        meta = json.loads(store[mkey])["metadata"]
        if not isinstance(meta, dict):
            raise ValueError("'metadata' is not an object")
    except Exception as e:  # noqa: BLE001
        v.report("metadata", mkey, f"not a consolidated metadata document: {_message(e)}")
        return

    def canon(doc):
        return json.dumps(doc, sort_keys=True)
    actual = {k[len(prefix):]: k for k in keys if k.startswith(prefix)
              and k.rsplit("/", 1)[-1] in (".zarray", ".zgroup", ".zattrs")}
    diffs = []
    for rel in sorted(set(actual) | set(meta)):
        if rel not in meta:
            diffs.append(f"{rel!r} is missing")
        elif rel not in actual:
            diffs.append(f"{rel!r} is not in the store")
        else:
            try:
                same = canon(json.loads(store[actual[rel]])) == canon(meta[rel])
            except Exception:  # noqa: BLE001 - the invalid document is reported elsewhere
                same = True
            if not same:
                diffs.append(f"{rel!r} differs")
    if diffs:
        more = f" (and {len(diffs) - 3} more)" if len(diffs) > 3 else ""
        v.report("consolidated", mkey, f"{', '.join(diffs[:3])}{more}; run 'chunkstore "
                 f"consolidate' to rewrite it")


def _check_consolidated_v3(v, store, key, keys, members):
    """Report a v3 group's consolidated_metadata that differs from its members' zarr.json."""
    from chunkstore.metadata.v3 import parse_node_metadata_v3
    base = key[: -len("zarr.json")].rstrip("/")
    prefix = base + "/" if base else ""
    actual = {k[len(prefix): -len("/zarr.json")]: k for k in keys
              if k.startswith(prefix) and k != key and k.rsplit("/", 1)[-1] == "zarr.json"}

    def same(a, b):
        if isinstance(a, dict) != isinstance(b, dict):
            return False
        if isinstance(a, dict):
            return a.get("attributes") == b.get("attributes")
        return a == b  # ArrayMetadataV3: the encoded documents

    diffs = []
    for rel in sorted(set(actual) | set(members)):
        if rel not in members:
            diffs.append(f"{rel!r} is missing")
        elif rel not in actual:
            diffs.append(f"{rel!r} is not in the store")
        else:
            try:
                node = parse_node_metadata_v3(store[actual[rel]], actual[rel])
            except Exception:  # noqa: BLE001 - the invalid document is reported elsewhere
                continue
            if not same(node, members[rel]):
                diffs.append(f"{rel!r} differs")
    if diffs:
        more = f" (and {len(diffs) - 3} more)" if len(diffs) > 3 else ""
        v.report("consolidated v3", key, f"{', '.join(diffs[:3])}{more}; run 'chunkstore "
                 f"consolidate' to rewrite it")


def _stray_temporaries(store, path):
    """Temporary files that killed writers left in a directory or next to a zip store."""
    fn = getattr(store, "stray_temporaries", None)
    if fn is None:
        return []
    return fn(path)


def cmd_verify(args):
    from chunkstore.metadata.v2 import parse_attrs, parse_group_metadata
    from chunkstore.metadata.v3 import ArrayMetadataV3, parse_node_metadata_v3
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        kind = _kind(store, path)
        if kind is None:
            _open_node(store, args.store, path)
        keys = sorted(_keys_under(store, path))
        if kind == "array":
            arrays = {path}
        else:
            arrays = {k[: -len(".zarray")].rstrip("/") for k in keys
                      if k.rsplit("/", 1)[-1] == ".zarray"}
        with _VerifyProgress(_progress_enabled(args)) as bar:
            v = Verifier(store, bar)
            for k in keys:
                name = k.rsplit("/", 1)[-1]
                node_path = k[: -len(name)].rstrip("/")
                try:
                    if name == ".zgroup":
                        parse_group_metadata(store[k], k)
                    elif name == ".zattrs":
                        parse_attrs(store[k], k)
                    elif name == "zarr.json":
                        node = parse_node_metadata_v3(store[k], k)
                        if isinstance(node, ArrayMetadataV3):
                            if kind != "array":
                                arrays.add(node_path)
                        elif node.get("consolidated_metadata") is not None:
                            _check_consolidated_v3(v, store, k, keys,
                                                   node["consolidated_metadata"])
                except Exception as e:  # noqa: BLE001
                    v.report("metadata", k, _message(e))
                    if name == "zarr.json":
                        v.bad_metadata.add(node_path)
                if name == ".zmetadata":
                    _check_consolidated(v, store, k, keys)
            v.run(sorted(arrays), keys)
        strays = _stray_temporaries(store, path)
    found = {k: n for k, n in v.problems.items() if n}
    head = (f"verified {_plural(v.arrays, 'array')}, {_plural(v.chunks, 'chunk')} in "
            f"{_where(args.store, path)}")
    for p in strays:  # harmless to readers, so not a failure; but worth deleting
        print(f"stray temporary file of an interrupted write: {p}")
    if found:
        names = {"metadata": "invalid metadata", "consolidated": "stale .zmetadata",
                 "consolidated v3": "stale consolidated metadata",
                 "corrupt shard": "corrupt shard index"}
        print(f"{head}: FAILED, " + ", ".join(f"{n} {names.get(k, k)}"
                                              for k, n in found.items()))
        return 1
    print(f"{head}: OK")
    return 0


# ------------------------------------------------------------------------------ main
def _options(args, specific=None):
    """The fsspec storage options for one store of the command: --storage-option, then the
    store's own (--src-storage-option / --dst-storage-option) on top."""
    from chunkstore.cli_options import storage_options
    try:
        return storage_options(getattr(args, "storage_options", None),
                               getattr(args, specific, None) if specific else None)
    except argparse.ArgumentTypeError as e:
        raise UsageError(str(e)) from None


def _version():
    from chunkstore import __version__
    return f"{PROG} {__version__}"


def build_parser():
    from chunkstore.cli_options import STORAGE_OPTION_HELP, parse_storage_option
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

    def progress(sp):
        g = sp.add_mutually_exclusive_group()
        g.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="show a progress bar, in bytes with throughput (default: when "
                            "stderr is a terminal; needs tqdm, the [cli] extra)")
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
    progress(sp)

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
    sp.add_argument("--zarr-format", type=int, choices=(2, 3), default=None,
                    help="write the copy in this Zarr format (default: as the source)")
    sp.add_argument("--shards", type=parse_shards, default=None,
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


def main(argv=None):
    """Run the command line; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        status = args.func(args)
        sys.stdout.flush()
        return status or 0
    except UsageError as e:
        _err(e)
        return 2
    except CLIError as e:
        _err(e)
        return 1
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. piped into head): stop quietly.
        with contextlib.suppress(Exception):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as e:  # noqa: BLE001 - one line, never a traceback
        if os.environ.get("CHUNKSTORE_TRACEBACK"):
            raise
        from chunkstore.errors import ChunkstoreError
        known = (ChunkstoreError, OSError, ValueError, TypeError, KeyError, ImportError)
        text = _message(e)
        if not isinstance(e, known):
            text = f"{type(e).__name__}: {text}"
        _err(text)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
