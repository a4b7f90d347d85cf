"""Make a published asv dashboard work without a network: its scripts and styles served locally.

asv's ``index.html`` loads jQuery, flot and its plugins, stupidtable, blueimp-md5 and
Bootstrap from public CDNs. On an HPC login node or an air-gapped CI runner none of them
loads, and the page shows only asv's "Can not determine continental origin of swallow".
This rewrites the published page to load copies of those libraries from ``vendor/`` beside
it, taken from maintained system packages rather than copied by hand: Debian's (and
Ubuntu's) ``libjs-*`` packages, which install them under ``/usr/share/javascript``::

    apt-get install libjs-jquery libjs-jquery-flot libjs-bootstrap node-blueimp-md5 \\
        libjs-jquery-stupidtable

    python asv_bench/offline_assets.py asv_bench/.asv/html [--assets /usr/share/javascript]

(``ci/bench.sh`` runs it after ``asv publish`` when the packages are there.) Any directory
laid out as ``/usr/share/javascript`` (``jquery/``, ``jquery-flot/``, ``bootstrap/``,
``blueimp-md5/``, ``jquery-stupidtable/``) can stand in for it with ``--assets``.

Debian ships flot 4, whose ``jquery.flot.js`` already holds the time, selection and
categories plugins that asv loads one by one from flot 0.8's CDN, and an axis-label
plugin that replaces the one asv bundles; none of them is loaded twice. Its SVG legend
gets the background style flot 4 leaves to the page. flot-orderbars, which only offsets the bars of a parameterized benchmark's bar
chart so that they sit side by side, has no package; without it those bars overlap, and
nothing else changes.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

DEFAULT_ASSETS = Path("/usr/share/javascript")

#: The Debian packages that hold the assets, for the error message.
PACKAGES = ("libjs-jquery", "libjs-jquery-flot", "libjs-bootstrap", "node-blueimp-md5",
            "libjs-jquery-stupidtable")

#: A CDN file's basename -> the file under the assets directory that replaces it; None:
#: dropped (held by flot's bundle, or not packaged).
SCRIPTS: dict[str, str | None] = {
    "jquery": "jquery/jquery.min.js",
    "jquery.flot.min.js": "jquery-flot/jquery.flot.js",
    "jquery.flot.time.min.js": "jquery-flot/jquery.flot.time.js",
    "jquery.flot.selection.min.js": "jquery-flot/jquery.flot.selection.js",
    "jquery.flot.categories.min.js": "jquery-flot/jquery.flot.categories.js",
    "jquery.flot.orderBars.js": None,
    "stupidtable.min.js": "jquery-stupidtable/stupidtable.min.js",
    "md5.min.js": "blueimp-md5/md5.min.js",
    "bootstrap.min.js": "bootstrap/js/bootstrap.min.js",
}
STYLES = {"bootstrap.min.css": "bootstrap/css/bootstrap.min.css"}
#: Whole package directories copied (Bootstrap's CSS refers to ../fonts/).
TREES = ("bootstrap/css", "bootstrap/js", "bootstrap/fonts")

_TAG = re.compile(r'<(script|link)\b[^>]*?(?:src|href)="(https?://[^"]+)"[^>]*>(?:\s*</script>)?')


_ASV_AXISLABELS = re.compile(r'<script\b[^>]*src="jquery\.flot\.axislabels\.js"[^>]*>\s*</script>')
FLOT4_STYLE = ("<style>.legendLayer .background { fill: rgba(255, 255, 255, 0.85); "
               "stroke: rgba(0, 0, 0, 0.85); stroke-width: 1; }</style>")


class MissingAssets(RuntimeError):
    """An asset the dashboard needs is not under the assets directory."""


def _key(url: str) -> str:
    name = url.rsplit("/", 1)[-1]
    return "jquery" if re.fullmatch(r"jquery-[\d.]+(\.min)?\.js", name) else name


def _flot_bundles_plugins(assets: Path) -> bool:
    """flot >= 3 builds its plugins into jquery.flot.js; loading them again registers them twice."""
    text = (assets / "jquery-flot" / "jquery.flot.js").read_text(errors="replace")
    return all(f"name: '{p}'" in text for p in ("time", "selection", "categories", "axisLabels"))


def localize(html_dir: Path, assets: Path = DEFAULT_ASSETS) -> list[str]:
    """Rewrite ``html_dir/index.html`` to load its CDN assets from ``html_dir/vendor``.

    Returns the local paths the page now loads. Raises MissingAssets naming the first
    missing file (and the packages that provide them) before anything is changed.
    """
    index = html_dir / "index.html"
    page = index.read_text()
    bundled = (assets / "jquery-flot" / "jquery.flot.js").is_file() and _flot_bundles_plugins(assets)
    plan: list[tuple[str, str | None]] = []
    for match in _TAG.finditer(page):
        kind, url = match.group(1), match.group(2)
        key = _key(url)
        table = SCRIPTS if kind == "script" else STYLES
        if key not in table:
            raise MissingAssets(f"{index}: no local replacement known for {url}")
        local = table[key]
        if bundled and local and local.startswith("jquery-flot/") and local != "jquery-flot/jquery.flot.js":
            local = None
        if local is not None and not (assets / local).is_file():
            raise MissingAssets(
                f"{assets / local} not found (needed for {url}); install the packages "
                f"{' '.join(PACKAGES)} or pass --assets DIR")
        plan.append((match.group(0), local))
    vendor = html_dir / "vendor"
    for tree in TREES:
        if (assets / tree).is_dir():
            shutil.copytree(assets / tree, vendor / tree, dirs_exist_ok=True)  # follows symlinks
    loaded = []
    for tag, local in plan:
        if local is None:
            page = page.replace(tag, "")
            continue
        (vendor / local).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(assets / local, vendor / local)
        if tag.startswith("<script"):
            new = f'<script src="vendor/{local}" onerror="js_load_failure()"></script>'
        else:
            new = f'<link rel="stylesheet" href="vendor/{local}">'
        page = page.replace(tag, new)
        loaded.append(f"vendor/{local}")
    if bundled:
        # flot 4's own axisLabels plugin draws the labels asv's 0.8-era plugin also draws,
        # and its legend is an SVG whose background rect is unstyled (black) without CSS.
        page = _ASV_AXISLABELS.sub("", page)
        if FLOT4_STYLE not in page:
            page = page.replace("</head>", f"{FLOT4_STYLE}\n  </head>", 1)
    index.write_text(page)
    return loaded


def main(argv: list[str] | None = None) -> int:
    """Command line: localize one published dashboard."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="asv's published html directory")
    parser.add_argument("--assets", type=Path, default=DEFAULT_ASSETS,
                        help="directory laid out as /usr/share/javascript (default: that)")
    args = parser.parse_args(argv)
    try:
        loaded = localize(args.html_dir, args.assets)
    except (MissingAssets, FileNotFoundError) as exc:
        print(f"offline_assets: {exc}", file=sys.stderr)
        return 1
    print(f"offline_assets: {args.html_dir / 'index.html'} loads {len(loaded)} local assets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
