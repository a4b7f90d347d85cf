"""`chunkstore cp`: copy an array or group from any store to any store, raw or recoded
(through chunkstore.recode, the planner `copy` uses too)."""

from __future__ import annotations

import contextlib
import os

import numpy as np

from chunkstore._text import human_bytes
from chunkstore.cli import common
from chunkstore.cli.common import (CLIError, Progress, UsageError, _a, _consolidate, _consolidated,
                                   _count_nodes, _format, _is_meta_key, _is_url, _join,
                                   _keys_under, _kind, _message, _norm, _note, _open_node,
                                   _options, _plural, _progress_enabled, _refresh_consolidated,
                                   _stores, _where)


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

    dry=True checks everything a copy would do without writing (see cli/safety.py): the
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
                        block_bytes=common.PROGRESS_BLOCK_BYTES if self.progress.shown else None)
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
    from chunkstore.cli.safety import quiet, remove_node_if_new, remove_store_if_new
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
        msg += f" ({_plural(copier.keys, 'key')}, {human_bytes(copier.bytes)})"
    elif copier.bytes:
        msg += f" ({human_bytes(copier.bytes)} stored)"
    if copier.skipped:
        msg += f"; skipped {copier.skipped} existing"
    print(f"{msg}: {_where(args.src, sp)} -> {_where(args.dst, dp)}")
    return 0


