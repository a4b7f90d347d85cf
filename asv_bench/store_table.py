"""Print the store benchmark (asv_bench/benchmarks/bench_stores.py) as a markdown table.

    python asv_bench/store_table.py [--repeat 3]

Runs the same benchmark classes asv runs, best of --repeat, and reports microseconds per key
(10,000 keys of 100 bytes) for each store.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "benchmarks"))
try:
    import chunkstore  # noqa: F401 - the installed package
except ImportError:  # a source checkout with the core built in place
    sys.path.insert(0, os.path.dirname(HERE))

import bench_stores as b  # noqa: E402

COLUMNS = [("set each", b.SetEach, "time_set_each"), ("setitems", b.SetBatch, "time_setitems"),
           ("get each", b.GetEach, "time_get_each"), ("getitems", b.GetBatch, "time_getitems")]


def best(cls, method, kind, repeat):
    times = []
    for _ in range(repeat):
        obj = cls()
        obj.setup(kind)
        try:
            t = time.perf_counter()
            getattr(obj, method)(kind)
            times.append(time.perf_counter() - t)
        finally:
            obj.teardown(kind)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("| store | " + " | ".join(f"{c} (µs/key)" for c, _, _ in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for kind in b.KINDS:
        cells = [f"{best(cls, m, kind, args.repeat) / b.N * 1e6:.1f}" for _, cls, m in COLUMNS]
        print(f"| {kind} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
