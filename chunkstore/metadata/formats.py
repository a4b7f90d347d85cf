"""One entry per Zarr format: what the layers above the metadata modules need to know of it.

Nodes, attributes, data type objects and creation ask :func:`format_of` instead of branching
on ``zarr_format``: the metadata document names, where a node's attributes live and how they
are written, how a data type is spelled in metadata, and the documents of a new group.
Adding a format means adding an entry here (and its metadata module), not editing callers.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from chunkstore.errors import MetadataError, NodeTypeValidationError, ZarrUserWarning
from chunkstore.metadata import v2 as _v2
from chunkstore.metadata import types_v2 as _types_v2
from chunkstore.metadata import v3 as _v3
from chunkstore.metadata._common import load_json_object
from chunkstore.errors import store_name
from chunkstore.storage import protocol
from chunkstore.storage.base import getitems

__all__ = ["ZarrFormat", "FORMATS", "document_rank", "documents_first", "array_document_format", "format_of", "is_consolidated",
           "kind_of_document", "node_at", "node_document_names",
           "warn_both_formats"]


@dataclass(frozen=True)
class ZarrFormat:
    """What one Zarr format stores where. Key names are relative to the node's path."""

    zarr_format: int
    array_key: str  # the metadata document of an array
    group_key: str  # the metadata document of a group
    attrs_key: str  # the document holding the user attributes
    #: (raw document at attrs_key, key) -> the attributes dict
    read_attributes: Callable[[Any, str], dict]
    #: (attributes, read the current document, key) -> the new document at attrs_key
    encode_attributes: Callable[[Mapping, Callable[[], Any], str], bytes]
    #: (raw group document, key) -> the parsed group metadata; MetadataError if invalid
    parse_group: Callable[[Any, str], dict]
    #: attributes (or None) -> {key name: document} of a new group
    group_documents: Callable[[Mapping | None], dict]
    #: attributes (or None) -> {key name: document} of a new array's attributes beside its
    #: metadata document (v3 keeps them in it: none)
    array_attribute_documents: Callable[[Mapping | None], dict]
    #: (native dtype, object codec id or None) -> the data type's metadata spelling
    dtype_to_json: Callable[[np.dtype, Any], Any]
    #: metadata spelling -> (a dtype-like, object codec id or None)
    dtype_from_json: Callable[[Any], tuple]
    #: an array's metadata document (dict) -> create_array's arguments describing it
    array_arguments: Callable[[Mapping], dict]
    #: (store, group path, v2 metadata key) -> (key written, number of entries): gather the
    #: metadata below a group into one document, as this format's zarr-python does
    consolidate: Callable[[Any, str, str], tuple]
    #: (store, group path) -> whether the group holds consolidated metadata
    is_consolidated: Callable[[Mapping, str], bool]
    #: (store, group path) -> remove the group's consolidated metadata; whether it had any
    unconsolidate: Callable[[Any, str], bool]
    #: (store, group path, member path relative to it) -> rewrite the group's consolidated
    #: metadata without the entries of that member and what is below it; whether any were
    consolidated_without: Callable[[Any, str, str], bool]
    #: how a consolidation is reported: "{n}" is the count of its entries, named like this
    consolidated_phrase: str
    consolidated_entry: str
    # whether xarray takes an array's Zarr fill_value as its CF _FillValue (a missing-value
    # mask) by default: Zarr v2's convention; v3 keeps the two apart
    fill_value_masks: bool
    # whether an array's dimension names are in its metadata (v3 dimension_names) rather
    # than in xarray's _ARRAY_DIMENSIONS attribute (v2)
    dimension_names_in_metadata: bool
    #: native dtype -> the fill value create_array writes when given none (zarr-python 3's
    #: choice; None: the metadata's own default)
    default_fill: Callable[[np.dtype], Any]
    #: (value, native dtype) -> the JSON fill_value; (JSON, native dtype) -> the value
    fill_to_json: Callable[[Any, np.dtype], Any]
    fill_from_json: Callable[[Any, np.dtype], Any]

    def metadata_key(self, kind: str) -> str:
        """The metadata document name of a node of kind ``"array"`` or ``"group"``."""
        return self.array_key if kind == "array" else self.group_key


# -- Zarr v2: .zarray / .zgroup, attributes in their own .zattrs --------------------------------


def _v2_encode_attributes(attrs: Mapping, current: Callable[[], Any], key: str) -> bytes:
    return _v2.encode_attrs(attrs)  # the whole document: nothing else to keep


def _v2_array_attribute_documents(attributes: Mapping | None) -> dict:
    return {".zattrs": _v2.encode_attrs(attributes)} if attributes else {}


def _v2_group_documents(attributes: Mapping | None) -> dict:
    docs = {".zgroup": _v2.encode_group_metadata()}
    if attributes:
        docs[".zattrs"] = _v2.encode_attrs(attributes)
    return docs


def _v2_dtype_to_json(native: np.dtype, object_codec_id: Any) -> dict:
    if native.fields is not None and native.names is not None:
        name: Any = [[n, native.fields[n][0].str] for n in native.names]
    else:
        name = native.str if object_codec_id is None else "|O"
    return {"name": name, "object_codec_id": object_codec_id}


def _v2_dtype_from_json(data: Any) -> tuple:
    name = data.get("name") if isinstance(data, dict) else data
    codec = data.get("object_codec_id") if isinstance(data, dict) else None
    return (np.dtype([tuple(f) for f in name]) if isinstance(name, list) else name), codec


def _v2_array_arguments(doc: Mapping) -> dict:
    return dict(shape=doc["shape"], dtype=doc["dtype"], chunks=doc["chunks"],
                compressors=doc.get("compressor"), filters=doc.get("filters"),
                fill_value=doc.get("fill_value"), order=doc.get("order"), zarr_format=2)


def _v2_default_fill(dt: np.dtype) -> Any:
    """zarr-python 3's Zarr v2 fill value when none is given: "" for strings (object), 0 for
    bytes and unicode (read as their empty value), NaT for times (its int64, as zarr-python
    3 writes it: 0 would read as the epoch, a real date), the type's zero else; none for
    structured types."""
    if dt.hasobject:
        return ""
    if dt.kind in "Mm":
        return int(np.iinfo(np.int64).min)
    if dt.kind in "SUV":
        return 0
    return np.zeros((), dtype=dt)[()].item() if dt.fields is None else None


def _v2_consolidate(store: Any, path: str, metadata_key: str) -> tuple:
    from chunkstore.storage.consolidated import consolidate_metadata
    cstore = consolidate_metadata(store, path=path, metadata_key=metadata_key)
    return cstore.metadata_key, len(cstore.consolidated["metadata"])


def _v2_is_consolidated(store: Mapping, path: str) -> bool:
    return (path + "/" if path else "") + V2_CONSOLIDATED in store


def _v2_unconsolidate(store: Any, path: str) -> bool:
    key = (path + "/" if path else "") + V2_CONSOLIDATED
    try:
        del store[key]
    except KeyError:
        return False
    return True


def _drop_member(entries: dict, rel: str) -> bool:
    """Remove from a consolidated document's entries (keys or node paths relative to the
    group) those of the member at rel and below it; whether there were any."""
    gone = [k for k in entries if k == rel or k.startswith(rel + "/")]
    for k in gone:
        del entries[k]
    return bool(gone)


def _v2_consolidated_without(store: Any, path: str, rel: str) -> bool:
    key = (path + "/" if path else "") + V2_CONSOLIDATED
    raw = store.get(key)
    if raw is None:
        return False
    doc = _v3_doc(raw, key)
    entries = doc.get("metadata")
    if not isinstance(entries, dict) or not _drop_member(entries, rel):
        return False
    store[key] = _v2._json_dumps(doc)
    return True


# -- Zarr v3: one zarr.json per node, attributes inside it ------------------------------------


def _v3_consolidate(store: Any, path: str, metadata_key: str) -> tuple:
    doc = _v3.consolidate_v3(store, path)  # inside the group's own zarr.json
    return (path + "/" if path else "") + _v3.METADATA_KEY, len(doc["consolidated_metadata"])


def _v3_is_consolidated(store: Mapping, path: str) -> bool:
    try:
        doc = json.loads(store[(path + "/" if path else "") + _v3.METADATA_KEY])
    except Exception:  # noqa: BLE001 - absent or unreadable: not consolidated
        return False
    return (isinstance(doc, dict) and doc.get("node_type") == "group"
            and isinstance(doc.get("consolidated_metadata"), dict))


def _v3_consolidated_without(store: Any, path: str, rel: str) -> bool:
    key = (path + "/" if path else "") + _v3.METADATA_KEY
    raw = store.get(key)
    if raw is None:
        return False
    doc = _v3_doc(raw, key)
    inline = doc.get("consolidated_metadata") if doc.get("node_type") == "group" else None
    entries = inline.get("metadata") if isinstance(inline, dict) else None
    if not isinstance(entries, dict) or not _drop_member(entries, rel):
        return False
    store[key] = _v3._json_dumps(doc)  # (the rest of the document as it was)
    return True


def _v3_unconsolidate(store: Any, path: str) -> bool:
    key = (path + "/" if path else "") + _v3.METADATA_KEY
    raw = store.get(key)
    if raw is None:
        return False
    doc = _v3_doc(raw, key)
    if doc.get("node_type") != "group" or doc.pop("consolidated_metadata", None) is None:
        return False
    store[key] = _v3._json_dumps(doc)  # (the rest of the document as it was)
    return True


def _v3_doc(raw: Any, key: str) -> dict:
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise MetadataError(f"invalid metadata at {key!r}: {e}") from None
    if not isinstance(doc, dict):
        raise MetadataError(f"invalid metadata at {key!r}: not a JSON object")
    return doc


def _v3_read_attributes(raw: Any, key: str) -> dict:
    return dict(_v3_doc(raw, key).get("attributes") or {})


def _v3_encode_attributes(attrs: Mapping, current: Callable[[], Any], key: str) -> bytes:
    doc = _v3_doc(current(), key)  # the node's zarr.json: keep everything but the attributes
    doc["attributes"] = attrs
    return _v3._json_dumps(doc)


def _v3_array_attribute_documents(attributes: Mapping | None) -> dict:
    # none beside zarr.json, which holds them; encoded once here all the same, so that
    # attributes JSON cannot hold are refused as such (TypeError, ValueError)
    if attributes:
        _v3._json_dumps({"attributes": attributes})
    return {}


def _v3_group_documents(attributes: Mapping | None) -> dict:
    return {_v3.METADATA_KEY: _v3.encode_group_metadata_v3(attributes or {})}


def _v3_array_arguments(doc: Mapping) -> dict:
    dtype = _v3.decode_data_type_v3(doc["data_type"])
    return dict(shape=doc["shape"], dtype=dtype,
                chunks=doc["chunk_grid"]["configuration"]["chunk_shape"], codecs=doc["codecs"],
                fill_value=_v3.decode_fill_value_v3(doc.get("fill_value"), dtype),
                dimension_names=doc.get("dimension_names"),
                chunk_key_encoding=doc.get("chunk_key_encoding"))


FORMATS: dict[int, ZarrFormat] = {
    2: ZarrFormat(
        zarr_format=2, array_key=".zarray", group_key=".zgroup", attrs_key=".zattrs",
        read_attributes=_v2.parse_attrs, encode_attributes=_v2_encode_attributes,
        parse_group=_v2.parse_group_metadata, group_documents=_v2_group_documents,
        array_attribute_documents=_v2_array_attribute_documents,
        dtype_to_json=_v2_dtype_to_json, dtype_from_json=_v2_dtype_from_json,
        array_arguments=_v2_array_arguments, consolidate=_v2_consolidate,
        is_consolidated=_v2_is_consolidated, unconsolidate=_v2_unconsolidate,
        consolidated_without=_v2_consolidated_without,
        consolidated_phrase="{n}",
        consolidated_entry="metadata document",
        fill_value_masks=True, dimension_names_in_metadata=False,
        default_fill=_v2_default_fill, fill_to_json=_types_v2.encode_fill_value,
        fill_from_json=_types_v2.decode_fill_value),
    3: ZarrFormat(
        zarr_format=3, array_key=_v3.METADATA_KEY, group_key=_v3.METADATA_KEY,
        attrs_key=_v3.METADATA_KEY,
        read_attributes=_v3_read_attributes, encode_attributes=_v3_encode_attributes,
        parse_group=_v3.parse_group_metadata_v3, group_documents=_v3_group_documents,
        array_attribute_documents=_v3_array_attribute_documents,
        dtype_to_json=lambda native, codec: _v3.encode_data_type_v3(native),
        dtype_from_json=lambda data: (_v3.decode_data_type_v3(data), None),
        array_arguments=_v3_array_arguments, consolidate=_v3_consolidate,
        is_consolidated=_v3_is_consolidated, unconsolidate=_v3_unconsolidate,
        consolidated_without=_v3_consolidated_without,
        consolidated_phrase="the metadata of {n}",
        consolidated_entry="member",
        fill_value_masks=False, dimension_names_in_metadata=True,
        default_fill=lambda dt: None, fill_to_json=_v3.encode_fill_value_v3,
        fill_from_json=_v3.decode_fill_value_v3),
}


def format_of(zarr_format: int) -> ZarrFormat:
    """The table entry of Zarr format 2 or 3; ValueError for anything else."""
    try:
        return FORMATS[zarr_format]
    except (KeyError, TypeError):
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}") from None


def array_document_format(doc: Mapping) -> ZarrFormat:
    """The format of an array's metadata document given as a dict (a v3 one has a
    ``data_type``; a v2 ``.zarray`` a ``dtype``)."""
    return FORMATS[3] if "data_type" in doc else FORMATS[2]


def is_consolidated(store: Mapping, path: str) -> bool:
    """Whether the group at path keeps consolidated metadata, in either format."""
    return any(f.is_consolidated(store, path) for f in FORMATS.values())


def node_document_names() -> set:
    """Every document name a node of any format may have (metadata and attributes)."""
    return {n for f in FORMATS.values() for n in (f.array_key, f.group_key, f.attrs_key)}


# A chunk's (or shard's) key below its array, in any encoding: v2's "0.1" / "0/1" (0-d: "0"),
# v3's default "c/0/1" / "c.0.1" (0-d: "c")
_CHUNK_KEY = re.compile(r"(?:c(?:[./]\d+)*|\d+(?:[./]\d+)*)")


def stray_chunk_keys(keys: Sequence[str], path: str) -> list[str]:
    """The keys among keys (all at or below path) that an array made at path could read as
    its chunks: named as a chunk of some encoding, and below no node's documents (keys of a
    node below path are that node's)."""
    base = path + "/" if path else ""
    owners = _owners(keys, base)
    return [k for k in keys if k.startswith(base) and _CHUNK_KEY.fullmatch(k[len(base):])
            and not any(k.startswith(o) for o in owners)]


def nodes_in_chunk_space(keys: Sequence[str], path: str) -> list[str]:
    """The paths of the nodes below path (told by their documents among keys, all at or
    below path) that lie where an array made at path keeps chunks (``path/c``, ``path/0``,
    ``path/0/1``...): the array's chunk keys and that node's keys would be one namespace,
    its writes landing among the node's keys and its reads taking theirs (or a failed
    delete's chunks the node now seems to own) for its own."""
    base = path + "/" if path else ""
    return sorted(o[:-1] for o in _owners(keys, base)
                  if _CHUNK_KEY.fullmatch(o[len(base):-1]))


def _owners(keys: Sequence[str], base: str) -> set[str]:
    """The prefixes ("<node path>/") of the nodes strictly below base whose documents are
    among keys."""
    names = node_document_names()
    return {k.rsplit("/", 1)[0] + "/" for k in keys
            if "/" in k[len(base):] and k.rsplit("/", 1)[-1] in names}


#: the Zarr v2 consolidated-metadata document's name (v3 keeps it in the group's zarr.json)
V2_CONSOLIDATED = ".zmetadata"


def is_consolidated_document(key: str) -> bool:
    """Whether key is a Zarr v2 consolidated-metadata document: it shows the nodes it lists,
    so a copy writes it after every node document."""
    return key.rsplit("/", 1)[-1] == V2_CONSOLIDATED


def with_separator(key: str, raw: Any, sep: str) -> Any:
    """raw, the value at key, naming the key separator sep where a Zarr v2 array document
    in it (the document itself, or one in consolidated metadata) names none: written before
    zarr-python 2.8, it is read by its store's separator, so copied as it is into a store of
    another one, its chunks (keys of the source's separator) read as missing, fill values
    without an error. Other values, and ones that do not parse, as they are."""
    name = key.rsplit("/", 1)[-1]
    consolidated = is_consolidated_document(key)
    if name != FORMATS[2].array_key and not consolidated:
        return raw
    try:
        doc = json.loads(raw)
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        return raw
    members = doc.get("metadata") if consolidated and isinstance(doc, dict) else None
    found = [m for k, m in members.items() if isinstance(k, str) and isinstance(m, dict)
             and k.rsplit("/", 1)[-1] == FORMATS[2].array_key] \
        if isinstance(members, dict) else [doc] if not consolidated else []
    found = [d for d in found if isinstance(d, dict) and d.get("dimension_separator") is None]
    if not found:
        return raw
    for d in found:
        d["dimension_separator"] = sep
    # (consolidated metadata in its own key order: attributes keep the order written)
    return json.dumps(doc, indent=4, sort_keys=not consolidated).encode()


def document_rank(key: str) -> int:
    """0 for a node's metadata document (an array's, a group's), 1 for an attribute
    document, 2 for any other key (a chunk)."""
    name = key.rsplit("/", 1)[-1]
    if any(name in (f.array_key, f.group_key) for f in FORMATS.values()):
        return 0
    return 1 if any(name == f.attrs_key for f in FORMATS.values()) else 2


def same_chunk_layout(a: Any, b: Any) -> bool:
    """Whether two stored node documents (bytes) read the same chunks the same way: equal
    but for the shape (an append) and the attributes. Either missing (None): whether both
    are."""
    if a is None or b is None or a == b:
        return a == b
    try:
        da, db = (load_json_object(x) for x in (a, b))
    except ValueError:
        return False
    strip = ("shape", "attributes")
    return ({k: v for k, v in da.items() if k not in strip} ==
            {k: v for k, v in db.items() if k not in strip})


def documents_first(keys: Sequence[str], only_documents: bool = False) -> list[str]:
    """keys in the order that hides a node before its parts go (deletes; copies run it
    backwards): metadata documents, then attribute documents, then (unless only_documents)
    every other key (chunks); documents of shallower nodes first (a group's own before its
    members': sorted as given, "sub/b/zarr.json" came before "sub/zarr.json", and a delete
    that failed midway left the group openable with members missing), chunks in the order
    given."""
    def rank(k: str) -> tuple[int, int]:
        r = document_rank(k)
        return r, (k.count("/") if r < 2 else 0)
    ranked = sorted(keys, key=rank)
    return [k for k in ranked if not only_documents or document_rank(k) < 2]


def kind_of_document(store: Mapping, key: str, doc: Any = None) -> str | None:
    """"array" or "group" for the metadata document at key (a v2 document's name tells; a
    v3 zarr.json is read, or doc where the caller has read it: raw bytes or a consolidated
    view's JSON object), None if key is not a node's metadata document."""
    name = key.rsplit("/", 1)[-1]
    for f in FORMATS.values():
        if name in (f.array_key, f.group_key):
            if f.array_key != f.group_key:
                return "array" if name == f.array_key else "group"
            if doc is not None:
                return _parsed_node_type(doc, key, store)
            return _node_type(store, key)  # (one read: no probe of the other format)
    return None


def node_at(store: Mapping, path: str, zarr_format: int | None = None, *,
            warn: bool = True) -> tuple:
    """("array" | "group", 2 | 3) for the node at path, or (None, None) if there is none.

    Where both formats' documents lie at one path (a migration tool's output, two tools
    writing one path), the asked format's node is the one found, and with zarr_format None
    the v3 node, with zarr-python 3's ZarrUserWarning (:func:`warn_both_formats`): every
    handle and zarr-python agree on which metadata describes the data (warn=False: a probe
    that only words an error, no warning). zarr_format 2 probes v2 first (its two documents
    are told apart by name); otherwise a v3 ``zarr.json`` is read first for its
    ``node_type``, and with no format asked a store whose requests are round trips gets the
    three documents in one batch (one round trip whatever the node). MetadataError if that
    document is not valid."""
    p = path + "/" if path else ""
    v2, v3 = FORMATS[2], FORMATS[3]
    served = _consolidated_kind(store, p + v3.array_key)
    if served is not None and zarr_format != 2:
        # a consolidated v3 view describes its nodes: no probe of the store behind
        return served, 3
    if protocol.concurrent_io(store):
        # a store whose requests are round trips: every document that tells, in one batch
        # (the asked format's node first, as below)
        keys = (p + v3.array_key, p + v2.array_key, p + v2.group_key)
        got = getitems(store, keys)
        v2_kind = "array" if keys[1] in got else "group" if keys[2] in got else None
        if zarr_format == 2 and v2_kind is not None:
            return v2_kind, 2
        if keys[0] in got:
            found = _parsed_node_type(got[keys[0]], keys[0], store)
            if warn and zarr_format is None:
                warn_both_formats(store, path, found,
                                  present=keys[1 if found == "array" else 2] in got)
            return found, 3
        return (v2_kind, 2) if v2_kind is not None else (None, None)
    if zarr_format != 2:
        kind = _node_type(store, p + v3.array_key)
        if kind is not None:
            if zarr_format is None and warn:
                warn_both_formats(store, path, kind)
            return kind, 3
    if p + v2.array_key in store:
        return "array", 2
    if p + v2.group_key in store:
        return "group", 2
    if zarr_format != 2:
        return None, None  # (probed above)
    kind = _node_type(store, p + v3.array_key)
    return (None, None) if kind is None else (kind, 3)


def warn_both_formats(store: Mapping, path: str, kind: str, *,
                      present: bool | None = None) -> None:
    """zarr-python 3's ZarrUserWarning where the v2 document of a kind ("array" or "group")
    node lies at path beside the v3 ``zarr.json`` of that kind which is used (the caller found
    it, with no format asked): one probe of the store, as zarr-python 3 makes, unless the
    caller knows (present)."""
    v2 = FORMATS[2]
    name = v2.array_key if kind == "array" else v2.group_key
    if present is None:
        present = (path + "/" if path else "") + name in store
    if present:
        warnings.warn(f"Both zarr.json (Zarr format 3) and {name} (Zarr format 2) metadata "
                      f"objects exist at path {path!r} in {store_name(store)}. Zarr format 3 "
                      f"will be used (pass zarr_format=2 to open the Zarr format 2 {kind}).",
                      ZarrUserWarning, stacklevel=4)


def _consolidated_kind(store: Mapping, key: str) -> str | None:
    """The node_type of the v3 document at key where store is a consolidated-metadata view
    serving it (from the JSON object, no bytes round trip); None otherwise."""
    docs = protocol.consolidated_documents(store)
    doc = docs(key) if docs is not None else None
    if doc is None:
        return None
    kind = doc.get("node_type")
    if kind not in ("array", "group"):
        raise NodeTypeValidationError(f"invalid metadata at {key!r} in {store_name(store)}: "
                                      f"node_type must be 'array' or 'group', got {kind!r}")
    return kind


def _node_type(store: Mapping, key: str) -> str | None:
    """The node_type of the v3 document at key, None if there is none; MetadataError if the
    document is not valid."""
    served = _consolidated_kind(store, key)
    if served is not None:
        return served
    try:
        raw = store[key]
    except KeyError:
        return None
    return _parsed_node_type(raw, key, store)


def _parsed_node_type(raw: Any, key: str, store: Mapping) -> str:
    """The node_type of the v3 document read from key (raw bytes, or a consolidated view's
    JSON object); MetadataError if the document is not valid."""
    try:
        kind = (raw if isinstance(raw, Mapping) else json.loads(raw)).get("node_type")
    except (ValueError, AttributeError, UnicodeDecodeError, RecursionError) as e:
        raise MetadataError(f"invalid metadata at {key!r} in {store_name(store)}: {e}") from None
    if kind not in ("array", "group"):
        raise NodeTypeValidationError(f"invalid metadata at {key!r} in {store_name(store)}: "
                                      f"node_type must be 'array' or 'group', got {kind!r}")
    return kind


def format_alias(zarr_format: int | None, zarr_version: int | None) -> int | None:
    """zarr_format, or zarr_version (its old name, which zarr-python still takes) where only
    that is given; both given must agree."""
    if zarr_version is None:
        return zarr_format
    if zarr_format not in (None, zarr_version):
        raise ValueError(f"zarr_format={zarr_format} and zarr_version={zarr_version} disagree")
    return zarr_version
