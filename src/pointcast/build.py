"""Build: a model's run -> its point series (`extract_model`); the models' point series of a
blend -> the products' files and archives (`build_blend`), as `plan` laid them out.

The stage between extraction and validation, executing what `plan` decided. A blend's points
are built in slices (`plan.slices`), each slice reading its points of the models' series from
their scratch stores (`plan.split`, `at_points`), then resampled, blended and rendered on its
own (`build_slice`, whose inputs all pickle: a task on a dask worker, or a build process of
`forked`), writing its files into the run's staging tree and its archive rows into the run's
staged archive of each product (`publish.ArchiveStage`); then each product's slices are
finished as one output (`finish_product`), with the elements whose inputs no model supplies
(`input_gaps`, `degraded`). No Prefect here: `pointcast.flows.cycle` wires these functions
into tasks.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path

import numpy as np
import xarray as xr

from . import blend as blend_stage, ensemble, interp, publish
from .catalogue import VARIABLES
from .config import Config, DaskConfig, ProductConfig, PVSite, WindSite
from .facts import ArchiveFacts, FileFacts
from .forked import fork_map
from .heap import release_freed
from .ingest import decode, decode_members
from .plan import PointsList, blend_heights, builders, distributed, slices
from .products import PRODUCTS
from .products.base import QUANTILE_VARIABLES, Files, ProductOutput, RunContext, iso
from .sources import MODELS
from .sources.base import FetchedRun
from .validate import archive_facts, file_facts

# The first time a process decodes a time, xarray imports the duck-array libraries it knows
# that are installed (pint, which MetPy brings, is slow to import). Every build slice opens the
# staged series, so this is done here, at import: the fork server (`forked.PRELOAD`) then does
# it once for all the build processes it forks, not once in each of them.
xr.decode_cf(xr.Dataset(coords={"time": ("time", [0], {"units": "hours since 2000-01-01"})}))


class ModelFailed(RuntimeError):
    """A model's run could not be decoded or extracted: the model is dropped from the cycle."""


def extract_model(fetched: FetchedRun, points: interp.PointSet, heights: list[float],
                  groups: list[tuple[int, list[float]]], parts: list[interp.scratch.Part]
                  ) -> tuple[list[str], int, int, int]:
    """The model's run at ``points`` (`extraction`) into the scratch stores of ``parts``
    (`split`), a block of time steps at a time; returns the variables of its table its files
    lack, the variables and times decoded, and the members decoded (0: not an ensemble). A run
    lacking an essential variable (``catalogue.Variable.essential``) is not used; any other it
    lacks comes from the models after it in the blends, or its elements are missing where none
    has it (`degraded`).
    Anything that fails raises `ModelFailed`, naming what. It runs in the cycle's process (the
    threads scheduler) or whole as one task on a dask worker (`on_worker`)."""
    model = MODELS[fetched.run.model]
    attrs = {"source": fetched.run.source, "synthetic": int(fetched.run.synthetic)}
    try:
        if model.members:
            members = decode_members(fetched.files, model.fields, model=model.id, points=len(points), attrs=attrs,
                                     need=fetched.need)
            ds = members[0][1]
        else:
            ds = decode(fetched.files, model.fields, model=model.id, points=len(points), attrs=attrs,
                        need=fetched.need)
    except Exception as e:
        raise ModelFailed(f"{model.id}: decode failed: {type(e).__name__}: {e}") from e
    if model.members:
        # Time-invariant fields are every member's: ENS's orography (in its control's oper-fc
        # file only), ICON-EU-EPS's HSURF (a file of its own, whose message may name no member:
        # then it alone makes no member).
        constants = {v: da for _, member in members for v, da in member.data_vars.items() if "time" not in da.dims}
        members = [(k, member.assign({v: da for v, da in constants.items() if v not in member}))
                   for k, member in members if any("time" in da.dims for da in member.data_vars.values())]
        ds = members[0][1]
        # every member must hold what the first does
        unlike = [k for k, member in members if set(member.data_vars) != set(ds.data_vars)]
        if unlike:
            raise ModelFailed(f"{model.id}: members {unlike} hold other variables than member "
                              f"{members[0][0]} ({', '.join(map(str, ds.data_vars))})")
    read = model.fields if fetched.need is None else [row for row, _ in fetched.need.rows]
    lacking = sorted({row.var for row in read} - set(ds.data_vars))
    essential = [v for v in lacking if VARIABLES[v].essential]
    if essential:
        refused = f" ({ds.attrs['refused']})" if "refused" in ds.attrs else ""
        raise ModelFailed(f"{model.id}: the run's files hold no field for {', '.join(essential)}, "
                          f"without which the model is not used{refused}")
    for part in parts:  # a task run again after its worker died starts afresh
        shutil.rmtree(part.path, ignore_errors=True)
    blocks = (interp.extract_members(members, points, heights, groups, ensemble.MEMBER_VARIABLES)
              if model.members else interp.extract_blocks(ds, points, heights, groups))
    try:
        interp.scratch.write(blocks, ds.time.values, parts)
    except KeyError as e:
        raise ModelFailed(f"{model.id}: extraction needs {e}, which the decoded run does not "
                          f"hold") from e
    except Exception as e:
        raise ModelFailed(f"{model.id}: extraction failed: {type(e).__name__}: {e}") from e
    return lacking, len(ds.data_vars), ds.sizes["time"], len(members) if model.members else 0


def extract_run(dask_cfg: DaskConfig, fetched: FetchedRun, points: interp.PointSet, heights: list[float],
                groups: list[tuple[int, list[float]]], parts: dict[Path, interp.scratch.Part],
                log: logging.Logger | logging.LoggerAdapter) -> tuple[dict[Path, str], list[str], int]:
    """`extract_model` of the run, in this process or, on a distributed `[dask] scheduler`,
    whole as one task on a worker (decoding, extraction and the writes into its stores), so
    that the cluster's workers share the models out. Returns the scratch store of each points
    list (``parts``, by points file: `plan.split`), the variables of its table the run
    lacks and the members it holds (0: not an ensemble; the manifest's ``members``)."""
    args = (fetched, points, heights, groups, list(parts.values()))
    if distributed(dask_cfg):
        from distributed import default_client

        key = f"extract_model-{uuid.uuid4().hex}"
        lacking, variables, times, members = default_client().submit(on_worker, extract_model, *args,
                                                                      key=key).result()
    else:
        lacking, variables, times, members = extract_model(*args)
    model = fetched.run.model
    if lacking:
        log.warning("%s: the run's files hold no field for %s: the models after it in the blends supply "
                    "them, or their elements are missing (manifest 'degraded')", model, ", ".join(lacking))
    log.info("%s: decoded %d variables on %d times%s, extracted %d points", model, variables, times,
             f" of {members} members" if members else "", len(points))
    return {f: part.path for f, part in parts.items()}, lacking, members


def on_worker(fn, *args):
    """``fn(*args)`` in a task on a dask worker, its dask computations in the task's own
    thread (a worker runs as many tasks at once as it has threads): a `dask.compute` inside a
    task would otherwise go to the cluster and wait on the thread the task holds. Set for the
    worker's process and left set: a context restoring the setting would race the worker's
    other threads."""
    import dask

    dask.config.set(scheduler="synchronous")
    return fn(*args)


def at_points(extracted: dict, points: slice) -> dict:
    """Each model's extracted series at one slice of the points list, read from its scratch
    store (``extracted``: the store of each model, `split`): what `blend_models` takes."""
    return {m: interp.scratch.load(path, points) for m, path in extracted.items()}


def blend_models(cfg: Config, pids: list[str], extracted: dict, where: interp.PointSet,
                 heights: list[float], column: list[float], basetime: datetime,
                 variables: frozenset[str] | None = None):
    """Resample and blend once for products sharing points, models and heights, over the
    longest of their horizons, for one slice of their points; each product then takes its own
    horizon from the start of the series. Only their heights and variables are resampled: the
    windpack's thirty-odd heights over the medium range's 14 days were most of a 10,000-point
    cycle's memory, and it reads two of the two dozen variables. ``extracted``: each model's
    series at the slice's points (`at_points`); ``where``, ``heights``: the slice's sampled
    points, the blend's heights and its ensembles' column (`for_slice`); ``variables``: those
    to blend instead of the products' (the power stage's, `build_power`)."""
    pc = cfg.products[pids[0]]
    start = np.datetime64(basetime.replace(tzinfo=None), "ns")
    hours = max(cfg.products[pid].horizon_hours for pid in pids)
    axis = interp.base_axis(start, start + np.timedelta64(hours, "h") - interp.BASE_STEP)
    wanted = [w for w in (PRODUCTS[pid].variables for pid in pids) if w is not None]
    # Only the variables the products read, and t2m: the manifest's account of the seams.
    keep = None if len(wanted) < len(pids) else {"t2m", *(v for w in wanted for v in w)}
    keep = keep if variables is None else set(variables)
    members = []
    for m in (m for m in pc.models if m in extracted):
        ds = extracted[m]
        ds = ds if keep is None else ds[[v for v in ds.data_vars if v in keep]]
        ds = ds.sel(height=heights) if "height" in ds.dims else ds
        members.append((m, interp.resample(ds, axis, where.lats, where.lons)))
    until = {m: start + np.timedelta64(h, "h") for m, h in pc.max_lead_hours}
    series, used = blend_stage.blend(members, until)
    by_ensemble = with_ensembles(series, pc.ensembles, extracted, axis, where, column,
                                 any("tp_members" in (PRODUCTS[pid].variables or ()) for pid in pids))
    nowhere = [""] * len(axis)
    origins = {"probability_from": _segments([e or ensemble.NEIGHBOURHOOD for e in by_ensemble.get("pop_ens", nowhere)],
                                             axis, "source"),
               "quantiles_from": {name: _segments([e or ensemble.NO_QUANTILES for e in by_ensemble[ref]], axis, "source")
                                  for name, ref, *_ in QUANTILE_VARIABLES if ref in by_ensemble}}
    return series, _segments(used.get("t2m", []), axis, "model"), origins


def with_ensembles(series: xr.Dataset, ensembles: tuple[str, ...], extracted: dict, axis: np.ndarray,
                   where: interp.PointSet, heights: list[float], want_members: bool) -> dict[str, list[str]]:
    """Add the statistics of the blend's ensembles to its ``series`` (`pointcast.ensemble`),
    their wind at ``heights`` (those of the products' quantiles: `Product.ensemble_heights`):
    ``pop`` becomes the ensembles' probability wherever one has every member, the
    neighbourhood probability staying beside it (``pop_neighbourhood``) and in its place
    elsewhere. Returns, by statistic, the ensemble of each step ("" where none has it;
    `ensemble.blend`), none when the blend has no ensemble."""
    if not ensembles:
        return {}
    stats = []
    for e in (e for e in ensembles if e in extracted):
        ds = extracted[e]
        ds = ds.sel(height=heights) if "height" in ds.dims else ds
        stats.append((e, _member_statistics(ds, axis, where, want_members)))
    if "pop" in series:
        series["pop_neighbourhood"] = series["pop"]
    if not stats:
        return {}
    blended, used = ensemble.blend(stats)
    for name, var in blended.data_vars.items():
        series[name] = var
    if "pop" in series and "pop_ens" in series:
        series["pop"] = series["pop_ens"].fillna(series["pop_neighbourhood"])
        series["pop"].attrs.update(series["pop_neighbourhood"].attrs)
    return used


def _with_wind_speed(ds: xr.Dataset) -> xr.Dataset:
    """The members' wind vectors replaced by their speed (float32, as extracted; the
    dataset's attrs kept): what their statistics and their power read."""
    speed = np.hypot(ds["wind_u"].values, ds["wind_v"].values)
    return ds.drop_vars(["wind_u", "wind_v"]).assign(wind_speed=(ds["wind_u"].dims, speed))


# Bytes of an ensemble's members resampled at once (`_member_statistics`), float64.
MEMBER_STATISTICS_BYTES = 256 * 2**20


def _member_statistics(ds: xr.Dataset, axis: np.ndarray, where: interp.PointSet, want_members: bool) -> xr.Dataset:
    """`ensemble.statistics` of an ensemble's members at a slice's points, resampled to the
    15-minute ``axis`` a part of the points at a time: every member on that axis at every
    height of the slice's points at once would be ENS's 51 members x 14 days x 40 heights, 11 GB
    at 500 points; the statistics (five quantiles, a probability) are a tenth of it. No point's
    statistics depend on another's, so the parts give the whole. Only the members' wind speed
    is resampled, not their wind vectors: the statistics read the speed, which the vector's
    resampling takes as a series of its own (`interp.temporal`), and its direction was half
    of the members' resampling time."""
    if {"wind_u", "wind_v"} <= set(ds.data_vars):
        ds = _with_wind_speed(ds)
    per_point = len(axis) * ds.sizes["member"] * sum(
        int(np.prod([ds.sizes[d] for d in v.dims if d not in ("time", "member", "point")])) for v in ds.data_vars.values()) * 8
    step = max(1, MEMBER_STATISTICS_BYTES // max(per_point, 1))
    parts = [ensemble.statistics(interp.resample(ds.isel(point=slice(i, i + step)), axis, where.lats[i:i + step],
                                                 where.lons[i:i + step]), want_members)
             for i in range(0, ds.sizes["point"], step)]
    return parts[0] if len(parts) == 1 else xr.concat(parts, dim="point", data_vars="minimal", coords="minimal",
                                                      compat="override", join="exact", combine_attrs="override")


def _segments(labels: list[str], axis: np.ndarray, key: str) -> list[dict]:
    """Runs of the same label along the axis (at the first point), for the manifest: the model
    of the 2 m temperature (``key`` "model": its seams) or the source of the probability
    ("source")."""
    out: list[dict] = []
    for i, label in enumerate(labels):
        if out and out[-1][key] == label:
            out[-1]["to"] = iso(axis[i])
        else:
            out.append({key: label, "from": iso(axis[i]), "to": iso(axis[i])})
    return out


@dataclass(frozen=True)
class BlendSlice:
    """One slice of a blend's points (`slices`) and what it is built from (`for_slice`)."""

    points: slice  # of the points list
    cfg: Config  # the blend's products only, their points cut to the slice
    where: interp.PointSet  # the slice's sampled points
    heights: list[float]  # the blend's, of all its points: every slice's archive rows have them
    column: list[float]  # the heights of its ensembles' statistics, of all its points (as ``heights``)


def for_slice(cfg: Config, pids: list[str], where: interp.PointSet, heights: list[float],
              points: slice) -> BlendSlice:
    """One slice of the blend of ``pids``: ``cfg`` with the blend's products only, their points
    cut to the slice, the slice's sampled points (of the list's, ``where``) and the blend's
    ``heights`` (`blend_heights`, not those of the slice's points alone), and the heights of
    the ensembles' statistics, of all its points too: a product's (`Product.ensemble_heights`)
    are those of the points it is given. A slice's
    inputs are pickled to the process or worker building it: with the whole configuration,
    every slice would carry every list's points (at 50,000 points a list, 12 MB pickled and
    0.1 GB unpickled in each builder; docs/performance.md)."""
    column = sorted({h for pid in pids for h in PRODUCTS[pid].ensemble_heights(cfg.products[pid])})
    products = {pid: replace(cfg.products[pid], points=cfg.products[pid].points[points]) for pid in pids}
    return BlendSlice(points, replace(cfg, products=products), where[points], heights, column)


def build_product(cfg: Config, pid: str, series, ctx: RunContext, files: publish.StagedFiles) -> ProductOutput:
    """The product at its points (a slice's: `for_slice`); its files go into the run's
    staging tree as they are rendered (``files``)."""
    pc = cfg.products[pid]
    return PRODUCTS[pid].build(series.sel(time=series.time < _horizon_end(pc, ctx)), pc, ctx, files)


def _built(cfg: Config, pids: list[str], series, ctx: RunContext, corrected: list[str], estimate, files):
    """Yield (product, output) of the blend's products at a slice's points (``cfg``:
    `for_slice`), built from its ``series``, each product's files going into a new
    ``files()``. ``corrected``: the products
    built from the series corrected with ``estimate`` (`postprocess.correct_series`), their
    raw elements archived beside the corrected ones."""
    if corrected:
        from . import postprocess

        start = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
        fixed = postprocess.correct_series(series, estimate, start)
    for pid in pids:
        out = build_product(cfg, pid, fixed if pid in corrected else series, ctx, files())
        if pid in corrected:
            postprocess.keep_raw(out.archive, series, pid)
        yield pid, out


def build_slice(pids: list[str], extracted: dict, ctx: RunContext, corrected: list[str], estimate,
                staging: Path, write_threads: int, part: BlendSlice):
    """Blend and build one slice of the points for the blend's products (``part``), their
    files written into the run's staging tree by a writer of the slice's own
    (``write_threads``: its pool, 0 in a build process, which has a core of its own to write
    on), their archive rows into the run's staged stores (`publish.write_region`, made by
    `stage_archives`). ``extracted``: each model's scratch store of the list (`split`), of
    which the slice reads its points only (`at_points`). It runs in a build process or as a
    task on a dask worker (`build_blend`), so it returns what the cycle keeps, neither the
    files nor the archive: what validation needs of each product's archive rows and files
    (`facts.ArchiveFacts`, `facts.FileFacts`: the slice checks its own points' files),
    the names of its files (`publish.StagedFiles.written`), the seams, the directories made.
    ``corrected``, ``estimate``: `_built`."""
    release_freed()  # what the process's tasks before it freed (`pointcast.cluster.dask_scheduler`)
    cfg = part.cfg
    series, seams, origins = blend_models(cfg, pids, at_points(extracted, part.points), part.where,
                                          part.heights, part.column, ctx.basetime)
    writer = publish.TreeWriter(staging, cfg.output.json, threads=write_threads)
    facts, found, written = {}, {}, {}
    try:
        for pid, out in _built(cfg, pids, series, ctx, corrected, estimate, writer.files):
            publish.write_region(staging, pid, out.archive, part.points)
            facts[pid] = archive_facts(out.archive)
            found[pid] = file_facts(out.files, PRODUCTS[pid].expected_files(cfg.products[pid]))
            written[pid] = out.files.written()
    finally:
        dirs = writer.close()
    # Once for the blend's products, which share its series and models.
    expected = degradable(cfg.products[pids[0]].models)
    missing = missing_inputs(series, {v for pid in pids for deps in PRODUCTS[pid].inputs().values()
                                      for v in deps} & expected)
    gaps = {pid: input_gaps(PRODUCTS[pid].inputs(), missing,
                            int((series.time.values < _horizon_end(cfg.products[pid], ctx)).sum()))
            for pid in pids}
    return facts, found, written, (seams, origins), dirs, gaps


def missing_inputs(series, names: set[str] | frozenset[str]) -> dict[str, np.ndarray]:
    """Each of ``names`` (canonical variables) -> the steps of the blended ``series`` at which
    some point lacks it (every step where no model of the blend has it)."""
    missing = {}
    for name in names:
        if name not in series:
            missing[name] = np.ones(series.sizes["time"], dtype=bool)
        else:
            arr = series[name]
            missing[name] = np.isnan(arr.values).any(axis=tuple(i for i, d in enumerate(arr.dims) if d != "time"))
    return missing


def input_gaps(inputs: dict[str, frozenset[str]], missing: dict[str, np.ndarray],
               steps: int) -> dict[str, dict[str, np.ndarray]]:
    """Where no model of the blend supplies an element's inputs (``inputs``: `Product.inputs`),
    of those it is expected to (``missing``: `missing_inputs` of the variables `degradable`
    names), over the first ``steps`` of the series (the product's horizon): {element: {input:
    the steps where it is missing}}, for the elements that miss one. The element is then
    missing there, or (the weather type without visibility or CAPE) decided without it."""
    out = {}
    for element, deps in inputs.items():
        by_input = {v: missing[v][:steps] for v in sorted(deps & missing.keys()) if missing[v][:steps].any()}
        if by_input:
            out[element] = by_input
    return out


def degradable(models: tuple[str, ...]) -> frozenset[str]:
    """The variables whose absence degrades a blend's elements (`input_gaps`): those its models'
    tables name and a run can go without. One no model of the blend ever has (ICON's CAPE is
    not the most unstable parcel's) is the product's make, not a degradation; an essential one
    missing somewhere (a point outside every model's domain), or one made from essential ones
    at extraction (the wind at a height), fails validation."""
    return frozenset(row.var for m in models for row in MODELS[m].fields if not VARIABLES[row.var].essential)


def _merged_gaps(parts: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """The gaps of a product's slices (`input_gaps`) as one: missing where any slice's is."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for part in parts:
        for element, by_input in part.items():
            mine = out.setdefault(element, {})
            for v, mask in by_input.items():
                mine[v] = mask | mine[v] if v in mine else mask
    return out


def degraded(gaps: dict[str, dict[str, np.ndarray]]) -> dict[str, dict]:
    """The manifest's account of a product's gaps (`input_gaps`): for each element, the lead
    times (hours after the basetime, half-open ranges) where it misses an input, and which."""
    out = {}
    for element, by_input in sorted(gaps.items()):
        mask = np.logical_or.reduce(list(by_input.values()))
        out[element] = {"lead_times": _ranges(mask), "inputs": sorted(by_input)}
    return out


def _ranges(mask: np.ndarray) -> list[list[float]]:
    """[[from, to), ...] in hours of the runs of True in ``mask`` (steps of `interp.BASE_STEP`)."""
    step = interp.BASE_STEP / np.timedelta64(1, "h")
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return [[float(a * step), float(b * step)] for a, b in zip(edges[::2], edges[1::2], strict=True)]


def stage_archives(cfg: Config, pids: list[str], extracted: dict, where: interp.PointSet, heights: list[float],
                   ctx: RunContext, corrected: list[str], estimate, stage: publish.ArchiveStage,
                   chunk: int) -> None:
    """The run's staged store of each of the blend's products, along all its points in chunks
    of ``chunk`` (the slices'), made before the slices write into it: from the products built
    at the first point, in memory (a few milliseconds), which gives every coordinate, variable,
    dtype and attribute of the archive but its rows. ``extracted``: each model's scratch store
    of the list (`split`), of which only the first point is read; ``heights``: the blend's
    (`blend_heights`)."""
    first = for_slice(cfg, pids, where, heights, slice(0, 1))
    series, _, _ = blend_models(first.cfg, pids, at_points(extracted, first.points), first.where, first.heights,
                                first.column, ctx.basetime)
    for pid, out in _built(first.cfg, pids, series, ctx, corrected, estimate, Files):
        stage.create(pid, out.archive, [p.id for p in cfg.products[pid].points], chunk)


def build_blend(cfg: Config, pids: list[str], extracted: dict, where: interp.PointSet,
                ctx: RunContext, writer: publish.TreeWriter, corrections: dict,
                stage: publish.ArchiveStage, priority: int = 0) -> dict[str, ProductOutput]:
    """The products of one blend, over their points in `slices`. On a dask.distributed
    cluster (`[dask] scheduler`) each slice is a task on its workers; otherwise the slices are
    built `build_processes` at a time in processes of their own (`forked.fork_map`; rendering
    is Python: one core a process). Each slice reads its points of the series from the models'
    scratch stores (``extracted``, `split`); its files go straight into the run's staging tree
    and its archive rows into the run's staged archives (``stage``; the workers must see the
    stores and both at the same paths): the memory of a process building is a slice's series,
    resampled members, blend and elements, whatever the number of points. ``corrections``:
    the bias estimates of the blend's corrected products (`postprocess.prepare`), by product.
    ``priority``: on a cluster, the slices of blends built at once run highest first."""
    n = len(cfg.products[pids[0]].points)
    estimate = None
    if corrections:  # the products of one blended series share one correction
        from . import postprocess

        estimate = postprocess.merged(list(corrections.values()))
    points = slices(n, cfg.dask.points_per_slice, builders(cfg))
    heights = blend_heights(cfg, pids)
    stage_archives(cfg, pids, extracted, where, heights, ctx, list(corrections), estimate, stage,
                   points[0].stop - points[0].start)
    parts = [for_slice(cfg, pids, where, heights, s) for s in points]
    if distributed(cfg.dask):
        built = _on_cluster(pids, extracted, ctx, list(corrections), estimate, writer.staging, parts, priority)
    else:
        forked = cfg.dask.build_processes > 1 and len(parts) > 1
        one = partial(build_slice, pids, extracted, ctx, list(corrections), estimate,
                      writer.staging, 0 if forked else publish.WRITE_THREADS)
        built = fork_map(one, parts, cfg.dask.build_processes) if forked else [one(s) for s in parts]
    files = {pid: writer.files() for pid in pids}
    for _, _, written, _, dirs, _ in built:
        for pid in pids:
            files[pid].adopt(written[pid], dirs)
    # The manifest's account of the seams and of the ensembles' statistics is at the first point.
    seams, origins = built[0][3]
    return {pid: finish_product(cfg, pid, [facts[pid] for facts, *_ in built],
                                [found[pid] for _, found, *_ in built], seams, ctx, files[pid],
                                stage.dataset(pid), _merged_gaps([gaps[pid] for *_, gaps in built]),
                                origins)
            for pid in pids}


def _on_cluster(pids: list[str], extracted: dict, ctx: RunContext, corrected: list[str], estimate,
                staging: Path, parts: list[BlendSlice], priority: int) -> list:
    """`build_slice` of every slice (``parts``) as a task on the default dask.distributed
    client (the cluster `pointcast.cluster.dask_scheduler` opened); a task reads its slice of
    the series from the scratch stores. The run's context goes with each task (a few hundred
    bytes); the bias estimate, large, is scattered a slice's points at a time (`_estimate_at`),
    each part to one worker. Nothing is broadcast: distributed's replication to every worker
    retries a worker that died meanwhile for ever (``Scheduler.replicate``), which hung a cycle
    that lost a worker while another blend was built. A failure (an exception, a worker that
    died: dask's ``KilledWorker``, or the estimate it held lost) is raised once every slice has
    ended, so that none still writes into the staging tree the failed cycle removes."""
    from distributed import default_client, wait

    client = default_client()
    cuts = ([None] * len(parts) if estimate is None
            else client.scatter([_estimate_at(estimate, part.where.ids) for part in parts], hash=False))
    futures = [client.submit(build_slice, pids, extracted, ctx, corrected, cut, str(staging),
                             publish.WRITE_THREADS, part, pure=False, priority=priority)
               for part, cut in zip(parts, cuts, strict=True)]
    wait(futures)
    return client.gather(futures)


def _estimate_at(estimate, ids: np.ndarray):
    """The bias of the estimate (`postprocess.merged`) at the points ``ids`` only: all a
    slice's correction reads (`postprocess.correct_series`)."""
    return estimate[["bias"]].isel(point=np.flatnonzero(np.isin(estimate.point.values, ids)))


def finish_product(cfg: Config, pid: str, facts: list[ArchiveFacts], found: list[FileFacts],
                   seams: list[dict], ctx: RunContext, files: publish.StagedFiles, archive,
                   gaps: dict[str, dict[str, np.ndarray]], origins: dict) -> ProductOutput:
    """The product's slices as one output: its files, its ``archive`` (read lazily from the
    run's staged store), what its slices found in their archive rows and files (``facts``,
    ``found``, in the order of the points), its index over all points, the seams of its
    horizon, the elements whose inputs no model supplies somewhere (``gaps``, `degraded`) and
    where its probabilities and quantiles come from (``origins``: `probability_from`,
    `quantiles_from`), all over the blend's horizon (`_segments`) and cut to the product's here."""
    pc = cfg.products[pid]
    files[f"{pid}/index.json"] = PRODUCTS[pid].index(pc, ctx)
    last = iso(_horizon_end(pc, ctx) - interp.BASE_STEP)
    def within(runs: list[dict]) -> list[dict]:
        return [{**seg, "to": min(seg["to"], last)} for seg in runs if seg["from"] <= last]

    return ProductOutput(files=files, archive=archive, facts=ArchiveFacts.merged(facts),
                         file_facts=FileFacts.merged(found), checks={
        "seams": within(seams), "degraded": degraded(gaps),
        "probability_from": within(origins["probability_from"]),
        "quantiles_from": {name: within(runs) for name, runs in origins["quantiles_from"].items()}})


def _horizon_end(pc: ProductConfig, ctx: RunContext) -> np.datetime64:
    """The end of the product's horizon (exclusive)."""
    return np.datetime64(ctx.basetime.replace(tzinfo=None), "ns") + np.timedelta64(pc.horizon_hours, "h")


# The blend's variables a site's power is made from (docs/method.md, "Power").
POWER_VARIABLES = frozenset({"wind_u", "wind_v", "air_temperature", "t2m", "d2m", "sp", "ssrd", "fdir", "u10", "v10"})
_AT_HEIGHTS = frozenset({"wind_u", "wind_v", "air_temperature"})  # the variables along height
_LAPSE_K_PER_M = 0.0065  # the standard atmosphere's, for the hub's temperature where the blend has none


def build_power(cfg: Config, lists: Mapping[Path, PointsList], extracted: Mapping[Path, Mapping[str, str]],
                contexts: Mapping[str, RunContext], files) -> ProductOutput | None:
    """The power of every product's sites (the power extension; docs/method.md, "Power"),
    its files into ``files`` (the run's staging tree). A product's sites are rows of its
    points list's extraction (`plan.points_lists`): they are read from the models' scratch
    stores (``extracted``, by points file and model) and blended as the product's points
    (`blend_models`, the power's variables only), then each wind farm's power comes from its
    hub wind and air density (`power.wind`), each solar plant's from the radiation (`power.pv`);
    the wind farms' members go through their curves one by one, and the quantiles are taken
    of the members' power. None when no product (left this cycle) has sites."""
    parts = []
    for pid, pc in cfg.products.items():
        pl = lists.get(pc.points_file)
        if not pc.sites or pl is None or pid not in pl.sites:
            continue
        rows, ctx = pl.sites[pid], contexts[pid]
        stores = {m: path for m, path in extracted[pc.points_file].items() if m in pc.models + pc.ensembles}
        series_at = at_points({m: p for m, p in stores.items() if m in pc.models}, rows)
        where = pl.points[rows]
        hubs = sorted({s.hub_height_m for s in pc.sites if isinstance(s, WindSite)})
        only = replace(cfg, products={pid: replace(pc, ensembles=())})  # the members go through the curves here
        # without wind farms no height is blended (an empty height axis blends nothing)
        variables = POWER_VARIABLES if hubs else POWER_VARIABLES - _AT_HEIGHTS
        series, _, _ = blend_models(only, [pid], series_at, where, hubs, [], ctx.basetime, variables)
        series = series.sel(time=series.time < _horizon_end(pc, ctx))
        times = series.time.values
        members = []
        for e in (e for e in pc.ensembles if e in stores):
            members.append((e, _member_hub_wind(at_points({e: stores[e]}, rows)[e], series.time.values, where, hubs)))
        parts.append(_site_power(pid, pc, ctx, series, times, members))
    if not parts:
        return None
    from .products import power as power_product

    return power_product.output(parts, files)


def _member_hub_wind(ds: xr.Dataset, axis: np.ndarray, where: interp.PointSet, hubs: list[float]) -> xr.DataArray | None:
    """An ensemble's members' wind speed at the hub heights, resampled to the 15-minute
    ``axis``: dims (time, member, point, height); None where it has no wind at them."""
    if not hubs or not {"wind_u", "wind_v"} <= set(ds.data_vars) or "height" not in ds.dims:
        return None
    if not set(hubs) <= set(ds.height.values.tolist()):
        return None
    ds = _with_wind_speed(ds[["wind_u", "wind_v"]].sel(height=hubs))
    return interp.resample(ds, axis, where.lats, where.lons)["wind_speed"].transpose("time", "member", "point", "height")


def _site_power(pid: str, pc: ProductConfig, ctx: RunContext, series: xr.Dataset, times: np.ndarray,
                members: list[tuple[str, xr.DataArray | None]]):
    """The power of a product's sites from its blended ``series`` (time, point[, height]) and
    its ensembles' members' hub wind (`_member_hub_wind`)."""
    from .power import pv, wind
    from .products.power import SitePower

    n, steps = len(pc.sites), len(times)
    power = np.full((n, steps), np.nan)
    by_ensemble = {e: np.full((n, steps, kw.sizes["member"] if kw is not None else 1), np.nan) for e, kw in members}
    inputs = {name: np.full((n, steps), np.nan) for name in ("hub_wind_speed", "air_density", "global_radiation")}

    def at(name: str, j: int, height: float | None = None) -> np.ndarray:
        if name not in series:
            return np.full(steps, np.nan)
        var = series[name]
        if "height" in var.dims:
            var = var.sel(height=height)
        return var.isel(point=j).transpose("time").values.astype(np.float64)

    pv_rows = [j for j, s in enumerate(pc.sites) if isinstance(s, PVSite)]
    plants = [s for s in pc.sites if isinstance(s, PVSite)]
    for j, site in enumerate(pc.sites):
        if not isinstance(site, WindSite):
            continue
        h = site.hub_height_m
        speed = np.hypot(at("wind_u", j, h), at("wind_v", j, h))
        t2m = at("t2m", j)
        t_hub = at("air_temperature", j, h) if "air_temperature" in series and "height" in series["air_temperature"].dims \
            else t2m - _LAPSE_K_PER_M * h
        t_hub = np.where(np.isnan(t_hub), t2m - _LAPSE_K_PER_M * h, t_hub)
        density = wind.hub_air_density(at("sp", j), t2m, at("d2m", j), t_hub, h)
        # a blend without surface pressure or dew point (a degraded run): the standard density
        density = np.where(np.isfinite(density), density, wind.STANDARD_DENSITY)
        power[j] = wind.farm_power_kw(speed, density, site.curve, site.turbines, site.efficiency, site.restart_m_s)
        inputs["hub_wind_speed"][j], inputs["air_density"][j] = speed, density
        for e, kw in members:
            if kw is None:
                continue
            member_wind = kw.isel(point=j).sel(height=h).transpose("time", "member").values
            by_ensemble[e][j, :, :member_wind.shape[1]] = wind.farm_power_kw(
                member_wind, density[:, None], site.curve, site.turbines, site.efficiency, site.restart_m_s, axis=0)
    if pv_rows:
        sun = pv.solar_geometry([p.lat for p in plants], [p.lon for p in plants], times, interp.BASE_STEP)
        ghi = np.stack([at("ssrd", j) for j in pv_rows])
        direct = np.stack([at("fdir", j) for j in pv_rows]) if "fdir" in series else None
        if direct is not None and np.isnan(direct).any():  # a model of the blend without it: the split there
            direct = None
        power[pv_rows] = pv.plant_ac_kw(
            ghi, np.stack([at("t2m", j) for j in pv_rows]) - 273.15,
            np.stack([np.hypot(at("u10", j), at("v10", j)) for j in pv_rows]), sun,
            tilt=[p.tilt for p in plants], azimuth=[p.azimuth for p in plants], dc_kwp=[p.dc_kwp for p in plants],
            ac_kw=[p.ac_kw for p in plants], losses_pct=[p.losses_pct for p in plants],
            temp_coeff_pct=[p.temp_coeff_pct for p in plants], mounting=[p.mounting for p in plants],
            direct_horizontal=direct)
        inputs["global_radiation"][pv_rows] = ghi
    return SitePower(product=pid, ctx=ctx, freqs=pc.freqs, sites=pc.sites, times=times, power_kw=power,
                     members_kw=tuple((e, by_ensemble[e]) for e, kw in members if kw is not None),
                     inputs=inputs, models=pc.models)
