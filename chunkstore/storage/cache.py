"""Stub: real implementation coming shortly."""

from .base import BaseStore

__all__ = ['LRUStoreCache']

class LRUStoreCache(BaseStore):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("LRUStoreCache is not implemented yet")

