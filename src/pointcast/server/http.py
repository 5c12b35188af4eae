"""The HTTP adapter: ``PointcastApp`` under uvicorn (uvloop and httptools), through uvicorn's
public API only (``uvicorn.Config``, ``uvicorn.Server``), so any uvicorn release that keeps
those runs it."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import ApiKeyConfig
from .app import create_app

log = logging.getLogger(__name__)


def server_config(
    output_root: Path,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_keys: Iterable[ApiKeyConfig] = (),
    **uvicorn_options: Any,
):
    """The uvicorn configuration ``serve`` runs: uvloop, httptools, no access log (it would
    not log keys, but a log of every request is the operator's choice, not ours)."""
    import uvicorn

    options: dict[str, Any] = dict(
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        proxy_headers=False,  # the client address serves no answer: no middleware per request
        lifespan="on",
        server_header=False,
        log_level="info",
    )
    options.update(uvicorn_options)
    return uvicorn.Config(create_app(output_root, api_keys=api_keys), **options)


def serve(
    output_root: Path,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_keys: Iterable[ApiKeyConfig] = (),
    **uvicorn_options: Any,
) -> None:
    """Serve ``output_root`` until interrupted (``pointcast serve``)."""
    import uvicorn

    api_keys = tuple(api_keys)
    config = server_config(output_root, host, port, api_keys, **uvicorn_options)
    log.info("serving %s on http://%s:%d", Path(output_root).resolve(), host, port)
    if api_keys:
        log.info("API keys required (X-API-Key): %s", ", ".join(key.name for key in api_keys))
    else:
        log.warning("no [server.api_keys] configured: the service is open to anyone who can reach it")
    uvicorn.Server(config).run()
