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
# An install is reused while it is up to date: the stamp records a hash of the sources, the
# extras and the Python it was built for; any change (or a broken install) rebuilds.
stamp="$venv/.chunkstore-install"
want="$( { echo "extras=$extras"; python -c 'import sys; print(sys.version)';
           find chunkstore pyproject.toml setup.py MANIFEST.in -type f \
             \( -name '*.py' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.toml' \
                -o -name '*.typed' -o -name 'MANIFEST.in' \) -print0 \
             | LC_ALL=C sort -z | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
    && (cd / && python -P -c "import chunkstore" 2>/dev/null); then
  echo "[setup] chunkstore${extras:+[$extras]} is up to date in $venv (sources unchanged)"
else
  rm -f "$stamp"
  python -m pip install -q --upgrade pip
  spec="."
  [ -n "$extras" ] && spec=".[${extras}]"
  echo "[setup] installing chunkstore${extras:+[$extras]} (compiles the Cython core)"
  # Build isolation pulls setuptools/Cython/numpy from pyproject's build-system table.
  python -m pip install -q "$spec"
  echo "$want" > "$stamp"
fi
