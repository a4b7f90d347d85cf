#!/usr/bin/env python
"""Whole-array writes on local disk, chunkstore against tensorstore, alternating round by
round, with the page cache's dirty data written out (os.sync) before every write.

compare.py reports the minimum of a few runs of one library after another, which on a disk
whose write-back stalls come and go says more about the stalls than about the libraries: the
same code swung 0.19x-1.09x there (README "What atomic writes cost"). Here each round writes
the same 4096x4096 float32 array (Blosc lz4, byte shuffle, as compare.py) into a new
directory with each library in turn (all removed at the end), the order swapped every round, and the median and minimum
are reported. tensorstore runs with file_io_sync false (chunkstore does not fsync either);
both replace chunks atomically (temporary file + rename).

    python asv_bench/disk_writes.py                 # 64x64 chunks, 8 rounds, in the temp dir
    python asv_bench/disk_writes.py --chunk 512 --rounds 12 --dir /data/scratch
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import benchmarks  # noqa: E402,F401  (finds chunkstore in the source tree if not installed)


def write_chunkstore(path, data, chunk):
    import chunkstore as cs
    from numcodecs import Blosc
    z = cs.open_array(path, mode="w", shape=data.shape, chunks=(chunk, chunk), dtype=data.dtype,
                      compressor=Blosc("lz4", 5, Blosc.SHUFFLE))
    t0 = time.perf_counter()
    z[...] = data
    return time.perf_counter() - t0


def write_tensorstore(path, data, chunk):
    import tensorstore as ts
    spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": path},
            "metadata": {"shape": list(data.shape), "chunks": [chunk, chunk], "dtype": "<f4",
                         "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5,
                                        "shuffle": 1}},
            "create": True, "delete_existing": True}
    a = ts.open(spec, context=ts.Context({"file_io_sync": False})).result()
    t0 = time.perf_counter()
    a[...].write(data).result()
    return time.perf_counter() - t0


WRITERS = {"chunkstore": write_chunkstore, "tensorstore": write_tensorstore}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--dir", default=None, help="where to write (default: the temp dir)")
    args = ap.parse_args(argv)
    data = np.random.default_rng(0).random((args.size, args.size), dtype=np.float32)
    root = tempfile.mkdtemp(prefix="chunkstore-diskw-", dir=args.dir)
    times = {name: [] for name in WRITERS}
    try:
        names = list(WRITERS)
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                # A new directory every round, nothing deleted until the end: deleting
                # thousands of files slows the next creations on some filesystems (ext4
                # without a journal scans for recently freed inodes), whichever library
                # writes next.
                path = os.path.join(root, f"{name}{r}.zarr")
                os.sync()
                times[name].append(WRITERS[name](path, data, args.chunk))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cs_med, ts_med = (statistics.median(times[n]) for n in names)
    print(f"{args.size}x{args.size} float32, {args.chunk}x{args.chunk} chunks, "
          f"{args.rounds} alternating rounds, seconds")
    for name in names:
        t = times[name]
        print(f"{name:12} median {statistics.median(t):.3f}  min {min(t):.3f}  "
              f"all {' '.join(f'{x:.3f}' for x in t)}")
    print(f"chunkstore / tensorstore: median {cs_med / ts_med:.2f}, "
          f"min {min(times['chunkstore']) / min(times['tensorstore']):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
