"""Planning a cycle: which runs, which products, which extractions, blends and slices, the run
id and the manifest: decisions made from the configuration and the model runs found, before and
after the products are built (`build`), with no data of the runs in hand.

Products sharing a points file share one extraction of each model (`points_lists`,
`extraction`, `split`); products sharing points, models, lead limits and heights share one
blend (`blends`), built in slices of points (`slices`). A product that lost a model is built
from the models left when they reach its horizon (`without`, `short_of_horizon`). The
manifest (`manifest`) says what the run was built from, and what was dropped, carried or
degraded. No Prefect here: `pointcast.flows.cycle` wires these functions into tasks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from . import interp, publish
from .config import Config, DaskConfig, Point, ProductConfig, Site, WindSite
from .contract import POWER_PRODUCT
from .grids import grid_for
from .products import PRODUCTS
from .products.base import ProductOutput, RunContext, iso
from .sources import MODELS, run_steps
from .sources.base import FetchedRun, ModelSpec, RunRef


@dataclass(frozen=True)
class PointsList:
    """The products of one points file (``pids``): its points, sampled at their product grid
    cells (`point_set`), and every height one of its products needs. The sites of its
    products (their wind farms and solar plants) are extracted as more points of the list,
    after its own (``sites``: each product's rows of ``points``), at their hub heights too:
    their series are blended as the points' are, and the power stage reads them
    (`build.build_power`); the products' builds read the points' rows only."""

    pids: list[str]
    points: interp.PointSet
    heights: list[float]
    sites: dict[str, slice] = field(default_factory=dict)


def points_lists(cfg: Config) -> dict[Path, PointsList]:
    """The products by points file: a model's messages are read once, one extraction at
    every points list using it (products sharing a list share its points)."""
    groups: dict[Path, list[str]] = {}
    for pid, pc in cfg.products.items():
        groups.setdefault(pc.points_file, []).append(pid)
    out = {}
    for f, pids in groups.items():
        sets, rows, first = [point_set(cfg.products[pids[0]])], {}, len(cfg.products[pids[0]].points)
        for pid in (pid for pid in pids if cfg.products[pid].sites):
            sets.append(point_set(cfg.products[pid], cfg.products[pid].sites))
            rows[pid] = slice(first, first + len(cfg.products[pid].sites))
            first = rows[pid].stop
        heights = {h for pid in pids for h in PRODUCTS[pid].heights(cfg.products[pid])}
        heights |= {s.hub_height_m for pid in rows for s in cfg.products[pid].sites if isinstance(s, WindSite)}
        out[f] = PointsList(pids, interp.PointSet.concat(sets), sorted(heights), rows)
    return out


def point_set(pc: ProductConfig, places: Sequence[Point | Site] | None = None) -> interp.PointSet:
    """A product's points (or ``places``: its sites), sampled at the centres of their
    product grid cells."""
    grid = grid_for(pc.id)
    places = pc.points if places is None else places
    centres = [grid.cell_centre(grid.cell_key(p.lat, p.lon)) for p in places]
    return interp.PointSet(
        ids=np.array([p.id for p in places]),
        lats=np.array([c[0] for c in centres]), lons=np.array([c[1] for c in centres]),
        elevation=np.array([np.nan if (e := getattr(p, "elevation", None)) is None else e for p in places]),
    )


def model_users(cfg: Config, lists: dict[Path, PointsList], models) -> dict[str, list[Path]]:
    """The points lists each of ``models`` is extracted at (those of the products it feeds)."""
    return {m: [f for f, pl in lists.items()
                if any(m in cfg.products[p].models + cfg.products[p].ensembles for p in pl.pids)]
            for m in models}


def extraction(lists: list[PointsList]) -> tuple[interp.PointSet, list[float], list[tuple[int, list[float]]]]:
    """A model's one extraction at several points lists (`interp.extract`): their points one
    after the other, every height any needs, and each list's number of points and heights."""
    return (interp.PointSet.concat([pl.points for pl in lists]),
            sorted({h for pl in lists for h in pl.heights}),
            [(len(pl.points), pl.heights) for pl in lists])


def split(cfg: Config, where: Path, lists: dict[Path, PointsList]) -> dict[Path, interp.scratch.Part]:
    """A model's one extraction (`extraction`) back into its points lists: each list's scratch
    store under ``where`` (its points, at its own heights), in chunks of its build slices'
    points (`slice_points`)."""
    out, first = {}, 0
    for k, (f, pl) in enumerate(lists.items()):
        n = len(pl.points)
        out[f] = interp.scratch.Part(str(where / f"{k}-{Path(f).stem}"), slice(first, first + n),
                                     pl.heights, slice_points(cfg, n))
        first += n
    return out


def blends(cfg: Config) -> dict[tuple, list[str]]:
    """The products blended together, by (points file, models, lead limits, heights,
    ensembles): they share one resampling and blend of their models (`blend_models`)."""
    out: dict[tuple, list[str]] = {}
    for pid, pc in cfg.products.items():
        out.setdefault((pc.points_file, pc.models, pc.max_lead_hours, tuple(blend_heights(cfg, [pid])),
                        pc.ensembles), []).append(pid)
    return out


def without(cfg: Config, dropped: dict[str, str], unbuilt: dict[str, str],
            runs: Mapping[str, RunRef]) -> Config:
    """``cfg`` with the dropped models taken out of the products. A product that lost a model
    is built from the models left when the last of them reaches the end of its horizon from
    its basetime (the first one's run): that model then serves to its own horizon (its
    `max_lead_hours` gave way to a model after it, which is gone). A product they do not
    reach is taken out, and ``unbuilt`` says why (the cycle carries its files over from the
    served run)."""
    if not dropped:
        return cfg
    products = {}
    for pid, pc in cfg.products.items():
        # A product without an ensemble takes its probabilities from the ensembles left, or
        # from the neighbourhood (`pointcast.ensemble`): not a reason to carry it.
        pc = replace(pc, ensembles=tuple(e for e in pc.ensembles if e not in dropped))
        models = tuple(m for m in pc.models if m not in dropped)
        if models == pc.models:
            products[pid] = pc
            continue
        gone = ", ".join(f"{m}, which is dropped: {dropped[m]}" for m in pc.models if m in dropped)
        if not models:
            unbuilt.setdefault(pid, f"needs {gone}")
            continue
        end, last_end = _reach(pc, models, runs)
        if last_end < end:
            reach = (last_end - runs[models[0]].init) / timedelta(hours=1)
            unbuilt.setdefault(pid, f"needs {gone} (the models left, {', '.join(models)}, reach "
                                    f"+{reach:g} h of its {pc.horizon_hours} h)")
            continue
        limits = tuple((m, h) for m, h in pc.max_lead_hours if m in models[:-1])
        products[pid] = replace(pc, models=models, max_lead_hours=limits)
    return replace(cfg, products=products)


def short_of_horizon(cfg: Config, runs: dict[str, RunRef], dropped: dict[str, str]) -> dict[str, tuple[datetime, bool]]:
    """The models to look for again, by model: (the time their run must reach, whether beyond
    their source's `horizon_hours`). Each product's last model left (not dropped) must reach
    its basetime (its first model's run) plus its horizon: an older run of it (a fallback)
    would leave the product's last hours empty, and a model that ends the product only because
    the models after it are dropped is taken to the product's horizon, whatever its source
    fetches otherwise. A product of one configured model is its own basetime: none then."""
    out: dict[str, tuple[datetime, bool]] = {}
    for pc in cfg.products.values():
        models = [m for m in pc.models if m not in dropped and m in runs]
        if not models:
            continue
        first, last = models[0], models[-1]
        stand_in = last != pc.models[-1]
        if first == last and not stand_in:
            continue
        end, last_end = _reach(pc, models, runs)
        if last_end < end:
            until, whole = out.get(last, (end, False))
            out[last] = (max(until, end), whole or stand_in)
    return out


def _reach(pc: ProductConfig, models: Sequence[str], runs: Mapping[str, RunRef]) -> tuple[datetime, datetime]:
    """(when the product's horizon ends, counted from its basetime: the run of the first of
    ``models``; when the run of the last of them ends)."""
    last = runs[models[-1]]
    return runs[models[0]].init + timedelta(hours=pc.horizon_hours), last.init + max(last.steps)


def nothing_published(cfg: Config, unbuilt: dict[str, str]) -> str:
    """The failure of a cycle that can build no product: what stays served."""
    served = publish.current_run(cfg.output.root)
    why = "; ".join(f"{pid} {reason}" for pid, reason in unbuilt.items())
    return (f"no product can be built this cycle ({why}); nothing is published, "
            + (f"the previously published run {served} stays served" if served
               else "and no run has been published yet"))


def run_id(cfg: Config, runs: dict[str, RunRef]) -> str:
    """Same model runs and same configuration -> same id, so a re-run is recognised."""
    key = json.dumps({m: [r.source, r.init.isoformat(), len(r.steps)] for m, r in sorted(runs.items())}
                     | {"config": _config_digest(cfg)}, sort_keys=True)
    newest = max(r.init for r in runs.values())
    return f"{newest:%Y%m%dT%H%MZ}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _config_digest(cfg: Config) -> str:
    digest = hashlib.sha256(cfg.path.read_bytes())
    for points_file in sorted({pc.points_file for pc in cfg.products.values()}
                              | {pc.sites_file for pc in cfg.products.values() if pc.sites_file}):
        digest.update(Path(points_file).read_bytes())
    return digest.hexdigest()


def next_update(cfg: Config, now: datetime) -> datetime:
    """The next tick of the schedule after ``now``: when the next run is expected."""
    every = timedelta(hours=cfg.schedule.every_hours)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(minutes=cfg.schedule.offset_minutes)
    ticks = int((now - day) / every) + 1
    return day + ticks * every


def model_info(runs: dict[str, RunRef]) -> dict[str, dict]:
    """The manifest's and the archives' account of each model run."""
    return {m: {"init": iso(r.init), "source": r.source, "synthetic": r.synthetic,
                "steps": len(r.steps), "horizon_hours": max(r.steps) / timedelta(hours=1)}
            for m, r in runs.items()}


def run_context(cfg: Config, pid: str, runs: dict[str, RunRef], info: dict[str, dict],
                generated: datetime, now: datetime) -> RunContext:
    """What the products of ``pid``'s blend stamp: its first model's run as basetime."""
    pc = cfg.products[pid]
    models = pc.models + tuple(e for e in pc.ensembles if e in info)
    return RunContext(basetime=runs[models[0]].init, generated=generated, next_update=next_update(cfg, now),
                      models={m: info[m] for m in models})


def slices(n: int, per_slice: int, parallel: int) -> list[slice]:
    """``n`` points in slices of at most ``per_slice`` (`[dask] points_per_slice`), at least
    one for each of the ``parallel`` builders (build processes, or the cluster's threads)."""
    step = min(per_slice, -(-n // parallel))
    # the last stops at n: a list's extraction holds its products' sites after its points
    return [slice(first, min(first + step, n)) for first in range(0, n, step)]


def builders(cfg: Config) -> int:
    """The slices built at once: the threads of the cluster's workers on a distributed
    `[dask] scheduler` (the default client's), `build_processes` otherwise."""
    if not distributed(cfg.dask):
        return cfg.dask.build_processes
    from distributed import default_client

    return max(1, sum(default_client().nthreads().values()))


def slice_points(cfg: Config, n: int) -> int:
    """The points of a build slice of a list of ``n`` (the last may have fewer)."""
    return slices(max(n, 1), cfg.dask.points_per_slice, builders(cfg))[0].stop


def blend_heights(cfg: Config, pids: list[str]) -> list[float]:
    """The heights a blend resamples (the same for each of its products: `blends`): of all its
    points, the windpack's hub heights among them."""
    return PRODUCTS[pids[0]].heights(cfg.products[pids[0]])


def distributed(dask_cfg: DaskConfig) -> bool:
    """Whether `[dask]` names a dask.distributed cluster (a LocalCluster or a tcp address)."""
    return dask_cfg.scheduler not in ("threads", "synchronous")


def manifest(cfg: Config, run: str, runs: dict[str, RunRef], fetched: dict[str, FetchedRun],
             outputs: dict[str, ProductOutput], dropped: dict[str, str], unbuilt: dict[str, str],
             carried: dict[str, dict | None], generated: datetime, postprocess: dict,
             lacking: dict[str, list[str]], members: Mapping[str, int]) -> dict:
    """The run's manifest (docs/contracts.md) without ``published_at``, which the publish
    stage adds: ``created`` is ``generated``, when the products began to be built (their
    `updated_time`). ``runs``/``fetched``: the model runs built from, by model; ``carried``:
    the served run's entry of each product not built (`publish.carry_product`), None where
    it had none (the product is absent); ``lacking``: the variables of its table each model's
    run did not hold, ``members``: the members each ensemble's run held (`extract_model`)."""
    synthetic = any(r.synthetic for r in runs.values())
    out = {
        "run_id": run, "created": iso(generated), "synthetic": synthetic,
        # with each product's basetime model, when a served product is stale (`stale_after_hours`)
        "schedule_hours": cfg.schedule.every_hours,
        "notice": ("SYNTHETIC: produced from the embedded sample source; not a real forecast."
                   if synthetic else "Produced from real model runs."),
        "models": {m: info | ({"lacking": lacking[m]} if lacking.get(m) else {})
                   | ({"members": members.get(m) or MODELS[m].members} if MODELS[m].members else {})
                   for m, info in model_info(runs).items() if m not in dropped},
        "products": {pid: {"basetime": iso(runs[pc.models[0]].init), "models": list(pc.models),
                           "horizon_hours": pc.horizon_hours, "freqs": list(pc.freqs),
                           "points": len(pc.points), "seams_t2m": outputs[pid].checks.get("seams", []),
                           "ensembles": list(pc.ensembles),
                           "probability_from": outputs[pid].checks.get("probability_from", []),
                           "quantiles_from": outputs[pid].checks.get("quantiles_from", {}),
                           "stale_after_hours": stale_after(cfg, pc.models[0]) / timedelta(hours=1)}
                     for pid, pc in cfg.products.items()}
        | {pid: {**entry, "carried_because": unbuilt[pid]}
           for pid, entry in carried.items() if entry is not None},
    }
    out.update(dropped=dropped,
               absent={pid: unbuilt[pid] for pid, entry in carried.items() if entry is None},
               degraded={pid: {element: {"lead_times": entry["lead_times"],
                                         "reason": _why(entry["inputs"], cfg.products[pid].models, lacking)}
                               for element, entry in out_.checks["degraded"].items()}
                         for pid, out_ in outputs.items() if out_.checks.get("degraded")},
               source_notes={m: [*runs[m].notes, *fetched[m].notes] for m in runs})
    out["postprocess"] = postprocess
    if POWER_PRODUCT in outputs:  # each site's product, models, ensembles and inputs (`products.power`)
        out["power"] = outputs[POWER_PRODUCT].checks["sites"]
    return out


def _why(inputs: list[str], models: tuple[str, ...], lacking: dict[str, list[str]]) -> str:
    """Why an element misses its ``inputs`` at some lead times: which models of its blend
    lack them in this run, the others not reaching those lead times or not carrying them."""
    parts = []
    for v in inputs:
        short = [m for m in models if v in lacking.get(m, ())]
        parts.append(f"{v}: not in the run of {', '.join(short)}" if short
                     else f"{v}: no model of the blend ({', '.join(models)}) carries it there")
    return "no model supplies its inputs at these lead times (" + "; ".join(parts) + ")"


def model_spec(cfg: Config, model_id: str) -> ModelSpec:
    """The model as configured: its table's run hours narrowed to ``[models.<id>] run_hours``."""
    model = MODELS[model_id]
    hours = cfg.models[model_id].run_hours
    return model if hours is None else replace(model, run_hours=hours)


def stale_after(cfg: Config, model_id: str) -> timedelta:
    """The age past which a product whose basetime is ``model_id``'s run is stale
    (`ModelSpec.stale_after`), counting only the runs discovery can take: those of its
    configured run hours (`model_spec`) reaching the horizon the model must reach (`needed`;
    IFS ending a 240 h blend: its 00/12 UTC runs)."""
    model, reach = model_spec(cfg, model_id), needed(cfg).get(model_id, timedelta(0))
    usable = [h for h in model.run_hours
              if max(run_steps(model, datetime(2000, 1, 1, h, tzinfo=UTC))) >= reach]
    return model.stale_after(cfg.schedule.every_hours, usable)


def needed(cfg: Config) -> dict[str, timedelta]:
    """Every model of the products, in the order they first appear, with the horizon its run
    must reach from its start: the longest of the products whose blend, or whose ensembles,
    it ends (0 for a model that ends none), so that discovery takes a run long enough (ENS's
    00/12 UTC run rather than a newer 06/18 UTC one that stops at 144 h)."""
    models = dict.fromkeys(m for pc in cfg.products.values() for m in pc.models + pc.ensembles)
    return {m: timedelta(hours=max([pc.horizon_hours for pc in cfg.products.values()
                                    if m in (pc.models[-1], *pc.ensembles[-1:])], default=0))
            for m in models}


def buildable(cfg: Config, dropped: dict[str, str], unbuilt: dict[str, str], runs: Mapping[str, RunRef]) -> Config:
    """`without`, and the cycle's failure when no product can be built (`nothing_published`)."""
    cfg = without(cfg, dropped, unbuilt, runs)
    if not cfg.products:
        raise RuntimeError(nothing_published(cfg, unbuilt))
    return cfg


def runs_used(cfg: Config, runs: dict[str, RunRef]) -> dict[str, RunRef]:
    """The runs of the models the products left use."""
    return {m: run for m, run in runs.items()
            if any(m in pc.models + pc.ensembles for pc in cfg.products.values())}


def cache_runs(runs: Mapping[str, RunRef]) -> frozenset[tuple[str, str]]:
    """The runs as the cache names them, ``(model, YYYYMMDDHH)``: those a cycle keeps there
    (`publish.make_room`, `publish.retain_cache`)."""
    return frozenset((m, f"{r.init.astimezone(UTC):%Y%m%d%H}") for m, r in runs.items())


def corrections_of(corrections: dict, pids: list[str]) -> dict:
    """The bias estimates (`postprocess.prepare`) of the products of one blend."""
    return {pid: corrections[pid] for pid in pids if pid in corrections}


def carried_runs(carried: dict[str, dict | None]) -> dict[str, str]:
    """The run each carried product's files come from (the validation report's ``carried``)."""
    return {pid: entry["carried_from"] for pid, entry in carried.items() if entry}
