"""Where model runs come from.

A model is defined once (``ifs.py``, ``icon.py``, ``msm.py``, ``gfs.py``), with the table of
where its upstream publishes it (``ModelSpec.upstream``); a source is a place runs of those
models come from, chosen by configuration (``[sources.<name>] type = ...``) through
``pointcast.sourcing.make_source``: ``sample`` (synthetic, offline) or ``http`` (the real
upstreams and their mirrors, ``remote/``). The sample's synthetic runs are written by its own
package, ``pointcast.sample``, which imports the models defined here.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from . import ifs as _ifs, msm as _msm
from .base import FetchedRun, ModelSpec, RegularGrid, RunRef, Source
from .ens import ENS
from .gefs import GEFS
from .gfs import GFS
from .icon import ICON_D2, ICON_EU
from .icon_eps import ICON_EU_EPS
from .ifs import IFS
from .msm import MSM

MODELS: dict[str, ModelSpec] = {"ifs": IFS, "icon-eu": ICON_EU, "icon-d2": ICON_D2, "msm": MSM, "gfs": GFS,
                                "ens": ENS, "icon-eu-eps": ICON_EU_EPS, "gefs": GEFS}


def run_steps(model: ModelSpec, init: datetime, horizon_hours: float | None = None) -> tuple[timedelta, ...]:
    """Output steps of the run of ``model`` starting at ``init``: the forecast range of some
    models depends on the run (IFS 06/18 UTC stop at 144 h, MSM 03/06/09/15/18/21 UTC at
    39 h while 00/12 UTC reach 78 h); up to ``horizon_hours`` where a source caps them (its
    ``horizon_hours`` option)."""
    if model.id in (IFS.id, ENS.id):
        steps = _ifs.steps_for_run(init.hour)
    elif model.id == MSM.id:
        steps = _msm.steps_for_run(init.hour)
    else:  # GFS and ICON: every run has the same steps.
        steps = model.steps
    if horizon_hours is None:
        return steps
    return tuple(s for s in steps if s <= timedelta(hours=horizon_hours))


__all__ = [
    "ENS", "FetchedRun", "GEFS", "GFS", "ICON_D2", "ICON_EU", "ICON_EU_EPS", "IFS", "MODELS", "MSM", "ModelSpec",
    "RegularGrid", "RunRef", "Source", "run_steps",
]
