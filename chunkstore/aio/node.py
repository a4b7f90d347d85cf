"""What AsyncArray and AsyncGroup share: the synchronous node each wraps."""

from __future__ import annotations

from typing import Any, ClassVar


class AsyncNode:
    """An asynchronous view of a chunkstore node: ``.sync`` is the node; its metadata
    properties (``_properties``) are answered at once, without I/O; equal and hashed as the
    node is (two views of equal nodes are equal)."""

    __slots__ = ("_node",)
    _node: Any
    #: the node class wrapped, and the names answered from it
    _wraps: ClassVar[type] = object
    _properties: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, node: Any) -> None:
        if not isinstance(node, self._wraps):
            raise TypeError(f"{type(self).__name__} wraps a chunkstore {self._wraps.__name__}, "
                            f"got {type(node).__name__}")
        self._node = node

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
        return type(other) is type(self) and other._node == self._node

    def __hash__(self) -> int:
        return hash((type(self).__name__, hash(self._node)))
