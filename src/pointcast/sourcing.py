"""Which source a configured model's runs come from: the sample (``pointcast.sample``) or the
HTTP source (``pointcast.sources.remote``). Above both, since the sample imports the models
(``pointcast.sources``) it writes runs of; each is imported only when it is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from .publish import make_room
from .sources import MODELS, run_steps
from .sources.base import FetchedRun, ModelSpec, Need, RunRef, Source

if TYPE_CHECKING:
    from .config import Config

log = logging.getLogger(__name__)


class SourceConfig(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def options(self) -> dict[str, Any]: ...


def check_models(cfg: Config) -> list[str]:
    """Refuse a configuration naming a model pointcast does not know, an ensemble among a
    product's blended ``models`` or a deterministic model among its ``ensembles``, or a
    product's ``horizon_hours`` shorter than its build needs or beyond what its models reach
    (`chain_reach`) (`config.error_at`: the file, key and line). Returns notes on what the
    configuration degrades by design: the products whose ensembles end before their horizon
    (beyond, the neighbourhood probability and no quantiles; docs/config.md)."""
    from .config import error_at
    from .products import PRODUCTS

    for mid in cfg.models:
        if mid not in MODELS:
            raise error_at(cfg, ("models", mid), f"unknown model (known: {', '.join(MODELS)})")
    notes = []
    for pid, pc in cfg.products.items():
        for key, names, ensemble in (("models", pc.models, False), ("ensembles", pc.ensembles, True)):
            for m in names:
                if bool(MODELS[m].members) != ensemble:
                    raise error_at(cfg, ("products", pid, key), f"model {m!r} is " + (
                        "not an ensemble" if ensemble else "an ensemble: name it in 'ensembles'"))
        shortest = PRODUCTS[pid].shortest_horizon_hours
        if pc.horizon_hours < shortest:
            raise error_at(cfg, ("products", pid, "horizon_hours"), (
                f"{pc.horizon_hours} h is too short for {pid}'s local days: at least {shortest} h "
                "(its daily entries need every hour of their days; docs/config.md)"))
        reach, how = chain_reach(cfg, pc.models, dict(pc.max_lead_hours))
        if pc.horizon_hours > reach:
            raise error_at(cfg, ("products", pid, "horizon_hours"), (
                f"{pc.horizon_hours} h is beyond what its models reach: at most {reach:g} h from a run's "
                f"start: {how} (docs/config.md)"))
        reach, how = chain_reach(cfg, pc.ensembles, {})
        if pc.ensembles and pc.horizon_hours > reach:
            notes.append(str(error_at(cfg, ("products", pid, "ensembles"), (
                f"the ensembles reach {reach:g} h of the {pc.horizon_hours} h horizon: {how}; beyond, the "
                "neighbourhood probability and no quantiles (docs/config.md)"))))
    from .need import check

    check(cfg)
    return notes


def run_reach(model: ModelSpec, cap: float | None) -> dict[int, float]:
    """The hours each run of ``model`` reaches from its start, by its UTC hour (IFS: 360 at
    00/12 UTC, 144 at 06/18), up to ``cap`` (its source's ``horizon_hours``)."""
    out = {}
    for hour in model.run_hours:
        steps = run_steps(model, datetime(2000, 1, 1, hour, tzinfo=UTC), cap)
        out[hour] = max((s / timedelta(hours=1) for s in steps), default=0.0)
    return out


def chain_reach(cfg: Config, models: Sequence[str], limits: Mapping[str, int]) -> tuple[float, str]:
    """How far from a run's start a chain of models (a product's blend, or its ensembles in
    priority order) can reach, and each model's part in words: the last model's longest run
    (discovery walks back to a run that long: `plan.needed`), each one before it its shortest
    (its newest run is taken, whatever its length) up to its ``limits`` (`max_lead_hours`),
    each of its configured ``run_hours`` only, with its source's ``horizon_hours`` applied."""
    from .plan import model_spec

    best, parts = 0.0, []
    for i, m in enumerate(models):
        last = i == len(models) - 1
        pick = max if last else min
        model = model_spec(cfg, m)
        reach = run_reach(model, cfg.source_for(m).options.get("horizon_hours"))
        hours = pick(reach.values())
        detail = ""
        if len(set(reach.values())) > 1:
            detail = " at its " + "/".join(f"{h:02d}" for h, r in sorted(reach.items()) if r == hours) + " UTC runs"
            detail += "" if last else ", which may be its newest"
        if m in limits and limits[m] < hours:
            hours, detail = float(limits[m]), " by max_lead_hours"
        elif hours < pick(run_reach(model, None).values()):
            detail += f", by [sources.{cfg.models[m].source}] horizon_hours"
        best = max(best, hours)
        parts.append(f"{m} {hours:g} h{detail}")
    return best, "; ".join(parts)


def make_source(name: str, cfg: SourceConfig, whole: bool = False) -> Source:
    """Build the source configured as ``[sources.<name>]``; ``whole``: without its
    `horizon_hours` cap, for a model that stands in for a dropped one to its horizon."""
    kind = getattr(cfg, "type", None)
    options = dict(getattr(cfg, "options", None) or {})
    if whole:
        options.pop("horizon_hours", None)
    if kind == "sample":
        from .sample import SampleSource

        return SampleSource.from_options(name, options)
    if kind == "http":
        from .sources.remote import HttpSource

        return HttpSource.from_options(name, options)
    raise ValueError(f"source {name!r}: unknown source type {kind!r} (known: 'sample', 'http')")


class NoRunReaching(RuntimeError):
    """No run of the model's last runs reaches the horizon: none will seconds later either."""


def find_run(cfg: Config, model_id: str, now: datetime, needed: timedelta, until: datetime | None = None,
             whole: bool = False, logger: logging.Logger | logging.LoggerAdapter = log) -> RunRef:
    """Newest run of the model whose horizon reaches `needed` from its start, or the time
    `until` where given (a product's basetime plus its horizon; walks back run by run).
    ``whole``: every step of the run, beyond the source's `horizon_hours` (the model stands in
    for a dropped one after it: `plan.short_of_horizon`)."""
    from .plan import model_spec
    from .sources.remote import candidate_runs

    model = model_spec(cfg, model_id)  # its configured run hours only
    source = make_source(cfg.models[model_id].source, cfg.source_for(model_id), whole=whole)

    def reaches(init: datetime, steps) -> bool:
        return init + max(steps) >= (until or init + needed)

    # The sample's runs are there at once: one counts as published when its upstream usually
    # completes it, so that a cycle at a set clock (`pointcast run --at`) takes the runs an
    # operator had then; an HTTP upstream says itself which of its runs are complete.
    if cfg.source_for(model_id).type == "sample":
        now -= model.publication_delay
    # Runs too short for the horizon by design (IFS 06/18 UTC: 144 h) are not asked for, so
    # the source never waits for one still being published; the loop below catches the rest.
    when = next((t for t in candidate_runs(model, now, 8) if reaches(t, run_steps(model, t))), now)
    for _ in range(8):
        run = source.discover(model, when)
        if reaches(run.init, run.steps):
            logger.info("%s: run %s from %s, %d steps to +%s", model_id, run.init.isoformat(),
                        run.source, len(run.steps), max(run.steps))
            return run
        when = run.init - timedelta(minutes=1)
    raise NoRunReaching(f"{model_id}: no run reaching the {needed / timedelta(hours=1):g} h horizon "
                       f"of the products it ends{f' (to {until.isoformat()})' if until else ''} was found")


def fetch_run(cfg: Config, run: RunRef, need: Need | None = None,
              logger: logging.Logger | logging.LoggerAdapter = log,
              in_use: Collection[tuple[str, str]] = frozenset()) -> FetchedRun:
    """The files of ``run`` in the cache, from its configured source: the messages some
    product reads (``need``: `pointcast.need.needs`; every message of the table where None),
    once the cache has room for them (`publish.make_room`: the cached runs not ``in_use``,
    ``(model, YYYYMMDDHH)`` of the cycle's runs, evicted first; `publish.NoRoom` when they
    cannot fit). The room asked for is `Source.size` of the same need."""
    source = make_source(cfg.models[run.model].source, cfg.source_for(run.model))
    model, cache, out = MODELS[run.model], cfg.output.cache_dir, cfg.output
    size = source.size(run, model, cache, need)
    make_room(cache, out.keep_cache_runs, None if out.cache_max_gb is None else int(out.cache_max_gb * 1e9),
              {*in_use, (run.model, f"{run.init.astimezone(UTC):%Y%m%d%H}")}, size.bytes,
              f"{run.model} run {run.init.astimezone(UTC):%Y-%m-%d %H} UTC ({size.how})")
    fetched = source.fetch(run, model, cache, need)
    logger.info("%s: %d files ready (steps to +%s)", run.model, len(fetched.files), max(fetched.run.steps))
    return fetched
