"""A gate that a fork waits for (database stores' transactions in flight): see ForkGate."""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Iterator

__all__ = ["ForkGate"]

_guard = threading.Lock()


class ForkGate:
    """Many concurrent holders (``shared()``: a database transaction), or one exclusive
    (``exclusive()``), within this process; and a fork waits for the shared holders of
    every gate to end, and holds new ones off until it is done. A database library keeps
    each connection's locks in process memory: a fork while another thread was inside a
    transaction gave the child locks held by a thread it does not have (LMDB: the child
    hung for good opening the environment; SQLite: every write of the child failed,
    "database is locked"). A thread that forks while itself holding a gate shared passes
    that gate (it would wait for itself)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._active = 0
        self._exclusive = False
        self._mine = threading.local()  # this thread's shared holds
        with _guard:
            _gates.add(self)

    def shared(self) -> "ForkGate":
        """Held with others (not while one holds it exclusively, or a fork is under way): a
        context manager (the gate itself: a generator-made one cost a database store's
        every statement a microsecond more)."""
        return self

    def __enter__(self) -> None:
        with self._lock:  # (the condition's: waited on only while one is exclusive)
            while self._exclusive:
                self._cond.wait()
            self._active += 1
        mine = self._mine
        mine.n = getattr(mine, "n", 0) + 1

    def __exit__(self, *exc: object) -> None:
        self._mine.n -= 1
        with self._lock:
            self._active -= 1
            if not self._active and self._exclusive:  # (someone waits to hold it alone)
                self._cond.notify_all()

    def _take(self) -> None:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._exclusive = True
            while self._active:
                self._cond.wait()

    def _give(self) -> None:
        with self._cond:
            self._exclusive = False
            self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held alone: once every shared holder has let go."""
        self._take()
        try:
            yield
        finally:
            self._give()

    def _held_here(self) -> bool:
        return getattr(self._mine, "n", 0) > 0


_gates: "weakref.WeakSet[ForkGate]" = weakref.WeakSet()
_taken: list[ForkGate] = []


def _before_fork() -> None:
    with _guard:
        gates = [g for g in _gates if not g._held_here()]
    for g in gates:
        g._take()
        _taken.append(g)


def _after_fork_in_parent() -> None:
    while _taken:
        _taken.pop()._give()


def _after_fork_in_child() -> None:
    global _guard
    _guard = threading.Lock()  # (the child's one thread)
    while _taken:  # (the gates the fork waited for: free in the child, whose one thread
        g = _taken.pop()  # holds none of them)
        g._lock = threading.Lock()
        g._cond = threading.Condition(g._lock)
        g._active, g._exclusive = 0, False
        g._mine = threading.local()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
