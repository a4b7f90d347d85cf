"""pytest plugin: run dask's own Zarr tests with chunkstore in zarr's place, as a user who
writes ``import chunkstore as zarr`` for the libraries they use would switch:
``sys.modules["zarr"] = chunkstore`` and zarr's public submodules mapped to chunkstore's
(``zarr.storage`` -> ``chunkstore.storage``, ...), set when pytest loads this plugin
(``-p chunkstore_as_zarr``), before dask, xarray or any test module imports zarr. dask and
xarray are not patched: dask's ``from_zarr``/``to_zarr`` run their own code against
chunkstore (chunkstore's ``__version__`` is below 3, so dask takes its zarr-python 2 path).

One thing is changed in the tests themselves: dask gates its sharding tests with
``pytest.importorskip("zarr", minversion="3.0.0")``, which compares chunkstore's own version
number, not what it can do. With ``CHUNKSTORE_KEEP_VERSION_GATE=1`` those tests skip;
otherwise the gate is ignored for zarr (chunkstore writes shards) and the tests that passed
it are listed at the end of the run ("version gate ignored: <test id>"), so that
ci/dask_parity/compare.py can count them apart.

In both runs the plugin keeps, of the test files given, the tests that use zarr: those whose
function's source mentions ``zarr`` or that take a fixture named ``zarr`` (dask's tests have
no marker for it; ``-k zarr`` would miss e.g. ``test_array_store_final_order``).

``CHUNKSTORE_AS_ZARR_VERSION=3.1.6`` (say) makes chunkstore report that version for the run:
dask then takes its zarr-python 3 path (``zarr.create_array``, ``FsspecStore.from_url``) and
the tests their zarr-python 3 branches. A check of that path, not what a user's swap does.

Used by ci/dask_parity/run.sh; without ``CHUNKSTORE_AS_ZARR=1`` the plugin changes nothing
(the baseline run: zarr-python on the same tests).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys

import pytest

ROUTE = os.environ.get("CHUNKSTORE_AS_ZARR") == "1"
KEEP_GATE = os.environ.get("CHUNKSTORE_KEEP_VERSION_GATE") == "1"

from public_modules import PUBLIC as SUBMODULES  # noqa: E402 (ci/zarr_parity)

_gate_ignored: list[str] = []
_skipped: dict[str, str] = {}


def _route() -> None:
    early = sorted(k for k in sys.modules if k == "zarr" or k.startswith("zarr."))
    if early:
        raise pytest.UsageError(f"chunkstore_as_zarr: zarr-python was imported before the "
                                f"plugin ({', '.join(early[:5])}); load it earlier with -p")
    import chunkstore
    if os.environ.get("CHUNKSTORE_AS_ZARR_VERSION"):
        chunkstore.__version__ = os.environ["CHUNKSTORE_AS_ZARR_VERSION"]
    sys.modules["zarr"] = chunkstore
    for name, target in SUBMODULES.items():
        try:
            sys.modules[name] = importlib.import_module(target)
        except ImportError:
            pass


if ROUTE:
    _route()


def _uses_zarr(item) -> bool:
    if "zarr" in getattr(item, "fixturenames", ()):
        return True
    fn = getattr(item, "function", None)
    try:
        return fn is not None and "zarr" in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(session, config, items):
    keep = [it for it in items if _uses_zarr(it)]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[it for it in items if not _uses_zarr(it)])
        items[:] = keep


@pytest.fixture(autouse=True)
def _ignore_zarr_version_gate(request, monkeypatch):
    """``pytest.importorskip("zarr", minversion=...)`` without the version comparison."""
    if not ROUTE or KEEP_GATE:
        yield
        return
    importorskip = pytest.importorskip

    def gated(modname, minversion=None, *args, **kw):
        if modname != "zarr" or minversion is None:
            return importorskip(modname, minversion, *args, **kw)
        try:
            return importorskip(modname, minversion, *args, **kw)
        except pytest.skip.Exception:
            if request.node.nodeid not in _gate_ignored:
                _gate_ignored.append(request.node.nodeid)
            return importorskip(modname, None, *args, **kw)

    monkeypatch.setattr(pytest, "importorskip", gated)
    yield


def pytest_runtest_logreport(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        _skipped.setdefault(report.nodeid, str(report.longrepr[2]).removeprefix("Skipped: "))


def pytest_terminal_summary(terminalreporter):
    zarr = sys.modules.get("zarr")
    if zarr is not None:
        terminalreporter.write_line(f"zarr module: {zarr.__name__} {zarr.__version__} "
                                    f"({zarr.__file__})")
    # -rA reports skips by location; ci/dask_parity/compare.py wants their test ids
    for nodeid, reason in _skipped.items():
        terminalreporter.write_line(f"skipped test: {nodeid} - {reason}")
    for nodeid in _gate_ignored:
        terminalreporter.write_line(f"version gate ignored: {nodeid}")
