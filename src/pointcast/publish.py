"""Validated, atomic publication of runs and the Zarr analytics archive.

Two independent halves live here.

**The run tree.** A cycle is written into a private staging directory, checked by the
validation stage (elsewhere), then made visible in one step::

    staging = new_run_dir(root, run_id)           # <root>/runs/.staging-<run_id>-<random>
    write_json_tree(staging, files)                # json/<relpath> (+ json/<relpath>.gz)
    publish_run(root, staging, run_id, manifest, validation, ok)
    retain(root, keep=8)

``publish_run`` renames the staging directory to ``<root>/runs/<run_id>`` and swaps the
``<root>/current`` symlink (relative target ``runs/<run_id>``) with ``os.replace`` of a freshly
made temporary symlink, so ``current`` always exists and always names a complete, validated run:
readers see either the previous run or the new one, never a mixture and never nothing. Files and
the directories holding them are fsync'd before the step that makes them visible. A refused run
(``ok=False``) is moved to ``<root>/runs/failed/<run_id>`` for inspection and never served. A
cycle that dies before ``publish_run`` leaves only a ``.staging-*`` directory, which ``retain``
removes once it is older than an hour.

Publication and retention take an exclusive lock (``<root>/runs/.lock``, ``flock``) so a
retention pass never races a publication.

**The archive.** ``append_archive`` keeps one Zarr v3 store per product,
``<root>/zarr/<product>.zarr``, with dims ``(init_time, point, lead_time[, height])``, one
``init_time`` entry per model cycle, readable with a single ``xr.open_zarr(path)`` (consolidated
metadata). See :func:`append_archive` for the append protocol and its crash-safety guarantees.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import ctypes
import json
import logging
import math
import os
import re
import secrets
import shutil
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
import zarr
from concurrent.futures import ThreadPoolExecutor
from isal import igzip
from zarr.codecs import BloscCodec
from zarr.storage import LocalStore

from . import faults, viewer

try:  # POSIX advisory locks; publication targets Linux hosts
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

__all__ = [
    "ArchiveError",
    "PublishError",
    "PublishRefused",
    "append_archive",
    "archive_stores",
    "carry_product",
    "current_run",
    "new_run_dir",
    "publish_run",
    "retain",
    "retain_cache",
    "write_json_tree",
    "TreeWriter",
    "StagedFiles",
]

RUNS = "runs"
CURRENT = "current"
FAILED = "failed"
JSON_DIR = "json"
ZARR_DIR = "zarr"
STAGING_PREFIX = ".staging-"
TRASH_PREFIX = ".trash-"
STALE_STAGING_SECONDS = 3600.0
# The .gz siblings: ISA-L's igzip at level 2 compresses a forecast file about 8 times faster
# than zlib at 6 and 7 times smaller than the JSON (zlib 6: 10 times), bench/README.md.
GZIP_LEVEL = 2
WRITE_THREADS = 2 * (os.cpu_count() or 1)
WRITE_QUEUE = 16  # batches rendered but not yet written, at most
WRITE_BATCH = (64, 4 << 20)  # files, bytes: a batch is one task of the write pool

INIT = "init_time"
POINT = "point"
LEAD = "lead_time"
HEIGHT = "height"
_AXIS_ORDER = (INIT, POINT, LEAD, HEIGHT)
# init_time is stored as int64 seconds since the epoch. The Zarr fill value of the array
# decodes to NaT, so an init_time slot that was reserved but never committed reads as NaT.
_TIME_UNITS = "seconds since 1970-01-01T00:00:00"
_TIME_FILL = np.iinfo(np.int64).min
# encoding keys of the render stage's variables that are kept when the store is created
_KEPT_ENCODING = ("dtype", "scale_factor", "add_offset", "_FillValue", "missing_value",
                  "units", "calendar", "compressors", "filters", "serializer")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,199}$")


class PublishError(RuntimeError):
    """The output tree is not in a state publication can work with."""


class PublishRefused(PublishError):
    """Validation failed: the run was kept under ``runs/failed/`` and not published."""

    def __init__(self, run_id: str, path: Path) -> None:
        super().__init__(f"run {run_id!r} failed validation; kept for inspection at {path}, "
                         f"'current' unchanged")
        self.run_id = run_id
        self.path = path


class ArchiveError(PublishError):
    """The Zarr archive could not be written or is not in the expected layout."""


# --------------------------------------------------------------------------------------------
# small file-system helpers
# --------------------------------------------------------------------------------------------

def _fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_bytes(path: Path | str, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to a new file and fsync it unless ``sync`` is False (the caller then syncs
    the file system, ``_sync_file_system``; the directory is fsync'd by the caller). Plain
    descriptors, no file object: a run is 200,000 small files, and a file object's set-up
    (and the GIL it takes back after each of its system calls) cost more than the writes."""
    view = memoryview(data)
    # One write; two when a fault is set at "write", for the crash in the middle of a file
    # (asked once: a look at the environment is a microsecond, and a run is a million files).
    armed = faults.armed("write")
    cut = len(view) // 2 if armed else len(view)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        _write_all(fd, view[:cut])
        if armed:
            faults.point("write")  # a crash or full disk in the middle of a file
        _write_all(fd, view[cut:])
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


_syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)


def _sync_file_system(path: Path) -> None:
    """Make every file written so far on the file system holding ``path`` durable at once
    (Linux ``syncfs``; ``sync`` elsewhere). For a run tree of tens of thousands of files one
    flush costs far less than an fsync each (2-3 ms a file on the benchmark machine)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs is None or _syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def _check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or name in (FAILED, CURRENT):
        raise ValueError(f"invalid {kind} {name!r}: use letters, digits and . _ : + -, "
                         f"starting with a letter or digit")
    return name


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as f:
        if fcntl is not None:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _remove_tree(path: Path, trash_dir: Path) -> None:
    """Remove a directory so that it never shows up half-deleted under its own name."""
    trash = trash_dir / f"{TRASH_PREFIX}{path.name}-{secrets.token_hex(4)}"
    os.rename(path, trash)
    _fsync_dir(path.parent)
    faults.point("trash")
    shutil.rmtree(trash, ignore_errors=True)


def _jsonable(obj: Any) -> Any:
    """Plain JSON types; non-finite floats become null so the file is valid JSON."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj
        return [_jsonable(v) for v in items]
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.datetime64):  # pointcast's datetime64 values are UTC
        return None if np.isnat(obj) else pd.Timestamp(obj).tz_localize("UTC").isoformat()
    if isinstance(obj, np.timedelta64):
        return None if np.isnat(obj) else pd.Timedelta(obj).isoformat()
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if obj is pd.NaT:
        return None
    if isinstance(obj, (_dt.datetime, _dt.date, pd.Timestamp)):
        return obj.isoformat()
    if isinstance(obj, (_dt.timedelta, pd.Timedelta)):
        return pd.Timedelta(obj).isoformat()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON: {obj!r}")


def _dump_json(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(_jsonable(obj), indent=2, sort_keys=True, ensure_ascii=False)
            + "\n").encode("utf-8")


# --------------------------------------------------------------------------------------------
# the run tree
# --------------------------------------------------------------------------------------------

def new_run_dir(root: Path | str, run_id: str) -> Path:
    """Create and return a private staging directory ``<root>/runs/.staging-<run_id>-<random>``.

    It lives in ``runs/`` so that publishing it is a rename on the same file system. It is
    never served; ``retain`` removes it when it is abandoned for more than an hour.
    """
    _check_name("run id", run_id)
    if is_url(root):
        return _url_new_run_dir(run_id)
    runs = Path(root) / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        path = runs / f"{STAGING_PREFIX}{run_id}-{secrets.token_hex(6)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        path.chmod(0o755)  # a static host serves the published tree as another user
        _fsync_dir(runs)
        return path
    raise PublishError(f"could not create a staging directory in {runs}")  # pragma: no cover


def _safe_relpath(rel: str) -> str:
    """``rel`` if it is a plain relative POSIX path (no empty, ``.`` or ``..`` parts, no
    backslash or NUL); ValueError otherwise."""
    if not isinstance(rel, str) or not rel:
        raise ValueError(f"invalid relative path {rel!r}")
    if "\\" in rel or "\x00" in rel:
        raise ValueError(f"invalid relative path {rel!r}: backslash or NUL")
    if rel.startswith("/"):
        raise ValueError(f"absolute path {rel!r} is not allowed")
    if any(p in ("", ".", "..") for p in rel.split("/")):
        raise ValueError(f"path {rel!r} must be a plain relative path (no '', '.', '..' parts)")
    return rel


def _check_file(rel: str, data, names, gzip: bool) -> str:
    """A file of a run tree: bytes, a plain relative path (``_safe_relpath``, returned) and,
    with gzip, no collision with the ``.gz`` sibling of another of ``names``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{rel}: expected bytes, got {type(data).__name__}")
    _safe_relpath(rel)
    gz = rel if rel.endswith(".gz") else rel + ".gz"
    if gzip and (gz[:-3] if gz == rel else gz) in names:
        raise ValueError(f"{gz!r} collides with the gzip sibling of {gz[:-3]!r}")
    return rel


class TreeWriter:
    """Writes a run's JSON tree into its staging directory while the products render it.

    Each file (and, with ``gzip``, its ``<relpath>.gz`` sibling: deterministic, no name, mtime
    0, for static hosts that serve precompressed files with ``Content-Encoding: gzip``) is
    written on a thread pool, compression and writes releasing the GIL, in batches of
    ``WRITE_BATCH`` (a task per file cost more in thread hand-overs than the writes), with at
    most ``WRITE_QUEUE`` batches waiting: memory holds a few batches, not the run (a run of
    10,000 points a list is tens of GB of JSON). Nothing is fsync'd per file; ``finish``
    flushes the file system once and fsyncs the tree's directories. ``files()`` gives a product its
    mapping of relative path -> bytes backed by this tree.

    ``threads=0`` writes each batch in the caller's thread: for a build process that is one of
    as many as there are cores, where a pool only adds GIL and lock hand-overs, and memory its
    threads free (the rendered bytes) goes back to the kernel to be faulted in again (a
    1,000-point build: 16.3 s -> 13.5 s, system time 12 s -> 7 s).
    """

    def __init__(self, staging: Path | str, gzip: bool = True, threads: int = WRITE_THREADS):
        self.staging = Path(staging)
        if not self.staging.is_dir():
            raise PublishError(f"staging directory {self.staging} does not exist")
        self.base = self.staging / JSON_DIR
        self.gzip = gzip
        self.names: set[str] = set()
        # Directories as strings: a run is 100,000 files a 1,000 points, and pathlib's parsing
        # of each path cost more than the checks.
        self._root = str(self.base)
        self._dirs: set[str] = {str(self.staging)}
        self._pool = ThreadPoolExecutor(max_workers=threads) if threads else None
        self._slots = threading.BoundedSemaphore(WRITE_QUEUE) if threads else None  # the pool's queue
        self._errors: list[BaseException] = []
        self._queued = False  # files queued since the last drain
        self._batch: list[tuple[str, bytes]] = []  # files not yet queued, and their bytes
        self._batch_bytes = 0

    def path(self, rel: str) -> Path:
        return self.base / _safe_relpath(rel)

    def put(self, rel: str, data: bytes) -> None:
        """Queue ``data`` for ``<staging>/json/<rel>`` (checked: empty, absolute, ``.``/``..``
        parts, backslashes and, with gzip, a name that collides with a ``.gz`` sibling raise
        ``ValueError``)."""
        path = f"{self._root}/{_check_file(rel, data, self.names, self.gzip)}"
        self._raise()
        parent = path.rpartition("/")[0]
        if parent not in self._dirs:
            os.makedirs(parent, exist_ok=True)
            while parent not in self._dirs:
                self._dirs.add(parent)
                parent = parent.rpartition("/")[0]
        self.names.add(rel)
        self._batch.append((path, bytes(data)))
        self._batch_bytes += len(data)
        if len(self._batch) >= WRITE_BATCH[0] or self._batch_bytes >= WRITE_BATCH[1]:
            self._submit()

    def _submit(self) -> None:
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        if self._pool is None:
            self._write(batch)
            return
        self._queued = True
        self._slots.acquire()
        self._pool.submit(self._write, batch).add_done_callback(self._done)

    def _write(self, batch: list[tuple[str, bytes]]) -> None:
        for path, data in batch:
            faults.point("json")
            _write_bytes(path, data, sync=False)
            if self.gzip:
                _write_bytes(path + ".gz", igzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0), sync=False)

    def _done(self, future) -> None:
        if not future.cancelled() and future.exception() is not None:
            self._errors.append(future.exception())
        self._slots.release()

    def _raise(self) -> None:
        if self._errors:
            raise self._errors[0]

    def drain(self) -> None:
        """Wait until every queued file is on disk (not yet durable); raise a write's error."""
        if self._batch:
            self._submit()
        if self._queued:
            for _ in range(WRITE_QUEUE):
                self._slots.acquire()
            for _ in range(WRITE_QUEUE):
                self._slots.release()
            self._queued = False
        self._raise()

    def finish(self) -> None:
        """Make the tree durable: every file written, the file system flushed, directories fsync'd."""
        self.close()
        _sync_file_system(self.staging)
        for d in sorted(self._dirs, key=lambda p: p.count("/"), reverse=True):
            _fsync_dir(d)

    def close(self) -> set[str]:
        """Wait until every queued file is on disk and stop writing: for a writer of one part
        of the run's tree (a slice of points, maybe in a forked process). Returns the
        directories it made, for the run's writer to make durable (``StagedFiles.adopt``)."""
        self.drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        return set(self._dirs)

    def adopt(self, names, dirs: set[str]) -> None:
        """Count the files (relative paths) and directories another writer made in this
        staging tree as this writer's: ``finish`` makes them durable with its own."""
        if clash := self.names & set(names):
            raise ValueError(f"{sorted(clash)[0]!r} was written twice")
        self.names.update(names)
        self._dirs.update(dirs)

    def abort(self) -> None:
        """Stop writing (the caller removes the staging tree)."""
        self._batch = []
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def files(self) -> "StagedFiles":
        return StagedFiles(self)


class StagedFiles(MutableMapping):
    """A product's files as they go into the staging tree: setting a path queues its bytes on
    the ``TreeWriter``; reading one reads it back from disk (the validation gate does, one file
    at a time). It holds paths, not bytes."""

    def __init__(self, writer: TreeWriter):
        self.writer = writer
        self._rels: dict[str, bool] = {}  # path -> whether its bytes hold a JSON null

    def __setitem__(self, rel: str, data: bytes) -> None:
        self.put(rel, data, b"null" in data)

    def put(self, rel: str, data: bytes, null: bool) -> None:
        """Set ``rel`` when the caller knows whether ``data`` holds a JSON null (a product
        does from the texts it rendered it from: products.base.Records.null), sparing a scan
        of its bytes."""
        self.writer.put(rel, data)
        self._rels[rel] = null

    def with_null(self) -> list[str]:
        """The files whose bytes hold ``null`` (noted as they passed: the validation gate
        need not read every file back to find them)."""
        return [rel for rel, null in self._rels.items() if null]

    def written(self) -> dict[str, bool]:
        """Path -> whether its bytes hold ``null``, of every file set here."""
        return dict(self._rels)

    def adopt(self, written: dict[str, bool], dirs: set[str]) -> None:
        """Take the files another writer put into the same staging tree (``written`` of its
        StagedFiles, the directories its ``close`` returned) as this mapping's own."""
        self.writer.adopt(written.keys(), dirs)
        self._rels.update(written)

    def __getitem__(self, rel: str) -> bytes:
        if rel not in self._rels:
            raise KeyError(rel)
        self.writer.drain()
        return self.writer.path(rel).read_bytes()

    def __contains__(self, rel) -> bool:
        return rel in self._rels

    def __delitem__(self, rel: str) -> None:
        raise TypeError("a staged file cannot be taken back")

    def __iter__(self):
        return iter(self._rels)

    def __len__(self) -> int:
        return len(self._rels)

    def __reduce__(self):
        """Pickled as a plain dict of the bytes (the crash tests replay the publish stage)."""
        return dict, (dict(self.items()),)


def write_json_tree(staging: Path | str, files: Mapping[str, bytes], gzip: bool = True) -> None:
    """Write ``files`` (relative path -> bytes) under ``<staging>/json/``, durable on return
    (``TreeWriter``; every path is checked before anything is written)."""
    for rel, data in files.items():
        _check_file(rel, data, files, gzip)
    writer = TreeWriter(staging, gzip)
    try:
        for rel, data in files.items():
            writer.put(rel, data)
        writer.finish()
    except BaseException:
        writer.abort()
        raise


def current_run(root: Path | str) -> str | None:
    """The run id ``<root>/current`` points to, or None when nothing is published yet."""
    if is_url(root):
        return _url_current_run(root)
    link = Path(root) / CURRENT
    try:
        target = os.readlink(link)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PublishError(f"{link} exists but is not a symlink") from e
    parts = PurePosixPath(target).parts
    if len(parts) != 2 or parts[0] != RUNS:
        raise PublishError(f"{link} -> {target!r}: expected 'runs/<run-id>'")
    return parts[1]


def carry_product(root: Path | str, writer: TreeWriter, product: str) -> dict | None:
    """Put the files of ``product`` of the served run into ``writer``'s staging tree, for a
    cycle that could not build it (the model reaching its horizon failed): its last good
    forecast stays served beside the products the cycle built. Local roots link the files
    (published files never change, and the staging tree is on the same file system), URL
    roots copy them. They are counted as ``writer``'s (``TreeWriter.adopt``), so ``finish``
    makes them durable with the rest; they were validated and archived when first published,
    and are neither again.

    Returns the served run's manifest entry of the product with ``carried_from`` (the run
    that built it: the served run, or the one it carried the product from), or None when
    nothing is served or the served run does not have the product."""
    run = current_run(root)
    if run is None:
        return None
    if is_url(root):
        fs, base = _fs(root)
        src = f"{base}/{RUNS}/{run}"
        try:
            entry = json.loads(fs.cat_file(f"{src}/manifest.json")).get("products", {}).get(product)
        except FileNotFoundError:
            return None
        tree = f"{src}/{JSON_DIR}/{product}"
        files = {p[len(tree) + 1:]: p for p in fs.find(tree)} if entry and fs.exists(tree) else {}
    else:
        src = Path(root) / RUNS / run
        entry = json.loads((src / "manifest.json").read_bytes()).get("products", {}).get(product)
        files = (_tree_files(src / JSON_DIR / product)
                 if entry and (src / JSON_DIR / product).is_dir() else {})
    if not files:
        return None
    dirs = {str(writer.staging), str(writer.base)}
    for rel, path in sorted(files.items()):
        dest = writer.path(f"{product}/{rel}")
        if str(dest.parent) not in dirs:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dirs.update(str(d) for d in dest.parents if writer.staging in d.parents)
        if is_url(root):
            fs.get_file(path, str(dest))
        else:
            try:
                os.link(path, dest)
            except OSError:  # a file system without hard links
                shutil.copyfile(path, dest)
    writer.adopt([f"{product}/{rel}" for rel in files if not (writer.gzip and rel.endswith(".gz"))],
                 dirs)
    log.info("%s: the files of run %s carried into the new run", product, run)
    return {**entry, "carried_from": entry.get("carried_from", run)}


def _swap_current(root: Path, run_id: str) -> None:
    link = root / CURRENT
    if link.exists() and not link.is_symlink():
        raise PublishError(f"{link} exists and is not a symlink; refusing to replace it")
    if not (root / RUNS / run_id).is_dir():  # never point at something missing
        raise PublishError(f"run directory {root / RUNS / run_id} does not exist")
    tmp = root / f"{CURRENT}.tmp-{secrets.token_hex(6)}"
    os.symlink(f"{RUNS}/{run_id}", tmp)
    try:
        faults.point("current-tmp")
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(root)


def _tree_files(base: Path) -> dict[str, Path]:
    """The files of a JSON tree but the viewer's (``add_viewer``: they name the attempt)."""
    out: dict[str, Path] = {}
    if base.is_dir():
        for dirpath, _dirs, names in os.walk(base):
            for name in names:
                p = Path(dirpath) / name
                rel = p.relative_to(base).as_posix()
                if rel.split("/", 1)[0] not in VIEWER_NAMES:
                    out[rel] = p
    return out


def _same_tree(a: Path, b: Path) -> bool:
    fa, fb = _tree_files(a), _tree_files(b)
    if fa.keys() != fb.keys():
        return False
    for rel, pa in fa.items():
        pb = fb[rel]
        if pa.stat().st_size != pb.stat().st_size or pa.read_bytes() != pb.read_bytes():
            return False
    return True


def publish_run(root: Path | str, staging: Path | str, run_id: str, manifest: Mapping[str, Any],
                validation: Mapping[str, Any], ok: bool) -> Path:
    """Finish a run: write its manifest and validation report and make it visible.

    ``manifest.json`` is ``manifest`` plus ``run_id`` and ``published_at`` (UTC ISO time) when
    the caller did not set them; ``validation.json`` is ``validation`` as given. Both are
    written into ``staging`` first (so a refused run keeps them too). Then:

    - ``ok`` false: staging moves to ``<root>/runs/failed/<run_id>`` (replacing an earlier
      failed attempt of the same run id), ``current`` is untouched, and
      :class:`PublishRefused` is raised.
    - ``ok`` true and ``runs/<run_id>`` new: staging is renamed to ``runs/<run_id>``.
    - ``ok`` true and ``runs/<run_id>`` already published (the same model runs processed
      again): the published directory is kept as it is and the staging copy discarded, so
      the served bytes (and ETags) do not change; a differing JSON tree is logged as a warning.

    A valid run's JSON tree also gets the viewer (:func:`add_viewer`). Finally ``current`` is
    swapped to ``runs/<run_id>`` atomically and the run directory is returned. ``staging``
    must come from :func:`new_run_dir` for the same ``root``.
    For a URL root see "object-store roots" below: the run is uploaded, then ``current`` written.
    """
    if is_url(root):
        return _url_publish_run(root, Path(staging), _check_name("run id", run_id), manifest,
                                validation, ok)
    root, staging = Path(root), Path(staging)
    _check_name("run id", run_id)
    runs = root / RUNS
    if (staging.parent.resolve() != runs.resolve()
            or not staging.name.startswith(f"{STAGING_PREFIX}{run_id}-")):
        raise ValueError(f"{staging} is not a staging directory of run {run_id!r} under {runs}")
    if not staging.is_dir():
        raise PublishError(f"staging directory {staging} does not exist")

    meta = dict(manifest)
    meta.setdefault("run_id", run_id)
    meta.setdefault("published_at",
                    _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat())
    _write_bytes(staging / "manifest.json", _dump_json(meta))
    _write_bytes(staging / "validation.json", _dump_json(validation))
    if ok:
        add_viewer(staging, meta, validation, runs)
    _fsync_dir(staging)
    faults.point("run-staged")

    with _locked(runs / ".lock"):
        if not ok:
            failed = runs / FAILED
            failed.mkdir(exist_ok=True)
            dest = failed / run_id
            if dest.exists():
                _remove_tree(dest, runs)
            os.rename(staging, dest)
            _fsync_dir(failed)
            _fsync_dir(runs)
            log.error("run %s failed validation; kept at %s", run_id, dest)
            raise PublishRefused(run_id, dest)

        dest = runs / run_id
        if dest.exists():
            if _same_tree(dest / JSON_DIR, staging / JSON_DIR):
                log.info("run %s was already published with identical files; keeping it", run_id)
            else:
                log.warning("run %s was already published with different files; keeping the "
                            "published run %s and discarding %s", run_id, dest, staging)
            _remove_tree(staging, runs)
        else:
            os.rename(staging, dest)
            _fsync_dir(runs)
        faults.point("run-renamed")
        _swap_current(root, run_id)
    log.info("published run %s (%s)", run_id, dest)
    return dest


# --------------------------------------------------------------------------------------------
# the viewer in the run tree (docs/viewer.md)
# --------------------------------------------------------------------------------------------

HISTORY_RUNS = 20  # cycles listed in a run's runs.json
HISTORY_ERRORS = 5  # validation errors quoted per refused cycle
VIEWER_NAMES = frozenset({viewer.PAGE, viewer.ASSETS, *viewer.RUN_FILES})


def add_viewer(staging: Path, manifest: Mapping[str, Any], validation: Mapping[str, Any],
               runs: Path | None) -> None:
    """Put the viewer at the root of a run's JSON tree, with the files its status page reads
    that live outside it (``manifest.json``, ``validation.json``) and ``runs.json``, the last
    cycles published or refused (``run_history``): a static host serving ``json/`` then shows
    the same pages as ``pointcast serve``."""
    base = staging / JSON_DIR
    entry = _history_entry(manifest.get("run_id"), manifest, validation)
    files = {**viewer.files(), "manifest.json": _dump_json(manifest),
             "validation.json": _dump_json(validation),
             viewer.HISTORY: _dump_json({"runs": run_history(runs, entry)})}
    dirs = set()
    for rel, data in files.items():
        path = base / rel
        if path.parent not in dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            dirs.add(path.parent)
        _write_bytes(path, data)
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        _fsync_dir(d)


def _history_entry(run_id: Any, manifest: Mapping[str, Any], validation: Mapping[str, Any]) -> dict:
    errors = validation.get("errors") or []
    products = manifest.get("products") or {}
    basetimes = sorted({str(p.get("basetime")) for p in products.values()
                        if isinstance(p, Mapping) and p.get("basetime")})
    entry = {"run_id": run_id, "status": "published" if validation.get("ok") else "failed",
             "time": manifest.get("published_at"), "basetime": basetimes[0] if basetimes else None,
             "dropped": manifest.get("dropped") or {}}
    if not validation.get("ok"):
        entry["errors"] = list(errors[:HISTORY_ERRORS])
        entry["error_count"] = len(errors)
    return entry


def run_history(runs: Path | None, newest: Mapping[str, Any]) -> list[dict]:
    """``newest`` and the cycles under ``runs`` (``runs/<id>`` published, ``runs/failed/<id>``
    refused by validation, with its first errors), newest first, `HISTORY_RUNS` at most; what each
    says is read from its ``manifest.json`` and ``validation.json``."""
    found = [dict(newest)]
    dirs = []
    if runs is not None and runs.is_dir():
        dirs = [p for p in runs.iterdir() if _NAME_RE.match(p.name) and p.name != FAILED]
        if (runs / FAILED).is_dir():
            dirs += list((runs / FAILED).iterdir())
    for path in dirs:
        try:
            manifest = json.loads((path / "manifest.json").read_bytes())
            validation = json.loads((path / "validation.json").read_bytes())
        except (OSError, ValueError):  # a run being removed, or never finished
            continue
        if isinstance(manifest, dict) and isinstance(validation, dict):
            manifest.setdefault("run_id", path.name)
            entry = _history_entry(manifest["run_id"], manifest, validation)
            if (entry["run_id"], entry["status"]) != (newest.get("run_id"), newest.get("status")):
                found.append(entry)
    found.sort(key=lambda e: str(e.get("time") or ""), reverse=True)
    return found[:HISTORY_RUNS]


def _published_at(path: Path) -> float:
    """When a run was finished: mtime of its manifest (written by publish_run)."""
    try:
        return (path / "manifest.json").stat().st_mtime
    except FileNotFoundError:
        return path.stat().st_mtime


def _newest_dir_mtime(path: Path) -> float:
    newest = path.stat().st_mtime
    for dirpath, _dirs, _files in os.walk(path):
        with contextlib.suppress(FileNotFoundError):
            newest = max(newest, os.stat(dirpath).st_mtime)
    return newest


def retain(root: Path | str, keep: int, *, stale_after: float = STALE_STAGING_SECONDS) -> list[Path]:
    """Delete old runs; return the paths removed.

    - Published runs: the ``keep`` most recently published ones are kept (by the time their
      ``manifest.json`` was written), ``current``'s run always among them, even when it is not
      one of the newest. ``keep`` counts ``current``. Keep at least 2 when readers may still
      hold the previous ``current`` for the length of a request.
    - Failed runs published before the oldest kept run are deleted.
    - Abandoned ``.staging-*`` directories whose newest directory mtime is older than
      ``stale_after`` seconds (an hour), leftovers of interrupted deletions, and temporary
      ``current.tmp-*`` links of an interrupted swap.

    A directory is renamed to a ``.trash-*`` name before it is deleted, so a half-deleted run
    never appears under its run id.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    if is_url(root):
        return _url_retain(root, keep)
    root = Path(root)
    runs = root / RUNS
    if not runs.is_dir():
        return []
    removed: list[Path] = []
    with _locked(runs / ".lock"):
        cur = current_run(root)
        published = [p for p in runs.iterdir()
                     if p.is_dir() and not p.is_symlink() and _NAME_RE.match(p.name)
                     and p.name != FAILED]
        published.sort(key=lambda p: (_published_at(p), p.name), reverse=True)
        kept = [p for p in published if p.name == cur]
        for p in published:
            if len(kept) >= keep:
                break
            if p.name != cur:
                kept.append(p)
        for p in published:
            if p not in kept:
                _remove_tree(p, runs)
                removed.append(p)
        if kept:
            oldest_kept = min(_published_at(p) for p in kept)
            failed = runs / FAILED
            if failed.is_dir():
                for p in sorted(failed.iterdir()):
                    if p.is_dir() and _published_at(p) < oldest_kept:
                        _remove_tree(p, runs)
                        removed.append(p)
        for p in root.glob(f"{CURRENT}.tmp-*"):  # left by a crash during a swap
            p.unlink(missing_ok=True)
        now = time.time()
        for p in sorted(runs.iterdir()):
            if p.name.startswith(TRASH_PREFIX):
                shutil.rmtree(p, ignore_errors=True)
            elif p.name.startswith(STAGING_PREFIX) and p.is_dir():
                if now - _newest_dir_mtime(p) > stale_after:
                    _remove_tree(p, runs)
                    removed.append(p)
    for p in removed:
        log.info("retention removed %s", p)
    return removed


_CACHE_RUN_RE = re.compile(r"^\d{10}$")  # <YYYYMMDDHH>


def retain_cache(cache: Path | str, keep: int, max_bytes: int | None = None,
                 in_use: set[tuple[str, str]] = frozenset()) -> list[Path]:
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
                _remove_tree(p, model)
                removed.append(p)
    if max_bytes is not None:
        sizes = {p: _tree_bytes(p) for p in kept}
        total = sum(sizes.values())
        for p in sorted(kept, key=lambda p: p.name):  # oldest run first
            if total <= max_bytes:
                break
            if (p.parent.name, p.name) not in in_use:
                _remove_tree(p, p.parent)
                removed.append(p)
                total -= sizes[p]
    for p in removed:
        log.info("cache retention removed %s", p)
    return removed


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


# --------------------------------------------------------------------------------------------
# the Zarr archive
# --------------------------------------------------------------------------------------------

class _DurableLocalStore(LocalStore):
    """LocalStore whose writes are atomic *and* durable: temp file, fsync, rename, fsync dir.

    Every chunk and metadata document is on disk before the next step of an append starts,
    so the commit (the consolidated root ``zarr.json``) can never become durable before the
    data it makes visible.
    """

    async def set(self, key: str, value: Any) -> None:
        if not self._is_open:
            await self._open()
        self._check_writable()
        await asyncio.to_thread(_durable_put, self.root / key, value.to_bytes())

    async def set_if_not_exists(self, key: str, value: Any) -> None:
        if not (self.root / key).exists():
            await self.set(key, value)


def _durable_put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(8)}.partial")
    try:
        _write_bytes(tmp, data)
        faults.point("zarr")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


# Chunks zarr encodes per step of its codec pipeline. At its default of one, every chunk is a
# round trip between the event loop and a worker thread: a 4,000-point eu-medium archive in
# 16-point chunks took 2.8 s to write, 1.9 s in batches (the same bytes).
CHUNK_BATCH = 64


@contextlib.contextmanager
def _zarr_settings() -> Iterator[None]:
    """zarr as the archive uses it: chunks encoded `CHUNK_BATCH` at a time, and without the
    warning that consolidated metadata is not in the v3 specification (readers rely on it)."""
    with warnings.catch_warnings(), zarr.config.set({"codec_pipeline.batch_size": CHUNK_BATCH}):
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")
        yield


def _store_path(root: Path, product: str, version: int) -> Path:
    name = f"{product}.zarr" if version == 1 else f"{product}.v{version}.zarr"
    return root / ZARR_DIR / name


def _store_versions(root: Path, product: str) -> list[tuple[int, Path]]:
    zdir = root / ZARR_DIR
    if not zdir.is_dir():
        return []
    pattern = re.compile(rf"^{re.escape(product)}(?:\.v(\d+))?\.zarr$")
    out = []
    for p in zdir.iterdir():
        m = pattern.match(p.name)
        if m and p.is_dir():
            out.append((int(m.group(1) or 1), p))
    return sorted(out)


def archive_stores(root: Path | str, product: str) -> list[Path]:
    """The product's archive stores, oldest version first (``<product>.zarr``,
    ``<product>.v2.zarr``, ...); the last one is the one being appended to."""
    _check_name("product", product)
    if is_url(root):
        return [u for _, u in _url_store_versions(root, product)]
    return [p for _, p in _store_versions(Path(root), product)]


def _open_committed(path: Path) -> xr.Dataset:
    try:
        with _zarr_settings():
            return xr.open_zarr(path, consolidated=True)
    except Exception as e:  # noqa: BLE001 - re-raised with the path and what is expected
        raise ArchiveError(f"{path}: cannot open as a consolidated Zarr archive: {e}") from e


def _canonical(ds: xr.Dataset) -> xr.Dataset:
    """Check the render stage's dataset and normalise dtypes and axis order."""
    for dim in (INIT, POINT, LEAD):
        if dim not in ds.dims:
            raise ValueError(f"archive dataset lacks dimension {dim!r} (has {tuple(ds.dims)})")
        if dim not in ds.indexes:
            raise ValueError(f"archive dataset lacks a {dim!r} coordinate")
    if ds.sizes[INIT] != 1:
        raise ValueError(f"archive dataset must hold exactly one init_time, got {ds.sizes[INIT]}")
    if not np.issubdtype(ds[INIT].dtype, np.datetime64):
        raise ValueError(f"init_time must be datetime64 (UTC), got {ds[INIT].dtype}")
    if not np.issubdtype(ds[LEAD].dtype, np.timedelta64):
        raise ValueError(f"lead_time must be timedelta64, got {ds[LEAD].dtype}")
    if np.isnat(ds[INIT].values).any():
        raise ValueError("init_time is NaT")
    for dim in ds.indexes:
        if not ds.indexes[dim].is_unique:
            raise ValueError(f"duplicate {dim!r} values in the archive dataset")

    ds = ds.assign_coords({
        INIT: ds[INIT].copy(data=ds[INIT].values.astype("datetime64[ns]")),
        LEAD: ds[LEAD].copy(data=ds[LEAD].values.astype("timedelta64[ns]")),
        # variable-length UTF-8 strings: the one string type with a Zarr v3 spec
        POINT: ds[POINT].copy(data=np.array([str(p) for p in ds[POINT].values], dtype=object)),
    })
    ds[INIT].attrs.setdefault("standard_name", "forecast_reference_time")
    ds[INIT].attrs.setdefault("long_name", "model initialisation time (UTC)")
    ds[LEAD].attrs.setdefault("standard_name", "forecast_period")
    ds[LEAD].attrs.setdefault("long_name", "time since init_time")
    ds[POINT].attrs.setdefault("long_name", "configured point id")
    if HEIGHT in ds.coords:
        ds[HEIGHT].attrs.setdefault("standard_name", "height")
        ds[HEIGHT].attrs.setdefault("units", "m")
        ds[HEIGHT].attrs.setdefault("positive", "up")
    order = [d for d in _AXIS_ORDER if d in ds.dims]
    return ds.transpose(*order, ...)


def _creation_encoding(ds: xr.Dataset, point_chunk: int | None) -> dict[str, dict[str, Any]]:
    enc: dict[str, dict[str, Any]] = {}
    for name, var in ds.variables.items():
        e = {k: v for k, v in var.encoding.items() if k in _KEPT_ENCODING}
        if name == INIT:
            e = {"units": _TIME_UNITS, "calendar": "proleptic_gregorian", "dtype": "int64",
                 "chunks": (1,), "_FillValue": _TIME_FILL, "fill_value": _TIME_FILL}
        elif name == LEAD:
            e = {"dtype": "int64"}
        elif INIT in var.dims:
            if var.dtype.kind in "fiu":
                e.setdefault("compressors", (ARCHIVE_CODEC,))
            chunks = [1 if d == INIT else var.sizes[d] for d in var.dims]
            if POINT in var.dims:
                # inner chunks: one init_time, a few points, the whole series (and all heights)
                # shards: one object per init_time and variable, holding every point
                ip = var.dims.index(POINT)
                npts = var.sizes[POINT]
                per_point = var.dtype.itemsize * math.prod(n for d, n in var.sizes.items()
                                                           if d not in (INIT, POINT))
                chunks[ip] = min(point_chunk or max(1, CHUNK_BYTES // max(per_point, 1)), npts)
                shards = list(chunks)
                shards[ip] = -(-npts // chunks[ip]) * chunks[ip]
                e["shards"] = tuple(shards)
            e["chunks"] = tuple(chunks)
        enc[name] = e
    return enc


def _incompatibility(arch: xr.Dataset, ds: xr.Dataset) -> str | None:
    """Why ``ds`` cannot be written into the archive ``arch`` (None when it can)."""
    if arch.attrs.get("synthetic") != ds.attrs.get("synthetic"):
        return (f"'synthetic' attribute differs (archive {arch.attrs.get('synthetic')!r}, "
                f"run {ds.attrs.get('synthetic')!r})")
    for dim in ds.dims:
        if dim == INIT:
            continue
        if dim not in arch.dims:
            return f"new dimension {dim!r}"
        if dim in ds.indexes:
            if dim not in arch.indexes:
                return f"dimension {dim!r} has no coordinate in the archive"
            extra = pd.Index(ds.indexes[dim]).difference(pd.Index(arch.indexes[dim]))
            if len(extra):
                return f"{len(extra)} {dim} value(s) not in the archive, e.g. {extra[0]!r}"
        elif ds.sizes[dim] != arch.sizes[dim]:
            return f"dimension {dim!r} has size {ds.sizes[dim]}, archive {arch.sizes[dim]}"
    for name, var in ds.variables.items():
        if name in ds.indexes:
            continue
        if name not in arch.variables:
            return f"new variable {name!r}"
        avar = arch.variables[name]
        if var.dims != avar.dims:
            return f"variable {name!r} has dims {var.dims}, archive {avar.dims}"
        if INIT not in var.dims:
            # static coordinates (lat, lon, name ...) must agree on the run's labels
            sel = {d: ds.indexes[d] for d in var.dims if d in ds.indexes}
            if not arch[name].sel(sel).variable.equals(var):
                return f"static variable {name!r} differs from the archive"
        elif var.dtype.kind not in "fcmMOSU":
            needs_pad = any(d in ds.indexes and not ds.indexes[d].equals(arch.indexes[d])
                            for d in var.dims if d != INIT)
            if needs_pad:
                return f"{var.dtype} variable {name!r} would need padding with a missing value"
    return None


def _fit(arch: xr.Dataset, ds: xr.Dataset) -> xr.Dataset:
    """Reindex ``ds`` onto the archive's axes (missing points/lead times become missing)."""
    indexers = {d: arch.indexes[d] for d in ds.dims
                if d != INIT and d in ds.indexes and not ds.indexes[d].equals(arch.indexes[d])}
    if not indexers:
        return ds
    fill: dict[Any, Any] = {}
    for name, var in ds.variables.items():
        if INIT in var.dims and name not in ds.indexes and var.dtype.kind in "OSU":
            fill[name] = ""
    # variables not named in ``fill`` get xarray's default missing value (NaN / NaT)
    return ds.reindex(indexers, fill_value=fill) if fill else ds.reindex(indexers)


def _init_arrays(group: zarr.Group) -> list[zarr.Array]:
    out = []
    for name, arr in group.arrays():
        dims = arr.metadata.dimension_names or ()
        if INIT in dims:
            if dims[0] != INIT:
                raise ArchiveError(f"array {name!r} does not have init_time as first dimension")
            out.append(arr)
    return out


def _reserve_slot(store: LocalStore, n: int) -> None:
    """Step 1: drop whatever an interrupted append left beyond the ``n`` committed entries,
    then grow every init_time array by one (the new slot reads as fill / NaT)."""
    group = zarr.open_group(store, mode="r+", use_consolidated=False)
    arrays = _init_arrays(group)
    for arr in arrays:
        if arr.shape[0] != n:
            arr.resize((n, *arr.shape[1:]))  # also deletes the chunks beyond n
    for arr in arrays:
        arr.resize((n + 1, *arr.shape[1:]))


def _write_slot(store: LocalStore, ds: xr.Dataset, n: int) -> None:
    """Step 2: the data (and any non-index variable along init_time) of slot ``n``."""
    slot = ds.drop_vars([k for k, v in ds.variables.items() if INIT not in v.dims or k == INIT])
    slot = slot.drop_encoding()
    slot.attrs = {}
    with _zarr_settings():
        slot.to_zarr(store, region={INIT: slice(n, n + 1)}, mode="r+", consolidated=False,
                     zarr_format=3)


def _write_init_time(store: LocalStore, value: np.datetime64, n: int) -> None:
    """Step 3: the init_time value of slot ``n`` (until then it reads as NaT)."""
    group = zarr.open_group(store, mode="r+", use_consolidated=False)
    arr = group[INIT]
    units = arr.attrs.get("units")
    calendar = arr.attrs.get("calendar", "proleptic_gregorian")
    num, _, _ = xr.coding.times.encode_cf_datetime(
        np.array([value], dtype="datetime64[ns]"), units, calendar, dtype=np.dtype(arr.dtype))
    arr[n:n + 1] = np.asarray(num, dtype=arr.dtype)


def _commit(store: LocalStore) -> None:
    """Step 4: rewrite the consolidated metadata (one atomic write of the root zarr.json),
    which is what makes the new length visible to ``xr.open_zarr``."""
    with _zarr_settings():
        zarr.consolidate_metadata(store)


def _create_store(path: Path, ds: xr.Dataset, point_chunk: int | None) -> None:
    """Write a new store under a temporary name, then rename it into place."""
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(6)}")
    try:
        with _zarr_settings():
            ds.to_zarr(_DurableLocalStore(tmp), mode="w-", consolidated=True, zarr_format=3,
                       encoding=_creation_encoding(ds, point_chunk))
        _move_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _move_into_place(tmp: Path, path: Path) -> None:
    os.rename(tmp, path)
    _fsync_dir(path.parent)


# The bytes (uncompressed) of a variable's archive chunk, which holds as many points as make
# them: a point's series of one cycle is one chunk read of a few hundred kB, and zarr's cost
# per chunk (~0.25 ms) stays small beside the compression. At a fixed 16 points the five
# archives of a 10,000-point cycle were 55,000 chunks and took 21 s to write (one-point
# chunks: ten times that).
CHUNK_BYTES = 256 << 10
# Blosc (a codec of the Zarr v3 core specification) with its byte shuffle in front of zstd
# at level 1: a 2,000-point eu-medium cycle is 155 MB written in 0.7 s, against 207 MB in
# 1.2 s with zarr's default zstd at level 3 alone (lossless either way).
ARCHIVE_CODEC = BloscCodec(cname="zstd", clevel=1, shuffle="shuffle")


def append_archive(root: Path | str, product: str, ds: xr.Dataset, *,
                   point_chunk: int | None = None) -> Path:
    """Append one model cycle (``init_time`` of length 1) to the product's Zarr archive.

    Returns the store holding that init_time. Layout: ``<root>/zarr/<product>.zarr``, Zarr
    format 3 with consolidated metadata, readable with one ``xr.open_zarr(path)``. Variables
    along ``init_time`` are stored as ``(init_time, point, lead_time[, height])`` in chunks of
    ``(1, point_chunk, all lead times[, all heights])`` (by default as many points as make
    `CHUNK_BYTES` of the variable) grouped in one shard per init_time and variable, so
    reading a point's series for many cycles touches one small chunk per cycle while each
    cycle is a handful of files. ``init_time`` is int64 seconds since 1970 (UTC).
    Attributes (CF and global) are those of the first cycle written to the store.

    **Idempotent.** An init_time already present in any version of the product's archive is
    not written again (logged, nothing changes): re-running a cycle never duplicates entries.

    **Changing axes.** The run is reindexed onto the store's ``point``/``lead_time``/``height``
    axes when its labels are a subset of them (dropped points, shorter horizon: the missing
    cells read as NaN). When it brings anything the store cannot hold -- a new point, a longer
    horizon, a new height or variable, a changed static coordinate (a point moved), a different
    ``synthetic`` flag -- a new store version is started, ``<product>.v2.zarr`` (then ``.v3``
    ...), with the run's own axes; earlier versions stay as they are and readable. A Zarr
    array cannot be extended along ``point`` without rewriting every cycle, and silently
    dropping the new point would lose data. :func:`archive_stores` lists the versions.

    **Crash safety.** The first write of a store goes to a hidden temporary directory renamed
    into place when complete, so a store exists fully or not at all. An append runs four
    steps, each write being a temp-file + fsync + rename:

    1. reserve: every init_time array is resized to committed length + 1 (after truncating
       leftovers of an earlier interrupted append);
    2. data: the new slot of every variable is written;
    3. init_time: the slot's coordinate value is written (before, it reads as NaT: the fill
       value of the init_time array decodes to NaT);
    4. commit: the consolidated metadata in the root ``zarr.json`` is rewritten in one atomic
       replace; it carries the array shapes ``xr.open_zarr`` uses.

    Guarantees: ``xr.open_zarr(path)`` (consolidated metadata, the default) sees exactly the
    committed cycles, each complete, whatever the instant of a crash; a crash leaves the
    previous view untouched and the next ``append_archive`` repairs the store (truncates and
    rewrites the slot). A reader bypassing consolidated metadata (``consolidated=False``) may
    see one extra trailing entry after a crash: complete if its init_time is set, NaT if not;
    such readers should use ``ds.sel(init_time=ds.init_time.notnull())``. Appends are
    serialised by a lock file ``<root>/zarr/.<product>.lock``; readers need no lock.
    """
    _check_name("product", product)
    if point_chunk is not None and point_chunk < 1:
        raise ValueError(f"point_chunk must be >= 1, got {point_chunk}")
    ds = _canonical(ds)
    if is_url(root):
        return _url_append_archive(root, product, ds, point_chunk)
    root = Path(root)
    value = ds[INIT].values[0]
    zdir = root / ZARR_DIR
    zdir.mkdir(parents=True, exist_ok=True)

    with _locked(zdir / f".{product}.lock"):
        for leftover in zdir.glob(f".{product}*.zarr.tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)  # an interrupted first write
        versions = _store_versions(root, product)
        for _, path in versions:
            with _open_committed(path) as arch:
                if (arch[INIT].values == value).any():
                    log.info("%s: init_time %s already archived in %s; nothing to do",
                             product, value, path.name)
                    return path

        if versions:
            version, path = versions[-1]
            with _open_committed(path) as arch:
                n = arch.sizes[INIT]
                latest = arch[INIT].values.max() if n else None
                reason = _incompatibility(arch, ds)
                fitted = None if reason else _fit(arch, ds)
            if fitted is not None:
                if latest is not None and value < latest:
                    log.warning("%s: init_time %s appended after later cycles (archive order "
                                "is append order)", product, value)
                fitted = fitted.load()
                store = _DurableLocalStore(path)
                _reserve_slot(store, n)
                _write_slot(store, fitted, n)
                _write_init_time(store, value, n)
                faults.point("zarr-commit")
                _commit(store)
                with _open_committed(path) as check:
                    if check.sizes[INIT] != n + 1 or check[INIT].values[-1] != value:
                        raise ArchiveError(f"{path}: append of {value} did not commit")
                log.info("%s: archived init_time %s in %s (%d cycles)", product, value,
                         path.name, n + 1)
                return path
            new = _store_path(root, product, version + 1)
            log.warning("%s: run %s does not fit %s (%s); starting %s", product, value,
                        path.name, reason, new.name)
        else:
            new = _store_path(root, product, 1)
        _create_store(new, ds.load(), point_chunk)
        log.info("%s: created %s with init_time %s", product, new.name, value)
        return new


# --------------------------------------------------------------------------------------------
# object-store roots (fsspec URLs)
# --------------------------------------------------------------------------------------------
#
# A root written as a URL (``s3://bucket/forecasts``, ``gs://...``, ``memory://...``,
# ``file:///srv/out``) is written through fsspec. Object stores have no rename and no
# symlink, so the protocol is: stage locally, upload the run's files under
# ``runs/<run_id>/`` (``manifest.json`` last: a run directory without it is incomplete), then
# write the small ``current`` object holding the run id. Each object is written whole (PUT),
# so a reader sees the previous or the new ``current``, and a run it names is complete; what
# is *not* atomic is the upload of a run tree (a reader listing ``runs/`` may see a run being
# uploaded; nothing names it until ``current`` does). There are no locks: one cycle writes a
# root at a time. The archive uses the same four append steps through zarr's FsspecStore;
# the first write of a store is not hidden behind a rename.


def is_url(root: Any) -> bool:
    """Whether an output root is an fsspec URL rather than a local path."""
    return isinstance(root, str) and "://" in root


def _fs(url: str):
    import fsspec

    fs, path = fsspec.core.url_to_fs(url, **_storage_options(url))
    return fs, path.rstrip("/")


def _storage_options(url: str) -> dict[str, Any]:
    return {"auto_mkdir": True} if url.split("://", 1)[0] in ("file", "local") else {}


def _url_new_run_dir(run_id: str) -> Path:
    """Local staging for a URL root (uploaded by ``publish_run``)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{run_id}-"))


def _url_current_run(root: str) -> str | None:
    fs, base = _fs(root)
    try:
        run_id = fs.cat_file(f"{base}/{CURRENT}").decode().strip()
    except FileNotFoundError:
        return None
    if not _NAME_RE.match(run_id):
        raise PublishError(f"{root}/{CURRENT} holds {run_id!r}: expected a run id")
    return run_id


def _url_upload(fs, staging: Path, dest: str) -> None:
    """Every file of ``staging`` under ``dest``, ``manifest.json`` last."""
    files = sorted((p for p in staging.rglob("*") if p.is_file()), key=lambda p: p.name == "manifest.json")
    rpaths = [f"{dest}/{p.relative_to(staging).as_posix()}" for p in files]
    for parent in sorted({r.rsplit("/", 1)[0] for r in rpaths}):
        fs.makedirs(parent, exist_ok=True)
    fs.put([str(p) for p in files[:-1]], rpaths[:-1])
    fs.put_file(str(files[-1]), rpaths[-1])


def _url_publish_run(root: str, staging: Path, run_id: str, manifest: Mapping[str, Any],
                     validation: Mapping[str, Any], ok: bool) -> str:
    if not staging.is_dir() or not staging.name.startswith(f"{STAGING_PREFIX}{run_id}-"):
        raise ValueError(f"{staging} is not a staging directory of run {run_id!r}")
    meta = dict(manifest)
    meta.setdefault("run_id", run_id)
    meta.setdefault("published_at", _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat())
    _write_bytes(staging / "validation.json", _dump_json(validation))
    _write_bytes(staging / "manifest.json", _dump_json(meta))
    if ok:
        add_viewer(staging, meta, validation, None)  # no history from an object store's listing
    fs, base = _fs(root)
    try:
        if not ok:
            dest = f"{base}/{RUNS}/{FAILED}/{run_id}"
            if fs.exists(dest):
                fs.rm(dest, recursive=True)
            _url_upload(fs, staging, dest)
            log.error("run %s failed validation; kept at %s", run_id, dest)
            raise PublishRefused(run_id, Path(dest))
        dest = f"{base}/{RUNS}/{run_id}"
        if fs.exists(f"{dest}/manifest.json"):
            log.info("run %s was already published; keeping it", run_id)
        else:
            if fs.exists(dest):  # an upload that died before its manifest
                fs.rm(dest, recursive=True)
            _url_upload(fs, staging, dest)
        fs.pipe_file(f"{base}/{CURRENT}", f"{run_id}\n".encode())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("published run %s (%s)", run_id, dest)
    return f"{root.rstrip('/')}/{RUNS}/{run_id}"


def _url_retain(root: str, keep: int) -> list[str]:
    """``retain`` for URL roots: runs ordered by their manifest's ``published_at``; an upload
    without a manifest is removed once a later run is published."""
    fs, base = _fs(root)
    runs = f"{base}/{RUNS}"
    if not fs.exists(runs):
        return []
    cur = _url_current_run(root)

    def published_at(path: str) -> str:
        try:
            return json.loads(fs.cat_file(f"{path}/manifest.json")).get("published_at", "")
        except FileNotFoundError:
            return ""

    entries = {p.rstrip("/").rsplit("/", 1)[-1]: p.rstrip("/") for p in fs.ls(runs, detail=False)}
    dated = {name: published_at(p) for name, p in entries.items()
             if name != FAILED and _NAME_RE.match(name)}
    order = sorted((n for n in dated if dated[n]), key=lambda n: (dated[n], n), reverse=True)
    kept = [n for n in order if n == cur] + [n for n in order if n != cur]
    kept = kept[:keep]
    removed = [n for n in dated if n not in kept and n != cur]
    for name in removed:
        fs.rm(entries[name], recursive=True)
    if kept and FAILED in entries:
        oldest = min(dated[n] for n in kept)
        for p in fs.ls(entries[FAILED], detail=False):
            if published_at(p.rstrip("/")) < oldest:
                fs.rm(p, recursive=True)
                removed.append(f"{FAILED}/{p.rstrip('/').rsplit('/', 1)[-1]}")
    for name in removed:
        log.info("retention removed %s/%s/%s", root, RUNS, name)
    return [f"{root.rstrip('/')}/{RUNS}/{n}" for n in removed]


def _url_store(url: str, read_only: bool = False):
    from zarr.storage import FsspecStore

    with warnings.catch_warnings():  # a synchronous file system is wrapped: fine here
        warnings.simplefilter("ignore")
        return FsspecStore.from_url(url, storage_options=_storage_options(url), read_only=read_only)


def _url_store_versions(root: str, product: str) -> list[tuple[int, str]]:
    fs, base = _fs(root)
    zdir = f"{base}/{ZARR_DIR}"
    if not fs.exists(zdir):
        return []
    pattern = re.compile(rf"^{re.escape(product)}(?:\.v(\d+))?\.zarr$")
    out = []
    for p in fs.ls(zdir, detail=False):
        m = pattern.match(p.rstrip("/").rsplit("/", 1)[-1])
        if m:
            name = p.rstrip("/").rsplit("/", 1)[-1]
            out.append((int(m.group(1) or 1), f"{root.rstrip('/')}/{ZARR_DIR}/{name}"))
    return sorted(out)


def _url_append_archive(root: str, product: str, ds: xr.Dataset, point_chunk: int | None) -> str:
    """``append_archive`` for URL roots: the same idempotence, versions and four append steps
    (the consolidated metadata, written last, is what readers see), without the lock."""
    value = ds[INIT].values[0]
    versions = _url_store_versions(root, product)
    for _, url in versions:
        with _open_committed(_url_store(url, read_only=True)) as arch:
            if (arch[INIT].values == value).any():
                log.info("%s: init_time %s already archived in %s; nothing to do", product, value, url)
                return url
    if versions:
        version, url = versions[-1]
        with _open_committed(_url_store(url, read_only=True)) as arch:
            n = arch.sizes[INIT]
            reason = _incompatibility(arch, ds)
            fitted = None if reason else _fit(arch, ds)
        if fitted is not None:
            store = _url_store(url)
            _reserve_slot(store, n)
            _write_slot(store, fitted.load(), n)
            _write_init_time(store, value, n)
            _commit(store)
            log.info("%s: archived init_time %s in %s (%d cycles)", product, value, url, n + 1)
            return url
        new = f"{root.rstrip('/')}/{ZARR_DIR}/{product}.v{version + 1}.zarr"
        log.warning("%s: run %s does not fit %s (%s); starting %s", product, value, url, reason, new)
    else:
        new = f"{root.rstrip('/')}/{ZARR_DIR}/{product}.zarr"
    with _zarr_settings():
        ds.load().to_zarr(_url_store(new), mode="w-", consolidated=True, zarr_format=3,
                          encoding=_creation_encoding(ds, point_chunk))
    log.info("%s: created %s with init_time %s", product, new, value)
    return new
