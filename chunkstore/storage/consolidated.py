"""Stub: real implementation coming shortly."""

from .base import BaseStore

__all__ = ['ConsolidatedMetadataStore']

class ConsolidatedMetadataStore(BaseStore):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("ConsolidatedMetadataStore is not implemented yet")


def consolidate_metadata(store, path=""):
    raise NotImplementedError("consolidate_metadata is not implemented yet")
