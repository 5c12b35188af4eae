"""The served run: one published run directory, what the server reads from it (each product's
``index.json``, its point files and what is made of them) and its answers, cached per run and
byte-bounded. File paths are made of names from fixed tables (products, freqs) and of the run's
own index (point ids, heights), never of request text.

The answers are kept by path and raw query text: a query text seen before in the run skips
parsing, coverage, cell look-up and splicing, and only the request's own headers (gzip,
conditions, max-age) and a fresh requestId are applied to the kept answer (docs/api.md,
"Running the server")."""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import logging
import math
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import viewer
from ..config import utc_time
from ..contract import POWER_PRODUCT, QUANTILE_DIR, height_name
from ..publish import VERIFICATION_DIR
from .compress import Deflated, Piece
from .grammar import HubHeight
from .quantiles import QuantileFile
from .splice import WX_LAYOUT, PointFile, WindFile, check_wxdata
from .wind import WindLadder, wind_at

if TYPE_CHECKING:
    from pointcast.products.wx import Members

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 256 * 1024 * 1024  # bytes of point files (and what is made of them) kept per run
DEFAULT_ANSWER_BYTES = 64 * 1024 * 1024  # bytes of answers kept per run (``Answer.size``)
MAX_BODY_FILES = 256  # kept answers' bodies held as in-memory files per run (``Run.body_files``)

# A point id is used as a file name: only plain names are accepted from index.json.
_POINT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
PRODUCT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
# The folders of a run's JSON tree that are not products: the verification's and the viewer's.
NOT_PRODUCTS = frozenset((VERIFICATION_DIR, viewer.ASSETS))


def parse_time(value: Any) -> datetime | None:
    """A time of the run tree in UTC (``config.utc_time``); None when it is missing or no time."""
    if not isinstance(value, str):
        return None
    try:
        return utc_time(value)
    except ValueError:
        return None


def read_run_file(path: Path, gzip_ok: bool = False) -> tuple[bytes, bool]:
    """A run's JSON file ``path`` in whichever form the run was written in (``[output] json``,
    docs/config.md: the file, its ``.gz`` twin, or both): ``(stored gzip bytes, True)`` when
    ``gzip_ok`` and the ``.gz`` is there, else ``(JSON bytes, False)``, decompressed from the
    ``.gz`` when the file is not there. FileNotFoundError when neither is."""
    gz = path.with_name(path.name + ".gz")
    if gzip_ok:
        try:
            return gz.read_bytes(), True
        except FileNotFoundError:
            pass
    try:
        return path.read_bytes(), False
    except FileNotFoundError:
        return gzip.decompress(gz.read_bytes()), False


@dataclass
class ProductIndex:
    """A product's ``index.json`` as the server needs it."""

    product: str
    meta: dict[str, Any]
    cells: dict[str, str]  # grid cell -> point id
    updated: datetime | None
    next_update: datetime | None
    heights: dict[str, tuple[float, ...]] = field(default_factory=dict)  # point id -> sorted heights (eu-wind)
    hubs: dict[str, tuple[float, ...]] = field(default_factory=dict)  # point id -> its static heights (eu-wind)
    time_zones: dict[str, str] = field(default_factory=dict)  # point id -> its own IANA zone (global)

    @functools.cached_property
    def point_ids(self) -> frozenset[str]:
        return frozenset(self.cells.values())

    @classmethod
    def load(cls, product: str, path: Path) -> ProductIndex | None:
        try:
            meta = json.loads(read_run_file(path)[0])
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.error("unreadable index %s: %s", path, exc)
            return None
        if not isinstance(meta, dict) or not isinstance(meta.get("points"), list):
            log.error("index %s has no points list", path)
            return None
        cells: dict[str, str] = {}
        heights: dict[str, tuple[float, ...]] = {}
        hubs: dict[str, tuple[float, ...]] = {}
        time_zones: dict[str, str] = {}
        for point in meta["points"]:
            pid = point.get("id") if isinstance(point, dict) else None
            cell = point.get("cell") if isinstance(point, dict) else None
            if not isinstance(pid, str) or not _POINT_ID.match(pid) or not isinstance(cell, str):
                log.error("index %s: skipping point %r (id must be a plain file name, cell a string)", path, point)
                continue
            if cell in cells:
                log.warning("index %s: points %s and %s share cell %s; serving %s", path, cells[cell], pid, cell, cells[cell])
                continue
            cells[cell] = pid
            if isinstance(point.get("time_zone"), str):
                time_zones[pid] = point["time_zone"]
            if "heights" in point:
                point_heights = _heights(point["heights"])
                if point_heights is None:
                    log.error("index %s: point %s has invalid heights %r", path, pid, point["heights"])
                else:
                    heights[pid] = point_heights
                # The configured hub heights, which have static files: among the precomputed ones.
                point_hubs = _heights(point.get("hub_heights")) if point.get("hub_heights") not in (None, []) else ()
                if point_hubs is None or not set(point_hubs) <= set(heights.get(pid, ())):
                    log.error("index %s: point %s has invalid hub_heights %r", path, pid, point.get("hub_heights"))
                else:
                    hubs[pid] = point_hubs
        return cls(
            product, meta, cells, parse_time(meta.get("updated_time")), parse_time(meta.get("next_update")), heights,
            hubs, time_zones,
        )


def _heights(value: Any) -> tuple[float, ...] | None:
    """A point's precomputed heights (metres) from index.json: finite, positive, sorted."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(h, (int, float)) and not isinstance(h, bool) for h in value):
        return None
    heights = sorted({float(h) for h in value})
    if not all(math.isfinite(h) and 0.0 < h < 1e5 for h in heights):
        return None
    return tuple(heights)



class ByteBoundLru:
    """Values by key; the least recently used go first once their sizes add up to more than
    ``limit`` bytes, or once there are more than ``max_entries`` (a value larger than ``limit``
    is not kept)."""

    def __init__(self, limit: int, max_entries: int | None = None):
        self.limit = limit
        self.max_entries = max_entries
        self.size = 0
        self.entries: OrderedDict[tuple[str | bytes, ...], tuple[Any, int]] = OrderedDict()

    def get(self, key: tuple[str | bytes, ...]) -> Any:
        entry = self.entries.get(key)
        if entry is None:
            return None
        self.entries.move_to_end(key)
        return entry[0]

    def put(self, key: tuple[str | bytes, ...], value: Any, size: int) -> None:
        if size <= self.limit:
            self.entries[key] = (value, size)
            self.size += size
            entries, most = self.entries, self.max_entries
            while self.size > self.limit or (most is not None and len(entries) > most):
                _, (_, old_size) = entries.popitem(last=False)
                self.size -= old_size


class Run:
    """Everything cached for one published run: its files and what is made of them, and its
    answers by operation and query text, each within a byte bound of its own (a flood of new
    query texts evicts answers, never the files the next answer is made from)."""

    def __init__(self, run_id: str, path: Path, max_cache_bytes: int, max_answer_bytes: int):
        self.run_id = run_id
        self.path = path
        self._products: dict[str, ProductIndex | None] = {}
        # (kind, product, freq, point id[, height]) -> PointFile | WindFile | WindLadder | ...
        self.files = ByteBoundLru(max_cache_bytes)
        self.answers = ByteBoundLru(max_answer_bytes)  # (path, raw query) -> Answer
        # (path, raw query, gzip) -> the body of an answer asked for again, as an in-memory file
        # for a server offering ASGI's zero-copy send (``responses.body_file``); each holds a
        # file descriptor, hence the bound on their number
        self.body_files = ByteBoundLru(max_answer_bytes, MAX_BODY_FILES)
        # the catalog's products (split where their ages go), digest, Last-Modified and next
        # update, rendered once per run (operations.handle_catalog)
        self.catalog: tuple[list[tuple[str, Piece]], list[Piece], bytes, datetime | None, datetime | None] | None = None

    @functools.cached_property
    def manifest(self) -> dict[str, Any]:
        """The run's ``manifest.json`` (docs/contracts.md); ``{}`` when unreadable (logged)."""
        try:
            manifest = json.loads((self.path / "manifest.json").read_bytes())
        except (OSError, ValueError) as exc:
            log.error("run %s: unreadable manifest (%s)", self.run_id, exc)
            return {}
        if not isinstance(manifest, dict):
            log.error("run %s: its manifest is not an object", self.run_id)
            return {}
        return manifest

    @functools.cached_property
    def published(self) -> datetime | None:
        """The run's publication time (its manifest's ``published_at``): every answer's
        ``Last-Modified``. The files' ``updated_time`` is earlier: they are generated before
        the run is validated and published (docs/api.md)."""
        published = parse_time(self.manifest.get("published_at"))
        if published is None:
            log.error("run %s: no publication time in its manifest", self.run_id)
        return published

    def product(self, product: str) -> ProductIndex | None:
        try:
            return self._products[product]
        except KeyError:
            index = ProductIndex.load(product, self.path / "json" / product / "index.json")
            self._products[product] = index
            return index

    def products(self) -> list[ProductIndex]:
        try:
            names = sorted(os.listdir(self.path / "json"))
        except OSError:
            return []
        found = (self.product(name) for name in names if PRODUCT_ID.match(name) and name not in NOT_PRODUCTS)
        return [p for p in found if p is not None]

    def _parsed(self, key: tuple, product: str, subdir: str, point_id: str, kind: str,
                parse: Callable[[bytes], tuple[Any, int]],
                errors: tuple[type[Exception], ...] = (ValueError,)) -> Any:
        """The file ``json/<product>/[<subdir>/]<point id>.json`` parsed once per run
        (``parse``: its value and size in the run's cache, keyed ``key``); None when the run
        has no such file, or it is not ``kind`` (logged). ``product`` and ``subdir`` come from
        the operations' tables, the point id from index.json. ``errors``: what ``parse``
        raises for a file that is not ``kind`` (ValueError includes invalid JSON and UTF-8)."""
        cached = self.files.get(key)
        if cached is not None:
            return cached
        what = "/".join(part for part in (product, subdir, point_id) if part)
        data = self._read(self.path / "json" / product / subdir, point_id, what)
        if data is None:
            return None
        try:
            value, size = parse(data)
        except errors as exc:
            log.error("run %s: %s is not %s: %s", self.run_id, what, kind, exc)
            return None
        self.files.put(key, value, size)
        return value

    def _read(self, directory: Path, stem: str, what: str) -> bytes | None:
        """``<stem>.json`` of a run directory (``read_run_file``); None when absent."""
        try:
            return read_run_file(directory / (stem + ".json"))[0]
        except FileNotFoundError:
            log.error("run %s: no file for %s", self.run_id, what)
            return None

    def point_file(self, product: str, freq: str, point_id: str) -> PointFile | None:
        key = ("point", product, freq, point_id)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        # product and freq come from the operations' tables, point_id from index.json.
        data = self._read(self.path / "json" / product / freq, point_id, f"{product}/{freq}/{point_id}")
        if data is None:
            return None
        point = PointFile.from_bytes(data, key=key)
        self.files.put(key, point, len(point.tail))
        return point

    def wx_file(self, product: str, point_id: str) -> PointFile | None:
        """A global or Japan point file (``json/<product>/<point id>.json``: one wxdata
        element; a global one in the point's own time zone)."""
        key = ("wx", product, point_id)

        def parse(data: bytes) -> tuple[PointFile, int]:
            check_wxdata(json.loads(data))  # once per file and run, never per request
            point = PointFile.from_bytes(data, WX_LAYOUT, key)
            return point, len(point.tail)

        return self._parsed(key, product, "", point_id, "a wxdata element", parse)

    def wx_in_zone(self, product: str, point_id: str, zone: str) -> PointFile | None:
        """A global point's wxdata element in another time zone, rendered from the point's
        precomputed hourly file (``json/<product>/hourly/<point id>.json``) by the function the
        build renders the point's own zone with (products/global_wx.py); once per run."""
        index = self.product(product)
        if index is not None and index.time_zones.get(point_id) == zone:
            return self.wx_file(product, point_id)
        key = ("zone", product, point_id, zone)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        from zoneinfo import ZoneInfo

        from pointcast.products.global_wx import render_zone

        hourly = self.wx_hourly(product, point_id)
        if hourly is None:
            return None
        start, values, members = hourly
        try:
            element = render_zone([(0.0, 0.0)], start, values, ZoneInfo(zone), members)[0]
            point = PointFile.from_bytes(element, WX_LAYOUT, key)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("run %s: %s/%s cannot be rendered in %s: %r", self.run_id, product, point_id, zone, exc)
            return None
        self.files.put(key, point, len(point.tail))
        return point

    def wx_hourly(self, product: str, point_id: str) -> tuple[np.datetime64, dict[str, np.ndarray], Members | None] | None:
        """A global point's hourly file, parsed once per run (every zone renders from it)."""
        from pointcast.products.global_wx import read_hourly

        def parse(data: bytes) -> tuple[tuple[np.datetime64, dict[str, np.ndarray], Members | None], int]:
            hourly = read_hourly(data)
            members = hourly[2]
            return hourly, sum(a.nbytes for a in hourly[1].values()) + (0 if members is None else members.amounts.nbytes)

        return self._parsed(("hourly", product, point_id), product, "hourly", point_id, "an hourly file", parse,
                            (ValueError, KeyError, TypeError))

    def wind_file(self, product: str, freq: str, point_id: str, metres: float) -> WindFile | None:
        """A hub height's static file (``<freq>/<point id>/<height>m.json``), ready to splice."""
        name = height_name(metres)
        key = ("wind", product, freq, point_id, name)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        # product and freq from the operations' tables, point id and height from index.json.
        what = f"{product}/{freq}/{point_id}/{name}"
        data = self._read(self.path / "json" / product / freq / point_id, name, what)
        if data is None:
            return None
        try:
            wind = WindFile.from_bytes(data, key)
        except ValueError as exc:
            log.error("run %s: %s is not a windpack file: %s", self.run_id, what, exc)
            return None
        self.files.put(key, wind, wind.size)
        return wind

    def wind_ladder(self, product: str, freq: str, point_id: str) -> WindLadder | None:
        """A point's ladder object (``<freq>/<point id>.json``), parsed once per run."""
        def parse(data: bytes) -> tuple[WindLadder, int]:
            ladder = WindLadder.from_bytes(data, hashlib.blake2b(data, digest_size=16).digest())
            return ladder, ladder.size

        return self._parsed(("ladder", product, freq, point_id), product, freq, point_id,
                            "a windpack ladder object", parse)

    def wind_answer(self, product: str, freq: str, point_id: str, height: HubHeight, z1: float,
                    z2: float | None = None) -> tuple[Piece, bytes] | None:
        """The 2.2 object at ``height`` without its coordinates (``wind_at``: the ladder's height
        z1, or between z1 < z2), and a digest of what it is made from; rendered once per run
        and height text. None when the ladder object is missing; ValueError when it lacks a
        height the index promised."""
        key = ("at", product, freq, point_id, height.text)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        ladder = self.wind_ladder(product, freq, point_id)
        if ladder is None:
            return None
        tail = Piece(wind_at(ladder, height, z1, z2), key)
        digest = hashlib.blake2b(b"\0".join([ladder.digest, repr(height.metres).encode()]), digest_size=16).digest()
        self.files.put(key, (tail, digest), len(tail))
        return tail, digest

    def power_file(self, freq: str, site: str) -> bytes | None:
        """A site's power file (``json/power/<freq>/<site>.json``) as published, kept once per
        run; None when the run has none at that freq. ``freq`` from the contract's freqs, the
        site from the power index."""
        key = ("power", freq, site)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        data = self._read(self.path / "json" / POWER_PRODUCT / freq, site, f"{POWER_PRODUCT}/{freq}/{site}")
        if data is not None:
            self.files.put(key, data, len(data))
        return data

    def quantile_file(self, product: str, point_id: str) -> QuantileFile | None:
        """A point's quantile file (``json/<product>/quantiles/<point id>.json``), parsed once
        per run; None when the run has none (its product has no ensembles) or it is no
        quantile file (logged)."""
        key = ("quantiles", product, point_id)

        def parse(data: bytes) -> tuple[QuantileFile, int]:
            quantiles = QuantileFile.from_bytes(data, key)
            return quantiles, quantiles.size

        return self._parsed(key, product, QUANTILE_DIR, point_id, "a quantile file", parse)

    def quantiles_at(self, product: str, point_id: str, height: HubHeight) -> tuple[Piece, bytes] | None:
        """A point's quantiles with the wind speed at ``height`` (`QuantileFile.at_height`),
        rendered once per run and height text; None when there is no file or no heights
        around ``height`` in it."""
        key = ("quantiles-at", product, point_id, height.text)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        quantiles = self.quantile_file(product, point_id)
        answer = None if quantiles is None else quantiles.at_height(height, key)
        if answer is not None:
            self.files.put(key, answer, len(answer[0]))
        return answer

    def deflated(self, piece: Piece) -> Deflated:
        """A piece's deflate form, made at its first gzip answer and cached like the files."""
        key = ("gzip", *piece.key)
        deflated = self.files.get(key)
        if deflated is None:
            deflated = Deflated(piece)
            self.files.put(key, deflated, deflated.size)
        return deflated

    @property
    def cached_files(self) -> int:
        return len(self.files.entries)
