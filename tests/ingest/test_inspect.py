"""`pointcast inspect`: real upstream files (tests/data/real-grib), the
sample source's files in each upstream's encoding, odd and broken files, and NetCDF."""

from __future__ import annotations

import json
from pathlib import Path

import eccodes
import numpy as np
import pytest
import xarray as xr

from conftest import REAL_GRIB
from mirror import add_foreign_message, publish_sample
from pointcast.cli import main
from pointcast.inspect import inspect_file


def run_cli(capsys, *paths) -> tuple[int, list[dict]]:
    code = main(["inspect", *map(str, paths)])
    return code, json.loads(capsys.readouterr().out)


def test_real_files(capsys):
    code, report = run_cli(capsys, *sorted(REAL_GRIB.glob("*.grib*")))
    assert code == 0
    by = {Path(r["file"]).name: r for r in report}
    gfs = by["test_NOAAS3_HRES-GFS_10u_20210509T06_S00.grib"]
    assert gfs["format"] == "GRIB2" and gfs["messages"] == 1
    f = gfs["fields"][0]
    assert (f["name"], f["units"], f["table"], f["processing"]) == ("u10", "m s-1", "gfs", "instantaneous")
    assert f["level"] == {"type": "heightAboveGround", "value": 10, "first_surface": 103, "units": "m"}
    assert f["valid"] == "2021-05-09T06:00:00+00:00"
    assert f["grid"]["type"] == "regular_ll" and (f["grid"]["ni"], f["grid"]["nj"]) == (360, 181)
    ifs = by["test_ECMWFRealtime_HRES-IFS_10u_20241104T00_S60.grib"]
    assert ifs["format"] == "GRIB1" and ifs["messages"] == 2
    assert {(m["name"], m["valid"]) for m in ifs["fields"]} == {("u10", "2024-11-06T12:00:00+00:00")}
    # two areas cut out of one run: Europe and South Asia
    assert [(m["grid"]["lat_first"], m["grid"]["lon_first"]) for m in ifs["fields"]] == [(60.0, -12.0), (35.0, 67.0)]
    asob = by["test_icon_europe_000_ASOB_S.grib2"]["fields"][0]
    assert (asob["name"], asob["processing"], asob["units"]) == ("ssr", "average", "W m-2")
    assert asob["interval"] == ["2024-03-04T00:00:00+00:00"] * 2
    assert any("zero-length" in n for n in asob["notes"])
    clcl = by["test_icon_europe_001_CLCL.grib2"]["fields"][0]
    assert clcl["name"] == "lcc" and clcl["units"] == "%" and clcl["level"]["type"] == "unknown"
    assert any("typeOfLevel unknown" in n for n in clcl["notes"])
    arpege = by["SP1_00H24H_t.grib2"]
    assert arpege["messages"] == 9 and {m["name"] for m in arpege["fields"]} == {"t2m"}
    assert arpege["fields"][0]["grid"]["packing"] == "grid_jpeg"


def test_sample_files_in_upstream_encodings(tmp_path, capsys):
    tree, cache = tmp_path / "tree", tmp_path / "cache"
    gfs = publish_sample(tree, cache, "gfs", "2026-11-20T00:00Z", horizon_hours=7)
    msm = publish_sample(tree, cache, "msm", "2026-11-20T00:00Z", horizon_hours=2)
    add_foreign_message(gfs[7])
    code, report = run_cli(capsys, gfs[7], msm[0])
    assert code == 0
    fields = report[0]["fields"]
    tp = next(m for m in fields if m["name"] == "tp")
    # GFS resets its accumulation every 6 hours: the 7 h file holds the 6-7 h amount
    assert tp["how"] == "accumulated over 1h, from step 6h" and tp["units"] == "kg m-2"
    assert tp["interval"] == ["2026-11-20T06:00:00+00:00", "2026-11-20T07:00:00+00:00"]
    foreign = [m for m in fields if not m["known"]]
    assert len(foreign) == 1 and foreign[0]["level"]["type"] == "isobaricInhPa"
    assert "no model table names this message" in foreign[0]["notes"][0]
    jma = report[1]["fields"]
    t2m = next(m for m in jma if m["name"] == "t2m")
    assert t2m["table"] == "msm" and t2m["level"]["exact"] == 1.5
    # JMA's APCP and TCDC both decode as "unknown"; the step type tells them apart
    assert {m["name"] for m in jma if m["shortName"] == "unknown"} == {"tp", "tcc"}
    # The file is one multi-field message: every field is listed (8 at step 0, 10 after)
    assert report[1]["messages"] == 1 and len(jma) == 28
    assert [(m["message"], m["field"]) for m in jma] == [(1, k) for k in range(1, 29)]
    assert {m["name"] for m in jma} == {"msl", "sp", "u10", "v10", "t2m", "rh2m", "lcc", "tcc",
                                        "tp", "ssrd"}
    assert all(m["known"] for m in jma)


def test_real_gfs_shortwave_is_the_canonical_radiation(capsys):
    code, (report,) = run_cli(capsys, REAL_GRIB / "test_NOAAS3_HRES-GFS_dswrf-dlwrf_20250129T06_S27.grib")
    assert code == 0
    dswrf, dlwrf = report["fields"]
    assert (dswrf["name"], dswrf["known"], dswrf["table"], dswrf["units"]) == ("ssrd", True, "gfs", "W m-2")
    assert (dswrf["shortName"], dswrf["parameter"], dswrf["processing"]) == ("sdswrf", "0/4/192", "average")
    assert dswrf["how"] == "average over 3h, from step 24h"
    assert not dlwrf["known"]


def _ecmwf(path: Path, edition: int, **keys) -> Path:
    h = eccodes.codes_grib_new_from_samples(f"GRIB{edition}")
    try:
        eccodes.codes_set(h, "centre", "ecmf")
        for k, v in keys.items():
            eccodes.codes_set(h, k, v)
        with open(path, "ab") as f:
            eccodes.codes_write(h, f)
    finally:
        eccodes.codes_release(h)
    return path


def test_tcc_in_per_cent_whichever_way_it_is_encoded(tmp_path, capsys):
    path = _ecmwf(tmp_path / "tcc.grib2", 2, paramId=228164)
    _ecmwf(path, 2, paramId=164)
    _, (report,) = run_cli(capsys, path)
    pct, frac = report["fields"]
    assert (pct["name"], pct["units"], pct["grib_units"], pct["paramId"]) == ("tcc", "%", "%", 228164)
    assert "conversion" not in pct
    assert (frac["name"], frac["units"], frac["grib_units"], frac["paramId"]) == ("tcc", "%", "(0 - 1)", 164)
    assert frac["conversion"] == "from (0 - 1): canonical = raw x 100"


def test_grib1_ecmwf_accumulation_is_reported_as_accumulated(tmp_path, capsys):
    """ECMWF's GRIB1 ssrd is written as a forecast at the step (time range indicator 0) but is
    accumulated from the run start; 2 m temperature stays instantaneous."""
    path = _ecmwf(tmp_path / "ifs.grib1", 1, paramId=169, stepRange="12", dataDate=20241104, dataTime=0)
    _ecmwf(path, 1, paramId=167, stepRange="12", dataDate=20241104, dataTime=0)
    _, (report,) = run_cli(capsys, path)
    ssrd, t2m = report["fields"]
    assert ssrd["shortName"] == "ssrd" and ssrd["processing"] == "accumulated"
    assert ssrd["how"] == "accumulated over 12h, since the run start"
    assert ssrd["interval"] == ["2024-11-04T00:00:00+00:00", "2024-11-04T12:00:00+00:00"]
    assert t2m["processing"] == "instantaneous" and t2m["valid"] == "2024-11-04T12:00:00+00:00"


def test_odd_and_broken_files_never_crash(tmp_path, capsys):
    gfs = publish_sample(tmp_path / "tree", tmp_path / "cache", "gfs", "2026-11-20T00:00Z",
                         horizon_hours=0)[0]
    data = gfs.read_bytes()
    first = int.from_bytes(data[8:16], "big")
    (tmp_path / "truncated.grib2").write_bytes(data[:first + 100])
    (tmp_path / "corrupt.grib2").write_bytes(data[:16] + b"\xff" * (first - 20) + data[first - 4:first])
    (tmp_path / "text.txt").write_text("hello\n")
    code, report = run_cli(capsys, tmp_path / "truncated.grib2", tmp_path / "corrupt.grib2",
                           tmp_path / "text.txt", tmp_path / "missing.grib2")
    assert code == 1
    trunc, corrupt, text, missing = report
    assert trunc["messages"] == 1 and "truncated" in trunc["notes"][0]
    assert corrupt["fields"][0]["notes"][0].startswith("does not decode")
    assert "neither GRIB nor NetCDF" in text["error"] and "cannot read" in missing["error"]


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_64BIT"])
def test_netcdf(tmp_path, fmt):
    time = np.array(["2026-11-20T00", "2026-11-20T01"], dtype="datetime64[ns]")
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), np.full((2, 2, 3), 280.0), {"units": "K"}),
         "precip": (("time", "lat", "lon"), np.zeros((2, 2, 3)),
                    {"units": "kg m-2", "standard_name": "precipitation_amount",
                     "cell_methods": "time: sum"}),
         "mystery": (("time",), np.ones(2), {"units": "1"})},
        coords={"time": time, "lat": [35.0, 36.0], "lon": [139.0, 140.0, 141.0]})
    path = tmp_path / f"f.{fmt}.nc"
    ds.to_netcdf(path, format=fmt, engine="netcdf4" if fmt == "NETCDF4" else "scipy")
    report = inspect_file(path)
    assert report["format"] == ("NetCDF4" if fmt == "NETCDF4" else "NetCDF3")
    by = {f["variable"]: f for f in report["fields"]}
    assert by["t2m"]["name"] == "t2m" and by["t2m"]["known"] and by["t2m"]["units"] == "K"
    assert by["t2m"]["time"]["time"] == ["2026-11-20T00:00:00", "2026-11-20T01:00:00"]
    assert by["t2m"]["grid"]["lat"] == [35.0, 36.0, 2]
    assert by["precip"]["name"] == "tp" and by["precip"]["processing"] == "accumulated"
    assert not by["mystery"]["known"] and by["mystery"]["notes"]


def test_a_field_decode_would_refuse_is_reported_so(tmp_path, capsys):
    """ECMWF-centre precipitation in kg m-2 (paramId 228228) where the IFS table expects
    metres (228): named, but not known, with decode's reason."""
    path = _ecmwf(tmp_path / "tp.grib2", 2, paramId=228228, stepRange="0-6")
    _, (report,) = run_cli(capsys, path)
    (tp,) = report["fields"]
    assert (tp["name"], tp["known"], tp["table"], tp["units"]) == ("tp", False, "ifs", "kg m**-2")
    assert tp["refused"] == ("paramId 228228 (0/1/52) in 'kg m**-2', the table expects paramId "
                             "228 in 'm'")
    assert any("decode refuses this field" in n for n in tp["notes"])
