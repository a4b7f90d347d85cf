"""User attributes persisted as JSON (`.zattrs` in Zarr v2, the `attributes` member of the
node's `zarr.json` in Zarr v3: metadata.formats knows which)."""

from __future__ import annotations

from collections.abc import MutableMapping

from chunkstore.errors import ReadOnlyError
from chunkstore.metadata.formats import format_of


class Attributes(MutableMapping):
    """A dict-like view of the JSON document at `key` in `store`.

    Every read goes to the store (other writers' updates are seen); every update rewrites the
    document once. `update()` applies many changes in one write. With a synchronizer the
    read-modify-write runs under the document's lock.
    """

    def __init__(self, store, key=".zattrs", read_only=False, cache=True, synchronizer=None,
                 zarr_format=2):
        # cache: zarr-python 2's switch for keeping the attributes in memory; they are read
        # from the store on each access here (another writer's change is seen), so it has
        # no effect
        self.store = store
        self.key = key
        self.read_only = read_only
        self.synchronizer = synchronizer
        self.zarr_format = zarr_format
        self._format = format_of(zarr_format)

    def asdict(self) -> dict:
        """All attributes, read from the store as a new ``dict`` (``{}`` where the document is
        absent).
        """
        try:
            raw = self.store[self.key]
        except KeyError:
            return {}
        return self._format.read_attributes(raw, self.key)

    def _write(self, d: dict) -> None:
        self.store[self.key] = self._format.encode_attributes(
            d, lambda: self.store[self.key], self.key)

    def _modify(self, fn) -> None:
        if self.read_only:
            raise ReadOnlyError(f"attributes at {self.key!r} are read-only")
        lock = self.synchronizer[self.key] if self.synchronizer is not None else None
        if lock is None:
            d = self.asdict()
            fn(d)
            self._write(d)
        else:
            with lock:
                d = self.asdict()
                fn(d)
                self._write(d)

    def __getitem__(self, k):
        return self.asdict()[k]

    def __setitem__(self, k, v):
        self._modify(lambda d: d.__setitem__(k, v))

    def __delitem__(self, k):
        def rm(d):
            del d[k]
        self._modify(rm)

    def update(self, *args, **kwargs):
        """Update the attributes like ``dict.update``, in one write of the document.

        Raises :class:`~chunkstore.errors.ReadOnlyError` if the attributes are read-only.
        """
        self._modify(lambda d: d.update(*args, **kwargs))

    def put(self, d: dict) -> None:
        """Replace all attributes with d."""
        self._modify(lambda cur: (cur.clear(), cur.update(d)))

    def __iter__(self):
        return iter(self.asdict())

    def __len__(self):
        return len(self.asdict())

    def __contains__(self, k):
        return k in self.asdict()

    def __repr__(self):
        return f"Attributes({self.asdict()!r})"
