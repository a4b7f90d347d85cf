#!/usr/bin/env bash
# Set up a local venv and run the main job: write a few-hundred-MB array, read it back, compare with np.save/np.load.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" ""  # no extras; the demo flags are not setup's
cd "$root"
python -P -m chunkstore.cli.demo "$@"
