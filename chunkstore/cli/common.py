"""What every command of the CLI shares: errors and notes, opening stores and nodes, progress
bars, consolidated metadata kept true after a write."""

from __future__ import annotations

from chunkstore.storage import protocol
import argparse
import contextlib
import os
import re
import sys

from chunkstore.cli.safety import is_quiet, is_url as _is_url, scrub_temp_names
from chunkstore.hierarchy.nodes import prefix

PROG = "chunkstore"


# ------------------------------------------------------------------------------ errors
class CLIError(Exception):
    """An error reported to the user as one line, exit status 1."""


class UsageError(CLIError):
    """A bad command line, exit status 2."""


def _one_line(text):
    text = re.sub(r"^\[Errno \d+\] ", "", scrub_temp_names(str(text)))
    return " ".join(text.split())


def _message(e):
    if isinstance(e, KeyError) and len(e.args) == 1 and isinstance(e.args[0], str):
        return e.args[0]
    msg = str(e)
    return msg if msg else type(e).__name__


def _err(text):
    print(f"{PROG}: error: {_one_line(text)}", file=sys.stderr)


def _note(text):
    if is_quiet():
        return
    print(f"{PROG}: {_one_line(text)}", file=sys.stderr)


# ------------------------------------------------------------------------------ helpers
def _open_store(spec, mode, options=None):
    """The store at spec; for reading, a local path must exist. options: fsspec storage
    options (--storage-option), for URLs only."""
    from chunkstore.storage.normalize import normalize_store
    if options and not _is_url(spec):
        raise UsageError(f"--storage-option applies to URL stores (s3://..., gcs://...), "
                         f"not to {spec}")
    if not _is_url(spec) and mode in ("r", "r+") and not os.path.exists(spec):
        raise CLIError(f"no such file or directory: {spec}")
    return normalize_store(spec, mode=mode, storage_options=options)


def _close(store):
    close = protocol.closer(store)
    if close is not None:
        close()


def _norm(path):
    from chunkstore.hierarchy.creation import normalize_path
    try:
        return normalize_path(path)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None


def _join(a, b):
    return prefix(a) + b


def _kind(store, path):
    from chunkstore.hierarchy import nodes
    return nodes.node_kind(store, path)[0]


def _format(store, path):
    """2 or 3 for the node at path (None if there is none)."""
    from chunkstore.hierarchy import nodes
    return nodes.node_kind(store, path)[1]


def _is_meta_key(key):
    from chunkstore.metadata.formats import node_document_names
    return key.rsplit("/", 1)[-1] in node_document_names()


def _count_nodes(store, keys):
    """(arrays, groups) among the metadata documents in keys (v2 and v3)."""
    from chunkstore.metadata.formats import kind_of_document
    kinds = [kind_of_document(store, k) for k in keys]
    return kinds.count("array"), kinds.count("group")


def _consolidated(store, path):
    from chunkstore.metadata.formats import is_consolidated
    return is_consolidated(store, path)


def _consolidate(store, path):
    """Consolidate the group at path in its own format (v2 .zmetadata, v3 zarr.json); a
    line saying what was done."""
    from chunkstore.metadata.formats import format_of
    fmt = format_of(_format(store, path) or 2)
    key, n = fmt.consolidate(store, path, ".zmetadata")
    what = fmt.consolidated_phrase.format(n=_plural(n, fmt.consolidated_entry))
    return f"consolidated {what} into {key}"


def _where(spec, path):
    return f"{spec} (path {path!r})" if path else spec


def _open_node(store, spec, path, read_only=True):
    from chunkstore.engine.array import Array
    from chunkstore.hierarchy.group import Group
    kind = _kind(store, path)
    if kind == "array":
        return Array(store, path=path, read_only=read_only)
    if kind == "group":
        return Group(store, path=path, read_only=read_only)
    if path:
        raise CLIError(f"no array or group at path {path!r} in {spec}")
    raise CLIError(f"no array or group at the root of {spec} (not a Zarr store?)")


def _a(word):
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@contextlib.contextmanager
def _stores(*specs_modes):
    opened = []
    try:
        for spec, mode, *options in specs_modes:
            opened.append(_open_store(spec, mode, *options))
        yield opened
    finally:
        error = None
        for s in reversed(opened):
            try:
                _close(s)
            except Exception as e:  # report the first close failure (e.g. zip rewrite)
                error = error or e
        if error is not None and sys.exc_info()[0] is None:
            raise error


# With a progress bar, data is copied in blocks of about this many decoded bytes (a batch of
# chunks, at least one), so the bar moves per batch instead of per 256 MiB block.
PROGRESS_BLOCK_BYTES = 16 * 2**20


class Progress:
    """A tqdm bar on stderr when enabled and tqdm is importable, else nothing."""

    def __init__(self, enabled, total=None, desc=None, unit="it"):
        self._bar = None
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        # unit "B": bytes, shown with binary prefixes and a throughput (e.g. 45.2MB/s); other
        # units are counts, shown as whole numbers (a scaled count read "16.0/128")
        self._bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B",
                         file=sys.stderr, dynamic_ncols=True,
                         unit_divisor=1024 if unit == "B" else 1000)

    @property
    def shown(self):
        """Whether a progress bar is being shown."""
        return self._bar is not None

    def update(self, n=1):
        """Advance the bar by *n* (nothing without a bar)."""
        if self._bar is not None:
            self._bar.update(n)

    def close(self):
        """Close the bar, if there is one. Idempotent."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _progress_enabled(args):
    if getattr(args, "progress", None) is not None:
        if args.progress and not _have_tqdm():
            # asked for, and not silently ignored
            print(f"{PROG}: --progress needs tqdm (pip install tqdm): no progress bar shown",
                  file=sys.stderr)
            return False
        return args.progress
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _have_tqdm() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def _refresh_consolidated(store, path, include_self=True):
    """Rewrite the consolidated metadata of path and of each ancestor that has some (v2
    .zmetadata, or v3 consolidated_metadata in the group's zarr.json): keeps them true."""
    parts = path.split("/") if path else []
    n = len(parts) + (1 if include_self else 0)
    for i in range(n):
        p = "/".join(parts[:i])
        if _consolidated(store, p):
            _consolidate(store, p)


@contextlib.contextmanager
def consolidated_set_aside(store, path, include_self=True):
    """For a command that deletes or replaces the node at path: the consolidated metadata
    of the groups above it leaves the node out before the command starts, the node's own
    (include_self) is removed, and each is made anew once the command ends, whatever became
    of it (the node's own where a group is there then).
    A command killed midway (or failed without the chance to refresh it) left a snapshot
    listing the node whose documents and chunks were then partly gone or replaced:
    open_consolidated (xarray's default) read the fill value where its data was, or decoded
    new chunks by the old metadata. Killed, the groups above list the node no more until
    they are consolidated again (a later cp or rm into them does it)."""
    from chunkstore.metadata.formats import format_of
    parts = path.split("/") if path else []
    aside = []
    for i in range(len(parts)):
        p = "/".join(parts[:i])
        if _consolidated(store, p):
            format_of(_format(store, p) or 2).consolidated_without(
                store, p, "/".join(parts[i:]))
            aside.append(p)
    if include_self and _consolidated(store, path) and format_of(
            _format(store, path) or 2).unconsolidate(store, path):
        aside.append(path)
    failed: BaseException | None = None
    try:
        yield
    except BaseException as e:
        failed = e
        raise
    finally:
        for p in aside:
            try:
                if _kind(store, p) == "group":
                    _consolidate(store, p)
            except Exception as e2:  # noqa: BLE001 - noted on the error in flight
                if failed is None:
                    raise
                failed.add_note(f"consolidating the metadata of group {p or '/'!r} again "
                                f"also failed: {e2!r} (run `chunkstore consolidate`)")


def _options(args, specific=None):
    """The fsspec storage options for one store of the command: --storage-option, then the
    store's own (--src-storage-option / --dst-storage-option) on top."""
    from chunkstore.cli.options import storage_options
    try:
        return storage_options(getattr(args, "storage_options", None),
                               getattr(args, specific, None) if specific else None)
    except argparse.ArgumentTypeError as e:
        raise UsageError(str(e)) from None


def clear_leftovers(store, path, head, whose, if_exists, dry):
    """Keys of no node at path, where a command makes an array, would read as its chunks (a
    failed delete leaves them): CLIError naming them (head: what is refused, as the user
    named it; whose: "the copy's"...) unless if_exists is "replace", which removes them
    (not in a dry run, which only checks)."""
    from chunkstore.hierarchy.convenience import leftover_keys
    from chunkstore.hierarchy.creation import stray_keys_error
    from chunkstore.storage.base import delitems
    stray = leftover_keys(store, path)
    if stray and if_exists != "replace":
        raise CLIError(str(stray_keys_error(
            head, stray, f"would read as {whose} chunks: use --if-exists replace, or remove "
                         f"them")))
    if stray and not dry:
        delitems(store, stray)
