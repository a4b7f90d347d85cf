"""The commands that look at a store or tidy it: info, tree, ls, rm, consolidate."""

from __future__ import annotations

from chunkstore.cli.common import (CLIError, UsageError, _consolidate, _join, _kind, _norm,
                                   _open_node, _options, _stores, _where, consolidated_set_aside)


def cmd_info(args):
    """``chunkstore info``: print the ``.info`` report of the array or group at ``--path``;
    returns exit status 0.
    """
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        print(repr(_open_node(store, args.store, path).info))
    return 0


def cmd_tree(args):
    """``chunkstore tree``: print the hierarchy at ``--path`` as a tree (an array as name, shape
    and dtype); returns 0.
    """
    from chunkstore.engine.array import Array
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        node = _open_node(store, args.store, path)
        if isinstance(node, Array):
            print(f"{node.name} {node.shape} {node.dtype}")
        else:
            print(repr(node.tree(level=args.level)))
    return 0


def _ls_rows(grp, recursive, prefix=""):
    from chunkstore.engine.array import Array
    for name, node in grp.items():
        rel = _join(prefix, name)
        if isinstance(node, Array):
            yield rel, "array", str(node.shape), str(node.dtype)
        else:
            yield rel, "group", "", ""
            if recursive:
                yield from _ls_rows(node, recursive, rel)


def cmd_ls(args):
    """``chunkstore ls``: print one aligned row (name, kind, shape, dtype) per member at
    ``--path`` (recursively with ``-r``); returns 0.
    """
    from chunkstore.engine.array import Array
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        node = _open_node(store, args.store, path)
        if isinstance(node, Array):
            rows = [(node.basename or "/", "array", str(node.shape), str(node.dtype))]
        else:
            rows = list(_ls_rows(node, args.recursive))
        if not rows:
            return 0
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


# ------------------------------------------------------------------------------ rm / consolidate
def cmd_rm(args):
    """``chunkstore rm``: remove the array or group at ``--path`` (everything without it), after
    confirmation.

    Returns 0 when removed and 1 when the user declines. Raises ``UsageError`` where confirmation is
    needed but stdin is not a terminal and ``-f/--yes`` was not given.
    """
    from chunkstore.cli.options import confirm
    from chunkstore.hierarchy.creation import remove_node
    from chunkstore.metadata.formats import documents_first
    from chunkstore.storage.base import delitems, rmdir
    path = _norm(args.path)
    with _stores((args.store, "r+", _options(args))) as (store,):
        kind = _kind(store, path)
        if kind is None:
            _open_node(store, args.store, path)  # raises the "nothing there" error
        what = f"{kind} {path!r} from {args.store}" if path else f"everything in {args.store}"
        answer = confirm(f"remove {what}?", args.yes)
        if answer is None:
            raise UsageError(f"rm removes {what}: confirm with -f/--yes (stdin is not a "
                             f"terminal to ask on)")
        if not answer:
            print("nothing removed")
            return 1
        # (node documents first, as the library deletes: an rm interrupted midway, Ctrl-C or
        # an I/O error in a directory's tree walk, left an array whose chunks were partly
        # gone, read as the fill value)
        if path:
            with consolidated_set_aside(store, path, include_self=False):
                remove_node(store, path)
            print(f"removed {kind} {path!r} from {args.store}")
        else:
            delitems(store, documents_first(list(store.keys()), only_documents=True))
            rmdir(store, "")
    if not path:
        gone = _remove_container(args.store)
        print(f"removed everything from {args.store}" + (" and the store itself" if gone
                                                          else ""))
    return 0


def _remove_container(spec: str) -> bool:
    """After ``rm`` of everything: the local store itself (its directory, zip, SQLite or LMDB
    file), which would otherwise stay behind empty; only where nothing but empty directories
    and a store's own files are left. True when removed."""
    import os
    import shutil
    from chunkstore.cli.safety import is_url
    if not isinstance(spec, str) or is_url(spec) or not os.path.exists(spec):
        return False
    if os.path.isfile(spec):  # zip, SQLite, LMDB (subdir=False): the store is the file
        os.remove(spec)
        for extra in (spec + "-lock", spec + "-journal", spec + "-wal", spec + "-shm"):
            if os.path.exists(extra):
                os.remove(extra)
        return True
    left = [f for _, _, files in os.walk(spec) for f in files]
    if all(f in ("data.mdb", "lock.mdb") for f in left):  # empty dirs, or an LMDB's files
        shutil.rmtree(spec)
        return True
    return False


def cmd_consolidate(args):
    """``chunkstore consolidate``: write consolidated metadata for the group at ``--path``; returns
    0.

    Raises ``CLIError`` if an array is there.
    """
    path = _norm(args.path)
    with _stores((args.store, "r+", _options(args))) as (store,):
        if _kind(store, path) != "group":
            _open_node(store, args.store, path)
            raise CLIError(f"{_where(args.store, path)} holds an array; consolidate a group")
        print(f"{_consolidate(store, path)} in {args.store}")
    return 0


