"""The last cycle's outcome, where the server can read it.

A run's manifest says what a published run lacks, but a cycle that fails publishes nothing: the
served run then says nothing of it. So every cycle, published or not, ends by writing
``<root>/cycles/last.json`` (the flow's hooks, src/pointcast/flows/cycle.py), which ``/metrics`` reports
(docs/operations.md)::

    {"status": "published" | "degraded" | "failed", "started": ISO, "finished": ISO,
     "duration_s": float, "run_id": str | null, "message": str,
     "dropped": {model: reason}, "carried": {product: run id}, "absent": {product: reason},
     "degraded": {product: [element, ...]}}

``degraded``: a run was published, but a model was dropped, an element of a product is
degraded over some lead times, or a product is carried over from an earlier run or absent.

Every cycle also says what it found upstream, before it fetches anything, in
``<root>/cycles/upstream.json`` (``record_upstream``): each model's newest complete run and
since when the cycles have seen it complete. A product whose basetime model has a newer run
complete for a schedule period that is still not served is stale, whether or not the cycles
since published (`pointcast.server.metrics.product_ages`)::

    {"<model>": {"init": ISO, "complete_since": ISO}}

Apart from ``pointcast.publish``, which only ``record_cycle`` needs: the server reads the
outcome without importing the publish stage (zarr, xarray, dask).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CYCLES_DIR = "cycles"
LAST = "last.json"
UPSTREAM = "upstream.json"
STATUSES = ("published", "degraded", "failed")


def shortfalls(manifest: Mapping[str, Any]) -> dict[str, dict]:
    """What a published run lacks, from its manifest: the dropped models (with why), the carried
    products (with the run they come from), the absent products (with why) and each product's
    degraded elements."""
    products = manifest.get("products") or {}
    return {
        "dropped": dict(manifest.get("dropped") or {}),
        "carried": {pid: entry["carried_from"] for pid, entry in products.items() if entry.get("carried_from")},
        "absent": dict(manifest.get("absent") or {}),
        "degraded": {pid: sorted(elements) for pid, elements in (manifest.get("degraded") or {}).items() if elements},
    }


def describe(lacks: Mapping[str, Mapping]) -> str:
    """One line an operator reads in a notification: what the run lacks, or that it lacks nothing."""
    parts = [f"{model} dropped ({reason})" for model, reason in lacks["dropped"].items()]
    parts += [f"{pid} carried from {run}" for pid, run in lacks["carried"].items()]
    parts += [f"{pid} absent ({reason})" for pid, reason in lacks["absent"].items()]
    parts += [f"{pid} degraded: {', '.join(elements)}" for pid, elements in lacks["degraded"].items()]
    return "; ".join(parts) or "complete"


def published_outcome(manifest: Mapping[str, Any], started: datetime, finished: datetime) -> dict:
    """The outcome of a cycle that published (or found already published) the run of ``manifest``."""
    lacks = shortfalls(manifest)
    return {"status": "degraded" if any(lacks.values()) else "published", **_times(started, finished),
            "run_id": manifest.get("run_id"), "message": describe(lacks), **lacks}


def failed_outcome(message: str, started: datetime, finished: datetime) -> dict:
    """The outcome of a cycle that published nothing."""
    return {"status": "failed", **_times(started, finished), "run_id": None, "message": message,
            "dropped": {}, "carried": {}, "absent": {}, "degraded": {}}


def _times(started: datetime, finished: datetime) -> dict:
    return {"started": started.isoformat(), "finished": finished.isoformat(),
            "duration_s": round((finished - started).total_seconds(), 3)}


def record_cycle(root: Path | str, outcome: Mapping[str, Any]) -> Path | None:
    """Write ``outcome`` as ``<root>/cycles/last.json``, replacing the previous one atomically
    (a server reading it sees one or the other). An object-store root has no server reading
    it: nothing is written there (None)."""
    from .publish import is_url, replace_bytes

    if outcome.get("status") not in STATUSES:
        raise ValueError(f"a cycle's status is one of {', '.join(STATUSES)}, got {outcome.get('status')!r}")
    if is_url(root):
        log.info("the cycle's outcome is not recorded under an object-store root (%s)", root)
        return None
    folder = Path(root) / CYCLES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LAST
    replace_bytes(path, (json.dumps(outcome, indent=2, sort_keys=True) + "\n").encode())
    return path


def last_cycle(root: Path | str) -> dict | None:
    """The outcome ``record_cycle`` wrote last, or None when no cycle recorded one (or the file
    is not an outcome: logged)."""
    try:
        outcome = json.loads((Path(root) / CYCLES_DIR / LAST).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.error("unreadable cycle outcome under %s: %s", root, exc)
        return None
    if not isinstance(outcome, dict) or outcome.get("status") not in STATUSES:
        log.error("%s/%s/%s is not a cycle outcome", root, CYCLES_DIR, LAST)
        return None
    return outcome


def record_upstream(root: Path | str, found: Mapping[str, datetime], now: datetime) -> Path | None:
    """Write the runs a cycle found complete upstream at ``now`` (``found``: each model's run
    start) as ``<root>/cycles/upstream.json``, each with since when the cycles have seen it:
    ``now``, or the earlier time of the record before it when that named the same run. Models
    not looked for this cycle keep their record. An object-store root: nothing (None)."""
    from .publish import is_url, replace_bytes

    if is_url(root):
        return None
    seen = upstream_runs(root)
    record = {m: {"init": r["init"].isoformat(), "complete_since": r["complete_since"].isoformat()}
              for m, r in seen.items()}
    for model, init in found.items():
        since = seen[model]["complete_since"] if model in seen and seen[model]["init"] == init else now
        record[model] = {"init": init.isoformat(), "complete_since": since.isoformat()}
    folder = Path(root) / CYCLES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / UPSTREAM
    replace_bytes(path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    return path


def upstream_runs(root: Path | str) -> dict[str, dict[str, datetime]]:
    """What ``record_upstream`` wrote last, by model (``init``, ``complete_since``, as
    datetimes); empty when no cycle recorded it (an entry that is not one: logged, skipped)."""
    try:
        record = json.loads((Path(root) / CYCLES_DIR / UPSTREAM).read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.error("unreadable record of the upstream runs under %s: %s", root, exc)
        return {}
    out = {}
    for model, entry in (record.items() if isinstance(record, dict) else ()):
        try:
            out[model] = {k: datetime.fromisoformat(entry[k]) for k in ("init", "complete_since")}
        except (TypeError, KeyError, ValueError):
            log.error("%s/%s/%s: %r is not a model's run", root, CYCLES_DIR, UPSTREAM, model)
    return out
