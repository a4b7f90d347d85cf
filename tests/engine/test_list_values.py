"""Values given as lists convert with the array's dtype, as NumPy's ``np.array(list, dtype)``
does, wherever they go in: ``append``, ``array()``, and writes by a key with new axes beside
index arrays. Converted as they were first (NumPy 2 makes ``[2**64 - 1, 5]`` float64 and
``[300]`` int64), they lost values or wrapped in the cast to the array's dtype: 0 stored for
2**64 - 1, 44 for 300, without an error. NumPy is the oracle."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs

_LAYOUTS = [dict(zarr_format=2), dict(zarr_format=3), dict(zarr_format=3, shards=(4,))]
_CASES = [("u8", [2**64 - 1, 2**53 + 1]), ("i8", [2**63 - 1, -(2**63)]),
          ("i1", [300, 1]), ("u1", [-1, 2])]


def _numpy(dtype, values):
    try:
        return np.array(values, dtype=dtype), None
    except (OverflowError, ValueError) as e:
        return None, e


def _array(kw, dtype, n=4):
    chunks = (2,)
    return cs.create_array(cs.MemoryStore(), shape=(n,), chunks=chunks, dtype=dtype,
                           fill_value=0, **kw)


@pytest.mark.parametrize("kw", _LAYOUTS)
@pytest.mark.parametrize("dtype,values", _CASES)
def test_append_of_a_list(kw, dtype, values):
    z = _array(kw, dtype)
    want, error = _numpy(dtype, values)
    if error is not None:
        with pytest.raises((OverflowError, ValueError), match="array '/'"):
            z.append(values)
        assert z.shape == (4,)
        np.testing.assert_array_equal(z[:], np.zeros(4, dtype))
        return
    z.append(values)
    np.testing.assert_array_equal(z[4:], want)


@pytest.mark.parametrize("dtype,values", _CASES)
def test_array_of_a_list(dtype, values):
    want, error = _numpy(dtype, values)
    for make in (lambda: cs.array(values, dtype=dtype, store=cs.MemoryStore()),
                 lambda: cs.group(store=cs.MemoryStore()).array("x", values, dtype=dtype)):
        if error is not None:
            with pytest.raises(ValueError, match="cannot store the data in array"):
                make()
        else:
            np.testing.assert_array_equal(make()[:], want)


@pytest.mark.parametrize("kw", _LAYOUTS)
@pytest.mark.parametrize("dtype,values", _CASES)
def test_a_key_with_new_axes_beside_an_index_array(kw, dtype, values):
    z = _array(kw, dtype)
    model = np.zeros(4, dtype)
    nested = [[v] for v in values]
    idx = np.array([1, 2])
    try:
        model[idx, None] = nested
    except (OverflowError, ValueError):
        with pytest.raises((OverflowError, ValueError), match="array '/'"):
            z[idx, None] = nested
        np.testing.assert_array_equal(z[:], np.zeros(4, dtype))
        return
    z[idx, None] = nested
    np.testing.assert_array_equal(z[:], model)


def test_new_axes_write_of_a_shape_that_does_not_broadcast_names_the_array():
    z = _array(dict(zarr_format=3), "i4")
    with pytest.raises(ValueError, match=r"broadcast.*array '/'"):
        z[np.array([1, 2]), None] = [[1, 2, 3]]


def test_a_structured_append_of_tuples():
    dt = np.dtype([("a", "i4"), ("b", "f8")])
    z = cs.create_array(cs.MemoryStore(), shape=(0,), chunks=(2,), dtype=dt, zarr_format=2)
    z.append([(1, 0.5), (2, 1.5)])
    np.testing.assert_array_equal(z[:], np.array([(1, 0.5), (2, 1.5)], dtype=dt))


@pytest.mark.parametrize("index", [np.timedelta64(1), np.timedelta64(1, "ns"),
                                   np.timedelta64(1, "D")])
def test_a_timedelta_is_no_index(index):
    """np.timedelta64 is an np.signedinteger: its count selected a row (in any unit), and a
    write through it landed there. NumPy refuses it as an index."""
    z = cs.array(np.arange(4), chunks=(2,), store=cs.MemoryStore())
    with pytest.raises(IndexError):
        np.arange(4)[index]
    for get in (lambda: z[index], lambda: z.oindex[index], lambda: z.blocks[index]):
        with pytest.raises(IndexError, match="array '/'"):
            get()
    with pytest.raises(IndexError):
        z[index] = 99
    np.testing.assert_array_equal(z[:], np.arange(4))


@pytest.mark.parametrize("out", [[0, 0], memoryview(bytearray(16)), 3])
def test_out_that_is_no_ndarray_is_a_type_error(out):
    z = cs.array(np.arange(4), chunks=(2,), store=cs.MemoryStore())
    with pytest.raises(TypeError, match="out must be a numpy array"):
        z.get_basic_selection(slice(0, 2), out=out)


def test_array_of_strings_with_none_and_of_a_number_scalar():
    """array() converts numbers by the dtype only: a list of str with None under dtype=str
    stores '' for None, as the write and zarr-python do ('None' after a conversion by
    NumPy's U dtype); a Python number that does not fit is refused (300 into i1 was 44)."""
    for dtype, want in ((str, ["a", ""]), ("bytes", [b"a", b""])):
        values = ["a", None] if dtype is str else [b"a", None]
        assert cs.array(values, dtype=dtype, store=cs.MemoryStore())[:].tolist() == want
    with pytest.raises(ValueError, match="cannot store the data in array '/'"):
        cs.array(300, dtype="i1", store=cs.MemoryStore())
    assert cs.array(2**64 - 1, dtype="u8", store=cs.MemoryStore())[()] == 2**64 - 1


def test_array_of_a_numpy_scalar_that_does_not_fit():
    """A NumPy scalar converts by the dtype as a Python number does (np.int64(300) into i1
    was stored as 44, np.complex128(1+2j) into f8 as 1.0)."""
    with pytest.raises(ValueError, match="cannot store the data in array '/'"):
        cs.array(np.int64(300), dtype="i1", store=cs.MemoryStore())
    assert cs.array(np.int64(3), dtype="i1", store=cs.MemoryStore())[()] == 3


def test_a_bad_out_buffer_names_the_array():
    z = cs.create_array(cs.MemoryStore(), name="arr", shape=(10, 6), chunks=(2, 2),
                        dtype="i4", fill_value=-1, zarr_format=3)
    ro = np.zeros((10, 6), "i4")
    ro.flags.writeable = False
    for out, kind in ((np.zeros((10, 6), "f8"), "dtype"), (np.zeros((6, 10), "i4"), "shape"),
                      (ro, "read-only"), ([0] * 60, "numpy array")):
        with pytest.raises((ValueError, TypeError), match=f"{kind}.*array '/arr'"):
            z.get_basic_selection(..., out=out)


def test_objects_that_are_integers_by_index_select_as_numpy():
    """An object with __index__ alone (not an int subclass) is an index to NumPy; it was an
    IndexError here."""
    class I:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    a = np.arange(12).reshape(3, 4)
    z = cs.array(a, chunks=(2, 2), store={})
    np.testing.assert_array_equal(z[I(1)], a[I(1)])
    assert z[I(1), I(-1)] == a[I(1), I(-1)]
    np.testing.assert_array_equal(z.oindex[I(2), [0, 3]], a[2, [0, 3]])
    np.testing.assert_array_equal(z[I(0):I(2), I(1)], a[0:2, 1])
    z[I(0), I(0)] = 99
    assert z[0, 0] == 99
    with pytest.raises(IndexError, match="out of bounds for dimension 0"):
        z[I(5)]
