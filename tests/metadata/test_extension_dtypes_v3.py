"""zarr-python 3.1's extension data types in Zarr v3 (null_terminated_bytes, raw_bytes,
fixed_length_utf32, numpy.datetime64, numpy.timedelta64): golden stores written by
zarr-python 3.1 (tests/data/make_zarr3_extension_dtypes.py) read as NumPy expects, and
chunkstore writes the same documents and chunk bytes."""

import json
import os
import shutil

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import MetadataError

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
GOLDEN = os.path.join(DATA, "zarr3_extension_dtypes.zarr")
EXPECTED = dict(np.load(os.path.join(DATA, "zarr3_extension_dtypes.npz")))
NAMES = sorted(EXPECTED)


def _doc(root, name):
    with open(os.path.join(root, name, "zarr.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("name", NAMES)
def test_golden_reads_as_numpy(name):
    a = cs.open_array(GOLDEN, path=name, mode="r")
    want = EXPECTED[name]
    assert a.dtype == want.dtype
    got = a[...]
    np.testing.assert_array_equal(got, want)  # the unwritten last chunk reads as fill
    assert got[-1] == want[-1] or (np.isnat(got[-1]) and np.isnat(want[-1]))
    np.testing.assert_array_equal(a[1:5], want[1:5])


@pytest.mark.parametrize("name", NAMES)
def test_written_like_zarr_python(tmp_path, name):
    gold = _doc(GOLDEN, name)
    src = cs.open_array(GOLDEN, path=name, mode="r")
    out = str(tmp_path / "out.zarr")
    a = cs.create_array(out, shape=(6,), dtype=src.dtype, chunks=(2,),
                        fill_value=src.fill_value)
    a[:4] = EXPECTED[name][:4]
    doc = json.load(open(os.path.join(out, "zarr.json")))
    for key in ("data_type", "fill_value", "codecs", "shape"):
        assert doc[key] == gold[key], key
    for chunk in ("0", "1"):
        with open(os.path.join(GOLDEN, name, "c", chunk), "rb") as f:
            want = f.read()
        with open(os.path.join(out, "c", chunk), "rb") as f:
            assert f.read() == want
    assert not os.path.exists(os.path.join(out, "c", "2"))


@pytest.mark.parametrize("name", NAMES)
def test_zarr_python_reads_what_chunkstore_writes(tmp_path, name):
    zarr = pytest.importorskip("zarr")
    want = EXPECTED[name]
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=want.shape, dtype=want.dtype,
                        chunks=(4,))
    a[...] = want
    z = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")
    np.testing.assert_array_equal(z[...], want)


def test_default_fill_values_are_zarr_pythons(tmp_path):
    for dt, fill in (("S3", b""), ("U2", ""), ("M8[s]", np.datetime64("NaT", "s")),
                     ("m8[ms]", np.timedelta64("NaT", "ms"))):
        a = cs.create_array(str(tmp_path / dt.replace("[", "_").strip("]")), shape=(2,),
                            dtype=dt, chunks=(1,))
        got = a[...]
        if np.dtype(dt).kind in "Mm":
            assert np.isnat(got).all() and np.isnat(a.fill_value)
        else:
            assert (got == fill).all() and a.fill_value == fill


def test_fixed_width_unicode_is_not_variable_length(tmp_path):
    a = cs.create_array(str(tmp_path / "u"), shape=(2,), dtype="U4", chunks=(2,))
    a[...] = ["ab", "wxyz"]
    doc = json.load(open(tmp_path / "u" / "zarr.json"))
    assert doc["data_type"] == {"name": "fixed_length_utf32",
                                "configuration": {"length_bytes": 16}}
    assert a.dtype == np.dtype("U4")
    assert list(a[...]) == ["ab", "wxyz"]


@pytest.mark.parametrize("data_type, words", [
    ({"name": "null_terminated_bytes", "configuration": {"length_bytes": 0}}, "length_bytes"),
    ({"name": "fixed_length_utf32", "configuration": {"length_bytes": 6}}, "multiple of 4"),
    ({"name": "numpy.datetime64", "configuration": {"unit": "fortnight", "scale_factor": 1}},
     "unit"),
    ({"name": "numpy.timedelta64", "configuration": {"unit": "s"}}, "scale_factor"),
    ({"name": "null_terminated_bytes"}, "configuration"),
])
def test_bad_extension_documents_are_named(tmp_path, data_type, words):
    root = tmp_path / "bad.zarr"
    shutil.copytree(os.path.join(GOLDEN, "bytes"), root)
    doc = json.load(open(root / "zarr.json"))
    doc["data_type"] = data_type
    doc["fill_value"] = 0 if "time" in data_type["name"] else ""
    (root / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match=words) as e:
        cs.open_array(str(root), mode="r")
    assert "zarr.json" in str(e.value)


def test_bad_fill_values_are_refused(tmp_path):
    with pytest.raises(ValueError, match="longer|does not fit"):
        cs.create_array(str(tmp_path / "a"), shape=(2,), dtype="U2", fill_value="abc")
    with pytest.raises(ValueError, match="not a"):
        cs.create_array(str(tmp_path / "b"), shape=(2,), dtype="M8[s]",
                        fill_value=np.timedelta64(1, "s"))


# -- variable_length_bytes (zarr-python 3's VariableLengthBytes) ------------------------------

VLEN_GOLDEN = os.path.join(DATA, "zarr3_vlen_bytes.zarr")
VLEN_CASES = {  # as tests/data/make_zarr3_extension_dtypes.py wrote them: values, fill
    "plain": ([b"ab", b"", b"x\x00y", b"\xff" * 9], b"zz"),
    "sharded": ([b"", b"q", b"abc", b"\x00"], b""),
}


@pytest.mark.parametrize("name", sorted(VLEN_CASES))
def test_variable_length_bytes_golden_reads_and_writes_as_zarr_python(tmp_path, name):
    # zarr-python 3's v3 variable_length_bytes arrays could not be opened at all
    values, fill = VLEN_CASES[name]
    want = np.array(values + [fill, fill], dtype=object)
    a = cs.open_array(VLEN_GOLDEN, path=name, mode="r")
    assert a.dtype == object and a.fill_value == fill
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(a.oindex[[5, 0, 2]], want[[5, 0, 2]])
    # written by chunkstore with the same arguments: the same document and chunk bytes
    gold = _doc(VLEN_GOLDEN, name)
    out = str(tmp_path / "out.zarr")
    shards = (4,) if name == "sharded" else None
    w = cs.create_array(out, shape=(6,), dtype="bytes", chunks=(2,), shards=shards,
                        fill_value=None if name == "sharded" else fill)
    w[:4] = np.array(values, dtype=object)
    doc = json.load(open(os.path.join(out, "zarr.json")))
    for key in ("data_type", "fill_value", "codecs", "shape"):
        assert doc[key] == gold[key], key
    for chunk in sorted(os.listdir(os.path.join(VLEN_GOLDEN, name, "c"))):
        with open(os.path.join(VLEN_GOLDEN, name, "c", chunk), "rb") as f:
            wanted = f.read()
        with open(os.path.join(out, "c", chunk), "rb") as f:
            assert f.read() == wanted, chunk
    # kept as variable-length bytes through a resize (the document rewritten)
    w.resize(7)
    assert json.load(open(os.path.join(out, "zarr.json")))["data_type"] == \
        "variable_length_bytes"
    assert cs.open_array(out, mode="r")[6] == fill
    zarr = pytest.importorskip("zarr")
    np.testing.assert_array_equal(zarr.open_array(out, mode="r")[:6], want)


def test_variable_length_bytes_copies_between_formats(tmp_path):
    import numcodecs

    v2 = cs.group(str(tmp_path / "v2"), zarr_format=2)
    a = v2.create_dataset("a", shape=(3,), chunks=(2,), dtype=object,
                          object_codec=numcodecs.VLenBytes())
    a[:] = np.array([b"x", b"", b"\x00"], dtype=object)
    v3 = cs.group(str(tmp_path / "v3"), zarr_format=3)
    cs.copy(a, v3, name="a")
    assert _doc(str(tmp_path / "v3"), "a")["data_type"] == "variable_length_bytes"
    np.testing.assert_array_equal(v3["a"][:], a[:])
    back = cs.group(str(tmp_path / "back"), zarr_format=2)
    cs.copy(v3["a"], back, name="a")
    assert back["a"].filters[0].codec_id == "vlen-bytes"
    np.testing.assert_array_equal(back["a"][:], a[:])
    with pytest.raises(ValueError, match="not bytes"):
        cs.create_array(str(tmp_path / "bad"), shape=(1,), dtype="bytes", fill_value=3)


@pytest.mark.parametrize("dtype, fill, stored", [
    ("S4", b"a\x00", b"a"), ("S4", np.bytes_(b"a\x00"), b"a"), ("U3", "a\x00", "a"),
    ("S2", b"ab", b"ab")])
def test_v3_fixed_width_fill_ending_in_nul_is_the_value_without_it(dtype, fill, stored):
    """NumPy drops trailing NULs, so b"a\\x00" in S4 is b"a": such a fill is taken (as
    zarr-python 3 takes it), where it was refused as not fitting; one too long still is."""
    import chunkstore as cs
    z = cs.create_array({}, shape=(2,), chunks=(2,), dtype=dtype, fill_value=fill)
    assert z.fill_value == stored and z[:].tolist() == [stored] * 2
    with pytest.raises(ValueError, match="does not fit"):
        cs.create_array({}, shape=(2,), chunks=(2,), dtype=dtype,
                        fill_value=fill[:1] * 5 if isinstance(fill, (bytes, str)) else b"xxxxx")


def test_v3_structured_fill_as_raw_bytes_is_padded_or_refused():
    """A structured fill given as bytes: shorter ones are the record padded with zeros (b""
    all zeros, as in v2; it raised IndexError), longer ones are refused (they were cut)."""
    import chunkstore as cs
    dt = [("a", "u1"), ("b", "<f4")]
    z = cs.create_array({}, shape=(2,), chunks=(2,), dtype=dt, fill_value=b"")
    assert z.fill_value.tolist() == (0, 0.0)
    z = cs.create_array({}, shape=(2,), chunks=(2,), dtype=dt, fill_value=b"\x07")
    assert z.fill_value.tolist() == (7, 0.0)
    with pytest.raises(ValueError, match="10 bytes"):
        cs.create_array({}, shape=(2,), chunks=(2,), dtype=dt, fill_value=b"\x01" * 10)
