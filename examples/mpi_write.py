"""MPI ranks writing one Zarr array together (run with mpiexec):

    mpiexec -n 4 python examples/mpi_write.py data/mpi.zarr locks/mpi [rows] [cols]

Rank 0 creates the array; a barrier; then every rank writes its own slab of rows. The slabs
are cut without regard to the chunk grid (rows / ranks, not a multiple of the chunk's 64
rows), so neighbouring ranks share chunks at their edges: the ProcessSynchronizer's lock
files (in a directory every rank can reach, outside the store) make those shared chunks'
read-modify-writes safe. After a second barrier rank 0 reads the whole array and checks every
value; the exit status says whether it matched.

Without a synchronizer this is safe only when every slab edge is a chunk edge (each chunk is
written by exactly one rank); with unaligned edges two ranks can rewrite one chunk at once and
one rank's rows are lost.
"""

import sys

import numpy as np
from mpi4py import MPI

import chunkstore as cs


def value(rows: slice, cols: int) -> np.ndarray:
    """What a slab of rows holds: row r is r * 1000 + column (checkable, different per row)."""
    r = np.arange(rows.start, rows.stop, dtype="i8")[:, None]
    return r * 1000 + np.arange(cols, dtype="i8")[None, :]


def main(path: str, locks: str, rows: int = 1000, cols: int = 300) -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    sync = cs.ProcessSynchronizer(locks)
    if rank == 0:
        cs.create(shape=(rows, cols), chunks=(64, 64), dtype="i8", store=path,
                  fill_value=-1, overwrite=True, synchronizer=sync)
    comm.Barrier()  # the array exists before anyone opens it
    z = cs.open_array(path, mode="r+", synchronizer=sync)
    step = -(-rows // size)  # rows per rank (the last rank takes fewer)
    mine = slice(min(rank * step, rows), min((rank + 1) * step, rows))
    z[mine, :] = value(mine, cols)
    comm.Barrier()  # every slab written before the check
    ok = True
    if rank == 0:
        got = cs.open_array(path, mode="r")[...]
        ok = bool(np.array_equal(got, value(slice(0, rows), cols)))
        print(f"{size} ranks wrote {rows} x {cols}: {'exact' if ok else 'WRONG'}")
    return 0 if comm.bcast(ok, root=0) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:5])))
