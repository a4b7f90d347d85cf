"""Model-based interoperability test: chunkstore and zarr-python 3 take turns on one array.

A hypothesis RuleBasedStateMachine draws, once per run, an array layout and creates it with
either library in a local directory (dtypes: bool, integers and floats of both byte orders,
complex, fixed-width bytes and unicode, datetime64 and timedelta64, which Zarr v3 holds as
zarr-python 3.1's extension data types): Zarr v2 (compressor none / zstd / blosc with each
shuffle / gzip, a Delta filter on integers, order C or F, "." or "/" key separator), Zarr v3
(``bytes`` of either endian, a ``transpose`` of the axes, compressors none / zstd with and
without checksum / gzip / blosc / crc32c after one of them) or sharded Zarr v3 (the same,
shards of whole chunks, the index at the start or the end, with or without its crc32c), a
dtype, a fill value, write_empty_chunks, a shape of 1-3 dimensions of 1-9 with chunks of 1-4.

Then it runs random steps, each through a fresh handle of the library drawn for it, with a
NumPy array as the model:

- writes of basic selections, orthogonal selections (``oindex``; distinct indices, as
  the meaning of a repeated index differs between the libraries; by chunkstore alone into
  sharded arrays of 2+ dimensions, which zarr-python 3.1 cannot write), coordinate
  selections (``vindex``, distinct points) and block selections, with full or scalar values;
- reads of the same kinds, compared with the model;
- resizes by chunkstore (grow and shrink: chunkstore clears what a shrink cuts off) and
  grows by zarr-python (zarr's shrink leaves old values in the edge chunks, so a later grow
  would bring them back: zarr's behaviour, not tested here).

Invariants after every step: both libraries read the whole array as the model, and with
write_empty_chunks=False neither library left a stored chunk (or, sharded, a shard) that
holds only the fill value.

What this finds that the one-library tests do not: bytes that one library writes and the
other reads differently where codecs, sharding and partial edge chunks combine, and updates
of a chunk (or an inner chunk of a shard) the other library wrote.

CI cost: 30 programs of up to 20 steps per format; ``CHUNKSTORE_SOAK=<seconds>`` soaks
(see model_support).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings

import numcodecs
import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import chunkstore as cs
import chunkstore.codecs as csc
from model_support import (assert_exact, draw_basic, draw_ortho, grid, is_fill,
                           model_settings, ortho_ix, random_values, run_machine)

zarr = pytest.importorskip("zarr")
zc = pytest.importorskip("zarr.codecs")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning",
                                        "ignore::RuntimeWarning")

CI_SETTINGS = model_settings(30, 20)
SOAK_SETTINGS = model_settings(150, 40)

FORMATS = ["v2", "v3", "v3-sharded"]
DTYPES = {"|b1": [False, True], "|u1": [0, 9], "<i2": [0, -7], ">i4": [0, 3],
          "<i8": [0, 2**40], "<f4": [0.0, np.nan, 1.5], ">f8": [0.0, -2.25],
          "<c8": [0, complex(1, -1)],
          # zarr-python 3.1's extension data types in v3 (null_terminated_bytes,
          # fixed_length_utf32, numpy.datetime64, numpy.timedelta64); plain v2 dtypes there
          "|S3": [b"", b"ab"], "<U2": ["", "q"], "<M8[s]": [np.datetime64("NaT", "s"),
                                                        np.datetime64(0, "s")],
          "<m8[ms]": [np.timedelta64("NaT", "ms"), np.timedelta64(5, "ms")]}
LIBS = ["cs", "zarr"]


# ------------------------------------------------------------------ the layout, both ways
def v3_compressors(lib, kind, dtype):
    """The bytes -> bytes codecs of a v3 layout, as lib's codec objects."""
    m = csc if lib == "cs" else zc
    items = {"none": [], "zstd": [m.ZstdCodec(level=1)],
             "zstd-checksum": [m.ZstdCodec(level=3, checksum=True)],
             "gzip": [m.GzipCodec(level=1)],
             "blosc": [m.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle",
                                    typesize=np.dtype(dtype).itemsize)],
             "zstd+crc32c": [m.ZstdCodec(level=1), m.Crc32cCodec()],
             "crc32c": [m.Crc32cCodec()]}
    return items[kind]


def v2_compressor(kind):
    """A v2 compressor (numcodecs objects both libraries take)."""
    return {"none": None, "zstd": numcodecs.Zstd(level=1), "gzip": numcodecs.GZip(level=1),
            "blosc-noshuffle": numcodecs.Blosc(cname="zstd", clevel=3, shuffle=0),
            "blosc-shuffle": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1),
            "blosc-bitshuffle": numcodecs.Blosc(cname="blosclz", clevel=5, shuffle=2)}[kind]


def create(lib, path, lay):
    """Create the array of layout lay at path with lib (its zarr-python 3 style
    create_array; chunkstore takes the same arguments)."""
    m = cs if lib == "cs" else zarr
    kw = dict(shape=lay["shape"], chunks=lay["chunks"], dtype=lay["dtype"],
              fill_value=lay["fill"], config={"write_empty_chunks": lay["wec"]})
    if lay["fmt"] == "v2":
        kw.update(zarr_format=2, order=lay["order"],
                  compressors=v2_compressor(lay["compressor"]),
                  filters=[numcodecs.Delta(dtype=lay["dtype"])] if lay["delta"] else None,
                  chunk_key_encoding={"name": "v2", "separator": lay["sep"]})
    else:
        codecs = csc if lib == "cs" else zc
        kw.update(zarr_format=3,
                  serializer=codecs.BytesCodec(endian=lay["endian"]),
                  compressors=v3_compressors(lib, lay["compressor"], lay["dtype"]),
                  filters=([codecs.TransposeCodec(order=lay["transpose"])]
                           if lay["transpose"] else None))
        if lay["shards"] is not None:
            kw["shards"] = {"shape": lay["shards"], "index_location": lay["index"]}
    m.create_array(path, **kw)


def open_handle(lib, path):
    """A fresh handle of lib on the array at path."""
    if lib == "cs":
        return cs.open_array(path, mode="r+")
    return zarr.open_array(path, mode="r+")


# ------------------------------------------------------------------------ the machine
class InteropMachine(RuleBasedStateMachine):
    """chunkstore and zarr-python 3 writing, reading and resizing one array in turn."""

    fmt = "v2"

    def __init__(self):
        super().__init__()
        self.ready = False
        self.tmp = tempfile.mkdtemp(prefix="cs-interop-")
        self.path = os.path.join(self.tmp, "a.zarr")
        self.rng = np.random.default_rng(0)

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize(data=st.data())
    def setup(self, data):
        draw = data.draw
        fmt = self.fmt
        key = draw(st.sampled_from(list(DTYPES)))
        # Zarr v3 says the byte order in the bytes codec, not the dtype
        dtype = key.replace(">", "<") if fmt != "v2" else key
        ndim = draw(st.integers(1, 3))
        shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
        chunks = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
        lay = dict(fmt=fmt, dtype=dtype, shape=shape, chunks=chunks, shards=None,
                   fill=draw(st.sampled_from(DTYPES[key])),
                   wec=draw(st.booleans()))
        if fmt == "v2":
            lay.update(order=draw(st.sampled_from(["C", "F"])),
                       compressor=draw(st.sampled_from(["none", "zstd", "gzip",
                                                        "blosc-noshuffle", "blosc-shuffle",
                                                        "blosc-bitshuffle"])),
                       delta=np.dtype(dtype).kind in "iu" and draw(st.booleans()),
                       sep=draw(st.sampled_from([".", "/"])))
        else:
            perm = None
            if ndim > 1 and draw(st.booleans()):
                perm = tuple(draw(st.permutations(range(ndim))))
            lay.update(endian=draw(st.sampled_from(["little", "big"])), transpose=perm,
                       compressor=draw(st.sampled_from(["none", "zstd", "zstd-checksum",
                                                        "gzip", "blosc", "zstd+crc32c",
                                                        "crc32c"])),
                       shards=None)
            if fmt == "v3-sharded":
                lay["shards"] = tuple(c * draw(st.integers(1, 3)) for c in chunks)
                lay["index"] = draw(st.sampled_from(["start", "end"]))
        self.lay = lay
        self.creator = draw(st.sampled_from(LIBS))
        create(self.creator, self.path, lay)
        self.fill = np.array(lay["fill"], dtype=dtype)
        self.model = np.full(shape, lay["fill"], dtype=dtype)
        self.log(f"layout {lay} created by {self.creator}")
        self.ready = True

    def log(self, msg):
        # printed with the failing program (hypothesis shows stdout of the last run)
        print(msg)

    # ---------------------------------------------------------------- steps
    @property
    def shape(self):
        return self.model.shape

    def values_for(self, data, shape):
        if data.draw(st.integers(0, 3)) == 0:
            return self.model.dtype.type(random_values(self.rng, self.model.dtype, ())[()])
        return random_values(self.rng, self.model.dtype, shape)

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), lib=st.sampled_from(LIBS))
    def write_basic(self, data, lib):
        sel = draw_basic(data.draw, self.shape, reverse=False)
        target = self.model[sel].shape
        value = self.values_for(data, target)
        self.log(f"{lib}: a[{sel}] = {value!r}")
        open_handle(lib, self.path)[sel] = value
        self.model[sel] = value

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), lib=st.sampled_from(LIBS))
    def write_oindex(self, data, lib):
        if lib == "zarr" and self.lay["shards"] and len(self.shape) > 1:
            # zarr-python 3.1 cannot write index arrays into a sharded array of 2+
            # dimensions (ValueError "shape mismatch": its issue #2816)
            lib = "cs"
        sel = draw_ortho(data.draw, self.shape, unique=True, reverse=False)
        ix, drop = ortho_ix(sel, self.shape)
        target = np.empty(self.shape, bool)[ix].shape
        squeezed = tuple(n for d, n in enumerate(target) if d not in drop)
        value = self.values_for(data, squeezed)
        self.log(f"{lib}: a.oindex[{sel}] = {value!r}")
        open_handle(lib, self.path).oindex[sel] = value
        self.model[ix] = np.reshape(value, target) if np.ndim(value) else value

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), lib=st.sampled_from(LIBS))
    def write_vindex(self, data, lib):
        n = data.draw(st.integers(1, 6))
        pts = {tuple(data.draw(st.integers(0, s - 1)) for s in self.shape) for _ in range(n)}
        coords = tuple(np.array(c, dtype=np.int64) for c in zip(*sorted(pts)))
        value = self.values_for(data, (len(pts),))
        self.log(f"{lib}: a.vindex[{coords}] = {value!r}")
        open_handle(lib, self.path).vindex[coords] = value
        self.model[coords] = value

    def draw_block(self, data, lib):
        """A block position and its region. chunkstore's blocks are chunks (inner chunks
        when sharded); zarr-python 3.1's are shards where there are shards (its issue
        #2971; README "Differences from zarr-python")."""
        unit = self.lay["shards"] if lib == "zarr" and self.lay["shards"] else self.lay["chunks"]
        block = tuple(data.draw(st.integers(0, n - 1)) for n in grid(self.shape, unit))
        return block, tuple(slice(b * c, min((b + 1) * c, s))
                            for b, c, s in zip(block, unit, self.shape))

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), lib=st.sampled_from(LIBS))
    def write_block(self, data, lib):
        block, sl = self.draw_block(data, lib)
        value = self.values_for(data, self.model[sl].shape)
        self.log(f"{lib}: a.blocks[{block}] = {value!r}")
        open_handle(lib, self.path).blocks[block] = value
        self.model[sl] = value

    def check(self, lib, got, want, what):
        """got is want: exactly from chunkstore; from zarr-python a 0-d result as a value
        (its int-indexed reads return 0-d arrays of the array's dtype, big-endian or
        "S3", where NumPy gives a native scalar, whose dtype is "S2" for b"ab")."""
        got, wanted = np.asarray(got), np.asarray(want)
        if lib == "zarr" and got.shape == () and got.dtype.kind == wanted.dtype.kind:
            got = got.astype(wanted.dtype)
        assert_exact(got, want, f"{lib} {what}")

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), lib=st.sampled_from(LIBS))
    def read(self, data, lib):
        a = open_handle(lib, self.path)
        kind = data.draw(st.sampled_from(["basic", "oindex", "vindex", "block"]))
        if kind == "basic":
            sel = draw_basic(data.draw, self.shape, reverse=False)
            self.check(lib, a[sel], self.model[sel], f"a[{sel}]")
        elif kind == "oindex":
            sel = draw_ortho(data.draw, self.shape, reverse=False)
            ix, drop = ortho_ix(sel, self.shape)
            want = self.model[ix]
            want = want.reshape(tuple(n for d, n in enumerate(want.shape) if d not in drop))
            self.check(lib, a.oindex[sel], want, f"a.oindex[{sel}]")
        elif kind == "vindex":
            n = data.draw(st.integers(1, 6))
            coords = tuple(np.array([data.draw(st.integers(0, s - 1)) for _ in range(n)])
                           for s in self.shape)
            self.check(lib, a.vindex[coords], self.model[coords], f"a.vindex[{coords}]")
        else:
            block, sl = self.draw_block(data, lib)
            self.check(lib, a.blocks[block], self.model[sl], f"a.blocks[{block}]")

    def _resize_model(self, new):
        m = np.full(new, self.lay["fill"], dtype=self.model.dtype)
        keep = tuple(slice(0, min(a, b)) for a, b in zip(self.shape, new))
        m[keep] = self.model[keep]
        self.model = m

    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    def resize_cs(self, data):
        new = tuple(data.draw(st.integers(1, 10)) for _ in self.shape)
        self.log(f"cs: resize {new}")
        open_handle("cs", self.path).resize(new)
        self._resize_model(new)

    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    def grow_zarr(self, data):
        new = tuple(n + data.draw(st.integers(0, 3)) for n in self.shape)
        self.log(f"zarr: resize {new}")
        open_handle("zarr", self.path).resize(new)
        self._resize_model(new)

    # ---------------------------------------------------------------- invariants
    @invariant()
    def both_read_the_model(self):
        if not self.ready:
            return
        for lib in LIBS:
            self.check(lib, open_handle(lib, self.path)[...], self.model, "whole array")

    def chunk_key(self, idx):
        """The store key of the chunk (or shard) at grid position idx."""
        if self.lay["fmt"] == "v2":
            return self.lay["sep"].join(map(str, idx))
        return "/".join(["c", *map(str, idx)])

    @invariant()
    def no_fill_chunks_stored(self):
        if not self.ready or self.lay["wec"]:
            return
        outer = self.lay["shards"] or self.lay["chunks"]
        g = grid(self.shape, outer)
        for idx in np.ndindex(*g):
            sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, outer, self.shape))
            key = self.chunk_key(idx)
            stored = os.path.exists(os.path.join(self.path, key))
            if stored:
                assert not is_fill(self.model[sl], self.fill).all(), (
                    f"chunk {key} stored holding only the fill value")


@pytest.mark.parametrize("fmt", FORMATS)
def test_interop_model(fmt):
    """chunkstore and zarr-python 3 agree with the model on every layout drawn."""
    machine = type(f"Interop_{fmt}", (InteropMachine,), {"fmt": fmt})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_machine(machine, CI_SETTINGS, SOAK_SETTINGS, len(FORMATS))
