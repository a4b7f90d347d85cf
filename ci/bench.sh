#!/usr/bin/env bash
# Run the asv suite (asv_bench/benchmarks) over the last few commits, keep the results,
# publish the HTML, and check that every benchmark has data in the published JSON.
#
#   bash ci/bench.sh                      # the last 3 commits of HEAD, full asv timing
#   bash ci/bench.sh --quick              # one sample per benchmark (results still kept)
#   bash ci/bench.sh --commits 5          # the last 5 commits
#   bash ci/bench.sh --range v0.1..HEAD   # the commits of a range (git rev-list syntax)
#   bash ci/bench.sh --bench 'bench_sync' # only benchmarks matching a regex
#   bash ci/bench.sh --python PY          # use PY (with asv and the bench deps) as it is,
#                                         # instead of making .venv-bench
# Then: asv preview --config asv_bench/.asv/asv.ci.json   (or open asv_bench/.asv/html/index.html)
# and bash ci/check_dashboard.sh to check the published page in headless Chromium, offline.
#
# Each commit's source is exported (git archive) into a scratch directory and its Cython
# core built in place there; the current benchmark suite then runs against it (asv's
# "existing" environment with --set-commit-hash, so results are stored per commit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n=3 quick=0 range="" bench="" py=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --commits) n="$2"; shift ;;
    --range) range="$2"; shift ;;
    --bench) bench="$2"; shift ;;
    --python) py="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "$py" ]; then
  # The bench extra's dependencies in their own venv; chunkstore itself is not installed
  # there (each commit's build is put on the path instead).
  venv="$root/.venv-bench"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  # (setuptools as pyproject.toml's build-system requires it: a new venv has an older one)
  "$venv/bin/python" -m pip install -q "$root[bench]" "Cython>=3.0" "setuptools>=77" wheel
  "$venv/bin/python" -m pip uninstall -q -y chunkstore
  py="$venv/bin/python"
fi
# (absolute: each commit is built from its own directory)
py="$(command -v "$py")" || { echo "bench.sh: no Python at $py" >&2; exit 1; }
py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"
"$py" -c "import asv" || { echo "bench.sh: asv is not installed for $py" >&2; exit 1; }

if [ -n "$range" ]; then
  commits="$(git -C "$root" rev-list --reverse "$range")"
else
  commits="$(git -C "$root" rev-list --reverse -n "$n" HEAD)"
fi
[ -n "$commits" ] || { echo "bench.sh: no commits to benchmark" >&2; exit 1; }
newest="$(echo "$commits" | tail -n 1)"
branch="$(git -C "$root" rev-parse --abbrev-ref HEAD)"
[ "$branch" != "HEAD" ] || branch="$newest"

# A config for this run: absolute directories (results kept in asv_bench/.asv/results
# across runs), the current branch (asv graphs commits by branch).
out="$root/asv_bench/.asv"
mkdir -p "$out"
conf="$out/asv.ci.json"
"$py" - "$root" "$branch" "$conf" <<'PY'
import json, re, sys
root, branch, conf = sys.argv[1:]
text = open(f"{root}/asv_bench/asv.conf.json").read()
c = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
c.update(repo=root, branches=[branch], benchmark_dir=f"{root}/asv_bench/benchmarks",
         env_dir=f"{root}/asv_bench/.asv/env", results_dir=f"{root}/asv_bench/.asv/results",
         html_dir=f"{root}/asv_bench/.asv/html")
json.dump(c, open(conf, "w"), indent=2)
PY

asv=("$py" -m asv)
"${asv[@]}" machine --yes --config "$conf" >/dev/null
args=(--config "$conf" --python=same --show-stderr)
if [ "$quick" = 1 ]; then
  # One sample of each benchmark, but unlike asv's --quick the results are saved.
  args+=(-a repeat=1 -a number=1 -a warmup_time=0 -a rounds=1)
fi
[ -z "$bench" ] || args+=(--bench "$bench")

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for sha in $commits; do
  src="$work/$sha"
  mkdir -p "$src"
  git -C "$root" archive "$sha" | tar -x -C "$src"
  echo "== $(git -C "$root" log -1 --format='%h %s' "$sha")"
  (cd "$src" && "$py" setup.py -q build_ext --inplace >"$work/build.log" 2>&1) || {
    echo "bench.sh: $sha does not build; skipped. The build said:" >&2
    tail -n 30 "$work/build.log" >&2; continue; }
  CHUNKSTORE_BENCH_SRC="$src" "${asv[@]}" run "${args[@]}" --set-commit-hash "$sha" || \
    echo "bench.sh: some benchmarks failed at $sha" >&2
  rm -rf "$src"
done

"${asv[@]}" publish --config "$conf"
# asv's page loads its scripts from CDNs; serve local copies from the system's packages so
# that the dashboard works offline (asv_bench/offline_assets.py says which packages).
assets="${CHUNKSTORE_ASV_ASSETS:-/usr/share/javascript}"
if [ -f "$assets/jquery-flot/jquery.flot.js" ]; then
  "$py" "$root/asv_bench/offline_assets.py" "$out/html" --assets "$assets"
else
  echo "bench.sh: $assets has no jquery-flot: the published page needs the internet for" \
       "its scripts (see asv_bench/offline_assets.py to make it work offline)" >&2
fi
"$py" "$root/asv_bench/check_published.py" "$out/html" --commit "$newest" --bench "$bench"
echo "published: $out/html/index.html (view: $py -m asv preview --config $conf)"
