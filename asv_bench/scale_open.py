#!/usr/bin/env python
"""Opening big consolidated hierarchies: chunkstore against zarr-python 3, at two sizes, in
one run (issue 30).

A group of N small arrays (zarr-python writes it, attributes on each, consolidated), Zarr v2
and v3. Timed in a fresh process per measurement (imports excluded), libraries and sizes
alternating, best of --repeat: ``open_consolidated`` + listing the arrays (name and Array
of each), and ``str(group.tree())``. The growth column is the slope of log(time) against
log(N) between the two sizes (1.0: linear). zarr-python's tree() is asked for every node
(its default stops at 500).

    python asv_bench/scale_open.py                  # N 500 and 2000, best of 3
    python asv_bench/scale_open.py --sizes 1000 4000 --repeat 5
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

CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
lib, path = sys.argv[1], sys.argv[2]
mod = __import__("chunkstore" if lib == "chunkstore" else "zarr")
t = time.perf_counter()
g = mod.open_consolidated(path, mode="r")
arrays = dict(g.arrays())
t_open = time.perf_counter() - t
t = time.perf_counter()
text = str(g.tree() if lib == "chunkstore" else g.tree(max_nodes=10**9))  # all nodes
t_tree = time.perf_counter() - t
print(json.dumps({"open": t_open, "tree": t_tree, "n": len(arrays),
                  "lines": text.count("\n")}))
"""


def make(path, n, fmt):
    import warnings

    import zarr
    warnings.simplefilter("ignore")
    g = zarr.open_group(path, mode="w", zarr_format=fmt)
    for i in range(n):
        g.create_array(f"a{i:05d}", shape=(10,), dtype="f4", chunks=(5,),
                       attributes={"i": i, "units": "m"})
    zarr.consolidate_metadata(path)


def measure(lib, path):
    out = subprocess.run([sys.executable, "-c", CHILD, lib, path], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--sizes", nargs=2, type=int, default=[500, 2000])
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    root = tempfile.mkdtemp(prefix="scale-open-")
    libs = ("chunkstore", "zarr")
    best: dict = {}
    try:
        for fmt in (2, 3):
            for n in a.sizes:
                make(os.path.join(root, f"v{fmt}-{n}.zarr"), n, fmt)
        for r in range(a.repeat):
            for fmt in (2, 3):
                for n in a.sizes:
                    path = os.path.join(root, f"v{fmt}-{n}.zarr")
                    for lib in (libs if r % 2 == 0 else libs[::-1]):
                        got = measure(lib, path)
                        if got["n"] != n:
                            raise AssertionError(f"{lib} listed {got['n']} arrays of {n}")
                        for what in ("open", "tree"):
                            key = (fmt, n, lib, what)
                            best[key] = min(best.get(key, math.inf), got[what])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    small, big = a.sizes
    print(f"{'format':<6} {'workload':<20} " + " ".join(
        f"{lib + ' ' + str(n):>16}" for lib in libs for n in a.sizes) +
        f" {'cs/zarr at ' + str(big):>16} {'growth cs':>10} {'growth zarr':>12}")
    for fmt in (2, 3):
        for what, label in (("open", "open+list arrays"), ("tree", "tree()")):
            t = {(lib, n): best[fmt, n, lib, what] for lib in libs for n in a.sizes}

            def growth(lib):
                return math.log(t[lib, big] / t[lib, small]) / math.log(big / small)

            print(f"v{fmt:<5} {label:<20} " + " ".join(
                f"{t[lib, n]:>16.4f}" for lib in libs for n in a.sizes) +
                f" {t['chunkstore', big] / t['zarr', big]:>16.2f} {growth('chunkstore'):>10.2f}"
                f" {growth('zarr'):>12.2f}")


if __name__ == "__main__":
    main()
