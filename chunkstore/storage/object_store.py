"""ObjectStore: a store over obstore (``pip install chunkstore[obstore]``), zarr-python 3's
``ObjectStore(store, read_only=)``: S3, GCS, Azure, HTTP, local and memory through obstore's
Rust client. Batch reads (``getitems``) fetch all keys concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

from .base import BaseStore, ensure_bytes, normalize_prefix, validate_key

_DEFAULT_CONCURRENCY = 64


def _obstore():
    try:
        import obstore
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("ObjectStore needs obstore: pip install chunkstore[obstore]") \
            from None
    return obstore


class ObjectStore(BaseStore):
    """Keys are object paths relative to the obstore store's root (its prefix)."""

    def __init__(self, store: Any, *, read_only: bool = False):
        self._obs = _obstore()
        super().__init__("r" if read_only else "a")
        self.store = store

    def __repr__(self) -> str:
        return f"ObjectStore({self.store!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectStore) and other.store is self.store

    def __hash__(self) -> int:
        return hash(("ObjectStore", id(self.store)))

    def __getstate__(self):
        return {"store": self.store, "read_only": self.read_only}

    def __setstate__(self, state):
        self.__init__(state["store"], read_only=state["read_only"])

    def __getitem__(self, key: str) -> bytes:
        validate_key(key)
        try:
            return bytes(self._obs.get(self.store, key).bytes())
        except FileNotFoundError:
            raise KeyError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        validate_key(key)
        self._check_writable(key)
        self._obs.put(self.store, key, bytes(ensure_bytes(value)))

    def __delitem__(self, key: str) -> None:
        validate_key(key)
        self._check_writable(key)
        if key not in self:  # deleting a missing object is no error on S3: make it one
            raise KeyError(key)
        try:
            self._obs.delete(self.store, key)
        except FileNotFoundError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        validate_key(key)
        try:
            self._obs.head(self.store, key)
        except FileNotFoundError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        for batch in self._obs.list(self.store):
            for meta in batch:
                yield meta["path"]

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def setitems(self, mapping) -> None:
        self._check_writable()
        items = {validate_key(k): bytes(ensure_bytes(v)) for k, v in mapping.items()}
        for k, v in items.items():  # every key checked before anything is written
            self._obs.put(self.store, k, v)

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        prefix = normalize_prefix(prefix)
        if prefix and prefix.rstrip("/") in self:  # a value at the prefix itself
            yield prefix.rstrip("/")
        for batch in self._obs.list(self.store, prefix=prefix.rstrip("/") or None):
            for meta in batch:
                yield meta["path"]

    def listdir(self, prefix: str = "") -> list[str]:
        prefix = normalize_prefix(prefix).rstrip("/")
        res = self._obs.list_with_delimiter(self.store, prefix or None)
        cut = len(prefix) + 1 if prefix else 0
        prefixes = res["common_prefixes"]
        if type(self.store).__name__ == "LocalStore":
            # a local directory emptied by deletes is still listed: keep non-empty ones only
            prefixes = [p for p in prefixes if any(
                batch for batch in self._obs.list(self.store, prefix=p.rstrip("/")))]
        names = {p.rstrip("/")[cut:] for p in prefixes}
        names |= {m["path"][cut:] for m in res["objects"]}
        return sorted(n for n in names if n)

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        for k in keys:
            validate_key(k)
        try:
            asyncio.get_running_loop()
            in_loop = True
        except RuntimeError:
            in_loop = False
        if len(keys) <= 1 or in_loop:  # inside someone's event loop: one at a time
            return super().getitems(keys)
        from chunkstore import config
        limit = config.get("async.concurrency") or _DEFAULT_CONCURRENCY

        async def fetch_all():
            sem = asyncio.Semaphore(limit)

            async def one(k):
                async with sem:
                    try:
                        res = await self._obs.get_async(self.store, k)
                        return k, bytes(await res.bytes_async())
                    except FileNotFoundError:
                        return k, None

            return await asyncio.gather(*(one(k) for k in keys))

        return {k: v for k, v in asyncio.run(fetch_all()) if v is not None}

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        ranges = list(ranges)
        if any(off < 0 or length is None for off, length in ranges):
            return super().get_partial(key, ranges)  # suffix/open ranges: whole value
        validate_key(key)
        if not ranges:
            return []
        try:
            size = self._obs.head(self.store, key)["size"]
            spans = [(min(off, size), min(off + length, size)) for off, length in ranges]
            wanted = [(s, e) for s, e in spans if e > s]
            got = iter(self._obs.get_ranges(self.store, key, starts=[s for s, _ in wanted],
                                            ends=[e for _, e in wanted]) if wanted else [])
        except FileNotFoundError:
            raise KeyError(key) from None
        return [bytes(next(got)) if e > s else b"" for s, e in spans]
