"""Zarr format 3 metadata: ``zarr.json`` documents of arrays and groups.

Follows the Zarr v3 core specification, and writes documents the way zarr-python 3 does
(2-space indent, keys in zarr-python's order, ASCII only, no trailing newline), so that
zarr-python 3 and tensorstore read what chunkstore writes and vice versa.

Public API
----------
- :class:`ArrayMetadataV3` -- parsed, validated array ``zarr.json``; mirrors
  :class:`~chunkstore.metadata.v2.ArrayMetadataV2` (``shape``, ``chunks``, ``dtype``,
  ``fill_value``, ``order``, ``compressor``, ``filters``, ``dimension_separator``,
  ``chunk_key``, ``fill_bytes``...).
- :func:`parse_array_metadata_v3` / :func:`encode_array_metadata_v3`
- :func:`parse_group_metadata_v3` / :func:`encode_group_metadata_v3`
- :func:`parse_node_metadata_v3` (either kind, by ``node_type``)
- :func:`consolidate_v3` (consolidated metadata inside the group's ``zarr.json``)
- :func:`default_codecs_v3`, :func:`decode_data_type_v3` / :func:`encode_data_type_v3`,
  :func:`decode_fill_value_v3` / :func:`encode_fill_value_v3`

Data types: ``bool``, ``int8``..``int64``, ``uint8``..``uint64``, ``float16/32/64``,
``complex64/128`` (NumPy dtypes, always native byte order: the ``bytes`` codec decides the
stored byte order), and ``string`` (variable-length UTF-8: ``np.dtype(object)`` holding
``str``). Anything else raises :class:`~chunkstore.errors.MetadataError` naming the data type
and the key.

Every ``parse_*`` function raises ``MetadataError`` naming the key on any problem.
"""

from __future__ import annotations

import json
import dataclasses
from dataclasses import dataclass, field
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from chunkstore.metadata._common import (as_int_tuple, check_chunk_addressable, check_required,
                                         chunk_grid, json_default,
                                         load_json_object, value_bytes)
from chunkstore.metadata.types_v3 import (_coerce_fill, _to_dtype, decode_data_type_v3,
                                          decode_fill_value_v3, encode_data_type_v3,
                                          encode_fill_value_v3)
import numpy as np

from chunkstore.codecs import v3 as _codecs
from chunkstore.errors import MetadataError, NodeTypeValidationError
from chunkstore.storage import protocol
from chunkstore.storage.base import listdir
from chunkstore.errors import store_name

__all__ = [
    "ArrayMetadataV3",
    "ZARR_FORMAT_V3",
    "consolidate_v3",
    "decode_data_type_v3",
    "decode_fill_value_v3",
    "default_codecs_v3",
    "encode_array_metadata_v3",
    "encode_data_type_v3",
    "encode_fill_value_v3",
    "encode_group_metadata_v3",
    "parse_array_metadata_v3",
    "parse_group_metadata_v3",
    "parse_node_metadata_v3",
]

ZARR_FORMAT_V3 = 3
METADATA_KEY = "zarr.json"


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    if isinstance(obj, ArrayMetadataV3):
        return obj.to_dict()
    return json_default(obj)


def _json_dumps(obj: Any) -> bytes:
    """As zarr-python 3 writes zarr.json: indent 2, insertion order, ASCII, no newline."""
    return json.dumps(obj, indent=2, ensure_ascii=True, allow_nan=True,
                      default=_json_default).encode("ascii")


_load_json_object = load_json_object  # shared with the other format


# --------------------------------------------------------------------------------------------
# chunk key encoding, codecs
# --------------------------------------------------------------------------------------------


def normalize_chunk_key_encoding(obj: Any) -> dict:
    """A chunk key encoding as the metadata holds it, ``{"name": "default" | "v2",
    "configuration": {"separator": "." | "/"}}``, from that dict, a name or a bare separator
    (None: the default); ValueError naming what is wrong."""
    if obj is None:
        obj = {"name": "default"}
    if isinstance(obj, str):
        if obj in (".", "/"):
            obj = {"name": "default", "configuration": {"separator": obj}}
        else:
            obj = {"name": obj}
    if not isinstance(obj, Mapping):
        raise ValueError(f"chunk_key_encoding must be an object, got {obj!r}")
    name = obj.get("name")
    if name not in ("default", "v2"):
        # zarr-python 3's words, then chunkstore's
        raise ValueError(f'Unknown chunk key encoding: "Chunk key encoding {name!r} not found '
                         f'in registered chunk key encodings: [\'default\', \'v2\']." '
                         f'(unsupported chunk_key_encoding {name!r})')
    conf = obj.get("configuration") or {}
    if not isinstance(conf, Mapping):
        raise ValueError(f"chunk_key_encoding configuration must be an object, got {conf!r}")
    extra = sorted(set(conf) - {"separator"})
    if extra:
        raise ValueError(f"chunk_key_encoding {name!r}: unknown configuration field(s) "
                         f"{', '.join(map(repr, extra))}")
    sep = conf.get("separator", "/" if name == "default" else ".")
    if sep not in (".", "/"):
        raise ValueError(f"chunk_key_encoding separator must be '.' or '/', got {sep!r}")
    return {"name": name, "configuration": {"separator": sep}}


def default_codecs_v3(dtype: Any) -> list[dict]:
    """What zarr-python 3 uses by default: ``bytes`` (little-endian) + ``zstd`` level 0
    without checksum; ``vlen-utf8`` + ``zstd`` for ``string`` (the defaults of
    :func:`chunkstore.codecs.normalize.chunk_encoding_v3`)."""
    from chunkstore.codecs.normalize import chunk_encoding_v3
    return chunk_encoding_v3(_to_dtype(dtype).newbyteorder("<"))


_as_int_tuple = as_int_tuple


# --------------------------------------------------------------------------------------------
# array metadata
# --------------------------------------------------------------------------------------------


@dataclass(eq=False)
class ArrayMetadataV3:
    """Parsed and validated contents of an array's ``zarr.json`` (Zarr v3).

    The constructor validates and normalises: ``shape``/``chunks`` to int tuples (``chunks``
    is the regular chunk grid's ``chunk_shape``: the SHARD shape of a sharded array),
    ``dtype`` to a native NumPy dtype (v3 names accepted; ``"string"``/``str``/``object`` ->
    ``np.dtype(object)``), ``fill_value`` to a NumPy scalar (``str`` for string; None -> the
    type's zero), ``codecs`` (None -> :func:`default_codecs_v3`) to the canonical JSON dicts,
    ``chunk_key_encoding`` (None, ``"/"``, ``"."`` or a dict) to the full dict. Raises
    ValueError on invalid input (unknown codec, bad configuration...).

    Equality compares the encoded documents.
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any = None
    codecs: list | None = None
    chunk_key_encoding: Any = None
    dimension_names: tuple | None = None  # a tuple, as zarr-python 3's metadata has it
    attributes: dict = field(default_factory=dict)
    storage_transformers: list = field(default_factory=list)
    zarr_format: int = ZARR_FORMAT_V3
    node_type: str = "array"
    # the document's extension fields ({"must_understand": false, ...} under names this
    # reader does not know): written back as they were (a resize dropped them; zarr-python
    # 3 keeps them)
    extensions: dict = field(default_factory=dict, repr=False)
    # the chunk_shape as stored where it has a 0 (zarr-python 3 writes one for an empty
    # dimension given chunks 0): written back as it was; ``chunks`` has 1 there (an empty
    # dimension has no chunks either way, and the grid needs no division by 0)
    document_chunks: tuple[int, ...] | None = field(default=None, init=False, repr=False)
    # the stored document this was read from (format.read_array_metadata): a reload that
    # finds the same bytes changes nothing (see engine.chunk_io's adopt)
    source_document: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.zarr_format, bool) or self.zarr_format != ZARR_FORMAT_V3:
            raise ValueError(f"zarr_format must be 3, got {self.zarr_format!r}")
        if self.node_type != "array":
            raise NodeTypeValidationError(f"node_type must be 'array', got "
                                          f"{self.node_type!r}")
        self.shape = _as_int_tuple(self.shape, "shape", 0)
        self.chunks, self.document_chunks = chunk_grid(self.shape, self.chunks, "chunk_shape")
        self.dtype = _to_dtype(self.dtype)
        check_chunk_addressable(self.chunks, self.dtype, "chunk_shape")
        self.fill_value = _coerce_fill(self.fill_value, self.dtype)
        self.chunk_key_encoding = normalize_chunk_key_encoding(self.chunk_key_encoding)
        if self.codecs is None:
            self.codecs = default_codecs_v3(self.dtype)
        self.codecs, self._info = _codecs.normalize_codecs_with_info(
            self.codecs, self.dtype, self.chunks, self.fill_value)
        if self.dimension_names is not None:
            dn = self.dimension_names
            if isinstance(dn, (str, bytes)) or not isinstance(dn, Sequence):
                raise ValueError(f"dimension_names must be a list, got {dn!r}")
            names = list(dn)
            if len(names) != len(self.shape):
                raise ValueError(f"dimension_names has {len(names)} entries, the array has "
                                 f"{len(self.shape)} dimensions")
            if not all(d is None or isinstance(d, str) for d in names):
                raise ValueError(f"dimension_names entries must be strings or null, got "
                                 f"{names!r}")
            self.dimension_names = tuple(names)
        if self.attributes is None:
            self.attributes = {}
        if not isinstance(self.attributes, Mapping):
            raise ValueError(f"attributes must be an object, got {self.attributes!r}")
        self.attributes = dict(self.attributes)
        st = self.storage_transformers
        if st is None:
            st = []
        if not isinstance(st, (list, tuple)):
            raise ValueError(f"storage_transformers must be a list, got {st!r}")
        if len(st) > 0:
            names = [t.get("name") if isinstance(t, Mapping) else t for t in st]
            raise ValueError(f"unsupported storage_transformers {names!r} (must be empty)")
        self.storage_transformers = []

    # -- derived -------------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def data_type(self) -> str | dict:
        """The v3 ``data_type`` name."""
        return encode_data_type_v3(self.dtype)

    @property
    def chunk_grid_shape(self) -> tuple[int, ...]:
        """Number of chunks (shards, if sharded) along each dimension."""
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunks))

    @property
    def dimension_separator(self) -> str:
        """The chunk key separator (``"/"`` or ``"."``)."""
        return self.chunk_key_encoding["configuration"]["separator"]

    def chunk_key(self, coords: Sequence[int]) -> str:
        """Key of the chunk (shard) at grid ``coords``, relative to the array.

        ``default`` encoding: ``"c" + sep + sep.join(coords)`` (0-d: ``"c"``); ``v2``
        encoding: ``sep.join(coords)`` (0-d: ``"0"``).
        """
        if len(coords) != len(self.shape):
            raise ValueError(f"expected {len(self.shape)} chunk coordinates, got {len(coords)}")
        sep = self.dimension_separator
        if self.chunk_key_encoding["name"] == "v2":
            return sep.join(str(int(c)) for c in coords) if coords else "0"
        if not coords:
            return "c"
        return "c" + sep + sep.join(str(int(c)) for c in coords)

    @property
    def chain_info(self) -> dict:
        """The codec chain as its parse made it: ``array_to_array``, ``array_to_bytes``,
        ``bytes_to_bytes`` (the codec objects, immutable, bound to this array's data type
        and chunk shape), ``order``, ``compressor``, ``sharding``, ``permutation``. Shared:
        not to be changed."""
        return self._info

    @property
    def sharding(self) -> dict | None:
        """The ``sharding_indexed`` codec's configuration (None if not sharded)."""
        sh = self._info["sharding"]
        return None if sh is None else sh.to_dict()["configuration"]

    @property
    def inner_chunks(self) -> tuple[int, ...] | None:
        """The inner chunk shape (array axes) of a sharded array, else None."""
        sh = self._info["sharding"]
        if sh is None:
            return None
        inner = [0] * self.ndim
        for k, p in enumerate(self._info["permutation"]):
            inner[p] = sh.chunk_shape[k]
        return tuple(inner)

    @property
    def inner_codecs(self) -> list[dict] | None:
        """Codecs of one inner chunk of a sharded array, in array axes (transposes before the
        sharding codec, then its ``codecs``), else None."""
        sh = self._info["sharding"]
        if sh is None:
            return None
        return [c.to_dict() for c in self._info["array_to_array"]] + sh.inner.codecs

    def inner_metadata(self) -> "ArrayMetadataV3":
        """For a sharded array: a copy describing inner chunks as the chunks (``chunks`` =
        :attr:`inner_chunks`, ``codecs`` = :attr:`inner_codecs`), for building the inner
        ``ChunkCodecV3`` and the inner grid. Its ``chunk_key`` is NOT where inner chunks
        live: use ``ShardedStoreView.inner_key``. Unsharded: ``self``."""
        if self._info["sharding"] is None:
            return self
        inner_chunks = self.inner_chunks
        assert inner_chunks is not None  # sharded
        return ArrayMetadataV3(
            shape=self.shape, chunks=inner_chunks, dtype=self.dtype,
            fill_value=self.fill_value, codecs=self.inner_codecs,
            chunk_key_encoding=self.chunk_key_encoding,
            dimension_names=self.dimension_names, attributes=self.attributes)

    @property
    def order_recorded(self) -> bool:
        """Does the document tell the memory order? Not for fewer than 2 dimensions (one
        layout for both orders: no transpose says which the array was made with)."""
        return len(self.shape) >= 2

    @property
    def order(self) -> str:
        """Memory layout of a decoded chunk (an inner chunk, if sharded): ``"F"`` when the
        transposes reverse the axes, else ``"C"``."""
        if self._info["sharding"] is not None:
            if "inner_order" not in self._info:  # worked out once: reads ask for it often
                inner_codecs, inner_chunks = self.inner_codecs, self.inner_chunks
                assert inner_codecs is not None and inner_chunks is not None  # sharded
                self._info["inner_order"] = _codecs.codec_chain_info(
                    inner_codecs, self.dtype, inner_chunks, self.fill_value)["order"]
            return self._info["inner_order"]
        return self._info["order"]

    @property
    def compressor(self) -> Any:
        """For ``.info``: the first compressing bytes -> bytes codec (blosc, gzip, zstd) as a
        numcodecs codec; for a sharded array, of the inner chunks if the shard has none."""
        comp = self._info["compressor"]
        sh = self._info["sharding"]
        if comp is None and sh is not None:
            comp = sh.inner.compressor
        return comp

    @property
    def filters(self) -> None:
        """Always None (v3 has no numcodecs filters; the codecs are in :attr:`codecs`)."""
        return None

    def fill_bytes(self) -> bytes | None:
        """The fill value as ``dtype.itemsize`` raw bytes, native byte order (what decoded
        chunks hold); None for ``string``."""
        if self.dtype.hasobject:
            return None
        return value_bytes(self.fill_value, self.dtype)

    def to_dict(self) -> dict:
        """The JSON-ready document, keys in zarr-python 3's order."""
        assert self.codecs is not None  # __post_init__ normalised it to a list
        d: dict = {
            "shape": list(self.shape),
            "data_type": self.data_type,
            "chunk_grid": {"name": "regular",
                           "configuration": {"chunk_shape": list(
                               self.document_chunks or self.chunks)}},
            "chunk_key_encoding": {
                "name": self.chunk_key_encoding["name"],
                "configuration": dict(self.chunk_key_encoding["configuration"]),
            },
            "fill_value": encode_fill_value_v3(self.fill_value, self.dtype),
            "codecs": [dict(c) for c in self.codecs],
            "attributes": self.attributes,
        }
        if self.dimension_names is not None:
            d["dimension_names"] = list(self.dimension_names)
        d["zarr_format"] = ZARR_FORMAT_V3
        d["node_type"] = "array"
        d["storage_transformers"] = []
        for k, v in self.extensions.items():
            d.setdefault(k, v)
        return d

    def object_missing_value(self) -> Any:
        """What an object array's missing chunks read as: its fill value."""
        return self.fill_value

    def with_fill_value(self, value: Any) -> "ArrayMetadataV3":
        """This metadata with a new fill value given by a user (the ``fill_value`` setter);
        ValueError or TypeError if the value does not fit the data type."""
        return dataclasses.replace(self, fill_value=value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayMetadataV3):
            return NotImplemented
        return encode_array_metadata_v3(self) == encode_array_metadata_v3(other)

    __hash__ = None  # type: ignore[assignment]


_ARRAY_KEYS = ("zarr_format", "node_type", "shape", "data_type", "chunk_grid",
               "chunk_key_encoding", "fill_value", "codecs")
_ARRAY_OPTIONAL = ("attributes", "storage_transformers", "dimension_names")


def _check_extensions(doc: Mapping, known: Sequence[str]) -> None:
    """Unknown top-level fields are extensions: fine only with ``must_understand: false``."""
    for k, v in doc.items():
        if k in known:
            continue
        if isinstance(v, Mapping) and v.get("must_understand") is False:
            continue
        raise ValueError(f"unknown field {k!r} (an extension this reader does not support)")


def _parse_array_doc(doc: dict) -> ArrayMetadataV3:
    check_required(doc, _ARRAY_KEYS, ZARR_FORMAT_V3)
    if doc["node_type"] != "array":
        raise NodeTypeValidationError(f"node_type must be 'array', got {doc['node_type']!r}")
    _check_extensions(doc, _ARRAY_KEYS + _ARRAY_OPTIONAL)
    dtype = decode_data_type_v3(doc["data_type"])
    grid = doc["chunk_grid"]
    if not isinstance(grid, Mapping):
        raise ValueError(f"chunk_grid must be an object ({{\"name\": \"regular\", "
                         f"\"configuration\": {{\"chunk_shape\": [...]}}}}), got {grid!r}")
    if grid.get("name") != "regular":
        raise ValueError(f"unsupported chunk_grid {grid.get('name')!r} (only 'regular')")
    gconf = grid.get("configuration")
    if not isinstance(gconf, Mapping) or "chunk_shape" not in gconf:
        raise ValueError("chunk_grid configuration has no chunk_shape")
    shape, chunks = doc["shape"], gconf["chunk_shape"]
    if not isinstance(shape, list):
        raise ValueError(f"shape must be a list of integers, got {shape!r}")
    if not isinstance(chunks, list):
        raise ValueError(f"chunk_shape must be a list of integers, got {chunks!r}")
    try:
        fill = decode_fill_value_v3(doc["fill_value"], dtype)
    except ValueError as e:
        raise ValueError(f"invalid fill_value {doc['fill_value']!r} for data type "
                         f"{encode_data_type_v3(dtype)!r}: {e}") from None
    return ArrayMetadataV3(
        shape=tuple(shape),
        chunks=tuple(chunks),
        dtype=dtype,
        fill_value=fill,
        codecs=doc["codecs"],
        chunk_key_encoding=doc["chunk_key_encoding"],
        dimension_names=doc.get("dimension_names"),
        attributes=doc.get("attributes", {}),
        storage_transformers=doc.get("storage_transformers", []),
        extensions={k: v for k, v in doc.items() if k not in _ARRAY_KEYS + _ARRAY_OPTIONAL},
    )


def parse_array_metadata_v3(raw: Any, key: str = METADATA_KEY) -> ArrayMetadataV3:
    """Parse and validate an array ``zarr.json`` read from ``key`` (bytes, str or dict).

    Raises MetadataError naming ``key`` on any problem, e.g. ``invalid array metadata at
    'a/zarr.json': unknown codec 'foo'`` or ``...: unsupported data type 'float8'``.
    """
    try:
        return _parse_array_doc(_load_json_object(raw))
    except Exception as e:
        raise MetadataError(f"invalid array metadata at {key!r}: {e}") from e


def encode_array_metadata_v3(meta: ArrayMetadataV3) -> bytes:
    """Serialise ``meta`` as zarr-python 3 writes an array's ``zarr.json``."""
    return _json_dumps(meta.to_dict())


# --------------------------------------------------------------------------------------------
# groups, consolidated metadata
# --------------------------------------------------------------------------------------------

_GROUP_KEYS = ("zarr_format", "node_type", "attributes", "consolidated_metadata")


def _parse_group_doc(doc: dict, nested: bool = False) -> dict:
    if "zarr_format" not in doc:
        raise ValueError("missing required field: zarr_format")
    zf = doc["zarr_format"]
    if isinstance(zf, bool) or zf != ZARR_FORMAT_V3:
        raise ValueError(f"zarr_format must be 3, got {zf!r}")
    if doc.get("node_type") != "group":
        raise NodeTypeValidationError(f"node_type must be 'group', got "
                                      f"{doc.get('node_type')!r}")
    _check_extensions(doc, _GROUP_KEYS)
    attrs = doc.get("attributes", {})
    if attrs is None:
        attrs = {}
    if not isinstance(attrs, Mapping):
        raise ValueError(f"attributes must be an object, got {attrs!r}")
    out = {"zarr_format": ZARR_FORMAT_V3, "node_type": "group", "attributes": dict(attrs),
           "consolidated_metadata": None}
    cm = doc.get("consolidated_metadata")
    if cm is not None and not nested:
        if not isinstance(cm, Mapping):
            raise ValueError(f"consolidated_metadata must be an object, got {cm!r}")
        if cm.get("kind", "inline") != "inline":
            raise ValueError(f"unsupported consolidated_metadata kind {cm.get('kind')!r}")
        members = cm.get("metadata", {})
        if not isinstance(members, Mapping):
            raise ValueError("consolidated_metadata.metadata must be an object")
        parsed = {}
        for path, mdoc in members.items():
            try:
                parsed[path] = _parse_node_doc(_load_json_object(mdoc), nested=True)
            except Exception as e:
                raise ValueError(f"consolidated_metadata member {path!r}: {e}") from e
        out["consolidated_metadata"] = parsed
    return out


def _parse_node_doc(doc: dict, nested: bool = False) -> Any:
    nt = doc.get("node_type")
    if nt == "array":
        return _parse_array_doc(doc)
    if nt == "group":
        return _parse_group_doc(doc, nested=nested)
    raise NodeTypeValidationError(f"node_type must be 'array' or 'group', got {nt!r}")


def _invalid(e: Exception, what: str, key: str) -> MetadataError:
    """The MetadataError naming key for a parse that raised e (a wrong node_type keeps its
    class: zarr-python 3's NodeTypeValidationError)."""
    cls = NodeTypeValidationError if isinstance(e, NodeTypeValidationError) else MetadataError
    return cls(f"invalid {what} at {key!r}: {e}")


def parse_group_metadata_v3(raw: Any, key: str = METADATA_KEY) -> dict:
    """Parse a group ``zarr.json``. Returns ``{"zarr_format": 3, "node_type": "group",
    "attributes": {...}, "consolidated_metadata": None or {relative path: ArrayMetadataV3 or
    group dict}}``. MetadataError naming ``key`` on any problem (also for an array)."""
    try:
        return _parse_group_doc(_load_json_object(raw))
    except Exception as e:
        raise _invalid(e, "group metadata", key) from e


def parse_node_metadata_v3(raw: Any, key: str = METADATA_KEY) -> Any:
    """An array's :class:`ArrayMetadataV3` or a group's dict, by ``node_type``."""
    try:
        return _parse_node_doc(_load_json_object(raw))
    except Exception as e:
        raise _invalid(e, "metadata", key) from e


def _group_doc(attributes: Mapping | None, consolidated: Mapping | None,
               nested_consolidated: bool = False) -> dict:
    attrs = {} if attributes is None else attributes
    if not isinstance(attrs, Mapping):
        raise TypeError(f"attributes must be a mapping, got {type(attrs).__name__}")
    for k in attrs:
        if not isinstance(k, str):
            raise TypeError(f"attribute names must be str, got {k!r}")
    d: dict = {"attributes": dict(attrs), "zarr_format": ZARR_FORMAT_V3}
    if consolidated is not None:
        members = {}
        # zarr-python's order: by depth, then by name
        for path in sorted(consolidated, key=lambda p: (p.count("/"), p)):
            members[path] = _member_doc(consolidated[path])
        d["consolidated_metadata"] = {"kind": "inline", "must_understand": False,
                                      "metadata": members}
    elif nested_consolidated:
        d["consolidated_metadata"] = {"kind": "inline", "must_understand": False,
                                      "metadata": {}}
    d["node_type"] = "group"
    return d


def _member_doc(node: Any) -> dict:
    if isinstance(node, ArrayMetadataV3):
        return node.to_dict()
    if isinstance(node, Mapping):
        if node.get("node_type") == "group":
            # nested groups carry an empty consolidated_metadata, as zarr-python 3 writes
            return _group_doc(node.get("attributes"), None, nested_consolidated=True)
        if node.get("node_type") == "array":
            return _parse_array_doc(dict(node)).to_dict()
    raise TypeError(f"consolidated member must be ArrayMetadataV3 or a node dict, got {node!r}")


def encode_group_metadata_v3(attributes: Mapping | None = None,
                             consolidated_metadata: Mapping | None = None) -> bytes:
    """A group's ``zarr.json`` as zarr-python 3 writes it: ``{"attributes": ...,
    "zarr_format": 3, ["consolidated_metadata": ...,] "node_type": "group"}``.

    ``consolidated_metadata``: None, or ``{relative path: ArrayMetadataV3 | node dict}``
    (node dicts as :func:`parse_group_metadata_v3` returns, or raw ``zarr.json`` dicts).
    """
    return _json_dumps(_group_doc(attributes, consolidated_metadata))


def consolidate_v3(store: MutableMapping, path: str = "") -> dict:
    """Gather the metadata of every node below the group at ``path`` into its ``zarr.json``
    (``consolidated_metadata``, as zarr-python 3's ``consolidate_metadata`` writes it).

    Returns the parsed group metadata (as :func:`parse_group_metadata_v3`). Raises
    MetadataError if ``path`` is not a group or a member's ``zarr.json`` is invalid.
    """
    path = (path or "").strip("/")
    prefix = path + "/" if path else ""
    key = prefix + METADATA_KEY
    # (read as stored now, behind a cache: the group's attributes written back from the
    # cache's copy dropped updates made since, and members' shapes were the old ones)
    live = protocol.live_store(store)
    try:
        raw = live[key]
    except KeyError:
        raise MetadataError(f"no group metadata at {key!r} in {store_name(store)}") from None
    root = parse_group_metadata_v3(raw, key)
    members: dict[str, Any] = {}
    since = protocol.consolidation_start()

    def walk(rel: str) -> None:
        base = prefix + rel
        for name in listdir(live, base.rstrip("/")):
            child = rel + name
            ckey = prefix + child + "/" + METADATA_KEY
            try:
                craw = live[ckey]
            except KeyError:
                continue
            node = parse_node_metadata_v3(craw, ckey)
            members[child] = node
            if isinstance(node, dict):
                walk(child + "/")

    walk("")
    store[key] = encode_group_metadata_v3(root["attributes"], members)
    protocol.note_consolidated(store, key, since)
    root["consolidated_metadata"] = members
    return root

