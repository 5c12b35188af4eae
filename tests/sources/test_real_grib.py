"""Decode real operational GRIB files with the model tables (``tests/data/real-grib``).

The samples (see that folder's README) are cut from DWD ICON-EU, ECMWF IFS (GRIB1), NOAA GFS
and Meteo-France ARPEGE output. Each is decoded with ``pointcast.ingest.decode`` and the
table of the model it comes from (or, for GFS and ARPEGE, the IFS table: their 10 m wind and
2 m temperature use the WMO-standard GRIB2 encoding IFS uses too), and checked for names,
units, valid times, coordinates and values against a plain ecCodes decode.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import eccodes
import numpy as np
import pytest

import pointcast  # noqa: F401  (PROJ before ecCodes, see pointcast/__init__.py)
from conftest import REAL_GRIB as REAL
from pointcast.ingest import DecodeError, decode, index_file, judge, matches
from pointcast.sources import GFS, ICON_EU, IFS
from pointcast.sources.gfs import idx_wanted


def plain(path: Path) -> list[dict]:
    """Every message of ``path`` as ecCodes decodes it, without pointcast."""
    out = []
    with open(path, "rb") as f:
        while (h := eccodes.codes_grib_new_from_file(f)) is not None:
            try:
                nj, ni = eccodes.codes_get_long(h, "Nj"), eccodes.codes_get_long(h, "Ni")
                out.append(dict(
                    message=eccodes.codes_get_message(h),
                    shortName=eccodes.codes_get_string(h, "shortName"),
                    typeOfLevel=eccodes.codes_get_string(h, "typeOfLevel"),
                    edition=eccodes.codes_get_long(h, "edition"),
                    packing=eccodes.codes_get_string(h, "packingType"),
                    validity=(eccodes.codes_get_long(h, "validityDate"),
                              eccodes.codes_get_long(h, "validityTime")),
                    north_first=eccodes.codes_get_long(h, "jScansPositively") == 0,
                    corners=tuple(eccodes.codes_get_double(h, k) for k in (
                        "latitudeOfFirstGridPointInDegrees", "longitudeOfFirstGridPointInDegrees",
                        "latitudeOfLastGridPointInDegrees", "longitudeOfLastGridPointInDegrees")),
                    values=eccodes.codes_get_values(h).reshape(nj, ni),
                ))
            finally:
                eccodes.codes_release(h)
    return out


def ascending(msg: dict) -> np.ndarray:
    """Plain ecCodes values with rows from south to north, as decode returns them."""
    return msg["values"][::-1] if msg["north_first"] else msg["values"]


def valid_time(msg: dict) -> np.datetime64:
    date, time_ = msg["validity"]
    return np.datetime64(datetime(date // 10000, date // 100 % 100, date % 100,
                                  time_ // 100, time_ % 100), "ns")


# ------------------------------------------------------------------------------------------
# DWD ICON-EU: local parameter (CLCL) and a mean since the start at step 0 (ASOB_S)
# ------------------------------------------------------------------------------------------


def test_icon_eu_low_cloud_cover_decodes_as_lcc():
    path = REAL / "test_icon_europe_001_CLCL.grib2"
    (msg,) = plain(path)
    assert (msg["shortName"], msg["typeOfLevel"]) == ("CLCL", "unknown")  # the table row
    ds = decode([path], ICON_EU.fields, model="icon-eu")
    assert list(ds.data_vars) == ["lcc"]
    assert ds.lcc.attrs["units"] == "%"
    assert ds.lcc.dims == ("time", "lat", "lon")
    assert list(ds.time.values) == [np.datetime64("2023-10-25T06:00", "ns")]
    assert ds.attrs["init"] == "2023-10-25T06:00:00+00:00"
    # DWD's grid: 657 x 1377 from 29.5 N / 23.5 W (336.5 E in the file) to 70.5 N / 62.5 E.
    assert ds.lat.values[0] == 29.5 and ds.lat.values[-1] == 70.5 and ds.lat.size == 657
    assert ds.lon.values[0] == -23.5 and ds.lon.values[-1] == 62.5 and ds.lon.size == 1377
    assert (np.diff(ds.lon.values) > 0).all()
    values = ds.lcc.values[0]
    np.testing.assert_array_equal(values, ascending(msg).astype(np.float32))
    assert 0.0 <= values.min() and values.max() <= 100.0 and 10.0 < values.mean() < 90.0


def test_icon_eu_net_shortwave_mean_at_step_0_has_no_interval():
    path = REAL / "test_icon_europe_000_ASOB_S.grib2"
    (msg,) = plain(path)
    assert (msg["shortName"], msg["typeOfLevel"]) == ("avg_snswrf", "surface")
    assert np.all(msg["values"] == 0.0)  # a zero-width mean, packed as a constant field
    ds = decode([path], ICON_EU.fields, model="icon-eu")
    assert list(ds.data_vars) == ["ssr"]
    assert ds.ssr.attrs["units"] == "W m-2"
    assert ds.ssr.attrs["steps_minutes"] == [0]
    assert list(ds.time.values) == [np.datetime64("2024-03-04T00:00", "ns")]  # the run's time
    # A mean since the start becomes the mean of the interval ending at each step; at step
    # 0 no interval ends, so the value is missing (not the 0 of the message).
    assert np.isnan(ds.ssr.values).all()


# ------------------------------------------------------------------------------------------
# ECMWF IFS real-time GRIB1: two areas (two grids) in one file
# ------------------------------------------------------------------------------------------


def test_ifs_grib1_two_areas_raise_then_decode_one_by_one(tmp_path):
    path = REAL / "test_ECMWFRealtime_HRES-IFS_10u_20241104T00_S60.grib"
    msgs = plain(path)
    assert [(m["shortName"], m["typeOfLevel"], m["edition"]) for m in msgs] == [
        ("10u", "surface", 1)] * 2
    with pytest.raises(DecodeError, match="one regular lat/lon grid"):
        decode([path], IFS.fields, model="ifs")
    expected = {  # (lat south, lat north, lon west, lon east)
        0: (48.0, 60.0, -12.0, 3.0),  # Europe
        1: (6.0, 35.0, 67.0, 97.0),  # South Asia
    }
    for i, msg in enumerate(msgs):
        single = tmp_path / f"area{i}.grib"
        single.write_bytes(msg["message"])
        ds = decode([single], IFS.fields, model="ifs")
        assert list(ds.data_vars) == ["u10"]  # the edition-1 row at typeOfLevel surface
        assert ds.u10.attrs["units"] == "m s-1"
        assert list(ds.time.values) == [np.datetime64("2024-11-06T12:00", "ns")]  # 00 UTC + 60 h
        assert ds.attrs["init"] == "2024-11-04T00:00:00+00:00"
        south, north, west, east = expected[i]
        assert (ds.lat.values[0], ds.lat.values[-1]) == (south, north)
        assert (ds.lon.values[0], ds.lon.values[-1]) == (west, east)
        assert np.allclose(np.diff(ds.lat.values), 0.1) and np.allclose(np.diff(ds.lon.values), 0.1)
        values = ds.u10.values[0]
        assert msg["north_first"]  # rows from north to south in the file: flipped
        np.testing.assert_array_equal(values, ascending(msg).astype(np.float32))
        assert -40.0 < values.min() < 0.0 < values.max() < 40.0


def test_the_grib1_rows_match_grib1_only():
    rows = [r for r in IFS.fields if r.edition == 1]
    assert {(r.var, r.shortName, r.typeOfLevel) for r in rows} == {
        ("t2m", "2t", "surface"), ("d2m", "2d", "surface"), ("u10", "10u", "surface"),
        ("v10", "10v", "surface")}
    assert all(r.edition is None for r in IFS.fields if r not in rows)


# ------------------------------------------------------------------------------------------
# NOAA GFS: complex packing with spatial differencing, longitudes 0..359
# ------------------------------------------------------------------------------------------


def test_gfs_10m_wind_complex_packing_and_0_to_359_longitudes():
    path = REAL / "test_NOAAS3_HRES-GFS_10u_20210509T06_S00.grib"
    (msg,) = plain(path)
    assert msg["packing"] == "grid_complex_spatial_differencing"
    assert (msg["shortName"], msg["typeOfLevel"]) == ("10u", "heightAboveGround")
    # The WMO-standard encoding of the 10 m wind is the same in GFS and IFS GRIB2.
    ds = decode([path], IFS.fields, model="gfs")
    assert ds.u10.attrs["units"] == "m s-1"
    assert list(ds.time.values) == [np.datetime64("2021-05-09T06:00", "ns")]
    lon, lat = ds.lon.values, ds.lat.values
    assert lon.size == 360 and (np.diff(lon) == 1.0).all()  # monotonic, global, 0..359
    assert lon[0] == 0.0 and lon[-1] == 359.0
    assert lat.size == 181 and lat[0] == -90.0 and lat[-1] == 90.0
    values = ds.u10.values[0]
    expected = ascending(msg).astype(np.float32)
    np.testing.assert_array_equal(values, expected)
    # A few points by hand: the file's first row is 90 N, its first column 0 E.
    flat = msg["values"].ravel()
    for j_file, i in ((0, 0), (90, 0), (90, 180), (140, 350), (180, 359)):
        assert values[180 - j_file, i] == np.float32(flat[j_file * 360 + i])
    assert -40.0 < values.min() < 0.0 < values.max() < 40.0
    # The same message also fills the 10 m level of the height-level wind.
    np.testing.assert_array_equal(ds.u.sel(height=10).values[0], values)


# ------------------------------------------------------------------------------------------
# Meteo-France ARPEGE: JPEG 2000 packing, 9 steps in one file
# ------------------------------------------------------------------------------------------


def test_arpege_2m_temperature_jpeg2000_nine_steps():
    path = REAL / "SP1_00H24H_t.grib2"
    msgs = plain(path)
    assert len(msgs) == 9 and {m["packing"] for m in msgs} == {"grid_jpeg"}
    ds = decode([path], IFS.fields, model="arpege")
    assert list(ds.data_vars) == ["t2m"]
    assert ds.t2m.attrs["units"] == "K"
    init = datetime(2023, 12, 3, 6)
    expected_times = [np.datetime64(init + timedelta(hours=h), "ns") for h in range(0, 25, 3)]
    assert list(ds.time.values) == expected_times
    assert [valid_time(m) for m in msgs] == expected_times
    assert ds.t2m.attrs["steps_minutes"] == [h * 60 for h in range(0, 25, 3)]
    assert ds.lat.values[0] == -90.0 and ds.lat.values[-1] == 90.0 and ds.lat.size == 361
    assert ds.lon.values[0] == 0.0 and ds.lon.values[-1] == 359.5 and ds.lon.size == 720
    values = ds.t2m.values
    for k, msg in enumerate(msgs):
        np.testing.assert_array_equal(values[k], ascending(msg).astype(np.float32))
    assert 190.0 < values.min() and values.max() < 330.0


def test_gfs_shortwave_is_ncep_local_0_4_192_and_decodes_as_ssrd():
    """Real GFS DSWRF (NCEP's local 0/4/192, ecCodes ``sdswrf``, W m-2 averaged over the
    6-hour-reset window 24-27 h) is the GFS table's ssrd row, in the message and in the .idx
    line NOAA writes for it; its DLWRF neighbour (0/5/192) is no row's."""
    path = REAL / "test_NOAAS3_HRES-GFS_dswrf-dlwrf_20250129T06_S27.grib"
    dswrf, dlwrf = plain(path)
    msgs = index_file(path)
    rows = [[r for r in GFS.fields if matches(r, m)] for m in msgs]
    assert [r.var for r in rows[0]] == ["ssrd"] and rows[1] == []
    assert judge(rows[0][0], msgs[0]) == (1.0, None)
    assert (msgs[0].paramId, msgs[0].units, msgs[0].parameter) == (260087, "W m**-2", "0/4/192")
    assert idx_wanted({"param": "DSWRF", "level": "surface", "time": "24-27 hour ave fcst"},
                      rows[0][0])
    ds = decode([path], GFS.fields, model="gfs")
    assert set(ds.data_vars) == {"ssrd"} and "refused" not in ds.attrs
    # The window starts at the reset (24 h): the message is the interval's mean itself.
    assert ds.ssrd.attrs["steps_minutes"] == [27 * 60]
    assert list(ds.time.values) == [np.datetime64("2025-01-30T09:00", "ns")]
    np.testing.assert_array_equal(ds.ssrd.values[0], ascending(dswrf).astype(np.float32))
    assert 0.0 <= float(ds.ssrd.min()) and float(ds.ssrd.max()) < 1400.0


def test_every_grib1_row_names_the_real_parameter_it_reads():
    """The IFS GRIB1 rows' encodings (paramId, units, table 128) are what the real ECMWF GRIB1
    message carries, for the row the message matches."""
    path = REAL / "test_ECMWFRealtime_HRES-IFS_10u_20241104T00_S60.grib"
    for m in index_file(path):
        (row,) = [r for r in IFS.fields if matches(r, m)]
        assert row.var == "u10" and judge(row, m) == (1.0, None)
        assert (m.paramId, m.units, m.parameter) == (165, "m s**-1", "128/165")


@pytest.mark.parametrize("name", sorted(p.name for p in REAL.glob("*.grib*")))
def test_download_check_passes_real_files_and_catches_broken_sections(name):
    """The fetch's check (`check_grib`) counts the messages of every real file, GRIB1 and
    GRIB2, and refuses one whose sections no longer chain: the bytes after section 0
    overwritten (a corrupt body of the right length), a section's declared length off by
    one byte, the end marker lost."""
    from pointcast.sources.remote import check_grib
    from pointcast.sources.remote.transport import BadDownload

    data = (REAL / name).read_bytes()
    assert check_grib(data) == len(plain(REAL / name))
    first = int.from_bytes(data[8:16], "big") if data[7] == 2 else int.from_bytes(data[4:7], "big")
    message = data[:first]
    broken = [message[:16] + b"\xff" * (len(message) - 20) + message[-4:],
              message[:-4] + b"7778"]
    if message[7] == 2:  # section 1's length one byte longer than it is
        length = int.from_bytes(message[16:20], "big")
        broken.append(message[:16] + (length + 1).to_bytes(4, "big") + message[20:])
    for bad in broken:
        with pytest.raises(BadDownload):
            check_grib(bad)
