"""Convenience functions: save/load, copy between stores and hierarchies, tree."""

from __future__ import annotations

from ..storage import base as _store_base
import bisect
import builtins
import contextlib
import math
import os
import re
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from chunkstore.storage.store_path import split_store_path
from chunkstore.engine.array import Array
from chunkstore.metadata.formats import (document_rank, documents_first, with_separator,
                                         is_consolidated_document, kind_of_document,
                                         same_chunk_layout, stray_chunk_keys)
from chunkstore.hierarchy.creation import array as _array_fn
from chunkstore.hierarchy.creation import (create, format_alias, normalize_path, owned_store,
                                           refuse_node_in_chunk_space, removed_on_failure,
                                           require_parent_groups, save_array,
                                           stray_keys_error)
from chunkstore.errors import (CopyError, GroupNotFoundError, ZarrUserWarning, store_name,
                               with_context)
from chunkstore.format import layout_for, read_array_metadata
from chunkstore.hierarchy import nodes
from chunkstore.hierarchy.staging import HeldDocuments
from chunkstore.hierarchy.group import Group, group, open as _open
from chunkstore.hierarchy.recode import (check_changes, copy_attributes, copy_plan,
                                         put_attributes, read_as)
from chunkstore.storage import protocol
from chunkstore.storage.base import delitems, getitems, keys_under, setitems
from chunkstore.storage.normalize import normalize_store
from chunkstore.sync.synchronizers import replacing

# Bytes of decoded data one copy step holds at most (bounded memory for any array size).
def copy_block_bytes() -> int:
    """The decoded bytes of one block of an array-to-array copy: a batch's worth per pool
    thread, as assignment of one Array to another streams (chunkstore.engine.streaming), so
    peak memory stays bounded whatever the arrays' size."""
    from chunkstore import config
    from chunkstore.engine.streaming import BLOCK_BYTES_PER_THREAD
    return BLOCK_BYTES_PER_THREAD * max(1, config.get("threads") or 1)


@contextlib.contextmanager
def _naming_the_copy(source: Any, target: str) -> Iterator[None]:
    """create()'s refusal of a copy's metadata (a dtype the target format cannot hold) names
    the source array and the target too: a dry run's plan had no path of its own."""
    try:
        yield
    except ValueError as e:
        raise with_context(e, f"cannot copy array {source.name!r} to {target!r}: {e}") from e


def save_group(store, *args, path=None, storage_options=None, zarr_format=None,
               zarr_version=None, **kwargs):
    """Save arrays as a group: positional ones as arr_0, arr_1, ..., keywords by name
    (zarr_format / zarr_version: the format, not an array)."""
    fmt = format_alias(zarr_format, zarr_version)
    if not args and not kwargs:
        raise ValueError("save_group needs at least one array")
    arrays = [(f"arr_{i}", np.asanyarray(a)) for i, a in enumerate(args)]
    arrays += [(name, np.asanyarray(a)) for name, a in kwargs.items()]
    for name, a in arrays:
        # what the group's array() would refuse (a data type with no codec, a bad name, and
        # object data the codec cannot encode: an int among the strings of a str array),
        # refused before the store is overwritten: a save that fails keeps what was there
        if not a.dtype.hasobject:
            create(store={}, path=name, shape=a.shape, dtype=a.dtype, zarr_format=fmt)
            continue
        try:  # (object data encoded twice, as check_object_data does for save_array)
            _array_fn(a, store={}, path=name, zarr_format=fmt)
        except (TypeError, ValueError, OverflowError) as e:
            raise with_context(e, f"cannot save array {name!r} to {store_name(store)}: {e} "
                                  f"(nothing was changed: the store is kept)") from e
    with owned_store(store, mode="w", storage_options=storage_options) as s:
        g = group(s, overwrite=True, path=path, zarr_format=fmt)
        for name, a in arrays:
            g.array(name, a)


def save(store, *args, path=None, storage_options=None, zarr_format=None, zarr_version=None,
         **kwargs):
    """save(store, arr) saves one array; save(store, a, b, name=c, ...) saves a group."""
    fmt = format_alias(zarr_format, zarr_version)
    if len(args) == 1 and not kwargs:
        return save_array(store, args[0], path=path, storage_options=storage_options,
                          zarr_format=fmt)
    return save_group(store, *args, path=path, storage_options=storage_options,
                      zarr_format=fmt, **kwargs)


class LazyLoader(Mapping):
    """A group's arrays by name, each loaded into memory on first access."""

    def __init__(self, grp):
        self._group = grp
        self._cache = {}

    def __getitem__(self, name):
        if name not in self._cache:
            self._cache[name] = self._group[name][...]
        return self._cache[name]

    def __iter__(self):
        return iter(self._group.array_keys())

    def __len__(self):
        return len(self._group.array_keys())

    def __contains__(self, name):
        return name in self._group.array_keys()

    def __repr__(self):
        return f"<LazyLoader: {', '.join(self)}>"


def load(store, path=None, storage_options=None):
    """An array's data as NumPy, or for a group a lazy mapping of name to NumPy array."""
    store, path = split_store_path(store, path)
    s = normalize_store(store, mode="r", storage_options=storage_options)
    obj = _open(s, mode="r", path=path)
    if isinstance(obj, Array):
        data = obj[...]
        if s is not store and hasattr(s, "close"):
            s.close()
        return data
    return LazyLoader(obj)  # keeps the store open: arrays load on access


def consolidate_metadata(store, path="", metadata_key=".zmetadata", storage_options=None,
                         zarr_format=None, synchronizer=None):
    """Write every metadata document of the hierarchy at path into one key (.zmetadata).

    store may be a path string or URL, like everywhere else; returns the hierarchy opened
    through its consolidated metadata (a Group, as zarr-python 2 returns). zarr_format (as
    zarr-python 3 takes it): the group's format, checked (GroupNotFoundError if the group at
    path is of the other format). synchronizer (chunkstore's; a Group's own by default):
    the lock that other processes' attribute updates of the group take; a v3 group's
    consolidated metadata is written into its zarr.json beside its attributes, and without
    that lock an update made meanwhile in another process is lost."""
    store, path = split_store_path(store, path)
    from chunkstore.hierarchy.group import open_consolidated
    if isinstance(store, Group):
        if synchronizer is None:
            synchronizer = store.synchronizer
        store, path = store.store, store.path
    store = normalize_store(store, mode="a", storage_options=storage_options)
    path = normalize_path(path)
    if not protocol.holds_consolidated_metadata(store):  # (zarr-python 3's check)
        raise TypeError(f"Store {store_name(store)} doesn't support consolidated metadata: "
                        f"nothing was written")
    from chunkstore.hierarchy import nodes
    from chunkstore.metadata.formats import format_of
    kind, found = nodes.node_kind(store, path, zarr_format)
    if zarr_format is not None and kind != "group":
        raise GroupNotFoundError(f"no Zarr v{zarr_format} group at path {path!r} in "
                                 f"{store_name(store)} to consolidate")
    fmt = format_of(found or 2)
    # Under the locks an attribute update of the group takes in this process (its guard,
    # then its attributes' document): v3 writes the members into the group's zarr.json,
    # beside the attributes read at the start, and updates made meanwhile were lost; and
    # a delete of the group waits, or is found (a deleted group was written back).
    # With a synchronizer, its locks too (under the in-process ones, as an attribute
    # update with it takes them: Attributes._modify).
    from chunkstore.sync.locking import GUARD
    from chunkstore.sync.synchronizers import handle_locks, layered_locks
    key = nodes.attrs_key(path, found or 2)
    locks = handle_locks(store, path)
    with contextlib.ExitStack() as held:
        if synchronizer is not None and hasattr(synchronizer, "hold"):
            layered = layered_locks(store, path, synchronizer)
            held.enter_context(layered.guard_under_groups(path))
            held.enter_context(layered[key])
        else:
            held.enter_context(locks.hold(path, GUARD))
            held.enter_context(locks[key])
            if synchronizer is not None:  # (a zarr-style one: only sync[key])
                held.enter_context(synchronizer[key])
        fmt.consolidate(store, path, metadata_key)  # v3: inside the group's own zarr.json
    # (a v3 group has no document at this key: open_consolidated then reads its zarr.json)
    g = open_consolidated(store, metadata_key=nodes.prefix(path) + metadata_key, path=path)
    if (found or 2) == 3 and next(iter(g.keys()), None) is not None:
        # zarr-python 3's caveat, word for word, where it gives it (v3 members consolidated)
        warnings.warn("Consolidated metadata is currently not part in the Zarr format 3 "
                      "specification. It may not be supported by other zarr "
                      "implementations and may change in the future.", ZarrUserWarning,
                      stacklevel=2)
    return g


def tree(grp, expand=False, level=None, *, max_nodes=None, plain=False):
    """The hierarchy below grp as text (box-drawing characters), HTML in Jupyter (see
    Group.tree)."""
    return grp.tree(expand=expand, level=level, max_nodes=max_nodes, plain=plain)


# ------------------------------------------------------------------------------ copy_store
def _compile(patterns):
    if patterns is None:
        return []
    if isinstance(patterns, str):
        patterns = [patterns]
    return [re.compile(p) for p in patterns]


def copy_store(source, dest, source_path="", dest_path="", excludes=None, includes=None,
               if_exists="raise", log=None, dry_run=False, batch=256):
    """Copy raw keys from one store to another, as they are (fast: no decoding).

    excludes/includes are regular expressions matched against the key relative to
    source_path (an include overrides an exclude). Returns (n_copied, n_skipped, n_bytes);
    with dry_run, nothing is written and no chunk is read (the node documents are, to plan
    the copy), and n_bytes is 0 (as zarr-python 2's).

    Key by key as zarr-python 2's, but each array whole, so that a copied array reads what
    its source reads: where the destination holds a node at a copied array's path,
    if_exists "raise" raises CopyError (even where no key is shared: a node of the other
    format), "skip" skips all of the array's keys, "replace" removes every key below the
    path that the copy does not write; keys of no node there that the copy would read as
    its own (a failed delete's chunks) raise StrayChunksError ("raise", "skip") or are
    removed ("replace"). Everything is checked before the first write.
    """
    if if_exists not in ("raise", "replace", "skip"):
        raise ValueError(f"if_exists must be 'raise', 'replace' or 'skip', got {if_exists!r}")
    src, dst = normalize_store(source, mode="r"), normalize_store(dest, mode="a")
    # (paths as the stores' keys spell them: a normalize_keys store's "G" copied nothing)
    return _copy_keys(src, dst, protocol.node_path(src, normalize_path(source_path)),
                      protocol.node_path(dst, normalize_path(dest_path)), excludes,
                      includes, if_exists, log, dry_run, batch)


def _copy_keys(source, dest, sp, dp, excludes, includes, if_exists, log, dry_run, batch,
               keep=None):
    """copy_store's work (stores normalized); keep(key): whether to copy a source key.

    Key by key as zarr-python 2, but each array (node) whole: what the destination holds at
    a copied node's path besides the copy's keys is settled before anything is written
    (_settle_nodes), so a copied array reads exactly what its source reads."""
    ex, inc = _compile(excludes), _compile(includes)
    # The chunks first and the node documents last: a copy failing midway then leaves keys
    # no node owns, never a node whose uncopied chunks read as the fill value.
    # (consolidated metadata after every node document: it shows the nodes it lists)
    keys = sorted((k for k in source.keys() if (not sp or k == sp or k.startswith(sp + "/"))
                   and (keep is None or keep(k))),
                  key=lambda k: (is_consolidated_document(k), -document_rank(k), k))
    plan = []
    n_skipped = 0
    for k in keys:
        rel = k[len(sp) + 1:] if sp else k
        if any(p.search(rel) for p in ex) and not any(p.search(rel) for p in inc):
            n_skipped += 1
            continue
        plan.append((k, f"{dp}/{rel}" if dp else rel))
    # The destination's keys in one listing, not one existence check (a request on a
    # remote store) per key.
    present = _keys_at(dest, dp)
    existing = sorted(present)
    # the documents read once, before anything is written: the nodes are told by them, and
    # what is written is what was looked at
    docs = getitems(source, [k for k, _ in plan if document_rank(k) == 0])
    # (a Zarr v2 document naming no separator is read by its store's: named where the
    # destination's is another, so that the copy reads the chunks its source reads)
    sep = protocol.key_separator(source) or "."
    pin = sep != (protocol.key_separator(dest) or ".")
    skipped, remove, hide, replaced = _settle_nodes(source, dest, plan, docs, existing,
                                                    if_exists)
    if if_exists == "raise":
        for _, dk in plan:
            if dk in present:
                raise CopyError(f"key {dk!r} already exists in {dest!r}")
    kept = []
    for k, dk in plan:
        if _under_any(dk, skipped) or (if_exists == "skip" and dk in present):
            n_skipped += 1
        else:
            kept.append((k, dk))
    plan = kept
    if log is not None:
        for dk in remove:
            log(f"remove {dk}")
    n_bytes = 0
    with contextlib.ExitStack() as held:
        if not dry_run and (hide or remove):
            # This process's handles of the nodes replaced are told (as a delete or an
            # overwrite tells them): one opened before wrote the old layout's chunks into
            # the copy (read by the copy's dtype by every reader) and read the copy's chunks
            # by the old dtype. (Their lock spaces in one go: see replacing.)
            held.enter_context(replacing(dest, _topmost(replaced)))
            # the replaced node's documents first: one failing midway leaves keys of no
            # node (refused by a later copy or creation there), never a mixture that reads
            # as a node
            delitems(dest, documents_first(hide + remove))
        written: list[str] = []
        checked = False
        for lo in range(0, len(plan), batch):
            part = plan[lo:lo + batch]
            if log is not None:
                for k, dk in part:
                    log(f"copy {k} -> {dk}")
            if dry_run:  # (no chunk read: zarr-python 2's dry run counts no bytes either)
                continue
            data = {**docs, **getitems(source, [k for k, _ in part if k not in docs])}
            if docs and not checked and any(k in docs for k, _ in part):
                # (once every chunk is read, before the first document is written)
                _check_documents_unchanged(source, dest, docs, written)
                checked = True
            out = {dk: with_separator(k, data[k], sep) if pin else data[k]
                   for k, dk in part if k in data}
            n_bytes += sum(len(v) for v in out.values())
            setitems(dest, out)
            written += [dk for k, dk in part if k in data and k not in docs]
    return len(plan), n_skipped, n_bytes


def _check_documents_unchanged(source, dest, docs: dict, written: list[str]) -> None:
    """Before a raw copy writes the node documents it read first: the source's, read again,
    must describe its chunks the same way (an append, or new attributes, meanwhile are
    fine: the copy is the array as it was read). An array re-created meanwhile (another
    dtype, say) had its new chunks copied under its old document: the copy read values
    neither version held. The chunks written are removed again (keys of no node
    otherwise), and CopyError says so."""
    now = getitems(source, list(docs))
    changed = sorted(k for k in docs if not same_chunk_layout(now.get(k), docs[k]))
    if changed:
        with contextlib.suppress(Exception):
            delitems(dest, written)
        raise CopyError(f"the source changed while it was copied (its document {changed[0]!r}"
                        f" in {store_name(source)} was rewritten, by another writer): the "
                        f"copy's chunks would not be those of its documents; nothing of it "
                        f"is kept, copy again")


def _topmost(paths):
    """The paths of paths (sorted) that lie below none of the others."""
    top: list = []
    for path in sorted(paths):
        if not _under_any(path, top):
            top.append(path)
    return top


def _settle_nodes(source, dest, plan, docs, existing, if_exists):
    """What copy_store does with the destination's keys at each node it copies (plan: its
    (source key, destination key) pairs; docs: the source's node documents among them;
    existing: the destination's keys below dest_path, sorted): (the paths of the nodes
    skipped whole, nothing at or below them written; the destination keys to remove; the
    documents to remove before writing, hiding a node being replaced; the paths where
    something is removed or hidden).

    A node of the destination at a copied array's path (any format or kind) refuses the copy
    (CopyError, "raise"), keeps it out whole ("skip": none of the array's keys is written,
    not its chunks beside the old document) or goes whole ("replace": every key below the
    path that the copy does not write, as copy() replaces). Keys named as chunks with no
    node there (a failed delete's) would read as the copy's chunks: StrayChunksError
    ("raise", "skip"), removed ("replace"). A group copied where a node of another kind
    or format is: CopyError, its subtree skipped, or that node's documents and chunks
    removed (a group merges into a group of its format, as zarr-python 2's)."""
    written = {dk for _, dk in plan}
    nodes_at = []
    source_of = {}
    for k, dk in plan:
        if k in docs:
            kind = kind_of_document(source, k, docs[k])
            if kind is not None:
                at = dk.rsplit("/", 1)[0] if "/" in dk else ""
                nodes_at.append((at, kind))
                source_of[at] = "/" + (k.rsplit("/", 1)[0] if "/" in k else "")
    skipped: set = set()
    remove: list = []
    hide: list = []
    replaced: set = set()
    for path, kind in sorted(set(nodes_at)):  # (parents before their members)
        if _under_any(path, skipped):
            continue
        below = _keys_below(existing, path)
        pre = nodes.prefix(path)
        here = [k for k in below if "/" not in k[len(pre):]]  # keys directly at path
        docs_here = [k for k in here if document_rank(k) == 0]
        if kind == "array":
            if docs_here:  # a node is there
                if if_exists == "raise":
                    raise CopyError(f"a node already exists at {path!r} in {dest!r}")
                if if_exists == "skip":
                    skipped.add(path)
                    continue
                hide += [k for k in docs_here if k in written]
                remove += [k for k in below if k not in written]
                replaced.add(path)
                continue
            refuse_node_in_chunk_space(below, path,
                                       f"cannot copy {source_of[path]!r} to {'/' + path!r}",
                                       dest, _CHUNK_SPACE_REMEDY)
            stray = _leftovers_among(below, path)
            if stray and if_exists != "replace":
                raise stray_keys_error(
                    f"cannot copy an array to path {path!r} in {store_name(dest)}", stray,
                    f"would read as the copy's chunks: copy with if_exists='replace', or "
                    f"remove them (the store's rmdir({path!r}))")
            remove += [k for k in stray if k not in written]
            if stray:
                replaced.add(path)
            continue
        # a group: one of its format merges into it; where an array is, or a node of the
        # other format (a v3 zarr.json, array's or group's, is read to tell)
        if docs_here and if_exists == "raise":  # (before any member's: parents first)
            raise CopyError(f"a node already exists at {path!r} in {dest!r}")
        other = [k for k in docs_here if k not in written or
                 kind_of_document(dest, k) != "group"]
        if other:
            if if_exists == "skip":
                skipped.add(path)
                continue
            hide += [k for k in other if k in written]
            remove += [k for k in here if document_rank(k) < 2 and k not in written]
            remove += [k for k in stray_chunk_keys(below, path) if k not in written]
            replaced.add(path)
    return skipped, remove, hide, replaced


# (a copy refused where a node lies among its chunk keys: that node is not at the copy's
# path, so no if_exists replaces it)
_CHUNK_SPACE_REMEDY = "choose another path, or remove that node"


def _keys_below(keys, path):
    """The keys at or below path among keys (sorted): one range of them."""
    if not path:
        return list(keys)
    lo = bisect.bisect_left(keys, path)
    hi = bisect.bisect_left(keys, path + "0")  # ("/" sorts right before "0")
    return [k for k in keys[lo:hi] if k == path or k.startswith(path + "/")]


def _under_any(key, paths):
    """Whether key lies at or below one of paths (a set; "" is the root)."""
    if not paths:
        return False
    parts = key.split("/")
    return "" in paths or any("/".join(parts[:i]) in paths for i in range(1, len(parts) + 1))


def leftover_keys(store, path):
    """The keys at path in store that an array copied there would take for its own while no
    node is there (see _leftovers_among). One listing."""
    return _leftovers_among(keys_under(store, path), path)


def _leftovers_among(keys, path):
    """Among keys (all at or below path), those an array made at path would take for its
    own while no node is there: chunk keys of no node (stray_chunk_keys: a failed delete
    leaves them) and attribute documents of none."""
    pre = nodes.prefix(path)
    return stray_chunk_keys(keys, path) + [
        k for k in keys if k.startswith(pre) and "/" not in k[len(pre):]
        and document_rank(k) == 1]


def _keys_at(store, path):
    """The set of keys at or under path in store."""
    return set(_store_base.keys_under(store, path))


# ------------------------------------------------------------------------------ copy
def copy_array_data(src, dst, progress=None, block_bytes=None, skip=None):
    """Copy all data of src into dst (same shape), in chunk-aligned blocks of bounded size.

    Blocks follow dst's chunk grid, so every write covers whole destination chunks (no
    read-modify-write); each block holds at most about block_bytes (default
    copy_block_bytes()) of decoded data, and at least one chunk (shard). progress(n) is called with
    the number of elements after each block. skip(region): whether a block (a tuple of
    slices) needs no write (see unstored_skip).
    """
    limit = copy_block_bytes() if block_bytes is None else max(1, int(block_bytes))
    if src.shape != dst.shape:
        raise CopyError(f"cannot copy data of shape {src.shape} into shape {dst.shape}")
    if src.size == 0:
        return 0
    # blocks of whole stored objects: a sharded destination's shards, not its inner chunks
    # (a block covering part of a shard would rewrite that shard once per block)
    # (an h5py destination may be contiguous, chunks None: the source's chunks then)
    shape = dst.shape
    chunks = getattr(dst, "write_chunks", None) or getattr(dst, "chunks", None) or \
        getattr(src, "chunks", None) or shape
    itemsize = max(src.dtype.itemsize, dst.dtype.itemsize)
    # Grow the block from one chunk, dimension by dimension from the last, while it fits.
    block = list(chunks)
    for d in range(len(shape) - 1, -1, -1):
        per = math.prod(block) * itemsize // block[d]
        fit = max(chunks[d], (limit // max(per, 1)) // chunks[d] * chunks[d])
        block[d] = min(shape[d], fit) if fit >= shape[d] else fit
        if block[d] < shape[d]:
            break
    grid = [range(0, s, b) for s, b in zip(shape, block)]
    n = 0
    for origin in _product(grid):
        region = tuple(slice(o, min(o + b, s)) for o, b, s in zip(origin, block, shape))
        if skip is not None and skip(region):
            continue
        parts = _needed_parts(region, chunks, skip) if getattr(skip, "split", False) \
            else [region]
        for part in parts:
            dst[part] = src[part]
        n += 1
        if progress is not None:
            progress(math.prod(r.stop - r.start for r in region))
    return n


def _needed_parts(region, chunks, skip):
    """region whole where every destination chunk (or shard) of it needs a write, else the
    ones that do: a block holding one stored chunk of a sparse source wrote its unstored
    neighbours too, stored by a destination that keeps every chunk (fill value None), which
    the source never stored (a sparse array no longer sparse)."""
    grid = [range(r.start, r.stop, c) for r, c in zip(region, chunks)]
    parts = [tuple(slice(o, min(o + c, r.stop)) for o, c, r in zip(origin, chunks, region))
             for origin in _product(grid)]
    needed = [p for p in parts if not skip(p)]
    return [region] if len(needed) == len(parts) else needed


def unstored_skip(source, copy):
    """For copy_array_data from the Array source into its new copy (an Array): a skip()
    telling the regions (blocks, or the copy's chunks in them: both on the copy's grid of
    stored objects) that hold no stored chunk of the source, when both arrays read the same
    fill value where nothing is stored (there the copy reads what the source reads without
    a write; a write would store the fill value, or, with an object fill of None, the empty
    string). None where the fill values differ. The copy's stored objects that the source's
    stored chunks touch are worked out once: a look per object (a test of every stored
    chunk against each object made a sparse copy quadratic: 40,000 chunks, 19 s)."""
    if not isinstance(copy, Array) or not _same_fill(source.fill_value, copy.fill_value):
        return None
    stored = list(source._stored_chunk_coords())
    if len(stored) == source.nchunks:
        return None  # (all stored: nothing to skip)
    shape = source.shape
    src_chunks = source.chunks
    grid = tuple(getattr(copy, "write_chunks", None) or copy.chunks)
    touched: set = set()
    for coords in stored:
        spans = []
        for c, n, g, s in zip(coords, src_chunks, grid, shape):
            lo, hi = int(c) * n, min((int(c) + 1) * n, s)
            spans.append(range(lo // g, (max(hi, lo + 1) - 1) // g + 1))
        touched.update(_product(spans))

    def skip(region):
        spans = [range(r.start // g, (r.stop - 1) // g + 1) for r, g in zip(region, grid)]
        if math.prod(len(x) for x in spans) <= len(touched):
            return not any(t in touched for t in _product(spans))
        return not any(all(x.start <= c < x.stop for c, x in zip(t, spans)) for t in touched)

    # (a copy that stores every chunk it writes, fill value None or write_empty_chunks, is
    # written chunk by chunk in a block that holds some stored ones; one that leaves chunks
    # of the fill value out, block by block: its unstored ones are not stored either way)
    skip.split = bool(copy.fill_value is None or copy.write_empty_chunks)
    return skip


def _same_fill(a, b):
    """Whether two fill values read the same (None only as None; NaN as NaN)."""
    if a is None or b is None:
        return a is None and b is None
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    except TypeError:  # (no NaN in the type: strings, bytes, objects)
        return bool(np.all(np.asarray(a) == np.asarray(b)))


def _check_apart(dest, members):
    """CopyError where a member copied into dest and its copy would overlap in one store
    (one holds the other): a copy into its own subtree reads what it writes, forever; one
    onto an ancestor, replacing it, deletes its own source first."""
    for name, node in members:
        if not isinstance(node, (Array, Group)):
            continue
        src = normalize_path(node.path)
        dst = normalize_path(f"{dest.path}/{name}" if dest.path else name)
        # (where each is: a store of a directory above the other's reaches the same nodes)
        (src_place, src_at) = protocol.node_location(node.store, src)
        (dst_place, dst_at) = protocol.node_location(dest.store, dst)
        if src_place == dst_place and nodes.overlapping(src_at, dst_at):
            raise CopyError(f"cannot copy {'/' + src!r} to {'/' + dst!r} in "
                            f"{store_name(dest.store)}: one holds the other")


def _product(ranges):
    if not ranges:
        yield ()
        return
    import itertools
    yield from itertools.product(*ranges)


_IF_EXISTS = ("raise", "replace", "skip", "skip_initialized")


def _check_if_exists(if_exists):
    if if_exists not in _IF_EXISTS:
        raise ValueError(f"if_exists must be one of {', '.join(map(repr, _IF_EXISTS))}, got "
                         f"{if_exists!r}")


def copy(source, dest, name=None, shallow=False, without_attrs=False, log=None,
         if_exists="raise", dry_run=False, return_stats=True, **create_kws):
    """Copy an Array or Group (source) into a Group (dest) as `name`.

    Groups are merged into an existing group of the same name; if_exists ("raise",
    "replace", "skip", or "skip_initialized": skip an existing array only when all its chunks
    are stored) decides what happens to an existing array (or a non-group in a group's way). create_kws (chunks, compressor, dtype, ...) change the copies' layout;
    without them arrays are copied chunk for chunk, raw. dry_run walks exactly as a real copy
    would, logging and counting, but writes nothing. log is a callable, a file path or a
    file-like object. Returns (n_copied, n_skipped, n_bytes_copied) as zarr-python 2 counts
    them: every group and array walked counts as copied or skipped (a group merged into an
    existing one too, dry runs too), and n_bytes_copied is the uncompressed size of the
    arrays written (0 in a dry run). return_stats is accepted for zarr-python 2 code; the
    counts are always returned.
    """
    _check_if_exists(if_exists)
    foreign = not isinstance(dest, Group) and _is_group(dest) and hasattr(dest, "create_dataset")
    if not isinstance(dest, Group) and not foreign:
        raise CopyError(f"dest must be a group (chunkstore's or h5py's), got "
                        f"{type(dest).__name__}")
    if name is None:
        name = source.basename if isinstance(source, (Array, Group)) else None
        if name is None and isinstance(getattr(source, "name", None), str):
            name = source.name.rstrip("/").rsplit("/", 1)[-1]  # an h5py object: "/a/b"
        if not name:
            raise CopyError("name is required when the source is at the root of its store")
    with _logger(log) as emit:
        if foreign:
            if not dry_run:  # (planned first: see _copy_to_h5py)
                _copy_to_h5py(None, source, dest, name, not shallow, without_attrs,
                              if_exists, True, create_kws)
            return _copy_to_h5py(emit, source, dest, name, not shallow, without_attrs,
                                 if_exists, dry_run, create_kws)
        _plan_copies(dest, [(name, source)], not shallow, if_exists, create_kws,
                     without_attrs)
        return _copy(emit, source, dest, dest.path, name, not shallow, without_attrs,
                     if_exists, dry_run, create_kws, dest.zarr_format)


def _plan_copies(dest, members, recurse, if_exists, create_kws, without_attrs=True):
    """Plan the copy of every array that copying members ((name, node) pairs) into dest
    would write, and raise what planning raises (RecodeError: what cannot be made as
    asked; a foreign node's attribute JSON cannot hold, unless without_attrs) before
    anything is written or removed: a copy refused leaves the destination as it was (the
    walk is a dry run's: arrays that would be skipped are not planned)."""
    fmt = create_kws.pop("zarr_format", dest.zarr_format)
    if fmt != dest.zarr_format:  # (the copies are members of dest: of its format)
        raise ValueError(f"copies into group {dest.path or '/'!r} (Zarr v{dest.zarr_format}) "
                         f"are Zarr v{dest.zarr_format}, not zarr_format={fmt!r}")
    check_changes(dest.zarr_format, **create_kws)
    _check_apart(dest, members)
    for name, node in members:
        _copy(None, node, dest, dest.path, name, recurse, without_attrs, if_exists, True,
              create_kws, dest.zarr_format, plan=True)


def _copy_to_h5py(log, source, dest, name, recurse, without_attrs, if_exists, dry_run,
                  create_kws):
    """copy()'s walk into an h5py group (dest; None in a dry run below a group not made):
    groups as groups, arrays as datasets with their shape, dtype, chunks and fill value
    (create_kws are h5py's create_dataset keywords), data in bounded blocks of whole
    chunks (copy_array_data). copy() walks it as a dry run first, which refuses what the
    copy would refuse (a taken name, an attribute HDF5 cannot store) before anything is
    written; a dataset whose copy fails midway is deleted again."""
    target = f"{dest.name.rstrip('/')}/{name}" if dest is not None else name
    existing = dest[name] if dest is not None and name in dest else None
    replacing = existing is not None and not (_is_group(source) and _is_group(existing))
    if replacing:
        if if_exists == "skip_initialized":
            # h5py datasets have no "initialized" chunk count to decide it by: refused (as
            # zarr-python 2 refuses it) rather than replacing the data there
            raise ValueError(f"if_exists='skip_initialized' needs a destination that counts "
                             f"its stored chunks; the h5py dataset at {target!r} does not "
                             f"(use 'skip' or 'replace')")
        if _skips(log, source, name, target, if_exists):
            return 0, 1, 0
    # (tried in a scratch HDF5 file by the plan, a dry run, which every copy walks first)
    attrs = _h5py_attributes(source, target, without_attrs) if dry_run else (
        {} if without_attrs else _attributes_of(source))
    if replacing and not dry_run:
        del dest[name]
    if log:
        log(f"copy {getattr(source, 'name', name)} -> {target}")
    if _is_group(source):
        g = dest.require_group(name) if not dry_run else (
            existing if _is_group(existing) else None)
        if not dry_run:
            g.attrs.update(attrs)
        counts = [1, 0, 0]
        for child_name, child in source.items():
            if _is_group(child) and not recurse:
                continue
            for i, n in enumerate(_copy_to_h5py(log, child, g, child_name, recurse,
                                                without_attrs, if_exists, dry_run,
                                                create_kws)):
                counts[i] += n
        return counts[0], counts[1], counts[2]
    if dry_run:
        return 1, 0, 0
    kw = {"shape": source.shape, "dtype": source.dtype}
    chunks = getattr(source, "chunks", None)
    if chunks and all(chunks) and len(source.shape) and all(source.shape):
        # (an empty dimension: no chunks given, h5py refuses any larger than the data)
        kw["chunks"] = tuple(min(c, s) for c, s in zip(chunks, source.shape))
    fill = getattr(source, "fill_value", None)
    if fill is None:
        fill = getattr(source, "fillvalue", None)  # (an h5py dataset's name)
    if fill is not None and not source.dtype.hasobject:
        kw["fillvalue"] = fill
    for h5 in ("compression", "compression_opts", "shuffle", "fletcher32", "scaleoffset"):
        value = getattr(source, h5, None)  # h5py to h5py: its filters, as zarr-python 2 keeps
        if value not in (None, False):
            kw[h5] = value
    if source.dtype.hasobject:
        import h5py  # (dest is h5py's)
        kw["dtype"] = h5py.string_dtype()
    kw.update(create_kws)
    ds = dest.create_dataset(name, **kw)
    try:
        ds.attrs.update(attrs)
        copy_array_data(source, ds)
    except BaseException:
        # (no dataset reading h5py's fill value where the source's data was not copied)
        with contextlib.suppress(Exception):
            del dest[name]
        raise
    return 1, 0, source.nbytes


def _h5py_attributes(source, target, without_attrs):
    """source's attributes for its copy at target in an h5py file, each tried in a scratch
    HDF5 file in memory first: one HDF5 cannot store (a dict, None, a list of numbers and
    strings) is a TypeError naming it, source and target, before anything is written."""
    attrs = {} if without_attrs else _attributes_of(source)
    if not attrs:
        return attrs
    import io
    import h5py  # (the destination is h5py's)
    with h5py.File(io.BytesIO(), "w") as scratch:
        for k, v in attrs.items():
            try:
                scratch.attrs[k] = v
            except Exception as e:  # noqa: BLE001 - h5py raises several types for these
                raise TypeError(f"cannot copy attribute {k!r} of "
                                f"{'group' if _is_group(source) else 'array'} "
                                f"{getattr(source, 'name', None) or target!r} to {target!r} "
                                f"in an HDF5 file: HDF5 has no type for its value (a "
                                f"{type(v).__name__}: {e}); copy with without_attrs=True to "
                                f"leave the attributes out") from None
    return attrs


def _skips(log, source, name, target, if_exists):
    """What if_exists says of a copy whose destination is taken: CopyError ("raise"), True
    to skip it (logged), False to replace it."""
    if if_exists == "raise":
        raise CopyError(f"an object named {name!r} already exists at {target!r}")
    if if_exists == "skip":
        if log:
            log(f"skip {getattr(source, 'name', name)} -> {target}")
        return True
    return False


def _attributes_of(node):
    """A node's attributes as a plain dict (chunkstore's, or a foreign node's: an h5py
    node's as h5_attributes gives them, refusing what JSON cannot hold)."""
    attrs = node.attrs
    if hasattr(attrs, "asdict"):
        return attrs.asdict()
    if _is_h5py(node):
        return h5_attributes(node, _h5_refuser(node))
    return {str(k): _plain(v) for k, v in attrs.items()}


@contextlib.contextmanager
def _logger(log):
    """A callable for log: a callable as is, a path opened for append, or a file-like."""
    if log is None or callable(log):
        yield log
    elif isinstance(log, (str, os.PathLike)):
        with builtins.open(log, "a", encoding="utf-8") as f:
            yield lambda msg: print(msg, file=f)
    elif hasattr(log, "write"):
        yield lambda msg: print(msg, file=log)
    else:
        raise TypeError(f"log must be a callable, a file path or a file-like object, got "
                        f"{type(log).__name__}")


def _name(path, name):
    return "/" + (f"{path}/{name}" if path else name)


def _copy(log, source, dest, dest_path, name, recurse, without_attrs, if_exists, dry_run,
          create_kws, fmt, plan=False, store=None, cleared=False):
    """Copy source to dest_path/name. dest is the Group there, or None in a dry run where
    the destination group does not exist yet (so no node below it exists either); fmt: its
    Zarr format (a new group takes its parent's). plan (with dry_run): plan each array's
    copy (see _plan_copies). store: the destination store (dest's; given below a group a
    dry run has not made). cleared: a dry run below a node the real copy removes first
    (what lies there now is gone by then)."""
    store = dest.store if store is None else store
    existing = dest[name] if dest is not None and name in dest else None
    child_path = f"{dest_path}/{name}" if dest_path else name
    if dest is None and not cleared and nodes.node_kind(store, child_path, warn=False)[0]:
        # a dry run below a group not made yet: a node may be there all the same (below a
        # path with no group document), and the real copy will find it
        existing = _open(store, mode="r", path=child_path)
    target = _name(dest_path, name)
    source_is_group = _is_group(source)
    if source_is_group and isinstance(existing, Group):
        existing_blocks = False        # groups merge
    else:
        existing_blocks = existing is not None
    if existing_blocks and if_exists == "skip_initialized" and not isinstance(existing,
                                                                             Array):
        # it decides by an existing array's stored chunks: an array copied over a group
        # (which it replaced, its arrays' data and all) is refused, in the plan before
        # anything is written (zarr-python 2 fails there too)
        raise CopyError(f"if_exists='skip_initialized' skips or replaces an existing array; "
                        f"{target!r} holds a group, and the source is an array (use 'skip' "
                        f"to leave the group, or 'replace' to replace it)")
    if (existing_blocks and if_exists == "skip_initialized"
            and existing.nchunks_initialized == existing.nchunks):
        if_exists = "skip"             # complete: skip it; anything else is replaced
    if existing_blocks and _skips(log, source, name, target, if_exists):
        return 0, 1, 0
    if log:
        log(f"copy {source.name if hasattr(source, 'name') else name} -> {target}")
    if source_is_group:
        g = None
        if not dry_run:
            if existing_blocks:
                del dest[name]
            g = dest.require_group(name)
            if without_attrs:
                pass
            elif isinstance(existing, Group) or not isinstance(source, Group):
                _update_attributes(g, source)  # merged into, or a foreign group's attributes
            else:
                copy_attributes(source, g)
        else:
            if not without_attrs and not isinstance(source, Group):
                _attributes_of(source)  # (what a foreign group's refuse, refused in the plan)
            if isinstance(existing, Group):
                g = existing
        child_fmt = g.zarr_format if g is not None else fmt
        # A group counts as copied, created or merged into (as zarr-python 2 counts).
        n_copied, n_skipped, n_bytes = 1, 0, 0
        for child_name, child in source.items():
            if _is_group(child) and not recurse:
                continue
            c, sk, b = _copy(log, child, g, child_path, child_name, recurse, without_attrs,
                             if_exists, dry_run, create_kws, child_fmt, plan, store,
                             cleared or (dry_run and existing_blocks))
            n_copied += c
            n_skipped += sk
            n_bytes += b
        return n_copied, n_skipped, n_bytes
    raw = isinstance(source, Array) and _raw_copy(source, dest, fmt, create_kws)
    if not existing_blocks and not cleared:
        # keys of no node where the copy goes would read as its chunks: refused (in the
        # plan, before anything is written) unless replacing, which clears them
        keys = keys_under(store, child_path)
        if not source_is_group:
            refuse_node_in_chunk_space(
                keys, child_path, f"cannot copy {getattr(source, 'name', None) or name!r} to "
                f"{target!r}", store, _CHUNK_SPACE_REMEDY)
        stray = _leftovers_among(keys, child_path)
        if stray and if_exists != "replace":
            raise stray_keys_error(
                f"cannot copy {getattr(source, 'name', None) or name!r} to {target!r} in "
                f"{store_name(store)}", stray,
                f"would read as the copy's chunks: copy with if_exists='replace', or "
                f"remove them (the store's rmdir({child_path!r}))")
        if stray and not dry_run:
            delitems(store, stray)
    if dry_run:
        if plan and isinstance(source, Array) and not raw:
            # (members take the destination's format) the copy's metadata made where it
            # costs nothing: what create() would refuse is refused before anything is written
            kw, _ = copy_plan(source, fmt, **create_kws)
            with _naming_the_copy(source, target):
                create(store={}, path=child_path, **kw)
        elif plan and not isinstance(source, Array):
            # a foreign array's attributes (refused before anything is written), and the
            # metadata of a sliceable one's copy made where it costs nothing
            kw, _ = _foreign_layout(source, fmt, without_attrs)
            if _is_sliceable(source):
                with _naming_the_copy(source, target):
                    create(store={}, path=child_path, **_sliced_kw(source, kw, create_kws))
        return 1, 0, 0
    if existing_blocks:
        del dest[name]
    if isinstance(source, Array):
        with removed_on_failure(dest.store, child_path,
                                getattr(dest, "_synchronizer", None)) as made:
            if raw:
                made.append(child_path)  # (nothing is there: an existing node was deleted)
                _copy_array_raw(source, dest, name, without_attrs)
                return 1, 0, source.nbytes
            kw, attrs = copy_plan(source, dest.zarr_format, **create_kws)
            # its documents written once its chunks are (staging): a copy killed before then
            # leaves no array, never one whose uncopied chunks read as the fill value
            staged = HeldDocuments(dest.store, child_path)
            with _naming_the_copy(source, target):
                dst = create(store=staged, path=child_path, **kw)
            made.append(dst)
            if not without_attrs:
                put_attributes(dst, attrs)
            copy_array_data(read_as(source, kw["dtype"]), dst,
                            skip=unstored_skip(source, dst))
            staged.publish()
        return 1, 0, dst.nbytes  # (the copy's: its dtype may be another)
    # A foreign array: its attributes (and an h5py dataset's dimension names) first, so one
    # refused leaves nothing; its documents written once its data is (staging), and the
    # array removed again if the copy fails midway, as an Array's.
    layout, attrs = _foreign_layout(source, fmt, without_attrs)
    if _is_sliceable(source):
        # An h5py dataset or another sliceable array: its shape, dtype and chunks, its data
        # in blocks of bounded size (not loaded whole), its attributes.
        kw = _sliced_kw(source, layout, create_kws)
        with removed_on_failure(dest.store, child_path,
                                getattr(dest, "_synchronizer", None)) as made:
            staged = HeldDocuments(dest.store, child_path)
            with _naming_the_copy(source, target):
                dst = create(store=staged, path=child_path, **kw)
            made.append(dst)
            put_attributes(dst, attrs)
            copy_array_data(source, dst)
            staged.publish()
        return 1, 0, dst.nbytes
    # A NumPy array or anything array-like (an h5py dataset of variable-length strings or
    # bytes: object elements, stored with the object codec that fits them).
    data = np.asanyarray(source)
    if data.dtype.hasobject and "object_codec" not in create_kws and "dtype" not in create_kws:
        import numcodecs
        flat = data.reshape(-1)
        if _h5_text(source):
            # (h5py hands UTF-8 strings out as bytes: decoded, they are the text
            # the dataset holds, as `chunkstore convert` reads them; kept as bytes, a str
            # array copied into HDF5 and back came back as bytes)
            flat = np.array([_h5_utf8(v, source) for v in flat], dtype=object)
            data = flat.reshape(data.shape)
        create_kws = {**create_kws, "object_codec": numcodecs.VLenBytes() if flat.size and all(
            isinstance(v, bytes) for v in flat) else numcodecs.VLenUTF8()}
    with removed_on_failure(dest.store, child_path,
                            getattr(dest, "_synchronizer", None)) as made:
        staged = HeldDocuments(dest.store, child_path)
        z = _array_fn(data, store=staged, path=child_path, **{**layout, **create_kws})
        made.append(z)
        put_attributes(z, attrs)
        staged.publish()
    return 1, 0, z.nbytes


def _foreign_layout(source, fmt, without_attrs):
    """({zarr_format, dimension_names where known}, attributes) of the copy of a foreign
    array (an h5py dataset: h5_dimension_names; a NumPy array has no attributes) into Zarr
    format fmt. Raises (TypeError) for an attribute JSON cannot hold, unless
    without_attrs."""
    attrs = {}
    if not without_attrs and hasattr(source, "attrs") and not isinstance(source, np.ndarray):
        attrs = _attributes_of(source)
    layout: dict = {"zarr_format": fmt}
    if _is_h5py(source):
        # (dimension names are metadata in Zarr v3: kept without the attributes too)
        attrs, dims = h5_dimension_names(source, attrs, fmt)
        if dims is not None:
            layout["dimension_names"] = dims
        if without_attrs:
            attrs = {}
    return layout, attrs


def _sliced_kw(source, layout, create_kws):
    """create()'s arguments for the copy of a sliceable foreign array (an h5py dataset):
    its shape, dtype, chunks and fill value, layout (_foreign_layout's), create_kws last."""
    kw = {"shape": source.shape, "dtype": source.dtype, **layout}
    if getattr(source, "chunks", None):
        kw["chunks"] = tuple(source.chunks)
    if getattr(source, "fillvalue", None) is not None:  # h5py's name
        kw["fill_value"] = source.fillvalue
    kw.update(create_kws)
    return kw


def _h5_utf8(value, source):
    """An element of the h5py dataset source (labelled UTF-8) as str: an element that is no
    UTF-8 is a ValueError naming the dataset and its file."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"cannot copy dataset {source.name!r} of {source.file.filename}: "
                         f"its strings are labelled UTF-8, but {value!r} is not UTF-8 "
                         f"({e})") from None


def _is_group(node):
    """A group to copy member by member: chunkstore's, or a foreign one (an h5py Group, any
    mapping of members that is not an array)."""
    return isinstance(node, Group) or (
        not isinstance(node, Array) and not hasattr(node, "shape")
        and callable(getattr(node, "items", None)))


def _is_sliceable(node):
    """A foreign array copied block by block: shape, a fixed-size dtype and slicing."""
    dtype = getattr(node, "dtype", None)
    return (not isinstance(node, np.ndarray) and hasattr(node, "shape")
            and hasattr(node, "__getitem__") and isinstance(dtype, np.dtype)
            and not dtype.hasobject)


def _plain(value):
    """An attribute value as JSON takes it (h5py gives NumPy scalars and arrays, bytes)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _update_attributes(dest, source):
    attrs = _attributes_of(source)
    if attrs:  # nothing to add: no empty attributes document either
        dest.attrs.update(attrs)


def _raw_copy(source, dest, fmt, create_kws):
    """Whether an Array copied into dest (fmt: its format) goes key for key, as stored: not
    a view (view(), astype()), whose stored keys are not what it reads (they were copied:
    the copy of a dtype view read as the stored dtype, of a fill view with the stored
    fill)."""
    return (not create_kws and fmt == source.zarr_format and _plain_store(source)
            and source.view_overrides is None and (dest is None or _plain_store(dest)))


def _copy_array_raw(source, dest, name, without_attrs):
    """The stored keys of the Array source copied to member name of dest, as they are:
    its metadata document read first and written last, with the chunks inside the grid
    that document describes (an append by another handle meanwhile either is in the copy
    whole or not at all: never its new shape without its chunks); the groups above path
    made where missing."""
    path = normalize_path(f"{dest.path}/{name}")
    meta, key = read_array_metadata(source.store, source.path, source.zarr_format)
    layout = layout_for(meta, source.store, source.path)

    def keep(k):
        if k == key:
            return False  # (written last, as read first)
        try:
            layout.parse_stored_key(k)
        except ValueError:
            return False  # a chunk outside that grid (appended since)
        return True

    require_parent_groups(dest.store, path, dest.zarr_format)
    sp = normalize_path(source.path)
    # keys a batch: as many stored objects (chunks, or shards) as one copy block holds
    # decoded (a stored one is no larger, compressed), at most 256: 256 of 4 MiB chunks
    # at once took a 400 MiB copy from 107 to 463 MiB
    stored = math.prod(layout.write_chunks) * max(1, meta.dtype.itemsize)
    batch = max(1, min(256, copy_block_bytes() // max(1, stored)))
    _copy_keys(source.store, dest.store, sp, path,
               [r"(^|/)\.zattrs$"] if without_attrs else None, None, "replace", None, False,
               batch, keep)
    doc = meta.source_document
    if isinstance(doc, (bytes, bytearray)):
        _check_documents_unchanged(source.store, dest.store, {key: bytes(doc)}, [])
    if not isinstance(doc, (bytes, bytearray)) or getattr(meta, "separator_from_store",
                                                             False):
        # (a document that does not describe the array alone, one naming no separator read
        # by its store's, is written out whole: in the copy's store it would mean another)
        doc = layout.encode_metadata(meta)
    dest.store[f"{path}/{key[len(sp) + 1:] if sp else key}" if path else key] = doc
    if without_attrs and dest[name].attrs:  # (attributes inside the document: v3's)
        dest[name].attrs.put({})


def _is_h5py(node) -> bool:
    """Whether node is an h5py Dataset or Group (False where h5py is not installed)."""
    try:
        import h5py
    except ImportError:
        return False
    return isinstance(node, (h5py.Dataset, h5py.Group))


def _h5_json(v: Any) -> Any:
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


# HDF5's dimension scale bookkeeping (object references): the dimensions they name are
# the copy's dimension names instead (h5_dimension_names)
_H5_SCALE_ATTRS = {"DIMENSION_LIST", "REFERENCE_LIST"}


def _h5_is_scale(obj: Any) -> bool:
    return obj.attrs.get("CLASS") in (b"DIMENSION_SCALE", "DIMENSION_SCALE")


def h5_attributes(obj: Any, refused: Any) -> dict:
    """The attributes of an h5py Dataset or Group as JSON takes them, less the dimension
    scale bookkeeping (DIMENSION_LIST, REFERENCE_LIST, a scale's CLASS and NAME: see
    h5_dimension_names). refused(name, error) is called for an attribute JSON cannot
    hold (a compound value, a reference): it raises, or the attribute is left out."""
    is_scale = isinstance(getattr(obj, "shape", None), tuple) and _h5_is_scale(obj)
    out = {}
    for k in obj.attrs.keys():
        if k in _H5_SCALE_ATTRS or (is_scale and k in ("CLASS", "NAME")):
            continue
        try:
            out[k] = _h5_json(obj.attrs[k])
        except Exception as e:  # noqa: BLE001 - h5py raises many types for odd attributes
            refused(k, e)
    return out


def _h5_refuser(obj: Any) -> Any:
    """h5_attributes' refused for a copy: a TypeError naming the attribute, obj and its
    file (a copy leaves no attribute out unasked)."""
    def refuse(name: str, error: Exception) -> None:
        raise TypeError(f"cannot copy attribute {name!r} of {obj.name!r} in "
                        f"{obj.file.filename}: JSON has no place for its value ({error}); "
                        f"copy with without_attrs=True to leave the attributes out")
    return refuse


def _h5_dims(ds: Any) -> list | None:
    """xarray's dimension names from ds's HDF5 dimension scales in its own group (a scale's
    own name for a 1-d scale), or None."""
    try:
        parent = ds.parent.name
        if _h5_is_scale(ds):
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


def h5_dimension_names(ds: Any, attrs: dict, zarr_format: int) -> tuple[dict, list | None]:
    """(attributes, dimension names) of the Zarr copy of the h5py dataset ds whose
    attributes are attrs (h5_attributes'): its dimensions (an _ARRAY_DIMENSIONS attribute
    of its own, else its dimension scales) as Zarr v3's dimension names, or in Zarr v2 as
    xarray's _ARRAY_DIMENSIONS attribute (dimension names None)."""
    from chunkstore.metadata.recode_formats import dims_attr, placed_dimension_names
    dims = dims_attr(attrs.get("_ARRAY_DIMENSIONS"), len(ds.shape))
    if dims is None and "_ARRAY_DIMENSIONS" not in attrs:
        dims = _h5_dims(ds)
    if dims is None:
        return attrs, None
    return placed_dimension_names(attrs, dims, zarr_format)


def _h5_text(source) -> bool:
    """Whether source is an h5py dataset of variable-length UTF-8 strings (ASCII ones may
    hold any bytes: they are kept as bytes)."""
    try:
        import h5py
    except ImportError:
        return False
    if not isinstance(source, h5py.Dataset):
        return False
    info = h5py.check_string_dtype(source.dtype)
    return info is not None and info.length is None and info.encoding == "utf-8"


def _plain_store(node):
    # Raw key copies are only safe when keys map one-to-one (no consolidated overlay).
    return not type(node.store).__name__.startswith("Consolidated")


def copy_all(source, dest, shallow=False, without_attrs=False, log=None, if_exists="raise",
             dry_run=False, return_stats=True, **create_kws):
    """Copy every member of the source group into the dest group (and its attributes).
    Returns (n_copied, n_skipped, n_bytes_copied), counted as `copy` counts them."""
    _check_if_exists(if_exists)
    members = [(name, child) for name, child in source.items()
               if not (isinstance(child, Group) and shallow)]
    ours = isinstance(dest, Group)
    if ours:  # (planned before the attributes are written too)
        _plan_copies(dest, members, not shallow, if_exists, create_kws, without_attrs)
    elif not _is_group(dest) or not hasattr(dest, "create_dataset"):
        raise CopyError(f"dest must be a group (chunkstore's or h5py's), got "
                        f"{type(dest).__name__}")
    elif not dry_run:  # a foreign destination (h5py's): every member planned first
        root_attrs = _h5py_attributes(source, dest.name, without_attrs)
        for name, child in members:
            _copy_to_h5py(None, child, dest, name, not shallow, without_attrs, if_exists,
                          True, create_kws)
    n_copied = n_skipped = n_bytes = 0
    if not without_attrs and not dry_run:
        if ours:
            _update_attributes(dest, source)
        else:
            dest.attrs.update(root_attrs)
    with _logger(log) as emit:
        for name, child in members:
            if ours:
                c, s, b = _copy(emit, child, dest, dest.path, name, not shallow,
                                without_attrs, if_exists, dry_run, create_kws,
                                dest.zarr_format)
            else:  # a foreign destination (h5py's)
                c, s, b = _copy_to_h5py(emit, child, dest, name, not shallow,
                                        without_attrs, if_exists, dry_run, create_kws)
            n_copied += c
            n_skipped += s
            n_bytes += b
    return n_copied, n_skipped, n_bytes
