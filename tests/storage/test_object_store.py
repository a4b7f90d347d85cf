"""ObjectStore over obstore (an optional extra): the store contract, arrays through it, and
zarr-python 3 reading what it writes."""

import pickle
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ReadOnlyError
from chunkstore.storage import ObjectStore

obstore = pytest.importorskip("obstore")
from obstore.store import LocalStore as ObsLocal  # noqa: E402
from obstore.store import MemoryStore as ObsMemory  # noqa: E402


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    if request.param == "memory":
        return ObjectStore(ObsMemory())
    return ObjectStore(ObsLocal(str(tmp_path), mkdir=True))


def test_get_partial_refuses_a_negative_length_as_every_store(store):
    """ObjectStore built its spans itself and read a negative length as b"" where every
    other store raises (base.byte_span)."""
    store["k"] = bytes(range(10))
    with pytest.raises(ValueError, match="negative length -1"):
        store.get_partial("k", [(2, -1)])
    assert store.get_partial("k", [(2, 3), (8, 5), (12, 1)]) == [b"\x02\x03\x04",
                                                                 b"\x08\x09", b""]


def test_mapping_contract(store):
    store["a/b"] = b"123"
    store["a/c/d"] = b"4"
    store["e"] = b""
    assert store["a/b"] == b"123" and "a/b" in store and "zz" not in store
    with pytest.raises(KeyError):
        store["zz"]
    with pytest.raises(KeyError):
        del store["zz"]
    assert sorted(store) == ["a/b", "a/c/d", "e"] and len(store) == 3
    assert store.listdir("") == ["a", "e"] and store.listdir("a") == ["b", "c"]
    assert store.getitems(["a/b", "zz", "a/c/d"]) == {"a/b": b"123", "a/c/d": b"4"}
    assert store.get_partial("a/b", [(0, 1), (1, 5), (2, 0), (-1, None)]) == \
        [b"1", b"23", b"", b"3"]
    assert store.getsize("a") == 4
    del store["a/b"]
    assert "a/b" not in store
    store.rmdir("a")
    assert sorted(store) == ["e"]
    with pytest.raises(ValueError):
        store["../x"] = b"1"


def test_read_only_refuses_writes():
    s = ObjectStore(ObsMemory(), read_only=True)
    with pytest.raises(ReadOnlyError):
        s["a"] = b"1"


def test_arrays_through_object_store(tmp_path):
    zarr = pytest.importorskip("zarr", minversion="3")
    s = ObjectStore(ObsLocal(str(tmp_path), mkdir=True))
    data = np.arange(1000, dtype="i4").reshape(20, 50)
    z = cs.create_array(s, name="a", shape=data.shape, chunks=(7, 9), dtype="i4")
    z[...] = data
    np.testing.assert_array_equal(cs.open_array(s, path="a", mode="r")[...], data)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"))[...], data)
    z2 = pickle.loads(pickle.dumps(z))
    np.testing.assert_array_equal(z2[3:9, 4:40], data[3:9, 4:40])
    sh = cs.create_array(s, name="sh", shape=(40,), chunks=(5,), shards=(20,), dtype="u2")
    sh[:] = np.arange(40)
    np.testing.assert_array_equal(cs.open_array(s, path="sh")[7:33], np.arange(7, 33))


@pytest.mark.parametrize("kind", ["local", "memory"])
@pytest.mark.parametrize("shards", [None, (100,)])
def test_wrappers_made_apart_on_one_location_share_their_handles_locks(tmp_path, kind,
                                                                        shards):
    """ObjectStore wrappers made apart on one location (two LocalStores of one directory,
    or one obstore MemoryStore wrapped twice, as from_url twice on one s3:// URL) give
    handles that share in-process locks: threads writing disjoint elements of one chunk
    through them lose nothing (49-51 of 100 elements were lost with LocalStores, 22-24
    with the MemoryStore; an s3:// URL opened per thread lost 61-66)."""
    import threading

    from obstore.store import LocalStore
    from obstore.store import MemoryStore as ObsMemory

    from chunkstore.storage import protocol
    if kind == "local":
        def make():
            return ObjectStore(LocalStore(str(tmp_path)))
    else:
        inner = ObsMemory()

        def make():
            return ObjectStore(inner)
    assert protocol.location(make()) == protocol.location(make())
    cs.create_array(make(), shape=(100,), chunks=(50,) if shards else (100,), shards=shards,
                    dtype="i4", fill_value=0)

    def writer(k):
        z = cs.open_array(make(), mode="r+")
        for i in range(k, 100, 4):
            z[i] = i + 1

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(cs.open_array(make(), mode="r")[...], np.arange(1, 101))


def test_a_key_below_a_file_of_a_local_store_is_absent(tmp_path):
    """A LocalStore answers "Not a directory" for a key below a file; that key is absent
    (format probes ask for x/zarr.json/zarr.json), so consolidating a hierarchy with a
    nested v3 group works (it raised OSError)."""
    from obstore.store import LocalStore
    st = ObjectStore(LocalStore(str(tmp_path)))
    root = cs.open_group(st, mode="w", zarr_format=3)
    root.create_group("x").create_array("a", shape=(3,), dtype="i4")[...] = [1, 2, 3]
    assert "x/zarr.json/zarr.json" not in st
    with pytest.raises(KeyError):
        st["x/zarr.json/zarr.json"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cs.consolidate_metadata(st)
    np.testing.assert_array_equal(cs.open_consolidated(st, mode="r")["x/a"][...], [1, 2, 3])


def test_keys_below_a_file_of_a_local_store_are_absent_in_batches_and_listings(tmp_path):
    """As a single read: batch reads, deletes and listings of keys below a file (a v2 chunk
    key "a/0" where a group "a/0" was) find nothing there instead of raising OSError; so an
    array handle opened before its hierarchy was replaced reads the fill value, as on a
    DirectoryStore."""
    from obstore.store import LocalStore
    st = ObjectStore(LocalStore(str(tmp_path)))
    st["a"] = b"1"
    assert st.getitems(["a/b", "a/c", "a"]) == {"a": b"1"}
    st.delitems(["b", "a/a"])
    st.rmdir("a/a")
    assert st.listdir("a/a") == [] and list(st.keys_under("a/a")) == []
    assert st.getsize("a/a") == 0 and sorted(st) == ["a"]
    st["d/e"] = b"2"
    st.delitems(["d", "a/a"])   # "d" is a directory here: no value, so nothing to delete
    assert sorted(st) == ["a", "d/e"]
    with pytest.raises(OSError, match="'a/x'"):   # an error names the key
        st.setitems({"a/x": b"3"})

    root = cs.open_group(st, mode="w", zarr_format=2)
    old = root.create_group("g/0").zeros("x", shape=(4,), chunks=(2,), dtype="i4")
    old[:] = 5
    st.rmdir("g")   # (behind chunkstore's hierarchy: `old` is not told, and reads on)
    new = root.zeros("g", shape=(4,), chunks=(2,), dtype="i4")
    new[:] = 3   # chunk file "g/0" where the directory "g/0" was (LocalStore left it empty)
    np.testing.assert_array_equal(old[:], 0)


def test_the_request_loop_is_stopped_before_the_interpreter_finalizes(tmp_path):
    """obstore's runtime threads hand each result to the stores' event loop through a Python
    callback; one still doing so while the interpreter finalized aborted a script after its
    last write (SIGABRT, 2 to 4 exits in 40). An atexit hook stops the loop and waits for
    its thread: a hook registered before chunkstore's runs after it and finds it done."""
    import subprocess
    import sys
    script = f"""
import atexit, os
def check():
    from chunkstore.storage import object_store as o
    t = o._Loop._thread
    os.write(1, b"stopped" if t is not None and not t.is_alive() else b"running")
atexit.register(check)
import numpy as np, chunkstore as cs
from chunkstore.storage import ObjectStore
from obstore.store import LocalStore
st = ObjectStore(LocalStore({str(tmp_path)!r}))
a = cs.create_array(st, name="a", shape=(16, 16), chunks=(4, 4), dtype="i4")
a[...] = np.arange(256).reshape(16, 16)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.endswith(b"stopped"), done.stdout


_ABANDONED_READS = r"""
import asyncio, io, logging, sys, tempfile, time
import numpy as np, obstore.store as obs
import chunkstore as cs
from chunkstore.storage import ObjectStore
log = io.StringIO()
logging.getLogger().addHandler(logging.StreamHandler(log))
store = ObjectStore(obs.LocalStore(tempfile.mkdtemp()))
a = cs.create((10, 10), chunks=(2, 3), dtype="i4", store=store, path="a", zarr_format=2)
a[...] = 1
handle = cs.AsyncArray(cs.open_array(store, path="a", mode="r+"))

async def main():
    reads = [asyncio.ensure_future(handle.getitem(...)) for _ in range(2)]
    await asyncio.sleep(0)
    reads[0].cancel()
    await asyncio.gather(*reads, return_exceptions=True)
    asyncio.ensure_future(handle.getitem(...))  # left in flight when asyncio.run ends

for _ in range(20):
    asyncio.run(main())
time.sleep(1.5)  # (the workers find the loop stopped)
assert np.array_equal(a[...], np.ones((10, 10)))
print("callback errors logged:", log.getvalue().count("exception calling callback"))
"""


def test_reads_abandoned_at_the_end_of_asyncio_run_log_no_callback_errors(tmp_path):
    """A batch whose caller's loop closed was cancelled through that loop: concurrent.futures
    logged "exception calling callback ... Event loop is closed" tracebacks. Its coroutine is
    closed instead. (obstore's own callbacks onto the closed loop may still print.)"""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _ABANDONED_READS], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "callback errors logged: 0" in r.stdout
