"""A cycle's publication steps: the staged JSON tree made durable and the run's archives
appended side by side, then the run made visible (or kept aside), then retention; and the
clean-up of a cycle that fails on the way (docs/contracts.md, "Crash safety")."""

from __future__ import annotations

import errno
import logging
import shutil
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import dask

from ..config import Config
from .archive import append_archive, retain_archive
from .backend import PublishError
from .retention import retain, retain_cache
from .stage import remove_stage
from .staging import StagedFiles, TreeWriter
from .tree import new_run_dir, publish_run, serves_newer

APPENDS = 2  # products' archives appended at once


def publish_cycle(cfg: Config, run_id: str, outputs: Mapping[str, Any], report: dict, manifest: dict,
                  log: logging.Logger | logging.LoggerAdapter) -> Path:
    """Make the JSON tree durable and archive a valid run, side by side, then make it visible
    (or keep it aside).

    The products' files are in a staging tree already when they were built into one
    (`StagedFiles`); otherwise (the publish stage replayed on its own) they are staged here.
    Their archives are the run's staged ones (`stage.ArchiveStage`), appended shard by
    shard, and removed from the staging tree before it is published or kept aside.
    The archive is appended before `current` moves, so a served run is always archived: a
    crash in between leaves the run archived but not served, and the re-run publishes it
    (appends are idempotent). On any error the staging tree is removed (a full disk gets its
    space back) and `current` is untouched; docs/contracts.md, "Crash safety". ``outputs``:
    the products' `ProductOutput`s, by product."""
    root = cfg.output.root
    writers = {id(out.files.writer): out.files.writer for out in outputs.values()
               if isinstance(out.files, StagedFiles)}
    if writers:
        (writer,) = writers.values()
    else:
        writer = TreeWriter(new_run_dir(root, run_id), cfg.output.json)
    with cleaned_up(writer, root, run_id):
        for out in outputs.values():
            if not isinstance(out.files, StagedFiles):
                for rel, data in out.files.items():
                    writer.put(rel, data)
        start = time.perf_counter()
        # The tree's flush waits on the disk and the appends compress: side by side, the
        # run is published when both are done (a crash between leaves it at most archived).
        with ThreadPoolExecutor(max_workers=1) as flush:
            durable = flush.submit(_timed, writer.finish)
            if report["ok"]:
                # Each product's archive is a store of its own: `APPENDS` of them are appended
                # at once, sharing `[dask] workers` threads (a thread holds a shard and the
                # staged chunks it reads: dask would give each append a pool of them all).
                with (ThreadPoolExecutor(max_workers=APPENDS) as appends,
                      dask.config.set(num_workers=max(1, cfg.dask.workers // APPENDS))):
                    for done in [appends.submit(append_archive, root, pid, out.archive)
                                 for pid, out in outputs.items()]:
                        done.result()
            appended = time.perf_counter() - start
            flushed = durable.result()
        log.info("run %s: files durable in %.1f s, archives appended in %.1f s (side by side)",
                       run_id, flushed, appended)
        remove_stage(writer.staging)
        serve = not serves_newer(root, manifest)
        if not serve:
            log.info("run %s (made at %s) is published and archived; the served run is newer and stays "
                     "served", run_id, manifest["created"])
        path = publish_run(root, writer.staging, run_id, manifest, report, report["ok"], writer.mode, serve)
    retain(root, cfg.output.keep_runs)
    if cfg.output.archive_keep_days is not None:
        for pid in outputs:
            try:
                retain_archive(root, pid, cfg.output.archive_keep_days)
            except Exception as exc:  # noqa: BLE001 - the run is published: the next cycle tries again
                log.error("%s: archive retention failed, the archive is unchanged: %s", pid, exc)
    in_use = {(m, f"{datetime.fromisoformat(info['init']):%Y%m%d%H}")
              for m, info in manifest["models"].items() if info.get("init")}
    cap = cfg.output.cache_max_gb
    retain_cache(cfg.output.cache_dir, cfg.output.keep_cache_runs,
                         None if cap is None else int(cap * 1e9), in_use)
    log.info("published run %s at %s", run_id, path)
    return path


def _timed(fn) -> float:
    """Seconds ``fn()`` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@contextmanager
def cleaned_up(writer: TreeWriter, root, run_id: str) -> Iterator[None]:
    """On any error, or a stop (SIGTERM, SIGINT: `pointcast.stopping`): stop the writer, remove
    its staging tree and the staged archives in it (a full disk gets its space back; gone
    already when published or kept aside), name a full disk as such."""
    try:
        yield
    except BaseException as e:  # a signal's exception too: nothing partial is left behind
        writer.abort()
        shutil.rmtree(writer.staging, ignore_errors=True)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            raise PublishError(f"output disk full under {root}: {e}; run {run_id} not "
                                       f"published, the served run is unchanged") from e
        raise
