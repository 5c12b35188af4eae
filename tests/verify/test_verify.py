"""Verification and bias correction for real: four real cycles of the sample source (Prefect,
dask, GRIB, Zarr) with [postprocess] on, observations made from a known truth (the archived
forecast + 1.5 K plus noise of known spread) written between the cycles as the correction's
observations arrive, then `pointcast verify` on tidy CSV and on ISD-Lite, and GET /verification.

The cycles run 72 h apart (00 UTC, 72 h horizon), so every observation verifies one run, and
span the end of European summer time (2026-10-25 01:00 UTC): the third run's observations are
written in Paris local time, with the offsets of both sides of the change.
"""

from __future__ import annotations

import gzip
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import numpy as np
import pytest
import xarray as xr

from pointcast import verify
from pointcast.cli import main
from pointcast.config import load_config
from test_cycle import serving

INITS = ("2026-10-19T00:00Z", "2026-10-22T00:00Z", "2026-10-25T00:00Z", "2026-10-28T00:00Z")
OFFSET_K = 1.5  # truth = forecast + 1.5 K: verify must report a bias of -1.5 K
SIGMA_K = 0.1  # the noise's spread
POINTS = {  # id -> (lat, lon, ISD USAF-WBAN station)
    "paris": (48.8566, 2.3522, "071560-99999"),
    "berlin": (52.52, 13.405, "103840-99999"),
    "madrid": (40.4168, -3.7038, "082210-99999"),
    "warsaw": (52.2297, 21.0122, "123750-99999"),
}
PARIS = ZoneInfo("Europe/Paris")

CONFIG = """\
[output]
root = "output"

[dask]
scheduler = "threads"
workers = 2

[sources.sample]
type = "sample"
scale = 16
area = [-10.0, 34.0, 26.0, 58.0]
init = "{init}"

[models.ifs]
source = "sample"

[products.eu-short]
points = "points/europe.csv"
models = ["ifs"]
freqs = ["1H", "15min"]
horizon_hours = 72

[postprocess]
enabled = true
observations = "obs"
"""


def write_config(base: Path, init: str) -> Path:
    (base / "points").mkdir(parents=True, exist_ok=True)
    (base / "points" / "europe.csv").write_text(
        "id,name,lat,lon,elevation,hub_heights,station\n"
        + "".join(f"{pid},{pid.title()},{lat},{lon},,,{st}\n" for pid, (lat, lon, st) in POINTS.items()))
    path = base / "pointcast.toml"
    path.write_text(CONFIG.format(init=init))
    return path


def truth(root: Path, init: np.datetime64, rng: np.random.Generator) -> list[tuple[str, np.datetime64, float]]:
    """The hourly observations of one run's 72 h: its raw temp_2m + 1.5 K + noise, to 0.1 K."""
    with xr.open_zarr(root / "zarr" / "eu-short.zarr") as ds:
        t = ds.temp_2m.sel(init_time=init).load()
    out = []
    for h in range(72):
        lead = np.timedelta64(h, "h")
        for pid in POINTS:
            value = float(t.sel(point=pid, lead_time=lead)) + OFFSET_K + rng.normal(0.0, SIGMA_K)
            out.append((pid, init + lead, round(value, 1)))
    return out


def tidy_text(rows, zone: ZoneInfo | None = None) -> str:
    lines = ["point,time,variable,value"]
    for pid, when, value in rows:
        t = datetime.fromisoformat(str(when)[:19]).replace(tzinfo=UTC)
        lines.append(f"{pid},{(t.astimezone(zone) if zone else t).isoformat()},temp_2m,{value:.1f}")
    return "\n".join(lines) + "\n"


def isd_line(when: datetime, temp=-9999, dew=-9999, slp=-9999, wdir=-9999, wspd=-9999, sky=-9999,
             p1=-9999, p6=-9999) -> str:
    """One ISD-Lite line: year, month, day, hour, then eight fields right-aligned in 6 columns."""
    return (f"{when.year:4d} {when.month:02d} {when.day:02d} {when.hour:02d}"
            + "".join(f"{v:6d}" for v in (temp, dew, slp, wdir, wspd, sky, p1, p6)))


@pytest.fixture(scope="module")
def world(tmp_path_factory, prefect_harness):
    """Four cycles; before each, the observations of the runs before it arrive in obs/."""
    from pointcast.flows.cycle import cycle

    base = tmp_path_factory.mktemp("verify")
    (base / "obs").mkdir()
    rng = np.random.default_rng(20261019)
    rows = []
    for k, init in enumerate(INITS):
        cfg = write_config(base, init)
        cycle(str(cfg))
        when = np.datetime64(init[:-1], "ns")
        new = truth(base / "output", when, rng)
        rows += new
        zone = PARIS if k == 2 else None  # the run across the end of summer time: local times
        (base / "obs" / f"run{k + 1}.csv").write_text(tidy_text(new, zone))
    return base, rows


def bins(result: dict, element: str = "temp_2m") -> list[dict]:
    return result["variables"][element]["bins"]


def test_bias_is_the_known_offset_at_every_lead_bin(world):
    base, rows = world
    cfg = base / "pointcast.toml"
    assert main(["verify", "--config", str(cfg), str(base / "obs")]) == 0
    result = json.loads((base / "output" / "verification" / "eu-short.json").read_text())
    assert result["product"] == "eu-short" and set(result["variables"]) == {"temp_2m"}
    entries = bins(result)
    assert [(b["lead_from_h"], b["lead_to_h"]) for b in entries] == [(h, h + 1) for h in range(72)]
    for b in entries:
        assert b["n"] == len(INITS) * len(POINTS)
        assert abs(b["bias"] + OFFSET_K) <= 0.1, b
        assert 1.3 < b["mae"] < 1.7 and b["rmse"] >= b["mae"]
        # the observation at init time as the reference forecast: perfect at lead 0 only
        assert (b["persistence"]["mae"] > 0) == (b["lead_from_h"] > 0)
    # the noise's spread comes back: RMSE^2 = bias^2 + variance (rounding to 0.1 K included)
    n = sum(b["n"] for b in entries)
    bias = sum(b["bias"] * b["n"] for b in entries) / n
    var = sum(b["rmse"] ** 2 * b["n"] for b in entries) / n - bias ** 2
    assert abs(math.sqrt(var) - math.hypot(SIGMA_K, 0.1 / math.sqrt(12))) < 0.02
    assert abs(bias + OFFSET_K) < 0.02
    # the same numbers for analysts, and the copy in the served run's JSON tree
    with xr.open_zarr(base / "output" / "verification" / "eu-short.zarr") as ds:
        assert np.allclose(ds.temp_2m_bias.values, [b["bias"] for b in entries])
        assert ds.temp_2m_n.values.tolist() == [b["n"] for b in entries]
    served = base / "output" / "current" / "json" / "verification"
    assert json.loads((served / "eu-short.json").read_bytes()) == result
    assert gzip.decompress((served / "eu-short.json.gz").read_bytes()) == (served / "eu-short.json").read_bytes()
    assert json.loads((served / "index.json").read_bytes())["products"] == ["eu-short"]


def test_local_times_across_the_dst_change_are_the_same_observations(world, tmp_path):
    base, rows = world
    text = (base / "obs" / "run3.csv").read_text()
    assert "+02:00" in text and "+01:00" in text  # both sides of the change
    utc = tmp_path / "utc.csv"
    utc.write_text(tidy_text(rows))
    cfg = load_config(base / "pointcast.toml")
    frame_local = verify.read_observations([base / "obs"], cfg).frame
    frame_utc = verify.read_observations([utc], cfg).frame
    key = ["point", "time"]
    a = frame_local.sort_values(key)[key + ["value"]].reset_index(drop=True)
    b = frame_utc.sort_values(key)[key + ["value"]].reset_index(drop=True)
    assert a.equals(b) and len(a) == len(rows)


def test_isd_lite_gives_the_same_scores(world, tmp_path):
    base, rows = world
    cfg = load_config(base / "pointcast.toml")
    tidy = verify.run(cfg, [base / "obs"]).results[0]["variables"]["temp_2m"]
    isd = tmp_path / "isd"
    isd.mkdir()
    for pid, (_, _, station) in POINTS.items():
        lines = [isd_line(datetime.fromisoformat(str(when)[:19]), temp=round(value * 10))
                 for p, when, value in rows if p == pid]
        data = ("\n".join(lines) + "\n").encode()
        name = f"{station}-2026"
        if pid == "paris":  # as NOAA ships them
            (isd / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (isd / name).write_bytes(data)
    report = verify.run(cfg, [isd])
    assert report.results[0]["variables"]["temp_2m"] == tidy


SAMPLE_ISD = "\n".join([  # 071560-99999-2026: missing values, calm, trace, the 6-hour group
    isd_line(datetime(2026, 10, 19, 0), temp=123, dew=81, slp=10132, wdir=270, wspd=41, sky=6, p1=0, p6=-9999),
    isd_line(datetime(2026, 10, 19, 1), temp=118, dew=-9999, slp=-9999, wdir=0, wspd=0, sky=9, p1=-1),
    isd_line(datetime(2026, 10, 19, 6), temp=-9999, wdir=-9999, wspd=-9999, sky=-9999, p1=25, p6=63),
]) + "\n"


def test_isd_lite_sample_in_the_real_layout(tmp_path):
    assert SAMPLE_ISD.splitlines()[0] == "2026 10 19 00   123    81 10132   270    41     6     0 -9999"
    path = tmp_path / "071560-99999-2026"
    path.write_text(SAMPLE_ISD)
    obs = verify.read_isd_lite(path).frame
    got = {(r.element, str(r.time)[11:13], r.period // np.timedelta64(1, "h")): r.value for r in obs.itertuples()}
    rh = 100 * 6.112 * math.exp(17.67 * 8.1 / (8.1 + 243.5)) / (6.112 * math.exp(17.67 * 12.3 / (12.3 + 243.5)))
    assert got == {
        ("temp_2m", "00", 0): 12.3, ("dewpoint_temperature", "00", 0): 8.1, ("humidity", "00", 0): round(rh),
        ("sea_surface_pressure", "00", 0): 1013.2, ("windspd_10m", "00", 0): 4.1, ("windir_10m", "00", 0): 270.0,
        ("total_cloud_cover", "00", 0): 75.0, ("precipitation", "00", 1): 0.0,
        ("temp_2m", "01", 0): 11.8, ("windspd_10m", "01", 0): 0.0, ("precipitation", "01", 1): 0.0,
        ("precipitation", "06", 1): 2.5, ("precipitation", "06", 6): 6.3 / 6,
    }
    assert set(obs["key"]) == {"071560-99999"}
    bad = tmp_path / "071560-99999-2025"
    bad.write_text(SAMPLE_ISD)
    with pytest.raises(verify.ObservationError, match=r"071560-99999-2025:1: year 2026 in the file of 2025"):
        verify.read_isd_lite(bad)


def test_brier_score_matches_a_hand_computation(world, tmp_path):
    base, _ = world
    init = np.datetime64(INITS[0][:-1], "ns")
    amounts = {("paris", 0): 0.0, ("paris", 1): 0.4, ("paris", 2): 0.0, ("paris", 3): 1.2,
               ("madrid", 0): 0.3, ("madrid", 1): 0.0, ("madrid", 2): 0.05, ("madrid", 3): 0.0}
    path = tmp_path / "rain.csv"
    path.write_text("point,time,variable,value\n" + "".join(
        f"{p},{str(init + np.timedelta64(h, 'h'))[:19]}Z,precipitation,{mm}\n" for (p, h), mm in amounts.items()))
    result = verify.run(load_config(base / "pointcast.toml"), [path]).results[0]["variables"]
    with xr.open_zarr(base / "output" / "zarr" / "eu-short.zarr") as ds:
        proba = ds.precipitation_proba.sel(init_time=init).load()
    expected = {}
    for (p, h), mm in amounts.items():
        if h == 0:
            continue  # the hour before the run: persistence only
        hour = proba.sel(point=p, lead_time=slice(np.timedelta64(h - 1, "h"), np.timedelta64(h, "h") - np.timedelta64(1, "m")))
        assert hour.sizes["lead_time"] == 4  # the quarter hours of the hour that ends at the observation
        prob = float(hour.max()) / 100
        event = 1.0 if mm >= 0.1 else 0.0
        persistence = 1.0 if amounts[(p, 0)] >= 0.1 else 0.0
        expected.setdefault(h - 1, []).append(((prob - event) ** 2, (persistence - event) ** 2))
    got = {b["lead_from_h"]: b for b in result["precipitation_proba"]["bins"]}
    assert sorted(got) == sorted(expected)
    for h, pairs in expected.items():
        assert got[h]["n"] == 2
        assert got[h]["brier"] == pytest.approx(sum(b for b, _ in pairs) / 2, abs=1e-4)
        assert got[h]["persistence"]["brier"] == pytest.approx(sum(b for _, b in pairs) / 2, abs=1e-4)
    reliability = result["precipitation_proba"]["reliability"]
    assert [r["forecast_from"] for r in reliability] == list(range(0, 100, 10))
    assert sum(r["n"] for r in reliability) == 6


def test_correction_removes_the_bias_on_later_runs(world):
    base, _ = world
    root = base / "output"
    with xr.open_zarr(root / "zarr" / "eu-short.zarr") as ds:
        assert {"temp_2m", "temp_2m_corrected", "dewpoint_temperature_corrected",
                "windspd_10m_corrected"} <= set(ds.data_vars)
        first = ds.sel(init_time=np.datetime64(INITS[0][:-1], "ns"))
        assert np.array_equal(first.temp_2m.values, first.temp_2m_corrected.values)  # nothing learnt yet
    manifest = json.loads((root / "current" / "manifest.json").read_text())
    pp = manifest["postprocess"]
    assert pp["enabled"] is True and pp["weight"] == 0.02
    assert pp["products"]["eu-short"]["corrected"] == ["temp_2m_corrected", "dewpoint_temperature_corrected",
                                                        "windspd_10m_corrected"]
    assert pp["products"]["eu-short"]["pairs_learnt"] == 72 * len(POINTS)  # the third run's observations
    cfg = load_config(base / "pointcast.toml")
    later = verify.run(cfg, [base / "obs"], since=datetime(2026, 10, 22, tzinfo=UTC)).results[0]
    entries = bins(later)
    for b in entries:
        assert abs(b["bias"] + OFFSET_K) <= 0.1  # the raw forecast keeps its bias
        assert b["corrected"]["n"] == b["n"] == 3 * len(POINTS)
        assert abs(b["corrected"]["bias"]) < 0.3, b
    # MAE: from |-1.5 - e| to that of e less the mean of the m earlier errors of its cell
    # (m = 1, 2, 3 for the three later runs): sigma * sqrt(2/pi) * sqrt(1 + 1/m)
    sigma = math.hypot(SIGMA_K, 0.1 / math.sqrt(12))
    expected = sigma * math.sqrt(2 / math.pi) * np.mean([math.sqrt(1 + 1 / m) for m in (1, 2, 3)])
    n = sum(b["n"] for b in entries)
    raw = sum(b["mae"] * b["n"] for b in entries) / n
    corrected = sum(b["corrected"]["mae"] * b["n"] for b in entries) / n
    assert raw == pytest.approx(OFFSET_K, abs=0.02)
    assert corrected == pytest.approx(expected, rel=0.1)


def served(root: Path, init: str, freq: str = "1H") -> dict[str, list[dict]]:
    """The JSON entries of each point of eu-short as published by the run of ``init``."""
    (run,) = (root / "runs").glob(f"{init[:13].replace('-', '').replace(':', '')}00Z-*")
    return {pid: json.loads((run / "json" / "eu-short" / freq / f"{pid}.json").read_bytes())["data"]
            for pid in POINTS}


def test_served_json_is_corrected_from_what_was_learnt_before_the_run(world):
    base, rows = world
    root = base / "output"
    observed = {(pid, str(when)[:19]): value for pid, when, value in rows}
    for init in INITS[1:]:
        json_errors, raw_errors = [], []
        with xr.open_zarr(root / "zarr" / "eu-short.zarr") as ds:
            run = ds.sel(init_time=np.datetime64(init[:-1], "ns"))
            raw, corrected = run.temp_2m.load(), run.temp_2m_corrected.load()
        for pid, entries in served(root, init).items():
            for h, entry in enumerate(entries[:72]):
                o = observed[(pid, entry["datetime"][:19])]
                json_errors.append(entry["temp_2m"] - o)
                lead = np.timedelta64(h, "h")
                raw_errors.append(float(raw.sel(point=pid, lead_time=lead)) - o)
                # the served value is the archive's corrected one
                assert abs(entry["temp_2m"] - float(corrected.sel(point=pid, lead_time=lead))) < 0.006
        assert abs(np.mean(raw_errors) + OFFSET_K) < 0.05  # the archive's raw keeps its bias
        assert abs(np.mean(json_errors)) < 0.3, init
        by_hour = np.reshape(json_errors, (len(POINTS), 72)).mean(axis=0)
        assert np.abs(by_hour).max() < 0.3, init
    # physical consistency of what is served, at every step of every run
    for init in INITS:
        for freq in ("1H", "15min"):
            for entries in served(root, init, freq).values():
                assert all(e["dewpoint_temperature"] <= e["temp_2m"] for e in entries)


def test_off_changes_nothing(world, tmp_path, prefect_harness):
    """With [postprocess] off, the JSON is that of a run corrected from nothing learnt (the
    world's first run, with it on): the correction is a no-op until it has learnt."""
    from pointcast.flows.cycle import cycle

    base, _ = world
    cfg = write_config(tmp_path, INITS[0])
    cfg.write_text(cfg.read_text().replace("enabled = true", "enabled = false"))
    cycle(str(cfg))
    (run,) = (tmp_path / "output" / "runs").glob("2026*")
    (first,) = (base / "output" / "runs").glob(f"{INITS[0][:10].replace('-', '')}T0000Z-*")
    files = sorted(p.relative_to(run) for p in (run / "json" / "eu-short").rglob("*.json"))
    assert len(files) == 2 * len(POINTS) + 1
    stamp = json.loads((run / "json" / "eu-short" / "1H" / "paris.json").read_bytes())["updated_time"]
    stamp_on = json.loads((first / "json" / "eu-short" / "1H" / "paris.json").read_bytes())["updated_time"]
    for rel in files:  # byte for byte but the publication time
        assert (run / rel).read_bytes() == (first / rel).read_bytes().replace(stamp_on.encode(), stamp.encode()), rel
    manifest = json.loads((run / "manifest.json").read_bytes())
    assert manifest["postprocess"] == {"enabled": False}
    with xr.open_zarr(tmp_path / "output" / "zarr" / "eu-short.zarr") as ds:
        assert not [v for v in ds.data_vars if v.endswith("_corrected")]
    assert not (tmp_path / "output" / "postprocess").exists()


def test_bad_input_names_file_and_line_and_writes_nothing(world, tmp_path):
    base, _ = world
    cfg = str(base / "pointcast.toml")
    out = base / "output" / "verification"
    before = {p: p.stat().st_mtime_ns for p in out.iterdir()}
    cases = {
        "point": ("paris,2026-10-19T03:00Z,temp_2m,10\nrome,2026-10-19T03:00Z,temp_2m,10\n", ":3: unknown point 'rome'"),
        "variable": ("paris,2026-10-19T03:00Z,temperature,10\n", ":2: unknown variable 'temperature'"),
        "malformed": ("paris,2026-10-19T03:00Z,temp_2m\n", ":2: expected 4 fields"),
        "time": ("paris,2026-10-19T03:00Z,temp_2m,10\nparis,2026-10-18T03:00Z,temp_2m,10\n",
                 ":3: time 2026-10-18T03:00:00Z is outside every archived run"),
        "number": ("paris,2026-10-19T03:00Z,temp_2m,warm\n", ":2: value 'warm' is not a number"),
    }
    for name, (body, message) in cases.items():
        path = tmp_path / f"{name}.csv"
        path.write_text("point,time,variable,value\n" + body)
        with pytest.raises(verify.ObservationError, match=message.replace("(", r"\(")) as err:
            verify.run(load_config(cfg), [path])
        assert str(err.value).startswith(str(path))
        assert main(["verify", "--config", cfg, str(path)]) == 2
    assert {p: p.stat().st_mtime_ns for p in out.iterdir()} == before
    # a value outside the physical range is flagged, counted and skipped, not fatal
    path = tmp_path / "flagged.csv"
    path.write_text("point,time,variable,value\nparis,2026-10-19T03:00Z,temp_2m,12.5\n"
                    "paris,2026-10-19T04:00Z,temp_2m,99\n")
    report = verify.run(load_config(cfg), [path])
    assert report.flagged == 1 and report.flagged_at[0].endswith("flagged.csv:3: temp_2m 99 outside [-90, 65]")
    assert report.results[0]["variables"]["temp_2m"]["bins"][0]["n"] == 1


def test_get_verification_serves_the_scores(world):
    base, _ = world
    root = base / "output"
    cfg = base / "pointcast.toml"
    assert main(["verify", "--config", str(cfg), str(base / "obs")]) == 0
    with serving(root) as url:
        index = httpx.get(f"{url}/verification")
        assert index.status_code == 200 and index.json()["products"] == ["eu-short"]
        scores = httpx.get(f"{url}/verification?product=eu-short")
        assert scores.status_code == 200
        assert scores.json() == json.loads((root / "verification" / "eu-short.json").read_text())
        again = httpx.get(f"{url}/verification?product=eu-short", headers={"If-None-Match": scores.headers["etag"]})
        assert again.status_code == 304
        assert httpx.get(f"{url}/verification?product=japan").json()["code"] == "404_001"
        assert httpx.get(f"{url}/verification?product=../x").json()["code"] == "400_002"
        assert httpx.post(f"{url}/verification").status_code == 405


def test_station_column_and_postprocess_table_are_checked(tmp_path):
    from pointcast.config import ConfigError

    cfg = write_config(tmp_path, INITS[0])
    loaded = load_config(cfg)
    assert [p.station for p in loaded.product("eu-short").points] == [s for _, _, s in POINTS.values()]
    assert loaded.postprocess.enabled and loaded.postprocess.observations == tmp_path / "obs"
    assert loaded.postprocess.weight == 0.02
    points = tmp_path / "points" / "europe.csv"
    points.write_text("id,name,lat,lon,elevation,hub_heights,station\nparis,Paris,48.8566,2.3522,,,\n"
                      "berlin,Berlin,52.52,13.405,,,10 384\n")
    with pytest.raises(ConfigError, match=r"europe.csv:3: station: invalid station id '10 384'"):
        load_config(cfg)
    points.write_text("id,name,lat,lon,elevation,hub_heights\nparis,Paris,48.8566,2.3522,,\n")
    assert load_config(cfg).product("eu-short").points[0].station is None  # the column is optional
    text = cfg.read_text()
    cfg.write_text(text.replace('observations = "obs"\n', ""))
    with pytest.raises(ConfigError, match=r"postprocess.enabled: the correction learns from observations"):
        load_config(cfg)
    cfg.write_text(text.replace('observations = "obs"\n', 'observations = "obs"\nweight = 1.5\n'))
    with pytest.raises(ConfigError, match=r"postprocess.weight: expected a number in \(0, 1\]"):
        load_config(cfg)
    cfg.write_text(text.replace("[postprocess]\nenabled = true\n", "[postprocess]\n"))
    assert load_config(cfg).postprocess.enabled is False  # off by default


def test_an_observation_given_twice_must_agree(world, tmp_path):
    base, _ = world
    cfg = load_config(base / "pointcast.toml")
    (tmp_path / "a.csv").write_text("point,time,variable,value\nparis,2026-10-19T03:00Z,temp_2m,10.5\n")
    (tmp_path / "b.csv").write_text("point,time,variable,value\n071560-99999,2026-10-19T04:00+01:00,temp_2m,10.5\n")
    assert len(verify.read_observations([tmp_path], cfg).frame) == 1  # the same, by station and local time
    (tmp_path / "b.csv").write_text("point,time,variable,value\n071560-99999,2026-10-19T03:00Z,temp_2m,11.0\n")
    with pytest.raises(verify.ObservationError, match=r"b.csv:2: temp_2m of paris at 2026-10-19T03:00:00Z is 11 "
                                                      r"here and 10.5 at .*a.csv:2"):
        verify.read_observations([tmp_path], cfg)


def test_wind_direction_is_compared_on_the_circle():
    t = np.array(["2026-10-19T03:00"] * 3, dtype="datetime64[ns]")
    m = verify.Matches(init=t, point=np.array(["paris"] * 3), valid=t, lead_h=np.array([3.0, 3.0, 3.0]),
                       forecast=np.array([350.0, 10.0, 180.0]), observed=np.array([10.0, 350.0, 170.0]),
                       persistence=np.full(3, np.nan), corrected=np.full(3, np.nan))
    (b,) = verify.score(m, "windir_10m")["bins"]
    assert (b["lead_from_h"], b["n"], b["bias"], b["mae"]) == (3, 3, round(10 / 3, 4), round(50 / 3, 4))
    assert b["rmse"] == pytest.approx(math.sqrt((400 + 400 + 100) / 3), abs=1e-4)
    assert b["persistence"] == {"bias": None, "mae": None, "rmse": None} and "corrected" not in b


def test_corrected_series_keep_dewpoint_below_temperature_and_the_wind_direction():
    from pointcast import physics, postprocess

    times = np.array(["2026-10-19T00:00", "2026-10-19T00:15", "2026-10-19T01:00"], dtype="datetime64[ns]")
    series = xr.Dataset({
        "t2m": (("time", "point"), np.full((3, 2), 283.15, np.float32)),
        "d2m": (("time", "point"), np.full((3, 2), 282.65, np.float32)),
        "wind_u": (("time", "point", "height"), np.full((3, 2, 2), 3.0, np.float32)),
        "wind_v": (("time", "point", "height"), np.full((3, 2, 2), -4.0, np.float32)),
    }, coords={"time": times, "point": ["paris", "berlin"], "height": [10.0, 100.0]})
    state = postprocess._fit(None, list(postprocess.CORRECTED), ["paris"], 72)
    bias = state["bias"]
    bias.loc[{"element": "temp_2m", "point": "paris"}] = 1.0  # 1 K too warm
    bias.loc[{"element": "dewpoint_temperature", "point": "paris"}] = -2.0  # 2 K too dry
    bias.loc[{"element": "windspd_10m", "point": "paris", "lead_bin": 0}] = 2.0  # 5 m/s for 3
    bias.loc[{"element": "windspd_10m", "point": "paris", "lead_bin": 1}] = 7.0  # more than the speed
    out = postprocess.correct_series(series, state, times[0])
    paris = out.sel(point="paris")
    assert np.allclose(paris.t2m, 282.15)
    assert np.allclose(paris.d2m, 282.15)  # raised to 284.65, above the temperature: capped at it
    u, v = paris.wind_u.sel(height=10.0).values, paris.wind_v.sel(height=10.0).values
    assert np.allclose(physics.wind_speed(u, v), [3.0, 3.0, 0.0])  # never negative
    assert np.allclose(physics.wind_direction(u[:2], v[:2]), physics.wind_direction(3.0, -4.0))
    winds = ["wind_u", "wind_v"]
    xr.testing.assert_identical(out.sel(height=100.0)[winds], series.sel(height=100.0)[winds])
    xr.testing.assert_identical(out.sel(point="berlin"), series.sel(point="berlin"))  # nothing learnt there
    assert all(out[name].dtype == np.float32 for name in out.data_vars)
    # On a dask cluster a slice is sent the estimate at its own points only: the same correction.
    from pointcast import build

    for ids in (["paris"], ["berlin"], ["berlin", "paris"]):
        cut = build._estimate_at(state, np.array(ids))
        assert list(cut.point.values) == [p for p in state.point.values if p in ids]
        xr.testing.assert_identical(postprocess.correct_series(series.sel(point=ids), cut, times[0]),
                                    out.sel(point=ids))


def test_products_of_one_blend_share_the_correction_and_the_windpack_stays_raw(tmp_path, prefect_harness):
    """eu-short and eu-medium (one blended series) are corrected alike, each cell with the
    estimate learnt from the most pairs, so they agree where they overlap; the windpack is not
    corrected, and validation passes with its 10 m wind raw beside eu-short's corrected one.
    Built on a LocalCluster, a point a slice: each slice task is sent the estimate at its own
    point (`build._on_cluster`)."""
    from pointcast import postprocess
    from pointcast.flows.cycle import cycle

    cfg = write_config(tmp_path, INITS[0])
    (tmp_path / "obs").mkdir()
    text = cfg.read_text().replace('scheduler = "threads"', 'scheduler = "local-cluster"\npoints_per_slice = 1')
    cfg.write_text(text.replace("[postprocess]", """\
[products.eu-medium]
points = "points/europe.csv"
models = ["ifs"]
freqs = ["1H", "15min"]
horizon_hours = 96

[products.eu-wind]
points = "points/europe.csv"
models = ["ifs"]
freqs = ["1H"]
horizon_hours = 72

[postprocess]"""))
    root = tmp_path / "output"
    for pid, (b, n) in {"eu-short": (1.0, 5), "eu-medium": (3.0, 10)}.items():
        state = postprocess._fit(None, list(postprocess.CORRECTED), list(POINTS), 80)
        state["bias"].loc[{"element": "temp_2m"}] = b
        state["bias"].loc[{"element": "windspd_10m"}] = 0.5
        state["count"][:] = n
        postprocess._save_state(root, pid, state)
    cycle(str(cfg))
    manifest = json.loads((root / "current" / "manifest.json").read_bytes())
    assert set(manifest["postprocess"]["products"]) == {"eu-short", "eu-medium"}
    json_dir = root / "current" / "json"
    with xr.open_zarr(root / "zarr" / "eu-short.zarr") as short, xr.open_zarr(root / "zarr" / "eu-wind.zarr") as wind:
        for pid in POINTS:
            medium = json.loads((json_dir / "eu-medium" / "1H" / f"{pid}.json").read_bytes())["data"]
            hourly = json.loads((json_dir / "eu-short" / "1H" / f"{pid}.json").read_bytes())["data"]
            assert hourly == medium[:72]
            raw = short.temp_2m.sel(point=pid).isel(init_time=0).values[::4]
            assert np.allclose([e["temp_2m"] for e in hourly], raw - 3.0, atol=0.011)  # eu-medium's estimate
            at10 = wind.windspd.sel(point=pid, height=10.0).isel(init_time=0).values
            assert np.array_equal(at10, short.windspd_10m.sel(point=pid).isel(init_time=0).values[::4])
            corrected = short.windspd_10m_corrected.sel(point=pid).isel(init_time=0).values[::4]
            assert np.allclose(corrected, np.maximum(at10 - 0.5, 0), atol=1e-4)
