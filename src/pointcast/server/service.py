"""The serving process: the listening socket on uvloop, the ASGI lifespan (the app warms up at
startup), SIGINT/SIGTERM and the graceful shutdown, and ``serve`` (``pointcast serve``).

Each connection is an ``http.HttpProtocol``. A shutdown stops accepting, closes the idle
connections, lets the others answer what they have received (up to ``shutdown_timeout``),
then runs the lifespan's shutdown. A second signal ends the waiting at once.

The app stays a plain ASGI app: ``app_from_config`` is the factory another ASGI server can
run it from (``uvicorn --factory pointcast.server.service:app_from_config``, docs/api.md)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import uvloop

from ..config import ApiKeyConfig
from .app import PointcastApp, create_app
from .http import HttpProtocol

log = logging.getLogger(__name__)

LIFESPAN_SCOPE = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}}


class LifespanFailed(Exception):
    """The app said ``lifespan.startup.failed`` (or raised while starting)."""


class Lifespan:
    """The ASGI lifespan protocol, run as one task beside the server."""

    def __init__(self, app: Callable[..., Any]):
        self.app = app
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.replies: asyncio.Queue = asyncio.Queue()
        self.task: asyncio.Task | None = None

    async def _run(self) -> None:
        try:
            await self.app(dict(LIFESPAN_SCOPE), self.inbox.get, self.replies.put)
        except BaseException as exc:  # noqa: BLE001 (an app without lifespan support raises: no lifespan then)
            await self.replies.put({"type": "raised", "exc": exc})
        else:
            await self.replies.put({"type": "returned"})

    async def _ask(self, kind: str) -> dict:
        await self.inbox.put({"type": f"lifespan.{kind}"})
        return await self.replies.get()

    async def startup(self) -> bool:
        """True when the app has a lifespan (and started); raises ``LifespanFailed``."""
        self.task = asyncio.get_running_loop().create_task(self._run())
        reply = await self._ask("startup")
        if reply["type"] == "lifespan.startup.complete":
            return True
        if reply["type"] == "lifespan.startup.failed":
            raise LifespanFailed(reply.get("message", ""))
        if reply["type"] == "raised":
            log.info("the app has no lifespan: %r", reply["exc"])
        return False

    async def shutdown(self) -> None:
        reply = await self._ask("shutdown")
        if reply["type"] == "lifespan.shutdown.failed":
            log.error("the app's shutdown failed: %s", reply.get("message", ""))
        elif reply["type"] == "raised":
            log.error("the app raised at shutdown", exc_info=reply["exc"])
        assert self.task is not None  # made by startup
        await self.task


class Server:
    """``app`` over HTTP/1.1 on ``host:port`` (or on ``sock``, already bound), on uvloop.

    ``run()`` blocks until ``stop()`` or, in the main thread, SIGINT/SIGTERM; ``started`` is
    set once the app has started and the socket listens (``port`` is then the bound port)."""

    def __init__(
        self,
        app: Callable[..., Any],
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        sock: socket.socket | None = None,
        keep_alive_timeout: float = 5.0,
        shutdown_timeout: float = 30.0,
        backlog: int = 2048,
    ):
        self.app = app
        self.host = host
        self.port = port
        self.sock = sock
        self.keep_alive_timeout = keep_alive_timeout
        self.shutdown_timeout = shutdown_timeout
        self.backlog = backlog
        self.connections: set[HttpProtocol] = set()
        self.started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = asyncio.Event()  # each serve makes its own
        self._hurry = asyncio.Event()

    def run(self) -> None:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(self.serve())

    def stop(self) -> None:
        """Begin the graceful shutdown (from any thread); a second call ends its waiting."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._signalled)

    def _signalled(self) -> None:
        if self._stop.is_set():
            self._hurry.set()
        self._stop.set()

    async def serve(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._stop, self._hurry = asyncio.Event(), asyncio.Event()
        main = threading.current_thread() is threading.main_thread()
        if main:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self._signalled)
        lifespan = Lifespan(self.app)
        try:
            has_lifespan = await lifespan.startup()
            def connection() -> HttpProtocol:
                return HttpProtocol(self.app, self)

            if self.sock is not None:
                server = await loop.create_server(connection, sock=self.sock, backlog=self.backlog)
            else:
                server = await loop.create_server(connection, self.host, self.port, reuse_address=True,
                                                  backlog=self.backlog)
            self.port = server.sockets[0].getsockname()[1]
            log.info("listening on port %d%s", self.port, " (the app has started)" if has_lifespan else "")
            self.started.set()
            await self._stop.wait()
            log.info("shutting down: %d connections open", len(self.connections))
            server.close()
            await self._close_connections()
            if has_lifespan:
                await lifespan.shutdown()
        finally:
            if main:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

    async def _close_connections(self) -> None:
        for connection in list(self.connections):
            connection.shutdown()
        deadline = asyncio.get_running_loop().time() + self.shutdown_timeout
        while self.connections and not self._hurry.is_set() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        for connection in list(self.connections):
            connection.transport.abort()


def app_from_config(config: str | os.PathLike | None = None) -> PointcastApp:
    """The app of a configuration file (default ``$POINTCAST_CONFIG`` or
    ``config/pointcast.toml``), as ``pointcast serve`` makes it: the factory for another ASGI
    server."""
    from ..config import DEFAULT_CONFIG, load_config

    cfg = load_config(Path(config or os.environ.get("POINTCAST_CONFIG", DEFAULT_CONFIG)))
    return create_app(cfg.output.root, api_keys=cfg.server.api_keys, schedule_hours=cfg.schedule.every_hours)


def serve(
    output_root: Path | str,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_keys: Iterable[ApiKeyConfig] = (),
    **options: Any,
) -> None:
    """Serve ``output_root`` until SIGINT or SIGTERM (``pointcast serve``); ``options`` go to
    ``Server``."""
    api_keys = tuple(api_keys)
    log.info("serving %s on http://%s:%d", Path(output_root).resolve(), host, port)
    if api_keys:
        log.info("API keys required (X-API-Key): %s", ", ".join(key.name for key in api_keys))
    else:
        log.warning("no [server.api_keys] configured: the service is open to anyone who can reach it")
    Server(create_app(output_root, api_keys=api_keys), host, port, **options).run()
    log.info("stopped")
