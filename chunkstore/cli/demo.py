"""The demo job: write a few-hundred-MB array with chunkstore, read it back, check it, and
compare throughput with np.save / np.load of the same data in the same directory.

    python -m chunkstore.cli.demo                  # 256 MB, in a temp dir that is removed after
    python -m chunkstore.cli.demo --size-mb 1024 --dir /scratch

Exit status 0 when every read equals the source data, 1 when any differs.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import numpy as np

from chunkstore.cli.demo_args import parser

MB = 1e6  # throughput is in MB/s, 1 MB = 10^6 bytes


def make_field(rows: int, cols: int, seed: int = 0, block_rows: int = 1024) -> np.ndarray:
    """float32 (rows, cols): a smooth field plus small noise, rounded to integers so it
    compresses. Built in row blocks to keep temporaries small."""
    rng = np.random.default_rng(seed)
    out = np.empty((rows, cols), dtype=np.float32)
    y = np.cos(np.arange(cols, dtype=np.float64) / 500.0)[None, :]
    for r0 in range(0, rows, block_rows):
        r1 = min(rows, r0 + block_rows)
        x = np.sin(np.arange(r0, r1, dtype=np.float64) / 300.0)[:, None]
        block = rng.normal(0.0, 2.0, (r1 - r0, cols))
        block += 1000.0 * x * y
        np.round(block, out=block)
        out[r0:r1] = block
    return out


def _shape_for(size_mb: float) -> tuple[int, int]:
    n = max(1, int(size_mb * 2**20) // 4)
    side = max(1, math.isqrt(n))
    return side, max(1, n // side)


def _timed(fn, repeat: int = 1):
    """(min seconds over `repeat` runs, result of the last run)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        out = None  # free the previous result first, so runs don't stack up memory
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _sel_str(sel) -> str:
    def one(s):
        if isinstance(s, slice):
            a = "" if s.start is None else str(s.start)
            b = "" if s.stop is None else str(s.stop)
            c = "" if s.step is None else f":{s.step}"
            return f"{a}:{b}{c}"
        return str(s)
    return "[" + ", ".join(one(s) for s in sel) + "]"


def _rate(nbytes: int, seconds: float) -> str:
    return f"{nbytes / MB / seconds:,.0f}" if seconds > 0 else "inf"


def run(size_mb: float, workdir: str, chunk: int, seed: int, repeat: int = 3) -> bool:
    """Run the demo in *workdir* and print its report; return whether every read matched the source
    data.

    Parameters
    ----------
    size_mb : float
        Size of the float32 2-D array in MiB.
    workdir : str
        Directory for the demo's files.
    chunk : int
        Chunk edge (chunks are ``chunk x chunk``, at most the array's shape).
    seed : int
        Seed of the noise in the data.
    repeat : int
        Runs of each operation; the fastest is reported.
    """
    import numcodecs

    import chunkstore as cs

    rows, cols = _shape_for(size_mb)
    chunk = max(1, min(chunk, rows, cols))
    t_gen, data = _timed(lambda: make_field(rows, cols, seed))
    nbytes = data.nbytes
    print(f"chunkstore {cs.__version__} demo: {rows} x {cols} float32 = {nbytes / 2**20:.1f} MiB "
          f"(made in {t_gen:.1f}s), chunks {chunk} x {chunk}, threads "
          f"{cs.config.get('threads')}")
    zpath = os.path.join(workdir, "demo.zarr")
    npy = os.path.join(workdir, "demo.npy")
    print(f"working directory: {workdir}\n")

    store = cs.DirectoryStore(zpath)
    z = cs.open_array(store, mode="w", shape=(rows, cols), chunks=(chunk, chunk),
                      dtype="f4", compressor=numcodecs.Blosc(cname="lz4", clevel=5,
                                                             shuffle=numcodecs.Blosc.SHUFFLE))

    # (operation, selection, cs seconds, np seconds, nbytes, equal)
    results: list[tuple[str, str, Any, Any, Any, bool | None]] = []

    def _assign():
        z[...] = data
    t_cs, _ = _timed(_assign, repeat)
    t_np, _ = _timed(lambda: np.save(npy, data), repeat)
    results.append(("write whole array", "[...]", t_cs, t_np, nbytes, None))

    z = cs.open_array(cs.DirectoryStore(zpath), mode="r")
    t_cs, back = _timed(lambda: z[...], repeat)
    t_np, back_np = _timed(lambda: np.load(npy), repeat)
    ok = bool(np.array_equal(back, data)) and bool(np.array_equal(back_np, data))
    results.append(("read whole array", "[...]", t_cs, t_np, nbytes, ok))
    del back, back_np

    band = max(1, min(256, rows // 8))
    r0, c0 = rows // 3, cols // 3
    slices = [
        ("read rows", (slice(r0, r0 + band), slice(None))),
        ("read columns", (slice(None), slice(c0, c0 + band))),
        ("read window", (slice(rows // 4, rows // 4 + max(1, rows // 4)),
                         slice(cols // 5, cols // 5 + max(1, cols // 3)))),
        ("read strided", (slice(1, None, 7), slice(None, None, 5))),
    ]
    mm = np.load(npy, mmap_mode="r")
    for name, sel in slices:
        expected = data[sel]
        t_cs, got = _timed(lambda: z[sel], repeat)
        t_np, got_np = _timed(lambda: np.array(mm[sel]), repeat)
        ok = bool(np.array_equal(got, expected)) and bool(np.array_equal(got_np, expected))
        results.append((name, _sel_str(sel), t_cs, t_np, expected.nbytes, ok))
    mm = None  # release the memory map

    print(repr(z.info))
    stored = z.nbytes_stored
    print(f"\non disk: chunkstore {stored / 2**20:.1f} MiB ({nbytes / stored:.2f}x smaller), "
          f".npy {os.path.getsize(npy) / 2**20:.1f} MiB\n")

    header = ("operation", "selection", "MB", "chunkstore s", "MB/s", "numpy s", "MB/s", "equal")
    rows_out = [(op, sel, f"{nb / MB:,.1f}", f"{tc:.3f}", _rate(nb, tc), f"{tn:.3f}",
                 _rate(nb, tn), "-" if eq is None else ("yes" if eq else "NO"))
                for op, sel, tc, tn, nb, eq in results]
    widths = [max(len(r[i]) for r in (header, *rows_out)) for i in range(len(header))]
    fmt = lambda r: "  ".join(f"{x:<{w}}" if i < 2 else f"{x:>{w}}"  # noqa: E731
                              for i, (x, w) in enumerate(zip(r, widths)))
    print(fmt(header))
    print("-" * len(fmt(header)))
    for r in rows_out:
        print(fmt(r))
    print(f"(best of {repeat} runs; numpy: np.save / np.load for whole arrays, "
          f"np.load(mmap_mode='r')[selection] for slices; MB = 10^6 bytes)\n")

    all_ok = all(eq is not False for *_, eq in results)
    if all_ok:
        print("data check: every read equals the source data (chunkstore and numpy)")
    else:
        bad = ", ".join(op for op, *_, eq in results if eq is False)
        print(f"data check: MISMATCH in: {bad}")
    return all_ok


def main(argv=None) -> int:
    """Entry point of ``python -m chunkstore.cli.demo``: parse *argv*, run the demo in a fresh
    directory; return 0 if every read matched, else 1.
    """
    p = parser()
    args = p.parse_args(argv)
    if args.size_mb <= 0:
        p.error("--size-mb must be positive")
    if args.chunk < 1 or args.repeat < 1:
        p.error("--chunk and --repeat must be positive")
    if args.dir is not None:
        os.makedirs(args.dir, exist_ok=True)

    workdir = tempfile.mkdtemp(prefix="chunkstore-demo-", dir=args.dir)
    try:
        ok = run(args.size_mb, workdir, args.chunk, args.seed, args.repeat)
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
            print(f"removed {workdir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
