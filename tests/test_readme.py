"""Every Python block of the README runs as pasted, in order, in one fresh directory (as a
reader following along would), and its ``print`` output appears; blocks that need the network
(fenced ``python network``) are compiled, not run."""

from __future__ import annotations

import contextlib
import io
import sys
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_FENCE = re.compile(r"^```(python[^\n]*)\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, int, str]]:
    """(info string, line number, code) of every python block, in order."""
    text = README.read_text(encoding="utf-8")
    return [(m.group(1).strip(), text.count("\n", 0, m.start()) + 1, m.group(2))
            for m in _FENCE.finditer(text)]


def test_readme_blocks_run_as_pasted_in_order(tmp_path, monkeypatch):
    pytest.importorskip("xarray")
    pytest.importorskip("dask")
    found = blocks()
    assert len(found) >= 8
    infos = {info for info, _, _ in found}
    assert infos <= {"python", "python network"}, infos  # nothing else is left unrun
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    ran = 0
    for info, line, code in found:
        compiled = compile(code, f"README.md:{line}", "exec")
        if info == "python network":
            assert "://" in code  # only blocks that reach a server are skipped
            continue
        out = io.StringIO()
        zarr_modules = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "zarr"}
        with contextlib.redirect_stdout(out):
            exec(compiled, namespace)  # noqa: S102 - the README's own code
        # a block may put chunkstore in zarr's place (as a user's script does): undo it, so
        # that later blocks and tests import zarr-python as before
        for k in [k for k in sys.modules if k.split(".")[0] == "zarr"]:
            if sys.modules[k] is not zarr_modules.get(k):
                del sys.modules[k]
        sys.modules.update(zarr_modules)
        ran += 1
        if "print(" in code:
            assert out.getvalue().strip(), f"the block at README.md:{line} printed nothing"
    assert ran == len(found) - sum(info == "python network" for info, _, _ in found)
    # what the blocks say they did, they did
    import chunkstore as cs
    z = cs.open_array("data/example.zarr", mode="r")
    assert z[0, 7] == 7 and z[1500, 3] == 1 and z[9999, 9999] == 42
    assert cs.open_array("data/doubled.zarr", mode="r")[9999, 9999] == 84
    import xarray as xr
    out = xr.open_dataset("out.zarr", engine="chunkstore")
    assert out.sizes["time"] == 40 and float(abs(out.temp.isel(time=slice(0, 10))).max()) == 0
