"""Model-based test of the less-travelled data types: chunkstore against a NumPy model, and
zarr-python 3 reading (and writing) the same array.

A hypothesis RuleBasedStateMachine draws, once per run, a data type (object arrays with
VLenUTF8 / VLenBytes / VLenArray / JSON / MsgPack in Zarr v2, ``string`` and
``variable_length_bytes`` in Zarr v3; fixed-width ``S``/``U`` of both byte orders;
datetime64/timedelta64 of both byte orders; bool, big-endian complex, float and int;
structured dtypes, one with a sub-array field), a format (v2, v3, sharded v3), a fill value
(null included), write_empty_chunks, order C/F, a compressor and a 0-3 dimensional shape
(zero-length dimensions included), then runs random steps: basic, orthogonal, coordinate,
mask and block writes and reads, reads into ``out=`` buffers, field reads and writes,
resize and append, views (``view()``, ``view(fill_value=)``), ``astype``, a new fill value,
reopening, and writes by zarr-python 3 where it writes these types correctly.

Invariants after every step: chunkstore (the handle and a fresh one) and zarr-python 3
(where it reads the type) read the whole array as the model.

Model conventions (codec behaviour, the same in zarr-python): VLenUTF8/VLenBytes/VLenArray
store None as ""/b""/an empty array, so those compare equal. Left out where zarr-python
3.1.6 itself is wrong: its reads of structured arrays with a null fill (it pads with
(0, b"0")) and of sharded structured arrays (an unhashable void scalar), its writes of vlen
chunks behind a ``transpose`` codec (stored in the untransposed order, which it then reads
back transposed), and its scalar writes to object arrays.

CI cost: 40 programs of up to 20 steps per format (about 6 s on a 2-core machine).
``CHUNKSTORE_SOAK=<seconds>`` soaks (see model_support).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings

import numcodecs
import numpy as np
import pytest
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import chunkstore as cs
from model_support import draw_basic, draw_ortho, grid, model_settings, ortho_ix, run_machine

zarr = pytest.importorskip("zarr")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning",
                                        "ignore::RuntimeWarning")

CI_SETTINGS = model_settings(40, 20)
SOAK_SETTINGS = model_settings(60, 30)
FORMATS = ["v2", "v3", "v3s"]

ST1 = np.dtype([("a", "<i2"), ("b", "S2")])
ST2 = np.dtype([("a", ">i2", (2,)), ("b", "<f4")])

# name -> (formats, pool, fills, zarr_readable(fmt))
D = {
    "str": (("v2", "v3", "v3s"), ["", "ab", "héllo", "q"], ["", "ab", None]),
    "bytes": (("v2", "v3", "v3s"), [b"", b"ab", b"\x00q"], [b"", None]),
    "array:i4": (("v2",), "arr", [None]),
    "json": (("v2",), ["", 1, [1, "x"], None, {"k": 2}], [None, "", "ab"]),
    "msgpack": (("v2",), ["", 1, [1, "x"], None], [None, "", "ab"]),
    "|S3": (("v2", "v3", "v3s"), [b"", b"ab", b"xyz"], [b"", b"ab", None]),
    "<U2": (("v2", "v3", "v3s"), ["", "q", "zz"], ["", "q", None]),
    ">U2": (("v2", "v3", "v3s"), ["", "q", "zz"], ["", "q"]),
    "<M8[s]": (("v2", "v3", "v3s"), ["NaT", 0, 1, -86400, 2**40], ["NaT", 0, 5, None]),
    ">M8[D]": (("v2", "v3", "v3s"), ["NaT", 0, 1, -3], ["NaT", 0, None]),
    "<m8[ms]": (("v2", "v3", "v3s"), ["NaT", 0, 7, -2], ["NaT", 0, 7, None]),
    "|b1": (("v2", "v3", "v3s"), [False, True], [False, True, None]),
    ">c16": (("v2", "v3", "v3s"), [0, 1j, complex(1, -1), complex(np.nan, 0)], [0, 1j, None]),
    ">f4": (("v2", "v3", "v3s"), [0.0, -0.0, 1.5, np.nan], [0.0, np.nan, -2.5, None]),
    ">i8": (("v2", "v3", "v3s"), [0, -1, 2**40], [0, -1, None]),
    "st1": (("v2", "v3", "v3s"), "st1", [None, "zero", "nz"]),
    "st2": (("v2",), "st2", [None, "zero"]),
}


def np_dtype(name):
    if name in ("str", "bytes", "array:i4", "json", "msgpack"):
        return np.dtype(object)
    return {"st1": ST1, "st2": ST2}.get(name) or np.dtype(name)


def pool_values(rng, name, shape):
    dt = np_dtype(name)
    pool = D[name][1]
    n = int(np.prod(shape))
    if pool == "arr":
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = np.arange(rng.integers(0, 3), dtype="i4") * int(rng.integers(-2, 3))
        return out.reshape(shape)
    if pool in ("st1", "st2"):
        out = np.zeros(n, dtype=dt)
        for i in range(n):
            k = int(rng.integers(0, 3))
            if k == 1:
                out[i] = (1, b"a") if pool == "st1" else ((1, -2), 1.5)
            elif k == 2:
                out[i] = (-5, b"zz") if pool == "st1" else ((7, 0), -0.0)
        return out.reshape(shape)
    if dt.kind == "O":
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = pool[int(rng.integers(0, len(pool)))]
        return out.reshape(shape)
    if dt.kind in "Mm":
        unit = np.datetime_data(dt)[0]
        vals = np.array([np.timedelta64(p, unit) for p in pool])
        if dt.kind == "M":
            vals = vals.view(f"M8[{unit}]")
        return vals[rng.integers(0, len(vals), n)].astype(dt).reshape(shape)
    return np.array(pool, dtype=dt)[rng.integers(0, len(pool), n)].reshape(shape)


def fill_scalar(name, f):
    dt = np_dtype(name)
    if f is None:
        return None
    if name == "st1":
        return np.array((0, b"") if f == "zero" else (3, b"q"), dtype=ST1)[()]
    if name == "st2":
        return np.zeros((), ST2)[()]
    if dt.kind in "Mm":
        unit = np.datetime_data(dt)[0]
        v = np.timedelta64("NaT", unit) if f == "NaT" else np.timedelta64(f, unit)
        return v.astype(dt) if dt.kind == "m" else np.array(v).view(f"M8[{unit}]").astype(dt)[()]
    return f


def model_fill(name, f):
    """What a missing chunk reads as."""
    dt = np_dtype(name)
    if f is None:
        if dt.kind == "O":
            return None
        if dt.kind in "Mm":
            return np.array("NaT", dtype=dt)[()]
        return np.zeros((), dt)[()]
    return fill_scalar(name, f)


def norm_obj(x, name):
    if name in ("str",) and x is None:
        x = ""
    if name == "bytes" and x is None:
        x = b""
    if name == "array:i4" and x is None:
        x = np.zeros(0, "i4")
    if isinstance(x, np.ndarray):
        return ("arr", x.dtype.str, x.tolist())
    if isinstance(x, tuple):
        return list(x)
    return (type(x).__name__, x)


def same(got, exp, name, what):
    if name in ("str", "bytes", "array:i4", "json", "msgpack"):
        def wrap(x):
            if isinstance(x, np.ndarray) and x.dtype == object:
                return x
            if isinstance(x, np.ndarray) and name != "array:i4":
                return x.astype(object)
            o = np.empty((), object); o[()] = x
            return o
        got, exp = wrap(got), wrap(exp)
    got = np.asarray(got)
    exp = np.asarray(exp)
    assert got.shape == exp.shape, (what, got.shape, exp.shape)
    if exp.dtype.kind == "O":
        g = [norm_obj(x, name) for x in got.ravel().tolist()] if got.dtype.kind == "O" else \
            [norm_obj(x, name) for x in got.astype(object).ravel().tolist()]
        e = [norm_obj(x, name) for x in exp.ravel().tolist()]
        assert g == e, (what, got.ravel().tolist(), exp.ravel().tolist())
        return
    if got.dtype != exp.dtype and exp.ndim == 0 and got.dtype.kind in "SU":
        got = got.astype(exp.dtype)
    if got.dtype != exp.dtype:
        # Zarr v3 reads come in native byte order (README)
        assert got.dtype.names or (got.dtype.newbyteorder("<")
                                   == exp.dtype.newbyteorder("<")), (what, got.dtype, exp.dtype)
        got = got.astype(exp.dtype)
    if np.ascontiguousarray(got).tobytes() != np.ascontiguousarray(exp).tobytes():
        if exp.dtype.kind in "fc" and np.array_equal(got, exp, equal_nan=True):
            return
        raise AssertionError((what, got.tolist(), exp.tolist()))


def zarr_readable(name, fmt):
    if name in ("json", "msgpack", "array:i4", "st2"):
        return False
    if name.startswith("st") and fmt == "v3s":
        return False  # zarr 3.1.6: unhashable void scalar in its sharding codec
    return True


class DtypeMachine(RuleBasedStateMachine):
    fmt_choice = "v2"

    @initialize(data=st.data())
    def setup(self, data):
        draw = data.draw
        self.fmt = self.fmt_choice
        self.name = draw(st.sampled_from(sorted(n for n in D if self.fmt in D[n][0])),
                         label="dtype")
        f = draw(st.sampled_from(D[self.name][2]), label="fill")
        if self.fmt != "v2" and f is None and np_dtype(self.name).kind == "O":
            f = D[self.name][2][0]
        self.wec = draw(st.booleans(), label="wec")
        self.order = draw(st.sampled_from("CF"), label="order")
        nd = draw(st.integers(0, 3), label="ndim")
        shape = tuple(draw(st.lists(st.integers(0, 6), min_size=nd, max_size=nd)))
        chunks = tuple(draw(st.integers(1, 3)) for _ in shape)
        self.rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        self.dir = tempfile.mkdtemp(prefix="cs-dtype-model-")
        self.path = os.path.join(self.dir, "a")
        self.dt = np_dtype(self.name)
        fs = fill_scalar(self.name, f)
        self.fill_desc = f
        self.mfill = model_fill(self.name, f)
        comp = draw(st.sampled_from(["none", "zstd", "blosc"]), label="comp")
        self.desc = (f"{self.name} {self.fmt} fill={f!r} wec={self.wec} order={self.order} "
                     f"shape={shape} chunks={chunks} comp={comp}")
        if self.fmt == "v2":
            kw = {}
            if self.dt.kind == "O":
                kw["object_codec"] = {"str": numcodecs.VLenUTF8(),
                                      "bytes": numcodecs.VLenBytes(),
                                      "array:i4": numcodecs.VLenArray("i4"),
                                      "json": numcodecs.JSON(),
                                      "msgpack": numcodecs.MsgPack()}[self.name]
            compressor = {"none": None, "zstd": numcodecs.Zstd(1),
                          "blosc": numcodecs.Blosc()}[comp]
            self.z = cs.create(shape, chunks=chunks, dtype=self.dt, fill_value=fs,
                               order=self.order, store=self.path,
                               write_empty_chunks=self.wec, compressor=compressor, **kw)
        else:
            shards = None
            if self.fmt == "v3s":
                shards = tuple(c * draw(st.integers(1, 2)) for c in chunks) if shape else None
            dt = {"str": str, "bytes": "bytes"}.get(self.name, self.dt)
            kw = {}
            if fs is not None:
                kw["fill_value"] = fs
            comps = {"none": None, "zstd": "zstd", "blosc": "blosc"}[comp]
            self.z = cs.create_array(self.path, shape=shape, chunks=chunks, shards=shards,
                                     dtype=dt,
                                     order=self.order, compressors=comps,
                                     config={"write_empty_chunks": self.wec}, **kw)
            self.desc += f" shards={shards}"
        self.model = np.empty(shape, dtype=self.dt)
        self.model[...] = np.full((), self.mfill, dtype=self.dt) if self.dt.kind != "O" else None
        if self.dt.kind == "O":
            self.model.fill(self.mfill)
        note(self.desc)

    def teardown(self):
        if hasattr(self, "dir"):
            shutil.rmtree(self.dir, ignore_errors=True)

    # -------------------------------------------------------------- values
    def values(self, sel_shape, data):
        if data.draw(st.integers(0, 3)) == 0 and self.dt.kind != "O":
            return pool_values(self.rng, self.name, ())[()]
        if data.draw(st.integers(0, 5)) == 0:
            return np.full(sel_shape, self.mfill, dtype=self.dt) if self.dt.kind != "O" else \
                np.array([self.mfill] * int(np.prod(sel_shape)) + [0],
                         dtype=object)[:-1].reshape(sel_shape)
        return pool_values(self.rng, self.name, sel_shape)

    def set_model(self, ix, v):
        if self.dt.kind != "O":
            self.model[ix] = v
            return
        ids = np.arange(self.model.size, dtype=np.int64).reshape(self.model.shape)[ix]
        if not isinstance(v, np.ndarray):
            vv = np.empty((), dtype=object); vv[()] = v; v = vv
        vb = np.broadcast_to(v, np.shape(ids))
        flat = self.model.reshape(-1)
        for i, x in zip(np.ravel(ids).tolist(), list(vb.ravel())):
            flat[i] = x

    # -------------------------------------------------------------- writes
    @rule(data=st.data())
    def write_basic(self, data):
        sel = draw_basic(data.draw, self.model.shape)
        try:
            sh = np.empty(self.model.shape, bool)[sel].shape
        except IndexError:
            return
        v = self.values(sh, data)
        note(repr(("write_basic", sel, repr(v)[:80])))
        self.z[sel] = v
        self.set_model(sel, v)

    @rule(data=st.data())
    def write_ortho(self, data):
        if not self.model.ndim:
            return
        sel = draw_ortho(data.draw, self.model.shape, unique=True)
        try:
            ix, drop = ortho_ix(sel, self.model.shape)
        except IndexError:
            return
        tgt = np.empty(self.model.shape, bool)[ix]
        sh = tuple(n for d, n in enumerate(tgt.shape) if d not in drop)
        v = self.values(sh, data)
        note(repr(("write_ortho", sel, repr(v)[:80])))
        self.z.oindex[sel] = v
        vv = np.asarray(v, dtype=self.dt) if not isinstance(v, np.ndarray) else v
        if vv.ndim:
            vv = vv.reshape(tgt.shape)
        self.set_model(ix, vv)

    @rule(data=st.data())
    def write_vindex(self, data):
        if not self.model.ndim or not self.model.size:
            return
        k = data.draw(st.integers(0, 5))
        pts = [np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k)),
                        dtype=np.int64)
               for n in self.model.shape]
        v = self.values((k,), data)
        note(repr(("write_vindex", pts, repr(v)[:80])))
        self.z.vindex[tuple(pts)] = v
        self.set_model(tuple(pts), v)

    @rule(data=st.data())
    def write_mask(self, data):
        if not self.model.ndim:
            return
        mask = self.rng.random(self.model.shape) < 0.3
        v = self.values((int(mask.sum()),), data)
        note(repr(("write_mask", mask.sum(), repr(v)[:80])))
        self.z.vindex[mask] = v
        self.set_model(mask, v)

    @rule(data=st.data())
    def write_block(self, data):
        if not self.model.ndim or not self.model.size:
            return
        g = grid(self.model.shape, self.z.chunks)
        bsel = tuple(data.draw(st.integers(0, n - 1)) for n in g)
        sel = tuple(slice(b * c, (b + 1) * c) for b, c in zip(bsel, self.z.chunks))
        v = self.values(np.empty(self.model.shape, bool)[sel].shape, data)
        note(repr(("write_block", bsel, repr(v)[:80])))
        self.z.set_block_selection(bsel, v)
        self.set_model(sel, v)

    @rule(data=st.data())
    def resize(self, data):
        if not self.model.ndim:
            return
        new = tuple(data.draw(st.integers(0, 7)) for _ in self.model.shape)
        note(repr(("resize", new)))
        self.z.resize(*new)
        m = np.empty(new, dtype=self.dt)
        if self.dt.kind == "O":
            m.fill(self.mfill)
        else:
            m[...] = self.mfill
        common = tuple(slice(0, min(a, b)) for a, b in zip(new, self.model.shape))
        m[common] = self.model[common]
        self.model = m

    @rule(data=st.data())
    def append(self, data):
        if not self.model.ndim:
            return
        ax = data.draw(st.integers(0, self.model.ndim - 1))
        sh = list(self.model.shape)
        sh[ax] = data.draw(st.integers(0, 3))
        v = pool_values(self.rng, self.name, tuple(sh))
        note(repr(("append", ax, sh)))
        self.z.append(v, axis=ax)
        self.model = np.concatenate([self.model, v], axis=ax)

    @precondition(lambda self: self.fmt != "v2" or True)
    @rule(data=st.data())
    def zarr_write(self, data):
        if not zarr_readable(self.name, self.fmt):
            return
        if self.fmt == "v3s" and self.model.ndim > 1:
            return
        sel = draw_basic(data.draw, self.model.shape, ellipsis=False, reverse=False)
        try:
            sh = np.empty(self.model.shape, bool)[sel].shape
        except IndexError:
            return
        if self.order == "F" and self.dt.kind == "O" and self.model.ndim > 1:
            return  # zarr 3.1.6 encodes vlen chunks behind a transpose in the untransposed order
        if self.name.startswith("st") and self.fill_desc is None:
            return  # zarr 3.1.6 pads with (0, b'0') for a null structured fill
        if sh == () and self.dt.kind == "O":
            return  # zarr 3.1.6 fails on scalar object writes
        v = pool_values(self.rng, self.name, sh)
        note(repr(("zarr_write", sel, repr(v)[:80])))
        za = zarr.open_array(self.path, mode="r+", config={"write_empty_chunks": self.wec})
        if self.name == "str":
            vv = v.astype(za.dtype) if za.dtype != object else v
        else:
            vv = v
        if isinstance(vv, np.ndarray) and vv.ndim == 0:
            vv = vv[()]
        za[sel] = vv
        self.set_model(sel, v)

    def stored_chunks(self):
        """chunk coords stored (v2 / unsharded v3 only)."""
        out = set()
        for root, _, files in os.walk(self.path):
            for f in files:
                rel = os.path.relpath(os.path.join(root, f), self.path)
                if rel in (".zarray", ".zattrs", "zarr.json"):
                    continue
                if self.fmt == "v2":
                    parts = rel.split(".")
                else:
                    parts = rel.split(os.sep)[1:]
                out.add(tuple(int(p) for p in parts) if self.model.ndim else ())
        return out

    def missing_mask(self):
        st_ = self.stored_chunks()
        m = np.ones(self.model.shape, bool)
        for c in st_:
            sl = tuple(slice(i * k, (i + 1) * k) for i, k in zip(c, self.z.chunks))
            m[sl] = False
        return m

    @precondition(lambda self: self.fmt != "v3s" and self.dt.kind != "O")
    @rule(data=st.data())
    def view_fill(self, data):
        newf = pool_values(self.rng, self.name, ())[()]
        miss = self.missing_mask()
        exp = self.model.copy()
        exp[miss] = newf
        note(repr(("view_fill", repr(newf))))
        same(self.z.view(fill_value=newf)[...], exp, self.name, "view fill")

    @precondition(lambda self: self.fmt != "v3s")
    @rule(data=st.data())
    def set_fill(self, data):
        if self.dt.kind == "O":
            newf = pool_values(self.rng, self.name, ())
            newf = newf[()] if newf.ndim == 0 else newf
            if isinstance(newf, np.ndarray) or (self.name in ("json", "msgpack")
                                                and not isinstance(newf, str)):
                return
        else:
            newf = pool_values(self.rng, self.name, ())[()]
        miss = self.missing_mask()
        note(repr(("set_fill", repr(newf))))
        self.z.fill_value = newf
        if self.dt.kind == "O":
            for i in np.flatnonzero(miss.ravel()):
                self.model.reshape(-1)[i] = newf
        else:
            self.model[miss] = newf
        self.mfill = newf

    @precondition(lambda self: self.fmt == "v2" and self.dt.kind in "biufc")
    @rule()
    def astype(self):
        tgt = "c16" if self.dt.kind == "c" else "f8"
        same(self.z.astype(tgt)[...], self.model.astype(tgt), self.name, "astype")

    @rule(data=st.data())
    def read_out(self, data):
        sel = draw_basic(data.draw, self.model.shape, ellipsis=False)
        try:
            exp = self.model[sel]
        except IndexError:
            return
        shp = np.empty(self.model.shape, bool)[sel].shape
        if shp == ():
            return
        out = np.empty(shp, dtype=self.z.dtype, order=data.draw(st.sampled_from("CF")))
        self.z.get_basic_selection(sel, out=out)
        same(out, exp, self.name, f"out {sel}")

    @precondition(lambda self: self.dt.names is not None)
    @rule(data=st.data())
    def field_rw(self, data):
        f = data.draw(st.sampled_from(self.dt.names))
        sel = draw_basic(data.draw, self.model.shape)
        try:
            exp = self.model[sel]
        except IndexError:
            return
        same(self.z.get_basic_selection(sel, fields=f), exp[f], self.name, f"field {f} {sel}")
        sh = np.empty(self.model.shape, bool)[sel].shape
        v = pool_values(self.rng, self.name, sh)[f]
        note(repr(("field write", f, sel, repr(v)[:80])))
        self.z.set_basic_selection(sel, v, fields=f)
        if sh == ():
            m = self.model[sel]
            tmp = np.array(self.model[sel], dtype=self.dt)
            tmp[f] = v
            self.model[sel] = tmp
        else:
            self.model[sel][f] = v

    # -------------------------------------------------------------- reads
    @rule(data=st.data())
    def read_ortho(self, data):
        if not self.model.ndim:
            return
        sel = draw_ortho(data.draw, self.model.shape)
        try:
            ix, drop = ortho_ix(sel, self.model.shape)
        except IndexError:
            return
        exp = self.model[ix]
        exp = exp.reshape(tuple(n for d, n in enumerate(exp.shape) if d not in drop))
        same(self.z.oindex[sel], exp, self.name, f"oindex {sel}")

    @rule(data=st.data())
    def read_basic(self, data):
        sel = draw_basic(data.draw, self.model.shape)
        try:
            exp = self.model[sel]
        except IndexError:
            return
        same(self.z[sel], exp, self.name, f"basic {sel}")

    @rule(data=st.data())
    def read_vindex_block(self, data):
        if not self.model.ndim or not self.model.size:
            return
        pts = tuple(np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=3, max_size=3)))
                    for n in self.model.shape)
        same(self.z.vindex[pts], self.model[pts], self.name, f"vindex {pts}")
        mask = self.rng.random(self.model.shape) < 0.4
        same(self.z.vindex[mask], self.model[mask], self.name, "mask")
        g = grid(self.model.shape, self.z.chunks)
        bsel = tuple(data.draw(st.integers(0, n - 1)) for n in g)
        sel = tuple(slice(b * c, (b + 1) * c) for b, c in zip(bsel, self.z.chunks))
        same(self.z.get_block_selection(bsel), self.model[sel], self.name, f"block {bsel}")

    @rule()
    def read_view(self):
        v = self.z.view()
        same(v[...], self.model, self.name, "view")

    @rule()
    def reopen(self):
        self.z = cs.open_array(self.path, mode="r+")

    # -------------------------------------------------------------- invariants
    @invariant()
    def full(self):
        if not hasattr(self, "z"):
            return
        same(self.z[...], self.model, self.name, "cs full")
        same(cs.open_array(self.path, mode="r")[...], self.model, self.name, "cs fresh full")
        if zarr_readable(self.name, self.fmt) and not (self.name.startswith("st")
                                                        and self.fill_desc is None):
            za = zarr.open_array(self.path, mode="r")
            got = za[...]
            same(got, self.model, self.name, "zarr full")


@pytest.mark.parametrize("fmt", FORMATS)
def test_dtype_model(fmt):
    """chunkstore and zarr-python 3 agree with the model for every data type drawn."""
    machine = type(f"Dtype_{fmt}", (DtypeMachine,), {"fmt_choice": fmt})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_machine(machine, CI_SETTINGS, SOAK_SETTINGS, len(FORMATS))
