"""ShardedStoreView: a store view that exposes a sharded v3 array's inner chunks as keys.

The array layer works on inner chunks (inner chunk grid, inner codec); this view maps each
*inner chunk key* onto a byte range of its stored shard, reads only the bytes it needs
(coalescing near ranges, caching shard indexes) and rewrites shards on write.

Key scheme: ``<prefix>/<shard key>|<i>.<j>...`` where ``<shard key>`` is the array's chunk key
of the shard (``meta.chunk_key(shard_coords)``) and ``i.j...`` are the inner chunk's
coordinates *within* the shard (``"0"`` for a 0-d array), e.g. ``"a/c/1/0|3.1"``. Inner keys
are therefore never equal to shard keys, so chunk locks (taken by the array on inner keys) and
shard locks (taken by the view on shard keys) never collide.

The shard format itself (index layout, encode/decode of a whole shard) is
:class:`chunkstore.codecs.sharding.ShardingCodec`.
"""

from __future__ import annotations

import threading

from chunkstore.forksafe import fork_safe
from ..storage import protocol
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from chunkstore._core.batch import Files
from chunkstore._core.keys import format_keys
from chunkstore.codecs import v3 as _v3
from chunkstore.codecs.sharding import MISSING, ShardingCodec
from chunkstore.errors import ChunkDecodeError
from chunkstore.format.keys import GridKeys
from chunkstore.format.shard_io import coalesce as _coalesce
from chunkstore.format.shard_io import read_if as _read_if
from chunkstore.format.shard_io import stripe as _stripe
from chunkstore.storage.base import VersionChanged
from chunkstore.storage.base import getitems as _getitems
from chunkstore.storage.base import getsize as _getsize
from chunkstore.errors import store_name

if TYPE_CHECKING:
    from contextlib import ExitStack

__all__ = ["ShardedStoreView"]

# the file identity of no version (see chunk_files): matches no file
_NO_VERSION = (0, 0, 0, 0, 0)

class ShardedStoreView(MutableMapping):
    """A mapping from inner chunk keys to encoded inner chunks, over a store of shards.

    Parameters
    ----------
    store : the store holding the shards (any ``MutableMapping[str, bytes]``; byte-range
        reads are used when it reads ranges of one version of a value: ``open_version``,
        see :class:`chunkstore.storage.base.ValueVersion`; otherwise shards are read whole).
    meta : the array's ``ArrayMetadataV3`` (its codecs must contain ``sharding_indexed``).
    prefix : the array's path in the store ("" for the root).
    synchronizer : optional; every shard read-modify-write holds ``synchronizer[shard_key]``.
    cache_index : keep decoded shard indexes across calls, each with the version of the
        shard it was read from (least recently used ones dropped beyond ``max_cache_bytes``).
        A cached index is used only while the store says the shard is still that version
        (a local file's identity: device, inode, size, mtime, ctime), so writers elsewhere
        are always seen; stores with no version identity cache nothing. Reads of one shard
        never mix versions: the index and the chunks come from one version (see getitems).
    max_gap : byte ranges of one shard closer than this are read as one range.

    Keys are ``<prefix>/<shard key>|<i>.<j>...`` (see the module docstring). Build them with
    :meth:`inner_key` from inner-grid coordinates, parse them with :meth:`inner_coords`.
    Values are inner chunks encoded by :attr:`codec` (the inner ``ChunkCodecV3``).

    Array -> array codecs before ``sharding_indexed`` (transpose) are folded into the inner
    codec, and bytes -> bytes codecs after it are applied to whole shards (then byte-range
    reads are not possible and whole shards are read).
    """

    def __init__(self, store: MutableMapping, meta: Any, prefix: str = "",
                 synchronizer: Any = None, *, cache_index: bool = True,
                 max_gap: int = 1 << 16, max_cache_bytes: int = 64 << 20,
                 array_shape: Sequence[int] | None = None) -> None:
        self._store = store
        # the array's shape as stored where meta is a view's with another: the inner chunks
        # a write must keep are the array's (see _live_slots)
        self._array_shape = None if array_shape is None else tuple(array_shape)
        self._synchronizer = synchronizer
        self._cache_enabled = bool(cache_index)
        self._max_gap = int(max_gap)
        self._heads: dict = {}  # shard coordinates -> its inner keys' head (bounded)
        self._max_cache_bytes = int(max_cache_bytes)
        p = (prefix or "").strip("/")
        self._prefix = p + "/" if p else ""
        # shard key -> (version of the shard, its decoded index): see _cached
        self._cache: OrderedDict[str, tuple[Any, np.ndarray]] = OrderedDict()
        self._cache_bytes = 0
        # (made anew in a forked child: a handle used there)
        self._cache_lock: threading.Lock = fork_safe(self, "_cache_lock")
        self.set_metadata(meta)

    def __getstate__(self) -> dict:
        return {"store": self._store, "meta": self.meta,
                "prefix": self._prefix.rstrip("/"), "synchronizer": self._synchronizer,
                "cache_index": self._cache_enabled, "max_gap": self._max_gap,
                "max_cache_bytes": self._max_cache_bytes, "array_shape": self._array_shape}

    def __setstate__(self, state: dict) -> None:
        # (mypy flags any __init__ call on an instance; unpickling rebuilds this one)
        self.__init__(state.pop("store"), state.pop("meta"), state.pop("prefix"),  # type: ignore[misc]
                      state.pop("synchronizer"), **state)

    # ------------------------------------------------------------------ configuration

    def set_metadata(self, meta: Any) -> None:
        """Use new array metadata (call after a resize); drops the index cache."""
        info = _v3.codec_chain_info(meta.codecs, meta.dtype, meta.chunks, meta.fill_value)
        sh = info["sharding"]
        if sh is None:
            raise ValueError("the array's codecs have no sharding_indexed codec")
        self.meta = meta
        self.sharding: ShardingCodec = sh
        self._post = info["bytes_to_bytes"]  # applied to whole shards
        perm = info["permutation"]  # encoded axis k = array axis perm[k]
        ndim = len(meta.shape)
        self._perm = perm
        inner_enc = sh.chunk_shape
        inner = [0] * ndim
        for k, p in enumerate(perm):
            inner[p] = inner_enc[k]
        self.inner_chunks = tuple(inner)
        self.shard_shape = tuple(int(c) for c in meta.chunks)
        self.chunks_per_shard = tuple(s // c for s, c in zip(self.shard_shape, self.inner_chunks))
        self.inner_grid_shape = tuple(-(-s // c) for s, c in zip(meta.shape, self.inner_chunks))
        # the inner chunks of the array as stored (a view's grid may end before: their
        # chunks past its end are the array's all the same, and a write keeps them)
        whole = meta.shape if self._array_shape is None else self._array_shape
        self.array_grid_shape = tuple(-(-s // c) for s, c in zip(whole, self.inner_chunks))
        self.shard_grid_shape = tuple(-(-s // c) for s, c in zip(meta.shape, self.shard_shape))
        inner_codecs = [c.to_dict() for c in info["array_to_array"]] + sh.inner.codecs
        self.codec = _v3.ChunkCodecV3(meta.dtype, self.inner_chunks, inner_codecs,
                                      meta.fill_value)
        # index row = sum(within[axis] * stride[axis]): C order over the encoded (transposed)
        # grid, expressed per array axis
        enc_strides = [1] * ndim
        for k in range(ndim - 2, -1, -1):
            enc_strides[k] = enc_strides[k + 1] * sh.chunks_per_shard[k + 1]
        strides = [0] * ndim
        for k, p in enumerate(perm):
            strides[p] = enc_strides[k]
        self._axis_strides = tuple(strides)
        # in-shard key tail ("i.j") -> index row, filled as keys are seen (at most one
        # entry per inner chunk of a shard): parsing every key again is what made a
        # sharded whole-array read slower than an unsharded one
        self._tail_slots: dict[str, int] = {}
        self._partial_ok = not self._post
        enc = meta.chunk_key_encoding
        self.shard_keys = GridKeys(self._prefix, self.shard_grid_shape,
                                   enc["configuration"]["separator"], enc["name"] == "default")
        self._chunk_key = self.shard_keys.key
        self.invalidate()

    def invalidate(self, shard_key: str | None = None) -> None:
        """Forget cached shard indexes (all, or one shard's, given its store key)."""
        with self._cache_lock:
            if shard_key is None:
                self._cache.clear()
                self._cache_bytes = 0
            else:
                old = self._cache.pop(shard_key, None)
                if old is not None:
                    self._cache_bytes -= old[1].nbytes

    @property
    def store(self) -> MutableMapping:
        """The store holding the shards."""
        return self._store

    def __repr__(self) -> str:
        return f"ShardedStoreView({store_name(self._store)}, prefix={self._prefix.rstrip('/')!r})"

    # ------------------------------------------------------------------ keys

    def inner_key(self, coords: Sequence[int]) -> str:
        """The key of the inner chunk at inner-grid coordinates ``coords``."""
        coords = tuple(int(c) for c in coords)
        if len(coords) != len(self.inner_chunks):
            raise ValueError(f"expected {len(self.inner_chunks)} inner chunk coordinates, "
                             f"got {len(coords)}")
        shard = tuple(c // n for c, n in zip(coords, self.chunks_per_shard))
        within = tuple(c % n for c, n in zip(coords, self.chunks_per_shard))
        tail = ".".join(map(str, within)) if within else "0"
        return f"{self._chunk_key(shard)}|{tail}"

    def inner_keys(self, coords: Any) -> list[str]:
        """inner_key for each row of an (n, ndim) coordinate array; each shard's key string
        is built once (a whole-array read touches thousands of inner chunks per shard)."""
        nd = len(self.inner_chunks)
        if nd == 0:  # a 0-d array has one chunk
            return [self.inner_key(()) for _ in range(len(np.asarray(coords)))]
        c = np.asarray(coords, dtype=np.int64).reshape(-1, nd)
        if len(c) <= 16:  # a few chunks (a tile): plain Python beats numpy's per-call costs
            per, heads, out = self.chunks_per_shard, self._heads, []
            for row in c.tolist():
                shard = tuple([x // p for x, p in zip(row, per)])
                head = heads.get(shard)
                if head is None:
                    if len(heads) >= 4096:
                        heads.clear()
                    head = heads[shard] = f"{self._chunk_key(shard)}|"
                out.append(head + ".".join([str(x % p) for x, p in zip(row, per)]))
            return out
        per_np = np.asarray(self.chunks_per_shard, dtype=np.int64)
        shard_of: dict = {}  # shard coordinates -> position of its key head
        which = [shard_of.setdefault(tuple(s), len(shard_of)) for s in (c // per_np).tolist()]
        head_list = [f"{self._chunk_key(s)}|" for s in shard_of]
        return format_keys(c % per_np, ".", head_list, which)

    def shard_key(self, shard_coords: Sequence[int]) -> str:
        """The store key of the shard at shard-grid coordinates."""
        return self._chunk_key(tuple(int(c) for c in shard_coords))

    def _parse(self, key: str) -> tuple[str, tuple[int, ...]]:
        """(shard store key, coordinates within the shard) of an inner key."""
        if not isinstance(key, str):
            raise TypeError(f"keys must be str, got {type(key).__name__}")
        skey, bar, tail = key.rpartition("|")
        if not bar or not skey.startswith(self._prefix):
            raise KeyError(key)
        nd = len(self.inner_chunks)
        try:
            within = tuple(int(t) for t in tail.split(".")) if nd else ()
        except ValueError:
            raise KeyError(key) from None
        if nd == 0 and tail != "0":
            raise KeyError(key)
        if len(within) != nd or any(not 0 <= w < n for w, n in
                                    zip(within, self.chunks_per_shard)):
            raise KeyError(key)
        return skey, within

    def _slot(self, within: tuple[int, ...]) -> int:
        """Row of the shard index for in-shard coordinates (array axes)."""
        return sum(w * s for w, s in zip(within, self._axis_strides))

    def _within_of_slot(self, slot: int) -> tuple[int, ...]:
        if not self.inner_chunks:
            return ()
        enc = np.unravel_index(slot, self.sharding.chunks_per_shard)
        within = [0] * len(enc)
        for k, p in enumerate(self._perm):
            within[p] = int(enc[k])
        return tuple(within)

    def _shard_coords(self, skey: str) -> tuple[int, ...]:
        """Shard-grid coordinates of a shard store key (ValueError if not one)."""
        coords = self.shard_keys.parse(skey)
        if coords is None:
            raise ValueError(skey)
        return coords

    def inner_coords(self, key: str) -> tuple[int, ...]:
        """Inverse of :meth:`inner_key` (KeyError if ``key`` is not an inner key)."""
        skey, within = self._parse(key)
        try:
            shard = self._shard_coords(skey)
        except ValueError:
            raise KeyError(key) from None
        return tuple(s * n + w for s, n, w in zip(shard, self.chunks_per_shard, within))

    def shard_key_of(self, key: str) -> str:
        """The store key of the shard holding inner key ``key``."""
        return self._parse(key)[0]

    def _group(self, keys: Iterable[str]) -> dict[str, list[tuple[str, int]]]:
        groups: dict[str, list[tuple[str, int]]] = {}
        tails, prefix = self._tail_slots, self._prefix
        for k in keys:
            slot = None
            if type(k) is str:
                skey, bar, tail = k.rpartition("|")
                if bar and skey.startswith(prefix):
                    slot = tails.get(tail)
            if slot is None:
                skey, within = self._parse(k)  # validates (KeyError / TypeError)
                slot = tails[k.rpartition("|")[2]] = self._slot(within)
            groups.setdefault(skey, []).append((k, slot))
        return groups

    def _error(self, skey: str, e: Exception) -> ChunkDecodeError:
        cause = str(e) or type(e).__name__
        return ChunkDecodeError(
            f"failed to decode the index of shard {skey!r} in {store_name(self._store)}: {cause}")

    # ------------------------------------------------------------------ index cache

    def _cached(self, skey: str) -> tuple[Any, np.ndarray] | None:
        """(version, index) of a shard as last read, or None. Never trusted as it is: a read
        uses it only while the shard is still that version (the store checks), and a
        read-modify-write never uses it (it reads the whole shard under the shard's lock)."""
        if not self._cache_enabled:
            return None
        with self._cache_lock:
            entry = self._cache.get(skey)
            if entry is not None:
                self._cache.move_to_end(skey)
            return entry

    def _remember(self, skey: str, version: Any, index: np.ndarray) -> None:
        if not self._cache_enabled or version is None:
            return  # no identity to check it against later: not worth keeping
        with self._cache_lock:
            old = self._cache.pop(skey, None)
            if old is not None:
                self._cache_bytes -= old[1].nbytes
            self._cache[skey] = (version, index)
            self._cache_bytes += index.nbytes
            while self._cache_bytes > self._max_cache_bytes and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                self._cache_bytes -= dropped[1].nbytes

    def _decode_post(self, data: Any) -> Any:
        for c in reversed(self._post):
            data = c.decode(data)
        return _v3._to_bytes(data)

    def _encode_post(self, data: bytes) -> bytes:
        for c in self._post:
            data = c.encode(data)
        return _v3._to_bytes(data)

    def _read_shard(self, skey: str, fresh: bool = False) -> bytes | None:
        """The whole shard (after the post codecs), or None if absent; fresh: from the store
        behind a cache (protocol.live_store)."""
        try:
            data = (protocol.live_store(self._store) if fresh else self._store)[skey]
        except KeyError:
            return None
        if self._post:
            try:
                data = self._decode_post(data)
            except Exception as e:
                raise self._error(skey, e) from e
        return data

    def _split(self, skey: str, data: Any) -> tuple[np.ndarray, memoryview]:
        try:
            return self.sharding.split(data)
        except Exception as e:
            raise self._error(skey, e) from e

    @property
    def _versioned(self) -> bool:
        """Whether shards are read in byte ranges: the store reads ranges of one version of
        a value (open_version) and no bytes -> bytes codec follows the sharding codec.
        Otherwise every read takes whole shards (one store read each: consistent as well)."""
        return self._partial_ok and protocol.versions(self._store) is not None

    def _index_of(self, skey: str, reader: Any) -> np.ndarray:
        """The index of the shard version that reader holds (remembered by that version)."""
        sh = self.sharding
        if sh.index_location == "end":
            raw = reader.read_tail(sh.index_nbytes)
        else:
            raw = reader.read([(0, sh.index_nbytes)])[0]
        try:
            # with the shard's size where known: an entry pointing into the index itself
            # (or past the data) is corruption, not data to return
            index = sh.decode_index(raw, reader.known_size)
        except Exception as e:
            raise self._error(skey, e) from e
        # (kept only where the version will tell this shard from a later rewrite)
        self._remember(skey, reader.version if reader.settled else None, index)
        return index

    def _open(self, skey: str) -> Any:
        """The store's ValueVersion of a shard, or None if absent."""
        try:
            # (asked only when _versioned: the store offers open_version)
            return cast(Any, self._store).open_version(skey)
        except KeyError:
            return None

    def _read_index(self, skey: str, settled: bool = False) -> tuple[np.ndarray | None, Any]:
        """(index, version) of a shard as it is now; (None, None) if absent. A cached index
        is taken only while the shard is still its version. settled: the version only where
        it will tell this version from a later rewrite (ValueVersion.settled), else None."""
        if not self._versioned:
            data = self._read_shard(skey)
            if data is None:
                return None, None
            return self._split(skey, data)[0], None
        entry = self._cached(skey)
        reader = self._open(skey)
        if reader is None:
            self.invalidate(skey)
            return None, None
        try:
            with reader:
                if entry is not None and reader.version == entry[0]:
                    return entry[1], entry[0]
                version = reader.version if reader.settled or not settled else None
                return self._index_of(skey, reader), version
        except KeyError:
            self.invalidate(skey)
            return None, None

    # ------------------------------------------------------------------ reads

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """``{key: encoded inner chunk}`` for the keys present (absent ones are omitted).

        Every chunk of one shard comes from one version of that shard, the version its
        index was read from. Per shard, through the store's ``open_version``: the index
        (from the cache while the shard is still the version it was read from: one call
        that checks and reads), then the wanted chunks in one call of coalesced ranges.
        Where the store cannot read ranges of one version (or bytes -> bytes codecs follow
        the sharding codec) each shard is read whole, once; the shards of one call are
        fetched with one ``getitems``.
        """
        keys = list(keys)
        groups = self._group(keys)
        out: dict[str, bytes] = {}
        if not self._versioned:
            # one batch read of every shard this call needs
            got = _getitems(self._store, list(groups))
            for skey, items in groups.items():
                data = got.get(skey)
                if data is not None:
                    if self._post:
                        try:
                            data = self._decode_post(data)
                        except Exception as e:
                            raise self._error(skey, e) from e
                    self._take_whole(skey, data, items, out)
            return out
        for skey, items in groups.items():
            self._read_chunks(skey, items, out)
        return out

    def _ranges(self, index: np.ndarray, items: list[tuple[str, int]]) -> tuple[list, list]:
        """(wanted, merged): the present chunks of items as (key, offset, nbytes), and their
        byte ranges coalesced (see shard_io.coalesce)."""
        wanted = []
        for k, slot in items:
            off, nb = int(index[slot, 0]), int(index[slot, 1])
            if off != MISSING:
                wanted.append((k, off, nb))
        # A store whose range reads cost no more apart (local files) gets them unmerged:
        # merging would only add a copy of every chunk out of the merged range.
        gap = self._max_gap if protocol.coalesces_ranges(self._store) else -1
        return wanted, _coalesce([(o, n) for _, o, n in wanted], gap)

    def _read_chunks(self, skey: str, items: list[tuple[str, int]], out: dict) -> None:
        """The chunks of items of one shard into out, all from one version of the shard."""
        entry = self._cached(skey)
        if entry is not None:
            version, index = entry
            wanted, merged = self._ranges(index, items)
            # (with nothing to read, the index must still be this shard's: the call checks)
            try:
                parts = _read_if(self._store, skey, version, [(o, n) for o, n, _ in merged])
            except KeyError:
                self.invalidate(skey)
                return  # deleted since
            if parts is not None:
                self._take(skey, wanted, merged, parts, out)
                return
            self.invalidate(skey)  # another version now: read its index
        for attempt in range(8):
            reader = self._open(skey)
            if reader is None:
                return
            try:
                with reader:
                    index = self._index_of(skey, reader)
                    wanted, merged = self._ranges(index, items)
                    parts = reader.read([(o, n) for o, n, _ in merged]) if wanted else []
            except KeyError:
                self.invalidate(skey)
                return  # (a remote reader learns of an absent shard at its first read)
            except VersionChanged:
                self.invalidate(skey)
                continue  # a remote shard rewritten between the index and the chunks
            self._take(skey, wanted, merged, parts, out)
            return
        # Rewritten between each index read and its chunks (writers of the shard's other
        # inner chunks at work, which a write's chunk locks do not exclude): the whole shard
        # in one read is one version.
        data = self._read_shard(skey)
        if data is not None:
            self._take_whole(skey, data, items, out)

    def _take_whole(self, skey: str, data: Any, items: list[tuple[str, int]],
                    out: dict) -> None:
        """The chunks of items out of a whole shard's bytes (after the post codecs)."""
        index, mv = self._split(skey, data)
        for k, slot in items:
            off, nb = int(index[slot, 0]), int(index[slot, 1])
            if off != MISSING:
                out[k] = bytes(mv[off: off + nb])

    def _take(self, skey: str, wanted: list, merged: list, parts: list, out: dict) -> None:
        """Split the coalesced ranges read into the chunks of wanted (into out)."""
        for i, (p, (_, n, _)) in enumerate(zip(parts, merged)):
            if len(p) != n:
                raise self._error(skey, ValueError(
                    f"the index points at bytes {merged[i][0]}..{merged[i][0] + n} past the "
                    f"end of the shard (truncated or corrupt shard)"))
        for (moff, mlen, members), part in zip(merged, parts):
            if len(members) == 1 and type(part) is bytes:  # the chunk alone: no copy
                k, off, nb = wanted[members[0]]
                if off == moff and nb == mlen:
                    out[k] = part
                    continue
            mv = memoryview(part)
            for i in members:
                k, off, nb = wanted[i]
                out[k] = bytes(mv[off - moff: off - moff + nb])

    def chunk_files(self, keys: list[str], maxlen: int) -> Files | None:
        """The inner chunks of keys as chunkstore._core.batch.Files (their shard's file,
        their byte range in it from the shard's index, and the identity of the file version
        that index is of), for decode kernels that read them themselves; None unless the
        store is plain files and the shards are read in ranges. An absent chunk gets offset
        -1: the kernel stops at it and the reader asks getitems, as it does for a file that
        is not the version of its index any more (a shard rewritten meanwhile)."""
        file_paths = protocol.local_files(self._store)
        if not self._versioned or file_paths is None:
            return None
        groups = self._group(keys)
        paths = file_paths(list(groups))
        if paths is None:
            return None
        where = {}
        for (skey, items), path in zip(groups.items(), paths):
            entry = self._cached(skey)
            # A cached index is handed on unchecked: the kernel checks each file's identity
            # against its version as it opens it. A file changed too recently for its
            # identity to tell it from a rewrite within one timestamp tick (the settle rule,
            # chunkstore.storage.directory) cannot be checked so: then no kernel reads
            # (None), and the caller's getitems reads each shard's index and chunks from one
            # open file (a version-less row per chunk would send each chunk there alone).
            version, index = entry if entry is not None else \
                self._read_index(skey, settled=True)[::-1]
            if version is None:
                if index is not None:
                    return None
                version = _NO_VERSION
            for k, slot in items:
                off = MISSING if index is None else int(index[slot, 0])
                # (an absent chunk keeps its shard's version: a batch read again compares
                # the versions it then finds with these, see ReadPath._fast_decode)
                where[k] = (path, (-1, 0, *version) if off == MISSING or index is None else
                            (off, int(index[slot, 1]), *version))
        rows = [where[k] for k in keys]
        table = np.array([r[1] for r in rows], dtype=np.int64).reshape(len(rows), 7)
        return Files([r[0] for r in rows], maxlen, table[:, :2], table[:, 2:])

    def __getitem__(self, key: str) -> bytes:
        got = self.getitems([key])
        try:
            return got[key]
        except KeyError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        try:
            skey, within = self._parse(key)  # type: ignore[arg-type]
        except (KeyError, TypeError):
            return False
        index, _ = self._read_index(skey)
        return index is not None and int(index[self._slot(within), 0]) != MISSING

    # ------------------------------------------------------------------ writes

    def _lock(self, skey: str) -> ExitStack:
        import contextlib

        stack = contextlib.ExitStack()
        stack.enter_context(_stripe(self._store, skey))
        if self._synchronizer is not None:
            stack.enter_context(self._synchronizer[skey])
        return stack

    def _live_slots(self, skey: str) -> set[int] | None:
        """Index rows of this shard's inner chunks that intersect the array as stored (None:
        all): a write covering them all replaces the shard without reading it, and the
        rest are outside the array (a view's shape is not the array's: see __init__)."""
        try:
            shard = self._shard_coords(skey)
        except ValueError:
            return None
        if not shard:
            return {0}
        counts = [max(0, min(n, g - s * n)) for s, n, g in
                  zip(shard, self.chunks_per_shard, self.array_grid_shape)]
        slots = np.zeros(counts, dtype=np.int64)
        for axis, (c, st) in enumerate(zip(counts, self._axis_strides)):
            shape = [1] * len(counts)
            shape[axis] = c
            slots = slots + (np.arange(c, dtype=np.int64) * st).reshape(shape)
        return set(slots.ravel().tolist())

    def _store_shard(self, skey: str, chunks: list) -> None:
        # The index written is not remembered: the version the store gave the new shard is
        # not known here (asking would race the next writer), and the next read gets the
        # index with the version from one open of the shard.
        self.invalidate(skey)
        data = self.sharding.assemble(chunks)
        if not data:
            try:
                del self._store[skey]
            except KeyError:
                pass
            return
        if self._post:
            self._store[skey] = self._encode_post(data)
        else:
            self._store[skey] = data

    def _current_chunks(self, skey: str) -> list:
        """The shard's encoded inner chunks (None = absent), read whole from the store as it
        is now (not through a cache: see protocol.live_store)."""
        data = self._read_shard(skey, fresh=True)
        chunks: list = [None] * self.sharding.nchunks
        if data is None:
            return chunks
        index, mv = self._split(skey, data)
        for i in range(self.sharding.nchunks):
            off, nb = int(index[i, 0]), int(index[i, 1])
            if off != MISSING:
                chunks[i] = mv[off: off + nb]
        return chunks

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Store encoded inner chunks. Per shard, under its lock: a write covering every
        inner chunk of the shard that lies inside the array is assembled and stored with one
        store write (no read; chunks outside the array are dropped); any other write reads
        the shard, replaces its chunks and rewrites it."""
        groups = self._group(mapping)
        for skey in sorted(groups):
            items = groups[skey]
            new = {slot: _v3._to_bytes(mapping[k]) if not isinstance(mapping[k], bytes)
                   else mapping[k] for k, slot in items}
            with self._lock(skey):
                live = self._live_slots(skey)
                whole = live is not None and live <= set(new)
                if whole:
                    chunks: list = [None] * self.sharding.nchunks
                else:
                    chunks = self._current_chunks(skey)
                for slot, v in new.items():
                    chunks[slot] = v
                self._store_shard(skey, chunks)

    def __setitem__(self, key: str, value: Any) -> None:
        self.setitems({key: value})

    def delitems(self, keys: Iterable[str]) -> None:
        """Mark inner chunks absent (absent keys are ignored); a shard left with no chunk is
        deleted (directly, without reading it, when every chunk inside the array goes)."""
        groups = self._group(keys)
        for skey in sorted(groups):
            slots = {slot for _, slot in groups[skey]}
            with self._lock(skey):
                live = self._live_slots(skey)
                if live is not None and live <= slots:
                    self.invalidate(skey)
                    try:
                        del self._store[skey]
                    except KeyError:
                        pass
                    continue
                chunks = self._current_chunks(skey)
                if all(chunks[s] is None for s in slots):
                    continue  # nothing to delete
                for s in slots:
                    chunks[s] = None
                self._store_shard(skey, chunks)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.delitems([key])

    # ------------------------------------------------------------------ listing

    def stored_shards(self) -> Iterator[tuple[int, ...]]:
        """Shard-grid coordinates of the shards present in the store (inside the grid)."""
        return self.shard_keys.stored(self._store)

    def stored_inner_chunks(self) -> Iterator[tuple[int, ...]]:
        """Inner-grid coordinates of the inner chunks present (inside the array's grid)."""
        for shard in self.stored_shards():
            skey = self.shard_key(shard)
            index, _ = self._read_index(skey)
            if index is None:
                continue
            slots = np.flatnonzero(index[:, 0] != MISSING)
            if not self.inner_chunks:
                if slots.size:
                    yield ()
                continue
            enc = np.unravel_index(slots, self.sharding.chunks_per_shard)
            cols: list[Any] = [None] * len(enc)
            for k, p in enumerate(self._perm):
                cols[p] = enc[k] + shard[p] * self.chunks_per_shard[p]
            coords = np.stack(cols, axis=1)
            inside = (coords < np.asarray(self.inner_grid_shape)).all(axis=1)
            for c in coords[inside].tolist():
                yield tuple(c)

    def __iter__(self) -> Iterator[str]:
        for coords in self.stored_inner_chunks():
            yield self.inner_key(coords)

    def __len__(self) -> int:
        return sum(1 for _ in self.stored_inner_chunks())

    def getsize(self, prefix: str = "") -> int:
        """Stored bytes under ``prefix`` of the underlying store (shards, not inner chunks)."""
        return _getsize(self._store, prefix)
