"""TempStore: a DirectoryStore in a new temporary directory, removed when the process exits."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any

from .directory import DirectoryStore

__all__ = ["TempStore"]


class TempStore(DirectoryStore):
    """zarr-python 2's TempStore: ``tempfile.mkdtemp(suffix, prefix, dir)`` as a
    DirectoryStore, deleted at interpreter exit by the process that made it (a pickled copy
    opens the same directory and deletes nothing)."""

    def __init__(self, suffix: str = "", prefix: str = "zarr",
                 dir: str | os.PathLike[str] | None = None,  # noqa: A002
                 normalize_keys: bool = False, dimension_separator: str | None = None,
                 **kwargs: Any) -> None:
        if normalize_keys:  # only passed when asked, for stores that take it
            kwargs["normalize_keys"] = True
        path = tempfile.mkdtemp(suffix=suffix, prefix=prefix, dir=dir)
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        super().__init__(path, dimension_separator=dimension_separator, **kwargs)
