"""ChunkEngine: one array handle's engine, its state and both of its paths.

A read goes plan -> fetch -> decode/merge (:mod:`chunkstore.engine.read`), a write plan ->
build or read-modify-write -> encode -> store (:mod:`chunkstore.engine.write`); both work on
the state :class:`~chunkstore.engine.chunk_io.EngineState` declares and sets when it adopts
metadata. An :class:`~chunkstore.engine.array.Array` holds one engine (``Array._engine``) and
asks it for every chunk; a view is an Array whose engine has metadata overrides.
"""

from __future__ import annotations

from chunkstore.engine.write import WritePath

__all__ = ["ChunkEngine"]


class ChunkEngine(WritePath):
    """The engine of one array handle: :meth:`read` and :meth:`write` of selections
    (normalized by :mod:`chunkstore.engine.indexing`), the locks (:meth:`locked`,
    :meth:`exclusive`), metadata (:meth:`load_metadata`, :meth:`refresh`,
    :meth:`write_metadata`) and what resize and append need (:meth:`trim_plan`,
    :meth:`trim_chunks`, :meth:`roll_back_append`). Its state is
    :class:`~chunkstore.engine.chunk_io.EngineState`'s (same constructor)."""
