"""Checks to_chunkstore makes before it changes anything: times that the units (or dtype)
of the stored variable they go into cannot hold are refused, not stored as wrong values;
encodings only array creation rejects are found before mode "w" clears the group or any
array is created; Zarr v2's ``fill_value`` encoding is refused as xarray refuses it; values a
stored integer, float, bool or real array would hold wrongly, and strings into numbers, are
refused; a refused write creates no group; errors name the variable and the store."""

import os
import warnings

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")

from chunkstore.xarray import open_dataset, to_chunkstore  # noqa: E402


def _snapshot(path):
    """Every file under path and its bytes."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# ------------------------------------------------------------------ times and stored units
@pytest.mark.parametrize("fmt", [2, 3])
def test_appended_times_the_stored_units_cannot_hold_are_refused(tmp_path, fmt):
    path = str(tmp_path / "t.zarr")
    t = pd.date_range("2026-01-01", periods=6, freq="h")  # stored as "hours since ..."
    _quiet(to_chunkstore, xr.Dataset({"v": ("time", np.arange(6.0))}, coords={"time": t}),
           path, zarr_format=fmt)
    before = _snapshot(path)
    more = xr.Dataset({"v": ("time", [6.0])},
                      coords={"time": pd.DatetimeIndex(["2026-01-01 06:30"])})
    with pytest.raises(ValueError, match="'time'.*units"):
        _quiet(to_chunkstore, more, path, append_dim="time")
    assert _snapshot(path) == before
    # times the units hold are appended (the stored units spell the reference date in
    # full, "hours since 2026-01-01 00:00:00"; the encoder writes it shorter)
    ok = xr.Dataset({"v": ("time", [6.0])},
                    coords={"time": pd.DatetimeIndex(["2026-01-01 07:00"])})
    _quiet(to_chunkstore, ok, path, append_dim="time")
    got = _quiet(open_dataset, path).time.values
    np.testing.assert_array_equal(got, np.append(t.values, ok.time.values))


@pytest.mark.parametrize("fmt", [2, 3])
def test_region_written_times_finer_than_the_stored_units_are_refused(tmp_path, fmt):
    path = str(tmp_path / "r.zarr")
    t = pd.date_range("2026-01-01", periods=6, freq="D")
    _quiet(to_chunkstore, xr.Dataset({"ev": ("time", t)}, coords={"time": t}), path,
           zarr_format=fmt, encoding={"ev": {"units": "days since 2026-01-01", "dtype": "i4"}})
    before = _snapshot(path)
    patch = xr.Dataset({"ev": ("time", t[2:4] + pd.Timedelta("5h"))})
    with pytest.raises(ValueError, match="'ev'.*units"):
        _quiet(to_chunkstore, patch, path, region={"time": slice(2, 4)})
    assert _snapshot(path) == before
    patch = xr.Dataset({"ev": ("time", t[2:4] + pd.Timedelta("2D"))})  # whole days: fine
    _quiet(to_chunkstore, patch, path, region={"time": slice(2, 4)})
    np.testing.assert_array_equal(_quiet(open_dataset, path).ev.values[2:4],
                                  patch.ev.values)


@pytest.mark.parametrize("fmt", [2, 3])
def test_times_that_overflow_the_stored_integer_dtype_are_refused(tmp_path, fmt):
    path = str(tmp_path / "o.zarr")
    t = pd.DatetimeIndex(["2000-01-01", "2001-01-01"])
    _quiet(to_chunkstore, xr.Dataset({"ev": ("x", t)}), path, zarr_format=fmt,
           encoding={"ev": {"units": "seconds since 1970-01-01", "dtype": "i4"}})
    before = _snapshot(path)
    with pytest.raises(ValueError, match="'ev'"):  # 2100 is past int32 seconds since 1970
        _quiet(to_chunkstore, xr.Dataset({"ev": ("x", pd.DatetimeIndex(["2100-01-01"]))}),
               path, append_dim="x")
    assert _snapshot(path) == before


@pytest.mark.parametrize("fmt", [2, 3])
def test_times_a_float32_time_variable_cannot_hold_are_refused(tmp_path, fmt):
    """float32 seconds since 1970 hold 2024's times to about 2 minutes: 00:00:01 appended
    read back as 00:00:00, without an error (floats were not checked). Times it holds are
    appended."""
    path = str(tmp_path / "f.zarr")
    t = pd.date_range("2024-01-01", periods=2, freq="D")
    _quiet(to_chunkstore, xr.Dataset({"v": ("time", [1.0, 2.0])}, coords={"time": t}), path,
           zarr_format=fmt,
           encoding={"time": {"dtype": "float32", "units": "seconds since 1970-01-01"}})
    before = _snapshot(path)
    late = xr.Dataset({"v": ("time", [3.0])},
                      coords={"time": pd.DatetimeIndex(["2024-01-03T00:00:01"])})
    with pytest.raises(ValueError, match="'time'.*read back"):
        _quiet(to_chunkstore, late, path, append_dim="time")
    assert _snapshot(path) == before
    ok = xr.Dataset({"v": ("time", [3.0])}, coords={"time": pd.DatetimeIndex(["2024-01-03"])})
    _quiet(to_chunkstore, ok, path, append_dim="time")
    np.testing.assert_array_equal(_quiet(open_dataset, path).time.values,
                                  pd.date_range("2024-01-01", periods=3, freq="D").values)


_UNHELD_TIMES = {  # times that the stored dtype cannot hold, with the encoding it has
    "int32 overflow": (["2100-01-01"] * 2, {"units": "seconds since 1970-01-01",
                                            "dtype": "int32"}),
    "float32 seconds": (["2020-01-01T00:00:01", "2020-01-02T00:00:01"],
                        {"units": "seconds since 1970-01-01", "dtype": "float32"}),
    "NaT into int32": (["NaT", "2020-01-02"], {"units": "days since 2020-01-01",
                                               "dtype": "int32"}),
}


@pytest.mark.parametrize("case", list(_UNHELD_TIMES))
@pytest.mark.parametrize("fmt", [2, 3])
def test_dask_times_the_stored_dtype_cannot_hold_are_refused(tmp_path, fmt, case):
    """Refused for NumPy data before any write, the same times as dask data were written
    and read back wrong (2100 into int32 seconds as 1963, NaT as 2020-01-01): dask data was
    left to xarray's encoder, which checks only the units. Each block is checked as it is
    computed now: a region write keeps the stored times, and a failed append is undone
    (its rows read as 1970-01-01 in the time variable, and another variable's were
    written), in the consolidated metadata too."""
    da = pytest.importorskip("dask.array")
    values, enc = _UNHELD_TIMES[case]
    path = str(tmp_path / "t.zarr")
    t0 = pd.date_range("2020-01-01", periods=4, freq="D").values
    _quiet(to_chunkstore, xr.Dataset({"tv": ("t", t0), "x": ("t", np.arange(4.0))}), path,
           zarr_format=fmt, encoding={"tv": enc})
    new = np.array(values * 2, "M8[ns]")  # (the region: the stored chunk, whole)
    with pytest.raises(ValueError, match="'tv'.*(fit|cannot be stored)"):
        _quiet(to_chunkstore, xr.Dataset({"tv": ("t", da.from_array(new, chunks=2))}), path,
               region={"t": slice(0, 4)})
    with pytest.raises(ValueError, match="'tv'.*(fit|cannot be stored)"):
        _quiet(to_chunkstore, xr.Dataset({"tv": ("t", da.from_array(new, chunks=2)),
                                          "x": ("t", [8.0, 9.0, 7.0, 6.0])}), path,
               append_dim="t")
    for consolidated in (True, False):
        got = _quiet(open_dataset, path, consolidated=consolidated)
        np.testing.assert_array_equal(got.tv.values, t0)
        np.testing.assert_array_equal(got.x.values, np.arange(4.0))
    # and the append of times it holds goes through
    _quiet(to_chunkstore, xr.Dataset({"tv": ("t", da.from_array(t0[:2] + np.timedelta64(4, "D"))),
                                      "x": ("t", [8.0, 9.0])}), path, append_dim="t")
    np.testing.assert_array_equal(_quiet(open_dataset, path).tv.values,
                                  pd.date_range("2020-01-01", periods=6, freq="D").values)


@pytest.mark.parametrize("fmt", [2, 3])
def test_appended_timedeltas_the_stored_units_cannot_hold_are_refused(tmp_path, fmt):
    path = str(tmp_path / "d.zarr")
    _quiet(to_chunkstore, xr.Dataset({"dt": ("x", pd.to_timedelta([1, 2], "h"))}), path,
           zarr_format=fmt)
    before = _snapshot(path)
    with pytest.raises(ValueError, match="'dt'.*units"):
        _quiet(to_chunkstore, xr.Dataset({"dt": ("x", pd.to_timedelta([30], "min"))}), path,
               append_dim="x")
    assert _snapshot(path) == before
    _quiet(to_chunkstore, xr.Dataset({"dt": ("x", pd.to_timedelta([5], "h"))}), path,
           append_dim="x")
    np.testing.assert_array_equal(_quiet(open_dataset, path).dt.values,
                                  pd.to_timedelta([1, 2, 5], "h").values)


@pytest.mark.parametrize("fmt", [2, 3])
def test_times_into_float_units_are_appended_as_fractions(tmp_path, fmt):
    path = str(tmp_path / "f.zarr")
    t = pd.date_range("2026-01-01", periods=2, freq="h")
    _quiet(to_chunkstore, xr.Dataset(coords={"time": t}), path, zarr_format=fmt,
           encoding={"time": {"units": "hours since 2026-01-01", "dtype": "f8"}})
    more = pd.DatetimeIndex(["2026-01-01 06:30"])
    _quiet(to_chunkstore, xr.Dataset(coords={"time": more}), path, append_dim="time")
    np.testing.assert_array_equal(_quiet(open_dataset, path).time.values,
                                  np.append(t.values, more.values))


def test_appends_to_a_native_v3_datetime64_array_are_stored_as_times(tmp_path):
    # (the encoder wrote integers in units of its own, which the datetime64[s] array took
    # as times of 1970)
    path = str(tmp_path / "n.zarr")
    t = pd.date_range("2026-01-01", periods=2, freq="h").values.astype("M8[s]")
    _quiet(to_chunkstore, xr.Dataset({"dt": ("x", t)}), path, zarr_format=3,
           encoding={"dt": {"units": "seconds since 1970-01-01", "dtype": "M8[s]"}})
    more = pd.DatetimeIndex(["2026-01-01 06:30:01"]).values
    _quiet(to_chunkstore, xr.Dataset({"dt": ("x", more)}), path, append_dim="x")
    np.testing.assert_array_equal(_quiet(open_dataset, path).dt.values, np.append(t, more))
    before = _snapshot(path)
    finer = pd.DatetimeIndex(["2026-01-01 06:30:01.5"]).values  # the array holds seconds
    with pytest.raises(ValueError, match="'dt'"):
        _quiet(to_chunkstore, xr.Dataset({"dt": ("x", finer)}), path, append_dim="x")
    assert _snapshot(path) == before


def test_appended_cftime_dates_the_stored_units_cannot_hold_are_refused(tmp_path):
    pytest.importorskip("cftime")
    path = str(tmp_path / "c.zarr")

    def days(start, n):
        return xr.date_range(start, periods=n, freq="D", calendar="noleap", use_cftime=True)

    _quiet(to_chunkstore, xr.Dataset(coords={"time": days("2026-01-01", 2)}), path)
    _quiet(to_chunkstore, xr.Dataset(coords={"time": days("2026-01-03", 1)}), path,
           append_dim="time")
    before = _snapshot(path)
    with pytest.raises(ValueError, match="'time'.*units"):
        _quiet(to_chunkstore, xr.Dataset(coords={"time": days("2026-01-04 05:00", 1)}), path,
               append_dim="time")
    assert _snapshot(path) == before
    assert list(_quiet(open_dataset, path).time.values) == list(days("2026-01-01", 3))


def test_numpy_datetimes_into_a_cftime_calendar_variable_are_appended(tmp_path):
    pytest.importorskip("cftime")
    path = str(tmp_path / "nl.zarr")
    t = xr.date_range("2026-01-01", periods=2, freq="D", calendar="noleap", use_cftime=True)
    _quiet(to_chunkstore, xr.Dataset(coords={"time": t}), path)
    _quiet(to_chunkstore, xr.Dataset(coords={"time": pd.DatetimeIndex(["2026-01-03"])}), path,
           append_dim="time")
    got = _quiet(open_dataset, path).time.values
    assert list(got) == list(xr.date_range("2026-01-01", periods=3, freq="D",
                                           calendar="noleap", use_cftime=True))


# ------------------------------------------------- encodings only array creation rejects
BAD_ENCODINGS = {
    "zero chunks": {"chunks": (0,)},
    "negative chunks": {"chunks": (-2,)},
    "unknown compressor": {"compressors": "nonsense"},
    "unknown filter": {"filters": ["nonsense"]},
    "not a codec filter": {"filters": [42]},
    "unknown serializer": {"serializer": "nonsense"},
    "unknown chunk_key_encoding": {"chunk_key_encoding": {"name": "nonsense"}},
    "shards not a multiple of chunks": {"chunks": (3,), "shards": (4,)},
}


def _old_and_new(scenario):
    """(the dataset stored first, the one whose write is refused, its variable with the bad
    encoding, to_chunkstore's arguments) of a refused write's scenario."""
    old = xr.Dataset({"a": ("t", np.arange(10.0))}, attrs={"title": "old"})
    if scenario == "mode w":
        old = old.assign(b=("t", np.arange(10, dtype="i2")))
        return old, (old * 2).assign_attrs(title="new"), "b", {"mode": "w"}
    if scenario == "mode a":
        new = xr.Dataset({"n1": ("t", np.ones(10)), "n2": ("t", np.ones(10))},
                         attrs={"title": "new"})
        return old, new, "n2", {"mode": "a"}
    new = xr.Dataset({"a": ("t", np.arange(10.0, 12.0)), "n1": ("y", np.ones(10)),
                      "n2": ("y", np.ones(10))}, attrs={"title": "new"})
    return old, new, "n2", {"append_dim": "t"}


@pytest.mark.parametrize("bad", list(BAD_ENCODINGS))
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("scenario", ["mode w", "mode a", "append"])
def test_a_write_whose_encoding_is_refused_changes_nothing(tmp_path, scenario, fmt, bad):
    """mode="w" leaves the group as it was (nothing deleted before the refusal), mode="a"
    creates none of the new variables, an append changes none of the old ones."""
    path = str(tmp_path / "s.zarr")
    old, new, name, kwargs = _old_and_new(scenario)
    _quiet(to_chunkstore, old, path, zarr_format=fmt)
    before = _snapshot(path)
    if scenario == "mode w":
        kwargs["zarr_format"] = fmt
    with pytest.raises((ValueError, TypeError), match=f"'{name}'"):
        _quiet(to_chunkstore, new, path, encoding={name: BAD_ENCODINGS[bad]}, **kwargs)
    assert _snapshot(path) == before


def test_a_v3_fill_value_the_dtype_cannot_hold_changes_nothing(tmp_path):
    path = str(tmp_path / "f.zarr")
    old = xr.Dataset({"a": ("t", np.arange(10.0)), "b": ("t", np.arange(10, dtype="i2"))})
    _quiet(to_chunkstore, old, path, zarr_format=3)
    before = _snapshot(path)
    with pytest.raises((ValueError, TypeError), match="'b'"):
        _quiet(to_chunkstore, old * 2, path, mode="w", encoding={"b": {"fill_value": "x"}})
    assert _snapshot(path) == before


# ------------------------------------------------------------------ v2 fill_value encoding
def test_v2_fill_value_encoding_is_refused_as_xarray_refuses_it(tmp_path):
    path = str(tmp_path / "v2.zarr")
    ds = xr.Dataset({"v": ("t", np.arange(4, dtype="i2"))})
    with pytest.raises(ValueError, match=r"unexpected encoding parameters for zarr backend:"
                       r"  \['fill_value'\]\. Use `_FillValue` to set the Zarr array "
                       r"`fill_value`"):
        to_chunkstore(ds, path, zarr_format=2, encoding={"v": {"fill_value": 7}})
    assert not os.path.exists(os.path.join(path, "v"))
    # v3 takes it; and in v2 _FillValue is the array's fill value
    to_chunkstore(ds, str(tmp_path / "v3.zarr"), zarr_format=3,
                  encoding={"v": {"fill_value": 7}})
    to_chunkstore(ds, path, mode="w", zarr_format=2, encoding={"v": {"_FillValue": 7}})
    with open(os.path.join(path, "v", ".zarray")) as f:
        assert '"fill_value": 7' in f.read()


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("fmt", [2, 3])
def test_numbers_an_integer_array_cannot_hold_are_refused(tmp_path, fmt, lazy):
    """xarray's encoder casts to an integer dtype without a range check (xarray's zarr
    engine writes the same): appended 5000.0 into int16 packed by 0.1 read back as
    -1553.6, a region's 70000.0 into int16 as 4464, NaN into int16 without a _FillValue as
    -32768. Refused now, NumPy data before any write, dask data as it is computed (an
    append then undone); values that fit are written."""
    da = pytest.importorskip("dask.array")

    def data(values):
        values = np.asarray(values, dtype="f8")
        return da.from_array(values, chunks=2) if lazy else values

    path = str(tmp_path / "n.zarr")
    base = xr.Dataset({"p": ("t", np.linspace(0, 10, 4)), "i": ("t", np.arange(4.0)),
                       "q": ("t", np.arange(4.0))})
    _quiet(to_chunkstore, base, path, zarr_format=fmt,
           encoding={"p": {"dtype": "i2", "scale_factor": 0.1, "add_offset": 5.0,
                           "_FillValue": -32768},
                     "i": {"dtype": "i2"}, "q": {"dtype": "u1", "_FillValue": 255}})
    before = _quiet(open_dataset, path).load()
    for bad, match in (({"p": [5000.0, 1.0]}, "'p'.*5000.0.*int16.*scale_factor"),
                       ({"i": [70000.0, 1.0]}, "'i'.*70000.0.*int16"),
                       ({"i": [np.nan, 1.0]}, "'i'.*NaN.*_FillValue"),
                       ({"q": [-1.0, 1.0]}, "'q'.*-1.0.*uint8")):
        name, values = next(iter(bad.items()))
        more = {n: ("t", data(values if n == name else [1.0, 2.0])) for n in ("p", "i", "q")}
        with pytest.raises(ValueError, match=match):
            _quiet(to_chunkstore, xr.Dataset(more), path, append_dim="t")
        patch = {n: ("t", data((values if n == name else [1.0, 2.0]) * 2))
                 for n in ("p", "i", "q")}
        with pytest.raises(ValueError, match=match):
            _quiet(to_chunkstore, xr.Dataset(patch), path, region={"t": slice(0, 4)},
                   safe_chunks=False)
        xr.testing.assert_identical(_quiet(open_dataset, path).load(), before)
    # what fits goes in: NaN where there is a _FillValue, packed values in range
    _quiet(to_chunkstore, xr.Dataset({"p": ("t", data([np.nan, 3276.0])),
                                      "i": ("t", data([-32768.0, 32767.0])),
                                      "q": ("t", data([np.nan, 254.0]))}), path, append_dim="t")
    got = _quiet(open_dataset, path)
    np.testing.assert_allclose(got.p.values[4:], [np.nan, 3276.0], rtol=1e-4)
    np.testing.assert_array_equal(got.i.values[4:], [-32768, 32767])
    np.testing.assert_array_equal(got.q.values[4:], [np.nan, 254.0])


def test_a_new_variable_whose_encoding_cannot_hold_its_values_is_refused(tmp_path):
    """The first write too: 2100-01-01 with encoding int32 seconds since 1970 read back as
    1963, 300 into uint8 as 44. A stored byte variable marked _Unsigned holds 0..255."""
    path = str(tmp_path / "f.zarr")
    times = xr.Dataset({"tv": ("t", pd.DatetimeIndex(["2100-01-01"]))})
    with pytest.raises(ValueError, match="'tv'"):
        _quiet(to_chunkstore, times, path,
               encoding={"tv": {"units": "seconds since 1970-01-01", "dtype": "int32"}})
    with pytest.raises(ValueError, match="'v'.*300"):
        _quiet(to_chunkstore, xr.Dataset({"v": ("t", [1.0, 300.0])}), path, mode="w",
               encoding={"v": {"dtype": "u1"}})
    import chunkstore as cs
    g = cs.open_group(str(tmp_path / "u.zarr"), mode="w", zarr_format=2)
    u = g.create_array("u", shape=(1,), chunks=(4,), dtype="i1", fill_value=None,
                       attributes={"_ARRAY_DIMENSIONS": ["t"], "_Unsigned": "true"})
    u[:] = [-56]  # (200)
    _quiet(to_chunkstore, xr.Dataset({"u": ("t", np.array([255, 7], dtype="u1"))}),
           str(tmp_path / "u.zarr"), append_dim="t")
    np.testing.assert_array_equal(_quiet(open_dataset, str(tmp_path / "u.zarr")).u.values,
                                  [200, 255, 7])
    with pytest.raises(ValueError, match="'u'.*256"):
        _quiet(to_chunkstore, xr.Dataset({"u": ("t", np.array([256], dtype="i2"))}),
               str(tmp_path / "u.zarr"), append_dim="t")


# ------------------------------------------------------------------ strings into numbers
@pytest.mark.parametrize("fmt", [2, 3])
def test_strings_into_a_stored_number_or_bool_variable_are_refused(tmp_path, fmt):
    """xarray's zarr engine refuses them ("Mismatched dtypes"); the cast made "False" True,
    b"7" 7.0, and "oops" into an int32 variable a bare NumPy TypeError. Narrower strings
    of a stored string variable's kind are still written."""
    path = str(tmp_path / "s.zarr")
    _quiet(to_chunkstore, xr.Dataset({"flag": ("t", np.zeros(2, bool)),
                                      "x": ("t", np.zeros(2)),
                                      "n": ("t", np.zeros(2, "i4")),
                                      "s": ("t", np.array(["abc", "de"]))}),
           path, zarr_format=fmt)
    before = _snapshot(path)
    for name, values, kwargs in (
            ("flag", np.array(["False", "True"]), {"mode": "a"}),
            ("x", np.array([b"7", b"8"]), {"region": {"t": slice(0, 2)}}),
            ("x", np.array(["7", "8"], dtype=object), {"mode": "a"}),
            ("n", np.array(["1", "oops"]), {"append_dim": "t"})):
        new = xr.Dataset({name: ("t", values)})
        with pytest.raises(ValueError, match=f"Mismatched dtypes for variable '{name}' "
                                             f"between Zarr store on disk"):
            _quiet(to_chunkstore, new, path, **kwargs)
        assert _snapshot(path) == before
    _quiet(to_chunkstore, xr.Dataset({"s": ("t", np.array(["x", "yz"]))}), path, mode="a")
    _quiet(to_chunkstore, xr.Dataset({"x": ("t", np.array([1.5, None], dtype=object))}), path,
           mode="a")
    got = _quiet(open_dataset, path)
    np.testing.assert_array_equal(got.s.values, ["x", "yz"])
    np.testing.assert_array_equal(got.x.values, [1.5, np.nan])


# ------------------------------------------------------------------ floats, bools, reals
@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("fmt", [2, 3])
def test_numbers_a_float_bool_or_real_array_would_store_wrongly_are_refused(tmp_path, fmt,
                                                                            lazy):
    """xarray's cast stored 1e300 into float32 as inf, NaN and 0.5 into bool as True, 1+2j
    into float64 as 1.0. Refused, as the integer range check refuses (NumPy data before any
    write, dask data as it is computed, an append undone); rounding to float32 and NaN or
    inf given stay allowed."""
    dask = pytest.importorskip("dask")
    # (one task at a time: dask's threads raise the first error while other tasks run on,
    # whose writes could land after the call returned and the store was compared)
    with dask.config.set(scheduler="synchronous"):
        _write_numbers_arrays_store_wrongly(tmp_path, fmt, lazy)


def _write_numbers_arrays_store_wrongly(tmp_path, fmt, lazy):
    import dask.array as da

    def data(values):
        values = np.asarray(values)
        return da.from_array(values, chunks=2) if lazy else values

    path = str(tmp_path / "n.zarr")
    base = xr.Dataset({"f": ("t", np.zeros(4, "f4")), "b": ("t", np.zeros(4, bool)),
                       "c": ("t", np.zeros(4)),
                       "p": ("t", np.zeros(4, "f4"))})  # packed: 1e-30 per unit
    _quiet(to_chunkstore, base, path, zarr_format=fmt,
           encoding={"p": {"dtype": "f4", "scale_factor": 1e-30}})
    before = _quiet(open_dataset, path).load()
    fits = {"f": [1.0, 2.0], "b": [1.0, 0.0], "c": [1.0, 2.0], "p": [1.0, 2.0]}
    for name, values, match in (("f", [1e300, 1.0], "'f'.*1e\\+300.*float32.*inf"),
                                ("f", [-1e39, 1.0], "'f'.*-1e\\+39.*float32.*-inf"),
                                ("b", [np.nan, 1.0], "'b'.*NaN.*bool.*True"),
                                ("b", [0.5, 1.0], "'b'.*0.5.*bool.*True"),
                                ("b", [2, 1], "'b'.*2.*bool.*True"),
                                ("c", [1 + 2j, 1.0], "'c'.*\\(1\\+2j\\).*imaginary.*1.0"),
                                ("p", [1e10, 1.0], "'p'.*10000000000.0.*float32.*scale_factor")):
        more = {n: ("t", data(values if n == name else fits[n])) for n in fits}
        with pytest.raises(ValueError, match=match):
            _quiet(to_chunkstore, xr.Dataset(more), path, append_dim="t")
        xr.testing.assert_identical(_quiet(open_dataset, path).load(), before)
        patch = {n: ("t", data((values if n == name else fits[n]) * 2)) for n in fits}
        with pytest.raises(ValueError, match=match):
            _quiet(to_chunkstore, xr.Dataset(patch), path, region={"t": slice(0, 4)},
                   safe_chunks=False)
        got = _quiet(open_dataset, path).load()
        # (dask data: the other variables' blocks computed by then are written, as the
        # README says of a failed region write; the refused one's are not)
        xr.testing.assert_identical(got[[name]] if lazy else got,
                                    before[[name]] if lazy else before)
        before = got
    # what the arrays hold goes in: float64 rounded to float32, NaN and inf as given, 0/1
    # into bool, complex numbers without imaginary parts
    _quiet(to_chunkstore, xr.Dataset({"f": ("t", data([0.1, np.nan, np.inf, -3e38])),
                                      "b": ("t", data([1.0, 0.0, 1.0, 0.0])),
                                      "c": ("t", data([1 + 0j, 2, 3, 4])),
                                      "p": ("t", data([1e-20, 2.0, 3.0, 4.0]))}),
           path, append_dim="t")
    got = _quiet(open_dataset, path)
    np.testing.assert_array_equal(got.f.values[4:],
                                  np.array([0.1, np.nan, np.inf, -3e38], "f4"))
    np.testing.assert_array_equal(got.b.values[4:], [True, False, True, False])
    np.testing.assert_array_equal(got.c.values[4:], [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(got.p.values[4:], [1e-20, 2.0, 3.0, 4.0], rtol=1e-6)


def test_a_new_variable_whose_float_encoding_overflows_is_refused(tmp_path):
    path = str(tmp_path / "f.zarr")
    with pytest.raises(ValueError, match="'v'.*1e\\+300.*float32"):
        _quiet(to_chunkstore, xr.Dataset({"v": ("t", [1.0, 1e300])}), path,
               encoding={"v": {"dtype": "f4"}})
    assert not os.path.exists(os.path.join(path, "v"))


# ------------------------------------------------------------------ refused: nothing created
@pytest.mark.parametrize("fmt", [2, 3])
def test_a_refused_write_creates_no_group(tmp_path, fmt):
    """A refused first write (mode "w-") left the new group behind, so that the corrected
    retry was a ContainsGroupError; mode "w" over an array, or over a group of the other
    format, replaced it at once, before the write was checked."""
    path = str(tmp_path / "g.zarr")
    ds = xr.Dataset({"v": ("t", np.arange(3.0))})
    with pytest.raises(ValueError, match="'v'"):
        to_chunkstore(ds, path, zarr_format=fmt, encoding={"v": {"chunks": (0,)}})
    assert _snapshot(path) == {}
    to_chunkstore(ds, path, zarr_format=fmt)  # the corrected call, the same mode
    xr.testing.assert_identical(open_dataset(path), ds)

    import chunkstore as cs
    arr = str(tmp_path / "a.zarr")
    cs.open_array(arr, mode="w", shape=(3,), chunks=(3,), dtype="i4", zarr_format=fmt)[:] = 7
    before = _snapshot(arr)
    with pytest.raises(ValueError, match="'v'"):
        to_chunkstore(ds, arr, mode="w", zarr_format=fmt, encoding={"v": {"chunks": (0,)}})
    assert _snapshot(arr) == before
    other = str(tmp_path / "o.zarr")
    to_chunkstore(ds, other, zarr_format=5 - fmt)
    before = _snapshot(other)
    with pytest.raises(ValueError, match="'v'"):
        to_chunkstore(ds, other, mode="w", zarr_format=fmt, encoding={"v": {"chunks": (0,)}})
    assert _snapshot(other) == before
    to_chunkstore(ds, other, mode="w", zarr_format=fmt)
    xr.testing.assert_identical(open_dataset(other), ds)


# ------------------------------------------------------------------ errors name the variable
def test_an_encoding_error_of_a_stored_variable_names_it(tmp_path):
    """Appending 2004-02-29 to a noleap time coordinate: xarray's encoder refuses it,
    naming neither the variable nor anything else."""
    path = str(tmp_path / "c.zarr")
    t = xr.date_range("2004-02-27", periods=2, calendar="noleap", use_cftime=True)
    _quiet(to_chunkstore, xr.Dataset({"v": ("time", [1.0, 2.0])}, coords={"time": t}), path)
    before = _snapshot(path)
    leap = xr.Dataset({"v": ("time", [3.0])},
                      coords={"time": pd.to_datetime(["2004-02-29"]).values})
    with pytest.raises(ValueError, match="leap day.*'time'"):
        _quiet(to_chunkstore, leap, path, append_dim="time")
    assert _snapshot(path) == before


@pytest.mark.parametrize("name", [".zattrs", ".zgroup", ".zarray", "zarr.json", ".zmetadata"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_a_variable_named_like_a_metadata_document_is_refused_naming_the_store(tmp_path,
                                                                               fmt, name):
    path = str(tmp_path / "d.zarr")
    ds = xr.Dataset({name: ("t", np.arange(3.0))})
    with pytest.raises(ValueError) as e:
        to_chunkstore(ds, path, zarr_format=fmt)
    assert repr(name) in str(e.value) and path in str(e.value)
    assert "MemoryStore" not in str(e.value)
    assert _snapshot(path) == {}


def test_mode_w_over_the_group_an_inlined_dask_variable_reads_is_refused(tmp_path):
    """open_dataset(chunks={}, inline_array=True) puts the array inside the dask tasks: the
    check for a variable reading the group mode "w" replaces missed it, and the write stored
    NaN (the replaced array's fill value). Refused as with inline_array=False."""
    import xarray as xr
    from chunkstore.xarray import to_chunkstore
    p = str(tmp_path / "a.zarr")
    to_chunkstore(xr.Dataset({"v": ("x", np.arange(10.0) + 100)}), p, mode="w")
    ds = xr.open_dataset(p, engine="chunkstore", chunks={}, inline_array=True)
    with pytest.raises(ValueError, match="variable 'v' reads array 'v'"):
        to_chunkstore(ds + 1, p, mode="w")
    np.testing.assert_array_equal(xr.open_dataset(p, engine="chunkstore").v.values,
                                  np.arange(10.0) + 100)


def _failing_dask(values, bad_at):
    """A dask variable whose block holding index bad_at raises as it is computed."""
    import dask.array as da

    def block(x, block_info=None):
        lo, hi = block_info[0]["array-location"][0]
        if lo <= bad_at < hi:
            raise OSError("the source failed (simulated)")
        return x
    return da.from_array(values, chunks=2).map_blocks(block, dtype=values.dtype)


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_write_that_fails_as_its_dask_data_is_computed_leaves_no_half_made_node(tmp_path,
                                                                                 fmt):
    """Mode "w" replaced the group, then its dask data failed as it was computed: the new
    group was left half written, its unwritten blocks reading as the fill value (zeros:
    plausible values) with nothing to tell it from a whole one. Now the nodes a failed
    write made are removed again: mode "w"'s group (what it replaced is gone either way:
    GroupNotFoundError, not wrong values), a new variable of mode "a" (the others kept)."""
    import dask
    import chunkstore as cs
    p = str(tmp_path / "a.zarr")
    to_chunkstore(xr.Dataset({"v": ("t", np.arange(8.0))}), p, zarr_format=fmt)
    new = xr.Dataset({"v": ("t", _failing_dask(np.arange(10.0, 18.0), 6)),
                      "w": ("t", np.arange(8.0))})
    with dask.config.set(scheduler="synchronous"), pytest.raises(OSError, match="simulated"):
        to_chunkstore(new, p, mode="w", zarr_format=fmt)
    with pytest.raises(cs.errors.GroupNotFoundError):
        xr.open_dataset(p, engine="chunkstore")
    # mode "a": the new variable removed, the stored one as it was
    to_chunkstore(xr.Dataset({"v": ("t", np.arange(8.0))}), p, zarr_format=fmt)
    with dask.config.set(scheduler="synchronous"), pytest.raises(OSError, match="simulated"):
        to_chunkstore(xr.Dataset({"x": ("t", _failing_dask(np.arange(8.0), 5))}), p, mode="a")
    back = xr.open_dataset(p, engine="chunkstore")
    assert list(back.data_vars) == ["v"]
    np.testing.assert_array_equal(back.v.values, np.arange(8.0))
    assert "x" not in cs.open_group(p, mode="r")


def test_a_write_whose_dask_data_reads_its_own_array_out_of_place_is_refused(tmp_path):
    """Dask data that reads the array it is written into, other than block by block (here
    reversed), written back: its tasks read blocks others had written already, and v was
    stored [0 1 2 3 3 2 1 0] (xarray's zarr engine stores the same). Refused naming the
    variable, nothing written; elementwise updates and appends of such data go on."""
    import dask
    p = str(tmp_path / "a.zarr")
    to_chunkstore(xr.Dataset({"v": ("t", np.arange(8.0))}), p, encoding={"v": {"chunks": (2,)}})
    ds = xr.open_dataset(p, engine="chunkstore", chunks={})
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(ValueError, match="variable 'v': its dask data reads the array 'v'"):
            to_chunkstore(ds.assign(v=("t", ds.v.data[::-1])), p, mode="a")
        with pytest.raises(ValueError, match="variable 'v': its dask data reads"):
            to_chunkstore(ds.isel(t=slice(2, 6)).assign_coords(), p,
                          region={"t": slice(0, 4)})
        np.testing.assert_array_equal(open_dataset(p).v.values, np.arange(8.0))
        to_chunkstore(ds * 2 + 1, p, mode="a")  # (elementwise: each block its own region)
        np.testing.assert_array_equal(open_dataset(p).v.values, np.arange(8.0) * 2 + 1)
        ds = xr.open_dataset(p, engine="chunkstore", chunks={})
        to_chunkstore(ds * 0 + ds.v[::-1].data, p, append_dim="t")  # (rows it cannot read)
    np.testing.assert_array_equal(open_dataset(p).v.values,
                                  np.r_[np.arange(8.0) * 2 + 1, (np.arange(8.0) * 2 + 1)[::-1]])


@pytest.mark.parametrize("mode", ["w-", "a"])
def test_a_failed_write_into_a_new_group_keeps_what_else_lies_there(tmp_path, mode):
    """The removal of a failed write's new group deleted every key at its path: at the
    root of a directory, the user's own files too. Only the nodes the write made go."""
    import dask
    d = tmp_path / "d"
    (d / "raw").mkdir(parents=True)
    (d / "notes.txt").write_text("precious")
    (d / "raw" / "obs.csv").write_text("1,2")
    ds = xr.Dataset({"v": ("t", _failing_dask(np.arange(8.0), 5))})
    with dask.config.set(scheduler="synchronous"), pytest.raises(OSError, match="simulated"):
        to_chunkstore(ds, str(d), mode=mode)
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt", "raw"]
    assert (d / "raw" / "obs.csv").read_text() == "1,2"


def test_in_place_updates_the_self_read_check_lets_through_and_its_holes(tmp_path):
    """What the check of dask data reading its own array lets through (the review found
    them refused): operands of other origins broadcast in (NumPy weights and masks, another
    variable of the store), apply_ufunc's layers, the leading blocks written back where
    they were read, rows written where no block reads. And what it refuses (a hole
    before): a reversal done by xarray's lazy indexing (no chunks= at open, then .chunk()),
    and rows written over rows another block reads (1:3 into 2:4)."""
    import dask
    p = str(tmp_path / "a.zarr")
    to_chunkstore(xr.Dataset({"v": (("t", "x"), np.arange(16.0).reshape(4, 4)),
                              "w": ("x", np.ones(4))}), p, encoding={"v": {"chunks": (2, 2)}})
    want = np.arange(16.0).reshape(4, 4)
    weights = np.linspace(0, 1, 4)
    with dask.config.set(scheduler="synchronous"):
        for f, g in [(lambda ds: ds.v * xr.DataArray(weights, dims="x"), lambda a: a * weights),
                     (lambda ds: ds.v - ds.w, lambda a: a - 1),
                     (lambda ds: xr.apply_ufunc(np.sqrt, ds.v, dask="parallelized",
                                                output_dtypes=[float]), np.sqrt)]:
            ds = xr.open_dataset(p, engine="chunkstore", chunks={})
            to_chunkstore(ds[["v"]].assign(v=f(ds)), p, mode="a")
            want = g(want)
            np.testing.assert_allclose(open_dataset(p).v.values, want)
        ds = xr.open_dataset(p, engine="chunkstore", chunks={})
        to_chunkstore(ds[["v"]].isel(t=slice(0, 2)) * 2, p, region={"t": slice(0, 2)})
        want[:2] *= 2
        np.testing.assert_allclose(open_dataset(p).v.values, want)
        ds = xr.open_dataset(p, engine="chunkstore", chunks={})
        with pytest.raises(ValueError, match="reads the array 'v'"):
            to_chunkstore(ds[["v"]].isel(t=slice(1, 3)), p, region={"t": slice(2, 4)})
        # (rows 0:2 into 2:4: what it reads, no task writes)
        to_chunkstore(ds[["v"]].isel(t=slice(0, 2)), p, region={"t": slice(2, 4)})
        want[2:] = want[:2]
        lazy = xr.open_dataset(p, engine="chunkstore")
        with pytest.raises(ValueError, match="reads the array 'v'"):
            to_chunkstore(lazy[["v"]].isel(t=slice(None, None, -1)).chunk(2), p, mode="a")
    np.testing.assert_allclose(open_dataset(p).v.values, want)


def _stored_0_to_59(tmp_path, name="a.zarr"):
    p = str(tmp_path / name)
    to_chunkstore(xr.Dataset({"v": ("time", np.arange(60.0))}), p,
                  encoding={"v": {"chunks": (3,)}})
    return p


@pytest.mark.parametrize("chunks", [5, 3])
def test_a_slice_of_the_array_written_elsewhere_into_it_is_refused(tmp_path, chunks):
    """Dask data that is a slice of the array it is written into, moved: rows 2:50 into
    0:48 (a region), or a pad then a slice (mode "a"). Each block of it was cut from the
    same block of the array, only the block indices were compared, and the write went on:
    its tasks read rows other tasks had written already (rows 1, 2, 7, 16... wrong).
    Refused naming the variable, nothing written."""
    p = _stored_0_to_59(tmp_path)
    o = xr.open_dataset(p, engine="chunkstore", chunks={"time": chunks})
    with pytest.raises(ValueError, match="variable 'v': its dask data reads the array 'v'"):
        to_chunkstore(xr.Dataset({"v": o.v.isel(time=slice(2, 50))}), p,
                      region={"time": slice(0, 48)})
    with pytest.raises(ValueError, match="variable 'v': its dask data reads the array 'v'"):
        to_chunkstore(xr.Dataset({"v": o.v.pad(time=(0, 2), constant_values=-1.0)
                                  .isel(time=slice(2, None))}), p, mode="a")
    np.testing.assert_array_equal(open_dataset(p).v.values, np.arange(60.0))


def test_an_in_place_update_of_a_region_not_at_the_start_is_written(tmp_path):
    """xarray's "open, change a slice, write the region back": an elementwise update of
    rows 5:10 into the region 5:10 was refused (any region not at 0 was), where xarray's
    zarr engine writes it. Each block is now checked to read no row outside the rows it
    writes: written, with dask chunks on the stored grid or not, a region found by
    region="auto", and a rechunk into larger blocks."""
    import dask
    p = str(tmp_path / "a.zarr")
    to_chunkstore(xr.Dataset({"v": ("t", np.arange(10.0))}), p, encoding={"v": {"chunks": (5,)}})
    want = np.arange(10.0)
    o = xr.open_dataset(p, engine="chunkstore", chunks={})
    to_chunkstore(o.isel(t=slice(5, 10)) * 2, p, region={"t": slice(5, 10)})
    want[5:] *= 2
    np.testing.assert_array_equal(open_dataset(p).v.values, want)
    q = _stored_0_to_59(tmp_path, "b.zarr")
    want = np.arange(60.0)
    with dask.config.set(scheduler="threads"):
        for chunks in ({}, {"time": 5}):  # (stored chunks 3: rechunked to them after)
            o = xr.open_dataset(q, engine="chunkstore", chunks=chunks)
            to_chunkstore(o.isel(time=slice(9, 30)) + 1, q, region={"time": slice(9, 30)})
            want[9:30] += 1
            np.testing.assert_array_equal(open_dataset(q).v.values, want)
        o = xr.open_dataset(q, engine="chunkstore", chunks={"time": 6})
        to_chunkstore(o.isel(time=slice(12, 42)).chunk({"time": 12}) * 3, q,
                      region={"time": slice(12, 42)})
        want[12:42] *= 3
        np.testing.assert_array_equal(open_dataset(q).v.values, want)
    r = str(tmp_path / "c.zarr")
    to_chunkstore(xr.Dataset({"v": ("t", np.arange(10.0))}, coords={"t": np.arange(10) * 10}),
                  r, encoding={"v": {"chunks": (5,)}})
    o = xr.open_dataset(r, engine="chunkstore", chunks={})
    to_chunkstore(o.isel(t=slice(5, 10)) * 2, r, region="auto")
    np.testing.assert_array_equal(open_dataset(r).v.values, np.r_[0:5, np.arange(5, 10) * 2])


def test_the_self_read_check_follows_the_rows_each_block_reads(tmp_path):
    """blockwise_in_place follows the region of the array each block reads through the
    graph, and compares it with the region the block is written to (at offsets)."""
    import dask.array as da

    import chunkstore as cs
    from chunkstore.integrations.dask import blockwise_in_place, from_chunkstore
    p = str(tmp_path / "a.zarr")
    z = cs.open_array(p, mode="w", shape=(20, 6), chunks=(5, 3), dtype="f8")
    x = from_chunkstore(z)

    def ok(d, offsets=None):
        return blockwise_in_place(d, z.store, "", offsets)
    assert ok(x * 2) and ok(da.concatenate([x[:5], x[5:]]))
    assert ok(x[5:10] + 1, [5, 0]) and not ok(x[5:15] + 1, [10, 0])
    assert ok(x[5:10] + 1, [10, 0])  # (rows the write reads, it writes none of)
    assert ok(x.rechunk((10, 6))) and not ok(x.rechunk((1, 3)))
    assert ok(da.from_array(z, chunks=(5, 3), inline_array=True) + 1)
    for bad in (x[::-1], da.concatenate([x[5:10], x[:5], x[10:]]), x - x.mean(0),
                x.map_overlap(lambda b: b, depth=1, boundary="none"),
                from_chunkstore(z, chunks=(3, 3))[:6].T, x[2:] * 1,
                da.map_blocks(lambda b, arr: arr[:5, :3], x, arr=z, dtype=float)):
        assert not ok(bad)
    assert ok(x[::-1].rechunk((20, 6)))  # (one task reads all it writes)


def test_a_variable_reading_an_array_another_variable_of_the_write_rewrites_is_refused(
        tmp_path):
    """Each variable's dask data read the other's array, written in the same call: two
    variables swapped with mode "a" both stored b's values. So does data reading an array
    that NumPy data of another variable is written into first (a_old read the new a).
    Refused naming both variables, nothing written; reading a variable the write leaves
    alone, or one it appends to, goes on."""
    p = str(tmp_path / "a.zarr")
    to_chunkstore(xr.Dataset({"a": ("x", np.zeros(20)), "b": ("x", np.ones(20))}), p,
                  encoding={"a": {"chunks": (5,)}, "b": {"chunks": (5,)}})
    o = xr.open_dataset(p, engine="chunkstore", chunks={})
    before = _snapshot(p)
    for ds, culprit in [(xr.Dataset({"a": o.b, "b": o.a}), "'b'"),
                        (xr.Dataset({"a_old": o.a, "a": o.a * 0 + 5}), "'a'"),
                        (xr.Dataset({"a_old": o.a, "a": ("x", np.full(20, 5.0))}), "'a'")]:
        with pytest.raises(ValueError, match=f"which variable {culprit} of the same write"):
            to_chunkstore(ds, p, mode="a")
        assert _snapshot(p) == before
    to_chunkstore(xr.Dataset({"a": o.b * 2}), p, mode="a")
    np.testing.assert_array_equal(open_dataset(p).a.values, np.full(20, 2.0))
    o = xr.open_dataset(p, engine="chunkstore", chunks={})
    to_chunkstore(xr.Dataset({"a": o.b.rename(x="y")[:5] * 0, "b": o.a.rename(x="y")[:5]}),
                  str(tmp_path / "b.zarr"))
    to_chunkstore(xr.Dataset({"a": o.b[:5] * 0, "b": o.a[:5]}), p, append_dim="x")
    back = open_dataset(p)
    np.testing.assert_array_equal(back.a.values, np.r_[np.full(20, 2.0), np.zeros(5)])
    np.testing.assert_array_equal(back.b.values, np.r_[np.ones(20), np.full(5, 2.0)])


def test_region_auto_against_a_stored_coordinate_of_duplicate_values_names_it(tmp_path):
    """region="auto" where the stored coordinate holds a value twice raised pandas'
    InvalidIndexError, naming neither the coordinate nor the store."""
    p = str(tmp_path / "a.zarr")
    to_chunkstore(xr.Dataset({"v": ("t", np.arange(4.0))}, coords={"t": [0, 1, 1, 2]}), p)
    with pytest.raises(ValueError, match=r"stored coordinate 't' of the group '/' of "
                                         r"DirectoryStore\(.*a\.zarr.*duplicate"):
        to_chunkstore(xr.Dataset({"v": ("t", [7.0, 8.0])}, coords={"t": [1, 2]}), p,
                      region="auto")
    np.testing.assert_array_equal(open_dataset(p).v.values, np.arange(4.0))


@pytest.mark.parametrize("chunks", [{}, {"x": 3}])
def test_a_new_variable_reading_variables_written_back_unchanged_is_written(tmp_path, chunks):
    """mode "a" of a dataset a variable computed from others was added to writes every
    variable back: those opened and left unchanged rewrite their own values, so the new
    variable's tasks read the same values whenever they run (the check that refuses a
    variable reading an array another variable of the write changes let these through)."""
    p = str(tmp_path / "s.zarr")
    ds = xr.Dataset({"a": ("x", np.arange(20.0)), "w": ("x", np.ones(20))})
    to_chunkstore(ds, p, encoding={"a": {"chunks": (5,)}, "w": {"chunks": (5,)}})
    o = xr.open_dataset(p, engine="chunkstore", chunks=chunks)
    o["v"] = o.a - o.w
    to_chunkstore(o, p, mode="a")
    r = xr.open_dataset(p, engine="chunkstore").load()
    np.testing.assert_array_equal(r.v.values, np.arange(20.0) - 1)
    np.testing.assert_array_equal(r.a.values, np.arange(20.0))
    # a variable changed (a * 2 written into a) read by another of the write: refused
    o = xr.open_dataset(p, engine="chunkstore", chunks=chunks)
    with pytest.raises(ValueError, match="variable 'v'.*'a' of the same write"):
        to_chunkstore(o.assign(a=o.a * 2, v=o.a + 1), p, mode="a")
    np.testing.assert_array_equal(xr.open_dataset(p, engine="chunkstore").a.values,
                                  np.arange(20.0))


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_new_variable_computed_from_a_time_variable_written_back_unchanged(tmp_path, fmt):
    """The time variable written back with mode "a" carries CF encoding's layers in its
    data: taken for a change, a variable computed from it was refused."""
    import pandas as pd
    p = str(tmp_path / "t.zarr")
    ds = xr.Dataset({"v": ("t", np.arange(20.0))},
                    coords={"time": ("t", pd.date_range("2000-01-01", periods=20)),
                            "lag": ("t", pd.to_timedelta(np.arange(20), "h"))})
    to_chunkstore(ds, p, mode="w", zarr_format=fmt)
    o = xr.open_dataset(p, engine="chunkstore", chunks={})
    o["doy"] = o.time.dt.dayofyear
    o["hours"] = o.lag.dt.total_seconds() / 3600
    to_chunkstore(o, p, mode="a")
    r = xr.open_dataset(p, engine="chunkstore").load()
    np.testing.assert_array_equal(r.doy.values, np.arange(1, 21))
    np.testing.assert_array_equal(r.hours.values, np.arange(20.0))
    xr.testing.assert_identical(r.time, ds.time)


def test_apply_ufunc_along_a_core_dimension_in_one_block_is_written_in_place(tmp_path):
    """apply_ufunc with a core dimension (np.sort, interpolate_na) in one dask block: its
    Blockwise contracts that index over one block (concatenate=True), which the check took
    for a reduction; each block reads the rows it writes."""
    p = str(tmp_path / "s.zarr")
    v = np.random.default_rng(0).random((20, 10))
    v[3, 4] = np.nan
    to_chunkstore(xr.Dataset({"v": (("t", "x"), v)}), p, encoding={"v": {"chunks": (5, 5)}})
    o = xr.open_dataset(p, engine="chunkstore", chunks={"x": -1})
    o["v"] = xr.apply_ufunc(np.sort, o.v, input_core_dims=[["x"]], output_core_dims=[["x"]],
                            dask="parallelized").transpose("t", "x")
    to_chunkstore(o, p, mode="a")
    np.testing.assert_array_equal(xr.open_dataset(p, engine="chunkstore").v.values,
                                  np.sort(v, axis=1))
    o = xr.open_dataset(p, engine="chunkstore", chunks={"x": -1})
    to_chunkstore(o.interpolate_na("x"), p, mode="a")
    want = xr.DataArray(np.sort(v, axis=1), dims=("t", "x")).interpolate_na("x").values
    np.testing.assert_array_equal(xr.open_dataset(p, engine="chunkstore").v.values, want)
    # (a core dimension in several blocks: each block would read others' rows; refused)
    o = xr.open_dataset(p, engine="chunkstore", chunks={"t": 5})
    with pytest.raises(ValueError, match="block by block"):
        to_chunkstore(o.assign(v=o.v - o.v.mean("t")), p, mode="a")


def test_the_self_read_check_on_deep_and_shared_graphs_answers_at_once():
    """Each key's region was worked out again by every task that took it: a layer used
    twice made the walk exponential (55 s for 22 such layers), and a chain of 600
    additions raised RecursionError out of the write's checks. Both answer now, quickly."""
    import dask.array as dsa

    import chunkstore as cs
    from chunkstore.integrations.dask import blockwise_in_place
    z = cs.array(np.arange(16.0), chunks=(4,), store=cs.MemoryStore())
    x = dsa.from_array(z, chunks=4)
    y = x
    for _ in range(22):
        y = y + y * 2
    assert blockwise_in_place(y, z.store, z.path)
    y = x
    for _ in range(600):
        y = y + x
    assert blockwise_in_place(y, z.store, z.path) in (True, False)  # (no RecursionError)
