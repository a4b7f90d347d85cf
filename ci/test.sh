#!/usr/bin/env bash
# Set up a local venv and run the whole test suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" test
cd "$root"
# -P: import the installed package, not the source tree (which has no compiled core).
python -P -m pytest -q -p no:cacheprovider "$@"
