"""Stub: real implementation coming shortly."""

from .base import BaseStore

__all__ = ['SQLiteStore']

class SQLiteStore(BaseStore):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("SQLiteStore is not implemented yet")

