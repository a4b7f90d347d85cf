#!/usr/bin/env bash
# Set up a local venv and run the whole test suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" test
# Tests run against the installed package, as users get it. They start from a scratch
# directory so that neither pytest nor the subprocesses some tests start (python -m chunkstore,
# python -c ...) put the source tree, which has no compiled core, on sys.path.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
python -P -m pytest -q -p no:cacheprovider --rootdir "$root" -c "$root/pyproject.toml" "$root/tests" "$@"
