"""``TransposeCodec``: permute a chunk's axes, with zarr-python 3's signature; also the
array -> array codec of a Zarr v3 chain."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from chunkstore.codecs._public import Codec
from chunkstore.codecs.chain_codecs import ChainContext, _check_keys, _int
from chunkstore.codecs.registry import register


@register
class TransposeCodec(Codec):
    """``transpose``: permute the axes; encoded[i] axis = input axis ``order[i]``."""

    name = "transpose"
    kind = "array_array"
    _fields = ("order",)

    def __init__(self, *, order: Iterable[int]) -> None:
        try:
            order = tuple(int(i) for i in order)
        except (TypeError, ValueError):
            raise ValueError(f"TransposeCodec order must be a sequence of integers, "
                             f"got {order!r}") from None
        if sorted(order) != list(range(len(order))):
            raise ValueError(f"TransposeCodec order must be a permutation of 0..n-1, "
                             f"got {order!r}")
        self.order = order

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "TransposeCodec":
        """The codec of a v3 chain for chunks of ``len(ctx.shape)`` dimensions."""
        _check_keys(conf, ("order",), cls.name)
        if "order" not in conf:
            raise ValueError("codec 'transpose': missing configuration field 'order'")
        order, ndim = conf["order"], len(ctx.shape)
        if isinstance(order, str):
            # early drafts (and some writers) used "C"/"F"
            if order == "C":
                order = list(range(ndim))
            elif order == "F":
                order = list(range(ndim))[::-1]
            else:
                raise ValueError(f"codec 'transpose': invalid order {order!r}")
        if not isinstance(order, (list, tuple)):
            raise ValueError(f"codec 'transpose': order must be a list of integers, got {order!r}")
        order = tuple(_int(o, "codec 'transpose' order entry", 0) for o in order)
        if sorted(order) != list(range(ndim)):
            raise ValueError(
                f"codec 'transpose': order {list(order)} is not a permutation of "
                f"{list(range(ndim))} (the chunk has {ndim} dimensions)"
            )
        return cls(order=order)

    def encoded_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the codec's output for an input of ``shape``."""
        return tuple(shape[o] for o in self.order)

    def encoded_dtype(self, dtype: np.dtype) -> np.dtype:
        """The data type of the codec's output: its input's."""
        return dtype

    def encode_array(self, arr: np.ndarray) -> np.ndarray:
        """The chunk with its axes permuted (a view)."""
        return arr.transpose(self.order)

    def decode_array(self, arr: np.ndarray) -> np.ndarray:
        """The encoded chunk's axes put back (a view)."""
        return arr.transpose(np.argsort(self.order))

    def to_dict(self) -> dict:
        """The JSON document."""
        return {"name": "transpose", "configuration": {"order": list(self.order)}}


__all__ = ["TransposeCodec"]
