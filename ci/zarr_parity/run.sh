#!/usr/bin/env bash
# Run zarr-python 3.1.6's own public-API tests (issue 28) twice -- with zarr-python, then with
# chunkstore in zarr's place (sys.modules["zarr"] = chunkstore and zarr's public submodules
# mapped to chunkstore's; zarr's internals, zarr.core.* / zarr.abc.* / zarr.testing.*, which the
# tests and their conftest.py import, left to zarr-python: ci/zarr_parity/chunkstore_as_zarr.py)
# -- and compare (ci/zarr_parity/compare.py): of the tests zarr-python passes, how many
# chunkstore passes, per module, and the failures grouped by the first line of their error.
#   bash ci/zarr_parity/run.sh [.venv/bin/python] [extra pytest args]
# zarr-python's tests are not in this repository. Point at them with one of:
#   ZARR_TESTS=/path/to/zarr-python/tests   a checkout's tests/ folder (tag v3.1.6)
#   ZARR_GIT=/path/to/zarr-python/.git      a clone's git directory: `git archive v3.1.6 tests`
#   (neither)                               git clone --depth 1 --branch v3.1.6 from GitHub
# ZARR_TAG (default v3.1.6) picks the tag for the last two; it should match the zarr-python
# installed in that Python. Needs zarr-python, pytest-asyncio, hypothesis, numcodecs (and
# fsspec for the fsspec store parameters) in that Python.
# ZARR_PARITY_MODULES: the test modules, relative to tests/ (default: `modules` below).
# Each module runs under `timeout -s INT $ZARR_PARITY_MODULE_TIMEOUT` (default 480 s; on the
# interrupt pytest still writes its junit XML) and each test under
# $ZARR_PARITY_TEST_TIMEOUT (default 120 s, the plugin's alarm). Output: $OUT (default
# /tmp/zarr_parity): baseline/<module>.xml|.txt, chunkstore/<module>.xml|.txt, report.txt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${1:-python}"; shift || true
# the runs cd to the checkout: a relative interpreter path is made absolute (not resolved, so
# that a virtualenv's python stays the virtualenv's)
[[ "$py" == */* ]] && py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"
out="${OUT:-/tmp/zarr_parity}"; mkdir -p "$out"
tag="${ZARR_TAG:-v3.1.6}"
if [ -z "${ZARR_TESTS:-}" ]; then
  src="$out/zarr-python-$tag"
  if [ ! -d "$src/tests" ]; then
    mkdir -p "$src"
    if [ -n "${ZARR_GIT:-}" ]; then
      git --git-dir="$ZARR_GIT" archive "$tag" tests | tar -x -C "$src"
    else
      rm -rf "$src"
      git clone -q --depth 1 --branch "$tag" https://github.com/zarr-developers/zarr-python "$src"
    fi
  fi
  ZARR_TESTS="$src/tests"
fi
ZARR_TESTS="$(cd "$ZARR_TESTS" && pwd)"
installed="$("$py" -c 'import zarr; print(zarr.__version__)')"
[ "v$installed" = "$tag" ] || echo "warning: zarr-python $installed installed, tests of $tag" >&2
modules=(test_api.py test_api test_array.py test_group.py test_indexing.py test_attributes.py
         test_properties.py test_tree.py test_v2.py test_errors.py test_codecs
         test_metadata/test_consolidated.py)
[ -n "${ZARR_PARITY_MODULES:-}" ] && read -r -a modules <<< "$ZARR_PARITY_MODULES"
source "$here/run_module.sh"
run() {  # $1: baseline|chunkstore, $2: module, then extra pytest args
  local which="$1" mod="$2"; shift 2
  [ -e "$ZARR_TESTS/$mod" ] || { echo "no $ZARR_TESTS/$mod: skipped" >&2; return 0; }
  echo "$(date +%T) $which $mod" >&2
  # the tests import `tests.conftest` helpers: run from the checkout's root (tests/..)
  run_module "$which" "${mod//\//__}" "$ZARR_TESTS/.." "$here" \
    "tests/$mod" -c "$here/pytest.ini" --rootdir . -p chunkstore_as_zarr -p no:zarr "$@"
}
for mod in "${modules[@]}"; do
  run baseline "$mod" "$@"
  run chunkstore "$mod" "$@"
done
"$py" "$here/compare.py" "$out/baseline" "$out/chunkstore" | tee "$out/report.txt"
