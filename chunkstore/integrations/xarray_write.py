"""Write an xarray Dataset to a Zarr v2/v3 group with chunkstore (the writing half of
chunkstore.integrations.xarray).

`to_chunkstore` is ``Dataset.to_zarr`` with chunkstore underneath: the same arguments,
defaults, errors and layout, so `xr.open_zarr` (zarr-python) reads the result as it reads
what ``to_zarr`` writes: xarray's CF encoding (times, scale/offset, `_FillValue`, strings,
the `coordinates` attribute), v2 `_ARRAY_DIMENSIONS` or v3 `dimension_names`, and the
fill-value rules of xarray's zarr backend (v2: the array's fill_value is the variable's
`_FillValue`, none if it has none; v3: NaN for floats, with `_FillValue` kept as an
attribute). It drives xarray's own writing machinery (``dump_to_store`` and its
``ArrayWriter``) through `ChunkstoreWritableDataStore`, xarray's ``ZarrStore`` counterpart, so
``compute=False`` returns a dask ``Delayed`` and ``Dataset.dump_to_store`` works.

Every variable is checked before the first write (mode, dimensions, region, append_dim,
encodings, each new array's creation arguments, data types, times that the stored units,
calendar or dtype cannot hold), so a rejected call leaves the store as it was. One deliberate
difference: dask chunks that do not line up with the store's chunks (or shards) are
rechunked to them, so that each stored block is written by one task, instead of being
refused (xarray's ``safe_chunks``); a region write whose edges cut stored chunks is still
refused, as xarray refuses it (other processes may write the rest of those chunks).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from xarray import conventions
from xarray.backends.common import ArrayWriter
from xarray.backends.zarr import (FillValueCoder, encode_zarr_attr_value, encode_zarr_variable,
                                  extract_zarr_variable_encoding)
from xarray.coding.strings import check_vlen_dtype
from xarray.core.common import contains_cftime_datetimes

from chunkstore.codecs.common import object_codec_id
from chunkstore.compat.creation import create_array
from chunkstore.errors import (ContainsArrayError, ContainsGroupError, GroupNotFoundError,
                               ReadOnlyError, store_name)
from chunkstore.hierarchy.creation import (contains_array, contains_group, normalize_path,
                                           remove_node)
from chunkstore.hierarchy.nodes import ancestors, new_node_format
from chunkstore.hierarchy.group import Group, open_group
from chunkstore.integrations.xarray_backend import ChunkstoreDataStore
from chunkstore.metadata._common import json_default
from chunkstore.metadata.formats import (FORMATS, V2_CONSOLIDATED, format_of, is_consolidated,
                                         node_document_names)
from chunkstore.storage.base import delitems
from chunkstore.storage.memory import MemoryStore
from chunkstore.storage.normalize import normalize_store

__all__ = ["to_chunkstore", "ChunkstoreWritableDataStore"]

MODES = ("w", "w-", "a", "a-", "r+")


def to_chunkstore(ds, store=None, mode=None, group=None, encoding=None, *, compute=True,
                  consolidated=None, append_dim=None, region=None, safe_chunks=True,
                  align_chunks=False, storage_options=None, zarr_format=None,
                  write_empty_chunks=None, chunkmanager_store_kwargs=None, synchronizer=None):
    """Write Dataset ds to the Zarr group at `group` in store (a path, URL or store);
    the arguments are ``Dataset.to_zarr``'s.

    mode: "w-" (default: create, fail if something is there), "w" (replace), "a" (add or
    replace variables; with append_dim, extend the variables that have that dimension and
    replace the others), "a-" (as "a", but with append_dim the stored variables without
    that dimension are kept as they are), "r+" (write into existing variables only; the
    default with region).
    append_dim: the dimension to append along (mode "a" or "a-").
    region: {dim: slice (step 1) or "auto"} or "auto": write ds into that part of existing
    variables ("auto": found from ds's coordinates); ds's indexes are not written, and
    every other variable must have at least one of the region's dimensions.
    zarr_format: 2 or 3 for a new group (default: the existing group's, else the
    configured default, else the format of the nearest group above it, else 2).
    encoding: {variable: {"chunks", "shards", "compressors", "filters", "serializer",
    "chunk_key_encoding", "write_empty_chunks", "fill_value" (v3), "dtype", "units",
    "_FillValue", "scale_factor", ...}}; it replaces the variable's own ``.encoding``.
    compute: False writes the metadata (and variables that are not dask arrays) now and
    returns a dask ``Delayed`` that writes the rest.
    consolidated: consolidate the group's metadata (default: yes; never in mode "r+", which
    changes no metadata, as xarray's); False also removes the group's consolidated metadata
    where it has some (it would show the old shapes and members).
    safe_chunks, align_chunks: dask chunks that straddle the stored chunks (or shards)
    inside what one call writes are always rechunked to them (what align_chunks=True asks)
    instead of refused; with safe_chunks=True (and align_chunks=False) a region write (mode
    "r+") of a dask variable whose region starts or ends inside a stored chunk (shard) is
    refused, as xarray refuses it: another process may be writing the rest of that chunk.
    write_empty_chunks: store chunks that hold only the fill value (default: no).
    chunkmanager_store_kwargs: passed to ``dask.array.store``.
    Returns the chunkstore Group, or the ``Delayed`` for compute=False.
    """
    if mode is None:
        mode = "a" if append_dim is not None else "r+" if region is not None else "w-"
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if append_dim is not None and mode not in ("a", "a-"):
        raise ValueError(f"cannot set append_dim unless mode='a' or mode=None (or 'a-'), "
                         f"got mode={mode!r}")
    if region is not None and mode not in ("a", "a-", "r+"):
        raise ValueError(f"cannot set region unless mode='a', mode='a-', mode='r+' or "
                         f"mode=None, got mode={mode!r}")
    for name in ds.variables:
        _check_variable_name(name)
    encoding = dict(encoding or {})
    _check_encoding(ds, encoding)
    # Zero-length variables are loaded: dask cannot store them (and there is nothing to store).
    ds = ds.copy(deep=False)
    for v in ds.variables.values():
        if v.size == 0:
            v.load()
    target = ChunkstoreWritableDataStore.open_group(
        store, mode=mode, group=group, storage_options=storage_options,
        append_dim=append_dim, write_region=region, safe_chunks=safe_chunks,
        align_chunks=align_chunks, zarr_format=zarr_format, write_empty=write_empty_chunks,
        # (not in mode "r+", which changes no metadata, as xarray's to_zarr: consolidating
        # there rewrote every document read before another process's append or attribute
        # update, which readers of the consolidated metadata (v3: of the group's attributes
        # too) then no longer saw)
        consolidate_on_close=consolidated is not False and mode != "r+", cache_members=False,
        synchronizer=synchronizer, defer_create=True)
    try:
        ds = target.validate_region(ds)
        target.validate_encoding(encoding)
        writer = ArrayWriter()
        from xarray.backends.writers import dump_to_store
        dump_to_store(ds, target, writer, encoding=encoding)
        writes = writer.sync(compute=compute, chunkmanager_store_kwargs=chunkmanager_store_kwargs)
    except BaseException as e:
        try:
            target.undo_appends(e)
        finally:
            target.close()
        raise
    if not compute:
        from xarray.backends.api import delayed_close_after_writes
        return delayed_close_after_writes(writes, target)
    result = open_group(target.group.store, mode="r+", path=target.group.path,
                        zarr_format=target.group.zarr_format,
                        synchronizer=target.group.synchronizer)
    target.close()
    return result


class EncodingKeyError(KeyError, ValueError):
    """``encoding=`` names a variable the dataset lacks: a KeyError, as xarray raises it (a
    ValueError too, as chunkstore raised it before)."""


class EncodingTypeError(TypeError, ValueError):
    """An argument of the wrong type (non-integer chunks, a region that is no slice): a
    TypeError, as xarray raises it (a ValueError too, as chunkstore raised it before)."""


def _check_encoding(ds, encoding):
    for name, enc in encoding.items():
        if not isinstance(enc, Mapping):
            raise ValueError(f"encoding of variable {name!r} must be castable to a "
                             f"dictionary, got {enc!r}")
        if name not in ds.variables:
            raise EncodingKeyError(f"encoding names variable {name!r}, which the dataset "
                                   f"lacks")
        for key in ("chunks", "shards"):
            c = enc.get(key)
            if c is None or isinstance(c, str):
                continue
            items = c if isinstance(c, (tuple, list)) else (c,)
            if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in items):
                raise EncodingTypeError(f"encoding {key}={c!r} of variable {name!r}: "
                                        f"integers are needed")


class ChunkstoreWritableDataStore(ChunkstoreDataStore):
    """A chunkstore Group as a writable xarray data store: what `to_chunkstore` writes
    through and ``Dataset.dump_to_store`` takes (xarray's ``ZarrStore`` counterpart; open it
    with `open_group`). Holds the write's settings: mode, append_dim, region, chunk
    alignment, write_empty_chunks and whether to consolidate afterwards."""

    __slots__ = ("mode", "append_dim", "region", "write_empty", "consolidate_on_close",
                 "zarr_format", "safe_chunks", "_pending_clear", "_grown", "_made")

    def __init__(self, group, *, mode="r+", append_dim=None, region=None,
                 write_empty=None, consolidate_on_close=False, close_store=False,
                 use_zarr_fill_value_as_mask=None, pending_clear=False, cache_members=False,
                 safe_chunks=True):
        super().__init__(group, close_store=close_store,
                         use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
                         cache_members=cache_members and not pending_clear)
        self.mode, self.append_dim, self.region = mode, append_dim, region
        # whether a region write whose edges cut stored chunks (or shards) is refused, as
        # xarray's safe_chunks (and not align_chunks) asks: see _check_region_edges
        self.safe_chunks = safe_chunks
        self.write_empty = write_empty
        self.consolidate_on_close = consolidate_on_close
        self.zarr_format = group.zarr_format
        # mode "w" over an existing group: it is replaced when the first write is checked,
        # not at open (a rejected write leaves it as it was)
        self._pending_clear = pending_clear
        # (array, its shape before) of each array this write appended to, in order
        self._grown: list[tuple[Any, tuple[int, ...]]] = []
        # the nodes this write made, (kind, path): the group where it made or replaced it,
        # the arrays it created; removed again if it fails (see undo_appends)
        self._made: list[tuple[str, str]] = []

    @classmethod
    def open_group(cls, store, mode="r", group=None, consolidated=None,
                   consolidate_on_close=False, storage_options=None, append_dim=None,
                   write_region=None, safe_chunks=True, align_chunks=False, zarr_format=None,
                   use_zarr_fill_value_as_mask=None, write_empty=None, cache_members=True,
                   zarr_version=None, synchronizer=None, *, defer_create=False):
        """Open (mode "r", "r+", "a", "a-") or create ("w", "w-") the group at path `group`
        of store for writing; the arguments are xarray's ``ZarrStore.open_group``'s
        (``consolidated`` is accepted and not needed; misaligned dask chunks are always
        rechunked to the stored grid, and ``safe_chunks`` (unless ``align_chunks``) refuses
        region writes whose edges cut stored chunks; ``cache_members`` as xarray's:
        ``array_keys()`` answers with the arrays the group held when opened).
        defer_create (to_chunkstore's): a group to be created (or an array or a group of
        another format that mode "w" replaces) is created by the first `store`, once its
        write is checked, not here: a refused write creates nothing. synchronizer (xarray's
        ``to_zarr``'s): every array and group of the write opened or created with it; a
        Group given as the store lends its own where none is given."""
        if zarr_format is None:
            zarr_format = zarr_version
        if mode not in MODES + ("r",):
            raise ValueError(f"mode must be one of {MODES + ('r',)}, got {mode!r}")
        path = normalize_path(group)
        if isinstance(store, Group):
            # (the group's store at its path, as the engine reads a Group: taken for a
            # mapping, the writer wrote ".zgroup" into it as a member)
            if store.read_only and mode != "r":
                raise ReadOnlyError(f"group {store.name!r} is read-only: cannot write a "
                                    f"dataset into it")
            path = "/".join(p for p in (store.path, path) if p)
            if synchronizer is None:  # (dropped, processes writing regions that share a
                # chunk lost each other's rows, with no error)
                synchronizer = store.synchronizer
            store = store.store
        s = normalize_store(store, mode=mode if mode in ("r", "r+") else "a",
                            storage_options=storage_options, for_node=True)
        owned = s is not store
        try:
            g, clear = _open_for(s, path, mode, zarr_format, synchronizer)
            if isinstance(g, _NewGroup) and not defer_create:
                g, clear = g.create(), False
        except BaseException:
            if owned and hasattr(s, "close"):
                s.close()
            raise
        return cls(g, mode=mode, append_dim=append_dim, region=write_region,
                   write_empty=write_empty,
                   consolidate_on_close=consolidate_on_close, close_store=owned,
                   use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
                   pending_clear=clear, cache_members=cache_members,
                   safe_chunks=safe_chunks and not align_chunks)

    # -------------------------------------------------------------- what xarray calls
    def validate_region(self, ds):
        """ds ready for a region write: ``region`` checked (a dict of step-1 slices over ds's
        dimensions, "auto" entries found from the stored coordinates) and ds's indexes
        dropped (a region write cannot change them). ds unchanged without a region."""
        if self.region is None:
            return ds
        region = self.region
        if isinstance(region, str) and region == "auto":
            region = dict.fromkeys(ds.dims, "auto")
        if not isinstance(region, dict):
            raise EncodingTypeError(f"region must be a dict of dimension -> slice or "
                                    f"'auto', got {type(region).__name__}: {region!r}")
        region = dict(region)
        if any(isinstance(s, str) and s == "auto" for s in region.values()):
            if self.mode not in ("r+", "a"):
                raise ValueError(f"region='auto' needs mode 'r+' or 'a', got "
                                 f"mode={self.mode!r}")
            region = self._find_region(ds, region)
        sizes = None
        for d, s in region.items():
            if d not in ds.dims:
                raise ValueError(f"all keys in ``region`` are not in Dataset dimensions: "
                                 f"{d!r} is not one of {list(ds.dims)}")
            if not isinstance(s, slice):
                raise EncodingTypeError(f"all values in region must be slice objects; region "
                                        f"{d}={s!r} is a {type(s).__name__}")
            if s.step not in (None, 1):
                raise ValueError(f"step on all slices in region must be 1 or None: region "
                                 f"{d}={s!r}")
            if (s.start is not None and s.start < 0) or (s.stop is not None and s.stop < 0):
                # from the end of the stored dimension, as xarray's zarr engine takes them
                # (the stored sizes read once, at the first such bound)
                sizes = sizes if sizes is not None else self.get_dimensions()
                if d not in sizes:
                    raise ValueError(f"region {d}={s!r}: negative bounds count from the end "
                                     f"of the stored dimension {d!r}, and the group "
                                     f"{self.group.name!r} stores none")
                start, stop, _ = s.indices(sizes[d])
                region[d] = slice(start, stop)
        # (indexes too, as xarray: an index outside the region would be dropped unwritten,
        # its values, which may differ from the stored ones, ignored without a word)
        outside = [n for n, v in ds.variables.items() if not set(region) & set(v.dims)]
        if region and outside:
            raise ValueError(f"all variables in the dataset to write must have at least one "
                             f"dimension in common with the region's dimensions "
                             f"{list(region)}; {outside!r} have none: drop them first, "
                             f".drop_vars({outside!r})")
        if self.append_dim is not None and self.append_dim in region:
            raise ValueError(f"cannot list the same dimension in both append_dim and "
                             f"region: {self.append_dim!r}")
        self.region = region
        return ds.drop_vars(ds.indexes)

    def _find_region(self, ds, region):
        """region with each "auto" entry replaced by the slice where ds's coordinate values
        sit in the stored coordinate (a dimension ds has no coordinate for: its whole length;
        KeyError where ds has one and the group stores none)."""
        for d, s in region.items():
            if not (isinstance(s, str) and s == "auto"):
                continue
            if d not in ds._variables:  # no coordinate to look up: the whole length
                region[d] = slice(0, ds.sizes[d])
                continue
            if d not in self.group.array_keys():
                # (ds's coordinate values cannot be placed: writing them at the start would
                # put the data where the caller's coordinates do not say; xarray raises too)
                raise KeyError(f"region={{{d!r}: 'auto'}}: ds has a coordinate {d!r} but "
                               f"the group {self.group.name!r} stores no array {d!r} to find "
                               f"its values in; give the region as a slice")
            stored = conventions.decode_cf_variable(
                d, self.open_store_variable(d, self.group[d]).compute())
            try:
                where = pd.Index(stored.data).get_indexer(ds[d].data)
            except pd.errors.InvalidIndexError as e:  # (pandas' words name neither)
                raise ValueError(f"region={{{d!r}: 'auto'}}: the stored coordinate {d!r} of "
                                 f"the group {self.group.name!r} of "
                                 f"{store_name(self.group.store)} holds duplicate values, so "
                                 f"ds's values cannot be placed in it; give the region as a "
                                 f"slice") from e
            if (where == -1).any():
                raise KeyError(f"not every value of coordinate {d!r} is in the stored "
                               f"coordinate of {self.group.name!r}: a region write cannot "
                               f"change dimensions or coordinates")
            if len(where) and (np.diff(where) != 1).any():
                raise ValueError(f"the values of coordinate {d!r} are not one contiguous "
                                 f"run of the stored coordinate: a region must be "
                                 f"contiguous")
            region[d] = slice(int(where[0]), int(where[-1]) + 1) if len(where) else slice(0, 0)
        return region

    def validate_encoding(self, encoding):
        """``encoding=`` for a stored variable is refused (it would be ignored: the stored array
        keeps its encoding), for modes that keep stored variables."""
        if encoding and self.mode in ("a", "a-", "r+") and not self._pending_clear:
            given = {_stored_name(n) for n in encoding}
            for name in self.group.array_keys():
                if name in given:
                    raise ValueError(f"variable {name!r} already exists, but encoding was "
                                     f"provided")

    def store(self, variables, attributes, check_encoding_set=frozenset(), writer=None,
              unlimited_dims=None):
        """Write encoded-for-CF variables and the group's attributes (xarray's
        ``AbstractWritableDataStore.store``): every variable is planned and checked first,
        then arrays are created, resized or opened and their data handed to writer (an
        ``ArrayWriter``; dask arrays are written when it syncs)."""
        if self.mode == "r":
            raise PermissionError(f"the group {self.group.name!r} of "
                                  f"{store_name(self.group.store)} was opened read-only "
                                  f"(mode 'r')")
        writer = ArrayWriter() if writer is None else writer
        fmt = self.zarr_format
        variables = {_stored_name(n): v for n, v in variables.items()}
        documents = node_document_names() | {V2_CONSOLIDATED}
        for n in variables:
            if n in documents:
                # (refused here, naming this store: array creation refused it too, in the
                # scratch store below, whose name meant nothing to the caller)
                raise ValueError(f"invalid variable name {n!r}: it is the name of a Zarr "
                                 f"metadata document, not of an array, in the group "
                                 f"{self.group.name!r} of {store_name(self.group.store)}; "
                                 f"rename the variable")
        check_encoding_set = {_stored_name(n) for n in check_encoding_set}
        existing = set() if self._pending_clear or self.mode == "w" else \
            set(self.group.array_keys())
        written = [n for n in variables if n in existing]
        new = [n for n in variables if n not in existing]
        if self.mode == "r+" and new:
            raise ValueError(f"dataset contains non-pre-existing variables {new!r}, which "
                             f"mode 'r+' cannot add to the group {self.group.name!r}; use "
                             f"mode 'a'")
        if self.append_dim is not None and self.append_dim not in existing:
            dims = self.get_dimensions() if existing else {}
            if self.append_dim not in dims:
                raise ValueError(f"append_dim={self.append_dim!r} does not match any "
                                 f"existing dataset dimensions {dims}")
        encoded = {}
        for n in new:
            enc = _encode(variables[n], n, fmt)
            encoded[n] = _check_written_values(n, variables[n], enc, enc)
        group_attrs = {k: encode_zarr_attr_value(v) for k, v in attributes.items()}
        arrays = {n: self.group[n] for n in written}  # each stored array opened once
        if written:
            encoded.update(self._encode_like_stored(variables, arrays))
        if self.mode == "a-" and self.append_dim is not None:
            encoded = {n: v for n, v in encoded.items()
                       if n not in existing or self.append_dim in v.dims}
        _check_attrs(group_attrs, f"the attributes of group {self.group.name!r}")
        # (each with the data as given, before CF encoding: see _unchanged)
        plans = [{**self._plan(n, v, n in check_encoding_set, arrays),
                  "given": getattr(variables.get(n), "data", None)}
                 for n, v in encoded.items()]
        for p in plans:
            if p["action"] == "create":
                _check_attrs(p["attrs"], f"the attributes of variable {p['name']!r}")
        if self.mode in ("a", "a-") and existing:
            _check_kept_dimensions(self, {p["name"]: p for p in plans})
        if self.mode == "r+" and self.safe_chunks:
            for p in plans:
                _check_region_edges(p)
        # Creation arguments (chunks, codecs, shards, chunk_key_encoding, fill_value) that only
        # array creation checks: each new array made first in a scratch store, with the same
        # arguments, so that none is refused after mode "w" cleared the group or other
        # variables (and the group's attributes) were written.
        sep = getattr(self.group.store, "dimension_separator", None)  # (v2 keys' default)
        scratch = MemoryStore(dimension_separator=sep if sep in (".", "/") else None)
        for p in plans:
            if p["action"] == "create":
                try:
                    _create(scratch, self._path(p["name"]), p, fmt)
                except Exception as e:
                    _name_variable(e, p["name"])
                    raise
        if self._pending_clear:
            _check_not_reading(plans, self.group)
        for p in plans:
            _check_not_reading_elsewhere(p)
        _check_not_reading_others(plans)
        # -- everything checked: write
        if isinstance(self.group, _NewGroup):
            self.group = self.group.create()
            self._made.append(("group", self.group.path))
        elif self._pending_clear:
            self.group = open_group(self.group.store, mode="w", path=self.group.path,
                                    zarr_format=fmt)
            self._made.append(("replaced", self.group.path))
        self._pending_clear = False
        if self.mode not in ("r", "r+"):
            self.group.attrs.put(group_attrs)
            if not self.consolidate_on_close:
                # consolidated metadata left as it was would show readers the old shapes and
                # members (zarr-python 3 drops a v3 group's as xarray writes it; chunkstore
                # drops a v2 group's .zmetadata too, which xarray's zarr engine leaves stale,
                # and the root's, which xarray reads a subgroup through)
                for where in (self.group.path, *ancestors(self.group.path)):
                    for f in FORMATS.values():  # (a group above may be of either format)
                        f.unconsolidate(self.group.store, where)
        for p in plans:
            target, data = self._target(p)
            writer.add(data, target, p["region"])
        if self.consolidate_on_close:
            self._consolidate()

    def _consolidate(self) -> None:
        """Consolidate the metadata: the root's, which both engines read (they open the
        root, then the group in it), and the group's own, for readers that open the group's
        path as a store; and that of each group between them that keeps some (an earlier
        write to it consolidated it): left as it was, a reader opening that group's path
        would see this group's old shapes and members. Deepest first, so that each is made
        from fresh documents below it."""
        from chunkstore.hierarchy.convenience import consolidate_metadata
        store, path = self.group.store, self.group.path
        between = [a for a in ancestors(path)[1:] if is_consolidated(store, a)]
        for where in dict.fromkeys((path, *reversed(between), "")):
            consolidate_metadata(store, path=where)

    def undo_appends(self, error: BaseException) -> None:
        """After a failed write (error), the arrays it appended to shrunk back to their
        shapes before it, and the consolidated metadata made again where the write had
        consolidated it: the rows an append had added read as the fill value, or held what
        only some of the variables' data had put there (dask data that failed as it was
        computed, times the stored dtype cannot hold; 1970-01-01 in a time variable, a
        plausible wrong value). A step that fails is noted on error."""
        grown, self._grown = self._grown, []
        made, self._made = self._made, []
        if not grown and not made:
            return
        for z, shape in reversed(grown):
            try:
                z.resize(shape)
            except Exception as e:  # (what the append left is named; the error goes on)
                error.add_note(f"the append to {z.name!r} could not be undone ({e!r}): it "
                               f"may hold rows of fill values past {shape}")
        # The nodes it made removed: half written, they read as a dataset whose unwritten
        # blocks hold the fill value, with nothing to tell it from a whole one. The arrays
        # it created whole (their keys are theirs alone); a group it made or replaced by
        # its documents only (keys at its path that are no node of this write, a user's
        # files in the directory, stay). Mode "w" had replaced the group before its dask
        # data was computed: what it held is gone either way, and no group is left rather
        # than a partial one.
        store = self.group.store
        removed_group = False
        for kind, path in reversed(made):
            try:
                if kind == "array":
                    remove_node(store, path)
                    continue
                prefix = path + "/" if path else ""
                delitems(store, [prefix + n for n in
                                 (*sorted(node_document_names()), V2_CONSOLIDATED)])
                removed_group = True
                how = ("replaced (mode 'w': what it held was deleted first)"
                       if kind == "replaced" else "made")
                error.add_note(f"the group {path or '/'!r} of {store_name(store)} this write "
                               f"{how} is removed again, half written")
            except Exception as e:
                error.add_note(f"the node {path or '/'!r} this write made, half written, could "
                               f"not be removed ({e!r}): its unwritten blocks read as the "
                               f"fill value")
        if self.consolidate_on_close:
            try:
                if removed_group:  # (gone: the groups above that keep some)
                    from chunkstore.hierarchy.convenience import consolidate_metadata
                    for where in ancestors(self.group.path):
                        if is_consolidated(store, where):
                            consolidate_metadata(store, path=where)
                else:
                    self._consolidate()
            except Exception as e:
                error.add_note(f"the consolidated metadata could not be made again ({e!r})")

    def _encode_like_stored(self, variables, arrays):
        """The variables stored already (arrays: name -> its Array) encoded exactly as the
        stored ones (units, dtype, scale, fill), transposed to the stored dimension order;
        ValueError where a dtype, a dimension or a size does not fit."""
        names = list(arrays)
        raw = {n: self.open_store_variable(n, arrays[n]) for n in names}
        decoded, _, _ = conventions.decode_cf_variables(raw, {})
        out = {}
        for n in names:
            new, old = variables[n], decoded[n]
            _check_append_dtype(n, raw[n], old, new)
            v = new.copy(deep=False)
            v.encoding = dict(old.encoding)
            kind = raw[n].dtype.kind
            if kind in "mM" and new.dtype.kind == kind:
                # a native datetime64/timedelta64 array (Zarr v3): written as such, as the
                # first write wrote it (decoding left it so, its units in attrs; without them
                # the encoder would write integers in units of its own, which the array
                # would take as times of 1970)
                v.encoding.update({k: raw[n].attrs[k] for k in ("units", "calendar")
                                   if k in raw[n].attrs}, dtype=raw[n].dtype)
            enc = _encode(v, n, self.zarr_format)
            if enc.dims != old.dims:
                if set(enc.dims) != set(old.dims):
                    raise ValueError(f"variable {n!r} already exists with different "
                                     f"dimension names {old.dims} != {enc.dims}: "
                                     f"to_chunkstore cannot change a variable's dimensions")
                enc = enc.transpose(*old.dims)
            stored = {}
            for d, size in old.sizes.items():
                if self.region is not None and d in self.region:
                    start, stop, _ = self.region[d].indices(size)
                    size = stop - start
                if d != self.append_dim:
                    stored[d] = size
            given = {d: s for d, s in enc.sizes.items() if d != self.append_dim}
            if stored != given:
                raise ValueError(f"variable {n!r} already exists with different "
                                 f"dimension sizes: {stored} != {given}; sizes change only along "
                                 f"append_dim (got append_dim={self.append_dim!r}); to write "
                                 f"part of a stored variable, give region=")
            if self.region is not None:
                for d in enc.dims:
                    s = self.region.get(d)
                    if s is not None and s.stop is not None and s.stop > old.sizes[d]:
                        raise ValueError(f"region {d}={s} of variable {n!r} goes past its "
                                         f"stored length {old.sizes[d]}")
            out[n] = _check_written_values(n, new, enc, raw[n])
        return out

    def _plan(self, name, v, check, arrays):
        """What writing encoded variable v takes: its array's fill value, attributes and
        encoding (for a new array), the stored array it goes into (arrays: the stored ones,
        opened once by store()) and the region of it that it fills, the data."""
        fmt = format_of(self.zarr_format)
        attrs, enc = dict(v.attrs), dict(v.encoding)
        mask = self._mask if self._mask is not None else fmt.fill_value_masks
        if mask:
            fill = attrs.pop("_FillValue", None)
            if not (check and fmt.fill_value_masks):
                enc.pop("fill_value", None)
            # (else left for extract_zarr_variable_encoding to refuse, in xarray's words:
            # where the format's fill value is the mask (v2), it is the variable's
            # _FillValue, never dropped unsaid)
        else:
            fill = enc.pop("fill_value", None)
            if fill is None and v.dtype.kind == "f":
                fill = np.nan  # xarray's default for floats, unlike Zarr's 0
            if attrs.get("_FillValue") is not None:
                attrs["_FillValue"] = FillValueCoder.encode(attrs["_FillValue"], v.dtype)
            else:
                attrs.pop("_FillValue", None)
        if enc.get("_FillValue") is not None:
            raise ValueError(f"variable {name!r}: Zarr does not support _FillValue in "
                             f"encoding (give it as an attribute)")
        enc.pop("_FillValue", None)
        for key in ("chunks", "shards"):
            # chunks or shards of another rank are another array's (the variable's own
            # encoding after isel/squeeze): dropped, as xarray drops such chunks
            val = enc.get(key)
            if val is not None and not isinstance(val, (int, str)) and len(val) != v.ndim:
                if key == "shards" and check:
                    raise ValueError(f"variable {name!r}: encoding shards={val!r} has "
                                     f"{len(val)} dimensions, the variable {v.ndim}")
                del enc[key]
        v = v.copy(deep=False)
        v.encoding = enc
        try:
            zenc = extract_zarr_variable_encoding(v, raise_on_invalid=check, name=name,
                                                  zarr_format=self.zarr_format)
        except ValueError as e:
            _name_variable(e, name)
            raise
        if self.write_empty is not None:
            given = zenc.get("write_empty_chunks")
            if given is not None and given != self.write_empty:
                raise ValueError(f"variable {name!r}: write_empty_chunks={given!r} in its "
                                 f"encoding but write_empty_chunks={self.write_empty!r} given")
            zenc["write_empty_chunks"] = self.write_empty
        action = "create"
        region = {d: slice(None) for d in v.dims}
        shape = v.shape
        stored = arrays.get(name)  # (the stored array this writes into, if any)
        if stored is not None:
            action = "write"
            shape = stored.shape
            if self.region is not None:
                region.update({d: s for d, s in self.region.items() if d in region})
            if self.append_dim is not None and self.append_dim in v.dims:
                axis = v.dims.index(self.append_dim)
                region[self.append_dim] = slice(stored.shape[axis], None)
                shape = tuple(n + v.shape[axis] if i == axis else n
                              for i, n in enumerate(stored.shape))
                action = "append"
        return {"name": name, "dims": v.dims, "dtype": v.dtype, "shape": shape,
                "fill": fill, "attrs": attrs, "encoding": zenc, "stored": stored,
                "region": tuple(region[d] for d in v.dims), "action": action, "data": v.data}

    def _path(self, name: str) -> str:
        """The store path of the group's member name."""
        return f"{self.group.path}/{name}" if self.group.path else name

    def _target(self, p):
        """(the array p's data goes into: created, resized or opened; the data, a dask array
        rechunked to the array's grid where its chunks straddle the stored chunks or shards,
        so that every stored block is written by one task: no update is lost, whatever the
        scheduler, threads or processes)."""
        store = self.group.store
        if p["action"] == "create":
            z = _create(store, self._path(p["name"]), p, self.zarr_format,
                        self.group.synchronizer)
            self._made.append(("array", z.path))
        else:
            z = p["stored"]
            if p["action"] == "append":
                self._grown.append((z, z.shape))
                z.resize(p["shape"])
        data = p["data"]
        wec = p["encoding"].get("write_empty_chunks")
        if wec is not None and wec != z.write_empty_chunks:
            # (a handle like z's: its format, synchronizer and locks; a fresh Array opened
            # the v3 array where both formats' documents lay and a v2 one was written)
            z = z.with_config({"write_empty_chunks": bool(wec)})
        if hasattr(data, "dask"):  # (dask is there: xarray needs no dask otherwise)
            from chunkstore.integrations.dask import Target, aligned, rechunk_to_grid
            offsets = [s.start or 0 for s in p["region"]]
            if not aligned(data.chunks, z.write_chunks, None, offsets):
                data = rechunk_to_grid(data, z.write_chunks, offsets)
            # tasks run on a copy of the graph (the processes scheduler, dask.distributed)
            # raise where the store's copies share no data (a MemoryStore): their writes
            # were lost, and the variable read as its fill value, with no error
            return Target(z), data
        return z, data


def _encode(var: Any, name: str, zarr_format: Any) -> Any:
    """var encoded as xarray's zarr backend encodes it (CF, then Zarr); an error names the
    variable (xarray's coders' often do not: "cannot specify a leap day as the reference
    time with the noleap calendar")."""
    try:
        return encode_zarr_variable(var, name=name, zarr_format=zarr_format)
    except Exception as e:
        _name_variable(e, name)
        raise


def _check_not_reading(plans, group) -> None:
    """Refuse mode "w" over the group that a variable's dask data reads (opened with
    chunks=): replaced first, its tasks read the fill value (xarray's zarr engine writes
    NaN so, without a word)."""
    from chunkstore.integrations.dask import source_under
    for p in plans:
        data = p["data"]
        if not hasattr(data, "dask"):
            continue  # (data xarray loaded when the plan was made: read already)
        a = source_under(data, group.store, group.path)
        if a is not None:
            raise ValueError(
                f"cannot replace the group {group.path or '/'!r} of {store_name(group.store)} "
                f"(mode 'w'): variable {p['name']!r} reads array {a.path or '/'!r} in it, "
                f"which would read as its fill value once replaced; write to another group "
                f"or store, or load the dataset first (ds.load())")


def _check_not_reading_elsewhere(p) -> None:
    """Refuse a write into a stored array (a region, or mode "a" rewriting a variable)
    whose dask data reads that array other than block by block (dask.blockwise_in_place:
    each block of the data read from no element outside the region it is written to): its
    tasks run in any order, and one read a region another task had written already
    (``ds.v[::-1]`` written back into v stored [0 1 2 3 3 2 1 0], as xarray's zarr engine
    stores it; ``ds.v[2:50]`` written to v[0:48] stored some rows shifted twice).
    ValueError naming the variable; an append (rows the data cannot read) and elementwise
    updates (``ds.v * 2``, ``ds.isel(t=slice(5, 10)) * 2`` into the region t=5:10) go on."""
    data = p["data"]
    if p["action"] != "write" or not hasattr(data, "dask"):
        return
    from chunkstore.integrations.dask import blockwise_in_place
    z = p["stored"]
    offsets = [sel.indices(n)[0] for sel, n in zip(p["region"], z.shape)]
    if blockwise_in_place(data, z.store, z.path, offsets):  # (True too where it reads none)
        return
    raise ValueError(
        f"variable {p['name']!r}: its dask data reads the array {z.path or '/'!r} of "
        f"{store_name(z.store)} that it is written into, other than block by block (a "
        f"reversal, shift, transpose, slice written over rows it reads, rechunk into smaller "
        f"blocks, overlap or reduction of it): its tasks would read blocks other tasks had "
        f"written already; load the data first (.load()), or write it elsewhere")


def _unchanged(p) -> bool:
    """Whether a plan writes its stored array's own values back over all of it (its dask
    data as given that array, lazily opened and changed in nothing, encoded as stored)."""
    from chunkstore.integrations.dask import reads_back_unchanged
    # (the data as given: CF encoding adds layers of its own to the data written, a time
    # variable's, which decode back to the values stored, as the stored encoding is used)
    z, data = p["stored"], p["given"]
    return (hasattr(data, "dask") and tuple(data.shape) == tuple(z.shape)
            and all(sel.indices(n) == (0, n, 1) for sel, n in zip(p["region"], z.shape))
            and reads_back_unchanged(data, z.store, z.path))


def _check_not_reading_others(plans) -> None:
    """Refuse a write where a variable's dask data reads a stored array that another
    variable of the same write rewrites (mode "a" or a region; an append adds rows the data
    cannot read): its tasks run in any order, NumPy data is written before any, and it
    read values already written (``{"a": ds.b, "b": ds.a}`` stored b into both).
    ValueError naming both variables."""
    from chunkstore.hierarchy.nodes import holds
    from chunkstore.integrations.dask import _sources
    # (a variable written back as it was opened, as mode "a" writes every variable of a
    # dataset a new one was added to: read meanwhile, it reads the same values either way)
    rewritten = [q for q in plans if q["action"] == "write" and not _unchanged(q)]
    if not rewritten:
        return
    for p in plans:
        data = p["data"]
        if not hasattr(data, "dask"):
            continue  # (data xarray loaded when the plan was made: read already)
        read = list(_sources(data))
        for q in rewritten:
            z = q["stored"]
            if q is p or not any(holds(z.store, z.path, a.store, a.path) for a in read):
                continue
            raise ValueError(
                f"variable {p['name']!r}: its dask data reads the array {z.path or '/'!r} of "
                f"{store_name(z.store)}, which variable {q['name']!r} of the same write is "
                f"written into: the tasks run in any order, and would read values already "
                f"written; load the data first (.load()), or leave {q['name']!r} out of the "
                f"write (.drop_vars({q['name']!r})) if it is unchanged")


def _open_for(store, path, mode, zarr_format, synchronizer=None):
    """(the group at path of store opened for a write with mode, or the _NewGroup to be
    created there; whether mode "w" still has to replace what is there). Raises before
    anything is written where the mode does not fit; writes nothing."""
    is_array = contains_array(store, path)
    if is_array and mode != "w":
        raise ContainsArrayError(f"path {path!r} in {store_name(store)} holds an array, not a "
                                 f"group")
    exists = not is_array and contains_group(store, path)
    if mode == "w-" and exists:
        raise ContainsGroupError(f"a group already exists at path {path!r} in "
                                 f"{store_name(store)}; use mode='w' to replace it or 'a' to "
                                 f"add to it")
    if mode in ("r", "r+") and not exists:
        # (a not-found error, as xarray's zarr engine raises; ContainsGroupError said the
        # opposite)
        raise GroupNotFoundError(f"no group at path {path!r} in {store_name(store)} to "
                                 f"write into (mode {mode!r})")
    if not exists:  # a new group (mode "w" replaces an array there)
        return _NewGroup(store, path, new_node_format(store, path, zarr_format, 2),
                         "w" if is_array else "w-" if mode == "w-" else "a",
                         synchronizer), is_array
    try:  # (the asked format's group where both formats' documents lie at path)
        g = open_group(store, mode="r" if mode == "r" else "r+", path=path,
                       zarr_format=zarr_format, synchronizer=synchronizer)
    except GroupNotFoundError:
        if zarr_format is None:
            raise
        g = open_group(store, mode="r" if mode == "r" else "r+", path=path,
                       synchronizer=synchronizer)
    if zarr_format not in (None, g.zarr_format):
        if mode != "w":
            raise ValueError(f"the group at {path!r} in {store_name(store)} is Zarr "
                             f"v{g.zarr_format}, not v{zarr_format}")
        # another format's group is replaced: nothing of it can be kept
        return _NewGroup(store, path, zarr_format, "w", synchronizer), True
    return g, mode == "w"


class _NewGroup:
    """The group a write creates at path of store, before it exists: the writer's group
    until its first write is checked, so that a refused write creates nothing (a new group
    left behind made the corrected mode "w-" retry a ContainsGroupError). It has no members
    (whatever is there, an array or another format's group, mode "w" replaces)."""

    __slots__ = ("store", "path", "zarr_format", "_mode", "synchronizer")
    read_only = False

    def __init__(self, store: Any, path: str, zarr_format: int, mode: str,
                 synchronizer: Any = None) -> None:
        self.store, self.path, self.zarr_format = store, path, zarr_format
        self._mode = mode  # (open_group's: "a", "w-" refusing a group made meanwhile, "w")
        self.synchronizer = synchronizer

    @property
    def name(self) -> str:
        """The group's absolute name, as Group.name."""
        return "/" + self.path if self.path else "/"

    @property
    def attrs(self) -> dict:
        """None yet."""
        return {}

    def array_keys(self) -> list:
        """None yet."""
        return []

    def group_keys(self) -> list:
        """None yet."""
        return []

    def __contains__(self, name: Any) -> bool:
        return False

    def __getitem__(self, name: Any) -> Any:
        raise KeyError(f"{name!r}: the group {self.name!r} of {store_name(self.store)} is "
                       f"not created yet")

    def create(self) -> Group:
        """The group, created (or what is there replaced by it)."""
        return open_group(self.store, mode=self._mode, path=self.path,
                          zarr_format=self.zarr_format, synchronizer=self.synchronizer)


def _create(store, path, p, zarr_format, synchronizer=None):
    """A new array for plan p (xarray's zarr encoding keys mapped to create_array's)."""
    enc = dict(p["encoding"])
    chunks = enc.pop("chunks", "auto")
    config = {k: enc.pop(k) for k in ("write_empty_chunks", "order") if k in enc}
    enc.pop("cache_metadata", None)
    shards = enc.pop("shards", None)
    kw = {k: enc.pop(k) for k in ("compressors", "filters", "serializer", "chunk_key_encoding")
          if k in enc}  # create_array maps them to Zarr v2's where the group is v2
    dt = p["dtype"]
    # A variable read from variable-length strings or bytes keeps its source's object codec
    # in .encoding: as a filter of fixed-width data xarray encoded, no engine could read the
    # array (xarray's zarr engine refuses it); as a v2 filter in a v3 array, it is refused.
    # Object data is written as str, fixed-width data as itself: each with the codec its
    # format gives it.
    if object_codec_id(kw.get("serializer")) is not None:
        del kw["serializer"]
    if isinstance(kw.get("filters"), (list, tuple)):
        kw["filters"] = [f for f in kw["filters"] if object_codec_id(f) is None]
        if not kw["filters"]:
            del kw["filters"]  # (the format's defaults: str's object codec in v2)
    dtype = str if dt.hasobject else dt
    attrs = {k: encode_zarr_attr_value(v) for k, v in p["attrs"].items()}
    return create_array(store, name=path, shape=p["shape"], dtype=dtype, chunks=chunks,
                        shards=shards, fill_value=p["fill"], zarr_format=zarr_format,
                        attributes=attrs, dimension_names=list(p["dims"]), overwrite=True,
                        config=config or None, synchronizer=synchronizer, **kw)


def _name_variable(e: BaseException, name: Any) -> None:
    """e's message made to name the variable it is about (its type kept, as callers catch it
    by type), unless it names it already."""
    tag = repr(name)
    if tag in str(e):
        return
    if e.args and isinstance(e.args[0], str):
        e.args = (f"{e.args[0]} (variable {tag})",) + e.args[1:]
    if tag not in str(e):  # (an exception whose message is not its first argument)
        e.add_note(f"(variable {tag})")


def _units_key(units: Any) -> Any:
    """CF time units as a comparable value: (the unit, plural and lower-case; the reference
    date as a timestamp, or None for a timedelta's units), so that "hours since 2026-01-01
    00:00:00", as stored, equals "hours since 2026-01-01", as xarray's encoder writes it.
    Anything else as it is."""
    if not isinstance(units, str):
        return units
    unit, sep, ref = units.strip().partition(" since ")
    unit = unit.strip().lower()
    unit = unit if unit.endswith("s") else unit + "s"
    if not sep:
        return unit, None
    try:
        when = pd.Timestamp(ref.strip())
    except (ValueError, TypeError, OverflowError):
        return unit, ref.strip()
    return unit, when.tz_convert(None) if when.tzinfo is not None else when


#: CF calendars that name one calendar
_CALENDAR_ALIASES = {"gregorian": "standard", "365_day": "noleap", "366_day": "all_leap"}


def _check_written_values(name: str, new: Any, enc: Any, raw: Any) -> Any:
    """The values of a variable written into an array (new: raw is enc itself; or stored:
    an append, a region) must read back as given; ValueError naming the variable, before
    any write; enc, the variable to write, is returned, its dask data checked block by
    block as it is computed (the same ValueError from the write). xarray's encoder casts to
    an integer dtype without a range check, so the values wrapped around (70000 into int16
    read back as 4464; 2100-01-01 into int32 seconds as 1963; NaN into an integer array
    without a fill value as its smallest integer).

    - Times (datetimes, timedeltas, cftime dates) written into a stored variable must be
      stored in its units, calendar and dtype: xarray's encoder switches to finer units
      where the stored ones cannot hold the times exactly (with only a
      SerializationWarning), while the stored array keeps its attributes: the times would
      read back as others (390 minutes as 390 hours). Into an integer, a native time or a
      float32/16 array, the values as the array will hold them, decoded as a reader
      decodes them, must be the times given (float32 seconds since 1970 hold times to
      about 2 minutes: 00:00:01 read back as 00:00:00).
    - Numbers written into an integer array must fall in its range once packed
      (scale_factor, add_offset), and NaN needs a _FillValue (or missing_value).
    - Into a float array, finite numbers must stay finite once packed and cast (1e300 into
      float32 read back as inf; rounding is no error); into a bool array, only 0 and 1 (NaN
      and 0.5 read back as True); into a real array, no imaginary parts (dropped).

    new: the variable to write, decoded; enc: it encoded as it will be stored; raw: the
    array's variable, undecoded (its attributes and dtype as stored)."""
    if new.dtype.kind in "mM" or contains_cftime_datetimes(new):
        check = _times_check(name, new, enc, raw)
    else:
        check = _numbers_check(name, new, raw)
    if check is None:
        return enc
    want = new.transpose(*enc.dims).data
    if not hasattr(enc.data, "dask"):
        check(np.asarray(enc.data), np.asarray(want))
        return enc
    import dask.array as dsa

    def checked(block: np.ndarray, want_block: np.ndarray) -> np.ndarray:
        check(block, np.asarray(want_block))
        return block

    want = want.rechunk(enc.data.chunks) if hasattr(want, "dask") else \
        dsa.from_array(np.asarray(want), chunks=enc.data.chunks)
    return enc.copy(data=dsa.map_blocks(checked, enc.data, want, dtype=enc.dtype))


def _times_check(name: str, new: Any, enc: Any, raw: Any) -> Any:
    """(see _check_written_values) ValueError where times need other units or another
    calendar than raw's; the check of their values, or None where none is needed."""
    stored_units, units = raw.attrs.get("units"), enc.attrs.get("units")
    if _units_key(units) != _units_key(stored_units):
        raise ValueError(
            f"variable {name!r}: its times need the units {units!r} to be stored exactly, "
            f"but the stored variable's units are {stored_units!r}: written in those units "
            f"they would read back as other times. Round them to what the stored units "
            f"hold, or rewrite the whole variable (mode 'w', or a new variable) in finer "
            f"units")
    stored_cal, cal = raw.attrs.get("calendar"), enc.attrs.get("calendar")
    if stored_cal is not None and cal is not None and \
            _CALENDAR_ALIASES.get(str(cal).lower(), str(cal).lower()) != \
            _CALENDAR_ALIASES.get(str(stored_cal).lower(), str(stored_cal).lower()):
        raise ValueError(f"variable {name!r}: its times are encoded in calendar {cal!r}, "
                         f"the stored variable's calendar is {stored_cal!r}")
    short_float = raw.dtype.kind == "f" and np.dtype(raw.dtype).itemsize < 8
    if raw.dtype.kind not in "iumM" and not short_float:
        # (float64 holds times to well under the units' precision, where a compare after
        # decoding could differ by rounding alone)
        return None
    timedelta = new.dtype.kind == "m"
    return lambda values, want: _check_times_held(name, enc.dims, values, want, raw,
                                                  timedelta)


def _numbers_check(name: str, new: Any, raw: Any) -> Any:
    """(see _check_written_values) The check of numbers new written into raw's array
    (integer, float, complex or bool), or None where none is needed: values of a dtype the
    array's holds whole, not packed, are not looked at."""
    dtype = np.dtype(raw.dtype)
    if new.dtype.kind not in "iufc" or dtype.kind not in "iufcb":
        return None
    packed = bool({"scale_factor", "add_offset", "_Unsigned"} &
                  (set(raw.attrs) | set(raw.encoding)))
    imaginary = new.dtype.kind == "c" and dtype.kind != "c"
    if dtype.kind == "b" or (dtype.kind in "iu" and raw.attrs.get("dtype") == "bool"):
        # (a bool variable, stored as such or as netCDF's int8 marked dtype: "bool")
        values_check = _bool_check(name, raw)
    elif dtype.kind in "iu":
        values_check = None if new.dtype == dtype and not packed else \
            _range_check(name, raw, new.attrs)
    else:
        values_check = None if np.can_cast(new.dtype, dtype, "safe") and not packed else \
            _overflow_check(name, raw)
    if not imaginary and values_check is None:
        return None

    def check(values: np.ndarray, want: np.ndarray) -> None:
        if imaginary and want.dtype.kind == "c":
            at = want.imag != 0  # (NaN too: lost as well)
            if at.any():
                bad = want[at][0]
                raise ValueError(
                    f"variable {name!r}: {bad} has an imaginary part, which its {dtype} "
                    f"array cannot hold: it would read back as {bad.real}. Write real "
                    f"values (.real, where that is meant), or rewrite the variable (mode "
                    f"'w', or a new variable) with a complex dtype")
            want = want.real
        if values_check is not None:
            values_check(values, want)

    return check


def _packing(scale: Any, offset: Any) -> str:
    """" (packed by scale_factor ..., add_offset ...)" where a variable is packed, else ""."""
    if scale is None and offset is None:
        return ""
    return f" (packed by scale_factor {scale!r}, add_offset {offset!r})"


def _bool_check(name: str, raw: Any) -> Any:
    """(see _check_written_values) The check that numbers written into raw's bool array are
    0 or 1 (NaN only where raw has a _FillValue or missing_value): NumPy's cast makes any
    other True, NaN too."""
    attrs = {**raw.encoding, **raw.attrs}
    masked = attrs.get("_FillValue") is not None or attrs.get("missing_value") is not None

    def check(values: np.ndarray, want: np.ndarray) -> None:
        nan = np.isnan(want) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
        at = (want != 0) & (want != 1) & ~(nan & masked)
        if not at.any():
            return
        bad = want[at][0]
        what = ("NaN cannot be stored in its bool array, which has no _FillValue"
                if np.isnan(bad) else f"{bad} cannot be stored in its bool array, which "
                                      f"holds 0 and 1 (False and True) only")
        raise ValueError(f"variable {name!r}: {what}: it would read back as True. Write "
                         f"booleans (or 0 and 1), or rewrite the variable (mode 'w', or a "
                         f"new variable) with a numeric dtype")

    return check


def _overflow_check(name: str, raw: Any) -> Any:
    """(see _check_written_values) The check that finite numbers stay finite in raw's float
    (or complex) array, as they will be stored: values, encoded (packed) and cast to its
    dtype (xarray's cast gives inf without a word). Rounding is no error; NaN and inf stay
    as given."""
    dtype = np.dtype(raw.dtype)
    attrs = {**raw.encoding, **raw.attrs}
    scale, offset = attrs.get("scale_factor"), attrs.get("add_offset")

    def check(values: np.ndarray, want: np.ndarray) -> None:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            stored = np.asarray(values).astype(dtype)
        parts = [(stored, want)] if dtype.kind != "c" else \
            [(stored.real, want.real), (stored.imag, want.imag)]
        for held, given in parts:
            at = np.isinf(held) & np.isfinite(given)
            if at.any():
                raise ValueError(
                    f"variable {name!r}: {want[at][0]} does not fit its {dtype} array"
                    f"{_packing(scale, offset)}, whose largest magnitude is {np.finfo(dtype).max}: it would "
                    f"read back as {held[at][0]}. Write values in that range, or rewrite the "
                    f"variable (mode 'w', or a new variable) with a wider dtype")

    return check


def _range_check(name: str, raw: Any, given: Any) -> Any:
    """(see _check_written_values) The check that numbers, packed by raw's scale_factor
    and add_offset and rounded as xarray's encoder rounds them, fit raw's integer dtype,
    and that NaN is written only where raw has a _FillValue or missing_value. given: the
    written variable's own attributes (data given with its packing attributes, say opened
    with decode_cf=False, is written as it is: not packed)."""
    dtype = np.dtype(raw.dtype)
    attrs = {**raw.encoding, **raw.attrs}  # (a new variable's _Unsigned is in its encoding)
    for k in ("scale_factor", "add_offset", "_Unsigned"):
        if k in given:
            attrs.pop(k, None)
    unsigned = str(attrs.get("_Unsigned", "")).lower()
    if dtype.kind == "i" and unsigned == "true":  # (netCDF's unsigned bytes in signed ones)
        dtype = np.dtype(f"u{dtype.itemsize}")
    elif dtype.kind == "u" and unsigned == "false":
        dtype = np.dtype(f"i{dtype.itemsize}")
    info = np.iinfo(dtype)
    scale, offset = attrs.get("scale_factor"), attrs.get("add_offset")
    masked = attrs.get("_FillValue") is not None or attrs.get("missing_value") is not None

    def check(values: np.ndarray, want: np.ndarray) -> None:
        if not want.size:
            return
        if want.dtype.kind in "iu" and scale is None and offset is None:
            lo, hi = int(want.min()), int(want.max())  # (exactly: int64 is not a float's)
            bad = None if info.min <= lo and hi <= info.max else (lo if lo < info.min else hi)
        else:
            u = want.astype(np.float64)
            if offset is not None:
                u = u - float(np.asarray(offset))
            if scale is not None:
                u = u / float(np.asarray(scale))
            nan = np.isnan(u)
            if nan.any() and not masked:
                raise ValueError(
                    f"variable {name!r}: NaN cannot be stored in its {dtype} array, which has "
                    f"no _FillValue: it would read back as a number. Give it a _FillValue "
                    f"in encoding=, or write a float dtype")
            r = np.around(u[~nan])
            out = (r < info.min) | (r > info.max)
            bad = want[~nan][out][0] if out.any() else None
        if bad is not None:
            raise ValueError(
                f"variable {name!r}: {bad} does not fit its {dtype} array"
                f"{_packing(scale, offset)}, whose "
                f"range is {info.min}..{info.max}: it would read back as another number. "
                f"Write values in that range, or rewrite the variable (mode 'w', or a new "
                f"variable) with another dtype or packing")

    return check


def _check_times_held(name: str, dims: Any, values: np.ndarray, want: np.ndarray, raw: Any,
                      timedelta: bool) -> None:
    """ValueError naming variable name where encoded times values, cast to the stored
    variable raw's dtype and decoded by its attributes, are not the times want."""
    stored_units = raw.attrs.get("units")
    held = xr.Variable(dims, values.astype(raw.dtype), attrs=raw.attrs)
    try:
        back = np.asarray(conventions.decode_cf_variable(
            name, held, decode_timedelta=timedelta).values)
    except (ValueError, OverflowError, TypeError, pd.errors.OutOfBoundsDatetime) as e:
        raise ValueError(f"variable {name!r}: its times cannot be stored in the stored "
                         f"array ({raw.dtype}, units {stored_units!r}): {e}") from e
    same = _same_times(back, want)
    if same.shape != want.shape or not same.all():
        at = tuple(np.argwhere(~same)[0]) if same.shape == want.shape else ()
        raise ValueError(f"variable {name!r}: its times do not fit the stored array "
                         f"({raw.dtype}, units {stored_units!r}): {want[at]} would read "
                         f"back as {back[at] if back.shape == want.shape else back}. Write "
                         f"times that the stored dtype and units hold, or rewrite the "
                         f"whole variable (mode 'w', or a new variable) with another "
                         f"encoding")


def _same_times(back: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where times back (as read back) equal times want (as given): NaT equals NaT, and
    NumPy datetimes equal cftime dates of the same fields (NumPy datetimes written into a
    variable of a cftime calendar read back as cftime dates)."""
    if back.shape != want.shape:
        return np.zeros(want.shape, dtype=bool)
    if back.dtype.kind in "mM" and want.dtype.kind in "mM":
        return np.asarray((back == want) | (np.isnat(back) & np.isnat(want)), dtype=bool)
    if back.dtype.kind == "m" or want.dtype.kind == "m":
        return np.zeros(want.shape, dtype=bool)

    def fields(t: Any) -> Any:
        if t is None or (isinstance(t, np.datetime64) and np.isnat(t)) or t is pd.NaT:
            return None
        if isinstance(t, np.datetime64):
            t = pd.Timestamp(t)
        return (t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond,
                getattr(t, "nanosecond", 0))

    out = np.zeros(want.shape, dtype=bool)
    for i in np.ndindex(want.shape):
        try:
            out[i] = fields(back[i]) == fields(want[i])
        except (TypeError, ValueError, OverflowError, AttributeError):
            pass  # (not a time: not the same)
    return out


def _check_attrs(attrs: dict, where: str) -> None:
    """TypeError (xarray's words) where an attribute cannot be stored as JSON, before any
    write."""
    try:
        json.dumps({k: encode_zarr_attr_value(v) for k, v in attrs.items()}, allow_nan=True,
                   default=json_default)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Invalid attribute in Dataset.attrs. In {where}: {e}") from e


def _check_append_dtype(name, raw, old, new):
    """Data written into a stored variable must fit its stored type (raw: as stored; old:
    decoded), as xarray's ``_validate_datatypes_for_zarr_append`` checks it: numbers, bools,
    times and objects go anywhere (their values are checked by _check_written_values),
    anything else only into its own dtype; ValueError in xarray's words, naming the
    variable. Two differences: fixed-width strings go into narrower-or-equal ones of their
    kind (wider would be cut; xarray takes only the same width), and an object array of
    strings only into strings (NumPy's cast turned "7" into 7.0, and xarray lets it)."""
    if raw.dtype.kind in "SU" and _chars(new) > _chars(raw):
        raise ValueError(f"Mismatched dtypes for variable {name!r}: it holds strings of up "
                         f"to {_chars(new)} characters, but the stored array's dtype "
                         f"{raw.dtype} holds {_chars(raw)}: they would be truncated; rewrite "
                         f"the variable (mode 'w') with the wider dtype")
    easy = (np.issubdtype(new.dtype, np.number) or np.issubdtype(new.dtype, np.datetime64)
            or np.issubdtype(new.dtype, np.timedelta64) or new.dtype == bool
            or (new.dtype == object and (old.dtype.kind in "SUO" or not _holds_strings(new)))
            or (new.dtype.kind in "SU" and old.dtype == object))
    same_kind = new.dtype.kind in "SU" and new.dtype.kind == old.dtype.kind
    if not easy and not same_kind and new.dtype != old.dtype:
        raise ValueError(f"Mismatched dtypes for variable {name!r} between Zarr store on disk "
                         f"and dataset to append. Store has dtype {old.dtype} but dataset to "
                         f"append has dtype {new.dtype}.")


def _holds_strings(var: Any) -> bool:
    """Whether var holds strings or bytes: fixed-width ones, or an object array whose first
    element that is not missing is one (as xarray's encoder infers an object array's
    type)."""
    kind = var.dtype.kind
    if kind in "SU":
        return True
    if kind != "O" or not var.size:
        return False
    if check_vlen_dtype(var.dtype) in (str, bytes):
        return True
    # (dask data computed: its first element may be missing, as the first of NumPy's is
    # looked past; xarray's encoder computes a dask object array whole anyway)
    flat = np.asarray(var.data, dtype=object).ravel()
    first = flat[~pd.isnull(flat)][:1]
    return bool(first.size) and isinstance(first[0], (str, bytes))


def _chars(var: Any) -> int:
    """The characters of the longest string var holds or can hold: a fixed-width dtype's
    width (S: bytes, U: 4 bytes each), the longest element of an object array; 0 for
    anything else."""
    kind = var.dtype.kind
    if kind in "SU":
        return int(var.dtype.itemsize // (4 if kind == "U" else 1))
    if kind == "O" and var.size:
        return max((len(v) for v in np.asarray(var.values).ravel()
                    if isinstance(v, (str, bytes))), default=0)
    return 0


def _check_region_edges(p: dict) -> None:
    """A region write (mode "r+") of a dask variable whose region starts inside a stored
    chunk (a shard, where the array is sharded), or ends inside one short of the array's
    end, is refused, as xarray's zarr backend refuses it with safe_chunks=True: the rest of
    that chunk is someone else's region, and two processes writing one chunk at once lose
    each other's updates (chunkstore's locks serialize the writers of one process only).
    Dask chunks inside the region are rechunked to the grid instead (every stored block
    written by one task). ValueError naming the variable, the dimension and the grid. With
    a ProcessSynchronizer (to_chunkstore's synchronizer=, or the Group's), the writers of a
    chunk are serialized across processes too: nothing to refuse."""
    data = p["data"]
    if p["action"] != "write" or not hasattr(data, "dask"):
        return
    z = p["stored"]
    from chunkstore.sync.synchronizers import ProcessSynchronizer
    if isinstance(z.synchronizer, ProcessSynchronizer):
        return
    for axis, (dim, sel) in enumerate(zip(p["dims"], p["region"])):
        size, grid = z.shape[axis], z.write_chunks[axis]
        start, stop, _ = sel.indices(size)
        if stop <= start or grid <= 0:
            continue
        if start % grid or (stop % grid and stop != size):
            raise ValueError(
                f"Specified Zarr chunks encoding['chunks']={tuple(z.chunks)!r} for variable "
                f"named {p['name']!r} would overlap multiple Dask chunks: the region "
                f"{dim}={slice(start, stop)} cuts the blocks stored whole (chunks, or "
                f"shards where sharded) of {grid} along {dim!r} (length {size}), whose "
                f"other part another write may be writing at the same time, and one of the "
                f"two would be lost. Align the region to those blocks, pass a "
                f"ProcessSynchronizer (synchronizer=) that every writer uses, or pass "
                f"safe_chunks=False (or align_chunks=True) where no other process writes "
                f"them meanwhile.")


def _check_kept_dimensions(store: ChunkstoreWritableDataStore, plans: dict) -> None:
    """mode "a" writes the variables given (created, replaced, appended to or written into)
    and keeps the others: after it every dimension must have one length, or no engine can
    open the group. ValueError naming two variables that disagree, before any write: a
    replaced variable of another length than a kept one (xarray raises too), and what
    xarray's zarr engine accepts and leaves unopenable: an append that leaves out a stored
    variable of the append dimension, a new variable of an append shorter than the
    appended, a new variable of a region write (made the region's length)."""
    if all(p["action"] == "write" for p in plans.values()):
        return  # (stored variables written in place: no length changes; a region write
        # opened every other variable of the group for nothing)
    g = store.group
    sizes: dict = {}
    for name, p in plans.items():
        for d, n in zip(p["dims"], p["shape"]):  # (each plan's shape after the write)
            if d in sizes and sizes[d][0] != n:
                raise ValueError(
                    f"conflicting sizes for dimension {d!r}: {sizes[d][0]} in variable "
                    f"{sizes[d][1]!r}, {n} in variable {name!r} after this write "
                    f"(a new variable of an append or a region write is made only the "
                    f"appended or region's length); write them to the same length")
            sizes.setdefault(d, (n, name))
    kept = [n for n in g.array_keys() if n not in plans]
    for name in kept:
        try:
            stored = store.open_store_variable(name, g[name])
        except Exception:  # noqa: BLE001 - not an xarray variable: nothing to agree with
            continue
        for d, n in zip(stored.dims, stored.shape):
            if d in sizes and sizes[d][0] != n:
                raise ValueError(f"conflicting sizes for dimension {d!r}: {sizes[d][0]} in "
                                 f"variable {sizes[d][1]!r} after this write, {n} in the "
                                 f"stored variable {name!r}, which mode 'a' keeps; write both, "
                                 f"or use mode 'w'")


def _check_variable_name(name: Any) -> None:
    """A variable is an array named by its name in the group: the name must be a non-empty
    string naming one member ("" would be the group's own path, which a write with mode "a"
    would replace with every variable in it; "a/b" a member of a subgroup), or None, stored
    as xarray stores it (NONE_NAME). As xarray: TypeError for a name that is neither,
    ValueError for an empty one."""
    if name is None:
        return
    if not isinstance(name, str):
        raise TypeError(f"Invalid name {name!r} for DataArray or Dataset key: must be either "
                        f"a string or None for serialization to zarr files")
    if not name:
        raise ValueError(f"Invalid name {name!r} for DataArray or Dataset key: string must "
                         f"be length 1 or greater for serialization to zarr files")
    if name in (".", "..") or "/" in name:
        raise ValueError(f"invalid variable name {name!r}: it must not contain '/' or be "
                         f"'.' or '..' (it names the variable's array in the group)")


#: the array name of a variable named None (xarray's, which decodes it back to None)
NONE_NAME = "__values__"


def _stored_name(name: Any) -> str:
    return NONE_NAME if name is None else name
