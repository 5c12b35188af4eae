"""Model levels chosen per run (ICON: rows with ``levels=RUN_LEVELS``): from the run's HHL,
the full levels that span the hub heights, and the files of those levels to fetch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import eccodes
import numpy as np

from ...config import HUB_HEIGHT_RANGE_M
from ...gribtable import RUN_LEVELS, GribField, Processing
from ...ingest import plain_grib
from ..base import Layout, ModelSpec
from ..icon import LEVEL_COUNTS, hub_levels
from .files import RemoteFile
from .transport import SourceUnavailable

# Half levels whose HHL is asked for at once while looking for the hub heights' levels.
HHL_BATCH = 4


@dataclass(frozen=True)
class LevelPlan:
    """The model levels of a run (``plan_model_levels``): what was learnt from its HHL and the
    files of the chosen levels."""

    half_levels: int  # the column's number of half levels (``nlev``)
    full: tuple[int, ...]  # the full levels chosen, top first
    hhl: tuple[Path, ...]  # the HHL files of their half levels, fetched
    files: tuple[RemoteFile, ...]  # the other RUN_LEVELS rows' files on the full levels


def plan_model_levels(layout: Layout, model: ModelSpec, init: datetime,
                      steps: tuple[timedelta, ...], get) -> LevelPlan | None:
    """Plan the files of the rows whose levels each run decides (``RUN_LEVELS``: ICON's model
    levels, sources/icon.py) where ``layout`` names one file per field; None otherwise.

    ``get(files)`` fetches ``RemoteFile``s and returns their local paths. The HHL row's file of
    half level 1 (the top, which every vertical grid has) gives the number of half levels
    (``nlev``; `_half_levels`, also where the top is not published); HHL is then fetched from the surface half level upwards, ``HHL_BATCH`` levels
    at a time, until ``icon.hub_levels`` finds the full levels that span the hub heights
    (``config.HUB_HEIGHT_RANGE_M``) at every cell. The other rows (U, V) get the files of
    those full levels at every step."""
    rows = [r for r in model.fields if r.levels == RUN_LEVELS]
    path_vars = layout.path_vars
    if not rows or path_vars is None:
        return None
    heights = [r for r in rows if r.var == "hhl"]
    if len(heights) != 1:
        raise ValueError(f"{model.id}: rows of levels chosen per run need one 'hhl' row")

    def file(row: GribField, level: int, minute: int) -> RemoteFile | None:
        extra = path_vars(row, level, minute)
        if extra is None:
            return None
        return RemoteFile(extra.pop("path", layout.path).format(
            init=init, step=minute // 60, minute=minute % 60, **extra), None, minute / 60)

    def hhl_files(levels: list[int]) -> list[RemoteFile]:
        files = [f for lv in levels if (f := file(heights[0], lv, 0)) is not None]
        if len(files) != len(levels):
            raise ValueError(f"{model.id}: layout {layout.name!r} names no HHL file")
        return files

    nlev = _half_levels(model, hhl_files, get)
    hhl: dict[int, np.ndarray] = {}
    paths: dict[int, Path] = {}
    full, above = None, nlev + 1  # the half levels fetched so far lie below ``above``
    while full is None and above > 1:
        batch = list(range(above - 1, max(above - 1 - HHL_BATCH, 0), -1))
        for lv, path in zip(batch, get(hhl_files(batch)), strict=True):
            got, hhl[lv] = _hhl(path, lv)
            if got != nlev:
                raise SourceUnavailable(f"{path}: HHL of {got} half levels, half level 1 has "
                                        f"{nlev}")
            paths[lv] = path
        full, above = hub_levels(hhl, HUB_HEIGHT_RANGE_M[1]), batch[-1]
    if full is None:
        raise SourceUnavailable(f"{model.id} {init:%Y-%m-%d %H} UTC: no model level reaches "
                                f"{HUB_HEIGHT_RANGE_M[1]:g} m above the ground at every cell "
                                f"(HHL of {nlev} half levels)")
    minutes = sorted({int(s.total_seconds() // 60) for s in steps})
    levelled = [f for r in rows if r is not heights[0] and r.processing is not Processing.CONSTANT
                for m in minutes if not (m % 60 and not r.fine)
                for lv in full if (f := file(r, lv, m)) is not None]
    return LevelPlan(nlev, full, tuple(paths[lv] for lv in (*full, full[-1] + 1)),
                     tuple(levelled))


def _hhl(path: Path, level: int | None = None) -> tuple[int, np.ndarray]:
    """(number of half levels ``nlev``, heights with NaN where missing) of the HHL message in
    ``path``, checked to be of half level ``level`` when given."""
    with open(plain_grib(path), "rb") as f:
        h = eccodes.codes_grib_new_from_file(f)
    if h is None:
        raise SourceUnavailable(f"{path}: no GRIB message")
    try:
        if eccodes.codes_get_string(h, "typeOfLevel") != "generalVertical":
            raise SourceUnavailable(f"{path}: not a half-level (generalVertical) field")
        if level is not None and eccodes.codes_get_long(h, "level") != level:
            raise SourceUnavailable(f"{path}: HHL of half level "
                                    f"{eccodes.codes_get_long(h, 'level')}, not {level}")
        nlev = eccodes.codes_get_long(h, "nlev")
        values = eccodes.codes_get_values(h)
        if eccodes.codes_get_long(h, "bitmapPresent"):
            values[values == eccodes.codes_get_double(h, "missingValue")] = np.nan
    finally:
        eccodes.codes_release(h)
    return nlev, values



def _half_levels(model: ModelSpec, hhl_files, get) -> int:
    """The number of half levels of the run's vertical grid (``nlev``, which every HHL message
    states): from HHL of half level 1, the top, which every vertical grid has. Where the tree
    lacks it, from the surface half level of the model's known level count (``LEVEL_COUNTS``),
    which states the same count when it is the surface."""
    try:
        return _hhl(get(hhl_files([1]))[0])[0]
    except SourceUnavailable as top:
        known = LEVEL_COUNTS.get(model.id)
        if known is None:
            raise
        try:
            nlev, _ = _hhl(get(hhl_files([known + 1]))[0], known + 1)
        except SourceUnavailable:
            raise top from None
        if nlev != known + 1:
            raise SourceUnavailable(f"{model.id}: HHL of half level 1 is not published, and half level "
                                    f"{known + 1} is of a grid of {nlev} half levels") from top
        return nlev
