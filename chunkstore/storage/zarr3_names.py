"""zarr-python 3's store names and constructors over chunkstore's stores:
``LocalStore(root, read_only=)`` and ``FsspecStore(fs, path=, read_only=)`` /
``FsspecStore.from_url(url, storage_options=)``. (``MemoryStore`` and ``ZipStore`` take
zarr-python 3's arguments themselves.)"""

from __future__ import annotations

from typing import Any

import os
import pathlib

from .directory import DirectoryStore
from .fsspec_store import FSStore


class LocalStore(DirectoryStore):
    """A directory on the local filesystem (zarr-python 3's name for DirectoryStore)."""

    def __init__(self, root: str | os.PathLike, *, read_only: bool = False):
        super().__init__(root, mode="r" if read_only else "a")

    @property
    def root(self) -> pathlib.Path:
        """The store's directory, as a :class:`pathlib.Path`."""
        return pathlib.Path(self.path)

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.path, "read_only": self.read_only}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # unpickling re-runs __init__ on purpose (mypy flags any instance.__init__ access)
        self.__init__(state["root"], read_only=state["read_only"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"


class FsspecStore(FSStore):
    """A store on an fsspec filesystem (zarr-python 3's name and constructor for FSStore)."""

    def __init__(self, fs: Any, read_only: bool = False, path: str = "/",
                 allowed_exceptions: tuple | None = None) -> None:
        super().__init__(path, mode="r" if read_only else "a", fs=fs,
                         missing_exceptions=allowed_exceptions)

    @classmethod
    def from_url(cls, url: str, storage_options: dict | None = None, read_only: bool = False,
                 allowed_exceptions: tuple | None = None) -> "FsspecStore":
        """Open a store at *url*, like ``zarr.storage.FsspecStore.from_url``.

        Parameters
        ----------
        url : str
            An fsspec URL (``"s3://bucket/path"``, ``"memory://x"``, ...).
        storage_options : dict, optional
            Keyword arguments for the fsspec filesystem.
        read_only : bool
            Open the store read-only.
        allowed_exceptions : tuple, optional
            The exceptions that mean a missing key.
        """
        import fsspec.core
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        return cls(fs, read_only=read_only, path=path, allowed_exceptions=allowed_exceptions)

    @classmethod
    def from_mapper(cls, fs_map: Any, read_only: bool = False,
                    allowed_exceptions: tuple | None = None) -> "FsspecStore":
        """Create a store from an fsspec ``FSMap`` (its filesystem and root), like
        ``zarr.storage.FsspecStore.from_mapper``.
        """
        return cls(fs_map.fs, read_only=read_only, path=fs_map.root,
                   allowed_exceptions=allowed_exceptions)

    @property
    def path(self) -> str:
        """The store's root path on its filesystem."""
        return self.root

    def _reopen_args(self) -> dict[str, Any] | None:
        return None  # another constructor than FSStore's: pickled by __getstate__

    def __getstate__(self) -> dict[str, Any]:
        return {"fs": self.fs, "read_only": self.read_only, "path": self.root,
                "allowed_exceptions": self.missing_exceptions}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # unpickling re-runs __init__ on purpose (mypy flags any instance.__init__ access)
        self.__init__(**state)  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"FsspecStore({type(self.fs).__name__}, {self.root!r})"
