#!/usr/bin/env bash
# Make the virtualenv ci/zarr2_parity/run.sh runs in: zarr-python 2.18.7 with what its test
# suite uses (its requirements_dev_minimal/optional.txt, less the services: azure, redis,
# mongo, s3fs/moto -- their tests skip on both sides), plus chunkstore's runtime dependencies.
# chunkstore itself is not installed: run.sh puts this checkout on PYTHONPATH (its compiled
# modules must be built in place, as in the dev .venv).
#   bash ci/zarr2_parity/setup_venv.sh [VENV]    (default /tmp/venv-zarr2)
# numcodecs: zarr 2.18.7 requires <0.16, chunkstore declares >=0.16.4; the venv gets 0.15.1
# (chunkstore imports and works with it).
set -euo pipefail
venv="${1:-/tmp/venv-zarr2}"
python3 -m venv "$venv"
# Pinned as zarr 2.18.7's requirements_dev_*.txt pin them: numcodecs 0.15.2 refuses Pickle
# decoding (104 baseline failures in test_core), h5py 3.16 warns where 3.13 did not.
"$venv/bin/pip" install -q "zarr==2.18.7" "pytest==8.3.5" "numpy<2.3" "numcodecs==0.15.1" \
  "fasteners==0.19" "h5py==3.13.0" "lmdb==1.6.2" fsspec google-crc32c msgpack
"$venv/bin/python" -c "import zarr; print('zarr', zarr.__version__)"
