"""The forecast cycle as a Prefect flow: discover, fetch, decode+extract, build, validate, publish.

`pointcast run` runs it once; `pointcast schedule` serves it as a deployment every 3 hours.
Each task is one stage of the library; the flow only wires them, so the same stages run
identically from tests, the CLI and the deployment.
"""

from __future__ import annotations

import errno
import hashlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
import json
import logging
import shutil
import time
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path

import dask
import numpy as np
from prefect import allow_failure, flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from pointcast import blend as blend_stage
from pointcast import interp, publish
from pointcast.config import Config, ProductConfig, load_config
from pointcast.forked import fork_map
from pointcast.grids import grid_for
from pointcast.ingest import decode
from pointcast.products import PRODUCTS
from pointcast.products.base import RunContext, iso, merge
from pointcast.sources import MODELS, make_source, run_steps
from pointcast.sources.base import FetchedRun, RunRef
from pointcast.sources.remote import SourceUnavailable, candidate_runs
from pointcast.validate import validate


def _logger():
    try:
        return get_run_logger()
    except Exception:  # outside a flow run (direct calls in tests)
        return logging.getLogger("pointcast.flow")


def _retry_unless_unavailable(task, task_run, state) -> bool:
    """A source that gave up at its deadline has retried already: no Prefect retry then."""
    return not isinstance(state.result(raise_on_failure=False), SourceUnavailable)


@task(retries=2, retry_delay_seconds=5, retry_condition_fn=_retry_unless_unavailable)
def discover(cfg: Config, model_id: str, now: datetime, needed: timedelta,
             until: datetime | None = None) -> RunRef:
    """Newest run of the model whose horizon reaches `needed` from its start, or the time
    `until` where given (a product's basetime plus its horizon; walks back run by run)."""
    model = MODELS[model_id]
    source = make_source(cfg.models[model_id].source, cfg.source_for(model_id))

    def reaches(init: datetime, steps) -> bool:
        return init + max(steps) >= (until or init + needed)

    # Runs too short for the horizon by design (IFS 06/18 UTC: 144 h) are not asked for, so
    # the source never waits for one still being published; the loop below catches the rest.
    when = next((t for t in candidate_runs(model, now, 8) if reaches(t, run_steps(model, t))), now)
    for _ in range(8):
        run = source.discover(model, when)
        if reaches(run.init, run.steps):
            _logger().info("%s: run %s from %s, %d steps to +%s", model_id, run.init.isoformat(),
                           run.source, len(run.steps), max(run.steps))
            return run
        when = run.init - timedelta(minutes=1)
    raise RuntimeError(f"{model_id}: no run reaching the {needed / timedelta(hours=1):g} h horizon "
                       f"of the products it ends{f' (to {until.isoformat()})' if until else ''} was found")


@task(retries=3, retry_delay_seconds=[5, 30, 60], retry_condition_fn=_retry_unless_unavailable)
def fetch(cfg: Config, run: RunRef) -> FetchedRun:
    model = MODELS[run.model]
    source = make_source(cfg.models[run.model].source, cfg.source_for(run.model))
    fetched = source.fetch(run, model, cfg.output.cache_dir)
    _logger().info("%s: %d files ready", run.model, len(fetched.files))
    return fetched


class ModelFailed(RuntimeError):
    """A model's run could not be decoded or extracted: the model is dropped from the cycle."""


@task(cache_policy=NO_CACHE)
def decode_extract(cfg: Config, fetched: FetchedRun, points: interp.PointSet, heights: list[float],
                   groups: list[tuple[int, list[float]]], complete: bool):
    """The model's run at ``points``: the points of every list using it, one after the other,
    each list (``groups``: its number of points and heights) profiled at its own heights.
    ``complete``: the model ends a product's blend, so every variable of its table must be in
    the run (nothing after it supplies one it lacks); otherwise a variable it lacks comes from
    the next model of the blend. Anything else that fails raises ``ModelFailed``, naming what."""
    model = MODELS[fetched.run.model]
    try:
        ds = decode(fetched.files, model.fields, model=model.id,
                    attrs={"source": fetched.run.source, "synthetic": int(fetched.run.synthetic)})
    except Exception as e:
        raise ModelFailed(f"{model.id}: decode failed: {type(e).__name__}: {e}") from e
    lacking = sorted({row.var for row in model.fields} - set(ds.data_vars))
    if lacking and complete:
        raise ModelFailed(f"{model.id}: the run's files hold no field for {', '.join(lacking)}, "
                          f"and no model after it in the blend would supply them")
    if lacking:
        _logger().warning("%s: the run's files hold no field for %s: the next model of the "
                          "blend supplies them", model.id, ", ".join(lacking))
    try:
        out = interp.extract(ds, points, heights, groups)  # on the flow's dask scheduler (dask_scheduler)
    except KeyError as e:
        raise ModelFailed(f"{model.id}: extraction needs {e}, which the decoded run does not "
                          f"hold") from e
    except Exception as e:
        raise ModelFailed(f"{model.id}: extraction failed: {type(e).__name__}: {e}") from e
    _logger().info("%s: decoded %d variables on %d times, extracted %d points", model.id,
                   len(ds.data_vars), ds.sizes["time"], len(points))
    return out


def blend_models(cfg: Config, pids: list[str], extracted: dict, where: interp.PointSet,
                 basetime: datetime, points: slice):
    """Resample and blend once for products sharing points, models and heights, over the
    longest of their horizons, for one slice of their points; each product then takes its own
    horizon from the start of the series. Only their heights and variables are resampled: the
    windpack's thirty-odd heights over the medium range's 14 days were most of a 10,000-point
    cycle's memory, and it reads two of the two dozen variables. ``where``: the points list's
    sampled points (`point_set`), of which ``points`` is the slice."""
    pc = cfg.products[pids[0]]
    start = np.datetime64(basetime.replace(tzinfo=None), "ns")
    hours = max(cfg.products[pid].horizon_hours for pid in pids)
    heights = PRODUCTS[pids[0]].heights(pc)  # the same for every product of the blend
    axis = interp.base_axis(start, start + np.timedelta64(hours, "h") - interp.BASE_STEP)
    wanted = [PRODUCTS[pid].variables for pid in pids]
    # Only the variables the products read, and t2m: the manifest's account of the seams.
    keep = None if None in wanted else {"t2m", *(v for w in wanted for v in w)}
    members = []
    for m in (m for m in pc.models if m in extracted):
        ds = extracted[m].isel(point=points)
        ds = ds if keep is None else ds[[v for v in ds.data_vars if v in keep]]
        ds = ds.sel(height=heights) if "height" in ds.dims else ds
        members.append((m, interp.resample(ds, axis, where.lats[points], where.lons[points])))
    until = {m: start + np.timedelta64(h, "h") for m, h in pc.max_lead_hours}
    series, used = blend_stage.blend(members, until)
    return series, _segments(used.get("t2m", []), axis)


def build_product(cfg: Config, pid: str, series, ctx: RunContext, files: publish.StagedFiles,
                  points: slice):
    """One slice of the product's points; its files go into the run's staging tree as they
    are rendered (``files``)."""
    pc = cfg.products[pid]
    return PRODUCTS[pid].build(series.sel(time=series.time < _horizon_end(pc, ctx)),
                               replace(pc, points=pc.points[points]), ctx, files)


def build_slice(cfg: Config, pids: list[str], extracted: dict, where: interp.PointSet,
                ctx: RunContext, corrected: list[str], estimate, staging: Path, write_threads: int,
                points: slice):
    """Blend and build one slice of the points for the blend's products, their files written
    into the run's staging tree by a writer of the slice's own (``write_threads``: its pool,
    0 in a forked process, which has a core of its own to write on). It may run in a forked
    process (`build_blend`), so it returns what the cycle keeps, not the files: each
    product's output without its files, the names of its files (and whether they hold a
    null), the seams, the directories made. ``corrected``: the products built from the
    series corrected with ``estimate`` (`postprocess.correct_series`)."""
    series, seams = blend_models(cfg, pids, extracted, where, ctx.basetime, points)
    writer = publish.TreeWriter(staging, threads=write_threads)
    outputs, written = {}, {}
    try:
        if corrected:  # [postprocess]: built from the corrected series, the raw archived beside
            from pointcast import postprocess

            start = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
            fixed = postprocess.correct_series(series, estimate, start)
        for pid in pids:
            files = writer.files()
            out = build_product(cfg, pid, fixed if pid in corrected else series, ctx, files, points)
            if pid in corrected:
                postprocess.keep_raw(out.archive, series, pid)
            outputs[pid] = replace(out, files={})
            written[pid] = files.written()
    finally:
        dirs = writer.close()
    return outputs, written, seams, dirs


# The data-heavy tasks take no cache key: Prefect's default one hashes the inputs, which are
# the run's fields and, for the last tasks, its whole JSON tree. Those inputs, and the
# configuration (its points lists: half a million objects for 5 x 1,000 points), are passed
# quote()d too, so that Prefect does not walk them looking for futures.
@task(cache_policy=NO_CACHE)
def build_blend(cfg: Config, pids: list[str], extracted: dict, where: interp.PointSet,
                ctx: RunContext, writer: publish.TreeWriter, corrections: dict) -> dict:
    """The products of one blend, over their points in slices of at most `[dask]
    points_per_slice`, at least one a build process, built `build_processes` at a time in
    forked processes (rendering is Python: one core a process). The memory is a slice's
    resampled members, blend and elements a process, whatever the number of points.
    ``corrections``: the bias estimates of the blend's corrected products
    (`postprocess.prepare`), by product."""
    n = len(cfg.products[pids[0]].points)
    processes = cfg.dask.build_processes
    step = min(cfg.dask.points_per_slice, -(-n // processes))
    slices = [slice(first, first + step) for first in range(0, n, step)]
    forked = processes > 1 and len(slices) > 1
    estimate = None
    if corrections:  # the products of one blended series share one correction
        from pointcast import postprocess

        estimate = postprocess.merged(list(corrections.values()))
    build = partial(build_slice, cfg, pids, extracted, where, ctx, list(corrections), estimate, writer.staging,
                    0 if forked else publish.WRITE_THREADS)
    built = fork_map(build, slices, processes) if forked else [build(s) for s in slices]
    files = {pid: writer.files() for pid in pids}
    for _, written, _, dirs in built:
        for pid in pids:
            files[pid].adopt(written[pid], dirs)
    seams = built[0][2]  # the manifest's account of the seams is at the first point
    return {pid: finish_product(cfg, pid, [replace(outputs[pid], files=files[pid])
                                           for outputs, *_ in built], seams, ctx, files[pid])
            for pid in pids}


def finish_product(cfg: Config, pid: str, parts: list, seams: list[dict], ctx: RunContext,
                   files: publish.StagedFiles):
    """The product's slices as one output, with its index over all points and the seams of
    its horizon."""
    pc = cfg.products[pid]
    out = merge(parts)
    files[f"{pid}/index.json"] = PRODUCTS[pid].index(pc, ctx)
    last = iso(_horizon_end(pc, ctx) - interp.BASE_STEP)
    out.checks["seams"] = [{**seg, "to": min(seg["to"], last)} for seg in seams if seg["from"] <= last]
    return out


def _horizon_end(pc: ProductConfig, ctx: RunContext) -> np.datetime64:
    """The end of the product's horizon (exclusive)."""
    return np.datetime64(ctx.basetime.replace(tzinfo=None), "ns") + np.timedelta64(pc.horizon_hours, "h")


@task(cache_policy=NO_CACHE)
def validate_run(cfg: Config, outputs: dict) -> dict:
    report = validate(outputs, cfg)
    log = _logger()
    for err in report["errors"]:
        log.error("validation: %s", err)
    log.info("validation %s: %s", "passed" if report["ok"] else "FAILED", report["products"])
    return report


@task(cache_policy=NO_CACHE)
def postprocess_learn(cfg: Config, runs: dict[str, RunRef]) -> tuple[dict, dict]:
    """With `[postprocess]` on, before the builds: the bias estimates learnt from the
    observations valid before each product's run (pointcast.postprocess), by product, and the
    manifest's account of them; with it off, nothing."""
    from pointcast import postprocess

    if not cfg.postprocess.enabled:
        return {}, {"enabled": False}
    inits = {pid: min(runs[m].init for m in pc.models).replace(tzinfo=None) for pid, pc in cfg.products.items()}
    states, account = postprocess.prepare(cfg, inits)
    return states, {"enabled": True, **account}


@task(cache_policy=NO_CACHE)
def postprocess_run(cfg: Config, outputs: dict, writer: publish.TreeWriter, learnt: dict) -> dict:
    """After validation: the verification files (`pointcast verify`) carried into the new
    run's tree; the manifest's account of the corrections (``learnt``, `postprocess_learn`)
    of the products built this cycle (a carried product is not corrected)."""
    from pointcast import verify

    for name, data in verify.published_files(Path(cfg.output.root)).items():
        writer.put(f"{verify.VERIFICATION_DIR}/{name}", data)
    if not learnt["enabled"]:
        return learnt
    return {**learnt, "products": {pid: entry for pid, entry in learnt["products"].items() if pid in outputs}}


@task(cache_policy=NO_CACHE)
def publish_run(cfg: Config, run_id: str, outputs: dict, report: dict, manifest: dict) -> Path:
    """Make the JSON tree durable and archive a valid run, side by side, then make it visible
    (or keep it aside).

    The products' files are in a staging tree already when they were built into one
    (``publish.StagedFiles``); otherwise (the publish stage replayed on its own) they are staged here.
    The archive is appended before `current` moves, so a served run is always archived: a
    crash in between leaves the run archived but not served, and the re-run publishes it
    (appends are idempotent). On any error the staging tree is removed (a full disk gets its
    space back) and `current` is untouched; docs/contracts.md, "Crash safety"."""
    root = cfg.output.root
    writers = {id(out.files.writer): out.files.writer for out in outputs.values()
               if isinstance(out.files, publish.StagedFiles)}
    if writers:
        (writer,) = writers.values()
    else:
        writer = publish.TreeWriter(publish.new_run_dir(root, run_id))
    with _cleaned_up(writer, root, run_id):
        for out in outputs.values():
            if not isinstance(out.files, publish.StagedFiles):
                for rel, data in out.files.items():
                    writer.put(rel, data)
        start = time.perf_counter()
        # The tree's flush waits on the disk and the appends compress: side by side, the
        # run is published when both are done (a crash between leaves it at most archived).
        with ThreadPoolExecutor(max_workers=1) as flush:
            durable = flush.submit(_timed, writer.finish)
            if report["ok"]:
                for pid, out in outputs.items():
                    publish.append_archive(root, pid, out.archive)
            appended = time.perf_counter() - start
            flushed = durable.result()
        _logger().info("run %s: files durable in %.1f s, archives appended in %.1f s (side by side)",
                       run_id, flushed, appended)
        path = publish.publish_run(root, writer.staging, run_id, manifest, report, report["ok"])
    publish.retain(root, cfg.output.keep_runs)
    in_use = {(m, f"{datetime.fromisoformat(info['init']):%Y%m%d%H}")
              for m, info in manifest["models"].items() if info.get("init")}
    cap = cfg.output.cache_max_gb
    publish.retain_cache(cfg.output.cache_dir, cfg.output.keep_cache_runs,
                         None if cap is None else int(cap * 1e9), in_use)
    _logger().info("published run %s at %s", run_id, path)
    return path


def _timed(fn) -> float:
    """Seconds ``fn()`` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@contextmanager
def _cleaned_up(writer: publish.TreeWriter, root, run_id: str):
    """On any error: stop the writer, remove its staging tree (a full disk gets its space
    back; gone already when published or kept aside), name a full disk as such."""
    try:
        yield
    except Exception as e:
        writer.abort()
        shutil.rmtree(writer.staging, ignore_errors=True)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            raise publish.PublishError(f"output disk full under {root}: {e}; run {run_id} not "
                                       f"published, the served run is unchanged") from e
        raise


@contextmanager
def dask_scheduler(cfg: Config):
    """The dask scheduler of `[dask]`: local threads by default, or a distributed cluster
    (a LocalCluster of `workers` processes started here, or an existing one at a tcp address,
    whose workers must see the cache directory at the same path). The client is the default
    scheduler while the context is open, so every `dask.compute` of the stages runs there."""
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
    _logger().info("dask: %s with %d workers", client.scheduler.address,
                   len(client.scheduler_info()["workers"]))
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
    # Sources are asked at once (one may wait for a run being published). A model whose
    # source gave up, or whose run does not decode, is dropped where the products can do
    # without it; a product that cannot (its last model is dropped) keeps the files of the
    # served run (_without, publish.carry_product).
    dropped: dict[str, str] = {}
    unbuilt: dict[str, str] = {}  # product -> why it cannot be built this cycle
    runs = _available({m: discover.submit(quote(cfg), m, now, needed[m]) for m in models}, dropped)
    cfg = _without(cfg, dropped, unbuilt)
    if not cfg.products:
        raise RuntimeError(_nothing_published(cfg, unbuilt))
    runs = {m: runs[m] for m in runs if any(m in pc.models for pc in cfg.products.values())}
    runs.update(_reaching_basetime(cfg, runs, now, needed))
    run_id = _run_id(cfg, runs)
    if publish.current_run(cfg.output.root) == run_id:  # names only complete runs
        log.info("run %s is already published for these model runs: nothing to do", run_id)
        return run_id

    fetched = _available({m: fetch(quote(cfg), runs[m], return_state=True) for m in runs}, dropped)
    cfg = _without(cfg, dropped, unbuilt)
    if not cfg.products:
        raise RuntimeError(_nothing_published(cfg, unbuilt))
    runs = {m: runs[m] for m in fetched}
    # A model's messages are read once: one extraction at every points list that uses it
    # (products sharing a list share its points), each list then takes its points and heights.
    groups: dict[Path, list[str]] = {}
    for pid, pc in cfg.products.items():
        groups.setdefault(pc.points_file, []).append(pid)
    point_sets = {f: point_set(cfg.products[pids[0]]) for f, pids in groups.items()}
    heights = {f: sorted({h for pid in pids for h in PRODUCTS[pid].heights(cfg.products[pid])})
               for f, pids in groups.items()}
    users = {m: [f for f, pids in groups.items() if any(m in cfg.products[p].models for p in pids)]
             for m in fetched}
    ends = {pc.models[-1] for pc in cfg.products.values()}
    extracted: dict[Path, dict] = {f: {} for f in groups}
    model_info = {m: {"init": iso(r.init), "source": r.source, "synthetic": r.synthetic,
                      "steps": len(r.steps), "horizon_hours": max(r.steps) / timedelta(hours=1)}
                  for m, r in runs.items()}
    blends: dict[tuple, list[str]] = {}
    for pid, pc in cfg.products.items():
        blend_heights = tuple(PRODUCTS[pid].heights(pc))
        blends.setdefault((pc.points_file, pc.models, pc.max_lead_hours, blend_heights), []).append(pid)
    outputs, carried = {}, {}
    with dask_scheduler(cfg):  # one scheduler (one cluster) for every extraction of the cycle
        # The models are decoded one after the other in the background, in the order the
        # blends first need them, and a blend is built as soon as its models are in: the last
        # models' decoding (dask's threads, mostly outside the GIL) overlaps the building of
        # the first products (one thread rendering, the others writing files).
        decoding, previous = {}, []
        for m in fetched:
            points = interp.PointSet.concat([point_sets[f] for f in users[m]])
            decoding[m] = decode_extract.submit(quote(cfg), quote(fetched[m]), quote(points),
                                                sorted({h for f in users[m] for h in heights[f]}),
                                                [(len(point_sets[f]), heights[f]) for f in users[m]],
                                                m in ends, wait_for=[allow_failure(f) for f in previous])
            previous = [decoding[m]]
        learning = postprocess_learn.submit(quote(cfg), quote(runs))  # beside the decoding
        updated = datetime.now(timezone.utc).replace(microsecond=0)
        # The products write their files into the run's staging tree as they render them: a
        # run of many points never holds its JSON in memory (publish.TreeWriter).
        writer = publish.TreeWriter(publish.new_run_dir(cfg.output.root, run_id))
        with _cleaned_up(writer, cfg.output.root, run_id):
            corrections, learnt = learning.result()
            for (points_file, models, _, _), pids in blends.items():
                for m in (m for m in models if m not in extracted[points_file] and m not in dropped):
                    out = _available({m: decoding[m]}, dropped).get(m)
                    if out is None:  # dropped: _without takes it out of the blend
                        continue
                    first = 0
                    for f in users[m]:
                        part = out.isel(point=slice(first, first + len(point_sets[f])))
                        extracted[f][m] = part.sel(height=heights[f]) if "height" in part.dims else part
                        first += len(point_sets[f])
                cfg = _without(cfg, dropped, unbuilt)
                pids = [pid for pid in pids if pid in cfg.products]
                if not pids:
                    continue
                models = cfg.products[pids[0]].models
                basetime = runs[models[0]].init
                ctx = RunContext(basetime=basetime, updated=updated, next_update=next_update(cfg, now),
                                 models={m: model_info[m] for m in models})
                outputs.update(build_blend(quote(cfg), pids, quote(extracted[points_file]),
                                           quote(point_sets[points_file]), ctx, quote(writer),
                                           quote({pid: corrections[pid] for pid in pids if pid in corrections})))
            if not outputs:
                raise RuntimeError(_nothing_published(cfg, unbuilt))
            for pid, reason in unbuilt.items():
                carried[pid] = publish.carry_product(cfg.output.root, writer, pid)
                log.warning("%s cannot be built this cycle (%s): %s", pid, reason,
                            "the served run's files of it are carried over" if carried[pid]
                            else "it is absent from this run (no served run has it)")
            report = validate_run(quote(cfg), quote(outputs))
            applied = postprocess_run(quote(cfg), quote(outputs), quote(writer), learnt)
    synthetic = any(r.synthetic for r in runs.values())
    manifest = {
        "run_id": run_id, "created": iso(updated), "synthetic": synthetic,
        "notice": ("SYNTHETIC: produced from the embedded sample source; not a real forecast."
                   if synthetic else "Produced from real model runs."),
        "models": {m: info for m, info in model_info.items() if m not in dropped},
        "products": {pid: {"basetime": iso(runs[pc.models[0]].init), "models": list(pc.models),
                           "horizon_hours": pc.horizon_hours, "freqs": list(pc.freqs),
                           "points": len(pc.points), "seams_t2m": outputs[pid].checks.get("seams", [])}
                     for pid, pc in cfg.products.items()}
        | {pid: {**entry, "carried_because": unbuilt[pid]}
           for pid, entry in carried.items() if entry is not None},
    }
    manifest.update(dropped=dropped,
                    absent={pid: unbuilt[pid] for pid, entry in carried.items() if entry is None},
                    source_notes={m: [*runs[m].notes, *fetched[m].notes] for m in runs})
    report["carried"] = {pid: entry["carried_from"] for pid, entry in carried.items() if entry}
    manifest["postprocess"] = applied
    publish_run(quote(cfg), run_id, quote(outputs), report, manifest)
    return run_id


def _reaching_basetime(cfg: Config, runs: dict[str, RunRef], now: datetime,
                       needed: dict[str, timedelta]) -> dict[str, RunRef]:
    """Runs of the products' last models found again where the run found first ends before a
    product's basetime (its first model's run) plus its horizon: an older run of the last
    model (a fallback) would leave the product's last hours empty. Where none reaches, the
    first run stays (validation then says which product falls short)."""
    until: dict[str, datetime] = {}
    for pc in cfg.products.values():
        first, last = pc.models[0], pc.models[-1]
        if first == last or not {first, last} <= runs.keys():
            continue
        end = runs[first].init + timedelta(hours=pc.horizon_hours)
        if runs[last].init + max(runs[last].steps) < end:
            until[last] = max(end, until.get(last, end))
    found = {}
    for m, end in until.items():
        _logger().info("%s: run %s ends before %s, the horizon from the products' basetime: "
                       "looking for a newer run", m, runs[m].init.isoformat(), end.isoformat())
        state = discover(quote(cfg), m, now, needed[m], end, return_state=True)
        if state.is_completed():
            found[m] = state.result()
        else:
            _logger().warning("%s: %s", m, state.result(raise_on_failure=False))
    return found


def _available(results: dict, dropped: dict[str, str]) -> dict:
    """The values of the tasks (futures or states, by model) that completed; the others'
    models go to ``dropped`` with the reason."""
    out = {}
    for m, res in results.items():
        if hasattr(res, "wait"):  # a future
            res.wait()
            res = res.state
        state = res
        if state.is_completed():
            out[m] = state.result()
        else:
            dropped[m] = _reason(state.result(raise_on_failure=False))
            _logger().warning("%s dropped from this cycle: %s", m, dropped[m])
    return out


def _reason(exc) -> str:
    """Why a stage failed, for the manifest and the log: the message of the pipeline's own
    errors (they say what and where), the kind and message of anything else."""
    if isinstance(exc, (SourceUnavailable, ModelFailed)) or not isinstance(exc, BaseException):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _without(cfg: Config, dropped: dict[str, str], unbuilt: dict[str, str]) -> Config:
    """``cfg`` with the dropped models taken out of the products. A product that loses its
    last model (the one reaching its horizon) cannot be built: it is taken out too, and
    ``unbuilt`` says why (the cycle carries its files over from the served run)."""
    if not dropped:
        return cfg
    products = {}
    for pid, pc in cfg.products.items():
        if pc.models[-1] in dropped:
            m = pc.models[-1]
            unbuilt.setdefault(pid, f"needs {m}, which is dropped: {dropped[m]}")
            continue
        products[pid] = replace(pc, models=tuple(m for m in pc.models if m not in dropped))
    return replace(cfg, products=products)


def _nothing_published(cfg: Config, unbuilt: dict[str, str]) -> str:
    """The failure of a cycle that can build no product: what stays served."""
    served = publish.current_run(cfg.output.root)
    why = "; ".join(f"{pid} {reason}" for pid, reason in unbuilt.items())
    return (f"no product can be built this cycle ({why}); nothing is published, "
            + (f"the previously published run {served} stays served" if served
               else "and no run has been published yet"))


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
