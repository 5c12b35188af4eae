"""The HTTP source (``type = "http"``): real model runs from their upstream servers.

One generic source reads each model's ``Upstream`` table (``sources/ifs.py``, ``gfs.py``,
``msm.py``, ``icon.py``): mirrors in priority order and layouts (URL templates) tried in order.
What it does, for every model alike:

* **discover**: walks back from the newest run due at ``now`` to the first run whose last step
  exists on a mirror: its last file (its index where the layout has one, the data file
  otherwise) or, on a one-file-per-field layout, the file of any parameter at that step (a
  parameter the tree does not publish must not hide the run). A run whose first step exists
  but not its last is still being published: it is polled (with backoff) until it completes or
  the deadline (``wait_minutes``) passes; then discovery looks for an older complete run, and
  the run's notes say which was skipped and which is used.
* **fetch**: per file, the index (ECMWF ``.index`` JSON lines, wgrib2 ``.idx``) is read and only
  the messages of the model's table are downloaded, with ``Range`` requests, adjacent messages
  in one request. Files without an index (JMA's Lsurf files) are downloaded whole. A download
  counts only when its length is the index's (or ``Content-Length``) and every message in it
  decodes with ecCodes; otherwise (404, 5xx, timeouts, truncated or corrupt bodies) the next
  mirror is tried. The files are fetched in passes over the connections: a file no mirror
  gave is tried again in the next pass, after a backoff (``retry_seconds``, doubling up to
  60 s), so a failing file never holds a connection while it waits. A file every mirror
  answers "not found" for ``MISSING_MINUTES`` is not published: on a one-file-per-field
  layout, a field all of whose files are missing is dropped with a note (the cycle then
  decides whether the model can do without it); any other hole, or any other failure left at
  the run's deadline, ends with ``SourceUnavailable``.
* **unstructured grids** (DWD's v1 trees): a layout with one file per field (``path_vars``)
  is also asked for the cell-centre rows of ``ingest.CELL_CENTRE_ROWS`` (CLAT, CLON) at step
  0; where it names files, they are fetched once per grid and kept by the grid's
  ``uuidOfHGrid`` (read from the run's first file) in ``<cache>/http/grids/<uuid>/``: every
  later run on that grid takes them from there and sends no request for them. They are
  returned first among the run's files, where ``ingest.decode`` finds them.
* **model levels** (ICON: rows with ``levels=RUN_LEVELS``): chosen per run from its HHL
  before the rest is fetched (``plan_model_levels``): HHL of half level 1 gives the number of
  levels, HHL from the surface up the heights, and U/V are asked for on the levels spanning
  the hub heights only.
* **optional rows** (``GribField.optional``): a file only optional rows read that no mirror
  has (404) is dropped at once with a note instead of being retried until the deadline.
* **cache**: ``<cache>/http/<model>/<YYYYMMDDHH>/<path>`` holds the downloaded messages, with
  the index (``.index``/``.idx`` beside, as upstream) and a ``.json`` record of the byte ranges
  taken; a run fully fetched gets a ``complete`` marker. A re-run finds the run complete
  locally and sends no request for it; a re-fetch after a change of the table downloads only
  files whose selection changed.
* **progress**: a progress bar on a terminal (rich), and a line in the log every tenth of the
  files (the flow's log when running in Prefect).

Configuration (``[sources.<id>]``, docs/config.md): ``mirrors`` replaces the table's mirrors
(base URLs), ``base_url`` is one mirror, ``extra_mirrors`` are tried after the table's;
``layouts.<name>.path`` / ``.index_path`` replace a layout's templates.
"""

from __future__ import annotations

import bz2
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import eccodes
import httpx
import numpy as np

from .. import __version__
from ..config import HUB_HEIGHT_RANGE_M
from ..ingest import CELL_CENTRE_ROWS, CellGridKey, index_file, plain_grib
from .base import (RUN_LEVELS, FetchedRun, GribField, Layout, Mirror, ModelSpec, Processing,
                   RunRef, Upstream, floor_run)
from .icon import hub_levels

log = logging.getLogger(__name__)

UTC = timezone.utc
MAX_BACKOFF_S = 60.0
# A file every mirror answers "not found" for this long, while its run's last step is there,
# is not published (a field the tree does not carry): decided in minutes, not at the deadline.
MISSING_MINUTES = 3.0
# The project has no public home page yet: the agent names the program and its version only.
USER_AGENT = f"pointcast/{__version__} (point forecasts from open NWP data)"


class SourceUnavailable(RuntimeError):
    """No usable run or file before the deadline; the message says why. Retrying is pointless
    (the source has retried until its deadline)."""


class BadDownload(RuntimeError):
    """A response that is not what the index promised (length, GRIB structure, decoding)."""


class _Missing(RuntimeError):
    """404/410: not (yet) published on this mirror."""


class _Failed(RuntimeError):
    """A pass over the mirrors in which none succeeded: what each answered (``errors``), how
    many said "not found" (``missing``) and whether all of them did (``everywhere``)."""

    def __init__(self, what: str, errors: list[str], missing: int, mirrors: int):
        super().__init__(f"{what}: {'; '.join(errors)}")
        self.what, self.errors, self.missing = what, errors, missing
        self.everywhere = missing == mirrors


def _logger() -> logging.Logger | logging.LoggerAdapter:
    """The flow's logger inside a Prefect run (so progress shows in the flow's logs)."""
    try:
        from prefect import get_run_logger

        return get_run_logger()
    except Exception:  # outside a flow or task run
        return log


# ------------------------------------------------------------------------------------------
# GRIB checks and index formats
# ------------------------------------------------------------------------------------------


def grib_lengths(data: bytes) -> Iterator[tuple[int, int]]:
    """(offset, length) of each GRIB message in ``data`` by the lengths the messages declare;
    raises ``BadDownload`` when the bytes are not a sequence of whole messages."""
    pos = 0
    while pos < len(data):
        if data[pos:pos + 4] != b"GRIB" or len(data) - pos < 16:
            raise BadDownload(f"no GRIB message at byte {pos}")
        edition = data[pos + 7]
        if edition == 2:
            total = int.from_bytes(data[pos + 8:pos + 16], "big")
        elif edition == 1:
            total = int.from_bytes(data[pos + 4:pos + 7], "big")
        else:
            raise BadDownload(f"GRIB edition {edition} at byte {pos}")
        if total < 16 or pos + total > len(data):
            raise BadDownload(f"message at byte {pos} declares {total} bytes, "
                              f"{len(data) - pos} received")
        if data[pos + total - 4:pos + total] != b"7777":
            raise BadDownload(f"message at byte {pos} does not end with 7777")
        yield pos, total
        pos += total


def check_grib(data: bytes, expected: int | None = None) -> int:
    """Raise ``BadDownload`` unless ``data`` is whole GRIB messages (``expected`` bytes when
    given) that ecCodes decodes, values included. Returns the number of messages."""
    if expected is not None and len(data) != expected:
        raise BadDownload(f"{len(data)} bytes received, the index says {expected}")
    n = 0
    for pos, total in grib_lengths(data):
        try:
            h = eccodes.codes_new_from_message(data[pos:pos + total])
        except Exception as exc:  # ecCodes raises its own error classes
            raise BadDownload(f"message at byte {pos} does not decode: {exc}") from None
        try:
            eccodes.codes_get_values(h)
        except Exception as exc:
            raise BadDownload(f"message at byte {pos} does not decode: {exc}") from None
        finally:
            eccodes.codes_release(h)
        n += 1
    if n == 0:
        raise BadDownload("empty body")
    return n


def parse_index(text: str, kind: str) -> list[dict[str, Any]]:
    """Entries of an index with ``_offset`` and ``_length`` (None: to the end of the file)."""
    if kind == "ecmwf":
        entries = [json.loads(line) for line in text.splitlines() if line.strip()]
        for e in entries:
            e["_offset"], e["_length"] = int(e["_offset"]), int(e["_length"])
        return entries
    if kind == "wgrib2":
        entries = []
        for line in text.splitlines():
            if not line.strip():
                continue
            parts = line.split(":")
            if len(parts) < 6:
                raise BadDownload(f"not a wgrib2 inventory line: {line!r}")
            entries.append({"n": parts[0], "_offset": int(parts[1]), "date": parts[2][2:],
                            "param": parts[3], "level": parts[4], "time": parts[5]})
        # A field of a multi-field message ("3.1", "3.2": NCEP's UGRD and VGRD) shares its
        # message's offset: its range is the whole message, up to the next other offset.
        offsets = sorted({e["_offset"] for e in entries})
        ends = dict(zip(offsets, offsets[1:] + [None]))
        for e in entries:
            end = ends[e["_offset"]]
            e["_length"] = None if end is None else end - e["_offset"]
        return entries
    raise ValueError(f"unknown index format {kind!r}")


def byte_ranges(entries: list[dict[str, Any]]) -> list[tuple[int, int | None]]:
    """Adjacent messages merged into one range: [(offset, length or None for 'to the end')]."""
    out: list[tuple[int, int | None]] = []
    messages = {e["_offset"]: e["_length"] for e in entries}  # the fields of one message once
    for off, length in sorted(messages.items()):
        if out and out[-1][1] is not None and out[-1][0] + out[-1][1] == off:
            prev = out[-1]
            out[-1] = (prev[0], None if length is None else prev[1] + length)
        else:
            out.append((off, length))
    return out


# ------------------------------------------------------------------------------------------
# The files of a run
# ------------------------------------------------------------------------------------------


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
              steps: tuple[timedelta, ...]) -> list[RemoteFile]:
    """The files of the run of ``model`` at ``init`` with ``steps``, in step order."""
    minutes = [int(s.total_seconds() // 60) for s in steps]
    out: list[RemoteFile] = []
    seen: set[str] = set()

    def add(tmpl_vars: dict[str, Any], step_min: int, param: str = "",
            level: int | None = None, optional: bool = False) -> None:
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
                    or row.levels == RUN_LEVELS:
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
            out[row.param] = RemoteFile(extra.pop("path", layout.path).format(
                init=init, step=0, minute=0, **extra), None, 0.0, row.param)
    return out


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
    (``nlev``); HHL is then fetched from the surface half level upwards, ``HHL_BATCH`` levels
    at a time, until ``icon.hub_levels`` finds the full levels that span the hub heights
    (``config.HUB_HEIGHT_RANGE_M``) at every cell. The other rows (U, V) get the files of
    those full levels at every step."""
    rows = [r for r in model.fields if r.levels == RUN_LEVELS]
    if not rows or layout.path_vars is None:
        return None
    heights = [r for r in rows if r.var == "hhl"]
    if len(heights) != 1:
        raise ValueError(f"{model.id}: rows of levels chosen per run need one 'hhl' row")

    def file(row: GribField, level: int, minute: int) -> RemoteFile | None:
        extra = layout.path_vars(row, level, minute)
        if extra is None:
            return None
        return RemoteFile(extra.pop("path", layout.path).format(
            init=init, step=minute // 60, minute=minute % 60, **extra), None, minute / 60)

    def hhl_files(levels: list[int]) -> list[RemoteFile]:
        files = [file(heights[0], lv, 0) for lv in levels]
        if None in files:
            raise ValueError(f"{model.id}: layout {layout.name!r} names no HHL file")
        return files

    top = get(hhl_files([1]))[0]
    nlev = _hhl(top)[0]
    hhl: dict[int, np.ndarray] = {}
    paths: dict[int, Path] = {}
    full, above = None, nlev + 1  # the half levels fetched so far lie below ``above``
    while full is None and above > 1:
        batch = list(range(above - 1, max(above - 1 - HHL_BATCH, 0), -1))
        for lv, path in zip(batch, get(hhl_files(batch))):
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


def candidate_runs(model: ModelSpec, now: datetime, n: int) -> list[datetime]:
    """The ``n`` newest run times at or before ``now``, newest first."""
    out = [floor_run(model, now)]
    while len(out) < n:
        out.append(floor_run(model, out[-1] - timedelta(hours=1)))
    return out


# ------------------------------------------------------------------------------------------
# Progress
# ------------------------------------------------------------------------------------------


class _Progress:
    """Files and bytes done: a rich progress bar on a terminal, a log line every tenth."""

    def __init__(self, what: str, total: int, logger, bar: bool):
        self.what, self.total, self.logger = what, total, logger
        self.done = self.bytes = self.cached = 0
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._next_log = 0.1
        self._bar = None
        if bar and total and sys.stderr.isatty():
            from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total} files"),
                                 DownloadColumn(), TimeRemainingColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(what, total=total)

    def step(self, nbytes: int, cached: bool) -> None:
        with self._lock:
            self.done += 1
            self.bytes += nbytes
            self.cached += cached
            if self._bar is not None:
                self._bar.update(self._task, advance=1)
            if self.done / self.total >= self._next_log or self.done == self.total:
                self._next_log = (int(self.done * 10 / self.total) + 1) / 10
                dt = max(time.monotonic() - self.t0, 1e-6)
                self.logger.info("%s: %d/%d files (%d from the cache), %.1f MB downloaded, "
                                 "%.2f MB/s", self.what, self.done, self.total, self.cached,
                                 self.bytes / 1e6, self.bytes / 1e6 / dt)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


# ------------------------------------------------------------------------------------------
# The source
# ------------------------------------------------------------------------------------------

OPTIONS = ("mirrors", "base_url", "extra_mirrors", "layouts", "wait_minutes", "retry_seconds",
           "timeout_seconds", "connections", "lookback_runs", "horizon_hours", "progress")


@dataclass
class HttpSource:
    """Model runs from their upstream HTTP servers (see the module docstring)."""

    name: str = "http"
    mirrors: tuple[str, ...] | None = None  # replaces the table's mirrors (base URLs)
    extra_mirrors: tuple[str, ...] = ()  # tried after the table's
    layouts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # template overrides
    wait_minutes: float = 30.0  # per-run deadline: waiting for publication and retrying
    retry_seconds: float = 2.0  # first backoff; doubles up to MAX_BACKOFF_S
    timeout_seconds: float = 60.0  # per request (connect, read)
    connections: int = 4  # parallel downloads
    lookback_runs: int = 8  # how many runs discovery walks back
    horizon_hours: float | None = None  # fetch steps up to this lead time only
    progress: bool = True  # progress bar on a terminal

    @classmethod
    def from_options(cls, name: str, options: Mapping[str, Any]) -> "HttpSource":
        unknown = sorted(set(options) - set(OPTIONS) - {"type"})
        if unknown:
            raise ValueError(f"source {name!r} (http): unknown option(s) {unknown}; "
                             f"known: {sorted(OPTIONS)}")
        kw = {k: v for k, v in options.items() if k in OPTIONS and k != "base_url"}
        if options.get("base_url") is not None:
            if options.get("mirrors"):
                raise ValueError(f"source {name!r} (http): give base_url or mirrors, not both")
            kw["mirrors"] = (options["base_url"],)
        for key in ("mirrors", "extra_mirrors"):
            if kw.get(key) is not None:
                kw[key] = tuple(str(u).rstrip("/") for u in kw[key])
        return cls(name=name, **kw)

    # -- the model's table with this source's overrides ------------------------------------

    def upstream(self, model: ModelSpec) -> Upstream:
        up = model.upstream
        if up is None:
            raise ValueError(f"source {self.name!r} (http): model {model.id!r} has no upstream "
                             f"table (ModelSpec.upstream, sources/)")
        if self.mirrors is not None:
            mirrors = tuple(Mirror(f"mirror{i}", u) for i, u in enumerate(self.mirrors))
        else:
            mirrors = up.mirrors
        mirrors += tuple(Mirror(f"extra{i}", u) for i, u in enumerate(self.extra_mirrors))
        names = {lay.name for lay in up.layouts}
        unknown = set(self.layouts) - names
        if unknown:
            raise ValueError(f"source {self.name!r} (http): model {model.id!r} has no layout "
                             f"{sorted(unknown)} (layouts: {sorted(names)})")
        layouts = tuple(replace(lay, **dict(self.layouts.get(lay.name, {})))
                        for lay in up.layouts)
        return replace(up, mirrors=mirrors, layouts=layouts)

    def _steps(self, model: ModelSpec, init: datetime) -> tuple[timedelta, ...]:
        from . import run_steps

        steps = run_steps(model, init)
        if self.horizon_hours is not None:
            steps = tuple(s for s in steps if s <= timedelta(hours=self.horizon_hours))
        return steps

    def _client(self) -> httpx.Client:
        return httpx.Client(timeout=self.timeout_seconds, follow_redirects=True,
                            headers={"User-Agent": USER_AGENT},
                            limits=httpx.Limits(max_connections=self.connections + 2))

    def _deadline(self) -> float:
        return time.monotonic() + self.wait_minutes * 60.0

    def _pass(self, what: str, mirrors: tuple[Mirror, ...], attempt):
        """``attempt(mirror)`` on each mirror in priority order until one succeeds; raises
        ``_Failed`` (what each mirror answered) when none does."""
        errors, missing = [], 0
        for mirror in mirrors:
            try:
                return attempt(mirror)
            except _Missing:
                errors.append(f"{mirror.name}: not found")
                missing += 1
            except (httpx.HTTPError, BadDownload) as exc:
                errors.append(f"{mirror.name}: {type(exc).__name__}: {exc}")
                log.debug("%s from %s: %s", what, mirror.url, exc)
        raise _Failed(what, errors, missing, len(mirrors))

    def _retrying(self, what: str, mirrors: tuple[Mirror, ...], deadline: float, attempt, *,
                  retry_missing: bool = True):
        """``_pass`` again after a backoff until it succeeds or the deadline passes. With
        ``retry_missing`` False a pass in which some mirror answered "not found" (and none
        succeeded) ends at once with ``_Missing``: only mirrors that all failed are worth
        waiting for."""
        delay = self.retry_seconds
        while True:
            try:
                return self._pass(what, mirrors, attempt)
            except _Failed as failed:
                if failed.missing and not retry_missing:
                    raise _Missing(what) from None
                if time.monotonic() + delay > deadline:
                    raise self._gave_up(failed) from None
            time.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)

    def _gave_up(self, failed: "_Failed", more: int = 0) -> SourceUnavailable:
        return SourceUnavailable(f"{failed.what}: gave up at the deadline ({self.wait_minutes:g} "
                                 f"min): {'; '.join(failed.errors)}"
                                 + (f" (and {more} more files failing)" if more else ""))

    # -- discover ----------------------------------------------------------------------------

    def _exists(self, client: httpx.Client, url: str) -> None:
        """Raise ``_Missing`` unless ``url`` exists (S3 answers 403 for a missing key)."""
        r = client.head(url)
        if r.status_code in (403, 405, 501):  # no HEAD here: ask for the first byte
            r = client.get(url, headers={"Range": "bytes=0-0"})
        if r.status_code in (403, 404, 410):
            raise _Missing(url)
        r.raise_for_status()

    def _published(self, client, up: Upstream, files: list[RemoteFile], deadline: float) -> str:
        """The mirror holding a file of ``files`` ("" when none does), tried in order. On a
        one-file-per-field layout, one file of each parameter: a parameter the tree does not
        publish must not hide the others."""
        seen: set[str] = set()
        for f in files:
            if f.param in seen:
                continue
            seen.add(f.param)
            try:
                return self._retrying(
                    f"probe {f.index_path or f.path}", up.mirrors, deadline,
                    lambda m: self._exists(client, f"{m.url}/{f.index_path or f.path}") or m.name,
                    retry_missing=False)
            except _Missing:
                if not f.param:  # a file holds every field of its steps: one is enough
                    break
        return ""

    def _state(self, client, up: Upstream, files: list[RemoteFile],
               deadline: float) -> tuple[str, str]:
        """("complete" | "partial" | "absent", mirror name) of a run in one layout: its last
        step exists, only its first, or neither. A step exists when its file does, or on a
        one-file-per-field layout the file of any of its parameters: a run still being written
        misses its last steps for every parameter, while a parameter the tree does not
        publish is missing at every step (fetch finds it "not published" and drops it)."""
        last = [f for f in reversed(files) if f.first_step_h == files[-1].first_step_h]
        first = [f for f in files if f.first_step_h == files[0].first_step_h]
        for state, step in (("complete", last), ("partial", first)):
            mirror = self._published(client, up, step, deadline)
            if mirror:
                return state, mirror
        return "absent", ""

    def discover(self, model: ModelSpec, now: datetime) -> RunRef:
        up = self.upstream(model)
        logger = _logger()
        deadline = self._deadline()
        skipped: list[str] = []  # newer runs still being published at the deadline
        with self._client() as client:
            for init in candidate_runs(model, now, self.lookback_runs):
                steps = self._steps(model, init)
                if not steps:
                    continue
                for layout in up.layouts:
                    if layout.run_hours is not None and init.hour not in layout.run_hours:
                        continue
                    files = run_files(layout, model, init, steps)
                    delay = self.retry_seconds
                    while True:
                        # a run is complete without its optional files
                        state, mirror = self._state(
                            client, up, [f for f in files if not f.optional] or files, deadline)
                        if state != "partial" or time.monotonic() + delay > deadline:
                            break
                        logger.info("%s %s (%s): run still being published (its last step is "
                                    "not there yet), waiting %.0f s", model.id,
                                    f"{init:%Y-%m-%d %H}", layout.name, delay)
                        time.sleep(delay)
                        delay = min(delay * 2, MAX_BACKOFF_S)
                    if state == "complete":
                        logger.info("%s: run %s complete on %s (layout %s), %d files", model.id,
                                    f"{init:%Y-%m-%d %H} UTC", mirror, layout.name, len(files))
                        notes = tuple(f"{s}: the older run {init:%Y-%m-%d %H} UTC is used"
                                      for s in skipped)
                        return RunRef(model=model.id, init=init, steps=steps,
                                      source=f"{self.name}/{layout.name}", notes=notes)
                    if state == "partial":
                        skipped.append(f"run {init:%Y-%m-%d %H} UTC ({layout.name}) was still "
                                       f"being published at the deadline "
                                       f"({self.wait_minutes:g} min)")
                        logger.warning("%s: %s; looking for an older run", model.id, skipped[-1])
                        break  # a run is published in one layout only
        raise SourceUnavailable(
            f"{model.id}: no complete run in the {self.lookback_runs} runs up to "
            f"{now:%Y-%m-%d %H:%M} UTC on {', '.join(m.url for m in up.mirrors)}"
            + (f" ({'; '.join(skipped)})" if skipped else ""))

    # -- fetch -------------------------------------------------------------------------------

    def fetch(self, run: RunRef, model: ModelSpec, cache: Path) -> FetchedRun:
        if run.model != model.id:
            raise ValueError(f"run of {run.model!r} fetched as model {model.id!r}")
        up = self.upstream(model)
        layout_name = run.source.rpartition("/")[2]
        layouts = {lay.name: lay for lay in up.layouts}
        if layout_name not in layouts:
            raise ValueError(f"run source {run.source!r} names no layout of {model.id} "
                             f"({sorted(layouts)})")
        layout = layouts[layout_name]
        init = run.init.astimezone(UTC)
        files = run_files(layout, model, init, run.steps)
        run_dir = Path(cache) / "http" / model.id / f"{init:%Y%m%d%H}"
        marker = run_dir / "complete"
        record = {"model": model.id, "init": init.isoformat(), "layout": layout.name,
                  "files": [f.path for f in files], "fields": _fields_key(model.fields)}
        what = f"{model.id} {init:%Y-%m-%d %H} UTC"
        if marker.exists():
            try:
                done = json.loads(marker.read_text())
            except (OSError, ValueError):
                done = {}
            absent = set(done.get("absent", []))
            paths = tuple(Path(cache) / "http" / p for p in done.get("grid", [])) \
                + tuple(run_dir / p for p in record["files"] if p not in absent) \
                + tuple(run_dir / p for p in done.get("levels", []))
            if {k: done.get(k) for k in record} == record and all(p.exists() for p in paths):
                return FetchedRun(run=run, files=paths, notes=(
                    f"{what}: {len(paths)} files from the cache ({done.get('mirrors')})",
                    *_absent_notes(what, [f for f in files if f.path in absent])))
        logger = _logger()
        centres = cell_centre_files(layout, init)
        progress = _Progress(f"{model.id} {init:%Y%m%d%H}", len(files) + len(centres), logger,
                             self.progress)
        deadline = self._deadline()
        used: dict[str, int] = {}

        try:
            with self._client() as client, ThreadPoolExecutor(
                    self.connections, thread_name_prefix=f"fetch-{model.id}") as pool:
                def download(todo: list[tuple[RemoteFile, Path]]):
                    return self._download(client, pool, model, up, layout, todo, deadline,
                                          progress, used)

                def get(fs: list[RemoteFile]) -> list[Path]:  # required files (the level plan)
                    progress.total += len(fs)
                    got, gone = download([(f, run_dir / f.path) for f in fs])
                    if gone:
                        raise SourceUnavailable(f"{what}: {gone[0].path} is not published (not "
                                                f"found on any mirror)")
                    return [got[f.path] for f in fs]

                plan = plan_model_levels(layout, model, init, run.steps, get)
                levels = () if plan is None else plan.hhl + tuple(get(list(plan.files)))
                got, absent = download([(f, run_dir / f.path) for f in files])
                _check_absent(what, layout, files, absent)
                paths = tuple(got[f.path] for f in files if f.path in got)
                grid = _cell_centres(centres, paths[0], Path(cache) / "http" / "grids", download)
        finally:
            progress.close()
        notes = _absent_notes(what, absent)
        for note in notes:
            logger.warning("%s", note)
        if plan is not None:
            notes += (f"{model.id}: {plan.half_levels - 1} model levels; full levels "
                      f"{plan.full[0]}-{plan.full[-1]} span the hub heights (HHL)",)
        tmp = marker.with_name(f"complete.{os.getpid()}.tmp")
        grid_rel = [p.relative_to(Path(cache) / "http").as_posix() for p in grid]
        tmp.write_text(json.dumps(dict(record, grid=grid_rel, mirrors=used, bytes=progress.bytes,
                                       absent=[f.path for f in absent],
                                       levels=[p.relative_to(run_dir).as_posix() for p in levels]))
                       + "\n")
        os.replace(tmp, marker)
        paths = grid + paths + levels
        note = (f"{what} ({layout.name}): {len(paths)} files, "
                f"{progress.bytes / 1e6:.1f} MB downloaded from "
                f"{', '.join(f'{m} ({n})' for m, n in used.items()) or 'nowhere'}, "
                f"{progress.cached} from the cache; {up.licence}")
        logger.info("%s", note)
        return FetchedRun(run=run, files=paths, notes=(note, *notes))

    def _download(self, client, pool: ThreadPoolExecutor, model: ModelSpec, up: Upstream,
                  layout: Layout, todo: list[tuple[RemoteFile, Path]], deadline: float,
                  progress: "_Progress", used: dict[str, int]
                  ) -> tuple[dict[str, Path], list[RemoteFile]]:
        """Fetch the files of ``todo`` (file, cache path) in passes: a pass tries each pending
        file once on every mirror, on the pool's connections; the files that failed wait for
        the next pass, after a backoff, so that a failing file never holds a connection while
        it waits. A file every mirror answers "not found" for ``MISSING_MINUTES`` (or until the
        deadline, if sooner) is not published: it is returned apart, with the local paths of
        the others by remote path. Any other failure left at the deadline raises
        ``SourceUnavailable``."""
        done: dict[str, Path] = {}
        absent: list[RemoteFile] = []
        missing_since: dict[str, float] = {}
        grace = min(MISSING_MINUTES, self.wait_minutes) * 60.0
        lock = threading.Lock()
        delay = self.retry_seconds

        def one(item: tuple[RemoteFile, Path]) -> Path | _Failed:
            try:
                dest, nbytes, mirror = self._fetch_file(client, model, up, layout, *item)
            except _Failed as failed:
                return failed
            with lock:
                if mirror:
                    used[mirror] = used.get(mirror, 0) + 1
            progress.step(nbytes, cached=not mirror)
            return dest

        while todo:
            outcomes = list(pool.map(one, todo))
            now = time.monotonic()
            again: list[tuple[tuple[RemoteFile, Path], _Failed]] = []
            for item, out in zip(todo, outcomes):
                if not isinstance(out, _Failed):
                    done[item[0].path] = out
                elif out.everywhere and (item[0].optional  # a run can go without it
                                         or now - missing_since.setdefault(item[0].path, now) >= grace):
                    absent.append(item[0])
                else:
                    again.append((item, out))
            if not again:
                break
            if now + delay > deadline:
                failing = [out for _, out in again if not out.everywhere]
                if failing:
                    raise self._gave_up(failing[0], len(failing) - 1)
                absent += [item[0] for item, _ in again]  # "not found" up to the deadline
                break
            _logger().info("%s: %d files failed (%s), trying them again in %.3g s", model.id,
                           len(again), again[0][1], delay)
            time.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)
            todo = [item for item, _ in again]
        return done, absent

    def _fetch_file(self, client, model: ModelSpec, up: Upstream, layout: Layout,
                    f: RemoteFile, dest: Path) -> tuple[Path, int, str]:
        """Download one file's wanted messages (or the whole file) into the cache at ``dest``,
        one pass over the mirrors (``_Failed`` when none gives it): (local path, bytes
        downloaded, mirror name or "" when it came from the cache)."""
        meta = dest.with_name(dest.name + ".json")
        local_index = dest.with_name(Path(f.index_path).name) if f.index_path else None
        dest.parent.mkdir(parents=True, exist_ok=True)
        if local_index is not None and local_index.exists():
            ranges = self._select(model, up, layout, local_index.read_text())
            if dest.exists() and _meta(meta).get("ranges") == _jsonable(ranges):
                return dest, 0, ""
        elif local_index is None and dest.exists() and _meta(meta).get("bytes") == dest.stat().st_size:
            return dest, 0, ""

        def attempt(mirror: Mirror) -> tuple[str, bytes, str | None, list]:
            index_text, ranges = None, [(0, None)]
            if f.index_path:
                index_text = self._get(client, f"{mirror.url}/{f.index_path}").text
                ranges = self._select(model, up, layout, index_text)
            data = self._get_ranges(client, f"{mirror.url}/{f.path}", ranges, whole=not f.index_path)
            check_grib(bz2.decompress(data) if layout.compression == "bz2" else data)
            return mirror.name, data, index_text, ranges

        name, data, index_text, ranges = self._pass(f.path, up.mirrors, attempt)
        _atomic_write(dest, data)
        if local_index is not None and index_text is not None:
            _atomic_write(local_index, index_text.encode())
        _atomic_write(meta, json.dumps({"mirror": name, "ranges": _jsonable(ranges),
                                        "bytes": len(data)}).encode())
        return dest, len(data), name

    def _select(self, model: ModelSpec, up: Upstream, layout: Layout,
                index_text: str) -> list[tuple[int, int | None]]:
        """Byte ranges of the messages of ``model``'s table listed in an index."""
        entries = parse_index(index_text, layout.index or "")
        if up.select is None:
            raise ValueError(f"{model.id}: layout {layout.name!r} has an index but the table "
                             f"has no select rule")
        wanted = [e for e in entries if any(up.select(e, row) for row in model.fields)]
        if not wanted:
            raise BadDownload("the index lists none of the table's fields")
        return byte_ranges(wanted)

    def _get(self, client: httpx.Client, url: str, headers: dict | None = None) -> httpx.Response:
        r = client.get(url, headers=headers)
        if r.status_code in (404, 410):
            raise _Missing(url)
        r.raise_for_status()
        declared = r.headers.get("Content-Length")
        if declared is not None and "Content-Encoding" not in r.headers \
                and int(declared) != len(r.content):
            raise BadDownload(f"{len(r.content)} bytes received, Content-Length {declared}")
        return r

    def _get_ranges(self, client: httpx.Client, url: str,
                    ranges: list[tuple[int, int | None]], whole: bool) -> bytes:
        """The bytes of ``ranges`` of ``url``, one request per range; each range's length is
        checked against the index (an open end: against the file's length)."""
        if whole:
            return self._get(client, url).content
        parts = []
        for off, length in ranges:
            last = "" if length is None else str(off + length - 1)
            r = self._get(client, url, {"Range": f"bytes={off}-{last}"})
            body = r.content
            if r.status_code == 206:
                got = r.headers.get("Content-Range", "")
                if not got.startswith(f"bytes {off}-"):
                    raise BadDownload(f"asked for bytes {off}-{last}, got {got!r}")
                total = got.rpartition("/")[2]
                expected = (length if length is not None
                            else int(total) - off if total.isdigit() else len(body))
            else:  # the server ignored Range and sent the whole file
                body = body[off:] if length is None else body[off:off + length]
                expected = len(body) if length is None else length
            if len(body) != expected:
                raise BadDownload(f"bytes {off}-{last}: {len(body)} received, the index says "
                                  f"{expected}")
            parts.append(body)
        return b"".join(parts)


def _cell_centres(files: dict[str, RemoteFile], first: Path, grids: Path,
                  download) -> tuple[Path, ...]:
    """The cell-centre ``files`` (``cell_centre_files``) of the unstructured grid the run's
    ``first`` file is on: from ``grids/<uuidOfHGrid>/`` when an earlier run fetched them,
    otherwise fetched into it with ``download`` (``HttpSource._download``). () on a regular
    grid."""
    grid = index_file(first)[0].grid if files else None
    if not isinstance(grid, CellGridKey):
        return ()
    todo = [(f, grids / grid.uuid / f"{param}.grib2") for param, f in files.items()]
    got, absent = download(todo)
    if absent:
        raise SourceUnavailable(f"{absent[0].path}: the cell centres of grid {grid.uuid} are not "
                                f"published (not found on any mirror)")
    out = []
    for f, dest in todo:
        got_grid = index_file(dest)[0].grid
        if got_grid != grid:
            dest.unlink()
            raise SourceUnavailable(f"{f.path}: cell centres of grid {got_grid}, the run's fields "
                                    f"are on grid {grid}")
        out.append(dest)
    return tuple(out)


def _check_absent(what: str, layout: Layout, files: list[RemoteFile],
                  absent: list[RemoteFile]) -> None:
    """Files of a run found complete that no mirror has (``absent``) are fields the tree
    does not publish when, on a one-file-per-field layout, every file of their field is
    absent (those are dropped: `_absent_notes`). Anything else is a run with holes: raise
    ``SourceUnavailable``, which drops the model from the cycle."""
    if not absent:
        return
    if layout.path_vars is None:
        raise SourceUnavailable(f"{what}: {absent[0].path} is not published (not found on any "
                                f"mirror, while the run's last step is)"
                                + (f", nor {len(absent) - 1} more files" if len(absent) > 1 else ""))
    planned: dict[str, int] = {}
    for f in files:
        planned[f.field] = planned.get(f.field, 0) + 1
    missing: dict[str, list[RemoteFile]] = {}
    for f in absent:
        missing.setdefault(f.field, []).append(f)
    for field_, gone in missing.items():
        if len(gone) != planned[field_]:
            raise SourceUnavailable(f"{what}: {field_}: {len(gone)} of its {planned[field_]} files "
                                    f"are not published (not found on any mirror), e.g. "
                                    f"{gone[0].path}")
    if len(absent) == len(files):
        raise SourceUnavailable(f"{what}: none of the run's files is published")


def _absent_notes(what: str, absent: list[RemoteFile]) -> tuple[str, ...]:
    """What the fetch of a run dropped: the fields the tree does not publish."""
    fields: dict[str, int] = {}
    for f in absent:
        fields[f.field] = fields.get(f.field, 0) + 1
    if not fields:
        return ()
    return (f"{what}: not published by the tree (not found on any mirror while the run's "
            f"other fields are), dropped: "
            + ", ".join(f"{k} ({n} file{'s' * (n > 1)})" for k, n in fields.items()),)


def _fields_key(fields: tuple[GribField, ...]) -> str:
    return json.dumps([[r.shortName, r.typeOfLevel, r.levels, r.processing.value, r.param]
                       for r in fields])


def _jsonable(ranges: list[tuple[int, int | None]]) -> list[list[int | None]]:
    return [[a, b] for a, b in ranges]


def _meta(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
