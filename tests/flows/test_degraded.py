"""An upstream that changes costs the elements or products that depend on it, never the
service: real Prefect cycles where the horizon model's upstream goes away (the products other
models reach are built, the others carried with their age), and a replica of the real upstream
trees that lacks fields (the elements computed from them are missing where no model supplies
them, and the manifest says which, where and why)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import ROOT
from opscycle import EU_POINTS, JAPAN_POINTS, served_run
from served import live_server

INIT = "2026-11-20T00:00Z"
GLOBAL_POINTS = ("id,name,lat,lon,elevation,hub_heights\n"
                 "new-york,New York,40.7128,-74.006,10,\n"
                 "nairobi,Nairobi,-1.2921,36.8219,1795,\n")

CONFIG = """\
[output]
root = "output"
keep_runs = 8

[dask]
scheduler = "threads"
workers = 2

[sources.sample]
type = "sample"
scale = 32
area = [-80.0, -10.0, 150.0, 72.0]
init = "{init}"
icon_layout = "legacy"

# GFS fetched to 120 h, as config/live.toml takes it: the global product blends IFS after.
[sources.sample-gfs]
type = "sample"
scale = 32
area = [-80.0, -10.0, 150.0, 72.0]
init = "{init}"
horizon_hours = 120

# An upstream that does not answer: nothing listens on the discard port.
[sources.gone]
type = "http"
mirrors = ["http://127.0.0.1:9/"]
wait_minutes = 0
retry_seconds = 0.1
timeout_seconds = 2

[models.ifs]
source = "{ifs}"
[models.gfs]
source = "sample-gfs"
[models.icon-eu]
source = "sample"
[models.msm]
source = "sample"

[products.eu-medium]
points = "points/europe.csv"
models = ["icon-eu", "ifs"]
freqs = ["1H"]
horizon_hours = 336

[products.eu-short]
points = "points/europe.csv"
models = ["icon-eu", "ifs"]
freqs = ["1H"]
horizon_hours = 72

[products.eu-wind]
points = "points/europe.csv"
models = ["icon-eu", "ifs"]
freqs = ["1H"]
horizon_hours = 72

[products.japan]
points = "points/japan.csv"
models = ["msm", "ifs"]
freqs = ["1H"]
horizon_hours = 240

[products.global]
points = "points/global.csv"
models = ["gfs", "ifs"]
max_lead_hours = {{ gfs = 120 }}
freqs = ["1H"]
horizon_hours = 342
"""


def write(dest: Path, ifs: str) -> Path:
    (dest / "points").mkdir(parents=True, exist_ok=True)
    for name, text in (("europe", EU_POINTS), ("japan", JAPAN_POINTS), ("global", GLOBAL_POINTS)):
        (dest / "points" / f"{name}.csv").write_text(text)
    path = dest / "pointcast.toml"
    path.write_text(CONFIG.format(init=INIT, ifs=ifs))
    return path


def run_cli(cfg: Path) -> subprocess.CompletedProcess:
    """`pointcast run` as an operator starts it, on the session's Prefect server."""
    from prefect.settings import PREFECT_API_URL

    env = dict(os.environ, PREFECT_API_URL=PREFECT_API_URL.value())
    return subprocess.run([sys.executable, "-m", "pointcast.cli", "run", "--config", str(cfg)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def unreachable(tmp_path_factory, prefect_harness):
    """A site that published every product, then a cycle whose IFS upstream does not answer."""
    from pointcast.flows.cycle import cycle

    site = tmp_path_factory.mktemp("gone")
    cfg = write(site, "sample")
    first = cycle(str(cfg))
    write(site, "gone")
    done = run_cli(cfg)
    root = site / "output"
    again = cycle(str(cfg), return_state=True)  # the same model runs: already published
    return {"root": root, "first": first, "done": done, "run": served_run(root), "again": again}


def test_an_unreachable_horizon_model_costs_only_the_products_it_alone_reaches(unreachable):
    """IFS gone: eu-short and eu-wind (72 h) are built from ICON-EU alone (120 h), global from
    GFS alone, fetched beyond its 120 h cap to the product's 342 h; eu-medium (336 h) and
    Japan (240 h; MSM ends at 78 h) keep the first run's files. The cycle exits 0."""
    done, root = unreachable["done"], unreachable["root"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = unreachable["run"]
    assert run != unreachable["first"]
    m = json.loads((root / "runs" / run / "manifest.json").read_text())
    assert list(m["dropped"]) == ["ifs"] and "ifs" not in m["models"]
    products = m["products"]
    for pid in ("eu-short", "eu-wind", "global"):
        assert "carried_from" not in products[pid], pid
    assert products["eu-short"]["models"] == products["eu-wind"]["models"] == ["icon-eu"]
    assert products["global"]["models"] == ["gfs"]
    assert m["models"]["gfs"]["horizon_hours"] >= 342  # the whole run, not the 120 h cap
    for pid in ("eu-medium", "japan"):
        assert products[pid]["carried_from"] == unreachable["first"], pid
        assert "needs ifs, which is dropped" in products[pid]["carried_because"]
    assert "reach +120 h of its 336 h" in products["eu-medium"]["carried_because"]
    # A cycle finding that run published already ends as the one that published it: Degraded.
    again = unreachable["again"]
    assert again.is_completed() and again.name == "Degraded" and again.result() == run
    assert "ifs dropped" in again.message and "eu-medium carried from" in again.message
    validation = json.loads((root / "runs" / run / "validation.json").read_text())
    assert validation["ok"] and sorted(validation["products"]) == ["eu-short", "eu-wind", "global"]
    # The global forecast beyond 120 h comes from GFS: 14 whole days, no missing value.
    answer = json.loads((root / "runs" / run / "json" / "global" / "new-york.json").read_text())
    assert len(answer["mrf"]) == 14
    assert all(day["maxtemp"] != -9999 for day in answer["mrf"][1:])


def test_metrics_tell_what_is_carried_and_how_old(unreachable):
    """/metrics (parsed with prometheus_client's own parser) after the cycle without IFS: the
    carried products with their age and the flag, the last cycle degraded, IFS dropped."""
    root = unreachable["root"]
    with live_server(root) as (client, _, _):
        r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(r.text) for s in family.samples}

    def value(name, **labels):
        return samples[(name, tuple(sorted(labels.items())))]

    for pid in ("eu-medium", "japan"):
        assert value("pointcast_product_carried", product=pid) == 1
        # the sample's runs start on 2026-11-20: days older than two 3-hour periods
        assert value("pointcast_product_age_seconds", product=pid) > 86400
        assert value("pointcast_product_stale", product=pid) == 1
    for pid in ("eu-short", "eu-wind", "global"):
        assert value("pointcast_product_carried", product=pid) == 0
    assert value("pointcast_last_cycle_status", status="degraded") == 1
    assert value("pointcast_last_cycle_dropped_model", model="ifs") == 1
    assert value("pointcast_last_cycle_dropped_models") == 1
