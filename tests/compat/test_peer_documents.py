"""Metadata documents other writers made, rewritten by chunkstore (resize, append, a new
fill value): what chunkstore does not change stays as the writer spelled it, so the writer
still opens the array; and spellings peers write that chunkstore reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import MetadataError


def _ts_open(path, driver):
    import tensorstore as ts
    return ts.open({"driver": driver, "kvstore": {"driver": "file", "path": path}}).result()


def _rewrite(z, change):
    """A rewrite of z's metadata document: a resize to 6, an append of 2, a new fill value."""
    if change == "resize":
        z.resize(6)
    elif change == "append":
        z.append(np.array([4, 5], z.dtype))
    else:
        z.fill_value = 3


@pytest.mark.parametrize("change", ["resize", "append", "fill"])
def test_a_v2_compressor_document_is_written_back_as_tensorstore_wrote_it(tmp_path, change):
    """tensorstore writes {"id": "zstd", "level": 3} and refuses "checksum" in it; a resize
    or append through chunkstore wrote numcodecs' configuration ({"checksum": false, ...}),
    and tensorstore could no longer open the array it had made."""
    import tensorstore as ts
    p = str(tmp_path / "a.zarr")
    t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": p}, "create": True,
                 "metadata": {"shape": [4], "chunks": [2], "dtype": "<i2",
                              "compressor": {"id": "zstd", "level": 3}}}).result()
    t.write(np.arange(4, dtype="i2")).result()
    before = json.load(open(p + "/.zarray"))
    _rewrite(cs.open_array(p, mode="r+"), change)
    after = json.load(open(p + "/.zarray"))
    assert after["compressor"] == before["compressor"] == {"id": "zstd", "level": 3}
    got = _ts_open(p, "zarr").read().result()
    assert got[:4].tolist() == [0, 1, 2, 3]


def test_numcodecs_configuration_is_written_for_codecs_given_as_objects(tmp_path):
    """A codec given as a numcodecs object is written as its configuration (zarr-python 2's
    form), and a document read is written back only as it was read."""
    import numcodecs
    z = cs.create(shape=(4,), chunks=(2,), dtype="i2", store=str(tmp_path / "b"),
                  compressor=numcodecs.GZip(level=3), zarr_format=2)
    z.resize(6)
    assert json.load(open(tmp_path / "b" / ".zarray"))["compressor"] == {"id": "gzip",
                                                                        "level": 3}


@pytest.mark.parametrize("change", ["resize", "append", "fill"])
def test_v3_extension_fields_survive_a_rewrite(tmp_path, change):
    """A zarr.json extension member with must_understand: false is kept through every
    rewrite of the document, as zarr-python 3 keeps it (a resize dropped it)."""
    p = str(tmp_path / "a.zarr")
    cs.create_array(p, shape=(4,), chunks=(2,), dtype="i4")
    doc = json.load(open(p + "/zarr.json"))
    doc["my_ext"] = {"must_understand": False, "x": [1, 2]}
    json.dump(doc, open(p + "/zarr.json", "w"))
    _rewrite(cs.open_array(p, mode="r+"), change)
    after = json.load(open(p + "/zarr.json"))
    assert after["my_ext"] == {"must_understand": False, "x": [1, 2]}
    assert after["shape"] == [4 if change == "fill" else 6]
    import zarr
    assert zarr.open_array(p, mode="r").shape == tuple(after["shape"])


def test_a_bfloat16_nan_fill_with_a_payload_reads_as_tensorstore_writes_it(tmp_path):
    """tensorstore writes a NaN fill value with a payload as "0x7fc1" (the Zarr v3 spec's
    hex bits); chunkstore refused the document. Read, kept through a resize, written back
    in that form, and the type's own NaN still written as "NaN"."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import tensorstore as ts
    p = str(tmp_path / "a.zarr")
    ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": p}, "create": True,
             "metadata": {"shape": [2], "data_type": "bfloat16", "fill_value": "0x7fc1",
                          "chunk_grid": {"name": "regular",
                                         "configuration": {"chunk_shape": [2]}}}}).result()
    z = cs.open_array(p, mode="r+")
    assert z[...].view("<u2").tolist() == [0x7fc1, 0x7fc1]
    z.resize(3)
    assert json.load(open(p + "/zarr.json"))["fill_value"] == "0x7fc1"
    assert _ts_open(p, "zarr3").read().result().view("<u2").tolist() == [0x7fc1] * 3
    cs.create_array(p, shape=(2,), chunks=(2,), dtype=ml_dtypes.bfloat16,
                    fill_value=float("nan"), overwrite=True)
    assert json.load(open(p + "/zarr.json"))["fill_value"] == "NaN"


@pytest.mark.parametrize("bad", ["0x7fc", "0x7fcg", "0x_7fc1"])
def test_a_malformed_hex_fill_names_the_document_and_its_store(tmp_path, bad):
    pytest.importorskip("ml_dtypes")
    p = str(tmp_path / "a.zarr")
    cs.create_array(p, shape=(2,), chunks=(2,), dtype="bfloat16", fill_value=0)
    doc = json.load(open(p + "/zarr.json"))
    doc["fill_value"] = bad
    json.dump(doc, open(p + "/zarr.json", "w"))
    with pytest.raises(MetadataError) as e:
        cs.open_array(p)
    assert "'zarr.json' in DirectoryStore(" in str(e.value) and "4 hex digits" in str(e.value)
