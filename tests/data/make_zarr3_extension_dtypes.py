"""Writes tests/data/zarr3_extension_dtypes.zarr with zarr-python 3.1 (run once, by hand:
`python tests/data/make_zarr3_extension_dtypes.py` in an environment with zarr 3.1), and the
expected values in zarr3_extension_dtypes.npz. Each array has chunks of 2 along the first
dimension and its last chunk left unwritten (read as the fill value). Also
zarr3_vlen_bytes.zarr: variable_length_bytes arrays (VLEN_BYTES below; object values, so
the test holds them), plain and sharded."""

import os
import shutil
import warnings

import numpy as np
import zarr

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {  # name: (values, fill_value)
    "bytes": (np.array([b"ab", b"abcdef", b"", b"x\x00y"], dtype="S6"), b"ab"),
    "utf32": (np.array(["a", "xyz", "", "\u00e9\u4e2d"], dtype="U3"), "x"),
    "raw_bytes": (np.array([b"ab\x00", b"\x00\x00\x01", b"xyz", b"\xff\x00\xfe"], dtype="V3"),
                  b"\x01\x02\x03"),
    "datetime_ns": (np.array([0, 1, -2, 3], dtype="i8").astype("M8[ns]"), None),
    "datetime_days": (np.array(["2000-01-01", "1969-12-31", "NaT", "2026-11-26"],
                               dtype="M8[D]"), None),
    "datetime_10s": (np.array([1, 2, 3, 4], dtype="i8").astype("M8[10s]"), None),
    "timedelta_s": (np.array([5, -6, 7, 8], dtype="m8[s]"), np.timedelta64(1, "s")),
}

#: variable_length_bytes: (values, fill_value, shards)
VLEN_BYTES = {
    "plain": ([b"ab", b"", b"x\x00y", b"\xff" * 9], b"zz", None),
    "sharded": ([b"", b"q", b"abc", b"\x00"], None, (4,)),
}

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    out = os.path.join(HERE, "zarr3_extension_dtypes.zarr")
    shutil.rmtree(out, ignore_errors=True)
    root = zarr.open_group(out, mode="w", zarr_format=3)
    expected = {}
    for name, (values, fill) in CASES.items():
        a = root.create_array(name, shape=(6,), dtype=values.dtype, chunks=(2,),
                              fill_value=fill)
        a[:4] = values
        full = np.full(6, a.fill_value, dtype=values.dtype)
        full[:4] = values
        expected[name] = full
    np.savez(os.path.join(HERE, "zarr3_extension_dtypes.npz"), **expected)
    from zarr.core.dtype import VariableLengthBytes
    out = os.path.join(HERE, "zarr3_vlen_bytes.zarr")
    shutil.rmtree(out, ignore_errors=True)
    root = zarr.open_group(out, mode="w", zarr_format=3)
    for name, (values, fill, shards) in VLEN_BYTES.items():
        a = root.create_array(name, shape=(6,), dtype=VariableLengthBytes(), chunks=(2,),
                              shards=shards, fill_value=fill)
        a[:4] = np.array(values, dtype=object)
    print("zarr", zarr.__version__)
