"""Every row of the ENS, GEFS and ICON-EU-EPS tables is backed by a real ensemble message
(``tests/data/ensemble``, the ECMWF TIGGE control in ``tests/data/pygrib``) that it matches and
whose parameter and units it accepts, or by a cited public description (``CITED``); the real
members name their member and ensemble type, which the header pass and ``pointcast inspect``
read."""

from __future__ import annotations

from pathlib import Path

from pointcast.ingest import index_file, judge, matches
from pointcast.inspect import inspect_file
from pointcast.sources import ENS, GEFS, ICON_EU_EPS

DATA = Path(__file__).resolve().parents[1] / "data"
GEFS_MEMBER = DATA / "ensemble" / "gefs_gep08_pgrb2a_0p50_f012.grib2"
GEFS_MEAN = DATA / "ensemble" / "gefs_geavg_pgrb2a_0p50_f006_cut.grib2"
ECMWF_CONTROL = DATA / "pygrib" / "ecmwf_tigge_cut.grib2"

_ECMWF_ENS = ("ECMWF open data, ENS (enfo-ef, 0.25 deg): parameter list of ECMWF's open-data "
              "access page and of the ecmwf-opendata client's README (100u, 100v, tp among the "
              "ensemble's parameters); paramIds and units from ECMWF's parameter database, "
              "https://codes.ecmwf.int/grib/param-db/ (228246, 228247: m s-1; 228: m)")
_DWD_EPS = ("DWD ICON-EU-EPS, legacy tree icon-eu-eps/grib/<HH>/{t_2m,u_10m,v_10m,tot_prec}: "
            "the parameters Open-Meteo reads from it (open-meteo/open-meteo "
            "Sources/App/Icon/DownloadIconCommand.swift) with ICON-EU's GRIB2 encoding "
            "(sources/icon.py ENCODINGS: T_2M 0/0/0 K, U_10M/V_10M 0/2/2, 0/2/3 m s-1, "
            "TOT_PREC 0/1/52 kg m-2 from the run start); HSURF (0/3/6, m) in the run's time-invariant "
            "file icon-eu-eps/grib/<HH>/hsurf/icon-eu-eps_europe_icosahedral_time-invariant_<YYYYMMDDHH>_"
            "hsurf.grib2.bz2, the elevation Open-Meteo reads for ICON-EU-EPS (convertSurfaceElevation)")
_NCEP_GEFS_GROUND = ("NOAA GEFS pgrb2s.0p25: PRES surface and PRMSL mean sea level, instantaneous, lines 4 "
                     "and 38 of a real gep01 inventory (dynamical-org/reformatters "
                     "tests/noaa/fixtures/gep01.t00z.pgrb2s.0p25.f015.idx; units Pa in its "
                     "common_gefs_template_config.py); NCEP's encoding as GFS's rows (0/3/0 at the "
                     "surface: sp 134; 0/3/1 at mean sea level: prmsl 260074), which real GFS messages "
                     "back (tests/sources/test_upstream_tables.py)")

CITED: dict[tuple, str] = {
    ("ens", "u", "100u", (100,)): _ECMWF_ENS,
    ("ens", "v", "100v", (100,)): _ECMWF_ENS,
    ("ens", "tp", "tp", None): _ECMWF_ENS,
    # The control's oper-fc file is the IFS's own, with the IFS's z at step 0 (sources/ifs.py).
    ("ens", "orog", "z", None): ("ECMWF open data, IFS oper-fc: surface geopotential z (129, m2 s-2) "
                                 "at step 0, the IFS table's row (tests/sources/test_upstream_tables.py)"),
    **{("icon-eu-eps", r.var, r.shortName, r.levels): _DWD_EPS for r in ICON_EU_EPS.fields},
    ("gefs", "sp", "sp", None): _NCEP_GEFS_GROUND,
    ("gefs", "msl", "prmsl", None): _NCEP_GEFS_GROUND,
}


def key(model, row) -> tuple:
    return (model.id, row.var, row.shortName, row.levels)


def test_every_ensemble_row_is_backed_by_a_real_message_or_a_cited_description():
    messages = [m for f in (GEFS_MEMBER, GEFS_MEAN, ECMWF_CONTROL) for m in index_file(f)]
    models = (ENS, GEFS, ICON_EU_EPS)
    backed = {key(model, row) for model in models for row in model.fields for m in messages
              if matches(row, m) and judge(row, m)[1] is None}
    rows = {key(model, r) for model in models for r in model.fields}
    assert rows <= backed | set(CITED), sorted(rows - backed - set(CITED), key=str)
    assert {("gefs", v) for v in ("t2m", "u10", "v10", "u", "v", "tp")} <= {k[:2] for k in backed}
    assert {("ens", v) for v in ("t2m", "u10", "v10")} <= {k[:2] for k in backed}
    assert all(r.encodings for m in models for r in m.fields)


def test_real_members_name_their_member_and_ensemble_type():
    gefs = index_file(GEFS_MEMBER)
    assert {(m.member, m.ensemble_type, m.ensemble_size) for m in gefs} == {(8, 3, 20)}
    tp = next(m for m in gefs if m.shortName == "tp")
    # APCP over the 6-hour-reset window: 6-12 h at step 12, as the GEFS row reads it.
    assert (tp.stepType, tp.parameter) == ("accum", "0/1/8")
    assert judge(GEFS.field_for("tp"), tp)[1] is None
    control = index_file(ECMWF_CONTROL)
    assert {(m.member, m.ensemble_type, m.ensemble_size) for m in control} == {(0, 1, 51)}
    # The ensemble mean is no member.
    assert {m.member for m in index_file(GEFS_MEAN)} == {None}


def test_inspect_names_member_and_ensemble_type():
    fields = inspect_file(GEFS_MEMBER)["fields"]
    assert [f["ensemble"] for f in fields] == [{
        "member": 8, "type": 3, "type_name": "perturbed (positively perturbed forecast)",
        "size": 20}] * 2
    tp = fields[1]
    assert (tp["name"], tp["table"], tp["known"]) == ("tp", "gefs", True)
    control = inspect_file(ECMWF_CONTROL)["fields"]
    t2m = next(f for f in control if f["shortName"] == "2t")
    assert t2m["table"] == "ens" and t2m["ensemble"]["member"] == 0
    assert t2m["ensemble"]["type_name"].startswith("control")
    assert all("ensemble" not in f for f in inspect_file(GEFS_MEAN)["fields"])
