"""When a served product is stale (docs/operations.md, "When a product is stale"), over two
simulated days of 3-hourly cycles: runs of each basetime model arriving a little before their
usual publication delay, each cycle recording what it found upstream
(`pointcast.outcome.record_upstream`) and publishing 45 minutes later. In that steady state no
product is ever stale; when the model stops, or a newer run waits upstream unserved, the flag
is raised, and not before its threshold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pointcast.outcome import record_upstream, upstream_runs
from pointcast.server.metrics import product_ages
from pointcast.sources import MODELS

PERIOD = timedelta(hours=3)  # [schedule] every_hours
CYCLE = timedelta(minutes=45)  # from a cycle's discovery to its run being served
EARLY = timedelta(minutes=15)  # how much sooner than its usual delay a run is complete
START = datetime(2026, 11, 20, tzinfo=UTC)
BASETIME_MODELS = ("icon-d2", "icon-eu", "msm", "gfs", "ifs")


def manifest(model: str, basetime: datetime) -> dict:
    """A run's manifest serving one product led by ``model``, as `plan.manifest` writes it."""
    return {"schedule_hours": 3, "products": {"p": {
        "basetime": basetime.isoformat(), "models": [model, "ifs"],
        "stale_after_hours": MODELS[model].stale_after(3) / timedelta(hours=1)}}}


def newest_complete(model: str, at: datetime, stopped: datetime | None) -> datetime:
    """The newest run of ``model`` complete upstream at ``at`` (none started after ``stopped``)."""
    spec = MODELS[model]
    init = at.replace(minute=0, second=0, microsecond=0)
    while not (init.hour in spec.run_hours and init + spec.publication_delay - EARLY <= at
               and (stopped is None or init <= stopped)):
        init -= timedelta(hours=1)
    return init


def simulate(root, model: str, hours: int, stopped: datetime | None = None):
    """Each 5 minutes of ``hours`` of 3-hourly cycles: (the clock, the served basetime, stale)."""
    served = newest_complete(model, START, stopped)
    record_upstream(root, {model: served}, START)
    tick = START
    out = []
    now = START
    while now < START + timedelta(hours=hours):
        if now >= tick + PERIOD:  # the next cycle discovers, records, and publishes later
            tick += PERIOD
            record_upstream(root, {model: newest_complete(model, tick, stopped)}, tick)
        if now >= tick + CYCLE:
            served = upstream_runs(root)[model]["init"]
        age, stale = product_ages(manifest(model, served), now, 3, root)["p"]
        out.append((now, served, stale))
        now += timedelta(minutes=5)
    return out


@pytest.mark.parametrize("model", BASETIME_MODELS)
def test_no_product_is_stale_while_runs_arrive_as_usual(tmp_path, model):
    steps = simulate(tmp_path, model, 48)
    assert not [(now, served) for now, served, stale in steps if stale]
    # the ages did reach close to the threshold: the rule is not simply loose
    worst = max(now - served for now, served, _ in steps)
    assert worst > MODELS[model].stale_after(3) - 2 * PERIOD


@pytest.mark.parametrize("model", BASETIME_MODELS)
def test_a_model_that_stops_makes_its_products_stale_at_the_threshold(tmp_path, model):
    """No run starts after 12 UTC on the first day: the product turns stale once the last run
    served is older than the model's threshold, never before."""
    stopped = START + timedelta(hours=12)
    steps = simulate(tmp_path, model, 48, stopped)
    last = max(served for _, served, _ in steps)
    assert last <= stopped
    limit = MODELS[model].stale_after(3)
    for now, served, stale in steps:
        assert stale == (now - served > limit), (now, served)
    assert steps[-1][2]


def test_a_newer_run_waiting_upstream_is_stale_after_a_schedule_period(tmp_path):
    """A cycle found GFS's 06 UTC run complete at 09 UTC but served nothing new (its cycles
    fail): the product of the 00 UTC run is stale 3 h later, long before its age reaches the
    13 h of rule 1; a later cycle finding the same run keeps the time it was first seen."""
    base = START
    record_upstream(tmp_path, {"gfs": base + timedelta(hours=6)}, base + timedelta(hours=9))
    record_upstream(tmp_path, {"gfs": base + timedelta(hours=6), "icon-eu": base}, base + timedelta(hours=12))
    seen = upstream_runs(tmp_path)
    assert seen["gfs"] == {"init": base + timedelta(hours=6), "complete_since": base + timedelta(hours=9)}
    assert seen["icon-eu"]["complete_since"] == base + timedelta(hours=12)
    served = manifest("gfs", base)

    def stale(at: timedelta) -> bool:
        return product_ages(served, base + at, 3, tmp_path)["p"][1]

    assert not stale(timedelta(hours=12))
    assert stale(timedelta(hours=12, seconds=1))
    # the newer run served: nothing waits
    assert not product_ages(manifest("gfs", base + timedelta(hours=6)), base + timedelta(hours=13), 3, tmp_path)["p"][1]


def test_a_manifest_without_the_threshold_is_judged_by_its_basetime_model(tmp_path):
    """A run published before `stale_after_hours` was recorded: the same rule, from `models`."""
    entry = manifest("gfs", START)
    del entry["products"]["p"]["stale_after_hours"]
    assert not product_ages(entry, START + timedelta(hours=13), 3, tmp_path)["p"][1]
    assert product_ages(entry, START + timedelta(hours=13, seconds=1), 3, tmp_path)["p"][1]


def test_the_threshold_counts_the_configured_run_hours_only(tmp_path):
    """`[models.gfs] run_hours = [0, 12]` (an operator leaving out the off-hour runs): the
    global product's threshold is 12 h of run interval, not 6, plus GFS's publication delay
    and a schedule period, so that its steady state raises no alarm either; a model whose
    configured runs all reach its horizon keeps its own interval."""
    from conftest import write_config
    from pointcast.config import load_config
    from pointcast.plan import stale_after

    path = write_config(tmp_path, samples=False)
    cfg = load_config(path)
    delay = MODELS["gfs"].publication_delay
    assert stale_after(cfg, "gfs") == timedelta(hours=6) + delay + PERIOD
    path.write_text(path.read_text().replace("[models.gfs]\n", "[models.gfs]\nrun_hours = [0, 12]\n", 1))
    cfg = load_config(path)
    assert cfg.models["gfs"].run_hours == (0, 12)
    assert stale_after(cfg, "gfs") == timedelta(hours=12) + delay + PERIOD
    assert stale_after(cfg, "msm") == MODELS["msm"].stale_after(3)
