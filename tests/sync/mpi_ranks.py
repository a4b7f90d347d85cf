"""Run by tests/sync/test_mpi.py under mpiexec: every rank opens (creating if absent) one
array at once with mode "a" and a ProcessSynchronizer, then writes its slab of rows (slab
edges not on chunk edges), then each rank reads the whole array back and checks it."""

import sys

import numpy as np
from mpi4py import MPI

import chunkstore as cs

path, locks, fmt = sys.argv[1], sys.argv[2], int(sys.argv[3])
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
sync = cs.ProcessSynchronizer(locks)
rows, cols = 333, 97
z = cs.open_array(path, mode="a", shape=(rows, cols), chunks=(16, 32), dtype="i8",
                  fill_value=-1, synchronizer=sync, zarr_format=fmt)
step = -(-rows // size)
mine = slice(min(rank * step, rows), min((rank + 1) * step, rows))
z[mine, :] = np.arange(mine.start, mine.stop)[:, None] * 1000 + np.arange(cols)[None, :]
comm.Barrier()
want = np.arange(rows)[:, None] * 1000 + np.arange(cols)[None, :]
ok = np.array_equal(cs.open_array(path, mode="r")[...], want)
oks = comm.gather(bool(ok), root=0)
if rank == 0:
    print("all exact" if all(oks) else f"WRONG on ranks {[i for i, o in enumerate(oks) if not o]}")
sys.exit(0 if comm.bcast(all(oks) if rank == 0 else None, root=0) else 1)
