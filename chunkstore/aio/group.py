"""AsyncGroup: zarr-python 3's asynchronous group, a chunkstore Group's operations as
coroutines and asynchronous iterators (see chunkstore.aio)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from chunkstore.aio.array import AsyncArray
from chunkstore.aio.node import AsyncNode, held, held_all
from chunkstore.compat.node_api import register_async_view
from chunkstore.aio.run import off_loop
from chunkstore.compat.creation import create_array_signature
from chunkstore.engine.array import Array
from chunkstore.hierarchy.group import Group

__all__ = ["AsyncGroup"]

# What an AsyncGroup answers at once, as zarr-python 3's (no I/O).
_PROPERTIES = ("basename", "name", "path", "read_only", "store", "synchronizer",
               "zarr_format", "store_path")


def wrap(node: Array | Group, attributes: dict | None = None) -> AsyncArray | AsyncGroup:
    """The asynchronous view of a node: AsyncArray or AsyncGroup (holding attributes, its
    attributes as read off the event loop: see chunkstore.aio.node.held)."""
    return (AsyncArray(node, attributes) if isinstance(node, Array) else
            AsyncGroup(node, attributes))


def _array_method(method: str, doc: str) -> Any:
    """AsyncGroup's coroutine for the Group's ``<method>(name, *args, **kwargs)``, which makes
    an array (AsyncArray/AsyncGroup arguments passed as their synchronous nodes)."""
    async def make(self: AsyncGroup, name: str, *args: Any, **kwargs: Any) -> AsyncArray:
        return AsyncArray(*await off_loop(held(getattr(self._node, method)), name,
                                          *map(_sync, args), **kwargs))

    make.__name__ = make.__qualname__ = method
    make.__doc__ = doc
    return make


class AsyncGroup(AsyncNode):
    """zarr-python 3's ``AsyncGroup`` over a chunkstore Group: member access, creation and
    listing are coroutines (listings asynchronous iterators), run off the event loop;
    metadata (``attrs``, ``name``...) is answered at once. ``.sync`` is the Group."""

    __slots__ = ()
    _wraps = Group
    _properties = frozenset(_PROPERTIES)

    # ------------------------------------------------------------ opening and creating
    @classmethod
    async def from_store(cls, store: Any, *, attributes: dict | None = None,
                         overwrite: bool = False, zarr_format: int = 3) -> AsyncGroup:
        """A new group at the root of store (zarr-python 3's ``AsyncGroup.from_store``):
        raises if something is there unless overwrite=True."""
        from chunkstore.compat.hierarchy import create_group
        return cls(*await off_loop(held(create_group), store, zarr_format=zarr_format,
                                  overwrite=overwrite, attributes=attributes))

    @classmethod
    async def open(cls, store: Any, zarr_format: int | None = None,
                   use_consolidated: bool | str | None = None) -> AsyncGroup:
        """Open the group at the root of store (GroupNotFoundError if there is none);
        use_consolidated: True needs consolidated metadata, False ignores it, None uses it
        where present."""
        from chunkstore.aio.opening import open_group_v3 as _open_group
        return cls(*await off_loop(held(_open_group), store, mode="r+", zarr_format=zarr_format,
                                  use_consolidated=use_consolidated))

    # ------------------------------------------------------------ members
    async def getitem(self, key: str) -> AsyncArray | AsyncGroup:
        """The member at key (a path below this group); KeyError if there is none."""
        return wrap(*await off_loop(held(self._node.__getitem__), key))

    async def get(self, key: str, default: Any = None) -> Any:
        """The member at key, or default."""
        try:
            return await self.getitem(key)
        except KeyError:
            return default

    async def setitem(self, key: str, value: Any) -> None:
        """Store value (array-like) as a new array at key."""
        await off_loop(self._node.__setitem__, key, value)

    async def delitem(self, key: str) -> None:
        """Delete the member at key and everything below it; nothing there is no error, as
        in zarr-python 3 (the synchronous Group's ``del`` raises KeyError, as zarr-python
        2's)."""
        try:
            await off_loop(self._node.__delitem__, key)
        except KeyError:
            pass

    async def contains(self, member: str) -> bool:
        """Whether a member exists at path member."""
        return await off_loop(self._node.__contains__, member)

    async def _members(self, max_depth: int | None) -> list[tuple[str, Array | Group, dict]]:
        # (the Group's members(max_depth): its checks, its order; listed, opened and their
        # attributes read on a worker: the property Group.members lists the store)
        return await off_loop(lambda: held_all(self._node.members(max_depth)))

    async def members(self, max_depth: int | None = 0, *,
                      use_consolidated_for_children: bool = True
                      ) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
        """(path, node) of the members, direct ones (max_depth=0) or down to max_depth
        levels below (None: all), parents before their children."""
        for name, node, attributes in await self._members(max_depth):
            yield name, wrap(node, attributes)

    async def create_hierarchy(self, nodes: dict, *, overwrite: bool = False
                               ) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
        """zarr-python 3's ``AsyncGroup.create_hierarchy``: the groups and arrays of nodes
        (paths relative to this group), made off the loop; yields (path, node) of each."""
        made = await off_loop(lambda: held_all(self._node.create_hierarchy(
            nodes, overwrite=overwrite)))
        for path, node, attributes in made:
            yield path, wrap(node, attributes)

    async def nmembers(self, max_depth: int | None = 0) -> int:
        """How many members members(max_depth) gives."""
        return len(await self._members(max_depth))

    async def keys(self) -> AsyncIterator[str]:
        """The names of the direct members, sorted."""
        for name in await off_loop(lambda: sorted(self._node.keys())):
            yield name

    async def array_keys(self) -> AsyncIterator[str]:
        """The names of the direct member arrays, sorted."""
        for name in await off_loop(lambda: sorted(self._node.array_keys())):
            yield name

    async def group_keys(self) -> AsyncIterator[str]:
        """The names of the direct member groups, sorted."""
        for name in await off_loop(lambda: sorted(self._node.group_keys())):
            yield name

    async def arrays(self) -> AsyncIterator[tuple[str, AsyncArray]]:
        """(name, AsyncArray) of the direct member arrays."""
        for name, node, attributes in await self._members(0):
            if isinstance(node, Array):
                yield name, AsyncArray(node, attributes)

    async def groups(self) -> AsyncIterator[tuple[str, AsyncGroup]]:
        """(name, AsyncGroup) of the direct member groups."""
        for name, node, attributes in await self._members(0):
            if isinstance(node, Group):
                yield name, AsyncGroup(node, attributes)

    async def array_values(self) -> AsyncIterator[AsyncArray]:
        """The direct member arrays."""
        async for _, node in self.arrays():
            yield node

    async def group_values(self) -> AsyncIterator[AsyncGroup]:
        """The direct member groups."""
        async for _, node in self.groups():
            yield node

    @property
    def metadata(self) -> Any:
        """zarr-python 3's ``metadata``: the attributes held, the format, and for a group
        opened through consolidated metadata its members' (from that document, in
        memory)."""
        return self._node.metadata_with(self.attrs)

    # ------------------------------------------------------------ creating members
    async def create_group(self, name: str, *, overwrite: bool = False,
                           attributes: dict | None = None) -> AsyncGroup:
        """A new subgroup (raises if something is there unless overwrite=True)."""
        return AsyncGroup(*await off_loop(held(self._node.create_group), name,
                                          overwrite=overwrite, attributes=attributes))

    async def require_group(self, name: str, overwrite: bool = False) -> AsyncGroup:
        """The subgroup at name, created if absent."""
        return AsyncGroup(*await off_loop(held(self._node.require_group), name,
                                          overwrite=overwrite))

    async def require_groups(self, *names: str) -> tuple[AsyncGroup, ...]:
        """The subgroups at names, each created if absent."""
        groups = await off_loop(lambda: held_all(
            (None, g) for g in self._node.require_groups(*names)))
        return tuple(AsyncGroup(g, attributes) for _, g, attributes in groups)

    async def create_array(self, name: str, **kwargs: Any) -> AsyncArray:
        """A new array at name (zarr-python 3's ``create_array`` arguments)."""
        return AsyncArray(*await off_loop(held(self._node.create_array), name, **kwargs))

    create_array.__signature__ = create_array_signature(  # type: ignore[attr-defined]
        "self", "name", zarr_format=None)

    async def require_array(self, name: str, *, shape: Any, **kwargs: Any) -> AsyncArray:
        """The array at name if it fits shape (and dtype), else a new one."""
        return AsyncArray(*await off_loop(held(self._node.require_array), name, shape=shape,
                                          **kwargs))

    create_dataset = _array_method("create_dataset", "zarr-python 2's name for creating an "
                                                     "array (``Group.create_dataset``).")

    async def require_dataset(self, name: str, *, shape: Any, **kwargs: Any) -> AsyncArray:
        """zarr-python 3's ``AsyncGroup.require_dataset``: ``require_array`` (its dtype
        check in zarr-python 3's direction: the stored dtype must cast safely to the asked
        one; the synchronous Group's is zarr-python 2's, the other way)."""
        return await self.require_array(name, shape=shape, **kwargs)
    zeros = _array_method("zeros", "A new array of zeros at name.")
    ones = _array_method("ones", "A new array of ones at name.")
    empty = _array_method("empty", "A new, uninitialised array at name.")
    full = _array_method("full", "A new array at name filled with fill_value.")
    zeros_like = _array_method("zeros_like", "A new array of zeros shaped like data.")
    ones_like = _array_method("ones_like", "A new array of ones shaped like data.")
    empty_like = _array_method("empty_like", "A new, uninitialised array shaped like data.")
    full_like = _array_method("full_like", "A new array shaped like data, filled with "
                                          "fill_value.")

    # ------------------------------------------------------------ the group itself
    async def move(self, source: str, dest: str) -> None:
        """Move the member at source to dest."""
        await off_loop(self._node.move, source, dest)

    async def tree(self, expand: bool | None = None, level: int | None = None) -> Any:
        """The hierarchy as text (the Group's ``tree``)."""
        return await off_loop(self._node.tree, level=level)

    @property
    def info(self) -> Any:
        """zarr-python 3's ``info``: what is known of the group without a request (name,
        type, format, read-only, store type); ``await info_complete()`` counts the members."""
        from chunkstore.engine.array import Info
        return Info(self._node._static_info_items(), zarr_format=self._node._format)

    async def info_complete(self) -> Any:
        """The Group's ``info_complete()`` (counts its members: it lists the store)."""
        return await off_loop(self._node.info_complete)


def _sync(node: Any) -> Any:
    """An Array or Group for an AsyncArray/AsyncGroup (other values as they are)."""
    return node.sync if isinstance(node, (AsyncArray, AsyncGroup)) else node


register_async_view(Group, AsyncGroup)
