"""zarr-python 2's Array extras: lazy views (`view`, `astype`), `islice`, and the content
digest (`digest`, `hexdigest`).

A view is an Array over the same stored chunks whose metadata is overridden in memory only
(shape, chunks, dtype, fill value, filters): chunks are decoded and encoded with the view's
metadata, and nothing it changes is ever written back as metadata.
"""

from __future__ import annotations

import binascii
import dataclasses
import hashlib
import itertools

import numpy as np

from chunkstore.hierarchy import nodes
from chunkstore.storage.base import getitems

# Chunk keys fetched per batch while hashing: bounded memory, few round trips.
_DIGEST_BATCH = 256


class _ViewOverrides:
    """Mixed in front of the Array class for a view (see `ArrayExtras.view`).

    Reads and writes go to the base array's chunks, decoded and encoded with the overridden
    metadata. Metadata changes (resize, append, setting fill_value) raise PermissionError, as
    they do on zarr-python 2's views: they would write the view's metadata over the base's."""

    _overrides = None

    def _load_metadata(self):
        super()._load_metadata()
        self._set_meta(_overridden(self._meta, self._overrides, self.name))

    def _write_metadata(self, meta):
        raise PermissionError(f"operation not permitted for views (array {self.name!r}): "
                              f"it would change the stored metadata")

    def resize(self, *shape):
        self._write_metadata(None)

    def append(self, data, axis=0):
        self._write_metadata(None)

    def __repr__(self):
        return super().__repr__()[:-1] + " (view)>"

    def __reduce__(self):
        base = type(self)._view_base
        return _rebuild_view, (base, self.__getstate__(), self._overrides)


_VIEW_CLASSES = {}


def _view_class(base):
    cls = _VIEW_CLASSES.get(base)
    if cls is None:
        # (the view class names its base: what a view of a view and a pickle rebuild on)
        cls = _VIEW_CLASSES[base] = type(base.__name__, (_ViewOverrides, base),
                                         {"__module__": __name__, "_view_base": base})
    return cls


def _new_view(base, overrides, **kwargs):
    v = _view_class(base).__new__(_view_class(base))
    v._overrides = overrides
    base.__init__(v, **kwargs)
    return v


def _rebuild_view(base, state, overrides):
    return _new_view(base, overrides, **state)


def _overridden(meta, overrides, name):
    """meta with the view's overrides applied (and validated as new metadata would be)."""
    changes = dict(overrides)
    known = {f.name for f in dataclasses.fields(meta)}
    if "filters" in changes and "filters" not in known:
        raise TypeError(f"array {name!r} has a codec chain, not filters (Zarr v3): "
                        f"astype() and view(filters=) need a Zarr v2 array")
    if "chunks" in changes and getattr(meta, "inner_chunks", None) is not None:
        raise TypeError(f"array {name!r} is sharded: view(chunks=) cannot change its chunk "
                        f"and shard layout")
    if "dtype" in changes and "fill_value" not in changes and meta.fill_value is not None:
        # The base's fill value, taken into the view's dtype where it fits (as a value,
        # not as bytes); one that does not fit needs an explicit fill_value.
        try:
            with np.errstate(invalid="raise", over="raise"):
                changes["fill_value"] = np.array(meta.fill_value).astype(changes["dtype"])[()]
        except (TypeError, ValueError, FloatingPointError) as e:
            raise ValueError(f"the fill value {meta.fill_value!r} of array {name!r} does not "
                             f"convert to {changes['dtype']}; pass fill_value") from e
    if "chunks" in changes or "shape" in changes:
        from chunkstore.metadata.v2 import normalize_chunks
        shape = changes.get("shape", meta.shape)
        changes["chunks"] = normalize_chunks(changes.get("chunks", meta.chunks), shape,
                                             np.dtype(changes.get("dtype", meta.dtype)).itemsize)
    try:
        return dataclasses.replace(meta, **changes)
    except (TypeError, ValueError) as e:
        raise ValueError(f"invalid view of array {name!r}: {e}") from e


class ArrayExtras:
    """zarr-python 2's Array methods beyond indexing, mixed into Array."""

    def view(self, shape=None, chunks=None, dtype=None, fill_value=None, filters=None,
             read_only=None, synchronizer=None):
        """A lazy view of array's stored chunks with other metadata (zarr-python 2's
        `Array.view`). Nothing is read or written until the view is indexed."""
        overrides = {}
        if shape is not None:
            shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
            overrides["shape"] = shape
        if chunks is not None:
            overrides["chunks"] = chunks
        if dtype is not None:
            overrides["dtype"] = np.dtype(dtype)
        if fill_value is not None:
            overrides["fill_value"] = fill_value
        if filters is not None:
            overrides["filters"] = list(filters) or None
        state = self.__getstate__()
        state.update(cache_metadata=True,
                     read_only=self.read_only if read_only is None else read_only,
                     synchronizer=self.synchronizer if synchronizer is None else synchronizer)
        base = type(self)._view_base if isinstance(self, _ViewOverrides) else type(self)
        inherited = getattr(self, "_overrides", None) or {}
        return _new_view(base, {**inherited, **overrides}, **state)

    def astype(self, dtype):
        """A read-only view that converts the stored values to dtype as chunks are decoded
        (zarr-python 2's `Array.astype`: an AsType filter in front of the array's filters)."""
        from numcodecs import AsType
        dtype = np.dtype(dtype)
        filters = [AsType(encode_dtype=self.dtype.str, decode_dtype=dtype.str)]
        filters += list(self.filters or [])
        return self.view(dtype=dtype, filters=filters, read_only=True)

    def islice(self, start=None, end=None):
        """Iterate over array[start:end] along the first dimension, decoding each chunk row once
        (zarr-python 2's `Array.islice`)."""
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        n = self.shape[0]
        start = 0 if start is None else start
        end = n if end is None else end
        for what, v in (("start", start), ("end", end)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{what} must be a nonnegative integer, got {v!r}")
        end = min(int(end), n)
        step = self.chunks[0]
        block, block_start = None, None
        for j in range(int(start), end):
            if block is None or j >= block_start + step:
                block_start = j - j % step
                block = self[block_start:min(block_start + step, n)]
            yield block[j - block_start]

    def digest(self, hashname="sha1"):
        """The hash (bytes) of the array's stored content as zarr-python 2 defines it: every
        chunk's stored bytes in C order of the chunk grid (b"" for a missing chunk), then the
        stored metadata document, then the stored attributes document.

        For a sharded (v3) array the stored chunks are the shards; v3 attributes are part of the
        metadata document."""
        h = hashlib.new(hashname)
        meta, store, path, layout = self.metadata, self.store, self.path, self.layout
        coords = itertools.product(*[range(n) for n in layout.stored_grid_shape])
        while True:
            batch = [layout.stored_key(c) for c in itertools.islice(coords, _DIGEST_BATCH)]
            if not batch:
                break
            got = getitems(store, batch)
            for k in batch:
                h.update(got.get(k, b""))
        fmt = meta.zarr_format
        # (v3 attributes live in the metadata document: one key then.)
        for key in dict.fromkeys([nodes.metadata_key(path, fmt, "array"),
                                  nodes.attrs_key(path, fmt)]):
            try:
                h.update(store[key])
            except KeyError:
                pass
        return h.digest()

    def hexdigest(self, hashname="sha1"):
        """`digest` as a hexadecimal string."""
        return binascii.hexlify(self.digest(hashname)).decode("ascii")
