"""The ml_dtypes number types (bfloat16, float8, int4...) as tensorstore and zarrs write
them: their Zarr name as the v2 ``dtype`` and the v3 ``data_type``, fill values as numbers.
chunkstore needed ``ml_dtypes`` imported beforehand to read a v2 "bfloat16" array (model
weights are published so), refused tensorstore's numeric fill value, and stored a bfloat16
array it created as raw bytes ("<V2"; v3 ``raw_bytes``) that no write could cast to."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import chunkstore as cs

ml_dtypes = pytest.importorskip("ml_dtypes")
ts = pytest.importorskip("tensorstore")

TYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"]


def _same(got, want):
    """Equal values (int4 by value: tensorstore hands -1 out as 0xff, ml_dtypes as 0x0f;
    floats by their bits, NaN payloads included)."""
    if want.dtype.name == "int4":
        np.testing.assert_array_equal(got.astype(np.int8), want.astype(np.int8))
    else:
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def _values(name, n=6):
    if name == "int4":
        return np.array([3, -2, 7, -8, 0, 1][:n], dtype=ml_dtypes.int4)
    return np.array([1.5, -2.0, 0.25, 3.0, -0.5, 1.0][:n], dtype=getattr(ml_dtypes, name))


def _ts_spec(fmt, path, name, fill):
    if fmt == 2:
        meta = {"shape": [6], "chunks": [4], "dtype": name, "compressor": None,
                "fill_value": fill}
        return {"driver": "zarr", "kvstore": {"driver": "file", "path": path},
                "metadata": meta}
    meta = {"shape": [6], "data_type": name, "fill_value": fill,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}}}
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}, "metadata": meta}


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("fmt", [2, 3])
def test_tensorstore_writes_chunkstore_reads(tmp_path, fmt, name):
    path = str(tmp_path / "t.zarr")
    t = ts.open(_ts_spec(fmt, path, name, 1), create=True).result()
    values = _values(name, 3)
    t[:3] = values
    a = cs.open_array(path, mode="r")
    assert a.dtype == np.dtype(getattr(ml_dtypes, name))
    want = np.concatenate([values, np.ones(3, a.dtype)])  # (the fill value 1 past them)
    _same(a[:], want)


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("fmt", [2, 3])
def test_chunkstore_writes_tensorstore_reads(tmp_path, fmt, name):
    path = str(tmp_path / "c.zarr")
    dtype = np.dtype(getattr(ml_dtypes, name))
    a = cs.create_array(path, shape=(6,), chunks=(4,), dtype=dtype, fill_value=-1,
                        zarr_format=fmt, compressors=None)
    values = _values(name, 3)
    a[:3] = values
    doc = json.loads(open(os.path.join(path, ".zarray" if fmt == 2 else "zarr.json")).read())
    assert doc["dtype" if fmt == 2 else "data_type"] == name
    assert doc["fill_value"] == (-1 if name == "int4" else -1.0)
    got = ts.open({"driver": "zarr" if fmt == 2 else "zarr3",
                   "kvstore": {"driver": "file", "path": path}}).result().read().result()
    want = np.concatenate([values, np.full(3, -1, dtype)])
    _same(got, want)
    _same(cs.open_array(path, mode="r")[:], want)


@pytest.mark.parametrize("fmt", [2, 3])
def test_bfloat16_special_fill_values_and_sharding(tmp_path, fmt):
    path = str(tmp_path / "s.zarr")
    kw = {"shards": (4,)} if fmt == 3 else {}
    a = cs.create_array(path, shape=(6,), chunks=(2,), dtype=ml_dtypes.bfloat16,
                        fill_value=float("nan"), zarr_format=fmt, **kw)
    a[1] = 2.5
    doc = json.loads(open(os.path.join(path, ".zarray" if fmt == 2 else "zarr.json")).read())
    assert doc["fill_value"] == "NaN"
    got = cs.open_array(path, mode="r")[:].astype(np.float32)
    np.testing.assert_array_equal(got, [np.nan, 2.5] + [np.nan] * 4)
    with pytest.raises(ValueError, match="bfloat16"):
        cs.create_array(str(tmp_path / "b.zarr"), shape=(2,), dtype=ml_dtypes.bfloat16,
                        fill_value="abc", zarr_format=fmt)


def test_a_v2_bfloat16_array_opens_without_importing_ml_dtypes_first(tmp_path):
    """np.dtype("bfloat16") works only once ml_dtypes is imported: the document's name now
    imports it (here in a fresh interpreter)."""
    path = str(tmp_path / "w.zarr")
    os.makedirs(path)
    with open(os.path.join(path, ".zarray"), "w") as f:
        json.dump({"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "bfloat16",
                   "fill_value": None, "order": "C", "compressor": None, "filters": None}, f)
    with open(os.path.join(path, "0"), "wb") as f:
        f.write(bytes.fromhex("c03f00c0"))  # 1.5, -2.0
    code = ("import sys, chunkstore as cs; "
            "print(cs.open_array(sys.argv[1], mode='r')[:].astype('f4').tolist())")
    r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[1.5, -2.0]"
