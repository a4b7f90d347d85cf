"""A per-test time limit for the parity runs (ci/zarr_parity, ci/zarr2_parity; pytest-timeout
may not be installed), loaded with ``-p test_timeout``: a test that runs longer than
$ZARR_PARITY_TEST_TIMEOUT seconds (default 120; 0: none) fails with "TestTimeout", and the
run goes on."""

from __future__ import annotations

import os
import signal

import pytest

TEST_TIMEOUT = int(os.environ.get("ZARR_PARITY_TEST_TIMEOUT", "120"))


class TestTimeout(Exception):
    """A test ran past the limit."""

    __test__ = False


def _alarm(signum, frame):
    raise TestTimeout(f"TestTimeout: ran past {TEST_TIMEOUT} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Run the test under the alarm."""
    if TEST_TIMEOUT <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
