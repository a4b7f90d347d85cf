"""A view of a sharded array with a smaller shape (``view(shape=...)``) whose grid ends inside
a shard: its writes keep the array's inner chunks past the view's end. They were dropped: a
write covering every inner chunk the view sees in a shard replaced the shard without reading
it, and one that left them all fill deleted it."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs


@pytest.mark.parametrize("index_location", ["start", "end"])
@pytest.mark.parametrize("wec", [False, True])
def test_a_smaller_views_write_keeps_the_shards_chunks_past_its_end(index_location, wec):
    z = cs.create_array({}, shape=(8,), chunks=(2,), dtype="i4", fill_value=0,
                        shards={"shape": (4,), "index_location": index_location},
                        config={"write_empty_chunks": wec})
    want = np.arange(1, 9, dtype="i4")
    z[:] = want
    v = z.view(shape=(5,))
    v[4] = 100             # the only element of shard 1 the view sees
    want[4] = 100
    np.testing.assert_array_equal(z[:], want)
    v[4] = 0               # the view's part of the shard all fill
    want[4] = 0
    np.testing.assert_array_equal(z[:], want)
    v[:] = 0               # every chunk the view sees, all fill
    want[:5] = 0
    np.testing.assert_array_equal(z[:], want)
    np.testing.assert_array_equal(cs.open_array(z.store, mode="r")[:], want)


def test_a_smaller_2d_views_write_keeps_the_edge_rows_and_columns():
    z = cs.create_array({}, shape=(7, 7), chunks=(2, 2), shards=(4, 4), dtype="i4",
                        fill_value=0)
    want = np.arange(1, 50, dtype="i4").reshape(7, 7)
    z[...] = want
    v = z.view(shape=(5, 5))
    v[4:, :] = -1
    v[:, 4] = -2
    want[4:5, :5] = -1
    want[:5, 4] = -2
    np.testing.assert_array_equal(z[...], want)
