"""Running a test's call so that a hang fails the test instead of the whole suite."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def call_within(fn: Callable[[], Any], timeout: float) -> Any:
    """fn() in a daemon thread: its value, or its exception re-raised here; an assertion
    error when it has not returned within timeout seconds (a deadlock: the thread is left
    behind)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"{fn} did not return within {timeout} s (a deadlock?)"
    if "error" in out:
        raise out["error"]
    return out["value"]
