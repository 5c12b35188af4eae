"""The HTTP source (``type = "http"``): its options (``[sources.<id>]``, docs/config.md) and
the model's upstream table with them applied; ``discover`` and ``fetch`` are the package's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx

from ..base import FetchedRun, Mirror, ModelSpec, RunRef, Upstream
from .discover import newest_run
from .fetch import fetch_run
from .transport import new_client

OPTIONS = ("mirrors", "base_url", "extra_mirrors", "layouts", "wait_minutes", "retry_seconds",
           "timeout_seconds", "connections", "lookback_runs", "horizon_hours", "progress")


@dataclass
class HttpSource:
    """Model runs from their upstream HTTP servers (see the package docstring)."""

    name: str = "http"
    mirrors: tuple[str, ...] | None = None  # replaces the table's mirrors (base URLs)
    extra_mirrors: tuple[str, ...] = ()  # tried after the table's
    layouts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # template overrides
    wait_minutes: float = 30.0  # per-run deadline: waiting for publication and retrying
    retry_seconds: float = 2.0  # first backoff; doubles up to MAX_BACKOFF_S
    timeout_seconds: float = 60.0  # per request (connect, read)
    connections: int = 4  # parallel downloads
    lookback_runs: int = 8  # how many runs discovery walks back
    horizon_hours: float | None = None  # fetch steps up to this lead time only
    progress: bool = True  # progress bar on a terminal

    @classmethod
    def from_options(cls, name: str, options: Mapping[str, Any]) -> "HttpSource":
        unknown = sorted(set(options) - set(OPTIONS) - {"type"})
        if unknown:
            raise ValueError(f"source {name!r} (http): unknown option(s) {unknown}; "
                             f"known: {sorted(OPTIONS)}")
        kw = {k: v for k, v in options.items() if k in OPTIONS and k != "base_url"}
        if options.get("base_url") is not None:
            if options.get("mirrors"):
                raise ValueError(f"source {name!r} (http): give base_url or mirrors, not both")
            kw["mirrors"] = (options["base_url"],)
        for key in ("mirrors", "extra_mirrors"):
            if kw.get(key) is not None:
                kw[key] = tuple(str(u).rstrip("/") for u in kw[key])
        return cls(name=name, **kw)

    def upstream(self, model: ModelSpec) -> Upstream:
        up = model.upstream
        if up is None:
            raise ValueError(f"source {self.name!r} (http): model {model.id!r} has no upstream "
                             f"table (ModelSpec.upstream, sources/)")
        if self.mirrors is not None:
            mirrors = tuple(Mirror(f"mirror{i}", u) for i, u in enumerate(self.mirrors))
        else:
            mirrors = up.mirrors
        mirrors += tuple(Mirror(f"extra{i}", u) for i, u in enumerate(self.extra_mirrors))
        names = {lay.name for lay in up.layouts}
        unknown = set(self.layouts) - names
        if unknown:
            raise ValueError(f"source {self.name!r} (http): model {model.id!r} has no layout "
                             f"{sorted(unknown)} (layouts: {sorted(names)})")
        # the overrides are path templates (str fields of Layout), checked where the config is read
        layouts = tuple(replace(lay, **cast(dict[str, Any], self.layouts.get(lay.name, {})))
                        for lay in up.layouts)
        return replace(up, mirrors=mirrors, layouts=layouts)

    def steps(self, model: ModelSpec, init: datetime) -> tuple[timedelta, ...]:
        """The steps of the run at ``init`` this source fetches (up to ``horizon_hours``)."""
        from .. import run_steps

        steps = run_steps(model, init)
        if self.horizon_hours is not None:
            steps = tuple(s for s in steps if s <= timedelta(hours=self.horizon_hours))
        return steps

    def client(self) -> httpx.Client:
        return new_client(self.timeout_seconds, self.connections)

    def deadline(self) -> float:
        """When a run's discovery or fetch gives up (``wait_minutes`` from now)."""
        return time.monotonic() + self.wait_minutes * 60.0

    def discover(self, model: ModelSpec, now: datetime) -> RunRef:
        return newest_run(self, model, now)

    def fetch(self, run: RunRef, model: ModelSpec, cache: Path) -> FetchedRun:
        return fetch_run(self, run, model, cache)
