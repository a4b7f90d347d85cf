"""Model-based test of hierarchies (groups, arrays, attributes) seen through several handles.

A hypothesis RuleBasedStateMachine draws, once per run, a Zarr format (2 or 3), a store
(memory, directory, zip, SQLite) and a dtype, creates the root group, and keeps a few open
handles on the hierarchy side by side with a plain Python model: a dict of path ->
``{"kind": "group", "attrs": {...}}`` or ``{"kind": "array", "attrs": {...}, "data":
ndarray, "fill": ..., "chunks": ..., "uid": ...}`` (uid: which creation the array comes from;
a move keeps it).

Handles: 1-3 root groups (``open_group`` on the run's store object, on its path or a second
store object on the same data where the store kind has one, ``Group(store)``; modes "r+",
"a", and "r", which must refuse every write), member handles (``root["a/b"]``: groups and
arrays, kept while other handles change the hierarchy around them), and views opened through
consolidated metadata (``consolidate_metadata``'s result, ``open_consolidated``,
``open_group(use_consolidated=True)``, their members).

Rules: ``create_group`` (nested paths, ``overwrite``, ``attributes``), arrays through
``create_dataset`` (shape or data), ``zeros``, ``full``, ``array``, ``create_array`` and
``g[name] = data``, ``require_group``/``require_dataset``, ``del g[name]``, ``move``, attribute
``[k] = v`` / ``update`` / ``del`` / ``put`` through any handle, writes and ``resize`` through
an array handle, ``consolidate_metadata`` and opening through it, replacing the whole
hierarchy (``open_group(mode="w")``), members opened by path (``open_group``/``open_array``/
``open``/a ``StorePath``; on a directory, an array from the path of its own directory), changes made by zarr-python 3 itself on a directory (groups,
arrays, attributes, deletes below the root), and reads of random (often missing) paths
(``in``, ``[]``, ``get``, ``visit``, ``array_keys(recurse=True)``, ``members(max_depth=None)``).
Operations
that must fail (creating where a node is without ``overwrite``, below an array, deleting or
reading a missing member, moving onto a node or into itself, a missing attribute, any
metadata change through a read-only or consolidated handle) must raise the documented error
(``ContainsGroupError``/``ContainsArrayError``, ``KeyError``, ``ValueError``,
``ReadOnlyError``...) and change nothing: the store's keys are compared after every step.

What the README lets a handle see (and so the model):

- Group handles read the store on every call, attributes are never cached ("What is safe",
  cache_metadata): every plain group handle sees exactly the model, whatever another handle
  (or store object) did. A group handle keeps its path: once its group is gone it lists no
  members and has no attributes, and sees a group made again at its path.
- An array handle caches its metadata (shape, fill value, chunks) from when it was opened,
  its attributes are read from the store. When chunkstore (any handle of this process on the
  store's location) resizes, re-creates, moves or deletes its array, its next operation
  reads the metadata again: it reads the array there now, or raises ArrayNotFoundError
  where there is none. Changed by zarr-python 3 instead, it reads with its old metadata: the
  model's values where the two shapes overlap and the fill value beyond, chunk by chunk
  (what is stored of a chunk is what the array's data and fill value make of it); on an
  array that was deleted, the fill value. Where another array has been created at its path
  since, nothing is promised about its values (its codecs may differ). Only handles whose
  metadata is current are written through (README: not safe otherwise).
- Consolidated metadata is a snapshot ("Differences from zarr-python"): a view opened through
  it lists the members, kinds, attributes and array metadata of the last
  ``consolidate_metadata`` (chunks come from the store, read as above), and refuses every
  metadata change with ``ReadOnlyError``; data writes (mode "r+") pass through. Except
  where chunkstore (this process) changed the hierarchy since that consolidation (created,
  re-created, moved, resized or deleted a node): a node at or below a path it changed is
  read from the store (the node there now, or none), never by the snapshot's stale
  metadata, and a group at, above or below such a path is listed from the store (each
  listed member then found as above: ViewTree). The root
  group's own attributes come from ``.zmetadata`` in Zarr v2 (as zarr-python 2) and from the
  root ``zarr.json`` read at opening in Zarr v3 (where the snapshot lives inside that
  document).

Invariants after every step: every handle's keys, ``array_keys``, ``group_keys``, ``len``,
iteration, ``in``, member kinds, attributes, array values and ``tree()`` equal the model (or
the snapshot / cached metadata above); the store holds exactly the model's keys (each node's
documents, the chunks holding a non-fill element: ``write_empty_chunks=False``; no orphans
left by delete, move or overwrite); on a directory, zarr-python 3 (``zarr.open_group(path,
mode="r", zarr_format=..., use_consolidated=False)``) reads the same tree, attributes, fill
values and array values, and with ``use_consolidated=True`` the snapshot's members.

CI cost: 35 programs of up to 25 steps per format (well under 30 s in all on a 2-core
machine). Soak mode runs new examples until a time budget is spent:

    CHUNKSTORE_SOAK=600 .venv/bin/python -m pytest tests/hierarchy/test_hierarchy_model.py -x -q

(CHUNKSTORE_SOAK=<seconds>, split between the formats; longer programs, and failures are
shrunk. CHUNKSTORE_SHRINK=1 shrinks in CI mode too. CHUNKSTORE_MODEL_DISABLE=rule,rule turns
rules off by name, to look past a known failure while soaking.)

Failures this machine found (each fixed, with an example test in
tests/hierarchy/test_group.py; each keeps its own rule, so that it can be turned off while
the rest is soaked should it come back):

- ``open_with_use_consolidated``: ``open(store, mode="r"/"r+", use_consolidated=True)``
  raised TypeError (the keyword was handed to ``open_array`` first); zarr-python 3 opens
  the group.
- ``create_with_overwrite_below_an_array``: ``create_group("x/c", overwrite=True)`` (also
  ``require_group(..., overwrite=True)``, ``open_group(mode="w", path=...)``) below a Zarr v3
  array ``x`` deleted its chunk directory ``x/c`` before refusing with ContainsArrayError.
- ``attrs_of_a_deleted_group``: in Zarr v2, setting attributes through the handle of a group
  deleted (or moved) by another handle wrote an orphan ``.zattrs`` that a group created
  there later inherited; in Zarr v3 the same raised a bare KeyError. Now
  GroupNotFoundError, nothing written.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import warnings

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import chunkstore as cs
from model_support import (DISABLED, close_quietly, join, model_settings, on, run_machine,
                           under)
from chunkstore.errors import (ArrayNotFoundError, ConsolidatedMetadataNotFoundError,
                               ContainsArrayError,
                               ContainsGroupError, GroupNotFoundError, ReadOnlyError)

zarr = pytest.importorskip("zarr")

CI_SETTINGS = model_settings(35, 25)
SOAK_SETTINGS = model_settings(150, 50)

FORMATS = [2, 3]
STORES = ["memory", "directory", "zip", "sqlite"]
# "c" is a Zarr v3 array's chunk directory and "0" a Zarr v2 chunk key: member names that
# collide with chunk keys below an array; "ab" has "a" as a prefix; "é x" is not ASCII and
# has a space
NAMES = ["a", "ab", "b", "c", "0", "é x"]
CHUNKS = {1: (3,), 2: (2, 3)}
ATTR_KEYS = ["k", "m", "ñ"]
ATTR_VALUES = st.one_of(st.integers(-5, 5), st.sampled_from(["", "v", "ü", "a\nb", "\u2603"]),
                        st.sampled_from([2**53 + 1, -2**63, 2**64 - 1, 1.5, -0.0, 1e300]),
                        st.lists(st.integers(0, 3), max_size=3),
                        st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 3),
                                        max_size=2), st.none(), st.booleans())
ATTRS = st.dictionaries(st.sampled_from(ATTR_KEYS), ATTR_VALUES, max_size=3)
FILLS = [0, 7]


# ---------------------------------------------------------------------------- model helpers
def ancestors(p):
    """The proper ancestors of p, the root ("") first."""
    parts = p.split("/") if p else []
    return ["/".join(parts[:i]) for i in range(len(parts))]


def children(tree, p):
    """(name, kind) of p's direct members in a model (or snapshot) dict, sorted."""
    if isinstance(tree, ViewTree) and tree.listed_live(p):
        return [(n, tree[join(p, n)]["kind"]) for n, _ in children(tree.model, p)
                if join(p, n) in tree]
    pre = p + "/" if p else ""
    out = []
    for q, n in tree.items():
        if q and q.startswith(pre) and "/" not in q[len(pre):]:
            out.append((q[len(pre):], n["kind"]))
    return sorted(out)


def grid(shape, chunks):
    return tuple(-(-s // c) for s, c in zip(shape, chunks))


def chunk_region(coords, chunks, shape):
    return tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(coords, chunks, shape))


def stored_chunks(node):
    """Coordinates of the chunks an array stores: those holding an element that is not its
    fill value (write_empty_chunks=False)."""
    data, fill, chunks = node["data"], node["fill"], node["chunks"]
    out = []
    for coords in np.ndindex(*grid(data.shape, chunks)):
        if np.any(data[chunk_region(coords, chunks, data.shape)] != fill):
            out.append(coords)
    return out


def view_values(meta, cur):
    """What an array handle opened with metadata meta (uid, shape, fill, chunks) reads where
    cur (a model node or None) is at its path now; None: nothing is promised."""
    uid, shape, fill, chunks, dtype = meta
    out = np.full(shape, fill, dtype=dtype)
    if cur is None or cur["kind"] != "array":
        return out
    if cur["uid"] != uid:
        return None
    data = cur["data"]
    for coords in stored_chunks(cur):
        # the stored chunk, padded with the fill value past the array's edge
        full_chunk = np.full(chunks, fill, dtype=dtype)
        src = chunk_region(coords, chunks, data.shape)
        full_chunk[tuple(slice(0, s.stop - s.start) for s in src)] = data[src]
        dst = chunk_region(coords, chunks, shape)
        if any(s.start >= s.stop for s in dst):
            continue
        out[dst] = full_chunk[tuple(slice(0, s.stop - s.start) for s in dst)]
    return out


def tree_text(tree, p, name):
    """Group.tree()'s text for the group at p of a model (or snapshot) dict."""
    lines = [name]

    def walk(q, prefix):
        kids = children(tree, q)
        for i, (n, kind) in enumerate(kids):
            last = i == len(kids) - 1
            branch = "└── " if last else "├── "
            node = tree[join(q, n)]
            if kind == "array":
                shape = node["shape"] if "shape" in node else node["data"].shape
                dtype = node["dtype"] if "dtype" in node else node["data"].dtype
                lines.append(f"{prefix}{branch}{n} {tuple(shape)} {np.dtype(dtype)}")
            else:
                lines.append(f"{prefix}{branch}{n}")
                walk(join(q, n), prefix + ("    " if last else "│   "))
    walk(p, "")
    return "\n".join(lines)


def snapshot(model):
    """What consolidated metadata holds of the model: everything but array data."""
    out = {}
    for p, n in model.items():
        s = {"kind": n["kind"], "attrs": copy.deepcopy(n["attrs"])}
        if n["kind"] == "array":
            s.update(uid=n["uid"], shape=n["data"].shape, fill=n["fill"], chunks=n["chunks"],
                     dtype=n["data"].dtype)
        out[p] = s
    return out


class ViewTree(dict):
    """What a consolidated snapshot's handle sees of the hierarchy: the snapshot's nodes, but
    the model's (the store's) at and below each path chunkstore changed since the
    consolidation (a node's documents are read from the store there); and a group at, above
    or below such a path is listed from the store (children), each listed member then
    shown where this tree has it."""

    def __init__(self, snap, model, changed):
        super().__init__((p, n) for p, n in snap.items()
                         if not any(under(p, c) for c in changed))
        self.update((p, n) for p, n in model.items() if any(under(p, c) for c in changed))
        self.model, self.changed = model, changed

    def listed_live(self, p):
        """Whether the group at p is listed from the store."""
        return any(under(p, c) or under(c, p) for c in self.changed)


class Handle:
    """An open Group or Array, the path it is on, and what it reads metadata from: the
    store (snap None) or a consolidated snapshot; meta: an array handle's cached metadata."""

    def __init__(self, obj, path, how, ro=False, snap=None, meta=None, changed=None):
        self.obj, self.path, self.how, self.ro, self.snap, self.meta = \
            obj, path, how, ro, snap, meta
        # (a snapshot's handle) the paths chunkstore changed since that consolidation: an
        # array at or below one is opened from the store, not from the snapshot
        self.changed = changed
        # (a snapshot's array handle) it reads its metadata and attributes from the store:
        # opened so (see changed), or told of a change since
        self.live = False
        self.kind = "group" if isinstance(obj, cs.Group) else "array"
        # (an array handle) chunkstore changed its array since the handle read its metadata:
        # its next operation reads the metadata again (README, cache_metadata)
        self.told = False

    def __repr__(self):
        extra = " ro" if self.ro else ""
        extra += " consolidated" if self.snap is not None else ""
        return f"<{self.kind} handle {self.path!r} via {self.how}{extra}>"


class Expect(Exception):
    """Raised by a rule's prediction: the operation must fail with these classes."""

    def __init__(self, *classes):
        super().__init__(classes)
        self.classes = classes


# ---------------------------------------------------------------------------- machine
class HierarchyMachine(RuleBasedStateMachine):
    formats = FORMATS

    def __init__(self):
        super().__init__()
        self.ready = False
        self.tmpdir = None
        self.stores = []

    # ------------------------------------------------------------------ set-up
    @initialize(data=st.data())
    def setup(self, data):
        draw = data.draw
        self.fmt = draw(st.sampled_from(self.formats), label="zarr_format")
        self.kind = draw(st.sampled_from(STORES), label="store")
        self.dtype = np.dtype(draw(st.sampled_from(["<i4", "<f8"]), label="dtype"))
        self.rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
        self.tmpdir = tempfile.mkdtemp(prefix="cs-hier-model-")
        self.path = None
        if self.kind == "memory":
            self.store = cs.MemoryStore()
        elif self.kind == "directory":
            self.path = os.path.join(self.tmpdir, "h.zarr")
            self.store = cs.DirectoryStore(self.path)
        elif self.kind == "zip":
            self.store = cs.ZipStore(os.path.join(self.tmpdir, "h.zip"), mode="a")
        else:
            self.store = cs.SQLiteStore(os.path.join(self.tmpdir, "h.sqlite"))
        self.stores = [self.store]
        root = cs.open_group(self.store, mode="w", zarr_format=self.fmt)
        self.model = {"": {"kind": "group", "attrs": {}}}
        self.uid = 0
        self.consolidated = None     # the snapshot of the last consolidate_metadata
        self.snap_changes = []       # per consolidation: the paths changed since (see tell)
        self.handles = [Handle(root, "", "open_group(store, mode='w')")]
        self.log = [f"zarr_format={self.fmt} store={self.kind} dtype={self.dtype}"]
        for p, kind in draw(st.lists(st.tuples(st.lists(st.sampled_from(NAMES), min_size=1,
                                                        max_size=3).map("/".join),
                                               st.sampled_from(["group", "array"])),
                                     max_size=6), label="initial nodes"):
            # a hierarchy to start from (created through handle 0, as the rules would)
            if p in self.model or self.array_under(self.model, p) is not None:
                continue
            if kind == "group":
                root.create_group(p)
                self.model[p] = {"kind": "group", "attrs": {}}
            else:
                data_ = self.values((draw(st.integers(0, 7), label="len"),))
                a = root.array(p, data_, chunks=CHUNKS[1])
                self.new_array(p, data_, 0, a.chunks)
            self.add_parents(p)
        for _ in range(draw(st.integers(0, 2), label="more root handles")):
            self.handles.append(self._open_root(draw(st.sampled_from(ROOT_OPENERS),
                                                     label="opener")))
        self.ready = True

    def teardown(self):
        self.handles = []
        close_quietly(self.stores)
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def _second_store(self):
        """Another store object on the run's data where the kind has one, else the store."""
        if self.kind == "directory":
            s = cs.DirectoryStore(self.path)
        elif self.kind == "sqlite":
            s = cs.SQLiteStore(self.store.path if hasattr(self.store, "path") else
                               os.path.join(self.tmpdir, "h.sqlite"))
        else:
            return self.store
        self.stores.append(s)
        return s

    def _open_root(self, how):
        fmt = self.fmt
        if how == "same r+":
            return Handle(cs.open_group(self.store, mode="r+"), "", how)
        if how == "same a, zarr_format":
            return Handle(cs.open_group(self.store, mode="a", zarr_format=fmt), "", how)
        if how == "same r":
            return Handle(cs.open_group(self.store, mode="r"), "", how, ro=True)
        if how == "second store r+":
            return Handle(cs.open_group(self._second_store(), mode="r+"), "", how)
        if how == "path a":
            src = self.path if self.kind == "directory" else self._second_store()
            g = cs.open_group(src, mode="a")
            if g.store is not self.store:
                self.stores.append(g.store)
            return Handle(g, "", how)
        if how == "Group(store)":
            return Handle(cs.Group(self._second_store()), "", how)
        raise ValueError(how)

    # ------------------------------------------------------------------ helpers
    def note(self, text):
        self.log.append(text)

    def tree_of(self, h):
        """The dict a handle's metadata comes from: the model, or its snapshot as this
        process's changes since show it (ViewTree)."""
        if h.snap is None:
            return self.model
        return ViewTree(h.snap, self.model, h.changed) if h.changed else h.snap

    def groups(self):
        return [h for h in self.handles if h.kind == "group"]

    def keys_now(self):
        return {k: bytes(self.store[k]) for k in self.store.keys()}

    def draw_target(self, data, h, label, prefer="any"):
        """(name to pass to the handle, absolute path): an existing node below the handle,
        a child of one, or a random path of 1-3 names; sometimes absolute ("/a/b").
        prefer: "existing" mostly draws a node that is there, "new" a path below a group."""
        tree = self.tree_of(h)
        below = sorted(p for p in tree if p and under(p, h.path) and p != h.path)
        ways = {"any": ["existing", "child", "random"],
                "existing": ["existing"] * 4 + ["child", "random"],
                "new": ["child"] * 3 + ["random"]}[prefer]
        way = data.draw(st.sampled_from(ways) if below else st.just("random"),
                        label=f"{label} kind")
        if way == "random":
            rel = "/".join(data.draw(st.lists(st.sampled_from(NAMES), min_size=1,
                                              max_size=3), label=label))
            path = join(h.path, rel)
        else:
            pool = below
            if way == "child" and prefer == "new":
                pool = [p for p in below if tree[p]["kind"] == "group"] or below
            path = data.draw(st.sampled_from(pool), label=label)
            if way == "child":
                path = join(path, data.draw(st.sampled_from(NAMES), label=f"{label} child"))
        rel = path[len(h.path) + 1:] if h.path else path
        if data.draw(st.integers(0, 7), label=f"{label} absolute") == 0:
            return "/" + path, path
        return rel, path

    def draw_group_handle(self, data, writable=None):
        hs = self.groups()
        if writable:
            hs = [h for h in hs if not h.ro and h.snap is None] or hs
        return data.draw(st.sampled_from(hs), label="group handle")

    def values(self, shape):
        """Small values, many of them equal to the fill values (chunks that are all fill)."""
        pool = np.array([0, 0, 7, 7, 1, 2, 3, -4], dtype=self.dtype)
        return self.rng.choice(pool, size=shape)

    def kind_at(self, tree, p):
        n = tree.get(p)
        return None if n is None else n["kind"]

    def live_through_snapshot(self, h, p):
        """Whether handle h (of a snapshot) opens the array at p from the store: this process
        changed the array (or a node above it) since the consolidation, so the snapshot's
        metadata of it may be stale (a re-created array's chunks were decoded by the old
        dtype)."""
        return (h.snap is not None and bool(h.changed)
                and any(under(p, c) for c in h.changed)
                and self.kind_at(self.model, p) == "array")

    def opens_as(self, h, p):
        """The kind of what h[p] opens (None: it raises)."""
        return self.kind_at(self.tree_of(h), p)

    def opened_meta(self, h, p):
        """The metadata an array h[p] opens reads by."""
        return self.meta_of(self.tree_of(h), p)

    def array_under(self, tree, p):
        """The nearest proper ancestor of p that is an array, or None."""
        for a in ancestors(p):
            if self.kind_at(tree, a) == "array":
                return a
        return None

    def run(self, h, what, fn, expect, apply=None, replaced=None):
        """Run fn; expect: None (must succeed; then apply() updates the model) or an Expect.
        A failure must leave the store's keys and values as they were. replaced: the path a
        creation with overwrite clears first (see tell)."""
        before = self.keys_now() if expect is not None else None
        self.note(f"{what} via {h!r} -> {'ok' if expect is None else expect.classes}")
        if expect is None:
            nodes = self.versions()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = fn()
            if apply is not None:
                apply(result)
            self.tell(nodes, replaced)
            return result
        with pytest.raises(expect.classes):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn()
        after = self.keys_now()
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        assert not changed, f"failed {what} via {h!r} changed keys {changed}"
        return None

    def versions(self):
        """Each node of the model now, and an array's shape (resize replaces its data)."""
        return {p: (n, n["data"].shape if n["kind"] == "array" else None)
                for p, n in self.model.items()}

    def tell(self, before, replaced=None):
        """After a chunkstore operation: the array handles that read the metadata again at
        their next operation (README, cache_metadata: in-process handles on one store
        location are told). before: versions() taken first. Told: the handles at or below a
        path whose node it deleted, replaced or moved, or that it created with overwrite
        (replaced: that path; whatever was there is removed first, even where the model had
        nothing: a consolidated snapshot's handle may be on such a path), and those at a
        path whose array it resized."""
        gone = {p for p, (n, _) in before.items() if self.model.get(p) is not n}
        if replaced is not None:
            gone.add(replaced)
        resized = {p for p, (n, shape) in before.items()
                   if self.model.get(p) is n and shape is not None and n["data"].shape != shape}
        made = {p for p in self.model if p not in before}
        for changed in self.snap_changes:  # (this process's changes, which views follow)
            changed |= gone | resized | made
        for h in self.handles:
            if h.kind == "array" and (h.path in resized
                                      or any(under(h.path, p) for p in gone)):
                h.told = True
                h.live = True

    def remove_subtree(self, p):
        for q in [q for q in self.model if q and under(q, p)]:
            del self.model[q]

    def add_parents(self, p):
        for a in ancestors(p):
            if a not in self.model:
                self.model[a] = {"kind": "group", "attrs": {}}

    def new_array(self, p, data, fill, chunks, attrs=None):
        self.uid += 1
        self.model[p] = {"kind": "array", "attrs": dict(attrs or {}), "data": data,
                         "fill": fill, "chunks": tuple(chunks), "uid": self.uid}

    def meta_of(self, tree, p):
        n = tree[p]
        return (n["uid"], tuple(n["shape"] if "shape" in n else n["data"].shape), n["fill"],
                n["chunks"], np.dtype(n["dtype"] if "dtype" in n else n["data"].dtype))

    def creation_error(self, h, p, overwrite, kind):
        """The error creating a node of kind at p through h must raise, or None."""
        tree = self.tree_of(h)
        if h.ro:
            return Expect(ReadOnlyError)
        if not overwrite:
            there = self.kind_at(tree, p)
            if there == "array":
                return Expect(ContainsArrayError)
            if there == "group":
                return Expect(ContainsGroupError)
        if self.array_under(tree, p) is not None:
            return Expect(ContainsArrayError)
        if h.snap is not None:
            return Expect(ReadOnlyError)
        return None

    # ------------------------------------------------------------------ handles
    @precondition(lambda self: self.ready and len(self.handles) < 7)
    @rule(how=st.sampled_from(["same r+", "same a, zarr_format", "same r", "second store r+",
                               "path a", "Group(store)"]))
    def open_root(self, how):
        self.handles.append(self._open_root(how))

    @precondition(lambda self: self.ready and len(self.handles) < 7)
    @rule(data=st.data())
    def open_member(self, data):
        """root["a/b"] through any group handle: the node's kind, or KeyError."""
        h = self.draw_group_handle(data)
        name, p = self.draw_target(data, h, "member", "existing")
        tree = self.tree_of(h)
        kind = self.kind_at(tree, p)
        if kind is None:
            self.run(h, f"h[{name!r}]", lambda: h.obj[name], Expect(KeyError))
            assert name not in h.obj
            return
        if self.opens_as(h, p) is None:  # (listed by the snapshot, gone from the store)
            self.run(h, f"h[{name!r}]", lambda: h.obj[name],
                     Expect(ArrayNotFoundError, ContainsGroupError))
            assert name in h.obj
            return
        obj = self.run(h, f"h[{name!r}]", lambda: h.obj[name], None)
        assert name in h.obj
        assert isinstance(obj, cs.Group if kind == "group" else cs.Array), (p, obj)
        assert obj.path == p
        meta = self.opened_meta(h, p) if kind == "array" else None
        handle = Handle(obj, p, f"{h.how}[{name!r}]", ro=h.ro, snap=h.snap, meta=meta,
                        changed=h.changed)
        handle.live = h.live or self.live_through_snapshot(h, p)
        self.handles.append(handle)

    @precondition(lambda self: self.ready and len(self.handles) < 7
                  and "open_by_path" not in DISABLED)
    @rule(data=st.data(), opener=st.sampled_from(["open_group/open_array", "open",
                                                  "StorePath", "its directory"]),
          fresh=st.booleans())
    def open_by_path(self, data, opener, fresh):
        """A member opened from the store and its path (mode "r+"), not through a group:
        the node's kind, or the not-found error (a KeyError's or FileNotFoundError's).
        "its directory": an array opened from the path of its own directory (a store whose
        root is the array's: one array all the same, its handles share in-process locks
        with the others', protocol.node_location)."""
        p = data.draw(st.sampled_from(sorted(q for q in self.model if q)) if len(self.model)
                      > 1 else st.just("a"), label="path")
        kind = self.kind_at(self.model, p)
        src = self._second_store() if fresh else self.store
        if opener == "its directory":
            if self.kind != "directory" or kind != "array":
                return
            a = cs.open_array(os.path.join(self.path, *p.split("/")), mode="r+")
            self.handles.append(Handle(a, p, f"open_array(<dir>/{p})",
                                       meta=self.meta_of(self.model, p)))
            return
        if opener == "open_group/open_array":
            fn = (lambda: cs.open_array(src, mode="r+", path=p)) if kind == "array" else \
                (lambda: cs.open_group(src, mode="r+", path=p))
        elif opener == "open":
            fn = lambda: cs.open(src, mode="r+", path=p)
        else:
            from chunkstore.storage import StorePath
            fn = lambda: cs.open(StorePath(src) / p, mode="r+")
        if kind is None:
            self.run(self.handles[0], f"{opener}({p!r})", fn, Expect(FileNotFoundError))
            return
        obj = self.run(self.handles[0], f"{opener}({p!r})", fn, None)
        assert isinstance(obj, cs.Group if kind == "group" else cs.Array), (p, obj)
        assert obj.path == p, (obj.path, p)
        self.handles.append(Handle(obj, p, f"{opener}({p!r})", meta=self.meta_of(
            self.model, p) if kind == "array" else None))

    @precondition(lambda self: self.ready and self.kind == "directory"
                  and "zarr_python_writes" not in DISABLED)
    @rule(data=st.data(), op=st.sampled_from(["group", "array", "attrs", "delete"]),
          name=st.sampled_from(NAMES), attrs=ATTRS, fill=st.sampled_from(FILLS))
    def zarr_python_writes(self, data, op, name, attrs, fill):
        """zarr-python 3 changes the hierarchy below a group (never the root's own document,
        where a Zarr v3 hierarchy keeps its consolidated metadata): every chunkstore handle
        sees the change."""
        groups = sorted(p for p, n in self.model.items() if n["kind"] == "group")
        g = data.draw(st.sampled_from(groups), label="zarr group")
        p = join(g, name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zg = zarr.open_group(self.path, mode="r+", zarr_format=self.fmt,
                                 use_consolidated=False)
            zg = zg[g] if g else zg
            there = self.kind_at(self.model, p)
            self.note(f"zarr-python: {op} {p!r} attrs={attrs} fill={fill}")
            if op == "group" and there is None:
                zg.create_group(name, attributes=attrs)
                self.model[p] = {"kind": "group", "attrs": copy.deepcopy(attrs)}
            elif op == "array" and there is None:
                n = data.draw(st.integers(0, 7), label="len")
                values = self.values((n,))
                za = zg.create_array(name, shape=(n,), chunks=CHUNKS[1], dtype=self.dtype,
                                     fill_value=fill, attributes=attrs)
                za[...] = values
                self.new_array(p, values, fill, CHUNKS[1], attrs)
            elif op == "attrs" and there is not None:
                zg[name].attrs.update(attrs)
                self.model[p]["attrs"].update(copy.deepcopy(attrs))
            elif op == "delete" and there is not None:
                del zg[name]
                self.remove_subtree(p)

    @precondition(lambda self: self.ready and len(self.handles) > 2)
    @rule(data=st.data())
    def close_handle(self, data):
        i = data.draw(st.integers(1, len(self.handles) - 1), label="close")
        self.note(f"drop {self.handles[i]!r}")
        del self.handles[i]

    @precondition(on("reopen_root_handle"))
    @rule(data=st.data(), how=st.sampled_from(["same r+", "same a, zarr_format",
                                               "second store r+", "path a"]))
    def reopen_root_handle(self, data, how):
        """Handle 0 (always a writable root) is opened again."""
        self.handles[0] = self._open_root(how)
        self.note(f"handle 0 is now {self.handles[0]!r}")

    # ------------------------------------------------------------------ creating
    @precondition(on("create_group"))
    @rule(data=st.data(), overwrite=st.booleans(), attrs=st.one_of(st.none(), ATTRS))
    def create_group(self, data, overwrite, attrs):
        h = self.draw_group_handle(data, writable=data.draw(st.integers(0, 3), label="writable") > 0)
        name, p = self.draw_target(data, h, "group", data.draw(
            st.sampled_from(["any", "new"]), label="prefer"))
        if overwrite and self.array_under(self.tree_of(h), p) is not None:
            overwrite = False   # (see create_with_overwrite_below_an_array)
        self._create_group(h, name, p, overwrite, attrs)

    def _create_group(self, h, name, p, overwrite, attrs):
        expect = self.creation_error(h, p, overwrite, "group")

        def apply(g):
            assert isinstance(g, cs.Group) and g.path == p
            self.remove_subtree(p)
            self.add_parents(p)
            self.model[p] = {"kind": "group", "attrs": dict(attrs or {})}
        self.run(h, f"create_group({name!r}, overwrite={overwrite}, attributes={attrs})",
                 lambda: h.obj.create_group(name, overwrite=overwrite, attributes=attrs),
                 expect, apply, replaced=p if overwrite else None)

    @precondition(on("create_array"))
    @rule(data=st.data(), api=st.sampled_from(["create_dataset", "create_dataset data",
                                               "zeros", "full", "array", "create_array",
                                               "setitem"]),
          overwrite=st.booleans(), fill=st.sampled_from(FILLS), ndim=st.sampled_from([1, 2]))
    def create_array(self, data, api, overwrite, fill, ndim):
        h = self.draw_group_handle(data, writable=data.draw(st.integers(0, 3), label="writable") > 0)
        name, p = self.draw_target(data, h, "array", data.draw(
            st.sampled_from(["any", "new"]), label="prefer"))
        if overwrite and self.array_under(self.tree_of(h), p) is not None:
            overwrite = False   # (see create_with_overwrite_below_an_array)
        self._create_array(data, h, name, p, api, overwrite, fill, ndim)

    def _create_array(self, data, h, name, p, api, overwrite, fill, ndim):
        dims = (data.draw(st.integers(0, 7), label="len"),) if ndim == 1 else \
            tuple(data.draw(st.integers(0, 4), label="len") for _ in range(2))
        chunks = CHUNKS[ndim]
        dt = self.dtype
        values = self.values(dims)
        attrs = None
        g = h.obj
        if api == "create_dataset":
            fn = lambda: g.create_dataset(name, shape=dims, chunks=chunks, dtype=dt,
                                          fill_value=fill, overwrite=overwrite)
            content = np.full(dims, fill, dtype=dt)
        elif api == "create_dataset data":
            fill = 0
            fn = lambda: g.create_dataset(name, data=values, chunks=chunks,
                                          overwrite=overwrite)
            content = values
        elif api == "zeros":
            fill = 0
            fn = lambda: g.zeros(name, shape=dims, chunks=chunks, dtype=dt,
                                 overwrite=overwrite)
            content = np.zeros(dims, dtype=dt)
        elif api == "full":
            fn = lambda: g.full(name, fill, shape=dims, chunks=chunks, dtype=dt,
                                overwrite=overwrite)
            content = np.full(dims, fill, dtype=dt)
        elif api == "array":
            fill = 0
            fn = lambda: g.array(name, values, chunks=chunks, overwrite=overwrite)
            content = values
        elif api == "create_array":
            attrs = data.draw(st.one_of(st.none(), ATTRS), label="attributes")
            fn = lambda: g.create_array(name=name, shape=dims, chunks=chunks, dtype=dt,
                                        fill_value=fill, overwrite=overwrite,
                                        attributes=attrs)
            content = np.full(dims, fill, dtype=dt)
        else:  # g[name] = values: zarr-python 2's, overwrite=True, chunks chosen for it
            overwrite, fill = True, 0
            if self.array_under(self.tree_of(h), p) is not None:
                return

            def fn():
                g[name] = values
                return g[name]
            content = values
        expect = self.creation_error(h, p, overwrite, "array")

        def apply(a):
            assert isinstance(a, cs.Array) and a.path == p, a
            assert a.fill_value == fill, (a.fill_value, fill)
            assert a.dtype == dt and a.shape == dims, (a.dtype, a.shape)
            if api != "setitem":
                assert a.chunks == chunks, a.chunks
            self.remove_subtree(p)
            self.add_parents(p)
            self.new_array(p, content.copy(), fill, a.chunks, attrs)
            if len(self.handles) < 7 and h.snap is None:
                self.handles.append(Handle(a, p, f"{api}() result", ro=h.ro,
                                           meta=self.meta_of(self.model, p)))
        self.run(h, f"{api}({name!r}, shape={dims}, fill={fill}, overwrite={overwrite})",
                 fn, expect, apply, replaced=p if overwrite else None)

    @precondition(on("create_with_overwrite_below_an_array"))
    @rule(data=st.data(), api=st.sampled_from(["create_group", "require_group",
                                               "create_dataset", "zeros"]))
    def create_with_overwrite_below_an_array(self, data, api):
        """overwrite=True where an array is above the path (a chunk key's place: "c" in v3,
        "0" in v2): ContainsArrayError, and the array's chunks are left alone (README: a
        creation that fails leaves the store as it was)."""
        h = self.draw_group_handle(data, writable=True)
        tree = self.tree_of(h)
        arrays = [p for p, n in tree.items() if n["kind"] == "array" and under(p, h.path)
                  and p != h.path]
        if not arrays:
            return
        a = data.draw(st.sampled_from(sorted(arrays)), label="array")
        chunk_dir = "c" if self.fmt == 3 else "0"
        p = join(a, data.draw(st.sampled_from([chunk_dir, chunk_dir, "c/0", "a"]),
                              label="below"))
        name = p[len(h.path) + 1:] if h.path else p
        if api == "create_group":
            self._create_group(h, name, p, True, None)
        elif api == "require_group":
            self.run(h, f"require_group({name!r}, overwrite=True)",
                     lambda: h.obj.require_group(name, overwrite=True),
                     Expect(ReadOnlyError) if h.ro else Expect(ContainsArrayError))
        else:
            self._create_array(data, h, name, p, api, True, 0, 1)

    @precondition(on("require_group"))
    @rule(data=st.data())
    def require_group(self, data):
        h = self.draw_group_handle(data)
        name, p = self.draw_target(data, h, "require_group")
        tree = self.tree_of(h)
        there = self.kind_at(tree, p)
        if there == "group":
            expect = None
        elif there == "array":
            expect = Expect(ContainsArrayError, TypeError)
        elif h.ro:
            expect = Expect(ReadOnlyError)   # (checked before the path's parents)
        elif self.array_under(tree, p) is not None:
            expect = Expect(ContainsArrayError)
        elif h.snap is not None:
            expect = Expect(ReadOnlyError)
        else:
            expect = None

        def apply(g):
            assert isinstance(g, cs.Group) and g.path == p
            if there is None:
                self.add_parents(p)
                self.model[p] = {"kind": "group", "attrs": {}}
        self.run(h, f"require_group({name!r})", lambda: h.obj.require_group(name), expect,
                 apply)
        if expect is not None and there == "array":
            # both classes at once: zarr-python 2's and zarr-python 3's
            with pytest.raises(ContainsArrayError):
                h.obj.require_group(name)
            with pytest.raises(TypeError):
                h.obj.require_group(name)

    @precondition(on("require_dataset"))
    @rule(data=st.data(), other_shape=st.booleans(),
          asked=st.sampled_from(["same", "<i2", "<f8", "<i8"]))
    def require_dataset(self, data, other_shape, asked):
        h = self.draw_group_handle(data)
        name, p = self.draw_target(data, h, "require_dataset")
        tree = self.tree_of(h)
        there = self.kind_at(tree, p)
        live = self.live_through_snapshot(h, p)  # (the array there now is required)
        if there == "array" and self.opens_as(h, p) is None:
            shape, dt = (4,), self.dtype  # (listed by the snapshot, gone from the store)
            expect = Expect(ArrayNotFoundError, ContainsGroupError)
        elif there == "array":
            node = (self.model if live else tree)[p]
            stored = np.dtype(node["dtype"] if "dtype" in node else node["data"].dtype)
            shape = tuple(node["shape"] if "shape" in node else node["data"].shape)
            if other_shape:
                shape = (shape[0] + 1,) + shape[1:]
            dt = stored if asked == "same" else np.dtype(asked)
            ok = not other_shape and np.can_cast(dt, stored)
            expect = None if ok else Expect(TypeError)
        else:
            shape, dt = (4,), self.dtype
            expect = self.creation_error(h, p, False, "array")

        def apply(a):
            assert isinstance(a, cs.Array) and a.path == p
            if there is None:
                self.add_parents(p)
                self.new_array(p, np.zeros(shape, dtype=dt), 0, a.chunks)
            else:
                assert a.shape == shape
        self.run(h, f"require_dataset({name!r}, {shape}, {dt})",
                 lambda: h.obj.require_dataset(name, shape=shape, dtype=dt), expect, apply)

    # ------------------------------------------------------------------ deleting, moving
    @precondition(on("delete"))
    @rule(data=st.data())
    def delete(self, data):
        h = self.draw_group_handle(data, writable=data.draw(st.integers(0, 3), label="writable") > 0)
        name, p = self.draw_target(data, h, "delete", "existing")
        tree = self.tree_of(h)
        if h.ro:
            expect = Expect(ReadOnlyError)
        elif p not in tree:
            expect = Expect(KeyError)
        elif h.snap is not None:
            expect = Expect(ReadOnlyError)
        else:
            expect = None

        def fn():
            del h.obj[name]
        self.run(h, f"del h[{name!r}]", fn, expect, lambda _: self.remove_subtree(p))

    @precondition(on("move"))
    @rule(data=st.data())
    def move(self, data):
        h = self.draw_group_handle(data, writable=data.draw(st.integers(0, 3), label="writable") > 0)
        src_name, src = self.draw_target(data, h, "source", "existing")
        tree = self.tree_of(h)
        free = sorted(join(g, n) for g, node in tree.items() for n in NAMES
                      if node["kind"] == "group" and under(g, h.path)
                      and join(g, n) not in tree and not under(g, src))
        if free and data.draw(st.integers(0, 3), label="dest free") > 0:
            # a free place beside or above the source, most of the time
            dst = data.draw(st.sampled_from(free), label="dest")
            dst_name = dst[len(h.path) + 1:] if h.path else dst
        else:
            dst_name, dst = self.draw_target(data, h, "dest", "new")
        if src_name.startswith("/") or dst_name.startswith("/"):
            # move takes names relative to the group
            src_name, dst_name = src_name.lstrip("/"), dst_name.lstrip("/")
            if h.path:
                return
        tree = self.tree_of(h)
        if h.ro:
            expect = Expect(ReadOnlyError)
        elif dst == src or dst.startswith(src + "/"):
            expect = Expect(ValueError)
        elif src not in tree:
            expect = Expect(ValueError)   # PathNotFoundError: both FileNotFoundError and it
        elif dst in tree:
            expect = Expect(ValueError)   # ContainsArrayError ("something is there")
        elif self.array_under(tree, dst) is not None:
            expect = Expect(ContainsArrayError)
        elif h.snap is not None:
            expect = Expect(ReadOnlyError)
        else:
            expect = None

        def apply(_):
            moved = {q: self.model.pop(q) for q in [q for q in self.model if q
                                                     and under(q, src)]}
            self.add_parents(dst)
            for q, n in moved.items():
                self.model[dst + q[len(src):]] = n
        self.run(h, f"move({src_name!r}, {dst_name!r})",
                 lambda: h.obj.move(src_name, dst_name), expect, apply)

    @precondition(on("replace_hierarchy"))
    @rule(attrs=ATTRS, now=st.integers(0, 3))
    def replace_hierarchy(self, attrs, now):
        """open_group(store, mode="w") through the run's store: everything is replaced
        (one draw in four, so that hierarchies grow)."""
        if now:
            return
        before = self.versions()
        g = cs.open_group(self.store, mode="w", zarr_format=self.fmt, attributes=attrs)
        self.note(f"open_group(store, mode='w', attributes={attrs})")
        self.model = {"": {"kind": "group", "attrs": dict(attrs)}}
        self.tell(before)
        self.consolidated = None
        self.handles[0] = Handle(g, "", "open_group(store, mode='w')")

    # ------------------------------------------------------------------ attributes
    @precondition(on("attrs_change"))
    @rule(data=st.data(), op=st.sampled_from(["set", "update", "del", "put"]),
          key=st.sampled_from(ATTR_KEYS), value=ATTR_VALUES, new=ATTRS)
    def attrs_change(self, data, op, key, value, new):
        # a handle whose node is there (see attrs_of_a_deleted_group)
        hs = [h for h in self.handles if h.path in self.tree_of(h)
              and (h.kind == "group") == (self.tree_of(h)[h.path]["kind"] == "group")]
        if not hs:
            return
        h = data.draw(st.sampled_from(hs), label="attrs handle")
        node = self.tree_of(h)[h.path]
        attrs = h.obj.attrs
        if op == "set":
            fn, what = (lambda: attrs.__setitem__(key, value)), f"attrs[{key!r}] = {value!r}"
            change = lambda d: d.__setitem__(key, copy.deepcopy(value))
        elif op == "update":
            fn, what = (lambda: attrs.update(new)), f"attrs.update({new!r})"
            change = lambda d: d.update(copy.deepcopy(new))
        elif op == "del":
            fn, what = (lambda: attrs.__delitem__(key)), f"del attrs[{key!r}]"
            change = lambda d: d.__delitem__(key)
        else:
            fn, what = (lambda: attrs.put(new)), f"attrs.put({new!r})"
            change = lambda d: (d.clear(), d.update(copy.deepcopy(new)))
        if h.ro:
            expect = Expect(ReadOnlyError)
        elif op == "del" and key not in node["attrs"]:
            expect = Expect(KeyError)     # (before the write a consolidated view refuses)
        elif h.snap is not None:
            expect = Expect(ReadOnlyError)
        else:
            expect = None
        self.run(h, what, fn, expect, lambda _: change(node["attrs"]))

    @precondition(on("attrs_of_a_deleted_group"))
    @rule(data=st.data(), key=st.sampled_from(ATTR_KEYS))
    def attrs_of_a_deleted_group(self, data, key):
        """Setting attributes through a group handle whose group was deleted by another
        handle: refused (the group is gone), and nothing is written: no orphan attributes
        document for a node made at that path later to inherit."""
        hs = [h for h in self.handles if h.kind == "group" and h.snap is None and not h.ro
              and h.path not in self.model]
        if not hs:
            return
        h = data.draw(st.sampled_from(hs), label="orphan handle")
        self.run(h, f"attrs[{key!r}] = 1 (group gone)",
                 lambda: h.obj.attrs.__setitem__(key, 1), Expect(GroupNotFoundError))

    # ------------------------------------------------------------------ array data
    def current_arrays(self, writable=True):
        """Array handles whose cached metadata is the array's now (written through these)."""
        out = []
        for h in self.handles:
            if h.kind != "array":
                continue
            cur = self.model.get(h.path)
            if cur is None or cur["kind"] != "array" or cur["uid"] != h.meta[0] \
                    or cur["data"].shape != h.meta[1]:
                continue
            if writable and h.ro:
                continue
            out.append(h)
        return out

    @precondition(on("write_data"))
    @rule(data=st.data())
    def write_data(self, data):
        hs = self.current_arrays(writable=False)
        if not hs:
            return
        h = data.draw(st.sampled_from(hs), label="array handle")
        node = self.model[h.path]
        shape = node["data"].shape
        sel = []
        for n in shape:
            a = data.draw(st.integers(0, n), label="start")
            b = data.draw(st.integers(a, n), label="stop")
            sel.append(slice(a, b))
        sel = tuple(sel)
        vals = self.values(node["data"][sel].shape)

        def fn():
            h.obj[sel] = vals

        def apply(_):
            node["data"][sel] = vals
        self.run(h, f"h[{sel}] = {vals.tolist()}", fn,
                 Expect(ReadOnlyError) if h.ro else None, apply)

    @precondition(on("resize"))
    @rule(data=st.data())
    def resize(self, data):
        hs = self.current_arrays(writable=False)
        if not hs:
            return
        h = data.draw(st.sampled_from(hs), label="array handle")
        node = self.model[h.path]
        old = node["data"]
        shape = tuple(data.draw(st.integers(0, 7), label="new len") for _ in old.shape)

        def apply(_):
            new = np.full(shape, node["fill"], dtype=old.dtype)
            common = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, shape))
            new[common] = old[common]
            node["data"] = new
            h.meta = (h.meta[0], shape) + h.meta[2:]
        self.run(h, f"resize{shape}", lambda: h.obj.resize(*shape),
                 Expect(ReadOnlyError) if (h.ro or h.snap is not None) else None, apply)

    # ------------------------------------------------------------------ consolidated metadata
    @precondition(on("consolidate"))
    @rule(how=st.sampled_from(["store", "path", "root group"]))
    def consolidate(self, how):
        src = {"store": self.store, "path": self.path or self.store,
               "root group": self.handles[0].obj}[how]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = cs.consolidate_metadata(src)
        self.note(f"consolidate_metadata({how})")
        if g.store is not self.store:
            self.stores.append(g.store)
        self.consolidated = snapshot(self.model)
        self.snap_changes.append(set())
        if len(self.handles) < 7:
            self.handles.append(Handle(g, "", "consolidate_metadata() result",
                                       snap=self.view_of_snapshot(),
                                       changed=self.snap_changes[-1]))

    def view_of_snapshot(self):
        """What a handle opened through the consolidated metadata now sees."""
        view = dict(self.consolidated)
        if self.fmt == 3:  # the root's own document is read at opening
            view[""] = {"kind": "group", "attrs": copy.deepcopy(self.model[""]["attrs"])}
        return view

    @precondition(lambda self: self.ready and len(self.handles) < 7
                  and "open_consolidated" not in DISABLED)
    @rule(how=st.sampled_from(["open_consolidated", "open_consolidated r",
                               "open_group use_consolidated"]),
          fresh=st.booleans())
    def open_consolidated(self, how, fresh):
        src = self._second_store() if fresh else self.store
        if how == "open_consolidated":
            fn = lambda: cs.open_consolidated(src)
        elif how == "open_consolidated r":
            fn = lambda: cs.open_consolidated(src, mode="r")
        else:
            fn = lambda: cs.open_group(src, mode="r+", use_consolidated=True)
        self._open_consolidated(how, fn)

    @precondition(lambda self: self.ready and len(self.handles) < 7
                  and "open_with_use_consolidated" not in DISABLED)
    @rule(mode=st.sampled_from(["r", "r+", "a"]), fresh=st.booleans())
    def open_with_use_consolidated(self, mode, fresh):
        """open(store, mode=..., use_consolidated=True): the group, through its consolidated
        metadata (zarr-python 3's open passes the keyword on to open_group)."""
        src = self._second_store() if fresh else self.store
        self._open_consolidated(f"open {mode} use_consolidated",
                                lambda: cs.open(src, mode=mode, use_consolidated=True))

    def _open_consolidated(self, how, fn):
        if self.consolidated is None:
            self.run(self.handles[0], how, fn, Expect(ConsolidatedMetadataNotFoundError,
                                                      ValueError))
            return
        g = self.run(self.handles[0], how, fn, None)
        assert isinstance(g, cs.Group), g
        self.handles.append(Handle(g, "", how, ro=" r " in how + " ",
                                   snap=self.view_of_snapshot(),
                                   changed=self.snap_changes[-1]))

    # ------------------------------------------------------------------ reads
    @precondition(on("read_paths"))
    @rule(data=st.data())
    def read_paths(self, data):
        """`in`, [], get() and the recursive listings of a random handle."""
        h = self.draw_group_handle(data)
        tree = self.tree_of(h)
        for _ in range(3):
            name, p = self.draw_target(data, h, "read")
            kind = self.kind_at(tree, p)
            assert (name in h.obj) == (kind is not None), (h, name, kind)
            if kind is None:
                with pytest.raises(KeyError):
                    h.obj[name]
                assert h.obj.get(name) is None
            elif self.opens_as(h, p) is None:  # (listed by the snapshot, gone)
                with pytest.raises((ArrayNotFoundError, ContainsGroupError)):
                    h.obj[name]
            else:
                assert isinstance(h.obj[name], cs.Group if kind == "group" else cs.Array)
        if self.kind_at(tree, h.path) != "group":
            return
        below = sorted(q[len(h.path) + 1:] if h.path else q for q in tree
                       if q and under(q, h.path) and q != h.path)
        # (what opens: a snapshot's array gone from the store since is left out)
        opened = [q for q in below if self.opens_as(h, join(h.path, q)) is not None]
        seen = []
        h.obj.visit(seen.append)
        assert seen == sorted(opened, key=lambda q: q.split("/")), (h, seen, opened)
        rec = sorted(q.rsplit("/", 1)[-1] for q in below
                     if tree[join(h.path, q)]["kind"] == "array")
        assert sorted(h.obj.array_keys(recurse=True)) == rec
        members = [k for k, _ in h.obj.members(max_depth=None)]
        assert sorted(members) == sorted(opened), (h, sorted(members))
        assert h.obj.nmembers(max_depth=None) == len(opened)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def handles_agree_with_the_model(self):
        if not self.ready:
            return
        for h in self.handles:
            if h.kind == "group":
                self.check_group(h)
            else:
                self.check_array(h)

    def check_group(self, h):
        tree = self.tree_of(h)
        node = tree.get(h.path)
        g = h.obj
        kids = children(tree, h.path) if node is not None and node["kind"] == "group" else []
        names = [n for n, _ in kids]
        where = f"{h!r}; {self.log[0]}"
        assert g.keys() == names, (where, g.keys(), names)
        assert list(g) == names, where
        assert len(g) == len(names), where
        assert g.group_keys() == [n for n, k in kids if k == "group"], where
        assert g.array_keys() == [n for n, k in kids if k == "array"], where
        assert g.attrs.asdict() == (node["attrs"] if node is not None else {}), \
            (where, g.attrs.asdict(), node)
        opened = [(n, self.opens_as(h, join(h.path, n))) for n, _ in kids]
        assert [(n, type(m)) for n, m in g.items()] == \
            [(n, cs.Group if k == "group" else cs.Array) for n, k in opened if k], where
        assert [n for n, _ in g.groups()] == g.group_keys(), where
        assert [n for n, _ in g.arrays()] == [n for n, k in opened if k == "array"], where
        for n, kind in opened:
            assert n in g, (where, n)
            if kind is None:  # (listed by the snapshot; gone from the store)
                with pytest.raises((ArrayNotFoundError, ContainsGroupError)):
                    g[n]
                continue
            m = g[n]
            assert isinstance(m, cs.Group if kind == "group" else cs.Array), (where, n, m)
            p = join(h.path, n)
            # (an array opened from the store: its attributes there too)
            attrs = (self.model if self.live_through_snapshot(h, p) else tree)[p]["attrs"]
            assert m.attrs.asdict() == attrs, (where, n, m.attrs.asdict())
            if kind == "array":
                self.check_values(m, self.opened_meta(h, p), f"{where} member {n!r}")
        if node is not None and node["kind"] == "group":
            name = "/" + h.path
            text = tree_text(tree, h.path, name)
            assert str(g.tree()) == text, (where, str(g.tree()), text)

    def check_values(self, a, meta, where, path=None):
        """a's values as its metadata meta reads the model's node at path (a.path unless
        given: a handle opened from its own directory has the path "")."""
        expected = view_values(meta, self.model.get(a.path if path is None else path))
        assert a.shape == meta[1], (where, a.shape, meta)
        if expected is None:
            return
        got = a[...]
        assert got.dtype == expected.dtype, (where, got.dtype, expected.dtype)
        np.testing.assert_array_equal(got, expected, err_msg=where)

    def check_array(self, h):
        where = f"{h!r}; {self.log[0]}"
        tree = self.tree_of(h)
        if h.snap is not None and not h.live:
            attrs = tree[h.path]["attrs"]
        else:
            node = self.model.get(h.path)
            attrs = node["attrs"] if node is not None else {}
        assert h.obj.attrs.asdict() == attrs, (where, h.obj.attrs.asdict(), attrs)
        if h.told:
            # it reads the metadata again: the array there now, or an error where none is
            if self.kind_at(self.model, h.path) != "array":
                with pytest.raises((ArrayNotFoundError, ContainsGroupError)):
                    h.obj[...]
                return
            h.meta, h.told = self.meta_of(self.model, h.path), False
        self.check_values(h.obj, h.meta, where, h.path)

    @invariant()
    def store_holds_exactly_the_model(self):
        if not self.ready:
            return
        required, optional = set(), set()
        for p, n in self.model.items():
            pre = p + "/" if p else ""
            if self.fmt == 2:
                required.add(pre + (".zgroup" if n["kind"] == "group" else ".zarray"))
                (required if n["attrs"] else optional).add(pre + ".zattrs")
            else:
                required.add(pre + "zarr.json")
            if n["kind"] == "array":
                for coords in stored_chunks(n):
                    if self.fmt == 2:
                        required.add(pre + ".".join(map(str, coords)))
                    else:
                        required.add(pre + "c/" + "/".join(map(str, coords)))
        if self.fmt == 2 and self.consolidated is not None:
            required.add(".zmetadata")
        keys = set(self.store.keys())
        assert required <= keys, (f"missing {sorted(required - keys)}", self.log[0])
        extra = keys - required - optional
        assert not extra, (f"orphan keys {sorted(extra)}", self.log[0])

    @invariant()
    def zarr_python_reads_the_same(self):
        if not self.ready or self.kind != "directory":
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zg = zarr.open_group(self.path, mode="r", zarr_format=self.fmt,
                                 use_consolidated=False)
            for p, n in self.model.items():
                node = zg[p] if p else zg
                where = f"zarr-python at {p!r}; {self.log[0]}"
                assert dict(node.attrs) == n["attrs"], (where, dict(node.attrs), n["attrs"])
                if n["kind"] == "group":
                    assert isinstance(node, zarr.Group), where
                    kids = children(self.model, p)
                    assert sorted(node.group_keys()) == [k for k, t in kids if t == "group"], \
                        (where, sorted(node.group_keys()))
                    assert sorted(node.array_keys()) == [k for k, t in kids if t == "array"], \
                        (where, sorted(node.array_keys()))
                else:
                    assert isinstance(node, zarr.Array), where
                    assert node.shape == n["data"].shape, where
                    assert node.fill_value == n["fill"], (where, node.fill_value)
                    np.testing.assert_array_equal(node[...], n["data"], err_msg=where)
            if self.consolidated is None:
                return
            zc = zarr.open_group(self.path, mode="r", zarr_format=self.fmt,
                                 use_consolidated=True)
            members = dict(zc.members(max_depth=None))
            snap = self.consolidated
            assert sorted(members) == sorted(p for p in snap if p), \
                (f"zarr-python's consolidated members; {self.log[0]}", sorted(members))
            for p, m in members.items():
                assert dict(m.attrs) == snap[p]["attrs"], (p, dict(m.attrs))
                assert isinstance(m, zarr.Group if snap[p]["kind"] == "group" else
                                  zarr.Array), p


ROOT_OPENERS = ["same r+", "same a, zarr_format", "same r", "second store r+", "path a",
                "Group(store)"]


def _machine(fmt):
    return type(f"HierarchyMachine_v{fmt}", (HierarchyMachine,), {"formats": [fmt]})


@pytest.mark.parametrize("fmt", FORMATS)
def test_hierarchy_model(fmt):
    """One format per test (so each gets its examples); soak: until the time is spent."""
    run_machine(_machine(fmt), CI_SETTINGS, SOAK_SETTINGS, len(FORMATS))
