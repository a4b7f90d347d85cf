"""Crash safety: a writer killed with SIGKILL at random moments never leaves a torn value.

A writer subprocess rewrites a set of keys over and over, each value being wholly new
(64 KiB of one repeated byte, framed by a generation number and a CRC32). After each kill
every key must hold a complete value of some generation: the old one or a new one.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import time
import zlib

import pytest

from chunkstore.storage import DirectoryStore, LMDBStore, SQLiteStore, ZipStore

from ._subproc import spawn

BODY = 64 * 1024
KEYS = ["k0", "k1", "a/k2", "a/b/k3", "c/0.0", "c/0.1"]
ROUNDS = 5

WRITER = r"""
import struct, sys, zlib
kind, path, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
KEYS = %r
BODY = %d

def value(gen):
    head = struct.pack("<Q", gen)
    body = bytes([gen %% 256]) * BODY
    return head + body + struct.pack("<I", zlib.crc32(head + body))

if kind == "directory":
    from chunkstore.storage import DirectoryStore as S
elif kind == "sqlite":
    from chunkstore.storage import SQLiteStore as S
elif kind == "lmdb":
    from chunkstore.storage import LMDBStore as S
else:
    from chunkstore.storage import ZipStore as S
store = S(path)
gen = start
print("ready", flush=True)
while True:
    gen += 1
    if gen %% 3 == 0:
        store.setitems({k: value(gen) for k in KEYS})
    else:
        for k in KEYS:
            store[k] = value(gen)
    if kind == "zip":
        store.flush()
""" % (KEYS, BODY)

OPEN = {
    "directory": lambda p, mode="a": DirectoryStore(p, mode=mode),
    "sqlite": lambda p, mode="a": SQLiteStore(p, mode=mode),
    "lmdb": lambda p, mode="a": LMDBStore(p, mode=mode, map_size=4 * 2**20),
    "zip": lambda p, mode="a": ZipStore(p, mode=mode),
}
PATHS = {"directory": "d", "sqlite": "s.sqlite", "lmdb": "l.lmdb", "zip": "z.zip"}


def value(gen: int) -> bytes:
    head = struct.pack("<Q", gen)
    body = bytes([gen % 256]) * BODY
    return head + body + struct.pack("<I", zlib.crc32(head + body))


def check(v: bytes, key: str) -> int:
    """Return the generation of a complete value; fail on a torn one."""
    assert len(v) == 8 + BODY + 4, f"{key}: torn value of length {len(v)}"
    (gen,) = struct.unpack("<Q", v[:8])
    (crc,) = struct.unpack("<I", v[-4:])
    assert zlib.crc32(v[:-4]) == crc, f"{key}: checksum mismatch (torn value)"
    assert v[8:-4] == bytes([gen % 256]) * BODY, f"{key}: mixed content"
    return gen


@pytest.mark.parametrize("kind", ["directory", "sqlite", "lmdb", "zip"])
def test_sigkill_never_tears_values(kind, tmp_path):
    path = tmp_path / PATHS[kind]
    rng = random.Random(1234)
    with OPEN[kind](path) as s:
        s.setitems({k: value(0) for k in KEYS})
    last_max = 0
    progressed = 0
    for rnd in range(ROUNDS):
        proc = spawn(WRITER, kind, path, last_max + 1000 * (rnd + 1))
        line = proc.stdout.readline()
        assert line.strip() == b"ready", proc.stderr.read().decode()
        time.sleep(rng.uniform(0.02, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL

        with OPEN[kind](path, mode="r") as s:
            assert sorted(s) == sorted(KEYS)  # leftovers of the killed writer are invisible
            gens = {k: check(s[k], k) for k in KEYS}
            batch = s.getitems(KEYS)
            assert {k: check(v, k) for k, v in batch.items()} == gens
        if max(gens.values()) > last_max:
            progressed += 1
        last_max = max(last_max, *gens.values())
    assert progressed >= 1, "the writer never got to write anything"
    # the store is still writable after the crashes
    with OPEN[kind](path) as s:
        s["k0"] = value(1)
        assert check(s["k0"], "k0") == 1
