"""Hierarchy changes in one process while another creates nodes below them, with a
ProcessSynchronizer (found by a hunt; each failed on the code before).

A creation below a group held only its own creation lock, and a delete or move of the group
took the locks of the arrays it had listed before it held any: a node created in between
was moved without its lock (its data write landing at the old path after the move: the
moved array read the fill value, the write returned), or deleted around (its chunks left as
keys of no node after the delete returned, or an array left whose group was gone, reachable
by path but by no listing). A creation now holds the metadata guards of the groups above it
while it writes its documents, and a delete or move lists the subtree again once it holds
its locks. A creation with data that failed removed the groups it had made above it, though
another process had taken them up meanwhile (its members orphaned, its attributes lost).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.metadata.formats import document_rank

RUN_S = 2.5


def _creator(path, locks, bar, q):
    root = cs.open_group(path, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))
    made, failed = [], []
    bar.wait()
    t0, i = time.monotonic(), 0
    while time.monotonic() - t0 < RUN_S:
        i += 1
        try:
            root.require_group("sub").create_dataset(f"x{i}", data=np.arange(8) + i,
                                                     chunks=(2,))
            made.append(i)
        except (KeyError, cs.errors.ChunkstoreError, ValueError) as e:
            failed.append((i, type(e).__name__))
        except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
            # (an OSError of the store: require_group("sub") wrote its document into the
            # directory the other process's delete had just removed, a bare
            # FileNotFoundError; the creation now holds the node's own guard too)
            failed.append((i, f"unexpected {e!r}"))
    q.put((made, failed))


def _changer(path, locks, op, bar):
    root = cs.open_group(path, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))
    bar.wait()
    t0, n = time.monotonic(), 0
    while time.monotonic() - t0 < RUN_S:
        n += 1
        try:
            if op == "move":
                root.move("sub", f"moved{n}")
            else:
                del root["sub"]
        except (KeyError, ValueError):
            pass  # (nothing there at that moment)


@pytest.mark.parametrize("fmt, op", [(2, "move"), (3, "move"), (2, "delete"), (3, "delete")])
def test_creations_below_a_group_another_process_moves_or_deletes(tmp_path, fmt, op):
    path, locks = str(tmp_path / "h.zarr"), str(tmp_path / "locks")
    cs.group(path, zarr_format=fmt)
    ctx = mp.get_context("spawn")
    bar, q = ctx.Barrier(2), ctx.Queue()
    ps = [ctx.Process(target=_creator, args=(path, locks, bar, q)),
          ctx.Process(target=_changer, args=(path, locks, op, bar))]
    for p in ps:
        p.start()
    made, failed = q.get(timeout=120)
    for p in ps:
        p.join(60)
    assert [p.exitcode for p in ps] == [0, 0]
    assert made  # (the race ran)
    assert not [f for f in failed if f[1].startswith("unexpected")], failed
    store = cs.DirectoryStore(path)
    keys = sorted(store.keys())
    docs = {k.rpartition("/")[0] for k in keys if document_rank(k) == 0}
    # every node's groups above it are there (no orphan reachable by path alone)
    for node in docs:
        parts = node.split("/") if node else []
        for i in range(len(parts)):
            above = "/".join(parts[:i])
            assert above in docs, f"{node!r} has no group {above!r} above it"
    # no keys of no node: every chunk key lies below an array's documents
    arrays = {k.rpartition("/")[0] for k in keys
              if k.endswith(".zarray") or (k.endswith("zarr.json") and
                                           json.loads(store[k])["node_type"] == "array")}
    for k in keys:
        if document_rank(k) == 2:
            assert any(k.startswith(a + "/") for a in arrays), f"{k!r}: a key of no node"
    # each array a finished creation made, wherever it is now: its data, whole
    failed_ids = {i for i, _ in failed}
    root = cs.open_group(path, mode="r")
    for node in sorted(docs):
        name = node.rpartition("/")[2]
        if name.startswith("x") and node in root:
            i = int(name[1:])
            got = root[node][:].tolist()
            if i in failed_ids:  # (documented: made, then moved before its data went in)
                assert got in (list(range(i, i + 8)), [0] * 8)
            else:
                assert got == list(range(i, i + 8)), node
    if op == "delete":  # nothing of a deleted group's creations is left half made
        for i in made:
            node = f"sub/x{i}"
            if node in root:
                assert root[node][:].tolist() == list(range(i, i + 8))


class _FailsOnce(cs.DirectoryStore):
    """A store whose first chunk write of path x runs `meanwhile`, then fails."""

    meanwhile = None

    def _hook(self, keys):
        if self.meanwhile is not None and any(k.startswith("p/x/") and
                                              document_rank(k) == 2 for k in keys):
            run, self.meanwhile = self.meanwhile, None
            run()
            raise OSError(28, "No space left on device (simulated)")

    def __setitem__(self, key, value):
        self._hook([key])
        super().__setitem__(key, value)

    def setitems(self, mapping):
        self._hook(list(mapping))
        super().setitems(mapping)


@pytest.mark.parametrize("taken_up", ["member", "attributes", "nothing"])
def test_a_failed_creation_keeps_the_groups_it_made_that_others_took_up(tmp_path, taken_up):
    path = str(tmp_path / "h.zarr")
    cs.group(path)
    store = _FailsOnce(path)
    other = cs.open_group(path, mode="r+")

    def meanwhile():  # another handle takes up the group made on the way
        if taken_up == "nothing":
            return
        p = other.require_group("p")
        if taken_up == "member":
            p.create_dataset("y", data=np.arange(3))
        else:
            p.attrs["owner"] = "B"

    store.meanwhile = meanwhile
    with pytest.raises(OSError, match="No space left"):
        cs.open_group(store, mode="r+").create_dataset("p/x", data=np.arange(8), chunks=(2,))
    root = cs.open_group(path, mode="r")
    assert "p/x" not in root
    if taken_up == "nothing":  # (made for the failed creation alone: removed)
        assert "p" not in root and not os.path.exists(os.path.join(path, "p", ".zgroup"))
    else:
        assert "p" in root
        if taken_up == "member":
            assert root["p/y"][:].tolist() == [0, 1, 2]
        else:
            assert dict(root["p"].attrs) == {"owner": "B"}


class _MovesBeforeChunks(cs.DirectoryStore):
    """A store that runs `meanwhile` at the read's first chunk request (once)."""

    meanwhile = None

    def _hook(self, keys):
        if self.meanwhile is not None and any(document_rank(k) == 2 for k in keys):
            run, self.meanwhile = self.meanwhile, None
            run()

    def __getitem__(self, key):
        self._hook([key])
        return super().__getitem__(key)

    def getitems(self, keys, **kw):
        self._hook(list(keys))
        return super().getitems(keys, **kw)

    def read_into(self, keys, outs):
        self._hook(list(keys))
        return super().read_into(keys, outs)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("handle", ["synchronized", "uncached"])
def test_a_read_racing_a_move_raises_instead_of_reading_the_fill_value(tmp_path, fmt, handle):
    """Another process moved the array between a read's metadata and its chunks: the read
    returned the fill value everywhere (with cache_metadata=False too). A synchronized or
    uncached handle that finds chunks missing now looks at the document again."""
    path = str(tmp_path / "h.zarr")
    g = cs.group(path, zarr_format=fmt)
    g.create_dataset("g/arr", data=np.full(16, 7, "i4"), chunks=(4,), fill_value=0)
    store = _MovesBeforeChunks(path)
    kw = ({"synchronizer": cs.ProcessSynchronizer(str(tmp_path / "locks"))}
          if handle == "synchronized" else {"cache_metadata": False})
    a = cs.open_array(store, path="g/arr", mode="r", **kw)
    store.meanwhile = lambda: cs.open_group(path, mode="r+").move("g", "h")
    with pytest.raises(cs.errors.ArrayNotFoundError, match="g/arr"):
        a[:]
    assert cs.open_array(path, path="h/arr", mode="r")[:].tolist() == [7] * 16


@pytest.mark.parametrize("other", ["open_group", "require_group", "overwrite"])
def test_a_creation_below_a_missing_group_and_one_of_that_group_end(tmp_path, monkeypatch,
                                                                    other):
    """A creation of g/x held the guards of the groups above, then took the creation lock
    of its missing parent g; open_group(g, "a") (or create(g, overwrite=True)) held that
    lock, then wanted a guard: each waited for the other for good (a first version of the
    guards above). Guarded writers take no creation lock now; open_group and require_group
    open the group the other creation made."""
    import threading
    from chunkstore.hierarchy import creation
    store = cs.DirectoryStore(str(tmp_path / "s.zarr"))
    cs.open_group(store, mode="w")
    sync = cs.ProcessSynchronizer(str(tmp_path / "locks"))
    inside = threading.Event()
    real = creation._write_parent_groups

    def slow(*args, **kw):  # B, in its guarded section: A starts meanwhile
        if threading.current_thread().name == "B":
            inside.set()
            time.sleep(0.3)
        return real(*args, **kw)

    monkeypatch.setattr(creation, "_write_parent_groups", slow)
    errors = []

    def b():
        try:
            creation.create(shape=(4,), chunks=(2,), dtype="i4", store=store, path="g/x",
                            synchronizer=sync)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def a():
        inside.wait(10)
        try:
            if other == "open_group":
                cs.open_group(store, path="g", mode="a", synchronizer=sync)
            elif other == "require_group":
                cs.open_group(store, mode="r+", synchronizer=sync).require_group("g")
            else:
                creation.create(shape=(2,), dtype="i4", store=store, path="g",
                                overwrite=True, synchronizer=sync)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=b, name="B", daemon=True),
               threading.Thread(target=a, name="A", daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads), "deadlock"
    if other == "overwrite":
        # (B's creation made g/x, and A's replacement of g may come before B opens its
        # new array to return it: ArrayNotFoundError naming it, the array being gone)
        errors = [e for e in errors if not (isinstance(e, cs.errors.ArrayNotFoundError)
                                            and "'g/x'" in str(e))]
    assert not errors, errors
    root = cs.open_group(store, mode="r")
    assert ("g" in root) and (other == "overwrite") == isinstance(root["g"], cs.Array)


def _hierarchy_whole(path):
    """Every node's groups above it are groups (no node below an array, none whose group is
    gone), and no node holds two kinds of documents."""
    store = cs.DirectoryStore(path)
    keys = sorted(store.keys())
    kinds: dict = {}
    for k in keys:
        node, _, name = k.rpartition("/")
        if name in (".zarray", ".zgroup"):
            kinds.setdefault(node, set()).add("array" if name == ".zarray" else "group")
        elif name == "zarr.json":
            kinds.setdefault(node, set()).add(json.loads(store[k])["node_type"])
    for node, ks in kinds.items():
        assert len(ks) == 1, f"{node!r} holds documents of {sorted(ks)}"
        parts = node.split("/") if node else []
        for i in range(len(parts)):
            above = "/".join(parts[:i])
            assert kinds.get(above) == {"group"}, \
                f"{node!r} lies below {above!r}, which is {kinds.get(above)}"


def _race(first, second):
    import threading
    t = threading.Thread(target=second)
    t.start()
    try:
        first()
    finally:
        t.join(30)


@pytest.mark.parametrize("fmt, sync", [(2, None), (3, None), (2, "process")])
def test_an_overwrite_and_a_creation_below_it_in_threads(tmp_path, fmt, sync):
    """create_array("x", overwrite=True) in one thread while another creates "x/sub/arr":
    both returned, the array left below an array (where no listing shows it), and with a
    ProcessSynchronizer x held a .zarray beside a .zgroup. One now comes wholly before the
    other: the overwrite removes what the creation made (or the creation finds the array,
    ContainsArrayError; or, its array removed at once, ArrayNotFoundError)."""
    for i in range(60):
        path = str(tmp_path / f"{i}.zarr")
        cs.open_group(path, mode="w", zarr_format=fmt)
        s = (lambda: cs.ProcessSynchronizer(str(tmp_path / "locks"))) if sync else \
            (lambda: None)

        def nested():
            try:
                cs.open_group(path, mode="r+", synchronizer=s()).create_array(
                    "x/sub/arr", shape=(3,), chunks=(2,), dtype="i4")
            except (cs.errors.ContainsArrayError, cs.errors.ArrayNotFoundError):
                pass

        _race(lambda: cs.open_group(path, mode="r+", synchronizer=s()).create_array(
            "x", shape=(4,), chunks=(2,), dtype="i4", overwrite=True), nested)
        _hierarchy_whole(path)
        assert isinstance(cs.open_group(path, mode="r")["x"], cs.Array)


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_delete_and_a_creation_below_it_in_threads(tmp_path, fmt):
    """del g["y"] in one thread while another creates "y/sub/arr", no synchronizer: both
    returned, the array left with no group above it (listed nowhere). The creation now
    holds this process's guards of the groups above it, which the delete's locks exclude."""
    for i in range(60):
        path = str(tmp_path / f"{i}.zarr")
        cs.open_group(path, mode="w", zarr_format=fmt).create_group("y")
        made = []

        def nested():
            try:
                cs.open_group(path, mode="r+").create_array("y/sub/arr", shape=(3,),
                                                            chunks=(2,), dtype="i4")
                made.append(True)
            except cs.errors.ArrayNotFoundError:  # (made, then deleted with y at once)
                made.append(False)

        _race(lambda: cs.open_group(path, mode="r+").__delitem__("y"), nested)
        _hierarchy_whole(path)
        assert made
        root = cs.open_group(path, mode="r")
        if "y/sub/arr" not in root:  # (deleted with y: nothing of it is left)
            assert not any(k.startswith("y/") for k in cs.DirectoryStore(path).keys())


@pytest.mark.parametrize("fmt", [2, 3])
def test_creations_through_an_lru_cache_see_other_handles_changes(tmp_path, fmt):
    """A creation through an LRUStoreCache looked for the node and the groups above it in
    the cache: a group another handle deleted was taken for there (its new member written
    with no group above it), a deleted group refused its re-creation (ContainsGroupError),
    and an array another handle made was named as keys of no node (StrayChunksError)."""
    p = str(tmp_path / "a.zarr")
    cached = cs.open_group(cs.LRUStoreCache(cs.DirectoryStore(p), max_size=1 << 20),
                           mode="w", zarr_format=fmt)
    plain = cs.open_group(cs.DirectoryStore(p), mode="r+")
    cached.create_group("g")
    del plain["g"]
    cached.create_array(name="g/x", shape=(3,), chunks=(3,), dtype="i4")[:] = 5
    _hierarchy_whole(p)
    assert cs.open_group(p, mode="r")["g/x"][...].tolist() == [5, 5, 5]
    cached.create_group("h")
    del plain["h"]
    cached.create_group("h")
    assert "h" in cs.open_group(p, mode="r")
    assert "y" not in cached
    plain.create_array(name="y", shape=(4,), chunks=(2,), dtype="i4")[:] = 1
    with pytest.raises(cs.errors.ContainsArrayError, match="'y'"):
        cached.create_array(name="y", shape=(4,), chunks=(2,), dtype="f4")
    assert plain["y"][...].tolist() == [1] * 4


def test_an_overwrite_of_an_array_whose_group_another_thread_deletes(monkeypatch):
    """create_dataset("y/arr", overwrite=True) over an existing array while another thread
    deletes "y": the creation found its parents before taking any lock and, replacing the
    array under this process's locks of it and of the groups above, did not look again:
    it wrote y/arr with no group y above it. It now looks again under those locks, and
    makes y anew."""
    import threading
    from chunkstore.hierarchy import creation
    store: dict = {}
    root = cs.open_group(store, mode="w")
    root.create_dataset("y/arr", shape=(4,), chunks=(2,), dtype="i4")
    checked, deleted = threading.Event(), threading.Event()
    original = creation._check_parents

    def slow_check(store, path):
        found = original(store, path)
        if threading.current_thread().name == "creator" and not checked.is_set():
            checked.set()
            deleted.wait(10)
        return found

    monkeypatch.setattr(creation, "_check_parents", slow_check)
    t = threading.Thread(name="creator", target=lambda: root.create_dataset(
        "y/arr", shape=(4,), chunks=(2,), dtype="i4", overwrite=True))
    t.start()
    assert checked.wait(10)
    del root["y"]
    deleted.set()
    t.join(10)
    assert sorted(store) == [".zgroup", "y/.zgroup", "y/arr/.zarray"]


@pytest.mark.parametrize("op", ["move", "delete"])
def test_a_handle_opened_while_its_group_is_moved_or_deleted_is_told(op):
    """A handle another thread opened while the group above its array was being moved or
    deleted (after the change had listed this process's lock tables, before the documents
    went) was never told: it read the fill value for every element, with no error, ever
    after. Such handles are told once the change is done: ArrayNotFoundError, as a handle
    opened before gets."""
    import threading
    opened = []

    class Hooked(dict):
        hook = None

        def _run(self):
            if Hooked.hook:
                h, Hooked.hook = Hooked.hook, None
                h()

        def __setitem__(self, k, v):  # move: the first key copied to the destination
            if k.startswith("dst/"):
                self._run()
            dict.__setitem__(self, k, v)

        def __delitem__(self, k):  # delete: the first key removed
            if k.startswith("sub/"):
                self._run()
            dict.__delitem__(self, k)

    store = Hooked()
    root = cs.open_group(store, mode="w")
    root.require_group("sub").create_dataset("x", data=np.arange(1, 9), chunks=(3,))

    def open_elsewhere():
        t = threading.Thread(target=lambda: opened.append(
            cs.open_array(store, path="sub/x", mode="r")))
        t.start()
        t.join(10)

    Hooked.hook = open_elsewhere
    if op == "move":
        root.move("sub", "dst")
    else:
        del root["sub"]
    with pytest.raises(cs.errors.ArrayNotFoundError):
        opened[0][:]


def _paused_move(monkeypatch, g, src, dst):
    """A thread moving src to dst, paused once it has looked at dst (the keys there); returns
    (thread, the event set at the pause, the event that lets it go on, its errors)."""
    import threading
    from chunkstore.hierarchy import group as gmod
    looked, go, errors = threading.Event(), threading.Event(), []
    orig = gmod.keys_under

    def paused(store, path):
        found = orig(store, path)
        if path == dst and threading.current_thread().name == "mover":
            looked.set()
            go.wait(10)
        return found
    monkeypatch.setattr(gmod, "keys_under", paused)

    def mover():
        try:
            g.move(src, dst)
        except Exception as e:  # noqa: BLE001 - reported to the test
            errors.append(e)
    t = threading.Thread(target=mover, name="mover")
    t.start()
    return t, looked, go, errors


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("sync", [None, "process"])
def test_a_move_and_a_creation_below_its_destination_come_one_after_the_other(
        tmp_path, monkeypatch, fmt, sync):
    """A move checked that dst was free before it held anything a creation below dst
    takes (the guards of dst and the groups above it): a creation of dst/x/y made meanwhile
    and the move both returned, an array's document beside a group's at dst, members
    below the array."""
    import threading
    s = cs.ProcessSynchronizer(str(tmp_path / "locks")) if sync else None
    g = cs.open_group(str(tmp_path / "r.zarr"), mode="a", synchronizer=s, zarr_format=fmt)
    g.create_array("a", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)[...] = np.arange(8)
    t, looked, go, errors = _paused_move(monkeypatch, g, "a", "b")
    assert looked.wait(10)
    made = []

    def create():
        try:
            g.create_array("b/x/y", shape=(4,), chunks=(2,), dtype="i4")[...] = 5
            made.append(True)
        except cs.errors.ContainsArrayError as e:
            made.append(e)
    c = threading.Thread(target=create)
    c.start()
    c.join(0.5)  # (the creation waits for the move's locks)
    go.set()
    t.join(20)
    c.join(20)
    assert not t.is_alive() and not c.is_alive() and not errors
    assert isinstance(made[0], cs.errors.ContainsArrayError)  # (b is an array now)
    np.testing.assert_array_equal(g["b"][...], np.arange(8))
    assert not [k for k in os.listdir(tmp_path / "r.zarr" / "b") if k not in (
        ".zarray", "zarr.json", "0", "1", "c")]


def _deleting_child(root, locks, emptied, go):
    """Another process deleting array b, paused with its files gone and its directory not
    yet (shutil.rmtree's own order)."""
    from chunkstore.storage import local_files as lf
    orig = lf._rmtree

    def rmtree(path):
        for p, _, fs in os.walk(path):
            for f in fs:
                os.unlink(os.path.join(p, f))
        emptied.set()
        go.wait(10)
        return orig(path)
    lf._rmtree = rmtree
    g = cs.open_group(root, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))
    del g["b"]


def test_a_move_into_a_node_another_process_is_deleting_waits_for_the_delete(tmp_path):
    """The move returned, then the other process's delete (its rmtree under way) removed
    what it had moved there: the moved array was lost. It now waits for the delete."""
    import threading
    root, locks = str(tmp_path / "r.zarr"), str(tmp_path / "locks")
    g = cs.open_group(root, mode="a", synchronizer=cs.ProcessSynchronizer(locks))
    g.create_array("a", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)[...] = np.arange(8)
    g.create_array("b", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)[...] = 5
    ctx = mp.get_context("spawn")
    emptied, go = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_deleting_child, args=(root, locks, emptied, go))
    p.start()
    try:
        assert emptied.wait(60)
        t = threading.Thread(target=g.move, args=("a", "b"))
        t.start()
        t.join(0.5)
        assert t.is_alive()  # (waiting for the delete)
        go.set()
        t.join(30)
        p.join(30)
        assert p.exitcode == 0
    finally:
        go.set()
        p.join(30)
    assert list(g) == ["b"]
    np.testing.assert_array_equal(g["b"][...], np.arange(8))


@pytest.mark.parametrize("how", ["create_group", "require_group"])
def test_a_group_deleted_between_its_creation_and_its_opening_says_so(monkeypatch, how):
    """Another process deleting (or moving) the group right after this one created it: the
    bare "no group at path" read as a creation that had failed."""
    from chunkstore.hierarchy import group as gmod
    g = cs.group({})
    orig = gmod._init_group

    def made_then_gone(store, path, *args, **kwargs):
        orig(store, path, *args, **kwargs)
        cs.open_group(store, mode="r+").__delitem__(path)  # (as another process would)
    monkeypatch.setattr(gmod, "_init_group", made_then_gone)
    with pytest.raises(cs.errors.GroupNotFoundError, match="created or found, then moved or deleted"):
        getattr(g, how)("x")
