"""The forecast cycle as a Prefect flow: discover, fetch, decode+extract, build, validate, publish.

`pointcast run` runs it once; `pointcast schedule` serves it as a deployment every 3 hours.
Each task is one stage of the library; the flow only wires them, so the same stages run
identically from tests, the CLI and the deployment.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
import json
import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dask
import numpy as np
from prefect import flow, get_run_logger, task

from pointcast import blend as blend_stage
from pointcast import interp, publish
from pointcast.config import Config, ProductConfig, load_config
from pointcast.grids import grid_for
from pointcast.ingest import decode
from pointcast.products import PRODUCTS
from pointcast.products.base import RunContext, dumps, iso
from pointcast.sources import MODELS, make_source
from pointcast.sources.base import FetchedRun, RunRef
from pointcast.validate import validate


def _logger():
    try:
        return get_run_logger()
    except Exception:  # outside a flow run (direct calls in tests)
        return logging.getLogger("pointcast.flow")


@task(retries=2, retry_delay_seconds=5)
def discover(cfg: Config, model_id: str, now: datetime, needed: timedelta) -> RunRef:
    """Newest run of the model whose horizon reaches `needed` (walks back run by run)."""
    model = MODELS[model_id]
    source = make_source(cfg.models[model_id].source, cfg.source_for(model_id))
    when = now
    for _ in range(8):
        run = source.discover(model, when)
        if max(run.steps) >= needed:
            _logger().info("%s: run %s from %s, %d steps to +%s", model_id, run.init.isoformat(),
                           run.source, len(run.steps), max(run.steps))
            return run
        when = run.init - timedelta(minutes=1)
    raise RuntimeError(f"{model_id}: no run reaching the {needed / timedelta(hours=1):g} h horizon "
                       f"of the products it ends was found")


@task(retries=3, retry_delay_seconds=[5, 30, 60])
def fetch(cfg: Config, run: RunRef) -> FetchedRun:
    model = MODELS[run.model]
    source = make_source(cfg.models[run.model].source, cfg.source_for(run.model))
    fetched = source.fetch(run, model, cfg.output.cache_dir)
    _logger().info("%s: %d files ready", run.model, len(fetched.files))
    return fetched


@task
def decode_extract(cfg: Config, fetched: FetchedRun, points: interp.PointSet, heights: list[float]):
    model = MODELS[fetched.run.model]
    ds = decode(fetched.files, model.fields, model=model.id,
                attrs={"source": fetched.run.source, "synthetic": int(fetched.run.synthetic)})
    with dask_scheduler(cfg):
        out = interp.extract(ds, points, heights)
    _logger().info("%s: decoded %d variables on %d times, extracted %d points", model.id,
                   len(ds.data_vars), ds.sizes["time"], len(points))
    return out


@task
def blend_models(cfg: Config, pids: list[str], extracted: dict, basetime: datetime):
    """Resample and blend once for products sharing points and models, over the longest of
    their horizons; each product then takes its own horizon from the start of the series."""
    pc = cfg.products[pids[0]]
    points = point_set(pc)
    start = np.datetime64(basetime.replace(tzinfo=None), "ns")
    hours = max(cfg.products[pid].horizon_hours for pid in pids)
    axis = interp.base_axis(start, start + np.timedelta64(hours, "h") - interp.BASE_STEP)
    members = [(m, interp.resample(extracted[m], axis, points.lats, points.lons))
               for m in pc.models if m in extracted]
    until = {m: start + np.timedelta64(h, "h") for m, h in pc.max_lead_hours}
    series, used = blend_stage.blend(members, until)
    return series, _segments(used.get("t2m", []), axis)


@task
def build_product(cfg: Config, pid: str, series, seams: list[dict], ctx: RunContext):
    pc = cfg.products[pid]
    end = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns") + np.timedelta64(pc.horizon_hours, "h")
    out = PRODUCTS[pid].build(series.sel(time=series.time < end), pc, ctx)
    last = iso(end - interp.BASE_STEP)
    out.checks["seams"] = [{**seg, "to": min(seg["to"], last)} for seg in seams if seg["from"] <= last]
    return out


@task
def validate_run(cfg: Config, outputs: dict) -> dict:
    report = validate(outputs, cfg)
    log = _logger()
    for err in report["errors"]:
        log.error("validation: %s", err)
    log.info("validation %s: %s", "passed" if report["ok"] else "FAILED", report["products"])
    return report


@task
def publish_run(cfg: Config, run_id: str, outputs: dict, report: dict, manifest: dict) -> Path:
    root = cfg.output.root
    staging = publish.new_run_dir(root, run_id)
    files = {path: data for out in outputs.values() for path, data in out.files.items()}
    publish.write_json_tree(staging, files)
    path = publish.publish_run(root, staging, run_id, manifest, report, report["ok"])
    for pid, out in outputs.items():
        publish.append_archive(root, pid, out.archive)
    publish.retain(root, cfg.output.keep_runs)
    _logger().info("published run %s at %s", run_id, path)
    return path


@contextmanager
def dask_scheduler(cfg: Config):
    """The dask scheduler of `[dask]`: local threads by default, or a distributed cluster."""
    if cfg.dask.scheduler in ("threads", "synchronous"):
        with dask.config.set(scheduler=cfg.dask.scheduler, num_workers=cfg.dask.workers):
            yield
        return
    from dask.distributed import Client, LocalCluster

    if cfg.dask.scheduler == "local-cluster":
        cluster = LocalCluster(n_workers=cfg.dask.workers, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
    else:
        cluster, client = None, Client(cfg.dask.scheduler)
    try:
        yield
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def point_set(pc: ProductConfig) -> interp.PointSet:
    """A product's points, sampled at the centres of their product grid cells."""
    grid = grid_for(pc.id)
    centres = [grid.cell_centre(grid.cell_key(p.lat, p.lon)) for p in pc.points]
    return interp.PointSet(
        ids=np.array([p.id for p in pc.points]),
        lats=np.array([c[0] for c in centres]), lons=np.array([c[1] for c in centres]),
        elevation=np.array([np.nan if p.elevation is None else p.elevation for p in pc.points]),
    )


def _segments(models: list[str], axis: np.ndarray) -> list[dict]:
    """Runs of the same model along the axis (at the first point), for the manifest."""
    out: list[dict] = []
    for i, m in enumerate(models):
        if out and out[-1]["model"] == m:
            out[-1]["to"] = iso(axis[i])
        else:
            out.append({"model": m, "from": iso(axis[i]), "to": iso(axis[i])})
    return out


def next_update(cfg: Config, now: datetime) -> datetime:
    every = timedelta(hours=cfg.schedule.every_hours)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(minutes=cfg.schedule.offset_minutes)
    ticks = int((now - day) / every) + 1
    return day + ticks * every


@flow(name="pointcast-cycle", log_prints=True)
def cycle(config_path: str, now: datetime | None = None) -> str:
    """One forecast cycle. Returns the published run id; raises (publishing nothing) on failure."""
    cfg = load_config(Path(config_path))
    now = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    log = _logger()
    models = list(dict.fromkeys(m for pc in cfg.products.values() for m in pc.models))
    # The last model of a product's blend must reach the end of that product's horizon.
    needed = {m: timedelta(hours=max([pc.horizon_hours for pc in cfg.products.values()
                                      if pc.models[-1] == m], default=0)) for m in models}
    runs = {m: discover(cfg, m, now, needed[m]) for m in models}
    run_id = _run_id(cfg, runs)
    current = cfg.output.root / "current"
    if (cfg.output.root / "runs" / run_id / "manifest.json").exists() and current.is_symlink() \
            and Path(current.readlink()).name == run_id:
        log.info("run %s is already published for these model runs: nothing to do", run_id)
        return run_id

    fetched = {m: fetch(cfg, runs[m]) for m in models}
    # Products sharing a points list share one extraction per model.
    groups: dict[Path, list[str]] = {}
    for pid, pc in cfg.products.items():
        groups.setdefault(pc.points_file, []).append(pid)
    extracted: dict[Path, dict] = {}
    for points_file, pids in groups.items():
        heights = sorted({h for pid in pids for h in PRODUCTS[pid].heights(cfg.products[pid])})
        pts = point_set(cfg.products[pids[0]])
        wanted = dict.fromkeys(m for pid in pids for m in cfg.products[pid].models)
        extracted[points_file] = {m: decode_extract(cfg, fetched[m], pts, heights) for m in wanted}

    updated = datetime.now(timezone.utc).replace(microsecond=0)
    model_info = {m: {"init": iso(r.init), "source": r.source, "synthetic": r.synthetic,
                      "steps": len(r.steps), "horizon_hours": max(r.steps) / timedelta(hours=1)}
                  for m, r in runs.items()}
    blends: dict[tuple, list[str]] = {}
    for pid, pc in cfg.products.items():
        blends.setdefault((pc.points_file, pc.models, pc.max_lead_hours), []).append(pid)
    outputs = {}
    for (points_file, models, _), pids in blends.items():
        basetime = runs[models[0]].init
        series, seams = blend_models(cfg, pids, extracted[points_file], basetime)
        for pid in pids:
            ctx = RunContext(basetime=basetime, updated=updated, next_update=next_update(cfg, now),
                             models={m: model_info[m] for m in models})
            outputs[pid] = build_product(cfg, pid, series, seams, ctx)
    report = validate_run(cfg, outputs)
    synthetic = any(r.synthetic for r in runs.values())
    manifest = {
        "run_id": run_id, "created": iso(updated), "synthetic": synthetic,
        "notice": ("SYNTHETIC: produced from the embedded sample source; not a real forecast."
                   if synthetic else "Produced from real model runs."),
        "models": model_info,
        "products": {pid: {"basetime": iso(runs[pc.models[0]].init), "models": list(pc.models),
                           "horizon_hours": pc.horizon_hours, "freqs": list(pc.freqs),
                           "points": len(pc.points), "seams_t2m": outputs[pid].checks.get("seams", [])}
                     for pid, pc in cfg.products.items()},
    }
    publish_run(cfg, run_id, outputs, report, manifest)
    return run_id


def _run_id(cfg: Config, runs: dict[str, RunRef]) -> str:
    """Same model runs and same configuration -> same id, so a re-run is recognised."""
    key = json.dumps({m: [r.source, r.init.isoformat(), len(r.steps)] for m, r in sorted(runs.items())}
                     | {"config": _config_digest(cfg)}, sort_keys=True)
    newest = max(r.init for r in runs.values())
    return f"{newest:%Y%m%dT%H%MZ}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _config_digest(cfg: Config) -> str:
    digest = hashlib.sha256(cfg.path.read_bytes())
    for points_file in sorted({pc.points_file for pc in cfg.products.values()}):
        digest.update(Path(points_file).read_bytes())
    return digest.hexdigest()


def deployment(cfg: Config):
    """The scheduled deployment of the cycle: every `schedule.every_hours` hours (a divisor of
    24), `schedule.offset_minutes` past the tick, for `pointcast schedule` to serve."""
    hours, minutes = divmod(cfg.schedule.offset_minutes, 60)
    cron = f"{minutes} {hours}-23/{cfg.schedule.every_hours} * * *"
    return cycle.to_deployment(name=f"pointcast-every-{cfg.schedule.every_hours}h", cron=cron,
                               parameters={"config_path": str(cfg.path)})
