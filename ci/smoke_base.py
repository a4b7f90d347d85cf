"""Smoke test of a base install (`pip install .`, no extras).

Run by ci/test.sh in a second venv that holds only chunkstore and its declared runtime
dependencies, so that a feature which silently needs an optional package (as crc32c once
did) fails CI. Covers every feature that needs no extra: Zarr v2, v3, sharding, crc32c,
every store without an extra, and the CLI without progress bars (no tqdm, no h5py).
"""
import contextlib
import importlib.util
import io
import os
import sys
import tempfile
import warnings

import numpy as np

warnings.simplefilter("error", DeprecationWarning)  # e.g. numcodecs' crc32c deprecation

import chunkstore as cs  # noqa: E402
from chunkstore.cli import main as cli  # noqa: E402

EXTRAS = ["tqdm", "h5py", "lmdb", "s3fs", "zarr", "tensorstore", "xarray", "dask", "crc32c"]


def check_no_extras():
    present = [m for m in EXTRAS if importlib.util.find_spec(m) is not None]
    assert not present, f"the base venv holds optional packages: {present}"


def roundtrip(store, zarr_format=2, **kw):
    data = np.arange(20 * 30, dtype="f4").reshape(20, 30)
    z = cs.create_array(store, shape=data.shape, chunks=(8, 8), dtype="f4",
                        zarr_format=zarr_format, **kw)
    z[:] = data
    z[3:5, 7] = -1
    data[3:5, 7] = -1
    if isinstance(store, str) and store.endswith(".zip"):
        z.store.close()  # a zip archive is written out on close
    back = cs.open(store, mode="r")
    np.testing.assert_array_equal(back[:], data)
    return back


def run_cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli(list(argv))
    assert status == 0, (argv, status, out.getvalue())
    return out.getvalue()


def main():
    if "--allow-extras" not in sys.argv:  # for trying the script in a full venv
        check_no_extras()
    with tempfile.TemporaryDirectory() as tmp:
        p = lambda name: os.path.join(tmp, name)  # noqa: E731
        # Zarr v2 on every store without an extra.
        for store in [cs.MemoryStore(), p("dir.zarr"), cs.NestedDirectoryStore(p("nested.zarr")),
                      p("a.zip"), p("a.sqlite"), "memory://smoke/v2.zarr"]:
            assert roundtrip(store).shape == (20, 30), store
        # Zarr v3, sharded v3, crc32c.
        roundtrip(p("v3.zarr"), zarr_format=3)
        roundtrip(p("sharded.zarr"), zarr_format=3, shards=(16, 16))
        import numcodecs
        z = cs.create_array(p("crc.zarr"), shape=(10,), chunks=(5,), dtype="i4",
                            compressors=[numcodecs.Zstd(), numcodecs.CRC32C()])
        z[:] = np.arange(10)
        np.testing.assert_array_equal(cs.open(p("crc.zarr"), mode="r")[:], np.arange(10))
        z2 = cs.open_array(p("crc2.zarr"), mode="w", shape=(10,), chunks=(5,), dtype="i4",
                           filters=[numcodecs.CRC32C()])
        z2[:] = 7
        assert (cs.open(p("crc2.zarr"), mode="r")[:] == 7).all()
        # Groups.
        g = cs.group(p("g.zarr"))
        g.create_group("sub").zeros("x", shape=(4,), chunks=(2,))
        assert list(cs.open_group(p("g.zarr"), mode="r")["sub"].array_keys()) == ["x"]
        # The CLI, without progress bars (no tqdm here).
        assert "sub" in run_cli("tree", p("g.zarr"))
        run_cli("info", p("v3.zarr"))
        run_cli("ls", "-r", p("g.zarr"))
        run_cli("cp", "--no-progress", p("dir.zarr"), p("copy.zarr"), "--zarr-format", "3",
                "--shards", "16,16")
        np.testing.assert_array_equal(cs.open(p("copy.zarr"), mode="r")[:],
                                      cs.open(p("dir.zarr"), mode="r")[:])
        run_cli("verify", "--no-progress", p("copy.zarr"))
        run_cli("verify", "--no-progress", p("crc.zarr"))
        run_cli("cp", "--no-progress", p("dir.zarr"), p("ck.zarr"), "--zarr-format", "3",
                "--checksum")
        run_cli("verify", "--no-progress", p("ck.zarr"))
        np.save(p("x.npy"), np.arange(12).reshape(3, 4))
        run_cli("convert", "--no-progress", p("x.npy"), p("conv.zarr"))
        np.testing.assert_array_equal(cs.open(p("conv.zarr"), mode="r")[:],
                                      np.arange(12).reshape(3, 4))
        run_cli("consolidate", p("g.zarr"))
        run_cli("rm", "-f", "--path", "sub", p("g.zarr"))
        assert "sub" not in cs.open_group(p("g.zarr"), mode="r")
    print("base-install smoke test: OK")


if __name__ == "__main__":
    sys.exit(main())
