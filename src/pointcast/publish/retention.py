"""Retention: which published runs, cached model runs and scratch stores are deleted, and when.

The policy is written once here; what a run's publication time is, and how a run is deleted
without ever showing half-deleted under its id, is the backend's (``local.py``,
``objectstore.py``).
"""

from __future__ import annotations

import logging
import os
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
    ``(kind, model)`` the ``keep`` newest runs are kept, a run named in ``in_use`` counting
    among them whether it is in the cache yet or not (one about to be downloaded takes its
    place); then, while the runs left weigh more than ``max_bytes``, the oldest go first.
    Runs named in ``in_use`` (``(model, YYYYMMDDHH)``: the runs the cycle uses) are never
    removed. A run is renamed to a ``.trash-*`` name before it is deleted, so a source never
    finds it half-deleted under its own name.
    """
    return _retain_cache(Path(cache), keep, max_bytes, in_use)[0]


def _retain_cache(cache: Path, keep: int, max_bytes: int | None, in_use: Collection[tuple[str, str]],
                  sized: bool = False) -> tuple[list[Path], int]:
    """`retain_cache`, and the bytes of the runs left where they were summed (``max_bytes``
    given, or ``sized``; 0 otherwise): `make_room` needs them and need not walk the runs again."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    removed: list[Path] = []
    kept: list[Path] = []
    for model in sorted(p for p in cache.glob("*/*") if p.is_dir()):
        for leftover in model.glob(f"{TRASH_PREFIX}*"):  # an interrupted deletion
            shutil.rmtree(leftover, ignore_errors=True)
        found = {p.name: p for p in model.iterdir() if p.is_dir() and _CACHE_RUN_RE.match(p.name)}
        wanted = {run for m, run in in_use if m == model.name}
        for i, name in enumerate(sorted(found.keys() | wanted, reverse=True)):
            if name not in found:
                continue
            if i < keep or name in wanted:
                kept.append(found[name])
            else:
                remove_tree(found[name], model)
                removed.append(found[name])
    total = 0
    if max_bytes is not None or sized:
        sizes = {p: tree_bytes(p) for p in kept}
        total = sum(sizes.values())
        for p in sorted(kept, key=lambda p: p.name):  # oldest run first
            if max_bytes is None or total <= max_bytes:
                break
            if (p.parent.name, p.name) not in in_use:
                remove_tree(p, p.parent)
                removed.append(p)
                total -= sizes[p]
    for p in removed:
        log.info("cache retention removed %s", p)
    return removed, total


class NoRoom(RuntimeError):
    """A model run that cannot fit in the cache (`make_room`): it is not downloaded."""


FREE_MARGIN = 0.05  # of the cache's file system, left free beside the downloads ...
FREE_MARGIN_MIN_BYTES = 10**9  # ... and at least this: scratch stores and staging share it


def make_room(cache: Path | str, keep: int, max_bytes: int | None, in_use: Collection[tuple[str, str]],
              needed: int, what: str) -> list[Path]:
    """Before ``needed`` bytes of ``what`` (a model run) are downloaded into ``cache``: the
    cached runs no longer needed evicted (`retain_cache`: beyond the ``keep`` newest per
    model, counting the runs in ``in_use``, and oldest first while the runs left and
    ``needed`` weigh more than ``max_bytes``); return the paths removed. The runs in
    ``in_use``, this cycle's, stay. Raises `NoRoom`, saying which limit and by how much,
    when ``needed`` still exceeds ``max_bytes`` less the runs left, or the file system's
    free space less its margin (`FREE_MARGIN`)."""
    cache = Path(cache)
    removed, runs = _retain_cache(cache, keep, None if max_bytes is None else max(max_bytes - needed, 0), in_use,
                                  sized=needed > 0)
    if needed <= 0:
        return removed
    if max_bytes is not None and runs + needed > max_bytes:
        raise NoRoom(f"{what} needs {_gb(needed)} in the cache; [output] cache_max_gb = "
                     f"{max_bytes / 1e9:g} leaves {_gb(max(max_bytes - runs, 0))} beside the "
                     f"{_gb(runs)} of the runs this cycle uses: not downloaded")
    existing = next(p for p in (cache, *cache.parents) if p.exists())
    disk = shutil.disk_usage(existing)
    margin = max(int(disk.total * FREE_MARGIN), FREE_MARGIN_MIN_BYTES)
    if needed > disk.free - margin:
        raise NoRoom(f"{what} needs {_gb(needed)} in the cache; its file system ({existing}) has "
                     f"{_gb(disk.free)} free, {_gb(max(disk.free - margin, 0))} above the margin of "
                     f"{_gb(margin)} kept for scratch and staging: not downloaded")
    log.info("cache: %s to download for %s, %s of runs kept, %s free", _gb(needed), what, _gb(runs),
             _gb(disk.free))
    return removed


def _gb(n: float) -> str:
    return f"{n / 1e9:.3g} GB ({int(n)} bytes)"


def tree_bytes(path: Path) -> int:
    """The bytes of the files under ``path`` (links not followed; a file removed while the
    tree is walked counts nothing): the cache's runs, a published run, an archive store."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                continue
    return total


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
