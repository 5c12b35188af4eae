"""Durable steps on a local file system: what every crash-safe step of publication is made of.

A file or directory becomes visible under its final name only once its bytes and the
directory entry holding it are on disk (``write_bytes``, ``fsync_dir``); a file is replaced
whole by a rename over it (``replace_bytes``); a directory disappears by a rename to a hidden
name before it is deleted (``remove_tree``). The fault points of the crash tests
(``pointcast.faults``) sit between these steps.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
from pathlib import Path

from .. import faults
from .backend import TRASH_PREFIX, PublishError


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


def replace_bytes(path: Path, data: bytes, sync: bool = True) -> None:
    """Put ``data`` in place of ``path`` whole: written to a temporary file beside it, then
    renamed over it, so a reader sees the old bytes or the new, never part of them. With
    ``sync`` the file and its directory entry are fsync'd; without, nothing is flushed (what
    the download cache can afford)."""
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(4)}")
    try:
        write_bytes(tmp, data, sync=sync)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


def remove_tree(path: Path, trash_dir: Path) -> None:
    """Remove a directory so that it never shows up half-deleted under its own name."""
    trash = trash_dir / f"{TRASH_PREFIX}{path.name}-{secrets.token_hex(4)}"
    os.rename(path, trash)
    fsync_dir(path.parent)
    faults.point("trash")
    shutil.rmtree(trash, ignore_errors=True)


def check_writable(path: Path, what: str) -> None:
    """Raise `PublishError` naming ``what``, ``path`` and the error unless a file can be made
    (and removed) in the directory ``path``, made with its parents where missing: a cycle asks
    before it downloads anything, not after."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".probe-{secrets.token_hex(4)}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as exc:
        raise PublishError(f"{what} {path} cannot be written: {exc}") from None
