#!/usr/bin/env bash
# Shared set-up for ci/demo.sh and ci/test.sh: a local venv with chunkstore built from source.
# Usage: source ci/setup.sh [extras]   (extras: e.g. "test" or "test,bench")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-}"
py="${PYTHON:-python3}"
venv="${CHUNKSTORE_VENV:-$root/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating venv at $venv"
  "$py" -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"
python -m pip install -q --upgrade pip
spec="."
[ -n "$extras" ] && spec=".[${extras}]"
echo "[setup] installing chunkstore${extras:+[$extras]} (compiles the Cython core)"
# Build isolation pulls setuptools/Cython/numpy from pyproject's build-system table.
python -m pip install -q "$spec"
