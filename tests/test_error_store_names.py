"""An error that names a plain mapping store names it in one short line (its type and key
count), never by its repr, which printed every key and value: 451 KB at 963 keys (issue 29)."""

from __future__ import annotations

from collections import OrderedDict

import pytest

import chunkstore as cs
from chunkstore.errors import store_name


@pytest.fixture(params=["dict", "OrderedDict", "LRUStoreCache(dict)"])
def big(request):
    d = {} if request.param != "OrderedDict" else OrderedDict()
    cs.zeros(2000, chunks=1, store=d)[...] = 1
    store = cs.LRUStoreCache(d, max_size=None) if request.param.startswith("LRU") else d
    return d, store


def _errors(d, store):
    r = cs.open_array(store, mode="r")
    yield cs.ArrayNotFoundError, lambda: cs.open_array(store, mode="r", path="nope")
    yield cs.GroupNotFoundError, lambda: cs.open_group(store, mode="r", path="nope")
    yield cs.ContainsArrayError, lambda: cs.zeros(10, chunks=1, store=store)
    yield cs.ReadOnlyError, lambda: r.resize(5)
    yield cs.ReadOnlyError, lambda: r.__setitem__(0, 1)
    yield cs.ConsolidatedMetadataNotFoundError, lambda: cs.open_consolidated(store)
    d["5"] = b"not a chunk"
    yield cs.ChunkDecodeError, lambda: cs.open_array(store, mode="r")[5]
    del d["6"]
    yield cs.ChunkNotFoundError, lambda: cs.open_array(store, mode="r",
                                                       missing_chunks="error")[6]


def test_errors_name_a_plain_mapping_store_in_one_short_line(big):
    d, store = big
    seen = 0
    for error, call in _errors(d, store):
        with pytest.raises(error) as info:
            call()
        msg = str(info.value)
        assert len(msg) < 300, (error.__name__, msg[:300])
        assert f"of {len(d)} keys" in msg or "keys at" in msg, msg
        seen += 1
    assert seen == 8


def test_store_name():
    assert store_name({"a": b"1", "b": b"2"}).startswith("<dict of 2 keys at 0x")
    m = cs.MemoryStore()
    assert store_name(m) == repr(m)  # chunkstore's own stores name themselves shortly


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_consolidated_without_it_says_what_was_looked_for(fmt):
    """Issue 29: a v2 store without .zmetadata said "no group metadata 'zarr.json'"."""
    d = {}
    cs.group(store=d, zarr_format=fmt).zeros("a", shape=3)
    with pytest.raises(cs.ConsolidatedMetadataNotFoundError) as info:
        cs.open_consolidated(d)
    msg = str(info.value)
    assert "'.zmetadata'" in msg and "consolidated_metadata" in msg
    assert ("(absent)" if fmt == 2 else "(it has none)") in msg


def test_creation_functions_name_the_argument_they_set_themselves():
    """Issue 29: zeros(fill_value=...) and array(data, shape=...) leaked "create() got
    multiple values for keyword argument"."""
    import numpy as np
    for call, name in ((lambda: cs.zeros(3, fill_value=1), "zeros"),
                       (lambda: cs.ones(3, fill_value=1), "ones"),
                       (lambda: cs.empty(3, fill_value=1), "empty")):
        with pytest.raises(TypeError, match=rf"^{name}\(\) sets fill_value itself"):
            call()
    with pytest.raises(TypeError, match=r"array\(\) takes its shape from data \(\(3,\)\)"):
        cs.array(np.arange(3), shape=(4,))
    np.testing.assert_array_equal(cs.array(np.arange(3), shape=3)[...], np.arange(3))


@pytest.mark.parametrize("how", ["open_array", "create", "open_group", "group"])
def test_a_lock_directory_inside_the_store_is_refused_before_anything_is_written(tmp_path,
                                                                                 how):
    """Issue 29: the ValueError came after .zarray and lock files were in the store."""
    import os
    path = str(tmp_path / "a.zarr")
    sync = cs.ProcessSynchronizer(os.path.join(path, "locks"))  # (makes that directory)
    calls = {"open_array": lambda: cs.open_array(path, mode="w", shape=3, synchronizer=sync),
             "create": lambda: cs.create(3, store=path, synchronizer=sync),
             "open_group": lambda: cs.open_group(path, mode="w", synchronizer=sync),
             "group": lambda: cs.group(path, synchronizer=sync)}
    with pytest.raises(ValueError, match="inside the store"):
        calls[how]()
    assert os.listdir(path) == ["locks"] and os.listdir(os.path.join(path, "locks")) == []


def test_an_unknown_codec_name_offers_the_close_ones():
    """Issue 29: the error listed every known name (520 characters)."""
    with pytest.raises(ValueError, match=r"unknown codec name 'zstdd'; did you mean 'zstd'\?$"):
        cs.create_array({}, shape=3, dtype="i4", compressors=["zstdd"])
    with pytest.raises(ValueError) as info:
        cs.create_array({}, shape=3, dtype="i4", compressors=["qwertyuiop"])
    assert len(str(info.value)) < 150


@pytest.mark.parametrize("spelling", [{"name": "zstdd"}, {"id": "zstdd"}, "zstdd"])
def test_every_spelling_of_an_unknown_codec_offers_the_close_ones(spelling):
    """A v3 codec document and a numcodecs config with a typo get the same hint as a name."""
    with pytest.raises(ValueError, match=r"'zstdd'.*; did you mean 'zstd'\?$") as info:
        cs.create_array({}, shape=3, dtype="i4", zarr_format=3, compressors=[spelling])
    assert len(str(info.value)) < 150
    with pytest.raises(ValueError, match=r"did you mean 'zstd'\?$"):
        cs.create(3, store={}, zarr_format=3, codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                                                         {"name": "zstdd"}])
