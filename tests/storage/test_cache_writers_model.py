"""Model test: LRUStoreCache, consolidated views, cache_metadata=False handles and views in
front of one store, written through several routes at once (create/re-create, write,
resize, append, delete, consolidate), against a dict of NumPy arrays.

What the README promises is what is checked: handles on one location (the store objects of
one directory, a consolidated view of it, cache_metadata=False) follow each other's changes;
a cache sees what is written through it, and after a write by another route only once
invalidated (handles through it with cached metadata are then dropped: like another
process, they see the change only when reopened). Every value the cache holds equals the
store's while it is exact. CHUNKSTORE_SOAK=<seconds> soaks (tests/model_support.py).
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
import numpy as np
import chunkstore as cs
from chunkstore.storage.cache import LRUStoreCache
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
import pytest

from model_support import model_settings, run_machine

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::RuntimeWarning")

PATHS = ["a", "g/b"]
ROUTES = ["D", "D2", "C", "KD", "KC", "DN", "CN"]   # N: cache_metadata=False
LOC = {"D": "D", "D2": "D", "KD": "D", "DN": "D", "C": "C", "KC": "C", "CN": "C"}

class M(RuleBasedStateMachine):
    """Routes: D, D2 (a second store object of the directory), DN (cache_metadata=False),
    KD (open_consolidated r+) on the store; C, CN, KC on one LRUStoreCache of it."""
    @initialize(fmt=st.sampled_from([2, 3]), kind=st.sampled_from(["mem", "dir"]),
                maxsize=st.sampled_from([None, 64, 300]))
    def setup(self, fmt, kind, maxsize):
        self.fmt = fmt
        self.kind = kind
        if kind == "dir":
            self.tmp = tempfile.mkdtemp(prefix="cache-writers-")
            self.inner = cs.DirectoryStore(self.tmp)
            self.inner2 = cs.DirectoryStore(self.tmp)
        else:
            self.tmp = None
            self.inner = cs.MemoryStore()
            self.inner2 = self.inner
        self.cache = LRUStoreCache(self.inner, maxsize)
        self.dirty = False
        self.model = {}      # path -> np array
        self.layout = {}     # path -> (dtype, chunks, shards, fill)
        self.snap = None     # consolidated snapshot: path -> (layout, shape)
        self.handles = []    # (route, path, handle, viewkind)
        cs.open_group(self.inner, mode="w", zarr_format=fmt)
        cs.open_group(self.inner, mode="r+").require_group("g")
        for path in PATHS:  # both arrays, consolidated, and a handle on every route
            self.create("C" if path == "a" else "D", path, "i4", 2, fmt == 3, 0, 5, False)
        self.invalidate()
        self.consolidate("C")
        for path in PATHS:
            for route in ROUTES:
                self.open_handle(route, path, "")

    @rule()
    def check_all(self):
        """Every handle that may be read reads its array's model."""
        for route, path, arr, view in list(self.handles):
            if path not in self.model or (LOC[route] == "C" and self.dirty):
                continue
            exp = self.model[path].astype("f8") if view == "astype" else self.model[path]
            got = arr[...]
            assert (got.shape, got.dtype) == (exp.shape, exp.dtype), (route, path, view)
            np.testing.assert_array_equal(got, exp, err_msg=f"{route} {path} {view}")

    def teardown(self):
        if getattr(self, "tmp", None):
            shutil.rmtree(self.tmp, ignore_errors=True)

    def store(self, route):
        return {"D": self.inner, "D2": self.inner2, "DN": self.inner, "KD": self.inner,
                "C": self.cache, "CN": self.cache, "KC": self.cache}[route]

    def group(self, route):
        return cs.open_group(self.store(route), mode="r+")

    def changed_meta(self, route, path):
        loc = LOC[route]
        self.handles = [h for h in self.handles
                        if not (h[1] == path and LOC[h[0]] != loc and (h[3] or not h[0].endswith("N")))]
        # consolidated handles opened on the other location too (they are cached)
        if loc == "D":
            self.dirty = True

    def data_write(self, route):
        if LOC[route] == "D":
            self.dirty = True

    @rule(route=st.sampled_from(["D", "D2", "C"]), path=st.sampled_from(PATHS),
          dtype=st.sampled_from(["i2", "i4", "f4", "f8"]), chunks=st.integers(1, 4),
          shards=st.booleans(), fill=st.integers(0, 3), n=st.integers(0, 9),
          raw=st.booleans())
    def create(self, route, path, dtype, chunks, shards, fill, n, raw):
        if self.fmt == 2:
            shards = False
        kw = {"shards": (chunks * 2, 3 * 1)} if shards else {}
        if shards:
            kw = {"shards": (chunks * 2, 3)}
            ch = (chunks, 3)
        else:
            ch = (chunks, 3)
        g = self.group(route)
        g.create_array(path, shape=(n, 3), chunks=ch, dtype=dtype, fill_value=fill,
                       overwrite=True, **kw, **({"compressors": None} if raw else {}))
        self.model[path] = np.full((n, 3), fill, dtype=dtype)
        self.layout[path] = (dtype, ch, shards, fill)
        self.changed_meta(route, path)
        # handles on this location follow; model has the new array

    def _handle(self, data, path=None, writable=True):
        cands = [h for h in self.handles if path is None or h[1] == path]
        cands = [h for h in cands if h[1] in self.model]
        if writable:
            cands = [h for h in cands if h[3] != "astype"]
        cands = [h for h in cands if not (LOC[h[0]] == "C" and self.dirty)]
        if not cands:
            return None
        return data.draw(st.sampled_from(cands))

    @rule(route=st.sampled_from(ROUTES), path=st.sampled_from(PATHS),
          view=st.sampled_from(["", "", "view", "astype"]))
    def open_handle(self, route, path, view):
        if path not in self.model:
            return
        if LOC[route] == "C" and self.dirty:
            return
        s = self.store(route)
        if route.startswith("K"):
            if self.snap is None or self.snap.get(path) != (self.layout[path], self.model[path].shape):
                return
            h = cs.open_consolidated(s, mode="r+")[path]
        else:
            h = cs.open_array(s, path=path, mode="r+", cache_metadata=not route.endswith("N"))
        if view == "view":
            h = h.view()
        elif view == "astype":
            if self.fmt != 2:
                view = ""
            else:
                h = h.astype("f8")
        self.handles.append((route, path, h, view))

    @rule(data=st.data())
    def check(self, data):
        h = self._handle(data, writable=False)
        if h is None:
            return
        route, path, arr, view = h
        exp = self.model[path]
        got = arr[...]
        if view == "astype":
            exp = exp.astype("f8")
        assert got.shape == exp.shape, (route, path, view, got.shape, exp.shape)
        assert got.dtype == exp.dtype, (route, path, view, got.dtype, exp.dtype)
        np.testing.assert_array_equal(got, exp, err_msg=f"{route} {path} {view}")
        if got.size:
            got[...] = 77   # the result must not alias anything cached

    @invariant()
    def cache_exact(self):
        if getattr(self, "dirty", True):
            return
        for k, v in list(self.cache._values.items()):
            assert k in self.inner and bytes(self.inner[k]) == bytes(v), ("cache differs", k)

    @rule(data=st.data(), start=st.integers(0, 10), stop=st.integers(0, 10), v=st.integers(-3, 5))
    def write(self, data, start, stop, v):
        h = self._handle(data)
        if h is None:
            return
        route, path, arr, view = h
        exp = self.model[path]
        if view == "view" and len(exp) == 0:
            return
        arr[start:stop] = v
        exp[start:stop] = v
        self.data_write(route)

    @rule(data=st.data(), n=st.integers(0, 10))
    def resize(self, data, n):
        h = self._handle(data)
        if h is None or h[3]:
            return
        route, path, arr, view = h
        if route.startswith("K"):
            return
        arr.resize((n, 3))
        old = self.model[path]
        new = np.full((n, 3), self.layout[path][3], dtype=old.dtype)
        m = min(n, len(old))
        new[:m] = old[:m]
        self.model[path] = new
        self.changed_meta(route, path)

    @rule(data=st.data(), n=st.integers(1, 4), v=st.integers(-3, 5))
    def append(self, data, n, v):
        h = self._handle(data)
        if h is None or h[3] or h[0].startswith("K"):
            return
        route, path, arr, view = h
        old = self.model[path]
        rows = np.full((n, 3), v, dtype=old.dtype)
        arr.append(rows)
        self.model[path] = np.concatenate([old, rows])
        self.changed_meta(route, path)

    @rule(route=st.sampled_from(["D", "C"]), path=st.sampled_from(PATHS))
    def delete(self, route, path):
        if path not in self.model:
            return
        g = self.group(route)
        del g[path]
        del self.model[path]
        self.changed_meta(route, path)
        self.handles = [h for h in self.handles if h[1] != path]

    @rule(route=st.sampled_from(["D", "C"]))
    def consolidate(self, route):
        if route == "C" and self.dirty:
            return
        cs.consolidate_metadata(self.store(route))
        self.snap = {p: (self.layout[p], self.model[p].shape) for p in self.model}
        if LOC[route] == "D":
            self.dirty = True

    @rule()
    def invalidate(self):
        if self.dirty:
            self.cache.invalidate()
            self.dirty = False
            # C handles with cached metadata missed D's changes: dropped in changed_meta

    @rule(route=st.sampled_from(["D", "C"]), path=st.sampled_from(PATHS))
    def fresh_check(self, route, path):
        if path not in self.model or (route == "C" and self.dirty):
            return
        got = cs.open_array(self.store(route), path=path, mode="r")[...]
        got2 = got.copy()
        if got.size:
            got[...] = 55
        got = got2
        exp = self.model[path]
        assert got.dtype == exp.dtype and got.shape == exp.shape, (route, path, got.dtype, exp.dtype, got.shape, exp.shape)
        np.testing.assert_array_equal(got, exp, err_msg=f"fresh {route} {path}")

CI_SETTINGS = model_settings(60, 30)
SOAK_SETTINGS = model_settings(50, 40)


def test_cached_and_consolidated_handles_follow_the_writers():
    run_machine(M, CI_SETTINGS, SOAK_SETTINGS, 1)
