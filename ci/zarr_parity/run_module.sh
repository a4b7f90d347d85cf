# Sourced by ci/zarr_parity/run.sh and ci/zarr2_parity/run.sh (needs $py and $out).
# run_module WHICH NAME DIR PYTHONPATH PYTEST-ARGS...: one test module under pytest, with
# zarr-python itself (WHICH=baseline) or chunkstore in its place (WHICH=chunkstore: the
# plugin named in PYTEST-ARGS routes when CHUNKSTORE_AS_ZARR=1), run from DIR with PYTHONPATH
# in front, under `timeout -s INT $ZARR_PARITY_MODULE_TIMEOUT` (default 480 s; on the
# interrupt pytest still writes its junit XML) and the per-test limit of -p test_timeout.
# Writes $out/WHICH/NAME.xml (junit) and $out/WHICH/NAME.txt (the output); never fails.
run_module() {
  local which="$1" name="$2" dir="$3" path="$4"; shift 4
  mkdir -p "$out/$which"
  (cd "$dir" && CHUNKSTORE_AS_ZARR=$([ "$which" = chunkstore ] && echo 1 || echo 0) \
    PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}" \
    timeout -s INT -k 30 "${ZARR_PARITY_MODULE_TIMEOUT:-480}" \
    "$py" -m pytest "$@" -p test_timeout -p no:cacheprovider -q -rA --tb=native \
    --continue-on-collection-errors \
    --junitxml "$out/$which/$name.xml" -o junit_family=xunit1 \
    > "$out/$which/$name.txt" 2>&1) || true
}
