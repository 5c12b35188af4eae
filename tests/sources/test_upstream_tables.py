"""Every row of the IFS, GFS and MSM tables is backed by a real message of that upstream
(``tests/data/pygrib``, ``tests/data/real-grib``) that it matches and whose
parameter and units it accepts, or by a cited public description of the encoding (``CITED``).
A row added without either fails here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import eccodes
import numpy as np

from conftest import REAL_GRIB
from pointcast.ingest import decode, index_file, judge, matches
from pointcast.sources import GFS, ICON_D2, ICON_EU, IFS, MSM

DATA = Path(__file__).resolve().parents[1] / "data" / "pygrib"

_ECMWF_OPEN_DATA = ("ECMWF open data, IFS HRES oper/scda streams: parameter list of "
                    "https://www.ecmwf.int/en/forecasts/datasets/open-data and of the "
                    "ecmwf-opendata client's README; paramIds and units from ECMWF's parameter "
                    "database, https://codes.ecmwf.int/grib/param-db/")
_ECMWF_GRIB1 = ("ECMWF GRIB1 dissemination, table 128 (levtype sfc written as level type 1): "
                "ECMWF parameter database; the real HRES GRIB1 10u sample in tests/data/real-grib")
_NCEP_PGRB2 = ("NCEP's inventory of gfs.t00z.pgrb2.0p25.f003, "
               "https://www.nco.ncep.noaa.gov/pmb/products/gfs/gfs.t00z.pgrb2.0p25.f003.shtml "
               "(DPT 2 m, UGRD/VGRD 80 and 100 m, TCDC entire atmosphere, VIS surface)")
_NCEP_TCDC = (_NCEP_PGRB2 + "; the instantaneous TCDC at 'entire atmosphere' beside the 6-hour "
              "average, as wgrib2 lists them in NOAA-EMC/global-workflow issue 896")
_JMA = ("JMA, technical information on distributed data No. 500, annex 2-2 (GRIB2 format of "
        "the MSM GPV), as read by the public decoder sus304/MSMgrib2Decorder (one message per "
        "file, sections 4-7 repeated, template 5.0 with 12 bits, earth shape 6) and listed by "
        "pygrib in predora005/wheather-forecasting (PRMSL, PRES, u, v, T, RH, lcc, mcc, hcc, "
        "tcc, tp, dswrf); parameter numbers and units from WMO GRIB2 code table 4.2")

# (model, var, shortName, levels, edition) -> the public description the row is written from.
CITED: dict[tuple, str] = {
    **{("ifs", var, short, levels, None): _ECMWF_OPEN_DATA for var, short, levels in [
        ("u", "100u", (100,)), ("u", "200u", (200,)), ("v", "100v", (100,)),
        ("v", "200v", (200,)), ("gust", "10fg3", None), ("gust", "10fg", None), ("tp", "tp", None),
        ("sf", "sf", None), ("ssrd", "ssrd", None), ("fdir", "fdir", None), ("vis", "vis", None),
        ("cape_mu", "mucape", None), ("orog", "z", None), ("t_pl", "t", (1000, 925, 850, 700)),
        ("u_pl", "u", (1000, 925, 850, 700)), ("v_pl", "v", (1000, 925, 850, 700)),
        ("z_pl", "gh", (1000, 925, 850, 700))]},
    **{("ifs", var, short, None, 1): _ECMWF_GRIB1 for var, short in [
        ("t2m", "2t"), ("d2m", "2d"), ("u10", "10u"), ("v10", "10v")]},
    **{("gfs", var, short, levels, None): _NCEP_PGRB2 for var, short, levels in [
        ("d2m", "2d", None), ("u", "u", (80, 100)), ("v", "v", (80, 100)), ("vis", "vis", None)]},
    ("gfs", "tcc", "tcc", None, None): _NCEP_TCDC,
    **{("msm", r.var, r.shortName, r.levels, r.edition): _JMA for r in MSM.fields},
}


def key(model, row) -> tuple:
    return (model.id, row.var, row.shortName, row.levels, row.edition)


def real_messages() -> list:
    files = sorted(DATA.glob("*.grib2")) + sorted(REAL_GRIB.glob("*.grib*"))
    return [m for f in files for m in index_file(f)]


def test_every_row_is_backed_by_a_real_message_or_a_cited_description():
    backed = set()
    for model in (IFS, GFS, MSM):
        for m in real_messages():
            for row in model.fields:
                if matches(row, m) and judge(row, m)[1] is None:
                    backed.add(key(model, row))
    rows = {key(model, r) for model in (IFS, GFS, MSM) for r in model.fields}
    assert rows <= backed | set(CITED), sorted(rows - backed - set(CITED), key=str)
    # What the real messages in the repository back, whatever else is present.
    assert {("gfs", v) for v in ("t2m", "sp", "msl", "u10", "v10", "gust", "tp", "ssrd", "cape_sb",
                                 "orog")} <= {k[:2] for k in backed}
    assert {("ifs", v) for v in ("t2m", "d2m", "sp", "msl", "u10", "v10", "tcc")} <= {
        k[:2] for k in backed if k[4] is None}


def test_real_gfs_wind_is_one_message_of_two_fields_and_decodes_both():
    """NCEP writes UGRD and VGRD at 10 m as one GRIB2 message of two fields: both decode, with
    the values ecCodes (multi-field support on) reads for each."""
    path = DATA / "gfs_2p5deg_f120_cut.grib2"
    msgs = index_file(path)
    wind = [m for m in msgs if m.shortName in ("10u", "10v")]
    assert [(m.number, m.field) for m in wind] == [(4, 1), (4, 2)]
    assert wind[0].offset == wind[1].offset and all(m.parts for m in wind)
    truth = {}
    eccodes.codes_grib_multi_support_on()
    try:
        with open(path, "rb") as f:
            while (h := eccodes.codes_grib_new_from_file(f)) is not None:
                name = eccodes.codes_get_string(h, "shortName")
                if name in ("10u", "10v"):
                    truth[name] = eccodes.codes_get_values(h).reshape(73, 144)[::-1]
                eccodes.codes_release(h)
    finally:
        eccodes.codes_grib_multi_support_off()
    ds = decode([path], GFS.fields, model="gfs").compute()
    assert "refused" not in ds.attrs
    np.testing.assert_allclose(ds.u10.values[0], truth["10u"], atol=1e-4)
    np.testing.assert_allclose(ds.v10.values[0], truth["10v"], atol=1e-4)
    assert not np.allclose(truth["10u"], truth["10v"])
    # The 6-hour average of total cloud (level 200) is not the table's instantaneous row.
    assert "tcc" not in ds and float(ds.ssrd.max()) > 100.0


def test_icon_rows_name_their_encoding_and_real_icon_messages_fit_it():
    """Every ICON row names the parameter and units it expects (``icon.ENCODINGS``, from DWD's
    GRIB2 numbers as ecCodes reads them), so decode checks ICON's messages too; the real
    ICON-EU messages (CLCL, ASOB_S) fit their rows, and one relabelled to another parameter of
    the same name and level is refused."""
    assert all(r.encodings for m in (ICON_EU, ICON_D2) for r in m.fields)
    real = [m for f in ("test_icon_europe_001_CLCL.grib2", "test_icon_europe_000_ASOB_S.grib2")
            for m in index_file(REAL_GRIB / f)]
    fits = {row.var for m in real for row in ICON_EU.fields
            if matches(row, m) and judge(row, m)[1] is None}
    assert fits == {"lcc", "ssr"}
    clcl = next(m for m in real if m.shortName == "CLCL")
    why = judge(next(r for r in ICON_EU.fields if r.var == "lcc"), replace(clcl, units="(0 - 1)"))[1]
    assert why is not None and "units '(0 - 1)'" in why
