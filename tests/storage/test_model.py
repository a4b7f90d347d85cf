"""Property test: random operation sequences behave like a dict model on every local store."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.storage import (
    DirectoryStore,
    LMDBStore,
    MemoryStore,
    SQLiteStore,
    ZipStore,
    listdir,
)

SEGMENT = st.sampled_from(["a", "b", "0", "0.0", ".zarray", "ü", "a.b"])
KEY = st.lists(SEGMENT, min_size=1, max_size=3).map("/".join)
VALUE = st.binary(max_size=40)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), KEY, VALUE),
        st.tuples(st.just("del"), KEY),
        st.tuples(st.just("setitems"), st.dictionaries(KEY, VALUE, max_size=4)),
        st.tuples(st.just("delitems"), st.lists(KEY, max_size=4)),
        st.tuples(st.just("rmdir"), st.one_of(st.just(""), KEY)),
    ),
    max_size=25,
)

MAKERS = {
    "memory": lambda d: MemoryStore(),
    "directory": lambda d: DirectoryStore(d / "d"),
    "zip": lambda d: ZipStore(d / "z.zip"),
    "sqlite": lambda d: SQLiteStore(d / "s.sqlite"),
    "lmdb": lambda d: LMDBStore(d / "l.lmdb", map_size=2**20),
}


def conflicts(model: dict, key: str) -> bool:
    """A key cannot be both a value and a "directory" (file systems forbid it)."""
    parts = key.split("/")
    prefixes = {"/".join(parts[:i]) for i in range(1, len(parts))}
    return any(p in model for p in prefixes) or any(k.startswith(key + "/") for k in model)


def apply(store, model: dict, op) -> None:
    kind = op[0]
    if kind == "set":
        _, k, v = op
        if conflicts(model, k):
            return
        store[k] = v
        model[k] = v
    elif kind == "del":
        _, k = op
        if k in model:
            del store[k]
            del model[k]
        else:
            with pytest.raises(KeyError):
                del store[k]
    elif kind == "setitems":
        items = {}
        for k, v in op[1].items():
            if not conflicts({**model, **items}, k):
                items[k] = v
        store.setitems(items)
        model.update(items)
    elif kind == "delitems":
        store.delitems(op[1])
        for k in op[1]:
            model.pop(k, None)
    elif kind == "rmdir":
        p = op[1]
        store.rmdir(p)
        for k in [k for k in model if not p or k.startswith(p + "/")]:
            del model[k]


@pytest.mark.parametrize("name", list(MAKERS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, probe=st.lists(KEY, max_size=5))
def test_behaves_like_a_dict(name, ops, probe):
    d = Path(tempfile.mkdtemp(prefix="cs-model-"))
    store = MAKERS[name](d)
    try:
        model: dict[str, bytes] = {}
        for op in ops:
            apply(store, model, op)
        assert dict(store.items()) == model
        assert len(store) == len(model)
        assert store.getitems(list(model) + probe) == model
        for prefix in [""] + probe:
            assert store.listdir(prefix) == listdir(model, prefix), prefix
            assert store.getsize(prefix) == sum(
                len(v) for k, v in model.items() if not prefix or k == prefix or k.startswith(prefix + "/")
            )
        for k in probe:
            assert (k in store) == (k in model)
    finally:
        store.close()
        shutil.rmtree(d, ignore_errors=True)
