"""The Zarr v2 layout: ``.zarray`` metadata, numcodecs filters and compressor, chunk keys
``1.2`` (or ``1/2`` with the "/" dimension separator; ``0`` for a 0-d array)."""

from __future__ import annotations

from typing import Any

from chunkstore.codecs.v2 import ChunkCodecV2
from chunkstore.format.keys import GridKeys
from chunkstore.storage import protocol
from chunkstore.format.layout import ArrayLayout
from chunkstore.metadata.v2 import encode_array_metadata

__all__ = ["V2Layout", "METADATA_KEY"]

METADATA_KEY = ".zarray"


class V2Layout(ArrayLayout):
    """A Zarr v2 array (see :class:`ArrayLayout`)."""

    zarr_format = 2

    def _setup(self, synchronizer: Any, cache_index: bool) -> None:
        self.codec = ChunkCodecV2.from_metadata(self.metadata)
        self._keys = GridKeys(self.path, self.stored_grid_shape,
                              self.metadata.dimension_separator, default=False)

    @property
    def metadata_key(self) -> str:
        """The store key of the array's ``.zarray``."""
        return self._prefix + METADATA_KEY

    def encode_metadata(self, metadata: Any) -> bytes:
        """The ``.zarray`` document (bytes) for the Zarr v2 array metadata *metadata*."""
        return encode_array_metadata(metadata)

    def decode_metadata(self, raw: Any) -> Any:
        """The Zarr v2 array metadata parsed from the ``.zarray`` document *raw*."""
        from chunkstore.metadata.v2 import parse_array_metadata
        return parse_array_metadata(raw, self.metadata_key, protocol.key_separator(self.store))
