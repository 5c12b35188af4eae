"""The order of a cycle's steps between the flow's tasks: which model runs are in and which are
dropped, and why; the runs looked for again to reach the products' horizons; the models
decoded one after the other (threads) or all at once (a cluster); each blend built as soon as
its models are in; the products that cannot be built carried over.

It is handed the flow's tasks as functions, and their futures or states (anything with
``wait()`` and ``state``, or with ``is_completed()`` and ``result()``): it knows nothing of
Prefect, and `pointcast.flows.cycle` holds only the tasks and their order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import CancelledError
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import plan, publish
from .build import ModelFailed
from .config import Config
from .contract import POWER_PRODUCT
from .sources.base import FetchedRun, RunRef
from .sources.remote import SourceUnavailable

Log = logging.Logger | logging.LoggerAdapter


def settled(results: Mapping[str, Any], dropped: dict[str, str], log: Log) -> dict:
    """The values of the tasks (futures or states, by model) that completed; the others'
    models go to ``dropped`` with the reason (`reason`)."""
    out = {}
    for m, res in results.items():
        if hasattr(res, "wait"):  # a future
            res.wait()
            res = res.state
        if res.is_completed():
            out[m] = res.result()
        else:
            dropped[m] = reason(res.result(raise_on_failure=False))
            log.warning("%s dropped from this cycle: %s", m, dropped[m])
    return out


def reason(exc: object) -> str:
    """Why a stage failed, for the manifest and the log: the message of the pipeline's own
    errors (they say what and where), the kind and message of anything else."""
    if isinstance(exc, (SourceUnavailable, ModelFailed, publish.NoRoom)) or not isinstance(exc, BaseException):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def discover_runs(cfg: Config, submit: Callable[[str, timedelta], Any],
                  again: Callable[[str, timedelta, datetime, bool], Any], dropped: dict[str, str],
                  log: Log) -> dict[str, RunRef]:
    """The newest run of every model of the products, its source asked at once (one may wait
    for a run being published: ``submit(model, needed)``, `plan.needed`); then, where a
    product's last model left ends before its basetime plus its horizon (`plan.short_of_horizon`),
    that model looked for again (``again(model, needed, until, whole)``, a state): an older run
    of it (a fallback), or one standing in for a dropped model after it. Where none reaches,
    the first run stays (`plan.without` or validation then says which product falls short)."""
    needed = plan.needed(cfg)
    runs = settled({m: submit(m, hours) for m, hours in needed.items()}, dropped, log)
    for m, (end, whole) in plan.short_of_horizon(cfg, runs, dropped).items():
        log.info("%s: run %s ends before %s, the horizon from the products' basetime: looking for %s",
                 m, runs[m].init.isoformat(), end.isoformat(),
                 "its whole run (the models after it are dropped)" if whole else "a newer run")
        state = again(m, needed[m], end, whole)
        if state.is_completed():
            runs[m] = state.result()
        else:
            log.warning("%s: %s", m, state.result(raise_on_failure=False))
    return runs


def fetch_runs(runs: Mapping[str, RunRef], fetch: Callable[[RunRef], Any], dropped: dict[str, str],
               log: Log) -> tuple[dict[str, RunRef], dict[str, FetchedRun]]:
    """Each model's run fetched, one after the other (``fetch(run)``, a state); the runs (their
    steps those fetched: `pointcast.need`) and files of those that were."""
    fetched = settled({m: fetch(run) for m, run in runs.items()}, dropped, log)
    return {m: fetched[m].run for m in fetched}, fetched


@contextmanager
def awaited() -> Iterator[dict[str, Any]]:
    """A dict for the futures of the tasks writing into what the enclosing block removes when
    it ends (the scratch stores, `extract`): on leaving, however, every one of them is waited
    for, so that none writes after the removal (a failure or a stop ends the block while
    models still decode; told to stop, they end at their next block: `interp.scratch.write`).
    Their failures are reported where their results are used."""
    futures: dict[str, Any] = {}
    try:
        yield futures
    finally:
        for future in futures.values():
            future.wait()


def extract(cfg: Config, fetched: Mapping[str, FetchedRun], scratch: Path, submit: Callable[..., Any],
            decoding: dict[str, Any]) -> dict[Path, plan.PointsList]:
    """Every model's run decoded and extracted at the points lists using it (``submit(fetched,
    points, heights, groups, parts, after)``, a future; `plan.extraction`, `plan.split`), into
    scratch stores under ``scratch``. With threads the models are decoded one after the other
    in the background (``after``: the future of the one before), in the order the blends
    first need them, so that the last models' decoding (dask's threads, mostly outside the
    GIL) overlaps the building of the first products (`build_blends`); on a cluster every
    model is a task of its own, all of them at once, and the workers take them, and the
    blends' slices, as they come free. The futures go into ``decoding`` by model as they are
    submitted (`awaited`); returns the points lists."""
    lists = plan.points_lists(cfg)
    users = plan.model_users(cfg, lists, fetched)
    chained = not plan.distributed(cfg.dask)
    previous = None
    for m, run in fetched.items():
        points, heights, groups = plan.extraction([lists[f] for f in users[m]])
        parts = plan.split(cfg, scratch / m, {f: lists[f] for f in users[m]})
        decoding[m] = submit(run, points, heights, groups, parts, previous)
        previous = decoding[m] if chained else None
    return lists


def build_blends(cfg: Config, runs: Mapping[str, RunRef], lists: Mapping[Path, plan.PointsList],
                 decoding: Mapping[str, Any], build: Callable[..., Any], dropped: dict[str, str],
                 unbuilt: dict[str, str], log: Log, context: Callable[[Config, str], Any]
                 ) -> tuple[Config, dict, dict[str, list[str]], dict[str, int]]:
    """Each blend built (`plan.blends`; ``build(cfg, pids, extracted, where, ctx, priority)``:
    its outputs by product with threads, a future of them on a cluster, ``ctx`` from
    ``context(cfg, pid)``) as soon as its models are in (``decoding``, `extract`). A model
    whose decoding failed is dropped, and the products go on without it where they can
    (`plan.without`). With threads a blend is built in the forked processes, one blend after
    the other; on a cluster each blend starts as soon as its models are in, beside the blends
    started before it, whose slices run first (``priority``). A failure is raised once no
    blend still writes into the staging tree (which the failure removes). Returns the
    configuration left, the outputs by product, the variables each model's run lacks and the
    members each ensemble's run holds."""
    chained = not plan.distributed(cfg.dask)
    extracted: dict[Path, dict[str, str]] = {f: {} for f in lists}
    lacking: dict[str, list[str]] = {}
    members: dict[str, int] = {}
    outputs: dict = {}
    building = []
    try:
        for k, ((points_file, models, _, _, ensembles), pids) in enumerate(plan.blends(cfg).items()):
            for m in (m for m in models + ensembles if m not in extracted[points_file] and m not in dropped):
                done = settled({m: decoding[m]}, dropped, log).get(m)
                if done is None:  # dropped: plan.without takes it out of the blend
                    continue
                stores, lacking[m], members[m] = done
                for f, path in stores.items():
                    extracted[f][m] = path
            cfg = plan.without(cfg, dropped, unbuilt, runs)
            pids = [pid for pid in pids if pid in cfg.products]
            if not pids:
                continue
            made = build(cfg, pids, dict(extracted[points_file]), lists[points_file].points,
                         context(cfg, pids[0]), -k)
            if chained:
                outputs.update(made)
            else:
                building.append(made)
    finally:  # none still writes into the staging tree a failure removes
        for future in building:
            future.wait()
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
    return cfg, outputs, lacking, members


def build_power(cfg: Config, lists: Mapping[Path, plan.PointsList], decoding: Mapping[str, Any],
                dropped: dict[str, str], build: Callable[..., Any], context: Callable[[Config, str], Any],
                log: Log) -> dict:
    """The power of the products' sites (``build(extracted, contexts)``: `build.build_power`,
    the output or None), once the products are built: from the scratch stores of the models
    left (``decoding``, `extract`), by points file and model, with each product's run context.
    Returns the outputs to add, by product ("power"), none without sites."""
    if not any(pc.sites for pc in cfg.products.values()):
        return {}
    extracted: dict[Path, dict[str, str]] = {f: {} for f in lists}
    for m, (stores, _, _) in settled({m: d for m, d in decoding.items() if m not in dropped}, dropped, log).items():
        for f, path in stores.items():
            extracted[f][m] = path
    made = build(extracted, {pid: context(cfg, pid) for pid, pc in cfg.products.items() if pc.sites})
    return {} if made is None else {POWER_PRODUCT: made}


def carry_unbuilt(cfg: Config, writer: publish.TreeWriter, unbuilt: Mapping[str, str],
                  log: Log) -> dict[str, dict | None]:
    """The served run's files of each product that cannot be built this cycle, carried into
    the new run (`publish.carry_product`; None where no served run has it: it is absent)."""
    carried = {}
    for pid, why in unbuilt.items():
        carried[pid] = publish.carry_product(cfg.output.root, writer, pid)
        log.warning("%s cannot be built this cycle (%s): %s", pid, why,
                    "the served run's files of it are carried over" if carried[pid]
                    else "it is absent from this run (no served run has it)")
    return carried
