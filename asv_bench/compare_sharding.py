#!/usr/bin/env python
"""Compare chunkstore with zarr-python 3 and tensorstore on sharded Zarr v3 arrays.

The workloads of benchmarks/bench_sharding.py (same data and positions as bench_core.py): a
4096 x 4096 float32 array of 64 x 64 chunks, stored in 1024 x 1024 shards ("sharded") or one
file per chunk ("unsharded"), Blosc lz4 clevel 5 with byte shuffle, Zarr v3, local disk.
Every library writes its own copy and reads it back; each workload is timed --repeat times and
the minimum is reported; ratios are other/chunkstore (> 1: chunkstore faster).

Verification: every read is compared with the source data, and each library reads every other
library's sharded and unsharded arrays (all must equal the source).

    python asv_bench/compare_sharding.py                 # 4096 x 4096, min of 3
    python asv_bench/compare_sharding.py --size 1024 --repeat 1     # smoke check
    python asv_bench/compare_sharding.py --markdown

Fairness notes (as in compare.py): tensorstore gets file_io_sync=false and no cache pool
(cache_pool 0, its default), so like zarr-python 3 (which has no shard index cache) it reads
a shard's index again for every read; chunkstore keeps the decoded indexes of an open array
(a byte-bounded LRU), which is its default behaviour. zarr and tensorstore run with their
default concurrency; --threads sets only chunkstore's pool (default: the core count).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from benchmarks.bench_core import make_data, make_selections  # noqa: E402
from benchmarks.bench_sharding import INNER, SHARD  # noqa: E402
from compare import (ChunkstoreAdapter, TensorstoreAdapter, VerificationError,  # noqa: E402
                     available_libs, best_of, check_equal, fmt_ratio, fmt_s, print_table)

ALL_LIBS = ("chunkstore", "zarr", "tensorstore")
LAYOUTS = ("sharded", "unsharded")
WORKLOADS = ("write_whole", "read_whole", "read_windows", "read_points")
DESCRIPTIONS = {
    "write_whole": "write whole array",
    "read_whole": "read whole array",
    "read_windows": "50 100x100 window reads",
    "read_points": "200 single-element reads",
}


# ---------------------------------------------------------------------------- adapters
class ChunkstoreV3(ChunkstoreAdapter):
    """compare.py's chunkstore adapter (same reads and writes), creating Zarr v3 arrays."""

    def create(self, path, shape, layout):
        from benchmarks.bench_core import compressor
        return self.cs.create_array(path, shape=shape, dtype="f4", chunks=(INNER, INNER),
                                    shards=(SHARD, SHARD) if layout == "sharded" else None,
                                    compressors=compressor(), fill_value=0, zarr_format=3,
                                    overwrite=True)


class ZarrV3(ChunkstoreV3):
    name = "zarr"

    def __init__(self, threads=None):
        import zarr
        self.zarr = zarr

    def create(self, path, shape, layout):
        from zarr.codecs import BloscCodec
        return self.zarr.create_array(
            store=path, shape=shape, dtype="f4", chunks=(INNER, INNER),
            shards=(SHARD, SHARD) if layout == "sharded" else None,
            compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
            fill_value=0, zarr_format=3, overwrite=True)

    def open(self, path, mode="r"):
        return self.zarr.open_array(path, mode=mode, zarr_format=3)


class TensorstoreV3(TensorstoreAdapter):
    """compare.py's tensorstore adapter (same context, reads and writes) on the zarr3
    driver."""

    def _spec(self, path):
        return {"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.abspath(path)}}

    def create(self, path, shape, layout):
        chunk_codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                            "shuffle": "shuffle", "typesize": 4,
                                                            "blocksize": 0}}]
        if layout == "sharded":
            grid = [SHARD, SHARD]
            codecs = [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [INNER, INNER], "codecs": chunk_codecs,
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}],
                "index_location": "end"}}]
        else:
            grid, codecs = [INNER, INNER], chunk_codecs
        spec = self._spec(path)
        spec["metadata"] = {"shape": list(shape), "data_type": "float32",
                            "chunk_grid": {"name": "regular",
                                           "configuration": {"chunk_shape": grid}},
                            "chunk_key_encoding": {"name": "default"},
                            "codecs": codecs, "fill_value": 0}
        return self.ts.open(spec, create=True, delete_existing=True,
                            context=self.context).result()


ADAPTERS = {"chunkstore": ChunkstoreV3, "zarr": ZarrV3, "tensorstore": TensorstoreV3}


# ---------------------------------------------------------------------------- running
def check_layout(lib, path, layout):
    """The array on disk has the layout asked for (sharded: one file per 1024^2 shard)."""
    import json
    meta = json.load(open(os.path.join(path, "zarr.json")))
    names = [c["name"] for c in meta["codecs"]]
    grid = meta["chunk_grid"]["configuration"]["chunk_shape"]
    want_shard = layout == "sharded"
    if (names[0] == "sharding_indexed") != want_shard or \
            grid != ([SHARD, SHARD] if want_shard else [INNER, INNER]):
        raise VerificationError(f"VERIFICATION FAILED: {lib} {layout}: codecs {names}, chunk "
                                f"grid {grid}")


def run_lib(adapter, data, sel, layout, root, repeat):
    name = adapter.name
    path = os.path.join(root, f"{name}_{layout}.zarr")
    w = sel["window"]
    times, holder = {}, {}

    def fresh():  # every timed whole write goes into a new, empty array
        holder.pop("a", None)
        if os.path.exists(path):
            shutil.rmtree(path)
        holder["a"] = adapter.create(path, data.shape, layout)

    times["write_whole"], _ = best_of(repeat, lambda: adapter.write_whole(holder["a"], data),
                                      before=fresh)
    holder.clear()
    check_layout(name, path, layout)
    a = adapter.open(path, mode="r")
    times["read_whole"], got = best_of(repeat, lambda: adapter.read_whole(a))
    check_equal(f"{name} {layout} read_whole", got, data)

    windows = sel["windows"]
    times["read_windows"], got = best_of(
        repeat, lambda: [adapter.read_window(a, r, r + w, c, c + w) for r, c in windows])
    for (r, c), g in zip(windows, got):
        check_equal(f"{name} {layout} read_windows", g, data[r:r + w, c:c + w])

    points = sel["points"]
    times["read_points"], got = best_of(
        repeat, lambda: np.array([adapter.read_point(a, i, j) for i, j in points]))
    check_equal(f"{name} {layout} read_points", got, np.array([data[i, j] for i, j in points]))
    return times, path


def cross_check(libs, data, paths, threads):
    """Every library reads every other library's arrays: all equal the source data."""
    n = 0
    for reader in libs:
        adapter = ADAPTERS[reader](threads=threads)
        for (writer, layout), path in paths.items():
            if writer == reader:
                continue
            check_equal(f"{reader} reading {writer}'s {layout} array",
                        adapter.read_whole(adapter.open(path, mode="r")), data)
            n += 1
    return n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3, help="runs per workload; min is reported "
                   "(default 3)")
    p.add_argument("--size", type=int, default=4096, help="edge of the square array "
                   "(default 4096, i.e. 64 MiB of float32; a multiple of 1024 keeps the "
                   "shards whole)")
    p.add_argument("--libs", nargs="+", default=list(ALL_LIBS), choices=ALL_LIBS)
    p.add_argument("--markdown", action="store_true", help="print markdown tables")
    p.add_argument("--threads", type=int, default=None,
                   help="chunkstore.config.set(threads=N) (default: the core count)")
    p.add_argument("--dir", default=None, help="where to write the arrays (default: a temp "
                   "dir, removed at the end)")
    args = p.parse_args(argv)
    if args.repeat < 1 or args.size < 1:
        p.error("--repeat and --size must be positive")
    if "chunkstore" not in args.libs:
        p.error("--libs must include chunkstore (the ratios are relative to it)")

    data = make_data(args.size)
    sel = make_selections(args.size)
    libs = available_libs(args.libs)
    root = tempfile.mkdtemp(prefix="chunkstore-compare-sharding-", dir=args.dir)
    results, paths = {}, {}
    try:
        for layout in LAYOUTS:
            for lib in libs:
                t0 = time.perf_counter()
                adapter = ADAPTERS[lib](threads=args.threads)
                results[(layout, lib)], paths[(lib, layout)] = run_lib(
                    adapter, data, sel, layout, root, args.repeat)
                print(f"[compare_sharding] {lib:<11} {layout:<9} done in "
                      f"{time.perf_counter() - t0:5.1f}s, all results verified",
                      file=sys.stderr)
        n = cross_check(libs, data, paths, args.threads)
    except VerificationError as e:
        print(f"\n{e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)

    import chunkstore
    print(f"\nAll libraries read back data identical to the source ({args.size}x{args.size} "
          f"float32, {data.nbytes / 2**20:.0f} MiB), from their own arrays and from the "
          f"{n} arrays the others wrote.")
    print(f"Zarr v3, {INNER}x{INNER} chunks; sharded = in {SHARD}x{SHARD} shards. Min of "
          f"{args.repeat} runs, seconds; ratio = other / chunkstore (> 1: chunkstore faster). "
          f"chunkstore threads: {chunkstore.config.get('threads')}.\n")
    header = ["workload", "layout", "chunkstore s", "zarr s", "tensorstore s",
              "zarr/chunkstore", "tensorstore/chunkstore"]
    rows = []
    for wl in WORKLOADS:
        for layout in LAYOUTS:
            t = {lib: results.get((layout, lib), {}).get(wl) for lib in ALL_LIBS}
            rows.append([DESCRIPTIONS[wl], layout, fmt_s(t["chunkstore"]), fmt_s(t["zarr"]),
                         fmt_s(t["tensorstore"]), fmt_ratio(t["zarr"], t["chunkstore"]),
                         fmt_ratio(t["tensorstore"], t["chunkstore"])])
    print_table(header, rows, args.markdown)

    print("\nSharded / unsharded time per library (< 1: sharding is faster):\n")
    header = ["workload"] + [f"{lib} sharded/unsharded" for lib in libs]
    rows = []
    for wl in WORKLOADS:
        rows.append([DESCRIPTIONS[wl]] + [
            fmt_ratio(results[("sharded", lib)][wl], results[("unsharded", lib)][wl])
            for lib in libs])
    print_table(header, rows, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
