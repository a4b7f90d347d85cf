"""Many user threads reading random tiles through one shared array handle (issue 18).

The workload of an imaging pipeline (a viewer fetching tiles, a tile server, a data loader):
a (32, 2048, 2048) uint16 volume, Blosc lz4 (clevel 5, byte shuffle), on local disk; N threads
of a ThreadPoolExecutor each read random tiles `a[k, y:y+T, x:x+T]` from one handle opened
once, 2000 reads in all. Three stored copies ("cases"):

    tile256   (1, 512, 512) chunks, Zarr v2, 256 x 256 tiles (2-4 chunks a tile)
    tile64    (1, 256, 256) chunks, Zarr v2, 64 x 64 tiles (the small-tile case)
    sharded   Zarr v3, inner chunks (1, 256, 256) in (1, 2048, 2048) shards, 256 x 256 tiles

Every library reads the same files (written once by chunkstore). The reader functions here are
shared by the asv benchmark below and by `asv_bench/tile_threads.py`, which runs chunkstore,
tensorstore and zarr-python 3 in one process and prints the table.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

SHAPE = (32, 2048, 2048)
NREADS = 2000
SEED = 18
CASES = {  # name: (tile size, chunk shape, shard shape or None)
    "tile256": (256, (1, 512, 512), None),
    "tile64": (64, (1, 256, 256), None),
    "sharded": (256, (1, 256, 256), (1, 2048, 2048)),
}


def make_volume(shape=SHAPE, seed=SEED):
    """Smooth gradients plus 4 bits of noise, uint16 (compresses about 2-3x with lz4)."""
    rng = np.random.default_rng(seed)
    z = np.arange(shape[0], dtype=np.uint16)[:, None, None] * np.uint16(977)
    y = (np.arange(shape[1], dtype=np.uint16) // 3)[None, :, None]
    x = (np.arange(shape[2], dtype=np.uint16) // 5)[None, None, :]
    vol = z + y + x
    vol += rng.integers(0, 16, size=shape, dtype=np.uint16)
    return vol


def make_tiles(tile, n=NREADS, shape=SHAPE, seed=SEED):
    """n random tile origins (k, y, x), each tile wholly inside the volume."""
    rng = np.random.default_rng(seed + tile)
    k = rng.integers(0, shape[0], n)
    y = rng.integers(0, shape[1] - tile + 1, n)
    x = rng.integers(0, shape[2] - tile + 1, n)
    return [(int(a), int(b), int(c)) for a, b, c in zip(k, y, x)]


def write_case(root, case, vol):
    """Write the case's copy of vol under root (chunkstore); returns its path."""
    import chunkstore as cs
    from numcodecs import Blosc
    _, chunks, shards = CASES[case]
    path = os.path.join(root, case + ".zarr")
    blosc = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)
    if shards is None:
        a = cs.open_array(path, mode="w", shape=vol.shape, chunks=chunks, dtype=vol.dtype,
                          compressor=blosc, fill_value=0)
    else:
        a = cs.create_array(path, shape=vol.shape, chunks=chunks, shards=shards, dtype=vol.dtype,
                            compressors=blosc, fill_value=0, zarr_format=3, overwrite=True)
    a[...] = vol
    return path


# ---------------------------------------------------------------------------- readers
# open_<lib>(path, case) -> read(k, y, x, tile) -> numpy array; one handle shared by all threads.

def open_chunkstore(path, case):
    import chunkstore as cs
    a = cs.open_array(path, mode="r")
    return lambda k, y, x, t: a[k, y:y + t, x:x + t]


def open_tensorstore(path, case):
    import tensorstore as ts
    driver = "zarr3" if CASES[case][2] else "zarr"
    # No chunk cache (its default): every read decodes from the files, like the other two.
    ctx = ts.Context({"cache_pool": {"total_bytes_limit": 0}})
    a = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": os.path.abspath(path)}},
                open=True, read=True, context=ctx).result()
    return lambda k, y, x, t: a[k, y:y + t, x:x + t].read().result()


def open_zarr(path, case):
    import zarr
    a = zarr.open_array(path, mode="r")
    return lambda k, y, x, t: a[k, y:y + t, x:x + t]


OPENERS = {"chunkstore": open_chunkstore, "tensorstore": open_tensorstore, "zarr": open_zarr}


def read_tiles(read, tiles, tile, threads, pool=None):
    """All tiles read by `threads` user threads (a ThreadPoolExecutor); returns the sum of the
    tiles' sums (cheap, and every read's data is touched)."""
    def one(o):
        return int(read(o[0], o[1], o[2], tile).sum(dtype=np.uint64))
    if threads == 1:
        return sum(map(one, tiles))
    if pool is not None:
        return sum(pool.map(one, tiles))
    with ThreadPoolExecutor(threads) as ex:
        return sum(ex.map(one, tiles))


def verify(read, tiles, tile, vol, threads=4):
    """Every tile read (by `threads` threads at once) equals the volume's; raises otherwise."""
    def check(o):
        k, y, x = o
        got = read(k, y, x, tile)
        want = vol[k, y:y + tile, x:x + tile]
        if got.shape != want.shape or not np.array_equal(got, want):
            raise AssertionError(f"tile {o} differs from the source volume")
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(check, tiles))


# ---------------------------------------------------------------------------- asv
_ROOT = None
_PATHS = {}


def _case_path(case):
    global _ROOT
    if case not in _PATHS:
        if _ROOT is None:
            _ROOT = tempfile.mkdtemp(prefix="chunkstore-asv-tiles-")
            atexit.register(shutil.rmtree, _ROOT, True)
        _PATHS[case] = write_case(_ROOT, case, make_volume())
    return _PATHS[case]


class TileReadsThreads:
    """2000 random tile reads by N user threads sharing one handle (chunkstore only; the
    peers run in asv_bench/tile_threads.py)."""
    params = (list(CASES), [1, 2, 4, 16])
    param_names = ["case", "threads"]
    timeout = 600
    repeat = (3, 5, 60.0)
    number = 1

    def setup(self, case, threads):
        tile = CASES[case][0]
        self.tile = tile
        self.tiles = make_tiles(tile)
        self.read = open_chunkstore(_case_path(case), case)
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        read_tiles(self.read, self.tiles[:200], tile, threads, self.pool)  # warm cache

    def teardown(self, case, threads):
        if getattr(self, "pool", None) is not None:
            self.pool.shutdown()

    def time_tile_reads(self, case, threads):
        read_tiles(self.read, self.tiles, self.tile, threads, self.pool)
