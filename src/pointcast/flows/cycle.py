"""The forecast cycle as a Prefect flow: discover, fetch, decode+extract, build, validate, publish.

`pointcast run` runs it once; `pointcast schedule` serves it as a deployment every 3 hours.
Each task calls one stage of the library (the build stage: ``pointcast.build``); the flow only
wires them, so the same stages run identically from tests, the CLI and the deployment.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prefect import allow_failure, flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, State
from prefect.utilities.annotations import quote

from pointcast import build, interp, plan, publish, steps, stopping
from pointcast.cluster import dask_scheduler
from pointcast.config import Config, load_config
from pointcast.heap import cap_arenas, release_freed
from pointcast.need import needs
from pointcast.outcome import (
    describe,
    failed_outcome,
    published_outcome,
    record_cycle,
    record_upstream,
    shortfalls,
)
from pointcast.products.base import RunContext
from pointcast.publish.retention import retain_scratch, sweep_staging
from pointcast.sources.base import FetchedRun, Need, RunRef
from pointcast.sources.remote import SourceUnavailable
from pointcast.sourcing import NoRunReaching, check_models, fetch_run, find_run
from pointcast.validate import log_report, validate

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
    """A source that gave up at its deadline has retried already, a run the cache has no room
    for will not have it seconds later, nor will a model whose last runs do not reach the
    horizon have one, and a stopped cycle wants none: no Prefect retry then."""
    return not isinstance(state.result(raise_on_failure=False),
                          (SourceUnavailable, NoRunReaching, publish.NoRoom, stopping.Stopped))


# No task takes a cache key (nothing of a cycle is cached: no result is persisted). Prefect's
# default key hashes the inputs: the configuration with its points lists, the run's fields, the
# whole JSON tree, which at many points costs seconds and memory in every task
# (docs/performance.md). The inputs are passed quote()d too, so that Prefect does not walk
# them looking for futures.
@task(retries=2, retry_delay_seconds=5, retry_condition_fn=_retry_unless_unavailable,
      cache_policy=NO_CACHE)
def discover(cfg: Config, model_id: str, now: datetime, needed: timedelta,
             until: datetime | None = None, whole: bool = False) -> RunRef:
    """The model's newest run reaching the horizon (`sourcing.find_run`)."""
    return find_run(cfg, model_id, now, needed, until, whole, _logger())


@task(retries=3, retry_delay_seconds=[5, 30, 60], retry_condition_fn=_retry_unless_unavailable,
      cache_policy=NO_CACHE)
def fetch(cfg: Config, run: RunRef, in_use: frozenset[tuple[str, str]] = frozenset(),
          need: Need | None = None) -> FetchedRun:
    """The run's messages some product reads (``need``) in the cache, the cached runs not
    ``in_use`` evicted first (`sourcing.fetch_run`)."""
    return fetch_run(cfg, run, need, _logger(), in_use)


@task(cache_policy=NO_CACHE)
def decode_extract(cfg: Config, fetched: FetchedRun, points: interp.PointSet, heights: list[float],
                   groups: list[tuple[int, list[float]]], parts: dict) -> tuple[dict, list[str], int]:
    """The model's run at ``points``: the points of every list using it, one after the other,
    each list (``groups``: its number of points and heights) profiled at its own heights,
    written a block of time steps at a time into each list's scratch store (``parts``, by
    points file: `plan.split`), whose paths it returns by points file, with the variables of
    its table the run lacks and the members it holds (`build.extract_model`, which raises
    ``ModelFailed`` naming what failed). On a distributed `[dask] scheduler` the whole model is
    one task on a worker (decoding, extraction and the writes into its stores), so the
    cluster's workers share the models out."""
    return build.extract_run(cfg.dask, fetched, points, heights, groups, parts, _logger())


@task(cache_policy=NO_CACHE)
def build_blend(cfg: Config, pids: list[str], extracted: dict, where: interp.PointSet,
                ctx: RunContext, writer: publish.TreeWriter, corrections: dict,
                stage: publish.ArchiveStage, priority: int = 0) -> dict:
    """The products of one blend (`build.build_blend`)."""
    return build.build_blend(cfg, pids, extracted, where, ctx, writer, corrections, stage, priority)


@task(cache_policy=NO_CACHE)
def build_power(cfg: Config, lists: dict, extracted: dict, contexts: dict, writer: publish.TreeWriter):
    """The power of the products' sites, its files into the run's staging tree (`build.build_power`)."""
    return build.build_power(cfg, lists, extracted, contexts, writer.files())


@task(cache_policy=NO_CACHE)
def validate_run(cfg: Config, outputs: dict) -> dict:
    """The validation gate's report of the run (`validate.validate`), logged."""
    report = validate(outputs, cfg)
    # What validation read back and parsed is freed: not held under the archives' appends.
    release_freed()
    log_report(report, _logger())
    return report


@task(cache_policy=NO_CACHE)
def postprocess_learn(cfg: Config, runs: dict[str, RunRef]) -> tuple[dict, dict]:
    """With `[postprocess]` on, before the builds: the bias estimates learnt from the
    observations valid before each product's run (pointcast.postprocess), by product, and the
    manifest's account of them; with it off, nothing."""
    from pointcast import postprocess

    return postprocess.learnt(cfg, runs)


@task(cache_policy=NO_CACHE)
def postprocess_run(cfg: Config, outputs: dict, writer: publish.TreeWriter, learnt: dict) -> dict:
    """After validation: the verification files (`pointcast verify`) carried into the new
    run's tree; the manifest's account of the corrections (``learnt``, `postprocess_learn`)
    of the products built this cycle (a carried product is not corrected)."""
    from pointcast import postprocess

    return postprocess.applied(cfg, outputs, writer, learnt)


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
    manifest = publish.backend_for(root).run_manifest(run_id) or {"run_id": run_id}
    record_cycle(root, published_outcome(manifest, flow_run.start_time, datetime.now(UTC)))


def _record_failed(flow, flow_run, state) -> None:
    """The flow's on_failure and on_crashed hook: a cycle that published nothing says so (its
    configuration may be what failed: then there is no root to say it in, only the log)."""
    try:
        root = load_config(Path(flow_run.parameters["config_path"])).output.root
    except Exception as exc:  # noqa: BLE001 (the failure is the flow's, reported by Prefect)
        _logger().error("the cycle's outcome is not recorded: %s", exc)
        return
    started = flow_run.start_time or datetime.now(UTC)
    record_cycle(root, failed_outcome(_stopped_message() if stopping.STOP.is_set() else state.message or state.name,
                                      started, datetime.now(UTC)))


def _stopped_message() -> str:
    return f"{stopping.reason()} before the cycle finished"


def _record_stopped(config_path: str, started: datetime) -> None:
    """What the stop's watchdog records when the cycle has not unwound in time
    (`pointcast.stopping`): the outcome the on_crashed hook would have."""
    record_cycle(load_config(Path(config_path)).output.root,
                 failed_outcome(_stopped_message(), started, datetime.now(UTC)))


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
def cycle(config_path: str, now: datetime | None = None) -> str | State:
    """One forecast cycle. Returns the published run id; raises (publishing nothing) on failure.
    A run published lacking something ends the flow run in the state "Degraded" (`_finished`);
    either way the outcome goes to ``<root>/cycles/last.json`` (``pointcast.outcome``).
    SIGTERM or SIGINT stop it, every task at once, publishing nothing (`pointcast.stopping`)."""
    started = datetime.now(UTC)
    with stopping.on_signals(lambda: _record_stopped(config_path, started)):
        return _cycle(config_path, now)


def _cycle(config_path: str, now: datetime | None) -> str | State:
    """The tasks and their order only: what runs when, and what is dropped, carried or degraded,
    is decided by the stages (`pointcast.steps`, `pointcast.plan`). An output root or cache
    that cannot be written fails the cycle before anything is downloaded."""
    cfg = load_config(Path(config_path))
    check_models(cfg)
    publish.backend_for(cfg.output.root).check_writable()
    publish.check_writable(Path(cfg.output.cache_dir), "cache directory")
    wall = datetime.now(UTC)  # the cycle's clock is ``now`` (`pointcast run --at`) running on from here
    now = (now or wall).replace(microsecond=0)
    log = _logger()
    dropped: dict[str, str] = {}  # model -> why it is dropped this cycle
    unbuilt: dict[str, str] = {}  # product -> why it cannot be built this cycle
    runs = steps.discover_runs(
        cfg, lambda m, needed: discover.submit(quote(cfg), m, now, needed),
        lambda m, needed, until, whole: discover(quote(cfg), m, now, needed, until, whole, return_state=True),
        dropped, log)
    record_upstream(cfg.output.root, {m: run.init for m, run in runs.items()}, now)  # for the stale flag
    cfg = plan.buildable(cfg, dropped, unbuilt, runs)
    run_id = plan.run_id(cfg, plan.runs_used(cfg, runs))
    if publish.current_run(cfg.output.root) == run_id:  # names only complete runs
        log.info("run %s is already published for these model runs: nothing to do", run_id)
        return _finished(publish.backend_for(cfg.output.root).run_manifest(run_id) or {"run_id": run_id})

    used = plan.runs_used(cfg, runs)
    in_use = plan.cache_runs(used)  # evicted from the cache before any download
    wanted = needs(cfg, used)  # only the messages some product reads
    runs, fetched = steps.fetch_runs(used, lambda run: fetch(quote(cfg), run, in_use, quote(wanted.get(run.model)),
                                                             return_state=True), dropped, log)
    cfg = plan.buildable(cfg, dropped, unbuilt, runs)
    # One scheduler (one cluster) for every extraction and build of the cycle; the scratch
    # stores of the extracted series, removed once the products are built (or failed).
    # The decoding tasks are waited for before the scratch stores they write are removed.
    with dask_scheduler(cfg), interp.scratch.held(interp.scratch.directory(cfg.output.cache_dir, run_id)) as scratch, \
            steps.awaited() as decoding:
        retain_scratch(cfg.output.cache_dir)  # what a killed cycle left
        sweep_staging(cfg.output.root)  # ...and its staging tree, before this cycle makes its own
        lists = steps.extract(cfg, fetched, scratch, lambda run, points, heights, groups, parts, after: (
            decode_extract.submit(quote(cfg), quote(run), quote(points), heights, groups, quote(parts),
                                  wait_for=[] if after is None else [allow_failure(after)])), decoding)
        learning = postprocess_learn.submit(quote(cfg), quote(runs))  # beside the decoding
        # Every product of the run says it was generated now (updated_time, the manifest's
        # created); the run is published once all are built and validated (published_at).
        generated = (now + (datetime.now(UTC) - wall)).replace(microsecond=0)
        # The products write their files into the run's staging tree as they render them: a
        # run of many points never holds its JSON in memory (publish.TreeWriter); beside it,
        # the products' archives of the run, written by the slices that build them.
        writer = publish.TreeWriter(publish.new_run_dir(cfg.output.root, run_id), cfg.output.json)
        stage = publish.ArchiveStage(writer.staging)
        with publish.cleaned_up(writer, cfg.output.root, run_id):
            corrections, learnt = learning.result()
            model_info = plan.model_info(runs)
            cfg, outputs, lacking, members = steps.build_blends(
                cfg, runs, lists, decoding,
                lambda cfg, pids, extracted, where, ctx, priority: (
                    build_blend.submit if plan.distributed(cfg.dask) else build_blend)(
                    quote(cfg), pids, quote(extracted), quote(where), ctx, quote(writer),
                    quote(plan.corrections_of(corrections, pids)), quote(stage), priority=priority),
                dropped, unbuilt, log, lambda cfg, pid: plan.run_context(cfg, pid, runs, model_info, generated, now))
            outputs |= steps.build_power(
                cfg, lists, decoding, dropped,
                lambda extracted, contexts: build_power(quote(cfg), quote(lists), quote(extracted), contexts,
                                                        quote(writer)),
                lambda cfg, pid: plan.run_context(cfg, pid, runs, model_info, generated, now), log)
            carried = steps.carry_unbuilt(cfg, writer, unbuilt, log)
            applied = postprocess_run(quote(cfg), quote(outputs), quote(writer), learnt)
            # Validation reads the staging tree only: it runs while the cluster closes.
            validating = validate_run.submit(quote(cfg), quote(outputs))
    with publish.cleaned_up(writer, cfg.output.root, run_id):
        report = validating.result()
    manifest = plan.manifest(cfg, run_id, runs, fetched, outputs, dropped, unbuilt, carried, generated, applied,
                             lacking, members)
    report["carried"] = plan.carried_runs(carried)
    publish_run(quote(cfg), run_id, quote(outputs), report, manifest)
    return _finished(manifest)


def deployment(cfg: Config):
    """The scheduled deployment of the cycle: every `schedule.every_hours` hours (a divisor of
    24), `schedule.offset_minutes` past the tick, for `pointcast schedule` to serve."""
    hours, minutes = divmod(cfg.schedule.offset_minutes, 60)
    cron = f"{minutes} {hours}-23/{cfg.schedule.every_hours} * * *"
    return cycle.to_deployment(name=f"pointcast-every-{cfg.schedule.every_hours}h", cron=cron,
                               parameters={"config_path": str(cfg.path)})
