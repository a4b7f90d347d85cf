"""Stub: real implementation coming shortly."""

from .base import BaseStore

__all__ = ['LMDBStore']

class LMDBStore(BaseStore):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("LMDBStore is not implemented yet")

