"""The run tree: a cycle staged privately, then made the served run in one step.

::

    staging = new_run_dir(root, run_id)           # private: <root>/runs/.staging-<run_id>-<random>
    write_json_tree(staging, files, mode)          # json/<relpath> and/or json/<relpath>.gz, staging.py
    publish_run(root, staging, run_id, manifest, validation, ok, mode)
    retain(root, keep=8)                           # retention.py

``publish_run`` writes the run's ``manifest.json``, ``validation.json`` and viewer files into
the staging tree and hands it to the root's backend, which makes it ``runs/<run_id>`` and
points ``current`` at it in the one step its storage makes atomic (``local.py``: a rename and
a symlink swap; ``objectstore.py``: an upload, then the ``current`` object). Readers see the
previous run or the new one, never a mixture and never nothing. A refused run (``ok=False``)
is kept under ``runs/failed/<run_id>`` for inspection and never served.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from isal import igzip

from .. import faults, viewer
from ..config import utc_time
from .backend import FAILED, JSON_DIR, MANIFEST, NAME_RE, VALIDATION, check_name
from .durable import fsync_dir, write_bytes
from .roots import backend_for
from .staging import TreeWriter, gzip_bytes

log = logging.getLogger(__name__)

HISTORY_RUNS = 20  # cycles listed in a run's runs.json
HISTORY_ERRORS = 5  # validation errors quoted per refused cycle


def to_json_types(obj: Any) -> Any:
    """``obj`` with numpy, pandas and datetime values as plain JSON types (times as UTC ISO
    strings); non-finite floats become null so the file is valid JSON."""
    if isinstance(obj, Mapping):
        return {str(k): to_json_types(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj
        return [to_json_types(v) for v in items]
    if isinstance(obj, np.ndarray):
        return [to_json_types(v) for v in obj]
    if isinstance(obj, np.datetime64):  # pointcast's datetime64 values are UTC
        return None if np.isnat(obj) else pd.Timestamp(obj).tz_localize("UTC").isoformat()
    if isinstance(obj, np.timedelta64):
        return None if np.isnat(obj) else pd.Timedelta(obj).isoformat()
    if isinstance(obj, np.generic):
        return to_json_types(obj.item())
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


def dump_json(obj: Mapping[str, Any]) -> bytes:
    """The bytes of a run's manifest, validation report or run history."""
    return (json.dumps(to_json_types(obj), indent=2, sort_keys=True, ensure_ascii=False)
            + "\n").encode("utf-8")


def new_run_dir(root: Path | str, run_id: str) -> Path:
    """Create and return a private staging directory for ``run_id``.

    On a local root it is ``<root>/runs/.staging-<run_id>-<random>``: in ``runs/`` so that
    publishing it is a rename on the same file system; never served, and removed by ``retain``
    when abandoned for more than an hour. For a URL root it is a local temporary directory,
    uploaded by ``publish_run``, and removed by ``retain`` once no cycle holds it.
    """
    return backend_for(root).new_staging(check_name("run id", run_id))


def current_run(root: Path | str) -> str | None:
    """The run id ``<root>/current`` names, or None when nothing is published yet."""
    return backend_for(root).current()


def carry_product(root: Path | str, writer: TreeWriter, product: str) -> dict | None:
    """Put the files of ``product`` of the served run into ``writer``'s staging tree, for a
    cycle that could not build it (the model reaching its horizon failed): its last good
    forecast stays served beside the products the cycle built. Local roots link the files
    (published files never change, and the staging tree is on the same file system), URL
    roots copy them. A form ``writer``'s mode wants and the served run lacks (it was written
    in another ``[output] json`` mode) is made from the other form. They are counted as
    ``writer``'s (``TreeWriter.adopt``), so ``finish`` makes them durable with the rest; they
    were validated and archived when first published, and are neither again.

    Returns the served run's manifest entry of the product with ``carried_from`` (the run
    that built it: the served run, or the one it carried the product from), or None when
    nothing is served or the served run does not have the product."""
    backend = backend_for(root)
    run = backend.current()
    if run is None:
        return None
    entry = ((backend.run_manifest(run) or {}).get("products") or {}).get(product)
    files = backend.product_files(run, product) if entry else {}
    if entry is None or not files:
        return None
    forms: dict[str, dict[bool, Any]] = {}  # file -> {whether the .gz form: its source}
    for rel, source in files.items():
        name = rel.removesuffix(".gz")
        forms.setdefault(name, {})[rel != name] = source
    wanted = [gz for gz, on in ((False, writer.plain), (True, writer.gzip)) if on]
    dirs = {str(writer.staging), str(writer.base)}
    for name, have in sorted(forms.items()):
        dest = writer.path(f"{product}/{name}")
        if str(dest.parent) not in dirs:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dirs.update(str(d) for d in dest.parents if writer.staging in d.parents)
        form = {False: dest, True: dest.with_name(dest.name + ".gz")}
        for gz in (gz for gz in wanted if gz in have):
            backend.copy_file(have[gz], form[gz])
        for gz in (gz for gz in wanted if gz not in have):  # made from the other form
            other = not gz
            if other not in wanted:
                backend.copy_file(have[other], form[other])
            data = form[other].read_bytes()
            if other not in wanted:
                form[other].unlink()
            write_bytes(form[gz], gzip_bytes(data) if gz else igzip.decompress(data), sync=False)
    writer.adopt([f"{product}/{name}" for name in forms], dirs)
    log.info("%s: the files of run %s carried into the new run", product, run)
    return {**entry, "carried_from": entry.get("carried_from", run)}


def publish_run(root: Path | str, staging: Path | str, run_id: str, manifest: Mapping[str, Any],
                validation: Mapping[str, Any], ok: bool, mode: str = "both", serve: bool = True) -> Any:
    """Finish a run: write its manifest and validation report and make it visible.

    ``manifest.json`` is ``manifest`` plus ``run_id`` and ``published_at`` (UTC ISO time) when
    the caller did not set them; ``validation.json`` is ``validation`` as given. Both are
    written into ``staging`` first (so a refused run keeps them too). Then:

    - ``ok`` false: the run is kept under ``runs/failed/<run_id>`` (replacing an earlier
      failed attempt of the same run id), ``current`` is untouched, and
      :class:`PublishRefused` is raised.
    - ``ok`` true and ``runs/<run_id>`` new: the staging tree becomes ``runs/<run_id>``.
    - ``ok`` true and ``runs/<run_id>`` already published (the same model runs processed
      again): the published run is kept as it is and the staging copy discarded, so the
      served bytes (and ETags) do not change.

    A valid run's JSON tree also gets the viewer (:func:`add_viewer`; ``mode``: the tree's
    ``[output] json`` mode, which its copies of the run files follow). Finally ``current``
    names ``run_id`` (unless ``serve`` is false: `serves_newer`) and the run's location is returned (a `Path` on a local root, a URL on an
    object store). ``staging`` must come from :func:`new_run_dir` for the same ``root``.
    """
    backend = backend_for(root)
    staging = Path(staging)
    backend.check_staging(staging, check_name("run id", run_id))
    meta = dict(manifest)
    meta.setdefault("run_id", run_id)
    meta.setdefault("published_at", _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat())
    write_bytes(staging / MANIFEST, dump_json(meta))
    write_bytes(staging / VALIDATION, dump_json(validation))
    if ok:
        add_viewer(staging, meta, validation, backend.history_dir, mode)
    fsync_dir(staging)
    faults.point("run-staged")
    location = backend.commit_run(staging, run_id, ok, serve)
    log.info("published run %s (%s)", run_id, location)
    return location


def serves_newer(root: Path | str, manifest: Mapping[str, Any]) -> bool:
    """Whether the served run was made at a later clock than the run of ``manifest`` (their
    ``created``): a cycle run at a past time (`pointcast run --at`, a backfill) publishes its
    run and archives it, and the newer forecast stays served."""
    backend = backend_for(root)
    run = backend.current()
    served = backend.run_manifest(run) if run else None
    try:
        return utc_time(served["created"]) > utc_time(manifest["created"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):  # nothing served, or a manifest without the time
        return False


# ---- the viewer in the run tree (docs/viewer.md) ----------------------------------------------

def add_viewer(staging: Path, manifest: Mapping[str, Any], validation: Mapping[str, Any],
               runs: Path | None, mode: str = "both") -> None:
    """Put the viewer at the root of a run's JSON tree, with the files its status page reads
    that live outside it (``manifest.json``, ``validation.json``) and ``runs.json``, the last
    cycles published or refused (``run_history``): a static host serving ``json/`` then shows
    the same pages as ``pointcast serve``. The viewer's own files are plain, for any static
    host; the three run files are JSON of the tree, in the forms ``mode`` names, as the
    products' files are."""
    base = staging / JSON_DIR
    entry = _history_entry(manifest.get("run_id"), manifest, validation)
    files = dict(viewer.files())
    for rel, data in ((MANIFEST, dump_json(manifest)), (VALIDATION, dump_json(validation)),
                      (viewer.HISTORY, dump_json({"runs": run_history(runs, entry)}))):
        if mode != "gzip":
            files[rel] = data
        if mode != "plain":
            files[rel + ".gz"] = gzip_bytes(data)
    dirs = set()
    for rel, data in files.items():
        path = base / rel
        if path.parent not in dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            dirs.add(path.parent)
        write_bytes(path, data)
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        fsync_dir(d)


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
        dirs = [p for p in runs.iterdir() if NAME_RE.match(p.name) and p.name != FAILED]
        if (runs / FAILED).is_dir():
            dirs += list((runs / FAILED).iterdir())
    for path in dirs:
        try:
            manifest = json.loads((path / MANIFEST).read_bytes())
            validation = json.loads((path / VALIDATION).read_bytes())
        except (OSError, ValueError):  # a run being removed, or never finished
            continue
        if isinstance(manifest, dict) and isinstance(validation, dict):
            manifest.setdefault("run_id", path.name)
            entry = _history_entry(manifest["run_id"], manifest, validation)
            if (entry["run_id"], entry["status"]) != (newest.get("run_id"), newest.get("status")):
                found.append(entry)
    found.sort(key=lambda e: str(e.get("time") or ""), reverse=True)
    return found[:HISTORY_RUNS]
