"""Locks a forked child gets anew (plain threading locks, replaced by the fork handler while
the child has one thread): one a parent thread held at the fork stayed held in the child,
whose first use hung, holding what else it had taken (a writer's kernel region locks)."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable

__all__ = ["fork_safe", "on_fork"]

# (weak reference to the owner, attribute, factory) of every lock fork_safe made
_entries: list[tuple[Any, str, Callable[[], Any]]] = []
_hooks: list[Callable[[], None]] = []
_guard = threading.Lock()
_prune_at = 64


def fork_safe(owner: Any, name: str, factory: Callable[[], Any] = threading.Lock) -> Any:
    """Set ``owner.name`` to ``factory()`` (a threading.Lock by default; owner: an object
    or a module) and make it anew in every forked child; returns the lock."""
    global _prune_at
    lock = factory()
    setattr(owner, name, lock)
    with _guard:
        _entries.append((weakref.ref(owner), name, factory))
        if len(_entries) > _prune_at:  # (owners gone: dropped, in amortized O(1))
            _entries[:] = [e for e in _entries if e[0]() is not None]
            _prune_at = max(64, 2 * len(_entries))
    return lock


def on_fork(hook: Callable[[], None]) -> None:
    """Call hook in every forked child (after the locks of fork_safe are made anew)."""
    with _guard:
        _hooks.append(hook)


def _after_fork_in_child() -> None:
    global _guard
    _guard = threading.Lock()  # (the child's one thread: nothing else runs here)
    for ref, name, factory in _entries:
        owner = ref()
        if owner is not None:
            setattr(owner, name, factory())
    for hook in _hooks:
        hook()


os.register_at_fork(after_in_child=_after_fork_in_child)
