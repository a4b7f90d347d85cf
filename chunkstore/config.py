"""Runtime configuration: the size of the chunk I/O thread pool.

    chunkstore.config.set(threads=4)      # or CHUNKSTORE_THREADS=4 in the environment
    chunkstore.config.get("threads")

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
    """Current value of a setting ("threads")."""
    if name != "threads":
        raise KeyError(f"unknown setting {name!r}; known: threads")
    return _settings["threads"] or _default_threads()


def set(threads: int | None = None) -> None:  # noqa: A001 - mirrors dask.config.set
    """Set the number of threads used for chunk I/O (None: the default, the core count)."""
    global _pool
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
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
