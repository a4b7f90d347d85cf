"""The functions of zarr-python 3's ``zarr.api.asynchronous`` on chunkstore: each one is the
synchronous function of the same name run off the event loop, giving AsyncArray and
AsyncGroup where that gives Array and Group (documented path: chunkstore.api.asynchronous)."""

from __future__ import annotations

from typing import Any

from types import SimpleNamespace

from chunkstore.aio.array import AsyncArray
from chunkstore.aio.group import AsyncGroup, _sync, wrap
from chunkstore.aio.node import held, held_all
from chunkstore.aio.opening import create_kwargs as _create_kwargs
from chunkstore.aio.opening import open_group_v3 as _open_group
from chunkstore.aio.opening import v3_when_created as _v3_when_created
from chunkstore.aio.run import off_loop
from chunkstore.engine.array import Array as _Array
from chunkstore.compat import creation as _compat_creation
from chunkstore.compat import hierarchy as _compat_hierarchy
from chunkstore.hierarchy import convenience as _convenience
from chunkstore.hierarchy import creation as _creation
from chunkstore.hierarchy import group as _group

# The synchronous functions each coroutine runs (from their own modules: the package's top
# level imports this layer).
_cs = SimpleNamespace(
    open=_group.open, open_group=_group.open_group, open_consolidated=_group.open_consolidated,
    group=_group.group, open_array=_creation.open_array, create=_creation.create,
    array=_creation.array, zeros=_creation.zeros, ones=_creation.ones, empty=_creation.empty,
    full=_creation.full, zeros_like=_creation.zeros_like, ones_like=_creation.ones_like,
    empty_like=_creation.empty_like, full_like=_creation.full_like,
    save_array=_creation.save_array, create_array=_compat_creation.create_array,
    from_array=_compat_creation.from_array, create_group=_compat_hierarchy.create_group,
    create_hierarchy=_compat_hierarchy.create_hierarchy,
    consolidate_metadata=_convenience.consolidate_metadata, save=_convenience.save,
    save_group=_convenience.save_group, load=_convenience.load, tree=_convenience.tree,
    copy=_convenience.copy, copy_all=_convenience.copy_all,
    copy_store=_convenience.copy_store)

__all__ = ["array", "consolidate_metadata", "copy", "copy_all", "copy_store", "create",
           "create_array", "create_group", "create_hierarchy", "empty", "empty_like",
           "from_array", "full", "full_like", "group", "load", "ones", "ones_like", "open",
           "open_array", "open_consolidated", "open_group", "open_like", "save", "save_array",
           "save_group", "tree", "zeros", "zeros_like"]


async def open(store: Any = None, *, mode: str | None = None, path: str | None = None,
               **kwargs: Any) -> AsyncArray | AsyncGroup:
    """The array or group at path (zarr-python 3's ``open``; mode default "a"; a node it
    creates is Zarr v3 unless zarr_format= says otherwise)."""
    def run() -> Any:
        s = _v3_when_created(store, path, mode or "a", kwargs)
        return held(_cs.open)(s, mode=mode or "a", path=path, **kwargs)
    return wrap(*await off_loop(run))


async def open_array(store: Any = None, *, mode: str | None = None,
                     **kwargs: Any) -> AsyncArray:
    """The array at path (``chunkstore.open_array``'s arguments), as zarr-python 3's
    ``open_array``: without mode (or with "r", "r+") an existing one, ArrayNotFoundError (a
    FileNotFoundError) where there is none; modes "a", "w", "w-" create one. (The
    synchronous ``open_array`` keeps zarr-python 2's default, "a": a mistyped path given a
    shape made a new empty array.)"""
    def run() -> Any:
        s = _v3_when_created(store, kwargs.get("path"), mode or "r+", kwargs)
        return held(_cs.open_array)(s, mode=mode or "r+", **kwargs)
    return AsyncArray(*await off_loop(run))


async def open_group(store: Any = None, *, mode: str = "a", use_consolidated: Any = None,
                     **kwargs: Any) -> AsyncGroup:
    """A group, created with mode "a", "w", "w-" (zarr-python 3's ``open_group``:
    attributes=, use_consolidated=, zarr_format=)."""
    return AsyncGroup(*await off_loop(held(_open_group), store, mode=mode,
                                     use_consolidated=use_consolidated, **kwargs))


async def open_consolidated(store: Any, **kwargs: Any) -> AsyncArray | AsyncGroup:
    """The hierarchy opened through its consolidated metadata."""
    return wrap(*await off_loop(held(_cs.open_consolidated), store, **kwargs))


async def open_like(a: Any, path: str, **kwargs: Any) -> AsyncArray:
    """zarr-python 3's ``open_like``: the array at path (inside ``store=``, a new memory
    store if not given), created if absent (mode "a") with a's shape, chunks, dtype and, for
    an array, its encoding and fill value as defaults."""
    kwargs.setdefault("store", None)  # path is the path inside the store, as zarr-python 3
    return AsyncArray(*await off_loop(held(_creation.open_like), _sync(a), path, **kwargs))


async def create(shape: Any, **kwargs: Any) -> AsyncArray:
    """A new array (``chunkstore.create``'s arguments, and zarr-python 3's chunk_shape,
    chunk_key_encoding, config)."""
    return AsyncArray(*await off_loop(held(_cs.create), shape, **_create_kwargs(kwargs, 3)))


async def create_array(store: Any, **kwargs: Any) -> AsyncArray:
    """zarr-python 3's ``create_array`` (Zarr v3 by default)."""
    return AsyncArray(*await off_loop(held(_cs.create_array), store, **kwargs))


create_array.__signature__ = _compat_creation.create_array_signature(  # type: ignore[attr-defined]
    "store")


async def from_array(store: Any, *, data: Any, **kwargs: Any) -> AsyncArray:
    """zarr-python 3's ``from_array``: a new array holding data (NumPy, Array, AsyncArray)."""
    return AsyncArray(*await off_loop(held(_cs.from_array), store, data=_sync(data), **kwargs))


async def create_group(store: Any, **kwargs: Any) -> AsyncGroup:
    """zarr-python 3's ``create_group``."""
    return AsyncGroup(*await off_loop(held(_cs.create_group), store, **kwargs))


async def create_hierarchy(*, store: Any, nodes: dict, overwrite: bool = False):
    """zarr-python 3's ``create_hierarchy``: (path, node) as each is made."""
    made = await off_loop(lambda: held_all(_cs.create_hierarchy(store=store, nodes=nodes,
                                                                 overwrite=overwrite)))
    for path, node, attributes in made:
        yield path, wrap(node, attributes)


async def group(store: Any = None, *, overwrite: bool = False, path: str | None = None,
                **kwargs: Any) -> AsyncGroup:
    """A group, created if absent (Zarr v3 unless zarr_format=2), replaced with
    overwrite=True (zarr-python 3's ``group``)."""
    return AsyncGroup(*await off_loop(held(_open_group), store,
                                      mode="w" if overwrite else "a", path=path, **kwargs))


async def array(data: Any, **kwargs: Any) -> AsyncArray:
    """A new array holding a copy of data (Zarr v3 unless zarr_format= says otherwise)."""
    return AsyncArray(*await off_loop(held(_cs.array), _sync(data),
                                      **_create_kwargs(kwargs, 3)))


def _filled(name: str):
    fn = getattr(_cs, name)

    async def make(shape: Any, **kwargs: Any) -> AsyncArray:
        return AsyncArray(*await off_loop(held(fn), shape, **_create_kwargs(kwargs, 3)))

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"``chunkstore.{name}`` (a new array), as a coroutine."
    return make


def _like(name: str):
    fn = getattr(_cs, name)

    async def make(a: Any, **kwargs: Any) -> AsyncArray:
        return AsyncArray(*await off_loop(held(fn), _sync(a), **_like_kwargs(a, kwargs)))

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"``chunkstore.{name}`` (a new array shaped like a), as a coroutine."
    return make


def _like_kwargs(a: Any, kwargs: dict) -> dict:
    """The keywords of a *_like call: like an array-like (not an Array, whose format is
    kept), a new array is Zarr v3, as zarr-python 3 makes it."""
    return kwargs if isinstance(_sync(a), _Array) else _create_kwargs(kwargs, 3)


zeros, ones, empty = _filled("zeros"), _filled("ones"), _filled("empty")
zeros_like, ones_like = _like("zeros_like"), _like("ones_like")
full_like = _like("full_like")


async def empty_like(a: Any, **kwargs: Any) -> AsyncArray:
    """zarr-python 3's ``empty_like``: a new array shaped like a, with a's fill value unless
    fill_value= is given (zarr-python 2's synchronous ``empty_like`` leaves no fill value)."""
    if not isinstance(_sync(a), _Array):  # (an array-like: its shape and dtype)
        return AsyncArray(*await off_loop(held(_cs.empty_like), _sync(a),
                                          **_like_kwargs(a, kwargs)))
    kwargs.setdefault("fill_value", _sync(a).fill_value)
    return AsyncArray(*await off_loop(held(_cs.full_like), _sync(a), **kwargs))


async def full(shape: Any, fill_value: Any, **kwargs: Any) -> AsyncArray:
    """``chunkstore.full`` (a new array filled with fill_value), as a coroutine."""
    return AsyncArray(*await off_loop(held(_cs.full), shape, fill_value=fill_value,
                                     **_create_kwargs(kwargs, 3)))


async def consolidate_metadata(store: Any, path: str | None = None,
                               zarr_format: int | None = None) -> AsyncGroup:
    """Consolidate the metadata of the hierarchy at path; the group opened through it."""
    return AsyncGroup(*await off_loop(held(_cs.consolidate_metadata), store, path=path or "",
                                     zarr_format=zarr_format))


async def save(store: Any, *args: Any, **kwargs: Any) -> None:
    """``chunkstore.save``: arrays into a store."""
    await off_loop(_cs.save, store, *[_sync(a) for a in args], **kwargs)


async def save_array(store: Any, arr: Any, **kwargs: Any) -> None:
    """``chunkstore.save_array``: one array into a store."""
    await off_loop(_cs.save_array, store, _sync(arr), **kwargs)


async def save_group(store: Any, *args: Any, **kwargs: Any) -> None:
    """``chunkstore.save_group``: arrays into a group."""
    await off_loop(_cs.save_group, store, *[_sync(a) for a in args], **kwargs)


async def load(store: Any, path: str | None = None, **kwargs: Any) -> Any:
    """``chunkstore.load``: an array's values, or a group's arrays (lazily) by name."""
    return await off_loop(_cs.load, store, path=path, **kwargs)


async def tree(grp: Any, expand: bool | None = None, level: int | None = None) -> Any:
    """The hierarchy below a group as text."""
    return await off_loop(_cs.tree, _sync(grp), level=level)


async def copy(source: Any, dest: Any, **kwargs: Any) -> Any:
    """``chunkstore.copy``."""
    return await off_loop(_cs.copy, _sync(source), _sync(dest), **kwargs)


async def copy_all(source: Any, dest: Any, **kwargs: Any) -> Any:
    """``chunkstore.copy_all``."""
    return await off_loop(_cs.copy_all, _sync(source), _sync(dest), **kwargs)


async def copy_store(source: Any, dest: Any, **kwargs: Any) -> Any:
    """``chunkstore.copy_store``."""
    return await off_loop(_cs.copy_store, source, dest, **kwargs)
