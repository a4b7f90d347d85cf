"""User selections -> normalized per-dimension specs for the Cython projection.

Every selection kind is checked here once (types, bounds, broadcast shapes) and turned into
either an orthogonal plan (one spec per dimension) or a points plan (coordinates). The result
also says how to shape the output: which dimensions integer indices drop, and the final shape.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn, SupportsInt

import numpy as np

from chunkstore._core.projection import ARRAY, SLICE, OrthoPlan, PointsPlan
from chunkstore.errors import BoundsCheckError, with_context


@dataclass
class Selection:
    """A normalized selection: the plan plus how its output maps to the user's shape.

    kind is "ortho" or "points". For ortho, plan.sel_shape has one axis per array
    dimension; `shape` is the user-visible result shape (integer-indexed axes dropped,
    or for points the broadcast shape of the coordinate arrays).
    """

    kind: str
    plan: OrthoPlan | PointsPlan
    shape: tuple[int, ...]
    drop: tuple[int, ...] = ()  # axes of plan.sel_shape removed in the result (ortho only)
    # a NumPy index applied to the ortho result (mixed fancy indexing): (kind, argument)
    post: tuple[str, Any] | None = None
    scalar: bool = False      # every dimension indexed by an int (no Ellipsis): return a scalar


def _where(name: str) -> str:
    return f" in array {name!r}" if name else ""


def _check_int(i: SupportsInt, dim: int, length: int, name: str) -> int:
    i = int(i)
    if i < -length or i >= length:
        raise BoundsCheckError(
            f"index {i} is out of bounds for dimension {dim} with length {length}{_where(name)}")
    return i + length if i < 0 else i


def _slice_spec(s: slice, length: int) -> tuple[int, int, int, int]:
    start, stop, step = s.indices(length)
    n = len(range(start, stop, step))
    # (a step past int64 selecting one element, z[::2**70], is step 1: the plan's are int64)
    return (SLICE, start if n else 0, step if n > 1 else 1, n)


def _is_int(x: object) -> bool:
    if type(x) is int:  # the common case, without the slower ABC check
        return True
    # (np.timedelta64 is an np.signedinteger, and NumPy refuses it as an index: its count
    # in whatever unit selected a row)
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(
        x, (bool, np.bool_, np.timedelta64))


def _indexes(sel: tuple) -> tuple:
    """sel with each object that is an integer by ``__index__`` alone (NumPy takes them as
    indices; it was an IndexError here) made an int."""
    if all(type(s) is int or isinstance(s, _PLAIN) or s is None or s is Ellipsis
           for s in sel):
        return sel
    return tuple(operator.index(s) if not isinstance(s, _PLAIN) and s is not None
                 and s is not Ellipsis and hasattr(type(s), "__index__") else s for s in sel)


#: index parts taken as they are (_indexes): ints, slices, arrays, lists, NumPy scalars
_PLAIN = (numbers.Integral, slice, np.ndarray, np.generic, list, tuple, str)


def _int_array(x: Any, dim: int, length: int, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == bool:
        if arr.ndim != 1 or arr.shape[0] != length:
            raise IndexError(
                f"boolean index of shape {arr.shape} does not match dimension {dim} "
                f"with length {length}{_where(name)}")
        return np.flatnonzero(arr).astype(np.int64)
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise IndexError(f"index array for dimension {dim} must be integers or booleans, "
                         f"got dtype {arr.dtype}{_where(name)}")
    if arr.ndim != 1:
        raise IndexError(f"orthogonal index array for dimension {dim} must be 1-d, got "
                         f"shape {arr.shape}{_where(name)}")
    return _wrap_bounds(_as_int64(arr, dim, length, name), dim, length, name)


def _as_int64(arr: np.ndarray, dim: int, length: int, name: str) -> np.ndarray:
    """An integer index array as int64; BoundsCheckError where a uint64 index is past
    int64's range (cast, 2**64 - 1 became -1: the last element, read or written)."""
    if arr.dtype.kind == "u" and arr.dtype.itemsize >= 8 and arr.size and \
            int(arr.max()) > np.iinfo(np.int64).max:
        raise BoundsCheckError(
            f"index {int(arr.max())} is out of bounds for dimension {dim} with length "
            f"{length}{_where(name)}")
    return arr.astype(np.int64)


def _plan(shape: Sequence[int], chunks: Sequence[int], specs: list, name: str) -> OrthoPlan:
    """The OrthoPlan of specs; its refusal of a selection too large to plan (more chunks
    than int64 counts, a table past memory) names the array."""
    try:
        return OrthoPlan(shape, chunks, specs)
    except (ValueError, MemoryError) as e:
        raise with_context(e, f"{e}{_where(name)}") from e


def _wrap_bounds(arr: np.ndarray, dim: int, length: int, name: str) -> np.ndarray:
    """Bounds-check and wrap negatives, returning a new array (the caller's is untouched)."""
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < -length or hi >= length:
            bad = lo if lo < -length else hi
            raise BoundsCheckError(
                f"index {bad} is out of bounds for dimension {dim} with length {length}"
                f"{_where(name)}")
        if lo < 0:
            arr = np.where(arr < 0, arr + length, arr)
    return arr


def _expand_ellipsis(sel: Any, ndim: int, name: str, allow_none: bool = False
                     ) -> tuple[Any, ...]:
    if not isinstance(sel, tuple):
        sel = (sel,)
    n_ell = sum(1 for s in sel if s is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for s in sel if s is not Ellipsis and not (allow_none and s is None))
    if n_real > ndim:
        raise IndexError(f"too many indices{_where(name)}: the array is {ndim}-dimensional, "
                         f"but {n_real} were indexed")
    out = []
    for s in sel:
        if s is Ellipsis:
            out.extend([slice(None)] * (ndim - n_real))
        else:
            out.append(s)
    if not n_ell:
        out.extend([slice(None)] * (ndim - n_real))
    return tuple(out)


def pinned(selection: Any, shape: Sequence[int], now: Sequence[int],
           name: str = "") -> tuple[Any, ...] | None:
    """selection (of basic_or_fancy, orthogonal, coordinate or vectorized) with every part
    that reads the array's shape made explicit against shape, for a write planned again
    with the shape now (Array._write): Ellipsis and the dimensions left out as full
    slices, slice bounds and negative integers resolved, 1-d boolean arrays as the indices
    they select; bounds checked as the normalizers check them, and a slice reaching past
    a dimension now shorter refused as an index past it would be (a slice would be cut to
    the new end, and a write of it silently drop the rest). None where a part cannot be so
    pinned (a boolean array of several dimensions, an index of no known kind)."""
    sel = selection if isinstance(selection, tuple) else (selection,)
    for s in sel:
        if not (s is None or s is Ellipsis or _is_int(s) or isinstance(s, slice)):
            a = np.asarray(s)
            if a.ndim != 1 or a.dtype.kind not in "biu":
                return None
    out: list[Any] = []
    dim = 0
    for s in _expand_ellipsis(sel, len(shape), name, allow_none=True):
        if s is None:
            out.append(None)
            continue
        n = shape[dim]
        if _is_int(s):
            out.append(_check_int(s, dim, n, name))
        elif isinstance(s, slice):
            r = range(*s.indices(n))
            if now[dim] > n and range(*s.indices(now[dim])) != r and _past_end(s, n):
                # bounds given past the end known, cut to it: they select more of the new
                # shape, which the caller did not know (nothing was written at all where
                # the cut left no element)
                raise BoundsCheckError(
                    f"slice {s} reaches past the end of dimension {dim} with length {n}"
                    f"{_where(name)}, which another handle has made {now[dim]} long since: "
                    f"open the array again to read or write there")
            if len(r) and max(r[0], r[-1]) >= now[dim]:
                raise BoundsCheckError(
                    f"index {max(r[0], r[-1])} is out of bounds for dimension {dim} with "
                    f"length {now[dim]}{_where(name)} (another handle changed its shape "
                    f"from {tuple(shape)} to {tuple(now)})")
            out.append(slice(r.start, r.stop if r.stop >= 0 else None, r.step) if len(r)
                       else slice(0, 0, 1))
        else:
            a = np.asarray(s)
            if a.dtype == bool:
                if len(a) != n:
                    return None
                a = np.flatnonzero(a)
            elif a.size and (a.min() < -n or a.max() >= n):
                bad = int(a.min()) if a.min() < -n else int(a.max())
                _check_int(bad, dim, n, name)  # (raises)
            out.append(np.where(a < 0, a + n, a))
        dim += 1
    return tuple(out)


def _past_end(s: slice, n: int) -> bool:
    """Whether a bound given in slice s lies past the end of a dimension of length n (where
    NumPy cuts it to n)."""
    step = 1 if s.step is None else s.step
    if step > 0:
        return (s.start is not None and s.start >= n) or (s.stop is not None and s.stop > n)
    return s.start is not None and s.start >= n


def _is_fancy(s: object) -> bool:
    if type(s) is int or type(s) is slice:
        return False
    return not (_is_int(s) or isinstance(s, slice) or s is None or s is Ellipsis)


def _ints_and_slices(sel: tuple[Any, ...], shape: Sequence[int], chunks: Sequence[int],
                     name: str) -> Selection | None:
    """basic_or_fancy for a tuple of one int or slice per dimension (a tile, a plane: the
    common read), in one pass; None for anything else."""
    specs, drop, rshape = [], [], []
    for dim, s in enumerate(sel):
        t = type(s)
        if t is int:
            specs.append((SLICE, _check_int(s, dim, shape[dim], name), 1, 1))
            drop.append(dim)
        elif t is slice:
            spec = _slice_spec(s, shape[dim])
            specs.append(spec)
            rshape.append(spec[3])
        else:
            return None
    plan = _plan(shape, chunks, specs, name)
    return Selection("ortho", plan, tuple(rshape), tuple(drop), None, len(drop) == len(shape))


def basic_or_fancy(selection: Any, shape: Sequence[int], chunks: Sequence[int],
                   name: str = "") -> Selection:
    """z[selection] with NumPy's semantics: basic indexing, or NumPy's fancy-index rules."""
    if type(selection) is tuple and len(selection) == len(shape):
        fast = _ints_and_slices(selection, shape, chunks, name)
        if fast is not None:
            return fast
    sel = _indexes(selection if isinstance(selection, tuple) else (selection,))
    if any(_is_fancy(s) for s in sel):
        return _fancy(sel, shape, chunks, name)
    scalar = not any(s is Ellipsis or s is None for s in sel) and len(sel) == len(shape) \
        and all(_is_int(s) for s in sel)
    sel = _expand_ellipsis(sel, len(shape), name, allow_none=True)
    specs, drop, dim, newaxes, out_i = [], [], 0, [], 0
    for s in sel:
        if s is None:
            newaxes.append(out_i)
            out_i += 1
            continue
        if _is_int(s):
            i = _check_int(s, dim, shape[dim], name)
            specs.append((SLICE, i, 1, 1))
            drop.append(dim)
        elif isinstance(s, slice):
            specs.append(_slice_spec(s, shape[dim]))
            out_i += 1
        else:
            raise IndexError(f"unsupported index {s!r}{_where(name)}")
        dim += 1
    plan = _plan(shape, chunks, specs, name)
    rshape = [n for d, n in enumerate(plan.sel_shape) if d not in drop]
    post = None
    if newaxes:
        for a in newaxes:
            rshape.insert(a, 1)
        post = ("newaxis", tuple(rshape))
    return Selection("ortho", plan, tuple(rshape), tuple(drop), post, scalar)


def _fancy(sel: tuple[Any, ...], shape: Sequence[int], chunks: Sequence[int],
           name: str) -> Selection:
    """NumPy advanced indexing through orthogonal or point plans.

    A single advanced index (or several with no slice among them) has an exact equivalent:
    orthogonal for one index array, coordinates for several. Mixed cases (several arrays and
    slices) read the orthogonal box of the arrays' distinct values and index it in memory
    when that box touches no chunk without a selected element; else they become points.
    """
    if any(s is None for s in sel):  # (Array takes them out first: newaxes_with_advanced)
        raise IndexError(f"newaxis cannot be combined with advanced indexing{_where(name)}")
    if any(isinstance(s, (bool, np.bool_)) or (isinstance(s, np.ndarray) and s.ndim == 0
                                                and s.dtype == bool) for s in sel):
        raise IndexError(f"a 0-d boolean index (True or False) is not supported"
                         f"{_where(name)}: z[None] adds the axis of length 1 that z[True] "
                         f"would, and z[None][:0] the empty one of z[False]")
    sel = _expand_nd_masks(sel, shape, name)
    parted = _ellipsis_parts_advanced(sel)
    sel = _expand_ellipsis(sel, len(shape), name)
    _refuse_non_integer(sel, name)
    sel = _masks_to_positions(sel, shape, name)
    adv = [d for d, s in enumerate(sel) if not isinstance(s, slice)]
    # NumPy's rule: the broadcast axes take the advanced indices' place where these are
    # adjacent in the key, else go first; an Ellipsis between them parts them even where it
    # stands for no dimension (z[:, [0, 1], ..., 2] of a 3-d z)
    adjacent = _adjacent(adv) and parted is None
    arrays = [d for d in adv if _is_fancy(sel[d])]
    if len(arrays) == 1 and len(adv) >= 1:
        # One index array, maybe ints too: NumPy broadcasts ints with it; orthogonal
        # indexing gives the same values if ints drop their axes. If ints and the array
        # are not adjacent, NumPy moves the advanced axes to the front.
        d = arrays[0]
        arr = np.asarray(sel[d])
        if arr.ndim == 1:
            s = orthogonal(sel, shape, chunks, name)
            if adjacent:
                return s
            order = [i for i in range(len(s.shape))]
            # advanced axis position in s.shape, counting only non-dropped axes
            pos = [i for i in range(len(shape)) if i not in s.drop].index(d)
            order.remove(pos)
            order.insert(0, pos)
            return Selection("ortho", s.plan, tuple(s.shape[i] for i in order), s.drop,
                             ("transpose", tuple(order)))
    if all(not isinstance(s, slice) for s in sel):
        return coordinate(sel, shape, chunks, name)
    # General mixed case (index arrays and slices).
    idx = [_wrap_bounds(_as_int64(np.asarray(sel[d]), d, shape[d], name), d, shape[d], name)
           for d in adv]
    try:
        bcast = np.broadcast_arrays(*idx)
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                         "with shapes " + " ".join(str(a.shape) for a in idx)
                         + _where(name)) from None
    if not _box_is_exact(bcast, [chunks[d] for d in adv]):
        # The box holds chunks without a selected element (z[[0, -1], [0, 1], :] picks
        # 2 of the box's 4 corners): a write would rewrite those, unasked, so each element
        # becomes a point instead.
        return _mixed_points(sel, adv, bcast, shape, chunks, adjacent)
    # The orthogonal box over the distinct values touches exactly the selection's chunks
    # (and is cheaper than points): read it, then index it with NumPy in memory.
    box: list[Any] = []
    remap: list[Any] = []
    for d, s in enumerate(sel):
        if isinstance(s, slice):
            box.append(s)
            remap.append(slice(None))
        else:
            a = idx[adv.index(d)]
            u, inv = np.unique(a, return_inverse=True)
            box.append(u)
            remap.append(inv.reshape(a.shape))
    s = orthogonal(tuple(box), shape, chunks, name)
    if parted is not None:
        # (the Ellipsis back where it stood, for no dimension: NumPy then parts the
        # advanced indices of remap as it parted the key's)
        remap.insert(parted, Ellipsis)
    dummy = np.empty(s.shape, dtype=np.uint8)[tuple(remap)]
    return Selection("ortho", s.plan, dummy.shape, s.drop, ("index", tuple(remap)))


def _box_is_exact(bcast: Sequence[np.ndarray], lens: Sequence[int]) -> bool:
    """Whether every chunk of the orthogonal box over the broadcast advanced indices bcast
    (along dimensions with chunk lengths lens) holds a selected element: the distinct
    chunk-coordinate tuples of the index points are all of the box's chunk combinations."""
    if not bcast or bcast[0].size == 0:
        return True
    cid = np.stack([a.reshape(-1) // L for a, L in zip(bcast, lens)])
    nbox = 1
    for row in cid:
        nbox *= len(np.unique(row))
    return nbox == 1 or len(np.unique(cid, axis=1)[0]) == nbox


def _mixed_points(sel: tuple[Any, ...], adv: list[int], bcast: Sequence[np.ndarray],
                  shape: Sequence[int], chunks: Sequence[int], adjacent: bool) -> Selection:
    """A mixed selection (advanced indices adv, broadcast to bcast, and slices) as points:
    every selected element's coordinates in the C order of NumPy's result, whose axes are
    the broadcast shape in place of the advanced indices when those are adjacent, else
    first, and each slice's axis."""
    bshape = bcast[0].shape
    sliced = [d for d in range(len(shape)) if d not in adv]
    before = [d for d in sliced if d < adv[0]] if adjacent else []
    after = [d for d in sliced if d not in before]
    ranges = {}
    for d in sliced:
        _, start, step, n = _slice_spec(sel[d], shape[d])
        ranges[d] = start + step * np.arange(n, dtype=np.int64)
    rshape = (tuple(len(ranges[d]) for d in before) + bshape
              + tuple(len(ranges[d]) for d in after))
    axis = {d: i for i, d in enumerate(before)}
    axis.update({d: len(before) + len(bshape) + i for i, d in enumerate(after)})
    npoints = int(np.prod(rshape, dtype=np.int64))
    coords = np.empty((len(shape), npoints), dtype=np.int64)
    lead, trail = (1,) * len(before), (1,) * len(after)
    for d in range(len(shape)):
        if d in axis:
            x = ranges[d].reshape([-1 if i == axis[d] else 1 for i in range(len(rshape))])
        else:
            x = bcast[adv.index(d)].reshape(lead + bshape + trail)
        coords[d].reshape(rshape)[...] = x
    return Selection("points", PointsPlan(shape, chunks, coords), rshape)


def _masks_to_positions(sel: tuple[Any, ...], shape: Sequence[int], name: str
                        ) -> tuple[Any, ...]:
    """Each 1-d boolean index array as its nonzero() positions, as NumPy does when it
    broadcasts it with other index arrays (its length must be its dimension's)."""
    out = []
    for d, s in enumerate(sel):
        if _is_fancy(s):
            a = np.asarray(s)
            if a.dtype == bool:
                s = np.flatnonzero(a) if a.shape == (shape[d],) else _bad_mask(a, d, shape, name)
        out.append(s)
    return tuple(out)


def _expand_nd_masks(sel: tuple[Any, ...], shape: Sequence[int], name: str
                     ) -> tuple[Any, ...]:
    """Replace each k-d boolean mask (k != 1) by its k nonzero() index arrays.

    A k-d mask stands for k dimensions, so this happens before Ellipsis expansion; each
    mask's shape must equal the shape of the dimensions it covers, as in NumPy."""
    sizes = []
    for s in sel:
        if s is Ellipsis:
            sizes.append(0)
        elif _is_fancy(s) and np.asarray(s).dtype == bool:
            sizes.append(max(np.asarray(s).ndim, 1))
        else:
            sizes.append(1)
    if sum(sizes) > len(shape):
        raise IndexError(f"too many indices{_where(name)}: the array is {len(shape)}-dimensional,"
                         f" but {sum(sizes)} were indexed")
    out: list[Any] = []
    d = 0
    for s, k in zip(sel, sizes):
        if s is Ellipsis:
            d += len(shape) - sum(sizes)
            out.append(s)
            continue
        if k and _is_fancy(s) and np.asarray(s).dtype == bool and np.asarray(s).ndim != 1:
            m = np.asarray(s)
            if m.shape != tuple(shape[d:d + k]):
                raise IndexError(f"boolean index of shape {m.shape} does not match dimensions "
                                 f"{d}..{d + k - 1} with shape {tuple(shape[d:d + k])}"
                                 f"{_where(name)}")
            out.extend(np.nonzero(m))
        else:
            out.append(s)
        d += k
    return tuple(out)


def _refuse_non_integer(sel: tuple[Any, ...], name: str) -> None:
    """IndexError for a float (or other non-integer) index, as NumPy: never truncate 1.5 to 1.
    Runs on the expanded selection, so the dimension number is right."""
    for dim, s in enumerate(sel):
        if isinstance(s, slice) or s is Ellipsis or s is None or _is_int(s):
            continue
        a = np.asarray(s)
        if a.dtype == bool or a.dtype.kind in "iu" or (a.size == 0 and a.dtype.kind == "f"
                                                          and not np.isscalar(s)):
            continue
        raise IndexError(f"only integers, slices, ellipsis, newaxis and integer or boolean "
                         f"arrays are valid indices; got {s!r} ({a.dtype}) for dimension "
                         f"{dim}{_where(name)}")


def _bad_mask(arr: np.ndarray, d: int, shape: Sequence[int], name: str) -> NoReturn:
    raise IndexError(f"boolean index of shape {arr.shape} does not match dimension {d} with "
                     f"length {shape[d]}{_where(name)}")


def _adjacent(dims: Sequence[int]) -> bool:
    return all(b - a == 1 for a, b in zip(dims, dims[1:]))


def _ellipsis_parts_advanced(sel: Any) -> int | None:
    """Where sel (no Nones) has an Ellipsis between two advanced indices (ints or arrays),
    the dimension it stands before; else None."""
    if type(sel) is not tuple:
        return None
    for at, s in enumerate(sel):
        if s is Ellipsis:
            break
    else:
        return None
    advanced = [k for k, s in enumerate(sel) if s is not Ellipsis and not isinstance(s, slice)]
    if not (advanced and advanced[0] < at < advanced[-1]):
        return None
    return sum(np.ndim(s) if isinstance(s, np.ndarray) and s.dtype == bool else 1
               for s in sel[:at])


def orthogonal(selection: Any, shape: Sequence[int], chunks: Sequence[int],
               name: str = "") -> Selection:
    """z.oindex[...]: per dimension an int, a slice, an int array or a boolean array."""
    sel = _expand_ellipsis(_indexes(selection if isinstance(selection, tuple)
                                    else (selection,)), len(shape), name)
    specs: list[tuple[Any, ...]] = []
    drop: list[int] = []
    for dim, s in enumerate(sel):
        if _is_int(s):
            specs.append((SLICE, _check_int(s, dim, shape[dim], name), 1, 1))
            drop.append(dim)
        elif isinstance(s, slice):
            specs.append(_slice_spec(s, shape[dim]))
        elif s is None:
            raise IndexError(f"newaxis is not supported in orthogonal selections{_where(name)}")
        else:
            specs.append((ARRAY, _int_array(s, dim, shape[dim], name)))
    plan = _plan(shape, chunks, specs, name)
    rshape = tuple(n for d, n in enumerate(plan.sel_shape) if d not in drop)
    return Selection("ortho", plan, rshape, tuple(drop))


def coordinate(selection: Any, shape: Sequence[int], chunks: Sequence[int],
               name: str = "") -> Selection:
    """z.vindex[...] with integer arrays: NumPy-broadcast coordinates, one per dimension."""
    sel = selection if isinstance(selection, tuple) else (selection,)
    if len(sel) != len(shape):
        raise IndexError(f"coordinate selection needs one index array per dimension "
                         f"({len(shape)}), got {len(sel)}{_where(name)}")
    arrs = []
    for dim, s in enumerate(sel):
        if isinstance(s, slice) or s is Ellipsis or s is None:
            what = "a slice" if isinstance(s, slice) else repr(s)
            raise IndexError(f"coordinate selection (vindex) takes an integer array (or an "
                             f"integer) for every dimension; dimension {dim} got {what}: "
                             f"slices, Ellipsis and None are orthogonal selections "
                             f"(oindex, or z[...]){_where(name)}")
        a = np.asarray(s)
        if a.dtype == bool or (a.dtype.kind not in "iu" and a.size):
            raise IndexError(f"coordinate index for dimension {dim} must be integers, got "
                             f"{a.dtype}{_where(name)}")
        # bounds checked before broadcasting, as NumPy does (an index broadcast against an
        # empty array is out of bounds all the same)
        arrs.append(_wrap_bounds(_as_int64(a, dim, shape[dim], name).reshape(-1), dim,
                                 shape[dim], name).reshape(a.shape))
    try:
        b = np.broadcast_arrays(*arrs)
    except ValueError:
        raise IndexError("coordinate index arrays could not be broadcast together with shapes "
                         + " ".join(str(a.shape) for a in arrs) + _where(name)) from None
    out_shape = b[0].shape if b else ()
    coords = np.empty((len(shape), int(np.prod(out_shape, dtype=np.int64))), dtype=np.int64)
    for dim, a in enumerate(b):
        coords[dim] = a.reshape(-1)
    return Selection("points", PointsPlan(shape, chunks, coords), tuple(out_shape))


def mask(selection: Any, shape: Sequence[int], chunks: Sequence[int],
         name: str = "") -> Selection:
    """z.vindex[bool_mask] / get_mask_selection: a boolean array of the array's shape."""
    if isinstance(selection, tuple) and len(selection) == 1:
        selection = selection[0]
    m = np.asarray(selection)
    if m.dtype != bool or m.shape != tuple(shape):
        raise IndexError(f"mask selection must be a boolean array of shape {tuple(shape)}, got "
                         f"{m.dtype} array of shape {m.shape}{_where(name)}")
    if m.ndim == 0:  # (a 0-d array's mask: its one element, or none, as NumPy's)
        coords = np.zeros((0, int(m)), dtype=np.int64)
    else:
        coords = np.array(np.nonzero(m), dtype=np.int64).reshape(len(shape), -1)
    return Selection("points", PointsPlan(shape, chunks, coords), (coords.shape[1],))


def vectorized(selection: Any, shape: Sequence[int], chunks: Sequence[int],
               name: str = "") -> Selection:
    """z.vindex[...]: a boolean mask, or integer coordinate arrays."""
    sel = selection if isinstance(selection, tuple) else (selection,)
    if len(sel) == 1 and np.asarray(sel[0]).dtype == bool:
        return mask(sel[0], shape, chunks, name)
    return coordinate(sel, shape, chunks, name)


def block(selection: Any, shape: Sequence[int], chunks: Sequence[int],
          name: str = "") -> Selection:
    """z.blocks[...]: ints and step-1 slices in units of chunks."""
    return orthogonal(block_elements(selection, shape, chunks, name), shape, chunks, name)


def block_elements(selection: Any, shape: Sequence[int], chunks: Sequence[int],
                   name: str = "") -> tuple[slice, ...]:
    """A block selection (ints and step-1 slices in units of chunks) as the element slices
    it selects."""
    sel = _expand_ellipsis(selection, len(shape), name)
    out = []
    for dim, s in enumerate(sel):
        nblocks = -(-shape[dim] // chunks[dim]) if chunks[dim] else 0
        c = chunks[dim]
        if _is_int(s):
            b = int(s)
            if b < -nblocks or b >= nblocks:
                raise BoundsCheckError(f"block index {b} is out of bounds for dimension {dim} "
                                       f"with {nblocks} blocks{_where(name)}")
            b = b + nblocks if b < 0 else b
            out.append(slice(b * c, min((b + 1) * c, shape[dim])))
        elif isinstance(s, slice):
            first = _block_start(s.start, nblocks)
            if nblocks and not 0 <= first < nblocks:
                # (zarr-python's rule: a block slice starting outside the grid is an error,
                # not an empty selection; a stop past the end is cut)
                raise BoundsCheckError(f"block slice {s} starts out of bounds for dimension "
                                       f"{dim} with {nblocks} blocks{_where(name)}")
            start, stop, step = s.indices(nblocks)
            if step != 1:
                raise IndexError(f"block selection slices must have step 1, got {step} for "
                                 f"dimension {dim}{_where(name)}")
            out.append(slice(start * c, min(max(stop, start) * c, shape[dim])))
        else:
            raise IndexError(f"block selection takes ints and slices, got {type(s).__name__} "
                             f"for dimension {dim}{_where(name)}")
    return tuple(out)


def _block_start(start: Any, nblocks: int) -> int:
    """A block slice's first block as given (None: 0; negative: from the end), not
    clipped to the grid."""
    if start is None:
        return 0
    b = operator.index(start)
    return b + nblocks if b < 0 else b


class NewAxes(NamedTuple):
    """How a NumPy key mixing ``None`` with advanced indices maps onto the same key without
    its Nones (see :func:`newaxes_with_advanced`)."""

    key: tuple        # the key without its Nones: what is read or written
    perm: tuple       # that key's result axes, in the order of the key with Nones
    axes: tuple       # where the Nones' unit axes go in the result


def newaxes_with_advanced(selection: Any, ndim: int) -> NewAxes | None:
    """For ``z[key]`` where key holds ``None`` besides index arrays or masks (NumPy allows
    it, the plans do not): the key without its Nones, and how that key's result becomes
    NumPy's (a transpose, then unit axes); None for any other key.

    NumPy's rule: the advanced indices' broadcast axes take the place of the first of them
    where they are adjacent, else go first, and a None (like a slice) parts them, so
    dropping the Nones may move those axes."""
    # (a key that is no tuple is one index: no None beside another. Every z[...] asks: a
    # plain loop, cheaper than any() of a generator)
    if type(selection) is not tuple:
        return None
    for s in selection:
        if s is None:
            break
    else:
        return None
    sel = selection
    if not any(_is_fancy(s) for s in sel):
        return None
    items: list[tuple[str, Any]] = []   # ("A", advanced) ("S", slice) ("N", None), in order
    shapes = []                         # the advanced indices' shapes
    used = sum(np.ndim(s) if np.asarray(s).dtype == bool else 1
               for s in sel if s is not None and s is not Ellipsis)
    for i, s in enumerate(sel):
        if s is None:
            items.append(("N", i))
        elif s is Ellipsis:
            # (for no dimension it still parts advanced indices: "E", no axis of its own)
            items.extend([("S", (i, k)) for k in range(max(0, ndim - used))] or [("E", i)])
        elif isinstance(s, slice):
            items.append(("S", i))
        else:
            a = np.asarray(s) if not _is_int(s) else None
            if a is not None and a.dtype == bool:
                # a k-d mask: k index arrays side by side (np.nonzero), one broadcast axis
                items.extend(("A", i) for _ in range(max(1, a.ndim)))
                shapes.append((int(a.sum()),))
            else:
                items.append(("A", i))
                shapes.append(() if a is None else a.shape)
    if not any(s is Ellipsis for s in sel):
        items.extend(("S", ("tail", k)) for k in range(max(0, ndim - used)))
    try:
        nb = len(np.broadcast_shapes(*shapes))
    except ValueError:
        return None  # the plans name the shapes that do not broadcast
    target = _layout(items, nb)
    kept = _layout([it for it in items if it[0] != "N"], nb)
    nones = tuple(k for k, lab in enumerate(target) if lab[0] == "N")
    perm = tuple(kept.index(lab) for lab in target if lab[0] != "N")
    return NewAxes(tuple(s for s in sel if s is not None), perm, nones)


def _layout(items: list[tuple[str, Any]], nb: int) -> list[tuple]:
    """Labels of the result axes of a key of items under NumPy's rule (see
    newaxes_with_advanced): ("B", k) for the advanced broadcast's axes, the item itself for
    a slice's or a None's."""
    adv = [k for k, it in enumerate(items) if it[0] == "A"]
    block = [("B", k) for k in range(nb)]
    adjacent = all(items[k][0] == "A" for k in range(adv[0], adv[-1] + 1))
    out: list[tuple] = [] if adjacent else list(block)
    for k, it in enumerate(items):
        if it[0] == "A":
            if adjacent and k == adv[0]:
                out.extend(block)
        elif it[0] != "E":
            out.append(it)
    return out


def split_fields(selection: Any) -> tuple[str | list[str] | None, Any]:
    """Split structured-dtype field names out of a selection: returns (fields, selection);
    fields one name (z["f"]: that field's values) or a list (z[["f"]]: a structured array),
    as NumPy reads them."""
    if type(selection) is tuple:
        for s in selection:  # the common case, ints and slices, in one cheap pass
            t = type(s)
            if t is not int and t is not slice:
                break
        else:
            return None, selection
    if isinstance(selection, str):
        return selection, ()
    if isinstance(selection, list) and selection and all(isinstance(x, str) for x in selection):
        return list(selection), ()
    if isinstance(selection, tuple):
        fields = [s for s in selection if isinstance(s, str)]
        lists = [s for s in selection if isinstance(s, list) and s
                 and all(isinstance(x, str) for x in s)]
        if len(fields) == 1 and not lists:
            return fields[0], tuple(s for s in selection if not isinstance(s, str))
        if fields or lists:
            names = fields + [x for l in lists for x in l]
            rest = tuple(s for s in selection if not (isinstance(s, str) or any(s is l for l in lists)))
            return names, rest
    return None, selection
