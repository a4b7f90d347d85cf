"""Runtime configuration: the size of the chunk I/O thread pool, and remote I/O limits.

    chunkstore.config.set(threads=4)      # or CHUNKSTORE_THREADS=4 in the environment
    chunkstore.config.get("threads")
    chunkstore.config.set(io_concurrency=64)   # requests in flight at once (fsspec stores)
    chunkstore.config.set(io_retries=5)        # retries of throttled/5xx/timed-out requests

The pool is process-wide and created lazily. After fork() the child starts with no pool (a
pool's threads do not survive fork), and Blosc's own global thread pool is switched off,
because chunk-level parallelism replaces it and it is a known deadlock after fork.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_lock = threading.Lock()
_settings = {"threads": None}
# Remote (fsspec) I/O: requests of one batch in flight at once, and retries of transient
# errors. 64 in flight: at 20 ms RTT a whole 64-chunk read then costs one round trip, and
# more gains nothing measurable against S3 while opening more connections.
_IO_DEFAULTS = {"io_concurrency": 64, "io_retries": 5}
_io = dict(_IO_DEFAULTS)
_UNSET = object()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_CORES = os.cpu_count() or 1


def _default_threads() -> int:
    env = os.environ.get("CHUNKSTORE_THREADS")
    if env is None:
        return _CORES
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"CHUNKSTORE_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"CHUNKSTORE_THREADS must be a positive integer, got {env!r}")
        return n
    return os.cpu_count() or 1


def get(name: str):
    """Current value of a setting ("threads", "io_concurrency", "io_retries")."""
    if name in _io:
        return _io[name]
    if name != "threads":
        raise KeyError(f"unknown setting {name!r}; known: threads, io_concurrency, io_retries")
    return _settings["threads"] or _default_threads()


def set(threads: int | None = _UNSET, io_concurrency: int | None = _UNSET,  # noqa: A001
        io_retries: int | None = _UNSET) -> None:
    """Set the number of threads used for chunk I/O (None: the default, the core count),
    the number of requests in flight at once on remote stores (None: 64) and how often a
    throttled, failed (5xx) or timed-out request is retried (None: 5). Settings not named
    are left as they are."""
    io = {}
    for name, v, low in (("io_concurrency", io_concurrency, 1), ("io_retries", io_retries, 0)):
        if v is _UNSET:
            continue
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < low):
            raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
        io[name] = _IO_DEFAULTS[name] if v is None else v
    if threads is not _UNSET and threads is not None and (
            not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    _io.update(io)  # (only once every value is checked: a failed set changes nothing)
    if threads is _UNSET:
        return
    global _pool
    with _lock:
        _settings["threads"] = threads
        n = get("threads")
        # A pool of another size is replaced; going single-threaded keeps it (idle threads
        # cost nothing), so that switching back needs no new threads.
        if _pool is not None and n > 1 and _pool_size != n:
            _pool.shutdown(wait=False)
            _pool = None


def executor() -> ThreadPoolExecutor | None:
    """The shared pool, or None when configured for a single thread."""
    global _pool, _pool_size
    n = get("threads")
    if n <= 1:
        return None
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="chunkstore")
            _pool_size = n
        return _pool


def _after_fork_in_child() -> None:
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)

try:  # chunk-level threads replace Blosc's internal pool (and its fork hazards)
    from numcodecs import blosc as _blosc

    _blosc.use_threads = False
except Exception:  # pragma: no cover - numcodecs without blosc
    pass


# --------------------------------------------------------------------------------------------
# zarr-python 3's configuration keys: config.set({"array.order": "F"}) or as a context manager
# (with config.set({...}): ...). Keys with no meaning here are refused by name.

_set_base, _get_base = set, get
_ZARR3 = {"array.order": "C", "array.write_empty_chunks": False, "default_zarr_format": None}
_ALIASES = {"threading.max_workers": "threads", "async.concurrency": "io_concurrency"}


def _base_keys():
    import inspect
    return [p for p in inspect.signature(_set_base).parameters]


def _check_zarr3(key, value):
    if key == "array.order" and value not in ("C", "F"):
        raise ValueError(f"array.order must be 'C' or 'F', got {value!r}")
    if key == "array.write_empty_chunks" and not isinstance(value, bool):
        raise ValueError(f"array.write_empty_chunks must be True or False, got {value!r}")
    if key == "default_zarr_format" and value not in (2, 3, None):
        raise ValueError(f"default_zarr_format must be 2 or 3, got {value!r}")


class _Restore:
    """What config.set returns: a context manager that restores the previous values."""

    def __init__(self, old):
        self._old = old

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        set(self._old)


def set(options=None, **kwargs):  # noqa: A001,F811 - extends the set above
    """Set options: keyword arguments (``threads=4``) or zarr-python 3's dict of dotted keys
    (``{"array.order": "F", "async.concurrency": 8, "threading.max_workers": 4,
    "array.write_empty_chunks": True, "default_zarr_format": 3}``). Unknown keys raise
    KeyError naming them; nothing is set then. Usable as a context manager."""
    items = dict(options or {})
    items.update(kwargs)
    base_keys = _base_keys()
    zarr3, base = {}, {}
    for key, value in items.items():
        name = _ALIASES.get(key, key)
        if name in base_keys:
            base[name] = value
        elif name in _ZARR3:
            _check_zarr3(name, value)
            zarr3[name] = value
        else:
            known = sorted({*_ZARR3, *_ALIASES, *base_keys})
            raise KeyError(f"unknown configuration key {key!r}; known: {', '.join(known)}")
    old = {k: _ZARR3[k] for k in zarr3}
    old.update({k: _settings["threads"] if k == "threads" else _io[k] for k in base})
    if base:
        _set_base(**base)  # checks the values; settings not named are left as they are
    _ZARR3.update(zarr3)
    return _Restore(old)


def get(name, default=None):  # noqa: F811 - extends the get above
    """Current value of a setting: "threads", or a zarr-python 3 key ("array.order", ...)."""
    key = _ALIASES.get(name, name)
    if key in _ZARR3:
        return _ZARR3[key]
    try:
        return _get_base(key)
    except KeyError:
        if default is not None:
            return default
        known = sorted({*_ZARR3, *_ALIASES, *_base_keys()})
        raise KeyError(f"unknown setting {name!r}; known: {', '.join(known)}") from None


def default_zarr_format(zarr_format=None, family_default=2):
    """zarr_format if given, else ``default_zarr_format`` if set, else the function family's
    default (2 for zarr-python 2's functions, 3 for zarr-python 3's)."""
    if zarr_format is not None:
        return zarr_format
    return _ZARR3["default_zarr_format"] or family_default
