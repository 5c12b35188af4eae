"""The backend of a local output root: rename, symlink swap, ``flock`` and fsync.

A run becomes visible by ``os.rename`` of its staging directory to ``runs/<run_id>`` and an
``os.replace`` of a fresh temporary symlink over ``current`` (relative target
``runs/<run_id>``), so ``current`` always exists once a run is published and always names a
complete, validated run. Files and the directories holding them are fsync'd before the step
that makes them visible. Publication, retention and each product's archive appends take an
exclusive lock (``runs/.lock``, ``zarr/.<product>.lock``), so retention never races a
publication. A cycle that dies before publication leaves only a ``.staging-*`` directory,
which retention removes once it is older than an hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from zarr.storage import LocalStore

from .. import faults, viewer
from ..locks import locked
from .backend import (
    CURRENT,
    FAILED,
    JSON_DIR,
    MANIFEST,
    NAME_RE,
    RUNS,
    STAGING_PREFIX,
    TRASH_PREFIX,
    ZARR_DIR,
    Backend,
    PublishError,
    PublishRefused,
    store_name,
    store_version,
)
from .durable import check_writable, fsync_dir, remove_tree, write_bytes

log = logging.getLogger(__name__)

# The viewer's files at the top of a run's JSON tree name the attempt that wrote them, so two
# trees of the same run are compared, and a product carried, without them.
VIEWER_NAMES = frozenset({viewer.PAGE, viewer.ASSETS, *viewer.RUN_FILES})


class LocalBackend(Backend):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs = root / RUNS
        self.zarr = root / ZARR_DIR

    # ---- the run tree -----------------------------------------------------------------------

    def check_writable(self) -> None:
        """The root, and its runs and archives where they exist, each take a new file."""
        for path in (self.root, self.runs, self.zarr):
            if path is self.root or path.exists() or path.is_symlink():
                check_writable(path, "output root" if path is self.root else "output directory")

    def new_staging(self, run_id: str) -> Path:
        self.runs.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            path = self.runs / f"{STAGING_PREFIX}{run_id}-{secrets.token_hex(6)}"
            try:
                path.mkdir()
            except FileExistsError:
                continue
            path.chmod(0o755)  # a static host serves the published tree as another user
            fsync_dir(self.runs)
            return path
        raise PublishError(f"could not create a staging directory in {self.runs}")  # pragma: no cover

    def check_staging(self, staging: Path, run_id: str) -> None:
        # in runs/, so that publishing it is a rename on the same file system
        if (staging.parent.resolve() != self.runs.resolve()
                or not staging.name.startswith(f"{STAGING_PREFIX}{run_id}-")):
            raise ValueError(f"{staging} is not a staging directory of run {run_id!r} under {self.runs}")
        if not staging.is_dir():
            raise PublishError(f"staging directory {staging} does not exist")

    @property
    def history_dir(self) -> Path:
        return self.runs

    def current(self) -> str | None:
        link = self.root / CURRENT
        try:
            target = os.readlink(link)
        except (FileNotFoundError, NotADirectoryError):  # nothing published (or no root) yet
            return None
        except OSError as e:
            raise PublishError(f"{link} exists but is not a symlink") from e
        parts = PurePosixPath(target).parts
        if len(parts) != 2 or parts[0] != RUNS:
            raise PublishError(f"{link} -> {target!r}: expected 'runs/<run-id>'")
        return parts[1]

    def run_manifest(self, run_id: str) -> dict | None:
        try:
            return json.loads((self.runs / run_id / MANIFEST).read_bytes())
        except FileNotFoundError:
            return None

    def product_files(self, run_id: str, product: str) -> dict[str, Path]:
        return _tree_files(self.runs / run_id / JSON_DIR / product)

    def copy_file(self, source: Path, dest: Path) -> None:
        # published files never change, and the staging tree is on the same file system
        try:
            os.link(source, dest)
        except OSError:  # a file system without hard links
            shutil.copyfile(source, dest)

    def commit_run(self, staging: Path, run_id: str, ok: bool, serve: bool = True) -> Path:
        runs = self.runs
        with self.lock():
            if not ok:
                failed = runs / FAILED
                failed.mkdir(exist_ok=True)
                dest = failed / run_id
                if dest.exists():
                    remove_tree(dest, runs)
                os.rename(staging, dest)
                fsync_dir(failed)
                fsync_dir(runs)
                log.error("run %s failed validation; kept at %s", run_id, dest)
                raise PublishRefused(run_id, dest)

            dest = runs / run_id
            if dest.exists():
                if _same_tree(dest / JSON_DIR, staging / JSON_DIR):
                    log.info("run %s was already published with identical files; keeping it", run_id)
                else:
                    log.warning("run %s was already published with different files; keeping the "
                                "published run %s and discarding %s", run_id, dest, staging)
                remove_tree(staging, runs)
            else:
                os.rename(staging, dest)
                fsync_dir(runs)
            faults.point("run-renamed")
            if serve:
                self._swap_current(run_id)
        return dest

    def _swap_current(self, run_id: str) -> None:
        link = self.root / CURRENT
        if link.exists() and not link.is_symlink():
            raise PublishError(f"{link} exists and is not a symlink; refusing to replace it")
        if not (self.runs / run_id).is_dir():  # never point at something missing
            raise PublishError(f"run directory {self.runs / run_id} does not exist")
        tmp = self.root / f"{CURRENT}.tmp-{secrets.token_hex(6)}"
        os.symlink(f"{RUNS}/{run_id}", tmp)
        try:
            faults.point("current-tmp")
            os.replace(tmp, link)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(self.root)

    # ---- retention ---------------------------------------------------------------------------

    def lock(self) -> contextlib.AbstractContextManager:
        return locked(self.runs / ".lock")

    def has_runs(self) -> bool:
        return self.runs.is_dir()

    def published_runs(self) -> dict[str, float]:
        return {p.name: _published_at(p) for p in self.runs.iterdir()
                if p.is_dir() and not p.is_symlink() and NAME_RE.match(p.name) and p.name != FAILED}

    def failed_runs(self) -> dict[str, float]:
        failed = self.runs / FAILED
        if not failed.is_dir():
            return {}
        return {p.name: _published_at(p) for p in sorted(failed.iterdir()) if p.is_dir()}

    def remove_run(self, run_id: str, failed: bool = False) -> Path:
        path = self.runs / FAILED / run_id if failed else self.runs / run_id
        remove_tree(path, self.runs)
        return path

    def sweep(self, stale_after: float) -> list[Path]:
        for p in self.root.glob(f"{CURRENT}.tmp-*"):  # left by a crash during a swap
            p.unlink(missing_ok=True)
        removed = []
        now = time.time()
        for p in sorted(self.runs.iterdir()):
            if p.name.startswith(TRASH_PREFIX):  # an interrupted deletion
                shutil.rmtree(p, ignore_errors=True)
            elif p.name.startswith(STAGING_PREFIX) and p.is_dir():
                if now - _newest_dir_mtime(p) > stale_after:
                    remove_tree(p, self.runs)
                    removed.append(p)
        return removed

    # ---- the Zarr archive --------------------------------------------------------------------

    @contextlib.contextmanager
    def archive_lock(self, product: str) -> Iterator[None]:
        self.zarr.mkdir(parents=True, exist_ok=True)
        with locked(self.zarr / f".{product}.lock"):
            for leftover in self.zarr.glob(f".{product}*.zarr.tmp-*"):
                shutil.rmtree(leftover, ignore_errors=True)  # an interrupted first write
            yield

    def store_versions(self, product: str) -> list[tuple[int, Path]]:
        if not self.zarr.is_dir():
            return []
        found = ((store_version(product, p.name), p) for p in self.zarr.iterdir() if p.is_dir())
        return sorted((v, p) for v, p in found if v is not None)

    def store_location(self, product: str, version: int) -> Path:
        return self.zarr / store_name(product, version)

    def reader(self, location: Path) -> Path:
        return location

    def writer(self, location: Path) -> LocalStore:
        return _DurableLocalStore(location)

    def create_store(self, location: Path, write: Callable[[Any], None]) -> None:
        """Written under a hidden temporary name, then renamed into place: a store exists
        whole or not at all."""
        tmp = location.with_name(f".{location.name}.tmp-{secrets.token_hex(6)}")
        try:
            write(_DurableLocalStore(tmp))
            _move_into_place(tmp, location)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


    def remove_store(self, location: Path) -> None:
        remove_tree(location, location.parent)

    def replace_store(self, location: Path, write: Callable[[Any], None]) -> None:
        """Written under a hidden temporary name, then exchanged with the store in one
        ``renameat2(RENAME_EXCHANGE)`` (`exchange`), and the old store removed: a reader
        opening ``location`` finds the old store or the new one, whole."""
        tmp = location.with_name(f".{location.name}.tmp-{secrets.token_hex(6)}")
        try:
            write(_DurableLocalStore(tmp))
            exchange(tmp, location)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        remove_tree(tmp, location.parent)


def exchange(a: Path, b: Path) -> None:
    """Swap the directories ``a`` and ``b`` atomically (Linux's ``renameat2`` with
    ``RENAME_EXCHANGE``); where the system or file system has no such call, ``b`` is renamed
    aside and ``a`` into its place (for that instant ``b`` is absent, never partial)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            fsync_dir(b.parent)
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), str(b))
    aside = b.with_name(f".{b.name}.aside-{secrets.token_hex(4)}")
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)
    fsync_dir(b.parent)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _tree_files(base: Path) -> dict[str, Path]:
    """The files of a JSON tree but the viewer's."""
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


def _published_at(path: Path) -> float:
    """When a run was finished: mtime of its manifest (written by publish_run)."""
    try:
        return (path / MANIFEST).stat().st_mtime
    except FileNotFoundError:
        return path.stat().st_mtime


def _newest_dir_mtime(path: Path) -> float:
    newest = path.stat().st_mtime
    for dirpath, _dirs, _files in os.walk(path):
        with contextlib.suppress(FileNotFoundError):
            newest = max(newest, os.stat(dirpath).st_mtime)
    return newest


class _DurableLocalStore(LocalStore):
    """LocalStore whose writes are atomic *and* durable: temp file, fsync, rename, fsync dir.

    Every chunk and metadata document is on disk before the next step of an append starts,
    so the commit (the consolidated root ``zarr.json``) can never become durable before the
    data it makes visible. Only public parts of zarr's store interface are overridden; the
    crash tests fail if zarr ever writes a store object other than through ``set``.
    """

    async def set(self, key: str, value: Any) -> None:
        if self.read_only:
            raise ValueError(f"{self.root} was opened read-only")
        await asyncio.to_thread(_durable_put, self.root / key, value.to_bytes())

    async def set_if_not_exists(self, key: str, value: Any) -> None:
        if not (self.root / key).exists():
            await self.set(key, value)


def _durable_put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(8)}.partial")
    try:
        write_bytes(tmp, data)
        faults.point("zarr")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _move_into_place(tmp: Path, path: Path) -> None:
    os.rename(tmp, path)
    fsync_dir(path.parent)
