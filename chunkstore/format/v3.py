"""The Zarr v3 layout (unsharded): ``zarr.json`` metadata, a codec chain, chunk keys in
the ``default`` (``c/1/2``, 0-d: ``c``) or ``v2`` (``1.2``, 0-d: ``0``) key encoding."""

from __future__ import annotations

from typing import Any

from chunkstore.format.keys import GridKeys
from chunkstore.format.layout import ArrayLayout

__all__ = ["V3Layout", "METADATA_KEY", "codec_names"]

METADATA_KEY = "zarr.json"


def codec_names(codecs: list[dict]) -> str:
    """A v3 codec chain as text: names, with a sharding codec's inner chain in brackets."""
    out = []
    for c in codecs:
        conf = c.get("configuration") or {}
        if c["name"] == "sharding_indexed":
            out.append(f"sharding_indexed[{codec_names(conf.get('codecs', []))}]")
        else:
            out.append(c["name"])
    return ", ".join(out)


class V3Layout(ArrayLayout):
    """A Zarr v3 array without sharding (see :class:`ArrayLayout`)."""

    zarr_format = 3

    def _setup(self, synchronizer: Any, cache_index: bool) -> None:
        from chunkstore.codecs.v3 import ChunkCodecV3
        self.codec = ChunkCodecV3.from_metadata(self.metadata)
        enc = self.metadata.chunk_key_encoding
        self._keys = GridKeys(self.path, self.stored_grid_shape,
                              enc["configuration"]["separator"], enc["name"] == "default")

    @property
    def metadata_key(self) -> str:
        """The store key of the array's ``zarr.json``."""
        return self._prefix + METADATA_KEY

    @property
    def metadata_lock_key(self) -> str:  # type: ignore[override]
        """The key of ``zarr.json``, whose lock attribute updates hold (the attributes share that
        document).
        """
        # The attributes share zarr.json with the shape: an attribute update (under this
        # document's lock) must not write back a shape read before an array-wide change.
        return self._prefix + METADATA_KEY

    def encode_metadata(self, metadata: Any) -> bytes:
        """The ``zarr.json`` document (bytes) for the Zarr v3 array metadata *metadata*."""
        from chunkstore.metadata.v3 import encode_array_metadata_v3
        return encode_array_metadata_v3(metadata)

    def decode_metadata(self, raw: Any) -> Any:
        """The Zarr v3 array metadata parsed from the ``zarr.json`` document *raw*."""
        from chunkstore.metadata.v3 import parse_node_metadata_v3
        return parse_node_metadata_v3(raw, self.metadata_key)

    def codec_info_rows(self) -> list[tuple[str, str]]:
        """One ``Array.info`` row naming the array's codec chain."""
        return [("Codecs", codec_names(self.metadata.codecs))]
