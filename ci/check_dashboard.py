"""Check a published asv dashboard in a real browser, offline: screenshots, and plotted points.

    python ci/check_dashboard.py asv_bench/.asv/html --out asv_bench/.asv/screenshots \\
        [--bench NAME] [--chromium PATH]

Serves the directory on 127.0.0.1, opens it in headless Chromium with every host but
127.0.0.1 unresolvable (so a page that still needs a CDN fails here as it would on an
air-gapped machine), and drives it over the DevTools protocol on a pipe (no extra Python
packages). It saves ``grid.png`` (the benchmark grid) and ``graph.png`` (one benchmark's
graph), and fails (exit 1) when:

- the page shows asv's error ("Can not determine continental origin of swallow", or a
  network error), a script throws, or any request leaves 127.0.0.1;
- the grid has no benchmark, or no mini-plot with a plotted point;
- the graph has no plotted point.

Chromium: ``--chromium``, else $CHROMIUM, else the first of chromium-headless-shell,
chromium, chromium-browser, google-chrome on PATH (Debian: ``apt-get install
chromium-headless-shell``).
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

ASV_ERRORS = ("continental origin of swallow", "Can not load", "network error")


class DevTools:
    """A minimal DevTools-protocol client over Chromium's --remote-debugging-pipe."""

    def __init__(self, chromium: str, profile: str) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # Chromium reads commands on fd 3 and writes replies on fd 4
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []
        self.session = ""

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe (did it start?)")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        result: dict[str, Any] = json.loads(message)
        return result

    def call(self, method: str, timeout: float = 30, **params: Any) -> dict[str, Any]:
        """Send one command (to the attached page, once attached) and return its result."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                out: dict[str, Any] = reply.get("result", {})
                return out
            self.events.append(reply)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression!r} threw: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float) -> Any:
        """Poll an expression until it is truthy; its last value either way."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.25)
        return value

    def screenshot(self, path: Path) -> None:
        """Save the viewport as a PNG."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        """Stop Chromium."""
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def find_chromium(given: str | None) -> str:
    """The browser to use (see the module docstring)."""
    for name in (given, os.environ.get("CHROMIUM"), "chromium-headless-shell", "chromium",
                 "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return str(shutil.which(name))
    raise SystemExit("check_dashboard: no Chromium found (apt-get install chromium-headless-shell, "
                     "or pass --chromium PATH)")


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve a directory on 127.0.0.1 in a thread; the server and its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


# Points with a value, over the plots in a jQuery selection (flot keeps each plot in .data).
PLOTTED = """(function (sel) {
  var n = 0;
  if (typeof $ === 'undefined' || !$.plot) return 0;
  $(sel).each(function () {
    var plot = $(this).data('plot');
    if (!plot) return;
    plot.getData().forEach(function (s) {
      s.data.forEach(function (p) { if (p && p[1] !== null && !isNaN(p[1])) n += 1; });
    });
  });
  return n;
})(%s)"""


# The first benchmark whose mini-plot on the grid has a point (its div is "summarygrid-NAME").
FIRST_WITH_DATA = """(function () {
  if (typeof $ === 'undefined' || !$.plot) return '';
  var found = '';
  $('.benchmark-plot').each(function () {
    var plot = $(this).data('plot');
    if (found || !plot) return;
    if (plot.getData().some(function (s) { return s.data.some(function (p) {
        return p && p[1] !== null && !isNaN(p[1]); }); }))
      found = this.id.replace(/^summarygrid-/, '');
  });
  return found;
})()"""


def problems_seen(tools: DevTools) -> list[str]:
    """Script exceptions and requests that left 127.0.0.1, from the events so far."""
    found = []
    for event in tools.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            found.append(f"script error: {text}")
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            host = urlparse(url).hostname
            if url.startswith("http") and host != "127.0.0.1":
                found.append(f"request off this machine: {url}")
    return found


def check(html: Path, out: Path, chromium: str, bench: str | None, timeout: float) -> list[str]:
    """Run the checks; the list of failures (empty: the dashboard works offline)."""
    out.mkdir(parents=True, exist_ok=True)
    server, base = serve(html)
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as profile:
        tools = DevTools(chromium, profile)
        try:
            target = tools.call("Target.createTarget", url="about:blank")["targetId"]
            tools.session = tools.call("Target.attachToTarget", targetId=target,
                                       flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Network"):
                tools.call(f"{domain}.enable")
            tools.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000,
                       deviceScaleFactor=1, mobile=False)

            tools.call("Page.navigate", url=base + "index.html")
            grid = tools.wait_for(PLOTTED % "'.benchmark-plot'", timeout)
            text = tools.evaluate("document.body.innerText")
            failures += [f"grid page shows asv's error: {e!r}" for e in ASV_ERRORS if e in text]
            boxes = tools.evaluate(
                "typeof $ === 'undefined' ? 0 : $('.benchmark-container').length")
            if not boxes:
                failures.append("grid: no benchmark shown")
            if not grid:
                failures.append("grid: no mini-plot has a plotted point")
            tools.screenshot(out / "grid.png")
            print(f"grid: {boxes} benchmarks, {grid} plotted points -> {out / 'grid.png'}")

            name = bench or tools.evaluate(FIRST_WITH_DATA)
            tools.call("Page.navigate", url=f"{base}index.html#{quote(str(name))}")
            points = tools.wait_for(PLOTTED % "'#main-graph'", timeout)
            text = tools.evaluate("document.body.innerText")
            failures += [f"graph page shows asv's error: {e!r}" for e in ASV_ERRORS if e in text]
            if not points:
                failures.append(f"graph of {name}: no plotted point")
            tools.screenshot(out / "graph.png")
            print(f"graph of {name}: {points} plotted points -> {out / 'graph.png'}")
            failures += problems_seen(tools)
        finally:
            tools.close()
            server.shutdown()
    return failures


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", type=Path, help="asv's published html directory")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the screenshots go (default: HTML/../screenshots)")
    parser.add_argument("--bench", default=None, help="the benchmark whose graph is checked "
                        "(default: the first with a point on the grid)")
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds each page may take to plot")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        print(f"check_dashboard: {args.html}/index.html not found (publish first: "
              "bash ci/bench.sh)", file=sys.stderr)
        return 1
    out = args.out or args.html.parent / "screenshots"
    failures = check(args.html, out, find_chromium(args.chromium), args.bench, args.timeout)
    for failure in failures:
        print(f"check_dashboard: FAIL {failure}", file=sys.stderr)
    if not failures:
        print("check_dashboard: ok (offline: nothing loaded from off this machine)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
