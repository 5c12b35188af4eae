"""Discovery: the newest run of a model whose last step is published on a mirror.

It walks back from the newest run due at ``now``. A run's last step exists when its last file
does (its index where the layout has one), or on a one-file-per-field layout the file of any
parameter at that step (a parameter the tree does not publish must not hide the run). A run
whose first step exists but not its last is still being published: it is polled (with backoff)
until it completes or the deadline (``wait_minutes``) passes; then an older complete run is
looked for, and the run's notes say which was skipped and which is used. A host that cannot be
reached at all is given up after ``unreachable_minutes`` (``transport.retrying``), whatever the
deadline.
"""

from __future__ import annotations

import functools
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ... import stopping
from ..base import Mirror, ModelSpec, RunRef, Upstream, floor_run
from .files import RemoteFile, run_files
from .progress import logger as _logger
from .transport import MAX_BACKOFF_S, Missing, SourceUnavailable, exists, retrying

if TYPE_CHECKING:
    from .settings import HttpSettings


def candidate_runs(model: ModelSpec, now: datetime, n: int) -> list[datetime]:
    """The ``n`` newest run times at or before ``now``, newest first."""
    out = [floor_run(model, now)]
    while len(out) < n:
        out.append(floor_run(model, out[-1] - timedelta(hours=1)))
    return out


def _published(src: HttpSettings, client, up: Upstream, files: list[RemoteFile],
               deadline: float) -> str:
    """The mirror holding a file of ``files`` ("" when none does), tried in order. On a
    one-file-per-field layout, one file of each parameter: a parameter the tree does not
    publish must not hide the others."""
    seen: set[str] = set()

    def probe(path: str, mirror: Mirror) -> str:
        exists(client, f"{mirror.url}/{path}")
        return mirror.name

    for f in files:
        if f.param in seen:
            continue
        seen.add(f.param)
        try:
            return retrying(
                f"probe {f.index_path or f.path}", up.mirrors, deadline,
                functools.partial(probe, f.index_path or f.path),
                retry_seconds=src.retry_seconds, wait_minutes=src.wait_minutes,
                unreachable_minutes=src.unreachable_minutes, retry_missing=False)
        except Missing:
            if not f.param:  # a file holds every field of its steps: one is enough
                break
    return ""


def _state(src: HttpSettings, client, up: Upstream, files: list[RemoteFile],
           deadline: float) -> tuple[str, str]:
    """("complete" | "partial" | "absent", mirror name) of a run in one layout: its last
    step exists, only its first, or neither. A step exists when its file does, or on a
    one-file-per-field layout the file of any of its parameters: a run still being written
    misses its last steps for every parameter, while a parameter the tree does not
    publish is missing at every step (fetch finds it "not published" and drops it)."""
    last = [f for f in reversed(files) if f.first_step_h == files[-1].first_step_h]
    first = [f for f in files if f.first_step_h == files[0].first_step_h]
    for state, step in (("complete", last), ("partial", first)):
        mirror = _published(src, client, up, step, deadline)
        if mirror:
            return state, mirror
    return "absent", ""


def newest_run(src: HttpSettings, model: ModelSpec, now: datetime) -> RunRef:
    """The newest complete run of ``model`` at ``now`` on ``src``'s mirrors (``SourceUnavailable``
    when none of the ``lookback_runs`` newest is)."""
    up = src.upstream(model)
    logger = _logger()
    deadline = src.deadline()
    skipped: list[str] = []  # newer runs still being published at the deadline
    with src.client() as client:
        for init in candidate_runs(model, now, src.lookback_runs):
            steps = src.steps(model, init)
            if not steps:
                continue
            for layout in up.layouts:
                if layout.run_hours is not None and init.hour not in layout.run_hours:
                    continue
                files = run_files(layout, model, init, steps)
                delay = src.retry_seconds
                while True:
                    # a run is complete without its optional files
                    state, mirror = _state(
                        src, client, up, [f for f in files if not f.optional] or files, deadline)
                    if state != "partial" or time.monotonic() + delay > deadline:
                        break
                    logger.info("%s %s (%s): run still being published (its last step is "
                                "not there yet), waiting %.0f s", model.id,
                                f"{init:%Y-%m-%d %H}", layout.name, delay)
                    stopping.pause(delay)
                    delay = min(delay * 2, MAX_BACKOFF_S)
                if state == "complete":
                    logger.info("%s: run %s complete on %s (layout %s), %d files", model.id,
                                f"{init:%Y-%m-%d %H} UTC", mirror, layout.name, len(files))
                    notes = tuple(f"{s}: the older run {init:%Y-%m-%d %H} UTC is used"
                                  for s in skipped)
                    return RunRef(model=model.id, init=init, steps=steps,
                                  source=f"{src.name}/{layout.name}", notes=notes)
                if state == "partial":
                    skipped.append(f"run {init:%Y-%m-%d %H} UTC ({layout.name}) was still "
                                   f"being published at the deadline "
                                   f"({src.wait_minutes:g} min)")
                    logger.warning("%s: %s; looking for an older run", model.id, skipped[-1])
                    break  # a run is published in one layout only
    raise SourceUnavailable(
        f"{model.id}: no complete run in the {src.lookback_runs} runs up to "
        f"{now:%Y-%m-%d %H:%M} UTC on {', '.join(m.url for m in up.mirrors)}"
        + (f" ({'; '.join(skipped)})" if skipped else ""))

