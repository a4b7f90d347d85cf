"""A fault-injecting store wrapper for tests: raise chosen OSErrors on chosen reads/writes."""

from __future__ import annotations

import errno
import os
from collections.abc import MutableMapping


class FaultyStore(MutableMapping):
    """Wraps a store; ``fail_read(pred, err)`` / ``fail_write(pred, err, after=n)`` make the
    matching keys raise ``OSError(err)`` (after ``n`` successful matching writes)."""

    def __init__(self, inner, capacity=None):
        self.inner = inner
        self.capacity = capacity  # a full disk: writes past this many stored bytes fail
        self._read = None
        self._write = None
        self.writes_ok = 0

    def fail_read(self, pred, err=errno.EIO):
        self._read = (pred, err)

    def fail_write(self, pred, err=errno.EIO, after=0, times=None):
        """Fail matching writes after ``after`` successes, ``times`` times (None: always)."""
        self._write = [pred, err, after, times]

    def used(self):
        return sum(len(self.inner[k]) for k in self.inner)

    def heal(self):
        self._read = self._write = None

    @staticmethod
    def _raise(err, key):
        raise OSError(err, os.strerror(err), key)

    def __getitem__(self, key):
        if self._read and self._read[0](key):
            self._raise(self._read[1], key)
        return self.inner[key]

    def __setitem__(self, key, value):
        w = self._write
        if w and w[0](key):
            if w[2] <= 0 and (w[3] is None or w[3] > 0):
                if w[3] is not None:
                    w[3] -= 1
                self._raise(w[1], key)
            w[2] -= 1
        if self.capacity is not None:
            old = len(self.inner[key]) if key in self.inner else 0
            if self.used() - old + len(value) > self.capacity:
                self._raise(errno.ENOSPC, key)
        self.inner[key] = value
        self.writes_ok += 1

    def __delitem__(self, key):
        del self.inner[key]

    def __iter__(self):
        return iter(self.inner)

    def __len__(self):
        return len(self.inner)

    def __contains__(self, key):
        return key in self.inner


def is_chunk(key):
    """A chunk key of v2 or v3 (not a metadata document)."""
    name = key.rsplit("/", 1)[-1]
    return not name.startswith(".") and name != "zarr.json"
