"""Write an xarray Dataset to a Zarr v2/v3 group with chunkstore (the writing half of
chunkstore.integrations.xarray).

The layout is xarray's own Zarr encoding, so `xr.open_zarr` (zarr-python) reads the result
as it reads what `Dataset.to_zarr` writes: xarray's CF encoding (times, scale/offset,
`_FillValue`, strings, the `coordinates` attribute), v2 `_ARRAY_DIMENSIONS` or v3
`dimension_names`, and the fill-value rules of xarray's zarr backend (v2: the array's
fill_value is the variable's `_FillValue`, none if it has none; v3: NaN for floats, with
`_FillValue` kept as an attribute).

Everything is checked before the first write (mode, dimensions, region, append_dim,
encodings), so a rejected call leaves the store as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xarray import conventions
from xarray.backends.zarr import FillValueCoder, encode_zarr_attr_value, encode_zarr_variable

from chunkstore.hierarchy.creation import contains_array, contains_group, create, normalize_path
from chunkstore.errors import ContainsArrayError, ContainsGroupError
from chunkstore.hierarchy.group import open_group
from chunkstore.metadata.formats import format_of
from chunkstore.storage.normalize import normalize_store
from chunkstore.integrations.xarray_backend import DIMENSION_KEY, ChunkstoreDataStore
from chunkstore.errors import store_name

__all__ = ["to_chunkstore"]

# Encoding keys a user may give per variable (beyond xarray's CF keys: dtype, units,
# calendar, scale_factor, add_offset, _FillValue, which xarray's encoder consumes).
STORAGE_ENCODINGS = {"chunks", "compressor", "compressors", "filters", "shards"}
CF_ENCODINGS = {"dtype", "units", "calendar", "scale_factor", "add_offset", "_FillValue",
                "missing_value"}


def to_chunkstore(ds, store, *, mode=None, append_dim=None, region=None, group=None,
                  zarr_format=None, encoding=None, consolidated=True, storage_options=None):
    """Write Dataset ds to the Zarr group at `group` in store (a path, URL or store).

    mode: "w-" (default: create, fail if something is there), "w" (replace), "a" (add or
    replace variables; with append_dim, extend the variables that have that dimension and
    replace the others), "a-" (as "a", but with append_dim the stored variables without
    that dimension are kept as they are), "r+" (write into existing variables only; the
    default with region). As xarray's ``to_zarr``.
    append_dim: the dimension to append along (mode "a" or "a-").
    region: {dim: slice} with step 1: write ds into that part of existing variables; every
    variable written must have at least one of the region's dimensions.
    zarr_format: 2 or 3 for a new group (default: the existing group's, else 2).
    encoding: {variable: {"chunks", "compressor"/"compressors", "filters", "shards",
    "dtype", "units", "_FillValue", "scale_factor", ...}}.
    consolidated: consolidate the group's metadata afterwards (default True).
    Returns the chunkstore Group.
    """
    if mode is None:
        mode = "a" if append_dim is not None else "r+" if region is not None else "w-"
    if mode not in ("w", "w-", "a", "a-", "r+"):
        raise ValueError(f"mode must be 'w', 'w-', 'a', 'a-' or 'r+', got {mode!r}")
    if append_dim is not None and region is not None:
        raise ValueError("give append_dim or region, not both")
    if append_dim is not None and mode not in ("a", "a-"):
        raise ValueError(f"append_dim needs mode 'a' or 'a-', got {mode!r}")
    if region is not None and mode not in ("a", "a-", "r+"):
        raise ValueError(f"region needs mode 'a', 'a-' or 'r+', got {mode!r}")
    encoding = dict(encoding or {})
    _check_encoding(ds, encoding)
    s = normalize_store(store, mode="a", storage_options=storage_options)
    owned = s is not store
    try:
        return _write(ds, s, normalize_path(group), mode, append_dim, region, zarr_format,
                      encoding, consolidated)
    finally:
        if owned and hasattr(s, "close"):
            s.close()


class EncodingKeyError(KeyError, ValueError):
    """``encoding=`` names a variable the dataset lacks: a KeyError, as xarray raises it (a
    ValueError too, as chunkstore raised it before)."""


class EncodingTypeError(TypeError, ValueError):
    """An argument of the wrong type (non-integer chunks, a region that is no slice): a
    TypeError, as xarray raises it (a ValueError too, as chunkstore raised it before)."""


def _check_encoding(ds, encoding):
    for name, enc in encoding.items():
        if name not in ds.variables:
            raise EncodingKeyError(f"encoding names variable {name!r}, which the dataset "
                                   f"lacks")
        bad = set(enc) - STORAGE_ENCODINGS - CF_ENCODINGS
        if bad:
            raise ValueError(f"unexpected encoding for variable {name!r}: {sorted(bad)}; "
                             f"allowed: {sorted(STORAGE_ENCODINGS | CF_ENCODINGS)}")
        for key in ("chunks", "shards"):
            c = enc.get(key)
            if c is None:
                continue
            items = c if isinstance(c, (tuple, list)) else (c,)
            if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in items):
                raise EncodingTypeError(f"encoding {key}={c!r} of variable {name!r}: "
                                        f"integers are needed")


def _write(ds, store, path, mode, append_dim, region, zarr_format, encoding, consolidated):
    exists = contains_group(store, path)
    if contains_array(store, path) and mode != "w":
        raise ContainsArrayError(f"path {path!r} in {store_name(store)} holds an array, not a group")
    if mode == "w-" and exists:
        raise ContainsGroupError(f"a group already exists at path {path!r} in {store_name(store)}; "
                                 f"use mode='w' to replace it or 'a' to add to it")
    if mode == "r+" and not exists:
        raise ContainsGroupError(f"no group at path {path!r} in {store_name(store)} to write into "
                                 f"(mode 'r+')")
    existing = {}
    if exists and mode != "w":
        g = open_group(store, mode="r", path=path)
        fmt = g.zarr_format
        if zarr_format not in (None, fmt):
            raise ValueError(f"the group at {path!r} is Zarr v{fmt}, not v{zarr_format}")
        existing = _existing_variables(g, [n for n in ds.variables if n in g.array_keys()])
    else:
        fmt = zarr_format or 2
    if fmt not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, got {fmt!r}")

    if mode in ("a", "a-", "r+"):
        given = sorted(n for n in existing if encoding.get(n))
        if given:  # it would be ignored: the stored array keeps its encoding (as xarray)
            raise ValueError(f"variable {given[0]!r} already exists, but encoding was "
                             f"provided")
    plan, group_attrs = _plan(ds, mode, append_dim, region, existing, encoding, fmt, path)
    if exists and mode in ("a", "a-") and region is None:
        _check_kept_dimensions(g, plan)

    g = open_group(store, mode="w" if mode == "w" else "a", path=path, zarr_format=fmt)
    if mode != "r+":
        # the dataset's attributes, with CF's "coordinates" naming the coordinates no data
        # variable refers to (they would read back as data variables without it)
        g.attrs.update({k: encode_zarr_attr_value(v) for k, v in group_attrs.items()})
    for name, (var, action, sel) in plan.items():
        _write_variable(g, name, var, action, sel, fmt, encoding.get(name, {}))
    if consolidated:
        from chunkstore.hierarchy.convenience import consolidate_metadata
        consolidate_metadata(store, path=path)
    return open_group(store, mode="r+", path=path)


def _existing_variables(g, names):
    """The stored variables, decoded, for their encodings (units, dtype, scale, fill)."""
    reader = ChunkstoreDataStore(
        g, use_zarr_fill_value_as_mask=format_of(g.zarr_format).fill_value_masks)
    raw = {n: reader.open_store_variable(n, g[n]) for n in names}
    decoded, _, _ = conventions.decode_cf_variables(raw, {})
    return {n: (raw[n], decoded[n]) for n in names}


def _plan(ds, mode, append_dim, region, existing, encoding, fmt, path):
    """(per variable: (encoded variable, "create" | "append" | "region" | "skip",
    selection), the group's attributes as CF encodes them). Raises, naming the variable, on
    anything that would fail part way."""
    if append_dim is not None and append_dim not in ds.dims:
        raise ValueError(f"append_dim {append_dim!r} is not a dimension of the dataset "
                         f"{tuple(ds.dims)}")
    for name in ds.variables:
        _check_variable_name(name)
    if region is not None:
        region = _check_region(ds, region)
    if mode == "r+":
        new = [n for n in ds.variables if n not in existing]
        if new:
            raise ValueError(f"mode 'r+' writes existing variables only; the group at "
                             f"{path!r} lacks {sorted(map(str, new))}")
    if region is not None:
        outside = [n for n, v in ds.variables.items() if not set(v.dims) & set(region)]
        if outside:
            raise ValueError(f"variables {sorted(map(str, outside))} have none of the region's "
                             f"dimensions {sorted(region)}; drop them (ds.drop_vars) first")
    variables, group_attrs = conventions.encode_dataset_coordinates(ds)
    plan = {}
    for name, var in variables.items():
        var = var.copy(deep=False)
        var.encoding = {**var.encoding, **encoding.get(name, {})}
        into = name in existing and (region is not None or
                                     (append_dim is not None and append_dim in var.dims))
        if into:  # written into the stored array
            raw, decoded = existing[name]
            if decoded.dims != var.dims:
                raise ValueError(f"variable {name!r} has dimensions {var.dims} but the stored "
                                 f"one has {decoded.dims}")
            raw = existing[name][0]
            if raw.dtype.kind in "SU" and _chars(var) > _chars(raw):
                # encoded as the stored ones, the new strings would be cut to its width
                raise ValueError(f"variable {name!r} holds strings of up to {_chars(var)} "
                                 f"characters, but the stored array's dtype {raw.dtype} "
                                 f"holds {_chars(raw)}: they would be truncated; rewrite the "
                                 f"variable (mode 'w') with the wider dtype")
            # Encode new values exactly as the stored ones (units, dtype, scale, fill).
            var.encoding = {k: v for k, v in decoded.encoding.items()
                            if k in CF_ENCODINGS}
        enc = encode_zarr_variable(var, name=name, zarr_format=fmt)
        if name not in existing:
            plan[name] = (enc, "create", None)
            continue
        if append_dim is not None and append_dim not in var.dims:
            # already there, not along append_dim: "a" replaces it (as xarray), "a-" keeps it
            plan[name] = (enc, "skip" if mode == "a-" else "create", None)
            continue
        if not into:
            plan[name] = (enc, "create", None)  # mode "a": replace the variable
            continue
        raw, _ = existing[name]
        if enc.dtype != raw.dtype and not (enc.dtype.kind in "OUS" and raw.dtype.kind in "OUS"):
            raise ValueError(f"variable {name!r} encodes to dtype {enc.dtype}, the stored "
                             f"array has {raw.dtype}")

        shape = raw.shape
        if append_dim is not None:
            axis = var.dims.index(append_dim)
            for d, (a, b) in enumerate(zip(enc.shape, shape)):
                if d != axis and a != b:
                    raise ValueError(f"cannot append variable {name!r}: dimension "
                                     f"{var.dims[d]!r} has length {a}, stored {b}")
            plan[name] = (enc, "append", axis)
        elif region is not None:
            sel = tuple(region.get(d, slice(None)) for d in var.dims)
            for d, s, n, m in zip(var.dims, sel, shape, enc.shape):
                start, stop, _ = s.indices(n)
                if stop - start != m or s.stop is not None and s.stop > n:
                    raise ValueError(f"region {d}={s} of variable {name!r} (stored length "
                                     f"{n}) does not hold the {m} values given")
            plan[name] = (enc, "region", sel)
    return plan, group_attrs


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


def _check_kept_dimensions(g: Any, plan: dict) -> None:
    """mode "a" replaces the variables written and keeps the others: a replaced variable
    whose dimension has another length than a kept variable's would leave a group no
    engine can open (xarray raises too). ValueError naming both, before any write."""
    kept = [n for n in g.array_keys() if n not in plan]
    if not kept:
        return
    sizes: dict = {}
    for name, (var, action, _) in plan.items():
        if action == "create":
            for d, n in zip(var.dims, var.shape):
                sizes.setdefault(d, (n, name))
    reader = ChunkstoreDataStore(g, use_zarr_fill_value_as_mask=False)
    for name in kept:
        try:
            stored = reader.open_store_variable(name, g[name])
        except Exception:  # noqa: BLE001 - not an xarray variable: nothing to agree with
            continue
        for d, n in zip(stored.dims, stored.shape):
            if d in sizes and sizes[d][0] != n:
                raise ValueError(f"conflicting sizes for dimension {d!r}: {sizes[d][0]} in "
                                 f"variable {sizes[d][1]!r} being written, {n} in the stored "
                                 f"variable {name!r}, which mode 'a' keeps; write both, or "
                                 f"use mode 'w'")


def _check_variable_name(name: Any) -> None:
    """A variable is an array named by its name in the group: the name must be a non-empty
    string naming one member (None or "" would be the group's own path, which a write with
    mode "a" would replace with every variable in it; "a/b" a member of a subgroup). As
    xarray: TypeError for a name that is not a string, ValueError for an empty one."""
    if not isinstance(name, str):
        raise TypeError(f"invalid variable name {name!r}: a Zarr variable needs a string "
                        f"name")
    if not name or name in (".", "..") or "/" in name:
        raise ValueError(f"invalid variable name {name!r}: it must be a non-empty string "
                         f"without '/' (it names the variable's array in the group)")


def _check_region(ds, region):
    if not isinstance(region, dict):
        raise TypeError(f"region must be a dict of dimension -> slice, got {region!r}")
    out = {}
    for d, s in region.items():
        if d not in ds.dims:
            raise ValueError(f"region dimension {d!r} is not a dimension of the dataset "
                             f"{tuple(ds.dims)}")
        if not isinstance(s, slice):
            raise EncodingTypeError(f"region {d}={s!r}: a slice is needed, not "
                                    f"{type(s).__name__}")
        if s.step not in (None, 1) or \
                (s.start is not None and s.start < 0) or (s.stop is not None and s.stop < 0):
            raise ValueError(f"region {d}={s!r}: a slice with step 1 and non-negative "
                             f"bounds is needed")
        out[d] = s
    return out


def _fill_value(var, fmt):
    attrs = dict(var.attrs)
    if fmt == 2:
        return attrs.pop("_FillValue", None), attrs
    fill = var.encoding.get("fill_value")
    if fill is None and var.dtype.kind == "f":
        fill = np.nan  # xarray's default for v3 floats, unlike Zarr's 0
    if attrs.get("_FillValue") is not None:
        attrs["_FillValue"] = FillValueCoder.encode(attrs["_FillValue"], var.dtype)
    else:
        attrs.pop("_FillValue", None)
    return fill, attrs


def _chunks(var, enc):
    if enc.get("chunks") is not None:
        c = enc["chunks"]
        return (c,) * var.ndim if isinstance(c, int) else tuple(c)
    if var.chunks:  # dask: the first chunk along each dimension (1 where it is empty)
        return tuple(max(int(c[0]), 1) if c else 1 for c in var.chunks)
    return True


# A variable's own encoding keys that shape its array (as xarray's zarr backend reads them
# from ``.encoding``: a dataset opened and written again keeps its chunks, shards, codecs).
_ARRAY_ENCODINGS = ("chunks", "shards", "compressors", "compressor", "filters")


def _array_encoding(var: Any, user_enc: dict) -> dict:
    """The encoding that shapes var's new array: its own ``.encoding`` (chunks and shards
    only where they still have var's rank: after isel or squeeze they are another array's),
    then the ``encoding=`` the caller gave, which wins."""
    enc = {k: v for k, v in var.encoding.items() if k in _ARRAY_ENCODINGS and v is not None}
    for k in ("chunks", "shards"):
        v = enc.get(k)
        if v is not None and not isinstance(v, int) and len(v) != var.ndim:
            del enc[k]
    enc.update(user_enc)
    return enc


def _write_variable(g, name, var, action, sel, fmt, user_enc):
    if action == "skip":
        return
    z = g[name] if action != "create" else None
    if action == "create":
        user_enc = _array_encoding(var, user_enc)
        fill, attrs = _fill_value(var, fmt)
        attrs = {k: encode_zarr_attr_value(v) for k, v in attrs.items()}
        kw = {}
        comps = user_enc.get("compressors", user_enc.get("compressor", "default"))
        if isinstance(comps, (list, tuple)):
            if fmt == 2 and len(comps) > 1:
                raise ValueError(f"variable {name!r}: Zarr v2 takes one compressor")
            kw["compressor"] = comps[0] if comps else None
            if fmt == 3 and len(comps) > 1:
                kw["filters"] = list(user_enc.get("filters") or []) + list(comps[1:])
        else:
            kw["compressor"] = comps
        kw.setdefault("filters", user_enc.get("filters"))
        if var.dtype.hasobject and fmt == 2:
            from numcodecs import VLenUTF8
            kw["object_codec"] = VLenUTF8()
        if fmt == 2:
            attrs[DIMENSION_KEY] = list(var.dims)
        else:
            kw["dimension_names"] = list(var.dims)
            shards = user_enc.get("shards")
            if shards is not None:
                kw["shards"] = (shards,) * var.ndim if isinstance(shards, int) else shards
            if fill is None and var.dtype.hasobject:
                fill = ""
        z = create(shape=var.shape, chunks=_chunks(var, user_enc),
                   dtype=object if var.dtype.hasobject else var.dtype, fill_value=fill,
                   store=g.store, path=f"{g.path}/{name}" if g.path else name,
                   overwrite=True, zarr_format=fmt, attributes=attrs if fmt == 3 else None,
                   **kw)
        if fmt == 2:
            z.attrs.update(attrs)
        sel = (slice(None),) * var.ndim
    elif action == "append":
        axis = sel
        old = z.shape
        z.resize(tuple(n + var.shape[axis] if d == axis else n for d, n in enumerate(old)))
        sel = tuple(slice(old[axis], None) if d == axis else slice(None)
                    for d in range(var.ndim))
    _store(var.data, z, sel)


def _store(data, z, sel):
    if hasattr(data, "dask"):
        import dask.array as da
        from chunkstore.integrations.dask import aligned
        offsets = [s.start or 0 for s in sel]
        # Two dask tasks writing one store chunk would lose an update: lock unless every
        # dask chunk boundary (shifted by the region's start) is a store chunk boundary.
        ok = all(o % c == 0 for o, c in zip(offsets, z.chunks)) and \
            aligned(data.chunks, z.chunks, data.shape)
        da.store(data, z, regions=sel, lock=not ok)
        return
    z[sel if sel else ...] = np.asarray(data)
