"""Stub: real implementation coming shortly."""

from .base import BaseStore

__all__ = ['FSStore']

class FSStore(BaseStore):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("FSStore is not implemented yet")

