"""Locks held with ``flock``: directories a running cycle holds, told from those a killed
cycle left, and the lock files the writers of one tree take turns on (`locked`).

A cycle holds an exclusive ``flock`` on a directory of its own (its scratch stores, its staging
tree) while it runs. The kernel releases the lock when the process ends, however it ends, so
retention removes a directory only while it can take the lock itself (`abandoned`): a running
cycle's directory is never touched, a killed one's goes at the next cycle.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def hold(path: Path | str, *, wait: bool = True) -> int:
    """Lock the directory ``path`` for as long as the returned descriptor stays open (close it
    to release). With ``wait`` False, BlockingIOError when another process holds it."""
    return _flock(os.open(path, os.O_RDONLY | os.O_DIRECTORY), wait)


@contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file`` (created, with its directory, if missing) for
    the block: the writers of one tree (publication, retention, an archive's appends) take
    their turns on it."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = _flock(os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666), wait=True)
    try:
        yield
    finally:
        os.close(fd)


def _flock(fd: int, wait: bool) -> int:
    """``fd``, exclusively locked; closed when the lock cannot be had."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def abandoned(path: Path | str) -> Iterator[bool]:
    """Whether no process holds the directory ``path``; when none does, this one holds it until
    the block ends (so that a cycle starting meanwhile cannot take it). False when it is gone."""
    try:
        fd = hold(path, wait=False)
    except (FileNotFoundError, NotADirectoryError, BlockingIOError):
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)
