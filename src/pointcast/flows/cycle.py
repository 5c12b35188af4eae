"""The forecast cycle as a Prefect flow: discover, fetch, decode+extract, build, validate, publish.

`pointcast run` runs it once; `pointcast schedule` serves it as a deployment every 3 hours.
Each task calls one stage of the library (the build stage: ``pointcast.build``); the flow only
wires them, so the same stages run identically from tests, the CLI and the deployment.
"""

from __future__ import annotations

import json
from concurrent.futures import CancelledError
import logging
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from prefect import allow_failure, flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import wait
from prefect.states import Completed, State
from prefect.utilities.annotations import quote

from pointcast import build, interp, plan, publish
from pointcast.build import ModelFailed
from pointcast.cluster import dask_scheduler
from pointcast.config import Config, load_config
from pointcast.heap import cap_arenas, release_freed
from pointcast.products.base import RunContext
from pointcast.outcome import describe, failed_outcome, published_outcome, record_cycle, shortfalls
from pointcast.publish.retention import retain_scratch, sweep_staging
from pointcast.sources import MODELS, run_steps
from pointcast.sources.base import FetchedRun, RunRef
from pointcast.sources.remote import SourceUnavailable, candidate_runs
from pointcast.sourcing import make_source
from pointcast.validate import validate

# The malloc arenas of the cycle's process, capped when the flow is imported, before its
# threads allocate: each arena keeps what its threads freed, so at glibc's default (eight a
# core) the process's RSS grows with every thread that ever decoded, built or appended
# (pointcast.heap.cap_arenas; docs/performance.md, "Malloc arenas").
ARENAS = 2
cap_arenas(ARENAS)


def _logger():
    try:
        return get_run_logger()
    except Exception:  # outside a flow run (direct calls in tests)
        return logging.getLogger("pointcast.flow")


def _retry_unless_unavailable(task, task_run, state) -> bool:
    """A source that gave up at its deadline has retried already: no Prefect retry then."""
    return not isinstance(state.result(raise_on_failure=False), SourceUnavailable)


# No task takes a cache key (nothing of a cycle is cached: no result is persisted). Prefect's
# default key hashes the inputs: the configuration, with its points lists (2.4 s and 0.2 GB
# for each task at 50,000 points a list, the models' five at once), the run's fields, the
# whole JSON tree. The inputs are passed quote()d too, so that Prefect does not walk them
# looking for futures.
@task(retries=2, retry_delay_seconds=5, retry_condition_fn=_retry_unless_unavailable,
      cache_policy=NO_CACHE)
def discover(cfg: Config, model_id: str, now: datetime, needed: timedelta,
             until: datetime | None = None, whole: bool = False) -> RunRef:
    """Newest run of the model whose horizon reaches `needed` from its start, or the time
    `until` where given (a product's basetime plus its horizon; walks back run by run).
    ``whole``: every step of the run, beyond the source's `horizon_hours` (the model stands in
    for a dropped one after it: `plan.short_of_horizon`)."""
    model = MODELS[model_id]
    source = make_source(cfg.models[model_id].source, cfg.source_for(model_id), whole=whole)

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


@task(retries=3, retry_delay_seconds=[5, 30, 60], retry_condition_fn=_retry_unless_unavailable,
      cache_policy=NO_CACHE)
def fetch(cfg: Config, run: RunRef) -> FetchedRun:
    model = MODELS[run.model]
    source = make_source(cfg.models[run.model].source, cfg.source_for(run.model))
    fetched = source.fetch(run, model, cfg.output.cache_dir)
    _logger().info("%s: %d files ready", run.model, len(fetched.files))
    return fetched


@task(cache_policy=NO_CACHE)
def decode_extract(cfg: Config, fetched: FetchedRun, points: interp.PointSet, heights: list[float],
                   groups: list[tuple[int, list[float]]], parts: dict) -> tuple[dict, list[str]]:
    """The model's run at ``points``: the points of every list using it, one after the other,
    each list (``groups``: its number of points and heights) profiled at its own heights,
    written a block of time steps at a time into each list's scratch store (``parts``, by
    points file: `plan.split`), whose paths it returns by points file, with the variables of
    its table the run lacks (`build.extract_model`, which raises ``ModelFailed`` naming what
    failed). On a distributed `[dask] scheduler` the whole model is one task on a worker
    (decoding, extraction and the writes into its stores), so the cluster's workers share the
    models out."""
    args = (fetched, points, heights, groups, list(parts.values()))
    if plan.distributed(cfg.dask):
        from distributed import default_client

        key = f"extract_model-{uuid.uuid4().hex}"
        lacking, variables, times = default_client().submit(build.on_worker, build.extract_model, *args,
                                                            key=key).result()
    else:
        lacking, variables, times = build.extract_model(*args)
    model = fetched.run.model
    if lacking:
        _logger().warning("%s: the run's files hold no field for %s: the models after it in the "
                          "blends supply them, or their elements are missing (manifest "
                          "'degraded')", model, ", ".join(lacking))
    _logger().info("%s: decoded %d variables on %d times, extracted %d points", model,
                   variables, times, len(points))
    return {f: part.path for f, part in parts.items()}, lacking


@task(cache_policy=NO_CACHE)
def build_blend(cfg: Config, pids: list[str], extracted: dict, where: interp.PointSet,
                ctx: RunContext, writer: publish.TreeWriter, corrections: dict,
                stage: publish.ArchiveStage, priority: int = 0) -> dict:
    """The products of one blend (`build.build_blend`)."""
    return build.build_blend(cfg, pids, extracted, where, ctx, writer, corrections, stage, priority)


@task(cache_policy=NO_CACHE)
def validate_run(cfg: Config, outputs: dict) -> dict:
    report = validate(outputs, cfg)
    # What validation read back and parsed is freed: not held under the archives' appends.
    release_freed()
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
    """The run made durable, archived and visible (or kept aside), then retention
    (`publish.publish_cycle`)."""
    return publish.publish_cycle(cfg, run_id, outputs, report, manifest, _logger())


def _record_published(flow, flow_run, state) -> None:
    """The flow's on_completion hook: the outcome of the run it published (or found published),
    from that run's manifest (``pointcast.outcome``), for the server's /metrics."""
    root = load_config(Path(flow_run.parameters["config_path"])).output.root
    if publish.is_url(root):  # no server reads an object-store root (``record_cycle``)
        return
    run_id = state.result()
    manifest = json.loads((Path(root) / publish.RUNS / run_id / "manifest.json").read_bytes())
    record_cycle(root, published_outcome(manifest, flow_run.start_time, datetime.now(timezone.utc)))


def _record_failed(flow, flow_run, state) -> None:
    """The flow's on_failure and on_crashed hook: a cycle that published nothing says so (its
    configuration may be what failed: then there is no root to say it in, only the log)."""
    try:
        root = load_config(Path(flow_run.parameters["config_path"])).output.root
    except Exception as exc:  # noqa: BLE001 (the failure is the flow's, reported by Prefect)
        _logger().error("the cycle's outcome is not recorded: %s", exc)
        return
    started = flow_run.start_time or datetime.now(timezone.utc)
    record_cycle(root, failed_outcome(state.message or state.name, started, datetime.now(timezone.utc)))


def _finished(manifest: dict) -> State | str:
    """The flow's return: the run id, in a Completed state named "Degraded" when the run lacks
    something (``pointcast.outcome.shortfalls``), which a Prefect automation can match (the event
    ``prefect.flow-run.Degraded``, docs/operations.md); a caller still gets the run id."""
    lacks = shortfalls(manifest)
    if any(lacks.values()):
        return Completed(name="Degraded", message=describe(lacks), data=manifest["run_id"])
    return manifest["run_id"]


@flow(name="pointcast-cycle", log_prints=True, on_completion=[_record_published],
      on_failure=[_record_failed], on_crashed=[_record_failed])
def cycle(config_path: str, now: datetime | None = None) -> str:
    """One forecast cycle. Returns the published run id; raises (publishing nothing) on failure.
    A run published lacking something ends the flow run in the state "Degraded" (`_finished`);
    either way the outcome goes to ``<root>/cycles/last.json`` (``pointcast.outcome``)."""
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
    # served run (plan.without, publish.carry_product).
    dropped: dict[str, str] = {}
    unbuilt: dict[str, str] = {}  # product -> why it cannot be built this cycle
    runs = _available({m: discover.submit(quote(cfg), m, now, needed[m]) for m in models}, dropped)
    runs.update(_reaching_basetime(cfg, runs, now, needed, dropped))
    cfg = plan.without(cfg, dropped, unbuilt, runs)
    if not cfg.products:
        raise RuntimeError(plan.nothing_published(cfg, unbuilt))
    runs = {m: runs[m] for m in runs if any(m in pc.models for pc in cfg.products.values())}
    run_id = plan.run_id(cfg, runs)
    if publish.current_run(cfg.output.root) == run_id:  # names only complete runs
        log.info("run %s is already published for these model runs: nothing to do", run_id)
        return run_id

    fetched = _available({m: fetch(quote(cfg), runs[m], return_state=True) for m in runs}, dropped)
    cfg = plan.without(cfg, dropped, unbuilt, runs)
    if not cfg.products:
        raise RuntimeError(plan.nothing_published(cfg, unbuilt))
    runs = {m: runs[m] for m in fetched}
    lists = plan.points_lists(cfg)
    users = plan.model_users(cfg, lists, fetched)
    lacking: dict[str, list[str]] = {}
    # Each model's series at each points list, by points file: the path of its scratch store.
    extracted: dict[Path, dict[str, str]] = {f: {} for f in lists}
    model_info = plan.model_info(runs)
    outputs, carried = {}, {}
    # One scheduler (one cluster) for every extraction and build of the cycle; the scratch
    # stores of the extracted series, removed once the products are built (or failed).
    scratch_dir = interp.scratch.directory(cfg.output.cache_dir, run_id)
    with dask_scheduler(cfg), interp.scratch.held(scratch_dir) as scratch:
        retain_scratch(cfg.output.cache_dir)  # what a killed cycle left
        sweep_staging(cfg.output.root)  # ...and its staging tree, before this cycle makes its own
        # With threads the models are decoded one after the other in the background, in the
        # order the blends first need them, and a blend is built as soon as its models are in:
        # the last models' decoding (dask's threads, mostly outside the GIL) overlaps the
        # building of the first products (one thread rendering, the others writing files). On
        # a cluster every model is a task of its own, all of them at once: the workers take
        # them, and the blends' slices, as they come free.
        chained = not plan.distributed(cfg.dask)
        decoding, previous = {}, []
        for m in fetched:
            points, heights, groups = plan.extraction([lists[f] for f in users[m]])
            parts = plan.split(cfg, scratch / m, {f: lists[f] for f in users[m]})
            decoding[m] = decode_extract.submit(quote(cfg), quote(fetched[m]), quote(points), heights, groups,
                                                quote(parts), wait_for=[allow_failure(f) for f in previous])
            previous = [decoding[m]] if chained else []
        learning = postprocess_learn.submit(quote(cfg), quote(runs))  # beside the decoding
        # Every product of the run says it was generated now (updated_time, the manifest's
        # created); the run is published once all are built and validated (published_at).
        generated = datetime.now(timezone.utc).replace(microsecond=0)
        # The products write their files into the run's staging tree as they render them: a
        # run of many points never holds its JSON in memory (publish.TreeWriter).
        writer = publish.TreeWriter(publish.new_run_dir(cfg.output.root, run_id), cfg.output.json)
        # Beside it, the products' archives of the run, written by the slices that build them.
        stage = publish.ArchiveStage(writer.staging)
        with publish.cleaned_up(writer, cfg.output.root, run_id):
            corrections, learnt = learning.result()
            # With threads a blend is built in the forked processes, one blend after the other.
            # On a cluster each blend starts as soon as its models are in, beside the blends
            # started before it, whose slices run first (``priority``): the workers go on to the
            # next blend's slices while the flow makes its staged stores or a last slice ends.
            building = []
            try:
                for k, ((points_file, models, _, _), pids) in enumerate(plan.blends(cfg).items()):
                    for m in (m for m in models if m not in extracted[points_file] and m not in dropped):
                        done = _available({m: decoding[m]}, dropped).get(m)
                        if done is None:  # dropped: plan.without takes it out of the blend
                            continue
                        stores, lacking[m] = done
                        for f, path in stores.items():
                            extracted[f][m] = path
                    cfg = plan.without(cfg, dropped, unbuilt, runs)
                    pids = [pid for pid in pids if pid in cfg.products]
                    if not pids:
                        continue
                    ctx = plan.run_context(cfg, pids[0], runs, model_info, generated, now)
                    args = (quote(cfg), pids, quote(dict(extracted[points_file])),
                            quote(lists[points_file].points), ctx, quote(writer),
                            quote({pid: corrections[pid] for pid in pids if pid in corrections}), quote(stage))
                    if chained:
                        outputs.update(build_blend(*args))
                    else:
                        building.append(build_blend.submit(*args, priority=-k))
            finally:  # none still writes into the staging tree a failure removes
                wait(building)
            failures = []
            for future in building:
                try:
                    outputs.update(future.result())
                except Exception as e:  # noqa: BLE001 (raised below: the cause first)
                    failures.append(e)
            if failures:  # a blend cancelled because another one's worker died says less than that
                raise next((e for e in failures if not isinstance(e, CancelledError)), failures[0])
            if not outputs:
                raise RuntimeError(plan.nothing_published(cfg, unbuilt))
            for pid, reason in unbuilt.items():
                carried[pid] = publish.carry_product(cfg.output.root, writer, pid)
                log.warning("%s cannot be built this cycle (%s): %s", pid, reason,
                            "the served run's files of it are carried over" if carried[pid]
                            else "it is absent from this run (no served run has it)")
            applied = postprocess_run(quote(cfg), quote(outputs), quote(writer), learnt)
            # Validation reads the staging tree only: it runs while the cluster closes.
            validating = validate_run.submit(quote(cfg), quote(outputs))
    with publish.cleaned_up(writer, cfg.output.root, run_id):
        report = validating.result()
    manifest = plan.manifest(cfg, run_id, runs, fetched, outputs, dropped, unbuilt, carried, generated, applied,
                              lacking)
    report["carried"] = {pid: entry["carried_from"] for pid, entry in carried.items() if entry}
    publish_run(quote(cfg), run_id, quote(outputs), report, manifest)
    return _finished(manifest)


def _reaching_basetime(cfg: Config, runs: dict[str, RunRef], now: datetime,
                       needed: dict[str, timedelta], dropped: dict[str, str]) -> dict[str, RunRef]:
    """Runs of the products' last models found again where the run found first ends before a
    product's basetime plus its horizon (`plan.short_of_horizon`): an older run of the last
    model (a fallback), or one that stands in for a dropped model after it. Where none
    reaches, the first run stays (`plan.without` or validation then says which product falls
    short)."""
    found = {}
    for m, (end, whole) in plan.short_of_horizon(cfg, runs, dropped).items():
        _logger().info("%s: run %s ends before %s, the horizon from the products' basetime: "
                       "looking for %s", m, runs[m].init.isoformat(), end.isoformat(),
                       "its whole run (the models after it are dropped)" if whole else "a newer run")
        state = discover(quote(cfg), m, now, needed[m], end, whole, return_state=True)
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


def deployment(cfg: Config):
    """The scheduled deployment of the cycle: every `schedule.every_hours` hours (a divisor of
    24), `schedule.offset_minutes` past the tick, for `pointcast schedule` to serve."""
    hours, minutes = divmod(cfg.schedule.offset_minutes, 60)
    cron = f"{minutes} {hours}-23/{cfg.schedule.every_hours} * * *"
    return cycle.to_deployment(name=f"pointcast-every-{cfg.schedule.every_hours}h", cron=cron,
                               parameters={"config_path": str(cfg.path)})
