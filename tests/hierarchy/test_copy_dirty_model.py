"""Model-based test of copies into destinations that start dirty.

A hypothesis RuleBasedStateMachine draws a source hierarchy once (Zarr v2, v3, or v3 with
sharded arrays: arrays ``a``, ``b`` and ``g/c`` of random dtype, shape, chunks, fill value,
some chunks never written) and a destination directory store whose root group is of the
source's format or the other. Rules dirty the destination at a path where nothing is:
``plant`` puts there an older array (another shape, dtype, chunk grid, shards, format; every
chunk stored) or only its chunks (a delete that failed after the documents went). The copy
rules then copy into it: ``copy_store`` (raw keys, same format), ``copy`` (of an array or
the group, raw or with ``chunks=``), ``copy_all`` and ``chunkstore cp`` (raw, or
``--chunks``), with each ``if_exists``.

Oracle (README "Differences from zarr-python": a copy reads exactly as its source, or is
refused before anything is written): the model predicts for each copied node whether the
copy raises (CopyError where a node is there and if_exists="raise", StrayChunksError where
keys of no node lie at an array's path and it does not replace), skips (the old node stays
whole) or writes (the node reads the source's values); after each step every array of the
model reads exactly its values (NumPy's), and a copy that raised left every key of the
destination as it was, byte for byte. A RecodeError (options the layout cannot take, e.g.
chunks that do not divide a source's shards) is accepted where the store is unchanged.

CI cost: 15 programs of up to 10 steps per source format (a few seconds each). Soak:
``CHUNKSTORE_SOAK=<seconds>`` (see tests/model_support.py) runs more, longer programs.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import chunkstore as cs
from chunkstore.cli import main as cli_main
from chunkstore.errors import StrayChunksError
from chunkstore.recode import RecodeError
from model_support import grid, model_settings, run_machine, under

CI_SETTINGS = model_settings(15, 10)
SOAK_SETTINGS = model_settings(50, 20)
FORMATS = ["v2", "v3", "v3-sharded"]
DTYPES = ["|u1", "<i2", "<i4", "<f8"]
SOURCE = ["a", "b", "g", "g/c"]
DEST = ["x", "a", "b", "g", "g/c", "y/z"]    # where copies and dirt go
DOCS = (".zarray", ".zgroup", ".zattrs", "zarr.json")
CHUNK_NAME = re.compile(r"c([./]\d+)*|\d+([./]\d+)*")  # v2's "0.1", "0/1"; v3's "c/0/1"


def snapshot(path: str) -> dict:
    s = cs.DirectoryStore(path)
    return {k: bytes(s[k]) for k in s.keys()}


def make_array(store, path, fmt, sharded, draw, rng, full=False):
    """An array at path drawn by draw (a hypothesis draw), values by rng; full: every chunk
    stored (no element equals the fill value). Returns its values."""
    ndim = draw(st.integers(1, 2))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    fill = draw(st.sampled_from([0, 5]))
    kw = dict(shape=shape, chunks=chunks, dtype=dtype, fill_value=fill, zarr_format=fmt)
    if fmt == 2:
        kw["dimension_separator"] = draw(st.sampled_from("./"))
    shards = None
    if sharded and draw(st.booleans()):
        shards = tuple(c * draw(st.integers(1, 2)) for c in chunks)
        kw["shards"] = shards
    z = cs.create(store=store, path=path, **kw)
    data = np.full(shape, fill, dtype=dtype)
    step = shards or chunks
    for coords in np.ndindex(*grid(shape, step)):
        if not full and draw(st.booleans()):
            continue  # never written: reads the fill value
        reg = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(coords, step, shape))
        vals = rng.integers(6, 100, size=tuple(r.stop - r.start for r in reg)).astype(dtype)
        z[reg] = vals
        data[reg] = vals
    return data


def run_cli(*args) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main([str(a) for a in args])
    return rc, out.getvalue() + err.getvalue()


class Refused(Exception):
    """The model's prediction: the copy raises this (a CopyError or StrayChunksError)."""

    def __init__(self, kind):
        super().__init__(kind.__name__)
        self.kind = kind


class DirtyCopyMachine(RuleBasedStateMachine):
    formats = FORMATS

    def __init__(self):
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="cs-dirty-copy-")
        self.ready = False
        self.log: list[str] = []

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def where(self) -> str:
        return "steps: " + " | ".join(self.log)

    @initialize(data=st.data())
    def setup(self, data):
        fmt = data.draw(st.sampled_from(self.formats), label="source format")
        self.sfmt, self.sharded = (2, False) if fmt == "v2" else (3, fmt == "v3-sharded")
        self.dfmt = data.draw(st.sampled_from([self.sfmt, 5 - self.sfmt]), label="dest format")
        self.rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
        self.src_path = os.path.join(self.tmp, "src.zarr")
        self.dst_path = os.path.join(self.tmp, "dst.zarr")
        src = cs.DirectoryStore(self.src_path)
        root = cs.group(store=src, zarr_format=self.sfmt)
        root.create_group("g")
        self.src: dict = {"g": None}   # path -> values (None: a group)
        for p in ("a", "b", "g/c"):
            self.src[p] = make_array(src, p, self.sfmt, self.sharded, data.draw, self.rng)
        cs.group(store=cs.DirectoryStore(self.dst_path), zarr_format=self.dfmt)
        self.dst: dict = {}            # path -> values (None: a group); the root not listed
        self.strays: set = set()       # paths where keys of no node lie
        self.ready = True

    # ------------------------------------------------------------------ the dirt
    def free(self, p: str) -> bool:
        """Nothing at or below p in the model, no array above it."""
        return not any(under(q, p) for q in self.dst) and not any(
            under(p, q) or under(q, p) for q in self.strays) and not any(
            self.dst.get(a, None) is not None for a in self.ancestors(p))

    def blocked(self, dp: str) -> bool:
        """Whether dp lies below an array, or below leftovers with no node: keys of a node
        made there could be that array's chunks, and leftover chunks inside a node's
        path count as that node's (stray_chunk_keys), so the model could not tell (README:
        a node below an array path is not looked at)."""
        return any(self.dst.get(a, None) is not None or (a in self.strays and a not in self.dst)
                   for a in self.ancestors(dp))

    @staticmethod
    def ancestors(p: str) -> list[str]:
        parts = p.split("/")
        return ["/".join(parts[:i]) for i in range(1, len(parts))]

    @rule(data=st.data())
    def plant(self, data):
        p = data.draw(st.sampled_from(DEST), label="path")
        if not self.free(p):
            return
        fmt = data.draw(st.sampled_from([self.dfmt, 5 - self.dfmt]), label="its format")
        leftover = data.draw(st.booleans(), label="leftover chunks only")
        if not leftover and (fmt != self.dfmt or any(
                self.dst.get(a, 0) is not None for a in self.ancestors(p))):
            return  # (a node only where the destination's groups can hold it)
        scratch = cs.MemoryStore()
        values = make_array(scratch, p, fmt, fmt == 3, data.draw, self.rng, full=True)
        dst = cs.DirectoryStore(self.dst_path)
        for k in scratch.keys():
            if leftover and k.rsplit("/", 1)[-1] in DOCS:
                continue   # the documents went first: a failed delete's leftovers
            dst[k] = scratch[k]
            if leftover:
                self.stray(k)
        self.log.append(f"plant {'leftovers' if leftover else 'older array'} v{fmt} at {p}")
        if not leftover:
            self.dst[p] = values

    plant_more = plant   # (dirt as often as copies)

    def stray(self, key: str) -> None:
        """key is left with no node: every path where it is named as a chunk of some
        encoding holds leftovers (an array made there could read it: "g/c/0" is chunk 0 of
        a v3 array at g, and of a v2 array at g/c)."""
        parts = key.split("/")
        for i in range(1, len(parts)):
            if CHUNK_NAME.fullmatch("/".join(parts[i:])):
                self.strays.add("/".join(parts[:i]))

    @precondition(lambda self: self.ready and any(v is not None for v in self.dst.values()))
    @rule(data=st.data())
    def failed_delete(self, data):
        """An array's documents deleted, its chunks not (a delete failing midway)."""
        p = data.draw(st.sampled_from(sorted(q for q, v in self.dst.items() if v is not None)),
                      label="array")
        dst = cs.DirectoryStore(self.dst_path)
        pre = p + "/"
        keys = [k for k in dst.keys() if k.startswith(pre)]
        if any(k.rsplit("/", 1)[0] != p and k.rsplit("/", 1)[-1] in DOCS for k in keys):
            return  # (a node below it: not a plain array's keys)
        for k in keys:
            if k.rsplit("/", 1)[-1] in DOCS:
                del dst[k]
            else:
                self.stray(k)
        del self.dst[p]
        self.log.append(f"failed delete of {p}")

    # ------------------------------------------------------------------ the prediction
    def members(self, sp: str) -> list[str]:
        return sorted(q for q in self.src if under(q, sp))

    @staticmethod
    def predict_array(new, strays, p, values, mode):
        """The copy of an array to p into the model (new, strays) with if_exists mode; a
        Refused raised where it must raise."""
        there = p in new
        if there:
            if mode == "raise":
                raise Refused(cs.CopyError)
            if mode == "skip":
                return
            for q in [q for q in new if under(q, p)]:
                del new[q]
            strays.difference_update({q for q in strays if under(q, p)})
        elif p in strays:
            if mode != "replace":
                raise Refused(StrayChunksError)
            strays.difference_update({q for q in strays if under(q, p)})
        new[p] = values

    def predict(self, sp, dp, mode, api):
        """(new model, new strays) after copying source sp to dp; Refused if it raises.
        api: "copy_store", "copy" (copy/copy_all) or "cp"."""
        new, strays = dict(self.dst), set(self.strays)
        skipped: list[str] = []
        written: list[str] = []   # nodes the copy writes (not those it skips or merges into)
        for q in self.members(sp):
            p = dp + q[len(sp):]
            if any(under(p, s) for s in skipped):
                continue
            values = self.src[q]
            m = mode
            if m == "skip_initialized":
                if p in new and values is not None and new[p] is None:
                    # an array onto a group: refused (it decides by an existing array's
                    # chunks), in the plan before anything is written
                    raise Refused(cs.CopyError)
                m = "skip" if p in new and new[p] is not None and self.complete(p) else \
                    ("replace" if p in new else "raise")
            if values is not None:
                if m == "skip" and p in new:
                    skipped.append(p)
                    continue
                self.predict_array(new, strays, p, values, m)
                written.append(p)
                continue
            # a group
            if p in new and new[p] is None:   # a group there: merged into
                if m == "raise" and api in ("copy_store", "cp"):
                    raise Refused(cs.CopyError)  # (its document is there; cp: a node)
                continue
            if p in new:  # an array where the group goes
                if m == "raise":
                    raise Refused(cs.CopyError)
                if m == "skip":
                    skipped.append(p)
                    continue
                for r in [r for r in new if under(r, p)]:
                    del new[r]
                strays.difference_update({r for r in strays if under(r, p)})
            new[p] = None
            written.append(p)
        if api == "cp":
            # (cp makes the groups above each node it writes, members of a group it merges
            # into too: a v2 group with no document above them gets one; none above a node
            # it skips or merges into without writing below)
            for w in written:
                for a in self.ancestors(w):
                    new.setdefault(a, None)
        return new, strays

    def chunk_space_taken(self, sp, dp):
        """Whether an array copied from sp to dp (or below it) goes where a node of the
        destination lies among its chunk keys (an array at g, a node at g/c)."""
        for q in self.members(sp):
            p = dp + q[len(sp):]
            if self.src[q] is not None and any(
                    under(r, p) and r != p and CHUNK_NAME.fullmatch(r[len(p) + 1:])
                    for r in self.dst):
                return True
        return False

    def complete(self, p):
        a = cs.open_array(self.dst_path, path=p, mode="r")
        return a.nchunks_initialized == a.nchunks

    def run(self, fn, sp, dp, mode, api, what, recoding=False):
        self.log.append(what)
        try:
            new, strays = self.predict(sp, dp, mode, api)
            want = None
        except Refused as r:
            want = r.kind
        before = snapshot(self.dst_path)
        try:
            fn()
        except cs.errors.ContainsGroupError as e:
            # an array copied (raw or recoded) where a node lies among its chunk keys is
            # refused, as creation refuses it (README): nothing written
            assert snapshot(self.dst_path) == before, (f"{what} raised {e!r} and changed the "
                                                       f"destination", self.where())
            assert self.chunk_space_taken(sp, dp), (f"{what} raised {e!r}", self.where())
            return
        except (cs.CopyError, StrayChunksError, RecodeError) as e:
            assert snapshot(self.dst_path) == before, (f"{what} raised {e!r} and changed the "
                                                       f"destination", self.where())
            if isinstance(e, RecodeError) and recoding:
                return
            assert want is not None and isinstance(e, want), (
                f"{what} raised {e!r}, expected {want}", self.where())
            return
        assert want is None, (f"{what} did not raise {want.__name__}", self.where())
        self.dst, self.strays = new, strays

    # ------------------------------------------------------------------ the copies
    @precondition(lambda self: self.ready and self.sfmt == self.dfmt)
    @rule(sp=st.sampled_from(SOURCE), dp=st.sampled_from(DEST),
          mode=st.sampled_from(["raise", "replace", "skip"]))
    def copy_store(self, sp, dp, mode):
        if self.blocked(dp):
            return
        self.run(lambda: cs.copy_store(self.src_path, self.dst_path, source_path=sp,
                                       dest_path=dp, if_exists=mode),
                 sp, dp, mode, "copy_store", f"copy_store {sp} -> {dp} {mode}")

    @precondition(lambda self: self.ready)
    @rule(sp=st.sampled_from(["a", "b", "g"]), name=st.sampled_from(["x", "a", "g", "b"]),
          mode=st.sampled_from(["raise", "replace", "skip", "skip_initialized"]),
          chunks=st.sampled_from([None, 1, 2]))
    def copy(self, sp, name, mode, chunks):
        kws = {} if chunks is None else {"chunks": chunks}
        if sp == "g":
            kws = {}   # (a group's members have their own dimensions)
        elif chunks is not None:
            kws = {"chunks": (chunks,) * self.src[sp].ndim}

        def go():
            dest = cs.open_group(self.dst_path, mode="r+")
            cs.copy(cs.open(self.src_path, mode="r", path=sp), dest, name, if_exists=mode,
                    **kws)
        self.run(go, sp, name, mode, "copy", f"copy {sp} -> {name} {mode} {kws}",
                 recoding=bool(kws) or self.sfmt != self.dfmt)

    @precondition(lambda self: self.ready)
    @rule(mode=st.sampled_from(["raise", "replace", "skip", "skip_initialized"]),
          now=st.integers(0, 2))
    def copy_all(self, mode, now):
        if now:
            return  # (hypothesis favours this rule of few draws: a third as often)
        def go():
            cs.copy_all(cs.open_group(self.src_path, mode="r"),
                        cs.open_group(self.dst_path, mode="r+"), if_exists=mode)

        self.log.append(f"copy_all {mode}")
        try:
            new, strays = dict(self.dst), set(self.strays)
            saved = self.dst, self.strays
            for name in ("a", "b", "g"):
                new, strays = self.predict(name, name, mode, "copy")
                self.dst, self.strays = new, strays
            want = None
        except Refused as r:
            want = r.kind
        finally:
            self.dst, self.strays = saved
        before = snapshot(self.dst_path)
        try:
            go()
        except (cs.CopyError, StrayChunksError, RecodeError) as e:
            assert snapshot(self.dst_path) == before, (f"copy_all raised {e!r} and changed "
                                                       f"the destination", self.where())
            if isinstance(e, RecodeError) and self.sfmt != self.dfmt:
                return
            assert want is not None and isinstance(e, want), (e, want, self.where())
            return
        assert want is None, (f"copy_all did not raise {want.__name__}", self.where())
        self.dst, self.strays = new, strays

    @precondition(lambda self: self.ready)
    @rule(sp=st.sampled_from(SOURCE), dp=st.sampled_from(DEST),
          mode=st.sampled_from(["raise", "replace", "skip"]), chunks=st.booleans())
    def cp(self, sp, dp, mode, chunks):
        if self.blocked(dp):
            return
        opts = ["--chunks", "2"] if chunks else []

        def go():
            rc, text = run_cli("cp", self.src_path, self.dst_path, "--src-path", sp,
                               "--dst-path", dp, "--if-exists", mode, "--no-progress", *opts)
            if rc:
                if "of no node" in text:
                    raise StrayChunksError(text)
                if "already holds" in text or "already exists" in text:
                    raise cs.CopyError(text)
                if "among the array's chunk keys" in text:
                    raise cs.errors.ContainsGroupError(text)
                raise RecodeError(text)
        self.run(go, sp, dp, mode, "cp", f"cp {sp} -> {dp} {mode} {opts}",
                 recoding=chunks or self.sfmt != self.dfmt)

    # ------------------------------------------------------------------ the oracle
    @invariant()
    def every_array_reads_its_values(self):
        if not self.ready:
            return
        for p, values in self.dst.items():
            if values is None:
                cs.open_group(self.dst_path, mode="r", path=p)
                continue
            got = cs.open_array(self.dst_path, path=p, mode="r")[...]
            assert got.shape == values.shape and np.array_equal(got, values), (
                f"{p} reads {got.tolist()}, not {values.tolist()}", self.where())


@pytest.mark.parametrize("fmt", FORMATS)
def test_copy_into_dirty_destinations(fmt):
    """One source format per test; soak: until CHUNKSTORE_SOAK's share is spent."""
    machine = type(f"DirtyCopy_{fmt.replace('-', '_')}", (DirtyCopyMachine,),
                   {"formats": [fmt]})
    run_machine(machine, CI_SETTINGS, SOAK_SETTINGS, len(FORMATS))
