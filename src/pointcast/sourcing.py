"""Which source a configured model's runs come from: the sample (``pointcast.sample``) or the
HTTP source (``pointcast.sources.remote``). Above both, since the sample imports the models
(``pointcast.sources``) it writes runs of; each is imported only when it is configured.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from .sources import MODELS, run_steps
from .sources.base import FetchedRun, Need, RunRef, Source

if TYPE_CHECKING:
    from .config import Config

log = logging.getLogger(__name__)


class SourceConfig(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def options(self) -> dict[str, Any]: ...


def check_models(cfg: Config) -> None:
    """Refuse a configuration naming a model pointcast does not know, an ensemble among a
    product's blended ``models`` or a deterministic model among its ``ensembles``
    (`config.error_at`: the file, key and line)."""
    from .config import error_at

    for mid in cfg.models:
        if mid not in MODELS:
            raise error_at(cfg, ("models", mid), f"unknown model (known: {', '.join(MODELS)})")
    for pid, pc in cfg.products.items():
        for key, names, ensemble in (("models", pc.models, False), ("ensembles", pc.ensembles, True)):
            for m in names:
                if bool(MODELS[m].members) != ensemble:
                    raise error_at(cfg, ("products", pid, key), f"model {m!r} is " + (
                        "not an ensemble" if ensemble else "an ensemble: name it in 'ensembles'"))
    from .need import check

    check(cfg)


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


def find_run(cfg: Config, model_id: str, now: datetime, needed: timedelta, until: datetime | None = None,
             whole: bool = False, logger: logging.Logger | logging.LoggerAdapter = log) -> RunRef:
    """Newest run of the model whose horizon reaches `needed` from its start, or the time
    `until` where given (a product's basetime plus its horizon; walks back run by run).
    ``whole``: every step of the run, beyond the source's `horizon_hours` (the model stands in
    for a dropped one after it: `plan.short_of_horizon`)."""
    from .need import model_spec
    from .sources.remote import candidate_runs

    model = model_spec(cfg, model_id)  # its configured run hours only
    source = make_source(cfg.models[model_id].source, cfg.source_for(model_id), whole=whole)

    def reaches(init: datetime, steps) -> bool:
        return init + max(steps) >= (until or init + needed)

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
    raise RuntimeError(f"{model_id}: no run reaching the {needed / timedelta(hours=1):g} h horizon "
                       f"of the products it ends{f' (to {until.isoformat()})' if until else ''} was found")


def fetch_run(cfg: Config, run: RunRef, need: Need | None = None,
              logger: logging.Logger | logging.LoggerAdapter = log) -> FetchedRun:
    """The files of ``run`` in the cache, from its configured source: the messages some
    product reads (``need``: `pointcast.need.needs`), every message of the table where None."""
    source = make_source(cfg.models[run.model].source, cfg.source_for(run.model))
    fetched = source.fetch(run, MODELS[run.model], cfg.output.cache_dir, need)
    logger.info("%s: %d files ready (steps to +%s)", run.model, len(fetched.files), max(fetched.run.steps))
    return fetched
