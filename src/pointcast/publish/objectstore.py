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

Each object of a run is uploaded with the HTTP metadata a CDN or the store's own HTTP endpoint
serves it with (`object_headers`): its type by name, and ``Content-Encoding: gzip`` on the
``.gz`` forms, which keep their names (the tree in the bucket is the local one, byte for byte).
The local staging directory is held by its cycle (`pointcast.locks`, `stage.ArchiveStage`); one
of this root's that nobody holds is a killed cycle's, removed by the next cycle (`sweep`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mimetypes
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
from zarr.storage import FsspecStore

from .. import faults, locks
from .backend import (
    CURRENT,
    FAILED,
    JSON_DIR,
    MANIFEST,
    NAME_RE,
    RUNS,
    STAGING_PREFIX,
    ZARR_DIR,
    Backend,
    PublishError,
    PublishRefused,
    store_name,
    store_version,
)

log = logging.getLogger(__name__)


def _storage_options(url: str) -> dict[str, Any]:
    return {"auto_mkdir": True} if url.split("://", 1)[0] in ("file", "local") else {}


# The media types by file name: the standard library's table, which in Python 3.11 still names
# .js application/javascript; text/javascript is the one RFC 9239 registers.
_MEDIA_TYPES = mimetypes.MimeTypes()
_MEDIA_TYPES.add_type("text/javascript", ".js")
TEXT = "text/plain; charset=utf-8"  # what has no known suffix: LICENSE, VERSIONS, `current`


def object_headers(name: str) -> tuple[str, str | None]:
    """(Content-Type, Content-Encoding) an object named ``name`` is served with: a ``.gz``
    file is the type of what it compresses, gzip-encoded, so that a client asking for it gets
    that type (``paris.json.gz``: application/json); text is UTF-8, as pointcast writes it."""
    kind, encoding = _MEDIA_TYPES.guess_type(name, strict=True)
    if encoding not in (None, "gzip"):  # none in a run's tree: sent as the bytes they are
        return "application/octet-stream", None
    if kind is None:
        return TEXT, encoding
    return (f"{kind}; charset=utf-8" if kind.startswith("text/") else kind), encoding


def _upload_options(protocols: tuple[str, ...], kind: str, encoding: str | None) -> dict[str, Any]:
    """The keyword arguments of an fsspec upload (``put``, ``pipe_file``) that store an
    object's headers, in the form its file system takes them; none where it has no such
    metadata (``file``, ``memory``) or pointcast does not know the form."""
    if "s3" in protocols:  # s3fs: passed on to S3's PutObject
        return {"ContentType": kind, **({"ContentEncoding": encoding} if encoding else {})}
    if "gs" in protocols or "gcs" in protocols:  # gcsfs
        return {"content_type": kind,
                **({"fixed_key_metadata": {"content_encoding": encoding}} if encoding else {})}
    return {}


class ObjectStoreBackend(Backend):
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.fs, path = fsspec.core.url_to_fs(url, **_storage_options(url))
        self.base = path.rstrip("/")
        protocol = self.fs.protocol
        self._protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
        # In the names of this root's staging directories (`new_staging`), which share the
        # temporary directory with other roots': `sweep` removes only its own root's.
        self._tag = hashlib.sha256(self.url.encode()).hexdigest()[:12]

    def _name(self, path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    # ---- the run tree -----------------------------------------------------------------------

    def check_writable(self) -> None:
        """An empty object written under the root and deleted again."""
        probe = f"{self.base}/.probe-{secrets.token_hex(4)}"
        try:
            self.fs.pipe_file(probe, b"")
            self.fs.rm_file(probe)
        except Exception as exc:  # noqa: BLE001 (each file system raises its own errors)
            raise PublishError(f"output root {self.url} cannot be written: "
                               f"{type(exc).__name__}: {exc}") from None

    def new_staging(self, run_id: str) -> Path:
        """``<tmp>/.staging-<run_id>-<root's tag>-<random>``, in the system's temporary
        directory (``TMPDIR``), which must hold a run's tree."""
        return Path(tempfile.mkdtemp(prefix=self._staging_prefix(run_id)))

    def _staging_prefix(self, run_id: str) -> str:
        return f"{STAGING_PREFIX}{run_id}-{self._tag}-"

    def check_staging(self, staging: Path, run_id: str) -> None:
        if not staging.is_dir() or not staging.name.startswith(self._staging_prefix(run_id)):
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

    def commit_run(self, staging: Path, run_id: str, ok: bool, serve: bool = True) -> str:
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
            if serve:
                fs.pipe_file(f"{self.base}/{CURRENT}", f"{run_id}\n".encode(),
                             **_upload_options(self._protocols, TEXT, None))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return f"{self.url}/{RUNS}/{run_id}"

    def _upload(self, staging: Path, dest: str) -> None:
        """Every file of ``staging`` under ``dest`` with its headers (`object_headers`),
        ``manifest.json`` last (the run's, not the viewer's copy in ``json/``): the others in one
        concurrent ``put`` per kind of headers."""
        manifest = staging / MANIFEST
        files = sorted((p for p in staging.rglob("*") if p.is_file()), key=lambda p: p == manifest)
        rpaths = [f"{dest}/{p.relative_to(staging).as_posix()}" for p in files]
        for parent in sorted({r.rsplit("/", 1)[0] for r in rpaths}):
            self.fs.makedirs(parent, exist_ok=True)
        by_headers: dict[tuple[str, str | None], list[int]] = {}
        for i, p in enumerate(files[:-1]):
            by_headers.setdefault(object_headers(p.name), []).append(i)
        for headers, indices in by_headers.items():
            self.fs.put([str(files[i]) for i in indices], [rpaths[i] for i in indices],
                        **_upload_options(self._protocols, *headers))
        faults.point("upload")
        self.fs.put_file(str(files[-1]), rpaths[-1],
                         **_upload_options(self._protocols, *object_headers(files[-1].name)))

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

    def sweep(self, stale_after: float) -> list[Path]:
        """This root's local staging directories that no cycle holds (`pointcast.locks`): a
        killed cycle's, whatever their age (its upload, if any, is replaced by the next attempt
        or removed by retention). One cycle writes a root at a time, and sweeps before it makes
        its staging directory and after it is gone (`retention.sweep_staging`), so one nobody
        holds is nobody's."""
        removed = []
        pattern = f"{STAGING_PREFIX}*-{self._tag}-*"
        for path in sorted(p for p in Path(tempfile.gettempdir()).glob(pattern) if p.is_dir()):
            with locks.abandoned(path) as gone:
                if gone:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
        return removed

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
