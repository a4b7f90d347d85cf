"""Locks that a forked child gets anew: one a parent thread held at the fork would stay held
forever in the child (no thread of the child releases it), and the child's first use would
hang, holding whatever else it had taken (a writer's kernel region locks: then every other
writer of those chunks waited too)."""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

__all__ = ["ForkSafeLock"]

_generation = 0  # forks since import, in this process's line (the child's count)


def _after_fork_in_child() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


class ForkSafeLock:
    """A threading.Lock (or what ``factory`` makes: RLock), made anew in a forked child at its
    first use there; a context manager with acquire/release, as the lock is."""

    __slots__ = ("_factory", "_lock", "_gen")

    def __init__(self, factory: Callable[[], Any] = threading.Lock) -> None:
        self._factory, self._lock, self._gen = factory, factory(), _generation

    def _now(self) -> Any:
        if self._gen != _generation:  # (forked since: the parent's may be held)
            self._lock, self._gen = self._factory(), _generation
        return self._lock

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock (threading.Lock.acquire)."""
        return self._now().acquire(blocking, timeout)

    def release(self) -> None:
        """Let the lock go."""
        self._lock.release()

    def __enter__(self) -> bool:
        return self._now().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)
