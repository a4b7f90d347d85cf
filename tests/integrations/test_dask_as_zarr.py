"""dask's own ``to_zarr``/``from_zarr`` with chunkstore in zarr's place
(``sys.modules["zarr"] = chunkstore``, in a subprocess so this session's zarr and dask's
cached version check are untouched), where ci/dask_parity/run.sh found them failing.

chunkstore's version is below 3, so dask takes its zarr-python 2 path: ``zarr.create(...)``
with the keywords given to ``to_zarr``, ``shards=`` among them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import chunkstore as cs

pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")


def test_create_with_shards_and_no_format_writes_zarr_v3(tmp_path):
    """Sharding exists in Zarr v3 only: create(shards=) without zarr_format makes a v3
    array (it raised "sharding needs zarr_format=3"); an explicit zarr_format=2 still
    refuses shards."""
    path = str(tmp_path / "a.zarr")
    z = cs.create(shape=(60, 60), chunks=(3, 3), shards=(18, 18), dtype="f8", store=path)
    assert z.metadata.zarr_format == 3 and z.chunks == (3, 3) and z.shards == (18, 18)
    z[...] = np.arange(3600.0).reshape(60, 60)
    y = zarr.open_array(path, mode="r")
    assert y.metadata.zarr_format == 3 and y.shards == (18, 18) and y.chunks == (3, 3)
    np.testing.assert_array_equal(y[...], np.arange(3600.0).reshape(60, 60))
    assert cs.create(shape=(4,), chunks=(2,), store={}).metadata.zarr_format == 2
    with pytest.raises(ValueError, match="shards= needs zarr_format=3"):
        cs.create(shape=(4,), chunks=(2,), shards=(4,), store={}, zarr_format=2)


def test_create_with_dimension_names_or_codecs_and_no_format_writes_zarr_v3():
    """dimension_names= and codecs= exist in Zarr v3 only: without a format they make a v3
    array (a v2 array was made and the names silently dropped); with zarr_format=2 they are
    refused, as zarr-python 3 refuses them, and nothing is written."""
    z = cs.create(shape=(4, 6), chunks=(2, 3), dimension_names=["y", "x"], store={})
    assert z.metadata.zarr_format == 3 and z.metadata.dimension_names == ("y", "x")
    z = cs.create(shape=(4,), chunks=(2,), store={},
                  codecs=[{"name": "bytes", "configuration": {"endian": "big"}}])
    assert z.metadata.zarr_format == 3 and z.metadata.codecs[0]["name"] == "bytes"
    for kw in (dict(dimension_names=["x"]),
               dict(codecs=[{"name": "bytes", "configuration": {"endian": "little"}}])):
        store: dict = {}
        with pytest.raises(ValueError, match=f"{next(iter(kw))}= needs zarr_format=3"):
            cs.create(shape=(4,), chunks=(2,), store=store, zarr_format=2, **kw)
        assert store == {}


SWAPPED = textwrap.dedent("""
    import json, sys
    import numpy as np
    import chunkstore
    sys.modules["zarr"] = chunkstore
    sys.modules["zarr.storage"] = chunkstore.storage
    import dask.array as da
    import zarr
    assert zarr is chunkstore

    path = sys.argv[1]
    a = da.arange(3600, chunks=600).reshape(60, 60).rechunk((3, 3))
    # dask test_zarr_sharding_roundtrip: to_zarr(path, shards=) then overwrite (mode="w")
    a.to_zarr(path, shards=(18, 18))
    a2 = da.from_zarr(path)
    assert a2.chunks == a.chunks
    np.testing.assert_array_equal(a2.compute(), np.arange(3600).reshape(60, 60))
    (a + 1).to_zarr(path, mode="w", shards=(12, 12))
    z = zarr.open_array(path, mode="r")
    print(json.dumps({"zarr_format": z.metadata.zarr_format, "chunks": z.chunks,
                      "shards": z.shards}))
""")


def test_dask_to_zarr_with_shards_on_chunkstore_as_zarr(tmp_path):
    """dask's to_zarr(url, shards=) passes shards= to zarr.create without a zarr_format."""
    script = tmp_path / "swapped.py"
    script.write_text(SWAPPED)
    path = str(tmp_path / "a.zarr")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, str(script), path], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"zarr_format": 3, "chunks": [3, 3], "shards": [12, 12]}
    z = zarr.open_array(path, mode="r")  # zarr-python reads what dask wrote through chunkstore
    assert z.shards == (12, 12) and z.chunks == (3, 3)
    np.testing.assert_array_equal(z[...], np.arange(3600).reshape(60, 60) + 1)
