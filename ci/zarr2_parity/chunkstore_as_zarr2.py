"""pytest plugin: run zarr-python 2.18's own test suite (the ``zarr/tests`` package of its
wheel) with chunkstore in zarr's place, as a zarr-python 2 user who writes
``import chunkstore as zarr`` would switch. The zarr-python 2 counterpart of
ci/zarr_parity/chunkstore_as_zarr.py (zarr-python 3); used by ci/zarr2_parity/run.sh.

With ``CHUNKSTORE_AS_ZARR=1``, when pytest loads this plugin (``-p chunkstore_as_zarr2``,
before zarr's test modules are imported):

1. zarr-python 2 is imported in full (every module of the package except its tests), so that
   its internals -- ``zarr.util``, ``zarr.meta``, ``zarr.indexing``, ``zarr.context``,
   ``zarr._storage.*``, ``zarr.n5`` ..., which the tests import and which chunkstore has no
   module of the same role for -- are loaded, bound to zarr-python, and stay in
   ``sys.modules`` ("left to zarr-python"). ``zarr.tests`` (the package, not its modules) is
   imported too, so that its modules import from it.
2. ``sys.modules["zarr"] = chunkstore``: every ``zarr.<name>`` a test uses is chunkstore's.
3. zarr's public modules (`PUBLIC`: ``zarr.storage``, ``zarr.creation``, ``zarr.convenience``,
   ``zarr.hierarchy``, ``zarr.core``, ``zarr.errors``, ``zarr.attrs``, ``zarr.sync``) are
   replaced in ``sys.modules`` by a *blend*: a copy of zarr-python's module in which every
   name that module defines (a class or function whose ``__module__`` is that module) is
   pointed at chunkstore's object of the same name, looked up in chunkstore's modules of
   the same role, in order; a name it re-exports from another public module (zarr.storage's
   ``MetadataError``) or from zarr's top level follows it there. A name none of them has stays zarr-python's and is
   reported (``chunkstore lacks`` lines): the test modules import helpers at module level
   (``from zarr.storage import init_array, init_group, atexit_rmtree, rename``), and a
   missing one would otherwise turn a whole module into one collection error. Names zarr's
   modules import from elsewhere (numcodecs, typing, collections) stay as they are.
   ``zarr.codecs`` (zarr-python 2's re-export of numcodecs) is left to zarr-python:
   chunkstore's ``chunkstore.codecs`` is zarr-python 3's codec classes, another role.
4. Every module left to zarr-python that holds one of zarr's public objects by another name
   path (``zarr._storage.store``, ``zarr.n5`` ...: ``MetadataError``, ``Array`` ...) is
   replaced in ``sys.modules`` by a copy with those objects pointed at chunkstore's
   (``_shadow``); the original modules are untouched, so zarr-python's own functions
   (``zarr.storage.init_array`` where chunkstore has none ...) keep using zarr-python's.
5. zarr's submodules that chunkstore lacks as attributes (``zarr.creation``,
   ``zarr.convenience``, ``zarr.attrs``, ``zarr.util``, ``zarr.tests`` ...) are set as
   attributes of the chunkstore module object (the blends where there is one), and
   ``chunkstore.__file__`` is pointed at zarr-python's (run time only; no file of chunkstore
   changes): the tests find the repository's ``fixture/`` folder as
   ``Path(zarr.__file__).parent.parent / "fixture"`` and would otherwise read and *write*
   fixtures next to chunkstore's checkout.

What was replaced, blended, shadowed and left is printed at the end of the run
(``chunkstore_as_zarr2: ...`` lines). Without ``CHUNKSTORE_AS_ZARR=1`` the plugin changes
nothing but the per-test time limit (the baseline: zarr-python 2).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import types

from plugin_report import header, write_report  # ci/zarr_parity/, on PYTHONPATH (run.sh)


ROUTE = os.environ.get("CHUNKSTORE_AS_ZARR") == "1"

# zarr-python 2's public modules -> chunkstore's modules of the same role, searched in order
PUBLIC = {
    "zarr.storage": ["chunkstore.storage", "chunkstore.hierarchy.creation", "chunkstore"],
    "zarr.creation": ["chunkstore.hierarchy.creation", "chunkstore"],
    "zarr.convenience": ["chunkstore.hierarchy.convenience", "chunkstore"],
    "zarr.hierarchy": ["chunkstore.hierarchy.group", "chunkstore.hierarchy.attrs", "chunkstore"],
    "zarr.core": ["chunkstore.engine.array", "chunkstore"],
    "zarr.errors": ["chunkstore.errors", "chunkstore"],
    "zarr.attrs": ["chunkstore.hierarchy.attrs"],
    "zarr.sync": ["chunkstore.sync.synchronizers", "chunkstore.sync"],
}
SKIP = ("zarr.tests.",)

blended: dict[str, list[str]] = {}       # zarr module -> names pointed at chunkstore's
missing_names: dict[str, list[str]] = {}  # zarr module -> zarr-defined names chunkstore lacks
left: list[str] = []
shadowed: dict[str, list[str]] = {}
failed_imports: dict[str, str] = {}
notes: list[str] = []


def _import_all_of_zarr() -> types.ModuleType:
    import warnings

    import zarr
    for info in pkgutil.walk_packages(zarr.__path__, "zarr.",
                                      onerror=lambda name: None):
        if info.name.startswith(SKIP):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                importlib.import_module(info.name)
        except Exception as e:  # noqa: BLE001 (optional dependencies)
            failed_imports[info.name] = f"{type(e).__name__}: {e}"
    return zarr


def _defined_in_zarr(obj: object) -> bool:
    if isinstance(obj, types.ModuleType):
        return False
    mod = getattr(obj, "__module__", None)
    return isinstance(mod, str) and (mod == "zarr" or mod.startswith("zarr."))


def _route() -> None:
    early = sorted(k for k in sys.modules if k == "zarr" or k.startswith("zarr."))
    if early:
        raise RuntimeError(f"chunkstore_as_zarr2: zarr-python was imported before the plugin "
                           f"({', '.join(early[:5])}); load it earlier with -p")
    real = _import_all_of_zarr()
    import chunkstore
    real_modules = {k: v for k, v in sys.modules.items() if k.startswith("zarr.")}
    public: dict[int, object] = {}  # id(zarr-python's object) -> chunkstore's
    blends: dict[str, types.ModuleType] = {}
    for name, targets in PUBLIC.items():
        zmod = real_modules[name]
        srcs = [importlib.import_module(t) for t in targets]
        blend = types.ModuleType(name, zmod.__doc__)
        blend.__dict__.update({k: v for k, v in vars(zmod).items() if k != "__name__"})
        hits, miss = [], []
        for n, obj in vars(zmod).items():
            # names this module defines; its re-exports follow their defining module below
            if n.startswith("_") or getattr(obj, "__module__", None) != name \
                    or isinstance(obj, types.ModuleType):
                continue
            for src in srcs:
                cobj = getattr(src, n, None)
                if cobj is not None and not isinstance(cobj, types.ModuleType) \
                        and callable(cobj) == callable(obj):
                    blend.__dict__[n] = cobj
                    public.setdefault(id(obj), cobj)
                    hits.append(n)
                    break
            else:
                miss.append(n)
        blends[name] = blend
        blended[name] = sorted(hits)
        if miss:
            missing_names[name] = sorted(miss)
    # zarr's top-level names that are chunkstore's too (zarr.Array, zarr.open_group, ...)
    for n, obj in vars(real).items():
        if not n.startswith("_") and _defined_in_zarr(obj) and hasattr(chunkstore, n):
            public.setdefault(id(obj), getattr(chunkstore, n))
    # a blend also takes chunkstore's object for a zarr object it re-exports from elsewhere
    # (zarr.storage's MetadataError, zarr.hierarchy's Attributes ...)
    for name, blend in blends.items():
        for n, obj in vars(real_modules[name]).items():
            if id(obj) in public and blend.__dict__[n] is obj:
                blend.__dict__[n] = public[id(obj)]
                blended[name].append(n)
                if n in missing_names.get(name, []):
                    missing_names[name].remove(n)
        sys.modules[name] = blend
    sys.modules["zarr"] = chunkstore
    for name, mod in sorted(real_modules.items()):
        if name in PUBLIC:
            continue
        left.append(name)
        hits = {n: public[id(v)] for n, v in vars(mod).items()
                if not isinstance(v, (int, str, bool, type(None))) and id(v) in public}
        if not hits or name == "zarr.tests":
            continue
        copy = types.ModuleType(name, mod.__doc__)
        copy.__dict__.update({k: v for k, v in vars(mod).items() if k != "__name__"})
        copy.__dict__.update(hits)
        sys.modules[name] = copy
        shadowed[name] = sorted(hits)
    # zarr.<submodule> as an attribute, where chunkstore has no attribute of that name
    for attr, value in vars(real).items():
        if isinstance(value, types.ModuleType) and value.__name__.startswith("zarr.") \
                and not hasattr(chunkstore, attr):
            setattr(chunkstore, attr, sys.modules.get(value.__name__, value))
    for attr in ("tests",):
        if not hasattr(chunkstore, attr):
            setattr(chunkstore, attr, sys.modules[f"zarr.{attr}"])
    notes.append(f"chunkstore.__file__ pointed at zarr-python's ({real.__file__}) for the "
                 f"tests' fixture/ lookups")
    chunkstore.__file__ = real.__file__


# --- ZARR2_PARITY_ADAPT=1: a second, adapted measurement (off by default) -------------------
# zarr-python 2's tests build almost every array and group through the same scaffolding:
# ``init_array(store, chunk_store=..., storage_transformers=...)`` / ``init_group(...)`` from
# zarr.storage, then the constructors ``Array(store, chunk_store=, cache_attrs=,
# partial_decompress=, ...)``, ``Group(store, chunk_store=, ...)``, ``Attributes(store,
# cache=)``. chunkstore refuses those zarr-python 2 keywords (and has no ``init_group``), so
# without adaptation ~1,400 tests stop in their setup and say nothing about the behaviour
# under test. With ZARR2_PARITY_ADAPT=1 those entry points drop the keywords that carry no
# behaviour chunkstore lacks -- ``chunk_store=None``, ``storage_transformers`` empty,
# ``cache_attrs``, ``cache``, ``partial_decompress``, ``zarr_version``/``meta_array`` at
# their defaults -- and ``init_group`` is chunkstore's ``group(store, path=, overwrite=)``;
# a non-default value (a separate chunk_store, storage transformers, zarr_version=3) is
# passed on, so it still fails where chunkstore lacks the feature. The constructors are
# wrapped in place (chunkstore's classes, in this process only), and each adaptation is
# reported (``note:`` lines). The default run (no adaptation) is the headline number.
ADAPT = ROUTE and os.environ.get("ZARR2_PARITY_ADAPT") == "1"


def _drop(kwargs: dict, defaults: dict, always: tuple[str, ...] = ()) -> dict:
    for k in always:
        kwargs.pop(k, None)
    for k, d in defaults.items():
        if k in kwargs and (kwargs[k] == d if not callable(d) else d(kwargs[k])):
            del kwargs[k]
    return kwargs


_DEFAULTS = {"chunk_store": lambda v: v is None, "meta_array": lambda v: v is None,
             "zarr_version": lambda v: v in (None, 2),
             "storage_transformers": lambda v: not v}


def _adapt() -> None:
    import functools

    import chunkstore
    from chunkstore.hierarchy import creation
    from chunkstore.hierarchy.attrs import Attributes

    def wrap_init(cls, always):
        orig = cls.__init__

        @functools.wraps(orig)
        def __init__(self, *args, **kwargs):
            orig(self, *args, **_drop(kwargs, _DEFAULTS, always))
        cls.__init__ = __init__

    wrap_init(chunkstore.Array, ("cache_attrs", "partial_decompress"))
    wrap_init(chunkstore.Group, ("cache_attrs",))
    wrap_init(Attributes, ("cache",))

    def init_array(store, *args, **kwargs):
        return creation.init_array(store, *args, **_drop(kwargs, _DEFAULTS))

    def init_group(store, overwrite=False, path=None, chunk_store=None):
        kw = {} if chunk_store is None else {"chunk_store": chunk_store}
        chunkstore.group(store=store, overwrite=overwrite, path=path, **kw)

    for name in ("zarr.storage", "zarr.hierarchy", "zarr.creation"):
        mod = sys.modules[name]
        if "init_array" in vars(mod):
            mod.init_array = init_array
        if "init_group" in vars(mod):
            mod.init_group = init_group
    notes.append("ZARR2_PARITY_ADAPT=1: chunkstore's Array/Group/Attributes constructors drop "
                 "cache_attrs, partial_decompress, cache, and chunk_store=None, meta_array=None, "
                 "zarr_version in (None, 2), empty storage_transformers; zarr.storage.init_array "
                 "is chunkstore.hierarchy.creation.init_array less those; zarr.storage.init_group "
                 "is chunkstore.group(store, path=, overwrite=)")


if ROUTE:
    _route()
if ADAPT:
    _adapt()


def pytest_report_header(config):
    return header("chunkstore_as_zarr2", ROUTE and f"{len(blended)} zarr modules blended with "
                  f"chunkstore's, {len(shadowed)} shadowed, {len(left)} left to zarr-python")


def pytest_terminal_summary(terminalreporter):
    if ROUTE:
        write_report(terminalreporter.write_line, "chunkstore_as_zarr2", notes,
                     [f"blended {name} -> {PUBLIC[name]}: chunkstore's {', '.join(hits)}"
                      for name, hits in sorted(blended.items())],
                     missing_names, left, shadowed, " (zarr-python's kept)", failed_imports)


# (the per-test time limit is ci/zarr_parity/test_timeout.py, loaded with -p test_timeout)
