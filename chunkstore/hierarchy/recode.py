"""The one recode planner: the create() arguments that re-create an array, in the same or the
other Zarr format, with changes (chunks, shards, compressor, dtype, checksum, ...).

copy, copy_all, the *_like functions and `chunkstore cp` all plan their new arrays here, so a
copy made by any of them is the same copy. What is kept of the source, unless changed:

- shape, chunks, dtype, fill value, order, compressor;
- Zarr v2 -> v2: the filters (the object codec), the dimension separator;
- Zarr v3 -> v3: the codec chain as it is (checksum, Blosc settings, transposes) unless the
  encoding changes (compressor, filters, order, dtype or codecs), and then its crc32c
  checksum; the shards, the chunk key encoding, the dimension names;
- Zarr v2 -> v3: the compressor; _ARRAY_DIMENSIONS become dimension names;
- Zarr v3 -> v2: dimension names become _ARRAY_DIMENSIONS; the checksum is dropped.

What depends on the format lives in chunkstore.metadata.recode_formats.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from chunkstore.metadata.recode_formats import (LIBRARY_NAMES, Plan, RecodeError,
                                                attributes_copied_raw, check_target, complete,
                                                source_of)

__all__ = ["create_kwargs_like", "copy_plan", "copy_attributes", "put_attributes",
           "check_changes", "read_as", "cast_fill", "RecodeError", "CastError", "LIBRARY_NAMES"]

# Changes the planner works out itself; any other change is passed to create() as given.
_PLANNED = ("chunks", "compressor", "dtype", "shards", "checksum")
# Changes after which the source's codec chain no longer describes the copy.
_ENCODING = ("compressor", "filters", "order", "codecs")


def _same(x: Any, y: Any) -> bool:
    try:
        return x is y or bool(x == y)
    except (TypeError, ValueError):
        return False


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def cast_fill(fill: Any, old: np.dtype, new: np.dtype) -> Any:
    """fill converted to the new dtype, or 0 when it has no exact equivalent there. Between
    floating-point (and complex) dtypes, the nearest value, as the data's elements are cast
    (0.1 of an f8 array is float32(0.1) of its f4 copy: 0 made the source's missing chunks
    stored ones, and a grown copy read 0 where the source read 0.1)."""
    if fill is None:
        return None
    try:
        with np.errstate(all="ignore"):
            v = np.asarray(fill, dtype=old).astype(new)
            back = v.astype(old)
        if old.kind in "fc" and new.kind in "fc" and (old.kind == "f" or new.kind == "c"):
            return v[()]
        same = back == np.asarray(fill, dtype=old)
        if (old.kind in "fc" and new.kind in "fc") or (old.kind in "mM" and new.kind in "mM"):
            # NaN and NaT equal nothing, themselves included: kept where the cast keeps them
            same = same or bool(np.isnan(back) and np.isnan(np.asarray(fill, dtype=old)))
        if bool(same):
            return v[()]
    except (TypeError, ValueError):
        pass
    return 0


def _plan(array, zarr_format, note, keep_checksum, changes, like=False) -> Plan:
    a, ch = array, changes
    source = source_of(a.metadata)
    fmt = zarr_format or source.zarr_format
    filters = list(a.filters) if a.filters else []
    # the copy's shape (a *_like call may give another): chunks and shards are planned for it
    shape = ch.get("shape")
    shape = a.shape if shape is None else (
        (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape))
    kw = dict(shape=shape, chunks=a.chunks, dtype=a.dtype, compressor=a.compressor,
              fill_value=a.fill_value, order=a.order, zarr_format=fmt)
    if a.dtype.hasobject and filters and source.object_codec_first:
        kw["object_codec"] = filters.pop(0)
    chunks = ch.get("chunks")
    if chunks is not None:
        if isinstance(chunks, tuple) and len(chunks) != len(shape):
            raise RecodeError(f"{{opt_chunks}} has {_plural(len(chunks), 'value')} but array "
                              f"{a.name!r} has {_plural(len(shape), 'dimension')}")
        kw["chunks"] = chunks
    if "compressor" in ch:
        kw["compressor"] = ch["compressor"]
    dtype = ch.get("dtype")
    dtype_changed = dtype is not None and np.dtype(dtype) != a.dtype
    if dtype_changed:
        if a.dtype.hasobject:
            raise RecodeError(f"cannot change the dtype of object array {a.name!r}")
        if not np.can_cast(a.dtype, np.dtype(dtype), "unsafe"):
            # (a structured dtype of several fields to a number, say: NumPy's own error
            # surfaced from deep in the copy, naming no array)
            raise RecodeError(f"cannot cast array {a.name!r} from {a.dtype} to "
                              f"{np.dtype(dtype)}: NumPy has no cast between them")
        kw["dtype"] = dtype = np.dtype(dtype)
        kw["fill_value"] = cast_fill(a.fill_value, a.dtype, dtype)
        if filters:
            if note is not None:
                note(f"dropping the filters of {a.name!r}: they are specific to its dtype "
                     f"{a.dtype}")
            filters = []
    if "filters" in ch:
        filters = []  # the caller's filters replace the source's (passed on below)
    view = a.view_overrides if hasattr(a, "view_overrides") else None
    if view and ({"dtype", "astype", "filters"} & set(view)):
        # a view reading the stored bytes as another dtype (view(dtype=), astype): its
        # filters are how it reads them (an astype's AsType); the copy holds its values
        filters = []
    # (a view's stored bytes are not what it reads: never copied as they are)
    encoding_changed = bool(view) or dtype_changed or any(
        k in ch and not _same(ch[k], getattr(a, k, None)) for k in _ENCODING)
    return Plan(name=a.name, shape=shape, source=source, kw=kw, changes=ch,
                filters=filters, attrs=a.attrs.asdict(), dtype_changed=dtype_changed,
                encoding_changed=encoding_changed, keep_checksum=keep_checksum, note=note,
                like=like)


def copy_plan(array, zarr_format: int | None = None, *,
              note: Callable[[str], None] | None = None, keep_checksum: bool = True,
              like: bool = False, **changes) -> tuple[dict, dict]:
    """(create() keyword arguments, attributes) of a copy of array: see create_kwargs_like.
    The attributes are the source's, with _ARRAY_DIMENSIONS moved out of them (into Zarr
    v3's dimension names) or into them (from v3's dimension names, for a Zarr v2 copy)."""
    p = _plan(array, zarr_format, note, keep_checksum, changes, like)
    complete(p.kw["zarr_format"], p)
    if "codecs" in changes:  # a whole chain given: no checksum filter of the source's on top
        p.kw.pop("filters", None)
    # Everything else the caller gave goes to create() as given (store, path, fill_value,
    # order, filters, codecs, dimension names, ...) and wins over what was kept.
    p.kw.update({k: v for k, v in changes.items() if k not in _PLANNED})
    if "dimension_names" in changes:  # given: _ARRAY_DIMENSIONS stay as they are
        p.dropped_attrs.clear()
        if changes["dimension_names"] is None:
            del p.kw["dimension_names"]
    attrs = {k: v for k, v in p.attrs.items() if k not in p.dropped_attrs}
    return p.kw, attrs


def create_kwargs_like(array, zarr_format: int | None = None, *,
                       note: Callable[[str], None] | None = None, keep_checksum: bool = True,
                       like: bool = False, **changes) -> dict:
    """The keyword arguments of chunkstore.create() that re-create `array` (an Array) in
    zarr_format (default: its own), with changes: chunks, shards (None or "none": unsharded;
    an int: every dimension), compressor, dtype, checksum=True (a crc32c per chunk, Zarr v3),
    and anything else create() takes (fill_value, order, filters, codecs, dimension_names,
    dimension_separator, store, path, ...), passed on as given.

    A change equal to the source's value is no change. note(text) is told what the copy
    drops (filters, a checksum). keep_checksum=False: a codec chain rebuilt because the
    encoding changed gets no crc32c from the source. like=True: the *_like functions'
    (zarr-python 2's) conventions for a Zarr v2 copy of a v2 array: the store's default
    dimension separator, the object codec left first among the filters. Raises RecodeError
    (a ValueError) when the copy cannot be made as asked."""
    return copy_plan(array, zarr_format, note=note, keep_checksum=keep_checksum, like=like,
                     **changes)[0]


def check_changes(zarr_format: int | None, **changes) -> None:
    """RecodeError now if changes ask for what zarr_format has no place for (shards or a
    checksum in Zarr v2), before any array is looked at."""
    check_target(zarr_format, changes)


def copy_attributes(source, dest) -> None:
    """dest's attributes (a node's) become source's, each in its own format; a Zarr v2
    .zattrs document is copied as it is."""
    sa, da = source.attrs, dest.attrs
    if attributes_copied_raw(sa.key, da.key):
        if sa.key in sa.store:
            da.store[da.key] = sa.store[sa.key]
        elif da.key in da.store:
            del da.store[da.key]
        return
    put_attributes(dest, sa.asdict())


def put_attributes(node, attrs: dict) -> None:
    """node's attributes become attrs; an empty attrs writes no new attributes document."""
    a = node.attrs
    if attrs or a.key in a.store:
        a.put(attrs)


class CastError(ValueError):
    """A recoding copy's values that its new dtype cannot hold (a str that is no number)."""


class _Cast:
    """Array-like view of src whose reads are cast to dtype (for copy_array_data). exact: a
    value the cast changes is a CastError (a wrapped integer, a truncated string, a date
    past the new unit's range, a finite number become infinite); floating-point rounding
    is not a change (f8 -> f4 is what the caller asked for)."""

    def __init__(self, src, dtype, exact=False):
        self._src, self.dtype, self._exact = src, np.dtype(dtype), exact
        self.shape, self.size = src.shape, src.size

    def __getitem__(self, sel):
        a = np.asarray(self._src[sel])
        if a.dtype == self.dtype:
            return a
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                out = a.astype(self.dtype)
        except (TypeError, ValueError, OverflowError) as e:
            # (NumPy's message names a value only: "invalid literal for int()...")
            raise CastError(f"cannot cast the values of array {self._src.name!r} in "
                            f"{_region(sel)} from {a.dtype} to {self.dtype}: {e}") from e
        if self._exact:
            bad = _changed(a, out)
            if bad is not None:
                raise CastError(f"cannot cast the values of array {self._src.name!r} in "
                                f"{_region(sel)} from {a.dtype} to {self.dtype}: "
                                f"{_element(a, bad)} becomes {_element(out, bad)}")
        return out


def _changed(a: np.ndarray, out: np.ndarray) -> tuple | None:
    """The index of an element of a whose cast, out, changed it (see _Cast), or None."""
    bad = np.atleast_1d(_changed_mask(a, out))
    if not bad.any():
        return None
    first = np.argwhere(bad)[0]
    return tuple(int(i) for i in first[:a.ndim])


def _changed_mask(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Where out (a cast to another dtype) changed a's elements: a structured one field by
    field (by position, as NumPy casts them); floating-point rounding is no change, an
    overflow to infinity is; an integer out of the new type's range is, even where it
    casts back to itself (2**64 - 1 through i8's -1)."""
    if a.dtype.names is not None and out.dtype.names is not None:
        bad = np.zeros(a.shape, dtype=bool)
        for fa, fo in zip(a.dtype.names, out.dtype.names):
            sub = _changed_mask(a[fa], out[fo])
            bad |= sub.reshape(sub.shape[:a.ndim] + (-1,)).any(axis=-1) if sub.ndim > \
                a.ndim else sub
        return bad
    if out.dtype.kind in "fc" and a.dtype.kind in "fcbiu":
        with np.errstate(invalid="ignore"):
            return np.isfinite(a) & ~np.isfinite(out)
    with np.errstate(over="ignore", invalid="ignore"):
        back = out.astype(a.dtype)
    same = np.asarray(back == a, dtype=bool)
    if a.dtype.kind in "fc":  # (NaN -> NaT -> NaN is the same missing value)
        same |= np.isnan(a) & np.isnan(back)
    elif a.dtype.kind in "mM":
        same |= np.isnat(a) & np.isnat(back)
    if a.dtype.kind in "iu" and out.dtype.kind in "iu":
        info = np.iinfo(out.dtype)
        same &= (a >= info.min) & (a <= info.max)
    return ~same


def _element(a: np.ndarray, index: tuple) -> str:
    return repr(a[index].item() if a.dtype.kind not in "mM" else a[index])


def _region(sel) -> str:
    """A copy block's selection (slices) as text: [0:2, 4:8]."""
    sel = sel if isinstance(sel, tuple) else (sel,)
    return "[" + ", ".join(f"{s.start}:{s.stop}" if isinstance(s, slice) else repr(s)
                           for s in sel) + "]"


def read_as(array, dtype, exact=False):
    """array itself, or a view of it whose reads are cast to dtype (to fill a copy with
    another dtype). exact: a value the cast would change is a CastError (see _Cast)."""
    return array if np.dtype(dtype) == array.dtype else _Cast(array, dtype, exact)
