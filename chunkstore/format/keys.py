"""Store keys of the blocks of one regular grid (an array's chunks, or its shards).

One grid of blocks is keyed by coordinates joined by a separator (``"."`` or ``"/"``) under
the array's path, with a ``"c" + separator`` head in Zarr v3's ``default`` key encoding. The
same scheme serves Zarr v2 chunks, v3 chunks (both key encodings) and v3 shards; this module
is the one place that encodes, parses and lists such keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chunkstore._core.keys import format_keys, parse_keys
from chunkstore.storage import protocol
from chunkstore.storage.base import keys_under, listdir

__all__ = ["GridKeys"]

_CHUNKLIKE = re.compile(r"^\d+([./]\d+)*$")
#: a coordinate as written: ASCII digits without a leading zero (\d took other scripts'
#: digits, and $ a trailing newline)
_DIGITS = re.compile(r"0|[1-9][0-9]*")
_DOTTED = re.compile(r"^\d+(\.\d+)+$")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class GridKeys:
    """Keys of the blocks of a grid of ``len(grid)`` dimensions under ``path``.

    ``default=True`` is Zarr v3's ``default`` chunk key encoding (``c/1/2``, 0-d: ``c``);
    False is the v2 scheme (``1.2`` or ``1/2``, 0-d: ``0``), used by Zarr v2 arrays and
    by v3's ``v2`` key encoding.
    """

    __slots__ = ("path", "prefix", "grid", "ndim", "separator", "default", "head", "key0")

    def __init__(self, path: str, grid: Sequence[int], separator: str, default: bool) -> None:
        self.path = (path or "").strip("/")
        self.prefix = self.path + "/" if self.path else ""
        self.grid = tuple(int(g) for g in grid)
        self.ndim = len(self.grid)
        self.separator = separator
        self.default = bool(default)
        self.head = self.prefix + ("c" + separator if default else "")
        self.key0 = self.prefix + ("c" if default else "0")  # a 0-d array's one block

    def key(self, coords: Sequence[int]) -> str:
        """The store key of the block at grid coordinates ``coords``."""
        if not coords:
            return self.key0
        return self.head + self.separator.join(map(str, coords))

    def keys(self, coords: Any) -> list[str]:
        """``key`` of each row of an (n, ndim) integer array (formatted in C)."""
        if self.ndim == 0:
            return [self.key0] * len(coords)
        return format_keys(coords, self.separator, [self.head])

    def parse(self, key: str) -> tuple[int, ...] | None:
        """Grid coordinates of store key ``key`` (not checked against the grid bounds).

        None when ``key`` is not a block key of this grid at all (another path, metadata,
        anything not made of digits and separators); ValueError, saying why, for a key that
        looks like one but cannot be (the other separator, the wrong number of coordinates).
        """
        if not key.startswith(self.prefix):
            return None
        rel = key[len(self.prefix):]
        nd, sep = self.ndim, self.separator
        if self.default:  # "c" + sep + coordinates ("c" for 0-d)
            if nd == 0 and rel == "c":
                return ()
            if len(rel) < 2 or rel[0] != "c" or rel[1] not in "./" or \
                    not _CHUNKLIKE.match(rel[2:]):
                return None
            if rel[1] != sep:
                raise ValueError(f"uses separator {rel[1]!r} but the array's chunk key "
                                 f"separator is {sep!r}")
            rel = rel[2:]
            if nd == 0:
                raise ValueError("a 0-d array has a single chunk 'c'")
        elif not _CHUNKLIKE.match(rel):
            return None
        if nd == 0:
            if rel == "0":
                return ()
            raise ValueError("a 0-d array has a single chunk '0'")
        other = "/" if sep == "." else "."
        if other in rel:
            raise ValueError(f"uses separator {other!r} but the array's dimension separator "
                             f"is {sep!r}")
        coords = tuple(int(p) for p in rel.split(sep))
        if len(coords) != nd:
            raise ValueError(f"{_plural(len(coords), 'coordinate')} for an array of "
                             f"{_plural(nd, 'dimension')}")
        return coords

    def inside(self, coords: Sequence[int]) -> bool:
        """Whether *coords* has one coordinate per dimension, each within the grid."""
        return len(coords) == self.ndim and all(0 <= x < g for x, g in zip(coords, self.grid))

    def stored_coords(self, store: Mapping) -> Any:
        """Grid coordinates of the blocks present in ``store`` (inside the grid) as an
        (n, ndim) int64 array, from one listing: the store's recursive listing below the
        grid's keys where it has one (a directory walk with no stat per block, an object
        store's prefix listing), parsed in C; else the array's directory listed (a walk of
        the nested one for the "/" separator)."""
        import numpy as np
        nd, grid = self.ndim, self.grid
        if nd == 0:
            return np.zeros((1 if self.key0 in store else 0, 0), dtype=np.int64)
        if protocol.recursive_listing(store) is not None:
            if self.separator == ".":
                names = keys_under(store, self.path)
                if self.default:
                    names = [n for n in names if n.startswith(self.head)]
                return parse_keys(names, len(self.head), ".", grid)
            top = (self.prefix + "c") if self.default else self.path
            return parse_keys(keys_under(store, top), len(top) + 1 if top else 0, "/", grid)
        found = list(self._walk_stored(store))
        return np.array(found, dtype=np.int64).reshape(len(found), nd)

    def stored(self, store: Mapping) -> Iterator[tuple[int, ...]]:
        """Grid coordinates of the blocks present in ``store`` (inside the grid), as
        tuples (see stored_coords)."""
        return map(tuple, self.stored_coords(store).tolist())

    def _walk_stored(self, store: Mapping) -> Iterator[tuple[int, ...]]:
        nd, grid = self.ndim, self.grid
        if self.separator == ".":
            names = listdir(store, self.path)
            if self.default:
                names = [n for n in names if n.startswith("c.")]
            yield from map(tuple, parse_keys(names, 2 if self.default else 0, ".",
                                             grid).tolist())
            return
        top = (self.prefix + "c") if self.default else self.path

        def walk(prefix: str, depth: int, acc: tuple) -> Iterator[tuple[int, ...]]:
            for name in listdir(store, prefix):
                if depth == 0 and nd > 1 and _DOTTED.match(name):
                    # A store that lists nested chunks as dotted keys (zarr-python 2's
                    # NestedDirectoryStore does): "1.2" is the chunk 1/2.
                    c = tuple(map(int, name.split(".")))
                    if len(c) == nd and all(x < g for x, g in zip(c, grid)):
                        yield c
                    continue
                if not _DIGITS.fullmatch(name) or int(name) >= grid[depth]:
                    continue
                path = prefix + "/" + name if prefix else name
                if depth == nd - 1:
                    if path in store:
                        yield acc + (int(name),)
                else:
                    yield from walk(path, depth + 1, acc + (int(name),))

        yield from walk(top, 0, ())
