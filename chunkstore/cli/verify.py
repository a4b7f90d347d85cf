"""`chunkstore verify`: read every metadata document and decode every stored chunk."""

from __future__ import annotations

from chunkstore.storage import protocol
import bisect
import re

from chunkstore.storage.base import keys_under
from chunkstore.engine.trim import MARKER_NAME
from chunkstore.cli.common import (Progress, _format, _join, _kind, _message, _norm,
                                   _one_line, _open_node, _options, _plural, _progress_enabled,
                                   _stores, _where)


VERIFY_DESCRIPTION = """\
Read every metadata document and decode every stored chunk (every inner chunk of every
shard); print each problem with its key; exit 1 if there is any.

Detected:
  - invalid metadata (.zarray, .zgroup, .zattrs, zarr.json) and stale consolidated metadata
  - chunk keys outside the array's chunk grid
  - chunks that fail to decode, or decode to the wrong size
  - corruption of a chunk that carries a checksum: any changed byte of a Zarr v3 chunk
    with the crc32c codec and of every shard index (it carries crc32c); a damaged
    compressed stream of gzip (CRC-32), zlib (Adler-32), bz2 (CRC) or lzma (xz check)
  - unreadable keys (the store raises on reading them)

Not detected:
  - changed bytes in a chunk without a checksum that still decodes to the right size:
    uncompressed chunks, Blosc chunks that Blosc stored uncompressed (data that did not
    compress), and often Blosc, LZ4 or Zstd chunks (a damaged stream usually fails to
    decode, but nothing guarantees it); in a sharded array without crc32c on its inner
    chunks, the same for the inner chunks behind an intact index
  - missing chunks: an absent chunk reads as the fill value, like one never written
  - data that was already wrong when it was written

To make data fully verifiable, copy it with a checksum on every chunk:
  chunkstore cp SRC DST --zarr-format 3 --checksum

Stray temporary files of interrupted writes (a killed writer's '.partial' files) are listed;
readers ignore them, as the chunks past the shape that an interrupted shrink left (its trim
is recorded, and the next resize or append completes it). Exit status: 0 sound, 1 a problem
found, 2 sound but strays or a pending trim left.
--remove-strays deletes those older than --older-than seconds (default 600: a writer
renames its temporary file within moments of making it, so an old one is no live write's).
"""

_SIZE_PROBLEM = re.compile(r"has \d+ (bytes|items), expected \d+")


class Verifier:
    """Checks arrays through their layouts (chunkstore.format): the layout parses the store
    keys, names the chunks each stored object holds (the object itself, or a shard's inner
    chunks), reads them and gives the codec to decode them with."""

    def __init__(self, store, progress, batch=64):
        self.store, self.progress, self.batch = store, progress, batch
        self.problems = {"corrupt": 0, "wrong size": 0, "outside the grid": 0, "metadata": 0,
                         "consolidated": 0, "consolidated v3": 0, "unreadable": 0,
                         "corrupt shard": 0}
        self.chunks = self.arrays = 0
        self.bad_metadata = set()  # array paths whose metadata was already reported
        self.trim_leftovers: dict[str, int] = {}  # array path -> keys past its shape

    def report(self, kind, key, text):
        """Count a problem of *kind* and print one line naming it and the store key *key*."""
        self.problems[kind] += 1
        label = {"corrupt": "corrupt chunk", "wrong size": "wrong-size chunk",
                 "outside the grid": "chunk key outside the grid",
                 "metadata": "invalid metadata", "unreadable": "unreadable chunk",
                 "consolidated": "stale consolidated metadata",
                 "consolidated v3": "stale consolidated metadata",
                 "corrupt shard": "corrupt shard"}[kind]
        print(f"{label} {key!r}: {_one_line(text)}", flush=True)

    def classify(self, layout, keys, trim_pending=False):
        """[(key, stored-grid coordinates)] of the stored objects (chunks, or shards) among
        keys, parsed by the array's layout; reports keys outside the grid (counted as a
        pending trim's leftovers where one is recorded: trim_pending). Other keys are
        ignored (as every Zarr reader ignores them)."""
        stored = []
        for key in keys:
            try:
                coords = layout.parse_stored_key(key)
            except ValueError as e:
                if trim_pending:
                    self.trim_leftovers[layout.path] = self.trim_leftovers.get(
                        layout.path, 0) + 1
                else:
                    self.report("outside the grid", key, _message(e))
                continue
            if coords is not None:
                stored.append((key, coords))
        return stored

    def _decode_all(self, codec, items):
        """Decode (key, bytes) items on the pool; report the ones that fail."""
        from chunkstore import config
        from chunkstore.errors import ChunkDecodeError

        def decode(item):
            key, data = item
            try:
                codec.decode(data, key=key, writable=False)
            except ChunkDecodeError as e:
                cause = e.__cause__
                text = _message(cause) if cause is not None else _message(e)
                kind = "wrong size" if _SIZE_PROBLEM.search(text) else "corrupt"
                return key, kind, text
            except Exception as e:  # noqa: BLE001 - anything else is corruption too
                return key, "corrupt", _message(e)
            return key, None, None

        pool = config.executor()
        parallel = pool is not None and not codec.dtype.hasobject and len(items) > 1
        results = pool.map(decode, items) if parallel else map(decode, items)
        for key, kind, text in results:
            self.chunks += 1
            if kind is not None:
                self.report(kind, key, text)

    def _read_one(self, layout, key, chunk_keys, data):
        """Read the chunks of one stored object into data; report it if it cannot be read
        (a shard whose index does not decode is a corrupt shard, named by its key)."""
        from chunkstore.errors import ChunkDecodeError
        try:
            data.update(layout.read_chunks(chunk_keys))
        except ChunkDecodeError as e:
            cause = e.__cause__
            self.report("corrupt shard", key,
                        _message(cause) if cause is not None else _message(e))
        except Exception as e:  # noqa: BLE001
            self.report("unreadable", key, _message(e))

    def check(self, layout, stored):
        """Read and decode every chunk of the stored objects, about self.batch chunks (and
        at least one object) at a time. A chunk that does not decode is reported by its
        key; a shard's inner chunk by ``<shard key>|<i>.<j>`` (coordinates in the shard)."""
        lo = 0
        while lo < len(stored):
            part, keys = [], []
            while lo < len(stored) and (not part or len(keys) < self.batch):
                key, coords = stored[lo]
                chunk_keys = layout.stored_chunk_keys(coords)
                part.append((key, chunk_keys))
                keys += chunk_keys
                lo += 1
            try:
                data = layout.read_chunks(keys)
            except Exception:  # noqa: BLE001 - read one by one to name the bad object
                data = {}
                for key, chunk_keys in part:
                    self._read_one(layout, key, chunk_keys, data)
            self._decode_all(layout.codec, [(k, data[k]) for k in keys if k in data])
            self.progress.update(len(part))

    def run(self, arrays, keys):
        """Verify the arrays at the paths *arrays*: every stored chunk among the sorted store
        *keys* is classified and decoded, problems reported.
        """
        from chunkstore.hierarchy import nodes
        from chunkstore.engine.array import Array
        plans = []
        array_set = set(arrays)
        for path in arrays:
            if path in self.bad_metadata:
                continue
            prefix = path + "/" if path else ""
            lo = bisect.bisect_left(keys, prefix)
            hi = bisect.bisect_left(keys, prefix + "\U0010ffff") if prefix else len(keys)
            try:
                layout = Array(self.store, path=path, read_only=True).layout
            except Exception as e:  # noqa: BLE001 - bad metadata: reported, not verified
                fmt = _format(self.store, path) or 2
                self.report("metadata", nodes.metadata_key(path, fmt, "array"), _message(e))
                continue
            own = [k for k in keys[lo:hi] if not _inside_other(k, prefix, array_set)]
            # (a shrink interrupted after its new shape was written records its trim:
            # the chunks past the shape are its leftovers, which the next resize or append
            # deletes before it changes anything; no damage)
            pending = prefix + MARKER_NAME in own
            plans.append((layout, self.classify(layout, own, pending)))
            self.arrays += 1
        self.progress.total(sum(len(stored) for _, stored in plans))
        for layout, stored in plans:
            self.check(layout, stored)


def _inside_other(key, prefix, arrays):
    # A key under a deeper array belongs to that array (only in unusual hierarchies).
    rest = key[len(prefix):]
    parts = rest.split("/")
    for i in range(1, len(parts)):
        if _join(prefix.rstrip("/"), "/".join(parts[:i])) in arrays:
            return True
    return False


class _VerifyProgress(Progress):
    def __init__(self, enabled):
        # stored objects: chunks, or whole shards of a sharded array (the summary line
        # counts inner chunks)
        super().__init__(enabled, total=None, desc="verify", unit="object")

    def total(self, n):
        if self._bar is not None:
            self._bar.total = n
            self._bar.refresh()


def _check_consolidated(v, store, mkey, keys):
    """Report a .zmetadata whose documents differ from the ones in the store (stale)."""
    import json
    base = mkey[: -len(".zmetadata")].rstrip("/")
    prefix = base + "/" if base else ""
    try:
        meta = json.loads(store[mkey])["metadata"]
        if not isinstance(meta, dict):
            raise ValueError("'metadata' is not an object")
    except Exception as e:  # noqa: BLE001
        v.report("metadata", mkey, f"not a consolidated metadata document: {_message(e)}")
        return

    def same(key, recorded):
        try:
            return (json.dumps(json.loads(store[key]), sort_keys=True)
                    == json.dumps(recorded, sort_keys=True))
        except Exception:  # noqa: BLE001 - the invalid document is reported elsewhere
            return True
    actual = {k[len(prefix):]: k for k in keys if k.startswith(prefix)
              and k.rsplit("/", 1)[-1] in (".zarray", ".zgroup", ".zattrs")}
    _report_stale(v, "consolidated", mkey, actual, meta, same)


def _check_consolidated_v3(v, store, key, keys, members):
    """Report a v3 group's consolidated_metadata that differs from its members' zarr.json."""
    from chunkstore.metadata.v3 import parse_node_metadata_v3
    base = key[: -len("zarr.json")].rstrip("/")
    prefix = base + "/" if base else ""
    actual = {k[len(prefix): -len("/zarr.json")]: k for k in keys
              if k.startswith(prefix) and k != key and k.rsplit("/", 1)[-1] == "zarr.json"}

    def same(member_key, recorded):
        try:
            node = parse_node_metadata_v3(store[member_key], member_key)
        except Exception:  # noqa: BLE001 - the invalid document is reported elsewhere
            return True
        if isinstance(node, dict) != isinstance(recorded, dict):
            return False
        if isinstance(node, dict):
            return node.get("attributes") == recorded.get("attributes")
        return node == recorded  # ArrayMetadataV3: the encoded documents

    _report_stale(v, "consolidated v3", key, actual, members, same)


def _report_stale(v, kind, key, actual, recorded, same):
    """Report the consolidated document at key if it is stale: a member document in the store
    (actual: relative path -> key) missing from it, one it records (recorded: relative path ->
    document) no longer in the store, or one that differs (same(key, document) is false)."""
    diffs = []
    for rel in sorted(set(actual) | set(recorded)):
        if rel not in recorded:
            diffs.append(f"{rel!r} is missing")
        elif rel not in actual:
            diffs.append(f"{rel!r} is not in the store")
        elif not same(actual[rel], recorded[rel]):
            diffs.append(f"{rel!r} differs")
    if diffs:
        more = f" (and {len(diffs) - 3} more)" if len(diffs) > 3 else ""
        v.report(kind, key, f"{', '.join(diffs[:3])}{more}; run 'chunkstore consolidate' to "
                 f"rewrite it")


def _stray_temporaries(store, path):
    """Temporary files that killed writers left in a directory or next to a zip store."""
    fn = protocol.stray_temporaries(store)
    if fn is None:
        return []
    return fn(path)


def cmd_verify(args):
    """``chunkstore verify``: check the metadata and decode every stored chunk at ``--path``.

    Prints each problem found and a summary line. Returns 0 when everything is sound, 1 when any
    problem was found, 2 when sound but stray temporary files of interrupted writes are left
    (``--remove-strays`` deletes those older than ``--older-than`` seconds).
    """
    from chunkstore.metadata.v2 import parse_attrs, parse_group_metadata
    from chunkstore.metadata.v3 import ArrayMetadataV3, parse_node_metadata_v3
    path = _norm(args.path)
    with _stores((args.store, "r", _options(args))) as (store,):
        kind = _kind(store, path)
        if kind is None:
            _open_node(store, args.store, path)
        keys = sorted(keys_under(store, path))
        if kind == "array":
            arrays = {path}
        else:
            arrays = {k[: -len(".zarray")].rstrip("/") for k in keys
                      if k.rsplit("/", 1)[-1] == ".zarray"}
        with _VerifyProgress(_progress_enabled(args)) as bar:
            v = Verifier(store, bar)
            for k in keys:
                name = k.rsplit("/", 1)[-1]
                node_path = k[: -len(name)].rstrip("/")
                try:
                    if name == ".zgroup":
                        parse_group_metadata(store[k], k)
                    elif name == ".zattrs":
                        parse_attrs(store[k], k)
                    elif name == "zarr.json":
                        node = parse_node_metadata_v3(store[k], k)
                        if isinstance(node, ArrayMetadataV3):
                            if kind != "array":
                                arrays.add(node_path)
                        elif node.get("consolidated_metadata") is not None:
                            _check_consolidated_v3(v, store, k, keys,
                                                   node["consolidated_metadata"])
                except Exception as e:  # noqa: BLE001
                    v.report("metadata", k, _message(e))
                    if name == "zarr.json":
                        v.bad_metadata.add(node_path)
                if name == ".zmetadata":
                    _check_consolidated(v, store, k, keys)
            v.run(sorted(arrays), keys)
        strays = _stray_temporaries(store, path)
    found = {k: n for k, n in v.problems.items() if n}
    head = (f"verified {_plural(v.arrays, 'array')}, {_plural(v.chunks, 'chunk')} in "
            f"{_where(args.store, path)}")
    strays = _remove_strays(strays, args) if args.remove_strays else strays
    for p in strays:  # harmless to readers, so not a failure; but worth deleting
        print(f"stray temporary file of an interrupted write: {p}")
    for apath, n in v.trim_leftovers.items():  # harmless too: recorded, completed later
        print(f"array {apath or '/'!r}: a shrink, append or fill value change was interrupted, its trim is pending "
              f"({_plural(n, 'chunk key')} past the shape, never read): the next resize or "
              f"append completes it (z.resize(z.shape) does now)")
    if found:
        names = {"metadata": "invalid metadata", "consolidated": "stale .zmetadata",
                 "consolidated v3": "stale consolidated metadata",
                 "corrupt shard": "corrupt shard index"}
        print(f"{head}: FAILED, " + ", ".join(f"{n} {names.get(k, k)}"
                                              for k, n in found.items()))
        return 1
    if strays or v.trim_leftovers:
        left = [_plural(len(strays), "stray temporary file")] if strays else []
        left += [_plural(len(v.trim_leftovers), "pending trim")] if v.trim_leftovers else []
        print(f"{head}: OK, {' and '.join(left)} left"
              + (" (--remove-strays deletes the strays)" if strays else ""))
        return 2
    print(f"{head}: OK")
    return 0


def _remove_strays(strays: list, args) -> list:
    """Delete the stray temporary files older than ``--older-than`` seconds; the ones left."""
    import os
    import time
    left = []
    now = time.time()
    for p in strays:
        try:
            age = now - os.stat(p).st_mtime
        except FileNotFoundError:
            continue  # renamed or removed meanwhile
        if age < args.older_than:
            print(f"kept stray temporary file {p}: {age:.0f} s old, a writer may still be "
                  f"writing it (--older-than {args.older_than:g})")
            left.append(p)
            continue
        try:
            os.remove(p)
        except FileNotFoundError:
            continue
        print(f"removed stray temporary file of an interrupted write: {p}")
    return left


