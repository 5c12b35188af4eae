"""Fault injection for the crash and full-disk tests; inert unless ``POINTCAST_FAULT`` is set.

``POINTCAST_FAULT="<action>@<point>[:<n>]"``: the n-th time (default 1) this process reaches
the named point, ``kill`` sends SIGKILL to the process itself (a crash: no ``finally``, no
flush, no cleanup) and ``enospc`` raises ``OSError(ENOSPC)`` (a full disk). The points, in the
order a cycle meets them (docs/contracts.md, "Crash safety"); ``json`` and ``write`` are also
reached in the build tasks, wherever they run, so a worker given the variable dies mid-slice:

================  ==========================================================================
``json``          publish.staging.TreeWriter: before the n-th file of the staging tree
``write``         publish.durable.write_bytes: half of a file's bytes written (every file it
                  writes counts: JSON, ``.gz``, manifest, Zarr objects, downloads)
``zarr``          publish.local (the durable store): a Zarr object written, before its rename into place
``zarr-commit``   publish.archive.append_archive: slot written, before the consolidated metadata
``run-staged``    publish.tree.publish_run: manifest and validation written, before the rename
``upload``        publish.objectstore (an object-store root): a run's files uploaded, before its manifest
``run-renamed``   publish.local (its publication): ``runs/<id>`` in place, before ``current`` is swapped
``current-tmp``   publish.local (the swap of ``current``): temporary symlink made, before it replaces ``current``
``trash``         publish.durable.remove_tree: a run renamed to ``.trash-*``, before its deletion
================  ==========================================================================
"""

from __future__ import annotations

import errno
import os
import signal
import threading

ENV = "POINTCAST_FAULT"
_seen: dict[str, int] = {}
_lock = threading.Lock()  # Zarr objects are written from worker threads


def _fault() -> tuple[str, str, str] | None:
    """(action, point, count) of ``POINTCAST_FAULT``, None when unset."""
    # Every file write asks: a membership test, as os.environ.get raises and catches a
    # KeyError inside when the variable is unset.
    if ENV not in os.environ:
        return None
    spec = os.environ[ENV]
    if not spec:
        return None
    action, _, where = spec.partition("@")
    target, _, count = where.partition(":")
    return action, target, count


def armed(name: str) -> bool:
    """Whether a fault is set at the named point (a file write then stops halfway there)."""
    fault = _fault()
    return fault is not None and fault[1] == name


def point(name: str) -> None:
    """Reached the named point: do the configured fault if it is due here."""
    fault = _fault()
    if fault is None or fault[1] != name:
        return
    action, _, count = fault
    spec = os.environ[ENV]
    with _lock:
        _seen[name] = _seen.get(name, 0) + 1
        due = _seen[name] == int(count or 1)
    if not due:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "enospc":
        raise OSError(errno.ENOSPC, f"No space left on device (injected by {ENV}={spec})")
    else:
        raise ValueError(f"{ENV}={spec!r}: action must be 'kill' or 'enospc'")
