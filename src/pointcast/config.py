"""Typed configuration: ``load_config(path) -> Config``.

The TOML schema and the points CSV are described in docs/config.md (user reference) and
docs/contracts.md. Every problem raises :class:`ConfigError` with the message
``"<file>:<line>: <key>: <reason>"``: the line of the offending key in the TOML (found by scanning
the file's text for table headers and keys), or the row of a points CSV with the column name.
The CLI prints the message and exits with status 2.

One job, kept whole: every key's check is a few lines beside its dataclass, and they share the
line-finding context (``_Ctx``); cutting the file by section would scatter one schema.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from . import contract, grids, turbines as turbines_lib

__all__ = [
    "DEFAULT_CONFIG",
    "utc_time",
    "ConfigError",
    "Config",
    "OutputConfig",
    "ScheduleConfig",
    "DaskConfig",
    "ServerConfig",
    "PostprocessConfig",
    "ApiKeyConfig",
    "api_key_sha256",
    "SourceConfig",
    "ModelConfig",
    "ProductConfig",
    "Point",
    "load_config",
    "load_points",
    "load_sites",
    "WindSite",
    "PVSite",
    "Site",
    "KNOWN_PRODUCTS",
    "FREQS",
    "PRODUCT_FREQS",
    "POINTS_COLUMNS",
    "HUB_HEIGHT_RANGE_M",
]

DEFAULT_CONFIG = "config/pointcast.toml"  # what `pointcast` and the server read unless told
KNOWN_PRODUCTS: tuple[str, ...] = tuple(sorted(grids.PRODUCT_GRIDS))  # every product with a grid
FREQS = contract.FREQS
PRODUCT_FREQS = contract.PRODUCT_FREQS
"""Time steps a product can publish, where not all of FREQS (the contract's)."""
POINTS_COLUMNS: tuple[str, ...] = ("id", "name", "lat", "lon", "elevation", "hub_heights")
OPTIONAL_POINTS_COLUMNS: tuple[str, ...] = ("station",)  # the observing station (docs/verification.md)
STATION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HUB_HEIGHT_RANGE_M = contract.HUB_HEIGHT_RANGE_M  # the points lists may configure what the windpack serves
ELEVATION_RANGE_M: tuple[float, float] = (-500.0, 9000.0)
DASK_SCHEDULERS: tuple[str, ...] = ("threads", "synchronous", "local-cluster")
JSON_MODES: tuple[str, ...] = ("both", "plain", "gzip")
"""``[output] json``: how a run's JSON files are written (docs/config.md): ``<file>.json`` and its
``.json.gz`` twin, the plain file alone, or the ``.json.gz`` alone."""
POINT_ID_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

_DEFAULT_KEEP_RUNS = 8
_DEFAULT_KEEP_CACHE_RUNS = 2
_DEFAULT_EVERY_HOURS = 3
_DEFAULT_OFFSET_MINUTES = 0
_DEFAULT_SCHEDULER = "threads"
_DEFAULT_WORKERS = 2
_DEFAULT_JSON = "both"


# --------------------------------------------------------------------------------------------
# Errors


class ConfigError(Exception):
    """A configuration problem; ``str(err)`` is ``"<file>:<line>: <key>: <reason>"``, followed
    by a line of the same form for each of ``others``: the problems found beside it (every bad
    row of a points CSV, not only the first)."""

    def __init__(self, file: str | os.PathLike, line: int, key: str, reason: str,
                 others: tuple[ConfigError, ...] = ()) -> None:
        self.file = str(file)
        self.line = int(line)
        self.key = key
        self.reason = reason
        self.others = tuple(others)
        super().__init__("\n".join([f"{self.file}:{self.line}: {key}: {reason}", *map(str, self.others)]))

    @classmethod
    def of_all(cls, errors: list[ConfigError]) -> ConfigError:
        """One error for several: the first, with the others after it."""
        first, *rest = errors
        return cls(first.file, first.line, first.key, first.reason, tuple(rest))

    @property
    def message(self) -> str:
        return str(self)

    def __reduce__(self):  # picklable (Prefect/dask may ship exceptions between processes)
        return (type(self), (self.file, self.line, self.key, self.reason, self.others))


# --------------------------------------------------------------------------------------------
# The typed configuration


@dataclass(frozen=True)
class OutputConfig:
    root: Path | str  # absolute path, or an fsspec URL (str); runs/, current, zarr/ live here
    keep_runs: int = _DEFAULT_KEEP_RUNS
    keep_cache_runs: int = _DEFAULT_KEEP_CACHE_RUNS  # model runs kept in the cache, per model
    cache_max_gb: float | None = None  # cap on the cache's model runs; None: no cap
    archive_keep_days: float | None = None  # init_times the Zarr archive keeps; None: all

    cache: Path | None = None  # local cache of model runs; default <root>/cache
    json: str = _DEFAULT_JSON  # one of JSON_MODES

    @property
    def cache_dir(self) -> Path:
        if self.cache is not None:
            return self.cache
        if isinstance(self.root, str):  # the parser always gives a URL root a local cache
            raise ValueError(f"output root {self.root} is a URL: it needs a local cache directory")
        return self.root / "cache"


@dataclass(frozen=True)
class ScheduleConfig:
    every_hours: int = _DEFAULT_EVERY_HOURS
    offset_minutes: int = _DEFAULT_OFFSET_MINUTES


@dataclass(frozen=True)
class DaskConfig:
    scheduler: str = _DEFAULT_SCHEDULER  # "threads" | "synchronous" | "local-cluster" | "tcp://host:port"
    workers: int = _DEFAULT_WORKERS
    # Points resampled, blended and built at a time (a build process's or a worker's task):
    # a builder's memory grows with its slice, not with the list. 500: a list of 1,000 points
    # is cut in two slices for two builders anyway, so larger lists are built in slices of the
    # same size and their builders need no more memory than a small list's (docs/performance.md,
    # "Build slices").
    points_per_slice: int = 500
    # With the threads or synchronous scheduler, the processes building the slices
    # (`forked.fork_map`: rendering JSON is Python, one core a process); by default the CPUs this process may run
    # on (a cpuset or taskset narrows them). A distributed scheduler builds on its workers.
    build_processes: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))


@dataclass(frozen=True)
class ApiKeyConfig:
    """One API key of ``[server.api_keys.<name>]``: only its SHA-256 is stored, never the key.

    ``rate_limit`` (requests per second, the token bucket's refill) and ``burst`` (its size) are
    resolved here from the key's own values or the ``[server]`` defaults; ``None``: unlimited."""

    name: str
    sha256: str  # lower-case hex digest of the key's bytes
    rate_limit: float | None = None
    burst: int | None = None


@dataclass(frozen=True)
class ServerConfig:
    api_keys: tuple[ApiKeyConfig, ...] = ()  # empty: the service is open


def api_key_sha256(key: bytes) -> str:
    """What ``[server.api_keys.<name>] sha256`` holds for ``key`` (``pointcast hash-key``)."""
    return hashlib.sha256(key).hexdigest()


@dataclass(frozen=True)
class SourceConfig:
    """A place model runs come from. ``options`` holds every key except ``type``.

    For ``type = "sample"`` the options are validated here and always hold ``scale`` (int >= 1),
    ``area`` (``(west, south, east, north)`` floats, or ``None`` for no crop) and ``init``
    (``"latest"`` or a timezone-aware UTC ``datetime``). Other types validate their own options.
    """

    id: str
    type: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelConfig:
    id: str
    source: str
    # The UTC hours of the runs taken (None: every run the model has; `pointcast.need`).
    run_hours: tuple[int, ...] | None = None
    # Canonical variables of the model's table not fetched nor decoded (`pointcast.need`).
    skip_variables: tuple[str, ...] = ()


@dataclass(frozen=True)
class Point:
    id: str
    name: str
    lat: float
    lon: float
    elevation: float | None = None
    hub_heights: tuple[float, ...] = ()
    station: str | None = None  # the station whose observations verify the point


@dataclass(frozen=True)
class ProductConfig:
    id: str
    points_file: Path  # absolute
    points: tuple[Point, ...]
    models: tuple[str, ...]  # blend priority, first = preferred where it has data
    freqs: tuple[str, ...]  # subset of FREQS
    horizon_hours: int
    # model id -> last lead time (hours after the product's basetime) it is blended at;
    # models not named are used to their own horizon
    max_lead_hours: tuple[tuple[str, int], ...] = ()
    # ensemble models in priority order by lead time: the first one running at a time gives
    # the probabilities and quantiles there (`pointcast.ensemble`); none: neighbourhood
    # probabilities only
    ensembles: tuple[str, ...] = ()
    # the wind farms and solar plants whose power the product forecasts (`sites`, docs/config.md)
    sites_file: Path | None = None  # absolute
    sites: tuple[Site, ...] = ()


@dataclass(frozen=True)
class PostprocessConfig:
    """``[postprocess]``: the decaying-average bias correction (pointcast.postprocess)."""

    enabled: bool = False
    observations: Path | None = None  # directory of observation files read each cycle
    weight: float = 0.02  # the decaying average's weight (NCEP's value)


@dataclass(frozen=True)
class Config:
    path: Path  # absolute path of the TOML file
    output: OutputConfig
    schedule: ScheduleConfig
    dask: DaskConfig
    sources: dict[str, SourceConfig]
    models: dict[str, ModelConfig]
    products: dict[str, ProductConfig]
    server: ServerConfig = field(default_factory=ServerConfig)
    postprocess: PostprocessConfig = field(default_factory=PostprocessConfig)

    def product(self, product_id: str) -> ProductConfig:
        try:
            return self.products[product_id]
        except KeyError:
            raise KeyError(f"product {product_id!r} is not configured in {self.path}") from None

    def source_for(self, model_id: str) -> SourceConfig:
        return self.sources[self.models[model_id].source]


# --------------------------------------------------------------------------------------------
# Locating keys in the TOML text

_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\]|\\.)*"'
_LITERAL = r"'[^']*'"
_SEG = rf"(?:{_BARE}|{_BASIC}|{_LITERAL})"
_DOTTED = rf"{_SEG}(?:\s*\.\s*{_SEG})*"
_HEADER_RE = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?")
_KEY_RE = re.compile(rf"^\s*({_DOTTED})\s*=")
_SEG_RE = re.compile(_SEG)


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = []
    for m in _SEG_RE.finditer(text):
        s = m.group(0)
        if s.startswith('"'):
            try:
                s = tomllib.loads(f"k = {s}")["k"]
            except tomllib.TOMLDecodeError:
                s = s[1:-1]
        elif s.startswith("'"):
            s = s[1:-1]
        parts.append(s)
    return tuple(parts)


class _Lines:
    """Map of key paths to the first line (1-based) that defines them."""

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        in_multiline: str | None = None
        for n, line in enumerate(text.splitlines(), start=1):
            if in_multiline:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            m = _HEADER_RE.match(line)
            if m:
                table = _split_dotted(m.group(1))
                self.lines.setdefault(table, n)
                continue
            m = _KEY_RE.match(line)
            if m:
                path = table + _split_dotted(m.group(1))
                for i in range(len(table) + 1, len(path) + 1):
                    self.lines.setdefault(path[:i], n)
                rest = line[m.end():]
                for q in ('"""', "'''"):
                    if rest.count(q) % 2 == 1:
                        in_multiline = q
                        break

    def line(self, path: tuple[str, ...]) -> int:
        for end in range(len(path), 0, -1):
            p = path[:end]
            if p in self.lines:
                return self.lines[p]
            below = [n for q, n in self.lines.items() if q[:end] == p]
            if below:
                return min(below)
        return 1


class _Ctx:
    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.lines = _Lines(text)

    def error(self, path: tuple[str, ...], reason: str) -> ConfigError:
        return ConfigError(self.file, self.lines.line(path), ".".join(path), reason)


# --------------------------------------------------------------------------------------------
# Typed getters

_MISSING = object()


def _type_name(v: Any) -> str:
    return {
        bool: "a boolean", int: "an integer", float: "a float", str: "a string",
        list: "an array", dict: "a table", datetime: "a date-time", date: "a date", time: "a time",
    }.get(type(v), type(v).__name__)


@overload
def _table(ctx: _Ctx, parent: dict, key: str, path: tuple[str, ...], *, required: Literal[True]) -> dict: ...
@overload
def _table(ctx: _Ctx, parent: dict, key: str, path: tuple[str, ...], *, required: bool) -> dict | None: ...
def _table(ctx: _Ctx, parent: dict, key: str, path: tuple[str, ...], *, required: bool) -> dict | None:
    v = parent.get(key, _MISSING)
    if v is _MISSING:
        if required:
            raise ctx.error(path, f"missing required table [{'.'.join(path)}]")
        return None
    if not isinstance(v, dict):
        raise ctx.error(path, f"expected a table, got {_type_name(v)}")
    return v


def _check_keys(ctx: _Ctx, tbl: dict, path: tuple[str, ...], allowed: tuple[str, ...], what: str = "key") -> None:
    for k in tbl:
        if k not in allowed:
            raise ctx.error(path + (k,), f"unknown {what} (expected one of: {', '.join(allowed)})")


def _int(ctx: _Ctx, tbl: dict, key: str, path: tuple[str, ...], default: Any = _MISSING,
         lo: int | None = None, hi: int | None = None) -> int:
    p = path + (key,)
    v = tbl.get(key, _MISSING)
    if v is _MISSING:
        if default is _MISSING:
            raise ctx.error(p, "missing required key")
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ctx.error(p, f"expected an integer, got {_type_name(v)}")
    if lo is not None and v < lo:
        raise ctx.error(p, f"must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise ctx.error(p, f"must be <= {hi}, got {v}")
    return v


def _str(ctx: _Ctx, tbl: dict, key: str, path: tuple[str, ...], default: Any = _MISSING) -> str:
    p = path + (key,)
    v = tbl.get(key, _MISSING)
    if v is _MISSING:
        if default is _MISSING:
            raise ctx.error(p, "missing required key")
        return default
    if not isinstance(v, str):
        raise ctx.error(p, f"expected a string, got {_type_name(v)}")
    if not v.strip():
        raise ctx.error(p, "must not be empty")
    return v


def _str_list(ctx: _Ctx, tbl: dict, key: str, path: tuple[str, ...], default: Any = _MISSING) -> tuple[str, ...]:
    p = path + (key,)
    v = tbl.get(key, _MISSING)
    if v is _MISSING:
        if default is _MISSING:
            raise ctx.error(p, "missing required key")
        return default
    if not isinstance(v, list):
        raise ctx.error(p, f"expected an array of strings, got {_type_name(v)}")
    if not v:
        raise ctx.error(p, "must not be empty")
    seen: set[str] = set()
    for item in v:
        if not isinstance(item, str):
            raise ctx.error(p, f"expected an array of strings, found {_type_name(item)} {item!r}")
        if item in seen:
            raise ctx.error(p, f"{item!r} is listed twice")
        seen.add(item)
    return tuple(v)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# --------------------------------------------------------------------------------------------
# Sections

_TOP_LEVEL = ("output", "schedule", "dask", "sources", "models", "products", "server", "postprocess")


def _output(ctx: _Ctx, doc: dict, base: Path) -> OutputConfig:
    path = ("output",)
    tbl = _table(ctx, doc, "output", path, required=True)
    _check_keys(ctx, tbl, path, ("root", "cache", "keep_runs", "keep_cache_runs", "cache_max_gb", "json",
                                 "archive_keep_days"))
    root = _str(ctx, tbl, "root", path)
    json_mode = _str(ctx, tbl, "json", path, _DEFAULT_JSON)
    if json_mode not in JSON_MODES:
        raise ctx.error(path + ("json",), f"expected one of {', '.join(map(repr, JSON_MODES))}, got {json_mode!r}")
    cache = tbl.get("cache")
    if cache is not None:
        cache = Path(os.path.normpath(base / Path(_str(ctx, tbl, "cache", path)).expanduser()))
    keep = _int(ctx, tbl, "keep_runs", path, _DEFAULT_KEEP_RUNS, lo=1)
    keep_cache = _int(ctx, tbl, "keep_cache_runs", path, _DEFAULT_KEEP_CACHE_RUNS, lo=1)
    cap = tbl.get("cache_max_gb")
    if cap is not None and not (_number(cap) and math.isfinite(cap) and cap > 0):
        raise ctx.error(path + ("cache_max_gb",), f"expected a positive number of GB, got {cap!r}")
    keep_days = tbl.get("archive_keep_days")
    if keep_days is not None and not (_number(keep_days) and math.isfinite(keep_days) and keep_days > 0):
        raise ctx.error(path + ("archive_keep_days",), f"expected a positive number of days, got {keep_days!r}")
    keep_days = None if keep_days is None else float(keep_days)
    if "://" in root:  # an object store through fsspec; model runs are cached locally
        if not re.fullmatch(r"[a-z][a-z0-9+.-]*://\S*", root):
            raise ctx.error(path + ("root",), f"expected a path or a URL such as 's3://bucket/prefix', got {root!r}")
        if keep_days is not None:
            raise ctx.error(path + ("archive_keep_days",), "archive retention needs a local root: an object "
                            "store cannot swap a compacted store for the old one in one step")
        return OutputConfig(root=root.rstrip("/"), keep_runs=keep, keep_cache_runs=keep_cache,
                            cache_max_gb=None if cap is None else float(cap),
                            cache=cache if cache is not None else base / "cache", json=json_mode)
    root_path = Path(os.path.normpath(base / Path(root).expanduser()))
    return OutputConfig(root=root_path, keep_runs=keep, keep_cache_runs=keep_cache,
                        cache_max_gb=None if cap is None else float(cap), cache=cache, json=json_mode,
                        archive_keep_days=keep_days)


def _schedule(ctx: _Ctx, doc: dict) -> ScheduleConfig:
    path = ("schedule",)
    tbl = _table(ctx, doc, "schedule", path, required=False) or {}
    _check_keys(ctx, tbl, path, ("every_hours", "offset_minutes"))
    every = _int(ctx, tbl, "every_hours", path, _DEFAULT_EVERY_HOURS, lo=1, hi=24)
    if 24 % every:
        raise ctx.error(path + ("every_hours",), f"must divide 24 (1, 2, 3, 4, 6, 8, 12 or 24), got {every}")
    offset = _int(ctx, tbl, "offset_minutes", path, _DEFAULT_OFFSET_MINUTES, lo=0, hi=every * 60 - 1)
    return ScheduleConfig(every_hours=every, offset_minutes=offset)


_TCP_RE = re.compile(r"tcp://[^\s:/]+:\d{1,5}")


def _dask(ctx: _Ctx, doc: dict) -> DaskConfig:
    path = ("dask",)
    tbl = _table(ctx, doc, "dask", path, required=False) or {}
    _check_keys(ctx, tbl, path, ("scheduler", "workers", "points_per_slice", "build_processes"))
    sched = _str(ctx, tbl, "scheduler", path, _DEFAULT_SCHEDULER)
    if sched not in DASK_SCHEDULERS and not _TCP_RE.fullmatch(sched):
        raise ctx.error(
            path + ("scheduler",),
            f"expected one of {', '.join(map(repr, DASK_SCHEDULERS))} or 'tcp://host:port', got {sched!r}",
        )
    workers = _int(ctx, tbl, "workers", path, _DEFAULT_WORKERS, lo=1, hi=1024)
    per_slice = _int(ctx, tbl, "points_per_slice", path, DaskConfig.points_per_slice, lo=1)
    processes = _int(ctx, tbl, "build_processes", path, DaskConfig().build_processes, lo=1, hi=1024)
    return DaskConfig(scheduler=sched, workers=workers, points_per_slice=per_slice,
                      build_processes=processes)


_KEY_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SHA256_RE = re.compile(r"[0-9a-fA-F]{64}")


def _rate(ctx: _Ctx, tbl: dict, path: tuple[str, ...], default: float | None) -> float | None:
    """``rate_limit``: requests per second (> 0, finite), or the default."""
    p = path + ("rate_limit",)
    v = tbl.get("rate_limit", _MISSING)
    if v is _MISSING:
        return default
    if not _number(v):
        raise ctx.error(p, f"expected a number of requests per second, got {_type_name(v)}")
    if not (math.isfinite(v) and v > 0):
        raise ctx.error(p, f"must be a positive finite number, got {v!r}")
    return float(v)


def _server(ctx: _Ctx, doc: dict) -> ServerConfig:
    path = ("server",)
    tbl = _table(ctx, doc, "server", path, required=False) or {}
    _check_keys(ctx, tbl, path, ("api_keys", "rate_limit", "burst"))
    rate = _rate(ctx, tbl, path, None)
    burst = _int(ctx, tbl, "burst", path, None, lo=1)
    keys_path = path + ("api_keys",)
    keys_tbl = _table(ctx, tbl, "api_keys", keys_path, required=False) or {}
    keys: list[ApiKeyConfig] = []
    names_by_hash: dict[str, str] = {}
    for name, kt in keys_tbl.items():
        p = keys_path + (name,)
        if not _KEY_NAME_RE.fullmatch(name):
            raise ctx.error(p, "invalid key name (letters, digits, '_', '.', '-', starting with a letter or digit, "
                               "at most 64)")
        if not isinstance(kt, dict):
            raise ctx.error(p, f"expected a table, got {_type_name(kt)}")
        _check_keys(ctx, kt, p, ("sha256", "rate_limit", "burst"))
        digest = _str(ctx, kt, "sha256", p)
        if not _SHA256_RE.fullmatch(digest):
            raise ctx.error(p + ("sha256",), "expected the 64 hex digits of the key's SHA-256 "
                                             "(`pointcast hash-key`), never the key itself")
        digest = digest.lower()
        if digest in names_by_hash:
            raise ctx.error(p + ("sha256",), f"the same key as [server.api_keys.{names_by_hash[digest]}]")
        names_by_hash[digest] = name
        key_rate = _rate(ctx, kt, p, rate)
        key_burst = _int(ctx, kt, "burst", p, burst, lo=1)
        if key_rate is None and key_burst is not None:
            where = p if "burst" in kt else path
            raise ctx.error(where + ("burst",), "a burst needs a rate_limit (requests per second) to refill")
        if key_rate is not None and key_burst is None:
            key_burst = max(1, math.ceil(key_rate))  # one second's worth
        keys.append(ApiKeyConfig(name=name, sha256=digest, rate_limit=key_rate, burst=key_burst))
    if (rate is not None or burst is not None) and not keys:
        raise ctx.error(path + ("rate_limit" if rate is not None else "burst",),
                        "rate limits apply per API key: configure [server.api_keys.<name>] too")
    return ServerConfig(api_keys=tuple(keys))


def utc_time(value: str | datetime) -> datetime:
    """An ISO 8601 time (or a datetime) in UTC: one with an offset converted, one without taken
    as UTC; ValueError when ``value`` is no ISO 8601 time. Every time pointcast reads (the
    configuration's, the CLI's, the observation files', the run tree's) is read this one way."""
    t = datetime.fromisoformat(value) if isinstance(value, str) else value
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def parse_init(v: Any) -> datetime | None:
    """A run's start as configured (``init``): None for "latest" (the newest run), else the
    time in UTC (a time without a zone is UTC). Raises ValueError."""
    if v is None:
        return None
    if isinstance(v, str):
        text = v.strip()
        if text == "latest":
            return None
        try:
            return utc_time(text)
        except ValueError:
            raise ValueError(f"expected \"latest\" or an ISO 8601 time like \"2026-11-22T00:00Z\", got {v!r}") from None
    if isinstance(v, datetime):
        return utc_time(v)
    if isinstance(v, date):
        return utc_time(datetime(v.year, v.month, v.day))
    raise ValueError(f"expected \"latest\" or an ISO 8601 time, got {_type_name(v)}")


def _parse_init(ctx: _Ctx, v: Any, p: tuple[str, ...]) -> str | datetime:
    try:
        when = parse_init(v)
    except ValueError as e:
        raise ctx.error(p, str(e)) from None
    return "latest" if when is None else when


def _sample_options(ctx: _Ctx, tbl: dict, path: tuple[str, ...]) -> dict[str, Any]:
    _check_keys(ctx, tbl, path, ("type", "scale", "area", "init", "icon_layout", "horizon_hours",
                                 "ensemble_scale", "members", "outage"))
    scale = _int(ctx, tbl, "scale", path, 1, lo=1)
    area = None
    if "area" in tbl:
        p = path + ("area",)
        v = tbl["area"]
        if not isinstance(v, list) or len(v) != 4 or not all(_number(x) for x in v):
            raise ctx.error(p, "expected 4 numbers [west, south, east, north]")
        west, south, east, north = (float(x) for x in v)
        if not all(math.isfinite(x) for x in (west, south, east, north)):
            raise ctx.error(p, "values must be finite")
        if not (-180.0 <= west <= 360.0 and -180.0 <= east <= 360.0):
            raise ctx.error(p, "west and east must lie within -180..360")
        if not (-90.0 <= south <= 90.0 and -90.0 <= north <= 90.0):
            raise ctx.error(p, "south and north must lie within -90..90")
        if not west < east:
            raise ctx.error(p, f"west ({west:g}) must be less than east ({east:g})")
        if not south < north:
            raise ctx.error(p, f"south ({south:g}) must be less than north ({north:g})")
        area = (west, south, east, north)
    init = _parse_init(ctx, tbl["init"], path + ("init",)) if "init" in tbl else "latest"
    # DWD's tree for the ICON models: "v1" (native grids) or "legacy" (regular lat/lon bz2).
    layout = _str(ctx, tbl, "icon_layout", path, "v1")
    if layout not in ("v1", "legacy"):
        raise ctx.error(path + ("icon_layout",), f"expected 'v1' or 'legacy', got {layout!r}")
    out: dict[str, Any] = {"scale": scale, "area": area, "init": init, "icon_layout": layout}
    if "horizon_hours" in tbl:
        v = tbl["horizon_hours"]
        if not _number(v) or not math.isfinite(v) or v < 0:
            raise ctx.error(path + ("horizon_hours",), f"expected a number >= 0, got {v!r}")
        out["horizon_hours"] = float(v)
    if "ensemble_scale" in tbl:  # the ensembles' coarser grid (default: 4 x scale, pointcast.sample)
        out["ensemble_scale"] = _int(ctx, tbl, "ensemble_scale", path, None, lo=1)
    if "members" in tbl:  # each ensemble's first N members (default: all, pointcast.sample)
        out["members"] = _int(ctx, tbl, "members", path, None, lo=2)
    if "outage" in tbl:  # [start, end): no run starting then is published (a stopped upstream)
        p = path + ("outage",)
        v = tbl["outage"]
        try:
            start, end = (utc_time(t if isinstance(t, datetime) else str(t)) for t in v)
        except (TypeError, ValueError):
            raise ctx.error(p, f"expected two ISO 8601 times [start, end], got {v!r}") from None
        if not start < end:
            raise ctx.error(p, f"the start ({start.isoformat()}) must be before the end ({end.isoformat()})")
        out["outage"] = (start, end)
    return out


# The options of ``type = "http"``, checked here and taken by ``sources.remote.HttpSettings``.
HTTP_OPTIONS: tuple[str, ...] = ("mirrors", "base_url", "extra_mirrors", "layouts", "wait_minutes",
                                 "retry_seconds", "timeout_seconds", "connections", "lookback_runs",
                                 "horizon_hours", "missing_minutes", "progress", "unreachable_minutes")


def _http_options(ctx: _Ctx, tbl: dict, path: tuple[str, ...]) -> dict[str, Any]:
    """Options of ``type = "http"`` (``pointcast.sources.remote.HttpSource``)."""
    _check_keys(ctx, tbl, path, ("type", *HTTP_OPTIONS))
    out: dict[str, Any] = {}

    def url(v: Any, p: tuple[str, ...]) -> str:
        if not isinstance(v, str) or not re.match(r"https?://[^\s/]+", v):
            raise ctx.error(p, f"expected an http:// or https:// URL, got {v!r}")
        return v.rstrip("/")

    if "base_url" in tbl and "mirrors" in tbl:
        raise ctx.error(path + ("base_url",), "give base_url or mirrors, not both")
    if "base_url" in tbl:
        out["mirrors"] = (url(tbl["base_url"], path + ("base_url",)),)
    for key in ("mirrors", "extra_mirrors"):
        if key in tbl:
            out[key] = tuple(url(v, path + (key,)) for v in _str_list(ctx, tbl, key, path))
    if "layouts" in tbl:
        lt = _table(ctx, tbl, "layouts", path + ("layouts",), required=True)
        layouts = {}
        for name, t in lt.items():
            p = path + ("layouts", name)
            if not isinstance(t, dict):
                raise ctx.error(p, f"expected a table, got {_type_name(t)}")
            _check_keys(ctx, t, p, ("path", "index_path"))
            layouts[name] = {k: _str(ctx, t, k, p) for k in t}
        out["layouts"] = layouts
    for key, lo in (("wait_minutes", 0.0), ("retry_seconds", 0.001), ("timeout_seconds", 0.001),
                    ("horizon_hours", 0.0), ("missing_minutes", 0.0), ("unreachable_minutes", 0.0)):
        if key in tbl:
            v = tbl[key]
            if not _number(v) or not math.isfinite(v) or v < lo:
                raise ctx.error(path + (key,), f"expected a number >= {lo:g}, got {v!r}")
            out[key] = float(v)
    for key, lo, hi in (("connections", 1, 32), ("lookback_runs", 1, 40)):
        if key in tbl:
            out[key] = _int(ctx, tbl, key, path, lo=lo, hi=hi)
    if "progress" in tbl:
        if not isinstance(tbl["progress"], bool):
            raise ctx.error(path + ("progress",), f"expected true or false, got {tbl['progress']!r}")
        out["progress"] = tbl["progress"]
    return out


def _sources(ctx: _Ctx, doc: dict) -> dict[str, SourceConfig]:
    path = ("sources",)
    tbl = _table(ctx, doc, "sources", path, required=True)
    if not tbl:
        raise ctx.error(path, "at least one source is required")
    out: dict[str, SourceConfig] = {}
    for sid, st in tbl.items():
        p = path + (sid,)
        if not isinstance(st, dict):
            raise ctx.error(p, f"expected a table, got {_type_name(st)}")
        stype = _str(ctx, st, "type", p)
        if stype == "sample":
            options = _sample_options(ctx, st, p)
        elif stype == "http":
            options = _http_options(ctx, st, p)
        else:
            options = {k: v for k, v in st.items() if k != "type"}
        out[sid] = SourceConfig(id=sid, type=stype, options=options)
    return out


def _models(ctx: _Ctx, doc: dict, sources: dict[str, SourceConfig]) -> dict[str, ModelConfig]:
    path = ("models",)
    tbl = _table(ctx, doc, "models", path, required=True)
    if not tbl:
        raise ctx.error(path, "at least one model is required")
    out: dict[str, ModelConfig] = {}
    for mid, mt in tbl.items():
        p = path + (mid,)
        if not isinstance(mt, dict):
            raise ctx.error(p, f"expected a table, got {_type_name(mt)}")
        _check_keys(ctx, mt, p, ("source", "run_hours", "skip_variables"))
        src = _str(ctx, mt, "source", p)
        if src not in sources:
            raise ctx.error(p + ("source",), f"source {src!r} is not defined in [sources] (defined: {', '.join(sources)})")
        run_hours = mt.get("run_hours")
        if run_hours is not None and (not isinstance(run_hours, list) or not run_hours or any(
                isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= 23 for h in run_hours)):
            raise ctx.error(p + ("run_hours",), f"expected a non-empty array of UTC hours 0-23, got {run_hours!r}")
        # which hours and variables the model has: `need.check`, with the model tables
        out[mid] = ModelConfig(id=mid, source=src,
                               run_hours=None if run_hours is None else tuple(sorted(set(run_hours))),
                               skip_variables=_str_list(ctx, mt, "skip_variables", p, ()))
    return out


def _products(ctx: _Ctx, doc: dict, base: Path, models: dict[str, ModelConfig],
              config_file: str) -> dict[str, ProductConfig]:
    path = ("products",)
    tbl = _table(ctx, doc, "products", path, required=True)
    if not tbl:
        raise ctx.error(path, "at least one product is required")
    points_cache: dict[Path, tuple[tuple[Point, ...], tuple[int, ...], str]] = {}
    out: dict[str, ProductConfig] = {}
    site_owners: dict[str, str] = {}
    for pid, pt in tbl.items():
        p = path + (pid,)
        if pid not in KNOWN_PRODUCTS:
            raise ctx.error(p, f"unknown product (known: {', '.join(KNOWN_PRODUCTS)})")
        if not isinstance(pt, dict):
            raise ctx.error(p, f"expected a table, got {_type_name(pt)}")
        _check_keys(ctx, pt, p, ("points", "models", "freqs", "horizon_hours", "max_lead_hours", "ensembles", "sites"))
        grid = grids.grid_for(pid)

        points_rel = _str(ctx, pt, "points", p)
        model_ids = _str_list(ctx, pt, "models", p)
        for m in model_ids:
            if m not in models:
                raise ctx.error(p + ("models",), f"model {m!r} is not defined in [models] (defined: {', '.join(models)})")
        ensembles = _str_list(ctx, pt, "ensembles", p) if "ensembles" in pt else ()
        for m in ensembles:
            if m not in models:
                raise ctx.error(p + ("ensembles",), f"model {m!r} is not defined in [models] (defined: {', '.join(models)})")
        allowed = PRODUCT_FREQS.get(pid, FREQS)
        freqs = _str_list(ctx, pt, "freqs", p, allowed)
        for f in freqs:
            if f not in FREQS:
                raise ctx.error(p + ("freqs",), f"unknown freq {f!r} (expected some of: {', '.join(FREQS)})")
            if f not in allowed:
                raise ctx.error(
                    p + ("freqs",),
                    f"product {pid} publishes hourly srf and daily mrf entries: freq {f!r} is not available "
                    f"(allowed: {', '.join(allowed)})",
                )
        horizon = _int(ctx, pt, "horizon_hours", p, lo=1)
        max_lead = _table(ctx, pt, "max_lead_hours", p + ("max_lead_hours",), required=False) or {}
        for m in max_lead:
            if m not in model_ids[:-1]:
                raise ctx.error(p + ("max_lead_hours", m), f"only a model of this product's blend other than "
                                f"its last one can be limited (limitable: {', '.join(model_ids[:-1]) or 'none'})")
        limits = tuple((m, _int(ctx, max_lead, m, p + ("max_lead_hours",), lo=1)) for m in max_lead)

        rel = Path(points_rel).expanduser()
        abs_file = Path(os.path.normpath(base / rel))
        shown = str(rel) if rel.is_absolute() else os.path.normpath(os.path.join(os.path.dirname(config_file), rel))
        if abs_file not in points_cache:
            if not abs_file.is_file():
                raise ctx.error(p + ("points",), f"points file not found: {abs_file}")
            pts, lines = _read_points(abs_file, shown)
            points_cache[abs_file] = (pts, lines, shown)
        pts, lines, shown = points_cache[abs_file]
        inside, bad_rows = _outside_coverage(grid, pid, pts, lines, shown, "point")
        # One point a cell: the API answers a cell's point, so a second point in it would never
        # be served and its hub heights would be lost.
        covered = np.flatnonzero(inside).tolist()  # a point outside may have no cell at all
        keys = grid.cell_keys(np.array([pts[k].lat for k in covered]), np.array([pts[k].lon for k in covered]))
        first_in: dict[str, int] = {}
        for k, key in zip(covered, keys.tolist(), strict=True):
            j = first_in.setdefault(key, k)
            if j != k:
                bad_rows.append(ConfigError(
                    shown, lines[k], "lat,lon",
                    f"point {pts[k].id!r} is in the same {pid} grid cell {key} as point {pts[j].id!r} "
                    f"(line {lines[j]}): a cell has one point; merge them (hub heights included)",
                ))
        if bad_rows:
            raise ConfigError.of_all(sorted(bad_rows, key=lambda e: e.line))
        sites_file, sites = _product_sites(ctx, pt, p, base, config_file, grid, pid, site_owners)
        out[pid] = ProductConfig(
            id=pid, points_file=abs_file, points=pts, models=model_ids, freqs=freqs, horizon_hours=horizon,
            max_lead_hours=limits, ensembles=tuple(ensembles), sites_file=sites_file, sites=sites,
        )
    return out


def _product_sites(ctx: _Ctx, pt: dict, p: tuple[str, ...], base: Path, config_file: str, grid: Any,
                   pid: str, owners: dict[str, str]) -> tuple[Path | None, tuple[Site, ...]]:
    """A product's ``sites`` list, read and placed inside its grid's coverage (as its points).
    A site id is one site of the whole configuration (``owners``: the product of each id so
    far): its power files are named by it (docs/config.md, "Sites CSV")."""
    if "sites" not in pt:
        return None, ()
    rel = Path(_str(ctx, pt, "sites", p)).expanduser()
    abs_file = Path(os.path.normpath(base / rel))
    shown = str(rel) if rel.is_absolute() else os.path.normpath(os.path.join(os.path.dirname(config_file), rel))
    if not abs_file.is_file():
        raise ctx.error(p + ("sites",), f"sites file not found: {abs_file}")
    sites, lines = _read_sites(abs_file, shown)
    _, outside = _outside_coverage(grid, pid, sites, lines, shown, "site")
    if outside:
        raise ConfigError.of_all(outside)
    for site, line in zip(sites, lines, strict=True):
        if site.id in owners:
            raise ConfigError(shown, line, "id", f"site id {site.id!r} is a site of product {owners[site.id]} "
                                                 "already: a site's power is published under its id, give each its own")
        owners[site.id] = pid
    return abs_file, sites


def _outside_coverage(grid: Any, pid: str, places: tuple[Point, ...] | tuple[Site, ...], lines: tuple[int, ...],
                      shown: str, what: str) -> tuple[np.ndarray, list[ConfigError]]:
    """Which points or sites of a list lie inside the product's coverage, and an error naming
    the row of every one outside it (a list with several bad rows reports them all)."""
    inside = grid.covers_many(np.array([q.lat for q in places]), np.array([q.lon for q in places]))
    desc = getattr(grid.coverage, "description", "") or grid.name
    return inside, [ConfigError(shown, lines[k], "lat,lon", f"{what} {places[k].id!r} ({places[k].lat:g}, "
                                f"{places[k].lon:g}) is outside the coverage of product {pid} ({desc})")
                    for k in np.flatnonzero(~inside).tolist()]


def _postprocess(ctx: _Ctx, doc: dict, base: Path) -> PostprocessConfig:
    path = ("postprocess",)
    tbl = _table(ctx, doc, "postprocess", path, required=False) or {}
    _check_keys(ctx, tbl, path, ("enabled", "observations", "weight"))
    enabled = tbl.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ctx.error(path + ("enabled",), f"expected true or false, got {enabled!r}")
    obs = None
    if "observations" in tbl:
        obs = Path(os.path.normpath(base / Path(_str(ctx, tbl, "observations", path)).expanduser()))
    elif enabled:
        raise ctx.error(path + ("enabled",), "the correction learns from observations: set observations "
                                             "(a directory of tidy CSV or ISD-Lite files)")
    weight = tbl.get("weight", PostprocessConfig.weight)
    if not (_number(weight) and 0 < weight <= 1):
        raise ctx.error(path + ("weight",), f"expected a number in (0, 1], got {weight!r}")
    return PostprocessConfig(enabled=enabled, observations=obs, weight=float(weight))


# --------------------------------------------------------------------------------------------
# Points CSV


def _csv_float(file: str, line: int, col: str, text: str) -> float:
    return turbines_lib.finite(file, line, col, text, ConfigError)


def csv_rows(reader) -> Iterator[tuple[int, list[str]]]:
    """(line number, stripped cells) of each row of a CSV ``reader`` that is neither blank nor
    a ``#`` comment: the points lists and the observation files share this reading."""
    for row in reader:
        cells = [c.strip() for c in row]
        if any(cells) and not cells[0].startswith("#"):
            yield reader.line_num, cells


def _csv_records(path: Path, shown: str, columns: tuple[str, ...], optional: tuple[str, ...],
                 what: str, bad_rows: list[ConfigError]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, {column: cell}) of each row of a ``what`` CSV (the points lists, the sites lists)
    whose header has every one of ``columns`` and any of ``optional``; every problem a
    ConfigError naming the file, the line and the column. A row of the wrong width goes to
    ``bad_rows``, where the caller adds its own rows' errors: once the file is read they are
    raised together (`ConfigError.of_all`), every bad row reported."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(shown, 1, "file", f"cannot read {what} file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(shown, line, "file", "not UTF-8 text") from None

    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    header: list[str] | None = None
    header_line = 1
    rows = 0
    try:
        for line, cells in csv_rows(reader):
            if header is None:
                header, header_line = cells, line
                seen: set[str] = set()
                for c in cells:
                    if c not in columns + optional:
                        raise ConfigError(shown, line, c or "(empty)",
                                          f"unknown column (expected header {','.join(columns)}, "
                                          f"optionally {','.join(optional)})")
                    if c in seen:
                        raise ConfigError(shown, line, c, "column appears twice")
                    seen.add(c)
                for c in columns:
                    if c not in seen:
                        raise ConfigError(shown, line, c, f"missing column (expected header {','.join(columns)})")
                continue
            if len(cells) != len(header):
                bad_rows.append(ConfigError(shown, line, "row",
                                            f"expected {len(header)} fields ({','.join(header)}), got {len(cells)}"))
                continue
            rows += 1
            yield line, dict(zip(header, cells, strict=True))
    except csv.Error as exc:
        bad_rows.append(ConfigError(shown, reader.line_num or 1, "row", f"malformed CSV: {exc}"))
    if bad_rows:
        raise ConfigError.of_all(bad_rows)
    if header is None:
        raise ConfigError(shown, 1, "id", f"empty {what} file (expected header {','.join(columns)})")
    if not rows:
        raise ConfigError(shown, header_line, "id", f"no {what} in file")


def _place(shown: str, line: int, rec: dict[str, str], first_seen: dict[str, int]) -> tuple[str, str, float, float]:
    """The id, name, lat and lon of a points or sites row, checked (ids unique in the file)."""
    pid = rec["id"]
    if not pid:
        raise ConfigError(shown, line, "id", "empty id")
    if not POINT_ID_RE.fullmatch(pid):
        raise ConfigError(shown, line, "id",
                          f"invalid id {pid!r} (lowercase letters, digits, '-' and '_', starting with a letter or digit, at most 64)")
    if pid in first_seen:
        raise ConfigError(shown, line, "id", f"duplicate id {pid!r} (first on line {first_seen[pid]})")
    first_seen[pid] = line
    name = rec["name"]
    if not name:
        raise ConfigError(shown, line, "name", "empty name")
    lat = _csv_float(shown, line, "lat", rec["lat"])
    if not -90.0 <= lat <= 90.0:
        raise ConfigError(shown, line, "lat", f"latitude {lat:g} outside [-90, 90]")
    lon = _csv_float(shown, line, "lon", rec["lon"])
    if not -180.0 <= lon <= 180.0:
        raise ConfigError(shown, line, "lon", f"longitude {lon:g} outside [-180, 180]")
    return pid, name, lat, lon


def _point(shown: str, line: int, rec: dict[str, str], first_seen: dict[str, int]) -> Point:
    """The point of one row of a points CSV (``rec``: column -> cell), or the ConfigError of
    its first bad column; ``first_seen``: the line of each id so far, this row's added."""
    pid, name, lat, lon = _place(shown, line, rec, first_seen)
    elevation = None
    if rec["elevation"]:
        elevation = _csv_float(shown, line, "elevation", rec["elevation"])
        lo, hi = ELEVATION_RANGE_M
        if not lo <= elevation <= hi:
            raise ConfigError(shown, line, "elevation", f"elevation {elevation:g} m outside [{lo:g}, {hi:g}] m")
    hubs: list[float] = []
    if rec["hub_heights"]:
        lo, hi = HUB_HEIGHT_RANGE_M
        for part in rec["hub_heights"].split(";"):
            part = part.strip()
            if not part:
                raise ConfigError(shown, line, "hub_heights", "empty height (heights are ';'-separated metres, e.g. 100;150)")
            h = _csv_float(shown, line, "hub_heights", part)
            if not lo <= h <= hi:
                raise ConfigError(shown, line, "hub_heights", f"hub height {h:g} m outside [{lo:g}, {hi:g}] m")
            if h in hubs:
                raise ConfigError(shown, line, "hub_heights", f"hub height {h:g} m listed twice")
            hubs.append(h)
    station = rec.get("station") or None
    if station is not None and not STATION_RE.fullmatch(station):
        raise ConfigError(shown, line, "station", f"invalid station id {station!r} (letters, digits, "
                          "'.', '_' and '-', e.g. an ISD USAF-WBAN id such as 071570-99999)")
    return Point(id=pid, name=name, lat=lat, lon=lon, elevation=elevation,
                 hub_heights=tuple(sorted(hubs)), station=station)


def _read_points(path: Path, shown: str) -> tuple[tuple[Point, ...], tuple[int, ...]]:
    points: list[Point] = []
    lines: list[int] = []
    first_seen: dict[str, int] = {}
    bad_rows: list[ConfigError] = []
    for line, rec in _csv_records(path, shown, POINTS_COLUMNS, OPTIONAL_POINTS_COLUMNS, "points", bad_rows):
        try:
            point = _point(shown, line, rec, first_seen)
        except ConfigError as exc:  # every bad row is reported, each with its first bad column
            bad_rows.append(exc)
            continue
        points.append(point)
        lines.append(line)
    return tuple(points), tuple(lines)


def load_points(path: str | os.PathLike) -> tuple[Point, ...]:
    """Read and validate a points CSV on its own (no coverage check)."""
    return _read_points(Path(path), str(path))[0]


# --------------------------------------------------------------------------------------------
# Sites CSV: the wind farms and solar plants whose power is forecast (docs/config.md, "Sites")

SITES_COLUMNS: tuple[str, ...] = ("id", "name", "lat", "lon", "kind")
WIND_SITE_COLUMNS: tuple[str, ...] = ("hub_height", "turbine", "turbines", "capacity_mw", "farm_efficiency",
                                      "restart_wind")
PV_SITE_COLUMNS: tuple[str, ...] = ("dc_kwp", "ac_kw", "tilt", "azimuth", "losses", "mounting", "temp_coeff")
SITE_KINDS: tuple[str, ...] = ("wind", "pv")
PV_MOUNTINGS: tuple[str, ...] = ("open_rack_glass_polymer", "open_rack_glass_glass", "close_mount_glass_glass",
                                 "insulated_back_glass_polymer")
"""The Sandia (SAPM) cell-temperature parameter sets a plant's ``mounting`` names, as pvlib
names them (``pvlib.temperature.TEMPERATURE_MODEL_PARAMETERS["sapm"]``; King et al. 2004)."""
DEFAULT_FARM_EFFICIENCY = 0.85
"""Farm power / the sum of its turbines' curve power where a wind site gives none: a total loss
of 15 % for wakes, availability, electrical and other losses, a round figure of the order that
preconstruction energy estimates assume (the loss categories of Clifton, Smith and Fields 2016,
"Wind Plant Preconstruction Energy Estimates: Current Practice and Opportunities",
NREL/TP-5000-64735). A farm's own figure, from its energy assessment, belongs in its row."""
DEFAULT_PV_LOSSES_PCT = 14.0
"""DC system losses where a PV site gives none: PVWatts' default, 14.08 % rounded (soiling 2,
shading 3, mismatch 2, wiring 2, connections 0.5, light-induced degradation 1.5, nameplate 1,
availability 3 %; Dobos 2014, NREL/TP-6A20-62641; ``pvlib.pvsystem.pvwatts_losses()``)."""
DEFAULT_PV_MOUNTING = "open_rack_glass_polymer"  # a ground-mounted plant of glass/backsheet modules
DEFAULT_TEMP_COEFF_PCT = -0.35
"""%/degC of DC power where a PV site gives none: PVWatts v5's "premium" (monocrystalline)
module type (Dobos 2014), inside the -0.2 to -0.5 %/degC pvlib documents as typical."""


@dataclass(frozen=True)
class WindSite:
    """A wind farm: ``turbines`` (possibly fractional, from a capacity) of ``curve`` at ``hub_height_m``."""

    id: str
    name: str
    lat: float
    lon: float
    hub_height_m: float
    curve: turbines_lib.PowerCurve
    turbines: float
    efficiency: float = DEFAULT_FARM_EFFICIENCY
    restart_m_s: float | None = None  # cut-out hysteresis: the wind speed the turbines restart below

    @property
    def capacity_kw(self) -> float:
        return self.turbines * self.curve.rated_power_kw


@dataclass(frozen=True)
class PVSite:
    """A solar plant; azimuth in pvlib's convention (degrees clockwise from north, 180 = south)."""

    id: str
    name: str
    lat: float
    lon: float
    dc_kwp: float
    ac_kw: float
    tilt: float
    azimuth: float
    losses_pct: float = DEFAULT_PV_LOSSES_PCT
    mounting: str = DEFAULT_PV_MOUNTING
    temp_coeff_pct: float = DEFAULT_TEMP_COEFF_PCT

    @property
    def capacity_kw(self) -> float:
        return self.ac_kw


Site = WindSite | PVSite


def _read_sites(path: Path, shown: str) -> tuple[tuple[Site, ...], tuple[int, ...]]:
    sites: list[Site] = []
    lines: list[int] = []
    first_seen: dict[str, int] = {}
    curves: dict[str, turbines_lib.PowerCurve] = {}
    for line, rec in _csv_records(path, shown, SITES_COLUMNS, WIND_SITE_COLUMNS + PV_SITE_COLUMNS, "sites", []):
        sid, name, lat, lon = _place(shown, line, rec, first_seen)
        kind = rec["kind"]
        if kind not in SITE_KINDS:
            raise ConfigError(shown, line, "kind", f"unknown kind {kind!r} (expected one of: {', '.join(SITE_KINDS)})")
        others = PV_SITE_COLUMNS if kind == "wind" else WIND_SITE_COLUMNS
        for c in others:
            if rec.get(c):
                raise ConfigError(shown, line, c, f"column {c} is for {'pv' if kind == 'wind' else 'wind'} sites; "
                                                  f"leave it empty on a {kind} site")
        cell = _SiteCells(shown, line, rec)
        site: Site
        if kind == "wind":
            lo, hi = HUB_HEIGHT_RANGE_M
            curve = _site_curve(path, shown, line, cell.text("turbine"), curves)
            count, capacity = cell.number("turbines", None, 1, 10_000), cell.number("capacity_mw", None, 0, 100_000, open_lo=True)
            if (count is None) == (capacity is None):
                raise ConfigError(shown, line, "turbines", "give either turbines (a count) or capacity_mw, not "
                                                           f"{'both' if count is not None else 'neither'}")
            if count is not None and count != int(count):
                raise ConfigError(shown, line, "turbines", f"a count of turbines is a whole number, got {count:g}")
            restart = cell.number("restart_wind", None, 0, curve.cut_out_m_s, open_lo=True)
            if restart is not None and restart >= curve.cut_out_m_s:
                raise ConfigError(shown, line, "restart_wind", f"the restart speed must be below the turbine's cut-out "
                                                               f"({curve.cut_out_m_s:g} m/s), got {restart:g}")
            site = WindSite(
                id=sid, name=name, lat=lat, lon=lon, hub_height_m=_required(cell.number("hub_height", None, lo, hi),
                                                                             shown, line, "hub_height"),
                curve=curve,
                turbines=count if count is not None else _required(capacity, shown, line, "capacity_mw") * 1000.0
                / curve.rated_power_kw,
                efficiency=_required(cell.number("farm_efficiency", DEFAULT_FARM_EFFICIENCY, 0, 1, open_lo=True), shown, line,
                                     "farm_efficiency"),
                restart_m_s=restart,
            )
        else:
            dc = _required(cell.number("dc_kwp", None, 0, 10_000_000, open_lo=True), shown, line, "dc_kwp")
            ac = _required(cell.number("ac_kw", None, 0, 10_000_000, open_lo=True), shown, line, "ac_kw")
            tilt = _required(cell.number("tilt", None, 0, 90), shown, line, "tilt")
            mounting = rec.get("mounting") or DEFAULT_PV_MOUNTING
            if mounting not in PV_MOUNTINGS:
                raise ConfigError(shown, line, "mounting", f"unknown mounting {mounting!r} (expected one of: "
                                                           f"{', '.join(PV_MOUNTINGS)})")
            site = PVSite(
                id=sid, name=name, lat=lat, lon=lon, dc_kwp=dc, ac_kw=ac, tilt=tilt,
                azimuth=_pv_azimuth(shown, line, rec.get("azimuth", ""), lat, tilt),
                losses_pct=_required(cell.number("losses", DEFAULT_PV_LOSSES_PCT, 0, 99), shown, line, "losses"),
                mounting=mounting,
                temp_coeff_pct=_required(cell.number("temp_coeff", DEFAULT_TEMP_COEFF_PCT, -1, 0), shown, line,
                                         "temp_coeff"),
            )
        sites.append(site)
        lines.append(line)
    return tuple(sites), tuple(lines)


class _SiteCells:
    """A sites row's cells read as numbers in their ranges, each error at its column."""

    def __init__(self, shown: str, line: int, rec: dict[str, str]) -> None:
        self.shown, self.line, self.rec = shown, line, rec

    def text(self, column: str) -> str:
        v = self.rec.get(column, "")
        if not v:
            raise ConfigError(self.shown, self.line, column, f"required for this kind of site: set {column}")
        return v

    def number(self, column: str, default: float | None, lo: float, hi: float, *,
               open_lo: bool = False) -> float | None:
        """The cell's number in [lo, hi] (``open_lo``: in (lo, hi]), or ``default`` where empty or absent."""
        text = self.rec.get(column, "")
        if not text:
            return default
        v = _csv_float(self.shown, self.line, column, text)
        if not ((lo < v if open_lo else lo <= v) and v <= hi):
            raise ConfigError(self.shown, self.line, column, f"{v:g} outside {'(' if open_lo else '['}{lo:g}, {hi:g}]")
        return v


def _required(v: float | None, shown: str, line: int, column: str) -> float:
    if v is None:
        raise ConfigError(shown, line, column, f"required for this kind of site: set {column}")
    return v


def _pv_azimuth(shown: str, line: int, text: str, lat: float, tilt: float) -> float:
    """pvlib's azimuth (degrees clockwise from north: 90 = east, 180 = south, 270 = west). Values
    of other conventions are refused rather than guessed: negative ones (PVGIS and others count
    from south, east negative), and a tilted panel facing exactly the nearer pole (0 north of the
    equator, 180 south of it), which is what a south = 0 or north = 0 file means by facing the sun."""
    convention = "pvlib's convention: degrees clockwise from north, 90 = east, 180 = south, 270 = west"
    if not text:
        raise ConfigError(shown, line, "azimuth", f"required for a pv site ({convention})")
    v = _csv_float(shown, line, "azimuth", text)
    if v < 0:
        raise ConfigError(shown, line, "azimuth", f"negative azimuth {v:g}: {convention}; a value counted from "
                                                  "south (east negative, as PVGIS) is a different convention")
    if v >= 360:
        raise ConfigError(shown, line, "azimuth", f"azimuth {v:g} outside [0, 360) ({convention})")
    pole = 0.0 if lat >= 0 else 180.0
    if tilt > 0 and v == pole:
        raise ConfigError(shown, line, "azimuth",
                          f"azimuth {v:g} faces the {'north' if pole == 0 else 'south'} pole, away from the sun: "
                          f"{convention}; for a panel facing the equator write {180.0 - pole:g}")
    return v


def _site_curve(sites_file: Path, shown: str, line: int, turbine: str,
                cache: dict[str, turbines_lib.PowerCurve]) -> turbines_lib.PowerCurve:
    """A library curve by name, or a power-curve CSV by a path relative to the sites file."""
    if turbine not in cache:
        if "/" in turbine or turbine.endswith(".csv"):
            rel = Path(turbine).expanduser()
            file = rel if rel.is_absolute() else Path(os.path.normpath(sites_file.parent / rel))
            try:
                cache[turbine] = turbines_lib.read_curve(
                    file, shown=str(rel) if rel.is_absolute() else os.path.normpath(os.path.join(os.path.dirname(shown), rel)))
            except turbines_lib.CurveFileError as exc:
                raise ConfigError(exc.file, exc.line, exc.column, exc.reason) from None
        elif turbine in turbines_lib.library_names():
            cache[turbine] = turbines_lib.library_curve(turbine)
        else:
            raise ConfigError(shown, line, "turbine", f"no turbine {turbine!r} in the library (known: "
                                                      f"{', '.join(turbines_lib.library_names())}; or a path to a "
                                                      "power-curve CSV ending in .csv)")
    return cache[turbine]


def load_sites(path: str | os.PathLike) -> tuple[Site, ...]:
    """Read and validate a sites CSV on its own (no coverage check)."""
    return _read_sites(Path(path), str(path))[0]


# --------------------------------------------------------------------------------------------
# Entry point

_TOML_LINE_RE = re.compile(r"at line (\d+)")


def error_at(cfg: Config, path: tuple[str, ...], reason: str) -> ConfigError:
    """An error in a loaded configuration, naming its file, the key at ``path`` and its line:
    for what the layers above this one check (which models exist, and which are ensembles)."""
    return _Ctx(str(cfg.path), cfg.path.read_text("utf-8")).error(path, reason)


def load_config(path: str | os.PathLike) -> Config:
    """Load, validate and type the configuration at ``path``; raises ConfigError."""
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(file, 1, "file", f"cannot read configuration: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(file, raw[: exc.start].count(b"\n") + 1, "file", "not UTF-8 text") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_LINE_RE.search(str(exc))
        raise ConfigError(file, int(m.group(1)) if m else 1, "toml", f"invalid TOML: {exc}") from None

    ctx = _Ctx(file, text)
    for k in doc:
        if k not in _TOP_LEVEL:
            raise ctx.error((k,), f"unknown table (expected: {', '.join(_TOP_LEVEL)})")

    abs_path = Path(os.path.abspath(path))
    base = abs_path.parent
    output = _output(ctx, doc, base)
    schedule = _schedule(ctx, doc)
    dask = _dask(ctx, doc)
    sources = _sources(ctx, doc)
    models = _models(ctx, doc, sources)
    # The coverage rasters are cached in the configured cache, or the user's (XDG) cache: never
    # in the output root, which `pointcast check` must leave as it is.
    grids.set_cache_dir(output.cache if output.cache is not None else grids.user_cache_dir(), if_unset=True)
    products = _products(ctx, doc, base, models, file)
    server = _server(ctx, doc)
    postprocess = _postprocess(ctx, doc, base)
    return Config(
        path=abs_path, output=output, schedule=schedule, dask=dask,
        sources=sources, models=models, products=products, server=server, postprocess=postprocess,
    )
