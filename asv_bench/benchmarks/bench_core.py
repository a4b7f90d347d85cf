"""Core read/write workloads on a 4096 x 4096 float32 array in a DirectoryStore.

The data and the selections are made here by ``make_data`` / ``make_selections`` with fixed
seeds, so every run (and ``asv_bench/compare.py``, which imports them) uses exactly the same
bytes and the same indices.

The stores are written once per asv run by the module-level ``setup_cache`` into asv's
temporary cache directory (the working directory of setup_cache and of the benchmarks, removed
by asv when the run ends), one array per chunk size.
"""

import os

import numpy as np
from numcodecs import Blosc

import chunkstore as cs

SIZE = 4096
CHUNK_SIZES = (512, 64)
DATA_SEED = 20240917
SELECTION_SEED = 7
WINDOW = 100  # edge of the square window reads and writes

N_POINTS = 200  # single-element reads
N_WINDOWS = 50  # window reads
N_ORTHO = 500  # rows and columns of the orthogonal selection
N_VPOINTS = 100_000  # vindex points
N_WRITE_WINDOWS = 20  # window writes (partial chunks: read-modify-write)


def compressor():
    """Blosc lz4, clevel 5, byte shuffle: the compressor of every array in these benchmarks."""
    return Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)


def make_data(size=SIZE, seed=DATA_SEED):
    """A smooth field plus small noise, rounded to integers (so it compresses), as float32."""
    rng = np.random.default_rng(seed)
    x = np.arange(size, dtype=np.float64)[:, None]
    y = np.arange(size, dtype=np.float64)[None, :]
    field = rng.normal(0.0, 2.0, (size, size))
    field += 1000.0 * np.sin(x / 300.0) * np.cos(y / 500.0)
    return np.round(field).astype(np.float32)


def make_selections(size=SIZE, seed=SELECTION_SEED):
    """The indices every workload uses (a dict of plain NumPy arrays / lists of ints)."""
    rng = np.random.default_rng(seed)
    w = min(WINDOW, size)
    n_ortho = min(N_ORTHO, size)
    return {
        "window": w,
        "points": [tuple(map(int, p)) for p in rng.integers(0, size, (N_POINTS, 2))],
        "windows": [tuple(map(int, p)) for p in rng.integers(0, size - w + 1, (N_WINDOWS, 2))],
        "orows": np.sort(rng.choice(size, n_ortho, replace=False)),
        "ocols": np.sort(rng.choice(size, n_ortho, replace=False)),
        "vrows": rng.integers(0, size, N_VPOINTS),
        "vcols": rng.integers(0, size, N_VPOINTS),
        "write_windows": [tuple(map(int, p))
                          for p in rng.integers(0, size - w + 1, (N_WRITE_WINDOWS, 2))],
    }


def window_write_values(data, sel):
    """The blocks the window-write workload stores: the source window + 1.

    Writing them is idempotent (every repeat stores the same values, and overlapping windows
    agree), so the array after any number of repeats equals ``expected_after_writes``.
    """
    w = sel["window"]
    return [data[r:r + w, c:c + w] + np.float32(1) for r, c in sel["write_windows"]]


def expected_after_writes(data, sel):
    out = data.copy()
    w = sel["window"]
    for r, c in sel["write_windows"]:
        out[r:r + w, c:c + w] = data[r:r + w, c:c + w] + np.float32(1)
    return out


def _paths(root, chunk):
    return os.path.join(root, f"read_c{chunk}.zarr"), os.path.join(root, f"write_c{chunk}.zarr")


def setup_cache():
    """Write the source data and, per chunk size, one array to read and one to overwrite."""
    root = os.path.abspath("chunkstore-bench")
    os.makedirs(root, exist_ok=True)
    data = make_data()
    np.save(os.path.join(root, "data.npy"), data)
    for chunk in CHUNK_SIZES:
        for p in _paths(root, chunk):
            z = cs.open_array(p, mode="w", shape=data.shape, chunks=(chunk, chunk),
                              dtype="f4", compressor=compressor())
            z[...] = data
    return root


setup_cache.timeout = 600


class Core:
    """Timings of the core workloads, per chunk edge (512: 1 MiB chunks, 64: 16 KiB chunks)."""

    params = list(CHUNK_SIZES)
    param_names = ["chunk"]
    timeout = 600

    def setup(self, root, chunk):
        read_path, write_path = _paths(root, chunk)
        self.data = np.load(os.path.join(root, "data.npy"))
        self.sel = make_selections()
        self.window_values = window_write_values(self.data, self.sel)
        self.z = cs.open_array(read_path, mode="r+")
        self.zw = cs.open_array(write_path, mode="r+")

    def time_write_whole(self, root, chunk):
        self.zw[...] = self.data

    def time_read_whole(self, root, chunk):
        self.z[...]

    def time_read_points(self, root, chunk):
        z = self.z
        for i, j in self.sel["points"]:
            z[i, j]

    def time_read_windows(self, root, chunk):
        z, w = self.z, self.sel["window"]
        for r, c in self.sel["windows"]:
            z[r:r + w, c:c + w]

    def time_oindex(self, root, chunk):
        self.z.oindex[self.sel["orows"], self.sel["ocols"]]

    def time_vindex(self, root, chunk):
        self.z.vindex[self.sel["vrows"], self.sel["vcols"]]

    def time_write_windows(self, root, chunk):
        # Writes into the write array (not the one the read benchmarks use); idempotent.
        zw, w = self.zw, self.sel["window"]
        for (r, c), v in zip(self.sel["write_windows"], self.window_values):
            zw[r:r + w, c:c + w] = v


class Memory:
    """Peak resident memory of a process that reads the whole array (output: 64 MiB).

    asv reports the process's peak RSS (imports included); setup only opens the array, so the
    read itself is what moves the peak.
    """

    params = list(CHUNK_SIZES)
    param_names = ["chunk"]
    timeout = 600

    def setup(self, root, chunk):
        self.z = cs.open_array(_paths(root, chunk)[0], mode="r")

    def peakmem_read_whole(self, root, chunk):
        self.z[...]
