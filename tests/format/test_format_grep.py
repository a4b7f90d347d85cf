"""One format layer: only chunkstore/format/ and chunkstore/metadata/ ask which Zarr format an
array holds or whether it is sharded. Everything above them goes through the layout.

A line of code (comments aside) outside those two folders matching
`zarr_format == / !=` or `.shards` fails the test, unless it is one of the few reads of the
public `shards` attribute listed in ALLOWED (file and exact line content, so that each
exception is deliberate and a moved or edited line has to be looked at again).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(importlib.util.find_spec("chunkstore").origin).parent   # found without importing it
FORMAT_LAYER = ("format", "metadata")
BRANCH = re.compile(r"zarr_format *[=!]=|\.shards\b")

# (file relative to chunkstore/, stripped line): reads of the public `shards` attribute that
# pass it on as a value, asking nothing about the format.
ALLOWED = {
    ("integrations/xarray_backend.py", '"shards": array.shards}  # None when unsharded, as in xarray\'s backend'),
    # the xarray writer: a stored variable's write blocks, to align dask chunks with them

    ("engine/array.py", "return self._engine.layout.shards"),  # the public Array.shards property itself
}


def format_branches(root=ROOT):
    """[(relative path, line number, stripped line)] of every finding outside the format layer."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".pyx") or not path.is_file():
            continue
        rel = path.relative_to(root)
        if rel.parts[0] in FORMAT_LAYER:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if BRANCH.search(code) and (rel.as_posix(), line.strip()) not in ALLOWED:
                found.append((rel.as_posix(), number, line.strip()))
    return found


def test_the_grep_finds_format_questions(tmp_path):
    (tmp_path / "format").mkdir()
    (tmp_path / "format" / "v3.py").write_text("if meta.zarr_format == 3:\n    s = a.shards\n")
    (tmp_path / "array.py").write_text(
        "x = 1  # zarr_format == 2 only in a comment\n"
        "if self.zarr_format!=2:\n"
        "    pass\n"
        "n = self._shards\n"
        "y = arr.shards_of(3)\n"
        "z = arr.shards\n")
    (tmp_path / "integrations").mkdir()
    (tmp_path / "integrations" / "xarray_backend.py").write_text(
        "    enc = {\n        \"shards\": array.shards}  # None when unsharded, as in xarray's backend\n")
    assert format_branches(tmp_path) == [("array.py", 2, "if self.zarr_format!=2:"),
                                         ("array.py", 6, "z = arr.shards")]


def test_no_format_branches_outside_the_format_layer():
    found = format_branches()
    assert not found, ("format branches outside chunkstore/format/ and chunkstore/metadata/ "
                       "(ask the array's layout instead):\n"
                       + "\n".join(f"  chunkstore/{f}:{n}: {line}" for f, n, line in found))
