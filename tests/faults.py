"""A fault-injecting store wrapper for tests: raise chosen OSErrors on chosen reads/writes."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import MutableMapping


class FaultyStore(MutableMapping):
    """Wraps a store; ``fail_read(pred, err)`` / ``fail_write(pred, err, after=n)`` make the
    matching keys raise ``OSError(err)`` (after ``n`` successful matching writes)."""

    def __init__(self, inner, capacity=None):
        self.inner = inner
        self.capacity = capacity  # a full disk: writes past this many stored bytes fail
        self._read = None
        self._write = None
        self.writes_ok = 0

    def fail_read(self, pred, err=errno.EIO):
        self._read = (pred, err)

    def fail_write(self, pred, err=errno.EIO, after=0, times=None):
        """Fail matching writes after ``after`` successes, ``times`` times (None: always)."""
        self._write = [pred, err, after, times]

    def used(self):
        return sum(len(self.inner[k]) for k in self.inner)

    def heal(self):
        self._read = self._write = None

    @staticmethod
    def _raise(err, key):
        raise OSError(err, os.strerror(err), key)

    def __getitem__(self, key):
        if self._read and self._read[0](key):
            self._raise(self._read[1], key)
        return self.inner[key]

    def __setitem__(self, key, value):
        w = self._write
        if w and w[0](key):
            if w[2] <= 0 and (w[3] is None or w[3] > 0):
                if w[3] is not None:
                    w[3] -= 1
                self._raise(w[1], key)
            w[2] -= 1
        if self.capacity is not None:
            old = len(self.inner[key]) if key in self.inner else 0
            if self.used() - old + len(value) > self.capacity:
                self._raise(errno.ENOSPC, key)
        self.inner[key] = value
        self.writes_ok += 1

    def __delitem__(self, key):
        del self.inner[key]

    def __iter__(self):
        return iter(self.inner)

    def __len__(self):
        return len(self.inner)

    def __contains__(self, key):
        return key in self.inner


def is_chunk(key):
    """A chunk key of v2 or v3 (not a metadata document)."""
    name = key.rsplit("/", 1)[-1]
    return not name.startswith(".") and name != "zarr.json"


def start_server(handler):
    """A threaded HTTP server on a free loopback port, serving handler from a daemon thread
    (stop it with ``shutdown()`` and ``server_close()``)."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop_server(server, timeout=30.0):
    """server.shutdown() and server_close(), waiting at most timeout seconds for its
    serve_forever loop to end (a loop that never says it ended would hang the test run in
    a fixture's teardown: seen twice in full runs, in this module's servers, never alone);
    then a warning says so and the run goes on."""
    import threading
    import warnings

    stopper = threading.Thread(target=server.shutdown, daemon=True)
    stopper.start()
    stopper.join(timeout)
    if stopper.is_alive():
        warnings.warn(f"{server!r}: shutdown() did not return within {timeout} s",
                      RuntimeWarning)
    server.server_close()


@contextlib.contextmanager
def serving(handler):
    """start_server(handler) for the with-block; yields the port."""
    server = start_server(handler)
    try:
        yield server.server_address[1]
    finally:
        stop_server(server)


#: response headers a relay does not pass on (hop-by-hop, or set by the relay itself)
_NOT_RELAYED = ("transfer-encoding", "connection", "content-length", "date", "server")


def relay(method, host, port, target, body, headers, head_length=False):
    """Make the request upstream: (status, headers to pass on, body). head_length: a HEAD's
    Content-Length (the object's size: it has no body to count) is among the headers."""
    import http.client

    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request(method, target, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    keep = ("content-length",) if head_length and method == "HEAD" else ()
    return resp.status, [(k, v) for k, v in resp.getheaders()
                         if k.lower() not in _NOT_RELAYED or k.lower() in keep], data


class FaultProxy:
    """An HTTP proxy on loopback in front of an S3 server (moto) that injects faults into
    the responses for matching requests: a status code (500, 503, 403), a connection dropped
    halfway through the body, or a delay (to trip the client's read timeout).

    ``add(match, action, times=None)``: ``match(method, path)`` selects requests; ``action``
    is ``("status", code)``, ``("drop",)``, ``("cut",)`` (a GET's body cut to its first half,
    its Content-Length saying so: nothing tells the client), ``("lost",)`` (the request
    relayed and applied by the server, its answer never sent: the connection closed) or
    ``("delay", seconds)``;
    ``times`` faults then pass-through (None: always). ``hits`` counts the faults injected.
    A HEAD's Content-Length is the object's, as the server said."""

    def __init__(self, upstream: str):
        import http.server
        import threading
        import time
        from urllib.parse import urlsplit

        up = urlsplit(upstream)
        proxy = self
        self.rules: list[list] = []
        self.hits = 0
        self._lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _rule(self):
                with proxy._lock:
                    for r in proxy.rules:
                        if r[0](self.command, self.path) and (r[2] is None or r[2] > 0):
                            if r[2] is not None:
                                r[2] -= 1
                            proxy.hits += 1
                            return r[1]
                return None

            def _forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                action = self._rule()
                if action and action[0] == "status":
                    msg = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>"
                           + {403: b"AccessDenied", 500: b"InternalError",
                              503: b"SlowDown"}.get(action[1], b"Error")
                           + b"</Code><Message>injected</Message></Error>")
                    self.send_response(action[1])
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(msg)
                    return
                if action and action[0] == "delay":
                    time.sleep(action[1])
                status, headers, data = relay(self.command, up.hostname, up.port, self.path,
                                              body, dict(self.headers.items()),
                                              head_length=True)
                if action and action[0] == "lost":
                    self.close_connection = True
                    return
                if action and action[0] == "cut" and self.command == "GET":
                    data = data[: len(data) // 2]
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                if self.command != "HEAD":  # (a HEAD's is the server's, relayed)
                    self.send_header("Content-Length", str(len(data)))
                if action and action[0] == "drop" and self.command == "GET" and data:
                    # the full length announced, half the body sent, then the socket closed
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self._server = start_server(Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, match, action, times=None):
        with self._lock:
            self.rules.append([match, action, times])

    def clear(self):
        with self._lock:
            self.rules.clear()
            self.hits = 0

    def close(self):
        stop_server(self._server)


class SortedFaultStore(MutableMapping):
    """A plain mapping store (no rmdir, keys listed sorted, as a directory or a key-value
    database lists them) that raises EIO on the store calls ``fail(op, key)`` picks."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.fail = lambda op, key: False

    def _check(self, op: str, key: str) -> None:
        if self.fail(op, key):
            raise OSError(errno.EIO, "injected I/O error", key)

    def __getitem__(self, key: str) -> bytes:
        self._check("get", key)
        return self.data[key]

    def __setitem__(self, key: str, value: bytes) -> None:
        self._check("set", key)
        self.data[key] = bytes(value)

    def __delitem__(self, key: str) -> None:
        self._check("del", key)
        del self.data[key]

    def __iter__(self):
        return iter(sorted(self.data))

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, key: object) -> bool:
        return key in self.data


class LostAnswerStore(SortedFaultStore):
    """Sets of keys ``lost(key)`` picks are stored, then raise: a remote store took the
    object and its answer was lost (the writer cannot tell it from a write that failed)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = lambda key: False

    def __setitem__(self, key: str, value: bytes) -> None:
        super().__setitem__(key, value)
        if self.lost(key):
            raise OSError(errno.EIO, "answer lost after the store took it", key)


class NthChunk:
    """A fault rule: the n-th chunk operation op ("set", "del") on keys under prefix fails
    (the others go through); seen: the chunk keys it was asked about; hit: whether it
    failed one."""

    def __init__(self, op: str, n: int, prefix: str = "") -> None:
        self.op, self.n, self.prefix, self.seen = op, n, prefix, []

    @property
    def hit(self) -> bool:
        """Whether the n-th operation came (and failed)."""
        return len(self.seen) >= self.n

    def __call__(self, op: str, key: str) -> bool:
        if op == self.op and key.startswith(self.prefix) and is_chunk(key):
            self.seen.append(key)
            return len(self.seen) == self.n
        return False


class SecondChunk(NthChunk):
    """A fault rule: the second chunk operation op ("set", "del") on keys under prefix fails
    (the first goes through); seen: the chunk keys it was asked about."""

    def __init__(self, op: str, prefix: str = "") -> None:
        super().__init__(op, 2, prefix)


def faulty_memory_store():
    """A chunkstore MemoryStore (so, everything a MemoryStore does for chunkstore: byte
    ranges, listings) whose writes and deletes of the keys ``store.fail(op, key)`` picks
    ("set", "del") raise EIO; batches go key by key, so that one fails midway."""
    from chunkstore.storage.memory import MemoryStore

    class FaultyMemoryStore(MemoryStore):
        fail = staticmethod(lambda op, key: False)

        def _check(self, op, key):
            if self.fail(op, key):
                raise OSError(errno.EIO, "injected I/O error", key)

        def __setitem__(self, key, value):
            self._check("set", key)
            super().__setitem__(key, value)

        def __delitem__(self, key):
            self._check("del", key)
            super().__delitem__(key)

        def setitems(self, mapping):
            for k, v in dict(mapping).items():
                self[k] = v

        def delitems(self, keys):
            for k in list(keys):
                try:
                    del self[k]
                except KeyError:
                    pass

    return FaultyMemoryStore()


def gated_store(base, holds, armed=True, once=True):
    """A subclass of store class base whose writes of keys holds(key) picks wait for its
    gate while armed (a write held in flight, under its locks); entered is set when one
    waits. once: the first held write disarms it. Remote stores' pipelined writes
    (start_put: ObjectStore, FSStore on S3) are held as their other writes are."""

    class Gated(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.armed = armed
            self.gate = threading.Event()
            self.entered = threading.Event()

        def _hold(self, keys):
            if self.armed and any(holds(k) for k in keys):
                if once:
                    self.armed = False
                self.entered.set()
                self.gate.wait(30)

        def __setitem__(self, key, value):
            self._hold([key])
            super().__setitem__(key, value)

        def setitems(self, values):
            values = dict(values)
            self._hold(list(values))
            super().setitems(values)

        if hasattr(base, "start_put"):
            def start_put(self, keys, values):
                self._hold(list(keys))
                return super().start_put(keys, values)

    return Gated


def second_waits(held, first, second, timeout=10):
    """Run first (a write that held, a gated_store armed, holds in flight) and, once it is
    held, second in another thread, then let first go. Returns whether second waited for
    first (True where they take one lock); both are done on return."""
    one = threading.Thread(target=first)
    one.start()
    done = threading.Event()
    two = threading.Thread(target=lambda: (second(), done.set()))
    try:
        assert held.entered.wait(timeout), "the first write never reached its held write"
        two.start()
        waited = not done.wait(0.3)
    finally:
        held.gate.set()
        one.join(30)
    two.join(30)
    assert done.is_set(), "the second write did not end"
    return waited


def second_write_waits(held, a, b, timeout=10):
    """second_waits of element 0 written through handle a (its store: held) and element 1
    of the same chunk through handle b (read the array to see whether one was lost)."""
    return second_waits(held, lambda: a.__setitem__(0, 1), lambda: b.__setitem__(1, 2),
                        timeout)


def run_threads(calls, timeout=60.0):
    """Run each (fn, args) of calls on its own thread at once; their results in order. The
    first error any raised is raised; a thread still running after timeout seconds fails
    the test (a deadlock)."""
    import threading

    results = [None] * len(calls)
    errors = []

    def run(i, fn, args):
        try:
            results[i] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - reraised below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i, fn, args), daemon=True)
          for i, (fn, args) in enumerate(calls)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
        assert not t.is_alive(), "a thread did not finish: deadlock?"
    if errors:
        raise errors[0]
    return results


class ReadCounting(dict):
    """A dict store counting its reads (each a request on a remote store): ``reads``."""

    reads = 0

    def __getitem__(self, key):
        self.reads += 1
        return super().__getitem__(key)

    def __contains__(self, key):
        self.reads += 1
        return super().__contains__(key)

    def get(self, key, default=None):
        self.reads += 1
        return super().get(key, default)

