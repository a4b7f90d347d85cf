"""The published asv dashboard made to work offline (asv_bench/offline_assets.py), and the
browser check's classification of what the page did (ci/check_dashboard.py)."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "asv_bench"))
sys.path.insert(0, os.path.join(ROOT, "ci"))

import check_dashboard  # noqa: E402
import offline_assets  # noqa: E402

# The head of asv 0.6's index.html, as asv publishes it (CDN tags, then asv's own files).
PAGE = """<html><head>
<script src="https://code.jquery.com/jquery-3.3.1.min.js" integrity="sha256-x" crossorigin="anonymous" onerror="js_load_failure()"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js" integrity="sha512-x" crossorigin="anonymous" referrerpolicy="no-referrer" onerror="js_load_failure()"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js" onerror="js_load_failure()"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js" onerror="js_load_failure()"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js" onerror="js_load_failure()"></script>
<script language="javascript" type="text/javascript" src="jquery.flot.axislabels.js"></script>
<script src="https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js" onerror="js_load_failure()"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js" onerror="js_load_failure()"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js" onerror="js_load_failure()"></script>
<script src="https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js" integrity="sha256-x" crossorigin="anonymous" onerror="js_load_failure()"></script>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css" integrity="sha256-x" crossorigin="anonymous">
<script src="asv.js"></script>
<link href="asv.css" rel="stylesheet" type="text/css"/>
</head><body><a href="https://github.com/airspeed-velocity/asv/">asv</a></body></html>
"""

FILES = ["jquery/jquery.min.js", "jquery-stupidtable/stupidtable.min.js",
         "blueimp-md5/md5.min.js", "bootstrap/js/bootstrap.min.js",
         "bootstrap/css/bootstrap.min.css", "bootstrap/fonts/glyphicons-halflings-regular.woff"]


def make_assets(root, flot_version):
    """A directory laid out as Debian's /usr/share/javascript, with flot 4 or 0.8 inside."""
    for rel in FILES:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"/* {rel} */")
    flot = root / "jquery-flot"
    flot.mkdir()
    if flot_version == 4:   # one bundle with the plugins built in
        flot.joinpath("jquery.flot.js").write_text(
            "".join(f"$.plot.plugins.push({{name: '{p}'}});"
                    for p in ("time", "selection", "categories", "axisLabels", "legend")))
    else:                   # core and plugins apart
        flot.joinpath("jquery.flot.js").write_text("/* core */")
        for p in ("time", "selection", "categories"):
            flot.joinpath(f"jquery.flot.{p}.js").write_text(f"/* {p} */")
    return root


@pytest.fixture
def html(tmp_path):
    d = tmp_path / "html"
    d.mkdir()
    d.joinpath("index.html").write_text(PAGE)
    return d


def test_flot4_bundle_page_loads_nothing_from_off_the_machine(tmp_path, html):
    assets = make_assets(tmp_path / "js", 4)
    loaded = offline_assets.localize(html, assets)
    page = html.joinpath("index.html").read_text()
    assert '<script src="https://' not in page and 'href="https://cdn' not in page
    assert loaded == ["vendor/jquery/jquery.min.js", "vendor/jquery-flot/jquery.flot.js",
                      "vendor/jquery-stupidtable/stupidtable.min.js",
                      "vendor/blueimp-md5/md5.min.js", "vendor/bootstrap/js/bootstrap.min.js",
                      "vendor/bootstrap/css/bootstrap.min.css"]
    for rel in loaded:                      # each copied beside the page, with its content
        assert html.joinpath(rel).read_text() == assets.joinpath(rel[len("vendor/"):]).read_text()
        assert rel in page
    # Bootstrap's CSS refers to ../fonts/: the whole tree is there
    assert html.joinpath("vendor/bootstrap/fonts/glyphicons-halflings-regular.woff").is_file()
    # the bundle's plugins are not loaded again, nor asv's 0.8-era axis labels
    assert "jquery.flot.time" not in page and "jquery.flot.axislabels.js" not in page
    assert "orderBars" not in page
    assert offline_assets.FLOT4_STYLE in page
    # asv's own files and links are untouched; the load-failure hook is kept
    assert '<script src="asv.js"></script>' in page and "github.com/airspeed" in page
    assert page.count('onerror="js_load_failure()"') == 5
    # a second run (a re-publish keeps nothing to replace) changes nothing
    offline_assets.localize(html, assets)
    assert html.joinpath("index.html").read_text() == page


def test_flot08_layout_loads_each_plugin(tmp_path, html):
    assets = make_assets(tmp_path / "js", 8)
    loaded = offline_assets.localize(html, assets)
    page = html.joinpath("index.html").read_text()
    for p in ("time", "selection", "categories"):
        assert f"vendor/jquery-flot/jquery.flot.{p}.js" in loaded
    assert 'src="jquery.flot.axislabels.js"' in page      # asv's own plugin still needed
    assert offline_assets.FLOT4_STYLE not in page


def test_missing_asset_names_file_and_packages_and_changes_nothing(tmp_path, html):
    assets = make_assets(tmp_path / "js", 4)
    assets.joinpath("blueimp-md5/md5.min.js").unlink()
    with pytest.raises(offline_assets.MissingAssets) as err:
        offline_assets.localize(html, assets)
    msg = str(err.value)
    assert "blueimp-md5/md5.min.js" in msg and "node-blueimp-md5" in msg
    assert "md5.min.js" in msg and "cdnjs" in msg            # the URL it stands in for
    assert html.joinpath("index.html").read_text() == PAGE
    assert not html.joinpath("vendor").exists()
    assert offline_assets.main([str(html), "--assets", str(assets)]) == 1


def test_unknown_cdn_asset_is_refused(tmp_path, html):
    assets = make_assets(tmp_path / "js", 4)
    html.joinpath("index.html").write_text(
        PAGE.replace("</head>", '<script src="https://cdn.example/new-lib.js"></script></head>'))
    with pytest.raises(offline_assets.MissingAssets, match="new-lib.js"):
        offline_assets.localize(html, assets)


def test_browser_check_reports_script_errors_and_requests_off_the_machine():
    class Events:
        events = [
            {"method": "Network.requestWillBeSent",
             "params": {"request": {"url": "http://127.0.0.1:8000/index.html"}}},
            {"method": "Network.requestWillBeSent",
             "params": {"request": {"url": "https://code.jquery.com/jquery-3.3.1.min.js"}}},
            {"method": "Network.requestWillBeSent", "params": {"request": {"url": "data:,x"}}},
            {"method": "Runtime.exceptionThrown",
             "params": {"exceptionDetails": {"exception": {
                 "description": "ReferenceError: $ is not defined"}}}},
            {"method": "Page.loadEventFired", "params": {}},
        ]
    found = check_dashboard.problems_seen(Events())  # type: ignore[arg-type]
    assert found == ["request off this machine: https://code.jquery.com/jquery-3.3.1.min.js",
                     "script error: ReferenceError: $ is not defined"]
