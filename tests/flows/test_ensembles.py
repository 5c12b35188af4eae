"""Probabilities and quantiles from the sample's ensembles, end to end, against a truth made
apart from the pipeline.

The sample's member k is its ensemble's control with a perturbation the tests know
(`pointcast.sample.ensemble.perturbation`): precipitation times a factor, 2 m temperature plus
an offset, the wind times a factor, the same at every point and step. Every stage between the
GRIB messages and the published numbers is linear in the values (bilinear weights,
differences of accumulations, spreading over hours, a constant added or a factor through the
monotone cubic and the vertical profile), so at a point each member's hourly precipitation is
its factor times the control's, read here straight from the control's GRIB messages with
ecCodes and interpolated bilinearly by scipy; and the quantiles of temperature and wind are
the control's value shifted or scaled by the quantiles of the offsets and factors.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import eccodes
import httpx
import numpy as np
import pytest
import xarray as xr
from scipy.interpolate import RegularGridInterpolator

from conftest import MEMBERS
from pointcast import ensemble, plan
from pointcast.config import load_config
from pointcast.sample.ensemble import members, perturbation
from pointcast.sources import MODELS

QUANTILES = np.array(ensemble.QUANTILES)


def _run(published) -> tuple[Path, dict]:
    cfg_path, root, run_id = published
    run = root / "runs" / run_id
    return run, json.loads((run / "manifest.json").read_text())


def factors(model: str, what: str) -> np.ndarray:
    """The members' perturbations in the published run: its sample source's first `MEMBERS`."""
    return np.array([getattr(perturbation(model, k, MEMBERS), what) for k in members(MODELS[model], MEMBERS)])


def control_hourly_precipitation(cache: Path, model: str, lat: float, lon: float, init: datetime,
                                 hours: int) -> np.ndarray:
    """The control member's precipitation (mm) in each hour from ``init`` at (lat, lon): its
    tp messages read with ecCodes, each window's amount differenced from the window before
    it with the same start, interpolated bilinearly and spread evenly over its hours."""
    pattern = "gefs.*/**/gec00.*" if model == "gefs" else "**/*-oper-fc.grib2"
    windows = {}
    for path in (cache / "sample" / model).glob(f"*/{pattern}"):
        if path.suffix == ".idx":
            continue
        with open(path, "rb") as f:
            while (h := eccodes.codes_grib_new_from_file(f)) is not None:
                if eccodes.codes_get(h, "shortName") == "tp" and eccodes.codes_get(h, "endStep") > 0:
                    nj, ni = eccodes.codes_get(h, "Nj"), eccodes.codes_get(h, "Ni")
                    lats = eccodes.codes_get_array(h, "latitudes").reshape(nj, ni)[:, 0]
                    lons = eccodes.codes_get_array(h, "longitudes").reshape(nj, ni)[0]
                    lons = (lons + 180.0) % 360.0 - 180.0
                    order = np.argsort(lons)
                    values = eccodes.codes_get_values(h).reshape(nj, ni)[::-1][:, order]
                    scale = 1000.0 if eccodes.codes_get(h, "units") == "m" else 1.0
                    at = RegularGridInterpolator((lats[::-1], lons[order]), values * scale)([[lat, lon]])[0]
                    windows[(eccodes.codes_get(h, "startStep"), eccodes.codes_get(h, "endStep"))] = at
                eccodes.codes_release(h)
    out = np.full(hours, np.nan)
    ends = sorted({end for _, end in windows})
    for k, end in enumerate(ends):
        start = next(s for s, e in windows if e == end)
        before = ends[k - 1] if k else 0
        amount = windows[(start, end)] - (windows[(start, before)] if (start, before) in windows else 0.0)
        for hour in range(before, min(end, hours)):
            out[hour] = amount / (end - before)
    return out


def share(amounts: np.ndarray, threshold: float) -> np.ndarray:
    """Per cent of members (last axis) at or above ``threshold``."""
    return 100.0 * (amounts >= threshold - 1e-4).mean(axis=-1)


def test_the_manifest_lists_each_ensemble_with_its_members_and_the_sources_of_its_statistics(published):
    _, manifest = _run(published)
    # the members the run held: the sample's first MEMBERS (the truth test's replica has all)
    assert {m: manifest["models"][m]["members"] for m in ("ens", "icon-eu-eps", "gefs")} == {
        "ens": MEMBERS, "icon-eu-eps": MEMBERS, "gefs": MEMBERS}
    assert all("members" not in manifest["models"][m] for m in ("ifs", "gfs", "icon-eu", "icon-d2", "msm"))
    products = manifest["products"]
    sources = {pid: [seg["source"] for seg in p["probability_from"]] for pid, p in products.items()}
    assert sources["global"] == ["gefs", "ens"]
    assert sources["eu-medium"] == ["icon-eu-eps", "ens"]
    assert sources["eu-short"] == sources["eu-wind"] == ["icon-eu-eps"]
    assert sources["japan"] == ["ens"]
    # The seams: GEFS to its 240 h, ICON-EU-EPS to its 120 h from their runs.
    gefs_end = datetime.fromisoformat(manifest["models"]["gefs"]["init"]) + timedelta(hours=240)
    assert datetime.fromisoformat(products["global"]["probability_from"][1]["from"]) == gefs_end
    eps_end = datetime.fromisoformat(manifest["models"]["icon-eu-eps"]["init"]) + timedelta(hours=120)
    assert datetime.fromisoformat(products["eu-medium"]["probability_from"][1]["from"]) == eps_end
    # The quantiles' sources, by variable: as the probability's, 10 m wind included, but for
    # the windpack's wind column, which ICON-EU-EPS (10 m only) cannot give: ENS's throughout.
    quantiles = {pid: {name: [seg["source"] for seg in segs] for name, segs in p["quantiles_from"].items()}
                 for pid, p in products.items()}
    for pid in ("eu-short", "eu-medium", "eu-wind", "global", "japan"):
        assert quantiles[pid]["temperature_quantiles"] == quantiles[pid]["precipitation_quantiles"] == sources[pid]
    for pid in ("eu-short", "eu-medium", "global", "japan"):
        assert quantiles[pid]["wind_speed_quantiles"] == sources[pid]
    wind = products["eu-wind"]["quantiles_from"]["wind_speed_quantiles"]
    assert [seg["source"] for seg in wind] == ["ens"]
    assert wind[0]["from"] == products["eu-wind"]["probability_from"][0]["from"]
    assert wind[0]["to"] == products["eu-wind"]["probability_from"][-1]["to"]


@pytest.mark.parametrize("pid, model", [("global", "gefs"), ("japan", "ens")])
def test_hourly_probabilities_are_the_exact_share_of_members(published, pid, model):
    """The published hourly probability (global's hourly file, Japan's archive) is the share of
    members with at least 0.1 mm in the hour, within one member's weight."""
    cfg_path, root, run_id = published
    run, manifest = _run(published)
    cfg = load_config(cfg_path)
    pc = cfg.products[pid]
    where = plan.point_set(pc)
    init = datetime.fromisoformat(manifest["models"][model]["init"])
    basetime = datetime.fromisoformat(manifest["products"][pid]["basetime"])
    offset = int((basetime - init) / timedelta(hours=1))
    hours = {"gefs": 240, "ens": 144}[model] - offset  # within the ensemble's own reach
    f = factors(model, "precip")
    archive = xr.open_zarr(root / "zarr" / f"{pid}.zarr")
    checked = wet = 0
    for j, p in enumerate(pc.points[:6]):
        control = control_hourly_precipitation(root / "cache", model, where.lats[j], where.lons[j], init,
                                               offset + hours)[offset:]
        truth = share(control[:, None] * f[None, :], ensemble.HOURLY_THRESHOLD_MM)
        if pid == "global":
            published_pop = np.array(json.loads((run / "json" / "global" / "hourly" / f"{p.id}.json").read_bytes())["pop"])
        else:
            published_pop = archive["pop"].sel(point=p.id).isel(init_time=-1).values
        got = published_pop[:hours].astype(float)
        assert np.all(np.abs(got - truth) <= 100.0 / len(f) + 0.5), (p.id, np.flatnonzero(np.abs(got - truth) > 4))
        checked += hours
        wet += int(((truth > 0) & (truth < 100)).sum())
    assert checked and wet > 10  # the sample rains on some of these hours, on some members


def _day_truth(control: np.ndarray, init: datetime, date: str, zone: ZoneInfo, f: np.ndarray) -> float | None:
    """The share (%) of GEFS members with 1 mm in the local day starting at ``date`` (its
    midnight in ``zone`` to the next): each member's factor times the control's total, an hour
    a midnight cuts counted by its share (the amounts are even within an hour); None past
    GEFS's last step."""
    start = datetime.fromisoformat(date).astimezone(UTC)
    end = (datetime.fromisoformat(date).replace(tzinfo=None) + timedelta(days=1)).replace(tzinfo=zone).astimezone(UTC)
    a, b = ((t - init) / timedelta(hours=1) for t in (start, end))
    if b > len(control):
        return None
    hours = np.arange(len(control))
    inside = np.clip(np.minimum(hours + 1.0, b) - np.maximum(hours, a), 0.0, 1.0)
    return float(share((control * inside).sum() * f, ensemble.DAILY_THRESHOLD_MM))


def test_daily_pop_is_the_share_of_members_whose_day_reaches_1_mm(published):
    """global's mrf pop: the share of GEFS members with at least 1 mm in the local day, from
    each member's day total (not the highest hourly probability), in the point's own zone (the
    built file) and, served over HTTP, in zones off the hour whose midnights cut hours
    (Asia/Kathmandu +05:45, America/St_Johns -03:30)."""
    from test_cycle import serving

    cfg_path, root, _ = published
    run, manifest = _run(published)
    pc = load_config(cfg_path).products["global"]
    where = plan.point_set(pc)
    init = datetime.fromisoformat(manifest["models"]["gefs"]["init"])
    f = factors("gefs", "precip")
    tol = 100.0 / len(f) + 0.5
    differs = compared = 0
    with serving(root) as base:
        for j, p in enumerate(pc.points[:6]):
            control = control_hourly_precipitation(root / "cache", "gefs", where.lats[j], where.lons[j], init, 240)
            element = json.loads((run / "json" / "global" / f"{p.id}.json").read_bytes())
            hourly = json.loads((run / "json" / "global" / "hourly" / f"{p.id}.json").read_bytes())
            own = ZoneInfo(hourly["time_zone"])
            for day in element["mrf"][1:]:
                truth = _day_truth(control, init, day["date"], own, f)
                if truth is None:
                    break
                assert abs(day["pop"] - truth) <= tol, (p.id, day, truth)
                first = int((datetime.fromisoformat(day["date"]).astimezone(UTC) - init) / timedelta(hours=1))
                differs += day["pop"] != max(hourly["pop"][first:first + 24])
            for zone in ("Asia/Kathmandu", "America/St_Johns"):
                r = httpx.get(f"{base}/api/v2/global/wx", params={"latlon": f"{p.lat}/{p.lon}", "tz": zone})
                assert r.status_code == 200, r.text
                for day in r.json()["wxdata"][0]["mrf"][1:]:
                    truth = _day_truth(control, init, day["date"], ZoneInfo(zone), f)
                    if truth is None:
                        break
                    assert abs(day["pop"] - truth) <= tol, (p.id, zone, day, truth)
                    compared += 1
    assert differs  # a day's probability is not its wettest hour's
    assert compared >= 6 * 2 * 5


def _per_point(got: np.ndarray, expected: dict[str, np.ndarray], atol: float) -> set[str]:
    """Which ensemble's ``expected`` quantiles (same shape as ``got``: point, lead[, height],
    quantile) each point's match, within ``atol`` (the 16-bit packing of each member's
    message): a point outside the first ensemble's sample grid (the sample's crop) takes
    the next one's. Fails where a point matches none."""
    matched = set()
    for j in range(got.shape[0]):
        ok = [e for e, want in expected.items() if np.allclose(got[j], want[j], rtol=1e-3, atol=atol)]
        assert ok, (j, {e: float(np.abs(got[j] - want[j]).max()) for e, want in expected.items()})
        matched.add(ok[0])
    return matched


def test_quantiles_are_the_members_quantiles(published):
    """The archive's quantiles: the control's value shifted by the quantiles of the members'
    temperature offsets, and scaled by those of their wind and precipitation factors (numpy's
    linear quantile, Hyndman and Fan's type 7), those of the first of the product's ensembles
    that covers the point."""
    cfg_path, root, _ = published
    cfg = load_config(cfg_path)
    kinds = {"global": {"temperature", "wind", "precipitation"}, "eu-short": {"temperature", "wind", "precipitation"},
             "eu-wind": {"temperature", "wind", "precipitation"}, "japan": {"temperature", "wind", "precipitation"}}
    for pid, hours in (("global", 230), ("eu-short", 70), ("eu-wind", 70), ("japan", 140)):
        ensembles = cfg.products[pid].ensembles
        ds = xr.open_zarr(root / "zarr" / f"{pid}.zarr").isel(init_time=-1)
        assert {n.removesuffix("_quantiles").removesuffix("_speed") for n in ds.data_vars
                if n.endswith("_quantiles")} == kinds[pid]
        lead = ds.lead_time.values < np.timedelta64(hours, "h")

        def expect(got: np.ndarray, what: str, centre: int, ensembles=ensembles) -> dict[str, np.ndarray]:
            """Each ensemble's quantiles made from ``got``'s quantile ``centre``."""
            out = {}
            for e in ensembles:
                q = np.quantile(factors(e, what), QUANTILES)
                out[e] = (got[..., centre:centre + 1] + (q - q[centre]) if what == "t2m_k"
                          else got[..., centre:centre + 1] * (q / q[centre]))
            return out

        used = set()
        if "temperature" in kinds[pid]:
            t = ds["temperature_quantiles"].values[:, lead]
            used |= _per_point(t, expect(t, "t2m_k", 2), atol=5e-3)
            assert ds["temperature_quantiles"].attrs["missing_where"]
        w = ds["wind_speed_quantiles"].values[:, lead]
        wind = _per_point(w, expect(w, "wind", 2), atol=5e-3)
        used |= wind
        if pid == "eu-wind":  # every ladder height, each member through the same profile
            assert w.ndim == 4 and w.shape[2] == ds.sizes["height"] > 10
        if "precipitation" in kinds[pid]:
            r = ds["precipitation_quantiles"].values[:, lead]
            used |= _per_point(r, expect(r, "precip", 4), atol=3e-3)
            assert (r[..., 4] > 0.1).sum() > 10
        if pid == "eu-wind":  # ICON-EU-EPS has the wind at 10 m only: ENS gives the whole column
            assert wind == {"ens"}
        else:  # most points inside the first ensemble's grid
            assert ensembles[0] in used
        np.testing.assert_allclose(ds["quantile"].values, QUANTILES)


def test_the_european_probability_is_a_share_of_members_and_the_neighbourhood_one_is_kept(published):
    _, root, _ = published
    ds = xr.open_zarr(root / "zarr" / "eu-short.zarr").isel(init_time=-1)
    proba = ds["precipitation_proba"].values
    shares = 100.0 * np.arange(MEMBERS + 1) / MEMBERS  # a share of ICON-EU-EPS's members
    assert np.all(np.min(np.abs(proba[..., None] - shares), axis=-1) <= 0.5)
    reference = ds["precipitation_proba_neighbourhood"].values
    assert np.isfinite(reference).all() and not np.array_equal(reference, proba)


def test_discovery_asks_the_last_ensemble_of_a_product_for_its_horizon():
    """An ensemble ending a product's ensembles must reach its horizon, as the last model of
    its blend must: ENS's 06/18 UTC runs stop at 144 h, so discovery takes the 00/12 UTC run
    for the global (342 h) and Japan (240 h) products rather than leave their last days to
    the neighbourhood probability; an ensemble followed by another needs no horizon."""
    cfg = load_config(Path(__file__).resolve().parents[2] / "config" / "pointcast.toml")
    needed = plan.needed(cfg)
    assert needed["ens"] == timedelta(hours=max(pc.horizon_hours for pc in cfg.products.values()))
    assert needed["gefs"] == needed["icon-eu-eps"] == timedelta(0)
