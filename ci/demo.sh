#!/usr/bin/env bash
# Set up a local venv and run the main job: write a few-hundred-MB array, read it back, compare with np.save/np.load.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for arg in "$@"; do  # --help answers at once: the parser is standard library, no set-up needed
  case "$arg" in
    -h|--help) exec "${PYTHON:-python3}" -P "$here/../chunkstore/cli/demo_args.py" --help ;;
  esac
done
source "$here/setup.sh" ""  # no extras; the demo flags are not setup's
cd "$root"
python -P -m chunkstore.cli.demo "$@"
