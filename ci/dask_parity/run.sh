#!/usr/bin/env bash
# Run dask's own Zarr tests (every test in dask's installed test files whose code uses zarr:
# dask/array/tests/test_array_core.py's from_zarr/to_zarr tests, dask/tests/test_distributed.py's
# zarr tests, and the few in test_xarray, test_order, test_sizeof, test_graph_manipulation)
# twice -- with zarr-python, then with chunkstore in zarr's place (sys.modules["zarr"] =
# chunkstore, ci/dask_parity/chunkstore_as_zarr.py) -- and compare: how many of the tests
# zarr-python passes chunkstore passes too, and which it fails.
#   bash ci/dask_parity/run.sh [.venv/bin/python] [extra pytest args]
# Needs dask[array], distributed, xarray and zarr-python 3 in that Python (ci/setup.sh's test
# extra). CHUNKSTORE_KEEP_VERSION_GATE=1 keeps dask's `importorskip("zarr", minversion="3")`
# gates, which skip the sharding tests on chunkstore (its version is its own). Output: $OUT
# (default /tmp/dask_parity). zarr-python's own pytest plugin (zarr.testing) is left out of
# both runs (-p no:zarr): it would import zarr-python first. Warnings are ignored, except
# dask's PerformanceWarning, an error as in dask's own configuration (filterwarnings = error),
# which test_zarr_risky_shards_warns expects. Takes about a minute.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${1:-python}"; shift || true
out="${OUT:-/tmp/dask_parity}"; mkdir -p "$out"
dask_dir="$("$py" -c 'import os, dask; print(os.path.dirname(dask.__file__))')"
if [ ! -f "$dask_dir/array/tests/test_array_core.py" ]; then
  echo "dask's installed package ships no tests ($dask_dir/array/tests): nothing to run" >&2
  exit 2
fi
# dask's test files that mention zarr; the plugin keeps, of their tests, those that use it
mapfile -t tests < <(grep -l zarr "$dask_dir"/tests/test_*.py "$dask_dir"/array/tests/test_*.py)
run() {  # $1: baseline|chunkstore, then extra pytest args
  local which="$1"; shift
  CHUNKSTORE_AS_ZARR=$([ "$which" = chunkstore ] && echo 1 || echo 0) \
    PYTHONPATH="$here:$here/../zarr_parity${PYTHONPATH:+:$PYTHONPATH}" \
    "$py" -m pytest "${tests[@]}" -p chunkstore_as_zarr -p no:zarr -p no:cacheprovider -q -rA --tb=short \
    -W ignore -W error::dask.array.core.PerformanceWarning "$@" > "$out/$which.txt" 2>&1 || true
}
run baseline "$@"
run chunkstore "$@"
"$py" "$here/compare.py" "$out/baseline.txt" "$out/chunkstore.txt"
