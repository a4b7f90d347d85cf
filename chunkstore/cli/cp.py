"""`chunkstore cp`: copy an array or group from any store to any store, raw or recoded
(through chunkstore.hierarchy.recode, the planner `copy` uses too)."""

from __future__ import annotations

import contextlib
import os

import numpy as np

from chunkstore.engine._text import human_bytes
from chunkstore.cli import common
from chunkstore.hierarchy.nodes import overlapping
from chunkstore.storage.base import keys_under
from chunkstore.cli.common import (CLIError, Progress, UsageError, _a, _consolidate, _consolidated,
                                   _count_nodes, _format, _is_meta_key, _is_url, _join,
                                   _kind, _message, _norm, _note, _open_node,
                                   _options, _plural, _progress_enabled, _refresh_consolidated,
                                   _stores, _where)


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
        # the paths of the nodes this copy makes where nothing was (a failed copy removes
        # them, merged into an existing group too: safety.remove_node_if_new)
        self.made: list[str] = []

    def _target_format(self, sp, dp):
        """The format of the copy of sp at dp: --zarr-format, else the configured
        default_zarr_format if set, else that of the nearest group above dp in the
        destination (one hierarchy, one format: a v2 node under a v3 group is invisible
        from the root, as copy() converts too), else the source's."""
        from chunkstore.hierarchy.nodes import new_node_format
        return new_node_format(self.dst, dp, (self.recode or {}).get("zarr_format"),
                               _format(self.src, sp) or 2)

    def _changes(self, sp, dp):
        """Whether the copy of sp at dp is made anew (decoded and encoded), not raw."""
        if set(self.recode or {}) - {"zarr_format"}:
            return True
        return self._target_format(sp, dp) != _format(self.src, sp)

    def copy(self, sp, dp):
        """Copy the node at *sp* in the source to *dp* in the destination, as the options ask.

        Raw keys are copied unless the options change the data's encoding. An existing destination
        is replaced, skipped or merged (groups) per ``--if-exists``; with ``raise``, ``CLIError``.
        """
        from chunkstore.hierarchy.creation import remove_node
        from chunkstore.storage.base import listdir
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
                remove_node(self.dst, dp)  # (documents first: see cmd_rm)
        else:
            if src_kind == "array":
                self._leftovers(dp)
            if not self.dry and not listdir(self.dst, dp):
                # (removed again if the copy fails; not where keys lay below dp before,
                # members of an implicit group: removing dp took them too)
                self.made.append(dp)
        # groups created on the way get the format of what is copied there
        if not self.dry:
            self._require_parents(dp, self._target_format(sp, dp))
        if not self._changes(sp, dp):
            self._raw(sp, dp)
        elif src_kind == "array":
            self._recode_array(sp, dp)
        else:
            self._recode_group(sp, dp)

    def _leftovers(self, dp):
        """Keys of no node at dp, where an array is copied: refused, or with --if-exists
        replace removed (common.clear_leftovers)."""
        from chunkstore.cli.common import clear_leftovers
        clear_leftovers(self.dst, dp, f"cannot copy to {_where(self.dst_spec, dp)}",
                        "the copy's", self.if_exists, self.dry)

    def _stray_refusal(self, sp, dp):
        """CLIError for keys of no node where the raw copy of sp at dp puts an array, as a
        recoding copy words it (_leftovers: "use --if-exists replace"), not as copy_store
        does (its API's remedy); looked for again only once copy_store has refused."""
        from chunkstore.metadata.formats import kind_of_document
        pre = f"{sp}/" if sp else ""
        for key in sorted(keys_under(self.src, sp)):
            if _is_meta_key(key) and kind_of_document(self.src, key) == "array":
                self._leftovers(_join(dp, key[len(pre):].rpartition("/")[0]))

    def _members(self, path):
        from chunkstore.storage.base import listdir
        out = []
        for name in listdir(self.src, path):
            if _kind(self.src, _join(path, name)) is not None:
                out.append(name)
        return sorted(out)

    def _require_parents(self, dp, zarr_format):
        """Create the missing groups above dp, in zarr_format (none if an array is there)."""
        from chunkstore.hierarchy.creation import write_group_metadata
        parts = dp.split("/")[:-1] if dp else []
        parents = [""] + ["/".join(parts[:i + 1]) for i in range(len(parts))] if dp else []
        for p in parents:
            if _kind(self.dst, p) == "array":
                raise CLIError(f"cannot create {dp!r}: an array exists at {p!r} in "
                               f"{self.dst!r}")
        for p in parents:
            if _kind(self.dst, p) is None:
                write_group_metadata(self.dst, p, zarr_format)

    def _copy_attrs(self, sp, dp):
        """dp's attributes become sp's, in each node's own format."""
        from chunkstore.hierarchy.group import Group
        from chunkstore.hierarchy.recode import copy_attributes
        copy_attributes(Group(self.src, path=sp, read_only=True), Group(self.dst, path=dp))

    def _merge_group(self, sp, dp):
        if self.if_exists == "replace" and not self.dry:
            self._copy_attrs(sp, dp)
        for name in self._members(sp):
            self.copy(_join(sp, name), _join(dp, name))

    def _raw(self, sp, dp):
        from chunkstore.hierarchy.convenience import copy_store
        # Nothing is at dp (or it was removed: replace); what lies below it copy_store
        # settles node by node as --if-exists says (a node below a path with no group:
        # refused, skipped or replaced; keys of no node where an array goes: refused, or
        # removed by replace)
        mode = self.if_exists
        if self.dry:
            if self.count_keys:  # listing a big remote store costs: only for a bar
                self.raw_keys += len(keys_under(self.src, sp))
            if mode != "replace":  # (what the real copy would refuse, refused before it)
                from chunkstore.errors import StrayChunksError
                try:
                    copy_store(self.src, self.dst, source_path=sp, dest_path=dp,
                               if_exists=mode, dry_run=True)
                except StrayChunksError:
                    self._stray_refusal(sp, dp)  # (in this command's words)
                    raise
            return
        keys = keys_under(self.src, sp)
        arrays, groups = _count_nodes(self.src, [k for k in keys if _is_meta_key(k)])
        self.arrays += arrays
        self.groups += groups
        per_key = 1 if self.recode is None else 0  # a recoding copy's bar counts bytes
        n, _, nbytes = copy_store(self.src, self.dst, source_path=sp, dest_path=dp,
                                  if_exists=mode,
                                  log=lambda _msg: self.progress.update(per_key))
        self.keys += n
        self.bytes += nbytes

    def _recode_group(self, sp, dp):
        from chunkstore.hierarchy.group import open_group
        if not self.dry:
            open_group(self.dst, mode="a", path=dp, zarr_format=self._target_format(sp, dp))
            self._copy_attrs(sp, dp)
            self.groups += 1
        for name in self._members(sp):
            self.copy(_join(sp, name), _join(dp, name))

    def _recode_array(self, sp, dp):
        from chunkstore.engine.array import Array
        from chunkstore.hierarchy.convenience import copy_array_data, unstored_skip
        from chunkstore.hierarchy.creation import create
        from chunkstore.hierarchy.recode import (CastError, RecodeError, copy_plan,
                                                put_attributes, read_as)
        a = Array(self.src, path=sp, read_only=True)
        recode = self.recode or {}
        changes = {k: v for k, v in recode.items() if k not in ("zarr_format", "casting")}
        casting = recode.get("casting", "same_kind")
        if "dtype" in changes and not _castable(a.dtype, np.dtype(changes["dtype"]), casting):
            # f8 -> i1 gives zeros, f8 -> S3 b'0.5', f8 -> M8 the epoch: never silently
            dst_dtype = np.dtype(changes["dtype"])
            rule = (f"under the {casting!r} casting rule (NumPy's)"
                    if not np.can_cast(a.dtype, dst_dtype, casting=casting)
                    else f"under chunkstore's {casting!r} casting rule, stricter than NumPy's "
                         f"between strings, dates and numbers")
            raise CLIError(f"cannot cast array {a.name!r} of {self.src_spec} from {a.dtype} "
                           f"to {dst_dtype} {rule}; pass --casting unsafe to cast anyway")
        try:
            kw, attrs = copy_plan(a, self._target_format(sp, dp), note=_note, **changes)
        except RecodeError as e:  # (the planner names the array; the store is this command's)
            raise CLIError(f"{e.render(CLI_NAMES)} (in {self.src_spec})") from None
        if self.dry:  # the metadata alone, in a scratch store: checks every argument
            from chunkstore.errors import ContainsGroupError
            from chunkstore.hierarchy.creation import refuse_node_in_chunk_space
            from chunkstore.storage.memory import MemoryStore
            try:
                create(store=MemoryStore(), path=dp, **kw)
                if _kind(self.dst, dp) is None:
                    # (what the creation refuses in the destination: a node among the chunk
                    # keys, which no --if-exists removes where no node is at dp)
                    refuse_node_in_chunk_space(
                        keys_under(self.dst, dp), dp, f"cannot create array at path {dp!r}",
                        self.dst, "remove it, or choose another path")
            except (TypeError, ValueError, ContainsGroupError) as e:
                raise CLIError(f"cannot copy array {a.name!r} of {self.src_spec}: "
                               f"{_message(e)}") from None
            self.recode_bytes += a.size * np.dtype(kw["dtype"]).itemsize
            return
        dst = create(store=self.dst, path=dp, **kw)
        put_attributes(dst, attrs)
        itemsize = dst.dtype.itemsize
        # (blocks and chunks the source never stored left out, as copy() leaves them)
        try:
            # under a casting rule, values the cast changes (300 -> i1, 'abcdefgh' -> U4)
            # are refused: NumPy's same_kind would write 44 and 'abcd'
            copy_array_data(read_as(a, kw["dtype"], exact=casting != "unsafe"), dst,
                            skip=unstored_skip(a, dst),
                            progress=lambda n: self.progress.update(n * itemsize),
                            block_bytes=common.PROGRESS_BLOCK_BYTES if self.progress.shown
                            else None)
        except CastError as e:  # (the array as this command line names it)
            raise CLIError(f"{_message(e)} (in {self.src_spec})") from None
        self.arrays += 1
        self.bytes += dst.nbytes_stored


# The recode planner's messages with the options as this command line spells them.
CLI_NAMES = {"chunks": "--chunks", "shards": "--shards", "shards none": "--shards none",
             "checksum": "--checksum", "compressor": "--compressor",
             "zarr_format 2": "--zarr-format 2", "zarr_format 3": "--zarr-format 3"}


def _local_path(spec):
    """The local path of a store spec: a path, or a file:// URL (one location with the
    path: a copy from file:///x onto x replacing its destination deleted its own source);
    None for other URLs."""
    if spec.startswith("file://") and "::" not in spec:
        from urllib.parse import unquote
        return unquote(spec[len("file://"):])
    return None if _is_url(spec) else spec


def _same_location(a, b):
    la, lb = _local_path(a), _local_path(b)
    if la is None or lb is None:
        return a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(la) == os.path.realpath(lb)


def _nested_locations(a, b):
    """The one of two local stores that lies inside the other's directory (a store written
    inside another store's directory becomes part of it), or None."""
    la, lb = _local_path(a), _local_path(b)
    if la is None or lb is None:
        return None
    ra, rb = os.path.realpath(la), os.path.realpath(lb)
    if ra == rb:
        return None
    if rb.startswith(ra.rstrip(os.sep) + os.sep):
        return b
    if ra.startswith(rb.rstrip(os.sep) + os.sep):
        return a
    return None


def _check_hierarchy_format(dst, dst_spec, dp, zarr_format):
    """Refuse --zarr-format N for a copy below a group of the other format (as copy()
    refuses it): a v3 node under a v2 group, or the reverse, is invisible from the root to
    zarr-python, xarray and the group's consolidated metadata."""
    from chunkstore.hierarchy.nodes import group_above
    above = None if zarr_format is None else group_above(dst, dp)
    if above is not None and above[1] != zarr_format:
        raise CLIError(f"cannot copy to {_where(dst_spec, dp)} as Zarr v{zarr_format}: it "
                       f"would be a member of group {above[0] or '/'!r}, which is Zarr "
                       f"v{above[1]} (one hierarchy, one format: zarr-python would not find "
                       f"it from the root); drop --zarr-format, or copy elsewhere")


def _castable(src: np.dtype, dst: np.dtype, casting: str) -> bool:
    """NumPy's casting rule, stricter where NumPy calls a cast "same_kind" that changes what
    the values mean: numbers to or from strings or datetimes (f8 -> S3 gives b'0.2')."""
    if casting == "unsafe":
        return True
    if src.kind != dst.kind and (src.kind in "SUMm" or dst.kind in "SUMm"):
        return False
    # (casting is one of NumPy's names: argparse's choices)
    return bool(np.can_cast(src, dst, casting=casting))  # type: ignore[arg-type]


def cmd_cp(args):
    """``chunkstore cp``: copy an array or group from SRC to DST, optionally re-encoding it.

    Returns 0. Raises ``UsageError`` for options the target format cannot take and ``CLIError`` for
    a copy into itself or an existing destination (``--if-exists raise``).
    """
    sp, dp = _norm(args.src_path), _norm(args.dst_path)
    recode = {}
    if args.chunks is not None:
        recode["chunks"] = args.chunks
    if args.compressor is not None:
        recode["compressor"] = args.compressor[0]
    if args.dtype is not None:
        recode["dtype"] = args.dtype
        recode["casting"] = args.casting
    if args.zarr_format is not None:
        recode["zarr_format"] = args.zarr_format
    if args.shard_shape is not None:
        recode["shards"] = args.shard_shape
    if args.checksum:
        recode["checksum"] = True
    from chunkstore.hierarchy.recode import RecodeError, check_changes
    try:  # before any store is opened: options the target format has no place for
        check_changes(args.zarr_format,
                      **{k: v for k, v in recode.items() if k not in ("zarr_format", "casting")})
    except RecodeError as e:
        raise UsageError(e.render(CLI_NAMES)) from None
    nested = _nested_locations(args.src, args.dst)
    if nested is not None:
        raise CLIError(f"cannot copy {args.src} to {args.dst}: {nested} lies inside the "
                       f"other store (a copy would write into its own source, or read "
                       f"what it writes)")
    same = _same_location(args.src, args.dst)
    if same and overlapping(sp, dp):
        # (one holds the other: the copy would read what it writes, or, replacing its
        # destination, delete its own source first)
        raise CLIError(f"cannot copy {_where(args.src, sp)} to {_where(args.dst, dp)}: one "
                       f"holds the other")
    # --storage-option goes to whichever of SRC and DST are URLs; the specific ones must
    # name a URL store.
    src_opts = _options(args, "src_storage_options") \
        if _is_url(args.src) or args.src_storage_options else None
    dst_opts = _options(args, "dst_storage_options") \
        if _is_url(args.dst) or args.dst_storage_options else None
    specs = [(args.src, "r+", src_opts)] if same else \
        [(args.src, "r", src_opts), (args.dst, "a", dst_opts)]
    from chunkstore.cli.safety import quiet, remove_node_if_new, remove_store_if_new
    from chunkstore.hierarchy.staging import HeldDocuments
    with contextlib.nullcontext() if same else remove_store_if_new(args.dst), \
            _stores(*specs) as opened:
        src = opened[0]
        dst = opened[0] if same else opened[1]
        src_kind = _kind(src, sp)
        if src_kind is None:
            _open_node(src, args.src, sp)
        show = _progress_enabled(args)
        _check_hierarchy_format(dst, args.dst, dp, (recode or {}).get("zarr_format"))
        # Everything is checked before the first write: a bad option, or an existing
        # destination, fails here with the store untouched.
        plan = Copier(src, dst, args.src, args.dst, recode or None, args.if_exists,
                      Progress(False), dry=True)
        plan.count_keys = show
        with quiet():
            plan.copy(sp, dp)
        total = (plan.recode_bytes if recode else plan.raw_keys) if show else None
        made: list[str] = []
        # (what is at dp is replaced or merged into: the consolidated metadata listing it
        # set aside until the copy ends)
        aside = (common.consolidated_set_aside(dst, dp) if _kind(dst, dp) is not None
                 else contextlib.nullcontext())
        with aside, remove_node_if_new(dst, dp, made), \
                Progress(show, total=total, desc="cp", unit="B" if recode else "key") as bar:
            # The copy's node documents are held back and written once every chunk is
            # (hierarchy.staging): a copy killed before then leaves no node, never one whose
            # missing chunks read as the fill value.
            staged = HeldDocuments(dst, dp)
            copier = Copier(src, staged, args.src, args.dst, recode or None, args.if_exists,
                            bar)
            copier.made = made
            copier.copy(sp, dp)
            staged.publish()
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


