"""The HTTP source's options (``[sources.<id>]``, docs/config.md) and the model's upstream
table with them applied: what ``discover``, ``download`` and ``fetch`` read of the source,
below ``source.HttpSource``, which calls them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Self, cast

import httpx

from ...config import HTTP_OPTIONS
from .. import run_steps
from ..base import Mirror, ModelSpec, Upstream
from .transport import new_client


@dataclass
class HttpSettings:
    """An HTTP source's options and what follows from them: the upstream table with them
    applied, the steps fetched, the client, the deadline. What ``discover`` and ``fetch`` read
    of the source (``source.HttpSource`` adds those two to it)."""

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
    # A file every mirror answers "not found" for this long, while its run's last step is
    # there, is not published (a field the tree does not carry): decided in minutes, not at
    # the deadline.
    missing_minutes: float = 3.0
    # No mirror can be connected to (its name does not resolve, connections are refused) for
    # this long: the source gives up on the run (the cycle drops the model), not at the
    # deadline, which is for runs still being published.
    unreachable_minutes: float = 3.0
    progress: bool = True  # progress bar on a terminal
    # The upstream index texts `fetch.run_size` read, by URL, each taken by the download of
    # its file that follows (``download.fetch_file``): an index is requested once a fetch.
    read_indexes: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_options(cls, name: str, options: Mapping[str, Any]) -> Self:
        unknown = sorted(set(options) - set(HTTP_OPTIONS) - {"type"})
        if unknown:
            raise ValueError(f"source {name!r} (http): unknown option(s) {unknown}; "
                             f"known: {sorted(HTTP_OPTIONS)}")
        kw = {k: v for k, v in options.items() if k in HTTP_OPTIONS and k != "base_url"}
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
        return run_steps(model, init, self.horizon_hours)

    def client(self) -> httpx.Client:
        return new_client(self.timeout_seconds, self.connections)

    def deadline(self) -> float:
        """When a run's discovery or fetch gives up (``wait_minutes`` from now)."""
        return time.monotonic() + self.wait_minutes * 60.0
