"""``GET /metrics``: the server's Prometheus metrics, in the text exposition format of
``prometheus_client`` (docs/operations.md lists them).

Each app owns its registry, so that several apps in one process (tests, an embedding server)
count apart. Requests are labelled by the operation's path; every other path is one of two
labels, ``viewer`` (the page and the run-tree files it reads) or ``other``, so that no request
text becomes a label. What the served run and the last cycle say (the products' ages, the
cycle's outcome) is read when Prometheus scrapes, never stored: a scrape sees the run served
at that moment and the clock's time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..config import ScheduleConfig
from ..outcome import STATUSES, last_cycle, upstream_runs
from ..sources import MODELS
from .errors import ApiError
from .run import parse_time

if TYPE_CHECKING:
    from .run import Run

METRICS_PATH = "/metrics"
# Down to 0.1 ms: an answer kept per run is made in far less than the library's default
# smallest bucket (5 ms), which would put nearly every request in one bucket.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
DEFAULT_SCHEDULE_HOURS = ScheduleConfig().every_hours


def schedule_hours(manifest: dict[str, Any], default: int) -> int:
    """The schedule period of the run's cycles (the manifest's ``schedule_hours``; runs
    published before it was recorded: ``default``)."""
    hours = manifest.get("schedule_hours")
    return hours if isinstance(hours, int) and not isinstance(hours, bool) and hours > 0 else default


def stale_after(entry: dict[str, Any], period: int) -> timedelta | None:
    """The age past which the product of manifest ``entry`` is stale: the manifest's
    ``stale_after_hours`` (its basetime model's `ModelSpec.stale_after`), computed the same way
    for a run published before it was recorded; None when the entry names no known model."""
    hours = entry.get("stale_after_hours")
    if isinstance(hours, (int, float)) and not isinstance(hours, bool):
        return timedelta(hours=hours)
    models = entry.get("models")
    if isinstance(models, list) and models and models[0] in MODELS:
        return MODELS[models[0]].stale_after(period)
    return None


def product_ages(manifest: dict[str, Any], now: datetime, default_hours: int, root: Path) -> dict[str, tuple[float, bool]]:
    """Each product of the manifest with a basetime: (its age in seconds at ``now``, whether it
    is stale). Stale (docs/operations.md, "When a product is stale"): older than its
    `stale_after`, or a newer run of its basetime model (the first of its ``models``) has
    been complete upstream for over a schedule period, as the cycles writing under ``root``
    found it (`pointcast.outcome.upstream_runs`), and is still not served."""
    period = schedule_hours(manifest, default_hours)
    upstream = upstream_runs(root)
    ages = {}
    for pid, entry in (manifest.get("products") or {}).items():
        basetime = parse_time(entry.get("basetime")) if isinstance(entry, dict) else None
        if basetime is None:
            continue
        age = now - basetime
        limit = stale_after(entry, period)
        models = entry.get("models")
        newer = upstream.get(models[0]) if isinstance(models, list) and models and isinstance(models[0], str) else None
        overdue = (newer is not None and newer["init"] > basetime
                   and now - newer["complete_since"] > timedelta(hours=period))
        ages[pid] = (age.total_seconds(), (limit is not None and age > limit) or overdue)
    return ages


class Metrics:
    """The app's registry: the request counter and latency histogram it updates, and a
    collector of the served run and the last cycle, read at each scrape."""

    def __init__(self, root: Path, current_run: Callable[[], Run], clock: Callable[[], float], default_hours: int):
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("pointcast_http_requests", "HTTP requests answered, by operation path and status",
                                ("operation", "status"), registry=self.registry)
        self.latency = Histogram("pointcast_http_request_duration_seconds",
                                 "Seconds the app took to make an answer, by operation path", ("operation",),
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self._children: dict[tuple[str, int], tuple[Any, Any]] = {}
        self.registry.register(_Freshness(root, current_run, clock, default_hours))

    def observe(self, operation: str, status: int, seconds: float) -> None:
        children = self._children.get((operation, status))
        if children is None:  # labels() takes a lock and formats: once per label pair
            children = self._children[(operation, status)] = (
                self.requests.labels(operation, str(status)), self.latency.labels(operation))
        children[0].inc()
        children[1].observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _Freshness(Collector):
    """The served products' ages and the last cycle's outcome, at scrape time."""

    def __init__(self, root: Path, current_run: Callable[[], Run], clock: Callable[[], float], default_hours: int):
        self.root = root
        self.current_run = current_run
        self.clock = clock
        self.default_hours = default_hours

    def describe(self) -> list[Metric]:
        return []  # read at scrape time only: the registry must not collect at registration

    def collect(self) -> Iterator[Metric]:
        yield from self._products()
        yield from self._cycle()

    def _products(self) -> Iterator[Metric]:
        age = GaugeMetricFamily("pointcast_product_age_seconds",
                                "Now minus the basetime of the run serving the product", labels=["product"])
        stale = GaugeMetricFamily("pointcast_product_stale",
                                  "1 when the product is stale: older than its basetime model's run interval, "
                                  "publication delay and a schedule period, or a newer run of that model has been "
                                  "complete upstream for a schedule period and is not served",
                                  labels=["product"])
        carried = GaugeMetricFamily("pointcast_product_carried",
                                    "1 when the product's files are carried over from an earlier run",
                                    labels=["product"])
        degraded = GaugeMetricFamily("pointcast_product_degraded_elements",
                                     "Elements of the product degraded over some lead times", labels=["product"])
        try:
            manifest = self.current_run().manifest
        except ApiError:  # nothing published: no product to report
            manifest = {}
        now = datetime.fromtimestamp(self.clock(), UTC)
        ages = product_ages(manifest, now, self.default_hours, self.root)
        for pid, (seconds, too_old) in sorted(ages.items()):
            entry = manifest["products"][pid]
            age.add_metric([pid], seconds)
            stale.add_metric([pid], float(too_old))
            carried.add_metric([pid], float(bool(entry.get("carried_from"))))
            degraded.add_metric([pid], float(len((manifest.get("degraded") or {}).get(pid) or {})))
        yield from (age, stale, carried, degraded)

    def _cycle(self) -> Iterator[Metric]:
        outcome = last_cycle(self.root)
        if outcome is None:
            return
        status = GaugeMetricFamily("pointcast_last_cycle_status",
                                   "1 for the last cycle's outcome, 0 for the others", labels=["status"])
        for name in STATUSES:
            status.add_metric([name], float(outcome["status"] == name))
        yield status
        finished = parse_time(outcome.get("finished"))
        if finished is not None:
            yield GaugeMetricFamily("pointcast_last_cycle_finished_timestamp_seconds",
                                    "When the last cycle ended (Unix time)", value=finished.timestamp())
        if isinstance(outcome.get("duration_s"), (int, float)):
            yield GaugeMetricFamily("pointcast_last_cycle_duration_seconds", "How long the last cycle ran",
                                    value=float(outcome["duration_s"]))
        dropped = GaugeMetricFamily("pointcast_last_cycle_dropped_model",
                                    "1 for each model the last cycle dropped", labels=["model"])
        for model in sorted(outcome.get("dropped") or {}):
            dropped.add_metric([model], 1.0)
        yield dropped
        yield GaugeMetricFamily("pointcast_last_cycle_dropped_models", "Models the last cycle dropped",
                                value=float(len(outcome.get("dropped") or {})))
        degraded = GaugeMetricFamily("pointcast_last_cycle_degraded_elements",
                                     "Elements the last cycle's run has degraded, by product", labels=["product"])
        for pid, elements in sorted((outcome.get("degraded") or {}).items()):
            degraded.add_metric([pid], float(len(elements)))
        yield degraded
