#!/usr/bin/env bash
# Build the sdist and the wheel and check what they hold: the sdist has the license and
# everything the test suite needs (tests/conftest.py, tests/storage/), the wheel has the
# license, the entry points and the compiled core but no generated C sources.
#   bash ci/check_dist.sh [PYTHON]     (default: python3; needs pip, setuptools, Cython)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${1:-python3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# Build from a clean copy of the tracked (and new, unignored) files: no .c/.so/build leftovers.
mkdir -p "$out/src" && (cd "$root" && git ls-files -z --cached --others --exclude-standard \
  | xargs -0 cp --parents -t "$out/src")
cd "$out/src"
"$py" -m pip wheel . --no-deps --no-build-isolation -q -w "$out/dist" >/dev/null
"$py" setup.py -q sdist -d "$out/dist" >/dev/null 2>&1
"$py" - "$out/dist" <<'PY'
import pathlib, sys, tarfile, zipfile
dist = pathlib.Path(sys.argv[1])
sdist = tarfile.open(next(dist.glob("*.tar.gz")))
names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
need = ["LICENSE", "tests/conftest.py", "tests/storage/conftest.py", "tests/storage/__init__.py",
        "chunkstore/_core/kernels.pyx", "chunkstore/py.typed", "setup.py", "pyproject.toml",
        "MANIFEST.in"]
missing = [n for n in need if n not in names]
tests = sorted(n for n in names if n.startswith("tests/") and n.endswith(".py"))
wheel = zipfile.ZipFile(next(dist.glob("*.whl")))
wnames = wheel.namelist()
generated_c = [n for n in wnames if n.endswith(".c")]
ep = next((wheel.read(n).decode() for n in wnames if n.endswith("entry_points.txt")), "")
problems = []
if missing:
    problems.append(f"sdist lacks {missing}")
if generated_c:
    problems.append(f"wheel ships generated C: {generated_c}")
if not any(n.endswith("licenses/LICENSE") for n in wnames):
    problems.append("wheel lacks the LICENSE")
if "chunkstore.integrations.xarray_backend:ChunkstoreBackendEntrypoint" not in ep:
    problems.append("wheel lacks the xarray.backends entry point")
if not any(n.endswith(".so") for n in wnames):
    problems.append("wheel has no compiled core")
if "chunkstore/py.typed" not in wnames:
    problems.append("wheel lacks chunkstore/py.typed (PEP 561)")
if problems:
    sys.exit("check_dist: " + "; ".join(problems))
print(f"check_dist: ok (sdist {len(names)} files, {len(tests)} test modules; wheel "
      f"{len(wnames)} files, no .c)")
PY
