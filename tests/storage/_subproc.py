"""Run Python snippets in fresh interpreters that can import chunkstore."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import chunkstore

REPO = str(Path(chunkstore.__file__).resolve().parent.parent)


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def spawn(code: str, *args: str, **kwargs) -> subprocess.Popen:
    """Start ``python -c code args...``; stdout/stderr are captured."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def wait_ok(procs, timeout: float = 60) -> list[str]:
    """Wait for every process; fail with its stderr if one exits non-zero."""
    outs = []
    for p in procs:
        if p.stdin is not None and not p.stdin.closed:
            p.stdin.close()
        p.stdin = None
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, f"worker failed ({p.returncode}):\n{err.decode()}"
        outs.append(out.decode())
    return outs
