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

from ..gribtable import RUN_LEVELS, GribField, Need, Processing


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
    # A message's usual size as the upstream publishes it (bytes): the estimate of a run's
    # bytes where the upstream's indexes cannot be read (`estimated_bytes`: `Source.size`
    # before a download, `pointcast plan`'s typical figure; README.md, "Live sources").
    message_bytes: int = 0
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
    need: Need | None = None  # what decode reads of the files (None: every row of the table)


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

    def size(self, run: RunRef, model: ModelSpec, cache: Path, need: Need | None = None) -> Size:
        """The bytes `fetch` with the same ``need`` still has to write into ``cache`` (before
        a download: `publish.make_room`)."""

    def fetch(self, run: RunRef, model: ModelSpec, cache: Path, need: Need | None = None) -> FetchedRun:
        """The files of ``run`` in ``cache``: the messages of ``need`` (every row of the
        table at every step of the run where None)."""


BYTES_PER_VALUE = 2  # 16-bit packing, the upstreams' usual and the sample's
MESSAGE_OVERHEAD = 200  # a GRIB2 message's sections besides its values
# Model levels of a row whose levels each run chooses (ICON's U/V spanning the hub heights,
# sources/remote/levels.py), counted without the run's HHL at hand: the usual count.
RUN_LEVELS_GUESS = 12


def grid_message_bytes(points: int) -> int:
    """A message of ``points`` values at `BYTES_PER_VALUE` (the sample's packing)."""
    return points * BYTES_PER_VALUE + MESSAGE_OVERHEAD


def message_count(model: ModelSpec, steps: tuple[timedelta, ...], need: Need | None = None) -> int:
    """The messages of ``need`` (every row of the table where None) at ``steps`` and the fine
    steps within them, every member's: one a field, level and step; two rows naming one
    message (IFS's ``10u`` as ``u10`` and ``u`` at 10 m; its gust's two windows) count once."""
    if not steps:
        return 0
    minutes = sorted({int(s.total_seconds() // 60) for s in steps}
                     | {int(s.total_seconds() // 60) for s in model.fine_steps if s <= max(steps)})
    count = 0
    for m in minutes:
        keys: set[tuple] = set()
        for row in model.fields if need is None else need.rows_at(m):
            if (row.processing is Processing.CONSTANT and m) or (row.processing is Processing.INTERVAL and not m) \
                    or (m % 60 and not row.fine) or row.edition == 1:
                continue
            name = (row.param or row.shortName, row.typeOfLevel)
            levels = range(RUN_LEVELS_GUESS) if row.levels == RUN_LEVELS else row.levels or (None,)
            keys.update((*name, lv) for lv in levels)
        # a single-level row whose message a levelled row names too (10u as u10 and u at 10 m)
        levelled = {k[:2] for k in keys if k[2] is not None}
        count += sum(1 for k in keys if k[2] is not None or k[:2] not in levelled)
    return count * max(model.members, 1)


def estimated_bytes(model: ModelSpec, steps: tuple[timedelta, ...], need: Need | None = None,
                    message_bytes: int | None = None) -> int:
    """The bytes of the messages of ``need`` at ``steps`` (`message_count`), each of
    ``message_bytes`` (the upstream's usual, `typical_message_bytes`, where None): the one
    estimate where no index gives the sizes, for `Source.size` before a download and for
    `pointcast plan`'s typical figures alike."""
    return message_count(model, steps, need) * (typical_message_bytes(model) if message_bytes is None
                                                else message_bytes)


def typical_message_bytes(model: ModelSpec) -> int:
    """A message of the model as its upstream publishes it: the table's `ModelSpec.message_bytes`,
    its grid at 16 bits where the table gives none."""
    return model.message_bytes or grid_message_bytes(model.grid.shape[0] * model.grid.shape[1])


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
