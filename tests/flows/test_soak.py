"""A soak: consecutive 3-hourly cycles on the sample source with the clock set (`pointcast run
--at`), MSM's upstream stopping for a few runs in the middle (its sample source's `outage`),
the real server over HTTP at each cycle's clock (/metrics, /catalog), then a backfill of an
earlier time through the CLI. The suite runs 5 cycles; `make soak` 16 or more (two simulated
days: POINTCAST_SOAK_CYCLES). docs/operations.md, "Backfill and replay" and "Soak test"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import ROOT
from opscycle import EU_POINTS, JAPAN_POINTS

CYCLES = int(os.environ.get("POINTCAST_SOAK_CYCLES", "5"))
PERIOD = timedelta(hours=3)  # [schedule] every_hours
START = datetime(2026, 11, 20, 0, tzinfo=UTC)  # the first cycle's clock
TICKS = [START + k * PERIOD for k in range(CYCLES)]
# MSM stops for three runs: at the cycle at TICKS[STOP] (which would take the run started
# 3 h before, its publication delay) and the two after it no new run comes; it resumes at
# TICKS[STOP + 3]. In the suite's 5 cycles, the middle three.
STOP = 1 if CYCLES < 8 else CYCLES // 2 - 2
OUTAGE = (TICKS[STOP] - timedelta(hours=3), TICKS[STOP + 3] - timedelta(hours=3))
SCRAPE_AFTER = timedelta(minutes=10)  # the server's clock when scraped: some minutes after the tick
# Replayed through the CLI after the soak: MSM's run then is new (appended into japan's archive
# before the later ones), IFS's is the first cycle's (its archives already hold it).
BACKFILL = START - PERIOD
KEEP_RUNS = 3
# At scale 32 an IFS run is about 2.1 MB, an MSM run 0.2 MB: the cap, not the count, trims the cache.
KEEP_CACHE_RUNS = 4
CACHE_MAX_GB = 0.003
BASETIME_OF = {"eu-short": "ifs", "japan": "msm"}  # the first model of each product's blend
# The interval of the runs each model gives the products: IFS's 06/18 UTC runs end at 144 h,
# short of japan's 240 h, so its 00/12 UTC runs serve both products (one run a model a cycle).
RUN_INTERVAL = {"ifs": timedelta(hours=12), "msm": timedelta(hours=3)}

CONFIG = f"""\
[output]
root = "output"
keep_runs = {KEEP_RUNS}
keep_cache_runs = {KEEP_CACHE_RUNS}
cache_max_gb = {CACHE_MAX_GB}

[schedule]
every_hours = {PERIOD // timedelta(hours=1)}

[dask]
scheduler = "threads"
workers = 2

[sources.sample]
type = "sample"
scale = 32
area = [-25.0, 20.0, 150.0, 72.0]
init = "latest"

# MSM's upstream: the same sample, publishing no run that starts in the outage
[sources.stalled]
type = "sample"
scale = 32
area = [-25.0, 20.0, 150.0, 72.0]
init = "latest"
outage = ["{OUTAGE[0]:%Y-%m-%dT%H:%MZ}", "{OUTAGE[1]:%Y-%m-%dT%H:%MZ}"]

[models.ifs]
source = "sample"
[models.msm]
source = "stalled"

[products.eu-short]
points = "points/europe.csv"
models = ["ifs"]
freqs = ["1H"]
horizon_hours = 72

[products.japan]
points = "points/japan.csv"
models = ["msm", "ifs"]
freqs = ["1H"]
horizon_hours = 240
"""


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.exists() else 0


def cache_runs(root: Path) -> dict[str, list[str]]:
    """The cached model runs (``<cache>/sample/<model>/<YYYYMMDDHH>``) by model."""
    return {m.name: sorted(r.name for r in m.iterdir() if r.is_dir() and not r.name.startswith("."))
            for m in sorted((root / "cache" / "sample").glob("*")) if m.is_dir()}


def disk(root: Path) -> dict[str, int]:
    """Bytes of the cached model runs, the scratch stores, the published runs (with the
    staging tree) and the archive."""
    return {"cache": sum(tree_bytes(root / "cache" / "sample" / m / r) for m, rs in cache_runs(root).items() for r in rs),
            "scratch": tree_bytes(root / "cache" / "scratch"), "runs": tree_bytes(root / "runs"),
            "archive": tree_bytes(root / "zarr")}


class Peak(threading.Thread):
    """The largest disk use seen while a cycle runs, sampled every 0.2 s."""

    def __init__(self, root: Path):
        super().__init__(daemon=True)
        self.root, self.peak, self.done = root, {"cache": 0, "scratch": 0, "runs": 0, "archive": 0, "total": 0}, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            try:
                now = disk(self.root)
            except FileNotFoundError:  # a tree removed while walked
                continue
            for k, v in (now | {"total": sum(now.values())}).items():
                self.peak[k] = max(self.peak[k], v)


def leftovers(root: Path) -> list[str]:
    """What a finished cycle must not leave: scratch stores, staging trees, staged archives,
    half-swapped links, trash of interrupted deletions."""
    found = [p for p in (root / "cache" / "scratch").glob("*")]
    found += [p for p in (root / "runs").glob(".*") if p.name != ".lock"] + list(root.glob("current.tmp-*"))
    found += [p for p in (root / "cache").rglob(".trash-*")] + [p for p in root.rglob("*.tmp")]
    return [str(p.relative_to(root)) for p in found]


def scrape(base: str) -> tuple[dict[str, float], dict[str, dict]]:
    """/metrics' ``pointcast_product_stale`` and /catalog's products, from the real server."""
    with httpx.Client(base_url=base, timeout=10) as client:
        metrics, catalog = client.get("/metrics"), client.get("/catalog")
    assert metrics.status_code == 200 and catalog.status_code == 200
    stale = {s.labels["product"]: s.value for f in text_string_to_metric_families(metrics.text)
             if f.name == "pointcast_product_stale" for s in f.samples}
    return stale, {p["product"]: p for p in catalog.json()["products"]}


def expected_init(model_id: str, clock: datetime) -> datetime:
    """The run an operator had at ``clock``: the newest one started at least the model's
    publication delay before it, of the runs the products can use (`RUN_INTERVAL`), outside
    MSM's outage."""
    from pointcast.sources import MODELS
    from pointcast.sources.base import floor_run

    model = MODELS[model_id]
    init = floor_run(model, clock - model.publication_delay)
    while (init.hour % (RUN_INTERVAL[model_id] // timedelta(hours=1))
           or model_id == "msm" and OUTAGE[0] <= init < OUTAGE[1]):
        init = floor_run(model, init - timedelta(hours=1))
    return init


def stale_limit(model_id: str) -> timedelta:
    """The intended stale rule's limit on a product's age (issue 50, branch ``alarm``): the
    interval of its basetime model's runs it can use (`RUN_INTERVAL`), plus that model's usual
    publication delay, plus one schedule period."""
    from pointcast.sources import MODELS

    return RUN_INTERVAL[model_id] + MODELS[model_id].publication_delay + PERIOD


@pytest.fixture(scope="module")
def soak(tmp_path_factory, prefect_harness):
    """The soak's cycles, each at its tick (in-process, the Prefect flow), each followed by a
    scrape of the real server whose clock is the tick plus `SCRAPE_AFTER`; then the backfill
    through the CLI. Returns what each cycle left."""
    from prefect.settings import PREFECT_API_URL

    from pointcast.flows.cycle import cycle
    from pointcast.server import Server, create_app

    site = tmp_path_factory.mktemp("soak")
    (site / "points").mkdir()
    (site / "points" / "europe.csv").write_text(EU_POINTS)
    (site / "points" / "japan.csv").write_text(JAPAN_POINTS)
    cfg = site / "pointcast.toml"
    cfg.write_text(CONFIG)
    root = site / "output"
    clock = [TICKS[0].timestamp()]
    server = Server(create_app(root, clock=lambda: clock[0]), "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(30)
    base = f"http://127.0.0.1:{server.port}"
    cycles = []
    began = time.monotonic()
    try:
        for tick in TICKS:
            peak = Peak(root)
            peak.start()
            state = cycle(str(cfg), now=tick, return_state=True)
            peak.done.set()
            peak.join()
            assert state.is_completed(), state.message
            clock[0] = (tick + SCRAPE_AFTER).timestamp()
            stale, catalog = scrape(base)
            served = json.loads((root / "current" / "manifest.json").read_text())
            cycles.append({"tick": tick, "run_id": state.result(), "served": served, "stale": stale,
                           "catalog": catalog, "disk": disk(root), "peak": peak.peak, "cache_runs": cache_runs(root),
                           "stores": {pid: tree_bytes(root / "zarr" / f"{pid}.zarr") for pid in BASETIME_OF},
                           "runs": sorted(p.name for p in (root / "runs").iterdir()
                                          if p.name != "failed" and not p.name.startswith(".")),
                           "leftovers": leftovers(root)})
        soaked = time.monotonic() - began
        # The backfill: an earlier time through the CLI, against the tests' Prefect server.
        env = dict(os.environ, PREFECT_API_URL=PREFECT_API_URL.value())
        done = subprocess.run([sys.executable, "-m", "pointcast.cli", "run", "--config", str(cfg),
                               "--at", f"{BACKFILL:%Y-%m-%dT%H:%MZ}"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        stale_after_backfill, _ = scrape(base)
    finally:
        server.stop()
        thread.join(10)
    print(f"soak: {CYCLES} cycles in {soaked:.1f} s")
    return {"root": root, "cycles": cycles, "backfill": done, "stale_after_backfill": stale_after_backfill,
            "leftovers_after_backfill": leftovers(root), "config": cfg}


def test_each_cycle_takes_the_runs_current_at_its_clock(soak):
    """The manifest of every cycle holds the runs latest at its tick (run hours, publication
    delay, the outage): `--at` two different times gives the runs of those times."""
    for c in soak["cycles"]:
        models = c["served"]["models"]
        for m in ("ifs", "msm"):
            assert datetime.fromisoformat(models[m]["init"]) == expected_init(m, c["tick"]), (c["tick"], m, models[m])
    for before, c in zip([None, *soak["cycles"]], soak["cycles"], strict=False):
        if before is None or c["run_id"] != before["run_id"]:  # made by this cycle: its clock
            assert c["tick"] <= datetime.fromisoformat(c["served"]["created"]) < c["tick"] + timedelta(hours=1)
        else:  # the same model runs as the cycle before: nothing to do, the run stays
            assert c["served"] == before["served"]
    inits = {c["served"]["models"]["msm"]["init"] for c in soak["cycles"]}
    assert len(inits) == len(soak["cycles"]) - 3  # a new MSM run every cycle but those of the outage


def test_the_archive_holds_every_run_once_in_init_time_order(soak):
    """Every basetime published, and the backfill's earlier one, archived once, read in
    init_time order although the backfill was appended last."""
    import numpy as np

    from pointcast import publish

    root = soak["root"]
    for pid, model in BASETIME_OF.items():
        wanted = {np.datetime64(expected_init(model, c["tick"]).replace(tzinfo=None), "ns") for c in soak["cycles"]}
        wanted.add(np.datetime64(expected_init(model, BACKFILL).replace(tzinfo=None), "ns"))
        (store,) = publish.archive_stores(root, pid)
        with publish.open_committed(store) as ds:
            assert list(ds[publish.INIT].values) == sorted(wanted), pid
            # the backfilled cycle (appended last, read first) holds values
            assert any(np.isfinite(ds[v].isel(init_time=0).values).any() for v in ds.data_vars), pid


def test_a_backfill_is_archived_and_the_newer_run_stays_served(soak):
    done = soak["backfill"]
    assert done.returncode == 0, done.stderr[-3000:]
    root = soak["root"]
    last = soak["cycles"][-1]
    assert (root / "current").readlink().name == last["run_id"]
    backfilled = [p for p in (root / "runs").iterdir() if p.name.startswith(f"{expected_init('msm', BACKFILL):%Y%m%dT%H%MZ}")]
    assert len(backfilled) == 1, sorted(p.name for p in (root / "runs").iterdir())
    manifest = json.loads((backfilled[0] / "manifest.json").read_text())
    assert manifest["created"].startswith(f"{BACKFILL:%Y-%m-%dT%H}")
    assert datetime.fromisoformat(manifest["models"]["ifs"]["init"]) == expected_init("ifs", BACKFILL)
    assert f"published run {manifest['run_id']}" in done.stdout and "a newer run stays served" in done.stdout
    assert soak["stale_after_backfill"] == last["stale"]  # what is served did not change
    assert soak["leftovers_after_backfill"] == []


def test_disk_stays_within_the_configured_limits(soak):
    cap = CACHE_MAX_GB * 1e9
    for c in soak["cycles"]:
        assert len(c["runs"]) <= KEEP_RUNS, (c["tick"], c["runs"])
        assert c["run_id"] in c["runs"]
        assert c["disk"]["cache"] <= cap, (c["tick"], c["disk"], c["cache_runs"])
        in_use = {m: f"{datetime.fromisoformat(info['init']):%Y%m%d%H}" for m, info in c["served"]["models"].items()}
        for m, runs in c["cache_runs"].items():
            assert len(runs) <= KEEP_CACHE_RUNS and in_use[m] in runs, (c["tick"], m, runs)
    # the cap, not the count, trims the cache: two IFS runs never fit under it, several MSM runs do
    assert all(len(c["cache_runs"]["ifs"]) == 1 for c in soak["cycles"])
    assert max(len(c["cache_runs"]["msm"]) for c in soak["cycles"]) > 1
    # The archive grows by one cycle a new basetime: the same bytes a cycle, give or take compression.
    growth = [b["disk"]["archive"] - a["disk"]["archive"] for a, b in zip(soak["cycles"], soak["cycles"][1:], strict=False)]
    assert max(growth) < 4 * max(soak["cycles"][0]["disk"]["archive"], 1)


def test_the_disk_a_cycle_uses_is_what_plan_says(soak):
    """`pointcast plan`'s disk (`need.costs`, the sample's own message sizes) against the soak:
    the largest use of cache, scratch and run tree while a cycle runs, once `keep_runs` runs
    are kept, within 20 % of `peak_disk_bytes`; the archive's growth a day within 20 % of
    `archive_bytes_per_day` (issue 50, point 8): each product's store grows by the bytes of a
    new basetime at each of its basetime model's runs a day (`RUN_INTERVAL`; none in MSM's
    outage)."""
    from pointcast.config import load_config
    from pointcast.need import costs

    plan = costs(load_config(soak["config"]), now=TICKS[-1], network=False)
    steady = soak["cycles"][KEEP_RUNS:] or soak["cycles"][-1:]
    measured = max(c["peak"]["cache"] + c["peak"]["scratch"] + c["peak"]["runs"] for c in steady)
    first, last = soak["cycles"][0], soak["cycles"][-1]
    per_day = 0.0
    for pid, model in BASETIME_OF.items():
        new = len({c["served"]["products"][pid]["basetime"] for c in soak["cycles"]}) - 1
        assert new >= 1, pid  # a new basetime within the soak, to measure its growth by
        per_day += (last["stores"][pid] - first["stores"][pid]) / new * (timedelta(days=1) / RUN_INTERVAL[model])
    if report := os.environ.get("POINTCAST_SOAK_REPORT"):  # the bench's `soak` group reads it
        Path(report).write_text(json.dumps({
            "cycles": len(soak["cycles"]), "peak_disk_bytes": measured, "plan_peak_disk_bytes": plan["peak_disk_bytes"],
            "archive_bytes_per_day": per_day, "plan_archive_bytes_per_day": plan["archive_bytes_per_day"]}))
    assert 0.8 <= measured / plan["peak_disk_bytes"] <= 1.2, (measured, {k: v for k, v in plan.items() if k != "models"})
    assert 0.8 <= per_day / plan["archive_bytes_per_day"] <= 1.2, (per_day, plan["archive_bytes_per_day"])


def test_the_cache_stays_under_its_cap_while_a_cycle_runs(soak):
    cap = CACHE_MAX_GB * 1e9
    assert all(c["peak"]["cache"] <= cap for c in soak["cycles"]), [c["peak"]["cache"] for c in soak["cycles"]]


def test_no_scratch_or_staging_is_left(soak):
    for c in soak["cycles"]:
        assert c["leftovers"] == [], (c["tick"], c["leftovers"])


def _ages(c) -> dict[str, timedelta]:
    clock = c["tick"] + SCRAPE_AFTER
    return {pid: clock - datetime.fromisoformat(c["served"]["products"][pid]["basetime"]) for pid in BASETIME_OF}


def test_the_stale_flag_is_raised_for_the_stopped_model(soak):
    """Japan (MSM's basetime) is flagged stale, in /metrics and /catalog, once its age passes
    the limit of the intended rule, and no longer once MSM's runs come again; eu-short's
    model never stopped. Holds on the current rule (two schedule periods) too."""
    over = [c for c in soak["cycles"] if _ages(c)["japan"] > stale_limit("msm")]
    assert over, [_ages(c)["japan"] for c in soak["cycles"]]  # the outage is long enough to be seen
    for c in over:
        assert c["stale"]["japan"] == 1.0 and c["catalog"]["japan"]["stale"] is True, c["tick"]
    resumed = [c for c in soak["cycles"] if c["tick"] >= OUTAGE[1] + timedelta(hours=3)]
    assert resumed
    for c in resumed:
        assert _ages(c)["japan"] <= PERIOD + SCRAPE_AFTER and c["stale"]["japan"] == 0.0, c["tick"]


def test_the_stale_flag_is_never_raised_while_runs_arrive_on_time(soak):
    for c in soak["cycles"]:
        for pid, model in BASETIME_OF.items():
            if _ages(c)[pid] <= stale_limit(model):
                assert c["stale"][pid] == 0.0 and c["catalog"][pid]["stale"] is False, (c["tick"], pid, _ages(c)[pid])
