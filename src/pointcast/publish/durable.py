"""Durable steps on a local file system: what every crash-safe step of publication is made of.

A file or directory becomes visible under its final name only once its bytes and the
directory entry holding it are on disk (``write_bytes``, ``fsync_dir``); a directory
disappears by a rename to a hidden name before it is deleted (``remove_tree``); writers of one
tree serialise on an ``flock`` (``locked``). The fault points of the crash tests
(``pointcast.faults``) sit between these steps.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from .. import faults
from .backend import TRASH_PREFIX

try:  # POSIX advisory locks; publication targets Linux hosts
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]


def fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: Path | str, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to a new file and fsync it unless ``sync`` is False (the caller then syncs
    the file system, ``sync_file_system``; the directory is fsync'd by the caller). Plain
    descriptors, no file object: a run is hundreds of thousands of small files, and a file
    object's set-up (and the GIL it takes back after each of its system calls) cost more than
    the writes."""
    view = memoryview(data)
    # One write; two when a fault is set at "write", for the crash in the middle of a file
    # (asked once per file, as a run is a million files).
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


def write_atomic(path: Path | str, data: bytes) -> None:
    """Write ``path`` through a temporary file renamed over it (readers see old or new)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(4)}")
    try:
        write_bytes(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


_syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)


def sync_file_system(path: Path | str) -> None:
    """Make every file written so far on the file system holding ``path`` durable at once
    (Linux ``syncfs``; ``sync`` elsewhere): for a run tree of tens of thousands of files one
    flush costs far less than an fsync each."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs is None or _syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created if missing)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as f:
        if fcntl is not None:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def remove_tree(path: Path, trash_dir: Path) -> None:
    """Remove a directory so that it never shows up half-deleted under its own name."""
    trash = trash_dir / f"{TRASH_PREFIX}{path.name}-{secrets.token_hex(4)}"
    os.rename(path, trash)
    fsync_dir(path.parent)
    faults.point("trash")
    shutil.rmtree(trash, ignore_errors=True)
