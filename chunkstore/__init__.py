"""chunkstore: chunked, compressed N-dimensional arrays in the Zarr format."""

__version__ = "0.1.0"

from chunkstore import config
from chunkstore.array import Array
from chunkstore.creation import (array, create, empty, empty_like, full, full_like, load, ones,
                                 ones_like, open, open_array, save, save_array, zeros, zeros_like)
from chunkstore.errors import (ArrayNotFoundError, BoundsCheckError, ChunkDecodeError,
                               ChunkNotFoundError, ContainsArrayError, ContainsGroupError,
                               GroupNotFoundError, MetadataError, PathNotFoundError,
                               ReadOnlyError)
from chunkstore.storage import *  # noqa: F401,F403 - the store classes
