"""The HTTP source (``type = "http"``): its options (``settings.HttpSettings``) with
``discover`` and ``fetch``, the package's.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ..base import FetchedRun, ModelSpec, RunRef, Size
from .discover import newest_run
from .fetch import fetch_run, run_size
from .settings import HttpSettings


class HttpSource(HttpSettings):
    """Model runs from their upstream HTTP servers (see the package docstring)."""

    def discover(self, model: ModelSpec, now: datetime) -> RunRef:
        return newest_run(self, model, now)

    def size(self, run: RunRef, model: ModelSpec, cache: Path) -> Size:
        return run_size(self, run, model, cache)

    def fetch(self, run: RunRef, model: ModelSpec, cache: Path) -> FetchedRun:
        return fetch_run(self, run, model, cache)
