"""Verification of the probabilities and quantiles against a known truth: small archives
written with the real archive writer (Zarr, `publish.append_archive`), observations whose
Brier scores, reliability tables and CRPS are computed here by hand, read back through
`pointcast verify` (its reading, matching and scoring, its JSON, Zarr and CLI output)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pointcast import publish, verify
from pointcast.cli import main

INIT = np.datetime64("2026-10-19T00:00", "ns")
LEVELS = (0.1, 0.25, 0.5, 0.75, 0.9)
HOURS = 6  # the hours observed; the archive holds one more (a tidy row must lie within the run)
POINTS = ("paris", "berlin")
# Per point and clock hour: the published (ensemble) and the neighbourhood probability (%),
# the precipitation quantiles (mm in the hour) and the observed amount of the hour.
PROBA = {"paris": [0, 20, 50, 90, 100, 40, 0], "berlin": [10, 10, 70, 30, 0, 60, 0]}
NEIGHBOURHOOD = {"paris": [0, 100, 100, 0, 100, 0, 0], "berlin": [0, 0, 100, 100, 0, 100, 0]}
RAIN_Q = {"paris": [0.0, 0.0, 0.1, 0.4, 1.2], "berlin": [0.0, 0.05, 0.2, 0.5, 2.0]}
RAIN = {"paris": [0.0, 0.3, 0.0, 1.5, 0.1, 0.0], "berlin": [0.05, 0.0, 2.5, 0.2, 0.0, 0.4]}
# The temperature quantiles at step s (15 min) are these plus s / 8 degC; observed hourly.
TEMP_Q = {"paris": [8.0, 9.0, 10.0, 11.0, 12.0], "berlin": [3.0, 3.5, 4.0, 6.0, 8.0]}
TEMP = {"paris": [10.5, 13.0, 7.0, 10.0, 11.25, 12.0, 10.0], "berlin": [4.0, 4.25, 9.0, 2.0, 5.0, 4.0, 6.5]}
WIND_Q = [2.0, 3.0, 4.0, 5.0, 6.0]  # m/s at every step, both points; beyond 3 h no ensemble (NaN)
WIND = [4.5, 1.0, 7.0, 4.0]


def pinball(q: float, tau: float, y: float) -> float:
    """The quantile score of one quantile (Gneiting 2011): (1{y < q} - tau) (q - y)."""
    return ((1.0 if y < q else 0.0) - tau) * (q - y)


def crps(quantiles, y: float) -> float:
    """Twice the mean quantile score over the five levels."""
    return 2 * sum(pinball(q, t, y) for q, t in zip(quantiles, LEVELS, strict=True)) / len(LEVELS)


def test_crps_from_quantiles_by_hand():
    # quantiles 1..5, observed 3.5: quantile scores 0.25, 0.375, 0.25, 0.125, 0.15 -> 2 * 1.15 / 5
    got = verify.crps_from_quantiles(np.array([[1.0, 2.0, 3.0, 4.0, 5.0]]), LEVELS, np.array([3.5]))
    assert got == pytest.approx(0.46, abs=1e-4)
    # a point forecast (all quantiles equal) scores its absolute error, as the CRPS does
    assert verify.crps_from_quantiles(np.full((1, 5), 2.0), LEVELS, np.array([3.5])) == pytest.approx(1.5)
    # the exact quantiles of N(0, 1) against draws from it: the expected score is
    # 2/5 * sum(phi(z_tau)) = 0.5542, within 2 % of the CRPS of the distribution itself (1/sqrt(pi))
    z = np.array([-1.2815516, -0.6744898, 0.0, 0.6744898, 1.2815516])
    expected = 2 / 5 * float(np.sum(np.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi)))
    y = np.random.default_rng(44).normal(size=40_000)
    got = verify.crps_from_quantiles(np.broadcast_to(z, (len(y), 5)), LEVELS, y)
    assert got == pytest.approx(expected, rel=0.015)
    assert abs(expected * math.sqrt(math.pi) - 1) < 0.02


def archive_dataset(product: str, step_minutes: int) -> xr.Dataset:
    steps = (HOURS + 1) * 60 // step_minutes
    per_hour = 60 // step_minutes
    lead = np.arange(steps) * np.timedelta64(step_minutes, "m")
    hour = np.arange(steps) // per_hour  # the clock hour holding each step

    def hourly(table):
        return np.array([[table[p][h] for h in hour] for p in POINTS], dtype=np.float32)[None]

    temp = np.array([[np.add(TEMP_Q[p], s * step_minutes / 120) for s in range(steps)] for p in POINTS])
    wind = np.array([[WIND_Q if s < 3 * per_hour else [np.nan] * 5 for s in range(steps)] for p in POINTS])
    rain = np.array([[RAIN_Q[p]] * steps for p in POINTS])
    dims, qdims = ("init_time", "point", "lead_time"), ("init_time", "point", "lead_time", "quantile")
    proba_name = "precipitation_proba" if product.startswith("eu-") else "pop"
    return xr.Dataset(
        {proba_name: (dims, hourly(PROBA), {"units": "%"}),
         "precipitation_proba_neighbourhood": (dims, hourly(NEIGHBOURHOOD), {"units": "%"}),
         "temperature_quantiles": (qdims, temp[None].astype(np.float32), {"units": "degC"}),
         "wind_speed_quantiles": (qdims, wind[None].astype(np.float32), {"units": "m s-1"}),
         "precipitation_quantiles": (qdims, rain[None].astype(np.float32), {"units": "mm"})},
        coords={"init_time": [INIT], "point": list(POINTS), "lead_time": lead, "quantile": list(LEVELS)})


def tidy(path: Path) -> Path:
    lines = ["point,time,variable,value"]
    for p in POINTS:
        for h, mm in enumerate(RAIN[p]):  # the hour [h, h + 1) ends at h + 1
            lines.append(f"{p},{str(INIT + np.timedelta64(h + 1, 'h'))[:16]}Z,precipitation,{mm}")
        lines.append(f"{p},{str(INIT)[:16]}Z,precipitation,0.0")  # the hour before the run: persistence
        lines.append(f"{p},{str(INIT + np.timedelta64(150, 'm'))[:16]}Z,precipitation,9.9")  # not a clock hour
        for h, t in enumerate(TEMP[p]):
            lines.append(f"{p},{str(INIT + np.timedelta64(h, 'h'))[:16]}Z,temp_2m,{t}")
        for h, w in enumerate(WIND):
            lines.append(f"{p},{str(INIT + np.timedelta64(h, 'h'))[:16]}Z,windspd_10m,{w}")
    path.write_text("\n".join(lines) + "\n")
    return path


CONFIG = """\
[output]
root = "output"

[sources.sample]
type = "sample"

[models.ifs]
source = "sample"

[products.eu-short]
points = "points.csv"
models = ["ifs"]
horizon_hours = 7
"""


def brier(table, events, points=POINTS):
    return {h: sum((table[p][h] / 100 - events[p][h]) ** 2 for p in points) / len(points) for h in range(HOURS)}


EVENTS = {p: [1.0 if mm >= 0.1 else 0.0 for mm in RAIN[p]] for p in POINTS}


def check_probabilities(variables: dict, name: str) -> None:
    for element, table in ((name, PROBA), ("precipitation_proba_neighbourhood", NEIGHBOURHOOD)):
        v = variables[element]
        assert v["units"] == "%"
        got = {b["lead_from_h"]: b for b in v["bins"]}
        assert sorted(got) == list(range(HOURS))  # the 02:30 hour is no clock hour: not matched
        expected = brier(table, EVENTS)
        for h in range(HOURS):
            assert got[h]["n"] == len(POINTS)
            assert got[h]["brier"] == pytest.approx(expected[h], abs=1e-4), (element, h)
        # persistence: no rain in the hour before the run, a probability of 0
        assert got[0]["persistence"]["brier"] == pytest.approx(sum(EVENTS[p][0] for p in POINTS) / 2)
        # the reliability table: per 10 % bin, the pairs and the observed frequency
        table_by_bin: dict[int, list[float]] = {}
        for p in POINTS:
            for h in range(HOURS):
                table_by_bin.setdefault(min(table[p][h] // 10 * 10, 90), []).append(EVENTS[p][h])
        for r in v["reliability"]:
            events = table_by_bin.get(r["forecast_from"], [])
            assert r["n"] == len(events), (element, r)
            assert r["observed_frequency"] == (pytest.approx(np.mean(events), abs=1e-4) if events else None)


def check_quantiles(variables: dict) -> None:
    temp = {b["lead_from_h"]: b for b in variables["temperature_quantiles"]["bins"]}
    assert sorted(temp) == list(range(len(TEMP["paris"])))
    for h, b in temp.items():  # the step at h hours: index 4 h, quantiles + h / 2 degC
        expected = np.mean([crps(np.add(TEMP_Q[p], h / 2), TEMP[p][h]) for p in POINTS])
        assert b["crps"] == pytest.approx(expected, abs=1e-4), h
        persistence = np.mean([abs(TEMP[p][0] - TEMP[p][h]) for p in POINTS])
        assert b["persistence"]["crps"] == pytest.approx(persistence, abs=1e-4)
    assert variables["temperature_quantiles"]["units"] == "degC"
    assert variables["temperature_quantiles"]["quantiles"] == list(LEVELS)
    wind = {b["lead_from_h"]: b for b in variables["wind_speed_quantiles"]["bins"]}
    assert sorted(wind) == [0, 1, 2]  # no ensemble from 3 h: not scored
    for h, b in wind.items():
        assert b["crps"] == pytest.approx(crps(WIND_Q, WIND[h]), abs=1e-4)
        assert b["n"] == len(POINTS)
    rain = {b["lead_from_h"]: b for b in variables["precipitation_quantiles"]["bins"]}
    assert sorted(rain) == list(range(HOURS))
    for h, b in rain.items():
        expected = np.mean([crps(RAIN_Q[p], RAIN[p][h]) for p in POINTS])
        assert b["crps"] == pytest.approx(expected, abs=1e-4), h


def test_eu_short_brier_reliability_and_crps_against_a_known_truth(tmp_path, capsys):
    """15-minute steps: the clock hour's value is held at its four steps."""
    (tmp_path / "points.csv").write_text("id,name,lat,lon,elevation,hub_heights\n"
                                         "paris,Paris,48.8566,2.3522,,\nberlin,Berlin,52.52,13.405,,\n")
    cfg = tmp_path / "pointcast.toml"
    cfg.write_text(CONFIG)
    root = tmp_path / "output"
    publish.append_archive(root, "eu-short", archive_dataset("eu-short", 15))
    assert main(["verify", "--config", str(cfg), str(tidy(tmp_path / "obs.csv"))]) == 0
    result = json.loads((root / "verification" / "eu-short.json").read_text())
    variables = result["variables"]
    assert set(variables) == {"precipitation_proba", "precipitation_proba_neighbourhood", "temperature_quantiles",
                              "wind_speed_quantiles", "precipitation_quantiles"}
    check_probabilities(variables, "precipitation_proba")
    check_quantiles(variables)
    # the same numbers for analysts
    with xr.open_zarr(root / "verification" / "eu-short.zarr") as ds:
        assert np.allclose(ds.temperature_quantiles_crps.values,
                           [b["crps"] for b in variables["temperature_quantiles"]["bins"]])
        assert ds.temperature_quantiles_crps.attrs["units"] == "degC"
        assert ds.precipitation_proba_neighbourhood_reliability_n.values.sum() == len(POINTS) * HOURS
    # the CLI prints the scores over all lead times and by lead day, and the reliability tables
    out = capsys.readouterr().out
    printed = {m[1]: (float(m[2]), int(m[3])) for m in re.finditer(r"^eu-short (\S+): \w+ ([\d.]+)\D*\(n (\d+)\)",
                                                                  out, re.MULTILINE)}
    n = len(POINTS) * HOURS
    assert printed["precipitation_proba"] == (pytest.approx(np.mean(list(brier(PROBA, EVENTS).values())), abs=2e-4), n)
    assert printed["precipitation_proba_neighbourhood"] == (
        pytest.approx(np.mean(list(brier(NEIGHBOURHOOD, EVENTS).values())), abs=2e-4), n)
    assert printed["wind_speed_quantiles"] == (pytest.approx(np.mean([crps(WIND_Q, w) for w in WIND[:3]]), abs=2e-4),
                                               3 * len(POINTS))
    assert "eu-short wind_speed_quantiles: CRPS" in out and "m/s (n 6); by lead day: 0-24 h " in out
    assert out.count("reliability (observed frequency by forecast probability): 0-10 %: ") == 2


def test_global_hourly_pop_and_quantiles(tmp_path):
    """The wxdata archives: hourly steps, the published probability is the element pop."""
    root = tmp_path / "output"
    publish.append_archive(root, "global", archive_dataset("global", 60))
    obs = verify.read_tidy(tidy(tmp_path / "obs.csv"), POINTS).frame
    obs["point"] = obs["key"]
    archive = verify.Archive.open(root, "global")
    assert archive is not None
    try:
        variables = verify.verify_product(archive, obs)["variables"]
    finally:
        archive.close()
    assert "precipitation_proba" not in variables
    check_probabilities(variables, "pop")
    check_quantiles(variables)


E2E_INIT = "2026-10-19T00:00Z"
E2E_HOURS = 24
E2E_CONFIG = f"""\
[output]
root = "output"

[dask]
scheduler = "threads"
workers = 2

[sources.sample]
type = "sample"
scale = 16
ensemble_scale = 16
area = [-10.0, 34.0, 26.0, 58.0]
init = "{E2E_INIT}"
horizon_hours = {E2E_HOURS + 6}

[models.ifs]
source = "sample"

[models.ens]
source = "sample"

[products.eu-short]
points = "points.csv"
models = ["ifs"]
ensembles = ["ens"]
freqs = ["1H", "15min"]
horizon_hours = {E2E_HOURS + 1}  # a tidy row must lie within the run: the last hour ends inside it
"""


def test_a_published_run_with_ensembles_end_to_end(tmp_path, prefect_harness):
    """A real cycle of the sample with its ENS members (GRIB, Prefect, dask, Zarr), then
    observations chosen around what it archived: the scores are those computed here from the
    archive's own probabilities and quantiles."""
    from pointcast.flows.cycle import cycle

    (tmp_path / "points.csv").write_text("id,name,lat,lon,elevation,hub_heights\n"
                                         "paris,Paris,48.8566,2.3522,,\nberlin,Berlin,52.52,13.405,,\n")
    cfg = tmp_path / "pointcast.toml"
    cfg.write_text(E2E_CONFIG)
    cycle(str(cfg))
    root = tmp_path / "output"
    init = np.datetime64(E2E_INIT[:-1], "ns")
    with xr.open_zarr(root / "zarr" / "eu-short.zarr") as ds:
        run = ds.sel(init_time=init).load()
    assert list(run["quantile"].values) == list(LEVELS)
    rng = np.random.default_rng(19)
    lines, expected = ["point,time,variable,value"], {}
    for p in POINTS:
        at = run.sel(point=p)
        for h in range(E2E_HOURS):
            step = at.sel(lead_time=np.timedelta64(h, "h"))  # the hour [h, h + 1) and the state at h
            q = step.temperature_quantiles.values.astype(float)
            t = round(float(q[2] + rng.normal(0.0, 1.0)), 1)
            lines.append(f"{p},{str(init + np.timedelta64(h, 'h'))[:16]}Z,temp_2m,{t}")
            expected.setdefault(("temperature_quantiles", h), []).append(crps(q, t))
            q = step.precipitation_quantiles.values.astype(float)
            mm = round(float(rng.choice([0.0, q[2], q[4] + 0.3])), 1)
            lines.append(f"{p},{str(init + np.timedelta64(h + 1, 'h'))[:16]}Z,precipitation,{mm}")
            expected.setdefault(("precipitation_quantiles", h), []).append(crps(q, mm))
            event = 1.0 if mm >= 0.1 else 0.0
            for name in ("precipitation_proba", "precipitation_proba_neighbourhood"):
                expected.setdefault((name, h), []).append((float(step[name]) / 100 - event) ** 2)
    obs = tmp_path / "obs.csv"
    obs.write_text("\n".join(lines) + "\n")
    assert main(["verify", "--config", str(cfg), str(obs)]) == 0
    variables = json.loads((root / "verification" / "eu-short.json").read_text())["variables"]
    for name, score in (("temperature_quantiles", "crps"), ("precipitation_quantiles", "crps"),
                        ("precipitation_proba", "brier"), ("precipitation_proba_neighbourhood", "brier")):
        got = {b["lead_from_h"]: b for b in variables[name]["bins"]}
        assert sorted(got) == list(range(E2E_HOURS)), name
        for h, b in got.items():
            assert b["n"] == len(POINTS)
            assert b[score] == pytest.approx(np.mean(expected[(name, h)]), abs=2e-4), (name, h)
    # the ensemble's probability is not the neighbourhood's (else the comparison says nothing)
    assert variables["precipitation_proba"]["bins"] != variables["precipitation_proba_neighbourhood"]["bins"]
