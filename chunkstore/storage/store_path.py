"""StorePath: zarr-python 3's pairing of a store and a path in it, accepted wherever a store
is (the path then prefixes the one given)."""

from __future__ import annotations

from typing import Any

from chunkstore.errors import store_name

__all__ = ["StorePath", "split_store_path"]


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


class StorePath:
    """A store and a path in it (zarr-python 3's ``zarr.storage.StorePath``).

    ``StorePath(store, "a")``; ``sp / "b"`` is the path one level down. Give it wherever a
    store goes (``open_array(sp)``, ``create_array(sp, ...)``, ``open_group(sp / "g")``): the
    node opened or created is at its path (below it, with a path= or name= argument too).
    ``Array.store_path`` and ``Group.store_path`` give a node's own."""

    __slots__ = ("store", "path")
    store: Any
    path: str

    def __init__(self, store: Any, path: str = "") -> None:
        if isinstance(store, StorePath):
            store, path = store.store, _join(store.path, path)
        if not isinstance(path, str):
            raise TypeError(f"StorePath path must be a str, got {type(path).__name__}")
        self.store = store
        self.path = _join(path)

    def __truediv__(self, other: str) -> StorePath:
        return StorePath(self.store, _join(self.path, other))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorePath) and other.path == self.path and (
            other.store is self.store or other.store == self.store)

    def __hash__(self) -> int:
        return hash((type(self.store).__name__, self.path))

    def __repr__(self) -> str:
        return f"StorePath({self.store!r}, {self.path!r})"

    def __str__(self) -> str:
        # (a store with no text of its own, a plain dict, by its name: its repr listed every
        # key and value, and an Array's repr with it)
        store = str(self.store) if type(self.store).__str__ is not object.__str__ \
            else store_name(self.store)
        return f"{store}/{self.path}" if self.path else store


def split_store_path(store: Any, path: str | None) -> tuple[Any, str | None]:
    """(store, path) with a StorePath's store and its path prefixing path; anything else as
    it is."""
    if isinstance(store, StorePath):
        return store.store, _join(store.path, path or "") or None
    return store, path
