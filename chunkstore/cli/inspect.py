"""The commands that look at a store or tidy it: info, tree, ls, rm, consolidate."""

from __future__ import annotations

from chunkstore.cli.common import (CLIError, UsageError, _consolidate, _join, _kind, _norm,
                                   _open_node, _options, _refresh_consolidated, _stores, _where)


def cmd_info(args):
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        print(repr(_open_node(store, args.store, path).info))
    return 0


def cmd_tree(args):
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
    from chunkstore.cli.options import confirm
    from chunkstore.storage.base import rmdir
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
        if path:
            rmdir(store, path)
            _refresh_consolidated(store, path.rsplit("/", 1)[0] if "/" in path else "")
            print(f"removed {kind} {path!r} from {args.store}")
        else:
            rmdir(store, "")
            print(f"removed everything from {args.store}")
    return 0


def cmd_consolidate(args):
    path = _norm(args.path)
    with _stores((args.store, "r+", _options(args))) as (store,):
        if _kind(store, path) != "group":
            _open_node(store, args.store, path)
            raise CLIError(f"{_where(args.store, path)} holds an array; consolidate a group")
        print(f"{_consolidate(store, path)} in {args.store}")
    return 0


