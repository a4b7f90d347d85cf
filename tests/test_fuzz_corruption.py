"""Fuzz (issue 16): mutate stored chunk bytes and metadata documents at random, for every
codec chain and both formats. Every read returns the original values or raises a chunkstore
error naming the key; where the chain can tell (a length change for any chain; any change
under a checksum: gzip, zlib, bz2, lzma, zstd with checksum, crc32c) never other values; and
never a crash: the reads run in a worker subprocess, so a segfault fails the test with the
example instead of killing pytest.

Same-size garbage in a chunk whose chain has no checksum cannot be detected (an uncompressed
chunk is any bytes of the right length; Blosc, LZ4 and plain Zstd frames carry no checksum of
their content): for those chains such mutations are checked only for "no crash, no foreign
exception, and an error names the key"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numcodecs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs

# where chunkstore is imported from (the installed package in CI, not the source tree)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cs.__file__)))

# name -> (format, create kwargs, dtype, checksummed: any change of a chunk is detected)
CHAINS = {
    "v2-raw": (2, dict(compressor=None), "i4", False),
    "v2-blosc-lz4": (2, dict(compressor=numcodecs.Blosc("lz4", 5, 1)), "i4", False),
    "v2-blosc-zstd-bit": (2, dict(compressor=numcodecs.Blosc("zstd", 3, 2)), "f8", False),
    "v2-blosc-blosclz": (2, dict(compressor=numcodecs.Blosc("blosclz", 5, 0)), "i2", False),
    "v2-zstd": (2, dict(compressor=numcodecs.Zstd()), "i4", False),
    "v2-zstd-checksum": (2, dict(compressor=numcodecs.Zstd(checksum=True)), "i4", True),
    "v2-gzip": (2, dict(compressor=numcodecs.GZip()), "i4", True),
    "v2-zlib": (2, dict(compressor=numcodecs.Zlib()), "u8", True),
    "v2-bz2": (2, dict(compressor=numcodecs.BZ2()), "i4", True),
    "v2-lzma": (2, dict(compressor=numcodecs.LZMA()), "i4", True),
    "v2-lz4": (2, dict(compressor=numcodecs.LZ4()), "i4", False),
    "v2-crc32c": (2, dict(compressor=numcodecs.CRC32C()), "i4", True),
    "v2-delta-blosc": (2, dict(filters=[numcodecs.Delta("i4")],
                               compressor=numcodecs.Blosc("lz4", 5, 0)), "i4", False),
    "v2-vlen-utf8-blosc": (2, dict(object_codec=numcodecs.VLenUTF8(),
                                   compressor=numcodecs.Blosc()), object, False),
    "v2-vlen-bytes": (2, dict(object_codec=numcodecs.VLenBytes(), compressor=None),
                      bytes, False),
    "v3-bytes": (3, dict(compressors=None), "i4", False),
    "v3-bytes-be-gzip": (3, dict(compressors=numcodecs.GZip()), ">i4", True),
    "v3-blosc": (3, dict(compressors=numcodecs.Blosc("lz4", 5, 1)), "i4", False),
    "v3-zstd": (3, dict(compressors=numcodecs.Zstd()), "f4", False),
    "v3-crc32c": (3, dict(compressors=[numcodecs.CRC32C()]), "i4", True),
    "v3-zstd-crc32c": (3, dict(compressors=[numcodecs.Zstd(), numcodecs.CRC32C()]), "i4", True),
    "v3-sharded-blosc": (3, dict(shards=(40,), compressors=numcodecs.Blosc()), "i4", False),
    "v3-sharded-zstd-crc32c": (3, dict(shards=(40,), compressors=[
        numcodecs.Zstd(), numcodecs.CRC32C()]), "i4", True),
    "v3-string-zstd": (3, dict(compressors=numcodecs.Zstd()), str, False),
}

N = 40  # two chunks of 20
# examples per chain; the defaults keep the whole file near a minute on 2 busy cores
EXAMPLES = int(os.environ.get("CHUNKSTORE_FUZZ_EXAMPLES", "40"))


def _values(dtype):
    if dtype is bytes:
        return np.array([b"b%d" % i * (i % 4) for i in range(N)], dtype=object)
    if dtype is object:
        return np.array([f"item {i} " * (i % 4) for i in range(N)], dtype=object)
    if dtype is str:
        return np.array([f"s{i}" * (i % 3) for i in range(N)])
    return (np.arange(N) * 7 - 50).astype(dtype)


def _build(name, root):
    fmt, kw, dtype, _ = CHAINS[name]
    path = os.path.join(root, name)
    if fmt == 2:
        z = cs.open(path, mode="w", shape=(N,), chunks=(20,),
                    dtype=object if dtype is bytes else dtype, **kw)
    else:
        z = cs.create_array(path, shape=(N,), chunks=(20,), dtype=dtype, **kw)
    v = _values(dtype)
    z[:] = v
    np.save(os.path.join(root, name + ".npy"), v, allow_pickle=True)
    files = sorted(os.path.relpath(os.path.join(dp, f), path)
                   for dp, _, fs in os.walk(path) for f in fs)
    meta = [f for f in files if f.endswith((".zarray", "zarr.json"))]
    chunks = [f for f in files if f not in meta and not f.endswith((".zattrs", ".zgroup"))]
    return path, chunks, meta


# The worker: reads one store per request and says what happened. A crash ends it.
_WORKER = r"""
import json, resource, sys, traceback
# a safety net for the machine: a read trying to allocate gigabytes fails fast (and the test
# then fails on the MemoryError, a foreign exception)
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import numpy as np
import chunkstore as cs
from chunkstore.errors import ChunkstoreError
for line in sys.stdin:
    req = json.loads(line)
    out = {}
    try:
        z = cs.open(req["path"], mode="r")
        expect = np.load(req["expect"], allow_pickle=True)
        if z.size > 10 * expect.size:  # edited metadata: a huge shape; read its corners
            z[(0,) * z.ndim], z[(-1,) * z.ndim]
            sys.stdout.write(json.dumps({"same": False}) + "\n")
            sys.stdout.flush()
            continue
        got = z[...]
        out["same"] = bool(got.shape == expect.shape
                           and all(a == b for a, b in zip(got.tolist(), expect.tolist())))
        if out["same"]:
            got0 = z[int(req["probe"])]
            out["same"] = bool(got0 == expect[int(req["probe"])])
    except Exception as e:
        out["error"] = type(e).__name__
        out["chunkstore"] = isinstance(e, ChunkstoreError)
        out["message"] = str(e)
        out["tb"] = traceback.format_exc()[-2000:]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


class Worker:
    def __init__(self):
        self.proc = None

    def _start(self):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)

    def ask(self, req):
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            rc = self.proc.wait()
            err = self.proc.stderr.read()[-3000:]
            self.proc = None
            raise AssertionError(f"the reading process crashed (exit {rc}) on {req}: {err}")
        return json.loads(line)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


class World(tuple):
    def __repr__(self):  # keep hypothesis' failure report short
        return "world"


@pytest.fixture(scope="module")
def world():
    root = tempfile.mkdtemp(prefix="chunkstore-fuzz-")
    built = {name: _build(name, root) for name in CHAINS}
    w = Worker()
    yield World((root, built, w))
    w.close()
    shutil.rmtree(root, ignore_errors=True)


def _mutate(data: bytes, how: str, a: int, b: int, fill: bytes) -> bytes:
    n = len(data)
    if how == "truncate":
        return data[: a % n] if n else b""
    if how == "extend":
        return data + fill
    if how == "cut-middle":
        i = a % max(n, 1)
        return data[:i] + data[i + 1 + b % 8:]
    if how == "flip":
        i = a % n
        return data[:i] + bytes([data[i] ^ (b % 255 + 1)]) + data[i + 1:]
    if how == "json-edit":  # one field of a metadata document set to a hostile value
        doc = json.loads(data)
        paths = list(_json_paths(doc))
        path = paths[a % len(paths)]
        value = HOSTILE[b % len(HOSTILE)]
        if not path:
            return json.dumps(value).encode()
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        parent[path[-1]] = value
        return json.dumps(doc).encode()
    if how == "garbage":  # the whole chunk replaced by as many random bytes
        return (fill * (n // max(len(fill), 1) + 1))[:n] if fill else bytes(n)
    raise AssertionError(how)


HOSTILE = [None, -1, 0, 1, 2**31, 2**63, 10**30, 1.5, -0.0, "x", "", "../evil", "<i4", "|O",
           [], [0], [-1], [10**18], [1.5], [[]], {}, {"name": "blosc"}, True, "NaN",
           [2**62, 2**62], {"name": "nope", "configuration": {}}]


def _json_paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _json_paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _json_paths(v, prefix + (i,))


SIZE_CHANGES = ("truncate", "extend", "cut-middle")
SAME_SIZE = ("flip", "garbage")


def _check(world, name, target, how, a, b, fill):
    root, built, worker = world
    path, chunks, meta = built[name]
    checksummed = CHAINS[name][3]
    # Bytes cut from the middle of a shard leave its index intact but shift the chunks; a
    # reader fetching byte ranges then gets chunks of the right length with other content,
    # which only a checksum in the inner chain can tell.
    undetectable = () if checksummed else SAME_SIZE + (("cut-middle",) if "sharded" in name
                                                       else ())
    work = tempfile.mkdtemp(dir=root)
    try:
        copy = os.path.join(work, "a")
        shutil.copytree(path, copy)
        rel = chunks[a % len(chunks)] if target == "chunk" else meta[0]
        f = os.path.join(copy, rel)
        with open(f, "rb") as fh:
            data = fh.read()
        new = _mutate(data, how, a, b, fill)
        if new == data:
            return
        with open(f, "wb") as fh:
            fh.write(new)
        res = worker.ask({"path": copy, "expect": os.path.join(root, name + ".npy"),
                          "probe": a % N})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    key = rel.replace(os.sep, "/")
    where = f"{name}: {how} of {key!r} (a={a}, b={b}, fill={fill!r})"
    if "error" in res:
        assert res["chunkstore"], f"{where}: foreign exception\n{res['tb']}"
        if target == "chunk":
            assert key in res["message"], f"{where}: error does not name the key: {res}"
        return
    if target == "meta":
        return  # a valid edited document may mean other values (another dtype, shape)
    if how not in undetectable:
        assert res["same"], f"{where}: returned other values without an error"


@pytest.mark.parametrize("name", sorted(CHAINS))
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(how=st.sampled_from(SIZE_CHANGES + SAME_SIZE), a=st.integers(0, 10**6),
       b=st.integers(0, 255), fill=st.binary(min_size=1, max_size=24))
def test_fuzz_chunk_bytes(world, name, how, a, b, fill):
    _check(world, name, "chunk", how, a, b, fill)


@pytest.mark.parametrize("name", ["v2-blosc-lz4", "v2-vlen-utf8-blosc", "v2-delta-blosc",
                                  "v3-zstd-crc32c", "v3-sharded-blosc", "v3-string-zstd"])
@settings(max_examples=2 * EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(how=st.sampled_from(SIZE_CHANGES + SAME_SIZE + ("json-edit",) * 3),
       a=st.integers(0, 10**6), b=st.integers(0, 255), fill=st.binary(min_size=1, max_size=24))
def test_fuzz_metadata_bytes(world, name, how, a, b, fill):
    _check(world, name, "meta", how, a, b, fill)
