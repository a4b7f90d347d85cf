"""Runtime configuration: the size of the chunk I/O thread pool, and remote I/O limits.

    chunkstore.config.set(threads=4)      # or CHUNKSTORE_THREADS=4 in the environment (read
                                          # at the first use; again after set(threads=None))
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
_settings: dict[str, int | None] = {"threads": None}
# Remote (fsspec) I/O: requests of one batch in flight at once, and retries of transient
# errors. 64 in flight: at 20 ms RTT a whole 64-chunk read then costs one round trip, and
# more gains nothing measurable against S3 while opening more connections.
_IO_DEFAULTS = {"io_concurrency": 64, "io_retries": 5}
_io = dict(_IO_DEFAULTS)
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_CORES = os.cpu_count() or 1


# CHUNKSTORE_THREADS (or the core count), read at the first use and again after
# config.set(threads=None): not at every get, which every read makes (an os.environ lookup
# cost 0.7 us, 7% of a small in-memory read)
_env_threads: int | None = None


def _default_threads() -> int:
    global _env_threads
    n = _env_threads
    if n is None:
        n = _env_threads = _threads_from_env()
    return n


def _threads_from_env() -> int:
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


def _set_threads(threads: int | None) -> None:
    global _pool, _env_threads
    with _lock:
        _settings["threads"] = threads
        if threads is None:
            _env_threads = None  # (the environment is read again)
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
# zarr-python 3's configuration keys (config.set({"array.order": "F"})) beside chunkstore's
# own; keys with no meaning here are refused by name.

_ZARR3 = {"array.order": "C", "array.write_empty_chunks": False, "default_zarr_format": None,
          "array.target_shard_size_bytes": None}
_ALIASES = {"threading.max_workers": "threads", "async.concurrency": "io_concurrency"}


_ENGINE_KEYS = ("threads", *_IO_DEFAULTS)  # chunkstore's own settings


def _known() -> str:
    return ", ".join(sorted({*_ZARR3, *_ALIASES, *_ENGINE_KEYS}))


def _check(key, value):
    """ValueError if value is not valid for the setting key."""
    if key == "threads" and value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"threads must be a positive integer, got {value!r}")
    if key in _IO_DEFAULTS and value is not None:
        low = 1 if key == "io_concurrency" else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{key} must be an integer >= {low}, got {value!r}")
    if key == "array.order" and value not in ("C", "F"):
        raise ValueError(f"array.order must be 'C' or 'F', got {value!r}")
    if key == "array.write_empty_chunks" and not isinstance(value, bool):
        raise ValueError(f"array.write_empty_chunks must be True or False, got {value!r}")
    if key == "array.target_shard_size_bytes" and value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"array.target_shard_size_bytes must be a positive integer or None, "
                         f"got {value!r}")
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


def set(options=None, **kwargs):  # noqa: A001
    """Set options: keyword arguments or zarr-python 3's dict of dotted keys.

    - ``threads``: threads for chunk I/O (None: the default, the core count);
    - ``io_concurrency``: requests in flight at once on remote stores (None: 64);
    - ``io_retries``: how often a throttled, failed (5xx) or timed-out request is retried
      (None: 5);
    - zarr-python 3's keys: ``{"array.order": "F", "async.concurrency": 8,
      "threading.max_workers": 4, "array.write_empty_chunks": True,
      "default_zarr_format": 3, "array.target_shard_size_bytes": 2**26}`` (the last: the
      size shards=\"auto\" aims at; None: two chunks a shard along axes of more than 8).

    Settings not named are left as they are. Unknown keys raise KeyError naming them and
    invalid values ValueError; nothing is set then. Usable as a context manager that
    restores the previous values."""
    items = dict(options or {})
    items.update(kwargs)
    new = {}
    for key, value in items.items():
        name = _ALIASES.get(key, key)
        if name not in _ZARR3 and name not in _ENGINE_KEYS:
            raise KeyError(f"unknown configuration key {key!r}; known: {_known()}")
        _check(name, value)
        new[name] = value
    old = {k: _ZARR3[k] if k in _ZARR3 else _settings["threads"] if k == "threads" else _io[k]
           for k in new}
    for name, value in new.items():  # (only once every value is checked)
        if name in _ZARR3:
            _ZARR3[name] = value
        elif name in _IO_DEFAULTS:
            _io[name] = _IO_DEFAULTS[name] if value is None else value
    if "threads" in new:
        _set_threads(new["threads"])
    return _Restore(old)


def get(name, default=None):
    """Current value of a setting: "threads", "io_concurrency", "io_retries", or a
    zarr-python 3 key ("array.order", "async.concurrency", ...)."""
    key = _ALIASES.get(name, name)
    if key == "threads":  # (first: every read asks)
        return _settings["threads"] or _default_threads()
    if key in _ZARR3:
        return _ZARR3[key]
    if key in _io:
        return _io[key]
    if default is not None:
        return default
    raise KeyError(f"unknown setting {name!r}; known: {_known()}")


def pprint(**kwargs):
    """zarr-python 3's ``zarr.config.pprint``: print every setting and its value
    (``pprint.pprint``'s keywords: ``stream=``, ``width=``...)."""
    import pprint as _pprint
    values = {"threads": get("threads"), **_io, **_ZARR3}
    _pprint.pprint(dict(sorted(values.items())), **kwargs)


def default_zarr_format(zarr_format=None, family_default=2):
    """zarr_format if given, else ``default_zarr_format`` if set, else the function family's
    default (2 for zarr-python 2's functions, 3 for zarr-python 3's)."""
    if zarr_format is not None:
        return zarr_format
    return _ZARR3["default_zarr_format"] or family_default
