"""Group: a node of the hierarchy holding arrays and other groups, with attributes.

The Zarr v2 layout: a group is a `.zgroup` document (plus `.zattrs`) at its path; members are
the child paths holding `.zarray` or `.zgroup`.
"""

from __future__ import annotations

import contextlib
import html
import itertools
import os
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, cast

import numpy as np

from chunkstore.storage import protocol
from chunkstore.storage.store_path import StorePath, split_store_path
from chunkstore.hierarchy import creation
from chunkstore.hierarchy import nodes
from chunkstore.engine.array import Array, check_zarr2_keywords, Info
from chunkstore.hierarchy.creation import contains_array, contains_group, normalize_path
from chunkstore.errors import (ArrayNotFoundError, ConsolidatedMetadataNotFoundError,
                               ContainsArrayError, ContainsGroupError, GroupNotFoundError,
                               IncompatibleArrayError, IncompatibleGroupError,
                               PathNotFoundError, ReadOnlyError)
from chunkstore.metadata.formats import documents_first, format_of, kind_of_document
from chunkstore.compat.group_api import GroupAPIv3
from chunkstore.compat.node_api import Members
from chunkstore.storage.base import delitems, keys_under, listdir
from chunkstore.storage.consolidated import ConsolidatedMetadataStore
from chunkstore.storage.consolidated_v3 import ConsolidatedV3Store
from chunkstore.storage.normalize import StoreLike, normalize_store
from chunkstore.errors import store_name


#: the options of an array handle that require_dataset/require_array pass on to the handle of
#: an existing array (a new array's handle gets them from the creation)
_HANDLE_OPTIONS = ("synchronizer", "cache_metadata", "write_empty_chunks", "missing_chunks")


class Group(nodes.Node, GroupAPIv3, MutableMapping):
    """A group in a store. Usually made by `group()` or `open_group()`, not directly."""

    _kind = "group"

    _store: MutableMapping[str, bytes]
    _path: str
    _read_only: bool
    _synchronizer: Any
    _format: int

    def __init__(self, store: MutableMapping[str, bytes], path: str = "",
                 read_only: bool = False, synchronizer: Any = None, *,
                 zarr_format: int | None = None, chunk_store: Any = None,
                 cache_attrs: bool = True, zarr_version: int | None = None,
                 meta_array: Any = None) -> None:
        # zarr-python 2's keywords, as Array takes them
        check_zarr2_keywords(chunk_store, meta_array)
        zarr_format = creation.format_alias(zarr_format, zarr_version)
        wrapped = getattr(store, "sync", None)
        if isinstance(wrapped, Group):
            # zarr-python 3's Group(async_group): a handle on that group, with its options
            # (others given are refused, as zarr-python 3 refuses them)
            if (path, read_only, synchronizer, zarr_format, chunk_store, meta_array) != (
                    "", False, None, None, None, None):
                raise TypeError("Group(async_group) takes no other arguments: the handle "
                                "shares the AsyncGroup's options")
            store, path = wrapped._store, wrapped._path
            read_only, synchronizer = wrapped._read_only, wrapped._synchronizer
            zarr_format = wrapped._format
        self._store = store
        self._path = protocol.node_path(store, normalize_path(path))
        self._read_only = bool(read_only)
        self._synchronizer = synchronizer
        # validated: the group's document (from a consolidated view, its JSON object without
        # the members, each parsed when it is opened rather than all of them here). Of an
        # explicit zarr_format that document is read first, one request where it is a group's;
        # otherwise (or where it is not) the node is looked for, and zarr_format binds: a
        # group of the other format is a GroupNotFoundError naming both formats.
        fmt = zarr_format
        doc = None if fmt is None else _group_document(store, self._path, fmt)
        if doc is None:
            kind, fmt = nodes.node_kind(store, self._path, zarr_format, want="group")
            doc = None if kind != "group" else _group_document(store, self._path, fmt)
            if doc is None:  # (none there, or removed since the look)
                raise GroupNotFoundError(_no_group(store, self._path))
        assert fmt is not None
        self._format = fmt
        key = nodes.metadata_key(self._path, fmt, "group")
        format_of(fmt).parse_group(doc, key)

    # ------------------------------------------------------------------ properties
    @property
    def info(self) -> Info:
        """A report on the group: name, type, Zarr format, store and members (zarr-python's
        ``Group.info``).
        """
        items = self._static_info_items() + [
                 ("No. members", str(len(self))),
                 ("No. arrays", str(len(self.array_keys()))),
                 ("No. groups", str(len(self.group_keys())))]
        if self.array_keys():
            items.append(("Arrays", ", ".join(self.array_keys())))
        if self.group_keys():
            items.append(("Groups", ", ".join(self.group_keys())))
        return Info(items, zarr_format=self._format)

    def _static_info_items(self) -> list[tuple[str, str]]:
        """The rows of ``info`` that need no request (AsyncGroup.info: zarr-python 3's)."""
        return [("Name", self.name), ("Type", "chunkstore.Group"),
                ("Zarr format", str(self._format)),
                ("Read-only", str(self._read_only)),
                ("Store type", type(self._store).__name__)]

    def __repr__(self) -> str:
        # zarr-python 3's: the store and the node's path in it; the root ends in "/" (its
        # name, which zarr-python 2's repr shows)
        return f"<Group {self.store_path}{'' if self._path else '/'}>"

    @classmethod
    def from_store(cls, store: StoreLike, *, attributes: Mapping[str, Any] | None = None,
                   zarr_format: int = 3, overwrite: bool = False) -> Group:
        """zarr-python 3's ``Group.from_store``: a new group at the root of store (Zarr v3
        unless zarr_format=2), with attributes; ContainsGroupError/ContainsArrayError if a
        node is there, unless overwrite=True."""
        return open_group(store, mode="w" if overwrite else "w-", zarr_format=zarr_format,
                          attributes=attributes)

    @classmethod
    def open(cls, store: StoreLike, zarr_format: int | None = None,
             use_consolidated: bool | None = None) -> Group:
        """zarr-python 3's ``Group.open``: the existing group at the root of store
        (GroupNotFoundError if there is none), through its consolidated metadata where asked
        (use_consolidated=True)."""
        return open_group(store, mode="r+", zarr_format=zarr_format,
                          use_consolidated=use_consolidated)

    @property
    def chunk_store(self) -> MutableMapping[str, bytes]:
        """zarr-python 2's ``chunk_store``: the store holding the members' chunks (the
        group's store: chunkstore keeps chunks and metadata in one)."""
        return self._store

    def nmembers(self, max_depth: int | None = 0) -> int:
        """zarr-python 3's ``nmembers``: how many members ``members(max_depth)`` gives
        (0: the direct members; None: the whole hierarchy below)."""
        return len(self.members(max_depth=max_depth))

    def __eq__(self, other):
        # two handles on the same path of equal stores (a pickled copy too, one reading
        # through consolidated metadata too), as Array's
        return isinstance(other, Group) and self._path == other._path and \
            nodes.same_location(self._store, other._store)

    def __hash__(self):
        # equal groups hash equal
        return hash((type(nodes.location_store(self._store)).__name__, self._path))

    def __getstate__(self):
        # (the format found: where both formats' documents lie at the path, a copy must
        # not open the other group there)
        return {"store": self._store, "path": self._path, "read_only": self._read_only,
                "synchronizer": self._synchronizer, "zarr_format": self._format}

    def __setstate__(self, state):
        self.__init__(**state)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        close = protocol.closer(self._store)
        if close is not None:
            close()

    # ------------------------------------------------------------------ members
    def _child(self, item):
        # A name starting with "/" is absolute: from the store's root, as in zarr-python 2.
        absolute = isinstance(item, str) and item.startswith("/")
        item = protocol.node_path(self._store, normalize_path(item))
        if not item:
            raise KeyError("an empty path names no member")
        return item if absolute else nodes.prefix(self._path) + item

    def _member(self, path):
        """("array" | "group", its Zarr format) of the member at path, or (None, None).

        Where another tool left both formats' documents at a member's path, the member is
        the node of this group's format, as zarr-python 3 traverses a hierarchy (a group
        opened with zarr_format=2 showed the v3 node's values there). A node of the other
        format alone is a member too (zarr-python 3 leaves it out: README, "Differences")."""
        return nodes.node_at(self._store, path, self._format, warn=False)

    def _member_kind(self, path):
        """"array" or "group" for the member at path (see _member), else None."""
        return self._member(path)[0]

    def _open_node(self, path, kind=None, fmt=None):
        # kind and fmt: what a listing has just told (no second look; fmt None: this
        # group's); else one look (see _member)
        if kind is None:
            kind, fmt = self._member(path)
        fmt = self._format if fmt is None else fmt
        if kind == "array":
            return Array(self._store, path=path, read_only=self._read_only,
                         synchronizer=self._synchronizer, zarr_format=fmt)
        if kind == "group":
            return Group(self._store, path=path, read_only=self._read_only,
                         synchronizer=self._synchronizer, zarr_format=fmt)
        raise KeyError(f"no array or group at {path!r} in group {self.name!r}")

    def __getitem__(self, item: str) -> Array | Group:
        if isinstance(item, str) and not normalize_path(item):
            # as zarr-python 2: "/" is the root group, "" this group
            return self._open_node("" if item.startswith("/") else self._path, "group")
        return self._open_node(self._child(item))

    def __getattr__(self, item):
        # Attribute access to members (root.foo), as zarr-python allows.
        if item.startswith("_"):
            raise AttributeError(item)
        try:
            return self[item]
        except (KeyError, ValueError):
            raise AttributeError(f"{type(self).__name__} {self.name!r} has no attribute or "
                                 f"member {item!r}") from None

    def __contains__(self, item: object) -> bool:
        try:
            path = self._child(item)
        except (KeyError, ValueError, TypeError):
            return False
        return self._member_kind(path) is not None

    def __setitem__(self, item: str, value: Any) -> None:
        self.array(item, value, overwrite=True)

    def __delitem__(self, item: str) -> None:
        self._check_writable()
        path = self._child(item)
        if item not in self:
            raise KeyError(f"no array or group at {path!r} in group {self.name!r}")
        creation.remove_node(self._store, path, self._synchronizer, required=True)

    def _member_kinds(self):
        """(name, "array" | "group", Zarr format) of the direct members (see _member),
        sorted by name: one look at each listed name."""
        out = []
        for name in listdir(self._store, self._path):
            kind, fmt = self._member(nodes.prefix(self._path) + name)
            if kind is not None:
                out.append((name, kind, fmt))
        return sorted(out)

    def _member_names(self):
        return [name for name, _, _ in self._member_kinds()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._member_names())

    def __len__(self) -> int:
        return len(self._member_names())

    # keys/values/items return lists, as zarr-python 2's Group does, not Mapping's views
    def keys(self) -> list[str]:  # type: ignore[override]
        """Sorted names of the direct members (arrays and groups)."""
        return self._member_names()

    def values(self) -> list[Array | Group]:  # type: ignore[override]
        """The direct members (arrays and groups), sorted by name."""
        return [node for _, node in self.items()]

    def items(self) -> list[tuple[str, Array | Group]]:  # type: ignore[override]
        """``(name, member)`` pairs of the direct members, sorted by name."""
        return list(self._opened(self._member_kinds()))

    def _opened(self, listed):
        """(name, node) of listed (name, kind, format) members, each opened; one removed
        since the listing is left out, as zarr-python 3 leaves it out (opening it raised: a
        listing racing a delete failed)."""
        pre = nodes.prefix(self._path)
        for k, kind, fmt in listed:
            try:
                yield k, self._open_node(pre + k, kind, fmt)
            except (ArrayNotFoundError, GroupNotFoundError, KeyError):
                continue

    @property
    def members(self) -> Members:
        """Mapping of name to Array/Group of the direct members; callable as zarr-python 3's
        members(max_depth=) (see chunkstore.compat.node_api.Members)."""
        return Members(self, self.items())

    def array_keys(self, recurse: bool = False) -> list[str]:
        """Names of the member arrays. With recurse, also those of every subgroup, each by
        its own name (not its path), in sorted order per group, as zarr-python 2 lists them."""
        return [k for k, _ in self._array_iter(recurse, with_nodes=False)]

    def _array_iter(self, recurse, with_nodes=True):
        for k, kind, fmt in self._member_kinds():
            if kind == "array" and not with_nodes:
                yield k, None
                continue
            if kind != "array" and not recurse:
                continue
            for _, node in self._opened([(k, kind, fmt)]):  # (none: removed since listed)
                if isinstance(node, Group):
                    yield from node._array_iter(recurse, with_nodes)
                else:
                    yield k, node

    def group_keys(self) -> list[str]:
        """Sorted names of the member groups."""
        return [k for k, kind, _ in self._member_kinds() if kind == "group"]

    def arrays(self, recurse: bool = False) -> list[tuple[str, Array]]:
        """(name, Array) of the member arrays; with recurse, as array_keys(recurse=True)."""
        return list(self._array_iter(recurse))

    def groups(self) -> list[tuple[str, Group]]:
        """``(name, Group)`` pairs of the member groups, sorted by name."""
        return [(k, cast(Group, node)) for k, node in
                self._opened([kv for kv in self._member_kinds() if kv[1] == "group"])]

    def _ipython_key_completions_(self):
        return self._member_names()

    def __dir__(self):
        # Members usable as attributes (root.foo) show up in tab completion.
        return sorted(set(super().__dir__()) | {k for k in self._member_names()
                                                if k.isidentifier()})

    def _walk(self, prefix=""):
        """(relative path, node) for every node below this group, depth first, sorted."""
        for name, node in self._opened(self._member_kinds()):
            rel = nodes.prefix(prefix) + name
            yield rel, node
            if isinstance(node, Group):
                yield from node._walk(rel)

    def visit(self, func: Callable[[str], Any]) -> Any:
        """Call func(relative path) for every node below; stop at the first non-None result."""
        for rel, _ in self._walk():
            r = func(rel)
            if r is not None:
                return r

    def visitkeys(self, func: Callable[[str], Any]) -> Any:
        """Same as :meth:`visit`: call ``func(relative path)`` for every node below; stop at the
        first non-None result.
        """
        return self.visit(func)

    def visitvalues(self, func: Callable[[Array | Group], Any]) -> Any:
        """Call ``func(node)`` for every node below, depth first; stop at and return the first
        non-None result.
        """
        for _, node in self._walk():
            r = func(node)
            if r is not None:
                return r

    def visititems(self, func: Callable[[str, Array | Group], Any]) -> Any:
        """Call ``func(relative path, node)`` for every node below, depth first; stop at and
        return the first non-None result.
        """
        for rel, node in self._walk():
            r = func(rel, node)
            if r is not None:
                return r

    def tree(self, expand: bool = False, level: int | None = None, *,
             max_nodes: int | None = None, plain: bool = False) -> TreeView:
        """The hierarchy as text with box-drawing characters (HTML in Jupyter), level levels
        deep (None: all). max_nodes (zarr-python 3's): at most that many nodes, the text
        then starting with zarr-python 3's "Truncated at max_nodes=..." line (None: all, as
        zarr-python 2). plain: accepted (the text has no styling to leave out)."""
        if max_nodes is not None and (isinstance(max_nodes, bool) or
                                      not isinstance(max_nodes, int) or max_nodes < 0):
            raise ValueError(f"max_nodes must be a non-negative integer or None, got "
                             f"{max_nodes!r}")
        return TreeView(self, level=level, max_nodes=max_nodes)

    # ------------------------------------------------------------------ creating
    def _check_writable(self):
        if self._read_only:
            raise ReadOnlyError(f"group {self.name!r} in {store_name(self._store)} is read-only")

    def _lock(self, key):
        return creation.creation_lock(self._synchronizer, key, self._store)

    def create_group(self, name: str, overwrite: bool = False,
                     attributes: Mapping[str, Any] | None = None) -> Group:
        """Create a subgroup (and the groups on the way); raises if something is there.
        attributes: zarr-python 3's initial attributes."""
        self._check_writable()
        path = self._child(name)
        with self._lock(nodes.creation_lock_key(path, "group")):
            _init_group(self._store, path, overwrite=overwrite, zarr_format=self._format,
                        synchronizer=self._synchronizer, attributes=attributes)
        return self._made_group(path, None)

    def require_group(self, name: str, overwrite: bool = False) -> Group:
        """The subgroup at name, created if absent (overwrite=True: replaced by a new one).
        An array at name is an error both ContainsArrayError (zarr-python 2's) and TypeError
        (zarr-python 3's "Incompatible object")."""
        path = self._child(name)
        kind = self._member_kind(path)  # (the member: see _member)
        if overwrite or kind != "group":
            if not overwrite and kind == "array":
                raise IncompatibleArrayError(
                    f"Incompatible object (Array) already exists at path {path!r} in "
                    f"{store_name(self._store)}: require_group needs a group there")
            self._check_writable()
        with self._lock(nodes.creation_lock_key(path, "group")):
            kind, fmt = self._member(path)
            if overwrite or kind != "group":
                _init_group(self._store, path, overwrite=overwrite, zarr_format=self._format,
                            synchronizer=self._synchronizer, exist_ok=not overwrite)
                fmt = self._format
        return self._made_group(path, fmt)

    def _made_group(self, path: str, fmt: int | None) -> Group:
        """The group just made (or found) at path, opened; GroupNotFoundError saying so
        where another thread or process moved or deleted it before it was opened (the
        bare "no group at path" read as a creation that had failed)."""
        try:
            return Group(self._store, path, read_only=self._read_only,
                         synchronizer=self._synchronizer, zarr_format=fmt)
        except GroupNotFoundError as e:
            raise GroupNotFoundError(
                f"{e} (the group at {path!r} was created or found, then moved or deleted by "
                f"another thread or process before it was opened)") from e

    def create_groups(self, *names: str, **kwargs: Any) -> tuple[Group, ...]:
        """Create a subgroup for each of *names* (see :meth:`create_group`) and return them as a
        tuple.
        """
        return tuple(self.create_group(n, **kwargs) for n in names)

    def require_groups(self, *names: str) -> tuple[Group, ...]:
        """The subgroups at *names*, each created if absent (see :meth:`require_group`), as a
        tuple.
        """
        return tuple(self.require_group(n) for n in names)

    def _create_array(self, name, fn, *args, **kwargs):
        # The creation lock is re-entrant per thread, so fn (create, array, ...) taking it
        # again inside is fine: see creation.creation_lock.
        self._check_writable()
        path = self._child(name)
        kwargs.setdefault("synchronizer", self._synchronizer)
        kwargs.setdefault("zarr_format", self._format)  # members share the group's format
        with self._lock(nodes.creation_lock_key(path, "array")):
            return fn(*args, store=self._store, path=path, **kwargs)

    def create_dataset(self, name: str, data: Any = None, **kwargs: Any) -> Array:
        """Create an array at name (groups on the way are created); `data` fills it."""
        if data is not None:
            return self._create_array(name, creation.array, data, **kwargs)
        return self._create_array(name, creation.create, **kwargs)

    def require_dataset(self, name: str, shape: Any, dtype: Any = None, exact: bool = False,
                        **kwargs: Any) -> Array:
        """The array at name, created if absent; an existing one must match shape and dtype."""
        path = self._child(name)
        # Check and create under one lock: two processes requiring the same array both get it.
        with self._lock(nodes.creation_lock_key(path, "array")):
            return self._require_dataset(name, path, shape, dtype, exact, **kwargs)

    def _require_dataset(self, name, path, shape, dtype, exact, **kwargs):
        kind, fmt = self._member(path)
        if kind == "array":
            # zarr-python 2's direction: the requested dtype must cast safely to the stored
            return self._existing_array(name, path, fmt, shape, dtype, exact,
                                        stored_to_asked=False, options=kwargs)
        try:
            return self.create_dataset(name, shape=shape, dtype=dtype, **kwargs)
        except ContainsGroupError as e:  # (a group there: zarr-python 3's TypeError too)
            if isinstance(e, TypeError):
                raise
            raise IncompatibleGroupError(f"Incompatible object (Group) already exists: {e}; "
                                         f"an array was required there") from None

    def _existing_array(self, name: str, path: str, fmt: int, shape: Any, dtype: Any,
                        exact: bool, *, stored_to_asked: bool,
                        options: Mapping[str, Any]) -> Array:
        """The array at path (there is one, of Zarr format fmt) if it fits shape and dtype,
        else TypeError ("Incompatible shape/dtype", zarr-python's wording). Not exact, the
        dtypes must cast safely: stored to asked (zarr-python 3's require_array: the data
        read as the asked dtype loses nothing) or asked to stored (zarr-python 2's
        require_dataset).

        The handle has the options among the call's (options) that a new array's handle
        would have: synchronizer (the group's by default), cache_metadata,
        write_empty_chunks, missing_chunks. (An existing array's handle had the group's
        synchronizer whatever was asked: processes requiring one array with a
        ProcessSynchronizer each wrote without its locks and lost each other's elements.)"""
        kept = {k: options[k] for k in _HANDLE_OPTIONS if k in options}
        kept.setdefault("synchronizer", self._synchronizer)
        a = Array(self._store, path=path, read_only=self._read_only, zarr_format=fmt, **kept)
        shape = creation._normalize_shape(shape)
        if a.shape != shape:
            raise TypeError(f"Incompatible shape ({a.shape} vs {shape}) of array {a.name!r}")
        if dtype is not None:
            native = getattr(dtype, "to_native_dtype", None)  # a zarr-python 3 dtype object
            dt = native() if callable(native) else np.dtype(dtype)
            src, dst = (a.dtype, dt) if stored_to_asked else (dt, a.dtype)
            if (exact and a.dtype != dt) or (not exact and not np.can_cast(src, dst)):
                raise TypeError(f"Incompatible dtype ({a.dtype} vs {dt}) of array {a.name!r}"
                                + ("" if exact else f": {src} does not cast safely to {dst}"))
        return a

    def create(self, name: str, **kwargs: Any) -> Array:
        """Create an array at *name* in this group, like ``zarr.Group.create``.

        Takes the arguments of :func:`chunkstore.create` (store and path come from the group; the
        group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.create, **kwargs)

    def zeros(self, name: str, **kwargs: Any) -> Array:
        """Create an array filled with zeros at *name* in this group, like ``zarr.Group.zeros``.

        Takes the arguments of :func:`chunkstore.zeros` (store and path come from the group; the
        group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.zeros, **kwargs)

    def ones(self, name: str, **kwargs: Any) -> Array:
        """Create an array filled with ones at *name* in this group, like ``zarr.Group.ones``.

        Takes the arguments of :func:`chunkstore.ones` (store and path come from the group; the
        group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.ones, **kwargs)

    def full(self, name: str, fill_value: Any, **kwargs: Any) -> Array:
        """Create an array filled with *fill_value* at *name* in this group, like
        ``zarr.Group.full``.

        Takes the arguments of :func:`chunkstore.full` (store and path come from the group; the
        group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.full, fill_value=fill_value, **kwargs)

    def empty(self, name: str, **kwargs: Any) -> Array:
        """Create an array with uninitialized data at *name* in this group, like
        ``zarr.Group.empty``.

        Takes the arguments of :func:`chunkstore.empty` (store and path come from the group; the
        group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.empty, **kwargs)

    def array(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create an array filled with *data* at *name* in this group, like ``zarr.Group.array``.

        Takes the arguments of :func:`chunkstore.array` (store and path come from the group; the
        group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.array, data, **kwargs)

    def zeros_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create an array of zeros shaped like *data* at *name* in this group, like
        ``zarr.Group.zeros_like``.

        Takes the arguments of :func:`chunkstore.zeros_like` (store and path come from the group;
        the group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.zeros_like, data, **kwargs)

    def ones_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create an array of ones shaped like *data* at *name* in this group, like
        ``zarr.Group.ones_like``.

        Takes the arguments of :func:`chunkstore.ones_like` (store and path come from the group; the
        group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.ones_like, data, **kwargs)

    def full_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create an array filled with ``fill_value``, shaped like *data* at *name* in this group,
        like ``zarr.Group.full_like``.

        Takes the arguments of :func:`chunkstore.full_like` (store and path come from the group; the
        group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.full_like, data, **kwargs)

    def empty_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Create an array with uninitialized data, shaped like *data* at *name* in this group, like
        ``zarr.Group.empty_like``.

        Takes the arguments of :func:`chunkstore.empty_like` (store and path come from the group;
        the group's synchronizer and Zarr format are the defaults). Raises
        :class:`~chunkstore.errors.ReadOnlyError` if the group is read-only.
        """
        return self._create_array(name, creation.empty_like, data, **kwargs)

    def move(self, source: str, dest: str) -> None:
        """Move the member at source to dest (paths relative to this group)."""
        self._check_writable()
        src, dst = self._child(source), self._child(dest)
        if dst == src or dst.startswith(src + "/"):
            raise ValueError(f"cannot move {src!r} into itself ({dst!r})")
        # The creation locks of both paths and of the groups above dst (which the move may
        # write), across the checks and the move: a creation at dst (or a re-creation at
        # src) by another thread, task or process between the check that dst is free and
        # the copy mixed its document with the moved chunks (both calls succeeded; chunks
        # read as the fill value or failed to decode) or was deleted with the source. All
        # taken before any check, a path before the paths above it, as a creation takes its
        # own and then its parents' (taking a parent's after its own, as the creation of
        # dst's parents does, a move waited for another that held it and wanted this one's).
        # Then the lock spaces of src and dst (and of the groups above them, in this
        # process) in one ordered acquisition (replacing_node), before the checks: a
        # creation below dst holds the guards of dst and the groups above it (which these
        # exclude), and a delete of dst by another process holds dst's space. Checked
        # before them, a move and a creation of dst/x/y in another process both returned
        # (an array's document beside a group's, members below it), and a move into a dst
        # another process was deleting returned, then the delete removed what it moved.
        with contextlib.ExitStack() as locks:
            for p in sorted({src, dst, *nodes.ancestors(dst)}, reverse=True):
                locks.enter_context(self._lock(nodes.creation_lock_key(p, "array")))
            with creation.replacing_node(self._store, [src, dst], self._synchronizer):
                self._move_locked(source, dest, src, dst)

    def _move_locked(self, source: str, dest: str, src: str, dst: str) -> None:
        """move, with the creation locks of src, dst and the groups above dst held, and the
        lock spaces of src and dst (replacing_node)."""
        if source not in self:  # (a ValueError, as zarr-python 2 raises)
            raise PathNotFoundError(f"cannot move {src!r}: no array or group there in group "
                                    f"{self.name!r}")
        if contains_array(self._store, dst) or contains_group(self._store, dst):
            raise ContainsArrayError(f"cannot move {src!r} to {dst!r}: something is there")
        # an array above dst first (ContainsArrayError): its chunk keys there are not stray
        parents = creation._check_parents(self._store, dst)
        # (before the keys of no node: through a snapshot, a node made since seems absent
        # and its chunks such keys, a StrayChunksError naming a failed delete)
        creation.refuse_snapshot(self._store, f"move {src!r} to {dst!r}")
        existing = keys_under(self._store, dst)
        if existing:  # (of no node at dst: checked above) an unstored chunk would read them
            raise creation.stray_keys_error(
                f"cannot move {src!r} to {dst!r}", existing,
                f"would mix with what is moved: remove them first (the store's "
                f"rmdir({dst!r}))")
        # (no creation lock of those groups taken: this process's tables of the groups
        # above dst are held whole, which excludes every other creation's guards there; a
        # creation lock taken now, after them, waited for a creation holding it that
        # waited for those guards)
        creation._write_parent_groups(self._store, parents, self._format, self._synchronizer,
                                      guarded=True)
        # (handles at src: nothing is there any more; dst dated for consolidated
        # snapshots, a move that failed midway too)
        try:
            rename = protocol.renamer(self._store)
            if rename is not None:
                rename(src, dst)
                return
            keys = [k for k in list(self._store.keys())
                    if k == src or k.startswith(src + "/")]
            # Copied with the node documents last and deleted with them first (and a
            # failed copy removed again): a move that fails midway leaves the source whole
            # and no node at dest, or dest whole; never a node whose metadata is there
            # while some of its chunks are not (they would read as the fill value: wrong
            # data).
            order = documents_first(keys)
            copied: list[str] = []
            try:
                for k in reversed(order):
                    # (listed first: a write that raised may have landed, a remote store's
                    # lost answer; a key not there is ignored by the clean-up)
                    copied.append(dst + k[len(src):])
                    self._store[dst + k[len(src):]] = self._store[k]
            except BaseException as e:
                try:
                    delitems(self._store, documents_first(copied))
                except Exception as e2:
                    e.add_note(f"moving {src!r} to {dest!r} failed, and removing what "
                               f"was copied to {dst!r} failed too: {e2!r}")
                raise
            delitems(self._store, order)
        finally:
            creation.note_created(self._store, dst)


def _init_group(store, path, overwrite=False, zarr_format=2, synchronizer=None,
                attributes=None, exist_ok=False):
    # exist_ok: a group of zarr_format found at path once the guards are held (made by
    # another process's creation below it, as its parent) is the one asked for (open_group
    # mode "a", require_group), not a ContainsGroupError
    # the documents, attributes included, are made before anything is removed: attributes
    # JSON cannot hold (a set) refuse the creation with the store as it was (set after the
    # creation, their TypeError came with the replaced node already gone)
    docs = creation.group_documents(path, zarr_format, attributes)
    # an array above path refuses the group before anything is removed: with overwrite, the
    # removal below path would delete that array's chunks (v3 keys "x/c/...")
    missing = creation._check_parents(store, path)
    with creation.replaced_and_guarded(store, path, synchronizer, overwrite,
                                       whole=False, kind="group") as guarded:
        if guarded:
            missing = creation._check_parents(store, path)
            if exist_ok and nodes.node_kind(creation.probe_store(store), path,
                                            warn=False) == ("group", zarr_format):
                return  # (made meanwhile, as the parent of another process's creation)
        if not overwrite:
            creation.refuse_existing(store, path, zarr_format)
        creation.refuse_snapshot(store, f"create a group at path {path!r}")
        with creation.parents_kept_on_success(store, path, missing, zarr_format,
                                              synchronizer, guarded):
            for name, doc in docs.items():
                store[nodes.prefix(path) + name] = doc
    creation.note_created(store, path)


def _group_keywords(name: str, kwargs: dict, zarr_format: int | None
                    ) -> tuple[Any, int | None]:
    """(attributes, zarr_format) with the group keywords of zarr-python 3 (attributes,
    zarr_version) and 2 (cache_attrs, chunk_store, meta_array: not needed) taken out of
    kwargs; a TypeError naming any other (a misspelt keyword is not silently ignored)."""
    attributes = kwargs.pop("attributes", None)
    zarr_format = creation.format_alias(zarr_format, kwargs.pop("zarr_version", None))
    check_zarr2_keywords(kwargs.get("chunk_store"), kwargs.get("meta_array"))
    for accepted in ("cache_attrs", "chunk_store", "meta_array"):
        kwargs.pop(accepted, None)
    if kwargs:
        raise TypeError(f"{name}() got unexpected keyword arguments {sorted(kwargs)}")
    return attributes, zarr_format


def group(store: StoreLike = None, overwrite: bool = False, synchronizer: Any = None,
          path: str | None = None, storage_options: dict | None = None,
          zarr_format: int | None = None, **kwargs: Any) -> Group:
    """Create a group, or open the one already there (overwrite=True replaces it).
    zarr_format (2 or 3) applies to a new group (2 unless config default_zarr_format).

    zarr-python 3's keywords: attributes (of a group this call creates; an existing group
    keeps its own), zarr_version (zarr_format's old name); zarr-python 2's cache_attrs,
    chunk_store and meta_array are accepted and not needed. Any other keyword is a
    TypeError naming it."""
    store, path = split_store_path(store, path)
    attributes, zarr_format = _group_keywords("group", kwargs, zarr_format)
    creation._check_format(zarr_format)
    # writes to a read-only Mapping are refused at run time
    store = cast(MutableMapping[str, bytes],
                 normalize_store(store, mode="a", storage_options=storage_options))
    path = normalize_path(path)
    with creation.creation_lock(synchronizer, nodes.creation_lock_key(path, "group"), store):
        # an explicit zarr_format binds, as open_group(mode="a")'s: the group of that format
        # where both lie, and a group of the other format alone is refused (not opened)
        kind, fmt = (None, None) if overwrite else nodes.node_kind(
            store, path, zarr_format, want="group", creating=True)
        if overwrite or kind != "group":
            fmt = nodes.new_node_format(store, path, zarr_format, 2)
            _init_group(store, path, overwrite=overwrite, zarr_format=fmt,
                        synchronizer=synchronizer, attributes=attributes)
        g = Group(store, path=path, synchronizer=synchronizer, zarr_format=fmt)
    return g


def _group_document(store: Any, path: str, fmt: int) -> Any:
    """The metadata document of a Zarr format fmt group at path (a consolidated view's JSON
    object, or the stored bytes), None where there is none or the document is an array's
    (a v3 zarr.json)."""
    key = nodes.metadata_key(path, fmt, "group")
    docs = protocol.consolidated_documents(store)
    doc = docs(key) if docs is not None else None
    if doc is None:
        doc = store.get(key)
    return doc if doc is not None and kind_of_document(store, key, doc) == "group" else None


def _no_group(store: Any, path: str) -> str:
    """The message for a missing group: where it was looked for, and that the store's
    directory does not exist when that is why."""
    from chunkstore.storage.directory import DirectoryStore
    msg = f"no group at path {path!r} in {store_name(store)}"
    if isinstance(store, DirectoryStore) and not os.path.isdir(store.path):
        msg += f": the directory {store.path!r} does not exist"
    return msg


def open_group(store: StoreLike = None, mode: str = "a", path: str | None = None,
               synchronizer: Any = None, storage_options: dict | None = None,
               zarr_format: int | None = None, **kwargs: Any) -> Group:
    """Open a group: modes r, r+ (must exist), a (create if absent), w (replace), w-/x.
    An explicit zarr_format binds: a group of the other format is a GroupNotFoundError (r,
    r+) or GroupFormatMismatchError (a), never opened, converted or shadowed.

    zarr-python 3's keywords: attributes (of a group this call creates), use_consolidated
    (True: read through the group's consolidated metadata, which must exist when the group
    does; None, False: read the members' own documents), zarr_version (zarr_format's old name); zarr-python
    2's cache_attrs, chunk_store and meta_array are accepted and not needed. Any other
    keyword is a TypeError naming it (a misspelt one is not silently ignored)."""
    store, path = split_store_path(store, path)
    use_consolidated = kwargs.pop("use_consolidated", None)
    attributes, zarr_format = _group_keywords("open_group", kwargs, zarr_format)
    creation._check_mode(mode)
    creation._check_format(zarr_format)
    if use_consolidated and mode in ("r", "r+", "a"):
        probe = normalize_store(store, mode="r", storage_options=storage_options)
        if mode == "a" and not contains_group(probe, normalize_path(path)):
            use_consolidated = None  # mode "a" creates the group: nothing to consolidate
        elif not protocol.holds_consolidated_metadata(probe):  # (zarr-python 3's words)
            raise ValueError(f"Store {store_name(store)} doesn't support consolidated "
                             f"metadata; open with use_consolidated=False or None")
    if use_consolidated and mode in ("r", "r+", "a"):
        found = open_consolidated(store, mode="r+" if mode == "a" else mode, path=path,
                                  storage_options=storage_options, zarr_format=zarr_format)
        if not isinstance(found, Group):
            raise GroupNotFoundError(f"path {normalize_path(path)!r} holds an array, not a "
                                     f"group")
        return found
    # a read-only Mapping is only opened read-only: writes are refused at run time
    store = cast(MutableMapping[str, bytes],
                 normalize_store(store, mode=mode, storage_options=storage_options,
                                 for_node=True))
    path = normalize_path(path)
    # An explicit zarr_format binds: a node of the other format is not opened (r, r+: a
    # GroupNotFoundError), nor converted or shadowed by a new group beside it (a: a
    # GroupFormatMismatchError, or the ContainsArrayError of an array); w-/x refuse any
    # existing node, w replaces it.
    asked = zarr_format
    # (a read-only open takes no creation lock: it creates nothing, and need not wait for
    # a creation or a removal of a tree there)
    with creation.creation_lock(synchronizer if mode != "r" else None,
                                nodes.creation_lock_key(path, "group"),
                                store if mode != "r" else None):
        kind, found = nodes.node_kind(store, path, asked if mode in ("r", "r+", "a") else None,
                                      want="group", creating=(mode == "a"))
        exists = kind == "group"
        if mode in ("r", "r+"):
            if not exists:
                if contains_array(store, path):
                    raise GroupNotFoundError(f"path {path!r} in {store_name(store)} holds an array, not "
                                             f"a group")
                raise GroupNotFoundError(_no_group(store, path))
        elif mode == "a":
            if not exists:  # (a new group's attributes: an existing one keeps its own)
                _init_group(store, path, zarr_format=nodes.new_node_format(store, path, asked, 2),
                            synchronizer=synchronizer, attributes=attributes, exist_ok=True)
        elif mode == "w":
            _init_group(store, path, overwrite=True,
                        zarr_format=nodes.new_node_format(store, path, asked, 2),
                        synchronizer=synchronizer, attributes=attributes)
        else:
            if contains_array(store, path):
                raise ContainsArrayError(f"an array already exists at path {path!r} in "
                                         f"{store_name(store)}")
            if exists:
                raise ContainsGroupError(f"a group already exists at path {path!r} in "
                                         f"{store_name(store)}")
            _init_group(store, path, zarr_format=nodes.new_node_format(store, path, asked, 2),
                        synchronizer=synchronizer, attributes=attributes)
        # (an existing group's format as found: where both formats' documents lie at path,
        # not probed and warned about twice)
        g = Group(store, path=path, read_only=(mode == "r"), synchronizer=synchronizer,
                  zarr_format=found if exists and mode in ("r", "r+", "a") else asked)
    return g


#: open()'s keywords that open_group takes too (an array's are left out for a group)
_GROUP_OPEN_KEYS = frozenset(("synchronizer", "zarr_format", "zarr_version", "attributes",
                              "use_consolidated", "cache_attrs", "chunk_store", "meta_array"))
# open()'s keywords that only a group takes: an array found at the path is opened without
# them, as zarr-python 3's open ignores them there
_GROUP_ONLY_KEYS = frozenset(("use_consolidated",))


def open(store: StoreLike = None, mode: str = "a", path: str | None = None,  # noqa: A001
         storage_options: dict | None = None, **kwargs: Any) -> Array | Group:
    """Open an array or a group, whichever the path holds (of an explicit zarr_format only:
    a node of the other format is a PathNotFoundError with modes r, r+, and is refused, as
    open_array and open_group refuse it, with mode a)."""
    store, path = split_store_path(store, path)
    creation._check_mode(mode)
    store = normalize_store(store, mode=mode, storage_options=storage_options, for_node=True)
    path = normalize_path(path)
    array_kwargs = {k: v for k, v in kwargs.items() if k not in _GROUP_ONLY_KEYS}
    if mode in ("r", "r+"):
        # The likely node first, its metadata read once: an array is one request (v2).
        try:
            return creation.open_array(store, mode=mode, path=path, **array_kwargs)
        except ArrayNotFoundError:
            if "shape" in kwargs:  # (a shape asks for an array: not a group, as zarr 3)
                raise
        try:
            return open_group(store, mode=mode, path=path, **_group_kwargs(kwargs))
        except GroupNotFoundError:
            # a node of the other format than an explicit zarr_format: named as such
            nodes.node_kind(store, path, kwargs.get("zarr_format"))
            raise PathNotFoundError(f"nothing (no array or group) at path {path!r} in "
                                    f"{store_name(store)}") from None
    # (the node of an explicit zarr_format first, where both formats' documents lie; a node
    # of the other format is refused by open_array / open_group, never created beside)
    kind, found = nodes.node_at(store, path, kwargs.get("zarr_format"))
    if mode == "a" and kind is not None and kwargs.get("zarr_format") is None \
            and kwargs.get("zarr_version") is None:
        # the existing node's format as found (where both formats' documents lie at path,
        # the opener below neither probes nor warns again; "w" makes a new node in the
        # format asked or configured, whatever was there)
        kwargs = {**kwargs, "zarr_format": found}
        array_kwargs = {**array_kwargs, "zarr_format": found}
    if mode in ("w", "w-", "x"):
        # a new node, whatever was at path: an array where a shape is given, else a group
        # (zarr-python 2's and 3's choice; "w" replaced a group by a group, or refused to
        # replace an array without a shape, where they make the node asked for)
        if "shape" in kwargs:
            return creation.open_array(store, mode=mode, path=path, **array_kwargs)
        return open_group(store, mode=mode, path=path, **_group_kwargs(kwargs))
    if kind == "array" or (kind == "group" and mode == "a" and "shape" in kwargs):
        # (a shape asks for an array: over a group, open_array's ContainsGroupError, as
        # zarr-python 2 refuses it, rather than the group with the shape ignored)
        return creation.open_array(store, mode=mode, path=path, **array_kwargs)
    if kind == "group" or (mode not in ("r", "r+") and "shape" not in kwargs):
        return open_group(store, mode=mode, path=path, **_group_kwargs(kwargs))
    if mode in ("r", "r+"):
        raise PathNotFoundError(f"nothing (no array or group) at path {path!r} in {store_name(store)}")
    return creation.open_array(store, mode=mode, path=path, **array_kwargs)


def _group_kwargs(kwargs: dict) -> dict:
    """open()'s keywords for open_group: an array's (shape, dtype, chunks...) are left out
    when the path holds a group, as zarr-python's open leaves them."""
    return {k: v for k, v in kwargs.items() if k in _GROUP_OPEN_KEYS}


def open_consolidated(store: StoreLike, metadata_key: str = ".zmetadata", mode: str = "r+",
                      path: str | None = None, storage_options: dict | None = None,
                      **kwargs: Any) -> Array | Group:
    """Open a hierarchy whose metadata was consolidated, reading all metadata in one read.

    Metadata is served from the consolidated document; chunks come from the store. Writes
    to chunks pass through with mode "r+"; metadata changes are refused. With a StorePath,
    metadata_key is below its path (where consolidate_metadata of it writes it).
    """
    use_consolidated = kwargs.pop("use_consolidated", True)
    if use_consolidated is not True:
        # zarr-python 3's check: this function is open_group(use_consolidated=True)
        raise TypeError(f"'use_consolidated' must be True in 'open_consolidated', got "
                        f"{use_consolidated!r}; use open/open_group with "
                        f"use_consolidated=False to bypass consolidated metadata")
    if mode not in ("r", "r+"):
        # (zarr-python 2's check and words; zarr-python 3 would open_group(mode=...), and
        # "w" there creates a new, empty hierarchy over the consolidated one)
        raise ValueError(f"invalid mode, expected either 'r' or 'r+'; found {mode!r} "
                         f"(open_consolidated opens an existing hierarchy)")
    if isinstance(store, StorePath) and store.path:
        metadata_key = f"{store.path}/{metadata_key}"
    store, path = split_store_path(store, path)
    store = normalize_store(store, mode=mode, storage_options=storage_options, for_node=True)
    smode = "r" if mode == "r" else "r+"
    # A v2 hierarchy has its .zmetadata document (one read, no existence check first);
    # otherwise the v3 store reads the root zarr.json, once, and serves every member's
    # metadata from it. A group's at path first (consolidate_metadata(path=) writes it
    # there, zarr-python 3 reads it there: read from the root only, an older root document
    # showed a member as it was before the group's consolidation), then the root's
    # (zarr-python 2's, which reads the root document for any path).
    where = normalize_path(path)
    v2_keys = [metadata_key]
    if where and not metadata_key.startswith(where + "/"):
        v2_keys.insert(0, f"{where}/{metadata_key}")
    cstore: ConsolidatedMetadataStore | ConsolidatedV3Store | None = None
    for key in v2_keys:
        try:
            cstore = ConsolidatedMetadataStore(store, metadata_key=key, mode=smode)
            break
        except ConsolidatedMetadataNotFoundError:
            pass
    if cstore is None:
        try:
            cstore = ConsolidatedV3Store(store, where, mode=smode)
        except ConsolidatedMetadataNotFoundError:
            # neither format's: say what was looked for, per format
            v3_doc = (where + "/" if where else "") + "zarr.json"
            raise ConsolidatedMetadataNotFoundError(
                f"Consolidated metadata requested, but none at path {where!r} in "
                f"{store_name(store)}: looked "
                f"for Zarr v2's {' and '.join(map(repr, v2_keys))} and for "
                f"'consolidated_metadata' in Zarr v3's "
                f"{v3_doc!r} ({'absent' if v3_doc not in store else 'it has none'}); "
                f"consolidate_metadata() writes it, or open the hierarchy with open()"
            ) from None
        return open(cstore, mode=smode, path=path, **kwargs)
    return open(cstore, mode="r" if mode == "r" else "r+", path=path, **kwargs)


class TreeView:
    """Text (box-drawing) and HTML rendering of a hierarchy."""

    def __init__(self, grp: Group, level: int | None = None,
                 max_nodes: int | None = None) -> None:
        self.group = grp
        self.level = level
        self.max_nodes = max_nodes

    _BOX = ("├── ", "└── ", "│   ")
    _ASCII = ("+-- ", "+-- ", "|   ")  # zarr-python 2's bytes(tree) drawing

    @staticmethod
    def _members(grp):
        """(name, (shape, dtype), None) of each member array, (name, None, Group) of each
        member group, in name order; arrays described from their metadata documents, not
        opened. A member removed since the listing is left out, as items() leaves it out."""
        out = []
        for name in grp.keys():
            path = grp._child(name)
            try:
                kind, fmt = grp._member(path)
                if kind == "array":
                    out.append((name, nodes.array_summary(grp.store, path, fmt), None))
                elif kind == "group":
                    out.append((name, None, grp[name]))
            except (ArrayNotFoundError, GroupNotFoundError, KeyError):
                continue
        return out

    def _lines(self, grp, prefix, depth, gfx=_BOX):
        members = self._members(grp)
        for i, (name, summary, node) in enumerate(members):
            last = i == len(members) - 1
            branch = gfx[1] if last else gfx[0]
            if summary is not None:
                yield f"{prefix}{branch}{name} {summary[0]} {summary[1]}"
            else:
                yield f"{prefix}{branch}{name}"
                if self.level is None or depth + 1 < self.level:
                    pad = " " * len(gfx[2]) if last else gfx[2]
                    yield from self._lines(node, prefix + pad, depth + 1, gfx)

    def _limited(self, lines):
        """(lines, at most max_nodes of them; whether some were left out)."""
        if self.max_nodes is None:
            return list(lines), False
        out = list(itertools.islice(lines, self.max_nodes + 1))
        return out[:self.max_nodes], len(out) > self.max_nodes

    def _truncation(self, cut: bool) -> list[str]:
        return [f"Truncated at max_nodes={self.max_nodes}, some nodes and their children "
                f"may be missing"] if cut else []

    def __repr__(self):
        lines, cut = self._limited(self._lines(self.group, "", 0))
        return "\n".join(self._truncation(cut) + [self.group.name] + lines)

    __str__ = __repr__

    def __bytes__(self):
        """The tree drawn in ASCII (+--, |), as zarr-python 2's bytes(g.tree())."""
        lines, cut = self._limited(self._lines(self.group, " ", 0, self._ASCII))
        # (zarr-python 2 heads it with the group's base name, "/" for the root)
        head = self.group.name.rstrip("/").rsplit("/", 1)[-1] or "/"
        text = "\n".join(self._truncation(cut) + [head] + lines)
        return text.encode("ascii", "backslashreplace")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                          **kwargs: Any) -> dict[str, str]:
        """Jupyter's rich display (zarr-python 3's): the text and the HTML of the tree."""
        return {"text/plain": repr(self), "text/html": self._repr_html_()}

    def _repr_html_(self):
        def render(grp, depth):
            items = []
            for name, summary, node in self._members(grp):
                if summary is not None:
                    items.append(f"<li>{html.escape(name)} <code>{summary[0]} "
                                 f"{html.escape(str(summary[1]))}</code></li>")
                elif self.level is None or depth + 1 < self.level:
                    items.append(f"<li><b>{html.escape(name)}</b>{render(node, depth + 1)}</li>")
                else:
                    items.append(f"<li><b>{html.escape(name)}</b></li>")
            return f"<ul>{''.join(items)}</ul>"
        return (f"<div class='chunkstore-tree'><b>{html.escape(self.group.name)}</b>"
                f"{render(self.group, 0)}</div>")
