"""The ASGI application: resolves the published run once per request, checks the path, the
method and the API key, and answers from the run's kept answers or the operation's handler.

``PointcastApp`` is a plain ASGI callable (no framework) and the one way into the server: any
ASGI server can run it (``pointcast serve`` runs it with its own HTTP adapter, ``http``; uvicorn
runs it too: docs/api.md). Every request resolves
``<root>/current`` exactly once (``os.readlink``) and reads everything it needs from that one
run directory, so a response never mixes two runs, even while a new run is being published.
When ``current`` moves on, the old run's caches are dropped with it."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path, PurePath
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from .. import viewer
from ..config import ApiKeyConfig
from ..contract import BY_PRODUCT
from .access import Access
from .compress import Deflated, Piece, accepts_gzip
from .errors import ApiError, no_data, not_allowed, not_found
from .grammar import Grid, parse_query
from .metrics import DEFAULT_SCHEDULE_HOURS, METRICS_PATH, Metrics
from .openapi import openapi_document
from .operations import OPERATIONS, Request, file_response, tree_file, verification_answer, viewer_assets
from .responses import ZERO_COPY, Response, cached_response, error_response, header_value
from .run import DEFAULT_ANSWER_BYTES, DEFAULT_CACHE_BYTES, Run, read_run_file

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

UNGUARDED = frozenset({"/openapi.json"})  # paths answered without an API key
VERIFICATION_PATH = "/verification"  # PointcastApp.verification, apart from the run's operations
# the request metrics' operation labels: these paths as they are, the viewer's files as "viewer",
# anything else as "other"
LABELLED_PATHS = frozenset({*OPERATIONS, VERIFICATION_PATH, METRICS_PATH})


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
        max_answer_bytes: int = DEFAULT_ANSWER_BYTES,
        grid_for: Callable[[str], Grid] | None = None,
        clock: Callable[[], float] = time.time,
        api_keys: Iterable[ApiKeyConfig] = (),
        schedule_hours: int = DEFAULT_SCHEDULE_HOURS,
    ):
        self.root = Path(output_root)
        self.max_cache_bytes = max_cache_bytes
        self.max_answer_bytes = max_answer_bytes
        self._grid_for = grid_for or _default_grid_for
        self._grids: dict[str, Grid] = {}
        self._run: Run | None = None
        self._link = os.path.join(self.root, "current")
        self._target: str | None = None  # what ``current`` pointed to when ``_run`` was resolved
        self.clock = clock
        self.access = Access(api_keys)
        body = json.dumps(openapi_document(secured=not self.access.open), separators=(",", ":")).encode()
        self.openapi = (Piece(body, ("openapi",)),
                        b'"' + hashlib.blake2b(body, digest_size=16).hexdigest().encode() + b'"')
        # runs published before their manifest recorded the schedule are aged by this one
        self.schedule_hours = schedule_hours
        self.metrics = Metrics(self.root, self.current_run, clock, schedule_hours)

    @functools.cached_property
    def openapi_deflated(self) -> Deflated:
        return Deflated(self.openapi[0])

    # -- run resolution

    def current_run(self) -> Run:
        """Resolve ``<root>/current`` (one readlink) to the cached ``Run``; 404_002 if none."""
        link = self._link
        try:
            target = os.readlink(link)
        except FileNotFoundError:
            raise no_data("no forecast run published yet") from None
        except OSError as exc:
            log.error("%s is not a symlink to a run: %s", link, exc)
            raise no_data("no forecast run published yet") from None
        run = self._run
        if run is not None and target == self._target:
            return run
        run_id = PurePath(target).name
        if run is None or run.run_id != run_id:
            path = Path(target) if os.path.isabs(target) else self.root / target
            run = Run(run_id, path, self.max_cache_bytes, self.max_answer_bytes)
            if self._run is not None:
                log.info("serving run %s (dropping the caches of run %s)", run_id, self._run.run_id)
            self._run = run  # the previous run's caches go with it
        self._target = target
        return run

    def grid(self, product: str) -> Grid:
        grid = self._grids.get(product)
        if grid is None:
            grid = self._grids[product] = self._grid_for(product)
        return grid

    def warm_up(self) -> None:
        """Build what the first request would otherwise wait for: each operation's grid and
        its coverage (lazily built rasters), the current run's indexes, the modules of the
        windpack's interpolation."""
        probes = [(lat, lon) for lat in (-45.0, 0.0, 36.0, 50.0, 60.0) for lon in (-100.0, 0.0, 10.0, 140.0)]
        for product in sorted(BY_PRODUCT):  # the forecast products, not the extensions
            try:
                grid = self.grid(product)
                for lat, lon in probes:
                    if grid.covers(lat, lon):  # requests ask for cells inside the coverage only
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
        # The windpack's interpolation rounds directions as the products do: importing them
        # (numpy, pandas, xarray) takes seconds, which the first such request would wait.
        from ..products.base import published_direction  # noqa: F401

    # -- request handling

    def respond(self, method: str, path: str, query_string: bytes, headers: list[tuple[bytes, bytes]],
                zero_copy: bool = False) -> Response:
        """The response to a request; ``zero_copy``: the server takes a body as a file
        (``responses.ZERO_COPY``), which an answer asked for again then gets. Counted and
        timed in the metrics (``metrics``), which never fail a request."""
        start = time.perf_counter()
        response = self.respond_uncounted(method, path, query_string, headers, zero_copy)
        try:
            if path in LABELLED_PATHS:
                label = path
            elif path in viewer_assets() or (response.status == 200 and path.endswith(".json")):
                label = "viewer"
            else:
                label = "other"
            self.metrics.observe(label, response.status, time.perf_counter() - start)
        except Exception:  # a bug in counting: the answer goes out all the same
            log.exception("counting the request %s %s failed", method, path[:200])
        return response

    def respond_uncounted(self, method: str, path: str, query_string: bytes, headers: list[tuple[bytes, bytes]],
                          zero_copy: bool = False) -> Response:
        """``respond``'s response, uncounted."""
        if path == METRICS_PATH:
            return self.metrics_response(method)
        if path == VERIFICATION_PATH:
            return self.verification(method, query_string, headers)
        try:
            op = OPERATIONS.get(path)
            if op is None:
                return self.respond_viewer(method, path, headers)
            if method not in ("GET", "HEAD"):
                raise not_allowed()
            if path not in UNGUARDED:
                self.access.admit(headers)
            try:
                run: Run | ApiError = self.current_run()
            except ApiError as err:  # none published: the operation checks its parameters first
                run = err
            key = (path, query_string)
            answer = run.answers.get(key) if isinstance(run, Run) and op.kept else None
            if answer is None:
                answer = op.handler(self, op, Request(parse_query(query_string, op.params), run))
                if isinstance(run, Run) and op.kept:
                    run.answers.put(key, answer, answer.size)
            elif zero_copy and isinstance(run, Run):  # asked for again: worth a file of its own
                return cached_response(answer, headers, self.clock(), run.body_files, key)
            return cached_response(answer, headers, self.clock())
        except ApiError as err:
            return error_response(err)
        except Exception:  # a bug: log it, still answer in JSON
            log.exception("unexpected error answering %s %s?%r", method, path, query_string[:200])
            return error_response(ApiError(500, "500_001", "internal error"))

    def metrics_response(self, method: str) -> Response:
        """GET /metrics: the Prometheus text format (``metrics``), without an API key like
        /openapi.json (counts and ages, no forecast: docs/operations.md), never cached."""
        try:
            if method not in ("GET", "HEAD"):
                raise not_allowed()
            body = self.metrics.exposition()
        except ApiError as err:
            return error_response(err)
        except Exception:  # a bug (or a manifest of an unexpected shape): log it, answer in JSON
            log.exception("unexpected error answering %s %s", method, METRICS_PATH)
            return error_response(ApiError(500, "500_001", "internal error"))
        return Response(200, body, [(b"content-type", CONTENT_TYPE_LATEST.encode()),
                                    (b"content-length", b"%d" % len(body)), (b"cache-control", b"no-store")])

    def verification(self, method: str, query_string: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
        """GET /verification (``operations.verification_answer``), behind the API key."""
        try:
            if method not in ("GET", "HEAD"):
                raise not_allowed()
            self.access.admit(headers)
            return cached_response(verification_answer(self.root, query_string), headers, self.clock())
        except ApiError as err:
            return error_response(err)
        except Exception:  # a bug (or a file being replaced by hand): log it, answer in JSON
            log.exception("unexpected error answering %s %s?%r", method, VERIFICATION_PATH, query_string[:200])
            return error_response(ApiError(500, "500_001", "internal error"))

    def respond_viewer(self, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> Response:
        """``GET /`` and the viewer's files (no key: they hold no forecast), and the files of the
        current run's JSON tree that the page reads (``tree_file``; the key as for the operations)."""
        asset = viewer_assets().get(path)
        if asset is not None:
            if method not in ("GET", "HEAD"):
                raise not_allowed()
            return file_response(asset, path)
        if not path.endswith(".json"):
            raise not_found()
        try:
            run = self.current_run()
        except ApiError:
            if path[1:] in viewer.RUN_FILES:  # what the page asks first: it says so
                if method not in ("GET", "HEAD"):
                    raise not_allowed() from None
                raise
            raise not_found() from None
        file = tree_file(run, path)
        if file is None:
            raise not_found()
        if method not in ("GET", "HEAD"):
            raise not_allowed()
        self.access.admit(headers)
        try:
            data, encoded = read_run_file(file, accepts_gzip(header_value(headers, b"accept-encoding")))
        except FileNotFoundError:  # an optional file (verification), or a run being removed
            raise not_found() from None
        return file_response(data, path, encoded)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            method = scope.get("method", "GET")
            response = self.respond(method, scope.get("path", ""), scope.get("query_string", b""), scope.get("headers", []),
                                    ZERO_COPY in (scope.get("extensions") or ()))
            await send({"type": "http.response.start", "status": response.status, "headers": response.headers})
            if response.file is not None and method != "HEAD":
                await send({"type": ZERO_COPY, "file": response.file.file, "offset": 0, "count": response.file.size})
            else:
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


def create_app(output_root: Path | str, **options: Any) -> PointcastApp:
    """The ASGI app serving the published run tree under ``output_root``.

    Options: ``max_cache_bytes`` (point file bytes cached per run), ``max_answer_bytes`` (answer
    bytes kept per run, ``Answer.size``), ``grid_for`` (product ->
    grid, default ``pointcast.grids.grid_for``), ``clock`` (for tests), ``api_keys`` (the
    ``[server.api_keys]`` of the configuration; none: the service is open), ``schedule_hours``
    (the configuration's ``[schedule] every_hours``: the age at which a product of a run whose
    manifest does not record it is stale, /catalog and /metrics).
    """
    return PointcastApp(Path(output_root), **options)
