#!/usr/bin/env python
"""Compare chunkstore with zarr-python 3, zarrs-python (zarr-python 3 with zarrs' Rust codec
pipeline) and tensorstore on the core workloads.

Same data, same selections and same compressor (Blosc lz4, clevel 5, byte shuffle) as
benchmarks/bench_core.py; every library writes its own Zarr v2 copy into a directory on local
disk and reads back from that copy. Each workload is timed --repeat times and the minimum is
reported; ratios are other/chunkstore, so a ratio > 1 means chunkstore is faster.

    python asv_bench/compare.py                    # 4096 x 4096, chunks 512 and 64
    python asv_bench/compare.py --size 512 --repeat 1    # smoke check, a few seconds
    python asv_bench/compare.py --markdown         # table for the README
    python asv_bench/compare.py --threads-scaling  # threads=1 vs 2, tensorstore as the peer
    python asv_bench/compare.py --threads-scaling --dir /dev/shm   # the same in memory

Fairness notes: tensorstore gets file_io_sync=false (chunkstore's DirectoryStore and zarr's
LocalStore don't fsync either) and no chunk cache (its default, cache_pool 0). zarr and
tensorstore run with their default concurrency; --threads sets only chunkstore's pool
(chunkstore.config.set(threads=N)), whose default is the core count.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from benchmarks import importable  # noqa: E402
from benchmarks.bench_core import (compressor, expected_after_writes, make_data,  # noqa: E402
                                   make_selections, window_write_values)

ALL_LIBS = ("chunkstore", "zarr", "zarrs", "tensorstore")
WORKLOADS = ("write_whole", "read_whole", "read_points", "read_windows", "oindex", "vindex",
             "write_windows")
DESCRIPTIONS = {
    "write_whole": "write whole array",
    "read_whole": "read whole array",
    "read_points": "200 single-element reads",
    "read_windows": "50 100x100 window reads",
    "oindex": "oindex 500 x 500 sorted rows/cols",
    "vindex": "vindex 100,000 random points",
    "write_windows": "20 100x100 window writes",
}


class VerificationError(AssertionError):
    pass


# ---------------------------------------------------------------------------- adapters
# One adapter per library: create (empty array, fresh directory), open, and the operations the
# workloads need. Everything returns NumPy arrays so the results can be compared.

class ChunkstoreAdapter:
    name = "chunkstore"

    def __init__(self, threads=None):
        import chunkstore
        self.cs = chunkstore
        if threads:
            chunkstore.config.set(threads=threads)

    def create(self, path, shape, chunk):
        return self.cs.open_array(path, mode="w", shape=shape, chunks=(chunk, chunk),
                                  dtype="f4", compressor=compressor(), fill_value=0)

    def open(self, path, mode="r"):
        return self.cs.open_array(path, mode=mode)

    def read_whole(self, a):
        return a[...]

    def write_whole(self, a, data):
        a[...] = data

    def read_point(self, a, i, j):
        return a[i, j]

    def read_window(self, a, r0, r1, c0, c1):
        return a[r0:r1, c0:c1]

    def write_window(self, a, r0, r1, c0, c1, v):
        a[r0:r1, c0:c1] = v

    def oindex(self, a, rows, cols):
        return a.oindex[rows, cols]

    def vindex(self, a, rows, cols):
        return a.vindex[rows, cols]


class ZarrAdapter(ChunkstoreAdapter):
    name = "zarr"

    def __init__(self, threads=None):
        import zarr
        self.zarr = zarr

    def create(self, path, shape, chunk):
        return self.zarr.create_array(store=path, shape=shape, chunks=(chunk, chunk), dtype="f4",
                                      zarr_format=2, compressors=compressor(), filters=None,
                                      fill_value=0, overwrite=True)

    def open(self, path, mode="r"):
        return self.zarr.open_array(path, mode=mode, zarr_format=2)


class ZarrsAdapter(ZarrAdapter):
    """zarr-python 3 with zarrs' Rust codec pipeline (zarrs-python), as zarr_benchmarks runs
    it: every call under ``codec_pipeline.path = zarrs.ZarrsCodecPipeline``. Strict: where
    zarrs cannot do a selection (zarrs-python 0.2.3: integer-array oindex and vindex) it
    would silently hand it to zarr-python's own pipeline, and the zarrs column would time
    zarr-python; it raises instead, and that workload is left out (``unsupported``)."""

    name = "zarrs"
    _PIPELINE = {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline",
                 "codec_pipeline.strict": True}

    def __init__(self, threads=None):
        super().__init__(threads)
        import zarrs  # noqa: F401  (registers the pipeline)
        import zarrs.pipeline
        import zarrs.utils
        self.unsupported = tuple(
            getattr(m, e) for m, e in ((zarrs.pipeline, "UnsupportedMetadataError"),
                                       (zarrs.pipeline, "UnsupportedDataTypeError"),
                                       (zarrs.utils, "DiscontiguousArrayError"),
                                       (zarrs.utils, "UnsupportedVIndexingError"),
                                       (zarrs.utils, "FillValueNoneError"))
            if hasattr(m, e))

    def __getattribute__(self, name):
        attr = object.__getattribute__(self, name)
        if (name.startswith("_") or name in ("name", "zarr", "unsupported")
                or not callable(attr)):
            return attr
        config = object.__getattribute__(self, "zarr").config

        def under_zarrs(*args, **kwargs):
            with config.set(ZarrsAdapter._PIPELINE):
                return attr(*args, **kwargs)
        return under_zarrs


class TensorstoreAdapter:
    name = "tensorstore"

    def __init__(self, threads=None):
        import tensorstore
        self.ts = tensorstore
        # No fsync (like the other two); no chunk cache (the default), so reads hit the files.
        self.context = tensorstore.Context({"file_io_sync": False,
                                            "cache_pool": {"total_bytes_limit": 0}})

    def _spec(self, path):
        return {"driver": "zarr", "kvstore": {"driver": "file", "path": os.path.abspath(path)}}

    def create(self, path, shape, chunk):
        spec = self._spec(path)
        spec["metadata"] = {
            "shape": list(shape), "chunks": [chunk, chunk], "dtype": "<f4", "order": "C",
            "fill_value": 0, "filters": None,
            "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
        }
        return self.ts.open(spec, create=True, delete_existing=True,
                            context=self.context).result()

    def open(self, path, mode="r"):
        return self.ts.open(self._spec(path), open=True, read=True, write=(mode != "r"),
                            context=self.context).result()

    def read_whole(self, a):
        return a.read().result()

    def write_whole(self, a, data):
        a.write(data).result()

    def read_point(self, a, i, j):
        return a[i, j].read().result()

    def read_window(self, a, r0, r1, c0, c1):
        return a[r0:r1, c0:c1].read().result()

    def write_window(self, a, r0, r1, c0, c1, v):
        a[r0:r1, c0:c1].write(v).result()

    def oindex(self, a, rows, cols):
        return a.oindex[rows, cols].read().result()

    def vindex(self, a, rows, cols):
        return a.vindex[rows, cols].read().result()


ADAPTERS = {"chunkstore": ChunkstoreAdapter, "zarr": ZarrAdapter, "zarrs": ZarrsAdapter,
            "tensorstore": TensorstoreAdapter}


def available_libs(wanted):
    return importable(wanted, "compare")


# ---------------------------------------------------------------------------- timing
def best_of(repeat, fn, before=None):
    """Min wall time of fn() over `repeat` runs (before() runs untimed ahead of each); returns
    (seconds, result of the last run)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        if before is not None:
            before()
        result = None  # free the last result before the clock starts, not inside the run
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def check_equal(what, got, expected):
    got = np.asarray(got)
    if got.shape != expected.shape or not np.array_equal(got, expected):
        bad = "shape" if got.shape != expected.shape else \
            f"{int(np.count_nonzero(got != expected))} differing elements"
        raise VerificationError(f"VERIFICATION FAILED: {what}: result differs from the source "
                                f"data ({bad}; got shape {got.shape}, expected "
                                f"{expected.shape})")


def run_lib(adapter, data, sel, chunk, root, repeat):
    """All workloads for one library and chunk size; returns {workload: seconds}."""
    name = adapter.name
    path = os.path.join(root, f"{name}_c{chunk}.zarr")
    w = sel["window"]
    times = {}
    holder = {}
    unsupported = getattr(adapter, "unsupported", ())

    def timed(workload, fn):
        """best_of(repeat, fn) into times[workload]; the result, or None where the library
        cannot do the workload (then left out of the table: "-")."""
        try:
            times[workload], got = best_of(repeat, fn)
        except unsupported as e:
            times[workload] = None
            print(f"[compare] {name:<11} chunk={chunk:<4} {workload}: not supported "
                  f"({type(e).__name__}), left out", file=sys.stderr)
            return None
        return got

    def fresh():
        # Every timed whole write goes into a new, empty array under a new path. Nothing is
        # deleted until the end of the whole comparison: deleting thousands of chunk files
        # right before a timed write makes that write pay for it on some filesystems (ext4
        # without a journal skips recently freed inodes when it allocates new ones).
        holder.pop("a", None)
        holder["n"] = holder.get("n", 0) + 1
        holder["path"] = f"{path}.{holder['n']}"
        holder["a"] = adapter.create(holder["path"], data.shape, chunk)

    times["write_whole"], _ = best_of(repeat, lambda: adapter.write_whole(holder["a"], data),
                                      before=fresh)
    path = holder["path"]
    holder.clear()
    a = adapter.open(path, mode="r")

    times["read_whole"], got = best_of(repeat, lambda: adapter.read_whole(a))
    check_equal(f"{name} chunk={chunk} read_whole", got, data)

    points = sel["points"]
    times["read_points"], got = best_of(
        repeat, lambda: np.array([adapter.read_point(a, i, j) for i, j in points]))
    check_equal(f"{name} chunk={chunk} read_points", got,
                np.array([data[i, j] for i, j in points]))

    windows = sel["windows"]
    times["read_windows"], got = best_of(
        repeat, lambda: [adapter.read_window(a, r, r + w, c, c + w) for r, c in windows])
    for (r, c), g in zip(windows, got):
        check_equal(f"{name} chunk={chunk} read_windows", g, data[r:r + w, c:c + w])

    rows, cols = sel["orows"], sel["ocols"]
    got = timed("oindex", lambda: adapter.oindex(a, rows, cols))
    if got is not None:
        check_equal(f"{name} chunk={chunk} oindex", got, data[np.ix_(rows, cols)])

    vr, vc = sel["vrows"], sel["vcols"]
    got = timed("vindex", lambda: adapter.vindex(a, vr, vc))
    if got is not None:
        check_equal(f"{name} chunk={chunk} vindex", got, data[vr, vc])
    a = None  # close the read-only handle before reopening for writes

    a = adapter.open(path, mode="r+")
    values = window_write_values(data, sel)
    wins = sel["write_windows"]

    def write_windows():
        for (r, c), v in zip(wins, values):
            adapter.write_window(a, r, r + w, c, c + w, v)

    times["write_windows"], _ = best_of(repeat, write_windows)
    a = None
    final = adapter.read_whole(adapter.open(path, mode="r"))
    check_equal(f"{name} chunk={chunk} whole array after window writes", final,
                expected_after_writes(data, sel))
    return times, path


# ---------------------------------------------------------------------------- peak memory
# Peak memory of reading the whole array, measured in a fresh child process per library, so
# one library's allocator state or caches cannot hide or inflate another's.
#
# Method: after imports and opening the array (and a gc), the child resets the kernel's
# resident-set high-water mark (writing "5" to /proc/self/clear_refs, Linux >= 4.0), takes
# the current RSS as the baseline, does the read, then reads VmHWM from /proc/self/status.
# The kernel updates the high-water mark before every RSS decrease, so the figure is exact
# and cannot miss a short spike the way a sampling thread can. ru_maxrss alone would not do:
# it cannot be reset, so import-time transients could sit above the read's peak. Where
# clear_refs is unavailable the child falls back to a psutil sampling thread (every 0.5 ms)
# and reports the larger of its maximum and the ru_maxrss increase.

def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def mem_child(lib, path, threads):
    adapter = ADAPTERS[lib](threads=threads)
    a = adapter.open(path, mode="r")
    gc.collect()
    if _reset_hwm():
        method = "VmHWM"
        baseline = _status_kb("VmRSS")
        out = adapter.read_whole(a)
        peak = _status_kb("VmHWM")
    else:
        import resource

        import psutil
        method = "psutil-poll"
        proc = psutil.Process()
        baseline = proc.memory_info().rss
        maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        peak_box, stop = [baseline], threading.Event()

        def poll():
            while not stop.is_set():
                peak_box[0] = max(peak_box[0], proc.memory_info().rss)
                time.sleep(0.0005)
        t = threading.Thread(target=poll, daemon=True)
        t.start()
        out = adapter.read_whole(a)
        stop.set()
        t.join()
        peak = max(peak_box[0], proc.memory_info().rss)
        maxrss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        if maxrss1 > maxrss0:
            peak = max(peak, maxrss1)
    print(json.dumps({"lib": lib, "baseline": baseline, "peak": peak, "nbytes": out.nbytes,
                      "method": method}))


def measure_memory(lib, path, threads):
    cmd = [sys.executable, os.path.abspath(__file__), "--_mem-child", lib, path]
    if threads:
        cmd += ["--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"memory child for {lib} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- output
def fmt_s(t):
    if t is None:
        return "-"
    return f"{t:.4f}" if t < 10 else f"{t:.2f}"


def fmt_ratio(other, mine):
    if other is None or mine is None or mine <= 0:
        return "-"
    return f"{other / mine:.2f}"


def print_table(header, rows, markdown):
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = "  ".join(f"{h:<{w}}" if i == 0 else f"{h:>{w}}"
                     for i, (h, w) in enumerate(zip(header, widths)))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(f"{x:<{w}}" if i == 0 else f"{x:>{w}}"
                        for i, (x, w) in enumerate(zip(r, widths))))


# ---------------------------------------------------------------------------- modes
def run_compare(args, libs, data, sel, root):
    results = {}  # (chunk, lib) -> {workload: s}
    paths = {}  # (chunk, lib) -> the array the reads used
    for chunk in args.chunks:
        for lib in libs:
            adapter = ADAPTERS[lib](threads=args.threads)
            t0 = time.perf_counter()
            times, path = run_lib(adapter, data, sel, chunk, root, args.repeat)
            results[(chunk, lib)] = times
            paths[(chunk, lib)] = path
            print(f"[compare] {lib:<11} chunk={chunk:<4} done in "
                  f"{time.perf_counter() - t0:5.1f}s, all results verified", file=sys.stderr)
    print(f"\nAll libraries read back data identical to the source "
          f"({data.shape[0]}x{data.shape[1]} float32, {data.nbytes / 2**20:.0f} MiB).")
    print(f"Min of {args.repeat} runs, seconds; ratio = other / chunkstore "
          f"(> 1: chunkstore faster). chunkstore threads: "
          f"{_cs_threads(args.threads)}.\n")
    peers = [lib for lib in ALL_LIBS if lib != "chunkstore" and lib in libs]
    header = (["workload", "chunk", "chunkstore s"] + [f"{lib} s" for lib in peers]
              + [f"{lib}/chunkstore" for lib in peers])
    rows = []
    for w in WORKLOADS:
        for chunk in args.chunks:
            t = {lib: results.get((chunk, lib), {}).get(w) for lib in ALL_LIBS}
            rows.append([DESCRIPTIONS[w], str(chunk), fmt_s(t["chunkstore"])]
                        + [fmt_s(t[lib]) for lib in peers]
                        + [fmt_ratio(t[lib], t["chunkstore"]) for lib in peers])
    print_table(header, rows, args.markdown)
    left_out = sorted({lib for (chunk, lib), times in results.items()
                       if any(v is None for v in times.values())})
    if left_out:
        print(f"\n-: not supported by {', '.join(left_out)} (see stderr); zarrs-python would "
              f"hand such a selection to zarr-python's own pipeline")

    print("\nPeak memory of reading the whole array (fresh process per library; peak RSS "
          "above the baseline after imports and open, as a multiple of the output size):\n")
    header = ["library", "chunk", "output MiB", "baseline MiB", "peak-baseline MiB",
              "x output", "method"]
    rows = []
    for chunk in args.chunks:
        for lib in libs:
            m = measure_memory(lib, paths[(chunk, lib)], args.threads)
            extra = m["peak"] - m["baseline"]
            rows.append([lib, str(chunk), f"{m['nbytes'] / 2**20:.1f}",
                         f"{m['baseline'] / 2**20:.1f}", f"{extra / 2**20:.1f}",
                         f"{extra / m['nbytes']:.2f}", m["method"]])
    print_table(header, rows, args.markdown)
    print("\n(target for chunkstore: <= 1.25 x output)")


def _cs_threads(threads):
    import chunkstore
    if threads:
        chunkstore.config.set(threads=threads)
    return chunkstore.config.get("threads")


def _set_threads(adapter, n):
    """Run the adapter's library with n threads (tensorstore: n-wide I/O and copy pools)."""
    if adapter.name == "chunkstore":
        adapter.cs.config.set(threads=n)
    else:
        adapter.context = adapter.ts.Context({
            "file_io_sync": False, "cache_pool": {"total_bytes_limit": 0},
            "data_copy_concurrency": {"limit": n}, "file_io_concurrency": {"limit": n}})


def _memcpy_scaling(data, repeat):
    """The machine's own ceiling, as a reference row: copying the array's worth of memory
    (numpy copies release the GIL) with 1 and with 2 threads, each on its own buffers. Where
    one core nearly saturates memory bandwidth, memory-bound work cannot scale either."""
    from concurrent.futures import ThreadPoolExecutor
    half = data.size // 2
    srcs = [np.ones(half, data.dtype) for _ in range(2)]
    dsts = [np.zeros(half, data.dtype) for _ in range(2)]

    def job(k):
        np.copyto(dsts[k], srcs[k])

    best = {1: float("inf"), 2: float("inf")}
    with ThreadPoolExecutor(2) as ex:
        for _ in range(repeat):
            for n in (1, 2):
                t0 = time.perf_counter()
                if n == 1:
                    job(0)
                    job(1)
                else:
                    list(ex.map(job, (0, 1)))
                best[n] = min(best[n], time.perf_counter() - t0)
    return [f"memcpy {data.nbytes >> 20} MiB (reference)", "-", "numpy", fmt_s(best[1]),
            fmt_s(best[2]), f"{best[1] / best[2]:.2f}x"]


def _settle():
    """Between the write and the read phase: let the kernel write back what the writes left
    dirty, so that its flusher threads don't compete with the timed reads for the cores.
    (Not before every run: right after a sync the kernel still has work in flight, which
    costs a 2-thread run more than a 1-thread one.)"""
    os.sync()
    time.sleep(1.0)


def run_threads_scaling(args, data, root):
    """Whole-array write and read at 1 and 2 threads, for chunkstore and (as the peer
    measured in the same run) tensorstore.

    The runs alternate 1, 2, 1, 2, ... so that a slow spell of the machine hits both counts
    alike, and the minimum of each is reported. Every timed write goes into a new array under
    a new path; nothing is deleted until all runs of a chunk size are done, because deleting
    thousands of files right before a timed write makes that write pay for the deletion (see
    the README on ext4 without a journal)."""
    libs = [lib for lib in available_libs(["chunkstore", "tensorstore"])]
    header = ["workload", "chunk", "library", "threads=1 s", "threads=2 s", "speedup"]
    rows = []
    for chunk in args.chunks:
        for lib in libs:
            adapter = ADAPTERS[lib]()
            times = {("write", 1): [], ("write", 2): [], ("read", 1): [], ("read", 2): []}
            paths = []
            for rep in range(args.repeat):
                for n in (1, 2):
                    _set_threads(adapter, n)
                    path = os.path.join(root, f"scaling_{lib}_c{chunk}_{rep}_{n}.zarr")
                    paths.append(path)
                    a = adapter.create(path, data.shape, chunk)
                    gc.collect()
                    t0 = time.perf_counter()
                    adapter.write_whole(a, data)
                    times[("write", n)].append(time.perf_counter() - t0)
                    del a
            _settle()
            a = adapter.open(paths[0])
            for rep in range(args.repeat):
                for n in (1, 2):
                    _set_threads(adapter, n)
                    if lib == "tensorstore":
                        a = adapter.open(paths[0])  # the context (pool sizes) is per open
                    got = None  # free the last result before the clock starts
                    gc.collect()
                    t0 = time.perf_counter()
                    got = adapter.read_whole(a)
                    times[("read", n)].append(time.perf_counter() - t0)
                    check_equal(f"{lib} threads={n} chunk={chunk} read_whole", got, data)
            ops = ["write", "read"]
            if lib == "chunkstore":
                # The same read into a preallocated output: no page faults on fresh memory.
                out = np.zeros_like(data)
                times[("read into out=", 1)], times[("read into out=", 2)] = [], []
                for rep in range(args.repeat):
                    for n in (1, 2):
                        _set_threads(adapter, n)
                        gc.collect()
                        t0 = time.perf_counter()
                        a.get_basic_selection(Ellipsis, out=out)
                        times[("read into out=", n)].append(time.perf_counter() - t0)
                check_equal(f"chunkstore chunk={chunk} read into out=", out, data)
                ops.append("read into out=")
            del a, got
            for path in paths:
                shutil.rmtree(path)
            for op in ops:
                t1, t2 = min(times[(op, 1)]), min(times[(op, 2)])
                name = f"{op} whole array" if op != "read into out=" else \
                    "read whole array into out="
                rows.append([name, str(chunk), lib, fmt_s(t1), fmt_s(t2),
                             f"{t1 / t2:.2f}x"])
            print(f"[compare] {lib} chunk={chunk} done", file=sys.stderr)
    rows.append(_memcpy_scaling(data, args.repeat))
    if "chunkstore" in libs:
        import chunkstore
        chunkstore.config.set(threads=None)
    print(f"\nThread scaling, whole array ({data.shape[0]}x{data.shape[1]} float32), min of "
          f"{args.repeat} alternating runs; {os.cpu_count()} cores; arrays under {root}:\n")
    print_table(header, rows, args.markdown)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5, help="runs per workload; min is reported "
                   "(default 5)")
    p.add_argument("--size", type=int, default=4096, help="edge of the square array "
                   "(default 4096, i.e. 64 MiB of float32)")
    p.add_argument("--chunks", type=int, nargs="+", default=[512, 64],
                   help="chunk edges to test (default 512 64)")
    p.add_argument("--libs", nargs="+", default=list(ALL_LIBS), choices=ALL_LIBS,
                   help="libraries to compare (default: all installed)")
    p.add_argument("--markdown", action="store_true", help="print markdown tables")
    p.add_argument("--threads", type=int, default=None,
                   help="chunkstore.config.set(threads=N) (default: the core count)")
    p.add_argument("--threads-scaling", action="store_true",
                   help="only time whole-array read/write at threads=1 and 2 (chunkstore, "
                   "and tensorstore as the peer)")
    p.add_argument("--dir", default=None, help="where to write the arrays (default: a temp "
                   "dir, removed at the end)")
    p.add_argument("--_mem-child", nargs=2, metavar=("LIB", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args._mem_child:
        mem_child(args._mem_child[0], args._mem_child[1], args.threads)
        return 0
    if args.repeat < 1 or args.size < 1 or any(c < 1 for c in args.chunks):
        p.error("--repeat, --size and --chunks must be positive")
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be positive")
    if "chunkstore" not in args.libs:
        p.error("--libs must include chunkstore (the ratios are relative to it)")

    t0 = time.perf_counter()
    data = make_data(args.size)
    sel = make_selections(args.size)
    print(f"[compare] data {args.size}x{args.size} float32 made in "
          f"{time.perf_counter() - t0:.1f}s", file=sys.stderr)
    root = tempfile.mkdtemp(prefix="chunkstore-compare-", dir=args.dir)
    try:
        if args.threads_scaling:
            run_threads_scaling(args, data, root)
        else:
            libs = available_libs(args.libs)
            run_compare(args, libs, data, sel, root)
    except VerificationError as e:
        print(f"\n{e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
