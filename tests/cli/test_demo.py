"""Smoke test of the demo job (`python -m chunkstore.cli.demo`) at a tiny size."""

import os
import re
import subprocess
import sys

import chunkstore


def _env():
    # Run the same chunkstore this test imported (installed, or the in-place source build),
    # never a copy picked up from the working directory.
    env = dict(os.environ)
    parent = os.path.dirname(os.path.dirname(os.path.abspath(chunkstore.__file__)))
    env["PYTHONPATH"] = parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def test_demo_small(tmp_path):
    out_dir = tmp_path / "demo"
    r = subprocess.run(
        [sys.executable, "-m", "chunkstore.cli.demo", "--size-mb", "2", "--dir", str(out_dir)],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "every read equals the source data" in out, out
    assert "MISMATCH" not in out
    # One table row per read, each verified equal.
    for op in ("read whole array", "read rows", "read columns", "read window", "read strided"):
        row = next((line for line in out.splitlines() if line.startswith(op)), None)
        assert row is not None, f"no row for {op!r}:\n{out}"
        assert row.split()[-1] == "yes", row
    assert re.search(r"Shape\s+:\s+\(724, 724\)", out), out
    assert re.search(r"Chunks initialized\s+:\s+1/1", out), out
    # The demo removes its working directory.
    assert list(out_dir.iterdir()) == []


def test_demo_help():
    r = subprocess.run([sys.executable, "-m", "chunkstore.cli.demo", "--help"], env=_env(),
                       capture_output=True, text=True, timeout=60, cwd=os.path.dirname(__file__))
    assert r.returncode == 0
    assert "--size-mb" in r.stdout


def test_demo_sh_help_answers_before_any_set_up(tmp_path):
    """`bash ci/demo.sh --help` prints the demo's usage at once: no venv made, nothing built
    (its parser is standard library: chunkstore/cli/demo_args.py)."""
    import pathlib

    import pytest
    root = pathlib.Path(__file__).resolve().parents[2]
    venv = tmp_path / "venv"
    r = subprocess.run(["bash", str(root / "ci" / "demo.sh"), "--help"], capture_output=True,
                       text=True, timeout=30, env={**os.environ, "CHUNKSTORE_VENV": str(venv)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: python -m chunkstore.cli.demo") and "--size-mb" in r.stdout
    assert not venv.exists()
    from chunkstore.cli.demo import main
    with pytest.raises(SystemExit) as info:  # the same parser behind the module
        main(["--help"])
    assert info.value.code == 0
