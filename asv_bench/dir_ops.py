#!/usr/bin/env python
"""The filesystem's own ceiling for parallel chunk writers, without chunkstore: P processes
(released together) each write their share of 4096 files of 16 KiB (the chunk files of
sync_scaling.py's 4096x4096 float32 array in 64x64 chunks) with plain system calls, in one
directory (chunk keys "y.x") or in one directory per chunk row ("y/x").

- ``rename``: write a new file, rename it over the target (an atomic replace);
- ``exchange``: write a new file, renameat2(RENAME_EXCHANGE) it with the target, unlink the
  old one (chunkstore's DirectoryStore overwrite, see README "What atomic writes cost");
- ``inplace``: open the target and write it (not atomic: a reader may see a torn chunk).

Creating and renaming files takes the directory's lock, so writers sharing a directory wait
for each other there whatever the library does above it; the speedup of 2 processes over 1
here bounds what sync_scaling.py can show.

    python asv_bench/dir_ops.py                  # tmpfs (/dev/shm), 5 rounds
    python asv_bench/dir_ops.py --root /tmp --repeat 3
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import tempfile
import time
from multiprocessing import get_context

NFILES, SIZE, ROW = 4096, 16384, 64
_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _write(op, path, data):
    if op == "inplace":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, data)
        os.close(fd)
        return
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, data)
    os.close(fd)
    if op == "exchange" and _libc.renameat2(_AT_FDCWD, tmp.encode(), _AT_FDCWD,
                                            path.encode(), _RENAME_EXCHANGE) == 0:
        os.unlink(tmp)
    else:
        os.rename(tmp, path)


def _worker(op, root, sep, ids, barrier, out):
    data = os.urandom(SIZE)
    barrier.wait()
    t0 = time.perf_counter()
    for i in ids:
        _write(op, f"{root}/{i // ROW}{sep}{i % ROW}", data)
    out.put(time.perf_counter() - t0)


def _round(ctx, op, root, sep, nproc):
    barrier, out = ctx.Barrier(nproc), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(op, root, sep,
                                               range(k * NFILES // nproc,
                                                     (k + 1) * NFILES // nproc),
                                               barrier, out))
             for k in range(nproc)]
    for p in procs:
        p.start()
    times = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return max(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default="/dev/shm", help="filesystem to write in")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    ctx = get_context("fork")
    print("| layout | write | 1 process | 2 processes | speedup |")
    print("|---|---|---:|---:|---:|")
    for sep, name in ((".", "one directory (y.x)"), ("/", "a directory per row (y/x)")):
        root = tempfile.mkdtemp(prefix="chunkstore-dirops-", dir=args.root)
        try:
            if sep == "/":
                for r in range(NFILES // ROW):
                    os.mkdir(f"{root}/{r}")
            for op in ("rename", "exchange", "inplace"):
                _round(ctx, op, root, sep, 1)  # the files exist: every round overwrites
                one = min(_round(ctx, op, root, sep, 1) for _ in range(args.repeat))
                two = min(_round(ctx, op, root, sep, 2) for _ in range(args.repeat))
                print(f"| {name} | {op} | {one * 1e3:.1f} ms | {two * 1e3:.1f} ms | "
                      f"{one / two:.2f}x |")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
