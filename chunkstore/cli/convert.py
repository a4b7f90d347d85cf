"""`chunkstore convert`: import a .npy, .npz or HDF5 file into a store."""

from __future__ import annotations

import os

import numpy as np

from chunkstore.cli import common
from chunkstore.cli.common import (CLIError, Progress, _a, _join, _kind, _message, _norm, _note,
                                   _options, _plural, _progress_enabled, _refresh_consolidated,
                                   _stores, _where)
from chunkstore.storage.memory import MemoryStore


_H5_MAGIC = b"\x89HDF\r\n\x1a\n"


def _input_kind(path):
    if not os.path.exists(path):
        raise CLIError(f"no such file: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{path} is a directory; convert reads .npy, .npz and HDF5 files "
                       f"(use 'cp' to copy a store)")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK"):
        return "npz"
    if head == _H5_MAGIC:
        return "hdf5"
    ext = os.path.splitext(path)[1].lower()
    if ext in (".h5", ".hdf5", ".hdf", ".he5", ".nc", ".nc4"):
        return "hdf5"  # HDF5 allows a user block before the signature
    raise CLIError(f"cannot tell the format of {path}: expected a .npy, .npz or HDF5 file")


class _Scratch(MemoryStore):
    """The dry run's scratch store, named in errors as the output it stands for (its
    refusals are the real store's: a MemoryStore of the user's never seen is no help)."""

    def __init__(self, output: str) -> None:
        super().__init__()
        self._output = output

    def __repr__(self) -> str:
        return str(self._output)


class Converter:
    """Writes the arrays and groups of one input file into a store.

    dry=True: the same walk into a scratch MemoryStore with no data copied, which checks
    every option against every dataset before the real store is touched (see cli/safety.py)
    and sums the bytes to convert for the progress bar."""

    def __init__(self, store, args, progress, dry=False, zarr_format=2):
        self.dry = dry
        # the store written (checked for keys of no node where an array goes: the dry run's
        # scratch store has none), and the format of every node made (cmd_convert's: that
        # of the group above, unless --zarr-format says)
        self.target, self.fmt = store, zarr_format
        if dry:
            store = _Scratch(args.output)
        self.store, self.args, self.progress = store, args, progress
        self.arrays = self.groups = 0
        self.nbytes = 0

    def _kw(self, shape, chunks, what):
        kw = {"chunks": self.args.chunks if self.args.chunks is not None else chunks}
        if isinstance(kw["chunks"], tuple) and len(kw["chunks"]) != len(shape):
            raise CLIError(f"--chunks has {_plural(len(kw['chunks']), 'value')} but {what} "
                           f"has {_plural(len(shape), 'dimension')} (shape {tuple(shape)})")
        if self.args.compressor is not None:
            kw["compressor"] = self.args.compressor[0]
        return kw

    def array(self, path, source, dtype=None, chunks=True, what=None, **extra):
        """Create an array at path and fill it from source in bounded blocks. what names
        the source in errors (e.g. "dataset /a/b of in.h5")."""
        from chunkstore.hierarchy.convenience import copy_array_data
        from chunkstore.hierarchy.creation import create
        what = what or f"array {path!r}"
        dtype = np.dtype(dtype if dtype is not None else source.dtype)
        kw = self._kw(source.shape, chunks, what)
        kw.update(extra)
        self._leftovers(path)
        try:
            z = create(shape=source.shape, dtype=dtype, store=self.store, path=path,
                       zarr_format=self.fmt, **kw)
        except (TypeError, ValueError) as e:
            if not self.dry:
                raise
            raise CLIError(f"cannot convert {what}: {_message(e)}") from None
        self.arrays += 1
        if self.dry:
            self.nbytes += int(np.prod(source.shape)) * dtype.itemsize
            return z
        itemsize = dtype.itemsize
        try:
            copy_array_data(source, z, progress=lambda n: self.progress.update(n * itemsize),
                            block_bytes=common.PROGRESS_BLOCK_BYTES if self.progress.shown
                            else None)
        except UnicodeDecodeError as e:  # (strings labelled UTF-8 that are not)
            raise CLIError(f"cannot convert {what}: its strings are labelled UTF-8, but one "
                           f"is not UTF-8 ({_message(e)})") from None
        return z

    def _leftovers(self, path):
        """Keys of no node at path, where an array is made: refused in the dry run, before
        anything is written, or with --if-exists replace removed in the real one
        (common.clear_leftovers; the array's creation refused them only once the convert had
        written other arrays, and --if-exists replace did not remove them)."""
        from chunkstore.cli.common import clear_leftovers
        clear_leftovers(self.target, path, f"cannot convert into "
                        f"{_where(self.args.output, path)}", "the new array's",
                        self.args.if_exists, self.dry)

    def group(self, path):
        """Open (or create) the group at *path* in the output store, in the format of the
        nodes made (``--zarr-format``, else that of the group above the destination, else
        2)."""
        from chunkstore.hierarchy.group import open_group
        self.groups += 1
        return open_group(self.store, mode="a", path=path, zarr_format=self.fmt)


def _h5_attrs(obj):
    """obj's attributes as copy() takes them (hierarchy.convenience.h5_attributes), those
    JSON cannot hold left out with a note."""
    from chunkstore.hierarchy.convenience import h5_attributes

    def skip(name, error):
        _note(f"skipping attribute {name!r} of {obj.name}: {_message(error)}")
    return h5_attributes(obj, skip)


class _H5Str:
    """Array-like over a variable-length string dataset, reading Python str (text=True:
    labelled UTF-8) or bytes (labelled ASCII, which may hold any bytes: kept as they are,
    as copy() keeps them)."""

    def __init__(self, ds, text):
        self._ds = ds.asstr() if text else ds
        self.shape, self.size, self.dtype = ds.shape, ds.size, np.dtype(object)

    def __getitem__(self, sel):
        return np.asarray(self._ds[sel], dtype=object)


def _convert_hdf5(conv, path, root):
    try:
        import h5py
    except ImportError:
        raise CLIError("reading HDF5 needs h5py (pip install h5py)") from None
    import numcodecs
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise CLIError(f"cannot open {path} as HDF5: {_message(e)}") from None
    from chunkstore.hierarchy.convenience import h5_dimension_names
    with f:
        g = conv.group(root)
        g.attrs.put(_h5_attrs(f))
        items = []
        f.visititems(lambda name, obj: items.append((name, obj)))
        for name, obj in items:
            dest = _join(root, name)
            if isinstance(obj, h5py.Group):
                conv.group(dest).attrs.put(_h5_attrs(obj))
                continue
            if not isinstance(obj, h5py.Dataset):
                continue
            if obj.shape is None:
                _note(f"skipping empty dataset {obj.name} (no shape)")
                continue
            dt = obj.dtype
            chunks = obj.chunks if obj.chunks else True
            extra = {}
            source = obj
            if dt.hasobject:
                info = h5py.check_string_dtype(dt)
                if info is None:
                    _note(f"skipping dataset {obj.name}: unsupported dtype {dt}")
                    continue
                text = info.encoding == "utf-8"
                source = _H5Str(obj, text)
                extra = {"object_codec": numcodecs.VLenUTF8() if text else numcodecs.VLenBytes(),
                         "fill_value": "" if text else b""}
                dt = np.dtype(object)
            else:
                fv = obj.fillvalue
                if fv is not None:
                    extra["fill_value"] = fv
            # dimension scales as Zarr v3's dimension names, v2's _ARRAY_DIMENSIONS (as copy)
            attrs, dims = h5_dimension_names(obj, _h5_attrs(obj), conv.fmt)
            if dims is not None:
                extra["dimension_names"] = dims
            z = conv.array(dest, source, dtype=dt, chunks=chunks,
                           what=f"dataset {obj.name} of {path}", **extra)
            if attrs:
                z.attrs.put(attrs)


def _convert_npz(conv, path, root):
    try:
        npz = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - np.load raises many types for bad files
        raise CLIError(f"cannot read {path} as .npz: {_message(e)}") from None
    with npz:
        conv.group(root)
        for name in npz.files:
            # one member in memory at a time (npz members cannot be mapped); a dry run
            # reads only each member's header
            arr = _npz_header(npz, name) if conv.dry else npz[name]
            conv.array(_join(root, _norm(name)), arr, what=f"member {name!r} of {path}")


class _Header:
    """Shape and dtype of an array not read (a dry run's stand-in)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.size = int(np.prod(self.shape))


def _npz_header(npz, name):
    key = name if name in npz.zip.namelist() else name + ".npy"
    with npz.zip.open(key) as f:
        fmt = np.lib.format
        version = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(f)
    return _Header(shape, dtype)


def _convert_npy(conv, path, root):
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        raise CLIError(f"cannot read {path} as .npy: {_message(e)}") from None
    conv.array(root, arr, what=path)


def cmd_convert(args):
    """``chunkstore convert``: convert a ``.npy``, ``.npz`` or HDF5 file into Zarr arrays and
    groups.

    Every dataset is checked in a dry run before anything is written. Returns 0 (also when the
    destination exists and ``--if-exists skip`` skips it); raises ``CLIError`` where the destination
    exists and ``--if-exists`` is ``raise``.
    """
    from chunkstore.cli.safety import quiet, remove_node_if_new, remove_store_if_new
    from chunkstore.hierarchy.nodes import new_node_format
    from chunkstore.hierarchy.staging import HeldDocuments
    from chunkstore.hierarchy.creation import remove_node
    kind = _input_kind(args.input)
    root = _norm(args.path)
    convert = {"npy": _convert_npy, "npz": _convert_npz, "hdf5": _convert_hdf5}[kind]
    with remove_store_if_new(args.output), \
            _stores((args.output, "a", _options(args))) as (store,):
        existing = _kind(store, root)
        if existing is not None:
            if args.if_exists == "raise":
                raise CLIError(f"{_where(args.output, root)} already holds {_a(existing)}; use "
                               f"--if-exists replace or --if-exists skip")
            if args.if_exists == "skip":
                print(f"skipped: {_where(args.output, root)} already holds {_a(existing)}")
                return 0
        # The nodes' format: --zarr-format, else that of the group above root, as cp and
        # the API choose it (one hierarchy, one format: a v2 node under a v3 group is not
        # seen from the root by zarr-python, nor by its consolidated metadata).
        fmt = new_node_format(store, root, getattr(args, "zarr_format", None), 2)
        # A dry run first: every dataset checked against the options, nothing written yet.
        plan = Converter(store, args, Progress(False), dry=True, zarr_format=fmt)
        with quiet():
            convert(plan, args.input, root)
        if existing is not None:
            remove_node(store, root)  # (documents first: see cmd_rm)
        show = _progress_enabled(args)
        with remove_node_if_new(store, root), \
                Progress(show, total=plan.nbytes if show else None, desc="convert",
                         unit="B") as bar:
            # node documents held back until every dataset is written (hierarchy.staging):
            # a convert killed before then leaves no node that reads as complete
            staged = HeldDocuments(store, root)
            conv = Converter(staged, args, bar, zarr_format=fmt)
            convert(conv, args.input, root)
            staged.publish()
            _refresh_consolidated(store, root)
    what = [_plural(conv.arrays, "array")]
    if conv.groups:
        what.append(_plural(conv.groups, "group"))
    print(f"converted {args.input} ({kind}) into {' and '.join(what)}: "
          f"{_where(args.output, root)}")
    return 0


