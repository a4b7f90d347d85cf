#!/usr/bin/env python
"""Many processes, one array: P writer processes with one thread each, released together,
each writing its own slab of a 4096x4096 float32 array in 64x64 chunks (default Blosc),
with and without a ProcessSynchronizer, on tmpfs (/dev/shm) and on disk. Every round is
verified (every element distinct, alternating between two versions).

On a loaded machine wall times say little about parallelism, so each round is also shown
"unloaded": from the barrier's release to the last writer's end, less the time each writer
spent runnable but waiting for a CPU (Linux /proc/thread-self/schedstat). Lock waits are
sleeps, not run-queue waits, so they stay in.

Configurations run alternately (one round of each in turn), so a slow spell of a loaded
machine hits all of them alike; the table shows the best round of each and its speedup over
one process writing everything without a synchronizer.

    python asv_bench/sync_scaling.py                      # tmpfs and disk, 5 rounds
    python asv_bench/sync_scaling.py --fs tmpfs --repeat 7
    python asv_bench/sync_scaling.py --fs tmpfs --separator /   # nested chunk directories

Chunk keys with the default "." separator put all 4096 chunk files in one directory, and
every atomic chunk write creates and renames a file there: the filesystem serialises those
on the directory (asv_bench/dir_ops.py measures that ceiling with plain system calls, no
chunkstore). "/" puts each chunk row in its own directory, so writers of different slabs
meet in no directory.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import benchmarks  # noqa: E402,F401  (finds chunkstore in the source tree if not installed)
from benchmarks.bench_sync import SlabJob, fs_root  # noqa: E402

CONFIGS = [  # (writers, aligned, synchronized)
    (1, True, False), (1, True, True),
    (2, True, False), (2, True, True), (2, False, True),
    (4, True, False), (4, True, True), (4, False, True),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fs", choices=["tmpfs", "disk", "both"], default="both")
    p.add_argument("--repeat", type=int, default=5, help="rounds per configuration (best shown)")
    p.add_argument("--writers", default="1,2,4", help="writer counts to run")
    p.add_argument("--separator", choices=[".", "/"], default=".",
                   help="dimension separator of the chunk keys ('/': nested directories)")
    args = p.parse_args(argv)
    counts = {int(x) for x in args.writers.split(",")}
    import chunkstore
    print(f"chunkstore from {os.path.dirname(chunkstore.__file__)}")
    for fs in (["tmpfs", "disk"] if args.fs == "both" else [args.fs]):
        configs = [c for c in CONFIGS if c[0] in counts or c[0] == 1]
        jobs = {c: SlabJob(fs_root(fs), *c, separator=args.separator) for c in configs}
        best = {c: float("inf") for c in configs}
        unloaded = {c: float("inf") for c in configs}
        try:
            for j in jobs.values():
                j.run()  # warm up
            for _ in range(args.repeat):
                for c, j in jobs.items():
                    best[c] = min(best[c], j.run())
                    unloaded[c] = min(unloaded[c], j.unloaded)
                    j.verify()
        finally:
            for j in jobs.values():
                j.close()
        base, ubase = best[(1, True, False)], unloaded[(1, True, False)]
        print(f"\n{fs}, chunk keys with {args.separator!r}: best of {args.repeat} rounds; "
              f"'unloaded' subtracts each writer's time waiting for a CPU")
        print("| writers | slabs | synchronizer | time | speedup | unloaded | speedup |")
        print("|---|---|---|---|---|---|---|")
        for c in configs:
            n, aligned, synced = c
            print(f"| {n} | {'aligned' if aligned else 'unaligned'} | "
                  f"{'ProcessSynchronizer' if synced else 'none'} | {best[c] * 1e3:.1f} ms | "
                  f"{base / best[c]:.2f}x | {unloaded[c] * 1e3:.1f} ms | "
                  f"{ubase / unloaded[c]:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
