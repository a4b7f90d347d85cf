"""Stub: real implementation coming shortly."""

from .base import BaseStore

__all__ = ['DirectoryStore', 'NestedDirectoryStore']

class DirectoryStore(BaseStore):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("DirectoryStore is not implemented yet")


class NestedDirectoryStore(BaseStore):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("NestedDirectoryStore is not implemented yet")

