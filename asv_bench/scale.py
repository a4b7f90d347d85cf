#!/usr/bin/env python
"""How costs grow with the work: chunkstore against zarr-python 3 and tensorstore, at two
sizes, in one run (issue 30).

Workloads (each library in a fresh process per measurement, imports excluded; libraries and
sizes alternating round by round; best of --repeat):

- ``open``: ``open_consolidated`` + listing the arrays (name and Array of each) of a group of
  N small arrays (zarr-python writes it, attributes on each, consolidated), Zarr v2 and v3;
  chunkstore and zarr-python (tensorstore has no hierarchies).
- ``tree``: ``str(group.tree())`` of that group (zarr-python asked for every node; its
  default stops at 500).
- ``count``: ``nchunks_initialized`` of a Zarr v3 uint8 array of N (16, 16) chunks on disk;
  tensorstore lists the same keys (``KvStore.list``), what the count needs at least.
- ``copy``: an array-to-array copy of a float32 Zarr v2 array (256² chunks, zstd level 0;
  chunkstore writes it) into sharded Zarr v3 (256² chunks in 2048² shards, zstd level 0):
  chunkstore's ``from_array(dst, data=src)``, zarr-python's ``from_array(dst, data=src)``,
  tensorstore's ``dst.write(src)``. The two store chunks alike, so chunkstore moves the
  stored chunks (each decoded once to check it) instead of re-encoding them.
- ``recode``: the same copy from a source compressed with Blosc lz4 (zarr-python 2's
  default): every chunk is decoded and encoded again, by every library.

  Peak resident memory of the process is reported beside the time (``VmHWM``, imports
  included), and four random windows of each copy are checked against the source.

The growth column is the slope of log(time) against log(size) between the two sizes (1.0:
linear in the work).

    python asv_bench/scale.py                           # every workload, small sizes
    python asv_bench/scale.py --workloads copy --copy-sides 11584 23168   # 0.5 and 2 GiB
    python asv_bench/scale.py --workloads open,tree --members 1000 4000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# One measurement, in its own process: argv = workload, library, path(s)
CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
what, lib, path = sys.argv[1], sys.argv[2], sys.argv[3]
res = {}
if lib == "tensorstore":
    import tensorstore as ts
    import numpy as np
else:
    mod = __import__("chunkstore" if lib == "chunkstore" else "zarr")
    import numpy as np
if what == "open":
    t = time.perf_counter()
    g = mod.open_consolidated(path, mode="r")
    arrays = dict(g.arrays())
    res["time"] = time.perf_counter() - t
    res["n"] = len(arrays)
    t = time.perf_counter()
    text = str(g.tree() if lib == "chunkstore" else g.tree(max_nodes=10**9))  # all nodes
    res["tree"] = time.perf_counter() - t
    res["lines"] = text.count("\n")
elif what == "count":
    if lib == "tensorstore":
        kv = ts.KvStore.open({"driver": "file", "path": path + "/"}).result()
        t = time.perf_counter()
        keys = kv.list().result()
        res["n"] = sum(1 for k in keys if k.startswith(b"c/"))
    else:
        a = mod.open_array(path, mode="r")
        t = time.perf_counter()
        res["n"] = a.nchunks_initialized
    res["time"] = time.perf_counter() - t
elif what in ("copy", "recode"):
    dst = sys.argv[4]
    if lib == "tensorstore":
        src = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": path}}).result()
        t = time.perf_counter()
        out = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": dst},
                       "metadata": {"shape": list(src.shape), "data_type": "float32",
                                    "chunk_grid": {"name": "regular", "configuration":
                                                   {"chunk_shape": [2048, 2048]}},
                                    "codecs": [{"name": "sharding_indexed", "configuration": {
                                        "chunk_shape": [256, 256],
                                        "codecs": [{"name": "bytes", "configuration":
                                                    {"endian": "little"}},
                                                   {"name": "zstd",
                                                    "configuration": {"level": 0}}]}}],
                                    "fill_value": 0}},
                      create=True, delete_existing=True).result()
        out.write(src).result()
        res["time"] = time.perf_counter() - t
        read_src, read_dst = (lambda s: src[s].read().result()), (lambda s: out[s].read().result())
    else:
        src = mod.open_array(path, mode="r")
        codec = (mod.codecs.ZstdCodec(level=0))
        t = time.perf_counter()
        out = mod.from_array(dst, data=src, chunks=(256, 256), shards=(2048, 2048),
                             compressors=[codec], zarr_format=3, overwrite=True)
        res["time"] = time.perf_counter() - t
        read_src, read_dst = (lambda s: src[s]), (lambda s: out[s])
    rng = np.random.default_rng(0)
    for _ in range(4):
        i, j = (int(rng.integers(0, n - 300)) for n in src.shape)
        sl = (slice(i, i + 300), slice(j, j + 300))
        if not np.array_equal(read_src(sl), read_dst(sl)):
            raise SystemExit(f"{lib}: the copy differs from the source at {sl}")
    res["n"] = int(np.prod(src.shape))
# VmHWM: this process's own peak (ru_maxrss would carry the parent's over the exec)
with open("/proc/self/status") as f:
    res["rss_mib"] = next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
print(json.dumps(res))
"""

# workload -> (libraries, label, unit of its size)
WORKLOADS = {
    "open": (("chunkstore", "zarr"), "open_consolidated + list arrays", "arrays"),
    "tree": (("chunkstore", "zarr"), "tree() of every node", "arrays"),
    "count": (("chunkstore", "zarr", "tensorstore"), "nchunks_initialized (ts: list keys)",
              "chunks"),
    "copy": (("chunkstore", "zarr", "tensorstore"), "v2 zstd -> sharded v3 zstd copy",
             "elements"),
    "recode": (("chunkstore", "zarr", "tensorstore"), "v2 blosc -> sharded v3 zstd copy",
               "elements"),
}


def make_group(path, n, fmt):
    """A consolidated group of n small arrays, written by zarr-python."""
    import warnings

    import zarr
    warnings.simplefilter("ignore")
    g = zarr.open_group(path, mode="w", zarr_format=fmt)
    for i in range(n):
        g.create_array(f"a{i:05d}", shape=(10,), dtype="f4", chunks=(5,),
                       attributes={"i": i, "units": "m"})
    zarr.consolidate_metadata(path)


def make_counted(path, nchunks):
    """A v3 uint8 array of nchunks (16, 16) chunks, every one stored."""
    import chunkstore as cs
    side = int(round(nchunks ** 0.5)) * 16
    a = cs.create_array(path, shape=(side, side), chunks=(16, 16), dtype="u1",
                        compressors=None, zarr_format=3)
    a[...] = 1


def make_source(path, side, compressor):
    """A float32 v2 array of side² elements in 256² chunks (smooth values plus noise),
    compressed with *compressor* (None: chunkstore's default, zstd level 0)."""
    import numpy as np

    import chunkstore as cs
    kw = {} if compressor is None else {"compressors": compressor}
    a = cs.create_array(path, shape=(side, side), chunks=(256, 256), dtype="f4",
                        zarr_format=2, **kw)
    rng = np.random.default_rng(side)
    step = 2048
    for i in range(0, side, step):
        rows = min(step, side - i)
        base = np.linspace(i, i + rows, rows, dtype="f4")[:, None]
        a[i:i + rows] = base + np.round(rng.random((rows, side), dtype="f4"), 2)


def measure(what, lib, *paths):
    args = [sys.executable, "-c", CHILD, "open" if what == "tree" else what, lib, *paths]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"{lib} {what} {' '.join(paths)} failed:\n{run.stderr}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--workloads", default="open,tree,count,copy,recode")
    p.add_argument("--members", nargs=2, type=int, default=[500, 2000],
                   help="arrays in the group (open, tree)")
    p.add_argument("--chunk-counts", nargs=2, type=int, default=[15_625, 62_500],
                   help="stored chunks (count)")
    p.add_argument("--copy-sides", nargs=2, type=int, default=[4096, 8192],
                   help="edge of the float32 square copied (copy; 23168: 2 GiB)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default=None, help="where the data goes (default: a temporary "
                   "directory on local disk, removed afterwards)")
    a = p.parse_args(argv)
    wanted = a.workloads.split(",")
    for w in wanted:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    root = tempfile.mkdtemp(prefix="scale-", dir=a.dir)
    sizes = {"open": a.members, "tree": a.members, "count": a.chunk_counts,
             "copy": a.copy_sides, "recode": a.copy_sides}
    best: dict = {}
    try:
        cases = []  # (workload, format, size, paths)
        for fmt in (2, 3):
            for n in a.members:
                path = os.path.join(root, f"v{fmt}-{n}.zarr")
                if {"open", "tree"} & set(wanted):
                    make_group(path, n, fmt)
                    cases += [(w, fmt, n, (path,)) for w in ("open", "tree") if w in wanted]
        if "count" in wanted:
            for n in a.chunk_counts:
                path = os.path.join(root, f"count-{n}.zarr")
                make_counted(path, n)
                cases.append(("count", 3, n, (path,)))
        import numcodecs
        # (the default v2 compressor: zstd level 0, written without the "checksum" member,
        # which tensorstore refuses)
        for what, comp in (("copy", None),
                           ("recode", numcodecs.Blosc(cname="lz4", clevel=5,
                                                      shuffle=numcodecs.Blosc.SHUFFLE))):
            if what in wanted:
                for side in a.copy_sides:
                    path = os.path.join(root, f"{what}-src-{side}.zarr")
                    make_source(path, side, comp)
                    cases.append((what, 2, side,
                                  (path, os.path.join(root, f"{what}-dst-{side}.zarr"))))
        # "open" and "tree" come from one child run; measure each (format, size) once
        runs = {(w if w != "tree" else "open", f, n, ps) for w, f, n, ps in cases}
        for r in range(a.repeat):
            for what, fmt, n, paths in sorted(runs):
                libs = WORKLOADS[what][0]
                for lib in (libs if r % 2 == 0 else libs[::-1]):
                    got = measure(what, lib, *paths)
                    expect = n * n if what in ("copy", "recode") else n
                    if got["n"] != expect:
                        raise AssertionError(f"{lib} {what}: {got['n']} of {expect}")
                    keys = [("time", what)] + ([("tree", "tree")] if what == "open" else [])
                    for field, w in keys:
                        k = (w, fmt, n, lib)
                        best[k] = min(best.get(k, math.inf), got[field])
                    k = ("rss", what, fmt, n, lib)
                    best[k] = min(best.get(k, math.inf), got["rss_mib"])
                    if len(paths) > 1:
                        shutil.rmtree(paths[1], ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(best, wanted, sizes)


def report(best, wanted, sizes):
    print("| workload | format | lib | small s | large s | growth | lib / chunkstore at large "
          "| peak RSS MiB (large) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for w in wanted:
        libs, label, unit = WORKLOADS[w]
        small, big = sizes[w]
        work = (lambda n: n * n) if w in ("copy", "recode") else (lambda n: n)
        for fmt in ((2, 3) if w in ("open", "tree") else (3 if w == "count" else 2,)):
            for lib in libs:
                t0, t1 = best[w, fmt, small, lib], best[w, fmt, big, lib]
                growth = math.log(t1 / t0) / math.log(work(big) / work(small))
                ratio = t1 / best[w, fmt, big, "chunkstore"]
                rss = best.get(("rss", "open" if w == "tree" else w, fmt, big, lib))
                print(f"| {label} ({work(small)}, {work(big)} {unit}) | v{fmt} | {lib} "
                      f"| {t0:.4f} | {t1:.4f} | {growth:.2f} | {ratio:.2f} "
                      f"| {rss:.0f} |")


if __name__ == "__main__":
    main()
