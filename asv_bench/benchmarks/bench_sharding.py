"""Sharding: a 4096 x 4096 float32 Zarr v3 array of 64 x 64 inner chunks in 1024 x 1024 shards
(16 shard files of 256 inner chunks each), against the same array unsharded (4096 chunk files
of 64 x 64), both Blosc lz4 clevel 5 with byte shuffle, in a DirectoryStore.

Workloads: whole-array read and write, 50 reads of 100 x 100 windows at random places, 200
single-element reads. The data and the window/point positions are bench_core's (same
generator, same seeds), so the numbers compare with bench_core's 64 x 64 Zarr v2 case.

The arrays are written once per asv run by ``setup_cache`` into asv's temporary cache
directory: per layout one array the reads use and one the whole-array write overwrites.
"""

import os

import numpy as np

import chunkstore as cs

try:  # imported by asv as benchmarks.bench_sharding
    from .bench_core import compressor, make_data, make_selections
except ImportError:  # imported as a top-level module (asv_bench/benchmarks on sys.path)
    from bench_core import compressor, make_data, make_selections

INNER = 64
SHARD = 1024
LAYOUTS = ("sharded", "unsharded")


def create(path, layout, shape):
    """The Zarr v3 array of a layout: 64 x 64 chunks, in 1024 x 1024 shards or not."""
    return cs.create_array(path, shape=shape, dtype="f4", chunks=(INNER, INNER),
                           shards=(SHARD, SHARD) if layout == "sharded" else None,
                           compressors=compressor(), fill_value=0, zarr_format=3,
                           overwrite=True)


def _paths(root, layout):
    return (os.path.join(root, f"read_{layout}.zarr"),
            os.path.join(root, f"write_{layout}.zarr"))


def setup_cache():
    root = os.path.abspath("chunkstore-bench-sharding")
    os.makedirs(root, exist_ok=True)
    data = make_data()
    np.save(os.path.join(root, "data.npy"), data)
    for layout in LAYOUTS:
        for p in _paths(root, layout):
            create(p, layout, data.shape)[...] = data
    return root


setup_cache.timeout = 600


class Sharding:
    """Sharded (64 x 64 inner chunks in 1024 x 1024 shards) vs unsharded 64 x 64, Zarr v3."""

    params = list(LAYOUTS)
    param_names = ["layout"]
    timeout = 600

    def setup(self, root, layout):
        read_path, write_path = _paths(root, layout)
        self.data = np.load(os.path.join(root, "data.npy"))
        self.sel = make_selections()
        self.z = cs.open_array(read_path, mode="r")
        self.zw = cs.open_array(write_path, mode="r+")

    def time_read_whole(self, root, layout):
        self.z[...]

    def time_write_whole(self, root, layout):
        self.zw[...] = self.data

    def time_read_windows(self, root, layout):
        z, w = self.z, self.sel["window"]
        for r, c in self.sel["windows"]:
            z[r:r + w, c:c + w]

    def time_read_points(self, root, layout):
        z = self.z
        for i, j in self.sel["points"]:
            z[i, j]

    def time_open_and_read_window(self, root, layout):
        # a fresh Array each time: the shard index cache starts empty (first-read cost)
        z = cs.open_array(_paths(root, layout)[0], mode="r")
        r, c = self.sel["windows"][0]
        w = self.sel["window"]
        z[r:r + w, c:c + w]
