"""Where model runs come from.

A model is defined once (``ifs.py``, ``icon.py``, ``msm.py``, ``gfs.py``), with the table of
where its upstream publishes it (``ModelSpec.upstream``); a source is a place runs of those
models come from, chosen by configuration (``[sources.<name>] type = ...``) through
``make_source``: ``sample`` (synthetic, offline) or ``http`` (the real upstreams and their
mirrors, ``remote/``). The sample's synthetic runs are written by its own package,
``pointcast.sample``, imported only when a sample source is configured.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

from .base import FetchedRun, GribField, ModelSpec, Processing, RegularGrid, RunRef, Source
from .gfs import GFS
from .icon import ICON_D2, ICON_EU
from .ifs import IFS
from .msm import MSM
from . import ifs as _ifs
from . import msm as _msm

MODELS: dict[str, ModelSpec] = {"ifs": IFS, "icon-eu": ICON_EU, "icon-d2": ICON_D2, "msm": MSM, "gfs": GFS}


def run_steps(model: ModelSpec, init: datetime) -> tuple[timedelta, ...]:
    """Output steps of the run of ``model`` starting at ``init``: the forecast range of some
    models depends on the run (IFS 06/18 UTC stop at 144 h, MSM 03/06/09/15/18/21 UTC at
    39 h while 00/12 UTC reach 78 h)."""
    if model.id == IFS.id:
        return _ifs.steps_for_run(init.hour)
    if model.id == MSM.id:
        return _msm.steps_for_run(init.hour)
    # GFS and ICON: every run has the same steps.
    return model.steps


class SourceConfig(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def options(self) -> dict[str, Any]: ...


def make_source(name: str, cfg: SourceConfig) -> Source:
    """Build the source configured as ``[sources.<name>]``."""
    kind = getattr(cfg, "type", None)
    options = dict(getattr(cfg, "options", None) or {})
    if kind == "sample":
        from ..sample import SampleSource

        return SampleSource.from_options(name, options)
    if kind == "http":
        from .remote import HttpSource

        return HttpSource.from_options(name, options)
    raise ValueError(f"source {name!r}: unknown source type {kind!r} (known: 'sample', 'http')")


__all__ = [
    "FetchedRun", "GFS", "GribField", "ICON_D2", "ICON_EU", "IFS", "MODELS", "MSM", "ModelSpec",
    "Processing", "RegularGrid", "RunRef", "Source", "make_source", "run_steps",
]
