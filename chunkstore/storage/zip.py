"""Stub: real implementation coming shortly."""

from .base import BaseStore

__all__ = ['ZipStore']

class ZipStore(BaseStore):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("ZipStore is not implemented yet")

