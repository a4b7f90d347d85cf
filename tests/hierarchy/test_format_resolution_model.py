"""Which node an opener finds where Zarr v2 and v3 documents lie at one path, as other tools
leave them (zarr-python's migration, zarr-python 3's mode "a"): a model-based test. Random
sequences put and remove a node of either kind in either format at one path (written beside
each other as another tool would: chunkstore itself refuses to create one format over the
other); after each step every opener without ``zarr_format`` (``open``, ``open_array``,
``open_group``, ``Array``/``Group``), and zarr-python 3, must agree with
the model: the v3 node where there is one, else the v2 node, with its own values, and
zarr-python 3's ZarrUserWarning exactly where a v2 document of the same kind lies beside
it. ``zarr_format=2``/``3`` opens that format's node, and so do that handle's copies
(pickled, views, ``with_config``: they opened the v3 node, before they were given the format
found). Through the v2 root group, as through zarr-python 3's, the member is the v2 node
(where there is none, the v3 node: zarr-python 3 sees none)."""

from __future__ import annotations

import pickle
import shutil
import warnings

import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.errors import ZarrUserWarning
from chunkstore.storage import DirectoryStore

DOCS = {2: (".zarray", ".zgroup", ".zattrs"), 3: ("zarr.json",)}

STEPS = st.lists(st.tuples(st.sampled_from(["put", "remove"]), st.sampled_from([2, 3]),
                           st.sampled_from(["array", "group"]), st.integers(1, 9)),
                 min_size=1, max_size=8)


def _put(root, fmt, kind, value):
    """A node of kind in Zarr format fmt at root/x (chunks and documents), written through
    a scratch store and copied in, replacing that format's node there."""
    scratch = root.parent / f"scratch-{fmt}.zarr"
    shutil.rmtree(scratch, ignore_errors=True)
    if kind == "array":
        a = cs.open_array(str(scratch), mode="w", shape=(3,), chunks=(2,), dtype="i4",
                          zarr_format=fmt, fill_value=-value)
        a[:2] = value  # one chunk written, one left to the fill value
    else:
        cs.open_group(str(scratch), mode="w", zarr_format=fmt).attrs["v"] = value
    _remove(root, fmt)
    dst, src = DirectoryStore(str(root / "x")), DirectoryStore(str(scratch))
    dst.setitems({k: src[k] for k in src})


def _remove(root, fmt):
    """Every document and chunk of the format fmt's node at root/x (v2 chunk keys "0",
    "1"; v3 "c/0", "c/1")."""
    st_ = DirectoryStore(str(root / "x"))
    for k in list(st_):
        if k in DOCS[fmt] or (k.isdigit() if fmt == 2 else k.startswith("c/")):
            del st_[k]


def _values(node):
    if isinstance(node, cs.Group):
        return ("group", node.attrs["v"])
    return ("array", node[:].tolist())


def _copies(node):
    """What makes another handle of node: a pickle (dask workers), and an array's view,
    astype view and with_config handle."""
    yield pickle.loads(pickle.dumps(node))
    if isinstance(node, cs.Array):
        yield node.view()
        if node.metadata.zarr_format == 2:  # (astype views: Zarr v2 filters only)
            yield node.astype("i8")
        yield node.with_config({"write_empty_chunks": True})


def _expected(kind, value):
    return ("array", [value, value, -value]) if kind == "array" else ("group", value)


def _agree_as_member(root, model):
    """Through the (v2) root group, x is the v2 node, as zarr-python 3 traverses a hierarchy
    (it showed the v3 node); where there is none, the v3 node (zarr-python 3 sees no member:
    README, Differences), or no member."""
    g = cs.open_group(str(root), mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zg = zarr.open_group(str(root), mode="r")
        theirs = list(zg)
    if 2 not in model:
        assert theirs == []
        if 3 not in model:
            assert "x" not in g and list(g) == []
            with pytest.raises(KeyError):
                g["x"]
            return
        kind, value = model[3]
        assert "x" in g and list(g) == ["x"]
        node = g["x"]
        assert node.metadata.zarr_format == 3 and _values(node) == _expected(kind, value)
        return
    kind, value = model[2]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        node = g["x"]
    assert not [w for w in rec if issubclass(w.category, ZarrUserWarning)]
    assert node.metadata.zarr_format == 2 and _values(node) == _expected(kind, value)
    assert "x" in g and list(g) == theirs == ["x"]
    assert (g.array_keys() if kind == "array" else g.group_keys()) == ["x"]
    zx = zg["x"]
    got = ("group", zx.attrs["v"]) if isinstance(zx, zarr.Group) else ("array", zx[:].tolist())
    assert got == _expected(kind, value)


def _agree(root, model):
    p = str(root / "x")
    want_fmt = 3 if 3 in model else 2 if 2 in model else None
    if want_fmt is None:
        with pytest.raises(cs.errors.PathNotFoundError):
            cs.open(p, mode="r")
        return
    kind, value = model[want_fmt]
    warns = want_fmt == 3 and model.get(2, (None,))[0] == kind
    openers = [lambda: cs.open(p, mode="r"), lambda: cs.open(p, mode="r+"),
               lambda: cs.open(p, mode="a"),
               (lambda: cs.open_array(p, mode="r")) if kind == "array" else
               (lambda: cs.open_group(p, mode="r")),
               (lambda: cs.Array(DirectoryStore(p))) if kind == "array" else
               (lambda: cs.Group(DirectoryStore(p)))]
    for opener in openers:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            node = opener()
        ours = [w for w in rec if issubclass(w.category, ZarrUserWarning)]
        assert len(ours) == (1 if warns else 0), (opener, [str(w.message) for w in rec])
        assert node.metadata.zarr_format == want_fmt
        assert _values(node) == _expected(kind, value)
    for fmt, (k, v) in model.items():  # each format's node, asked for, and its copies
        node = (cs.open_array if k == "array" else cs.open_group)(p, mode="r", zarr_format=fmt)
        assert _values(node) == _expected(k, v)
        for copy in _copies(node):  # (they opened the v3 node where both lay)
            assert copy.metadata.zarr_format == fmt
            assert _values(copy) == _expected(k, v)
    _agree_as_member(root, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = zarr.open(p, mode="r")  # zarr-python 3 finds the same node
    assert theirs.metadata.zarr_format == want_fmt
    got = ("group", theirs.attrs["v"]) if isinstance(theirs, zarr.Group) else \
        ("array", theirs[:].tolist())
    assert got == _expected(kind, value)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_openers_agree_on_the_node_where_both_formats_lie(tmp_path_factory, steps):
    root = tmp_path_factory.mktemp("both") / "root.zarr"
    cs.open_group(str(root), mode="w", zarr_format=2)
    model: dict[int, tuple[str, int]] = {}
    for op, fmt, kind, value in steps:
        if op == "put":
            _put(root, fmt, kind, value)
            model[fmt] = (kind, value)
        else:
            _remove(root, fmt)
            model.pop(fmt, None)
        _agree(root, model)
