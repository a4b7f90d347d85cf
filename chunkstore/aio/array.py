"""AsyncArray: zarr-python 3's asynchronous array, a chunkstore Array's operations as
coroutines (see chunkstore.aio)."""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.aio.node import AsyncNode, held
from chunkstore.compat.node_api import register_async_view
from chunkstore.aio.run import READ, READ_INTO, WRITE, array_off_loop, off_loop
from chunkstore.engine.array import Array
from chunkstore.metadata import zarr3_view

__all__ = ["AsyncArray", "AsyncOIndex", "AsyncVIndex"]

# What an AsyncArray answers at once, as zarr-python 3's (metadata held in memory: no I/O;
# the shape and what follows from it come from the engine the Array's properties answer by,
# as dtype: an Array opened with cache_metadata=False would read the metadata again for
# them, on the event loop).
_PROPERTIES = ("dtype", "chunks", "shards", "ndim",
               "path", "name", "basename", "store", "fill_value", "order",
               "zarr_format", "compressor", "compressors", "filters",
               "serializer", "read_only", "write_chunks", "_zdtype", "store_path", "config")
# ... and what the metadata held answers (see AsyncArray.__getattr__)
_HELD = frozenset(("shape", "size", "nbytes", "cdata_shape", "nchunks"))


class AsyncArray(AsyncNode):
    """zarr-python 3's ``AsyncArray`` over a chunkstore Array: reads and writes are
    coroutines that never block the event loop; metadata (``shape``, ``dtype``, ``attrs``...)
    is answered at once. ``AsyncArray(array)`` wraps an Array; ``array.async_array`` (or
    ``AsyncArray.open``) gives one; ``.sync`` is the Array."""

    __slots__ = ()
    _wraps = Array
    _properties = frozenset(_PROPERTIES)

    def __repr__(self) -> str:
        return f"<AsyncArray {self._node.store!r} {self._node.path!r} shape={self.shape} " \
               f"dtype={self.dtype}>"

    @property
    def filters(self) -> tuple:
        """zarr-python 3's ``filters``: a tuple, empty when there are none (a Zarr v2 array's
        synchronous ``filters`` keeps zarr-python 2's list or None)."""
        return tuple(self._node.filters or ())

    # ------------------------------------------------------------ opening and creating
    @classmethod
    async def open(cls, store: Any, **kwargs: Any) -> AsyncArray:
        """Open an existing array (``chunkstore.open_array``'s arguments, mode "r+" by
        default... as zarr-python 3: its ``zarr_format=`` binds)."""
        from chunkstore.hierarchy.creation import open_array
        kwargs.setdefault("mode", "r+")
        return cls(*await off_loop(held(open_array), store, **kwargs))

    @classmethod
    async def create(cls, store: Any, **kwargs: Any) -> AsyncArray:
        """Create an array (zarr-python 3's ``AsyncArray.create``: ``shape``, ``dtype``,
        ``chunks`` or ``chunk_shape``, ``zarr_format`` (default 3) and the rest of
        ``chunkstore.api.asynchronous.create``'s arguments)."""
        from chunkstore.aio.opening import create_kwargs as _create_kwargs
        from chunkstore.hierarchy.creation import create
        return cls(*await off_loop(held(create), store=store, **_create_kwargs(kwargs, 3)))

    def with_config(self, config: Any) -> AsyncArray:
        """zarr-python 3's ``with_config``: another view of this array with config's
        ``order`` and ``write_empty_chunks`` (see Array.with_config)."""
        return type(self)(self._node.with_config(config), self._attributes)

    # ------------------------------------------------------------ reads and writes
    def _read(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """A read on the workers for this array's chunk store (chunkstore.aio.run); one into
        the caller's ``out=`` buffer is waited for when cancelled (READ_INTO)."""
        op = READ if kwargs.get("out") is None else READ_INTO
        return array_off_loop(self._node.chunk_store, op, fn, *args, **kwargs)

    def _write(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """A write on the workers for this array's chunk store (chunkstore.aio.run)."""
        return array_off_loop(self._node.chunk_store, WRITE, fn, *args, **kwargs)

    async def getitem(self, selection: Any, *, prototype: Any = None) -> Any:
        """``array[selection]`` (NumPy-style basic and fancy indexing)."""
        return await self._read(self._node.__getitem__, selection)

    async def setitem(self, selection: Any, value: Any) -> None:
        """``array[selection] = value``."""
        await self._write(self._node.__setitem__, selection, value)

    async def get_basic_selection(self, selection: Any = Ellipsis, *, out: Any = None,
                                  fields: Any = None, prototype: Any = None) -> Any:
        """The Array's ``get_basic_selection``."""
        return await self._read(self._node.get_basic_selection, selection, out=out,
                                   fields=fields)

    async def get_orthogonal_selection(self, selection: Any, *, out: Any = None,
                                       fields: Any = None, prototype: Any = None) -> Any:
        """The Array's ``get_orthogonal_selection`` (outer indexing)."""
        return await self._read(self._node.get_orthogonal_selection, selection, out=out,
                                   fields=fields)

    async def get_coordinate_selection(self, selection: Any, *, out: Any = None,
                                       fields: Any = None, prototype: Any = None) -> Any:
        """The Array's ``get_coordinate_selection`` (points)."""
        return await self._read(self._node.get_coordinate_selection, selection, out=out,
                                   fields=fields)

    async def get_mask_selection(self, mask: Any, *, out: Any = None, fields: Any = None,
                                 prototype: Any = None) -> Any:
        """The Array's ``get_mask_selection``."""
        return await self._read(self._node.get_mask_selection, mask, out=out, fields=fields)

    async def get_block_selection(self, selection: Any, *, out: Any = None,
                                  fields: Any = None, prototype: Any = None) -> Any:
        """The Array's ``get_block_selection`` (whole chunks by chunk index)."""
        return await self._read(self._node.get_block_selection, selection, out=out,
                                   fields=fields)

    async def set_basic_selection(self, selection: Any, value: Any, *,
                                  fields: Any = None) -> None:
        """The Array's ``set_basic_selection``."""
        await self._write(self._node.set_basic_selection, selection, value, fields=fields)

    async def set_orthogonal_selection(self, selection: Any, value: Any, *,
                                       fields: Any = None) -> None:
        """The Array's ``set_orthogonal_selection``."""
        await self._write(self._node.set_orthogonal_selection, selection, value, fields=fields)

    async def set_coordinate_selection(self, selection: Any, value: Any, *,
                                       fields: Any = None) -> None:
        """The Array's ``set_coordinate_selection``."""
        await self._write(self._node.set_coordinate_selection, selection, value, fields=fields)

    async def set_mask_selection(self, mask: Any, value: Any, *, fields: Any = None) -> None:
        """The Array's ``set_mask_selection``."""
        await self._write(self._node.set_mask_selection, mask, value, fields=fields)

    async def set_block_selection(self, selection: Any, value: Any, *,
                                  fields: Any = None) -> None:
        """The Array's ``set_block_selection``."""
        await self._write(self._node.set_block_selection, selection, value, fields=fields)

    @property
    def oindex(self) -> AsyncOIndex:
        """Outer (orthogonal) indexing: ``await a.oindex.getitem(sel)``."""
        return AsyncOIndex(self)

    @property
    def vindex(self) -> AsyncVIndex:
        """Vectorised (coordinate or mask) indexing: ``await a.vindex.getitem(sel)``."""
        return AsyncVIndex(self)

    # ------------------------------------------------------------ shape and metadata
    async def resize(self, new_shape: Any, delete_outside_chunks: bool = True) -> None:
        """Change the shape (chunks wholly outside it are deleted: zarr-python 3's
        ``delete_outside_chunks=False``, keeping them, is refused, not ignored)."""
        if not delete_outside_chunks:
            raise NotImplementedError(
                "AsyncArray.resize(delete_outside_chunks=False): chunkstore always deletes "
                "the chunks outside the new shape (a shrink's cut-off data is gone, as the "
                "Array's resize does); nothing was resized")
        shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
        await off_loop(self._node.resize, shape)

    async def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Append data along axis; returns the new shape."""
        return await off_loop(self._node.append, data, axis=axis)

    async def info_complete(self) -> Any:
        """The Array's ``info_complete()`` (stored bytes and chunks counted: it lists the
        store)."""
        return await off_loop(self._node.info_complete)

    async def nchunks_initialized(self) -> int:
        """How many chunks are stored."""
        return int(await off_loop(lambda: self._node.nchunks_initialized))

    async def nbytes_stored(self) -> int:
        """Bytes the array's keys hold in the store."""
        return int(await off_loop(lambda: self._node.nbytes_stored))

    @property
    def info(self) -> Any:
        """zarr-python 3's ``info``: the array's properties from the metadata held, without
        the stored sizes (no I/O: ``await info_complete()`` lists the store for them)."""
        from chunkstore.engine.array import Info
        node = self._node
        return Info(node._info_items(stored=False), zarr_format=node._handle.engine.zarr_format)

    def __getattr__(self, name: str) -> Any:
        # the shape and what follows from it, from the metadata held (no I/O, as zarr-python
        # 3's AsyncArray: its metadata is read at open; an operation reads it again where
        # the Array does, on a worker), followed where another handle of this process
        # changed it since, as the dtype is (a count compared: the shape held lagged an
        # append through another handle, and `resize((a.shape[0] + n,))` shrank the array)
        if name in _HELD:
            return getattr(self._node._handle.described(), name)
        return super().__getattr__(name)

    @property
    def metadata(self) -> Any:
        """zarr-python 3's ``metadata``: the array metadata held, with the attributes held
        (no I/O; the Array's ``metadata`` reads the attributes)."""
        return zarr3_view.with_attributes(self._node._handle.described().meta, self.attrs)


class AsyncOIndex:
    """``AsyncArray.oindex``: ``await oindex.getitem(selection)`` (zarr-python 3.1's)."""

    __slots__ = ("array",)

    def __init__(self, array: AsyncArray) -> None:
        self.array = array

    async def getitem(self, selection: Any) -> Any:
        """Outer indexing of the array."""
        return await self.array.get_orthogonal_selection(selection)

    async def setitem(self, selection: Any, value: Any) -> None:
        """Outer-indexed write."""
        await self.array.set_orthogonal_selection(selection, value)


class AsyncVIndex:
    """``AsyncArray.vindex``: ``await vindex.getitem(selection)`` (points or a mask)."""

    __slots__ = ("array",)

    def __init__(self, array: AsyncArray) -> None:
        self.array = array

    async def getitem(self, selection: Any) -> Any:
        """Vectorised indexing of the array."""
        return await self.array._read(self.array.sync.vindex.__getitem__, selection)

    async def setitem(self, selection: Any, value: Any) -> None:
        """Vectorised write."""
        await self.array._write(self.array.sync.vindex.__setitem__, selection, value)


register_async_view(Array, AsyncArray)
