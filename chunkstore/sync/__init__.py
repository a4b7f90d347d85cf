"""Locks for many writers: byte-range region locks (:mod:`chunkstore.sync.locking`) and the
Thread/ProcessSynchronizer built on them (:mod:`chunkstore.sync.synchronizers`)."""

from chunkstore.sync.synchronizers import ProcessSynchronizer, ThreadSynchronizer

__all__ = ["ProcessSynchronizer", "ThreadSynchronizer"]
