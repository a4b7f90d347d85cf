"""The store protocol and helpers that work on any ``MutableMapping[str, bytes]``.

A *store* is a mutable mapping from ``"/"``-separated string keys to ``bytes`` values.
Anything that implements ``MutableMapping`` (a plain ``dict`` included) is a valid store;
:class:`BaseStore` adds optional, faster implementations of batch and directory-like
operations. The module-level helpers (:func:`getitems`, :func:`listdir`, ...) use a store's
own method when it has one and fall back to generic mapping operations otherwise, so the
array layer can call them on anything.

Error contract, for every store: an absent key raises ``KeyError``; every other failure
(permission denied, I/O error, network error, S3 403, corrupt database) propagates as its
own exception and is never turned into "missing".
"""

from __future__ import annotations

import errno
import inspect
import os
from collections.abc import Hashable, Iterable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, cast

from ..errors import ReadOnlyError, StoreError

if TYPE_CHECKING:
    from typing import Self  # Python 3.11+

#: The helpers that work on any mapping: a store's own method where it has one.
MAPPING_HELPERS = ("getitems", "setitems", "delitems", "keys_under", "listdir", "rmdir",
                   "getsize")

__all__ = ["BaseStore", "validate_key", "normalize_prefix", "ensure_bytes", "MODES",
           "byte_span", "read_spans", *MAPPING_HELPERS]

#: Modes accepted by every store constructor.
#: ``"r"`` read-only; every other mode is read-write. Opening never fails because the
#: location does not exist yet, and mode ``"r"`` never creates anything: a missing location is
#: an empty store, so that the array and group layer can report "not found" for the path.
#: Whether a node must exist (``"r+"``), is cleared (``"w"``) or must not exist (``"w-"``,
#: ``"x"``) is decided per path by the array and group layer, except that ``ZipStore``
#: truncates the archive in mode ``"w"`` and refuses an existing file in ``"x"``/``"w-"``.
MODES = ("r", "r+", "a", "w", "w-", "x")


def check_mode(mode: str) -> str:
    """Return *mode* if it is one of :data:`MODES`.

    Raises
    ------
    ValueError
        For any other mode.
    """
    if mode not in MODES:
        raise ValueError(f"invalid mode {mode!r}; expected one of {', '.join(map(repr, MODES))}")
    return mode


# ---------------------------------------------------------------------------------------------
# keys and values
# ---------------------------------------------------------------------------------------------


def validate_key(key: Any) -> str:
    """Check that *key* is a safe store key and return it.

    Raises ``TypeError`` for a non-string key and ``ValueError`` (naming the key) for a key
    that is empty, starts with ``"/"``, contains a backslash or a NUL character, or has an
    empty, ``"."`` or ``".."`` path segment. Such keys could escape a store's root or alias
    another key, so they are rejected before any I/O.
    """
    if type(key) is not str:
        if not isinstance(key, str):
            raise TypeError(f"store keys must be str, not {type(key).__name__}: {key!r}")
    if not key:
        raise ValueError("invalid store key '': keys must not be empty")
    if key[0] == "/":
        raise ValueError(f"invalid store key {key!r}: keys must not start with '/'")
    if "\\" in key:
        raise ValueError(f"invalid store key {key!r}: keys must not contain a backslash")
    if "\x00" in key:
        raise ValueError(f"invalid store key {key!r}: keys must not contain a NUL character")
    if "." in key or "//" in key or key[-1] == "/":
        for seg in key.split("/"):
            if seg == "" or seg == "." or seg == "..":
                raise ValueError(
                    f"invalid store key {key!r}: path segment {seg!r} is not allowed"
                )
    return key


def normalize_prefix(prefix: Any) -> str:
    """Normalise a directory-like prefix: ``None``/``""``/``"/"`` -> ``""``; surrounding
    slashes are stripped; the remainder must be a valid key (``ValueError`` otherwise)."""
    if prefix is None:
        return ""
    if isinstance(prefix, os.PathLike):
        prefix = os.fspath(prefix)
    if not isinstance(prefix, str):
        raise TypeError(f"store prefixes must be str, not {type(prefix).__name__}: {prefix!r}")
    p = prefix.strip("/")
    if p:
        try:
            validate_key(p)
        except ValueError:
            raise ValueError(f"invalid store prefix {prefix!r}") from None
    return p


def ensure_bytes(value: Any) -> bytes:
    """Convert a value to ``bytes``.

    Accepts ``bytes``, ``bytearray``, ``memoryview`` and any other object exposing a
    contiguous buffer (NumPy arrays included, C- or Fortran-ordered: the raw memory is taken
    as laid out). Raises
    ``TypeError`` for ``str`` and for objects without the buffer protocol and ``ValueError``
    for non-contiguous buffers.
    """
    if type(value) is bytes:
        return value
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        raise TypeError("store values must be bytes-like, not str (encode it first)")
    try:
        mv = memoryview(value)
    except TypeError:
        raise TypeError(
            f"store values must be bytes-like (bytes, bytearray, memoryview, numpy array), "
            f"not {type(value).__name__}"
        ) from None
    if not mv.contiguous:
        raise ValueError(
            f"store values must be contiguous buffers; got a non-contiguous "
            f"{type(value).__name__} (copy it first, e.g. numpy.ascontiguousarray)"
        )
    # the raw memory, as laid out (a Fortran-ordered array gives its Fortran-order bytes)
    return mv.tobytes(order="A")


def _under(key: str, prefix: str) -> bool:
    """True if *key* is at or under the normalised *prefix*."""
    if not prefix:
        return True
    return key == prefix or (key.startswith(prefix) and key[len(prefix)] == "/")


# ---------------------------------------------------------------------------------------------
# Versioned reads: byte ranges of one version of a value
# ---------------------------------------------------------------------------------------------


class VersionChanged(Exception):
    """A value changed between two reads of one :class:`ValueVersion` (a remote object
    rewritten between the requests of one reader): the reader's parts would mix versions."""


class ValueVersion:
    """Byte ranges of ONE version of one stored value, however many :meth:`read` calls.

    Stores that can read parts of a value define ``open_version(key) -> ValueVersion``
    (``KeyError`` if absent): a sharded array reads a shard's index and then the inner
    chunks that index points at through one of these, so a rewrite of the shard between the
    two reads can never pair an old index with new bytes. A store whose values are rewritten
    in place could not promise this, and does not define ``open_version`` (its shards are
    then read whole, one read per shard).

    :attr:`version` identifies the version (compared with ``==`` against one taken earlier:
    a cached shard index is used only while its shard is still that version), or is None
    when the store has no cheap identity to offer (nothing is then cached across readers).
    Readers of local stores hold their version (an open file); a remote one pins the version
    its first read saw and raises :class:`VersionChanged` when a later read sees another.

    :attr:`size` is the version's length in bytes (a shard index at the end is read from
    it).

    This base class serves the ranges out of one whole value in memory, version None.
    """

    version: Hashable | None = None

    def __init__(self, value: Any = None) -> None:
        self._value = value

    @property
    def settled(self) -> bool:
        """Whether :attr:`version` will tell this version from any later one, so that what
        was read of it may be kept by version (a shard index cache). True here and for
        content identities (an ETag); a file's identity made of its inode and timestamps is
        not, while the clock has not moved past its timestamps' granularity (see
        chunkstore.storage.directory)."""
        return True

    @property
    def size(self) -> int:
        """The version's length in bytes."""
        return len(self._value)

    @property
    def known_size(self) -> int | None:
        """The version's length in bytes where telling it costs no request (a remote
        object's once a read's answer said it), else None."""
        return self.size

    def read(self, ranges: Iterable[tuple[int, int]]) -> list[bytes]:
        """The ``(offset, nbytes)`` ranges (shorter where the value ends first)."""
        v = self._value
        return [bytes(v[off: off + n]) for off, n in ranges]

    def read_tail(self, n: int) -> bytes:
        """The last ``n`` bytes (fewer where the value is shorter): an index at the end of a
        shard, read without knowing the shard's size first."""
        size = self.size
        return self.read([(max(0, size - n), min(n, size))])[0]

    def read_if(self, version: Hashable, ranges: Iterable[tuple[int, int]]) -> list[bytes] | None:
        """The ranges if this is still ``version`` (else None, nothing read): a cached
        index's chunks in one step."""
        if self.version is None or self.version != version:
            return None
        return self.read(ranges)

    def close(self) -> None:
        """Release what the reader holds (an open file). Idempotent."""
        self._value = None

    def __enter__(self) -> "ValueVersion":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# BaseStore
# ---------------------------------------------------------------------------------------------


class BaseStore(MutableMapping):
    """Base class of chunkstore stores: a ``MutableMapping[str, bytes]`` with extras.

    Subclasses implement ``__getitem__``, ``__setitem__``, ``__delitem__``, ``__iter__`` and
    ``__len__`` (and usually ``__contains__``), and may override the batch and directory-like
    methods for speed. Writes on a read-only store raise :class:`~chunkstore.errors.ReadOnlyError`.
    """

    _mode: str = "a"
    _dimension_separator: str | None = None

    #: zarr-python 3's store capabilities (what the store class can do; ``read_only`` says
    #: whether this store may): every chunkstore store writes, deletes and lists keys and
    #: holds consolidated metadata; partial writes (of a byte range) none does.
    supports_writes: bool = True
    supports_deletes: bool = True
    supports_listing: bool = True
    supports_partial_writes: bool = False
    supports_consolidated_metadata: bool = True
    #: Whether a pickled copy of the store reaches the same data (a directory, a database
    #: file, a URL), so that writes through copies in other processes (dask's workers) land
    #: where this store sees them: protocol.copies_share_data.
    copies_share_data: bool = True

    def __init__(self, mode: str = "a"):
        self._mode = check_mode(mode)

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> Any:
        """zarr-python 3's ``await LocalStore.open(root)``, ``await MemoryStore.open()``...:
        the store made with these arguments (chunkstore's stores are ready when made; there
        is nothing to wait for)."""
        return cls(*args, **kwargs)

    @property
    def dimension_separator(self) -> str | None:
        """The chunk key separator new v2 arrays in this store get by default (None: ".").
        Only recorded for the array layer; keys are stored as given."""
        return self._dimension_separator

    def _set_dimension_separator(self, sep: str | None) -> None:
        if sep not in (None, ".", "/"):
            raise ValueError(f"dimension_separator must be '.', '/' or None, not {sep!r}")
        self._dimension_separator = sep

    # -- mode ------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """The mode the store was opened with (one of :data:`MODES`)."""
        return self._mode

    @property
    def read_only(self) -> bool:
        """Whether the store is read-only (mode ``"r"``)."""
        return self._mode == "r"

    def _check_writable(self, key: str | None = None) -> None:
        if self._mode == "r":
            what = f" (key {key!r})" if key is not None else ""
            raise ReadOnlyError(f"{self!r} is read-only; cannot write{what}")

    # -- identity / pickling ----------------------------------------------------------------
    # A store kept at a location (a path, a URL) names it in _where(): its repr shows it, and
    # two stores of one type at one place (_identity()) are equal. A store that can be
    # reopened from its constructor's arguments gives them in _reopen_args(): a pickled copy
    # is that constructor call (in another process, the same files or objects).

    def _where(self) -> str | None:
        """The location shown in the repr (None: the store has none)."""
        return None

    def _identity(self) -> tuple[Any, ...] | None:
        """What makes two stores of this type the same store (None: only the object itself)."""
        where = self._where()
        return None if where is None else (where,)

    def _nesting(self) -> tuple[Any, str] | None:
        """For a store whose locations nest (a directory holds the directories of other
        stores): (its place, its root's path there), see protocol.node_location; None: a
        store of its own (a file, a database, memory)."""
        return None

    def _location_kind(self) -> type:
        """The class whose stores of one ``_identity()`` hold the same data (with it, the key
        of this process's in-process locks: protocol.location). A subclass that only renames
        or presets a store keeps its base's (LocalStore's is DirectoryStore)."""
        return type(self)

    def _real_path(self, path: str) -> str:
        """path with every symbolic link on the way resolved (once a path): the identity of
        a store of a file or directory, so that stores of one file opened through a link
        and through its path are the same store, and their handles share its in-process
        locks (protocol.location; by the path as given, writes of disjoint elements of one
        chunk through the two lost each other's updates)."""
        real = self.__dict__.get("_real_path_cache")
        if real is None or real[0] != path:
            real = self._real_path_cache = (path, os.path.realpath(path))
        return real[1]

    def _reopen_args(self) -> dict[str, Any] | None:
        """Constructor keywords a pickled copy is made with, besides ``mode`` and
        ``dimension_separator`` (None: pickled as an object)."""
        return None

    def __repr__(self) -> str:
        where = self._where()
        if where is None:
            return f"{type(self).__name__}()"
        ro = ", mode='r'" if self.read_only else ""
        return f"{type(self).__name__}({where!r}{ro})"

    def __eq__(self, other: object) -> bool:
        # Mapping.__eq__ would read every value of both stores; compare identity instead.
        ident = self._identity()
        if ident is None:
            return self is other
        return type(other) is type(self) and cast(BaseStore, other)._identity() == ident

    def __hash__(self) -> int:
        ident = self._identity()
        return id(self) if ident is None else hash((type(self).__name__, ident))

    def __reduce_ex__(self, protocol: Any) -> Any:
        args = self._reopen_args()
        if args is None:
            return super().__reduce_ex__(protocol)
        state = {"mode": "r" if self._mode == "r" else "a",
                 "dimension_separator": self._dimension_separator, **args}
        return (_reopen, (type(self), state))

    # -- mapping defaults ------------------------------------------------------------------

    def __contains__(self, key: object) -> bool:
        try:
            self[key]
        except KeyError:
            return False
        return True

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """Iterate over every key at or under *prefix* (recursively)."""
        prefix = normalize_prefix(prefix)
        for k in list(self):
            if _under(k, prefix):
                yield k

    # -- batch operations ------------------------------------------------------------------

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the keys that are present. Absent keys are omitted;
        any error other than ``KeyError`` propagates."""
        out: dict[str, bytes] = {}
        for k in keys:
            try:
                out[k] = self[k]
            except KeyError:
                pass
        return out

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Store every ``key: value`` of *mapping* (one ``__setitem__`` each by default).

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        for k, v in mapping.items():
            self[k] = v

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete keys; absent keys are ignored."""
        self._check_writable()
        for k in keys:
            try:
                del self[k]
            except KeyError:
                pass

    # -- directory-like operations ---------------------------------------------------------

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the immediate children of *prefix* (keys or "directories")."""
        prefix = normalize_prefix(prefix)
        return _listdir_keys(self, prefix)

    def rmdir(self, prefix: str = "") -> None:
        """Delete every key under *prefix* (all keys if *prefix* is empty)."""
        self._check_writable()
        prefix = normalize_prefix(prefix)
        if prefix:
            self.delitems([k for k in list(self.keys_under(prefix)) if k != prefix])
        else:
            self.delitems(list(self))

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the values at or under *prefix*."""
        prefix = normalize_prefix(prefix)
        total = 0
        for k in self.keys_under(prefix):
            try:
                total += len(self[k])
            except KeyError:  # deleted concurrently
                pass
        return total

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """Read byte ranges of one value.

        *ranges* is a sequence of ``(offset, length)``; ``length=None`` reads to the end and a
        negative offset counts from the end of the value. Ranges past the end are truncated
        (like slicing). Raises ``KeyError`` if the key is absent.
        """
        value = self[key]
        return [_slice(value, off, length) for off, length in ranges]

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Release resources. Idempotent. The default does nothing."""

    def flush(self) -> None:
        """Make pending writes durable. The default does nothing."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _reopen(cls: type, state: dict[str, Any]) -> Any:
    """A pickled store's constructor call (see BaseStore._reopen_args)."""
    return cls(**state)


def byte_span(size: int, offset: int, length: int | None) -> tuple[int, int]:
    """The ``[start, end)`` bytes of an ``(offset, length)`` range of a value of *size* bytes:
    a negative offset counts from the end, ``length=None`` reads to the end, a range past the
    end is truncated (``start >= end``: no bytes). ``ValueError`` for a negative length.
    Every store's byte ranges go through here."""
    if length is not None and length < 0:
        raise ValueError(f"negative length {length} in byte range")
    start = max(size + offset, 0) if offset < 0 else min(offset, size)
    end = size if length is None else min(size, start + length)
    return start, max(start, end)


def read_spans(f: Any, size: int, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
    """The bytes of each ``(offset, length)`` range of a seekable binary file *f* of *size*
    bytes (see :func:`byte_span`)."""
    out = []
    for off, length in ranges:
        start, end = byte_span(size, off, length)
        if start >= end:
            out.append(b"")
            continue
        f.seek(start)
        out.append(f.read(end - start))
    return out


def _slice(value: bytes, offset: int, length: int | None) -> bytes:
    start, end = byte_span(len(value), offset, length)
    return value[start:end]


def _listdir_keys(keys: Iterable[str], prefix: str) -> list[str]:
    children = set()
    if prefix:
        p = prefix + "/"
        n = len(p)
        for k in keys:
            if k.startswith(p):
                children.add(k[n:].split("/", 1)[0])
    else:
        for k in keys:
            children.add(k.split("/", 1)[0])
    children.discard("")
    return sorted(children)


# ---------------------------------------------------------------------------------------------
# helpers for any MutableMapping
# ---------------------------------------------------------------------------------------------


_CONTEXTS: dict[type, bool] = {}


def _needs_contexts(store: object, fn: Any) -> bool:
    """Whether store's getitems requires zarr-python 2's ``contexts=`` (a store class
    written for zarr 2); looked up once per class."""
    cls = type(store)
    known = _CONTEXTS.get(cls)
    if known is None:
        try:
            param = inspect.signature(fn).parameters.get("contexts")
        except (TypeError, ValueError):
            param = None
        known = _CONTEXTS[cls] = param is not None and param.default is inspect.Parameter.empty
    return known


def getitems(store: Mapping[str, bytes], keys: Iterable[str]) -> dict[str, bytes]:
    """``{key: value}`` for the *keys* present in *store*; absent keys are omitted.

    Uses ``store.getitems`` when available. Only ``KeyError`` means absent: any other
    exception propagates.
    """
    fn = getattr(store, "getitems", None)
    if fn is not None:
        keys = list(keys)
        if _needs_contexts(store, fn):  # zarr-python 2's Store.getitems(keys, *, contexts)
            return dict(fn(keys, contexts={k: {} for k in keys}))
        return fn(keys)
    out: dict[str, bytes] = {}
    for k in keys:
        try:
            v = store[k]
        except KeyError:
            continue
        out[k] = v if type(v) is bytes else ensure_bytes(v)
    return out


def setitems(store: MutableMapping[str, bytes], mapping: Mapping[str, Any]) -> None:
    """Write every item of *mapping* into *store* (``store.setitems`` when available)."""
    fn = getattr(store, "setitems", None)
    if fn is not None:
        fn(mapping)
        return
    for k, v in mapping.items():
        store[k] = v


def delitems(store: MutableMapping[str, bytes], keys: Iterable[str]) -> None:
    """Delete *keys* from *store*; absent keys are ignored (``store.delitems`` when available)."""
    fn = getattr(store, "delitems", None)
    if fn is not None:
        fn(list(keys))
        return
    for k in keys:
        try:
            del store[k]
        except KeyError:
            pass


def keys_under(store: Mapping[str, bytes], prefix: str = "") -> list[str]:
    """Every key at or under *prefix* in *store* (the store's ``keys_under`` when it has
    one: one listing)."""
    fn = getattr(store, "keys_under", None)
    if fn is not None:
        return list(fn(prefix))
    prefix = normalize_prefix(prefix)
    return [k for k in list(store) if _under(k, prefix)]


def listdir(store: Mapping[str, bytes], prefix: str = "") -> list[str]:
    """Sorted names of the immediate children of *prefix* in *store*, like ``os.listdir``.

    A child is either a key directly under *prefix* or the first path segment of a deeper
    key. Uses ``store.listdir`` when available.
    """
    fn = getattr(store, "listdir", None)
    if fn is not None:
        return sorted(fn(prefix))
    return _listdir_keys(list(store), normalize_prefix(prefix))


def rmdir(store: MutableMapping[str, bytes], prefix: str = "") -> None:
    """Delete every key under *prefix* (everything if empty). Uses ``store.rmdir`` when available."""
    fn = getattr(store, "rmdir", None)
    if fn is not None:
        fn(prefix)
        return
    prefix = normalize_prefix(prefix)
    if prefix:
        doomed = [k for k in list(store) if k.startswith(prefix + "/")]
    else:
        doomed = list(store)
    delitems(store, doomed)


def getsize(store: Mapping[str, bytes], prefix: str = "") -> int:
    """Total size in bytes of the values at or under *prefix*. Uses ``store.getsize`` when
    available."""
    fn = getattr(store, "getsize", None)
    if fn is not None:
        return int(fn(prefix))
    prefix = normalize_prefix(prefix)
    total = 0
    for k in list(store):
        if _under(k, prefix):
            try:
                v = store[k]
            except KeyError:
                continue
            total += v.nbytes if hasattr(v, "nbytes") else len(v)
    return total


# strerror text -> errno, for libraries (py-lmdb) that report a system error only as text
# (longest text first: "No such device or address" before "No such device")
_STRERROR = dict(sorted(((os.strerror(c), c) for c in errno.errorcode),
                        key=lambda sc: -len(sc[0])))
# SQLite primary result codes -> errno
_SQLITE_ERRNO = {3: errno.EACCES, 8: errno.EROFS, 10: errno.EIO, 13: errno.ENOSPC,
                 14: errno.ENOENT}


def store_error(message: str, cause: BaseException) -> StoreError:
    """A StoreError (an OSError) for a database library's failure, keeping the errno: from
    the cause's ``errno``, SQLite's result code, or the system error its message names."""
    code = getattr(cause, "errno", None)
    if not isinstance(code, int):
        code = _SQLITE_ERRNO.get((getattr(cause, "sqlite_errorcode", None) or 0) & 0xFF)
    if code is None:
        text = str(cause)
        code = next((c for s, c in _STRERROR.items() if s in text), None)
    return StoreError(code, message) if code is not None else StoreError(message)
