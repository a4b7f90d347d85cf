"""Run zarr-python 3's user guide statement by statement, with zarr-python or with chunkstore
in zarr's place, and count the statements that run (issue 28's "user guide" figure).

    python ci/zarr_parity/user_guide.py DOCS_DIR [--lib zarr|chunkstore] [--pages a b ...]
        [--show-failures]

DOCS_DIR holds the guide's pages (zarr-python's ``docs/user-guide`` at tag v3.1.6, e.g.
``git --git-dir=ZARR_GIT archive v3.1.6 docs/user-guide | tar -x``). Each page's executed
blocks (```` ```python exec="true" session=... ```` ) run in order, one top-level statement
at a time, in one namespace per session and a fresh working directory per page; a statement
that raises is counted and the page goes on (later statements may then fail for want of
its names, as they would for a reader pasting the page). Each page runs in its own process.
With ``--lib chunkstore``, ``import zarr`` gives chunkstore, every ``zarr.X`` module
chunkstore's ``chunkstore.X``, and zarr's public submodules chunkstore's counterparts
(``zarr.api.asynchronous``...; see PUBLIC in chunkstore_as_zarr.py); nothing of zarr-python
is imported.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile

PAGES = ["arrays", "attributes", "config", "consolidated_metadata", "data_types", "groups",
         "performance", "storage"]
BLOCK = re.compile(r'^```python ([^\n]*exec="true"[^\n]*)\n(.*?)^```', re.M | re.S)
SESSION = re.compile(r'session="([^"]+)"')

CHILD = r"""
import ast, contextlib, io, json, sys, traceback, warnings
warnings.simplefilter("ignore")
lib, blocks = sys.argv[1], json.loads(sys.stdin.read())
if lib == "chunkstore":
    import importlib, pkgutil, chunkstore
    sys.modules["zarr"] = chunkstore
    # every chunkstore module under zarr's name too (else `from zarr.codecs.numcodecs import
    # X` would load chunkstore/codecs/numcodecs.py a second time, as a copy), then the
    # public modules whose chunkstore counterpart has another name
    for info in pkgutil.walk_packages(chunkstore.__path__, "chunkstore."):
        try:
            mod = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - optional dependencies
            continue
        sys.modules["zarr" + info.name[len("chunkstore"):]] = mod
    for name, target in {PUBLIC}.items():
        try:
            sys.modules[name] = importlib.import_module(target)
        except ImportError:
            pass
spaces, ok, failures = {{}}, 0, []
for session, code in blocks:
    ns = spaces.setdefault(session, {{"__name__": "__guide__"}})
    for node in ast.parse(code).body:
        src = ast.get_source_segment(code, node)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(ast.Module([node], []), "<guide>", "exec"), ns)
            ok += 1
        except BaseException as e:  # noqa: BLE001 - counted, and the page goes on
            failures.append([src.splitlines()[0][:100], f"{{type(e).__name__}}: {{e}}"[:200]])
print(json.dumps({{"ok": ok, "failures": failures}}))
"""


def blocks_of(page_text: str) -> list[tuple[str, str]]:
    """(session, code) of each executed python block of a page, in order."""
    out = []
    for m in BLOCK.finditer(page_text):
        s = SESSION.search(m.group(1))
        out.append((s.group(1) if s else "default", m.group(2)))
    return out


def run_page(path: str, lib: str) -> dict:
    """Run one page in a fresh process and directory; its statement count and failures."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from public_modules import PUBLIC  # noqa: PLC0415 - the same map as the test runs
    blocks = blocks_of(open(path, encoding="utf-8").read())
    total = sum(len(ast.parse(code).body) for _, code in blocks)
    child = CHILD.format(PUBLIC=repr(PUBLIC))
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run([sys.executable, "-c", child, lib], input=json.dumps(blocks),
                              capture_output=True, text=True, cwd=cwd, timeout=600)
    try:
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        res = {"ok": 0, "failures": [["(the page's process died)", proc.stderr[-300:]]]}
    res["total"] = total
    return res


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("docs")
    p.add_argument("--lib", choices=["zarr", "chunkstore"], default="chunkstore")
    p.add_argument("--pages", nargs="*", default=PAGES)
    p.add_argument("--show-failures", action="store_true")
    a = p.parse_args(argv)
    ok = total = 0
    for page in a.pages:
        res = run_page(os.path.join(a.docs, f"{page}.md"), a.lib)
        ok, total = ok + res["ok"], total + res["total"]
        print(f"{page:24s} {res['ok']:4d} / {res['total']:4d}")
        if a.show_failures:
            for stmt, err in res["failures"]:
                print(f"    {stmt}\n        -> {err}")
    print(f"{'all':24s} {ok:4d} / {total:4d} ({100 * ok / max(total, 1):.1f}%) with {a.lib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
