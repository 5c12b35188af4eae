"""Verification: observations in (tidy CSV, NOAA ISD-Lite), scores from the Zarr archive.

``pointcast verify OBS...`` reads observation files, matches every observation with every
archived forecast that covers it (all runs, all lead times), and scores each product, element
and lead-time bin with the Australian Bureau of Meteorology's ``scores`` library: bias, MAE and
RMSE (wind direction on the circle), the Brier score and reliability table of the published
precipitation probability and of the neighbourhood probability kept beside it, the CRPS of the
ensembles' quantile forecasts, each also for persistence (the observation at the run's init
time) and, where the archive holds bias-corrected values (pointcast.postprocess), for those. The formats, matching
rules and scores are documented in docs/verification.md; ``postprocess`` reuses the reading
and matching.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import math
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import scores.continuous
import scores.probability
import xarray as xr

from . import physics, publish
from .config import Config, csv_rows, utc_time
from .products.eu_common import BY_KEY
from .publish import VERIFICATION_DIR  # <root>/verification/<product>.json|.zarr, index.json

log = logging.getLogger(__name__)

HOUR = np.timedelta64(3600, "s")
EVENT_MM = 0.1  # observed precipitation that makes the event of the precipitation probability
RELIABILITY_EDGES = tuple(range(0, 101, 10))  # forecast probability bins of the reliability table (%)

# How an element behaves in time (docs/verification.md, "Matching"): a state is matched to
# one step; an amount or a maximum covers the period that ends at the observation's time.
STATE, DIRECTION, AMOUNT, MAXIMUM = "state", "direction", "amount", "maximum"
POWER = "power"  # the power archive's name and its element (docs/verification.md, "Power")


@dataclass(frozen=True)
class Element:
    name: str
    kind: str
    period: np.timedelta64 = np.timedelta64(0, "s")  # tidy CSV: the period a value covers
    # an element of no European product (a site's power): its own units and physical range
    own: tuple[str, tuple[float, float]] | None = None

    @property
    def units(self) -> str:
        return self.own[0] if self.own else BY_KEY[self.name].unit.replace("°C", "degC")

    @property
    def valid(self) -> tuple[float, float]:
        return self.own[1] if self.own else BY_KEY[self.name].valid


OBSERVED: dict[str, Element] = {e.name: e for e in (
    Element("temp_2m", STATE),
    Element("dewpoint_temperature", STATE),
    Element("windspd_10m", STATE),
    Element("windir_10m", DIRECTION),
    Element("windgust", MAXIMUM, HOUR),
    Element("precipitation", AMOUNT, HOUR),
    Element("sea_surface_pressure", STATE),
    Element("pressure_sfc", STATE),
    Element("total_cloud_cover", STATE),
    Element("humidity", STATE),
    # a site's measured power (kW, `read_power`), against the power archive (products/power.py)
    Element(POWER, STATE, own=("kW", (0.0, 1e8))),
)}
# Verified against observed precipitation >= 0.1 mm in the hour: the published probability
# (European products precipitation_proba, wxdata pop) and the deterministic neighbourhood
# probability products with ensembles keep beside it as a reference.
PROBABILITIES = ("precipitation_proba", "pop", "precipitation_proba_neighbourhood")
# The ensembles' quantile forecasts (products.base.ensemble_archive) and the observed element
# each verifies, scored with the CRPS.
QUANTILE_FORECASTS = {"temperature_quantiles": "temp_2m", "wind_speed_quantiles": "windspd_10m",
                      "precipitation_quantiles": "precipitation", "power_quantiles": POWER}
# Values of the clock hour [t - 1 h, t) held at each of its steps: the probabilities and the
# precipitation quantiles (pointcast.ensemble).
CLOCK_HOUR = "clock hour"

# The archive variable of an element, by product: (name, selection); the European common
# products archive the API's own names, the windpack its winds by height, the wxdata products
# their own short names (docs/api.md); the ensemble variables have one name everywhere.
# (the power's quantiles are the power product's, archived by site: `power.zarr`)
_ENSEMBLE: dict[str, tuple[str, dict]] = {name: (name, {}) for name in (
    "precipitation_proba_neighbourhood", *(q for q, element in QUANTILE_FORECASTS.items() if element != POWER))}
_EU: dict[str, tuple[str, dict]] = ({name: (name, {}) for name in (*OBSERVED, "precipitation_proba") if name != POWER}
                                    | _ENSEMBLE)
_WX: dict[str, tuple[str, dict]] = {
    "temp_2m": ("temp", {}), "precipitation": ("prec", {}), "sea_surface_pressure": ("arpress", {}),
    "windspd_10m": ("wndspd", {}), "windir_10m": ("wnddir", {}), "humidity": ("rhum", {}), "pop": ("pop", {}),
    **_ENSEMBLE}
ARCHIVE_NAMES: dict[str, dict[str, tuple[str, dict]]] = {
    "eu-short": _EU, "eu-medium": _EU,
    "eu-wind": {"windspd_10m": ("windspd", {"height": 10.0}), "windir_10m": ("windir", {"height": 10.0}),
                "wind_speed_quantiles": ("wind_speed_quantiles", {"height": 10.0})},
    "global": _WX, "japan": _WX,
    POWER: {POWER: (POWER, {}), "power_quantiles": ("power_quantiles", {})},
}
COMPASS_DEGREES = 22.5  # wxdata wnddir: 16-point compass, 16 = north, 0 = calm


class ObservationError(Exception):
    """Bad observation input; ``str(err)`` is ``"<file>:<line>: <reason>"``."""

    def __init__(self, file: str | os.PathLike, line: int, reason: str):
        self.file, self.line, self.reason = str(file), line, reason
        super().__init__(f"{self.file}:{line}: {reason}")


# --------------------------------------------------------------------------------------------
# Observations in


@dataclass
class Observations:
    """Observations as columns: ``key`` (a point id or station id as the file names it),
    ``time`` (UTC, datetime64[ns]), ``element``, ``value`` (API units), ``period`` (the period
    an amount or maximum covers, ending at ``time``; 0 for states), ``file``, ``line``."""

    frame: pd.DataFrame
    flagged: int = 0  # values outside the element's physical range: skipped
    flagged_at: list[str] = field(default_factory=list)  # "<file>:<line>: ..." of the first few

    @staticmethod
    def concat(parts: Sequence[Observations]) -> Observations:
        frames = [p.frame for p in parts if len(p.frame)]
        frame = pd.concat(frames, ignore_index=True) if frames else _frame([])
        return Observations(frame, sum(p.flagged for p in parts),
                            [m for p in parts for m in p.flagged_at][:20])


_COLUMNS = ("key", "time", "element", "value", "period", "file", "line")


def _frame(rows: list[tuple]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(_COLUMNS))
    frame["time"] = pd.to_datetime(frame["time"], utc=True).dt.tz_convert(None).astype("datetime64[ns]")
    frame["period"] = pd.to_timedelta(frame["period"]).astype("timedelta64[ns]")
    frame["value"] = frame["value"].astype(np.float64)
    return frame


class _Rows:
    """Rows as they are read, with the physical-range check of every value."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.flagged = 0
        self.flagged_at: list[str] = []

    def add(self, key: str, time: datetime, element: str, value: float, period: np.timedelta64,
            file: str, line: int) -> None:
        lo, hi = OBSERVED[element].valid
        if not lo <= value <= hi:
            self.flagged += 1
            if len(self.flagged_at) < 20:
                self.flagged_at.append(f"{file}:{line}: {element} {value:g} outside [{lo:g}, {hi:g}]")
            return
        self.rows.append((key, time, element, value, period, file, line))

    def done(self) -> Observations:
        return Observations(_frame(self.rows), self.flagged, self.flagged_at)


TIDY_HEADER = ("point", "time", "variable", "value")
POWER_HEADER = ("site", "time", "kw")


def read_tidy(path: Path, keys: Iterable[str]) -> Observations:
    """A tidy CSV ``point,time,variable,value``: ``point`` a point id or a station id of the
    points CSV (``keys``), ``variable`` an API element name, ``value`` in the API's units; or
    a site's measured power, ``site,time,kw`` (``site`` a configured site's id, ``kw`` its
    power at ``time``, the start of the quarter hour it averages or an instant reading)."""
    known = set(keys)
    shown = str(path)
    rows = _Rows()
    text = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = None
    power = False
    try:
        for line, cells in csv_rows(reader):
            if header is None:
                if sorted(cells) == sorted(POWER_HEADER):
                    header = ["point" if c == "site" else "value" if c == "kw" else c for c in cells]
                    power = True
                    continue
                if sorted(cells) != sorted(TIDY_HEADER):
                    raise ObservationError(shown, line, f"expected the header {','.join(TIDY_HEADER)} (or "
                                                        f"{','.join(POWER_HEADER)}), got {','.join(cells)}")
                header, power = cells, False
                continue
            if len(cells) != len(header):
                raise ObservationError(shown, line, f"expected {len(header)} fields ({','.join(header)}), got {len(cells)}")
            rec = dict(zip(header, cells, strict=True)) | ({"variable": POWER} if power else {})
            if rec["point"] not in known:
                raise ObservationError(shown, line, f"unknown {'site' if power else 'point'} {rec['point']!r} "
                                                    + ("(no configured site has this id)" if power else
                                                       "(neither a point id nor a station of the configured points)"))
            element = OBSERVED.get(rec["variable"])
            if element is None:
                raise ObservationError(shown, line, f"unknown variable {rec['variable']!r} (expected one of: "
                                                    f"{', '.join(OBSERVED)})")
            try:
                time = utc_time(rec["time"])
            except ValueError:
                raise ObservationError(shown, line, f"time {rec['time']!r} is not ISO 8601 "
                                                    "(e.g. 2026-11-20T06:00Z)") from None
            try:
                value = float(rec["value"])
            except ValueError:
                raise ObservationError(shown, line, f"value {rec['value']!r} is not a number") from None
            if not math.isfinite(value):
                raise ObservationError(shown, line, f"value {rec['value']!r} is not a finite number")
            rows.add(rec["point"], time, element.name, value, element.period, shown, line)
    except csv.Error as exc:
        raise ObservationError(shown, reader.line_num or 1, f"malformed CSV: {exc}") from None
    if header is None:
        raise ObservationError(shown, 1, f"empty file (expected the header {','.join(TIDY_HEADER)})")
    return rows.done()


# NOAA ISD-Lite (docs/verification.md cites the format document): fixed-width lines of
# year, month, day, hour (UTC) and eight integer fields, each right-aligned in 6 columns.
ISD_NAME_RE = re.compile(r"^(\d{6})-(\d{5})-(\d{4})(\.gz)?$")
ISD_FIELDS = ((0, 4), (4, 7), (7, 10), (10, 13), (13, 19), (19, 25), (25, 31), (31, 37), (37, 43),
              (43, 49), (49, 55), (55, 61))
ISD_MISSING = -9999
ISD_TRACE = -1  # trace precipitation (below 0.1 mm)
OKTA_PERCENT = 12.5  # sky cover codes 0-8 are oktas; 9-19 (obscured, partial ...) carry no cover


def is_isd_lite(path: Path) -> bool:
    return ISD_NAME_RE.match(path.name) is not None


def read_isd_lite(path: Path) -> Observations:
    """An ISD-Lite file ``USAF-WBAN-YEAR`` (optionally ``.gz``): the station is ``USAF-WBAN``."""
    m = ISD_NAME_RE.match(path.name)
    if m is None:
        raise ObservationError(path, 1, "not an ISD-Lite file name (USAF-WBAN-YEAR, optionally .gz)")
    station, year = f"{m.group(1)}-{m.group(2)}", int(m.group(3))
    shown = str(path)
    rows = _Rows()
    text = _read_text(path)
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(raw.rstrip()) < ISD_FIELDS[-1][1] or len(raw) > 80:
            raise ObservationError(shown, line, f"not an ISD-Lite line (12 fixed-width fields, 61 columns): {raw!r}")
        try:
            v = [int(raw[a:b]) for a, b in ISD_FIELDS]
        except ValueError:
            raise ObservationError(shown, line, f"not an ISD-Lite line (12 fixed-width integer fields): {raw!r}") from None
        if v[0] != year:
            raise ObservationError(shown, line, f"year {v[0]} in the file of {year}")
        try:
            time = datetime(v[0], v[1], v[2], v[3], tzinfo=UTC)
        except ValueError as exc:
            raise ObservationError(shown, line, f"invalid date or hour: {exc}") from None
        temp, dew, slp, wdir, wspd, sky, p1, p6 = v[4:]
        zero = np.timedelta64(0, "s")
        if temp != ISD_MISSING:
            rows.add(station, time, "temp_2m", temp / 10, zero, shown, line)
        if dew != ISD_MISSING:
            rows.add(station, time, "dewpoint_temperature", dew / 10, zero, shown, line)
        if temp != ISD_MISSING and dew != ISD_MISSING and dew <= temp:
            rh = 100 * physics.relative_humidity(temp / 10 + 273.15, dew / 10 + 273.15)
            rows.add(station, time, "humidity", float(np.round(rh)), zero, shown, line)
        if slp != ISD_MISSING:
            rows.add(station, time, "sea_surface_pressure", slp / 10, zero, shown, line)
        if wspd != ISD_MISSING:
            rows.add(station, time, "windspd_10m", wspd / 10, zero, shown, line)
            if wdir not in (ISD_MISSING, 0) and wspd > 0:  # calm: no direction
                rows.add(station, time, "windir_10m", float(wdir % 360), zero, shown, line)
        if 0 <= sky <= 8:
            rows.add(station, time, "total_cloud_cover", sky * OKTA_PERCENT, zero, shown, line)
        for amount, hours in ((p1, 1), (p6, 6)):
            if amount != ISD_MISSING:
                mm = 0.0 if amount == ISD_TRACE else amount / 10
                rows.add(station, time, "precipitation", mm / hours, HOUR * hours, shown, line)
    return rows.done()


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ObservationError(path, 1, f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ObservationError(path, 1, f"not a readable gzip file: {exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ObservationError(path, raw[: exc.start].count(b"\n") + 1, "not UTF-8 text") from None


def observation_files(paths: Iterable[Path]) -> list[Path]:
    """The files named, a directory standing for its (non-hidden) files."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        else:
            out.append(p)
    return out


def read_observations(paths: Iterable[Path], cfg: Config) -> Observations:
    """Every observation of ``paths`` (ISD-Lite by its file name, otherwise tidy CSV), keyed
    by point: a row naming a station is given to each point verified by that station."""
    stations = station_points(cfg)
    parts = []
    for path in observation_files(paths):
        obs = read_isd_lite(path) if is_isd_lite(path) else read_tidy(path, stations)
        if is_isd_lite(path) and len(obs.frame) and obs.frame["key"].iloc[0] not in stations:
            raise ObservationError(path, 1, f"no configured point has station {obs.frame['key'].iloc[0]} "
                                            "(the station column of the points CSV)")
        parts.append(obs)
    obs = Observations.concat(parts)
    pairs = pd.DataFrame([(key, pid) for key, pids in stations.items() for pid in pids], columns=["key", "point"])
    frame = obs.frame.merge(pairs, on="key", how="inner")
    key = ["point", "element", "period", "time"]
    repeated = frame[frame.duplicated(key, keep=False)].sort_values(key + ["file", "line"], kind="stable")
    for _, group in repeated.groupby(key, sort=False):
        first, other = group.iloc[0], group[group["value"] != group.iloc[0]["value"]]
        if len(other):  # the same observation twice with two values: which one is right?
            row = other.iloc[0]
            raise ObservationError(row["file"], int(row["line"]), f"{row['element']} of {row['point']} at "
                                   f"{pd.Timestamp(row['time']).isoformat()}Z is {row['value']:g} here and "
                                   f"{first['value']:g} at {first['file']}:{first['line']}")
    obs.frame = frame.drop_duplicates(key)
    return obs


def station_points(cfg: Config) -> dict[str, list[str]]:
    """Ids a file may name -> the point ids they verify: each point's own id, and its station."""
    out: dict[str, list[str]] = {}
    for pc in cfg.products.values():
        for p in pc.points:
            for key in (p.id, p.station):
                if key is not None and p.id not in out.setdefault(key, []):
                    out[key].append(p.id)
        for site in pc.sites:  # a site's measured power (`read_tidy`)
            out.setdefault(site.id, [site.id])
    return out


# --------------------------------------------------------------------------------------------
# Matching observations with archived forecasts


def lead_bin(hours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lead-time bin (from, to) in hours: hourly to 72 h, then 6-hourly."""
    h = np.floor(np.asarray(hours, dtype=np.float64))
    lo = np.where(h < 72, h, 72 + 6 * np.floor((h - 72) / 6))
    return lo, np.where(h < 72, lo + 1, lo + 6)


@dataclass
class Archive:
    """A product's archived forecasts of the observed points, across its store versions."""

    product: str
    inits: np.ndarray  # datetime64[ns], one per archived run
    step: np.timedelta64
    nlead: int
    stores: list[tuple[xr.Dataset, np.ndarray]]  # (dataset, indices into ``inits``)

    @classmethod
    def open(cls, root: Path, product: str) -> Archive | None:
        datasets = []
        for path in publish.archive_stores(root, product):
            ds = publish.open_committed(path)
            if ds.sizes.get(publish.INIT, 0):
                datasets.append(ds)
        if not datasets:
            return None
        steps = set()
        for ds in datasets:
            lead = ds[publish.LEAD].values
            diffs = np.unique(np.diff(lead))
            if len(diffs) != 1 or lead[0] != np.timedelta64(0, "ns"):
                raise ValueError(f"{product}: archive lead times are not a regular series from 0")
            steps.add(diffs[0])
        if len(steps) != 1:
            raise ValueError(f"{product}: archive store versions have different time steps")
        inits: list[np.datetime64] = []
        stores = []
        for ds in datasets:
            first = len(inits)
            inits += list(ds[publish.INIT].values)
            stores.append((ds, np.arange(first, len(inits))))
        return cls(product, np.array(inits, dtype="datetime64[ns]"), steps.pop(),
                   max(ds.sizes[publish.LEAD] for ds in datasets), stores)

    def points(self) -> set[str]:
        return {str(p) for ds, _ in self.stores for p in ds[publish.POINT].values}

    def forecast(self, name: str, sel: dict, points: list[str], runs: np.ndarray,
                 corrected: bool = False) -> np.ndarray | None:
        """(run, point, lead[, quantile]) of ``name`` (or its ``_corrected`` sibling) for the
        runs ``runs`` (indices into ``inits``), NaN where a store lacks the variable, the point
        or the lead time; None when no store has it."""
        var = f"{name}_corrected" if corrected else name
        out = None
        for ds, rows in self.stores:
            if var not in ds:
                continue
            whole = ds[var].sel(sel).transpose(publish.INIT, publish.POINT, publish.LEAD, ...)
            if out is None:
                out = np.full((len(runs), len(points), self.nlead, *whole.shape[3:]), np.nan)
            mine = np.nonzero(np.isin(runs, rows))[0]
            stored = set(ds[publish.POINT].values.tolist())
            have = [p for p in points if p in stored]
            if not have or not len(mine):
                continue
            da = whole.isel({publish.INIT: runs[mine] - rows[0]}).sel(point=have)
            cols = np.array([points.index(p) for p in have], dtype=np.intp)
            out[np.ix_(mine, cols, np.arange(da.sizes[publish.LEAD]))] = da.values
        return out

    def quantile_levels(self, name: str) -> np.ndarray | None:
        """The ``quantile`` coordinate of ``name``, the same in every store holding it."""
        levels = {tuple(ds["quantile"].values.tolist()) for ds, _ in self.stores if name in ds}
        if len(levels) > 1:
            raise ValueError(f"{self.product}: {name} has different quantile levels across store versions: "
                             f"{sorted(levels)}")
        return np.array(levels.pop()) if levels else None

    def close(self) -> None:
        for ds, _ in self.stores:
            ds.close()


@dataclass
class Matches:
    """Forecast-observation pairs of one product and element, as columns."""

    init: np.ndarray  # datetime64[ns]
    point: np.ndarray  # point ids
    valid: np.ndarray  # the observation's time (datetime64[ns])
    lead_h: np.ndarray  # lead time of the first step used, hours
    forecast: np.ndarray  # (pair,), a quantile forecast (pair, level)
    observed: np.ndarray
    persistence: np.ndarray  # the observation at init time (NaN: none)
    corrected: np.ndarray  # the bias-corrected forecast (NaN: none archived)
    levels: np.ndarray | None = None  # a quantile forecast: the levels of ``forecast``'s columns


def _steps(archive: Archive, inits: np.ndarray, time: np.ndarray, period: np.ndarray):
    """Per (init, observation): the first and end step index of the forecast that verifies
    the observation (a state: the nearest step, ties to the earlier; an interval: the steps
    covering its period), and whether it lies inside the run."""
    step = archive.step.astype("timedelta64[ns]").astype(np.int64)
    lead = (time[None, :] - inits[:, None]).astype(np.int64)
    start = lead - period.astype(np.int64)[None, :]
    k1 = np.floor_divide(lead + (step - 1) // 2, step)  # nearest step, a tie to the earlier
    k0 = np.floor_divide(start + (step - 1) // 2, step)
    interval = (period > np.timedelta64(0, "ns"))[None, :]
    first = np.where(interval, k0, k1)
    end = np.where(interval, k1, k1 + 1)
    inside = (first >= 0) & (end <= archive.nlead) & (end > first) & (start >= 0)
    return first, end, inside


def covered(archive: Archive, obs: pd.DataFrame) -> np.ndarray:
    """Whether each observation's time lies within some archived run of the product: the
    latest run initialised at or before it reaches it."""
    time = obs["time"].values
    inits = np.sort(archive.inits)
    last = archive.step * (archive.nlead - 1) + archive.step // 2
    k = np.searchsorted(inits, time, side="right")
    latest = inits[np.maximum(k - 1, 0)]
    return (k > 0) & (time - latest <= last)


OBS_BLOCK = 20_000  # observations paired with the runs at a time (memory: runs x block)


def match(archive: Archive, obs: pd.DataFrame, element: str, runs: np.ndarray | None = None) -> Matches | None:
    """Every (run, observation) pair of ``element`` at the archive's points (a probability
    and the precipitation quantiles: against the 1-hour precipitation observations of a clock
    hour; the other quantiles against their element's observations); ``runs``: which of the
    archived runs (a mask over ``archive.inits``), by default all."""
    names = ARCHIVE_NAMES.get(archive.product, {})
    if element not in names:
        return None
    name, sel = names[element]
    probability = element in PROBABILITIES
    observed_as = "precipitation" if probability else QUANTILE_FORECASTS.get(element, element)
    kind = CLOCK_HOUR if observed_as == "precipitation" and element != observed_as else OBSERVED[observed_as].kind
    rows = obs[(obs["element"] == observed_as) & obs["point"].isin(archive.points())]
    if kind == CLOCK_HOUR:
        rows = rows[(rows["period"] == HOUR) & (rows["time"].dt.floor("h") == rows["time"])]
    if rows.empty:
        return None
    time, period = rows["time"].values, rows["period"].values
    use = np.ones(len(archive.inits), dtype=bool) if runs is None else runs.copy()
    use &= (archive.inits <= time.max()) & (archive.inits + archive.step * archive.nlead >= (time - period).min())
    runs_at = np.nonzero(use)[0]  # the runs that may cover an observation
    inits = archive.inits[runs_at]
    pairs = []
    for b in range(0, len(rows), OBS_BLOCK):
        first, end, inside = _steps(archive, inits, time[b:b + OBS_BLOCK], period[b:b + OBS_BLOCK])
        i, j = np.nonzero(inside)
        pairs.append((i, j + b, first[i, j], end[i, j]))
    i, j, k0, k1 = (np.concatenate(c) for c in zip(*pairs, strict=True))
    if not len(i):
        return None
    points = sorted(set(rows["point"].values[j]))
    fcst = archive.forecast(name, sel, points, runs_at)
    if fcst is None:
        return None
    corr = archive.forecast(name, sel, points, runs_at, corrected=True)
    if archive.product in ("global", "japan") and element == "windir_10m":  # compass points
        fcst = np.where(fcst > 0, (fcst * COMPASS_DEGREES) % 360, np.nan)
    index = {p: c for c, p in enumerate(points)}
    col = np.array([index.get(p, -1) for p in rows["point"].values])

    def values(arr: np.ndarray | None) -> np.ndarray:
        if arr is None:
            return np.full(len(i), np.nan)
        if kind in (STATE, DIRECTION, CLOCK_HOUR):  # the nearest step; the clock hour's first
            return arr[i, col[j], k0]
        idx = k0[:, None] + np.arange(int((k1 - k0).max()))[None, :]
        use = idx < k1[:, None]
        taken = arr[i[:, None], col[j][:, None], np.minimum(idx, arr.shape[2] - 1)]
        missing = (use & np.isnan(taken)).any(axis=1)
        if kind == AMOUNT:  # the mean rate over the period (API units: kg/m2/h)
            out = np.where(use, taken, 0.0).sum(axis=1) / use.sum(axis=1)
        else:  # MAXIMUM
            out = np.where(use, taken, -np.inf).max(axis=1)
        return np.where(missing, np.nan, out)

    forecast, corrected = values(fcst), values(corr)
    observed = rows["value"].values[j]
    if probability:
        observed = (observed >= EVENT_MM).astype(np.float64)  # 1 h: the mean rate is the amount
    persistence = _persistence(obs, observed_as, rows, j, inits[i], probability)
    keep = ~np.isnan(forecast).reshape(len(forecast), -1).any(axis=1)  # a quantile forecast: all levels
    step_h = archive.step / HOUR
    return Matches(init=inits[i][keep], point=rows["point"].values[j][keep], valid=time[j][keep],
                   lead_h=(k0 * step_h)[keep], forecast=forecast[keep], observed=observed[keep],
                   persistence=persistence[keep], corrected=corrected[keep],
                   levels=archive.quantile_levels(name) if element in QUANTILE_FORECASTS else None)


def _persistence(obs: pd.DataFrame, element: str, rows: pd.DataFrame, j: np.ndarray, inits: np.ndarray,
                 probability: bool) -> np.ndarray:
    """The observation of the same point, element and period at the run's init time."""
    same = obs[obs["element"] == element]
    table = same.drop_duplicates(["point", "period", "time"]).set_index(["point", "period", "time"])["value"]
    wanted = pd.MultiIndex.from_arrays([rows["point"].values[j], rows["period"].values[j], inits])
    values = table.reindex(wanted).to_numpy(dtype=np.float64)
    if probability:
        values = np.where(np.isnan(values), np.nan, (values >= EVENT_MM) * 100.0)
    return values


# --------------------------------------------------------------------------------------------
# Scores


def _da(values: np.ndarray) -> xr.DataArray:
    return xr.DataArray(np.asarray(values, dtype=np.float64), dims="pair")


def _continuous(f: np.ndarray, o: np.ndarray, angular: bool) -> dict[str, float]:
    """Bias (forecast minus observation), MAE and RMSE; for a direction on the circle (the
    signed difference taken in [-180, 180))."""
    if angular:
        signed = (f - o + 180.0) % 360.0 - 180.0
        bias = scores.continuous.additive_bias(_da(signed), _da(np.zeros_like(signed)))
    else:
        bias = scores.continuous.additive_bias(_da(f), _da(o))
    return {"bias": _num(bias), "mae": _num(scores.continuous.mae(_da(f), _da(o), is_angular=angular)),
            "rmse": _num(scores.continuous.rmse(_da(f), _da(o), is_angular=angular))}


def _brier(p_percent: np.ndarray, event: np.ndarray) -> float:
    return _num(scores.probability.brier_score(_da(p_percent / 100.0), _da(event)))


def crps_from_quantiles(q: np.ndarray, levels: Sequence[float], o: np.ndarray) -> float:
    """The CRPS of quantile forecasts ``q`` (pair, level) against ``o``: twice the mean over
    the levels of the quantile score, the CRPS's quantile decomposition (Gneiting and Ranjan
    2011) on the levels there are, which for levels forming central intervals around the
    median is the weighted interval score (Bracher et al. 2021; docs/verification.md)."""
    per_level = [float(scores.continuous.quantile_score(_da(q[:, k]), _da(o), float(a)))
                 for k, a in enumerate(levels)]
    return _num(2.0 * np.mean(per_level))


def _num(x) -> float:
    return round(float(x), 4)


def reliability(p_percent: np.ndarray, event: np.ndarray) -> list[dict]:
    """Observed frequency of the event by forecast probability bin (the last bin closed)."""
    out = []
    edges = RELIABILITY_EDGES
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (p_percent >= lo) & ((p_percent < hi) if hi < edges[-1] else (p_percent <= hi))
        n = int(inside.sum())
        out.append({"forecast_from": lo, "forecast_to": hi, "n": n,
                    "observed_frequency": _num(event[inside].mean()) if n else None})
    return out


def score(m: Matches, element: str) -> dict:
    """The element's entry of a product's verification (docs/verification.md, "Output")."""
    probability, quantiles = element in PROBABILITIES, element in QUANTILE_FORECASTS
    angular = element in OBSERVED and OBSERVED[element].kind == DIRECTION
    lo, hi = lead_bin(m.lead_h)
    bins = []
    for a, b in sorted(set(zip(lo.tolist(), hi.tolist(), strict=True))):
        sel = lo == a
        f, o, p, c = m.forecast[sel], m.observed[sel], m.persistence[sel], m.corrected[sel]
        has_p, has_c = ~np.isnan(p), ~np.isnan(c)
        entry: dict = {"lead_from_h": int(a), "lead_to_h": int(b), "n": int(sel.sum())}
        if probability:
            entry["brier"] = _brier(f, o)
            entry["persistence"] = {"brier": _brier(p[has_p], o[has_p]) if has_p.any() else None}
        elif quantiles:
            if m.levels is None:
                raise ValueError(f"{element}: quantile forecasts without their levels")
            entry["crps"] = crps_from_quantiles(f, m.levels.tolist(), o)
            # a single value's CRPS is its absolute error
            entry["persistence"] = {"crps": _num(scores.continuous.mae(_da(p[has_p]), _da(o[has_p])))
                                    if has_p.any() else None}
        else:
            entry.update(_continuous(f, o, angular))
            entry["persistence"] = (_continuous(p[has_p], o[has_p], angular) if has_p.any()
                                    else {"bias": None, "mae": None, "rmse": None})
            if has_c.any():
                entry["corrected"] = {"n": int(has_c.sum()), **_continuous(c[has_c], o[has_c], angular)}
        bins.append(entry)
    units = "%" if probability else OBSERVED[QUANTILE_FORECASTS.get(element, element)].units
    out: dict = {"units": units, "bins": bins}
    if probability:
        out["reliability"] = reliability(m.forecast, m.observed)
    if quantiles and m.levels is not None:
        out["quantiles"] = m.levels.tolist()
    return out


def verify_product(archive: Archive, obs: pd.DataFrame, since: np.datetime64 | None = None,
                   until: np.datetime64 | None = None) -> dict:
    """The verification of one product: every element it archives that was observed."""
    runs = np.ones(len(archive.inits), dtype=bool)
    if since is not None:
        runs &= archive.inits >= since
    if until is not None:
        runs &= archive.inits <= until
    variables = {}
    for element in (*OBSERVED, *PROBABILITIES, *QUANTILE_FORECASTS):
        m = match(archive, obs, element, runs)
        if m is not None and len(m.init):
            variables[element] = score(m, element)
    return {"product": archive.product, "generated": _now(), "variables": variables}


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


# --------------------------------------------------------------------------------------------
# Output


def summary(result: dict) -> list[str]:
    """The Brier scores and CRPS of a product's verification as text (``pointcast verify``):
    over all lead times and by lead day (means of the bins' scores weighted by their pairs,
    which is the score of their pairs together), and each probability's reliability table."""
    lines = []
    for element, v in result["variables"].items():
        name = "brier" if element in PROBABILITIES else "crps" if element in QUANTILE_FORECASTS else None
        if name is None:
            continue
        units = "" if name == "brier" else f" {v['units']}"

        def mean(bins: list[dict], name: str = name) -> str:
            n = sum(b["n"] for b in bins)
            return f"{sum(b[name] * b['n'] for b in bins) / n:.4f}"

        days: dict[int, list[dict]] = {}
        for b in v["bins"]:
            days.setdefault(b["lead_from_h"] // 24, []).append(b)
        by_day = ", ".join(f"{d * 24}-{d * 24 + 24} h {mean(bins)}" for d, bins in sorted(days.items()))
        lines.append(f"{result['product']} {element}: {'Brier' if name == 'brier' else 'CRPS'} {mean(v['bins'])}"
                     f"{units} (n {sum(b['n'] for b in v['bins'])}); by lead day: {by_day}")
        if "reliability" in v:
            table = "; ".join(f"{r['forecast_from']}-{r['forecast_to']} %: {r['observed_frequency']:.2f} (n {r['n']})"
                              for r in v["reliability"] if r["n"])
            lines.append(f"  reliability (observed frequency by forecast probability): {table}")
    return lines


def to_dataset(result: dict) -> xr.Dataset:
    """The same numbers as the JSON, for analysts: ``<element>_<score>`` along ``lead_bin``
    (``persistence_``/``corrected_`` prefixed to the score), reliability along ``forecast_bin``."""
    bins = sorted({(b["lead_from_h"], b["lead_to_h"]) for v in result["variables"].values() for b in v["bins"]})
    index = {b: k for k, b in enumerate(bins)}
    ds = xr.Dataset(coords={"lead_from_h": ("lead_bin", [b[0] for b in bins]),
                            "lead_to_h": ("lead_bin", [b[1] for b in bins])},
                    attrs={"product": result["product"], "generated": result["generated"],
                           "comment": "pointcast verification (docs/verification.md)"})
    for element, v in result["variables"].items():
        columns: dict[str, np.ndarray] = {}
        for b in v["bins"]:
            k = index[(b["lead_from_h"], b["lead_to_h"])]
            flat = {key: val for key, val in b.items() if key not in ("lead_from_h", "lead_to_h", "persistence", "corrected")}
            flat |= {f"persistence_{key}": val for key, val in b["persistence"].items()}
            flat |= {f"corrected_{key}": val for key, val in b.get("corrected", {}).items()}
            for key, val in flat.items():
                columns.setdefault(key, np.full(len(bins), np.nan))[k] = np.nan if val is None else val
        for key, arr in columns.items():
            units = "1" if key.endswith(("n", "brier")) else v["units"]
            ds[f"{element}_{key}"] = ("lead_bin", arr, {"units": units})
        if "reliability" in v:
            rel = v["reliability"]
            ds = ds.assign_coords(forecast_from=("forecast_bin", [r["forecast_from"] for r in rel]),
                                  forecast_to=("forecast_bin", [r["forecast_to"] for r in rel]))
            ds[f"{element}_reliability_n"] = ("forecast_bin", [r["n"] for r in rel])
            ds[f"{element}_observed_frequency"] = ("forecast_bin", [np.nan if r["observed_frequency"] is None
                                                                  else r["observed_frequency"] for r in rel])
    return ds


def replace_dir(tmp: Path, path: Path) -> None:
    """Put a complete directory in place of another (the old one renamed aside, then removed)."""
    trash = path.with_name(f".{path.name}.trash-{secrets.token_hex(4)}")
    if path.exists():
        os.rename(path, trash)
    os.rename(tmp, path)
    publish.fsync_dir(path.parent)
    shutil.rmtree(trash, ignore_errors=True)


def _dumps(obj: dict) -> bytes:
    return (json.dumps(obj, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


def write_outputs(root: Path, results: list[dict], mode: str = "both") -> list[Path]:
    """``<root>/verification/<product>.json`` and ``.zarr``, ``index.json``, and their copy in
    the served run's JSON tree (``json/verification/``, in the forms ``[output] json`` names:
    ``mode``) for static hosts and the status page. Each file is replaced whole; everything
    is computed before the first write."""
    out_dir = root / VERIFICATION_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {f"{r['product']}.json": _dumps(r) for r in results}
    products = sorted({p.stem for p in out_dir.glob("*.json") if p.name != "index.json"}
                      | {r["product"] for r in results})
    files["index.json"] = _dumps({"generated": _now(), "products": products})
    datasets = {r["product"]: to_dataset(r) for r in results}
    written = []
    for product, ds in datasets.items():
        tmp = out_dir / f".{product}.zarr.tmp-{secrets.token_hex(4)}"
        try:
            with publish.zarr_settings():
                ds.to_zarr(tmp, mode="w-", consolidated=True, zarr_format=3)
            replace_dir(tmp, out_dir / f"{product}.zarr")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        written.append(out_dir / f"{product}.zarr")
    for name, data in files.items():
        publish.replace_bytes(out_dir / name, data)
        written.append(out_dir / name)
    current = root / publish.CURRENT
    if current.is_symlink():
        written += publish_copy(current.resolve() / publish.JSON_DIR, published_files(root), mode)
    return written


def publish_copy(json_dir: Path, files: dict[str, bytes], mode: str = "both") -> list[Path]:
    """``json/verification/<name>`` in a run's JSON tree, in the forms ``mode`` names, each
    replaced whole; a form the mode does not write is removed (an older copy would be served
    beside the new one)."""
    target = json_dir / VERIFICATION_DIR
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in sorted(files.items()):
        plain, gz = target / name, target / f"{name}.gz"
        if mode == "gzip":
            plain.unlink(missing_ok=True)
        else:
            publish.replace_bytes(plain, data)
        if mode == "plain":
            gz.unlink(missing_ok=True)
        else:
            publish.replace_bytes(gz, publish.gzip_bytes(data))
        written.append(gz if mode == "gzip" else plain)
    return written


def published_files(root: Path) -> dict[str, bytes]:
    """The verification files a new run's JSON tree carries (``json/verification/``)."""
    out_dir = root / VERIFICATION_DIR
    if not out_dir.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(out_dir.glob("*.json"))}


@dataclass
class Report:
    results: list[dict]
    observations: int
    flagged: int
    flagged_at: list[str]
    outside: int
    written: list[Path]


def run(cfg: Config, paths: Sequence[Path], since: datetime | None = None,
        until: datetime | None = None) -> Report:
    """``pointcast verify``: read, match, score, then write every output."""
    if publish.is_url(cfg.output.root):
        raise ValueError("verification reads the archive from a local output root; "
                         f"{cfg.output.root} is a URL")
    root = Path(cfg.output.root)
    obs = read_observations(paths, cfg)
    frame = obs.frame
    archives = {pid: a for pid in [*cfg.products, POWER] if (a := Archive.open(root, pid)) is not None}
    if not archives:
        raise ValueError(f"no archived runs under {root / publish.ZARR_DIR}: run a cycle first")
    try:
        inside = np.zeros(len(frame), dtype=bool)
        for a in archives.values():
            mine = frame["point"].isin(a.points()).values
            if mine.any():
                inside[mine] |= covered(a, frame[mine])
        isd = frame["file"].map(lambda f: is_isd_lite(Path(f))).values.astype(bool)
        bad = ~inside & ~isd
        if bad.any():  # a tidy file is made for verification: a time outside is an error
            row = frame[bad].iloc[0]
            raise ObservationError(row["file"], int(row["line"]),
                                   f"time {pd.Timestamp(row['time']).isoformat()}Z is outside every archived run "
                                   f"of the products of point {row['point']!r}")
        for f in set(frame["file"][isd]):  # an ISD-Lite file is a station's year: it must overlap
            if not inside[(frame["file"] == f).values].any():
                raise ObservationError(f, 1, "no observation of this file lies within an archived run")
        outside = int((~inside).sum())
        frame = frame[inside]
        to64 = (lambda t: None if t is None else np.datetime64(t.astimezone(UTC).replace(tzinfo=None), "ns"))
        results = [verify_product(a, frame, to64(since), to64(until)) for a in archives.values()]
    finally:
        for a in archives.values():
            a.close()
    results = [r for r in results if r["variables"]]
    written = write_outputs(root, results, cfg.output.json) if results else []
    return Report(results, len(frame), obs.flagged, obs.flagged_at, outside, written)
