"""Per-write cost of locking: the same writes with no synchronizer, a ThreadSynchronizer and
a ProcessSynchronizer (lock files on local disk)."""

import shutil
import tempfile

import numpy as np

import chunkstore as cs


class WriteWithLocks:
    params = (["none", "thread", "process"], ["one_chunk", "partial_16_chunks"])
    param_names = ["synchronizer", "write"]

    def setup(self, kind, write):
        self.dir = tempfile.mkdtemp()
        sync = {"none": None, "thread": cs.ThreadSynchronizer(),
                "process": cs.ProcessSynchronizer(self.dir + "/locks")}[kind]
        self.z = cs.zeros((1024, 1024), chunks=(64, 64), dtype="f4",
                          store=self.dir + "/a.zarr", synchronizer=sync)
        self.z[...] = 1.0
        self.one = np.ones((64, 64), dtype="f4")
        self.partial = np.ones((200, 200), dtype="f4")

    def teardown(self, kind, write):
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_write(self, kind, write):
        # 20 writes, so the lock cost per write is time / 20.
        for i in range(20):
            if write == "one_chunk":
                self.z[64 * (i % 16):64 * (i % 16 + 1), 0:64] = self.one
            else:
                o = 10 + 3 * i
                self.z[o:o + 200, o:o + 200] = self.partial
