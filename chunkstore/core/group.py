"""zarr-python 3's ``zarr.core.group``: Group, AsyncGroup and the group metadata types."""

from chunkstore.aio.group import AsyncGroup
from chunkstore.compat.node_api import ConsolidatedMetadata, GroupMetadata
from chunkstore.hierarchy.group import Group

__all__ = ["AsyncGroup", "ConsolidatedMetadata", "Group", "GroupMetadata"]
