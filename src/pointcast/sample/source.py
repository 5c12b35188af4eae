"""The sample source: the ``Source`` a cycle discovers and fetches synthetic runs from.

A run sits under ``<cache>/sample/<model>/<YYYYMMDDHH>/`` with a ``README.txt`` saying the
data are synthetic and a ``complete`` marker written last (it records the parameters, so a
second fetch of the same run writes nothing, and a fetch with another scale or area rewrites
the run). Files are written under a temporary name and renamed. The default area
(``DEFAULT_AREA``, west -25, south 20, east 150, north 72) crops the global models to Europe and
Asia as far as Japan; a regional model is cropped to it too and must overlap it by at least
2 x 2 points. The same model, init time, scale, area and steps give byte-identical files.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from ..config import parse_init
from ..sources import run_steps
from ..sources.base import (
    FetchedRun,
    ModelSpec,
    Need,
    RunRef,
    Size,
    estimated_bytes,
    floor_run,
    grid_message_bytes,
    message_count,
)
from ..sources.icon import NATIVE_GRIDS
from . import ensemble, gfs, icon, ifs, msm
from .encode import Writer
from .grids import CellGrid, SampleGrid, cell_grid, sample_grid
from .terrain import LandMask
from .weather import Weather

log = logging.getLogger(__name__)

# Part of the cached run's fingerprint: bump it when the files written change, so that runs
# cached by an older version are rewritten.
GENERATOR = "pointcast-sample/5"
SYNTHETIC_NOTE = ("SYNTHETIC DATA: written by pointcast's embedded sample source from an "
                  "analytic weather model; this is not a real forecast.")

DEFAULT_SCALE = 4
# The ensembles' grids are this many times coarser than the deterministic models' by default.
ENSEMBLE_COARSENING = 4
ICON_LAYOUTS = ("v1", "legacy")
# West, south, east, north: Europe, and Asia as far as Japan (MSM's whole domain lies inside,
# and IFS covers Japan beyond MSM's horizon).
DEFAULT_AREA = (-25.0, 20.0, 150.0, 72.0)

UTC = UTC

@dataclass
class SampleSource:
    """Deterministic synthetic runs of the configured models, written like their upstreams."""

    name: str = "sample"
    scale: int = DEFAULT_SCALE
    area: tuple[float, float, float, float] = DEFAULT_AREA
    init: Any = "latest"
    horizon_hours: float | None = None  # cap on the steps (tests); None = the full horizon
    # DWD's tree for ICON-EU/ICON-D2: "v1" (native grids, DWD's only scheme after 30 November
    # 2026) or "legacy" (``icon-eu/grib/...`` bz2 files on regular lat/lon grids).
    icon_layout: str = "v1"
    # The ensembles' (ENS, ICON-EU-EPS, GEFS) scale: every Nth row/column (N times the mesh
    # size on ICON's native grids); None = the largest divisor of the global 0.25 degree
    # grid's 1440 columns up to ENSEMBLE_COARSENING times ``scale`` (a global crop is then
    # evenly spaced across the 0/360 seam).
    ensemble_scale: int | None = None
    # How many members each ensemble writes (its first; `ensemble.members`); None = all of the
    # upstream's. Fewer members make a cheaper cycle with the same ranges of spread (tests).
    members: int | None = None
    # [start, end): no run starting then is published, as when an upstream stops (the soak
    # test, rehearsing the stale alarm); discovery then finds the last run before it.
    outage: tuple[datetime, datetime] | None = None
    _init: datetime | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if isinstance(self.scale, bool) or not isinstance(self.scale, int) or self.scale < 1:
            raise ValueError(f"sample source: scale must be an integer >= 1, got {self.scale!r}")
        try:
            area = tuple(float(v) for v in self.area)
        except (TypeError, ValueError):
            raise ValueError(f"sample source: area must be [west, south, east, north], got "
                             f"{self.area!r}") from None
        if len(area) != 4 or not (area[0] < area[2] and area[1] < area[3]):
            raise ValueError(f"sample source: area must be [west, south, east, north] with "
                             f"west < east and south < north, got {self.area!r}")
        if not (-180 <= area[0] and area[2] <= 180 and -90 <= area[1] and area[3] <= 90):
            raise ValueError(f"sample source: area {self.area!r} is outside -180..180/-90..90")
        self.area = area
        if self.ensemble_scale is None:
            self.ensemble_scale = max(d for d in range(1, ENSEMBLE_COARSENING * self.scale + 1) if 1440 % d == 0)
        if (isinstance(self.ensemble_scale, bool) or not isinstance(self.ensemble_scale, int)
                or self.ensemble_scale < 1):
            raise ValueError(f"sample source: ensemble_scale must be an integer >= 1, got "
                             f"{self.ensemble_scale!r}")
        if self.members is not None and (isinstance(self.members, bool) or not isinstance(self.members, int)
                                         or self.members < 2):
            raise ValueError(f"sample source: members must be an integer >= 2, got {self.members!r}")
        try:
            self._init = parse_init(self.init)
        except ValueError as e:
            raise ValueError(f"sample source: init: {e}") from None
        if self.horizon_hours is not None and self.horizon_hours < 0:
            raise ValueError("sample source: horizon_hours must be >= 0")
        if self.icon_layout not in ICON_LAYOUTS:
            raise ValueError(f"sample source: icon_layout must be one of {list(ICON_LAYOUTS)}, "
                             f"got {self.icon_layout!r}")

    @classmethod
    def from_options(cls, name: str, options: Mapping[str, Any]) -> SampleSource:
        known = {"scale", "area", "init", "horizon_hours", "icon_layout", "ensemble_scale", "members",
                 "outage"}
        unknown = sorted(set(options) - known - {"type"})
        if unknown:
            raise ValueError(f"source {name!r} (sample): unknown option(s) {unknown}; "
                             f"known: {sorted(known)}")
        kwargs = {k: v for k, v in options.items() if k in known}
        return cls(name=name, **kwargs)

    def message_bytes(self, model: ModelSpec, cache: Path) -> int:
        """A message's usual size in this source's runs of ``model``, the size `estimated_bytes`
        takes (`size` before writing a run, `pointcast plan`): the bytes of the newest run of
        it in ``cache`` on this grid over its `message_count`, where there is one, otherwise
        its grid's points at 16 bits (`grid_message_bytes`)."""
        scale = self.ensemble_scale if model.members and self.ensemble_scale is not None else self.scale
        newest = max((Path(cache) / "sample" / model.id).glob("*/complete"), default=None)
        try:
            done = json.loads(newest.read_text()) if newest else {}
            count = message_count(model, tuple(timedelta(minutes=m) for m in done.get("steps_minutes", ())))
            if count and done["scale"] == scale and done["area"] == list(self.area):
                return -(-done["bytes"] // count)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return grid_message_bytes(int(np.prod(self._grid(model, scale).shape)))

    # -- the Source protocol -----------------------------------------------------------------

    def discover(self, model: ModelSpec, now: datetime) -> RunRef:
        init = floor_run(model, self._init or now)
        while self.outage and self.outage[0] <= init < self.outage[1]:
            init = floor_run(model, init - timedelta(hours=1))
        steps = run_steps(model, init, self.horizon_hours)
        return RunRef(model=model.id, init=init, steps=steps, source="sample", synthetic=True,
                      complete=True)

    def size(self, run: RunRef, model: ModelSpec, cache: Path, need: Need | None = None) -> Size:
        """What `fetch` with the same ``need`` adds to the cache: nothing for a run in the
        cache, otherwise every field at the steps it writes (`estimated_bytes` at
        `message_bytes`) less the run's files there now, which it deletes first (a run written
        for a need of fewer steps: a newer basetime reads further into it)."""
        run, run_dir, fingerprint, _ = self._run_dir(run, model, cache, need)
        if self._cached(run_dir, fingerprint, need) is not None:
            return Size(0, "cached")
        from ..publish import tree_bytes

        there = tree_bytes(run_dir)
        return Size(max(estimated_bytes(model, run.steps, None, self.message_bytes(model, cache)) - there, 0),
                    "estimate")

    def fetch(self, run: RunRef, model: ModelSpec, cache: Path, need: Need | None = None) -> FetchedRun:
        """The run written into ``cache``: its steps up to the last ``need`` reads, every
        field at each, as the upstreams' files hold them all (decode reads ``need``'s only);
        a run already there with more steps is used as it is (`_cached`)."""
        run, run_dir, fingerprint, scale = self._run_dir(run, model, cache, need)
        init = datetime.fromisoformat(fingerprint["init"])
        marker = run_dir / "complete"
        notes = (SYNTHETIC_NOTE,
                 f"sample {model.id} run {init:%Y-%m-%d %H} UTC, scale {scale} (every "
                 f"{scale}th row/column of the {model.grid.dlat} deg grid), area "
                 f"{list(self.area)}")
        cached = self._cached(run_dir, fingerprint, need)
        if cached is not None:
            return FetchedRun(run=run, files=cached, notes=notes, need=need)
        if marker.exists():
            log.info("sample %s %s: cached run differs from the configuration, rewriting",
                     model.id, run_dir)
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        grid = self._grid(model, scale)
        weather = Weather(ensemble.weather_model(model) if model.members else model, grid,
                          LandMask.load(cache))
        writer = Writer(run_dir)
        try:
            writer.write("README.txt", _readme(model, init, grid, scale, self).encode(),
                         data_file=False)
            if model.members:
                ensemble.write_files(run, model, grid, weather, writer, self.icon_layout, self.members)
            elif isinstance(grid, CellGrid):  # native: an ICON model in the v1 tree
                icon.write_v1_files(run, model, grid, weather, writer)
            elif model.id == "ifs":
                ifs.write_files(run, model, grid, weather, writer)
            elif model.id in ("icon-eu", "icon-d2"):
                icon.write_legacy_files(run, model, grid, weather, writer)
            elif model.id == "msm":
                msm.write_files(run, model, grid, weather, writer)
            elif model.id == "gfs":
                gfs.write_files(run, model, grid, weather, writer)
            else:
                raise ValueError(f"the sample source has no writer for model {model.id!r}")
        finally:
            writer.close()
        files = tuple(writer.files)  # in step order
        record = dict(fingerprint, files=[str(f.relative_to(run_dir)) for f in files],
                      bytes=writer.bytes, note=SYNTHETIC_NOTE)
        tmp = marker.with_name(f"complete.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record) + "\n")
        os.replace(tmp, marker)
        log.info("sample %s %s: %d files, %.1f MB", model.id, f"{init:%Y%m%d%H}", len(files),
                 writer.bytes / 1e6)
        return FetchedRun(run=run, files=files, notes=notes, need=need)


    def _run_dir(self, run: RunRef, model: ModelSpec, cache: Path, need: Need | None = None
                 ) -> tuple[RunRef, Path, dict[str, Any], int]:
        """The run cut to the steps ``need`` reads, its directory in ``cache``, the
        fingerprint its ``complete`` marker records, and the scale of its grid."""
        if need is not None:
            run = replace(run, steps=need.steps(run.steps))
        if run.model != model.id:
            raise ValueError(f"run of {run.model!r} fetched as model {model.id!r}")
        if not run.steps:
            raise ValueError(f"run {run.model} {run.init:%Y%m%d%H} has no steps")
        init = (run.init.replace(tzinfo=UTC) if run.init.tzinfo is None
                else run.init.astimezone(UTC))
        fingerprint: dict[str, Any] = {
            "generator": GENERATOR, "model": model.id, "init": init.isoformat(),
            "steps_minutes": [int(s.total_seconds() // 60) for s in run.steps],
            "scale": self.scale, "area": list(self.area),
        }
        scale = self.scale
        if model.members and self.ensemble_scale is not None:  # set by __post_init__
            scale = fingerprint["scale"] = self.ensemble_scale
            if self.members is not None:
                fingerprint["members"] = len(ensemble.members(model, self.members))
        if model.id in NATIVE_GRIDS or model.id == "icon-eu-eps":
            fingerprint["icon_layout"] = self.icon_layout
        return run, Path(cache) / "sample" / model.id / f"{init:%Y%m%d%H}", fingerprint, scale

    @staticmethod
    def _cached(run_dir: Path, fingerprint: dict[str, Any], need: Need | None) -> tuple[Path, ...] | None:
        """The files of the run in the cache when its marker records ``fingerprint``; with a
        ``need``, a run written with more steps too (it holds those read: decode reads
        ``need``'s only)."""
        try:
            done = json.loads((run_dir / "complete").read_text())
        except (OSError, ValueError):
            return None
        files = tuple(run_dir / f for f in done.get("files", []))
        steps, written = fingerprint["steps_minutes"], done.get("steps_minutes") or []
        same = all(done.get(k) == v for k, v in fingerprint.items() if k != "steps_minutes")
        if same and (written == steps or (need is not None and set(steps) <= set(written))) \
                and all(f.exists() for f in files):
            return files
        return None

    def _grid(self, model: ModelSpec, scale: int) -> SampleGrid | CellGrid:
        if model.members:
            return ensemble.grid(model, scale, self.area)
        native = model.id in NATIVE_GRIDS and self.icon_layout == "v1"
        return (cell_grid if native else sample_grid)(model, scale, self.area)


def _readme(model: ModelSpec, init: datetime, grid: SampleGrid | CellGrid, scale: int,
            src: SampleSource) -> str:
    return (
        f"{SYNTHETIC_NOTE}\n\n"
        f"Model stood in for: {model.name} ({model.id}), run {init:%Y-%m-%d %H:%M} UTC.\n"
        f"Layout, parameter encoding, packing and step conventions follow the real upstream\n"
        f"(ECMWF open data for IFS and ENS, DWD open data for ICON and ICON-EU-EPS, NOAA for\n"
        f"GFS and GEFS, JMA's GPV for MSM), the values do not.\n"
        f"Grid: {grid.describe()}\n"
        f"(scale {scale}: {scale} times the operational grid spacing, "
        f"area {list(src.area)}).\n"
        f"Generator: {GENERATOR} (pointcast.sample).\n"
    )
