#!/usr/bin/env python
"""Many user threads reading random tiles from one shared handle: chunkstore, tensorstore and
zarr-python 3 in one run (the workload of benchmarks/bench_tiles.py, issue 18).

For each case (tile256: 256x256 tiles of (1,512,512) chunks; tile64: 64x64 tiles of
(1,256,256) chunks; sharded: 256x256 tiles of a Zarr v3 copy with (1,256,256) inner chunks
in (1,2048,2048) shards), each library opens the array once and N threads of a
ThreadPoolExecutor read 2000 random tiles through that handle. Every library first reads
every tile with 4 threads and is checked against the source volume; then each (threads,
library) is timed --repeat times, libraries and thread counts interleaved so that a slow
spell of the machine hits all alike, and the minimum is reported. Page cache warm.

    python asv_bench/tile_threads.py                     # all cases, threads 1 2 4 16, best of 3
    python asv_bench/tile_threads.py --cases tile256 --libs chunkstore tensorstore
    python asv_bench/tile_threads.py --data /tmp/tiles   # keep/reuse the stored copies
    python asv_bench/tile_threads.py --markdown

Fairness notes: all libraries read the same files (written by chunkstore); tensorstore runs
with its default concurrency and no chunk cache (its default), zarr-python 3 with its
defaults, chunkstore with its default pool (the core count).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from benchmarks import importable  # noqa: E402
from benchmarks.bench_tiles import (CASES, OPENERS, make_tiles, make_volume,  # noqa: E402
                                    read_tiles, verify, write_case)

LIBS = ("chunkstore", "tensorstore", "zarr")


def case_path(root, case, vol):
    path = os.path.join(root, case + ".zarr")
    if not os.path.exists(path):
        write_case(root, case, vol)
    return path


def run_case(case, path, vol, libs, threads, repeat, nreads):
    tile = CASES[case][0]
    tiles = make_tiles(tile)[:nreads]
    readers = {lib: OPENERS[lib](path, case) for lib in libs}
    for lib, read in readers.items():
        verify(read, tiles, tile, vol)
    pools = {n: ThreadPoolExecutor(n) for n in threads if n > 1}
    best = {}
    try:
        expected = None
        for _ in range(repeat):
            for n in threads:
                for lib, read in readers.items():
                    gc.collect()
                    t0 = time.perf_counter()
                    total = read_tiles(read, tiles, tile, n, pools.get(n))
                    dt = time.perf_counter() - t0
                    if expected is None:
                        expected = total
                    elif total != expected:
                        raise AssertionError(f"{lib} threads={n}: checksum {total} != {expected}")
                    best[lib, n] = min(best.get((lib, n), float("inf")), dt)
    finally:
        for p in pools.values():
            p.shutdown()
    return best


def print_table(rows, markdown):
    header = ["case", "user threads", *[f"{lib} s" for lib in LIBS],
              "chunkstore / tensorstore", "chunkstore speedup vs 1 thread"]
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for r in rows:
            print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--libs", nargs="+", default=list(LIBS), choices=list(LIBS))
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2, 4, 16])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--nreads", type=int, default=2000)
    p.add_argument("--data", help="directory for the stored copies (kept and reused); "
                                  "default: a temporary directory, removed at the end")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    libs = importable(args.libs, "tile_threads")
    root = args.data or tempfile.mkdtemp(prefix="chunkstore-tiles-")
    os.makedirs(root, exist_ok=True)
    try:
        vol = make_volume()
        rows = []
        for case in args.cases:
            path = case_path(root, case, vol)
            best = run_case(case, path, vol, libs, args.threads, args.repeat, args.nreads)
            for n in args.threads:
                t = {lib: best.get((lib, n)) for lib in LIBS}
                cs, ts = t["chunkstore"], t["tensorstore"]
                base = best.get(("chunkstore", args.threads[0]))
                rows.append([case, str(n)]
                            + [f"{t[lib]:.3f}" if t[lib] is not None else "-" for lib in LIBS]
                            + [f"{cs / ts:.2f}" if cs and ts else "-",
                               f"{base / cs:.2f}x" if cs and base else "-"])
            print(f"[tile_threads] {case} done", file=sys.stderr)
        print_table(rows, args.markdown)
    finally:
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
