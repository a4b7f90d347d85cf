"""zarr-python 3's ``zarr.abc.store``: ``Store``, the base class of every chunkstore store
(:class:`chunkstore.storage.base.BaseStore`, a mapping of keys to bytes; chunkstore's stores
have no asynchronous ``get``/``set``, so zarr's byte-request types are not here)."""

from chunkstore.storage.base import BaseStore

__all__ = ["Store"]

#: Every chunkstore store is one: ``isinstance(store, Store)`` as zarr's checks ask.
Store = BaseStore
