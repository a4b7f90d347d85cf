#!/usr/bin/env python
"""How far the filesystem itself lets small-chunk writes scale with threads.

Writes 4096 files of 5.7 KB (the size of a compressed 64x64 float32 chunk of the benchmark
array) into one directory, each atomically (a temporary file, then a rename over the
target: what DirectoryStore does), with 1, 2, 4 and 8 threads, through the store's own
GIL-free batch writer (chunkstore.storage._filewrite.write_files) and nothing else of
chunkstore. Each run writes into a new directory; the directories are removed at the end.

    python asv_bench/fs_scaling.py                 # in a temp dir on the default filesystem
    python asv_bench/fs_scaling.py --dir /dev/shm  # in memory
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import benchmarks  # noqa: E402,F401  (finds chunkstore in the source tree if not installed)
from chunkstore.storage._filewrite import write_files  # noqa: E402

N_FILES = 4096
BATCH = 128


def one_run(root: str, run: int, threads: int, payload: bytes) -> float:
    d = os.path.join(root, f"run{run}")
    os.makedirs(d)
    paths = [os.fsencode(os.path.join(d, f"{i // 64}.{i % 64}")) for i in range(N_FILES)]
    batches = [(paths[i:i + BATCH], i) for i in range(0, N_FILES, BATCH)]
    token = f"{run:016x}".encode()

    def write(batch):
        ps, first = batch
        failed, err = write_files(ps, [payload] * len(ps), token, first, False)
        if failed >= 0:
            raise OSError(err, os.strerror(err), os.fsdecode(ps[failed]))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(write, batches))
    return time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    p.add_argument("--repeat", type=int, default=5, help="runs per thread count (min shown)")
    args = p.parse_args(argv)
    payload = os.urandom(5700)
    root = tempfile.mkdtemp(prefix="chunkstore-fs-scaling-", dir=args.dir)
    counts = (1, 2, 4, 8)
    best = {n: float("inf") for n in counts}
    try:
        run = 0
        for _ in range(args.repeat):
            for n in counts:  # alternating, so a slow spell hits every count alike
                run += 1
                best[n] = min(best[n], one_run(root, run, n, payload))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{N_FILES} atomic 5.7 KB file writes in one directory under {root} "
          f"(min of {args.repeat}):")
    for n in counts:
        print(f"  threads={n}: {best[n] * 1e3:7.1f} ms  speedup {best[1] / best[n]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
