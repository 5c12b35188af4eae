"""Retention: which published runs, cached model runs and scratch stores are deleted, and when.

The policy is written once here; what a run's publication time is, and how a run is deleted
without ever showing half-deleted under its id, is the backend's (``local.py``,
``objectstore.py``).
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from .. import locks
from ..interp.scratch import SCRATCH_DIR
from .backend import STALE_STAGING_SECONDS, TRASH_PREFIX
from .durable import remove_tree
from .roots import backend_for
from .stage import remove_abandoned

log = logging.getLogger(__name__)


def retain(root: Path | str, keep: int, *, stale_after: float = STALE_STAGING_SECONDS) -> list[Any]:
    """Delete old runs; return the locations removed.

    - Published runs: the ``keep`` most recently published ones are kept (local roots: by the
      time their ``manifest.json`` was written; object stores: by its ``published_at``),
      ``current``'s run always among them, even when it is not one of the newest. ``keep``
      counts ``current``. Keep at least 2 when readers may still hold the previous ``current``
      for the length of a request. An upload that never got its manifest is removed.
    - Failed runs published before the oldest kept run are deleted.
    - What interrupted cycles left (`sweep_staging`).
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    backend = backend_for(root)
    if not backend.has_runs():
        return []
    removed: list[Any] = []
    with backend.lock():
        cur = backend.current()
        published = backend.published_runs()
        newest = sorted((n for n, t in published.items() if t is not None),
                        key=lambda n: (published[n], n), reverse=True)
        kept = ([cur] if cur in newest else []) + [n for n in newest if n != cur]
        kept = kept[:keep]
        for name in newest + [n for n, t in published.items() if t is None]:
            if name not in kept and name != cur:
                removed.append(backend.remove_run(name))
        if kept:
            oldest_kept = min(published[n] for n in kept)
            for name, stamp in backend.failed_runs().items():
                if stamp is None or stamp < oldest_kept:
                    removed.append(backend.remove_run(name, failed=True))
    for location in removed:
        log.info("retention removed %s", location)
    return removed + sweep_staging(root, stale_after=stale_after)


def sweep_staging(root: Path | str, *, stale_after: float = STALE_STAGING_SECONDS) -> list[Any]:
    """Remove what interrupted cycles left beside ``root``'s runs; return the locations removed.

    - The staged archives of every cycle that died (``stage.remove_abandoned``), at once: they
      hold a whole cycle of every product.
    - On a local root, abandoned ``.staging-*`` directories whose newest directory mtime is
      older than ``stale_after`` seconds (an hour), leftovers of interrupted deletions, and
      temporary ``current.tmp-*`` links of an interrupted swap. For an object-store root, its
      local staging directories (in the temporary directory) that no cycle holds, at once.

    `retain` ends with it; a cycle also starts with it, before it stages its own run, so that
    a killed cycle's tree (a run's JSON and archives) does not share the disk with the new one.
    """
    backend = backend_for(root)
    if not backend.has_runs():
        return []
    removed: list[Any] = remove_abandoned(root)
    with backend.lock():
        removed += backend.sweep(stale_after)
    for location in removed:
        log.info("retention removed %s", location)
    return removed


_CACHE_RUN_RE = re.compile(r"^\d{10}$")  # <YYYYMMDDHH>


def retain_cache(cache: Path | str, keep: int, max_bytes: int | None = None,
                 in_use: Collection[tuple[str, str]] = frozenset()) -> list[Path]:
    """Delete cached model runs; return the paths removed.

    A cached model run is a directory ``<cache>/<kind>/<model>/<YYYYMMDDHH>/`` (``kind`` is
    the source type: ``sample``, ``http``); nothing else under ``<cache>`` is touched. Per
    ``(kind, model)`` the ``keep`` newest runs are kept; then, while the runs left weigh more
    than ``max_bytes``, the oldest go first. Runs named in ``in_use`` (``(model, YYYYMMDDHH)``,
    the runs the cycle just used) are never removed. A run is renamed to a ``.trash-*`` name
    before it is deleted, so a source never finds it half-deleted under its own name.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    cache = Path(cache)
    removed: list[Path] = []
    kept: list[Path] = []
    for model in sorted(p for p in cache.glob("*/*") if p.is_dir()):
        for leftover in model.glob(f"{TRASH_PREFIX}*"):  # an interrupted deletion
            shutil.rmtree(leftover, ignore_errors=True)
        found = sorted((p for p in model.iterdir() if p.is_dir() and _CACHE_RUN_RE.match(p.name)),
                       key=lambda p: p.name, reverse=True)
        for i, p in enumerate(found):
            if i < keep or (model.name, p.name) in in_use:
                kept.append(p)
            else:
                remove_tree(p, model)
                removed.append(p)
    if max_bytes is not None:
        sizes = {p: _tree_bytes(p) for p in kept}
        total = sum(sizes.values())
        for p in sorted(kept, key=lambda p: p.name):  # oldest run first
            if total <= max_bytes:
                break
            if (p.parent.name, p.name) not in in_use:
                remove_tree(p, p.parent)
                removed.append(p)
                total -= sizes[p]
    for p in removed:
        log.info("cache retention removed %s", p)
    return removed


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def retain_scratch(cache: Path | str, min_age: float = 60.0) -> list[Path]:
    """Delete the scratch directories (``<cache>/scratch/<run id>/``, `interp.scratch`) of
    cycles that ended without removing them (killed); return the paths removed. A running
    cycle holds its directory (`interp.scratch.held`, `pointcast.locks`): only a directory no
    process holds, and that is older than ``min_age`` seconds (not one a cycle is
    making and about to lock) is removed."""
    removed = []
    for path in sorted(p for p in (Path(cache) / SCRATCH_DIR).glob("*") if p.is_dir()):
        try:
            if time.time() - path.stat().st_mtime < min_age:
                continue
        except FileNotFoundError:  # removed meanwhile
            continue
        with locks.abandoned(path) as gone:
            if gone:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    for p in removed:
        log.info("scratch retention removed %s", p)
    return removed
