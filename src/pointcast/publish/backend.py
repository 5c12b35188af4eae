"""The layout of an output root and the one interface every kind of root implements.

An output root is a local directory or an fsspec URL (an object store). What publication does
is written once, against `Backend`: the run tree in ``tree.py``, retention in
``retention.py``, the Zarr archive in ``archive.py``. How each step is made safe on a kind of
root is written once per kind: ``local.py`` (rename, symlink swap, ``flock``, fsync) and
``objectstore.py`` (whole-object PUTs, ``manifest.json`` last, ``current`` last of all).

A *location* is how a backend names a run or a store: a `Path` on a local root, a URL on an
object store. A *stamp* is when a run was published, comparable among one backend's runs.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

RUNS = "runs"
CURRENT = "current"
FAILED = "failed"
JSON_DIR = "json"
ZARR_DIR = "zarr"
MANIFEST = "manifest.json"
VALIDATION = "validation.json"
VERIFICATION_DIR = "verification"  # scores of the archived runs (pointcast.verify), read by the server
STAGING_PREFIX = ".staging-"
TRASH_PREFIX = ".trash-"
STALE_STAGING_SECONDS = 3600.0

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,199}$")


class PublishError(RuntimeError):
    """The output tree is not in a state publication can work with."""


class PublishRefused(PublishError):
    """Validation failed: the run was kept under ``runs/failed/`` and not published."""

    def __init__(self, run_id: str, path: Any) -> None:
        super().__init__(f"run {run_id!r} failed validation; kept for inspection at {path}, "
                         f"'current' unchanged")
        self.run_id = run_id
        self.path = path


class ArchiveError(PublishError):
    """The Zarr archive could not be written or is not in the expected layout."""


def check_name(kind: str, name: str) -> str:
    """``name`` if it can name a run or a product (one path segment, not a reserved name)."""
    if not isinstance(name, str) or not NAME_RE.match(name) or name in (FAILED, CURRENT):
        raise ValueError(f"invalid {kind} {name!r}: use letters, digits and . _ : + -, "
                         f"starting with a letter or digit")
    return name


def is_url(root: Any) -> bool:
    """Whether an output root is an fsspec URL rather than a local path."""
    return isinstance(root, str) and "://" in root


def store_version(product: str, name: str) -> int | None:
    """The version of the archive store ``name`` of ``product`` (``<product>.zarr`` is 1,
    ``<product>.v<n>.zarr`` is n), None when ``name`` is not one of its stores."""
    m = re.match(rf"^{re.escape(product)}(?:\.v(\d+))?\.zarr$", name)
    return int(m.group(1) or 1) if m else None


def store_name(product: str, version: int) -> str:
    return f"{product}.zarr" if version == 1 else f"{product}.v{version}.zarr"


class Backend(ABC):
    """One kind of output root: the steps whose safety depends on what the storage offers."""

    # ---- the run tree -----------------------------------------------------------------------

    @abstractmethod
    def check_writable(self) -> None:
        """Raise `PublishError` (naming the root and the error) unless the root can be written:
        asked before a cycle discovers or downloads anything."""

    @abstractmethod
    def new_staging(self, run_id: str) -> Path:
        """A new private local directory to build run ``run_id`` in."""

    @abstractmethod
    def check_staging(self, staging: Path, run_id: str) -> None:
        """Raise unless ``staging`` came from ``new_staging(run_id)`` of this root."""

    @property
    @abstractmethod
    def history_dir(self) -> Path | None:
        """The local ``runs`` directory the viewer's run history is read from (None: no history)."""

    @abstractmethod
    def current(self) -> str | None:
        """The run id ``current`` names, None when nothing is published yet."""

    @abstractmethod
    def run_manifest(self, run_id: str) -> dict | None:
        """The ``manifest.json`` of a published run, None when it has none."""

    @abstractmethod
    def product_files(self, run_id: str, product: str) -> dict[str, Any]:
        """A published run's files of ``product``: path under ``json/<product>/`` -> source
        for ``copy_file``."""

    @abstractmethod
    def copy_file(self, source: Any, dest: Path) -> None:
        """Put a published file (from ``product_files``) at local path ``dest``."""

    @abstractmethod
    def commit_run(self, staging: Path, run_id: str, ok: bool, serve: bool = True) -> Any:
        """Make a complete staging tree the run ``run_id`` and ``current`` name it (``serve``
        false: leave ``current`` as it is), in the one step the storage makes atomic; with
        ``ok`` false keep it under ``runs/failed/`` and raise `PublishRefused`. Returns the
        run's location."""

    # ---- retention ---------------------------------------------------------------------------

    @abstractmethod
    def lock(self) -> AbstractContextManager:
        """Held while runs are published or removed."""

    @abstractmethod
    def has_runs(self) -> bool:
        """Whether the root has a ``runs`` directory at all."""

    @abstractmethod
    def published_runs(self) -> dict[str, Any]:
        """Run id -> stamp of every run under ``runs/``; the stamp is None for a run whose
        publication never finished (it is removed unless ``current`` names it)."""

    @abstractmethod
    def failed_runs(self) -> dict[str, Any]:
        """Run id -> stamp (None when unknown) of every run under ``runs/failed/``."""

    @abstractmethod
    def remove_run(self, run_id: str, failed: bool = False) -> Any:
        """Delete a run so it never shows half-deleted under its id; return its location."""

    @abstractmethod
    def sweep(self, stale_after: float) -> list[Any]:
        """Remove what interrupted steps left behind; return the locations of abandoned
        staging trees removed."""

    # ---- the Zarr archive --------------------------------------------------------------------

    @abstractmethod
    def archive_lock(self, product: str) -> AbstractContextManager:
        """Held while ``product``'s archive is appended to; clears an interrupted first write."""

    @abstractmethod
    def store_versions(self, product: str) -> list[tuple[int, Any]]:
        """(version, location) of ``product``'s archive stores, oldest first."""

    @abstractmethod
    def store_location(self, product: str, version: int) -> Any:
        """The location of version ``version`` of ``product``'s archive store."""

    @abstractmethod
    def reader(self, location: Any) -> Any:
        """What ``xr.open_zarr`` opens a store at ``location`` from."""

    @abstractmethod
    def writer(self, location: Any) -> Any:
        """A zarr store writing to ``location``, each object complete and durable when
        written, so no later step can become visible before it."""

    @abstractmethod
    def create_store(self, location: Any, write: Callable[[Any], None]) -> None:
        """Create the store at ``location`` with ``write(store)``, whole or not at all where
        the storage allows it."""

    def remove_store(self, location: Any) -> None:
        """Remove the store at ``location`` (an archive version retention leaves empty)."""
        raise ArchiveError(f"{location}: this output root cannot remove an archive store "
                           f"(archive retention needs a local root)")

    def replace_store(self, location: Any, write: Callable[[Any], None]) -> None:
        """Replace the store at ``location`` by the one ``write(store)`` writes, in one step
        readers see (the archive's retention, `archive.retain_archive`)."""
        raise ArchiveError(f"{location}: this output root cannot replace an archive store in one "
                           f"step (archive retention needs a local root)")
