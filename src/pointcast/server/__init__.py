"""The thin server: hands out the precomputed JSON of the current published run.

One module a job, each depending only on those above it (``make lint`` checks it):

- ``errors``: the error answers (``ApiError`` and one constructor per code);
- ``grammar``: the request grammar (query string, pairs, coordinates, hub heights, time zones);
- ``access``: API keys and their rate limits;
- ``compress``: gzip answers assembled from deflate blocks made once per run;
- ``splice``: point files cut once so that an answer splices the requested coordinates in;
- ``wind``: windpack heights between two precomputed ones, interpolated;
- ``quantiles``: the quantile extension's answers from a point's quantile file;
- ``run``: the served run, its index, files and answers, cached per run;
- ``responses``: answers and the HTTP responses made of them (validators, 304, gzip);
- ``metrics``: ``GET /metrics``, the Prometheus metrics (requests, latency, product ages, last cycle);
- ``operations``: the operations (the five forecast operations, the quantile extension, catalog, OpenAPI), verification and the viewer's files;
- ``openapi``: the OpenAPI document of the operations;
- ``app``: ``PointcastApp``, the pure ASGI app and the one way in;
- ``http``: the HTTP adapter, one HTTP/1.1 connection (httptools) answered by the ASGI app;
- ``service``: the serving process (uvloop, lifespan, signals, graceful shutdown; ``pointcast serve``).

The query conventions and error codes are documented in docs/api.md, the run tree the server
reads in docs/contracts.md.
"""

from .app import PointcastApp, create_app
from .errors import ApiError
from .operations import OPERATIONS
from .service import Server, app_from_config, serve

__all__ = ["OPERATIONS", "ApiError", "PointcastApp", "Server", "app_from_config", "create_app", "serve"]
