"""MPI ranks writing one array (issue 29): the README's example (examples/mpi_write.py:
rank 0 creates, barrier, each rank writes a slab whose edges cut chunks, with a
ProcessSynchronizer) and every rank creating the array at once (mode "a"), with 2 and 4
ranks, Zarr v2 and v3; the data read back must be exact. mpi4py and MPICH come from PyPI
(the test extra), mpiexec from the same environment."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def _run(ranks, *args):
    # (chunkstore as this Python imports it: the scripts' own folders come first on sys.path)
    return subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("ranks", [2, 4])
def test_the_readme_example_writes_exactly(tmp_path, ranks):
    done = _run(ranks, os.path.join(ROOT, "examples", "mpi_write.py"),
                str(tmp_path / "a.zarr"), str(tmp_path / "locks"), "777", "130")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{ranks} ranks wrote 777 x 130: exact" in done.stdout


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("ranks", [2, 4])
def test_every_rank_creating_the_array_at_once(tmp_path, ranks, fmt):
    done = _run(ranks, os.path.join(ROOT, "tests", "sync", "mpi_ranks.py"),
                str(tmp_path / "b.zarr"), str(tmp_path / "locks"), str(fmt))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all exact" in done.stdout
