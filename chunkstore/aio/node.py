"""What AsyncArray and AsyncGroup share: the synchronous node each wraps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from chunkstore.aio.run import off_loop

N = TypeVar("N", bound="AsyncNode")


def held(make: Callable[..., Any]) -> Callable[..., tuple[Any, dict]]:
    """make, returning a node, as a function returning (node, its attributes): run on a
    worker thread, the attributes an asynchronous view answers at once are read there, not
    on the event loop (``AsyncNode(*await off_loop(held(open_array), ...))``)."""
    def call(*args: Any, **kwargs: Any) -> tuple[Any, dict]:
        node = make(*args, **kwargs)
        return node, node.attrs.asdict()
    return call


def held_all(nodes: Any) -> list[tuple[Any, Any, dict]]:
    """(on a worker) (path, node, its attributes) of each (path, node) of nodes."""
    return [(path, node, node.attrs.asdict()) for path, node in nodes]


class AsyncNode:
    """An asynchronous view of a chunkstore node: ``.sync`` is the node; its metadata
    properties (``_properties``, ``attrs``, ``metadata``) are answered at once, without I/O,
    from what it holds (the attributes as read when the view was made off the event loop,
    or by ``update_attributes``, as zarr-python 3's are); equal and hashed as the node is
    (two views of equal nodes are equal)."""

    __slots__ = ("_node", "_attributes")
    _node: Any
    _attributes: dict | None
    #: the node class wrapped, and the names answered from it
    _wraps: ClassVar[type] = object
    _properties: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, node: Any, attributes: dict | None = None) -> None:
        if not isinstance(node, self._wraps):
            raise TypeError(f"{type(self).__name__} wraps a chunkstore {self._wraps.__name__}, "
                            f"got {type(node).__name__}")
        self._node = node
        self._attributes = attributes

    @property
    def attrs(self) -> dict:
        """zarr-python 3's ``attrs``: the attributes held, a dict (changing it changes
        nothing stored: ``await update_attributes(...)``). A view made by hand
        (``AsyncArray(array)``) reads them at its first use; views the asynchronous API
        returns read them on a worker thread."""
        if self._attributes is None:
            self._attributes = self._node.attrs.asdict()
        return self._attributes

    async def update_attributes(self: N, new_attributes: dict) -> N:
        """Add or replace attributes (one write, off the event loop); the attributes held
        are those stored after it. Returns self."""
        def update() -> dict:
            attrs = self._node.attrs
            attrs.update(new_attributes)
            return attrs.asdict()
        self._attributes = await off_loop(update)
        return self

    def __getattr__(self, name: str) -> Any:
        if name in type(self)._properties:
            return getattr(self._node, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def sync(self) -> Any:
        """The synchronous node (Array or Group) this wraps."""
        return self._node

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._node.store!r} {self._node.path!r}>"

    def __eq__(self, other: object) -> bool:
        # (and the attributes held, where both views hold some: zarr-python 3's views of
        # one node differ once one's update_attributes changed what it holds)
        return type(other) is type(self) and other._node == self._node and (
            self._attributes is None or other._attributes is None
            or self._attributes == other._attributes)

    def __hash__(self) -> int:
        return hash((type(self).__name__, hash(self._node)))
