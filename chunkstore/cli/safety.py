"""What keeps the CLI's writing commands (cp, convert) from leaving half a store behind.

1. Check before the first write: the command first runs "dry" (every option checked against
   every array, each new array's metadata built in a scratch MemoryStore, no data read), so
   a bad option fails, naming the array or dataset, before the destination is touched.
2. Undo on failure: what a failed command created is removed again (the node it wrote, the
   parent groups it made, the whole store if the command created it); a destination that
   existed is left as it was, apart from what --if-exists replace already replaced.
3. Errors name stores and keys, never the temporary files of atomic writes.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import shutil

__all__ = ["scrub_temp_names", "quiet", "is_quiet", "is_url", "remove_store_if_new",
           "remove_node_if_new"]

# DirectoryStore/ZipStore/FSStore write ".<name>.<32 hex>.partial" and rename it over <name>.
_TEMP_NAME = re.compile(r"\.([^/\\\s'\"]+?)\.[0-9a-f]{32}\.partial")


def scrub_temp_names(text):
    """text with every atomic-write temporary name replaced by the name it stands for."""
    return _TEMP_NAME.sub(r"\1", text)


_QUIET = contextvars.ContextVar("chunkstore_cli_quiet", default=False)


@contextlib.contextmanager
def quiet():
    """Notes are not printed inside (the dry run would print each one twice)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def is_quiet():
    """Whether notes are currently suppressed (inside :func:`quiet`)."""
    return _QUIET.get()


def is_url(spec):
    """Whether the store spec *spec* is a URL (contains ``://`` or an fsspec ``::`` chain)."""
    return "://" in spec or "::" in spec


@contextlib.contextmanager
def remove_store_if_new(spec):
    """On failure, delete the local file or directory at spec if it did not exist before.
    Wrap it around the code that opens and closes the store (delete after close)."""
    if is_url(spec) or os.path.lexists(spec):
        yield
        return
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            if os.path.isdir(spec) and not os.path.islink(spec):
                shutil.rmtree(spec)
            elif os.path.lexists(spec):
                os.remove(spec)
        raise


@contextlib.contextmanager
def remove_node_if_new(store, path, made=()):
    """On failure, remove what was written at path: the highest of path and its ancestors
    under which the store held nothing before (so parent groups made on the way go too),
    and the nodes listed in made (filled while the block runs: the paths of new nodes a
    copy merging into an existing group made below it; their chunks were left as keys of
    no node, which the same copy, run again, refused)."""
    from chunkstore.storage.base import listdir, rmdir
    parts = path.split("/") if path else []
    top = None
    for i in range(len(parts) + 1):
        p = "/".join(parts[:i])
        if not listdir(store, p):
            top = p
            break
    try:
        yield
    except BaseException:
        if top is not None:
            with contextlib.suppress(Exception):
                if top:
                    rmdir(store, top)
                else:
                    for k in list(store.keys()):
                        del store[k]
        for p in sorted(set(made)):
            if top is None or not (top == "" or p == top or p.startswith(top + "/")):
                with contextlib.suppress(Exception):
                    rmdir(store, p)
        raise
