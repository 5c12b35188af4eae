"""The files of a run: for each layout of an upstream, which paths (and indexes) a run's steps
and the model's table rows name (each of them once per ``Layout.parts`` where a step is split
over several files, as GEFS's file per member), and which files hold an unstructured grid's
cell centres.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ...gribtable import RUN_LEVELS, Processing
from ...ingest import CELL_CENTRE_ROWS
from ..base import Layout, ModelSpec, Need


@dataclass(frozen=True)
class RemoteFile:
    path: str  # data file, relative to a mirror's URL
    index_path: str | None
    first_step_h: float
    optional: bool = False  # only optional rows' messages: a run can go without it
    # The field a file of a one-file-per-field layout holds ("" where a file holds every
    # field of its steps): its parameter and level.
    param: str = ""
    level: int | None = None

    @property
    def field(self) -> str:
        return self.param if self.level is None else f"{self.param} level {self.level}"


def run_files(layout: Layout, model: ModelSpec, init: datetime,
              steps: tuple[timedelta, ...], need: Need | None = None) -> list[RemoteFile]:
    """The files of the run of ``model`` at ``init`` with ``steps``, in step order; on a
    one-file-per-field layout only those of the rows ``need`` reads at each step."""
    minutes = [int(s.total_seconds() // 60) for s in steps]
    out: list[RemoteFile] = []
    seen: set[str] = set()

    def add(tmpl_vars: dict[str, Any], step_min: int, param: str = "",
            level: int | None = None, optional: bool = False) -> None:
        for part in layout.parts or ({},):
            add_one({**tmpl_vars, **part}, step_min, param, level, optional)

    def add_one(tmpl_vars: dict[str, Any], step_min: int, param: str,
                level: int | None, optional: bool) -> None:
        path = tmpl_vars.pop("path", layout.path).format(init=init, **tmpl_vars)
        if path in seen:
            if not optional:  # a file some required row reads is required
                at = next(i for i, f in enumerate(out) if f.path == path)
                out[at] = replace(out[at], optional=False)
            return
        seen.add(path)
        index = layout.index_path.format(init=init, **tmpl_vars) if layout.index_path else None
        out.append(RemoteFile(path, index, step_min / 60, optional, param, level))

    if layout.step_groups is not None:
        hours_ = {m // 60 for m in minutes}
        for a, b in layout.step_groups:
            if any(a <= h <= b for h in hours_):
                add({"first": a, "last": b, "step": a, "minute": 0}, a * 60)
        return out
    if layout.path_vars is not None and minutes:  # one file per field: sub-hourly fields too
        minutes = sorted(set(minutes) | {int(s.total_seconds() // 60) for s in model.fine_steps
                                         if s <= max(steps)})
    for m in minutes:
        base = {"step": m // 60, "minute": m % 60}
        if layout.path_vars is None:
            add(base, m)
            continue
        for row in model.fields:
            # Constants exist at step 0 only; a maximum over the interval before the step
            # (DWD's VMAX_10M) has no step 0.
            # The levels of RUN_LEVELS rows are planned per run (plan_model_levels).
            if (row.processing is Processing.CONSTANT and m != 0) or (m % 60 and not row.fine) \
                    or (row.processing is Processing.INTERVAL and m == 0) \
                    or row.levels == RUN_LEVELS or (need is not None and not need.wants(row, m)):
                continue
            for level in row.levels or (None,):
                extra = layout.path_vars(row, level, m)
                if extra is not None:
                    add({**base, **extra}, m, row.param or row.shortName, level, row.optional)
    return out


def cell_centre_files(layout: Layout, init: datetime) -> dict[str, RemoteFile]:
    """The files of the cell centres of the run at ``init`` by parameter ("CLAT", "CLON")
    where ``layout`` is on an unstructured grid and names them; {} otherwise."""
    if layout.path_vars is None:
        return {}
    out = {}
    for row in CELL_CENTRE_ROWS:
        extra = layout.path_vars(row, None, 0)
        if extra is not None:
            param = row.param or row.shortName
            out[param] = RemoteFile(extra.pop("path", layout.path).format(
                init=init, step=0, minute=0, **extra), None, 0.0, param=param)
    return out

