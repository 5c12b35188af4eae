"""What every source shares: how a model's GRIB encoding maps onto the catalogue, and the
port through which runs are discovered and fetched.

A model is described once, in its own module (``sources/ifs.py``, ``sources/icon.py``): its
grid, its output steps and a table of ``GribField`` rows. A source (the embedded sample,
ECMWF open data, DWD open data ...) is a place runs of those models come from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Protocol


class Processing(str, Enum):
    """How the raw GRIB value at a step relates to the canonical interval value."""

    INSTANT = "instant"  # value valid at the step
    # Accumulated / averaged over the message's window (startStep, endStep]: from the run start
    # (IFS tp, ICON TOT_PREC, ICON ASWDIR_S) or from the last reset (GFS, every 6 hours).
    ACCUM_SINCE_START = "accum_since_start"
    AVG_SINCE_START = "avg_since_start"
    INTERVAL = "interval"  # already the value of the interval ending at the step (max gust)
    CONSTANT = "constant"  # time-invariant field, published at step 0 (HSURF, orography)


@dataclass(frozen=True)
class GribField:
    """One row of a model's encoding table: a GRIB message kind -> a canonical variable."""

    var: str  # canonical name in the catalogue
    shortName: str  # ecCodes shortName as decoded (DWD local names included)
    typeOfLevel: str
    levels: tuple[int, ...] | None = None  # None: a single-level field
    processing: Processing = Processing.INSTANT
    scale: float = 1.0  # canonical = raw * scale + offset (after de-accumulation)
    offset: float = 0.0
    per_second: bool = False  # divide the de-accumulated amount by the interval (J m-2 -> W m-2)
    fine: bool = False  # published on the model's fine (sub-hourly) steps too
    param: str | None = None  # upstream parameter name where it differs (DWD file names)
    edition: int | None = None  # GRIB edition this encoding belongs to (None: any)


@dataclass(frozen=True)
class RegularGrid:
    """A regular latitude/longitude grid as the upstream publishes it."""

    lat_first: float
    lon_first: float
    lat_last: float
    lon_last: float
    dlat: float
    dlon: float

    @property
    def shape(self) -> tuple[int, int]:
        nlat = round(abs(self.lat_last - self.lat_first) / self.dlat) + 1
        nlon = round(abs(self.lon_last - self.lon_first) / self.dlon) + 1
        return nlat, nlon


@dataclass(frozen=True)
class ModelSpec:
    id: str
    name: str
    grid: RegularGrid
    steps: tuple[timedelta, ...]  # output steps of a full run
    fields: tuple[GribField, ...]
    run_hours: tuple[int, ...]  # UTC hours of the runs
    fine_steps: tuple[timedelta, ...] = ()  # sub-hourly steps of the `fine` fields
    resolution_km: float = 0.0

    def field_for(self, var: str) -> GribField:
        for f in self.fields:
            if f.var == var:
                return f
        raise KeyError(f"model {self.id} has no field for {var!r}")

    @property
    def horizon(self) -> timedelta:
        return max(self.steps)


@dataclass(frozen=True)
class RunRef:
    """A model run as found by discover: what it is and which steps are published so far."""

    model: str
    init: datetime  # UTC, timezone-aware
    steps: tuple[timedelta, ...]
    source: str
    synthetic: bool = False
    complete: bool = True


@dataclass(frozen=True)
class FetchedRun:
    run: RunRef
    files: tuple[Path, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


class Source(Protocol):
    """The port for a place model runs come from."""

    name: str

    def discover(self, model: ModelSpec, now: datetime) -> RunRef: ...

    def fetch(self, run: RunRef, model: ModelSpec, cache: Path) -> FetchedRun: ...


def hours(*values: float) -> tuple[timedelta, ...]:
    return tuple(timedelta(hours=v) for v in values)
