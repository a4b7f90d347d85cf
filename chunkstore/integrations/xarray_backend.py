"""The xarray backend engine "chunkstore" (the reading half of chunkstore.integrations.xarray).

Reading follows xarray's own Zarr encoding conventions (dimension names from v3
`dimension_names` or the v2 `_ARRAY_DIMENSIONS` attribute; CF decoding of times,
scale/offset and `_FillValue` by xarray itself), so a store reads the same as through
`xr.open_zarr`, with one deliberate difference: in Zarr v2, xarray takes an array's
`fill_value` as its missing-value marker, and 0 is the default fill_value of zarr-python 2
and chunkstore; a dimension coordinate holding 0.0 would then read as NaN. Here a v2
dimension coordinate ignores a fill_value of 0 (pass use_zarr_fill_value_as_mask=True for
xarray's exact rule). Every other fill value masks as xarray does.

Variables are lazy: xarray's basic, outer and vectorised indexing map to the Array's
basic indexing, `oindex` and `vindex`, and only the chunks a selection touches are read.
"""

from __future__ import annotations

import base64
import binascii
import os
import warnings
from typing import Any

import numpy as np

from xarray import coding
from xarray.backends.common import AbstractWritableDataStore, BackendArray, BackendEntrypoint
from xarray.backends.store import StoreBackendEntrypoint
from xarray.backends.zarr import FillValueCoder
from xarray.core import indexing
from xarray.core.utils import FrozenDict
from xarray.core.variable import Variable

from chunkstore.aio.run import READ, array_off_loop
from chunkstore.engine.array import Array
from chunkstore.codecs.vlen_utf8 import VLenBytesCodec
from chunkstore.errors import (ArrayMetadataChangedError, ConsolidatedMetadataNotFoundError,
                               GroupNotFoundError,
                               MetadataError, PathNotFoundError, store_name)
from chunkstore.hierarchy.creation import normalize_path
from chunkstore.hierarchy.group import Group, open_consolidated, open_group
from chunkstore.metadata.formats import format_of
from chunkstore.storage.normalize import normalize_store

__all__ = ["ChunkstoreBackendEntrypoint", "ChunkstoreDataStore", "ChunkstoreBackendArray"]

DIMENSION_KEY = "_ARRAY_DIMENSIONS"


class MissingDimensionsError(MetadataError, KeyError):
    """An array whose dimensions are not named (no ``_ARRAY_DIMENSIONS`` in Zarr v2, no
    ``dimension_names`` in v3): a MetadataError, and a KeyError as xarray's zarr engine
    raises it."""

    def __str__(self) -> str:  # KeyError's would quote the message
        return str(self.args[0]) if self.args else ""


class ChunkstoreBackendArray(BackendArray):
    """One chunkstore Array as xarray's lazy backend array."""

    __slots__ = ("_array", "shape", "dtype", "_generation", "_opened")

    def __init__(self, array, attrs: dict | None = None):
        self._array = array
        self.shape = array.shape
        self.dtype = _xarray_dtype(array)
        # what the variable was decoded by (its CF encoding is in the attributes), checked
        # again where this process changed the array's metadata since (see _pinned)
        self._generation = array._handle.engine.generation
        self._opened = _identity(array, dict(array.attrs) if attrs is None else attrs)

    def get_array(self):
        """The chunkstore array this wraps."""
        return self._array

    def _reader(self, key):
        """(key, the Array method that reads it): vindex, oindex or basic indexing."""
        if isinstance(key, indexing.VectorizedIndexer):
            if any(isinstance(k, slice) for k in key.tuple):
                # vindex takes integer arrays only: a slice becomes its broadcast arange.
                key = indexing._arrayize_vectorized_indexer(key, self.shape)
            return key, self._vindex
        if isinstance(key, indexing.OuterIndexer):
            return key, self._oindex
        return key, self._getitem

    def __getitem__(self, key):
        key, method = self._reader(key)
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.VECTORIZED, method)

    async def async_getitem(self, key):
        """``__getitem__`` for ``Dataset.load_async``: the read runs in a worker thread (the
        same engine, which releases the GIL while it decodes), so the event loop is never
        blocked and several variables load concurrently."""
        key, method = self._reader(key)

        async def read(k):
            # as AsyncArray reads: one engine, off the loop, on the workers for its store
            return await array_off_loop(self._array.chunk_store, READ, method, k)

        return await indexing.async_explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.VECTORIZED, read)

    def _getitem(self, key):
        return self._as_ndarray(self._array[self._pinned(key)])

    def _oindex(self, key):
        return self._as_ndarray(self._array.oindex[self._pinned(key)])

    def _vindex(self, key):
        return self._as_ndarray(self._array.vindex[self._pinned(key)])

    def _pinned(self, key: tuple) -> tuple:
        """key with its slices and negative indices resolved against the shape the variable
        was opened with. The Array follows this process's appends and resizes of the array
        (its handle reloads the metadata), so `slice(None)` or `-1` would select by the new
        shape: rows past the variable's end, the values of coordinates it does not have.
        An index past a dimension that shrank since is an IndexError naming the array."""
        key = key if isinstance(key, tuple) else (key,)
        now = self._array.shape
        self._check_identity()
        if len(key) != len(self.shape):
            return key
        out = []
        for d, (k, n) in enumerate(zip(key, self.shape)):
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                r = range(start, stop, step)
                k = slice(r.start, r.stop if r.stop >= 0 else None, r.step)
                top = max(r[0], r[-1]) if len(r) else -1  # (O(1), not max(r))
            elif isinstance(k, (int, np.integer)):
                k = int(k) + n if k < 0 else int(k)
                top = k
            elif isinstance(k, np.ndarray) and k.dtype.kind in "iu":
                k = np.where(k < 0, k + n, k) if k.size else k
                top = int(k.max()) if k.size else -1
            else:
                top = -1  # a boolean mask: its length is checked by the read
            if top >= now[d] and top < n:
                raise IndexError(f"array {self._array.name!r}: dimension {d} is {now[d]} long "
                                 f"now, {n} when the dataset was opened (resized since: "
                                 f"open it again)")
            out.append(k)
        return tuple(out)

    def _check_identity(self) -> None:
        """Where this process changed the array's metadata since the variable was opened
        (a count compared, no I/O otherwise): its dtype, fill value and attributes must be
        those the variable was decoded by, else ArrayMetadataChangedError naming it. An
        array re-created (``to_chunkstore(mode="w")``) with another CF encoding was read raw
        and decoded by the old attributes: packed int16 values without their scale_factor,
        day counts as hours."""
        generation = self._array._handle.engine.generation
        if generation == self._generation:
            return
        if _identity(self._array, dict(self._array.attrs)) != self._opened:
            raise ArrayMetadataChangedError(
                f"array {self._array.name!r} in {store_name(self._array.store)} was replaced "
                f"since the dataset was opened (another dtype, fill value or attributes): "
                f"open the dataset again")
        self._generation = generation

    def _as_ndarray(self, result):
        """result as an ndarray of the array's dtype: an all-integer key gives a scalar, from
        which xarray would infer a new dtype ('<U1' for a '<U3' string)."""
        if isinstance(result, np.ndarray):
            return result
        # assigned, not np.asarray: an object element that is a sequence stays one element
        out = np.empty((), dtype=self._array.dtype)
        out[()] = result
        return out


# the attributes xarray decodes a variable by (CF conventions, xarray's own keys)
_DECODING = ("_FillValue", "missing_value", "scale_factor", "add_offset", "units",
             "calendar", "dtype", "_Unsigned", "_Encoding", "coordinates", "grid_mapping")


def _identity(array, attrs: dict) -> tuple:
    """What a variable is decoded by: the array's dtype, fill value and decoding attributes
    (as JSON text: NaN equals NaN there). Other attributes (history, title) may change."""
    import json
    return (array.dtype.str, repr(array.fill_value),
            json.dumps({k: attrs[k] for k in _DECODING if k in attrs}, sort_keys=True,
                       default=repr))


def _xarray_dtype(array):
    # Object arrays hold variable-length strings; xarray marks them with a vlen dtype.
    if array.dtype.hasobject:
        # (Zarr v2: the object codec is the first filter; v3: the serializer is)
        ids = {getattr(f, "codec_id", None) for f in (array.filters or [])}
        vlen_bytes = "vlen-bytes" in ids or isinstance(array.serializer, VLenBytesCodec)
        return coding.strings.create_vlen_dtype(bytes if vlen_bytes else str)
    return array.dtype


class ChunkstoreDataStore(AbstractWritableDataStore):
    """The arrays of one chunkstore Group as xarray variables (reading; the writing half is
    ChunkstoreWritableDataStore)."""

    __slots__ = ("group", "_close_store", "_mask", "_member_names", "_dropped")

    def __init__(self, group, close_store=False, use_zarr_fill_value_as_mask=None,
                 cache_members=False):
        self.group = group
        self._close_store = close_store
        self._mask = use_zarr_fill_value_as_mask
        # xarray's ZarrStore(cache_members=True): array_keys() answers with the arrays the
        # group held when opened (None: ask the group each time)
        self._member_names = tuple(group.array_keys()) if cache_members else None
        # names of arrays never opened (open_dataset's drop_variables): one chunkstore or
        # xarray cannot decode then keeps nobody from opening the rest of the group
        self._dropped = frozenset()

    def drop(self, names: Any) -> None:
        """Leave the arrays *names* (a name, or an iterable of names; None: none) out of the
        variables and dimensions read from here on (``open_dataset(drop_variables=)``): they
        are never opened, so one that cannot be decoded does not stop the rest."""
        if names is None:
            self._dropped = frozenset()
        elif isinstance(names, str):
            self._dropped = frozenset([names])
        else:
            self._dropped = frozenset(names)

    @property
    def zarr_group(self):
        """The chunkstore Group read (xarray's ``ZarrStore.zarr_group``)."""
        return self.group

    def array_keys(self) -> tuple:
        """The names of the group's arrays: those it held when this store was opened with
        ``cache_members=True`` (xarray's ``ZarrStore.array_keys``), else its current ones."""
        if self._member_names is not None:
            return self._member_names
        return tuple(self.group.array_keys())

    @classmethod
    def open(cls, store, group=None, consolidated=None, storage_options=None,
             use_zarr_fill_value_as_mask=None, zarr_format=None):
        """Open the group at path `group` in store (a path, URL, store or Group); with
        zarr_format, only a group of that Zarr format.

        group is taken as xarray's zarr engine takes it: ``"/g1/sub"`` is ``"g1/sub"``, and
        ``"/"`` (or None, ``""``) the root (for a Group: that group).
        """
        path = normalize_path(group)
        if isinstance(store, Group):
            if path:
                store = store[path]
            return cls(store, use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask)
        s = normalize_store(store, mode="r", storage_options=storage_options)
        owned = s is not store
        try:
            g = _open_group(s, path, consolidated, zarr_format)
        except BaseException:
            if owned and hasattr(s, "close"):
                s.close()
            raise
        return cls(g, close_store=owned, use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask)

    @property
    def ds(self):
        """The chunkstore Group read (xarray's ``ZarrStore.ds``)."""
        return self.group

    def get_child_store(self, name):
        """A data store for the subgroup *name* of this group (sharing this store's masking
        setting).
        """
        return type(self)(self.group[name], use_zarr_fill_value_as_mask=self._mask)

    def _arrays(self):
        out = []
        for name in self.group.array_keys():
            if name in self._dropped:
                continue
            try:
                out.append((name, self.group[name]))
            except MetadataError as e:
                # An array chunkstore cannot read (a data type it does not know) does not
                # keep the group from opening: it becomes a variable that raises when read.
                out.append((name, _unreadable(self.group, name, e)))
        return out

    def open_store_variable(self, name, array):
        """The array *array* (named *name*) as a lazily indexed xarray ``Variable``.

        Its dimensions come from ``dimension_names`` (Zarr v3) or the ``_ARRAY_DIMENSIONS``
        attribute (Zarr v2); chunks, shards and (where not used as a mask) the fill value go into
        the encoding. Raises :class:`~chunkstore.errors.MetadataError` where the dimension names are
        missing.
        """
        if isinstance(array, UnreadableArray):
            return Variable(array.dims, indexing.LazilyIndexedArray(array), array.attrs)
        dims, attrs = _dims_and_attrs(array)
        data = indexing.LazilyIndexedArray(ChunkstoreBackendArray(array))
        chunks = tuple(array.chunks)
        # as xarray's zarr engine reports them: shards None when unsharded, the codecs as
        # zarr-python 3's properties give them (so a dataset written again keeps them)
        encoding = {"chunks": chunks, "preferred_chunks": dict(zip(dims, chunks)),
                    "compressors": array.compressors, "filters": array.filters,
                    "shards": array.shards}  # None when unsharded, as in xarray's backend
        fmt = format_of(array.zarr_format)
        if array.serializer is not None:  # Zarr v3's array -> bytes codec
            encoding["serializer"] = array.serializer
        mask = self._mask if self._mask is not None else fmt.fill_value_masks
        if mask:
            fv = array.fill_value
            default_zero = (self._mask is None and fv is not None and
                            not array.dtype.hasobject and fv == 0)
            if fv is not None and not (default_zero and tuple(dims) == (name,)):
                attrs["_FillValue"] = fv
        else:
            if not fmt.fill_value_masks:  # the Zarr fill value, kept apart from CF's
                encoding["fill_value"] = array.fill_value
            if "_FillValue" in attrs:
                attrs["_FillValue"] = _decode_cf_fill(attrs["_FillValue"], array)
        return Variable(dims, data, attrs, encoding)

    def get_variables(self):
        """A ``FrozenDict`` of the group's arrays as xarray variables, by name."""
        return FrozenDict((name, self.open_store_variable(name, a)) for name, a in self._arrays())

    def get_attrs(self):
        """The group's attributes, less those whose names start with ``_nc`` (in any case)."""
        return {k: v for k, v in dict(self.group.attrs).items()
                if not k.lower().startswith("_nc")}

    def get_dimensions(self):
        """``{dimension name: length}`` over the group's arrays.

        Raises ``ValueError`` where two arrays give one dimension different lengths.
        """
        dims, owner = {}, {}
        for name, a in self._arrays():
            names = a.dims if isinstance(a, UnreadableArray) else _dims_and_attrs(a)[0]
            for d, n in zip(names, a.shape):
                if d in dims and dims[d] != n:
                    raise ValueError(f"dimension {d!r} has length {dims[d]} in array "
                                     f"{owner[d]!r} but {n} in array {name!r} of group "
                                     f"{self.group.name!r}")
                dims[d], owner[d] = n, name
        return dims

    def close(self):
        """Close the underlying store, if this data store opened it."""
        if self._close_store:
            close = getattr(self.group.store, "close", None)
            if close is not None:
                close()


def _open_group(store, path: str, consolidated: bool | None,
                zarr_format: int | None = None) -> Group:
    """The group at path (normalised; zarr_format: only one of that format), read as xarray's
    zarr engine reads it.

    consolidated None or True: through the consolidated metadata of the store's root,
    walking down to path. Where the root has none (or it does not list the group), None
    reads the members' own documents, with xarray's RuntimeWarning, and True raises
    ConsolidatedMetadataNotFoundError, as xarray's engine does (a group's own consolidated
    metadata is not read instead: xarray's appends through the root leave it stale, and
    its rows would be missing). False: the members' own documents.
    """
    if consolidated is False:
        return open_group(store, mode="r", path=path, zarr_format=zarr_format)
    g = _group_from_root_consolidated(store, path, zarr_format)
    if g is not None:
        return g
    if consolidated:
        raise ConsolidatedMetadataNotFoundError(
            f"consolidated=True, but the root of {store_name(store)} has no consolidated "
            f"metadata listing group {path!r} (a group is read through the root's, as "
            f"xarray's zarr engine reads it); open with consolidated=None or False")
    g = open_group(store, mode="r", path=path, zarr_format=zarr_format)
    _warn(_NOT_CONSOLIDATED)  # as xarray's zarr engine, for consolidated=None
    return g


def _group_from_root_consolidated(store, path: str, zarr_format: int | None) -> Group | None:
    """The group at path read through the root's consolidated metadata, or None where the
    root has none (nor a group of zarr_format) or its consolidated metadata does not list
    the group.

    The root's, not the group's own: xarray's to_zarr(group=...) consolidates only the root
    again, so a group's own document (written by to_zarr of the group's path, or by
    to_chunkstore) misses whatever such an append added.
    """
    try:
        root = open_consolidated(store, mode="r", zarr_format=zarr_format)
    except PathNotFoundError:  # no consolidated metadata, or no root group of zarr_format
        return None
    node = root
    if path:
        if not isinstance(root, Group):
            return None  # (the root is an array: open_group names what is at path)
        try:
            node = root[path]
        except KeyError:  # a group made after the root was consolidated
            return None
    if not isinstance(node, Group):
        raise GroupNotFoundError(f"path {path!r} in {store_name(store)} holds an array, not "
                                 f"a group")
    return node


#: xarray's zarr engine's words when consolidated=None finds no consolidated metadata
_NOT_CONSOLIDATED = (
    "Failed to open Zarr store with consolidated metadata, but successfully read with "
    "non-consolidated metadata. This is typically much slower for opening a dataset. To "
    "silence this warning, consider:\n1. Consolidating metadata in this existing store with "
    "chunkstore.consolidate_metadata().\n2. Explicitly setting consolidated=False, to avoid "
    "trying to read consolidate metadata, or\n3. Explicitly setting consolidated=True, to "
    "raise an error in this case instead of falling back to try reading non-consolidated "
    "metadata.")


def _warn(message: str) -> None:
    """A RuntimeWarning pointing at the user's call (past xarray's and our frames)."""
    try:
        from xarray.core.utils import emit_user_level_warning
    except ImportError:  # pragma: no cover - an xarray without it
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        return
    emit_user_level_warning(message, RuntimeWarning)


class UnreadableArray(BackendArray):
    """An array of a group whose metadata chunkstore cannot read (say a data type it does not
    know): a variable of its stored shape and dimension names, which raises a
    MetadataError naming the array (and why) when its values are read. Dropping it
    (``drop_variables``) or never reading it leaves the rest of the group usable."""

    __slots__ = ("name", "shape", "dtype", "dims", "attrs", "error")

    def __init__(self, name: str, shape: tuple, dims: tuple, attrs: dict,
                 error: Exception) -> None:
        self.name, self.shape, self.dims, self.attrs, self.error = (name, shape, dims, attrs,
                                                                    error)
        # raw bytes: a dtype xarray's decoding never looks into (it reads the first element
        # of an object variable, which would raise before anyone asked for the values)
        self.dtype = np.dtype("V1")

    def __getitem__(self, key):
        raise MetadataError(f"array {self.name!r} cannot be read: {self.error}")


def _unreadable(group: Group, name: str, error: Exception) -> UnreadableArray:
    """An UnreadableArray for member name of group, its shape and dimension names taken
    from the raw metadata document (Zarr v3 zarr.json, or v2 .zarray and .zattrs)."""
    import json
    store, prefix = group.store, (group.path + "/" if group.path else "") + name
    shape: tuple = ()
    dims: tuple | None = None
    attrs: dict = {}
    for key in (prefix + "/zarr.json", prefix + "/.zarray"):
        try:
            doc = json.loads(bytes(store[key]))
        except (KeyError, ValueError):
            continue
        shape = tuple(int(n) for n in doc.get("shape", ()))
        if doc.get("dimension_names"):
            dims = tuple(doc["dimension_names"])
        attrs = dict(doc.get("attributes") or {})
        try:
            attrs.update(json.loads(bytes(store[prefix + "/.zattrs"])))
        except (KeyError, ValueError):
            pass
        break
    if dims is None:
        dims = tuple(attrs.pop(DIMENSION_KEY, None) or
                     (f"{name}_dim_{i}" for i in range(len(shape))))
    attrs.pop(DIMENSION_KEY, None)
    return UnreadableArray(name, shape, dims, attrs, error)


def _dims_and_attrs(array):
    attrs = dict(array.attrs)
    if format_of(array.zarr_format).dimension_names_in_metadata:
        dims = array.layout.metadata.dimension_names
        if array.ndim == 0:
            dims = ()  # a scalar (a CF grid mapping such as crs) names no dimension
        if dims is None or any(d is None for d in dims):
            raise MissingDimensionsError(f"array {array.path!r} has no dimension_names in its "
                                         f"metadata; xarray needs a name for every "
                                         f"dimension")
        attrs.pop(DIMENSION_KEY, None)
        return tuple(dims), attrs
    try:
        dims = attrs.pop(DIMENSION_KEY)
    except KeyError:
        if array.ndim == 0:
            return (), attrs
        raise MissingDimensionsError(f"array {array.path!r} has no {DIMENSION_KEY!r} "
                                     f"attribute, which xarray needs to name its "
                                     f"dimensions") from None
    if not isinstance(dims, list) or not all(isinstance(d, str) for d in dims):
        # (a string would be taken letter by letter: "xy" as dimensions x and y)
        raise MetadataError(f"array {array.path!r}: {DIMENSION_KEY} must be a list of "
                            f"dimension names (strings), got {dims!r}")
    if len(dims) != array.ndim:
        raise MetadataError(f"array {array.path!r} has {array.ndim} dimensions but "
                            f"{DIMENSION_KEY} names {len(dims)}: {dims!r}")
    for k in [k for k in attrs if k.lower().startswith("_nc")]:
        del attrs[k]
    return tuple(dims), attrs


def _decode_cf_fill(value: Any, array: Any) -> Any:
    """The CF ``_FillValue`` attribute *value* of a Zarr v3 array (where the Zarr fill value is
    not the mask) as xarray's zarr engine decodes it, and also for fixed-width bytes (``|S``),
    which xarray's writers encode (base64) but its reader refuses. Raises a ValueError naming
    the array where it cannot be decoded."""
    dtype = array.dtype
    try:
        if dtype.hasobject:
            return FillValueCoder.decode(value, "string")
        if dtype.kind in "SV" and isinstance(value, str):
            return np.array(base64.standard_b64decode(value), dtype=dtype)[()]
        if dtype.kind == "U":
            return np.array(value, dtype=dtype)[()]
        return FillValueCoder.decode(value, dtype)
    except (ValueError, TypeError, binascii.Error) as e:
        raise ValueError(f"array {array.path!r}: its _FillValue attribute {value!r} cannot be "
                         f"decoded for data type {dtype}: {e}") from None


def _normalize_path(obj):
    return os.fspath(obj) if isinstance(obj, os.PathLike) else obj


class ChunkstoreBackendEntrypoint(BackendEntrypoint):
    """xarray engine "chunkstore": Zarr v2 and v3 groups read through chunkstore."""

    description = "Open Zarr v2/v3 stores (.zarr, zip, sqlite, lmdb, fsspec URLs) with chunkstore"
    url = "https://github.com/chunkstore/chunkstore#xarray"
    supports_groups = True
    open_dataset_parameters = ("filename_or_obj", "mask_and_scale", "decode_times",
                               "concat_characters", "decode_coords", "drop_variables",
                               "use_cftime", "decode_timedelta", "group", "consolidated",
                               "storage_options", "use_zarr_fill_value_as_mask", "mode",
                               "zarr_format", "zarr_version", "store", "engine",
                               "cache_members")

    def guess_can_open(self, filename_or_obj):
        """Always False: the engine is used only when asked for (``engine="chunkstore"``)."""
        # Never claim a file on a guess: installing chunkstore must not change what
        # xr.open_dataset does for users who did not ask for engine="chunkstore".
        return False

    def _decode(self, store, mask_and_scale, decode_times, concat_characters, decode_coords,
                drop_variables, use_cftime, decode_timedelta):
        try:
            store.drop(drop_variables)
            return StoreBackendEntrypoint().open_dataset(
                store, mask_and_scale=mask_and_scale, decode_times=decode_times,
                concat_characters=concat_characters, decode_coords=decode_coords,
                drop_variables=drop_variables, use_cftime=use_cftime,
                decode_timedelta=decode_timedelta)
        except BaseException:
            store.close()
            raise

    def open_dataset(self, filename_or_obj, *, mask_and_scale=True, decode_times=True,
                     concat_characters=True, decode_coords=True, drop_variables=None,
                     use_cftime=None, decode_timedelta=None, group=None, consolidated=None,
                     storage_options=None, use_zarr_fill_value_as_mask=None, mode="r",
                     zarr_format=None, zarr_version=None, store=None, engine=None,
                     cache_members=True):
        """Open the group *group* of a Zarr hierarchy as an ``xarray.Dataset``.

        The decoding arguments (``mask_and_scale``, ``decode_times``, ...) are xarray's.

        Parameters
        ----------
        filename_or_obj : str, os.PathLike, store or Group
            Where the Zarr hierarchy is: a path, an fsspec URL, a store or a chunkstore Group.
        group : str, optional
            Path of the group to open within it (default: the root); ``"/g1/sub"`` is
            ``"g1/sub"`` and ``"/"`` the root, as in xarray's zarr engine.
        consolidated : bool, optional
            Read consolidated metadata (None: use it where present). As xarray's zarr engine,
            the root's, through which a group is found; where the root has none, None reads
            the members' own metadata (with a RuntimeWarning) and True raises
            ConsolidatedMetadataNotFoundError.
        storage_options : dict, optional
            Keyword arguments for the fsspec filesystem of a URL.
        use_zarr_fill_value_as_mask : bool, optional
            Mask the Zarr fill value as missing data (None: for Zarr v2 only, as xarray does).
        mode : {"r", "r+", "a"}
            As the zarr engine's: the data is read either way.
        zarr_format : {2, 3}, optional
            Open only a group of this Zarr format (``zarr_version``: its old name).
        store : ChunkstoreDataStore, optional
            An already opened data store to read instead of filename_or_obj.
        engine, cache_members :
            Accepted as the zarr engine accepts them; chunkstore reads each member once, so
            there is no member cache to turn off.
        """
        if mode not in ("r", "r+", "a"):
            raise ValueError(f"mode must be 'r', 'r+' or 'a' to open a dataset, got {mode!r}")
        if zarr_format is None:
            zarr_format = zarr_version
        if store is None:
            store = ChunkstoreDataStore.open(
                _normalize_path(filename_or_obj), group=group, consolidated=consolidated,
                storage_options=storage_options,
                use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
                zarr_format=zarr_format)
        return self._decode(store, mask_and_scale, decode_times, concat_characters,
                            decode_coords, drop_variables, use_cftime, decode_timedelta)

    def open_groups_as_dict(self, filename_or_obj, *, group=None, consolidated=None,
                            storage_options=None, use_zarr_fill_value_as_mask=None,
                            **decode):
        """Open the group *group* and every group below it as ``{path: xarray.Dataset}``.

        Paths start at ``"/"`` for the group opened; the decoding arguments are xarray's, given by
        keyword.

        The other arguments as :meth:`open_dataset`'s.
        """
        root = ChunkstoreDataStore.open(_normalize_path(filename_or_obj), group=group,
                                        consolidated=consolidated,
                                        storage_options=storage_options,
                                        use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask)
        args = [decode.get(k, d) for k, d in (
            ("mask_and_scale", True), ("decode_times", True), ("concat_characters", True),
            ("decode_coords", True), ("drop_variables", None), ("use_cftime", None),
            ("decode_timedelta", None))]
        out = {}

        def walk(store, path):
            out[path] = self._decode(store, *args)
            for name in store.group.group_keys():
                walk(store.get_child_store(name), f"{path.rstrip('/')}/{name}")

        try:
            walk(root, "/")
        except BaseException:
            root.close()
            raise
        return out

    def open_datatree(self, filename_or_obj, **kwargs):
        """Open the group and its subgroups as an ``xarray.DataTree`` (arguments as
        :meth:`open_groups_as_dict`).
        """
        from xarray.backends.common import datatree_from_dict_with_io_cleanup
        return datatree_from_dict_with_io_cleanup(
            self.open_groups_as_dict(filename_or_obj, **kwargs))
