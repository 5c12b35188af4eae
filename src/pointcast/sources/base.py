"""What every source shares: a model's description, where its upstream publishes it, and the
port through which runs are discovered and fetched.

A model is described once, in its own module (``sources/ifs.py``, ``sources/icon.py``): its
grid, its output steps and a table of ``GribField`` rows (``pointcast.gribtable``). A source (the embedded sample,
ECMWF open data, DWD open data ...) is a place runs of those models come from.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from ..gribtable import RUN_LEVELS, GribField, Processing


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
class Mirror:
    """A server publishing a model's runs: its base URL, to which a layout's paths are added."""

    name: str
    url: str


@dataclass(frozen=True)
class Layout:
    """One way an upstream lays out a run's files, as templates relative to a mirror's URL.

    Templates are ``str.format`` strings over ``init`` (the run's start, a datetime: use
    ``{init:%Y%m%d}``), ``step`` (whole hours), ``minute`` (minutes past the hour), ``first``
    and ``last`` (the step range of a ``step_groups`` file), whatever ``path_vars`` returns and
    the variables of each of ``parts``.
    """

    name: str
    path: str  # a data file
    index_path: str | None = None  # its index; None: files are fetched whole
    index: str | None = None  # index format: "ecmwf" (.index JSON lines) | "wgrib2" (.idx)
    run_hours: tuple[int, ...] | None = None  # the runs it applies to (None: every run)
    step_groups: tuple[tuple[int, int], ...] | None = None  # a file holds a range of steps
    # One file per field and step (DWD): (row, level, step minutes) -> template variables
    # (a "path" key replaces the template), or None when the row has no file at that step.
    path_vars: Callable[[GribField, int | None, int], dict[str, Any] | None] | None = None
    compression: str | None = None  # "bz2": files are stored compressed (ingest unpacks them)
    # A step's messages split over several files: the template variables of each, in order
    # (GEFS: a file per member, {"member": "gep01"}; ECMWF ENS: the perturbed members in
    # enfo-ef, the control in oper-fc). Empty: one file a step (or a field).
    parts: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True)
class Upstream:
    """Where a model's runs are published over HTTP (``sources/remote/`` reads it): mirrors
    in priority order, layouts tried in order (newest first), and how an index entry names a
    row of the model's table."""

    mirrors: tuple[Mirror, ...]
    layouts: tuple[Layout, ...]
    select: Callable[[dict[str, Any], GribField], bool] | None = None
    licence: str = ""


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
    upstream: Upstream | None = None  # the real upstream, for ``type = "http"`` sources
    # An ensemble: its members, control included where one is published (perturbationNumber
    # 0; ICON-EU-EPS publishes members 1-40 and no control); 0 for a deterministic model.
    members: int = 0
    # How long after its start a run is usually complete on the upstream (its last step
    # published): with `run_interval`, how old a served run may be in a steady state
    # (`stale_after`); the sample source's runs count as published from then, so that a cycle
    # at a set clock (`pointcast run --at`) takes the runs an operator had at that time.
    publication_delay: timedelta = timedelta(0)

    def field_for(self, var: str) -> GribField:
        for f in self.fields:
            if f.var == var:
                return f
        raise KeyError(f"model {self.id} has no field for {var!r}")

    @property
    def horizon(self) -> timedelta:
        return max(self.steps)

    def run_interval(self, run_hours: Collection[int] | None = None) -> timedelta:
        """The longest time between two consecutive runs (over midnight too), of ``run_hours``
        where given (the runs a cycle can take: IFS's 00/12 UTC where only they reach the
        horizon a product needs of it), of every run otherwise."""
        starts = sorted(self.run_hours if not run_hours else run_hours)
        return timedelta(hours=max(b - a for a, b in zip(starts, [*starts[1:], starts[0] + 24], strict=True)))

    def stale_after(self, schedule_hours: int, run_hours: Collection[int] | None = None) -> timedelta:
        """The age past which a product whose basetime is this model's run is stale: a run is
        served at most one run interval (of the runs the cycle can take, ``run_hours``) plus
        its publication delay after its start before the next one is complete upstream, and
        a cycle takes that one at most a schedule period later (docs/operations.md, "When a
        product is stale")."""
        return self.run_interval(run_hours) + self.publication_delay + timedelta(hours=schedule_hours)


@dataclass(frozen=True)
class RunRef:
    """A model run as found by discover: what it is and which steps are published so far."""

    model: str
    init: datetime  # UTC, timezone-aware
    steps: tuple[timedelta, ...]
    source: str
    synthetic: bool = False
    complete: bool = True
    notes: tuple[str, ...] = ()  # what discovery had to decide (a newer run not ready ...)


@dataclass(frozen=True)
class FetchedRun:
    run: RunRef
    files: tuple[Path, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Size:
    """The bytes a fetch of a run still has to write into the cache, and how they are known
    ("index": the upstream's index sizes; "estimate": `estimated_bytes`; "cached": none)."""

    bytes: int
    how: str


class Source(Protocol):
    """The port for a place model runs come from."""

    name: str

    def discover(self, model: ModelSpec, now: datetime) -> RunRef: ...

    def size(self, run: RunRef, model: ModelSpec, cache: Path) -> Size: ...

    def fetch(self, run: RunRef, model: ModelSpec, cache: Path) -> FetchedRun: ...


BYTES_PER_VALUE = 2  # 16-bit packing, the upstreams' usual and the sample's
MESSAGE_OVERHEAD = 200  # a GRIB2 message's sections besides its values
# The levels of a row whose run chooses them (ICON's model levels spanning the hub heights,
# its HHL column once), counted without the run's HHL at hand.
RUN_LEVELS_GUESS = 10


def estimated_bytes(model: ModelSpec, steps: tuple[timedelta, ...], points: int) -> int:
    """The messages of ``model``'s table at ``steps`` (every member), ``points`` values each at
    `BYTES_PER_VALUE`: where no index gives the sizes. An upper bound mostly, as compressed
    packing (CCSDS, JPEG, bz2 files) makes messages smaller."""
    fine = [s for s in model.fine_steps if steps and s <= max(steps)]
    messages = 0
    for row in model.fields:
        at = 1 if row.processing is Processing.CONSTANT else len(steps) + (len(fine) if row.fine else 0)
        messages += at * (len(row.levels) if row.levels else RUN_LEVELS_GUESS if row.levels == RUN_LEVELS else 1)
    return messages * max(model.members, 1) * (points * BYTES_PER_VALUE + MESSAGE_OVERHEAD)


def hours(*values: float) -> tuple[timedelta, ...]:
    return tuple(timedelta(hours=v) for v in values)


def floor_run(model: ModelSpec, when: datetime) -> datetime:
    """The start of ``model``'s last run at or before ``when`` (a time without a zone is UTC)."""
    utc = UTC
    t = (when.replace(tzinfo=utc) if when.tzinfo is None else when.astimezone(utc)).replace(
        minute=0, second=0, microsecond=0)
    for _ in range(24):
        if t.hour in model.run_hours:
            return t
        t -= timedelta(hours=1)
    raise ValueError(f"model {model.id} has no run hours")
