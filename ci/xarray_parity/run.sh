#!/usr/bin/env bash
# Run xarray's own Zarr backend tests (the plain-store classes: dict, directory, write-empty)
# twice -- xarray's zarr engine, then routed to chunkstore (ci/xarray_parity/chunkstore_route.py)
# -- and compare: how many of the tests the zarr engine passes chunkstore passes too, per
# Zarr format, and which it fails.
#   bash ci/xarray_parity/run.sh [.venv/bin/python] [extra pytest args]
# Needs xarray, zarr-python 3, dask, pytest-asyncio and cftime in that Python (ci/setup.sh's
# test extra plus `pip install pytest-asyncio cftime`). Output: $OUT (default /tmp/xarray_parity).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${1:-python}"; shift || true
out="${OUT:-/tmp/xarray_parity}"; mkdir -p "$out"
tests="$("$py" -c 'import xarray.tests.test_backends as t; print(t.__file__)')"
sel="TestZarrDictStore or TestZarrDirectoryStore or TestZarrWriteEmpty"
run() {  # $1: baseline|chunkstore, then extra pytest args
  local which="$1"; shift
  CHUNKSTORE_ROUTE=$([ "$which" = chunkstore ] && echo 1 || echo 0) PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" \
    "$py" -m pytest "$tests" -k "$sel" -p chunkstore_route -p no:cacheprovider -q -rA --tb=line \
    -W ignore "$@" > "$out/$which.txt" 2>&1 || true
}
run baseline "$@"
run chunkstore "$@"
"$py" "$here/compare.py" "$out/baseline.txt" "$out/chunkstore.txt" "$tests"
