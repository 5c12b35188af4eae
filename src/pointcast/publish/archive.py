"""The Zarr archive: one store per product, one ``init_time`` entry per model cycle.

``append_archive`` keeps ``<root>/zarr/<product>.zarr`` with dims ``(init_time, point,
lead_time[, height])``, readable with a single ``xr.open_zarr(path)`` (consolidated metadata).
A cycle is written shard by shard from a dataset that may be lazy (dask): a run's staged
archive (``stage.py``) is never loaded whole. The append protocol (four steps, each object written whole) is written once here; where the
objects go and how the first write of a store is made whole is the backend's (``local.py``:
durable files and a rename; ``objectstore.py``: fsspec). See :func:`append_archive`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
import zarr
from zarr.abc.store import Store
from zarr.codecs import BloscCodec
from zarr.core.metadata import ArrayV3Metadata

from .. import faults
from .backend import ArchiveError, Backend, check_name
from .roots import backend_for

log = logging.getLogger(__name__)

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
# The bytes (uncompressed) of a variable's archive chunk, which holds as many points as make
# them: a point's series of one cycle is one chunk read of a few hundred kB, and zarr's fixed
# cost per chunk stays small beside the compression (a fixed few points a chunk makes a large
# cycle tens of thousands of chunks).
CHUNK_BYTES = 256 << 10
# The bytes (uncompressed) of a variable's shard, at most: a shard is one object, written whole
# by one task of an append, so a cycle of many points is written as many shards of this size,
# and one of fewer points is a single shard of all its points. A task holds several times its
# shard (the staged chunks it reads, compressed and decoded, the shard, its encoded chunks), so
# this bounds what an append adds to the cycle's process (docs/performance.md, "Shards").
SHARD_BYTES = 16 << 20
# Blosc (a codec of the Zarr v3 core specification) with its byte shuffle in front of zstd at
# level 1: smaller and faster to write than zarr's default of zstd at level 3 alone, lossless
# either way (docs/performance.md, "Publish").
ARCHIVE_CODEC = BloscCodec(cname="zstd", clevel=1, shuffle="shuffle")
# Chunks zarr encodes per step of its codec pipeline: at its default of one, every chunk is a
# round trip between the event loop and a worker thread.
CHUNK_BATCH = 64


@contextlib.contextmanager
def zarr_settings() -> Iterator[None]:
    """zarr as the archive uses it: chunks encoded `CHUNK_BATCH` at a time, and without the
    warning that consolidated metadata is not in the v3 specification (readers rely on it)."""
    with warnings.catch_warnings(), zarr.config.set({"codec_pipeline.batch_size": CHUNK_BATCH}):
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")
        yield


def open_committed(store: Any) -> xr.Dataset:
    """The committed cycles of the store at ``store`` (a path, or a zarr store), in init_time
    order: a cycle run at a past time (a backfill) is stored after the later ones it was
    appended after, and read in its place."""
    try:
        with zarr_settings():
            ds = xr.open_zarr(store, consolidated=True)
    except Exception as e:  # noqa: BLE001 - re-raised with the path and what is expected
        raise ArchiveError(f"{store}: cannot open as a consolidated Zarr archive: {e}") from e
    return ds if ds.indexes[INIT].is_monotonic_increasing else ds.sortby(INIT)


def archive_stores(root: Path | str, product: str) -> list[Any]:
    """The product's archive stores, oldest version first (``<product>.zarr``,
    ``<product>.v2.zarr``, ...); the last one is the one being appended to."""
    check_name("product", product)
    return [loc for _, loc in backend_for(root).store_versions(product)]


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
                # shards: one object per init_time, variable and `SHARD_BYTES` of points
                ip = var.dims.index(POINT)
                npts = var.sizes[POINT]
                per_point = var.dtype.itemsize * math.prod(n for d, n in var.sizes.items()
                                                           if d not in (INIT, POINT))
                chunks[ip] = min(point_chunk or max(1, CHUNK_BYTES // max(per_point, 1)), npts)
                per_shard = max(1, SHARD_BYTES // max(per_point * chunks[ip], 1))  # chunks
                shards = list(chunks)
                shards[ip] = min(-(-npts // chunks[ip]), per_shard) * chunks[ip]
                e["shards"] = tuple(shards)
            e["chunks"] = tuple(chunks)
        enc[str(name)] = e
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
    """Reindex ``ds`` onto the archive's axes (missing points/lead times become missing),
    lazily: its variables along init_time are read by dask, a shard of the archive's at a
    time, before they are reindexed."""
    indexers = {d: arch.indexes[d] for d in ds.dims
                if d != INIT and d in ds.indexes and not ds.indexes[d].equals(arch.indexes[d])}
    if not indexers:
        return ds
    ds = _by_shard(ds, {name: var.encoding.get("shards") or var.encoding["chunks"]
                        for name, var in arch.variables.items()
                        if INIT in var.dims and name != INIT and name in ds.variables})
    fill: dict[Any, Any] = {}
    for name, var in ds.variables.items():
        if INIT in var.dims and name not in ds.indexes and var.dtype.kind in "OSU":
            fill[name] = ""
    # variables not named in ``fill`` get xarray's default missing value (NaN / NaT)
    return ds.reindex(indexers, fill_value=fill) if fill else ds.reindex(indexers)


def _init_arrays(group: zarr.Group) -> list[zarr.Array]:
    out = []
    for name, arr in group.arrays():
        dims = (arr.metadata.dimension_names if isinstance(arr.metadata, ArrayV3Metadata) else None) or ()
        if INIT in dims:
            if dims[0] != INIT:
                raise ArchiveError(f"array {name!r} does not have init_time as first dimension")
            out.append(arr)
    return out


def _reserve_slot(store: Store, n: int) -> None:
    """Step 1: drop whatever an interrupted append left beyond the ``n`` committed entries,
    then grow every init_time array by one (the new slot reads as fill / NaT)."""
    group = zarr.open_group(store, mode="r+", use_consolidated=False)
    arrays = _init_arrays(group)
    for arr in arrays:
        if arr.shape[0] != n:
            arr.resize((n, *arr.shape[1:]))  # also deletes the chunks beyond n
    for arr in arrays:
        arr.resize((n + 1, *arr.shape[1:]))


def _by_shard(ds: xr.Dataset, shards: dict[Hashable, tuple[int, ...]]) -> xr.Dataset:
    """``ds`` with each variable named in ``shards`` in dask chunks of its shard: each task of
    the write then reads, encodes and writes one shard (a shard is written whole, and no two
    tasks write one), so a cycle is never in memory whole, whatever its number of points."""
    out = ds.copy()
    for name, shape in shards.items():
        out[name] = ds[name].chunk(dict(zip(ds[name].dims, shape, strict=True)))
    return out


def _write_slot(store: Store, ds: xr.Dataset, n: int) -> None:
    """Step 2: the data (and any non-index variable along init_time) of slot ``n``, shard by
    shard on the current dask scheduler."""
    slot = ds.drop_vars([k for k, v in ds.variables.items() if INIT not in v.dims or k == INIT])
    slot = slot.drop_encoding()
    slot.attrs = {}
    group = zarr.open_group(store, mode="r", use_consolidated=False)
    arrays = dict(group.arrays())
    slot = _by_shard(slot, {name: arrays[str(name)].shards or arrays[str(name)].chunks for name in slot.variables})
    with zarr_settings():
        slot.to_zarr(store, region={INIT: slice(n, n + 1)}, mode="r+", consolidated=False,
                     zarr_format=3)


def _write_init_time(store: Store, value: np.datetime64, n: int) -> None:
    """Step 3: the init_time value of slot ``n`` (until then it reads as NaT)."""
    group = zarr.open_group(store, mode="r+", use_consolidated=False)
    arr = group[INIT]
    if not isinstance(arr, zarr.Array):
        raise ArchiveError(f"{INIT} of the archive is a group, not an array")
    # encoded as the store says: its units, calendar and dtype
    decoded = xr.Variable((INIT,), np.array([value], dtype="datetime64[ns]"), encoding={
        "units": arr.attrs.get("units"), "dtype": np.dtype(arr.dtype),
        "calendar": arr.attrs.get("calendar", "proleptic_gregorian")})
    arr[n:n + 1] = np.asarray(xr.coders.CFDatetimeCoder().encode(decoded).values, dtype=arr.dtype)


def _commit(store: Store) -> None:
    """Step 4: rewrite the consolidated metadata (one atomic write of the root zarr.json),
    which is what makes the new length visible to ``xr.open_zarr``."""
    with zarr_settings():
        zarr.consolidate_metadata(store)


def _create_store(backend: Backend, location: Any, ds: xr.Dataset, point_chunk: int | None) -> None:
    encoding = _creation_encoding(ds, point_chunk)
    ds = _by_shard(ds, {name: e["shards"] for name, e in encoding.items() if "shards" in e})

    def write(store) -> None:
        with zarr_settings():
            ds.to_zarr(store, mode="w-", consolidated=True, zarr_format=3, encoding=encoding)

    backend.create_store(location, write)


def append_archive(root: Path | str, product: str, ds: xr.Dataset, *,
                   point_chunk: int | None = None) -> Any:
    """Append one model cycle (``init_time`` of length 1) to the product's Zarr archive.

    Returns the store holding that init_time. Layout: ``<root>/zarr/<product>.zarr``, Zarr
    format 3 with consolidated metadata, readable with one ``xr.open_zarr(path)``. Variables
    along ``init_time`` are stored as ``(init_time, point, lead_time[, height])`` in chunks of
    ``(1, point_chunk, all lead times[, all heights])`` (by default as many points as make
    `CHUNK_BYTES` of the variable) grouped in shards of at most `SHARD_BYTES` (one per
    init_time and variable when the cycle's points fit in it), so reading a point's series
    for many cycles touches one small chunk per cycle while each cycle is a handful of files.
    ``init_time`` is int64 seconds since 1970 (UTC). Attributes (CF and global) are those of
    the first cycle written to the store.

    **Lazy.** ``ds`` may be backed by dask (a run's staged archive, ``stage.py``): it is
    written shard by shard on the current dask scheduler, each task reading the rows of one
    shard, and is never loaded whole.

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

    **Crash safety.** On a local root the first write of a store goes to a hidden temporary
    directory renamed into place when complete, so a store exists fully or not at all. An
    append runs four steps, each object written whole (locally: temp file, fsync, rename):

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
    such readers should use ``ds.sel(init_time=ds.init_time.notnull())``. On a local root
    appends are serialised by a lock file ``<root>/zarr/.<product>.lock``; readers need no
    lock. A URL root gets the same steps through fsspec, without the lock and the rename.
    """
    check_name("product", product)
    if point_chunk is not None and point_chunk < 1:
        raise ValueError(f"point_chunk must be >= 1, got {point_chunk}")
    ds = _canonical(ds)
    backend = backend_for(root)
    value = ds[INIT].values[0]

    with backend.archive_lock(product):
        versions = backend.store_versions(product)
        for _, location in versions:
            with open_committed(backend.reader(location)) as arch:
                if (arch[INIT].values == value).any():
                    log.info("%s: init_time %s already archived in %s; nothing to do",
                             product, value, location)
                    return location

        if versions:
            version, location = versions[-1]
            with open_committed(backend.reader(location)) as arch:
                n = arch.sizes[INIT]
                latest = arch[INIT].values.max() if n else None
                reason = _incompatibility(arch, ds)
                fitted = None if reason else _fit(arch, ds)
            if fitted is not None:
                if latest is not None and value < latest:
                    log.info("%s: init_time %s appended after later cycles (a backfill): stored "
                             "in append order, read in init_time order (open_committed)", product, value)
                store = backend.writer(location)
                _reserve_slot(store, n)
                _write_slot(store, fitted, n)
                _write_init_time(store, value, n)
                faults.point("zarr-commit")
                _commit(store)
                with open_committed(backend.reader(location)) as check:
                    if check.sizes[INIT] != n + 1 or not (check[INIT].values == value).any():
                        raise ArchiveError(f"{location}: append of {value} did not commit")
                log.info("%s: archived init_time %s in %s (%d cycles)", product, value,
                         location, n + 1)
                return location
            new = backend.store_location(product, version + 1)
            log.warning("%s: run %s does not fit %s (%s); starting %s", product, value,
                        location, reason, new)
        else:
            new = backend.store_location(product, 1)
        _create_store(backend, new, ds, point_chunk)
        log.info("%s: created %s with init_time %s", product, new, value)
        return new


def retain_archive(root: Path | str, product: str, keep_days: float) -> list[Any]:
    """Drop the init_times older than ``keep_days`` before the newest one archived from the
    product's archive stores; return the stores rewritten or removed.

    A store is compacted once a day at most: only when it holds an init_time more than a day
    past the limit are all those past it dropped, so it keeps ``keep_days`` to ``keep_days``
    + 1 days, and a cycle does not rewrite the whole archive to drop its oldest entry. A
    compacted store is written whole beside the old one, with the same encoding, and swapped
    for it in one step (`Backend.replace_store`): a reader opening the store sees the old one
    or the new one, never a store half compacted. An older store version left with nothing
    to keep is removed; the newest is always kept (it holds the newest init_time). Under the
    archive's lock: no append runs meanwhile.
    """
    check_name("product", product)
    backend = backend_for(root)
    done: list[Any] = []
    with backend.archive_lock(product):
        versions = backend.store_versions(product)
        if not versions:
            return done
        inits: dict[Any, np.ndarray] = {}
        for _, location in versions:
            with open_committed(backend.reader(location)) as arch:
                inits[location] = arch[INIT].values
        newest = max((v.max() for v in inits.values() if len(v)), default=None)
        if newest is None:
            return done
        cutoff = newest - np.timedelta64(int(keep_days * 86400), "s")
        for _, location in versions:
            values = inits[location]
            if not len(values) or values.min() >= cutoff - np.timedelta64(1, "D"):
                continue
            keep = np.flatnonzero(values >= cutoff)
            if not len(keep):
                if location != versions[-1][1]:
                    backend.remove_store(location)
                    log.info("%s: removed %s, all its %d init_times older than %s", product,
                             location, len(values), cutoff)
                    done.append(location)
                continue
            with open_committed(backend.reader(location)) as arch:
                kept = arch.isel({INIT: keep})
                point_chunk = next((v.encoding["chunks"][v.dims.index(POINT)] for v in arch.data_vars.values()
                                    if INIT in v.dims and POINT in v.dims and "chunks" in v.encoding), None)
                encoding = _creation_encoding(kept, point_chunk)
                kept = _by_shard(kept, {name: e["shards"] for name, e in encoding.items() if "shards" in e})
                for var in kept.variables.values():
                    var.encoding = {}

                def write(store: Any, kept: xr.Dataset = kept, encoding: dict = encoding) -> None:
                    with zarr_settings():
                        kept.to_zarr(store, mode="w-", consolidated=True, zarr_format=3, encoding=encoding)

                backend.replace_store(location, write)
            log.info("%s: dropped %d init_times older than %s from %s (%d kept)", product,
                     len(values) - len(keep), cutoff, location, len(keep))
            done.append(location)
    return done
