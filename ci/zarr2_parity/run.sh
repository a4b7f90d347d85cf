#!/usr/bin/env bash
# Run zarr-python 2.18.7's own test suite (the zarr/tests package its wheel installs) twice --
# with zarr-python 2, then with chunkstore in zarr's place (sys.modules["zarr"] = chunkstore,
# zarr's public modules blended with chunkstore's, its internals left to zarr-python:
# ci/zarr2_parity/chunkstore_as_zarr2.py) -- and compare (ci/zarr_parity/compare.py): of the
# tests zarr-python 2 passes, how many chunkstore passes, per module, and the failures
# grouped by the first line of their error.
#   bash ci/zarr2_parity/setup_venv.sh /tmp/venv-zarr2      # once
#   bash ci/zarr2_parity/run.sh [/tmp/venv-zarr2/bin/python] [extra pytest args]
# The Python must have zarr-python 2.18.x and pytest; this checkout (chunkstore, built in
# place) goes on PYTHONPATH. The repository's fixture/ folder, which some tests read (found
# as Path(zarr.__file__).parent.parent / "fixture") and which the wheel lacks, is copied
# from zarr's sdist (pip download) into site-packages/fixture once.
# ZARR2_PARITY_MODULES: test modules (default: every zarr/tests/test_*.py).
# ZARR_V3_EXPERIMENTAL_API=1 (not set by default) would add zarr 2's experimental v3 tests.
# ZARR2_PARITY_ADAPT=1: a second measurement in which the tests' scaffolding (init_array,
# init_group, the Array/Group/Attributes constructors) drops the zarr-python 2 keywords that
# chunkstore refuses when they carry no behaviour (see the plugin); use another OUT.
# Each module runs under `timeout -s INT $ZARR_PARITY_MODULE_TIMEOUT` (default 480 s) and
# each test under $ZARR_PARITY_TEST_TIMEOUT (default 120 s). Output: $OUT (default
# /tmp/zarr2_parity): baseline/<module>.xml|.txt, chunkstore/<module>.xml|.txt, report.txt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
py="${1:-/tmp/venv-zarr2/bin/python}"; shift || true
[[ "$py" == */* ]] && py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"
out="${OUT:-/tmp/zarr2_parity}"; mkdir -p "$out/work"
zdir="$("$py" -c 'import zarr, os; print(os.path.dirname(zarr.__file__))')"
site="$(dirname "$zdir")"
version="$("$py" -c 'import zarr; print(zarr.__version__)')"
case "$version" in 2.18.*) ;; *) echo "warning: zarr-python $version installed, not 2.18.x" >&2;; esac
if [ ! -e "$site/fixture/.from-zarr-sdist" ]; then
  [ -f "$out/sdist/zarr-$version.tar.gz" ] || \
    "$py" -m pip download -q "zarr==$version" --no-binary :all: --no-deps -d "$out/sdist"
  tar -xzf "$out/sdist/zarr-$version.tar.gz" -C "$out/sdist" "zarr-$version/fixture"
  rm -rf "$site/fixture"  # (a test run writes missing fixtures there: start from the sdist's)
  cp -r "$out/sdist/zarr-$version/fixture" "$site/fixture"
  touch "$site/fixture/.from-zarr-sdist"
fi
if [ -n "${ZARR2_PARITY_MODULES:-}" ]; then
  read -r -a modules <<< "$ZARR2_PARITY_MODULES"
else
  modules=(); for f in "$zdir"/tests/test_*.py; do modules+=("$(basename "$f")"); done
fi
source "$repo/ci/zarr_parity/run_module.sh"
run() {  # $1: baseline|chunkstore, $2: module, then extra pytest args
  local which="$1" mod="$2"; shift 2
  echo "$(date +%T) $which $mod" >&2
  # from a scratch folder: some tests write relative paths
  run_module "$which" "${mod%.py}" "$out/work" "$here:$here/../zarr_parity:$repo" \
    "$zdir/tests/$mod" -c "$here/pytest.ini" --rootdir "$site" -p chunkstore_as_zarr2 "$@"
}
for mod in "${modules[@]}"; do
  run baseline "$mod" "$@"
  run chunkstore "$mod" "$@"
done
"$py" "$repo/ci/zarr_parity/compare.py" "$out/baseline" "$out/chunkstore" "${ZARR_PARITY_TOP:-25}" \
  | tee "$out/report.txt"
