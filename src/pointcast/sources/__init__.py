"""Where model runs come from.

A model is defined once (``ifs.py``, ``icon.py``); a source is a place runs of those models come
from, chosen by configuration (``[sources.<name>] type = ...``) through ``make_source``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

from .base import FetchedRun, GribField, ModelSpec, Processing, RegularGrid, RunRef, Source
from .icon import ICON_D2, ICON_EU
from .ifs import IFS
from . import ifs as _ifs

MODELS: dict[str, ModelSpec] = {"ifs": IFS, "icon-eu": ICON_EU, "icon-d2": ICON_D2}


def run_steps(model: ModelSpec, init: datetime) -> tuple[timedelta, ...]:
    """Output steps of the run of ``model`` starting at ``init`` (IFS 06/18 UTC stop at 144 h)."""
    if model.id == IFS.id:
        return _ifs.steps_for_run(init.hour)
    return model.steps


class SourceConfig(Protocol):
    type: str
    options: dict[str, Any]


def make_source(name: str, cfg: SourceConfig) -> Source:
    """Build the source configured as ``[sources.<name>]``."""
    kind = getattr(cfg, "type", None)
    options = dict(getattr(cfg, "options", None) or {})
    if kind == "sample":
        from .sample import SampleSource

        return SampleSource.from_options(name, options)
    raise ValueError(f"source {name!r}: unknown source type {kind!r} (known: 'sample')")


__all__ = [
    "FetchedRun", "GribField", "ICON_D2", "ICON_EU", "IFS", "MODELS", "ModelSpec", "Processing",
    "RegularGrid", "RunRef", "Source", "make_source", "run_steps",
]
