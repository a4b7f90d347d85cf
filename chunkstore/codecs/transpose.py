"""``TransposeCodec``: permute a chunk's axes, with zarr-python 3's signature."""

from __future__ import annotations

from chunkstore.codecs._public import Codec, register


@register
class TransposeCodec(Codec):
    codec_name = "transpose"
    kind = "array_array"
    _fields = ("order",)

    def __init__(self, *, order):
        try:
            order = tuple(int(i) for i in order)
        except (TypeError, ValueError):
            raise ValueError(f"TransposeCodec order must be a sequence of integers, "
                             f"got {order!r}") from None
        if sorted(order) != list(range(len(order))):
            raise ValueError(f"TransposeCodec order must be a permutation of 0..n-1, "
                             f"got {order!r}")
        self._set(order=order)

    def to_dict(self):
        return {"name": "transpose", "configuration": {"order": list(self.order)}}


__all__ = ["TransposeCodec"]
