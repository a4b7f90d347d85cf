#!/usr/bin/env python
"""xarray's everyday workload: chunkstore's engine and writer against xarray's zarr engine
(zarr-python 3), in one run, alternating.

Three float32 variables (365, 720, 1440) in (30, 360, 360) chunks, Zarr v3 (each library
with its default codecs: both write zstd level 0), in a local directory. Timed per engine:
the write (``to_chunkstore`` / ``Dataset.to_zarr`` from NumPy-backed variables), and
``open_dataset(path, engine=..., chunks={})`` then ``mean("time").compute()``. Runs alternate
between the engines (this VM is noisy); the minimum and median of --repeat runs are reported,
with ratios zarr/chunkstore (> 1: chunkstore faster).

Verification: each engine's means equal NumPy's mean of the source (float32 tolerance), and
each engine reads the other's store to the same values, bit for bit.

    python asv_bench/compare_xarray.py                    # the full size, 3 repeats
    python asv_bench/compare_xarray.py --days 73 --repeat 1   # a quick check
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from benchmarks.bench_xarray import (ENGINES, VARIABLES, check, make_dataset,  # noqa: E402
                                     open_mean, write)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--lat", type=int, default=720)
    p.add_argument("--lon", type=int, default=1440)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    a = p.parse_args(argv)
    shape = (a.days, a.lat, a.lon)
    root = tempfile.mkdtemp(dir=a.dir, prefix="xarray-bench-")
    try:
        ds = make_dataset(shape)
        gb = sum(ds[n].nbytes for n in VARIABLES) / 1e9
        print(f"{len(VARIABLES)} float32 variables {shape}, {gb:.2f} GB; chunks (30, 360, 360)")
        paths = {e: os.path.join(root, f"{e}.zarr") for e in ENGINES}
        times = {(e, w): [] for e in ENGINES for w in ("write", "open+mean")}
        results = {}
        for r in range(a.repeat):
            order = ENGINES if r % 2 == 0 else ENGINES[::-1]
            for e in order:
                t0 = time.perf_counter()
                write(ds, paths[e], e)
                times[e, "write"].append(time.perf_counter() - t0)
            # The reads are timed on files at rest: a write's dirty pages still going to disk
            # would tax whichever read comes next (the kernel's writeback, on the same cores).
            os.sync()
            for e in order:
                t0 = time.perf_counter()
                results[e] = open_mean(paths[e], e)
                times[e, "open+mean"].append(time.perf_counter() - t0)
        for e in ENGINES:
            check(results[e], ds)
        # each engine reads the other's store to the same means
        for e in ENGINES:
            other = open_mean(paths[e], ENGINES[1] if e == ENGINES[0] else ENGINES[0])
            for n in VARIABLES:
                np.testing.assert_array_equal(other[n].values, results[e][n].values)
        print("values: checked (NumPy mean; each engine reads the other's store identically)")
        print(f"{'workload':<10} {'chunkstore min/median s':>24} {'zarr min/median s':>20} "
              f"{'zarr/chunkstore (min)':>22}")
        for w in ("write", "open+mean"):
            c, z = times["chunkstore", w], times["zarr", w]
            print(f"{w:<10} {min(c):>11.2f} / {statistics.median(c):<10.2f} "
                  f"{min(z):>8.2f} / {statistics.median(z):<9.2f} {min(z) / min(c):>20.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
