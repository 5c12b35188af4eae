"""The thin server: hands out the precomputed JSON of the current published run.

A plain ASGI callable (no framework) run under uvicorn with uvloop and httptools. Every
request resolves ``<root>/current`` exactly once (``os.readlink``) and reads everything it
needs from that one run directory, so a response never mixes two runs, even while a new
run is being published. What a run holds is cached in memory per run id: each product's
``index.json`` (with a ``cell -> point id`` map) and the bytes of the point files,
loaded on first use and LRU-bounded. When ``current`` moves on, the old run's caches are
dropped.

No file path is ever built from request text: the product and the variant (freq) come
from fixed tables in this module, the point id from the run's ``index.json``.

The point files start with ``{"latitude": <lat>, "longitude": <lon>, "basetime"`` (see
docs/contracts.md); a response splices the requested coordinates in front of
``"basetime"`` without parsing JSON per request.

Operations live in ``OPERATIONS`` (path -> ``Operation``); 4.3-4.5 slot in there later.
The query conventions and error codes are documented in docs/api.md.
"""

from __future__ import annotations

import email.utils
import gzip
import hashlib
import json
import logging
import math
import os
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePath
from typing import Any, Protocol

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

FREQS = ("1H", "30min", "15min")  # the variants of the European products
MAX_PAIRS = 10  # pairs per request with freq=1H
MAX_PAIRS_SUBHOURLY = 1  # pairs per request with freq=15min or 30min
MAX_NUMBER_CHARS = 32  # a coordinate longer than this is not a coordinate
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024  # point file bytes kept per run

ALLOW = b"GET, HEAD"
JSON_TYPE = b"application/json"

# A point id is used as a file name: only plain names are accepted from index.json.
_POINT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_PRODUCT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
# A decimal degree: ASCII digits only (``float`` alone would take "1_0", "nan", "١٢").
_NUMBER = re.compile(r"[ \t]*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*\Z")
_PAIR_SEPARATORS = re.compile(r"[;|]")
_HEX = frozenset(b"0123456789abcdefABCDEF")


# --------------------------------------------------------------------------- errors


class ApiError(Exception):
    """An answer of the error kind: ``{"status", "code", "message"}`` with ``no-store``."""

    def __init__(self, status: int, code: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = list(headers)


def missing(name: str) -> ApiError:
    return ApiError(400, "400_001", f'"{name}" is required')


def invalid(name: str) -> ApiError:
    return ApiError(400, "400_002", f'"{name}" is invalid value')


def out_of_range(name: str, text: str) -> ApiError:
    return ApiError(400, "400_003", f'"{name}" is out of range: {text}')


def outside_coverage(name: str, text: str) -> ApiError:
    return ApiError(403, "403_001", f'"{name}" is outside the coverage of this operation: {text}')


def not_found() -> ApiError:
    return ApiError(404, "404_001", "no such resource")


def no_data(message: str) -> ApiError:
    return ApiError(404, "404_002", message)


def not_allowed() -> ApiError:
    return ApiError(405, "405_001", "method not allowed", [(b"allow", ALLOW)])


# --------------------------------------------------------------------------- query parsing


def _percent_decode(raw: bytes) -> str:
    """Decode one ``application/x-www-form-urlencoded`` component, strictly.

    ``+`` is a space; ``%`` must be followed by two hex digits; the result must be valid
    UTF-8 without NUL. Raises ``ValueError`` otherwise.
    """
    if b"+" in raw:
        raw = raw.replace(b"+", b" ")
    if b"%" in raw:
        pieces = raw.split(b"%")
        out = bytearray(pieces[0])
        for piece in pieces[1:]:
            if len(piece) < 2 or piece[0] not in _HEX or piece[1] not in _HEX:
                raise ValueError("invalid percent-encoding")
            out.append(int(piece[:2], 16))
            out += piece[2:]
        raw = bytes(out)
    if b"\x00" in raw:
        raise ValueError("NUL byte")
    return raw.decode("utf-8")  # strict: UnicodeDecodeError is a ValueError


def parse_query(query_string: bytes, known: Iterable[str] = ()) -> dict[str, list[str]]:
    """Split a raw query string into ``name -> [values]`` (in order of appearance).

    The whole query string must decode (see ``_percent_decode``), else 400_002; the message
    names the parameter when it is one of ``known``. Empty ``&&`` segments are skipped; a
    name without ``=`` has the empty value.
    """
    known = frozenset(known)
    params: dict[str, list[str]] = {}
    for segment in query_string.split(b"&"):
        if not segment:
            continue
        raw_name, _, raw_value = segment.partition(b"=")
        try:
            name = _percent_decode(raw_name)
        except ValueError:
            raise invalid("query") from None
        try:
            value = _percent_decode(raw_value)
        except ValueError:
            raise invalid(name if name in known else "query") from None
        params.setdefault(name, []).append(value)
    return params


def single(params: Mapping[str, list[str]], name: str) -> str:
    """The one value of a required parameter: 400_001 when absent or empty, 400_002 when
    repeated with different values."""
    values = params.get(name)
    if not values or all(v == "" for v in values):
        raise missing(name)
    if any(v != values[0] for v in values[1:]):
        raise invalid(name)
    return values[0]


@dataclass(frozen=True)
class Pair:
    """One requested point: its text exactly as sent (decoded) and its coordinates."""

    text: str
    lat: float
    lon: float

    @property
    def lat_json(self) -> bytes:
        return repr(self.lat).encode()

    @property
    def lon_json(self) -> bytes:
        return repr(self.lon).encode()


def _number(text: str) -> float | None:
    if len(text) > MAX_NUMBER_CHARS or not _NUMBER.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_pairs(value: str, max_pairs: int, name: str = "latlon") -> list[Pair]:
    """``lat,lon`` pairs separated by ``;`` or ``|``.

    400_002: too many pairs, an empty pair, not exactly two numbers, NaN/inf.
    400_003: latitude outside [-90, 90] or longitude outside [-180, 180].
    """
    texts = _PAIR_SEPARATORS.split(value)
    if len(texts) > max_pairs:
        raise invalid(name)
    pairs = []
    for text in texts:
        parts = text.split(",")
        if len(parts) != 2:
            raise invalid(name)
        lat, lon = _number(parts[0]), _number(parts[1])
        if lat is None or lon is None:
            raise invalid(name)
        pairs.append(Pair(text, lat, lon))
    for pair in pairs:
        if not (-90.0 <= pair.lat <= 90.0 and -180.0 <= pair.lon <= 180.0):
            raise out_of_range(name, pair.text)
    return pairs


# --------------------------------------------------------------------------- the run tree


class Grid(Protocol):
    def cell_key(self, lat: float, lon: float) -> str: ...

    def covers(self, lat: float, lon: float) -> bool: ...


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


@dataclass
class ProductIndex:
    """A product's ``index.json`` as the server needs it."""

    product: str
    meta: dict[str, Any]
    cells: dict[str, str]  # grid cell -> point id
    updated: datetime | None
    next_update: datetime | None

    @classmethod
    def load(cls, product: str, path: Path) -> ProductIndex | None:
        try:
            meta = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.error("unreadable index %s: %s", path, exc)
            return None
        if not isinstance(meta, dict) or not isinstance(meta.get("points"), list):
            log.error("index %s has no points list", path)
            return None
        cells: dict[str, str] = {}
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
        return cls(product, meta, cells, _parse_time(meta.get("updated_time")), _parse_time(meta.get("next_update")))


@dataclass(frozen=True)
class PointFile:
    """A point file ready to splice: everything after the longitude, and a digest."""

    tail: bytes  # b',"basetime": ... }'
    digest: bytes

    def splice(self, lat_json: bytes, lon_json: bytes) -> list[bytes]:
        return [b'{"latitude":', lat_json, b',"longitude":', lon_json, self.tail]

    @classmethod
    def from_bytes(cls, data: bytes) -> PointFile:
        digest = hashlib.blake2b(data, digest_size=16).digest()
        offset = data.find(b'"basetime"')
        head = data[:offset].strip() if offset > 0 else b""
        if (
            offset > 0
            and head.startswith(b"{")
            and head.endswith(b",")
            and b'"latitude"' in head
            and b'"longitude"' in head
            and len(head) < 256
        ):
            return cls(b"," + data[offset:].rstrip(), digest)
        # Not in the contract's shape: re-render once (cached), never per request.
        log.warning("point file not in the documented layout; re-rendering it once")
        obj = json.loads(data)
        if not isinstance(obj, dict):
            raise ValueError("a point file must hold a JSON object")
        obj.pop("latitude", None)
        obj.pop("longitude", None)
        rest = json.dumps(obj).encode()[1:]  # drop the "{"
        return cls((b"," + rest) if obj else b"}", digest)


class Run:
    """Everything cached for one published run."""

    def __init__(self, run_id: str, path: Path, max_cache_bytes: int):
        self.run_id = run_id
        self.path = path
        self.max_cache_bytes = max_cache_bytes
        self._products: dict[str, ProductIndex | None] = {}
        self._files: OrderedDict[tuple[str, str, str], PointFile] = OrderedDict()
        self._cached_bytes = 0
        # the catalog's body, ETag, Last-Modified and next update, rendered once per run
        self.catalog: tuple[bytes, bytes, datetime | None, datetime | None] | None = None

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
        found = (self.product(name) for name in names if _PRODUCT_ID.match(name))
        return [p for p in found if p is not None]

    def point_file(self, product: str, freq: str, point_id: str) -> PointFile | None:
        key = (product, freq, point_id)
        cached = self._files.get(key)
        if cached is not None:
            self._files.move_to_end(key)
            return cached
        # product and freq come from this module's tables, point_id from index.json.
        base = self.path / "json" / product / freq / point_id
        try:
            data = base.with_name(point_id + ".json").read_bytes()
        except FileNotFoundError:
            try:
                data = gzip.decompress(base.with_name(point_id + ".json.gz").read_bytes())
            except FileNotFoundError:
                log.error("run %s: no %s/%s file for configured point %s", self.run_id, product, freq, point_id)
                return None
        point = PointFile.from_bytes(data)
        size = len(point.tail)
        if size <= self.max_cache_bytes:
            self._files[key] = point
            self._cached_bytes += size
            while self._cached_bytes > self.max_cache_bytes:
                _, old = self._files.popitem(last=False)
                self._cached_bytes -= len(old.tail)
        return point

    @property
    def cached_files(self) -> int:
        return len(self._files)


# --------------------------------------------------------------------------- responses


@dataclass
class Response:
    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


def error_response(err: ApiError) -> Response:
    body = json.dumps({"status": err.status, "code": err.code, "message": err.message}).encode()
    headers = [
        (b"content-type", JSON_TYPE),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *err.headers,
    ]
    return Response(err.status, body, headers)


def _http_date(dt: datetime) -> bytes:
    return email.utils.format_datetime(dt.astimezone(timezone.utc), usegmt=True).encode()


def _etag_matches(header: bytes, etag: bytes) -> bool:
    """Weak comparison, as RFC 9110 asks for If-None-Match."""
    if header.strip() == b"*":
        return True
    for candidate in header.split(b","):
        candidate = candidate.strip()
        if candidate.startswith(b"W/"):
            candidate = candidate[2:]
        if candidate == etag:
            return True
    return False


def _not_modified_since(header: bytes, last_modified: datetime | None) -> bool:
    if last_modified is None:
        return False
    try:
        since = email.utils.parsedate_to_datetime(header.decode("latin-1"))
    except Exception:  # a malformed date is no condition
        return False
    if since.tzinfo is None:
        return False
    return last_modified.replace(microsecond=0) <= since


def cached_response(
    request: Request,
    body_parts: list[bytes],
    etag: bytes,
    updated: datetime | None,
    next_update: datetime | None,
) -> Response:
    """200 (or 304) with ETag, Last-Modified and a max-age that ends at the next update."""
    max_age = 0
    if next_update is not None:
        max_age = max(0, int(next_update.timestamp() - request.now))
    headers = [(b"etag", etag), (b"cache-control", b"public, max-age=%d" % max_age)]
    if updated is not None:
        headers.append((b"last-modified", _http_date(updated)))
    if_none_match = request.header(b"if-none-match")
    if if_none_match is not None:
        if _etag_matches(if_none_match, etag):
            return Response(304, b"", headers)
    else:
        if_modified_since = request.header(b"if-modified-since")
        if if_modified_since is not None and _not_modified_since(if_modified_since, updated):
            return Response(304, b"", headers)
    body = b"".join(body_parts)
    headers += [(b"content-type", JSON_TYPE), (b"content-length", str(len(body)).encode())]
    return Response(200, body, headers)


# --------------------------------------------------------------------------- operations


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, list[str]]
    headers: list[tuple[bytes, bytes]]
    now: float

    def header(self, name: bytes) -> bytes | None:
        """A request header's value (repeated lines joined with ", "), or None."""
        values = [value for key, value in self.headers if key.lower() == name]
        return b", ".join(values) if values else None


Handler = Callable[["PointcastApp", "Operation", Request], Response]


@dataclass(frozen=True)
class Operation:
    """One GET operation: its path, the product it serves and the handler that answers."""

    name: str  # the spec's section, e.g. "4.1"
    path: str
    product: str | None
    handler: Handler
    params: tuple[str, ...] = ()


def handle_common(app: PointcastApp, op: Operation, request: Request) -> Response:
    """4.1 / 4.2: the keyed object of section 2.1, one key per requested pair."""
    assert op.product is not None
    latlon = single(request.params, "latlon")
    freq = single(request.params, "freq")
    if freq not in FREQS:
        raise invalid("freq")
    pairs = parse_pairs(latlon, MAX_PAIRS if freq == "1H" else MAX_PAIRS_SUBHOURLY)

    grid = app.grid(op.product)
    for pair in pairs:
        if not grid.covers(pair.lat, pair.lon):
            raise outside_coverage("latlon", pair.text)

    run = app.current_run()  # resolved once; everything below reads from this run
    index = run.product(op.product)
    if index is None:
        raise no_data(f"no published forecast for {op.product} in the current run")

    seen: set[str] = set()
    parts: list[bytes] = [b"{"]
    tag = hashlib.blake2b(digest_size=16)
    tag.update(b"\0".join([os.fsencode(run.run_id), op.product.encode(), freq.encode(), b""]))
    for pair in pairs:
        if pair.text in seen:  # the same text twice: one key
            continue
        seen.add(pair.text)
        point_id = index.cells.get(grid.cell_key(pair.lat, pair.lon))
        if point_id is None:
            raise no_data(f'"latlon" has no forecast point in its grid cell: {pair.text}')
        point = run.point_file(op.product, freq, point_id)
        if point is None:
            raise no_data(f'"latlon" has no {freq} forecast in the current run: {pair.text}')
        key = json.dumps(pair.text).encode()
        lat_json, lon_json = pair.lat_json, pair.lon_json
        if len(parts) > 1:
            parts.append(b",")
        parts += [key, b":", *point.splice(lat_json, lon_json)]
        tag.update(b"\0".join([key, lat_json, lon_json, point.digest]))
    parts.append(b"}")
    etag = b'"' + tag.hexdigest().encode() + b'"'
    return cached_response(request, parts, etag, index.updated, index.next_update)


def handle_catalog(app: PointcastApp, op: Operation, request: Request) -> Response:
    """What the current run serves: each product with its points, basetime, updated_time."""
    run = app.current_run()
    if run.catalog is None:
        products = []
        for index in run.products():
            meta = index.meta
            points = []
            for p in meta["points"]:
                if not isinstance(p, dict):
                    continue
                entry = {k: p.get(k) for k in ("id", "name", "lat", "lon")}
                if p.get("hub_heights") not in (None, "", []):
                    entry["hub_heights"] = p["hub_heights"]
                points.append(entry)
            freqs = [f for f in FREQS if (run.path / "json" / index.product / f).is_dir()]
            products.append(
                {
                    "product": index.product,
                    "operations": [o.path for o in OPERATIONS.values() if o.product == index.product],
                    "grid": meta.get("grid"),
                    "basetime": meta.get("basetime"),
                    "updated_time": meta.get("updated_time"),
                    "next_update": meta.get("next_update"),
                    "freqs": freqs,
                    "points": points,
                }
            )
        if not products:
            raise no_data("the current run has no products")
        body = json.dumps({"run_id": run.run_id, "products": products}).encode()  # ASCII-safe
        etag = b'"' + hashlib.blake2b(os.fsencode(run.run_id) + b"\0" + body, digest_size=16).hexdigest().encode() + b'"'
        updates = [i.updated for i in run.products() if i.updated is not None]
        nexts = [i.next_update for i in run.products() if i.next_update is not None]
        run.catalog = (body, etag, max(updates, default=None), min(nexts, default=None))
    body, etag, updated, next_update = run.catalog
    return cached_response(request, [body], etag, updated, next_update)


OPERATIONS: dict[str, Operation] = {
    op.path: op
    for op in (
        Operation("4.1", "/V1/forecast/medium-range/common", "eu-medium", handle_common, ("latlon", "freq")),
        Operation("4.2", "/V1/forecast/short-range/common", "eu-short", handle_common, ("latlon", "freq")),
        # 4.3 /V1/forecast/short-range/windpack (eu-wind), 4.4 /api/v2/global/wx (global) and
        # 4.5 /api/v1/ss1wx (japan) slot in here when their products are published.
        Operation("catalog", "/catalog", None, handle_catalog),
    )
}


# --------------------------------------------------------------------------- the app


def _default_grid_for(product: str) -> Grid:
    from pointcast.grids import grid_for

    return grid_for(product)


class PointcastApp:
    """The ASGI application. Single-threaded by design: one event loop, no awaits between
    resolving ``current`` and building the body, so no locks are needed."""

    def __init__(
        self,
        output_root: Path,
        *,
        max_cache_bytes: int = DEFAULT_CACHE_BYTES,
        grid_for: Callable[[str], Grid] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.root = Path(output_root)
        self.max_cache_bytes = max_cache_bytes
        self._grid_for = grid_for or _default_grid_for
        self._grids: dict[str, Grid] = {}
        self._run: Run | None = None
        self.clock = clock

    # -- run resolution

    def current_run(self) -> Run:
        """Resolve ``<root>/current`` (one readlink) to the cached ``Run``; 404_002 if none."""
        link = self.root / "current"
        try:
            target = os.readlink(link)
        except FileNotFoundError:
            raise no_data("no forecast run published yet") from None
        except OSError as exc:
            log.error("%s is not a symlink to a run: %s", link, exc)
            raise no_data("no forecast run published yet") from None
        run_id = PurePath(target).name
        run = self._run
        if run is None or run.run_id != run_id:
            path = Path(target) if os.path.isabs(target) else self.root / target
            run = Run(run_id, path, self.max_cache_bytes)
            if self._run is not None:
                log.info("serving run %s (dropping the caches of run %s)", run_id, self._run.run_id)
            self._run = run  # the previous run's caches go with it
        return run

    def grid(self, product: str) -> Grid:
        grid = self._grids.get(product)
        if grid is None:
            grid = self._grids[product] = self._grid_for(product)
        return grid

    def warm_up(self) -> None:
        """Build what the first request would otherwise wait for: each operation's grid and
        its coverage (lazily built rasters), and the current run's indexes."""
        probes = [(lat, lon) for lat in (-45.0, 0.0, 36.0, 50.0, 60.0) for lon in (-100.0, 0.0, 10.0, 140.0)]
        for product in sorted({op.product for op in OPERATIONS.values() if op.product}):
            try:
                grid = self.grid(product)
                for lat, lon in probes:
                    grid.covers(lat, lon)
                    grid.cell_key(lat, lon)
            except Exception:
                log.exception("warming up the grid of %s failed", product)
        try:
            run = self.current_run()
            for op in OPERATIONS.values():
                if op.product:
                    run.product(op.product)
        except ApiError:
            pass
        except Exception:
            log.exception("warming up the current run failed")

    # -- request handling

    def respond(self, method: str, path: str, query_string: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
        try:
            op = OPERATIONS.get(path)
            if op is None:
                raise not_found()
            if method not in ("GET", "HEAD"):
                raise not_allowed()
            params = parse_query(query_string, op.params)
            return op.handler(self, op, Request(method, path, params, headers, self.clock()))
        except ApiError as err:
            return error_response(err)
        except Exception:  # a bug: log it, still answer in JSON
            log.exception("unexpected error answering %s %s?%r", method, path, query_string[:200])
            return error_response(ApiError(500, "500_001", "internal error"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            method = scope.get("method", "GET")
            response = self.respond(method, scope.get("path", ""), scope.get("query_string", b""), scope.get("headers", []))
            await send({"type": "http.response.start", "status": response.status, "headers": response.headers})
            await send({"type": "http.response.body", "body": b"" if method == "HEAD" else response.body})
        elif kind == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.warm_up()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})


def create_app(output_root: Path, **options: Any) -> PointcastApp:
    """The ASGI app serving the published run tree under ``output_root``.

    Options: ``max_cache_bytes`` (point file bytes cached per run), ``grid_for`` (product ->
    grid, default ``pointcast.grids.grid_for``), ``clock`` (for tests).
    """
    return PointcastApp(Path(output_root), **options)


def server_config(output_root: Path, host: str = "127.0.0.1", port: int = 8080, **uvicorn_options: Any):
    """The uvicorn configuration ``serve`` runs: uvloop, httptools, no access log."""
    import uvicorn

    options: dict[str, Any] = dict(
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        lifespan="on",
        server_header=False,
        log_level="info",
    )
    options.update(uvicorn_options)
    return uvicorn.Config(create_app(output_root), **options)


def serve(output_root: Path, host: str = "127.0.0.1", port: int = 8080, **uvicorn_options: Any) -> None:
    """Serve ``output_root`` until interrupted (``pointcast serve``)."""
    import uvicorn

    config = server_config(output_root, host, port, **uvicorn_options)
    log.info("serving %s on http://%s:%d", Path(output_root).resolve(), host, port)
    uvicorn.Server(config).run()
