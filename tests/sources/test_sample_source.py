"""The embedded sample source: real GRIB2 in the upstreams' layouts, physically consistent.

Runs are small (every 16th row/column, 12 hours) so the module takes seconds. Files are read
back with ecCodes, and once with cfgrib as an independent reader.
"""

from __future__ import annotations

import bz2
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import eccodes
import numpy as np
import pytest

from conftest import REAL_GRIB as REAL
from pointcast import physics
from pointcast.catalogue import VARIABLES
from pointcast.gribtable import RUN_LEVELS, Processing
from pointcast.sample import (
    DEFAULT_AREA,
    SYNTHETIC_NOTE,
    LandMask,
    SampleSource,
    Weather,
    cos_zenith,
    flat_half_level_heights,
    hours_since_epoch,
    lows,
    products_of,
    relative_humidity,
    sample_grid,
)
from pointcast.sources import ICON_D2, ICON_EU, IFS, MODELS, MSM, ifs, msm as msm_module, run_steps
from pointcast.sources.base import RunRef
from pointcast.sources.ifs import steps_for_run
from pointcast.sourcing import make_source

UTC = UTC
INIT = "2026-01-15T00:00Z"  # winter: snow in the north, sunrise inside the 12 hours
NOW = datetime(2026, 1, 15, 17, 40, tzinfo=UTC)
HORIZON = 12
# The deterministic models (the ensembles are tested in test_sample_ensemble.py).
DETERMINISTIC = {mid: model for mid, model in MODELS.items() if not model.members}


# ------------------------------------------------------------------------------------------
# Reading helpers
# ------------------------------------------------------------------------------------------


# The level key of single-level messages whose level is not 0 (JMA's 1.5 m decodes as 2).
SINGLE_LEVEL = {"2t": 2, "2d": 2, "10u": 10, "10v": 10, "10fg3": 10, "10fg": 10,
                "max_i10fg": 10, "CLCL": 800, "t": 2, "r": 2}


@dataclass
class Msg:
    file: Path
    short_name: str
    triplet: tuple[int, int, int]  # GRIB2 discipline, parameterCategory, parameterNumber
    type_of_level: str
    level: int
    step_type: str
    units: str
    start: int  # minutes
    end: int  # minutes
    centre: str
    packing: str
    step_units: int
    values: np.ndarray  # (nlat, nlon)
    lats: np.ndarray | None  # coordinates: on the first message of a file only
    lons: np.ndarray | None


def handles(path: Path):
    """ecCodes' handle of every field of a file: DWD's bz2 files message by message, the
    others with ecCodes' multi-field support on (JMA's files are one multi-field message)."""
    if path.suffix == ".bz2":
        data, offset = bz2.decompress(path.read_bytes()), 0
        while offset < len(data):
            h = eccodes.codes_new_from_message(data[offset:])
            offset += eccodes.codes_get_long(h, "totalLength")
            yield h
        return
    eccodes.codes_grib_multi_support_on()
    try:
        with open(path, "rb") as f:
            while (h := eccodes.codes_grib_new_from_file(f)) is not None:
                yield h
    finally:
        eccodes.codes_grib_multi_support_off()


def read(path: Path) -> list[Msg]:
    out = []
    for h in handles(path):
        try:
            step_units = eccodes.codes_get_long(h, "indicatorOfUnitOfTimeRange")
            nj, ni = eccodes.codes_get_long(h, "Nj"), eccodes.codes_get_long(h, "Ni")
            meta = dict(
                file=path, short_name=eccodes.codes_get_string(h, "shortName"),
                triplet=tuple(eccodes.codes_get_long(h, k) for k in (
                    "discipline", "parameterCategory", "parameterNumber")),
                type_of_level=eccodes.codes_get_string(h, "typeOfLevel"),
                level=eccodes.codes_get_long(h, "level"),
                step_type=eccodes.codes_get_string(h, "stepType"),
                units=eccodes.codes_get_string(h, "units"),
                centre=eccodes.codes_get_string(h, "centre"),
                packing=eccodes.codes_get_string(h, "packingType"),
                step_units=step_units,
                values=eccodes.codes_get_values(h).reshape(nj, ni),
                lats=None if out else eccodes.codes_get_array(h, "latitudes").reshape(nj, ni),
                lons=None if out else eccodes.codes_get_array(h, "longitudes").reshape(nj, ni),
            )
            # Steps in minutes (after the names: the concepts look at the step's unit).
            eccodes.codes_set_long(h, "stepUnits", 0)
            out.append(Msg(start=eccodes.codes_get_long(h, "startStep"),
                           end=eccodes.codes_get_long(h, "endStep"), **meta))
        finally:
            eccodes.codes_release(h)
    return out


def name_of(m: Msg) -> str:
    """The decoded shortName, or for parameters ecCodes does not name (JMA's TCDC and APCP
    decode as "unknown") ``unknown:<discipline>/<category>/<number>``."""
    if m.short_name == "unknown":
        return "unknown:{}/{}/{}".format(*m.triplet)
    return m.short_name


TCDC, APCP = "unknown:0/6/1", "unknown:0/1/8"  # JMA's total cloud and hourly precipitation


class Run:
    """All messages of a fetched run, addressable by (shortName, level, end minute)."""

    def __init__(self, fetched, model, only: tuple[str, ...] = ()):
        self.fetched, self.model = fetched, model
        files = [f for f in fetched.files
                 if not only or any(f"_{p}." in f.name for p in only)]
        self.msgs = [m for f in files for m in read(f)]
        self.by_key: dict[tuple[str, int, int], Msg] = {}
        for m in self.msgs:
            key = (name_of(m), m.level, m.end)
            assert key not in self.by_key, f"duplicate message {key}"
            self.by_key[key] = m

    def get(self, short: str, minute: int, level: int | None = None) -> np.ndarray:
        if level is None:
            level = SINGLE_LEVEL.get(short, 0)
        return self.by_key[(short, level, minute)].values

    def minutes(self, short: str) -> list[int]:
        return sorted({m.end for m in self.msgs if name_of(m) == short})

    @property
    def main_minutes(self) -> list[int]:
        return [int(s.total_seconds() // 60) for s in self.fetched.run.steps]


def fetch(model, cache, **kw):
    """A small sample run; ICON in DWD's legacy regular lat/lon tree (the v1 tree on the native
    grid is tested in test_dwd_v1.py)."""
    kw.setdefault("icon_layout", "legacy")
    kw.setdefault("scale", 16)
    kw.setdefault("init", INIT)
    kw.setdefault("horizon_hours", HORIZON)
    src = SampleSource(**kw)
    run = src.discover(model, NOW)
    return src.fetch(run, model, cache)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def runs(cache) -> dict[str, Run]:
    return {mid: Run(fetch(model, cache), model) for mid, model in DETERMINISTIC.items()}


# ------------------------------------------------------------------------------------------
# Models, configuration, discovery
# ------------------------------------------------------------------------------------------


def test_model_tables_use_catalogue_names_and_sane_grids():
    assert set(DETERMINISTIC) == {"ifs", "icon-eu", "icon-d2", "msm", "gfs"}
    assert IFS.grid.shape == (721, 1440)
    assert ICON_EU.grid.shape == (657, 1377)
    assert ICON_D2.grid.shape == (746, 1215)
    assert MSM.grid.shape == (505, 481)  # 0.05 x 0.0625 deg, 47.6-22.4 N, 120-150 E
    for model in MODELS.values():
        for row in model.fields:
            assert row.var in VARIABLES, (model.id, row.var)
        assert model.steps == tuple(sorted(model.steps))
    assert not any(r.fine for r in IFS.fields + ICON_EU.fields)
    assert {r.param for r in ICON_D2.fields if r.fine} == {
        "TOT_PREC", "SNOW_GSP", "SNOW_CON", "ASWDIR_S", "ASWDIFD_S"}
    assert ICON_D2.fine_steps[1] - ICON_D2.fine_steps[0] == timedelta(minutes=15)
    assert ICON_D2.fine_steps[-1] == timedelta(hours=48)
    # IFS: 3-hourly to 144 h, then 6-hourly to 360 h for 00/12; 06/18 stop at 144 h.
    assert steps_for_run(0)[-1] == timedelta(hours=360)
    assert steps_for_run(6)[-1] == timedelta(hours=144)
    assert timedelta(hours=147) not in steps_for_run(12)
    assert IFS.horizon == timedelta(hours=360)
    assert ICON_EU.steps[78] == timedelta(hours=78) and ICON_EU.steps[79] == timedelta(hours=81)
    assert ICON_EU.horizon == timedelta(hours=120) and ICON_D2.horizon == timedelta(hours=48)
    assert "vis" not in {r.var for r in ICON_D2.fields} and "u" not in {r.var for r in
                                                                          ICON_EU.fields}
    # MSM: hourly, 78 h for the 00/12 UTC runs, 39 h for the six others.
    assert MSM.horizon == timedelta(hours=78) and MSM.run_hours == tuple(range(0, 24, 3))
    assert MSM.steps == tuple(timedelta(hours=h) for h in range(79))
    for hour in MSM.run_hours:
        want = 78 if hour in (0, 12) else 39
        assert msm_module.steps_for_run(hour) == tuple(timedelta(hours=h)
                                                       for h in range(want + 1)), hour
    with pytest.raises(ValueError):
        msm_module.steps_for_run(1)
    assert {r.var for r in MSM.fields} == {"msl", "sp", "u10", "v10", "t2m", "rh2m", "lcc",
                                           "tcc", "tp", "ssrd"}


def test_new_rows_lcc_ssr_model_levels_and_grib1():
    for model in (ICON_EU, ICON_D2):
        rows = {r.var: r for r in model.fields if r.var in ("lcc", "ssr", "u_ml", "v_ml", "hhl")}
        assert (rows["lcc"].shortName, rows["lcc"].typeOfLevel, rows["lcc"].levels,
                rows["lcc"].param) == ("CLCL", "unknown", None, "CLCL")
        assert (rows["ssr"].shortName, rows["ssr"].typeOfLevel, rows["ssr"].processing,
                rows["ssr"].param) == ("avg_snswrf", "surface", Processing.AVG_SINCE_START,
                                       "ASOB_S")
        # Model levels: no numbers in the table, each run's HHL decides (sources/icon.py).
        for var, short in (("u_ml", "u"), ("v_ml", "v")):
            assert (rows[var].shortName, rows[var].typeOfLevel, rows[var].levels) == (
                short, "generalVerticalLayer", RUN_LEVELS)
        assert (rows["hhl"].shortName, rows["hhl"].typeOfLevel, rows["hhl"].processing,
                rows["hhl"].levels) == ("HHL", "generalVertical", Processing.CONSTANT,
                                        RUN_LEVELS)
        # What the products can go without: CLCL, ASOB_S, CAPE_ML, VIS, the pressure levels.
        optional = {(r.param, r.typeOfLevel) for r in model.fields if r.optional}
        assert optional == {(p, "isobaricInhPa") for p in ("T", "U", "V", "FI")} | {
            ("CLCL", "unknown"), ("ASOB_S", "surface"), ("CAPE_ML", "unknown")} | (
            {("VIS", "surface")} if model is ICON_EU else set())
        assert all(r.edition is None for r in model.fields)
    grib1 = {(r.var, r.shortName, r.typeOfLevel) for r in IFS.fields if r.edition == 1}
    assert grib1 == {("t2m", "2t", "surface"), ("d2m", "2d", "surface"),
                     ("u10", "10u", "surface"), ("v10", "10v", "surface")}
    # The sample writes GRIB2 only: no product comes from an edition-1 row.
    assert not any(r.edition == 1 for p in products_of(IFS) for r in p.rows)
    assert IFS.field_for("u10").typeOfLevel == "heightAboveGround"  # GRIB2 rows come first


def test_make_source_builds_the_sample_and_names_unknown_types():
    cfg = SimpleNamespace(type="sample", options={"scale": 8, "area": [-10, 40, 20, 60],
                                                  "init": "latest"})
    src = make_source("sample", cfg)
    assert isinstance(src, SampleSource)
    assert src.scale == 8 and src.area == (-10.0, 40.0, 20.0, 60.0) and src.name == "sample"
    with pytest.raises(ValueError, match="'nomads'"):
        make_source("x", SimpleNamespace(type="nomads", options={}))
    with pytest.raises(ValueError, match="colour"):
        make_source("x", SimpleNamespace(type="sample", options={"colour": "red"}))
    with pytest.raises(ValueError):
        SampleSource(scale=0)
    with pytest.raises(ValueError):
        SampleSource(area=(10, 40, -10, 60))


def test_discover_returns_the_latest_run_of_each_model():
    src = SampleSource()
    got = {mid: src.discover(m, NOW) for mid, m in MODELS.items()}
    assert got["ifs"].init == datetime(2026, 1, 15, 12, tzinfo=UTC)
    assert got["icon-eu"].init == datetime(2026, 1, 15, 12, tzinfo=UTC)
    assert got["icon-d2"].init == datetime(2026, 1, 15, 15, tzinfo=UTC)
    assert got["msm"].init == datetime(2026, 1, 15, 15, tzinfo=UTC)
    assert got["msm"].steps[-1] == timedelta(hours=39)  # a 15 UTC run
    noon = SampleSource(init="2026-01-15T13:10Z").discover(MSM, NOW)
    assert noon.init.hour == 12 and noon.steps[-1] == timedelta(hours=78)
    for mid, run in got.items():
        assert run.model == mid and run.source == "sample"
        assert run.synthetic and run.complete
        assert run.steps == run_steps(MODELS[mid], run.init)
    assert got["ifs"].steps[-1] == timedelta(hours=360)
    # 06/18 UTC IFS runs stop at 144 h; a configured init is floored to the model's runs.
    six = SampleSource(init="2026-01-15T07:30:00+00:00").discover(IFS, NOW)
    assert six.init.hour == 6 and six.steps[-1] == timedelta(hours=144)
    d2 = SampleSource(init=datetime(2026, 1, 15, 4)).discover(ICON_D2, NOW)
    assert d2.init == datetime(2026, 1, 15, 3, tzinfo=UTC)
    capped = SampleSource(horizon_hours=6).discover(ICON_EU, NOW)
    assert capped.steps == tuple(timedelta(hours=h) for h in range(7))


def test_an_outage_publishes_no_run_starting_in_it():
    """The runs starting in [start, end) are not there (a stopped upstream): discovery finds the
    last one before it, and those after it again once the outage is over."""
    t = datetime(2026, 1, 15, 15, tzinfo=UTC)
    src = make_source("stalled", SimpleNamespace(type="sample", options={"outage": (t - timedelta(hours=6), t)}))
    assert src.discover(MSM, t - timedelta(minutes=1)).init == t - timedelta(hours=9)
    assert src.discover(MSM, t - timedelta(hours=6)).init == t - timedelta(hours=9)
    assert src.discover(MSM, t).init == t
    assert src.discover(IFS, t).init == t - timedelta(hours=9)  # 06 UTC: its 12 UTC run is in the outage


# ------------------------------------------------------------------------------------------
# Layout, names, encoding
# ------------------------------------------------------------------------------------------


def test_files_are_laid_out_like_the_upstreams(runs, cache):
    ifs_dir = cache / "sample" / "ifs" / "2026011500"
    names = [f.relative_to(ifs_dir).as_posix() for f in runs["ifs"].fetched.files]
    assert names == [f"20260115/00z/ifs/0p25/oper/20260115000000-{h}h-oper-fc.grib2"
                     for h in (0, 3, 6, 9, 12)]  # in step order
    for f in runs["ifs"].fetched.files:
        assert f.with_suffix(".index").exists()

    eu_dir = cache / "sample" / "icon-eu" / "2026011500"
    eu = {f.relative_to(eu_dir).as_posix() for f in runs["icon-eu"].fetched.files}
    base = "icon-eu/grib/00"
    assert (f"{base}/t_2m/icon-eu_europe_regular-lat-lon_single-level_2026011500_007_T_2M"
            ".grib2.bz2") in eu
    assert (f"{base}/fi/icon-eu_europe_regular-lat-lon_pressure-level_2026011500_012_850_FI"
            ".grib2.bz2") in eu
    assert f"{base}/hsurf/icon-eu_europe_regular-lat-lon_time-invariant_2026011500_HSURF" \
           ".grib2.bz2" in eu
    assert f"{base}/vmax_10m/icon-eu_europe_regular-lat-lon_single-level_2026011500_000_" \
           "VMAX_10M.grib2.bz2" not in eu  # interval fields start at the first step
    assert (f"{base}/u/icon-eu_europe_regular-lat-lon_model-level_2026011500_012_74_U"
            ".grib2.bz2") in eu
    assert (f"{base}/v/icon-eu_europe_regular-lat-lon_model-level_2026011500_000_73_V"
            ".grib2.bz2") in eu
    for lv in (1, 75):  # ICON-EU's 74 levels: half levels 1 (the top) to 75 (the surface)
        assert (f"{base}/hhl/icon-eu_europe_regular-lat-lon_time-invariant_2026011500_{lv}_HHL"
                ".grib2.bz2") in eu
    assert (f"{base}/clcl/icon-eu_europe_regular-lat-lon_single-level_2026011500_004_CLCL"
            ".grib2.bz2") in eu
    assert (f"{base}/asob_s/icon-eu_europe_regular-lat-lon_single-level_2026011500_000_ASOB_S"
            ".grib2.bz2") in eu
    full = sorted(int(f.split("_")[-2]) for f in eu if "_model-level_2026011500_000_" in f
                  and f.endswith("_U.grib2.bz2"))
    assert full == list(range(full[0], 75)) and 60 < full[0] < 72
    prods = products_of(ICON_EU, {"generalVertical": tuple(range(1, 76)),
                                  "generalVerticalLayer": tuple(full)})
    constants = [p for p in prods if p.processing is Processing.CONSTANT]
    assert len(constants) == 1 + 75  # HSURF, HHL on every half level
    per_step = len(prods) - len(constants)  # at 13 steps,
    assert len(eu) == 13 * per_step - 1 + len(constants)  # minus VMAX_10M at step 0

    d2_dir = cache / "sample" / "icon-d2" / "2026011500"
    d2 = {f.relative_to(d2_dir).as_posix() for f in runs["icon-d2"].fetched.files}
    base = "icon-d2/grib/00"
    assert (f"{base}/tot_prec/icon-d2_germany_regular-lat-lon_single-level_2026011500_003_2d_"
            "tot_prec.grib2.bz2") in d2
    assert (f"{base}/t/icon-d2_germany_regular-lat-lon_pressure-level_2026011500_005_700_t"
            ".grib2.bz2") in d2
    assert (f"{base}/hsurf/icon-d2_germany_regular-lat-lon_time-invariant_2026011500_000_0_"
            "hsurf.grib2.bz2") in d2
    assert (f"{base}/u/icon-d2_germany_regular-lat-lon_model-level_2026011500_007_65_u"
            ".grib2.bz2") in d2
    assert (f"{base}/hhl/icon-d2_germany_regular-lat-lon_time-invariant_2026011500_000_1_"
            "hhl.grib2.bz2") in d2
    assert (f"{base}/hhl/icon-d2_germany_regular-lat-lon_time-invariant_2026011500_000_66_"
            "hhl.grib2.bz2") in d2
    assert (f"{base}/asob_s/icon-d2_germany_regular-lat-lon_single-level_2026011500_001_2d_"
            "asob_s.grib2.bz2") in d2

    msm_dir = cache / "sample" / "msm" / "2026011500"
    assert [f.relative_to(msm_dir).as_posix() for f in runs["msm"].fetched.files] == [
        "Z__C_RJTD_20260115000000_MSM_GPV_Rjp_Lsurf_FH00-15_grib2.bin"]  # a 12 h run

    for mid, run in runs.items():
        run_dir = cache / "sample" / mid / "2026011500"
        assert "SYNTHETIC" in (run_dir / "README.txt").read_text()
        marker = json.loads((run_dir / "complete").read_text())
        assert marker["model"] == mid and marker["scale"] == 16
        assert run.fetched.notes[0] == SYNTHETIC_NOTE
        assert run.fetched.run.synthetic
        assert not list(run_dir.rglob("*.tmp"))
        for f in run.fetched.files:
            if f.suffix == ".bz2":
                assert f.read_bytes()[:3] == b"BZh"
            else:
                assert f.read_bytes()[:4] == b"GRIB"


UNITS = {
    "ecmf": {"2t": "K", "2d": "K", "sp": "Pa", "msl": "Pa", "10u": "m s**-1",
             "10v": "m s**-1", "100u": "m s**-1", "100v": "m s**-1", "200u": "m s**-1",
             "200v": "m s**-1", "10fg3": "m s**-1", "10fg": "m s**-1", "tp": "m",
             "sf": "m of water equivalent", "ssrd": "J m**-2", "fdir": "J m**-2", "tcc": "(0 - 1)",
             "vis": "m", "mucape": "J kg**-1", "z": "m**2 s**-2", "t": "K", "u": "m s**-1",
             "v": "m s**-1", "gh": "gpm"},
    "edzw": {"2t": "K", "2d": "K", "sp": "Pa", "prmsl": "Pa", "10u": "m s**-1",
             "10v": "m s**-1", "max_i10fg": "m s**-1", "tp": "kg m**-2", "lsfwe": "kg m**-2",
             "csfwe": "kg m**-2", "ASWDIR_S": "W m-2", "ASWDIFD_S": "W m-2", "CLCT": "%",
             "vis": "m", "CAPE_ML": "J kg-1", "HSURF": "m", "t": "K", "u": "m s**-1",
             "v": "m s**-1", "z": "m**2 s**-2", "CLCL": "%", "avg_snswrf": "W m**-2",
             "HHL": "m"},
}
STEP_TYPE = {Processing.INSTANT: "instant", Processing.CONSTANT: "instant",
             Processing.ACCUM_SINCE_START: "accum", Processing.AVG_SINCE_START: "avg",
             Processing.INTERVAL: "max"}


def expected_minutes(run: Run, row) -> list[int]:
    main = run.main_minutes
    if row.processing is Processing.CONSTANT:
        return [0]
    if row.processing is Processing.INTERVAL:
        ends = main[1:]
        if run.model.id == "ifs":  # 10fg3 ends 3-h maxima, 10fg 1-h and 6-h maxima
            three = [e for e in ends if ifs.gust_window_hours(e // 60) == 3]
            ends = three if row.shortName == "10fg3" else [e for e in ends if e not in three]
        return ends
    if row.fine:
        return [int(s.total_seconds() // 60) for s in run.model.fine_steps
                if s.total_seconds() // 60 <= main[-1]]
    return main


@pytest.mark.parametrize("mid", ["ifs", "icon-eu", "icon-d2"])
def test_every_table_row_is_present_at_every_step_as_decoded(runs, mid):
    run = runs[mid]
    centre = "ecmf" if mid == "ifs" else "edzw"
    packing = "grid_ccsds" if mid == "ifs" else "grid_simple"
    seen = {(m.short_name, m.type_of_level, m.level, m.end) for m in run.msgs}
    for row in run.model.fields:
        if row.edition not in (None, 2):
            continue  # GRIB1 encodings (IFS's dissemination): the sample writes GRIB2 only
        levels = row.levels or (SINGLE_LEVEL.get(row.shortName, 0),)
        if row.levels == RUN_LEVELS:  # the run's own: some, the same at every step
            levels = sorted({m.level for m in run.msgs if m.short_name == row.shortName
                             and m.type_of_level == row.typeOfLevel})
            assert levels, row
        for minute in expected_minutes(run, row):
            for level in levels:
                assert (row.shortName, row.typeOfLevel, level, minute) in seen, (
                    mid, row, level, minute)
    for m in run.msgs:
        assert m.centre == centre and m.packing == packing
        assert m.units == UNITS[centre][m.short_name], (m.short_name, m.units)
        rows = [r for r in run.model.fields if r.shortName == m.short_name
                and r.typeOfLevel == m.type_of_level]
        assert rows, f"{mid}: message {m.short_name}/{m.type_of_level} maps to no row"
        assert m.step_type == STEP_TYPE[rows[0].processing], (m.short_name, m.step_type)
        if rows[0].processing in (Processing.ACCUM_SINCE_START, Processing.AVG_SINCE_START):
            assert m.start == 0
        if rows[0].processing is Processing.INTERVAL:
            assert m.end > m.start and m.end in run.main_minutes
    # IFS gust: the maximum over the last hour (to 90 h: this run ends at 12 h);
    # ICON's over the previous hour.
    gust = [m for m in run.msgs if m.step_type == "max"]
    assert {m.end - m.start for m in gust} == {60}


def test_icon_d2_quarter_hours_share_the_hourly_file_in_minutes(runs):
    run = runs["icon-d2"]
    f3 = next(f for f in run.fetched.files if f.name.endswith("_003_2d_tot_prec.grib2.bz2"))
    msgs = read(f3)
    assert [(m.start, m.end) for m in msgs] == [(0, 135), (0, 150), (0, 165), (0, 180)]
    assert all(m.step_units == 0 for m in msgs)  # minutes
    f0 = next(f for f in run.fetched.files if f.name.endswith("_000_2d_aswdir_s.grib2.bz2"))
    assert [m.end for m in read(f0)] == [0]
    t2m = next(f for f in run.fetched.files if f.name.endswith("_003_2d_t_2m.grib2.bz2"))
    assert [(m.end, m.step_units) for m in read(t2m)] == [(180, 0)]  # minutes, as DWD




def _keys(path: Path, keys: tuple[str, ...]) -> dict:
    data = path.read_bytes()
    if path.suffix == ".bz2":
        data = bz2.decompress(data)
    h = eccodes.codes_new_from_message(data)
    try:
        return {k: eccodes.codes_get(h, k) for k in keys}
    finally:
        eccodes.codes_release(h)


def test_icon_headers_match_real_dwd_files(runs):
    keys = ("centre", "subCentre", "tablesVersion", "localTablesVersion", "shapeOfTheEarth",
            "typeOfGeneratingProcess", "generatingProcessIdentifier",
            "productionStatusOfProcessedData", "typeOfProcessedData",
            "significanceOfReferenceTime", "packingType", "bitsPerValue", "gridType",
            "jScansPositively", "iScansNegatively", "indicatorOfUnitOfTimeRange")
    real = _keys(REAL / "test_icon_europe_001_CLCL.grib2", keys)
    ours = next(f for f in runs["icon-eu"].fetched.files if f.name.endswith("_001_CLCT.grib2.bz2"))
    assert _keys(ours, keys) == real
    # The radiation mean since the start: same template, zero-width at step 0.
    stat = ("productDefinitionTemplateNumber", "typeOfStatisticalProcessing", "stepType",
            "bitsPerValue", "indicatorOfUnitOfTimeRange", "stepRange")
    real = _keys(REAL / "test_icon_europe_000_ASOB_S.grib2", stat)
    ours = next(f for f in runs["icon-eu"].fetched.files
                if f.name.endswith("_000_ASWDIR_S.grib2.bz2"))
    assert _keys(ours, stat) == real
    # CLCL and ASOB_S themselves: the same parameter, level and statistics keys as DWD's.
    param = ("discipline", "parameterCategory", "parameterNumber",
             "productDefinitionTemplateNumber", "typeOfFirstFixedSurface",
             "scaleFactorOfFirstFixedSurface", "scaledValueOfFirstFixedSurface",
             "typeOfSecondFixedSurface", "scaleFactorOfSecondFixedSurface",
             "scaledValueOfSecondFixedSurface", "shortName", "typeOfLevel", "level", "units",
             "stepType", "stepRange")
    for real_name, suffix in (("test_icon_europe_001_CLCL.grib2", "_000_CLCL.grib2.bz2"),
                              ("test_icon_europe_000_ASOB_S.grib2", "_000_ASOB_S.grib2.bz2")):
        extra = ("typeOfStatisticalProcessing",) if "ASOB" in real_name else ()
        ours = next(f for f in runs["icon-eu"].fetched.files if f.name.endswith(suffix))
        assert _keys(ours, param + extra) == _keys(REAL / real_name, param + extra), real_name
    # At scale 1 the sample grid is DWD's grid.
    grid = ("Ni", "Nj", "latitudeOfFirstGridPointInDegrees", "longitudeOfFirstGridPointInDegrees",
            "latitudeOfLastGridPointInDegrees", "longitudeOfLastGridPointInDegrees",
            "iDirectionIncrementInDegrees", "jDirectionIncrementInDegrees")
    real = _keys(REAL / "test_icon_europe_001_CLCL.grib2", grid)
    g = sample_grid(ICON_EU, 1, (-180.0, -90.0, 180.0, 90.0))
    assert (g.shape[1], g.shape[0], g.lats[0], g.lons[0] % 360, g.lats[-1], g.lons[-1],
            g.dlon, g.dlat) == tuple(real.values())


def test_ifs_index_lines_point_at_their_messages(runs):
    for f in runs["ifs"].fetched.files:
        data = f.read_bytes()
        lines = [json.loads(x) for x in f.with_suffix(".index").read_text().splitlines()]
        offset = 0
        for entry in lines:
            assert entry["_offset"] == offset
            offset += entry["_length"]
            assert {entry[k] for k in ("domain", "class", "type", "stream", "expver")} == {
                "g", "od", "fc", "oper", "0001"}
            assert entry["date"] == "20260115" and entry["time"] == "0000"
            h = eccodes.codes_new_from_message(data[entry["_offset"]:entry["_offset"]
                                                    + entry["_length"]])
            try:
                assert eccodes.codes_get_long(h, "totalLength") == entry["_length"]
                # The index names the MARS parameter: 10fg for every gust window, which
                # ecCodes decodes as 10fg3 when it is 3 hours long (sources/ifs.py).
                short = eccodes.codes_get_string(h, "shortName")
                assert {"10fg3": "10fg"}.get(short, short) == entry["param"]
                assert eccodes.codes_get_long(h, "endStep") == int(entry["step"])
                assert entry["step"] == f.name.split("-")[1][:-1]
                if entry["levtype"] == "pl":
                    assert eccodes.codes_get_string(h, "typeOfLevel") == "isobaricInhPa"
                    assert eccodes.codes_get_long(h, "level") == int(entry["levelist"])
                else:
                    assert "levelist" not in entry
                for k, v in (("mars.class", "od"), ("mars.type", "fc"),
                             ("mars.stream", "oper"), ("mars.expver", "0001")):
                    assert eccodes.codes_get_string(h, k) == v
            finally:
                eccodes.codes_release(h)
        assert offset == len(data)


def test_ifs_gust_windows_are_ecmwfs_post_processing_steps(tmp_path):
    """The last hour to 90 h (10fg, stepRange 89-90), the last 3 h to 144 h (10fg3), the last
    6 h after (10fg): ECMWF's post-processing steps (sources/ifs.py)."""
    fetched = fetch(IFS, tmp_path, scale=32, horizon_hours=156)
    run = Run(fetched, IFS)
    windows = {m.end // 60: (m.short_name, m.start // 60) for m in run.msgs
               if m.short_name in ("10fg", "10fg3")}
    assert windows == {**{s: ("10fg", s - 1) for s in range(3, 91, 3)},
                       **{s: ("10fg3", s - 3) for s in range(93, 145, 3)},
                       150: ("10fg", 144), 156: ("10fg", 150)}
    assert all(m.step_units == 1 for m in run.msgs)


def test_icon_eu_gust_covers_the_last_hour_also_in_the_3_hourly_range(tmp_path):
    fetched = fetch(ICON_EU, tmp_path, scale=32, horizon_hours=84)
    run = Run(fetched, ICON_EU, only=("VMAX_10M", "U_10M", "V_10M"))
    windows = {m.end // 60: (m.start // 60, m.end // 60) for m in run.msgs
               if m.short_name == "max_i10fg"}
    assert windows[78] == (77, 78) and windows[81] == (80, 81) and windows[84] == (83, 84)
    assert sorted(windows) == list(range(1, 79)) + [81, 84]


# ------------------------------------------------------------------------------------------
# JMA MSM
# ------------------------------------------------------------------------------------------

# What ecCodes 2.50 decodes from JMA's encoding, by JMA element: shortName, typeOfLevel,
# level key, stepType, units and the GRIB2 (discipline, category, number).
MSM_DECODED = {
    "PRMSL": ("prmsl", "meanSea", 0, "instant", "Pa", (0, 3, 1)),
    "PRES": ("sp", "surface", 0, "instant", "Pa", (0, 3, 0)),
    "UGRD": ("10u", "heightAboveGround", 10, "instant", "m s**-1", (0, 2, 2)),
    "VGRD": ("10v", "heightAboveGround", 10, "instant", "m s**-1", (0, 2, 3)),
    "TMP": ("t", "heightAboveGround", 2, "instant", "K", (0, 0, 0)),  # 1.5 m
    "RH": ("r", "heightAboveGround", 2, "instant", "%", (0, 1, 1)),  # 1.5 m
    "LCDC": ("lcc", "surface", 0, "instant", "%", (0, 6, 3)),
    "TCDC": ("unknown", "surface", 0, "instant", "unknown", (0, 6, 1)),
    "APCP": ("unknown", "surface", 0, "accum", "unknown", (0, 1, 8)),
    "DSWRF": ("avg_sdswrf", "surface", 0, "avg", "W m**-2", (0, 4, 7)),
}
# JMA's element order inside a step (MCDC and HCDC, not written, would follow LCDC).
MSM_ORDER = ["prmsl", "sp", "10u", "10v", "t", "r", "lcc", TCDC, APCP, "avg_sdswrf"]
MSM_INIT_HOURS = (0, 3, 6)
JAPAN = (30.0, 46.0, 128.0, 146.0)  # south, north, west, east


@pytest.fixture(scope="module")
def msm_runs(cache) -> dict[int, Run]:
    """Whole MSM runs, coarse (every 32nd row/column): 00 UTC (78 h), 03 and 06 UTC (39 h)."""
    return {hour: Run(fetch(MSM, cache / "msm-full", scale=32, horizon_hours=None,
                            init=f"2026-01-15T{hour:02d}:00Z"), MSM)
            for hour in MSM_INIT_HOURS}


def msm_rows(m: Msg) -> list:
    """The MSM rows a message belongs to: same shortName and typeOfLevel, and a processing
    that fits its step type (TCDC and APCP share "unknown"/"surface")."""
    return [r for r in MSM.fields if r.shortName == m.short_name
            and r.typeOfLevel == m.type_of_level and STEP_TYPE[r.processing] == m.step_type]


def test_msm_rows_are_present_at_every_step_as_decoded(msm_runs, runs):
    cases = [(hour, run, 78 if hour in (0, 12) else 39) for hour, run in msm_runs.items()]
    cases.append(("12 h", runs["msm"], HORIZON))
    for hour, run, horizon in cases:
        main = run.main_minutes
        assert main == [60 * h for h in range(horizon + 1)], hour
        seen = {(m.short_name, m.type_of_level, m.level, m.step_type, m.triplet, m.end)
                for m in run.msgs}
        for row in MSM.fields:
            short, tol, level, step_type, _, triplet = MSM_DECODED[row.param]
            assert (row.shortName, row.typeOfLevel, row.levels) == (short, tol, None), row
            assert STEP_TYPE[row.processing] == step_type, row
            # The past hour's precipitation and radiation: from step 1, no step 0.
            minutes = main if row.processing is Processing.INSTANT else main[1:]
            for minute in minutes:
                assert (short, tol, level, step_type, triplet, minute) in seen, (hour, row,
                                                                                 minute)
        assert len(run.msgs) == 8 * len(main) + 2 * (len(main) - 1)  # nothing else
        for m in run.msgs:
            assert (m.centre, m.packing, m.step_units) == ("rjtd", "grid_simple", 1)
            # By shortName and typeOfLevel alone TCDC and APCP are ambiguous; with the step
            # type every message belongs to exactly one row.
            (row,) = msm_rows(m)
            assert MSM_DECODED[row.param][4:] == (m.units, m.triplet)
            if row.processing is Processing.INSTANT:
                assert m.start == m.end
            else:  # the hour before the step, (k-1, k]
                assert (m.start, m.end) == (m.end - 60, m.end) and m.end > 0
    ambiguous = {(r.shortName, r.typeOfLevel) for r in MSM.fields
                 if sum((q.shortName, q.typeOfLevel) == (r.shortName, r.typeOfLevel)
                        for q in MSM.fields) > 1}
    assert ambiguous == {("unknown", "surface")}


def test_msm_headers_follow_jma(runs):
    keys = ("centre", "subCentre", "tablesVersion", "localTablesVersion", "shapeOfTheEarth",
            "gridType", "Ni", "Nj", "jScansPositively", "iScansNegatively", "packingType",
            "bitsPerValue", "indicatorOfUnitOfTimeRange", "latitudeOfFirstGridPointInDegrees",
            "longitudeOfFirstGridPointInDegrees")
    first = runs["msm"].fetched.files[0]
    assert _keys(first, keys) == {
        "centre": "rjtd", "subCentre": 0, "tablesVersion": 2, "localTablesVersion": 1,
        "shapeOfTheEarth": 6, "gridType": "regular_ll", "Ni": 31, "Nj": 32,
        "jScansPositively": 0, "iScansNegatively": 0, "packingType": "grid_simple",
        "bitsPerValue": 12, "indicatorOfUnitOfTimeRange": 1,
        "latitudeOfFirstGridPointInDegrees": 47.6, "longitudeOfFirstGridPointInDegrees": 120.0}
    # At scale 1 the sample grid is JMA's: 481 x 505 points from 47.6 N 120 E to 22.4 N 150 E.
    g = sample_grid(MSM, 1, DEFAULT_AREA)
    assert g.shape == (505, 481) and not g.south_to_north
    assert (g.lats[0], g.lons[0], g.lats[-1], g.lons[-1]) == (47.6, 120.0, 22.4, 150.0)
    assert (g.dlat, g.dlon) == (0.05, 0.0625)


def test_msm_files_are_named_and_grouped_like_jma(msm_runs, cache):
    for hour, run in msm_runs.items():
        groups = [(0, 15), (16, 33), (34, 39)] + ([(40, 51), (52, 78)] if hour in (0, 12)
                                                  else [])
        init = f"20260115{hour:02d}"
        assert [f.name for f in run.fetched.files] == [
            f"Z__C_RJTD_{init}0000_MSM_GPV_Rjp_Lsurf_FH{a:02d}-{b:02d}_grib2.bin"
            for a, b in groups]
        for f, (a, b) in zip(run.fetched.files, groups, strict=True):
            assert f.parent == cache / "msm-full" / "sample" / "msm" / init
            msgs = read(f)
            assert sorted({m.end // 60 for m in msgs}) == list(range(a, b + 1)), f.name
            # Step by step, each step holding every field in JMA's element order.
            assert [m.end for m in msgs] == sorted(m.end for m in msgs)
            for step in (a, b):
                names = [name_of(m) for m in msgs if m.end == 60 * step]
                assert names == (MSM_ORDER[:8] if step == 0 else MSM_ORDER), (f.name, step)


def _japan(run: Run) -> np.ndarray:
    m = run.msgs[0]
    lat, lon = m.lats, m.lons
    s, n, w, e = JAPAN
    return (lat >= s) & (lat <= n) & (lon >= w) & (lon <= e)


def test_msm_hourly_precipitation_is_never_negative_and_falls_from_cloud(msm_runs):
    wet = 0
    for run in msm_runs.values():
        main = run.main_minutes
        for a, b in zip(main, main[1:], strict=False):
            hour = run.get(APCP, b)  # kg m-2 in (a, b]
            assert hour.min() >= 0.0 and hour.max() < 60.0, b
            cloud = np.maximum(run.get(TCDC, a), run.get(TCDC, b))
            assert (cloud[hour > 0.1] >= 60.0).all(), b
            assert (hour[cloud < 30.0] < 1e-3).all(), b
            wet += int((hour > 0.1).sum())
        total = sum(run.get(APCP, m) for m in main[1:])
        assert total[_japan(run)].max() > 1.0  # it does rain or snow over Japan
    assert wet > 0


def test_msm_relative_humidity_is_the_truths_and_stays_in_0_100(runs, cache):
    run = runs["msm"]
    for m in run.msgs:
        if m.short_name == "r":
            assert m.values.min() >= 0.0 and m.values.max() <= 100.0
            assert m.values.max() > 90.0  # saturated somewhere (fog, precipitation)
        if m.short_name in ("lcc", "unknown") and m.step_type == "instant":
            assert m.values.min() >= 0.0 and m.values.max() <= 100.0
    # The 1.5 m temperature and humidity are the shared truth's 2 m temperature and the
    # humidity of its dewpoint, sampled on MSM's grid.
    grid = sample_grid(MSM, 16, DEFAULT_AREA)
    weather = Weather(MSM, grid, LandMask.load(cache))
    t0 = hours_since_epoch(datetime(2026, 1, 15, tzinfo=UTC))
    for hour in (0, 6, 12):
        s = weather.surface(t0 + hour, float(hour))
        rh = np.minimum(100.0 * relative_humidity(s["t2m"], s["d2m"]), 99.98)
        np.testing.assert_allclose(run.get("r", 60 * hour), rh, atol=0.05)
        np.testing.assert_allclose(run.get("t", 60 * hour), s["t2m"], atol=0.02)


def test_msm_low_cloud_stays_below_total_cloud(msm_runs):
    run = msm_runs[0]
    most = 0.0
    for minute in run.main_minutes:
        lcc, tcc = run.get("lcc", minute), run.get(TCDC, minute)
        assert lcc.min() >= 0.0 and (lcc <= tcc + 0.05).all(), minute
        most = max(most, float(lcc.max()))
    assert most > 50.0


def test_msm_radiation_is_the_past_hours_mean_and_zero_at_night_in_japan(runs, msm_runs):
    init = hours_since_epoch(datetime(2026, 1, 15, tzinfo=UTC))
    for run in (runs["msm"], msm_runs[0]):
        lat, lon = run.msgs[0].lats, run.msgs[0].lons
        japan = _japan(run)
        night_seen = day_seen = False
        for minute in run.minutes("avg_sdswrf"):
            g = run.get("avg_sdswrf", minute)  # W m-2, mean over the hour before
            assert g.min() >= 0.0 and g.max() < 1200.0
            sun = np.max([cos_zenith(lat, lon, init + t / 60.0)
                          for t in np.linspace(minute - 60, minute, 13)], axis=0)
            night = sun < 0.0
            if (night & japan).any():
                night_seen = True
                assert (g[night] == 0.0).all(), minute  # exactly zero: the sun stayed down
            if (sun > 0.3).any():
                day_seen = True
                assert g[sun > 0.3].mean() > 30.0, minute
            if 15 * 60 <= minute <= 19 * 60:  # 00-04 JST: night over all of Japan in January
                assert (g[japan] == 0.0).all()
        assert night_seen and day_seen


def test_msm_and_ifs_sample_the_same_truth_over_japan(runs):
    """IFS covers Japan (the default area reaches 150 E): where both grids have a point at sea
    level, the two models agree as closely as their flavours allow."""
    ifs, msm = runs["ifs"], runs["msm"]
    im, mm = ifs.msgs[0], msm.msgs[0]  # coordinates come with a file's first message
    pairs = [((i, j), (k, l)) for (i, j), la, lo in zip(np.ndindex(im.lats.shape),
                                                        im.lats.ravel(), im.lons.ravel(), strict=True)
             for (k, l) in zip(*np.nonzero((np.abs(mm.lats - la) < 1e-6)
                                           & (np.abs((mm.lons - lo) % 360.0) < 1e-6)), strict=True)]
    assert len(pairs) >= 40
    orog = ifs.get("z", 0) / 9.80665
    compared = 0
    for minute in (0, 360, 720):
        for (i, j), (k, l) in pairs:
            sea = orog[i, j] == 0.0 and abs(msm.get("sp", minute)[k, l]
                                            - msm.get("prmsl", minute)[k, l]) < 5.0
            if not sea:
                continue
            compared += 1
            assert abs(ifs.get("msl", minute)[i, j] - msm.get("prmsl", minute)[k, l]) < 250.0
            assert abs(ifs.get("2t", minute)[i, j] - msm.get("t", minute)[k, l]) < 1.5
    assert compared > 30


def test_msm_sees_japans_mountains_and_the_winter_monsoon(tmp_path):
    fetched = fetch(MSM, tmp_path, scale=4, horizon_hours=24)
    run = Run(fetched, MSM)
    lat, lon = run.msgs[0].lats, run.msgs[0].lons

    def height(la, lo, radius=0.3):
        """Highest surface (m) within ``radius`` deg, from the hypsometric sp/msl ratio."""
        near = (np.abs(lat - la) <= radius) & (np.abs(lon - lo) <= radius * 1.25)
        sp, msl, t = run.get("sp", 0), run.get("prmsl", 0), run.get("t", 0)
        z = 287.05 * (t + 0.0065 * 500.0) / 9.80665 * np.log(msl / sp)
        return float(z[near].max())

    assert height(36.35, 137.6) > 1500.0  # the Northern Alps
    assert height(35.45, 138.2) > 1500.0  # the Southern Alps
    assert height(39.3, 140.85) > 600.0  # the Ou Mountains (Tohoku)
    assert height(42.75, 142.85) > 700.0  # the Hidaka Mountains (Hokkaido)
    assert height(38.5, 135.0) < 5.0  # the Sea of Japan
    # January: the winter monsoon blows from the north-west quadrant over the Sea of Japan.
    sea = (lat > 38.0) & (lat < 42.0) & (lon > 133.0) & (lon < 138.0)
    u = np.mean([run.get("10u", t)[sea].mean() for t in run.main_minutes])
    v = np.mean([run.get("10v", t)[sea].mean() for t in run.main_minutes])
    assert v < -2.0 and u > -abs(v) / 2, (u, v)


def test_east_asian_lows_cross_japan():
    start = hours_since_epoch(datetime(2026, 1, 1, tzinfo=UTC))
    crossing = 0
    for t in range(0, 24 * 30, 6):
        over = [b for b in lows(start + t) if b.moist > 0 and 30.0 < b.lat < 46.0
                and 128.0 < b.lon < 146.0 and b.amp > 500.0]
        crossing += bool(over)
    assert 0.25 < crossing / 120 < 0.9  # a low over Japan part of the time, not always


def test_msm_decodes_the_fields_ingest_can_tell_apart(runs):
    from pointcast.ingest import decode

    run = runs["msm"]
    ds = decode(run.fetched.files, MSM.fields, model="msm")
    assert set(ds.data_vars) == {"msl", "sp", "u10", "v10", "t2m", "rh2m", "lcc", "tcc", "tp",
                                 "ssrd"}
    assert ds.lat.values[0] == pytest.approx(22.8) and ds.lat.values[-1] == pytest.approx(47.6)
    for k, minute in enumerate(run.main_minutes):
        for var, short in (("msl", "prmsl"), ("sp", "sp"), ("u10", "10u"), ("v10", "10v"),
                           ("t2m", "t"), ("rh2m", "r"), ("lcc", "lcc")):
            np.testing.assert_allclose(ds[var].isel(time=k).values,
                                       run.get(short, minute)[::-1], rtol=1e-6)
        ssrd = ds.ssrd.isel(time=k).values
        if minute == 0:
            assert np.isnan(ssrd).all()  # no hour ends at step 0
        else:  # the hourly window is the hour's mean as it is
            np.testing.assert_allclose(ssrd, run.get("avg_sdswrf", minute)[::-1], rtol=1e-6)


def test_msm_decodes_total_cloud_and_precipitation_apart(runs):
    from pointcast.ingest import decode

    run = runs["msm"]
    ds = decode(run.fetched.files, MSM.fields, model="msm")
    for k, minute in enumerate(run.main_minutes):
        np.testing.assert_allclose(ds.tcc.isel(time=k).values, run.get(TCDC, minute)[::-1],
                                   rtol=1e-6)
        if minute:
            np.testing.assert_allclose(ds.tp.isel(time=k).values,
                                       run.get(APCP, minute)[::-1], rtol=1e-6)
    assert ds.tcc.attrs["steps_minutes"] == run.main_minutes
    assert ds.tp.attrs["steps_minutes"] == run.main_minutes[1:]


def test_grids_cover_the_area_at_the_requested_spacing(runs):
    # The default area: Europe and Asia as far as Japan, so that IFS covers Japan too.
    assert DEFAULT_AREA == (-25.0, 20.0, 150.0, 72.0)
    ifs = runs["ifs"].get("2t", 0)
    m = runs["ifs"].by_key[("2t", 2, 0)]
    assert m.lats[0, 0] == 70.0 and m.lats[-1, 0] == 22.0  # every 16th row from 90 N
    assert np.allclose(np.diff(m.lats[:, 0]), -4.0)
    assert np.allclose(np.mod(m.lons[0], 360.0), np.mod(np.arange(-24.0, 150.0, 4.0), 360.0))
    assert ifs.shape == (13, 44)
    eu = runs["icon-eu"].by_key[("2t", 2, 0)]
    assert eu.lats[0, 0] == 29.5 and np.allclose(np.diff(eu.lats[:, 0]), 1.0)
    assert eu.lons[0, 0] == -23.5 and np.allclose(np.diff(eu.lons[0]), 1.0)
    d2 = runs["icon-d2"].by_key[("2t", 2, 0)]
    assert d2.lats[0, 0] == pytest.approx(43.18) and d2.lons[0, 0] == pytest.approx(-3.94)
    assert np.allclose(np.diff(d2.lats[:, 0]), 0.32)
    # MSM: JMA's grid from its north-west corner, every 16th row (0.8 deg) and column (1 deg).
    jp = runs["msm"].msgs[0]  # PRMSL at step 0, the first message of the first file
    assert jp.short_name == "prmsl"
    assert jp.lats[0, 0] == pytest.approx(47.6) and jp.lons[0, 0] == pytest.approx(120.0)
    assert np.allclose(np.diff(jp.lats[:, 0]), -0.8) and np.allclose(np.diff(jp.lons[0]), 1.0)
    assert jp.values.shape == (32, 31) and jp.lons[0, -1] == pytest.approx(150.0)


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
def test_cfgrib_reads_the_ifs_files_independently(runs):
    cfgrib = pytest.importorskip("cfgrib")
    run = runs["ifs"]
    path = next(f for f in run.fetched.files if f.name.endswith("-6h-oper-fc.grib2"))
    datasets = cfgrib.open_datasets(str(path), backend_kwargs={"indexpath": ""})
    names = {v for ds in datasets for v in ds.data_vars}
    assert {"t2m", "d2m", "sp", "msl", "u10", "v10", "u100", "v100", "u200", "v200", "tp",
            "sf", "ssrd", "fdir", "tcc", "vis", "mucape", "t", "u", "v", "gh"} <= names
    ds = next(ds for ds in datasets if "t2m" in ds)
    np.testing.assert_allclose(ds["t2m"].values, run.get("2t", 360), rtol=0, atol=1e-9)
    pl = next(ds for ds in datasets if "gh" in ds)
    assert list(pl["isobaricInhPa"].values) == [1000, 925, 850, 700]
    np.testing.assert_allclose(pl["gh"].sel(isobaricInhPa=850).values,
                               run.get("gh", 360, 850), atol=1e-9)
    acc = next(ds for ds in datasets if "tp" in ds)
    assert acc["tp"].attrs["GRIB_stepType"] == "accum"


# ------------------------------------------------------------------------------------------
# Physical consistency
# ------------------------------------------------------------------------------------------

ACCUMULATED = {"ifs": ["tp", "sf", "ssrd", "fdir"],
               "icon-eu": ["tp", "lsfwe", "csfwe"], "icon-d2": ["tp", "lsfwe", "csfwe"]}


@pytest.mark.parametrize("mid", ["ifs", "icon-eu", "icon-d2"])
def test_accumulations_never_decrease(runs, mid):
    run = runs[mid]
    for short in ACCUMULATED[mid] + (["ASWDIR_S", "ASWDIFD_S"] if mid != "ifs" else []):
        minutes = run.minutes(short)
        assert minutes[0] == 0
        prev = None
        for minute in minutes:
            total = run.get(short, minute)
            if short.startswith("ASW"):
                total = total * minute * 60.0  # mean since the start -> J m-2
            assert total.min() >= 0.0
            if prev is not None:
                tol = 1e-3 * max(1.0, float(np.abs(total).max()))
                assert (total - prev >= -tol).all(), (short, minute)
            prev = total
    tp_row = run.model.field_for("tp")
    total = run.get("tp", run.minutes("tp")[-1]) * tp_row.scale  # kg m-2
    assert (total > 0.5).any()  # it does rain somewhere


@pytest.mark.parametrize("mid", ["ifs", "icon-eu", "icon-d2"])
def test_dewpoint_never_exceeds_temperature_and_values_are_in_range(runs, mid):
    run = runs[mid]
    for minute in run.main_minutes:
        assert (run.get("2d", minute) <= run.get("2t", minute) + 0.02).all()
    # Every message, converted to the canonical unit, lies in the catalogue's valid range.
    for m in run.msgs:
        row = next(r for r in run.model.fields if r.shortName == m.short_name
                   and r.typeOfLevel == m.type_of_level)
        value = m.values * row.scale + row.offset
        if row.processing is Processing.ACCUM_SINCE_START:
            continue  # totals; the interval amounts are checked below
        if row.processing is Processing.AVG_SINCE_START or row.per_second:
            lo, hi = VARIABLES["ssrd"].valid_range
        else:
            lo, hi = VARIABLES[row.var].valid_range
        assert lo <= value.min() and value.max() <= hi, (m.short_name, m.end,
                                                         value.min(), value.max())


def _interval_means(run: Run, short: str, avg: bool):
    """(start, end, mean flux W m-2) for consecutive output times of a radiation field."""
    minutes = run.minutes(short)
    out = []
    for a, b in zip(minutes, minutes[1:], strict=False):
        if avg:
            energy = run.get(short, b) * b * 60.0 - run.get(short, a) * a * 60.0
        else:
            energy = run.get(short, b) - run.get(short, a)
        out.append((a, b, energy / ((b - a) * 60.0)))
    return out


@pytest.mark.parametrize("mid", ["ifs", "icon-eu", "icon-d2"])
def test_radiation_follows_the_sun_and_direct_stays_below_global(runs, mid):
    run = runs[mid]
    init = hours_since_epoch(datetime(2026, 1, 15, tzinfo=UTC))
    if mid == "ifs":
        glob = _interval_means(run, "ssrd", avg=False)
        direct = _interval_means(run, "fdir", avg=False)
    else:
        dirs = _interval_means(run, "ASWDIR_S", avg=True)
        difs = _interval_means(run, "ASWDIFD_S", avg=True)
        glob = [(a, b, d + f) for (a, b, d), (_, _, f) in zip(dirs, difs, strict=True)]
        direct = dirs
        assert all((f > -0.5).all() for (_, _, f) in difs)
    lat = run.by_key[("2t", 2, 0)].lats
    lon = run.by_key[("2t", 2, 0)].lons
    night_seen = day_seen = False
    for (a, b, g), (_, _, d) in zip(glob, direct, strict=True):
        assert (d <= g + 0.5).all() and (d >= -0.5).all()
        sun = np.max([cos_zenith(lat, lon, init + t / 60.0)
                      for t in np.linspace(a, b, 13)], axis=0)
        night = sun < 0.0
        if night.any():
            night_seen = True
            assert np.abs(g[night]).max() < 0.5, (a, b)
        day = sun > 0.3
        if day.any():
            day_seen = True
            assert g[day].mean() > 30.0
    assert night_seen and day_seen


@pytest.mark.parametrize("mid", ["ifs", "icon-eu", "icon-d2"])
def test_precipitation_falls_from_cloud_and_snow_when_cold(runs, mid):
    run = runs[mid]
    tcc = {"ifs": "tcc"}.get(mid, "CLCT")
    main = run.main_minutes
    wet_total = snowy = 0
    for a, b in zip(main, main[1:], strict=False):
        amount = run.get("tp", b) - run.get("tp", a)
        if mid == "ifs":
            amount = amount * 1000.0
            snow = (run.get("sf", b) - run.get("sf", a)) * 1000.0
        else:
            snow = (run.get("lsfwe", b) + run.get("csfwe", b)
                    - run.get("lsfwe", a) - run.get("csfwe", a))
        wet = amount > 0.1
        wet_total += int(wet.sum())
        snowy += int((snow > 0.1).sum())
        cloud = np.maximum(run.get(tcc, a), run.get(tcc, b)) * (100.0 if mid == "ifs" else 1.0)
        assert (cloud[wet] >= 60.0).all(), (a, b, cloud[wet].min())
        clear = cloud < 30.0  # clear at both ends of the interval: dry
        assert (amount[clear] < 1e-3).all()
        assert (snow <= amount + 0.01).all()
        t2m = np.minimum(run.get("2t", a), run.get("2t", b))
        assert (t2m[snow > 0.05] < 276.5).all()
        warm = np.minimum(run.get("2t", a), run.get("2t", b)) > 277.2
        assert (snow[warm] < 0.01).all()
    assert wet_total > 0 and snowy > 0  # January: rain and snow


def test_winds_rise_with_height_and_gusts_exceed_the_mean_wind(runs):
    run = runs["ifs"]
    for minute in run.main_minutes:
        ws = {z: np.hypot(run.get(f"{z}u", minute, z), run.get(f"{z}v", minute, z))
              for z in (10, 100, 200)}
        assert ws[100].mean() > 1.1 * ws[10].mean()
        assert ws[200].mean() > ws[100].mean()
        assert (ws[100] >= ws[10] - 0.01).all()
        gh = [run.get("gh", minute, p) for p in (1000, 925, 850, 700)]
        assert all((hi > lo).all() for lo, hi in zip(gh, gh[1:], strict=False))
        t850, t700 = run.get("t", minute, 850), run.get("t", minute, 700)
        lapse = (t850 - t700) / (gh[3] - gh[2])
        low = run.get("z", 0) / 9.80665 < 500.0  # 850 hPa well above the boundary layer
        assert np.abs(lapse[low] - 0.0065).max() < 0.0015  # K per m
    for mid, name in (("ifs", "10fg3"), ("icon-eu", "max_i10fg"), ("icon-d2", "max_i10fg")):
        r = runs[mid]
        for minute in r.minutes(name):
            ws10 = np.hypot(r.get("10u", minute), r.get("10v", minute))
            assert (r.get(name, minute) >= ws10 - 0.02).all()


@pytest.mark.parametrize("mid", ["icon-eu", "icon-d2"])
def test_low_cloud_stays_below_total_cloud_and_net_shortwave_follows_an_albedo(runs, mid):
    run = runs[mid]
    most = 0.0
    for minute in run.main_minutes:
        lcc, tcc = run.get("CLCL", minute), run.get("CLCT", minute)
        assert lcc.min() >= 0.0 and (lcc <= tcc + 0.01).all(), minute
        most = max(most, float(lcc.max()))
    assert most > 50.0  # low cloud does occur
    # Net = (1 - albedo) x global, interval by interval (hourly: ASOB_S is hourly in D2 too).
    t2m = run.get("2t", 0)
    hours = run.minutes("avg_snswrf")
    assert hours == run.main_minutes
    albedos, temps = [], []
    for a, b in zip(hours, hours[1:], strict=False):
        def mean(short, a=a, b=b):
            return (run.get(short, b) * b - run.get(short, a) * a) / (b - a)
        net, glob = mean("avg_snswrf"), mean("ASWDIR_S") + mean("ASWDIFD_S")
        assert (net >= -0.5).all() and (net <= glob + 0.5).all()
        assert (np.abs(net[glob < 0.5]) < 0.5).all()  # no sun, no net shortwave
        day = glob > 50.0
        albedos.append(1.0 - net[day] / glob[day])
        temps.append(t2m[day])
    albedo, temp = np.concatenate(albedos), np.concatenate(temps)
    assert albedo.size > 20
    assert 0.05 < albedo.min() < 0.09  # open sea
    assert albedo.max() < 0.62  # snow-covered land at most
    cold, warm = temp < 268.0, temp > 278.0
    assert cold.any() and warm.any()
    assert albedo[cold].mean() > albedo[warm].mean() + 0.1  # snow reflects more


def _model_levels(run: Run) -> tuple[tuple[int, ...], tuple[int, ...], dict, np.ndarray]:
    """(full levels of the wind, half levels, {half level: HHL}, HSURF) of an ICON run."""
    full = tuple(sorted({m.level for m in run.msgs if m.short_name == "u"
                         and m.type_of_level == "generalVerticalLayer"}))
    half = tuple(sorted({m.level for m in run.msgs if m.short_name == "HHL"}))
    return full, half, {lv: run.get("HHL", 0, lv) for lv in half}, run.get("HSURF", 0)


@pytest.mark.parametrize("mid", ["icon-eu", "icon-d2"])
def test_half_levels_follow_the_terrain_and_full_levels_lie_between_them(runs, mid):
    run = runs[mid]
    full, half, hhl, hsurf = _model_levels(run)
    assert run.minutes("HHL") == [0]  # time-invariant, written once
    assert {(m.level, m.end) for m in run.msgs if m.short_name == "HHL"} == {
        (lv, 0) for lv in half}
    # The lowest half level is the surface; heights grow strictly upwards (falling numbers).
    np.testing.assert_allclose(hhl[half[-1]], hsurf, atol=0.1)
    for upper, lower in zip(half, half[1:], strict=False):
        assert (hhl[upper] - hhl[lower] > 5.0).all(), (upper, lower)
    # Every half level of the real count (ICON-EU 74 levels, ICON-D2 65), the top at about
    # 22-26 km; over flat terrain at sea level the ICON level heights of the template.
    assert half == tuple(range(1, {"icon-eu": 76, "icon-d2": 67}[mid]))
    flat = hsurf == 0.0
    assert flat.sum() > 10
    assert 21000.0 < hhl[1][flat].min() < 27000.0
    for lv in half:
        np.testing.assert_allclose(hhl[lv][flat], flat_half_level_heights(mid)[lv - 1],
                                   rtol=1e-5, atol=0.05)
    # Full level L lies between half levels L and L+1; the lowest at about 10 m.
    agl = {}
    for lv in full:
        z = 0.5 * (hhl[lv] + hhl[lv + 1])
        assert ((hhl[lv + 1] < z) & (z < hhl[lv])).all()
        agl[lv] = z - hsurf
    assert np.abs(agl[full[-1]][flat] - 10.0).max() < 0.05
    assert (agl[full[-1]] > 5.0).all() and (agl[full[-1]] < 10.05).all()
    # Written: the levels spanning 10-300 m at every cell and one above them.
    span = full[1]
    assert (agl[span] >= 300.0).all() and agl[span + 1].min() < 300.0
    # Terrain-following, compressed smoothly over the mountains: lower above high ground.
    top = agl[span]
    high = hsurf > 1000.0
    assert high.any() and top[high].max() < top[flat].min()


@pytest.mark.parametrize("mid", ["icon-eu", "icon-d2"])
def test_model_level_winds_continue_the_column(runs, mid):
    run = runs[mid]
    full, half, hhl, hsurf = _model_levels(run)
    agl = {lv: 0.5 * (hhl[lv] + hhl[lv + 1]) - hsurf for lv in full}
    plevs = run.model.field_for("u_pl").levels
    low = hsurf < 300.0
    for minute in run.main_minutes:
        u = {lv: run.get("u", minute, lv) for lv in full}
        v = {lv: run.get("v", minute, lv) for lv in full}
        speed = [np.hypot(u[lv], v[lv]).mean() for lv in full]  # top first
        assert all(hi > lo for hi, lo in zip(speed, speed[1:], strict=False)), (minute, speed)
        # The lowest level (about 10 m) carries the 10 m wind.
        np.testing.assert_allclose(u[full[-1]], run.get("10u", minute), atol=0.02)
        np.testing.assert_allclose(v[full[-1]], run.get("10v", minute), atol=0.02)
        # Hub height (100 m) from the model levels and from 10 m + pressure levels agree.
        zs = np.stack([agl[lv] for lv in full], axis=-1)
        um, vm = physics.wind_at_height(np.stack([u[lv] for lv in full], -1),
                                        np.stack([v[lv] for lv in full], -1), zs, 100.0)
        zp = [np.full(hsurf.shape, 10.0)]
        up, vp = [run.get("10u", minute)], [run.get("10v", minute)]
        for p in plevs:
            above = run.get("z", minute, p) / 9.80665 - hsurf
            zp.append(np.where(above > 10.0, above, np.nan))
            up.append(run.get("u", minute, p))
            vp.append(run.get("v", minute, p))
        up_, vp_ = physics.wind_at_height(np.stack(up, -1), np.stack(vp, -1),
                                          np.stack(zp, -1), 100.0)
        ml, pl = np.hypot(um, vm)[low], np.hypot(up_, vp_)[low]
        rel = (ml - pl) / np.maximum(pl, 2.0)
        assert abs(rel.mean()) < 0.02 and np.percentile(np.abs(rel), 95) < 0.06, (
            minute, rel.mean(), np.percentile(np.abs(rel), 95))


@pytest.mark.parametrize("mid", ["ifs", "icon-eu", "icon-d2"])
def test_surface_pressure_is_hypsometric_over_the_orography(runs, mid):
    run = runs[mid]
    if mid == "ifs":
        orog = run.get("z", 0) / 9.80665
    else:
        orog = run.get("HSURF", 0)
    msl_name = "msl" if mid == "ifs" else "prmsl"
    assert orog.min() >= 0.0 and orog.max() > 500.0
    for minute in run.main_minutes:
        msl, sp, t2m = run.get(msl_name, minute), run.get("sp", minute), run.get("2t", minute)
        t_mean = t2m + 0.0065 * orog / 2.0
        expected = msl * np.exp(-9.80665 * orog / (287.05 * t_mean))
        # t2m stands in for the mean temperature of the layer (it carries the diurnal cycle,
        # whose error grows with the height of the layer: Tibet is in IFS's area).
        tol = 0.01 * np.maximum(1.0, orog / 2500.0)
        assert (np.abs(sp / expected - 1.0) < tol).all()
        assert np.abs(sp / msl - 1.0).max() > 0.1  # the mountains are there
        assert (np.abs(sp - msl)[orog == 0.0] < 1.0).all()
        assert 95000 < msl.min() and msl.max() < 105000


def test_lows_travel_east_at_about_10_m_per_s():
    th = hours_since_epoch(datetime(2026, 1, 15, tzinfo=UTC))
    now = [b for b in lows(th) if b.moist > 0 and b.hemi == 1]
    later = [b for b in lows(th + 6.0) if b.moist > 0 and b.hemi == 1]
    assert now and all(20.0 <= b.amp <= 3000.0 for b in now)
    assert max(b.amp for b in lows(th + 24 * 5) if b.moist > 0) > 2000.0  # 20-30 hPa deep
    for b in now:
        nxt = min(later, key=lambda c: abs(c.lat - b.lat) + abs(c.lon - b.lon))
        dx = math.radians((nxt.lon - b.lon + 180) % 360 - 180) * 6.371e6 * math.cos(
            math.radians((b.lat + nxt.lat) / 2))
        assert 8.0 < dx / (6 * 3600) < 12.0


def test_winds_turn_counter_clockwise_around_a_low(tmp_path):
    # A low centred in the ICON-EU domain: the 10 m wind circles it cyclonically.
    fetched = fetch(ICON_EU, tmp_path, scale=8, horizon_hours=0,
                    init="2026-01-16T00:00Z")
    run = Run(fetched, ICON_EU, only=("PMSL", "U_10M", "V_10M"))
    msl = run.get("prmsl", 0)
    i, j = np.unravel_index(np.argmin(msl), msl.shape)
    assert 5 < i < msl.shape[0] - 6 and 5 < j < msl.shape[1] - 6, "low not inside the domain"
    u, v = run.get("10u", 0), run.get("10v", 0)
    k = 4  # grid points (0.5 deg) from the centre
    assert v[i, j + k] > 0 and v[i, j - k] < 0  # northward east of it, southward west of it
    assert u[i + k, j] < 0 and u[i - k, j] > 0  # rows run south -> north: westward north of it


def test_cape_is_largest_on_warm_humid_afternoons(tmp_path):
    fetched = fetch(ICON_EU, tmp_path, scale=16, horizon_hours=24,
                    init="2026-07-10T00:00Z")
    run = Run(fetched, ICON_EU, only=("CAPE_ML", "T_2M", "TD_2M"))
    lon = run.by_key[("2t", 2, 0)].lons
    # 13-14 UTC is early afternoon in central Europe, 02 UTC the middle of the night.
    afternoon, night = run.get("CAPE_ML", 14 * 60), run.get("CAPE_ML", 2 * 60)
    europe = (lon > 0) & (lon < 30)
    assert afternoon[europe].mean() > 2.0 * night[europe].mean()
    assert afternoon.max() > 500.0
    td = run.get("2d", 14 * 60)
    assert afternoon[td > 288.0].mean() > afternoon[td < 280.0].mean()


# ------------------------------------------------------------------------------------------
# Determinism and idempotence
# ------------------------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_fetches_into_two_caches_are_byte_identical(tmp_path):
    for model in (IFS, ICON_D2, MSM):
        a = fetch(model, tmp_path / "a", scale=32, horizon_hours=3)
        b = fetch(model, tmp_path / "b", scale=32, horizon_hours=3)
        assert [f.relative_to(tmp_path / "a") for f in a.files] == [
            f.relative_to(tmp_path / "b") for f in b.files]
    ta, tb = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert ta.keys() == tb.keys() and len(ta) > 50
    for rel in ta:
        assert ta[rel].read_bytes() == tb[rel].read_bytes(), rel


def test_a_second_fetch_writes_nothing(runs, cache):
    before = {rel: p.stat().st_mtime_ns for rel, p in _tree(cache).items()}
    again = {mid: fetch(model, cache) for mid, model in DETERMINISTIC.items()}
    after = {rel: p.stat().st_mtime_ns for rel, p in _tree(cache).items()}
    assert after == before
    for mid, fetched in again.items():
        assert fetched.files == runs[mid].fetched.files


def test_another_configuration_rewrites_the_run(tmp_path):
    first = fetch(ICON_D2, tmp_path, scale=32, horizon_hours=2)
    second = fetch(ICON_D2, tmp_path, scale=32, horizon_hours=4)
    assert len(second.files) > len(first.files)
    marker = json.loads((tmp_path / "sample/icon-d2/2026011500/complete").read_text())
    assert marker["steps_minutes"][-1] == 240
    assert all(f.exists() for f in second.files)


def test_fetch_rejects_a_run_of_another_model(tmp_path):
    run = RunRef(model="ifs", init=datetime(2026, 1, 15, tzinfo=UTC),
                 steps=(timedelta(0),), source="sample")
    with pytest.raises(ValueError):
        SampleSource().fetch(run, ICON_EU, tmp_path)


# ------------------------------------------------------------------------------------------
# NOAA GFS
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gfs_run(cache):
    from pointcast.sources import GFS

    return fetch(GFS, cache, scale=16, horizon_hours=HORIZON)


def test_gfs_rows_present_at_every_step_idx_and_tp_across_the_reset(gfs_run, cache):
    from pointcast.ingest import decode
    from pointcast.sources import GFS

    files = gfs_run.files
    assert files[7].relative_to(cache / "sample/gfs/2026011500").as_posix() == \
        "gfs.20260115/00/atmos/gfs.t00z.pgrb2.0p25.f007"
    ds = decode(files, GFS.fields, model="gfs").compute()
    assert set(ds.data_vars) == {r.var for r in GFS.fields}
    assert list(ds["height"].values) == [10, 80, 100]
    for var in ds.data_vars:
        if var == "orog":
            assert np.isfinite(ds[var].values).all()
            continue
        vals = ds[var].values
        first = 1 if var in ("tp", "ssrd") else 0
        assert np.isfinite(vals[first:]).all(), var
    # The .idx lines point at their messages.
    for f in files:
        lines = Path(f"{f}.idx").read_text().splitlines()
        msgs = read(f)
        data = f.read_bytes()
        assert len(lines) == len(msgs)
        for line, m in zip(lines, msgs, strict=True):
            n, off, date, param, level, when, _ = line.split(":")
            assert date == "d=2026011500"
            assert data[int(off):int(off) + 4] == b"GRIB"
            h = eccodes.codes_new_from_message(data[int(off):])
            try:
                assert eccodes.codes_get_string(h, "shortName") == m.short_name
                assert eccodes.codes_get_string(h, "centre") == "kwbc"
                assert eccodes.codes_get_string(h, "packingType") == \
                    "grid_complex_spatial_differencing"
            finally:
                eccodes.codes_release(h)
    idx7 = Path(f"{files[7]}.idx").read_text()
    assert ":APCP:surface:6-7 hour acc fcst:" in idx7 and ":TMP:2 m above ground:7 hour fcst:" in idx7
    assert ":UGRD:80 m above ground:7 hour fcst:" in idx7
    assert Path(f"{files[0]}.idx").read_text().startswith("1:0:d=2026011500:PRMSL:mean sea level:anl:")
    # tp: the decoder's hourly amounts equal those written, across the 6-hour reset.
    apcp = {m.end // 60: (m.start // 60, m.values) for f in files for m in read(f)
            if m.short_name == "tp"}
    assert apcp[6][0] == 0 and apcp[7][0] == 6 and apcp[12][0] == 6
    tp = ds["tp"].values[:, ::-1]  # decode: lat ascending; files: north first
    for k in (5, 6, 7, 12):
        want = apcp[k][1] - (apcp[k - 1][1] if apcp[k][0] == apcp[k - 1][0] else 0.0)
        np.testing.assert_allclose(tp[k], want, atol=0.02)
    assert np.nanmin(tp[1:]) > -0.02
    assert abs(np.nansum(tp[1:13]) - (apcp[6][1].sum() + apcp[12][1].sum())) < \
        1e-3 * max(1.0, apcp[6][1].sum() + apcp[12][1].sum()) + 0.02 * tp[0].size
    # The 80 m wind lies between the 10 m and the 100 m wind on average.
    speed = np.hypot(ds["u"].values, ds["v"].values)
    s10, s80, s100 = (speed[:, i].mean() for i in range(3))
    assert s10 < s80 < s100


def test_gfs_fetch_is_deterministic_and_a_second_fetch_writes_nothing(gfs_run, cache, tmp_path):
    from pointcast.sources import GFS

    before = {rel: p.stat().st_mtime_ns for rel, p in _tree(cache / "sample/gfs").items()}
    again = fetch(GFS, cache, scale=16, horizon_hours=HORIZON)
    assert again.files == gfs_run.files
    assert {rel: p.stat().st_mtime_ns for rel, p in _tree(cache / "sample/gfs").items()} == before
    other = fetch(GFS, tmp_path, scale=16, horizon_hours=HORIZON)
    for a, b in zip(gfs_run.files, other.files, strict=True):
        assert a.read_bytes() == b.read_bytes()
