"""pytest plugin: run zarr-python's own tests with chunkstore in zarr's place, as a user who
writes ``import chunkstore as zarr`` would switch (issue 28).

With ``CHUNKSTORE_AS_ZARR=1``, when pytest loads this plugin (``-p chunkstore_as_zarr``,
before zarr-python's test modules and their conftest.py are imported):

1. zarr-python is imported in full (every module of the package except its CLI), so that
   its internals -- ``zarr.core.*``, ``zarr.abc.*``, ``zarr.registry``, ``zarr.testing.*``,
   ``zarr.storage._common`` ..., which the tests and their conftest.py import and which
   chunkstore has no equivalent of -- are loaded, bound to zarr-python, and stay in
   ``sys.modules`` ("left to zarr-python").
2. ``sys.modules["zarr"] = chunkstore``, and zarr's public submodules (`PUBLIC`) are
   replaced by chunkstore's module of the same role. A deeper submodule of a replaced one
   (``zarr.codecs.sharding``, ...) is replaced by chunkstore's module of the same name where
   chunkstore has one that defines every public name zarr-python's module does; otherwise it
   is left to zarr-python.
   A module left to zarr-python that holds one of zarr's public objects (``zarr.core.array``:
   ``Array``, ``AsyncArray``; ``zarr.core.group``: ``Group``, ...) is replaced by a copy
   with those names pointed at chunkstore's (`_shadow_public_objects`), so that a test
   importing ``from zarr.core.array import AsyncArray`` gets chunkstore's too (except in
   ``zarr.core.dtype.*``: see `NO_SHADOW`).
3. zarr-python's top-level names that chunkstore lacks and that are modules (``zarr.core``,
   ``zarr.abc``, ``zarr.registry``, ``zarr.testing``, ...) are set as attributes of the
   chunkstore module object (at run time only; no file of chunkstore changes), so that
   ``import zarr.core.group; zarr.core.group.X`` still resolves to zarr-python.
4. The test helpers in ``zarr.testing.*`` that call the public API as ``zarr.<name>``
   (the hypothesis strategies: ``zarr.testing.strategies``) get ``zarr`` rebound to
   chunkstore, so that the arrays they draw are chunkstore's.

What was replaced and what was left to zarr-python is printed in the report header and in
full at the end of the run (``chunkstore_as_zarr: ...`` lines).

Without ``CHUNKSTORE_AS_ZARR=1`` the plugin changes nothing (the baseline: zarr-python).
Used by ci/zarr_parity/run.sh.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import types

ROUTE = os.environ.get("CHUNKSTORE_AS_ZARR") == "1"

from plugin_report import header, write_report  # noqa: E402
from public_modules import PUBLIC  # noqa: E402 (zarr's public modules -> chunkstore's)
SKIP = ("zarr._cli",)  # needs typer; no test here uses it
# zarr-python's data-type subsystem stays whole: its registry (data_type_registry) holds
# zarr-python's classes, which the tests compare by identity with the classes they import
# from zarr.core.dtype.* (tests/test_dtype/conftest.py, imported by test_array.py); a test
# importing them from the public zarr.dtype gets chunkstore's.
NO_SHADOW = ("zarr.core.dtype",)

replaced: dict[str, str] = {}
left: list[str] = []
missing_names: dict[str, list[str]] = {}
failed_imports: dict[str, str] = {}
shadowed: dict[str, list[str]] = {}
_real: dict[str, object] = {}


def _public_names(mod: types.ModuleType) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, v in vars(mod).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == mod.__name__]
    return list(names)


def _import_all_of_zarr() -> types.ModuleType:
    import warnings

    import zarr
    for info in pkgutil.walk_packages(zarr.__path__, "zarr."):
        if info.name.startswith(SKIP):
            continue
        try:
            with warnings.catch_warnings():  # zarr.convenience, zarr.creation: deprecated
                warnings.simplefilter("ignore")
                importlib.import_module(info.name)
        except Exception as e:  # noqa: BLE001 (optional dependencies: gpu, obstore, ...)
            failed_imports[info.name] = f"{type(e).__name__}: {e}"
    return zarr


def _route() -> None:
    early = sorted(k for k in sys.modules if k == "zarr" or k.startswith("zarr."))
    if early:
        raise RuntimeError(f"chunkstore_as_zarr: zarr-python was imported before the plugin "
                           f"({', '.join(early[:5])}); load it earlier with -p and use -p no:zarr")
    real = _import_all_of_zarr()
    _real["config"] = sys.modules["zarr.core.config"].config
    import chunkstore
    real_modules = {k: v for k, v in sys.modules.items() if k.startswith("zarr.")}
    sys.modules["zarr"] = chunkstore
    for name, target in PUBLIC.items():
        mod = importlib.import_module(target)
        sys.modules[name] = mod
        replaced[name] = target
        if name in real_modules:
            miss = [n for n in _public_names(real_modules[name]) if not hasattr(mod, n)]
            if miss:
                missing_names[name] = miss
    for name, mod in sorted(real_modules.items()):
        if name in PUBLIC:
            continue
        parent = next((p for p in PUBLIC if name.startswith(p + ".")), None)
        target = "chunkstore" + name[len("zarr"):]
        if parent is not None and not name.rsplit(".", 1)[-1].startswith("_"):
            try:
                cand = importlib.import_module(target)
            except ImportError:
                cand = None
            if cand is not None and all(hasattr(cand, n) for n in _public_names(mod)):
                sys.modules[name] = cand
                replaced[name] = target
                continue
        left.append(name)
    _shadow_public_objects(real, real_modules, chunkstore)
    for attr, value in vars(real).items():
        if isinstance(value, types.ModuleType) and value.__name__.startswith("zarr.") \
                and not hasattr(chunkstore, attr):
            setattr(chunkstore, attr, value)
    for name, mod in real_modules.items():
        if name.startswith("zarr.testing") and getattr(mod, "zarr", None) is real:
            mod.zarr = chunkstore


def _shadow_public_objects(real, real_modules, chunkstore) -> None:
    """zarr-python's public objects (``zarr.AsyncArray``, ``zarr.Group``,
    ``zarr.storage.StorePath``, ``zarr.codecs.BloscCodec``, ...) are chunkstore's wherever
    a test imports them from: a module left to zarr-python that holds one of them
    (``zarr.core.array``: ``Array``, ``AsyncArray``; ``zarr.core.group``; ...) is replaced in
    ``sys.modules`` by a copy with those names pointed at chunkstore's object of the same
    name (where chunkstore has one). The original module is untouched, so zarr-python's own
    functions keep using zarr-python's classes."""
    sources = {"zarr": (real, chunkstore)}
    for name, target in PUBLIC.items():
        if name in real_modules:
            sources[name] = (real_modules[name], sys.modules[name])
    public: dict[int, object] = {}
    for real_mod, cs_mod in sources.values():
        for n in getattr(real_mod, "__all__", None) or [n for n in vars(real_mod)
                                                       if not n.startswith("_")]:
            obj = getattr(real_mod, n, None)
            if isinstance(obj, types.ModuleType) or obj is None or not hasattr(cs_mod, n):
                continue
            if getattr(obj, "__module__", "").startswith("zarr"):
                public.setdefault(id(obj), getattr(cs_mod, n))
    for name in list(left):
        if name.startswith(NO_SHADOW):
            continue
        mod = real_modules[name]
        hits = {n: public[id(v)] for n, v in vars(mod).items() if id(v) in public}
        if not hits:
            continue
        copy = types.ModuleType(name, mod.__doc__)
        copy.__dict__.update({k: v for k, v in vars(mod).items() if k != "__name__"})
        copy.__dict__.update(hits)
        sys.modules[name] = copy
        shadowed[name] = sorted(hits)
    # ... and reached as attributes too (a test's ``zarr.core.group.AsyncGroup``): the copies
    # hang from their parent packages in place of the originals
    for name in shadowed:
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, sys.modules[name])


if ROUTE:
    _route()


notes: list[str] = []


class _Opener:
    """Stands in, in tests/conftest.py only, for a chunkstore store class that lacks
    zarr-python 3's ``await Store.open(...)``: ``open`` constructs the store (an
    ``FsspecStore`` from its ``url=``); anything else goes to the class."""

    def __init__(self, cls: type) -> None:
        self._cls = cls

    async def open(self, *args, **kwargs):
        if "url" in kwargs and hasattr(self._cls, "from_url"):
            return self._cls.from_url(kwargs.pop("url"), *args, **kwargs)
        return self._cls(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self._cls(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._cls, name)


def pytest_plugin_registered(plugin, manager):
    """Three adaptations of zarr-python's tests/conftest.py (not of the tests), each made only
    where chunkstore lacks what it uses, and each reported (``note:`` lines); with
    ZARR_PARITY_STRICT_CONFTEST=1 none is made.

    Its ``sync_store`` fixture checks ``isinstance(store, zarr.abc.store.Store)`` (zarr-python's
    ABC, left to zarr-python); the conftest's ``Store`` is pointed at (that ABC, chunkstore's
    ``BaseStore``).

    Its store fixtures (``store``, ``local_store``, ``memory_store``, ``zip_store``,
    ``remote_store``) build stores with zarr-python 3's ``await LocalStore.open(path)``; chunkstore's
    stores have no ``open`` classmethod, so every test taking a store would error in setup.
    The conftest's store names are pointed at `_Opener`, which constructs chunkstore's store.

    It also has an autouse fixture, ``reset_config``, that calls
    ``zarr.config.reset()`` around every test (``from zarr import config``). chunkstore's
    ``config`` has no ``reset``: left so, every test would error in that fixture. The
    conftest's ``config`` is pointed at zarr-python's config object instead (the fixture
    then resets zarr-python's config, not chunkstore's), and this is reported."""
    if not ROUTE or not isinstance(plugin, types.ModuleType):
        return
    if not (getattr(plugin, "__file__", "") or "").endswith(os.path.join("tests", "conftest.py")):
        return
    if os.environ.get("ZARR_PARITY_STRICT_CONFTEST") == "1":
        return
    import chunkstore
    for name in ("LocalStore", "MemoryStore", "FsspecStore", "ZipStore"):
        cls = getattr(plugin, name, None)
        if isinstance(cls, type) and cls.__module__.startswith("chunkstore") \
                and not hasattr(cls, "open"):
            setattr(plugin, name, _Opener(cls))
            notes.append(f"tests/conftest.py: chunkstore's {name} has no async classmethod "
                         f"open(); the conftest's store fixtures construct it instead")
    store_abc = getattr(plugin, "Store", None)
    from chunkstore.storage.base import BaseStore
    if isinstance(store_abc, type) and not issubclass(BaseStore, store_abc):
        plugin.Store = (store_abc, BaseStore)
        notes.append("tests/conftest.py: chunkstore's stores are no zarr.abc.store.Store; its "
                     "sync_store fixture's isinstance check accepts chunkstore's BaseStore too")
    cfg = getattr(plugin, "config", None)
    if cfg is getattr(chunkstore, "config", None) and not hasattr(cfg, "reset"):
        plugin.config = _real["config"]  # zarr.core.config.config, before any shadowing
        notes.append("tests/conftest.py: chunkstore.config has no reset(); its autouse "
                     "reset_config fixture resets zarr-python's config instead")


def pytest_report_header(config):
    return header("chunkstore_as_zarr", ROUTE and f"{len(replaced)} zarr modules replaced by "
                  f"chunkstore's, {len(left)} left to zarr-python")


def pytest_terminal_summary(terminalreporter):
    if ROUTE:
        write_report(terminalreporter.write_line, "chunkstore_as_zarr", notes,
                     [f"replaced {name} -> {target}" for name, target in sorted(replaced.items())],
                     missing_names, left, shadowed)


# (the per-test time limit is ci/zarr_parity/test_timeout.py, loaded with -p test_timeout)
