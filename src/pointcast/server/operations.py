"""The operations: the five forecast operations, the quantile and power extensions, ``/catalog`` and ``/openapi.json`` (``OPERATIONS``, path ->
``Operation``), the verification answer and the run-tree files the viewer reads.

A handler checks its parameters (``grammar``), then reads the run the request resolved and
returns an ``Answer`` (``responses``) made of the run's cached point files, spliced behind the
requested coordinates. Products and freqs come from the tables here, point ids and heights from
the run's ``index.json``: no file path is ever built from request text."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Protocol

from .. import contract, viewer
from ..contract import FREQS, QUANTILE_DIR, height_name, max_pairs
from ..publish import VERIFICATION_DIR
from .compress import Deflated, Piece
from .errors import ApiError, invalid, no_data, not_found, out_of_range, outside_coverage
from .grammar import (
    Grid,
    HubHeight,
    Pair,
    check_coverage,
    check_hubheight_range,
    check_pair_ranges,
    optional,
    parse_coordinate,
    parse_hubheight,
    parse_lat_slash_lon,
    parse_pairs,
    parse_query,
    parse_time_zone,
    single,
)
from .metrics import product_ages
from .responses import JSON_TYPE, Answer, Response
from .run import PRODUCT_ID, ProductIndex, Run, parse_time, read_run_file

log = logging.getLogger(__name__)
HEIGHT_PRODUCTS = tuple(p for p, op in contract.BY_PRODUCT.items() if op.answer == "wind")
"""The products answered at a hub height (``hubheight``): the windpack's."""


@dataclass
class Request:
    """What an operation reads: the query's parameters and the run ``respond`` resolved, or
    the error resolving it gave (raised by ``run``, after the operation checked its parameters)."""

    params: dict[str, list[str]]
    resolved: Run | ApiError

    def run(self) -> Run:
        if isinstance(self.resolved, ApiError):
            raise self.resolved
        return self.resolved


class Served(Protocol):
    """What an operation reads of the app that calls it (``app.PointcastApp``, which imports
    the operations: they do not import it back)."""

    openapi: tuple[Piece, bytes]  # the document and its ETag
    clock: Callable[[], float]  # now, in seconds since the epoch (the products' ages)
    schedule_hours: int  # `[schedule] every_hours`, for a run whose manifest does not record it
    root: Path  # the output root: what the cycles found upstream (`metrics.product_ages`)

    @property
    def openapi_deflated(self) -> Deflated: ...

    def grid(self, product: str) -> Grid: ...


Handler = Callable[[Served, "Operation", Request], Answer]


@dataclass(frozen=True)
class Operation:
    """One GET operation: its path, the product it serves and the handler that answers."""

    name: str  # the contract's (`contract.Operation.name`), or "openapi"
    path: str
    product: str | None
    handler: Handler
    params: tuple[str, ...] = ()
    kept: bool = True  # its answers are kept per run and query (``Run.answers``); not if they age


def synthetic(run: Run) -> bool:
    """Whether the run was made from synthetic model runs (its manifest's ``synthetic``)."""
    return run.manifest.get("synthetic") is True


def _served(op: Operation, request: Request) -> tuple[Run, ProductIndex]:
    """The current run and the operation's product in it, or 404_002."""
    run = request.run()
    index = None if op.product is None else run.product(op.product)
    if index is None:
        raise no_data(f"no published forecast for {op.product} in the current run")
    return run, index


def _points(pairs: list[Pair], grid: Grid, index: ProductIndex) -> Iterator[tuple[Pair, str]]:
    """Each requested pair once (the same text twice is one key) with the point of its grid
    cell, or 404_002 naming the first pair without one."""
    seen: set[str] = set()
    for pair in pairs:
        if pair.text in seen:
            continue
        seen.add(pair.text)
        point_id = index.cells.get(grid.cell_key(pair.lat, pair.lon))
        if point_id is None:
            raise no_data(f'"latlon" has no forecast point in its grid cell: {pair.text}')
        yield pair, point_id


def handle_common(app: Served, op: Operation, request: Request) -> Answer:
    """medium-range/common, short-range/common: the keyed object of European forecasts, one key per requested pair."""
    assert op.product is not None
    latlon = single(request.params, "latlon")
    freq = single(request.params, "freq")
    if freq not in FREQS:
        raise invalid("freq")
    pairs = parse_pairs(latlon, max_pairs(freq), rule=f"with freq={freq}")

    grid = app.grid(op.product)
    check_coverage(grid, pairs)

    run, index = _served(op, request)  # resolved once; everything below reads from this run

    parts: list[bytes] = [b"{"]
    tag = hashlib.blake2b(digest_size=16)
    tag.update(b"\0".join([os.fsencode(run.run_id), op.product.encode(), freq.encode(), b""]))
    for pair, point_id in _points(pairs, grid, index):
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
    return Answer(parts, etag, run.published, index.next_update, run.deflated, synthetic=synthetic(run))


def handle_windpack(app: Served, op: Operation, request: Request) -> Answer:
    """short-range/windpack: the keyed object of wind forecasts at the requested hub height.

    A configured hub height of the point is its static file, spliced (coordinates and
    ``hub_height``); any other height comes from the point's ladder object: its row at a
    precomputed height, else the interpolation between the two precomputed heights around it."""
    assert op.product is not None
    latlon = single(request.params, "latlon")
    freq = single(request.params, "freq")
    hub_text = single(request.params, "hubheight")
    if freq not in FREQS:
        raise invalid("freq")
    pairs = parse_pairs(latlon, max_pairs(freq), check_range=False, rule=f"with freq={freq}")
    height = parse_hubheight(hub_text)
    check_pair_ranges(pairs)
    check_hubheight_range(height)

    grid = app.grid(op.product)
    check_coverage(grid, pairs)

    run, index = _served(op, request)  # resolved once; everything below reads from this run

    hub_json = json.dumps(height.text).encode()
    tails: dict[str, tuple[list[bytes], bytes]] = {}  # point id -> its answer without coordinates
    parts: list[bytes] = [b"{"]
    tag = hashlib.blake2b(digest_size=16)
    tag.update(b"\0".join([os.fsencode(run.run_id), op.product.encode(), freq.encode(), hub_json, b""]))
    for pair, point_id in _points(pairs, grid, index):
        if point_id not in tails:
            tails[point_id] = _wind_at_height(run, op.product, freq, index.heights.get(point_id, ()),
                                              index.hubs.get(point_id, ()), point_id, height, hub_json, pair)
        tail, digest = tails[point_id]
        key = json.dumps(pair.text).encode()
        lat_json, lon_json = pair.lat_json, pair.lon_json
        if len(parts) > 1:
            parts.append(b",")
        parts += [key, b':{"latitude":', lat_json, b',"longitude":', lon_json, *tail]
        tag.update(b"\0".join([key, lat_json, lon_json, digest]))
    parts.append(b"}")
    etag = b'"' + tag.hexdigest().encode() + b'"'
    return Answer(parts, etag, run.published, index.next_update, run.deflated, synthetic=synthetic(run))


def _wind_at_height(
    run: Run,
    product: str,
    freq: str,
    heights: tuple[float, ...],
    hubs: tuple[float, ...],
    point_id: str,
    height: HubHeight,
    hub_json: bytes,
    pair: Pair,
) -> tuple[list[bytes], bytes]:
    """One point's 2.2 object after its coordinates, and a digest of what it was made from."""
    z = height.metres
    if z in hubs:  # a configured hub height: its static file
        wind = run.wind_file(product, freq, point_id, z)
        if wind is None:
            raise no_data(f'"latlon" has no {freq} wind forecast at {height.text} in the current run: {pair.text}')
        return [wind.head, hub_json, wind.rest], wind.digest
    i = bisect_left(heights, z)
    exact = i < len(heights) and heights[i] == z
    if not exact and (i == 0 or i == len(heights)):  # never extrapolate, never another height
        log.error("run %s: %s point %s has no precomputed heights around %s",
                  run.run_id, product, point_id, height.text)
        raise no_data(f'"hubheight" {height.text} is not between two precomputed heights of the point: {pair.text}')
    try:
        between = (run.wind_answer(product, freq, point_id, height, z) if exact
                   else run.wind_answer(product, freq, point_id, height, heights[i - 1], heights[i]))
    except ValueError as exc:
        log.error("run %s: %s point %s: %s", run.run_id, product, point_id, exc)
        between = None
    if between is None:
        raise no_data(f'"latlon" has no {freq} wind forecast at {height.text} in the current run: {pair.text}')
    tail, digest = between
    return [tail], digest


def handle_quantiles(app: Served, op: Operation, request: Request) -> Answer:
    """The quantile extension (docs/api.md, "Extension: quantiles"): a product's ensemble
    quantiles at one point, its quantile file behind the requested coordinates; for the
    windpack with ``hubheight``, the wind speed quantiles at that height (`Run.quantiles_at`)."""
    product = single(request.params, "product")
    served = contract.BY_PRODUCT.get(product)
    if served is None:
        raise invalid("product")
    pair = parse_pairs(single(request.params, "latlon"), 1, check_range=False)[0]
    height = None
    hub_text = optional(request.params, "hubheight")
    if hub_text is not None:
        if served.answer != "wind":  # a windpack parameter
            raise invalid("hubheight", f"product {product} has no heights; it is taken with "
                                       f"product={' or '.join(HEIGHT_PRODUCTS)}")
        height = parse_hubheight(hub_text)
    check_pair_ranges([pair])
    if height is not None:
        check_hubheight_range(height)

    grid = app.grid(product)
    check_coverage(grid, [pair])

    run = request.run()  # resolved once; everything below reads from this run
    index = run.product(product)
    if index is None:
        raise no_data(f"no published forecast for {product} in the current run")
    _, point_id = next(_points([pair], grid, index))
    quantiles = run.quantile_file(product, point_id)
    if quantiles is None:
        raise no_data(f'"latlon" has no quantile forecast of {product} in the current run: {pair.text}')
    lat_json, lon_json = pair.lat_json, pair.lon_json
    if height is None:
        parts, digest = quantiles.splice(lat_json, lon_json), quantiles.point.digest
    else:
        at = run.quantiles_at(product, point_id, height)
        if at is None:
            log.error("run %s: %s point %s has no quantile heights around %s", run.run_id, product, point_id,
                      height.text)
            raise no_data(f'"hubheight" {height.text} is not between two precomputed heights of the point: '
                          f"{pair.text}")
        tail, digest = at
        parts = [b'{"product":', json.dumps(product).encode(), b',"latitude":', lat_json,
                 b',"longitude":', lon_json, tail]
    tag = hashlib.blake2b(b"\0".join([os.fsencode(run.run_id), op.path.encode(), product.encode(),
                                      (height.text if height else "").encode(), lat_json, lon_json, digest]),
                          digest_size=16)
    return Answer(parts, b'"' + tag.hexdigest().encode() + b'"', run.published, index.next_update, run.deflated,
                  synthetic=synthetic(run))


def handle_power(app: Served, op: Operation, request: Request) -> Answer:
    """The power extension (docs/api.md, "Extension: power"): a configured site's power file
    at ``freq``, as published (``json/power/<freq>/<site>.json``). The site is looked up in the
    run's power index, never made a path from the request's text."""
    site = single(request.params, "site")
    freq = single(request.params, "freq")
    if not PRODUCT_ID.match(site):
        raise invalid("site")
    if freq not in FREQS:
        raise invalid("freq")
    run, index = _served(op, request)
    if site not in index.point_ids:
        raise no_data(f'"site" {site} is not a configured site of the current run')
    data = run.power_file(freq, site)
    if data is None:
        raise no_data(f'"site" {site} has no {freq} power in the current run (its product publishes '
                      f"{', '.join(_site_freqs(index, site))})")
    tag = hashlib.blake2b(b"\0".join([os.fsencode(run.run_id), op.path.encode(), site.encode(), freq.encode()]),
                          digest_size=16)
    return Answer([data], b'"' + tag.hexdigest().encode() + b'"', run.published, index.next_update, run.deflated)


def _site_freqs(index: ProductIndex, site: str) -> list[str]:
    return next((p.get("freqs", []) for p in index.meta["points"] if isinstance(p, dict) and p.get("id") == site), [])


def handle_global(app: Served, op: Operation, request: Request) -> Answer:
    """global/wx: ``latlon=<lat>/<lon>`` and an optional ``tz``; the answer is ss1wx's shape.

    Without ``tz`` the precomputed element in the point's own zone is served; with one, the
    element is rendered once per run and zone from the point's hourly file (``Run.wx_in_zone``).
    """
    text = single(request.params, "latlon")
    lat, lon = parse_lat_slash_lon(text)
    tz = optional(request.params, "tz")
    zone = None if tz is None else parse_time_zone(tz)
    return wxdata_answer(app, op, request, lat, lon, "latlon", text, zone)


def handle_ss1wx(app: Served, op: Operation, request: Request) -> Answer:
    """ss1wx: ``lat`` and ``lon``, answered in Asia/Tokyo."""
    lat_text = single(request.params, "lat")
    lon_text = single(request.params, "lon")
    lat = parse_coordinate(lat_text, "lat")
    lon = parse_coordinate(lon_text, "lon")
    if not -90.0 <= lat <= 90.0:
        raise out_of_range("lat", lat_text)
    if not -180.0 <= lon <= 180.0:
        raise out_of_range("lon", lon_text)
    return wxdata_answer(app, op, request, lat, lon, "lat,lon", f"{lat_text},{lon_text}")


def wxdata_answer(app: Served, op: Operation, request: Request, lat: float, lon: float,
                  name: str, point_text: str, zone: str | None = None) -> Answer:
    """``{"requestId": <fresh uuid4>, "wxdata": [<the point's element, coordinates echoed>]}``
    (global/wx and ss1wx), in ``zone`` when given (global/wx's ``tz``).

    The ETag is weak and covers the forecast content only (run, product, zone, echoed
    coordinates, the point file), not the requestId: two answers that differ only in their id
    are equivalent, and a client revalidating with If-None-Match gets 304."""
    assert op.product is not None
    grid = app.grid(op.product)
    if not grid.covers(lat, lon):
        raise outside_coverage(name, point_text)

    run, index = _served(op, request)  # resolved once; everything below reads from this run
    point_id = index.cells.get(grid.cell_key(lat, lon))
    if point_id is None:
        raise no_data(f'"{name}" has no forecast point in its grid cell: {point_text}')
    point = run.wx_file(op.product, point_id) if zone is None else run.wx_in_zone(op.product, point_id, zone)
    if point is None:
        raise no_data(f'"{name}" has no forecast in the current run: {point_text}')

    lat_json, lon_json = repr(lat).encode(), repr(lon).encode()
    tag = hashlib.blake2b(digest_size=16)
    tag.update(b"\0".join([op.path.encode(), os.fsencode(run.run_id), op.product.encode(), (zone or "").encode(),
                           lat_json, lon_json, point.digest]))
    etag = b'W/"' + tag.hexdigest().encode() + b'"'
    parts = [b'{"requestId":"', b"", b'","wxdata":[', *point.splice(lat_json, lon_json), b"]}"]
    return Answer(parts, etag, run.published, index.next_update, run.deflated, request_id_at=1,
                  synthetic=synthetic(run))


def handle_catalog(app: Served, op: Operation, request: Request) -> Answer:
    """What the current run serves: each product with its age, points, basetime, updated_time.

    The products are rendered once per run; each answer puts in their ages at the clock's
    time (``age_s``, ``stale``: ``metrics.product_ages``), so
    the answer is not kept, and its ETag is weak: it covers the run and which products are
    stale, not the seconds of their ages (an answer a second later is equivalent)."""
    run = request.run()
    if run.catalog is None:
        run.catalog = _catalog(run)
    heads, tails, etag, updated, next_update = run.catalog
    manifest = run.manifest
    ages = product_ages(manifest, datetime.fromtimestamp(app.clock(), UTC), app.schedule_hours, app.root)
    parts: list[bytes] = [b'{"run_id":' + json.dumps(run.run_id).encode()
                          + b',"synthetic":' + json.dumps(synthetic(run)).encode() + b',"products":[']
    tag = hashlib.blake2b(etag, digest_size=16)
    for i, (product, head) in enumerate(heads):
        seconds, stale = ages.get(product, (None, None))
        fresh = {"age_s": None if seconds is None else round(seconds), "stale": stale}
        entry = (manifest.get("products") or {}).get(product)
        if isinstance(entry, dict) and entry.get("carried_from"):
            fresh["carried_from"] = entry["carried_from"]
        if i:
            parts.append(b",")
        parts += [head, json.dumps(fresh)[1:-1].encode() + b",", tails[i]]
        tag.update(b"\0%d" % bool(stale))
    parts.append(b"]}")
    return Answer(parts, b'W/"' + tag.hexdigest().encode() + b'"', updated, next_update, run.deflated,
                  synthetic=synthetic(run))


def _catalog(run: Run) -> tuple[list[tuple[str, Piece]], list[Piece], bytes, datetime | None, datetime | None]:
    """The catalog's constant parts, once per run: each product's object split where its ages
    go (after ``"product"``), a digest of them all, Last-Modified and the next update."""
    heads: list[tuple[str, Piece]] = []
    tails: list[Piece] = []
    digest = hashlib.blake2b(os.fsencode(run.run_id), digest_size=16)
    for index in run.products():
        meta = index.meta
        points = []
        for p in meta["points"]:
            if not isinstance(p, dict):
                continue
            entry = {k: p.get(k) for k in ("id", "name", "lat", "lon")}
            if p.get("hub_heights") not in (None, "", []):
                entry["hub_heights"] = p["hub_heights"]
            if isinstance(p.get("heights"), list):  # eu-wind: the precomputed heights
                entry["heights"] = p["heights"]
            points.append(entry)
        folder = run.path / "json" / index.product
        freqs = [f for f in FREQS if (folder / f).is_dir()]
        rest = {
            "operations": [o.path for o in OPERATIONS.values() if o.product == index.product
                           or (o.handler is handle_quantiles and (folder / QUANTILE_DIR).is_dir())],
            "grid": meta.get("grid"),
            "basetime": meta.get("basetime"),
            "updated_time": meta.get("updated_time"),
            "next_update": meta.get("next_update"),
            "freqs": freqs,
            "points": points,
        }
        head = b'{"product":' + json.dumps(index.product).encode() + b","
        tail = json.dumps(rest)[1:].encode()  # ASCII-safe
        heads.append((index.product, Piece(head, ("catalog", index.product, "head"))))
        tails.append(Piece(tail, ("catalog", index.product)))
        digest.update(b"\0".join([b"", head, tail]))
    if not heads:
        raise no_data("the current run has no products")
    nexts = [i.next_update for i in run.products() if i.next_update is not None]
    return heads, tails, digest.digest(), run.published, min(nexts, default=None)


def handle_openapi(app: Served, op: Operation, request: Request) -> Answer:
    """The OpenAPI 3 document of the operations (public: no API key needed)."""
    body, etag = app.openapi
    return Answer([body], etag, None, None, lambda piece: app.openapi_deflated)


_HANDLERS: dict[str, Handler] = {"medium-range-common": handle_common, "short-range-common": handle_common,
                                 "short-range-windpack": handle_windpack, "global-wx": handle_global,
                                 "ss1wx": handle_ss1wx, "quantiles": handle_quantiles, "power": handle_power,
                                 "catalog": handle_catalog}
OPERATIONS: dict[str, Operation] = {
    op.path: op
    for op in (
        *(Operation(c.name, c.path, c.product, _HANDLERS[c.name], tuple(p.name for p in c.params),
                    kept=_HANDLERS[c.name] is not handle_catalog)
          for c in contract.OPERATIONS),
        Operation("openapi", "/openapi.json", None, handle_openapi),
    )
}
"""The served operations: the contract's (paths, products, parameters) and the OpenAPI document."""


# --------------------------------------------------------------------------- the viewer (docs/viewer.md)
#
# The page at ``/`` reads the run tree with relative URLs, as it does on a static host serving
# a run's json/ folder; here a URL is answered only when each of its parts is a name of the
# fixed tables (the viewer's files, the run files, products, freqs) or of the run's index
# (point ids, heights), so no file path is built from request text.

_CONTENT_TYPES = {".html": b"text/html; charset=utf-8", ".js": b"text/javascript; charset=utf-8",
                  ".css": b"text/css; charset=utf-8", ".json": JSON_TYPE}


@functools.cache
def viewer_assets() -> dict[str, bytes]:
    """URL path -> bytes of the viewer's own files; ``/`` is its page."""
    assets = {"/" + rel: data for rel, data in viewer.files().items()}
    assets["/"] = assets["/" + viewer.PAGE]
    return assets


def file_response(data: bytes, path: str, encoded: bool | None = None) -> Response:
    """200 with a file's bytes; ``encoded`` (a run file, ``read_run_file``): they are its
    stored gzip form, sent with ``Content-Encoding: gzip``."""
    suffix = PurePath(path).suffix if path != "/" else ".html"
    kind = _CONTENT_TYPES.get(suffix, b"text/plain; charset=utf-8")  # LICENSE, VERSIONS
    headers = [(b"content-type", kind), (b"content-length", b"%d" % len(data)), (b"cache-control", b"no-cache")]
    if encoded is not None:  # the form depends on the request's Accept-Encoding
        headers.append((b"vary", b"Accept-Encoding"))
    if encoded:
        headers.append((b"content-encoding", b"gzip"))
    return Response(200, data, headers)


def tree_file(run: Run, path: str) -> Path | None:
    """The file of ``run``'s JSON tree that a viewer URL names (docs/contracts.md has the layout),
    or None: the run files, a product's ``index.json``, its point files (``<freq>/<id>.json``,
    ``<id>.json``, ``hourly/<id>.json``, ``quantiles/<id>.json``, a hub height's ``<freq>/<id>/<height>.json``) and the
    verification files."""

    parts = path[1:].split("/")
    stem = parts[-1].removesuffix(".json")
    base = run.path / "json"
    products = {op.product for op in OPERATIONS.values() if op.product}
    if len(parts) == 1:  # the run's own manifest and report (runs published before the viewer have no copies)
        if parts[0] in viewer.RUN_FILES:
            return base / parts[0] if parts[0] == viewer.HISTORY else run.path / parts[0]
        return None
    if parts[0] == VERIFICATION_DIR:
        return base / VERIFICATION_DIR / parts[1] if len(parts) == 2 and (stem == "index" or stem in products) else None
    index = run.product(parts[0]) if parts[0] in products else None
    if index is None:
        return None
    folder = base / index.product
    if parts[1:] == ["index.json"]:
        return folder / "index.json"
    if len(parts) == 2 and stem in index.point_ids:
        return folder / parts[1]
    if len(parts) == 3 and (parts[1] in FREQS or parts[1] in ("hourly", QUANTILE_DIR)) and stem in index.point_ids:
        return folder / parts[1] / parts[2]
    if (len(parts) == 4 and parts[1] in FREQS and parts[2] in index.hubs
            and stem in {height_name(m) for m in index.hubs[parts[2]]}):
        return folder / parts[1] / parts[2] / parts[3]
    return None



def verification_answer(root: Path, query_string: bytes) -> Answer:
    """What ``pointcast verify`` wrote (docs/verification.md): the index or, with
    ``product=<id>``, a product's scores. Read from ``<root>/verification/`` at each request, not
    from the served run: verification is renewed between cycles."""
    params = parse_query(query_string, ("product",))
    name = "index.json"
    if "product" in params:
        product = single(params, "product")
        if not PRODUCT_ID.match(product):
            raise invalid("product")
        name = f"{product}.json"
    try:
        data = read_run_file(root / VERIFICATION_DIR / name)[0]
    except OSError:
        raise (no_data("no verification published yet (pointcast verify)") if name == "index.json"
               else not_found()) from None
    etag = b'"' + hashlib.blake2b(data, digest_size=16).hexdigest().encode() + b'"'
    updated = parse_time(json.loads(data).get("generated"))
    piece = Piece(data, (VERIFICATION_DIR, name))
    return Answer([piece], etag, updated, None, lambda p: Deflated(p))
