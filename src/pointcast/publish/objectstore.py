"""The backend of an output root given as an fsspec URL (``s3://bucket/forecasts``,
``gs://...``, ``memory://...``, ``file:///srv/out``).

Object stores have no rename and no symlink, so a run is staged locally, its files uploaded
under ``runs/<run_id>/`` with ``manifest.json`` last (a run without it is incomplete), and then
the small ``current`` object holding the run id is written. Each object is written whole
(PUT), so a reader sees the previous or the new ``current``, and a run it names is complete;
what is *not* atomic is the upload of a run tree (a reader listing ``runs/`` may see a run
being uploaded; nothing names it until ``current`` does). There are no locks: one cycle writes
a root at a time. The archive's append steps go through zarr's ``FsspecStore``; the first
write of a store is not hidden behind a rename.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
from zarr.storage import FsspecStore

from .backend import (CURRENT, FAILED, JSON_DIR, MANIFEST, NAME_RE, RUNS, STAGING_PREFIX, ZARR_DIR,
                      Backend, PublishError, PublishRefused, store_name, store_version)

log = logging.getLogger(__name__)


def _storage_options(url: str) -> dict[str, Any]:
    return {"auto_mkdir": True} if url.split("://", 1)[0] in ("file", "local") else {}


class ObjectStoreBackend(Backend):
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.fs, path = fsspec.core.url_to_fs(url, **_storage_options(url))
        self.base = path.rstrip("/")

    def _name(self, path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    # ---- the run tree -----------------------------------------------------------------------

    def new_staging(self, run_id: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{run_id}-"))

    def check_staging(self, staging: Path, run_id: str) -> None:
        if not staging.is_dir() or not staging.name.startswith(f"{STAGING_PREFIX}{run_id}-"):
            raise ValueError(f"{staging} is not a staging directory of run {run_id!r}")

    @property
    def history_dir(self) -> None:
        return None  # the history is not rebuilt from an object store's listing

    def current(self) -> str | None:
        try:
            run_id = self.fs.cat_file(f"{self.base}/{CURRENT}").decode().strip()
        except FileNotFoundError:
            return None
        if not NAME_RE.match(run_id):
            raise PublishError(f"{self.url}/{CURRENT} holds {run_id!r}: expected a run id")
        return run_id

    def run_manifest(self, run_id: str, failed: bool = False) -> dict | None:
        path = f"{self.base}/{RUNS}/{FAILED}/{run_id}" if failed else f"{self.base}/{RUNS}/{run_id}"
        try:
            return json.loads(self.fs.cat_file(f"{path}/{MANIFEST}"))
        except FileNotFoundError:
            return None

    def product_files(self, run_id: str, product: str) -> dict[str, str]:
        tree = f"{self.base}/{RUNS}/{run_id}/{JSON_DIR}/{product}"
        if not self.fs.exists(tree):
            return {}
        return {p[len(tree) + 1:]: p for p in self.fs.find(tree)}

    def copy_file(self, source: str, dest: Path) -> None:
        self.fs.get_file(source, str(dest))

    def commit_run(self, staging: Path, run_id: str, ok: bool) -> str:
        fs = self.fs
        try:
            if not ok:
                dest = f"{self.base}/{RUNS}/{FAILED}/{run_id}"
                if fs.exists(dest):
                    fs.rm(dest, recursive=True)
                self._upload(staging, dest)
                log.error("run %s failed validation; kept at %s", run_id, dest)
                raise PublishRefused(run_id, Path(dest))
            dest = f"{self.base}/{RUNS}/{run_id}"
            if fs.exists(f"{dest}/{MANIFEST}"):
                log.info("run %s was already published; keeping it", run_id)
            else:
                if fs.exists(dest):  # an upload that died before its manifest
                    fs.rm(dest, recursive=True)
                self._upload(staging, dest)
            fs.pipe_file(f"{self.base}/{CURRENT}", f"{run_id}\n".encode())
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return f"{self.url}/{RUNS}/{run_id}"

    def _upload(self, staging: Path, dest: str) -> None:
        """Every file of ``staging`` under ``dest``, ``manifest.json`` last."""
        files = sorted((p for p in staging.rglob("*") if p.is_file()), key=lambda p: p.name == MANIFEST)
        rpaths = [f"{dest}/{p.relative_to(staging).as_posix()}" for p in files]
        for parent in sorted({r.rsplit("/", 1)[0] for r in rpaths}):
            self.fs.makedirs(parent, exist_ok=True)
        self.fs.put([str(p) for p in files[:-1]], rpaths[:-1])
        self.fs.put_file(str(files[-1]), rpaths[-1])

    # ---- retention ---------------------------------------------------------------------------

    def lock(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def has_runs(self) -> bool:
        return self.fs.exists(f"{self.base}/{RUNS}")

    def _stamp(self, run_id: str, failed: bool = False) -> str | None:
        """Its manifest's ``published_at``; None for an upload that never finished."""
        return (self.run_manifest(run_id, failed) or {}).get("published_at") or None

    def published_runs(self) -> dict[str, str | None]:
        names = (self._name(p) for p in self.fs.ls(f"{self.base}/{RUNS}", detail=False))
        return {n: self._stamp(n) for n in names if n != FAILED and NAME_RE.match(n)}

    def failed_runs(self) -> dict[str, str | None]:
        failed = f"{self.base}/{RUNS}/{FAILED}"
        if not self.fs.exists(failed):
            return {}
        names = (self._name(p) for p in self.fs.ls(failed, detail=False))
        return {n: self._stamp(n, failed=True) for n in names}

    def remove_run(self, run_id: str, failed: bool = False) -> str:
        rel = f"{RUNS}/{FAILED}/{run_id}" if failed else f"{RUNS}/{run_id}"
        self.fs.rm(f"{self.base}/{rel}", recursive=True)
        return f"{self.url}/{rel}"

    def sweep(self, stale_after: float) -> list[str]:
        return []  # nothing is staged on the object store itself

    # ---- the Zarr archive --------------------------------------------------------------------

    def archive_lock(self, product: str) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def store_versions(self, product: str) -> list[tuple[int, str]]:
        zdir = f"{self.base}/{ZARR_DIR}"
        if not self.fs.exists(zdir):
            return []
        found = ((store_version(product, self._name(p)), self._name(p))
                 for p in self.fs.ls(zdir, detail=False))
        return sorted((v, f"{self.url}/{ZARR_DIR}/{name}") for v, name in found if v is not None)

    def store_location(self, product: str, version: int) -> str:
        return f"{self.url}/{ZARR_DIR}/{store_name(product, version)}"

    def reader(self, location: str) -> FsspecStore:
        return self._store(location, read_only=True)

    def writer(self, location: str) -> FsspecStore:
        return self._store(location)

    def create_store(self, location: str, write: Callable[[Any], None]) -> None:
        write(self._store(location))

    def _store(self, url: str, read_only: bool = False) -> FsspecStore:
        with warnings.catch_warnings():  # a synchronous file system is wrapped: fine here
            warnings.simplefilter("ignore")
            return FsspecStore.from_url(url, storage_options=_storage_options(url), read_only=read_only)
