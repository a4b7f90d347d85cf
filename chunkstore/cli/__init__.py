"""The ``chunkstore`` command line: inspect, copy, convert, remove and verify Zarr v2 and v3
stores.

    chunkstore info PATH [--path P]
    chunkstore tree PATH [--path P] [--level N]
    chunkstore ls PATH [--path P] [-r]
    chunkstore cp SRC DST [--src-path P] [--dst-path P] [--chunks 100,100]
                  [--compressor zstd:5|blosc:lz4:5:shuffle|gzip:6|none] [--dtype f4]
                  [--zarr-format 2|3] [--shards 1000,1000|none]
                  [--if-exists raise|replace|skip]
    chunkstore convert IN OUT [--path P] [--chunks ...] [--compressor ...] [--zarr-format 2|3]
    chunkstore rm PATH [--path P]
    chunkstore consolidate PATH [--path P]
    chunkstore verify PATH [--path P]

A store is a path or URL, dispatched like everywhere else in chunkstore (``*.zip``,
``*.sqlite``/``*.db``, ``*.lmdb``, ``scheme://...``, else a directory). Errors print one line,
``chunkstore: error: ...``, and exit with status 2 (usage) or 1 (anything else).

Zarr v3: every command reads v3 nodes (``zarr.json``) and sharded arrays. ``cp`` copies v3
raw (shards as they are) or recodes; ``--zarr-format`` converts between v2 and v3 and
``--shards`` sets the shard shape of v3 copies. ``consolidate`` writes v3 consolidated
metadata into the group's ``zarr.json``. ``verify`` decodes every inner chunk of every shard,
and reports a corrupt shard index by its shard key.
"""

from __future__ import annotations

import contextlib
import os
import sys

from chunkstore.cli.common import CLIError, UsageError, _err, _message, _one_line
from chunkstore.cli.parser import build_parser

# The package: parser.py (commands and options), common.py (errors, stores, progress),
# inspect.py (info/tree/ls/rm/consolidate), cp.py, convert.py, verify.py, options.py
# (--storage-option, confirmations), safety.py (dry runs, undo on failure).
__all__ = ["main", "build_parser", "_one_line"]


def _join_shape_values(argv: list[str]) -> list[str]:
    """``--chunks -1,100`` as ``--chunks=-1,100``: argparse takes a value starting with
    "-" and a digit but not a plain negative number for an option and refuses it."""
    out: list[str] = []
    it = iter(argv)
    for a in it:
        if a in ("--chunks", "--shards"):
            nxt = next(it, None)
            if nxt is not None and nxt[:1] == "-" and nxt[1:2].isdigit():
                out.append(f"{a}={nxt}")
                continue
            out.append(a)
            if nxt is not None:
                out.append(nxt)
            continue
        out.append(a)
    return out


def main(argv=None):
    """Run the command line; returns the exit status."""
    try:
        argv = _join_shape_values(list(sys.argv[1:] if argv is None else argv))
        args = build_parser().parse_args(argv)
        status = args.func(args)
        sys.stdout.flush()
        return status or 0
    except UsageError as e:
        _err(e)
        return 2
    except CLIError as e:
        _err(e)
        return 1
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. piped into head): stop quietly.
        with contextlib.suppress(Exception):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as e:  # noqa: BLE001 - one line, never a traceback
        if os.environ.get("CHUNKSTORE_TRACEBACK"):
            raise
        from chunkstore.errors import ChunkstoreError
        known = (ChunkstoreError, OSError, ValueError, TypeError, KeyError, ImportError)
        text = _message(e)
        if not isinstance(e, known):
            text = f"{type(e).__name__}: {text}"
        _err(text)
        return 1
