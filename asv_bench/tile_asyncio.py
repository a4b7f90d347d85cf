#!/usr/bin/env python
"""Random tiles read by N asyncio tasks: chunkstore's AsyncArray, against the same reads by
N threads on chunkstore's synchronous API, and against zarr-python 3's AsyncArray, in one
run (the volume and tiles of tile_threads.py / benchmarks/bench_tiles.py).

Per case (tile256: 256x256 tiles of (1,512,512) chunks; sharded: 256x256 tiles of a Zarr
v3 copy with (1,256,256) inner chunks in (1,2048,2048) shards), each way opens the array
once and reads --reads random tiles with N at a time in flight (N asyncio tasks, each
taking the next tile when its last read is done; N threads of a ThreadPoolExecutor). Every way is first
checked against the source volume; then timed --repeat times, ways and N interleaved, and
the minimum reported. Page cache warm; all read the same files (written by chunkstore).

    python asv_bench/tile_asyncio.py                       # N 1 4 16, best of 3
    python asv_bench/tile_asyncio.py --cases tile256 --tasks 16 --repeat 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from benchmarks.bench_tiles import CASES, make_tiles, make_volume, write_case  # noqa: E402

WAYS = ("chunkstore async", "chunkstore threads", "zarr async")


def _open(way, path):
    if way == "chunkstore async":
        import chunkstore as cs
        return cs.AsyncArray(cs.open_array(path, mode="r"))
    if way == "chunkstore threads":
        import chunkstore as cs
        return cs.open_array(path, mode="r")
    import zarr
    return zarr.open_array(path, mode="r")._async_array


def read_all(way, arr, tiles, tile, n, pool=None):
    """Every tile read, n in flight; returns the tiles' sum (so no read is skipped)."""
    def sel(k, y, x):
        return (k, slice(y, y + tile), slice(x, x + tile))

    if way == "chunkstore threads":
        if n == 1:
            return sum(int(arr[sel(*t)].sum()) for t in tiles)
        return sum(int(v.sum()) for v in pool.map(lambda t: arr[sel(*t)], tiles))

    async def main():
        todo = iter(tiles)  # shared: each task takes the next tile, as the pool's threads do

        async def task():
            total = 0
            for t in todo:
                total += int((await arr.getitem(sel(*t))).sum())
            return total

        return sum(await asyncio.gather(*(task() for _ in range(n))))

    return asyncio.run(main())


def check(way, arr, tiles, tile, vol, pool):
    want = sum(int(vol[k, y:y + tile, x:x + tile].sum()) for k, y, x in tiles[:200])
    got = read_all(way, arr, tiles[:200], tile, 4, pool)
    if got != want:
        raise AssertionError(f"{way} read wrong tiles ({got} != {want})")
    t = tiles[0]
    one = read_all(way, arr, [t], tile, 1, pool)
    if one != int(vol[t[0], t[1]:t[1] + tile, t[2]:t[2] + tile].sum()):
        raise AssertionError(f"{way} read a wrong tile")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--cases", nargs="+", default=["tile256", "sharded"], choices=list(CASES))
    p.add_argument("--tasks", nargs="+", type=int, default=[1, 4, 16])
    p.add_argument("--reads", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    a = p.parse_args(argv)
    root = tempfile.mkdtemp(prefix="tile-asyncio-")
    vol = make_volume()
    rows = []
    try:
        for case in a.cases:
            tile = CASES[case][0]
            path = write_case(root, case, vol)
            tiles = make_tiles(tile)[:a.reads]
            pools = {n: ThreadPoolExecutor(n) for n in set(a.tasks) | {4}}
            arrays = {w: _open(w, path) for w in a.ways}
            for w in a.ways:
                check(w, arrays[w], tiles, tile, vol, pools[4])
            best = {}
            for _ in range(a.repeat):
                for n in a.tasks:
                    for w in a.ways:
                        t0 = time.perf_counter()
                        read_all(w, arrays[w], tiles, tile, n, pools.get(n))
                        dt = time.perf_counter() - t0
                        best[w, n] = min(best.get((w, n), dt), dt)
            for pool in pools.values():
                pool.shutdown()
            for n in a.tasks:
                rows.append((case, n, *(best.get((w, n)) for w in WAYS)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("tiles verified against the volume for every way")
    print(f"{'case':<8} {'N':>3} " + " ".join(f"{w + ' s':>20}" for w in WAYS) +
          f" {'threads/async':>14} {'zarr/async':>11}")
    for case, n, ca, ct, za in rows:
        def f(v):
            return f"{v:>20.3f}" if v is not None else f"{'-':>20}"
        r1 = f"{ct / ca:>14.2f}" if ca and ct else f"{'-':>14}"
        r2 = f"{za / ca:>11.2f}" if ca and za else f"{'-':>11}"
        print(f"{case:<8} {n:>3} {f(ca)} {f(ct)} {f(za)} {r1} {r2}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
