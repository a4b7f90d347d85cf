"""``ShardingCodec`` and ``ShardingCodecIndexLocation`` under the codec's v3 name; the class
(the public value and the codec that reads and writes shards) is defined in
``chunkstore.codecs.sharding`` (zarr-python 3's module name)."""

from chunkstore.codecs.sharding import ShardingCodec, ShardingCodecIndexLocation

__all__ = ["ShardingCodec", "ShardingCodecIndexLocation"]
