"""A worker process of test_xarray_regions_across_processes: writes its regions of the
dataset with to_chunkstore, synchronized (a module of its own: spawned processes import it)."""

from __future__ import annotations

import numpy as np


def full(t: int, x: int) -> np.ndarray:
    """The dataset's values."""
    return np.arange(t * x, dtype="f8").reshape(t, x) + 1


def write_regions(path: str, locks: str, how: str, starts: list, rows: int, t: int,
                  x: int) -> None:
    """Write rows [s, s + rows) for each s of starts into variable v of the store at path."""
    import xarray as xr

    import chunkstore as cs
    from chunkstore.xarray import to_chunkstore
    values = full(t, x)
    sync = cs.ProcessSynchronizer(locks)
    for s in starts:
        sl = slice(s, min(s + rows, t))
        part = xr.Dataset({"v": (("time", "x"), values[sl])})
        if how == "keyword":
            to_chunkstore(part, path, region={"time": sl}, synchronizer=sync)
        else:  # (a Group opened with the synchronizer, given as the store)
            to_chunkstore(part, cs.open_group(path, mode="r+", synchronizer=sync),
                          region={"time": sl})
