#!/usr/bin/env bash
# Publish the asv dashboard from the kept results, make it work offline, and check it in a
# real browser: serve it on 127.0.0.1, open it in headless Chromium with every other host
# unreachable, screenshot the grid and one graph, and fail if the page shows asv's error,
# a script error, a request off the machine, or no plotted points.
#
#   bash ci/check_dashboard.sh             # results of earlier ci/bench.sh runs (if there
#                                          # are none, one quick run of one commit first)
#   bash ci/check_dashboard.sh --bench B   # check B's graph (default: the first with data)
#
# Screenshots: asv_bench/.asv/screenshots/grid.png and graph.png. Needs Chromium and the
# packaged JavaScript the page loads; on Debian/Ubuntu, as root, they are installed when
# missing (apt-get install chromium-headless-shell libjs-jquery libjs-jquery-flot
# libjs-bootstrap node-blueimp-md5 libjs-jquery-stupidtable).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,14p' "$0"; exit 0 ;; esac

assets="${CHUNKSTORE_ASV_ASSETS:-/usr/share/javascript}"
need=()
[ -f "$assets/jquery-flot/jquery.flot.js" ] || need+=(libjs-jquery libjs-jquery-flot \
  libjs-bootstrap node-blueimp-md5 libjs-jquery-stupidtable)
command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null || \
  [ -n "${CHROMIUM:-}" ] || need+=(chromium-headless-shell)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q "${need[@]}" >/dev/null
  else
    echo "check_dashboard.sh: install ${need[*]} (or set CHUNKSTORE_ASV_ASSETS / CHROMIUM)" >&2
    exit 1
  fi
fi

conf="$root/asv_bench/.asv/asv.ci.json"
if ! compgen -G "$root/asv_bench/.asv/results/*/*.json" >/dev/null || [ ! -f "$conf" ]; then
  bash "$root/ci/bench.sh" --quick --commits 1
fi
py="${PYTHON:-$root/.venv-bench/bin/python}"
"$py" -m asv publish --config "$conf"
"$py" "$root/asv_bench/offline_assets.py" "$root/asv_bench/.asv/html" --assets "$assets"
"$py" "$root/ci/check_dashboard.py" "$root/asv_bench/.asv/html" \
  --out "$root/asv_bench/.asv/screenshots" "$@"
