"""The viewer: a status page, a map of the points and a meteogram per point, in the browser.

Static files (``index.html``, ``app.js``, ``app.css`` and the vendored libraries under
``vendor/``, refreshed by ``vendor/refresh.sh``) that read the published JSON tree with
relative URLs, so the same page works from ``pointcast serve`` and from any static host
serving a run's ``json/`` folder (docs/viewer.md). Publication copies them into each run's
tree (``publish.add_viewer``); the server answers them from here.
"""

from __future__ import annotations

import functools
from pathlib import Path

HERE = Path(__file__).parent
PAGE = "index.html"
ASSETS = "viewer"  # the folder of the page's scripts, styles and libraries in a run's tree
HISTORY = "runs.json"  # the last cycles (publish.run_history)
# What the page reads beside the products' trees (written by publication): copies of the run's
# manifest and validation report, and the history.
RUN_FILES = ("manifest.json", "validation.json", HISTORY)


@functools.cache
def files() -> dict[str, bytes]:
    """The viewer's files by their path in a run's JSON tree: ``index.html`` at the root, the
    rest under ``viewer/`` (licences and versions of the vendored libraries included; the
    refresh script and Python files are not for browsers)."""
    out = {PAGE: (HERE / PAGE).read_bytes()}
    for path in sorted(HERE.rglob("*")):
        rel = path.relative_to(HERE).as_posix()
        if (path.is_file() and rel != PAGE and path.suffix not in (".py", ".pyc", ".sh")
                and "__pycache__" not in rel):
            out[f"{ASSETS}/{rel}"] = path.read_bytes()
    return out
