"""Fetching a run: its files (and model levels, and grid cell centres) into the cache.

``<cache>/http/<model>/<YYYYMMDDHH>/<path>`` holds the downloaded messages (``download``); a run
fully fetched gets a ``complete`` marker recording what was fetched, so a re-run finds the run
complete locally and sends no request for it. Before the rest, the model levels of a run are
planned from its HHL (``levels``). On an unstructured grid the cell-centre files are fetched
once per grid and kept by the grid's ``uuidOfHGrid`` in ``<cache>/http/grids/<uuid>/``: every
later run on that grid takes them from there. Files no mirror publishes are fields the tree
does not carry when every file of their field is missing on a one-file-per-field layout (they
are dropped with a note, and the cycle decides whether the model can do without them); any
other hole ends with ``SourceUnavailable``.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ...gribtable import GribField
from ...ingest import CellGridKey, index_file
from ..base import FetchedRun, Layout, ModelSpec, Need, RunRef, Size, Upstream, estimated_bytes
from .download import download_files, file_meta, ranges_json
from .files import RemoteFile, cell_centre_files, run_files
from .index import wanted_bytes, wanted_ranges
from .levels import plan_model_levels
from .progress import FetchProgress, logger as _logger
from .transport import BadDownload, Failed, SourceUnavailable, get, one_pass

if TYPE_CHECKING:
    from .settings import HttpSettings

UTC = UTC


def fetch_run(src: HttpSettings, run: RunRef, model: ModelSpec, cache: Path,
              need: Need | None = None) -> FetchedRun:
    """The files of ``run`` in ``cache``, fetched from ``src``'s mirrors where not there yet:
    the messages ``need`` reads (its steps only), every message of the table where None."""
    run, up, layout, init, files, run_dir = _run_plan(src, run, model, cache, need)
    marker = run_dir / "complete"
    record = _record(model, init, layout, files, need)
    what = f"{model.id} {init:%Y-%m-%d %H} UTC"
    cached = _cached(run, model, cache, files, run_dir, record, what, need)
    if cached is not None:
        return cached
    logger = _logger()
    centres = cell_centre_files(layout, init)
    progress = FetchProgress(f"{model.id} {init:%Y%m%d%H}", len(files) + len(centres), logger,
                             src.progress)
    deadline = src.deadline()
    used: dict[str, int] = {}

    try:
        with src.client() as client, ThreadPoolExecutor(
                src.connections, thread_name_prefix=f"fetch-{model.id}") as pool:
            def download(todo: list[tuple[RemoteFile, Path]]):
                return download_files(src, client, pool, model, up, layout, todo, deadline,
                                      progress, used, need)

            def get(fs: list[RemoteFile]) -> list[Path]:  # required files (the level plan)
                progress.total += len(fs)
                got, gone = download([(f, run_dir / f.path) for f in fs])
                if gone:
                    raise SourceUnavailable(f"{what}: {gone[0].path} is not published (not "
                                            f"found on any mirror)")
                return [got[f.path] for f in fs]

            plan = plan_model_levels(layout, model, init, run.steps, get)
            levels = () if plan is None else plan.hhl + tuple(get(list(plan.files)))
            got, absent = download([(f, run_dir / f.path) for f in files])
            hourly = hourly_only(model, files, absent)
            absent = [f for f in absent if f.path not in hourly]
            _check_absent(what, layout, files, absent)
            paths = tuple(got[f.path] for f in files if f.path in got and f.path not in hourly)
            grid = _cell_centres(centres, paths[0], Path(cache) / "http" / "grids", download,
                                 layout.compression)
    finally:
        progress.close()
    notes = _absent_notes(what, absent) + _hourly_notes(what, model, files, hourly)
    for note in notes:
        logger.warning("%s", note)
    if plan is not None:
        notes += (f"{model.id}: {plan.half_levels - 1} model levels; full levels "
                  f"{plan.full[0]}-{plan.full[-1]} span the hub heights (HHL)",)
    tmp = marker.with_name(f"complete.{os.getpid()}.tmp")
    grid_rel = [p.relative_to(Path(cache) / "http").as_posix() for p in grid]
    tmp.write_text(json.dumps(dict(record, grid=grid_rel, mirrors=used, bytes=progress.bytes,
                                   absent=[f.path for f in absent], hourly_only=sorted(hourly),
                                   levels=[p.relative_to(run_dir).as_posix() for p in levels]))
                   + "\n")
    os.replace(tmp, marker)
    paths = grid + paths + levels
    note = (f"{what} ({layout.name}): {len(paths)} files, "
            f"{progress.bytes / 1e6:.1f} MB downloaded from "
            f"{', '.join(f'{m} ({n})' for m, n in used.items()) or 'nowhere'}, "
            f"{progress.cached} from the cache; {up.licence}")
    logger.info("%s", note)
    return FetchedRun(run=run, files=paths, notes=(note, *notes), need=need)


def run_size(src: HttpSettings, run: RunRef, model: ModelSpec, cache: Path,
             need: Need | None = None) -> Size:
    """The bytes `fetch_run` with the same ``need`` would write for ``run`` (its files and
    steps, `_run_plan`): none when the run is in the cache; per file, none when its messages
    are, the lengths the upstream's index (read now, one request a file) gives the messages
    of the rows ``need`` reads at its step where it has one, and its share of the run's
    `estimated_bytes` otherwise (no index, or none of the mirrors gave it). The model levels
    a run's HHL chooses (ICON's hub-height winds) are counted at `RUN_LEVELS_GUESS`."""
    run, up, layout, init, files, run_dir = _run_plan(src, run, model, cache, need)
    if _cached(run, model, cache, files, run_dir, _record(model, init, layout, files, need), "", need) is not None:
        return Size(0, "cached")
    share = estimated_bytes(model, run.steps, need) // max(len(files), 1)

    def one(f: RemoteFile) -> tuple[int, bool]:  # (bytes, known from the index)
        dest = run_dir / f.path
        rows = None if need is None else need.rows_at(round(f.first_step_h * 60))
        if f.index_path is None:
            return (0, True) if dest.exists() and file_meta(dest.with_name(dest.name + ".json")).get(
                "bytes") == dest.stat().st_size else (share, False)
        def read(mirror) -> str:
            url = f"{mirror.url}/{f.index_path}"
            src.read_indexes[url] = text = get(client, url).text
            return text

        try:
            text = one_pass(f.index_path, up.mirrors, read)
            ranges = wanted_ranges(model, up, layout, text, rows)
        except (Failed, BadDownload):
            return share, False
        if dest.exists() and file_meta(dest.with_name(dest.name + ".json")).get("ranges") == ranges_json(ranges):
            return 0, True
        return wanted_bytes(model, up, layout, text, rows)[1], True

    with src.client() as client, ThreadPoolExecutor(
            src.connections, thread_name_prefix=f"size-{model.id}") as pool:
        sizes = list(pool.map(one, files))
    known = {k for _, k in sizes}
    return Size(sum(n for n, _ in sizes), "index" if known == {True} else
                "estimate" if known == {False} else "index and estimate")


def _run_plan(src: HttpSettings, run: RunRef, model: ModelSpec, cache: Path, need: Need | None
              ) -> tuple[RunRef, Upstream, Layout, datetime, list[RemoteFile], Path]:
    """The run cut to the steps ``need`` reads, its upstream table, layout, start, files (on a
    one-file-per-field layout only those of the rows ``need`` reads at each step) and
    directory in ``cache``: what `fetch_run` fetches and `run_size` counts."""
    if need is not None:
        run = replace(run, steps=need.steps(run.steps))
    if run.model != model.id:
        raise ValueError(f"run of {run.model!r} fetched as model {model.id!r}")
    up = src.upstream(model)
    layout_name = run.source.rpartition("/")[2]
    layouts = {lay.name: lay for lay in up.layouts}
    if layout_name not in layouts:
        raise ValueError(f"run source {run.source!r} names no layout of {model.id} "
                         f"({sorted(layouts)})")
    layout = layouts[layout_name]
    init = run.init.astimezone(UTC)
    return (run, up, layout, init, run_files(layout, model, init, run.steps, need),
            Path(cache) / "http" / model.id / f"{init:%Y%m%d%H}")


def _record(model: ModelSpec, init: datetime, layout: Layout, files: list[RemoteFile],
            need: Need | None) -> dict:
    """What a run's ``complete`` marker records of what was asked for (with the last step
    ``need`` reads each row at: a change fetches anew)."""
    return {"model": model.id, "init": init.isoformat(), "layout": layout.name,
            "files": [f.path for f in files], "fields": _fields_key(model.fields, need)}


def _cached(run: RunRef, model: ModelSpec, cache: Path, files: list[RemoteFile], run_dir: Path,
            record: dict, what: str, need: Need | None) -> FetchedRun | None:
    """The run from the cache when its ``complete`` marker records ``record`` and its files
    are all there."""
    try:
        done = json.loads((run_dir / "complete").read_text())
    except (OSError, ValueError):
        return None
    left_out = set(done.get("absent", [])) | set(done.get("hourly_only", []))
    paths = tuple(Path(cache) / "http" / p for p in done.get("grid", [])) \
        + tuple(run_dir / p for p in record["files"] if p not in left_out) \
        + tuple(run_dir / p for p in done.get("levels", []))
    if {k: done.get(k) for k in record} != record or not all(p.exists() for p in paths):
        return None
    hourly = set(done.get("hourly_only", []))
    return FetchedRun(run=run, files=paths, notes=(
        f"{what}: {len(paths)} files from the cache ({done.get('mirrors')})",
        *_absent_notes(what, [f for f in files if f.path in left_out and f.path not in hourly]),
        *_hourly_notes(what, model, files, hourly)), need=need)


def _cell_centres(files: dict[str, RemoteFile], first: Path, grids: Path,
                  download, compression: str | None) -> tuple[Path, ...]:
    """The cell-centre ``files`` (``cell_centre_files``) of the unstructured grid the run's
    ``first`` file is on: from ``grids/<uuidOfHGrid>/`` when an earlier run fetched them,
    otherwise fetched into it with ``download`` (``download.download_files``). () on a regular
    grid."""
    grid = index_file(first)[0].grid if files else None
    if not isinstance(grid, CellGridKey):
        return ()
    suffix = ".grib2.bz2" if compression == "bz2" else ".grib2"  # kept as the tree stores them
    todo = [(f, grids / grid.uuid / f"{param}{suffix}") for param, f in files.items()]
    got, absent = download(todo)
    if absent:
        raise SourceUnavailable(f"{absent[0].path}: the cell centres of grid {grid.uuid} are not "
                                f"published (not found on any mirror)")
    out = []
    for f, dest in todo:
        got_grid = index_file(dest)[0].grid
        if got_grid != grid:
            dest.unlink()
            raise SourceUnavailable(f"{f.path}: cell centres of grid {got_grid}, the run's fields "
                                    f"are on grid {grid}")
        out.append(dest)
    return tuple(out)


def _check_absent(what: str, layout: Layout, files: list[RemoteFile],
                  absent: list[RemoteFile]) -> None:
    """Files of a run found complete that no mirror has (``absent``) are fields the tree
    does not publish when, on a one-file-per-field layout, every file of their field is
    absent (those are dropped: `_absent_notes`). Anything else is a run with holes: raise
    ``SourceUnavailable``, which drops the model from the cycle."""
    if not absent:
        return
    if layout.path_vars is None:
        raise SourceUnavailable(f"{what}: {absent[0].path} is not published (not found on any "
                                f"mirror, while the run's last step is)"
                                + (f", nor {len(absent) - 1} more files" if len(absent) > 1 else ""))
    planned: dict[str, int] = {}
    for f in files:
        planned[f.field] = planned.get(f.field, 0) + 1
    missing: dict[str, list[RemoteFile]] = {}
    for f in absent:
        missing.setdefault(f.field, []).append(f)
    for field_, gone in missing.items():
        if len(gone) != planned[field_]:
            raise SourceUnavailable(f"{what}: {field_}: {len(gone)} of its {planned[field_]} files "
                                    f"are not published (not found on any mirror), e.g. "
                                    f"{gone[0].path}")
    if len(absent) == len(files):
        raise SourceUnavailable(f"{what}: none of the run's files is published")


def hourly_only(model: ModelSpec, files: list[RemoteFile], absent: list[RemoteFile]) -> set[str]:
    """The sub-hourly files of the run to leave out (paths) where a field's sub-hourly files
    are missing while its hourly ones are there (a tree that publishes a field hourly only,
    ICON-D2's snow for one): the field is read from its hourly files. So are the fields it
    is summed with into one variable (SNOW_GSP + SNOW_CON): a sum of a quarter-hour and an
    hourly amount is neither. The variable is then resampled from hourly intervals."""
    sub_hourly = [f for f in files if f.param and (f.first_step_h * 60) % 60]
    gone = {f.param for f in absent if (f.first_step_h * 60) % 60}
    if not gone or any(f.param in gone for f in absent if not (f.first_step_h * 60) % 60):
        return set()  # a field missing at whole hours too is no hourly field: `_check_absent`
    rows = [r for r in model.fields if r.fine]
    params = set(gone)
    while True:  # the fields summed into a variable with one already hourly, and so on
        variables = {r.var for r in rows if (r.param or r.shortName) in params}
        wider = params | {r.param or r.shortName for r in rows if r.var in variables}
        if wider == params:
            break
        params = wider
    return {f.path for f in sub_hourly if f.param in params}


def _hourly_notes(what: str, model: ModelSpec, files: list[RemoteFile], hourly: set[str]) -> tuple[str, ...]:
    """What `hourly_only` left out, for the manifest."""
    if not hourly:
        return ()
    params = sorted({f.param for f in files if f.path in hourly})
    return (f"{what}: the sub-hourly files of {', '.join(params)} are not all published: "
            f"{len(hourly)} left out, their hourly files used (the variables they make are "
            f"resampled from hourly intervals)",)


def _absent_notes(what: str, absent: list[RemoteFile]) -> tuple[str, ...]:
    """What the fetch of a run dropped: the fields the tree does not publish."""
    fields: dict[str, int] = {}
    for f in absent:
        fields[f.field] = fields.get(f.field, 0) + 1
    if not fields:
        return ()
    return (f"{what}: not published by the tree (not found on any mirror while the run's "
            f"other fields are), dropped: "
            + ", ".join(f"{k} ({n} file{'s' * (n > 1)})" for k, n in fields.items()),)


def _fields_key(fields: tuple[GribField, ...], need: Need | None) -> str:
    """The table's rows (and the last step ``need`` reads each at): a change fetches anew."""
    last = {} if need is None else dict(need.rows)
    return json.dumps([[r.shortName, r.typeOfLevel, r.levels, r.processing.value, r.param]
                       + ([last.get(r, -1)] if need is not None else [])
                       for r in fields])

