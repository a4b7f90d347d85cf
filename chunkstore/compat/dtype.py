"""zarr-python 3's data type names: ``parse_dtype`` and the classes it returns (``Int32()``,
``Float64(endianness="big")``, ``VariableLengthUTF8()``...).

Each is a thin description of a NumPy dtype: ``to_native_dtype()`` gives it, ``to_json()`` the
metadata spelling of either format, and ``np.dtype(Int32())`` works (the ``.dtype`` protocol),
so every function that takes a dtype takes these too."""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.metadata.formats import format_of

_NUMERIC = {"Bool": "bool", "Int8": "int8", "Int16": "int16", "Int32": "int32",
            "Int64": "int64", "UInt8": "uint8", "UInt16": "uint16", "UInt32": "uint32",
            "UInt64": "uint64", "Float16": "float16", "Float32": "float32",
            "Float64": "float64", "Complex64": "complex64", "Complex128": "complex128"}

# the v2 object codec a variable-length data type is stored with
_OBJECT_CODECS = {"VariableLengthUTF8": "vlen-utf8", "VariableLengthBytes": "vlen-bytes"}


class ZDType:
    """Base: a Zarr data type described by a NumPy dtype (zarr-python 3's ``ZDType``: also
    subscriptable in annotations, ``ZDType[np.dtype, np.generic]``)."""

    def __class_getitem__(cls, item: Any) -> type:
        return cls  # (zarr-python 3's classes are generic over the dtype and scalar types)

    @property
    def dtype_cls(self) -> type:
        """The NumPy dtype class of this data type (``np.dtypes.Int32DType``...)."""
        return type(self.to_native_dtype())

    def default_scalar(self) -> Any:
        """zarr-python 3's default value of the type: zero, ``""``, ``b""``, NaT."""
        d = self.to_native_dtype()
        if d.hasobject:
            return b"" if isinstance(self, VariableLengthBytes) else ""
        if d.kind in "Mm":
            return np.array("NaT", dtype=d)[()]
        return np.zeros((), dtype=d)[()]

    def cast_scalar(self, value: Any) -> Any:
        """value as a scalar of this type (a NumPy scalar; ``str``/``bytes`` for the
        variable-length types). ValueError/TypeError where it does not convert."""
        d = self.to_native_dtype()
        if d.hasobject:
            if isinstance(self, VariableLengthBytes):
                return value if isinstance(value, bytes) else str(value).encode()
            return value if isinstance(value, str) else str(value)
        return np.array(value, dtype=d)[()]

    def to_json_scalar(self, data: Any, *, zarr_format: int) -> Any:
        """The JSON spelling of the value data as a ``fill_value`` in that Zarr format (a
        complex value as a (real, imaginary) pair, as zarr-python 3 gives it)."""
        d = self.to_native_dtype()
        out = format_of(zarr_format).fill_to_json(data, d)
        return tuple(out) if d.kind == "c" and isinstance(out, list) else out

    def from_json_scalar(self, data: Any, *, zarr_format: int) -> Any:
        """The value a JSON ``fill_value`` spelling stands for in that Zarr format."""
        return format_of(zarr_format).fill_from_json(data, self.to_native_dtype())

    def to_native_dtype(self) -> np.dtype:  # pragma: no cover - abstract
        """The NumPy dtype this data type describes (zarr-python 3's ``ZDType.to_native_dtype``)."""
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype (``to_native_dtype()``); what lets ``np.dtype(obj)`` accept this
        object.
        """
        return self.to_native_dtype()

    def to_json(self, zarr_format: int) -> Any:
        """The ``data_type`` (v3) or ``{"name": dtype, "object_codec_id": ...}`` (v2)."""
        codec = _OBJECT_CODECS.get(type(self).__name__)
        return format_of(zarr_format).dtype_to_json(self.to_native_dtype(), codec)

    @classmethod
    def from_native_dtype(cls, dtype: Any) -> "ZDType":
        """The data type object for the NumPy dtype or dtype-like *dtype* (see
        :func:`parse_dtype`).
        """
        return parse_dtype(dtype)

    @classmethod
    def from_json(cls, data: Any, zarr_format: int) -> "ZDType":
        """The data type of a metadata spelling (what ``to_json`` gives)."""
        spec, codec = format_of(zarr_format).dtype_from_json(data)
        if codec == "vlen-bytes":
            return VariableLengthBytes()
        return parse_dtype(spec)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(vars(self).items()))))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


def _endianness(value):
    if value not in ("little", "big"):
        raise ValueError(f"endianness must be 'little' or 'big', got {value!r}")
    return value


def _numeric_class(cls_name: str, np_name: str) -> type:
    single_byte = np.dtype(np_name).itemsize == 1

    def __init__(self, endianness: str = "little"):
        if not single_byte:
            self.endianness = _endianness(endianness)

    def to_native_dtype(self):
        d = np.dtype(np_name)
        if single_byte:
            return d
        return d.newbyteorder("<" if self.endianness == "little" else ">")

    return type(cls_name, (ZDType,), {"__init__": __init__, "to_native_dtype": to_native_dtype,
                                      "__doc__": f"Zarr's {np_name!r}."})


for _name, _np in _NUMERIC.items():
    globals()[_name] = _numeric_class(_name, _np)


class VariableLengthUTF8(ZDType):
    """Zarr v3's "string" (numcodecs' vlen-utf8 object arrays in Zarr v2)."""

    def to_native_dtype(self):
        """``np.dtype(object)``: the strings are held in object arrays."""
        return np.dtype(object)


class VariableLengthBytes(ZDType):
    """Variable-length bytes (numcodecs' vlen-bytes object arrays), like zarr-python 3's
    ``VariableLengthBytes``.
    """
    def to_native_dtype(self):
        """``np.dtype(object)``: the values are held in object arrays."""
        return np.dtype(object)


class _Sized(ZDType):
    kind = ""

    def __init__(self, length: int):
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
            raise ValueError(f"{type(self).__name__} length must be a positive integer, "
                             f"got {length!r}")
        self.length = int(length)

    def to_native_dtype(self):
        return np.dtype(f"{self.kind}{self.length}")


class FixedLengthUTF32(_Sized):
    """Fixed-length Unicode strings of *length* characters (NumPy ``"<U{length}"``).

    Raises ``ValueError`` unless *length* is a positive integer.
    """
    kind = "<U"


class NullTerminatedBytes(_Sized):
    """Fixed-length, null-padded byte strings of *length* bytes (NumPy ``"S{length}"``).

    Raises ``ValueError`` unless *length* is a positive integer.
    """
    kind = "S"


class RawBytes(_Sized):
    """Raw byte blobs of *length* bytes (NumPy ``"V{length}"``).

    Raises ``ValueError`` unless *length* is a positive integer.
    """
    kind = "V"


class Structured(ZDType):
    """A structured data type: *fields* is a sequence of ``(name, data type)``, each data type as
    :func:`parse_dtype` takes it.
    """
    def __init__(self, fields):
        self.fields = tuple((str(n), parse_dtype(t)) for n, t in fields)

    def to_native_dtype(self):
        """The NumPy structured dtype of the fields, in order."""
        return np.dtype([(n, t.to_native_dtype()) for n, t in self.fields])


class DateTime64(ZDType):
    """NumPy ``datetime64`` with a *unit* (``"generic"``: none), *scale_factor* and *endianness*.

    Raises ``ValueError`` unless *endianness* is ``"little"`` or ``"big"``.
    """
    def __init__(self, unit: str = "generic", scale_factor: int = 1,
                 endianness: str = "little"):
        self.unit, self.scale_factor = unit, int(scale_factor)
        self.endianness = _endianness(endianness)

    _letter = "M"

    def to_native_dtype(self):
        """The NumPy dtype, e.g. ``<M8[10s]`` for unit ``"s"`` and scale factor 10."""
        unit = "" if self.unit == "generic" else f"[{self.scale_factor if self.scale_factor != 1 else ''}{self.unit}]"
        return np.dtype(f"{'<' if self.endianness == 'little' else '>'}{self._letter}8{unit}")


class TimeDelta64(DateTime64):
    """NumPy ``timedelta64``; arguments as for :class:`DateTime64`."""
    _letter = "m"


def parse_dtype(dtype_spec: Any, zarr_format: int = 3) -> ZDType:
    """zarr-python 3's ``parse_dtype``: the data type object for a NumPy dtype, a dtype-like
    (``"int32"``, ``"<f8"``, ``str``), a Zarr v3 name (``"string"``) or a data type object
    (ours, or zarr-python 3's, by its ``to_native_dtype()``)."""
    format_of(zarr_format)  # ValueError unless 2 or 3
    if isinstance(dtype_spec, ZDType):
        return dtype_spec
    native = getattr(dtype_spec, "to_native_dtype", None)
    if callable(native):
        dtype_spec = native()
    if dtype_spec is str or dtype_spec == "string":
        return VariableLengthUTF8()
    if dtype_spec is bytes:
        return VariableLengthBytes()
    try:
        d = np.dtype(dtype_spec)
    except TypeError as e:
        raise TypeError(f"cannot parse {dtype_spec!r} as a data type: {e}") from None
    endian = "big" if d.byteorder == ">" else "little"
    if d.fields is not None:
        return Structured([(n, d.fields[n][0]) for n in d.names])
    if d.kind == "O":
        return VariableLengthUTF8()
    if d.kind in "Mm":
        unit, scale = np.datetime_data(d)
        cls = DateTime64 if d.kind == "M" else TimeDelta64
        return cls(unit=unit, scale_factor=scale, endianness=endian)
    if d.kind == "U":
        return FixedLengthUTF32(d.itemsize // 4)
    if d.kind == "S":
        return NullTerminatedBytes(d.itemsize)
    if d.kind == "V":
        return RawBytes(d.itemsize)
    for name, np_name in _NUMERIC.items():
        if d.newbyteorder("=") == np.dtype(np_name):
            cls = globals()[name]
            return cls() if d.itemsize == 1 else cls(endianness=endian)
    raise TypeError(f"no Zarr data type for {d}")  # pragma: no cover


parse_data_type = parse_dtype

__all__ = ["ZDType", "parse_dtype", "parse_data_type", "VariableLengthUTF8",
           "VariableLengthBytes", "FixedLengthUTF32", "NullTerminatedBytes", "RawBytes",
           "Structured", "DateTime64", "TimeDelta64", *_NUMERIC]
