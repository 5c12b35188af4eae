"""The whole cycle for real: sample GRIB -> Prefect flow -> published JSON and Zarr -> HTTP."""

from __future__ import annotations

import json
import math
import re
import threading
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pytest
import xarray as xr

from conftest import write_config
from pointcast import codes, viewer
from pointcast.config import load_config
from pointcast.products.eu_common import ORDER, UNITS
from pointcast.products.eu_wind import ladder_answers

SPEC_UNITS = {
    "datetime": "UTC", "weather_type": "NA", "humidity": "%", "snowfall": "kg/m2/h",
    "precipitation": "kg/m2/h", "temp_2m": "°C", "temp_100m": "°C", "temp_200m": "°C",
    "dewpoint_temperature": "°C", "pressure_sfc": "hPa", "pressure_100m": "hPa",
    "pressure_200m": "hPa", "sea_surface_pressure": "hPa",
    **{f"{c}_{h}m": u for c, u in (("u_windspd", "m/s"), ("v_windspd", "m/s"), ("windir", "degree"),
                                     ("windspd", "m/s")) for h in (10, 100, 200)},
    "total_solar_radiation": "W/m2", "solar_radiation_dir": "W/m2", "solar_radiation_diff": "W/m2",
    "windgust": "m/s", "total_cloud_cover": "%", "precipitation_proba": "%", "visibility": "m",
    "air_density": "kg/m3",
}
COUNTS = {("eu-short", "1H"): 72, ("eu-short", "30min"): 144, ("eu-short", "15min"): 288,
          ("eu-medium", "1H"): 336, ("eu-medium", "30min"): 672, ("eu-medium", "15min"): 1344}


def run_dir(root: Path) -> Path:
    return root / "runs" / (root / "current").readlink().name


def load(root: Path, product: str, freq: str, point: str) -> dict:
    return json.loads((run_dir(root) / "json" / product / freq / f"{point}.json").read_bytes())


def test_unit_table_is_the_spec():
    assert UNITS == SPEC_UNITS and list(ORDER) == list(SPEC_UNITS)


def test_no_task_of_the_cycle_hashes_its_inputs():
    """Prefect's default cache key hashes a task's inputs, the configuration among them with
    every points list, a cost that grows with the points and is paid by the models'
    discoveries at once (docs/performance.md). Nothing of a cycle is cached, so no task of the
    flow takes a key."""
    from prefect import Task
    from prefect.cache_policies import NO_CACHE

    import pointcast.flows.cycle as cycle_module

    tasks = {name: t for name, t in vars(cycle_module).items() if isinstance(t, Task)}
    assert {"discover", "fetch", "decode_extract", "build_blend", "publish_run"} <= tasks.keys()
    assert [name for name, t in tasks.items() if type(t.cache_policy) is not type(NO_CACHE)] == []


def test_published_run_is_complete_and_says_synthetic(published):
    cfg, root, run_id = published
    assert (root / "current").is_symlink() and run_dir(root).name == run_id
    manifest = json.loads((run_dir(root) / "manifest.json").read_text())
    assert manifest["synthetic"] is True and "SYNTHETIC" in manifest["notice"]
    assert set(manifest["models"]) == {"ifs", "gfs", "icon-eu", "icon-d2", "msm", "ens", "icon-eu-eps", "gefs"}
    validation = json.loads((run_dir(root) / "validation.json").read_text())
    assert validation["ok"] is True and validation["errors"] == []
    points = [line.split(",")[0] for line in (cfg.parent / "points" / "europe.csv").read_text().splitlines()[1:]
              if line and not line.startswith("#")]
    for (product, freq) in COUNTS:
        for pid in points:
            assert (run_dir(root) / "json" / product / freq / f"{pid}.json").is_file()
            assert (run_dir(root) / "json" / product / freq / f"{pid}.json.gz").is_file()


@pytest.mark.parametrize("product,freq", sorted(COUNTS))
def test_forecast_objects_follow_the_spec(published, product, freq):
    _, root, _ = published
    manifest = json.loads((run_dir(root) / "manifest.json").read_text())
    for pid in ("paris", "hornsea-1", "zugspitze", "lisbon", "helsinki"):
        obj = load(root, product, freq, pid)
        assert list(obj) == ["latitude", "longitude", "basetime", "updated_time", "freq", "unit", "data"]
        assert obj["freq"] == freq and obj["unit"] == SPEC_UNITS
        assert obj["basetime"] == manifest["products"][product]["basetime"]
        base = datetime.fromisoformat(obj["basetime"])
        assert obj["basetime"].endswith("+00:00") and obj["updated_time"].endswith("+00:00")
        assert len(obj["data"]) == COUNTS[(product, freq)]
        step = {"1H": 3600, "30min": 1800, "15min": 900}[freq]
        for i, entry in enumerate(obj["data"]):
            assert list(entry) == list(SPEC_UNITS)
            when = datetime.fromisoformat(entry["datetime"])
            assert entry["datetime"].endswith("+00:00") and (when - base).total_seconds() == i * step
            _physically_consistent(entry)


def _physically_consistent(e: dict) -> None:
    assert e["weather_type"] in codes.WEATHER_TYPES
    assert isinstance(e["humidity"], int) and 0 <= e["humidity"] <= 100
    assert e["dewpoint_temperature"] <= e["temp_2m"] + 0.011
    assert e["pressure_sfc"] > e["pressure_100m"] > e["pressure_200m"]
    assert 0 <= e["snowfall"] <= e["precipitation"] + 0.011
    for h in (10, 100, 200):
        u, v, spd, d = (e[f"u_windspd_{h}m"], e[f"v_windspd_{h}m"], e[f"windspd_{h}m"], e[f"windir_{h}m"])
        assert abs(math.hypot(u, v) - spd) <= 0.015
        assert 0 <= d < 360
        if spd > 1:  # direction the wind blows FROM: u = -spd sin(dir), v = -spd cos(dir)
            assert abs(-spd * math.sin(math.radians(d)) - u) < 0.05 * spd + 0.02
            assert abs(-spd * math.cos(math.radians(d)) - v) < 0.05 * spd + 0.02
    assert e["windgust"] >= e["windspd_10m"] - 0.011
    assert abs(e["solar_radiation_dir"] + e["solar_radiation_diff"] - e["total_solar_radiation"]) <= 0.15
    assert 0 <= e["total_cloud_cover"] <= 100 and 0 <= e["precipitation_proba"] <= 100
    assert e["visibility"] >= 0 and 0.9 < e["air_density"] < 1.5


def test_radiation_follows_the_sun(published):
    _, root, _ = published
    data = load(root, "eu-short", "1H", "paris")["data"]
    night = [e for e in data if datetime.fromisoformat(e["datetime"]).hour in (20, 21, 22, 23, 0, 1, 2, 3, 4)]
    day = [e for e in data if datetime.fromisoformat(e["datetime"]).hour in (10, 11, 12)]
    assert night and all(e["total_solar_radiation"] == 0 for e in night)
    assert max(e["total_solar_radiation"] for e in day) > 50


def test_short_and_medium_agree_and_wind_rises_with_height(published):
    _, root, _ = published
    short = load(root, "eu-short", "1H", "hornsea-1")["data"]
    medium = load(root, "eu-medium", "1H", "hornsea-1")["data"][:72]
    assert [e["temp_2m"] for e in short] == [e["temp_2m"] for e in medium]
    mean = {h: np.mean([e[f"windspd_{h}m"] for e in short]) for h in (10, 100, 200)}
    assert mean[10] < mean[100] < mean[200]


def test_resolutions_agree(published):
    """Hourly totals equal the sum of the quarter hours; states coincide at the full hour."""
    _, root, _ = published
    hourly = load(root, "eu-short", "1H", "berlin")["data"]
    quarter = load(root, "eu-short", "15min", "berlin")["data"]
    for i, e in enumerate(hourly[:48]):
        parts = quarter[4 * i:4 * i + 4]
        assert e["temp_2m"] == parts[0]["temp_2m"]
        assert abs(e["precipitation"] - np.mean([p["precipitation"] for p in parts])) <= 0.02
        assert abs(e["total_solar_radiation"] - np.mean([p["total_solar_radiation"] for p in parts])) <= 0.2


def test_zarr_archive(published):
    _, root, _ = published
    ds = xr.open_zarr(root / "zarr" / "eu-short.zarr")
    assert set(ds.dims) >= {"init_time", "point", "lead_time"} and ds.sizes["init_time"] == 1
    assert ds.attrs["synthetic"] == 1 and "SYNTHETIC" in ds.attrs["comment"]
    assert ds.temp_2m.attrs["units"] == "degC" and ds.sizes["lead_time"] == 288
    quarter = load(root, "eu-short", "15min", "paris")["data"]
    np.testing.assert_allclose(ds.temp_2m.sel(point="paris").isel(init_time=0).values,
                               [e["temp_2m"] for e in quarter], atol=0.006)


def test_rerun_of_the_same_model_runs_changes_nothing(published):
    from pointcast.flows.cycle import cycle

    cfg, root, run_id = published
    files = sorted((run_dir(root) / "json").rglob("*.json"))
    before = {p: p.stat().st_mtime_ns for p in files[:50]}
    assert cycle(str(cfg)) == run_id
    assert {p: p.stat().st_mtime_ns for p in files[:50]} == before
    assert xr.open_zarr(root / "zarr" / "eu-short.zarr").sizes["init_time"] == 1
    assert len([d for d in (root / "runs").iterdir() if not d.name.startswith((".", "failed"))]) == 1


def test_points_built_in_slices_publish_the_same_run(published, tmp_path):
    """[dask] points_per_slice bounds the memory and build_processes spreads the slices over
    forked processes; the published files and archives depend on neither: the 42 European
    points in slices of 16, 16 and 10, built one after the other in the cycle's process,
    against the shipped default (``published``: a slice and a forked process a core). The
    European list's 72-hour products only (eu-short and eu-wind share one blend with
    eu-medium, and eu-wind hosts the wind farms, rows after its points): what they publish
    does not depend on eu-medium's 14 days being built beside them either (each model's
    steps are fetched and decoded to the horizon only, and two past it: `need`). Japan's and
    the global list's slices are cut by the same code."""
    from pointcast.flows.cycle import cycle

    _, root, _ = published
    cfg = write_config(tmp_path, ensembles=True)  # the members' statistics too, slice by slice
    text = re.sub(r"(?ms)^\[products\.(japan|global|eu-medium)\]\n.*?(?=^\[|\Z)", "", cfg.read_text())
    cfg.write_text(text.replace("workers = 2\n", "workers = 2\npoints_per_slice = 16\n"
                                "build_processes = 1\n", 1)
                   .replace('root = "output"', f'root = "output"\ncache = "{root / "cache"}"', 1))
    europe = ("eu-short", "eu-wind")
    assert load_config(cfg).dask.points_per_slice == 16 and sorted(load_config(cfg).products) == list(europe)
    sliced = tmp_path / "output"
    cycle(str(cfg))
    stamp = re.compile(rb'"(updated_time|next_update)":"[^"]*"')

    def objects(out: Path) -> list[Path]:  # the European products' and their sites' power
        return sorted(rel for rel in (p.relative_to(run_dir(out)) for p in (run_dir(out) / "json").rglob("*.json"))
                      if rel.parts[1] in europe or rel.parts[1] == "power" and rel.parts[2] != "index.json")

    ours = objects(sliced)
    assert set(ours) <= set(objects(root)) and len(ours) > 300
    assert {rel for rel in objects(root) if rel.parts[1] in europe} == {rel for rel in ours if rel.parts[1] in europe}
    assert any(rel.parts[1] == "power" for rel in ours)
    for rel in ours:
        a, b = ((run_dir(r) / rel).read_bytes() for r in (sliced, root))
        assert stamp.sub(b"", a) == stamp.sub(b"", b), rel
    for product in europe:  # the cycle's models, which the archives name, are fewer here
        a, b = (xr.open_zarr(r / "zarr" / f"{product}.zarr").load() for r in (sliced, root))
        ours_models, their_models = (json.loads(ds.attrs.pop("models")) for ds in (a, b))
        assert all(their_models[m]["init"] == v["init"] for m, v in ours_models.items())
        xr.testing.assert_identical(a, b)
    manifest = json.loads((run_dir(sliced) / "manifest.json").read_text())
    theirs = json.loads((run_dir(root) / "manifest.json").read_text())
    assert all(manifest["products"][pid] == theirs["products"][pid] for pid in europe)  # the seams among them


def _variant(cfg: Path, name: str, old: str, new: str) -> Path:
    text = cfg.read_text()
    assert old in text
    path = cfg.parent / name
    path.write_text(text.replace(old, new))
    return path


def _only_product(cfg: Path, name: str, section: str) -> Path:
    """The test configuration with its products replaced by one product `section`."""
    text = cfg.read_text()
    path = cfg.parent / name
    path.write_text(text[:text.index("[products.")] + section)
    return path


def test_cycle_failing_validation_is_kept_aside_and_not_served(published):
    """ICON-D2 alone cannot cover Lisbon: the run fails validation, goes to runs/failed/."""
    from pointcast.flows.cycle import cycle

    cfg, root, run_id = published
    bad = _only_product(cfg, "d2-only.toml", '[products.eu-short]\npoints = "points/europe.csv"\n'
                        'models = ["icon-d2"]\nfreqs = ["1H"]\nhorizon_hours = 48\n')
    state = cycle(str(bad), return_state=True)
    assert state.is_failed()
    assert (root / "current").readlink().name == run_id
    failed = list((root / "runs" / "failed").iterdir())
    assert len(failed) == 1
    report = json.loads((failed[0] / "validation.json").read_text())
    assert report["ok"] is False and any("NaN" in e for e in report["errors"])


def test_a_horizon_no_model_reaches_costs_that_product_only(tmp_path, prefect_harness):
    """IFS's source holds only its 06 UTC run, which stops at 144 h: the configuration passes
    (`pointcast check` counts IFS's 00/12 UTC runs, which reach 360 h), but no run found reaches
    the 342 h of the products IFS ends, so IFS, which ends every blend, is dropped; eu-short and
    eu-wind are built from the ICON models (they reach 72 h) and global from GFS; eu-medium and
    japan, which nothing else reaches, are absent (no run was served before in this root:
    tests/flows/test_degraded.py has them carried). The cycle ends Degraded."""
    from pointcast.flows.cycle import cycle

    cfg = write_config(tmp_path)
    text = cfg.read_text()
    sample = text[text.index("[sources.sample]"):text.index("[models.")]
    bad = _variant(cfg, "short-ifs.toml", '[models.ifs]\nsource = "sample"', '[models.ifs]\nsource = "ifs-06"')
    bad.write_text(bad.read_text() + "\n" + sample.replace("[sources.sample]", "[sources.ifs-06]")
                   .replace('init = "2026-11-20T00:00Z"', 'init = "2026-11-20T06:00Z"'))
    state = cycle(str(bad), return_state=True)
    assert state.is_completed() and state.name == "Degraded", state
    root = tmp_path / "output"
    m = json.loads((root / "runs" / (root / "current").readlink().name / "manifest.json").read_text())
    assert "no run reaching the 342 h horizon" in m["dropped"]["ifs"]
    assert sorted(m["absent"]) == ["eu-medium", "japan"] and "needs ifs" in m["absent"]["eu-medium"]
    assert sorted(m["products"]) == ["eu-short", "eu-wind", "global"]
    assert m["products"]["eu-short"]["models"] == ["icon-d2", "icon-eu"]
    assert m["products"]["global"]["models"] == ["gfs"]


@contextmanager
def serving(root: Path):
    """The real server (``pointcast.server.Server``: uvloop, httptools) on a free loopback port;
    yields its base URL."""
    from pointcast.server import Server, create_app

    server = Server(create_app(root), "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.started.wait(30), "server did not start"
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()
        thread.join(timeout=10)


def test_served_over_http(published):
    _, root, _ = published
    with serving(root) as base:
        r = httpx.get(f"{base}/V1/forecast/short-range/common",
                      params={"latlon": "48.8566,2.3522;52.52,13.405", "freq": "1H"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        body = r.json()
        assert list(body) == ["48.8566,2.3522", "52.52,13.405"]
        stored = load(root, "eu-short", "1H", "paris")
        assert body["48.8566,2.3522"]["data"] == stored["data"]
        assert body["52.52,13.405"]["latitude"] == 52.52
        r = httpx.get(f"{base}/V1/forecast/medium-range/common", params={"latlon": "48.85,2.35", "freq": "15min"})
        assert r.status_code == 200 and len(r.json()["48.85,2.35"]["data"]) == 1344
        r = httpx.get(f"{base}/V1/forecast/short-range/common", params={"latlon": "40.0,-30.0", "freq": "1H"})
        assert r.status_code == 403 and r.json()["code"] == "403_001"
        r = httpx.get(f"{base}/V1/forecast/short-range/common", params={"latlon": "47.0,8.0", "freq": "1H"})
        assert r.status_code == 404 and r.json()["code"] == "404_002"
        wind = "/V1/forecast/short-range/windpack"
        r = httpx.get(f"{base}{wind}", params={"latlon": "53.885,1.791", "freq": "1H", "hubheight": "100m"})
        assert r.status_code == 200
        obj = r.json()["53.885,1.791"]
        assert obj["hub_height"] == "100m" and obj["latitude"] == 53.885
        ladder = ladder_answers(json.loads((run_dir(root) / "json" / "eu-wind" / "1H" / "hornsea-1.json").read_bytes()))
        stored = {h: ladder[h]["data"] for h in (80, 100)}
        assert obj["data"] == stored[100]
        r = httpx.get(f"{base}{wind}", params={"latlon": "53.885,1.791", "freq": "1H", "hubheight": "113m"})
        static = (run_dir(root) / "json" / "eu-wind" / "1H" / "hornsea-1" / "113m.json").read_bytes()
        assert r.content == b'{"53.885,1.791":' + static + b"}"  # the request's coordinates are the point's
        r = httpx.get(f"{base}{wind}", params={"latlon": "53.885,1.791", "freq": "1H", "hubheight": "90.0m"})
        between = r.json()["53.885,1.791"]
        assert r.status_code == 200 and between["hub_height"] == "90.0m"
        for e, lo, hi in zip(between["data"], stored[80], stored[100], strict=True):
            w = math.log(90 / 80) / math.log(100 / 80)
            assert abs(e["u_windspd"] - (lo["u_windspd"] + w * (hi["u_windspd"] - lo["u_windspd"]))) <= 0.011
            assert min(lo["windspd"], hi["windspd"]) - 0.3 <= e["windspd"] <= max(lo["windspd"], hi["windspd"]) + 0.3
        for bad, code in (("100", "400_002"), ("5m", "400_003"), ("", "400_001")):
            r = httpx.get(f"{base}{wind}", params={"latlon": "53.885,1.791", "freq": "1H", "hubheight": bad})
            assert r.status_code == 400 and r.json()["code"] == code
        catalog = httpx.get(f"{base}/catalog").json()
        assert catalog and "paris" in json.dumps(catalog)


WIND_UNITS = {"datetime": "UTC", "windspd": "m/s", "windir": "degree", "u_windspd": "m/s", "v_windspd": "m/s"}


@pytest.mark.parametrize("freq", ["1H", "30min", "15min"])
def test_windpack_heights_are_precomputed_and_consistent(published, freq):
    from pointcast.products.eu_wind import LADDER

    cfg, root, _ = published
    index = json.loads((run_dir(root) / "json" / "eu-wind" / "index.json").read_text())
    hornsea = next(p for p in index["points"] if p["id"] == "hornsea-1")
    assert set(LADDER) <= set(hornsea["heights"]) and set(hornsea["hub_heights"]) <= set(hornsea["heights"])
    assert hornsea["hub_heights"], "the offshore farm has a configured hub height"
    short = load(root, "eu-short", freq, "hornsea-1")["data"]
    base = run_dir(root) / "json" / "eu-wind" / freq
    ladder = json.loads((base / "hornsea-1.json").read_bytes())
    assert list(ladder) == ["latitude", "longitude", "basetime", "updated_time", "freq", "unit", "heights", "datetime",
                            "windspd", "windir", "u_windspd", "v_windspd"]
    assert ladder["heights"] == hornsea["heights"] and ladder["unit"] == WIND_UNITS
    answers = ladder_answers(ladder)
    # static files at the configured hub heights only, each the ladder's answer at its height
    for p in index["points"]:
        static = sorted(f.name for f in (base / p["id"]).glob("*.json")) if (base / p["id"]).is_dir() else []
        assert static == sorted(f"{h:g}m.json" for h in p["hub_heights"]), p["id"]
    for h in hornsea["hub_heights"]:
        assert (base / "hornsea-1" / f"{h:g}m.json").read_bytes() == json.dumps(
            answers[h], ensure_ascii=False, separators=(",", ":")).encode()
    means = []
    for h in hornsea["heights"]:
        obj = answers[h]
        assert list(obj) == ["latitude", "longitude", "basetime", "updated_time", "freq", "hub_height", "unit", "data"]
        assert obj["hub_height"] == f"{h:g}m" and obj["unit"] == WIND_UNITS and obj["freq"] == freq
        assert len(obj["data"]) == COUNTS[("eu-short", freq)]
        for e, s in zip(obj["data"], short, strict=True):
            assert list(e) == list(WIND_UNITS) and e["datetime"] == s["datetime"]
            assert abs(math.hypot(e["u_windspd"], e["v_windspd"]) - e["windspd"]) <= 0.015
            assert 0 <= e["windir"] < 360
            if e["windspd"] > 1:
                assert abs(-e["windspd"] * math.sin(math.radians(e["windir"])) - e["u_windspd"]) < 0.05 * e["windspd"] + 0.02
            if h == 100:
                assert e["windspd"] == s["windspd_100m"] and e["windir"] == s["windir_100m"]
        means.append(np.mean([e["windspd"] for e in obj["data"]]))
    assert all(b > a for a, b in zip(means, means[1:], strict=False)), means


def test_windpack_archive_has_heights(published):
    _, root, _ = published
    ds = xr.open_zarr(root / "zarr" / "eu-wind.zarr")
    assert ds.windspd.dims == ("init_time", "point", "lead_time", "height")
    assert ds.sizes["lead_time"] == 288 and 10.0 in ds.height.values and 300.0 in ds.height.values
    np.testing.assert_allclose(ds.windspd.values, np.hypot(ds.u_windspd.values, ds.v_windspd.values), atol=1e-4)


SRF_FIELDS = ["date", "wx", "temp", "prec", "arpress", "wndspd", "wnddir", "rhum", "feelidx", "feeltmp"]
MRF_FIELDS = ["date", "wx", "maxtemp", "mintemp", "pop"]
SRF_CODES = {100, 200, 300, 400, 430, 500, 550, 600, 650, 850, 950}


def test_japan_objects_follow_the_spec(published):
    from datetime import timedelta

    _, root, _ = published
    index = json.loads((run_dir(root) / "json" / "japan" / "index.json").read_text())
    assert len(index["points"]) >= 20
    basetime = datetime.fromisoformat(index["basetime"])
    for point in index["points"]:
        obj = json.loads((run_dir(root) / "json" / "japan" / f"{point['id']}.json").read_text())
        assert list(obj) == ["lat", "lon", "srf", "mrf"]
        assert len(obj["srf"]) == 72 and len(obj["mrf"]) == 10
        for i, e in enumerate(obj["srf"]):
            assert list(e) == SRF_FIELDS and e["date"].endswith("+09:00")
            assert datetime.fromisoformat(e["date"]) == basetime + timedelta(hours=i)
            assert e["wx"] in SRF_CODES and isinstance(e["wnddir"], int) and 0 <= e["wnddir"] <= 16
            assert isinstance(e["rhum"], int) and 0 <= e["rhum"] <= 100 and e["prec"] >= 0
            if min(abs(e["feeltmp"] - b) for b in codes.FEELIDX_BOUNDS_C) > 0.051:  # not on a rounded boundary
                assert e["feelidx"] == int(codes.feelidx(e["feeltmp"]))
            assert 900 < e["arpress"] < 1080 and e["wndspd"] >= 0
            if e["wndspd"] < 0.25:
                assert e["wnddir"] == 0
        days = [datetime.fromisoformat(e["date"]) for e in obj["mrf"]]
        assert all(d.hour == 0 and d.utcoffset() == timedelta(hours=9) for d in days)
        assert [(b - a).days for a, b in zip(days, days[1:], strict=False)] == [1] * 9
        assert days[0].date() == basetime.astimezone(days[0].tzinfo).date()
        for e in obj["mrf"]:
            assert list(e) == MRF_FIELDS and e["maxtemp"] >= e["mintemp"]
            assert isinstance(e["pop"], int) and 0 <= e["pop"] <= 100
            assert 100 <= e["wx"] < 500
        day1 = [e["temp"] for e in obj["srf"] if datetime.fromisoformat(e["date"]).date() == days[1].date()]
        assert max(day1) == obj["mrf"][1]["maxtemp"] and min(day1) == obj["mrf"][1]["mintemp"]


def test_japan_archive_and_http(published):
    _, root, _ = published
    ds = xr.open_zarr(root / "zarr" / "japan.zarr")
    assert ds.sizes["lead_time"] == 240 and "feeltmp" in ds and ds.attrs["synthetic"] == 1
    with serving(root) as base:
        r = httpx.get(f"{base}/api/v1/ss1wx", params={"lat": "35.6812", "lon": "139.7671"})
        assert r.status_code == 200
        body = r.json()
        assert list(body) == ["requestId", "wxdata"] and len(body["wxdata"]) == 1
        stored = json.loads((run_dir(root) / "json" / "japan" / "tokyo.json").read_text())
        assert body["wxdata"][0]["srf"] == stored["srf"] and body["wxdata"][0]["lat"] == 35.6812
        r = httpx.get(f"{base}/api/v1/ss1wx", params={"lat": "37.5665", "lon": "126.978"})
        assert r.status_code == 403 and r.json()["code"] == "403_001"


def test_schedule_deployment_runs_every_3_hours(published):
    from pointcast.config import load_config
    from pointcast.flows.cycle import deployment

    cfg, _, _ = published
    dep = deployment(load_config(cfg))
    assert dep.name == "pointcast-every-3h" and dep.parameters == {"config_path": str(cfg)}
    assert [s.schedule.cron for s in dep.schedules] == ["0 0-23/3 * * *"]
    offset = load_config(_variant(cfg, "offset.toml", "offset_minutes = 0", "offset_minutes = 100"))
    assert [s.schedule.cron for s in deployment(offset).schedules] == ["40 1-23/3 * * *"]


def test_the_last_model_must_reach_the_horizon_from_the_products_basetime(prefect_harness):
    """ICON-D2's 03 UTC run is the basetime; IFS's run of the day before at 00 UTC (a
    fallback) reaches 360 h from its own start, 333 h from the basetime: short of eu-medium's
    336 h. The cycle looks again, from the basetime, and takes the 00 UTC run of the day,
    published by 09 UTC (the real discover task on the sample source, whose runs count as
    published IFS's 8 hours after their start)."""
    import logging
    from dataclasses import replace
    from datetime import timedelta

    from prefect.states import Completed
    from prefect.utilities.annotations import quote

    from pointcast import steps
    from pointcast.flows.cycle import discover
    from pointcast.sources import IFS, run_steps
    from pointcast.sources.base import RunRef

    cfg = load_config(Path(__file__).resolve().parents[2] / "config" / "pointcast.toml")
    cfg = replace(cfg, products={"eu-medium": replace(cfg.products["eu-medium"], models=("icon-d2", "ifs"),
                                                      ensembles=())})
    basetime, old = datetime(2026, 1, 15, 3, tzinfo=UTC), datetime(2026, 1, 14, 0, tzinfo=UTC)
    first = {"icon-d2": RunRef("icon-d2", basetime, (timedelta(0),), "sample", True, True),
             "ifs": RunRef("ifs", old, run_steps(IFS, old), "sample", True, True)}
    asked = []

    def again(now):
        def look(m, needed, until, whole):
            asked.append((m, until, whole))
            return discover(quote(cfg), m, now, needed, until, whole, return_state=True)
        return look

    log = logging.getLogger("test")
    runs = steps.discover_runs(cfg, lambda m, needed: Completed(data=first[m]), again(basetime + timedelta(hours=6)),
                               {}, log)
    assert asked == [("ifs", basetime + timedelta(hours=336), False)]
    assert runs["ifs"].init == datetime(2026, 1, 15, 0, tzinfo=UTC) and runs["icon-d2"] == first["icon-d2"]
    # A run that reaches is not looked for again.
    first["ifs"], asked[:] = runs["ifs"], []
    assert steps.discover_runs(cfg, lambda m, needed: Completed(data=first[m]), again(basetime), {}, log) == first
    assert asked == []


GOLDEN = Path(__file__).parent.parent / "data" / "golden" / "sample-cycle.sha256"
_STAMPS = re.compile(rb'"(updated_time|next_update)":"[^"]*"')


def published_digests(root: Path) -> dict[str, str]:
    """sha256 of every published JSON object of the run (its stamps of the clock blanked),
    by path under json/; not the viewer's copies of the run's own files."""
    import hashlib

    base = run_dir(root) / "json"
    return {rel: hashlib.sha256(_STAMPS.sub(b"", p.read_bytes())).hexdigest()
            for p in sorted(base.rglob("*.json"))
            if (rel := p.relative_to(base).as_posix()) not in viewer.RUN_FILES}


def test_published_json_is_byte_identical_to_the_golden_run(published):
    """The fixed sample cycle (conftest.write_config) publishes the very bytes it published
    when tests/data/golden/sample-cycle.sha256 was written: a refactoring changes no number.
    A deliberate change of the output rewrites the file (POINTCAST_WRITE_GOLDEN=1), and the
    commit says why."""
    import os

    _, root, _ = published
    digests = published_digests(root)
    if os.environ.get("POINTCAST_WRITE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text("".join(f"{d}  {rel}\n" for rel, d in digests.items()))
    golden = dict(reversed(line.split("  ", 1)) for line in GOLDEN.read_text().splitlines())
    assert digests.keys() == golden.keys()
    changed = [rel for rel in digests if digests[rel] != golden[rel]]
    assert not changed, f"{len(changed)} of {len(digests)} objects differ, e.g. {changed[:5]}"
