"""Power end to end, from the suite's published sample run (conftest ``published``): every
configured site's files, archive and manifest entry; a wind farm's power recomputed from the
archived hub wind and density with windpowerlib and the turbine's CSV read here; a solar
plant dark at night; the power operation over real HTTP, and its errors."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from pointcast import turbines
from pointcast.config import WindSite, load_config
from pointcast.contract import POWER_DATA
from support.served import live_server


def _read(path: Path) -> dict:
    gz = path.with_name(path.name + ".gz")
    return json.loads(gzip.decompress(gz.read_bytes()) if gz.exists() else path.read_bytes())


@pytest.fixture(scope="module")
def run(published):
    config, root, run_id = published
    cfg = load_config(config)
    tree = root / "runs" / run_id
    return cfg, root, tree


def _sites(cfg):
    return {s.id: (pid, pc, s) for pid, pc in cfg.products.items() for s in pc.sites}


def test_every_site_has_power_files_archive_and_manifest(run):
    cfg, root, tree = run
    sites = _sites(cfg)
    assert len(sites) >= 10 and {type(s).__name__ for _, _, s in sites.values()} == {"WindSite", "PVSite"}
    index = _read(tree / "json" / "power" / "index.json")
    assert {p["id"] for p in index["points"]} == set(sites)
    for site_id, (pid, pc, site) in sites.items():
        for freq in pc.freqs:
            obj = _read(tree / "json" / "power" / freq / f"{site_id}.json")
            assert obj["site"] == site_id and obj["product"] == pid and obj["freq"] == freq
            assert [list(e) for e in obj["data"][:1]] == [list(POWER_DATA.names)]
            power = np.array([e["power"] for e in obj["data"]], dtype=float)
            assert len(power) == pc.horizon_hours * 60 // {"1H": 60, "30min": 30, "15min": 15}[freq]
            assert np.isfinite(power).all() and power.min() >= 0 and power.max() <= site.capacity_kw + 0.1
            if isinstance(site, WindSite) and power.max() == 0:  # a calm: the hub wind never reached the cut-in
                with xr.open_zarr(root / "zarr" / "power.zarr") as ds:
                    wind = ds.hub_wind_speed.sel(point=site_id).isel(init_time=-1).values[:pc.horizon_hours * 4]
                assert (wind < site.curve.wind_speed_m_s[0]).all(), f"{site_id}: no power at winds up to {wind.max()}"
            else:
                assert power.max() > 0, f"{site_id} {freq}: no power at all over {pc.horizon_hours} h"
            cf = np.array([e["capacity_factor"] for e in obj["data"]])
            np.testing.assert_allclose(cf, power / site.capacity_kw, atol=6e-4)
    manifest = json.loads((tree / "manifest.json").read_text())
    assert set(manifest["power"]) == set(sites)
    assert manifest["power"]["hornsea-1"]["product"] == "eu-wind"
    assert manifest["power"]["hornsea-1"]["ensembles"] == ["icon-eu-eps", "ens"]
    with xr.open_zarr(root / "zarr" / "power.zarr") as ds:
        assert set(ds.point.values.tolist()) == set(sites)
        assert ds.power.dims == ("init_time", "point", "lead_time")
        assert ds.power_quantiles.dims == ("init_time", "point", "lead_time", "quantile")
        assert ds.power.attrs["units"] == "kW" and ds.attrs["Conventions"] == "CF-1.10"


def test_wind_farm_power_recomputed_from_the_archived_hub_wind_and_density(run):
    """Hornsea 1 (1218 MW of NREL 5 MW turbines, farm efficiency 0.88): windpowerlib's own
    density-corrected curve on the archive's hub wind and density, the curve read here from
    its CSV, equals the published hourly power, the mean of the four quarter hours."""
    from windpowerlib.power_output import power_curve_density_correction

    cfg, root, tree = run
    _, pc, site = _sites(cfg)["hornsea-1"]
    assert isinstance(site, WindSite)
    with (turbines.LIBRARY_DIR / "nrel-5mw-126.csv").open() as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#"))][1:]
    speeds, kw = np.array([[float(a), float(b)] for a, b in rows]).T
    kw = np.minimum(kw, 5000.0)  # a row above the rated power (5000.92 kW at 11.4 m/s) is clipped to it (turbines/README.md)
    with xr.open_zarr(root / "zarr" / "power.zarr") as ds:
        at = ds.sel(point="hornsea-1").isel(init_time=-1)
        wind, density = at.hub_wind_speed.values.astype(float), at.air_density.values.astype(float)
        archived = at.power.values.astype(float)
    steps = pc.horizon_hours * 4
    wind, density, archived = wind[:steps], density[:steps], archived[:steps]
    assert np.isfinite(wind).all() and (1.0 < density).all() and (density < 1.4).all()
    expected = np.array([power_curve_density_correction(pd.Series([w]), pd.Series(speeds), pd.Series(kw * 1000.0),
                                                        pd.Series([d])).iloc[0] / 1000.0 for w, d in zip(wind, density, strict=True)])
    expected *= 1218_000.0 / 5000.0 * 0.88
    inside = wind < speeds[-1]  # windpowerlib gives nothing past the table (the turbine's last row holds here)
    assert inside.sum() > steps // 2
    np.testing.assert_allclose(archived[inside], expected[inside], rtol=1e-4, atol=1.0)
    hourly = _read(tree / "json" / "power" / "1H" / "hornsea-1.json")["data"]
    published = np.array([e["power"] for e in hourly])
    # published to 0.1 kW; archived as float32 (0.0625 kW apart at a GW)
    np.testing.assert_allclose(published, archived.reshape(-1, 4).mean(axis=1), rtol=0, atol=0.15)
    quantiles = np.array([[e[k] for k in ("p10", "p25", "p50", "p75", "p90")] for e in hourly], dtype=float)
    covered = np.isfinite(quantiles).all(axis=1)
    assert covered.any() and (np.diff(quantiles[covered], axis=1) >= 0).all()


def test_solar_plant_dark_at_night_and_without_quantiles(run):
    cfg, _, tree = run
    obj = _read(tree / "json" / "power" / "1H" / "setouchi-kirei.json")
    hours = pd.to_datetime([e["datetime"] for e in obj["data"]]).hour
    power = np.array([e["power"] for e in obj["data"]])
    local = (hours + 9) % 24  # Japan, UTC+9
    assert (power[(local >= 21) | (local < 4)] == 0).all() and power[(local >= 10) & (local <= 14)].max() > 0
    assert all(e["p50"] is None for e in obj["data"]) and obj["quantiles_from"] == []


def test_power_operation_over_http_and_its_errors(run):
    _, root, tree = run
    with live_server(root) as (client, _, _):
        r = client.get("/V1/forecast/power", params={"site": "hornsea-1", "freq": "1H"})
        assert r.status_code == 200, r.text
        assert r.json() == _read(tree / "json" / "power" / "1H" / "hornsea-1.json")
        assert client.get("/V1/forecast/power", params={"site": "lieberose", "freq": "15min"}).json()["freq"] == "15min"
        for params, status, code in (({"freq": "1H"}, 400, "400_001"),
                                     ({"site": "hornsea-1"}, 400, "400_001"),
                                     ({"site": "../etc", "freq": "1H"}, 400, "400_002"),
                                     ({"site": "hornsea-1", "freq": "2H"}, 400, "400_002"),
                                     ({"site": "nowhere", "freq": "1H"}, 404, "404_002"),
                                     ({"site": "bhadla", "freq": "15min"}, 404, "404_002")):
            r = client.get("/V1/forecast/power", params=params)
            assert (r.status_code, r.json()["code"]) == (status, code), (params, r.text)
        spec = client.get("/openapi.json").json()
        assert spec["paths"]["/V1/forecast/power"]["get"]["x-extension"] is True
        catalog = client.get("/catalog").json()
        power = next(p for p in catalog["products"] if p["product"] == "power")
        assert "/V1/forecast/power" in power["operations"] and len(power["points"]) >= 10


def test_verify_scores_measured_power_against_persistence(run, tmp_path):
    """`pointcast verify` on a tidy power CSV (site, time, kw): MAE, bias and the CRPS of the
    quantiles by lead time against persistence, in the product "power"'s verification file.
    On a copy of the published config and power archive: the shared run stays as it is."""
    import shutil

    from pointcast import verify

    cfg, root, _ = run
    base = tmp_path / "cfg"
    for name in ("points", "sites"):
        shutil.copytree(cfg.path.parent / name, base / name)
    (base / "pointcast.toml").write_text(cfg.path.read_text())
    shutil.copytree(root / "zarr" / "power.zarr", base / "output" / "zarr" / "power.zarr")
    with xr.open_zarr(root / "zarr" / "power.zarr") as ds:
        at = ds.sel(point="hornsea-1").isel(init_time=-1)
        init = ds.init_time.values[-1]
        times = init + at.lead_time.values[:72 * 4:2]  # every half hour over eu-wind's 72 h
        forecast = at.power.values[:72 * 4:2].astype(float)
    measured = forecast + 50_000.0  # the forecast 50 MW short everywhere
    lines = ["site,time,kw"] + [f"hornsea-1,{pd.Timestamp(t).isoformat()}Z,{v:.1f}" for t, v in zip(times, measured, strict=True)]
    (tmp_path / "power.csv").write_text("\n".join(lines) + "\n")
    report = verify.run(load_config(base / "pointcast.toml"), [tmp_path / "power.csv"])
    (result,) = [r for r in report.results if r["product"] == "power"]
    bins = result["variables"]["power"]["bins"]
    assert result["variables"]["power"]["units"] == "kW" and bins[0]["lead_from_h"] == 0
    assert all(b["bias"] == pytest.approx(-50_000.0, abs=0.5) and b["mae"] == pytest.approx(50_000.0, abs=0.5)
               for b in bins)
    assert bins[1]["persistence"]["mae"] is not None
    quantiles = result["variables"]["power_quantiles"]
    assert quantiles["quantiles"] == [0.1, 0.25, 0.5, 0.75, 0.9] and all(b["crps"] >= 0 for b in quantiles["bins"])
    assert json.loads((base / "output" / "verification" / "power.json").read_text())["product"] == "power"
