"""Creating and opening arrays: create, zeros/ones/full/empty, array, *_like, open_array, open,
save and load, with zarr-python 2's names and arguments."""

from __future__ import annotations

from ..storage import protocol
import contextlib
import numbers
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, Union, cast

import numpy as np

from chunkstore.storage.store_path import split_store_path
from chunkstore import config
from chunkstore.hierarchy import creation_args
from chunkstore.codecs.common import object_codec_id
from chunkstore.metadata.extension_v3 import VLEN_BYTES, is_vlen_bytes
from chunkstore.metadata import ml_types
from chunkstore.metadata._common import check_utf8_fill
from chunkstore.hierarchy import nodes
from chunkstore.engine.array import Array, check_zarr2_keywords
from chunkstore.engine.write import by_dtype
from chunkstore.codecs.v2 import misplaced_object_filter, misread_filter, unstorable_fill
from chunkstore.codecs.normalize import (chunk_encoding_v3, codec_json, codec_kind,
                                         default_serializer, numcodecs_codec)
from chunkstore.sync.locking import GUARD
from chunkstore.sync.synchronizers import (ProcessSynchronizer, check_synchronizer_path,
                                           handle_locks, replacing)
from chunkstore.errors import (ArrayNotFoundError, ContainsArrayError, ContainsGroupError,
                               IntegerArgumentError, MetadataValidationError, ReadOnlyError,
                               StrayChunksError)
from chunkstore.metadata.formats import (FORMATS, document_rank, documents_first, format_alias,
                                         format_of, node_document_names,
                                         nodes_in_chunk_space, stray_chunk_keys,
                                         V2_CONSOLIDATED)
from chunkstore.metadata.v2 import (ArrayMetadataV2, StoredFill, check_object_fill,
                                    default_compressor, encode_array_metadata,
                                    normalize_chunks)
from chunkstore.metadata.v3 import ArrayMetadataV3, encode_array_metadata_v3
from chunkstore.metadata.zarr3_view import shard_shape_error, v2_refusal
from chunkstore.storage.base import MODES, delitems, keys_under, rmdir
from chunkstore.storage.normalize import StoreLike, normalize_store
from chunkstore.errors import store_name, with_context

#: a shape (or chunk/shard shape): an int for one dimension, or one int per dimension
ShapeLike = Union[int, Sequence[int]]
#: anything np.dtype() takes (and zarr-python 3's data type objects); None: float64
DTypeLike = Any



def normalize_path(path: str | None) -> str:
    """'a/b' form of a path inside a store; rejects '.', '..', backslashes and NULs."""
    if path is None:
        return ""
    if not isinstance(path, str):
        raise TypeError(f"path must be a string, got {type(path).__name__}")
    if "\\" in path or "\x00" in path:
        raise ValueError(f"invalid path {path!r}: backslashes and NUL are not allowed")
    parts = [p for p in path.strip("/").split("/") if p]
    for p in parts:
        if p in (".", ".."):
            raise ValueError(f"invalid path {path!r}: '.' and '..' segments are not allowed")
    return "/".join(parts)


def contains_array(store: Mapping[str, bytes], path: str = "") -> bool:
    """An array (Zarr v2 or v3) is at path (where both formats' documents lie, the v3
    node's kind tells; the opener of the node warns, not this predicate)."""
    return nodes.node_kind(store, path, warn=False)[0] == "array"


def contains_group(store: Mapping[str, bytes], path: str = "") -> bool:
    """A group (Zarr v2 or v3) is at path (as contains_array)."""
    return nodes.node_kind(store, path, warn=False)[0] == "group"


def probe_store(store: Any) -> Any:
    """Where a creation looks for what is at its path and above it: the store as it is now
    (through a cache (LRUStoreCache), a group another handle had deleted was taken for
    there, its new member written with no group above it); a consolidated snapshot
    answers as itself (a creation through it is refused: refuse_snapshot)."""
    return store if protocol.is_snapshot(store) else protocol.live_store(store)


def refuse_existing(store: Mapping[str, bytes], path: str, zarr_format: int) -> None:
    """ContainsArrayError/ContainsGroupError where a node (of either format) is at path: a
    creation without overwrite of a node of zarr_format there. One of the other format is
    named as such (a group's members are of its format, so that node is no member of the
    group it lies in, and "already exists" alone would puzzle)."""
    # (the store as it is now: a cache's (LRUStoreCache) answer from before another
    # handle's delete refused a creation at an empty path)
    kind, fmt = nodes.node_kind(probe_store(store), path, warn=False)
    if kind is None:
        return
    cls = ContainsArrayError if kind == "array" else ContainsGroupError
    what = "an array" if kind == "array" else "a group"
    other = "" if fmt == zarr_format else (f" (a Zarr format {fmt} {kind}: a Zarr format "
                                           f"{zarr_format} node is not created beside it)")
    raise cls(f"{what} already exists at path {path!r} in {store_name(store)}{other}")


def remove_node(store: MutableMapping[str, bytes], path: str,
                synchronizer: Any = None, required: bool = False) -> None:
    """Delete everything at and below path (at the root: every key, the store itself stays),
    with this process's writes of the arrays there excluded and their handles told
    (sync.synchronizers.replacing: a handle opened before never writes the old layout into
    what comes next), and the node's lock space in synchronizer held (the deleting
    handle's: other processes' attribute updates of the node end first, or find it gone).
    required: KeyError where no node is there once the locks are held."""
    with replacing_node(store, path, synchronizer):
        _remove_held(store, path, required)


def _remove_held(store: MutableMapping[str, bytes], path: str, required: bool = False) -> None:
    """remove_node's delete, its locks held by the caller."""
    if required and nodes.node_kind(store, path)[0] is None:
        # (looked at again under the locks: moved or deleted by another thread since
        # the caller found it, the delete returned having removed nothing)
        raise KeyError(f"no array or group at {path!r} in {store_name(store)}")
    # The node documents first: a delete that fails midway (an I/O error, an interrupt
    # in a directory store's tree walk, whose order is the filesystem's) then leaves
    # keys no node owns, never an array whose metadata is still there while some of
    # its chunks are gone (they would read as the fill value: wrong data, no error).
    if path:
        try:
            delitems(store, documents_first(keys_under(store, path), only_documents=True))
        except BaseException as e:
            # (the node's own document goes first: see documents_first)
            e.add_note(f"the node at {path!r} may be removed with documents of nodes below "
                       f"it left, and keys below it remain (an array created there without "
                       f"overwrite=True is refused while they do): delete it again, or call "
                       f"the store's rmdir({path!r})")
            raise
        try:
            rmdir(store, path)
        except BaseException as e:
            e.add_note(f"the node at {path!r} is removed, but keys below it may remain "
                       f"(an array created there without overwrite=True is refused "
                       f"while they do): create with overwrite=True, or call the "
                       f"store's rmdir({path!r})")
            raise
    else:  # (rmdir("") may remove the store itself) one bulk delete where it has one
        delitems(store, documents_first(list(store.keys())))


@contextlib.contextmanager
def replacing_node(store: Any, path: str | Sequence[str],
                   synchronizer: Any) -> Iterator[None]:
    """replacing() of the node at path and what lies below it (replaced_paths), the subtree
    listed again once its locks are held, and the locks of what another process created
    below it meanwhile taken too (they are let go of and taken again, all in order, until
    the listing under them finds nothing new). A creation below path holds the metadata
    guards of the groups above it (groups_above_held), which path's held space excludes:
    a node made after the listing but before the locks was moved or deleted without its
    lock, its chunks landing at the old path after the move (the moved array read the fill
    value, its write returned) or after the delete (keys of no node, an orphan array).
    Several paths (a move's source and destination) are held in one ordered acquisition,
    as replacing() takes them."""
    tops = [path] if isinstance(path, str) else list(path)

    def listed() -> Any:
        got = [replaced_paths(store, t, synchronizer) for t in tops]
        if len(got) == 1:
            return got[0]
        return [p for g in got for p in ([g] if isinstance(g, str) else g)]

    paths = listed()
    while True:
        with replacing(store, paths, synchronizer):
            if not isinstance(synchronizer, ProcessSynchronizer):
                yield
                return
            now = listed()
            if set(now) <= set([paths] if isinstance(paths, str) else paths):
                yield
                return
        paths = [*tops, *sorted((set(paths) | set(now)) - set(tops))]


@contextlib.contextmanager
def groups_above_held(synchronizer: Any, path: str, store: Any = None) -> Iterator[bool]:
    """Around writing a new node's documents (and the groups made above it): the metadata
    guards of the groups above path, the root's first, as an attribute update holds them,
    and the node's own:
    with store, those of this process's in-process tables (handle_locks), then with a
    ProcessSynchronizer, its own. A delete or move of one of those groups by another thread
    (replacing_node holds the tables' whole spaces) or another process (the synchronizer's)
    holds that group's whole lock space, so the creation comes wholly before it (and is
    listed, and moved or deleted with the group) or after it (and finds the group gone:
    made anew). (Without the in-process guards, threads and tasks of one process deleting
    y and creating y/sub/arr both returned, leaving the array with no group above it.)
    Yields whether guards are held (the caller then looks at the groups above again: one
    may have gone before they were)."""
    process = isinstance(synchronizer, ProcessSynchronizer)
    if store is None and not process:
        yield False
        return
    # (and the node's own guard, last: a delete of the node holds all of its space, so a
    # creation at the path it deletes comes wholly before or after it; between, the
    # creation's document was written into a directory the delete had just removed, a
    # bare FileNotFoundError)
    guarded = [*nodes.ancestors(path), path]
    with contextlib.ExitStack() as held:
        if store is not None:
            for node in guarded:
                held.enter_context(handle_locks(store, node).hold(node, GUARD))
        if process:
            for node in guarded:
                held.enter_context(synchronizer.hold(node, GUARD))
        yield True


#: how many times a creation with overwrite=True removes what it finds at its path once it
#: holds the guards above (made there meanwhile) before it gives up
_REMOVALS = 8


@contextlib.contextmanager
def replaced_and_guarded(store: Any, path: str, synchronizer: Any, overwrite: bool,
                         whole: bool, kind: str = "array") -> Iterator[bool]:
    """Around writing a new node's documents at path: with overwrite, what is there removed
    first (whole: under this process's locks of the node, held on through the body, which
    the groups above are then too: see replacing; else remove_node, before the guards), then
    the guards of the groups above held (groups_above_held). A node another thread or
    process made at path between the removal and the guards (the parent group of its
    creation below path) is removed again: written over, the new node's document lay beside
    the other's (an array's .zarray beside a group's .zgroup, with members below it).
    Yields whether guards are held (see groups_above_held; whole: this process's tables of
    the groups above are held whole, which excludes as much: the caller looks at the groups
    above again too, one deleted since it first looked is made anew)."""
    for _ in range(_REMOVALS):
        with contextlib.ExitStack() as held:
            if whole:
                held.enter_context(replacing_node(store, path, synchronizer))
                _remove_held(store, path)
            elif overwrite:
                remove_node(store, path, synchronizer)
            # (whole: the tables above are held already, and are not taken twice)
            guarded = held.enter_context(
                groups_above_held(synchronizer, path, None if whole else store))
            if overwrite and not whole and \
                    nodes.node_kind(probe_store(store), path, warn=False)[0]:
                continue
            yield guarded or whole
            return
    cls = ContainsArrayError if kind == "array" else ContainsGroupError
    raise cls(f"cannot replace the node at path {path!r} in {store_name(store)} with "
              f"{'an array' if kind == 'array' else 'a group'}: a node was made there again "
              f"each of {_REMOVALS} times it was removed")


def replaced_paths(store: Mapping[str, bytes], path: str, synchronizer: Any) -> Any:
    """What replacing() must hold to delete or move the node at path: path, and with a
    ProcessSynchronizer every node below it too. Another process's write of an array below
    takes that array's lock space only, not its groups': a move of a group copying the
    array's chunks, or a delete, ran beside such writes, which returned and were then lost
    (deleted with the source, or left under the old path). (One listing of the subtree;
    in-process handles are found without it, by their lock tables.)"""
    if not isinstance(synchronizer, ProcessSynchronizer):
        return path
    below = {k.rpartition("/")[0] for k in keys_under(store, path) if document_rank(k) == 0}
    return [path, *sorted(below - {path})]


def stray_keys_error(head: str, keys: Sequence[str], remedy: str) -> StrayChunksError:
    """The StrayChunksError of keys no node owns lying where head (what was refused) would
    put a node: what they are, and remedy."""
    shown = ", ".join(repr(k) for k in keys[:3]) + (", ..." if len(keys) > 3 else "")
    return StrayChunksError(f"{head}: {len(keys)} key(s) of no node lie there ({shown}; left "
                            f"by a delete that failed?) and {remedy}")


def _refuse_stray_chunks(store: Mapping[str, bytes], path: str) -> None:
    """StrayChunksError where keys named as chunks, of no node, lie at path: a delete that
    failed midway leaves them (remove_node takes the documents first), and an array made
    there would read them as its own chunks, old values where its fill value belongs. (One
    listing of path; overwrite=True removes them.)"""
    keys = keys_under(probe_store(store), path)  # (not a cache's listing)
    stray = stray_chunk_keys(keys, path)
    if stray:
        raise stray_keys_error(
            f"cannot create array at path {path!r} in {store_name(store)}", stray,
            f"would read as the new array's chunks: create with overwrite=True, or remove "
            f"them (the store's rmdir({path!r}))")
    # (a node there is not stray: its keys are its own, and the array's would mix with them)
    refuse_node_in_chunk_space(keys, path, f"cannot create array at path {path!r}", store,
                               "create with overwrite=True (which removes it), or choose "
                               "another path")


def refuse_node_in_chunk_space(keys: Sequence[str], path: str, doing: str,
                               store: Mapping[str, bytes], remedy: str) -> None:
    """ContainsGroupError where a node lies where an array at path keeps its chunks (keys:
    the store's at or below path; see nodes_in_chunk_space): the array's chunk keys and that
    node's would be one namespace. doing: what is refused; remedy: what to do instead."""
    inside = nodes_in_chunk_space(keys, path)
    if inside:
        raise ContainsGroupError(
            f"{doing} in {store_name(store)}: a node lies at {inside[0]!r}, among the "
            f"array's chunk keys (its chunks would be written among that node's keys, and "
            f"read back from them); {remedy}")


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")


def _normalize_shape(shape: ShapeLike | None, what: str = "shape") -> tuple[int, ...]:
    """shape as a tuple of ints; what names the argument in errors ("chunks", "shards")."""
    if shape is None:
        if what == "shape":
            raise TypeError("shape is required to create an array")
        raise TypeError(f"{what} must be an integer or an iterable of integers; got None")
    if isinstance(shape, (int, numbers.Integral, np.integer)):
        shape = (int(shape),)
    shape = tuple(shape)
    if not all(_is_whole(s) for s in shape):
        raise IntegerArgumentError(f"Expected an iterable of integers. Got {shape} instead. "
                                   f"(the {what} is integers)")
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"{what} {shape} has a negative dimension")
    return shape


def _is_whole(size: Any) -> bool:
    """size is an integer; an integral float (3.0) too, as zarr-python 2 takes it (400.5 was
    cut to 400)."""
    if isinstance(size, (bool, np.bool_)):
        return False
    if isinstance(size, float):
        return size.is_integer()
    return isinstance(size, numbers.Integral)


def _default_fill(fill_value, dtype, object_codec, first_filter=None):
    """zarr-python's conventions for fill values that don't fit the dtype as given (the
    0 default of an object array: by the object_codec given; its kind: by the array's
    first filter, its object codec however given)."""
    if isinstance(fill_value, StoredFill):
        return fill_value.value
    if dtype.hasobject:
        if fill_value == 0 and not isinstance(fill_value, str):
            if object_codec is None or dtype.names:  # (object fields: null, their only fill)
                return None
            # strings' and bytes' empty value; other codecs (JSON, MsgPack, Pickle, VLenArray)
            # hold the 0 itself, stored and read as zarr-python 2 does (it was stored null)
            return {"vlen-utf8": "", "vlen-bytes": b""}.get(object_codec.codec_id, fill_value)
        check_object_fill(first_filter, fill_value)
        return fill_value
    if isinstance(fill_value, (int, float)) and fill_value == 0:
        if dtype.kind == "S":
            return b""
        if dtype.kind == "U":
            return ""
        if dtype.kind == "V" and ml_types.name_of(dtype) is None:  # (bfloat16 is kind V)
            return bytes(dtype.itemsize) if dtype.names is None else np.zeros((), dtype)[()]
    return fill_value


def init_array(store: MutableMapping[str, bytes], shape: ShapeLike | None, chunks: Any = True,
               dtype: DTypeLike = None, compressor: Any = "default", fill_value: Any = None,
               order: str = "C", overwrite: bool = False, path: str | None = None,
               filters: Sequence[Any] | None = None, object_codec: Any = None,
               dimension_separator: str | None = None, zarr_format: int | None = 2,
               shards: ShapeLike | None = None,
               dimension_names: Sequence[str | None] | None = None,
               attributes: Mapping[str, Any] | None = None,
               codecs: Sequence[Any] | None = None, *, chunk_store: Any = None,
               storage_transformers: Sequence[Any] = (), synchronizer: Any = None) -> Any:
    """Write the metadata of a new array (and parent groups) into store. fill_value None
    (the default, as zarr-python 2's init_array; create's is 0) is a null fill value.

    Everything (dtype, fill value, codecs, chunks, what is at path) is checked, and the new
    metadata is opened as an array would open it, before the first key is written or
    deleted: a creation that fails leaves the store as it was. zarr-python 2's chunk_store
    (None: the chunks go into store) and storage_transformers (none) are taken; a separate
    chunk store or a transformer is refused. synchronizer: whose creation locks the parent
    groups written on the way are written under."""
    check_zarr2_keywords(chunk_store, None)
    if storage_transformers:
        raise ValueError(f"storage_transformers are not supported, got "
                         f"{list(storage_transformers)!r}")
    path = normalize_path(path)
    shape = _normalize_shape(shape)
    dtype, object_codec = creation_args.normalize_dtype(dtype, object_codec)
    if dtype.subdtype is not None:
        # As NumPy and zarr-python 2: a sub-array dtype's shape extends the array's shape.
        shape, dtype = shape + tuple(dtype.shape), dtype.base
    _check_format(zarr_format)
    zarr_format = zarr_format or 2
    if creation_args.is_no_compressor(compressor):
        compressor = None
    chunks = normalize_chunks(chunks, shape, dtype.itemsize)
    key = nodes.metadata_key(path, zarr_format, "array")
    # (a v3 array's attributes go into raw; a v2 array's into .zattrs, made now: either way
    # they are checked before anything is removed, and refused as attributes)
    attribute_docs = array_attribute_documents(path, zarr_format, attributes)
    meta, raw = _NEW_ARRAY_METADATA[zarr_format](
        store, path, shape, chunks, dtype, compressor, fill_value, order, filters,
        dimension_separator, shards, dimension_names, attributes, codecs, object_codec)
    _check_opens(path, key, raw)
    missing = _check_parents(store, path)  # before anything is removed or written
    # A replacement holds this process's locks of the node from the delete to the new
    # document: a write or read through a handle of the old array that looked in between
    # raised ArrayNotFoundError, though an array was there before and after. (Not with a
    # ProcessSynchronizer: its creation takes the guards of the groups above, which a delete
    # of one of them takes before the node's locks: held in the other order, the two waited
    # for each other. Nor where groups above are to be made: their creation locks come
    # before the locks of what is replaced, as another creation there takes them, with
    # overwrite=True, before its own replacement's: the two waited for each other.)
    whole = overwrite and not missing and not isinstance(synchronizer, ProcessSynchronizer)
    with replaced_and_guarded(store, path, synchronizer, overwrite, whole) as guarded:
        if guarded:
            missing = _check_parents(store, path)
        if not overwrite:
            # (under the guards: a delete of a group above in another process, midway,
            # showed keys of no node here, refused as a failed delete's)
            refuse_existing(store, path, zarr_format)
            refuse_snapshot(store, f"create an array at path {path!r}")
            _refuse_stray_chunks(store, path)
        with parents_kept_on_success(store, path, missing, zarr_format, synchronizer,
                                     guarded):
            store[key] = raw
            for name, doc in attribute_docs.items():
                store[nodes.prefix(path) + name] = doc
    # counted as a change of the node's metadata: a handle of an array deleted there before
    # describes the new one (EngineHandle.described looks for a gone array again only then)
    handle_locks(store, path).count_change(path)
    return meta


def _array_metadata_v2(store, path, shape, chunks, dtype, compressor, fill_value, order,
                       filters, dimension_separator, shards, dimension_names, attributes,
                       codecs, object_codec):
    for name, value in (("shards", shards), ("dimension_names", dimension_names),
                        ("codecs", codecs)):
        if value is not None:  # (zarr-python 3 refuses them too; dropped, they would be lost)
            raise ValueError(v2_refusal(name, value))
    if compressor == "default":
        compressor = default_compressor()
    if isinstance(dimension_separator, dict):
        # zarr-python 3's chunk_key_encoding ("v2" and its separator) on a v2 array
        if dimension_separator.get("name", "v2") != "v2":
            raise ValueError(f"chunk_key_encoding cannot be used for arrays with zarr_format "
                             f"2. Use dimension_separator instead. (a Zarr v2 array's "
                             f"chunk_key_encoding is 'v2', got "
                             f"{dimension_separator.get('name')!r})")
        dimension_separator = (dimension_separator.get("configuration") or {}).get("separator")
    filters = list(filters) if filters else []
    # zarr-python 3's codec objects, JSON dicts or names -> numcodecs (codecs/normalize.py)
    if compressor is not None and not hasattr(compressor, "codec_id"):
        compressor = numcodecs_codec(compressor, "compressor")
    filters = [f if hasattr(f, "codec_id") else numcodecs_codec(f, f"filters[{i}]")
               for i, f in enumerate(filters)]
    if object_codec is not None and not dtype.hasobject:
        warnings.warn(f"an object_codec is only needed for object arrays; {object_codec!r} "
                      f"is not used for data type {dtype}", UserWarning, stacklevel=4)
    if not dtype.hasobject:
        problem = misread_filter(filters, dtype)
        if problem is not None:
            raise ValueError(f"cannot create array at path {path!r}: {problem}")
        for i, f in enumerate(filters):
            if object_codec_id(f) is not None:  # (no reader could decode the chunks)
                raise ValueError(f"cannot create array at path {path!r}: filters[{i}] {f!r} "
                                 f"encodes object arrays, and the data type is {dtype}: "
                                 f"leave it out, or use dtype=object")
    if dtype.hasobject:
        if object_codec is None and not filters:
            raise ValueError("an object array needs an object_codec, e.g. "
                             "numcodecs.VLenUTF8() for strings")
        if object_codec is None:
            warnings.warn(f"the object codec of an object array given as its first filter "
                          f"({filters[0]!r}) is deprecated, as in zarr-python 2: pass "
                          f"object_codec=", FutureWarning, stacklevel=4)
        if object_codec is not None:
            filters = [object_codec] + filters
        codec_id = object_codec_id(filters[0]) if filters else None
        if dtype.names is not None and codec_id not in (None, "pickle"):
            # (JSON and MsgPack store records as lists that numcodecs cannot make records of
            # again, and the vlen codecs strings alone: every chunk written was unreadable)
            raise ValueError(f"cannot create array at path {path!r}: a structured dtype "
                             f"with object fields ({dtype}) is stored by the Pickle object "
                             f"codec alone, not {codec_id!r} (its chunks could not be read "
                             f"back)")
        problem = misplaced_object_filter(filters)
        if problem is not None:
            raise ValueError(f"cannot create array at path {path!r}: {problem}")
    if dimension_separator is None:
        dimension_separator = getattr(store, "dimension_separator", None) or "."
    try:
        fill_value = _default_fill(fill_value, dtype, object_codec,
                                   filters[0] if dtype.hasobject else None)
    except ValueError as e:
        raise ValueError(f"cannot create array at path {path!r}: {e}") from e
    try:
        meta = ArrayMetadataV2(shape=shape, chunks=chunks, dtype=dtype, compressor=compressor,
                               fill_value=fill_value, order=order, filters=filters or None,
                               dimension_separator=dimension_separator)
        doc = encode_array_metadata(meta)
    except (TypeError, ValueError) as e:
        raise ValueError(f"cannot create array at path {path!r}: {e}") from e
    # (a fill value its filters would store wrapped: every chunk not written whole holds it)
    problem = unstorable_fill(meta, path)
    if problem is not None:
        raise ValueError(f"cannot create array at path {path!r}: {problem}")
    return meta, doc


def _check_opens(path, key, raw):
    """Open the new metadata as Array does (codec pipeline, fill value), in a scratch store."""
    try:
        Array({key: raw}, path=path)
    except Exception as e:
        raise ValueError(f"cannot create array at path {path!r}: {e}") from e


def refuse_snapshot(store, what: str) -> None:
    """ReadOnlyError where store is a view serving a consolidated snapshot of the metadata
    (protocol.is_snapshot): a node is never created through one. Asked after the checks for
    a node at the path (which the snapshot answers, as every read of the view) and before
    those for keys of no node there (which a listing of the store answers: an array made in
    the store since the snapshot seemed absent, and its chunks keys of no node, a
    StrayChunksError naming a failed delete)."""
    if protocol.is_snapshot(store):
        raise ReadOnlyError(f"cannot {what} in {store_name(store)}: its metadata is a "
                            f"consolidated snapshot; change the store itself, and "
                            f"consolidate again")


def _check_parents(store, path) -> list[str]:
    """Refuse path where an array is above it (ContainsArrayError), or where a name in it is
    a metadata document's (ValueError); the paths of the groups missing above it, the root's
    side first (one metadata probe a level, for both)."""
    documents = node_document_names() | {V2_CONSOLIDATED}
    reserved = [p for p in path.split("/") if p in documents]
    if reserved:
        # (g[".zgroup"] = data replaced the group's own document by an array: the group
        # gone, its attributes with it; zarr-python 3 refuses such names too)
        raise ValueError(f"cannot create a node at path {path!r} in {store_name(store)}: "
                         f"{reserved[0]!r} is the name of a metadata document, not a node")
    missing = []
    # (the store as it is now: through a cache (LRUStoreCache), a group deleted by another
    # handle was taken for there, and the array made below it had no group above it)
    live = probe_store(store)
    for parent in nodes.ancestors(path):
        kind = nodes.node_kind(live, parent)[0]
        if kind == "array":
            # zarr-python 3's words, then chunkstore's
            raise ContainsArrayError(f"A parent of {path} is an array - only groups may have "
                                     f"child nodes. (cannot create {path!r}: an array exists "
                                     f"at {parent!r} in {store_name(store)})")
        if kind is None:
            missing.append(parent)
    return missing


def _write_parent_groups(store, missing: list[str], zarr_format: int = 2,
                         synchronizer: Any = None, guarded: bool = False,
                         written: list[str] | None = None) -> list[str]:
    """Write the groups that _check_parents found missing, each under its creation lock
    (synchronizer's, or this process's: see creation_lock), looked at again there (a probe
    a level): one made meanwhile is kept (written over, a group made at once lost its
    attributes), an array made meanwhile refuses the creation (written over, its document
    became a group's, above its chunks). Returns the paths of the groups it wrote.

    guarded: the caller holds the guards of the groups above (groups_above_held), which
    every other guarded writer of documents waits for: no creation lock is taken (a
    creation lock is taken before the guards, never after: taken after, a creation below a
    missing group and an open_group of that group each held what the other waited for).
    written: the list the paths go into, each before its group is written (one whose write
    raised may have landed: a remote store's lost answer), for the caller's clean-up."""
    written = [] if written is None else written
    for parent in missing:
        with (contextlib.nullcontext() if guarded else
              creation_lock(synchronizer, nodes.creation_lock_key(parent, "group"), store)):
            # (guarded: missing was found under the guards, which every other creation or
            # change of those groups waits for: not looked at again)
            kind = None if guarded else nodes.node_kind(probe_store(store), parent)[0]
            if kind == "array":
                raise ContainsArrayError(
                    f"A parent of a node being created is an array - only groups may have "
                    f"child nodes. (an array was created at {parent!r} in "
                    f"{store_name(store)} meanwhile)")
            if kind is None:
                written.append(parent)
                write_group_metadata(store, parent, zarr_format)
                note_created(store, parent)
    return written


@contextlib.contextmanager
def parents_kept_on_success(store: Any, path: str, missing: list[str], zarr_format: int,
                            synchronizer: Any, guarded: bool = False) -> Iterator[None]:
    """Around writing a new node's documents at path: the groups missing above it written
    first (_write_parent_groups); where writing the documents fails (a name the filesystem
    refuses, an I/O error), the node's documents written so far and those groups (deepest
    first, each only where nobody took it up meanwhile) are removed again: a creation that
    fails leaves the store as it was (the groups stayed, reading as empty groups). So are
    the groups written before one of them failed."""
    made: list[str] = []
    try:
        made = _write_parent_groups(store, missing, zarr_format, synchronizer, guarded, made)
    except BaseException:
        _remove_untouched_groups(store, made, synchronizer, guarded)
        raise
    try:
        yield
    except BaseException:
        # (each step on its own: a name the filesystem refuses fails the look at it too)
        with contextlib.suppress(Exception):
            delitems(store, [nodes.prefix(path) + n for n in sorted(node_document_names())])
        _remove_untouched_groups(store, made, synchronizer, guarded)
        raise


def note_created(store, path: str) -> None:
    """Date the creation of a group (or a node moved) at path: a consolidated snapshot of
    the hierarchy older than it lists and opens the node from the store (a member created
    since was not found through it; protocol.changed_around)."""
    protocol.note_metadata_change(protocol.node_location(store, path))


def require_parent_groups(store, path, zarr_format=2, synchronizer=None):
    """Create the missing groups above path, in zarr_format; refuse if an array is there
    (before writing any group)."""
    _write_parent_groups(store, _check_parents(store, path), zarr_format, synchronizer)


def group_documents(path: str, zarr_format: int,
                    attributes: Mapping[str, Any] | None) -> dict[str, bytes]:
    """The metadata documents of a new group at path, with its attributes (name -> bytes);
    attributes that JSON cannot hold raise (TypeError, ValueError) naming the group."""
    try:
        return format_of(zarr_format).group_documents(attributes)
    except (TypeError, ValueError) as e:
        raise with_context(e, f"cannot create group at path {path!r}: its attributes: "
                           f"{e}") from e


def array_attribute_documents(path: str, zarr_format: int,
                              attributes: Mapping[str, Any] | None) -> dict[str, bytes]:
    """The documents of a new array's attributes beside its metadata document (Zarr v2's
    .zattrs; name -> bytes); attributes that JSON cannot hold raise (TypeError,
    ValueError) naming the array."""
    try:
        return format_of(zarr_format).array_attribute_documents(attributes)
    except (TypeError, ValueError) as e:
        raise with_context(e, f"cannot create array at path {path!r}: its attributes: "
                           f"{e}") from e


def write_group_metadata(store: MutableMapping[str, bytes], path: str, zarr_format: int = 2,
                         attributes: Mapping[str, Any] | None = None) -> None:
    """Write the metadata documents of a group at path (nothing else is checked)."""
    for name, doc in format_of(zarr_format).group_documents(attributes).items():
        store[nodes.prefix(path) + name] = doc


# ------------------------------------------------------------------------------ Zarr v3
def v3_codec(codec, itemsize):
    """The Zarr v3 codec config for a numcodecs compressor: the native v3 codec writing its
    frames (Blosc, Zstd, GZip, CRC32C), else zarr-python 3's ``numcodecs.<id>`` (LZ4, Zlib,
    BZ2, LZMA, the checksums); or the config itself if a dict is given."""
    if isinstance(codec, dict):
        return codec
    from chunkstore.codecs.normalize import codec_json
    raw = np.dtype(f"V{max(int(itemsize), 1)}")
    if getattr(codec, "codec_id", None) is None:  # zarr-python 3's codec objects, names
        return codec_json(codec, "compressor", raw)
    from chunkstore.codecs.registry import v3_of_numcodec
    # Blosc's AUTOSHUFFLE has always become byte shuffle here, whatever the item size
    doc = v3_of_numcodec(codec, itemsize, auto_shuffle="shuffle")
    if doc is None:
        doc = codec_json(codec, "compressor", raw)
        if codec_kind(doc) != "bytes_bytes":
            raise ValueError(f"{codec!r} is no compressor of a Zarr v3 chain (a bytes -> "
                             f"bytes codec)")
    return doc


#: the checksum codecs a v3 chain takes among zarr-python 2's filters= (any other bytes ->
#: bytes codec there, a compressor, is refused: moved after the compressor it compressed
#: twice)
_CHECKSUMS = frozenset({"crc32c", "numcodecs.crc32", "numcodecs.crc32c", "numcodecs.adler32",
                        "numcodecs.fletcher32", "numcodecs.jenkins_lookup3"})


def v3_codecs(dtype, ndim, order="C", compressor="default", filters=None):
    """The v3 codec chain for chunkstore's arguments: [transpose for order "F"], the
    array -> array filters (numcodecs' Delta, FixedScaleOffset, ...: zarr-python 3's
    numcodecs.<id>), bytes (or vlen-utf8 for strings), the compressor, then crc32c if given
    among filters."""
    chain = []
    if order == "F" and ndim > 1:
        chain.append({"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}})
    checksums = []
    for i, f in enumerate(filters or []):
        doc = codec_json(f, f"filters[{i}]", dtype)
        if codec_kind(doc) == "array_array":
            chain.append(doc)
        elif doc.get("name") in _CHECKSUMS:
            checksums.append(doc)  # (after the compressor: a checksum of what is stored)
        else:
            raise ValueError(f"filter {f!r} has no place in a Zarr v3 chain; only "
                             f"numcodecs' array -> array filters (Delta, FixedScaleOffset, "
                             f"Quantize, BitRound, PackBits, AsType) and checksums do")
    # v3 data types have no byte order: the bytes codec stores the one asked for.
    chain.append(default_serializer(dtype))
    if compressor == "default":
        compressor = default_compressor()
    if compressor is not None:
        chain.append(v3_codec(compressor, dtype.itemsize if not dtype.hasobject else 1))
    return chain + checksums


def fill_codec_defaults(chain: list, dtype: np.dtype) -> list:
    """A new v3 array's codec documents with what zarr-python 3 fills in from the array
    written out: numcodecs.shuffle's ``elementsize`` (the array's item size; left out, the
    document read as numcodecs' default 4 here, and as the item size by zarr-python: f8
    chunks shuffled by 4 read as other values there), inside a sharding codec too."""
    out = []
    for doc in chain:
        if isinstance(doc, Mapping) and doc.get("name") == "numcodecs.shuffle" and \
                (doc.get("configuration") or {}).get("elementsize") is None:
            doc = {**doc, "configuration": {**(doc.get("configuration") or {}),
                                            "elementsize": int(dtype.itemsize)}}
        elif isinstance(doc, Mapping) and doc.get("name") == "sharding_indexed":
            conf = dict(doc.get("configuration") or {})
            conf["codecs"] = fill_codec_defaults(list(conf.get("codecs") or []), dtype)
            doc = {**doc, "configuration": conf}
        out.append(doc)
    return out


def _array_metadata_v3(store, path, shape, chunks, dtype, compressor, fill_value, order,
                       filters, dimension_separator, shards, dimension_names, attributes,
                       codecs, object_codec=None):
    if order not in ("C", "F"):
        raise ValueError(f"cannot create array at path {path!r}: order must be 'C' or 'F', "
                         f"got {order!r}")
    codec_id = getattr(object_codec, "codec_id", None)
    if object_codec is not None and codec_id not in ("vlen-utf8", "vlen-bytes"):
        raise ValueError(f"cannot create array at path {path!r}: Zarr v3 stores object "
                         f"arrays as strings (vlen-utf8) and bytes (vlen-bytes) only, not "
                         f"with {object_codec!r}")
    if codec_id == "vlen-bytes" or is_vlen_bytes(dtype):
        dtype = VLEN_BYTES  # v3 "variable_length_bytes"
    elif dtype.hasobject or (dtype.kind == "U" and dtype.itemsize == 0):
        dtype = np.dtype(object)  # v3 "string": variable-length UTF-8
        if isinstance(fill_value, str):
            try:
                check_utf8_fill(fill_value)
            except ValueError as e:
                raise ValueError(f"cannot create array at path {path!r}: {e}") from None
    if dtype.kind == "V" and not dtype.names and dtype.subdtype is not None:
        raise ValueError(f"cannot create array at path {path!r}: data type {dtype} (a "
                         f"subarray type) is not supported by Zarr v3 here (bool, ints, "
                         f"floats, complex, string, structured, fixed-width bytes and "
                         f"unicode, raw bytes, datetime64, timedelta64)")
    if codecs is not None:  # any spelling of a codec chain (chunkstore.codecs.normalize)
        codecs = chunk_encoding_v3(dtype, codecs=codecs)
    chain = list(codecs) if codecs is not None else v3_codecs(dtype, len(shape), order,
                                                              compressor, filters)
    chain = fill_codec_defaults(chain, dtype)
    grid = chunks
    index_location = "end"
    if isinstance(shards, Mapping):  # zarr-python 3's {"shape": ..., "index_location": ...}
        index_location = shards.get("index_location", "end")
        shards = shards["shape"]
    if shards is not None:
        shards = _normalize_shape(shards, "shards")
        if len(shards) != len(shape) or any(s % c for s, c in zip(shards, chunks)):
            raise ValueError(f"cannot create array at path {path!r}: "
                             f"{shard_shape_error(shards, chunks)}")
        chain = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(chunks), "codecs": chain,
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": index_location}}]
        grid = shards
    if fill_value is not None and dtype.hasobject and fill_value == 0:
        fill_value = ""
    elif not dtype.hasobject:
        # create()'s default fill_value=0 for strings and raw bytes: their zero value, as
        # in Zarr v2 (zarr.array("a", zarr_format=3) was refused)
        fill_value = _default_fill(fill_value, dtype, None)
    try:
        meta = ArrayMetadataV3(shape=shape, chunks=grid, dtype=dtype, fill_value=fill_value,
                               codecs=chain, chunk_key_encoding=dimension_separator or "/",
                               dimension_names=list(dimension_names) if dimension_names
                               else None, attributes=dict(attributes or {}))
        return meta, encode_array_metadata_v3(meta)
    except (TypeError, ValueError) as e:
        raise ValueError(f"cannot create array at path {path!r}: {e}") from e


# The metadata of a new array from creation's arguments, per format (same signature: what a
# format has no use for, it ignores or refuses).
_NEW_ARRAY_METADATA = {2: _array_metadata_v2, 3: _array_metadata_v3}


_held = threading.local()  # creation locks this thread holds: markers of (lock, key)


@contextlib.contextmanager
def creation_lock(synchronizer: Any, key: str, store: Any = None) -> Iterator[None]:
    """The lock held while creating the node whose metadata key is key (no-op if none).

    Two processes creating the same node at once then either both succeed (the second opens
    what the first made) or one gets a clear Contains*Error; neither sees a half-made node.
    Re-entrant per thread: a Group method holds it across its check and then calls create(),
    which asks for it again; synchronizer locks are not re-entrant, so the inner request must
    not take it a second time (it would wait for itself forever).

    With ``store``: a synchronizer whose lock directory lies inside the store is refused
    (ValueError) before its lock file or anything else is written; and without a
    synchronizer, the node's in-process locks are held (sync.synchronizers.handle_locks:
    those every handle of this process on the node shares), so threads and asyncio tasks
    creating one node at once behave as processes with a synchronizer (two
    require_group of one path raised ContainsGroupError; a parent group written on the way
    overwrote an array created at once)."""
    if synchronizer is None:
        if store is None:
            yield
            return
        synchronizer = handle_locks(store, key.rpartition("/")[0])
    elif store is not None:
        check_synchronizer_path(synchronizer, store)
    lock = synchronizer[key]
    # The lock object, and (lock directory or synchronizer, key): two ProcessSynchronizer
    # instances on one directory share lock files.
    markers = (("obj", id(lock)), ("key", getattr(synchronizer, "path", None)
                                   or id(synchronizer), key))
    held = _held.__dict__.setdefault("markers", set())
    if any(m in held for m in markers):
        yield
        return
    with lock:
        added = [m for m in markers if m not in held]
        held.update(added)
        try:
            yield
        finally:
            held.difference_update(added)


def create(shape: ShapeLike, chunks: Any = True, dtype: DTypeLike = None,
           compressor: Any = "default", fill_value: Any = 0, order: str | None = None,
           store: StoreLike = None, synchronizer: Any = None, overwrite: bool = False,
           path: str | None = None, filters: Sequence[Any] | None = None,
           cache_metadata: bool = True, read_only: bool = False, object_codec: Any = None,
           dimension_separator: str | None = None, write_empty_chunks: bool | None = None,
           storage_options: dict | None = None, missing_chunks: str = "fill",
           zarr_format: int | None = None, shards: ShapeLike | None = None,
           dimension_names: Sequence[str | None] | None = None,
           attributes: Mapping[str, Any] | None = None, codecs: Sequence[Any] | None = None,
           **kwargs: Any) -> Array:
    """Create an array. Arguments follow zarr-python 2's `zarr.create`, plus zarr_format
    (2, the default unless config.set(default_zarr_format=3) or shards=, dimension_names=
    or codecs= is given, or 3) and
    for Zarr v3: shards (the shard shape; chunks are then the inner chunks), dimension_names,
    attributes, and codecs (a raw v3 codec chain). h5py's compression=, compression_opts=
    and fillvalue= are accepted, as zarr-python 2 accepts them; and zarr-python 3's
    chunk_shape (chunks), chunk_key_encoding and config={"order", "write_empty_chunks"}, and
    create_array's compressors= and serializer= (in place of compressor=/codecs=)."""
    store, path = split_store_path(store, path)
    zarr_format = format_alias(zarr_format, kwargs.pop("zarr_version", None))
    compressor, fill_value, chunks, order, write_empty_chunks, dimension_separator = \
        creation_args.peer_args(kwargs, compressor, fill_value, chunks, order,
                                write_empty_chunks, dimension_separator)
    _check_format(zarr_format)
    # writes to a read-only Mapping are refused at run time
    store = cast(MutableMapping[str, bytes],
                 normalize_store(store, mode="a", storage_options=storage_options))
    zarr_format = _new_format(store, normalize_path(path), zarr_format, shards,
                              dimension_names, codecs)
    compressor, filters, codecs, object_codec = creation_args.zarr3_encoding_args(
        kwargs, zarr_format or 2, dtype, shape, compressor, filters, codecs, object_codec)
    _check_unknown(kwargs)
    with creation_lock(synchronizer, nodes.creation_lock_key(normalize_path(path), "array"),
                       store):
        init_array(store, shape, chunks=chunks, dtype=dtype, compressor=compressor,
                   fill_value=fill_value, order=order, overwrite=overwrite, path=path,
                   filters=filters, object_codec=object_codec,
                   dimension_separator=dimension_separator, zarr_format=zarr_format or 2,
                   shards=shards, dimension_names=dimension_names, attributes=attributes,
                   codecs=codecs, synchronizer=synchronizer)
    return Array(store, path=normalize_path(path), read_only=read_only,
                 synchronizer=synchronizer, write_empty_chunks=write_empty_chunks,
                 missing_chunks=missing_chunks, cache_metadata=cache_metadata, order=order)


def _new_format(store: Any, path: str, zarr_format: int | None, shards: Any,
                dimension_names: Any, codecs: Any) -> int:
    """The Zarr format of an array create() or open_array() makes at path: zarr_format,
    else v3 where shards=, dimension_names= or codecs= ask for it (they exist in v3 only:
    dask's to_zarr, taking its zarr-python 2 path here, passes shards= and
    dimension_names=), else as nodes.new_node_format decides (the configured default, the
    group above, 2)."""
    if zarr_format is None and (shards is not None or dimension_names is not None
                                or codecs is not None):
        zarr_format = config.default_zarr_format(None, 3)
    return nodes.new_node_format(store, path, zarr_format, 2)


def _check_unknown(kwargs):
    # zarr-python accepts a few arguments chunkstore has no use for; anything else is a typo.
    ignored = {"chunk_store", "meta_array", "cache_attrs"}
    # (a separate chunk_store was ignored: another library's chunks there read as the fill
    # value, and writes went to the metadata store)
    check_zarr2_keywords(kwargs.get("chunk_store"), kwargs.get("meta_array"))
    unknown = set(kwargs) - ignored
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")


def _check_format(zarr_format):
    if zarr_format is not None and (zarr_format not in (2, 3) or not isinstance(
            zarr_format, (int, np.integer)) or isinstance(zarr_format, bool)):
        # zarr-python 3's error and words (a ValueError too), then chunkstore's
        raise MetadataValidationError(f"Invalid value for 'zarr_format'. Expected 2, 3, or "
                                      f"None. Got '{zarr_format}'. (zarr_format must be 2 or "
                                      f"3, got {zarr_format!r})")


def _refuse(function: str, kwargs: dict, *names: str) -> None:
    """TypeError naming the public function for an argument it sets itself (create() would
    say only that it got the argument twice)."""
    for name in names:
        if name in kwargs:
            raise TypeError(f"{function}() sets {name} itself; got {name}={kwargs[name]!r} "
                            f"(use {'full' if name == 'fill_value' else 'create'}() to "
                            f"choose it)")


def zeros(shape: ShapeLike, **kwargs: Any) -> Array:
    """An array whose unwritten elements read as 0."""
    _refuse("zeros", kwargs, "fill_value")
    return create(shape=shape, fill_value=0, **kwargs)


def ones(shape: ShapeLike, **kwargs: Any) -> Array:
    """An array whose unwritten elements read as 1."""
    _refuse("ones", kwargs, "fill_value")
    return create(shape=shape, fill_value=1, **kwargs)


def full(shape: ShapeLike, fill_value: Any, **kwargs: Any) -> Array:
    """An array whose unwritten elements read as fill_value."""
    return create(shape=shape, fill_value=fill_value, **kwargs)


def empty(shape: ShapeLike, **kwargs: Any) -> Array:
    """An array with no fill value (null); unwritten elements read as zero bytes."""
    _refuse("empty", kwargs, "fill_value")
    return create(shape=shape, fill_value=None, **kwargs)


def _as_data(data: Any, dtype: Any, path: Any) -> Any:
    """array()'s data as an ndarray: a list, tuple or Python number of a numeric or time
    dtype converted with that dtype, as np.array(data, dtype) does (first converted as it
    is, [2**64 - 1, 5] became float64 and then 0 in u8, [300] int64 and then 44 in i1,
    without an error). Others as they are (str and bytes dtypes store None as '' the way
    the write converts them)."""
    if dtype is None or not isinstance(data, (list, tuple, int, float, complex, np.generic)):
        return np.asanyarray(data)
    try:
        dt = np.dtype(dtype)
    except TypeError:  # (a name chunkstore resolves itself: the data converts on write)
        return np.asanyarray(data)
    if dt.kind not in "biufcmM":
        return np.asanyarray(data)
    try:
        return by_dtype(data, dt)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"cannot store the data in array {path or '/'!r} of dtype {dt}: "
                         f"{e}") from e

def array(data: Any, read_only: bool = False, **kwargs: Any) -> Array:
    """An array holding a copy of data (any array-like, or another Array). Chunks default to
    those of data when it has them (an Array, an h5py dataset). read_only=True returns the
    array read-only once the data is written. If the data cannot be written, the new array
    is removed again."""
    if "shape" in kwargs:
        shape = tuple(data.shape if isinstance(data, Array) else np.shape(data))
        given = kwargs.pop("shape")
        if isinstance(given, (int, np.integer)):
            given = (given,)
        if given is None or tuple(given) != shape:
            raise TypeError(f"array() takes its shape from data ({shape}); got "
                            f"shape={given!r}")  # (the data's own shape is accepted)
    kwargs["store"], kwargs["path"] = split_store_path(kwargs.get("store"), kwargs.get("path"))
    kwargs.setdefault("chunks", creation_args.chunks_of(data) or True)
    # An Array is copied block by block (z[...] = data streams, in bounded memory), never
    # read whole first.
    if not isinstance(data, Array):
        data = _as_data(data, kwargs.get("dtype"), kwargs.get("path"))
    if kwargs.get("dtype") is None:  # not given, or dtype=None: the data's own (as NumPy)
        kwargs["dtype"] = data.dtype
    kwargs["store"] = normalize_store(kwargs.get("store"), mode="a",
                                      storage_options=kwargs.pop("storage_options", None))
    path = normalize_path(kwargs.get("path"))
    if kwargs.get("overwrite"):
        check_replacing(data, kwargs["store"], path, dict(kwargs, shape=data.shape))
    with removed_on_failure(kwargs["store"], path, kwargs.get("synchronizer")) as made:
        z = create(shape=data.shape, **kwargs)
        made.append(z)
        z[...] = data
    z.read_only = read_only
    return z


def check_replacing(data: Any, store: Any, path: str, create_kwargs: dict) -> None:
    """Before a creation with overwrite=True replaces the node at path with data: refuse data
    that is the Array at path, or below it (replaced first, it read as its fill value: a save
    of an array onto itself stored zeros, as zarr-python 2's does), and object data the new
    array's codec cannot encode (check_object_data)."""
    if isinstance(data, Array) and nodes.holds(store, path, data.store, data.path):
        raise ValueError(f"cannot overwrite the node at path {path!r} of {store_name(store)} "
                         f"with array {data.name!r}, which it "
                         f"{'is' if data.path == path else 'holds'}: replaced first, it "
                         f"would read as its fill value; read it into memory first "
                         f"(data[...]) or write to another path")
    check_object_data(data, store, path, create_kwargs)


def check_object_data(data: Any, store: Any, path: str, create_kwargs: dict) -> None:
    """Before a creation with overwrite=True replaces the node at path, write object data
    into a scratch copy of the new array (in memory), so that data its codec cannot encode
    (an int among the strings of a vlen-utf8 array) is refused with the store as it was:
    the replaced node would be gone already when the write failed (the data is encoded
    twice then: object data only, and only where a node is replaced). Other data, an Array
    (copied block by block) and a path with nothing there need no such check."""
    if not (isinstance(data, np.ndarray) and data.dtype.hasobject) or \
            nodes.node_kind(store, path)[0] is None:
        return
    scratch_kwargs = dict(create_kwargs, store={}, overwrite=False, synchronizer=None)
    scratch_kwargs.pop("storage_options", None)
    try:
        create(**scratch_kwargs)[...] = data
    except (TypeError, ValueError, OverflowError) as e:
        raise with_context(e, f"cannot store the data in the array at path {path!r} of "
                              f"{store_name(store)}: {e} (nothing was changed: the node "
                              f"there is kept)") from e


@contextlib.contextmanager
def removed_on_failure(store, path, synchronizer=None):
    """Around the creation of a node at path and the writing of its data; yields a list to
    which the caller adds the node once made. On an exception after that, the node and the
    groups made above it (deepest first) are removed before the exception goes on: a failed
    creation leaves no half-written node that reads as valid. (Before it, nothing: a
    creation refused, say because a node is there, has changed nothing.)

    The node's creation lock (synchronizer's, or this process's) is held throughout: two
    such calls on one path (from_array with overwrite=True) end as one or the other. Taken
    for the creation alone, the second replaced the first's array between its creation and
    its data write, and the first wrote into the second's: a mix of both, both returning."""
    with creation_lock(synchronizer, nodes.creation_lock_key(path, "array"), store):
        new_groups = [p for p in nodes.ancestors(path)
                      if nodes.node_kind(store, p)[0] is None]
        made: list = []
        try:
            yield made
        except BaseException as e:
            if not made:
                raise
            try:
                remove_node(store, path)
            except Exception as e2:  # (said: the node may read as part data, part fill value)
                e.add_note(f"the array at path {path!r} of {store_name(store)} made for this "
                           f"data could not be removed again ({e2!r}): it may hold part of "
                           f"the data, the rest reading as its fill value; delete it")
            _remove_untouched_groups(store, new_groups, synchronizer)
            raise


def _remove_untouched_groups(store: Any, groups: list[str], synchronizer: Any,
                             guarded: bool = False) -> None:
    """A failed creation's clean-up: the documents of the groups it made above it (groups,
    the root's side first), deepest first, each under its creation lock (none where the
    caller holds the guards above: see _write_parent_groups) and only where nobody took it
    up meanwhile (_untouched_new_group); each on its own, errors ignored."""
    for g in reversed(groups):
        with contextlib.suppress(Exception), (
                contextlib.nullcontext() if guarded else
                creation_lock(synchronizer, nodes.creation_lock_key(g, "group"), store)):
            if _untouched_new_group(store, g):
                delitems(store, [nodes.prefix(g) + n for n in sorted(node_document_names())])


def _untouched_new_group(store: Any, path: str) -> bool:
    """Whether the group at path holds no key but its own documents, and they are a new
    group's (of either format): a group made above a failed creation, which nobody has
    taken up since in a way that shows in the store: a member made there or attributes set
    meanwhile keep it (removed, the member was an orphan, the attributes lost). (A handle
    that another require_group returned on it meanwhile does not show: such a group goes,
    and a creation through that handle makes it again as a missing parent.) Keys, not
    entries: a directory store keeps the empty directory of a failed write."""
    prefix = nodes.prefix(path)
    names = [k[len(prefix):] for k in keys_under(store, path)]
    documents = node_document_names()
    if any(n not in documents for n in names):
        return False
    fresh = [format_of(f).group_documents(None) for f in FORMATS]
    return all(any(store[prefix + n] == docs.get(n) for docs in fresh) for n in names)


def _like_kwargs(a, kwargs):
    if isinstance(a, Array):
        # The one recode planner (as copy uses): the source's format, shards, chunk key
        # encoding and, unless the call changes the encoding, its codec chain. Unlike a copy
        # (and as zarr-python 3), no dimension names, and a new encoding gets no checksum.
        from chunkstore.hierarchy.recode import create_kwargs_like
        given = set(kwargs)
        kwargs.setdefault("dimension_names", None)
        kw = create_kwargs_like(a, kwargs.pop("zarr_format", None), keep_checksum=False,
                                like=True, **kwargs)
        if "fill_value" not in given:  # the source's, as it is (create() checks it)
            kw["fill_value"] = a.fill_value
        return kw
    if "chunks" not in kwargs and creation_args.chunks_of(a):
        kwargs["chunks"] = creation_args.chunks_of(a)  # h5py datasets, bcolz
    for name in ("shape", "dtype"):
        if kwargs.get(name) is None and hasattr(a, name):  # (None: as not given)
            kwargs[name] = getattr(a, name)
    if kwargs.get("order") is None:
        flags = getattr(a, "flags", None)
        if hasattr(flags, "f_contiguous"):  # NumPy's layout
            kwargs["order"] = "F" if flags.f_contiguous and not flags.c_contiguous else "C"
        elif getattr(a, "order", None) in ("C", "F"):  # zarr-python's arrays say it
            kwargs["order"] = a.order
    return kwargs


def zeros_like(a, **kwargs):
    """Create an array filled with zeros with the shape, dtype and chunks of *a*, like
    ``zarr.zeros_like``.

    Parameters
    ----------
    a : Array or array-like
        The array to copy the properties from. A chunkstore array also gives its Zarr format,
        sharding, chunk key encoding and codecs; a NumPy (or similar) array gives its
        shape, dtype, order and chunks where it has them.
    **kwargs
        Arguments of :func:`zeros` that override those taken from *a*.

    Returns
    -------
    Array
    """
    return _create_like(a, kwargs, zeros)


def _create_like(a: Any, kwargs: dict[str, Any], creator: Callable[..., Any]) -> Any:
    """creator(**the arguments of a, updated by kwargs) without a fill value (zeros, ones and
    empty have their own; zarr-python drops a fill_value given to them too)."""
    kwargs = _like_kwargs(a, kwargs)
    kwargs.pop("fill_value", None)
    with _like_plan():
        return creator(**kwargs)


@contextlib.contextmanager
def _like_plan() -> Iterator[None]:
    """The *_like plans keep an object array's codec as its first filter (zarr-python 2's
    *_like, for its fill semantics): chunkstore's choice, not the caller's, so creating from
    them gives no deprecation warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning,
                                message="the object codec of an object array")
        yield


def ones_like(a, **kwargs):
    """Create an array filled with ones with the shape, dtype and chunks of *a*, like
    ``zarr.ones_like``.

    The arguments as :func:`zeros_like`'s (``**kwargs`` go to :func:`ones`).
    """
    return _create_like(a, kwargs, ones)


def full_like(a, **kwargs):
    """Create an array filled with ``fill_value`` with the shape, dtype and chunks of *a*, like
    ``zarr.full_like``.

    The arguments as :func:`zeros_like`'s (``**kwargs`` go to :func:`full`).

    Raises
    ------
    TypeError
        If no ``fill_value`` is given and *a* has none.
    """
    kwargs = _like_kwargs(a, kwargs)
    if "fill_value" not in kwargs and getattr(a, "fill_value", None) is not None:
        kwargs["fill_value"] = a.fill_value  # (a zarr-python array's, as zarr.full_like)
    if "fill_value" not in kwargs:
        raise TypeError("full_like needs fill_value when a has none")
    return full(**kwargs)


def empty_like(a, **kwargs):
    """Create an array with uninitialized data with the shape, dtype and chunks of *a*, like
    ``zarr.empty_like``.

    The arguments as :func:`zeros_like`'s (``**kwargs`` go to :func:`empty`).
    """
    return _create_like(a, kwargs, empty)


def open_like(a, path, **kwargs):
    """Open (creating as open_array does) an array at path shaped like a: its shape, chunks,
    dtype, and for an Array its compressor, filters, order and fill value.

    path is the store (a path or URL, as zarr-python 2 takes it); with ``store=`` given, it
    is the path inside that store, as zarr-python 3 takes it."""
    kwargs = _like_kwargs(a, kwargs)
    with _like_plan():
        if "store" in kwargs:
            return open_array(kwargs.pop("store"), path=path, **kwargs)
        return open_array(path, **kwargs)


def open_array(store: StoreLike = None, mode: str = "a", shape: ShapeLike | None = None,
               chunks: Any = True, dtype: DTypeLike = None, compressor: Any = "default",
               fill_value: Any = 0, order: str | None = None, synchronizer: Any = None,
               filters: Sequence[Any] | None = None, cache_metadata: bool = True,
               path: str | None = None, object_codec: Any = None,
               dimension_separator: str | None = None, write_empty_chunks: bool | None = None,
               storage_options: dict | None = None, missing_chunks: str = "fill",
               zarr_format: int | None = None, shards: ShapeLike | None = None,
               dimension_names: Sequence[str | None] | None = None,
               codecs: Sequence[Any] | None = None,
               attributes: Mapping[str, Any] | None = None, **kwargs: Any) -> Array:
    """Open an array, creating it for modes "a", "w", "w-"/"x" as zarr-python 2 does
    (with create()'s Zarr v3 arguments: shards, dimension_names, codecs, attributes).
    attributes are those of an array created here, as zarr-python 3's open_array takes
    them: an existing array opened (mode "a") keeps its own.

    missing_chunks="error" makes reading an absent chunk raise ChunkNotFoundError instead of
    returning the fill value. An explicit zarr_format binds: an array of the other format is
    an ArrayNotFoundError (modes "r", "r+") or ArrayFormatMismatchError (mode "a"), never
    opened, converted or shadowed; mode "w" replaces it.
    """
    _check_mode(mode)
    store, path = split_store_path(store, path)
    zarr_format = format_alias(zarr_format, kwargs.pop("zarr_version", None))
    _check_format(zarr_format)
    # (zarr-python 3's chunk_shape, chunk_key_encoding and config, as create takes them)
    compressor, fill_value, chunks, order, write_empty_chunks, dimension_separator = \
        creation_args.peer_args(kwargs, compressor, fill_value, chunks, order,
                                write_empty_chunks, dimension_separator)
    _check_unknown(kwargs)
    # a read-only Mapping is only opened read-only: writes are refused at run time
    store = cast(MutableMapping[str, bytes],
                 normalize_store(store, mode=mode, storage_options=storage_options,
                                 for_node=True))
    path = normalize_path(path)
    create_kwargs = dict(chunks=chunks, dtype=dtype, compressor=compressor,
                         fill_value=fill_value, order=order, path=path, filters=filters,
                         object_codec=object_codec, dimension_separator=dimension_separator,
                         zarr_format=zarr_format, shards=shards,
                         dimension_names=dimension_names, codecs=codecs,
                         attributes=attributes)
    if mode in ("r", "r+"):
        # Reading the metadata is the existence check: one request on a remote store.
        try:
            a = Array(store, path=path, read_only=(mode == "r"), synchronizer=synchronizer,
                      write_empty_chunks=write_empty_chunks, missing_chunks=missing_chunks,
                      cache_metadata=cache_metadata, zarr_format=zarr_format, order=order)
        except ArrayNotFoundError:
            # (an explicit zarr_format binds: a group of the other format is named as such;
            # a probe that only words the error, which warns of nothing)
            if nodes.node_kind(store, path, zarr_format, want="array", warn=False)[0] == "group":
                raise ArrayNotFoundError(f"path {path!r} in {store_name(store)} holds a group, not "
                                         f"an array") from None
            raise ArrayNotFoundError(f"no array at path {path!r} in {store_name(store)}") from None
        # an explicit zarr_format binds: an array of the other format is not opened
        nodes.check_format(store, path, "array", a.zarr_format, zarr_format, want="array")
        return a
    with creation_lock(synchronizer, nodes.creation_lock_key(path, "array"), store):
        # an explicit zarr_format binds: mode "a" neither opens, converts nor creates beside
        # a node of the other format; "w-"/"x" refuse it as any existing node; "w" replaces
        # (mode "w" replaces whatever is there: no look first)
        kind, found = (None, None) if mode == "w" else nodes.node_kind(
            store, path, zarr_format if mode == "a" else None, want="array", creating=True)
        exists = kind == "array"
        if not exists:  # (created here: in the hierarchy's format unless told, as create)
            create_kwargs["zarr_format"] = _new_format(store, path, zarr_format, shards,
                                                       dimension_names, codecs)
        if mode == "a":
            if not exists:
                if contains_group(store, path):
                    raise ContainsGroupError(f"a group already exists at path {path!r} in "
                                             f"{store_name(store)}")
                init_array(store, shape, synchronizer=synchronizer, **create_kwargs)
        elif mode == "w":
            init_array(store, shape, overwrite=True, synchronizer=synchronizer, **create_kwargs)
        else:  # w-, x
            if exists:
                raise ContainsArrayError(f"an array already exists at path {path!r} in "
                                         f"{store_name(store)}")
            init_array(store, shape, synchronizer=synchronizer, **create_kwargs)
    # opened in the format found (mode "a": not probed or warned about again where both
    # formats' documents lie at path) or created
    return Array(store, path=path, read_only=(mode == "r"), synchronizer=synchronizer,
                 write_empty_chunks=write_empty_chunks, missing_chunks=missing_chunks,
                 cache_metadata=cache_metadata, order=order,
                 zarr_format=found if exists and mode == "a" else create_kwargs["zarr_format"])


@contextlib.contextmanager
def owned_store(store_like: StoreLike, mode: str = "a",
                storage_options: dict | None = None) -> Iterator[Mapping[str, bytes]]:
    """The store for store_like; closed on exit if it was opened here from a path or URL
    (a ZipStore, for one, is only complete once closed). Stores passed in stay open."""
    store = normalize_store(store_like, mode=mode, storage_options=storage_options)
    try:
        yield store
    finally:
        close = protocol.closer(store)
        if store is not store_like and close is not None:
            close()


def save_array(store: StoreLike, arr: Any, path: str | None = None,
               storage_options: dict | None = None, **kwargs: Any) -> None:
    """Save one NumPy array to store (overwriting what is at path)."""
    store, path = split_store_path(store, path)
    with owned_store(store, mode="w", storage_options=storage_options) as s:
        array(arr, store=s, path=path, overwrite=True, **kwargs)


__all__ = ["create", "zeros", "ones", "full", "empty", "array", "zeros_like", "ones_like",
           "full_like", "empty_like", "open_like", "open_array", "save_array",
           "init_array", "normalize_path", "ReadOnlyError"]
