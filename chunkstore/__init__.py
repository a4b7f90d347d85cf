"""chunkstore: chunked, compressed N-dimensional arrays in the Zarr format."""

__version__ = "0.1.0"

from chunkstore import config
from chunkstore import dtype  # zarr-python 3's data types (chunkstore.compat.dtype.parse_dtype)
from chunkstore.storage import *  # noqa: F401,F403 - the store classes and helpers
from chunkstore.engine.array import Array
from chunkstore.hierarchy.convenience import (CopyError, LazyLoader, consolidate_metadata, copy,
                                    copy_all, copy_store, load, save, save_group, tree)
from chunkstore.hierarchy.creation import (array, create, empty, empty_like, full,
                                 full_like, ones, ones_like, open_array, open_like,
                                 save_array, zeros, zeros_like)
from chunkstore.errors import (ArrayNotFoundError, BoundsCheckError, ChunkDecodeError,
                               ChunkNotFoundError, ConsolidatedMetadataNotFoundError,
                               ContainsArrayError, ContainsGroupError,
                               GroupNotFoundError, MetadataError, PathNotFoundError,
                               ReadOnlyError)
from chunkstore.sync.synchronizers import ProcessSynchronizer, ThreadSynchronizer
from chunkstore.hierarchy.group import Group, group, open, open_consolidated, open_group
from chunkstore.compat.creation import create_array, from_array
from chunkstore.compat.hierarchy import create_group, create_hierarchy
from chunkstore.aio import AsyncArray, AsyncGroup  # zarr-python 3's asynchronous nodes
