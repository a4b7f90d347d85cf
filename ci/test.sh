#!/usr/bin/env bash
# Set up a local venv and run the whole test suite, then smoke-test a base install (no extras).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" test
# Tests run against the installed package, as users get it. They start from a scratch
# directory so that neither pytest nor the subprocesses some tests start (python -m chunkstore,
# python -c ...) put the source tree, which has no compiled core, on sys.path.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
python -P -m pytest -q -p no:cacheprovider --rootdir "$root" -c "$root/pyproject.toml" "$root/tests" "$@"
# Type-check the package (pyproject's [tool.mypy]: files, settings); a type error fails CI.
(cd "$root" && python -m mypy)

# The sdist carries what the tests need, the wheel no generated C (build deps as pyproject's).
python -m pip install -q "setuptools>=77" wheel "Cython>=3.0"
bash "$root/ci/check_dist.sh" python
deactivate

# A plain `pip install .` must do everything that needs no extra (Zarr v3 and crc32c once
# needed a package only the [test] extra brought). A fresh venv each time, so that nothing
# left over from an earlier run can hide a missing runtime dependency.
base="${CHUNKSTORE_BASE_VENV:-$root/.venv-base}"
rm -rf "$base"
echo "[base] installing chunkstore with no extras into $base"
"${PYTHON:-python3}" -m venv "$base"
"$base/bin/python" -m pip install -q --upgrade pip
"$base/bin/python" -m pip install -q "$root"
"$base/bin/python" -P "$root/ci/smoke_base.py"
