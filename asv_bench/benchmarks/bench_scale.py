"""How costs grow with the work (issue 30), each at two sizes so that growth shows:
opening a consolidated hierarchy of N arrays and listing them, its tree(), counting the
stored chunks of an array (nchunks_initialized), and an array-to-array copy (peak memory
tracked as well). Data written once per asv run by setup_cache; asv_bench/scale.py
runs the same workloads against zarr-python 3 and tensorstore in one run."""

from __future__ import annotations

import os

import numcodecs
import numpy as np

import chunkstore as cs

MEMBERS = (500, 2000)
CHUNK_COUNTS = (15_625, 62_500)   # (2000, 2000) and (4000, 4000) u8 in (16, 16) chunks
COPY_SIDES = (2048, 4096)         # float32 squares: 16 MiB and 64 MiB


def setup_cache():
    root = os.path.abspath("chunkstore-bench-scale")
    os.makedirs(root, exist_ok=True)
    for fmt in (2, 3):
        for n in MEMBERS:
            path = os.path.join(root, f"h{fmt}-{n}.zarr")
            g = cs.open_group(path, mode="w", zarr_format=fmt)
            for i in range(n):
                g.create_array(f"a{i:05d}", shape=(10,), chunks=(5,), dtype="f4",
                               attributes={"i": i})
            cs.consolidate_metadata(path)
    for n in CHUNK_COUNTS:
        side = int(round(n ** 0.5)) * 16
        a = cs.create_array(os.path.join(root, f"c{n}.zarr"), shape=(side, side),
                            chunks=(16, 16), dtype="u1", compressors=None)
        a[...] = 1
    for side in COPY_SIDES:
        values = np.random.default_rng(side).random((side, side), dtype="f4")
        a = cs.create_array(os.path.join(root, f"s{side}.zarr"), shape=(side, side),
                            chunks=(256, 256), dtype="f4", zarr_format=2)
        a[...] = values
        # the same values compressed otherwise (Blosc lz4): a copy into zstd re-encodes
        b = cs.create_array(os.path.join(root, f"b{side}.zarr"), shape=(side, side),
                            chunks=(256, 256), dtype="f4", zarr_format=2,
                            compressors=numcodecs.Blosc(cname="lz4", clevel=5))
        b[...] = values
    return root


setup_cache.timeout = 900


class ConsolidatedHierarchy:
    """open_consolidated + listing the arrays, and tree(), of a group of N arrays."""

    params = ([2, 3], list(MEMBERS))
    param_names = ["zarr_format", "members"]

    def setup(self, root, fmt, n):
        self.path = os.path.join(root, f"h{fmt}-{n}.zarr")
        self.group = cs.open_consolidated(self.path, mode="r")

    def time_open_and_list(self, root, fmt, n):
        g = cs.open_consolidated(self.path, mode="r")
        dict(g.arrays())

    def time_tree(self, root, fmt, n):
        str(self.group.tree())


class ChunkCount:
    """nchunks_initialized of a (16, 16)-chunked Zarr v3 array of N chunks, on disk."""

    params = list(CHUNK_COUNTS)
    param_names = ["chunks"]

    def setup(self, root, n):
        self.array = cs.open_array(os.path.join(root, f"c{n}.zarr"), mode="r")

    def time_nchunks_initialized(self, root, n):
        assert self.array.nchunks_initialized == n


class StreamingCopy:
    """from_array(data=Array) of a float32 v2 array into sharded v3 (256² chunks in 1024²
    shards, zstd): time and peak memory (which stays bounded: blocks, not the whole array).
    "stored": a zstd source, whose stored chunks are moved as they are; "recode": a Blosc
    source, every chunk decoded and encoded again."""

    params = (list(COPY_SIDES), ["stored", "recode"])
    param_names = ["side", "source"]

    def setup(self, root, side, source):
        name = f"s{side}.zarr" if source == "stored" else f"b{side}.zarr"
        self.src = cs.open_array(os.path.join(root, name), mode="r")
        self.dst = os.path.join(root, f"out{side}-{source}.zarr")

    def _copy(self):
        cs.from_array(self.dst, data=self.src, chunks=(256, 256), shards=(1024, 1024),
                      compressors=[cs.codecs.ZstdCodec(level=0)], zarr_format=3,
                      overwrite=True)

    def time_from_array(self, root, side, source):
        self._copy()

    def peakmem_from_array(self, root, side, source):
        self._copy()
