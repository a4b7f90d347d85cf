"""asv benchmarks for chunkstore (run from asv_bench/: ``asv run --python=same --quick``).

With ``environment_type: existing`` asv imports chunkstore from the running interpreter. When
chunkstore is not installed there but built in place in the source tree (``setup.py build_ext
--inplace``), fall back to the source tree two levels up, so the benchmarks and compare.py
measure the working copy.
"""

import os
import sys

# ci/bench.sh benchmarks each commit's source tree (built in place) with the current suite.
_SRC = os.environ.get("CHUNKSTORE_BENCH_SRC")
if _SRC:
    sys.path.insert(0, _SRC)

try:
    import chunkstore  # noqa: F401
except ImportError:  # pragma: no cover - depends on how the venv was set up
    _root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if os.path.isdir(os.path.join(_root, "chunkstore")):
        sys.path.insert(0, _root)
        for _m in [m for m in sys.modules if m == "chunkstore" or m.startswith("chunkstore.")]:
            del sys.modules[_m]


def importable(libs, tag):
    """The libraries of libs that import here; the others are named on stderr as skipped
    (the comparison scripts run with whichever peers are installed)."""
    out = []
    for lib in libs:
        try:
            __import__(lib)
        except ImportError as e:
            print(f"[{tag}] skipping {lib}: not installed ({e})", file=sys.stderr)
            continue
        out.append(lib)
    return out
