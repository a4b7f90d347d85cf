"""TempStore: a DirectoryStore in a new temporary directory, removed when the process exits."""

from __future__ import annotations

import atexit
import shutil
import tempfile

from .directory import DirectoryStore

__all__ = ["TempStore"]


class TempStore(DirectoryStore):
    """zarr-python 2's TempStore: ``tempfile.mkdtemp(suffix, prefix, dir)`` as a
    DirectoryStore, deleted at interpreter exit by the process that made it (a pickled copy
    opens the same directory and deletes nothing)."""

    def __init__(self, suffix="", prefix="zarr", dir=None, normalize_keys=False,  # noqa: A002
                 dimension_separator=None, **kwargs):
        if normalize_keys:  # only passed when asked, for stores that take it
            kwargs["normalize_keys"] = True
        path = tempfile.mkdtemp(suffix=suffix, prefix=prefix, dir=dir)
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        super().__init__(path, dimension_separator=dimension_separator, **kwargs)
