"""The quantile extension (docs/api.md, "Extension: quantiles"): each product's quantile files are
its archive's quantile variables as published, the validation takes them (nulls where no ensemble
covers), and ``GET /V1/forecast/quantiles`` answers them, a windpack height between two
precomputed ones by the windpack's log-profile rule, and the spec's errors otherwise.

The runs are the products' own builds (`pointcast.products`) of a small blended series holding
what the ensembles give it (`pointcast.ensemble`: ``t2m_q``, ``tp_q``, ``wspd_q``), served by the
real app from a run tree written from their files."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pointcast.config import Point, ProductConfig
from pointcast.contract import QUANTILE_DATA, height_name
from pointcast.ensemble import QUANTILES
from pointcast.products import PRODUCTS
from pointcast.products.base import RunContext
from pointcast.server import create_app
from pointcast.server.openapi import openapi_document
from pointcast.validate import _files, file_facts
from served import call_app, point_current

BASETIME = datetime(2026, 11, 20, 0, tzinfo=UTC)
QUANTILES_PATH = "/V1/forecast/quantiles"
POINTS = {  # product -> its points (inside its coverage)
    "eu-medium": (Point("paris", "Paris", 48.8566, 2.3522), Point("berlin", "Berlin", 52.52, 13.405)),
    "eu-short": (Point("paris", "Paris", 48.8566, 2.3522), Point("berlin", "Berlin", 52.52, 13.405)),
    "eu-wind": (Point("paris", "Paris", 48.8566, 2.3522, hub_heights=(113.0,)),
                Point("berlin", "Berlin", 52.52, 13.405)),
    "global": (Point("london", "London", 51.5074, -0.1278), Point("tokyo", "Tokyo", 35.6812, 139.7671)),
    "japan": (Point("tokyo", "Tokyo", 35.6812, 139.7671), Point("sapporo", "Sapporo", 43.0618, 141.3545)),
}
HORIZONS = {"eu-medium": 30, "eu-short": 30, "eu-wind": 30, "global": 342, "japan": 240}
COVERED_HOURS = 20  # the ensembles cover the first hours only: null beyond
Z0 = 0.03  # roughness length of the wind speed quantiles' neutral log profile (m)


def series(points: int, hours: int, heights: list[float]) -> xr.Dataset:
    """A blended 15-minute series with the ensembles' statistics: the quantiles of 2 m
    temperature, of the precipitation of the hour and of the wind speed, this one on an exact
    neutral log profile u(z) ~ ln(z / z0); NaN after `COVERED_HOURS`."""
    start = np.datetime64(BASETIME.replace(tzinfo=None), "ns")
    times = start + np.arange(hours * 4) * np.timedelta64(15, "m")
    ramp = np.linspace(0.0, 1.0, len(times))[:, None] + np.arange(points) * 0.37
    surface = {"t2m": 285.0 + 2 * ramp, "d2m": 280.0 + ramp, "sp": 101000.0 + 0 * ramp, "msl": 101300.0 + 0 * ramp,
               "tp": 0.2 * ramp, "sf": 0 * ramp, "ssrd": 200.0 * ramp, "fdir": 100.0 * ramp, "gust": 8.0 + ramp,
               "tcc": 50.0 + 10 * ramp, "pop": 20.0 + 0 * ramp, "vis": 20000.0 + 0 * ramp, "cape_mu": 0 * ramp}
    h = np.array(heights)
    profile = {"wind_u": 5.0 + ramp[..., None] + h / 100, "wind_v": 3.0 - ramp[..., None] + 0 * h,
               "air_temperature": 284.0 - h / 100 + 0 * ramp[..., None]}
    q = np.array(QUANTILES)[None, :, None]
    covered = (np.arange(len(times)) < COVERED_HOURS * 4)[:, None, None]
    stats = {"t2m_q": (("time", "quantile", "point"), np.where(covered, 280.0 + 6 * q + 3 * ramp[:, None], np.nan)),
             "tp_q": (("time", "quantile", "point"), np.where(covered, 1.3 * q * ramp[:, None], np.nan)),
             "wspd_q": (("time", "quantile", "height", "point"),
                        np.where(covered[..., None], (0.5 + q[..., None] + ramp[:, None, None] / 3)
                                 * np.log(h / Z0)[None, None, :, None], np.nan))}
    return xr.Dataset({**{k: (("time", "point"), v) for k, v in surface.items()},
                       **{k: (("time", "point", "height"), v) for k, v in profile.items()},
                       **{k: (dims, v.astype(np.float32)) for k, (dims, v) in stats.items()}},
                      coords={"time": times, "point": [f"p{j}" for j in range(points)], "height": h,
                              "quantile": list(QUANTILES)})


def config(pid: str, ensembles: tuple[str, ...] = ("icon-eu-eps", "ens")) -> ProductConfig:
    freqs = ("1H",) if pid in ("global", "japan") else ("1H", "15min")
    return ProductConfig(id=pid, points_file=Path("points.csv"), points=POINTS[pid], models=("sample",),
                         freqs=freqs, horizon_hours=HORIZONS[pid], ensembles=ensembles)


CTX = RunContext(basetime=BASETIME, generated=BASETIME + timedelta(hours=3), next_update=BASETIME + timedelta(hours=6),
                 models={})


@pytest.fixture(scope="module", name="built")
def built_fixture():
    """Every product's build with ensembles: product -> (config, output)."""
    out = {}
    for pid, product in PRODUCTS.items():
        cfg = config(pid)
        out[pid] = cfg, product.build(series(len(cfg.points), HORIZONS[pid] + 24, product.heights(cfg)), cfg, CTX)
    return out


@pytest.fixture(scope="module", name="root")
def root_fixture(built, tmp_path_factory):
    """A run tree of the builds' files, published: ``current`` points to it."""
    root = tmp_path_factory.mktemp("quantiles")
    run = root / "runs" / "R1" / "json"
    for pid, (cfg, output) in built.items():
        for rel, data in output.files.items():
            (run / rel).parent.mkdir(parents=True, exist_ok=True)
            (run / rel).write_bytes(data)
        (run / pid / "index.json").write_bytes(PRODUCTS[pid].index(cfg, CTX))
    (run.parent / "manifest.json").write_text(json.dumps({"published_at": "2026-11-20T03:05:00+00:00"}))
    point_current(root, "R1")
    return root


@pytest.fixture(scope="module", name="app")
def app_fixture(root):
    return create_app(root)


def get(app, query: str) -> tuple[int, dict]:
    status, _, body = call_app(app, "GET", QUANTILES_PATH, query.encode())
    return status, json.loads(body)


def published(values: np.ndarray, decimals: int | None) -> list:
    """Archive values as the files publish them: rounded (Python's round), NaN as null."""
    return [[None if math.isnan(v) else round(v, decimals) for v in row] for row in values.tolist()]


# --------------------------------------------------------------------------- the static files


@pytest.mark.parametrize("pid", list(PRODUCTS))
def test_each_point_file_is_the_archive_as_published(built, pid):
    cfg, output = built[pid]
    archive = output.archive
    step = int((archive.lead_time.values[1] - archive.lead_time.values[0]) / np.timedelta64(1, "s"))
    for p in cfg.points:
        obj = json.loads(output.files[f"{pid}/quantiles/{p.id}.json"])
        assert list(obj)[:9] == ["product", "latitude", "longitude", "basetime", "updated_time", "start",
                                 "step_seconds", "quantiles", "unit"]
        assert (obj["product"], obj["latitude"], obj["longitude"]) == (pid, p.lat, p.lon)
        assert obj["start"] == "2026-11-20T00:00:00+00:00" and obj["step_seconds"] == step
        assert step == (3600 if pid in ("global", "japan") else 900)
        assert obj["quantiles"] == list(QUANTILES) == archive["quantile"].values.tolist()
        assert obj["unit"] == {"temperature": "°C", "precipitation": "mm", "wind_speed": "m/s"}
        at = archive.sel(point=p.id).isel(init_time=0)
        for e in QUANTILE_DATA:
            var = at[e.ref].sel(height=10.0) if "height" in at[e.ref].dims else at[e.ref]
            assert obj[e.name] == published(var.transpose("lead_time", "quantile").values.astype(np.float64),
                                            e.decimals), e.name
        rows = obj["temperature"]
        assert len(rows) == archive.sizes["lead_time"] == HORIZONS[pid] * 3600 // step
        covered = COVERED_HOURS * 3600 // step
        assert all(None not in r for r in rows[:covered]) and all(r == [None] * 5 for r in rows[covered:])
        if pid == "eu-wind":
            heights = sorted({10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0, 160.0, 180.0, 200.0, 250.0,
                              300.0, *p.hub_heights})
            assert obj["heights"] == heights and list(obj)[-2:] == ["heights", "wind_speed_at"]
            assert list(obj["wind_speed_at"]) == [height_name(h) for h in heights]
            for h in heights:
                var = at["wind_speed_quantiles"].sel(height=h).transpose("lead_time", "quantile")
                assert obj["wind_speed_at"][height_name(h)] == published(var.values.astype(np.float64), 1)
        else:
            assert "heights" not in obj


def test_the_validation_takes_the_quantile_files_and_their_nulls(built):
    for pid, (cfg, output) in built.items():
        expected = PRODUCTS[pid].expected_files(cfg)
        assert {f"{pid}/quantiles/{p.id}.json" for p in cfg.points} <= set(expected)
        facts = file_facts(output.files, expected)
        assert facts.missing == [] and not any("/quantiles/" in rel for rel in facts.with_null)
        assert _files(pid, output.files, facts, cfg.horizon_hours) == []
        # a broken file is refused: a null among numbers, decreasing quantiles, a short series
        rel = f"{pid}/quantiles/{cfg.points[0].id}.json"
        obj = json.loads(output.files[rel])
        obj["temperature"][0][2] = None
        obj["precipitation"][1] = obj["precipitation"][1][::-1]
        obj["wind_speed"] = obj["wind_speed"][:-1]
        facts = file_facts({rel: json.dumps(obj).encode()}, [])
        errors = _files(pid, {rel: json.dumps(obj).encode()}, facts, cfg.horizon_hours)
        assert [e.split(": ")[-2:] for e in errors] == [
            ["temperature", "a row with a null among numbers"], ["precipitation", "decreasing quantiles in a row"],
            [f"{rel}", f"wind_speed is not {len(obj['temperature'])} rows of 5"]], errors


def test_a_product_without_ensembles_has_no_quantile_files():
    cfg = config("eu-short", ensembles=())
    out = PRODUCTS["eu-short"].build(series(2, 54, PRODUCTS["eu-short"].heights(cfg)), cfg, CTX)
    assert not any("/quantiles/" in rel for rel in [*out.files, *PRODUCTS["eu-short"].expected_files(cfg)])


# --------------------------------------------------------------------------- the operation


@pytest.mark.parametrize("pid", list(PRODUCTS))
def test_the_answer_is_the_static_file_at_the_requested_coordinates(app, built, pid):
    cfg, output = built[pid]
    for p in cfg.points:
        static = json.loads(output.files[f"{pid}/quantiles/{p.id}.json"])
        status, answer = get(app, f"product={pid}&latlon={p.lat},{p.lon}")
        assert status == 200 and answer == static and list(answer) == list(static)
    # another place in the point's cell: its coordinates echoed, the same quantiles
    p = cfg.points[0]
    status, answer = get(app, f"product={pid}&latlon={p.lat:.3f}0,{p.lon}")
    assert status == 200 and answer["latitude"] == round(p.lat, 3) and answer["temperature"] == static_rows(
        output, pid, p.id, "temperature")


def static_rows(output, pid: str, point_id: str, name: str) -> list:
    return json.loads(output.files[f"{pid}/quantiles/{point_id}.json"])[name]


def test_a_hub_height_answers_its_wind_speed_quantiles(app, built):
    cfg, output = built["eu-wind"]
    static = json.loads(output.files["eu-wind/quantiles/paris.json"])
    paris = "48.8566,2.3522"
    for text, row in (("100m", "100m"), ("113m", "113m"), ("10m", "10m"), ("300m", "300m")):
        status, answer = get(app, f"product=eu-wind&latlon={paris}&hubheight={text}")
        assert status == 200, answer
        assert list(answer) == ["product", "latitude", "longitude", "basetime", "updated_time", "start",
                                "step_seconds", "quantiles", "hub_height", "unit", "temperature", "precipitation",
                                "wind_speed"]
        assert answer["hub_height"] == text and answer["wind_speed"] == static["wind_speed_at"][row]
        assert answer["temperature"] == static["temperature"]
    # between two precomputed heights: each quantile linear in ln(z) between them
    for text, z1, z2 in (("112.5m", 100.0, 113.0), ("105m", 100.0, 113.0), ("130m", 120.0, 140.0),
                         ("10.5m", 10.0, 20.0)):
        status, answer = get(app, f"product=eu-wind&latlon={paris}&hubheight={text}")
        z = float(text[:-1])
        w = math.log(z / z1) / math.log(z2 / z1)
        lower, upper = static["wind_speed_at"][height_name(z1)], static["wind_speed_at"][height_name(z2)]
        expected = [[None if a is None else round(a + (b - a) * w, 1) for a, b in zip(lo, hi, strict=True)]
                    for lo, hi in zip(lower, upper, strict=True)]
        assert status == 200 and answer["hub_height"] == text and answer["wind_speed"] == expected
        # the fixture's quantiles are an exact log profile: the interpolation finds it again
        archive = output.archive.sel(point="paris").isel(init_time=0)["wind_speed_quantiles"]
        top = archive.sel(height=z2).values.astype(np.float64) * math.log(z / Z0) / math.log(z2 / Z0)
        known = ~np.isnan(top)
        assert np.abs(np.asarray(answer["wind_speed"], dtype=np.float64)[known] - top[known]).max() <= 0.1


@pytest.mark.parametrize("query, status, code", [
    ("latlon=48.8566,2.3522", 400, "400_001"),  # no product
    ("product=eu-short", 400, "400_001"),  # no latlon
    ("product=eu-short&latlon=", 400, "400_001"),
    ("product=catalog&latlon=48.8566,2.3522", 400, "400_002"),
    ("product=eu-short&latlon=48.8566,2.3522;52.52,13.405", 400, "400_002"),  # one pair
    ("product=eu-short&latlon=48.8566", 400, "400_002"),
    ("product=eu-short&latlon=nan,2", 400, "400_002"),
    ("product=eu-short&latlon=48.8566,2.3522&hubheight=100m", 400, "400_002"),  # the windpack's only
    ("product=eu-wind&latlon=48.8566,2.3522&hubheight=100", 400, "400_002"),
    ("product=eu-wind&latlon=48.8566,2.3522&hubheight=100m&hubheight=120m", 400, "400_002"),
    ("product=eu-wind&latlon=48.8566,2.3522&hubheight=9.5m", 400, "400_003"),
    ("product=eu-wind&latlon=48.8566,2.3522&hubheight=300.01m", 400, "400_003"),
    ("product=eu-short&latlon=91,2.3522", 400, "400_003"),
    ("product=eu-short&latlon=40.7128,-74.006", 403, "403_001"),  # New York: outside Europe
    ("product=japan&latlon=48.8566,2.3522", 403, "403_001"),
    ("product=eu-short&latlon=40.4168,-3.7038", 404, "404_002"),  # Madrid: no point in its cell
])
def test_errors_are_the_specs(app, query, status, code):
    got, body = get(app, query)
    assert (got, body["status"], body["code"]) == (status, status, code), body


def test_a_product_without_quantile_files_is_404(app, root):
    # a run whose eu-medium has no ensembles: its index, no quantile files
    folder = root / "runs" / "R1" / "json" / "eu-medium" / "quantiles"
    moved = folder.rename(folder.with_name("gone"))
    try:
        fresh = create_app(root)
        status, body = get(fresh, "product=eu-medium&latlon=48.8566,2.3522")
        assert (status, body["code"]) == (404, "404_002")
        catalog = json.loads(call_app(fresh, "GET", "/catalog", b"")[2])
        operations = {p["product"]: p["operations"] for p in catalog["products"]}
        assert QUANTILES_PATH not in operations["eu-medium"] and QUANTILES_PATH in operations["eu-short"]
    finally:
        moved.rename(folder)


def test_the_openapi_document_lists_the_extension(app):
    doc = openapi_document()
    get_ = doc["paths"][QUANTILES_PATH]["get"]
    assert get_["x-extension"] is True and "not in the forecast service specification" in get_["description"]
    params = {p["name"]: p for p in get_["parameters"]}
    assert list(params) == ["product", "latlon", "hubheight"]
    assert params["product"]["schema"]["enum"] == ["eu-medium", "eu-short", "eu-wind", "global", "japan"]
    assert params["product"]["required"] and params["latlon"]["required"] and not params["hubheight"]["required"]
    assert set(get_["responses"]) == {"200", "304", "400", "403", "404"}
    schema = doc["components"]["schemas"]["Quantiles"]
    assert get_["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/Quantiles")
    status, answer = get(app, "product=eu-wind&latlon=48.8566,2.3522")
    assert status == 200 and set(schema["required"]) <= set(answer) and set(answer) <= set(schema["properties"])
    # the specification's five operations and the catalog are no extension; the power is one
    extensions = {path for path in doc["paths"] if doc["paths"][path]["get"].get("x-extension")}
    assert extensions == {QUANTILES_PATH, "/V1/forecast/power"}
