"""What the chunk codecs of both formats share: error messages and `out` checks."""

from __future__ import annotations

from typing import Any

import numpy as np


class ChunkCodecBase:
    """Base of ChunkCodecV2 and ChunkCodecV3 (which set dtype and nitems)."""

    __slots__ = ()

    def _error_message(self, e: Exception, key: str | None, store: Any) -> str:
        where = "failed to decode chunk"
        if key is not None:
            where += f" {key!r}"
        if store is not None:
            where += f" in {store if isinstance(store, str) else repr(store)}"
        cause = str(e) or type(e).__name__
        return f"{where}: {cause}"

    def _check_out(self, out: Any) -> None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
        if out.dtype != self.dtype:
            raise ValueError(f"out has dtype {out.dtype}, expected {self.dtype}")
        if out.size != self.nitems:
            raise ValueError(f"out has {out.size} elements, expected {self.nitems}")
        if not out.flags.writeable:
            raise ValueError("out is read-only")
        if not (out.flags.c_contiguous or out.flags.f_contiguous):
            raise ValueError("out must be C- or F-contiguous")
