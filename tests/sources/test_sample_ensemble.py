"""The sample's ensembles (ENS, ICON-EU-EPS, GEFS): real GRIB2 members in the upstreams'
layouts, with the ensemble keys each centre writes, whose values are the deterministic sample
weather plus ``sample.ensemble.perturbation``. Small runs (coarse grids, 12 hours): seconds."""

from __future__ import annotations

import bz2
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import eccodes
import numpy as np
import pytest

from pointcast.ingest import index_file, judge, matches
from pointcast.sample import LandMask, SampleSource, Weather, hours_since_epoch
from pointcast.sample.ensemble import (
    PRECIP_FACTORS,
    T2M_SPREAD_K,
    WIND_FACTORS,
    Perturbation,
    members,
    perturbation,
    weather_model,
)
from pointcast.sample.grids import CellGrid
from pointcast.sources import ENS, GEFS, GFS, ICON_EU_EPS, IFS

INIT = datetime(2026, 1, 15, tzinfo=UTC)
NOW = datetime(2026, 1, 15, 17, 40, tzinfo=UTC)
HORIZON = 12
SCALE, ENSEMBLE_SCALE = 16, 32  # ENS and GEFS points are a subset of IFS's and GFS's
ENSEMBLES = {"ens": ENS, "icon-eu-eps": ICON_EU_EPS, "gefs": GEFS}
# (typeOfEnsembleForecast of the control, of a perturbed member, numberOfForecastsInEnsemble)
KEYS = {"ens": (1, 3, 51), "icon-eu-eps": (None, 192, 40), "gefs": (1, 3, 30)}


def fetch(model, cache: Path, **kw):
    src = SampleSource(scale=SCALE, ensemble_scale=ENSEMBLE_SCALE, init=INIT,
                       horizon_hours=HORIZON, **kw)
    return src.fetch(src.discover(model, NOW), model, cache)


def messages(path: Path):
    """(keys, values, lats, lons) of every message of a file (DWD's legacy files are bz2;
    a native grid's coordinates are the CLAT/CLON messages: None)."""
    data = path.read_bytes()
    if path.suffix == ".bz2":
        data = bz2.decompress(data)
    offset = 0
    while offset < len(data):
        h = eccodes.codes_new_from_message(data[offset:])
        try:
            offset += eccodes.codes_get_long(h, "totalLength")
            eccodes.codes_set_long(h, "stepUnits", 1)
            keys = {k: eccodes.codes_get_long(h, k) if eccodes.codes_is_defined(h, k) else -1
                    for k in ("productDefinitionTemplateNumber", "perturbationNumber", "endStep")}
            keys["short"] = eccodes.codes_get_string(h, "shortName")
            regular = eccodes.codes_get_long(h, "gridDefinitionTemplateNumber") == 0
            yield (keys, eccodes.codes_get_values(h),
                   eccodes.codes_get_array(h, "latitudes") if regular else None,
                   eccodes.codes_get_array(h, "longitudes") if regular else None)
        finally:
            eccodes.codes_release(h)


class Fields:
    """Values by (shortName, member, end step in hours), on the file's points (the ensembles'
    parameters only: a deterministic twin's files hold more)."""

    def __init__(self, files, wanted=("2t", "10u", "10v", "100u", "100v", "tp"), control: bool = False):
        """``control``: a message without a member is the ensemble's control (member 0: ENS's
        oper-fc file since IFS cycle 50r1)."""
        self.values: dict[tuple[str, int, int], np.ndarray] = {}
        self.templates: dict[tuple[str, int, int], int] = {}
        for f in files:
            for keys, values, lats, lons in messages(f):
                if keys["short"] == "tlat":  # a native grid's cell centres
                    self.lats = values
                elif keys["short"] == "tlon":
                    self.lons = values
                elif keys["short"] in wanted:
                    member = 0 if control and keys["perturbationNumber"] == -1 else keys["perturbationNumber"]
                    key = (keys["short"], member, keys["endStep"])
                    assert key not in self.values, key
                    self.values[key] = values
                    self.templates[key] = keys["productDefinitionTemplateNumber"]
                    if lats is not None:
                        self.lats, self.lons = lats, lons


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ensembles")


@pytest.fixture(scope="module")
def fetched(cache):
    out = {mid: fetch(model, cache) for mid, model in ENSEMBLES.items()}
    out["icon-eu-eps/legacy"] = fetch(ICON_EU_EPS, cache / "legacy", icon_layout="legacy")
    return out


def test_perturbations_are_pure_spread_evenly_and_leave_the_control_alone():
    assert perturbation("ens", 0) == Perturbation() == perturbation("gefs", 0)
    assert list(members(ENS)) == list(range(51)) and list(members(GEFS)) == list(range(31))
    assert list(members(ICON_EU_EPS)) == list(range(1, 41))  # no control
    with pytest.raises(ValueError):
        perturbation("icon-eu-eps", 0)
    with pytest.raises(ValueError):
        perturbation("ifs", 1)
    # A sample of the first 10 members (`SampleSource.members`) spreads them over the same ranges.
    assert list(members(ENS, 10)) == list(range(10)) and list(members(ICON_EU_EPS, 10)) == list(range(1, 11))
    assert members(GEFS, 99) == members(GEFS)
    with pytest.raises(ValueError, match="of 10 members has no member 10"):
        perturbation("ens", 10, 10)
    for (mid, model), count in itertools.product(ENSEMBLES.items(), (None, 10)):
        perturbed = [perturbation(mid, k, count) for k in members(model, count) if k]
        n = len(perturbed)
        assert perturbed == [perturbation(mid, k, count) for k in members(model, count) if k]
        np.testing.assert_allclose(sorted(p.t2m_k for p in perturbed),
                                   np.linspace(*T2M_SPREAD_K, n), atol=1e-12)
        np.testing.assert_allclose(sorted(p.wind for p in perturbed),
                                   np.linspace(*WIND_FACTORS, n), atol=1e-12)
        np.testing.assert_allclose(sorted(p.precip for p in perturbed),
                                   np.maximum(0.0, np.linspace(*PRECIP_FACTORS, n)), atol=1e-12)
        # Shuffled: the three spreads are not in member order, some members are dry.
        assert [p.t2m_k for p in perturbed] != sorted(p.t2m_k for p in perturbed)
        dry = sum(p.precip == 0.0 for p in perturbed)
        assert 0 < dry < n / 3, (mid, dry)


def test_files_follow_the_upstream_layouts(fetched):
    rel = {mid: [str(f) for f in run.files] for mid, run in fetched.items()}
    ens = [p for p in rel["ens"] if p.endswith("20260115000000-6h-enfo-ef.grib2")]
    assert [p.split("sample/ens/2026011500/")[1] for p in ens] == [
        "20260115/00z/ifs/0p25/enfo/20260115000000-6h-enfo-ef.grib2"]
    # 0, 3, 6, 9, 12 h, each an enfo-ef file (the perturbed members) and an oper-fc file (the control)
    assert len(fetched["ens"].files) == 10
    assert sum(str(f).endswith("-6h-oper-fc.grib2") for f in fetched["ens"].files) == 1
    gefs = {p.split("2026011500/")[1] for p in rel["gefs"]}
    assert "gefs.20260115/00/atmos/pgrb2sp25/gec00.t00z.pgrb2s.0p25.f000" in gefs
    assert "gefs.20260115/00/atmos/pgrb2sp25/gep30.t00z.pgrb2s.0p25.f012" in gefs
    assert len(gefs) == 31 * 5
    v1 = {p.split("2026011500/")[1] for p in rel["icon-eu-eps"]}
    assert "v1/m/icon-eu-eps/p/T_2M/r/2026-01-15T00:00/s/PT012H00M.grib2" in v1
    assert "v1/m/icon-eu-eps/p/CLAT/r/2026-01-15T00:00/s/PT000H00M.grib2" in v1
    legacy = {p.split("2026011500/")[1] for p in rel["icon-eu-eps/legacy"]}
    assert ("icon-eu-eps/grib/00/tot_prec/icon-eu-eps_europe_icosahedral_single-level_"
            "2026011500_012_tot_prec.grib2.bz2") in legacy
    assert ("icon-eu-eps/grib/00/hsurf/icon-eu-eps_europe_icosahedral_time-invariant_2026011500_"
            "hsurf.grib2.bz2") in legacy
    assert len(v1) == len(legacy) == 3 + 4 * 13  # CLAT/CLON/HSURF, 4 parameters at 0..12 h
    # The indexes: ECMWF's names the member, NOAA's the ensemble tag.
    enfo, oper = (next(f for f in fetched["ens"].files if str(f).endswith(f"-6h-{name}.grib2"))
                  for name in ("enfo-ef", "oper-fc"))
    index = enfo.with_suffix(".index").read_text().splitlines()
    assert len(index) == 6 * 50 and '"type": "pf"' in index[0] and '"number": "1"' in index[0]
    control = oper.with_suffix(".index").read_text().splitlines()
    assert len(control) == 6 and '"type": "fc"' in control[0] and '"number"' not in control[0]
    idx = [f for f in fetched["gefs"].files if f.name == "gep07.t00z.pgrb2s.0p25.f012"][0]
    lines = Path(f"{idx}.idx").read_text().splitlines()
    assert lines[0].endswith(":TMP:2 m above ground:12 hour fcst:ENS=+7")
    assert lines[-1].endswith(":APCP:surface:6-12 hour acc fcst:ENS=+7")
    assert not any(":PRES:" in line or ":PRMSL:" in line for line in lines)
    # The ground's pressures, at the analysis (the only step the table reads them at).
    analysis = Path(f"{idx.parent / 'gep07.t00z.pgrb2s.0p25.f000'}.idx").read_text()
    assert ":PRES:surface:anl:ENS=+7" in analysis and ":PRMSL:mean sea level:anl:ENS=+7" in analysis


@pytest.mark.parametrize("mid", ["ens", "icon-eu-eps", "icon-eu-eps/legacy", "gefs"])
def test_members_carry_the_ensemble_keys_and_match_the_tables(fetched, mid):
    model = ENSEMBLES[mid.split("/")[0]]
    control_type, perturbed_type, size = KEYS[model.id]
    seen: dict[str, set[int]] = {}
    for f in fetched[mid].files:
        for m in index_file(f):
            if m.shortName in ("tlat", "tlon", "HSURF"):
                assert m.member is None  # the cell centres and ICON-EU-EPS's ground are no member's
                continue
            rows = [r for r in model.fields if matches(r, m)]
            assert rows, (f.name, m.shortName)
            for row in rows:
                assert judge(row, m) == (1.0, None), (row.var, m.shortName)
            if model.id == "ens" and m.member is None:  # the control: the deterministic stream's message
                assert m.ensemble_type is None and m.ensemble_size is None and "oper-fc" in f.name
                seen.setdefault(m.shortName, set()).add(0)
                continue
            assert m.ensemble_size == size
            assert m.ensemble_type == (control_type if m.member == 0 else perturbed_type)
            seen.setdefault(m.shortName, set()).add(m.member)
    for short, got in seen.items():
        assert got == ({0} if short == "z" else set(members(model))), short  # ENS's ground: the control's
    fields = Fields(fetched[mid].files, control=True)
    for (short, member, end), template in fields.templates.items():
        accumulated = short == "tp"
        ensemble = 11 if accumulated else 1
        deterministic = 8 if accumulated else 0
        assert template == (deterministic if (model.id == "ens" and member == 0) else ensemble), (short, member, end)


def _check_members(fields: Fields, model_id: str, short: str, var: str, step: int,
                   deterministic: np.ndarray) -> None:
    """Every member is ``deterministic`` perturbed, to the 16-bit packing's precision."""
    spread = float(np.ptp(deterministic)) * 3.0 + 1.0
    for k in members(ENSEMBLES[model_id]):
        want = perturbation(model_id, k).apply(var, deterministic)
        np.testing.assert_allclose(fields.values[(short, k, step)], want,
                                   atol=spread / 2 ** 14, err_msg=f"{model_id} {short} {k}")


def _on_points(det: Fields, short: str, step: int, lats, lons):
    """The deterministic run's values at the ensemble's points (a subset of its grid)."""
    key = {(round(a, 4), round(o % 360.0, 4)): i
           for i, (a, o) in enumerate(zip(det.lats, det.lons, strict=True))}
    at = [key[(round(a, 4), round(o % 360.0, 4))] for a, o in zip(lats, lons, strict=True)]
    return det.values[(short, -1, step)][at]  # a deterministic message: no member


def test_members_are_the_deterministic_weather_plus_their_perturbation(fetched, cache):
    """ENS and GEFS: each member is the IFS or GFS sample at the same point and step, changed
    by its perturbation; ICON-EU-EPS: the ICON-EU weather of its cells."""
    for mid, twin, names in (("ens", IFS, {"2t": "t2m", "10u": "u10", "100v": "v", "tp": "tp"}),
                             ("gefs", GFS, {"2t": "t2m", "10v": "v10", "tp": "tp"})):
        ens = Fields(fetched[mid].files, control=True)
        det_run = SampleSource(scale=SCALE, init=INIT, horizon_hours=HORIZON)
        det = Fields(det_run.fetch(det_run.discover(twin, NOW), twin, cache / "twins").files)
        for short, var in names.items():
            # GFS's APCP is the 6-12 h window at 12 h, as GEFS's.
            d = _on_points(det, short, 12, ens.lats, ens.lons)
            if mid == "ens" and short == "tp":
                d = d * 1000.0  # m -> kg m-2, the canonical unit the perturbation applies to
                ens.values = {k: (v * 1000.0 if k[0] == "tp" else v)
                              for k, v in ens.values.items()}
            assert np.ptp(d) > 0, (mid, short)
            _check_members(ens, mid, short, var, 12, d)
        if mid == "gefs":  # where it rains, the share of wet members is what the factors say
            factors = np.array([perturbation("gefs", k).precip for k in members(GEFS)])
            wet = np.nonzero(d > 0.5)[0]
            assert len(wet)
            for i in wet:
                got = np.mean([ens.values[("tp", k, 12)][i] > 0.1 for k in members(GEFS)])
                assert got == np.mean(factors * d[i] > 0.1)
                assert 0.5 < got < 1.0
    for mid in ("icon-eu-eps", "icon-eu-eps/legacy"):
        eps = Fields(fetched[mid].files)
        grid = CellGrid(lats=eps.lats, lons=eps.lons, number=37, uuid="", spacing_km=0.0)
        weather = Weather(weather_model(ICON_EU_EPS), grid, LandMask.load(cache))
        when = INIT + timedelta(hours=6)
        s = weather.surface(hours_since_epoch(when), 6.0)
        for short, var in (("2t", "t2m"), ("10u", "u10"), ("10v", "v10")):
            _check_members(eps, "icon-eu-eps", short, var, 6, s[var].ravel().astype(float))


def test_the_same_inputs_give_the_same_bytes(tmp_path):
    for model in (ENS, ICON_EU_EPS):
        a = fetch(model, tmp_path / "a", icon_layout="legacy")
        b = fetch(model, tmp_path / "b", icon_layout="legacy")
        assert [f.relative_to(tmp_path / "a") for f in a.files] == [
            f.relative_to(tmp_path / "b") for f in b.files]
        for fa, fb in zip(a.files, b.files, strict=True):
            assert fa.read_bytes() == fb.read_bytes(), fa


def test_ensemble_scale_defaults_to_four_times_the_scale_and_horizon_caps_the_steps(tmp_path):
    assert SampleSource(scale=4).ensemble_scale == 16
    with pytest.raises(ValueError, match="ensemble_scale"):
        SampleSource(ensemble_scale=0)
    src = SampleSource(scale=SCALE, ensemble_scale=ENSEMBLE_SCALE, init=INIT, horizon_hours=6)
    run = src.discover(ENS, NOW)
    assert run.steps[-1] == timedelta(hours=6)
    assert len(src.fetch(run, ENS, tmp_path).files) == 3 * 2  # enfo-ef and oper-fc a step
