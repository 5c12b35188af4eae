"""The fetch plan by need: which messages of each model run some product uses, and what that
costs a day.

For every configured model, the rows of its table and the steps of its run that a product
reads (`needs`), from each product's blend order (``models``), ``horizon_hours``,
``max_lead_hours`` and ``ensembles``, on the configuration `plan.without` leaves in a
degraded cycle (a model standing in for a dropped one after it takes the product to its
horizon). A source fetches only these messages and decode reads only these
(``sources.base.Need``); docs/method.md, "What is fetched", gives the rules:

- a model of a blend is read from its first step to where the product stops taking it: its
  ``max_lead_hours`` where one is set and a model follows it, otherwise the product's horizon
  from its basetime (the first model's run), and the steps at or past that end up to
  `STEPS_PAST_END` of them, so that the
  time interpolation of the last hours is that of the whole run (the cross-fade into the
  next model lies inside the span);
- an ensemble is read to the product's horizon too; its wind above 10 m only for a product
  publishing its wind quantiles at heights (the windpack: ``ensemble_heights``), so ENS's
  ``100u``/``100v`` stop at eu-wind's 72 h while eu-medium's 10 m quantiles go on;
- ``[models.<id>] run_hours`` leaves out the other runs (`plan.model_spec`) and ``skip_variables``
  the rows of those variables (no essential one: `check`).

`costs` is `pointcast plan`'s account: messages and bytes a run (the upstream's index sizes
where it can be read, `sources.base.estimated_bytes` otherwise: the estimate `Source.size`
gives `publish.make_room` before a download), runs a day, and the disk a cycle needs at its
peak. No Prefect here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from . import plan
from .catalogue import VARIABLES
from .config import Config, ProductConfig
from .gribtable import GribField, Processing
from .products import PRODUCTS
from .sources import MODELS, run_steps
from .sources.base import (
    ModelSpec,
    Need,
    RunRef,
    estimated_bytes,
    floor_run,
    message_count,
    typical_message_bytes,
)

# Steps read at or past where a product stops taking a model: the monotone cubic between two
# steps depends on the step after them, so the values up to the end are those of the whole run.
STEPS_PAST_END = 2
# An ensemble's ground pressures: its members' ground is read from its first step only
# (`interp.extract_members`, GEFS's sp and msl at the analysis): they end there.
GROUND = frozenset({"sp", "msl"})
FIRST_STEP = timedelta(hours=-1)


def check(cfg: Config) -> None:
    """Refuse ``run_hours`` the model has no run at and ``skip_variables`` its table does not
    hold or cannot do without (`config.error_at`: file, key and line)."""
    from .config import error_at

    for mid, mc in cfg.models.items():
        model = MODELS[mid]
        odd = sorted(set(mc.run_hours or ()) - set(model.run_hours))
        if odd:
            raise error_at(cfg, ("models", mid, "run_hours"), f"{mid} has no run at {odd} UTC "
                           f"(its runs: {list(model.run_hours)})")
        table = {row.var for row in model.fields}
        for var in mc.skip_variables:
            if var not in table:
                raise error_at(cfg, ("models", mid, "skip_variables"),
                               f"{var!r} is not in {mid}'s table ({', '.join(sorted(table))})")
            if VARIABLES[var].essential:
                raise error_at(cfg, ("models", mid, "skip_variables"),
                               f"{var!r} is essential: a run without it is not used")


def check_cache_cap(cfg: Config) -> None:
    """Refuse an ``[output] cache_max_gb`` below one cycle's cache need (`costs`' cache_bytes:
    each model's run in use, at the sizes `Source.size` estimates for `publish.make_room`,
    which evicts every other run before a download and refuses one that cannot fit)."""
    from .config import error_at

    cap = cfg.output.cache_max_gb
    if cap is None:
        return
    need = costs(cfg, network=False)["cache_bytes"]
    if cap * 1e9 < need:
        raise error_at(cfg, ("output", "cache_max_gb"),
                       f"{cap:g} GB is below one cycle's cache need of {need / 1e9:.1f} GB (a run of "
                       f"each model in use, at estimated sizes: `pointcast plan`)")


def ensemble_heights(cfg: Config) -> dict[str, list[float]]:
    """The heights of the wind quantiles each product publishes from its ensembles."""
    return {pid: PRODUCTS[pid].ensemble_heights(pc) for pid, pc in cfg.products.items()}


def needs(cfg: Config, runs: Mapping[str, RunRef]) -> dict[str, Need]:
    """What the products of ``cfg`` read of each of ``runs`` (by model). ``cfg`` is the
    cycle's configuration after `plan.without`: a stand-in model is the last of its blend."""
    ends: dict[str, dict[GribField, timedelta]] = {}

    def read(m: str, rows, end: timedelta) -> None:
        got = ends.setdefault(m, {})
        for row in rows:
            got[row] = max(got.get(row, end), end)

    heights = ensemble_heights(cfg)
    for pid, pc in cfg.products.items():
        models = [m for m in pc.models if m in runs]
        if not models:
            continue
        basetime = runs[models[0]].init
        limits = dict(pc.max_lead_hours)
        for k, m in enumerate(models):
            hours = limits[m] if m in limits and k < len(models) - 1 else pc.horizon_hours
            read(m, _rows(cfg, m), basetime + timedelta(hours=hours) - runs[m].init)
        for e in (e for e in pc.ensembles if e in runs):
            rows = _ensemble_rows(cfg, e, heights[pid])
            read(e, [r for r in rows if r.var not in GROUND], basetime + timedelta(hours=pc.horizon_hours) - runs[e].init)
            read(e, [r for r in rows if r.var in GROUND], FIRST_STEP)
    return {m: _need(MODELS[m], runs[m].steps, rows) for m, rows in ends.items()}


def _rows(cfg: Config, model_id: str) -> list[GribField]:
    """The rows of a model's table a blend reads: every one but ``skip_variables``."""
    skip = set(cfg.models[model_id].skip_variables)
    return [row for row in MODELS[model_id].fields if row.var not in skip]


def _ensemble_rows(cfg: Config, model_id: str, heights: list[float]) -> list[GribField]:
    """The rows of an ensemble's table a product reads: its wind on height levels only up to
    the lowest level at or above the highest of ``heights`` (the profile's top)."""
    rows = _rows(cfg, model_id)
    levels = sorted({lv for r in rows if r.var in ("u", "v") for lv in r.levels or ()})
    top = next((lv for lv in levels if lv >= max(heights, default=10.0)), levels[-1] if levels else 0)
    return [r for r in rows if r.var not in ("u", "v") or all(lv <= top for lv in r.levels or ())]


def _need(model: ModelSpec, steps: tuple[timedelta, ...], ends: dict[GribField, timedelta]) -> Need:
    """Each row's end as the last step read: `STEPS_PAST_END` steps at or past it."""
    ordered = sorted(steps)

    def last(end: timedelta) -> int:
        past = [s for s in ordered if s >= end][:1 if end == FIRST_STEP else STEPS_PAST_END]
        at = past[-1] if past else ordered[-1]
        return int(at.total_seconds() // 60)

    top = max((last(e) for e in ends.values()), default=0)
    return Need(tuple((row, top if row.processing is Processing.CONSTANT else last(end))
                      for row, end in ends.items()))


def nominal_needs(cfg: Config, hour: int | None = None) -> dict[str, Need]:
    """`needs` of the runs of every model starting at the same time (``hour`` UTC where the
    model has such a run, its first run hour otherwise): a plan of no particular cycle."""
    day = datetime(2026, 1, 1, tzinfo=UTC)
    runs = {}
    for m in plan.needed(cfg):
        model = plan.model_spec(cfg, m)
        h = hour if hour in model.run_hours else model.run_hours[0]
        runs[m] = RunRef(m, day + timedelta(hours=h), _source_steps(cfg, m, day + timedelta(hours=h)), "plan")
    return needs(cfg, runs)


def _source_steps(cfg: Config, model_id: str, init: datetime) -> tuple[timedelta, ...]:
    """The steps of a run its source offers (to the source's ``horizon_hours``)."""
    return run_steps(MODELS[model_id], init, cfg.source_for(model_id).options.get("horizon_hours"))


# -- pointcast plan ---------------------------------------------------------------------------

def _index_bytes(cfg: Config, model_id: str, need: Need, now: datetime) -> tuple[int, int, str] | None:
    """(messages, bytes, run) of the newest run of an HTTP source's model whose indexes all
    answer, from the lengths its indexes give the messages of ``need`` (`wanted_bytes`, as
    `Source.size` counts them); None where the source is not HTTP, its layout has no index,
    or an index does not answer at once."""
    source = cfg.source_for(model_id)
    if source.type != "http":
        return None
    from .sources.remote import HttpSource, SourceUnavailable, run_files, wanted_bytes

    src = HttpSource.from_options(cfg.models[model_id].source, dict(source.options) | {"timeout_seconds": 5.0})
    model = plan.model_spec(cfg, model_id)
    up = src.upstream(model)
    with src.client() as client:
        for init in _recent_runs(model, now):
            for layout in up.layouts:
                if layout.index_path is None or (layout.run_hours is not None and init.hour not in layout.run_hours):
                    continue
                steps = need.steps(src.steps(model, init))
                files = run_files(layout, model, init, steps, need)
                count = total = 0
                try:
                    for f in files:
                        text = _first(client, up.mirrors, f.index_path or "")
                        if text is None:
                            raise SourceUnavailable(f.index_path or "")
                        n, size = wanted_bytes(model, up, layout, text, need.rows_at(round(f.first_step_h * 60)))
                        count += n
                        total += size
                except Exception:  # noqa: BLE001 (any failure: the typical sizes then)
                    continue
                if files:
                    return count, total, f"{init:%Y-%m-%d %H} UTC"
    return None


def _first(client, mirrors, path: str) -> str | None:
    """The text at ``path`` on the first of ``mirrors`` that gives it."""
    from .sources.remote.transport import get

    for mirror in mirrors:
        try:
            return get(client, f"{mirror.url}/{path}").text
        except Exception:  # noqa: BLE001 (the next mirror)
            continue
    return None


def _recent_runs(model: ModelSpec, now: datetime) -> list[datetime]:
    """The model's two newest runs (the newest may still be being published), newest first."""
    newest = floor_run(model, now)
    return [newest, floor_run(model, newest - timedelta(hours=1))]


def _sample_message_bytes(cfg: Config, model_id: str) -> int | None:
    """A message's size on the sample source: its grid's points at the sample's packing
    (`pointcast.sample`), None where the model's source is not the sample."""
    source = cfg.source_for(model_id)
    if source.type != "sample":
        return None
    from .sample import SampleSource

    sample = SampleSource.from_options(cfg.models[model_id].source, dict(source.options))
    return sample.message_bytes(MODELS[model_id], cfg.output.cache_dir)


def used_runs(cfg: Config, model_id: str) -> dict[int, tuple[timedelta, ...]]:
    """The run hours of a model whose runs the cycles take, with the steps its source offers
    of each: those reaching the horizon the products it ends need from its start
    (`plan.needed`, as discovery asks), or as far as its source's longest run does."""
    model = plan.model_spec(cfg, model_id)
    day = datetime(2026, 1, 1, tzinfo=UTC)
    offered = {h: _source_steps(cfg, model_id, day + timedelta(hours=h)) for h in model.run_hours}
    reach = min(plan.needed(cfg)[model_id], max(max(s) for s in offered.values()))
    return {h: steps for h, steps in offered.items() if max(steps) >= reach}


def runs_per_day(cfg: Config, model_id: str) -> int:
    """The runs of a model a day of cycles takes (`used_runs`), at most one a cycle."""
    return min(len(used_runs(cfg, model_id)), 24 // cfg.schedule.every_hours)


def costs(cfg: Config, now: datetime | None = None, network: bool = True) -> dict[str, Any]:
    """`pointcast plan`'s figures (docs/operations.md, "What a day costs"): by model, the
    messages and bytes of a run (the mean of the runs taken), from the upstream's indexes
    (``network``, the newer of the two newest runs whose indexes all answer) or typical
    message sizes (the table's, or the sample's own); and the disk a cycle needs."""
    now = now or datetime.now(UTC)
    per_model: dict[str, dict[str, Any]] = {}
    stored: dict[str, int] = {}  # a run's bytes in the cache, the shared control's copy included
    for m in plan.needed(cfg):
        model = plan.model_spec(cfg, m)
        per_run = [(nominal_needs(cfg, h)[m], steps) for h, steps in used_runs(cfg, m).items()]
        sample = _sample_message_bytes(cfg, m)
        # What the source writes (`Source.size`): the sample every row at the steps read.
        written = [(need.steps(steps), None if sample is not None else need) for need, steps in per_run]
        counts = [message_count(model, steps, need) for steps, need in written]
        entry: dict[str, Any] = {"messages_per_run": round(sum(counts) / max(len(counts), 1)),
                                 "runs_per_day": runs_per_day(cfg, m)}
        first = per_run[0][0] if per_run else None
        measured = _index_bytes(cfg, m, first, now) if network and first is not None else None
        if measured is not None:
            entry.update(messages_per_run=measured[0], bytes_per_run=measured[1], size_from="index",
                         measured_run=measured[2])
            stored[m] = measured[1]
        else:
            sizes = [estimated_bytes(model, steps, need, sample) for steps, need in written]
            entry.update(bytes_per_run=round(sum(sizes) / max(len(sizes), 1)), size_from="typical",
                         message_bytes=sample if sample is not None else typical_message_bytes(model),
                         typical_of="the sample's runs" if sample is not None else "the upstream")
            stored[m] = max(sizes, default=0)  # the cap holds the longest of the runs taken
        shared = _shared_with(cfg, m)
        if shared:
            # The control's messages (oper-fc) are the IFS's own: fetched once (`need`, fetch).
            keep = 1 - 1 / max(model.members, 1)
            entry.update(shared_with=shared, bytes_per_run=round(entry["bytes_per_run"] * keep),
                         messages_per_run=round(entry["messages_per_run"] * keep))
        entry["bytes_per_day"] = entry["bytes_per_run"] * entry["runs_per_day"]
        per_model[m] = entry
    # The cycle's runs, one a model: `publish.make_room` evicts every other run before a download.
    cache = sum(stored.values())
    run_bytes, archive_cycle = _output_bytes(cfg)
    # A product's archive grows by a cycle only when its basetime model has a new run.
    archive_day = sum(archive_cycle[pid] * runs_per_day(cfg, pc.models[0]) for pid, pc in cfg.products.items())
    scratch = _scratch_bytes(cfg)
    cycles = 24 // cfg.schedule.every_hours
    parts = {"cache_bytes": cache, "scratch_bytes": scratch, "staging_bytes": run_bytes,
             "runs_bytes": run_bytes * cfg.output.keep_runs, "archive_bytes_per_day": archive_day}
    return {"models": per_model, "bytes_per_day": sum(e["bytes_per_day"] for e in per_model.values()),
            "cycles_per_day": cycles,
            "peak_disk_bytes": cache + scratch + run_bytes + parts["runs_bytes"], **parts}


def _shared_with(cfg: Config, model_id: str) -> str | None:
    """The model whose files hold this ensemble's control (ENS's in the IFS's oper-fc), where
    both are configured on one source kind: fetched once."""
    if model_id == "ens" and "ifs" in plan.needed(cfg) \
            and cfg.source_for("ens").type == cfg.source_for("ifs").type == "http":
        return "ifs"
    return None


# The published run: bytes of a value in a point's JSON file (a number and its separator,
# the element's key once a record), and in the Zarr archive (float32, compressed about half).
JSON_VALUE_BYTES = 7
ARCHIVE_VALUE_BYTES = 2
ELEMENTS = 24  # a product's elements, about


def _output_bytes(cfg: Config) -> tuple[int, dict[str, int]]:
    """(a published run's tree, each product's archive growth a cycle): measured on the run
    served and the archive where they are, estimated from the products' points, steps and
    elements otherwise."""
    from . import publish

    served = None if publish.is_url(cfg.output.root) else publish.current_run(cfg.output.root)
    if served:
        tree = publish.tree_bytes(Path(cfg.output.root) / "runs" / served)
        if tree:
            return tree, {pid: _archive_cycle_bytes(cfg, pid) for pid in cfg.products}
    tree, archive = 0, {}
    for pid, pc in cfg.products.items():
        points = len(pc.points)
        for freq in pc.freqs:
            tree += points * _steps_of(pc, freq) * ELEMENTS * JSON_VALUE_BYTES
        archive[pid] = points * _steps_of(pc, pc.freqs[-1]) * ELEMENTS * ARCHIVE_VALUE_BYTES
    return tree, archive


# A Zarr array's metadata files (v3, v2): written once an array, not a cycle.
_ZARR_METADATA = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


def _archive_cycle_bytes(cfg: Config, pid: str) -> int:
    """A product's archive bytes a cycle: the chunks of its stores' variables along
    init_time (a chunk a cycle each) over the init_times they hold; the coordinates and the
    metadata are written once a store, most of a small archive's first cycle."""
    from . import publish

    total = cycles = 0
    for store in publish.archive_stores(cfg.output.root, pid):
        with publish.open_committed(store) as ds:
            cycles += ds.sizes.get(publish.INIT, 0)
            grown = [str(name) for name, var in ds.variables.items() if publish.INIT in var.dims and name != publish.INIT]
        for name in grown:
            array = Path(store) / name
            total += publish.tree_bytes(array) - sum(f.stat().st_size for f in array.iterdir() if f.name in _ZARR_METADATA)
    return total // max(cycles, 1)


def _steps_of(pc: ProductConfig, freq: str) -> int:
    from .contract import FREQ_MINUTES

    return math.ceil(pc.horizon_hours * 60 / FREQ_MINUTES[freq])


def _scratch_bytes(cfg: Config) -> int:
    """The extracted series of a cycle: float32 at every point of each points list a model
    is extracted at, step read and variable of its table (every member's), and the wind and
    temperature at every height of the list."""
    lists: dict[Path, tuple[int, set[float]]] = {}
    for pid, pc in cfg.products.items():
        points, heights = lists.get(pc.points_file, (len(pc.points), set()))
        lists[pc.points_file] = (points, heights | set(PRODUCTS[pid].heights(pc)))
    total = 0
    for m, need in nominal_needs(cfg).items():
        model = MODELS[m]
        steps = len(need.steps(model.steps))
        variables = len({r.var for r, _ in need.rows})
        for f in {pc.points_file for pc in cfg.products.values() if m in pc.models + pc.ensembles}:
            points, heights = lists[f]
            total += points * steps * (variables + 3 * len(heights)) * max(model.members, 1) * 4
    return total
