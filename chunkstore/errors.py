"""Exception types users catch. Each subclasses the builtin it resembles and names what is at fault.

The not-found and contains errors are also ValueErrors: zarr-python 2 raised them as such, and
its users' `except ValueError` must keep catching them."""


def store_name(store: object) -> str:
    """How a message names a store, in one short line: the store's own repr where its class
    gives one (chunkstore's stores: type and path, URL or key count); a plain mapping (a dict,
    an OrderedDict: a repr that prints every key and value, megabytes for a few thousand
    chunks) by its type and key count; any repr longer than 200 characters cut short."""
    if isinstance(store, dict) or type(store).__repr__ is object.__repr__:
        try:
            n = len(store)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a mapping that cannot count: its type is enough
            return f"<{type(store).__name__}>"
        return f"<{type(store).__name__} of {n} keys at {id(store):#x}>"
    r = repr(store)
    return r if len(r) <= 200 else r[:190] + "...>"


def with_context(e: Exception, message: str) -> Exception:
    """An error of e's type saying message (the caller raises it ``from e``), or of the
    nearest of MemoryError, ValueError, TypeError and ArithmeticError where e's type is not
    made from a message alone (a UnicodeEncodeError takes five arguments; NumPy's
    allocation error, a MemoryError, a shape and a dtype: it became a ValueError, which
    ``except MemoryError`` missed)."""
    try:
        return type(e)(message)
    except TypeError:
        base = next((b for b in (MemoryError, ValueError, TypeError, ArithmeticError)
                     if isinstance(e, b)), ValueError)
        return base(message)


class ChunkstoreError(Exception):
    """Base class of every chunkstore-specific error.

    chunkstore raises its errors with one message. zarr-python 3's errors may also be made
    from their parts, ``GroupNotFoundError(store, path)``, which it formats with the class's
    template (``_msg``); the classes that have one do the same here, so code written against
    zarr gets zarr's message and not OSError's ``"[Errno store] path"``."""

    #: zarr-python 3's message template for its several-part form (None: no such form)
    _msg: str | None = None

    def __init__(self, *args: object) -> None:
        if self._msg is not None and len(args) > 1 and len(args) == self._msg.count("{"):
            args = (self._msg.format(*args),)
        super().__init__(*args)


class ArrayNotFoundError(ChunkstoreError, FileNotFoundError, ValueError):
    """No array at the given path in the store."""

    _msg = "No array found in store {!r} at path {!r}"


class GroupNotFoundError(ChunkstoreError, FileNotFoundError, ValueError):
    """No group at the given path in the store."""

    _msg = "No group found in store {!r} at path {!r}"


class PathNotFoundError(ChunkstoreError, FileNotFoundError, ValueError):
    """Nothing (neither array nor group) at the given path."""


class ContainsArrayError(ChunkstoreError, FileExistsError, ValueError):
    """An array already exists where something new was to be created."""

    _msg = "An array exists in store {!r} at path {!r}."


class ContainsGroupError(ChunkstoreError, FileExistsError, ValueError):
    """A group already exists where something new was to be created."""

    _msg = "A group exists in store {!r} at path {!r}."


class StrayChunksError(ChunkstoreError, FileExistsError, ValueError):
    """Keys of no node lie where a new array was to be created (keys named as its chunks
    would be) or a node moved to (any key): a delete that failed midway leaves them, and the
    new or moved array would read them as its own chunks."""


class IncompatibleArrayError(ContainsArrayError, TypeError):
    """An array is where a group was required (``require_group``): a ContainsArrayError, as
    zarr-python 2 raises, and a TypeError ("Incompatible object"), as zarr-python 3 raises."""


class IncompatibleGroupError(ContainsGroupError, TypeError):
    """A group is where an array was required (``require_array``): a ContainsGroupError and
    a TypeError ("Incompatible object"), as zarr-python 3 raises."""


class IntegerArgumentError(ChunkstoreError, TypeError, ValueError):
    """A shape or chunk size that is not an integer: zarr-python 3 raises TypeError for it,
    chunkstore (and zarr-python 2, for chunks) ValueError; this is both."""


class ContainsArrayAndGroupError(ChunkstoreError, ValueError):
    """Array and group metadata documents both at one path (zarr-python 3's name)."""

    _msg = ("Array and group metadata documents (.zarray and .zgroup) were both found in store "
            "{!r} at path {!r}. Only one of these files may be present in a given directory / "
            "prefix. Remove the .zarray file, or the .zgroup file, or both.")


class ReadOnlyError(ChunkstoreError, PermissionError):
    """A write was attempted on a read-only array, group or store."""


class MetadataError(ChunkstoreError, ValueError):
    """Metadata that cannot be parsed or is not valid Zarr."""

    _msg = "Invalid value for {!r}. Expected {!r}. Got {!r}."


class ChunkNotFoundError(ChunkstoreError, KeyError):
    """A chunk key is absent and the array was opened with missing_chunks="error"."""

    def __str__(self):  # KeyError repr-quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ChunkDecodeError(ChunkstoreError, ValueError):
    """Stored chunk bytes could not be decoded (corrupt, truncated, or checksum mismatch)."""


class BoundsCheckError(ChunkstoreError, IndexError):
    """An index is outside the bounds of its dimension."""


class StoreError(ChunkstoreError, OSError):
    """A store is unusable: unclosed zip, broken database, etc."""


class CopyError(ChunkstoreError, RuntimeError, ValueError):
    """A copy could not proceed (the destination exists and if_exists="raise", ...): a
    RuntimeError as zarr-python 2's ``zarr.errors.CopyError``, and a ValueError as
    chunkstore raised it before."""


class NoSuchBucketError(StoreError):
    """The bucket of an object store does not exist: not a missing key (which reads as the
    fill value or "no array here"), an error naming the store."""


class ConsolidatedMetadataNotFoundError(PathNotFoundError):
    """A store has no consolidated metadata document (``.zmetadata``) where one was expected."""


class ArrayFormatMismatchError(ArrayNotFoundError, ContainsArrayError):
    """An explicit ``zarr_format`` asked to open or create (mode ``"a"``) an array where an
    array of the other Zarr format is. Nothing of the asked format is there (an
    ArrayNotFoundError, ``FileNotFoundError``, as zarr-python 3 raises) and the array that is
    there is neither opened as it, converted, replaced nor shadowed by a new array beside it
    (a ContainsArrayError, ``FileExistsError``)."""


class GroupFormatMismatchError(GroupNotFoundError, ContainsGroupError):
    """As :class:`ArrayFormatMismatchError`, for a group of the other Zarr format."""


class ArrayMetadataChangedError(ChunkstoreError, RuntimeError):
    """A synchronized write found the array's metadata changed by another handle each time
    it planned itself anew (resized again and again meanwhile); nothing was written."""


class NodeTypeValidationError(MetadataError):
    """A Zarr v3 ``zarr.json`` whose ``node_type`` is not the kind of node it describes
    ("array" with a group's fields, anything but "array" or "group"): zarr-python 3's name;
    a MetadataError."""


class ZarrUserWarning(UserWarning):
    """zarr-python 3's warning category for misuse that is not an error (chunkstore warns
    with it: a compressor given next to h5py's compression= wins)."""


class ZarrDeprecationWarning(DeprecationWarning):
    """zarr-python 3's category for deprecated API (for filters written against zarr)."""


class ZarrFutureWarning(FutureWarning):
    """zarr-python 3's category for behaviour that will change (for filters written against
    zarr)."""


class ZarrRuntimeWarning(RuntimeWarning):
    """zarr-python 3's category for run-time conditions worth a warning."""


# zarr-python 3's names for chunkstore's errors (``zarr.errors``), the same classes: code
# catching zarr's error catches chunkstore's.
BaseZarrError = ChunkstoreError
MetadataValidationError = MetadataError
NodeNotFoundError = PathNotFoundError
ArrayIndexError = BoundsCheckError
