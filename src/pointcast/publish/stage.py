"""A run's staged archives: each product's cycle, written region by region by the build slices.

A run's products are built in slices of their points, in other processes (forked, or dask
workers). Each slice writes its products' archive rows into the run's staged store of each
product (`write_region`) and returns none of them, so no process ever holds a product's whole
cycle; the publish stage appends the staged cycle to the product's archive chunk by chunk
(`ArchiveStage.dataset`, lazy; ``archive.append_archive``).

Layout: ``<staging>/archive/<product>.zarr``, in the run's staging directory beside its JSON
tree (``<staging>/json``): every process that writes the run's files sees it, and the publish
stage removes it (`remove_stage`) before the tree is published or kept aside. A staged store
is a plain Zarr group of the product's arrays along ``point`` only: the rest (the other
coordinates, the attributes, the dtypes) is the product's archive of the first point
(`ArchiveStage.create`), which the flow keeps. Its chunks along ``point`` are the slices, so
no two slices write one chunk.

The flow that makes a stage holds the staging directory while it lives (`pointcast.locks`); a
stage whose directory nobody holds is abandoned (its cycle died) and retention removes it
(`remove_abandoned`), so a killed cycle's staged stores are gone after the next cycle.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr

from .. import locks
from .archive import ARCHIVE_CODEC, INIT, POINT, zarr_settings
from .backend import RUNS, STAGING_PREFIX, check_name, is_url

STAGE_DIR = "archive"


def stage_path(staging: Path | str) -> Path:
    """Where the staged archives of the run staged at ``staging`` are."""
    return Path(staging) / STAGE_DIR


def _store(staging: Path | str, product: str) -> Path:
    return stage_path(staging) / f"{check_name('product', product)}.zarr"


def _along_point(ds: xr.Dataset) -> list[str]:
    """The variables a slice writes: those along ``point`` but its labels."""
    return [str(name) for name, var in ds.variables.items() if POINT in var.dims and name != POINT]


class ArchiveStage:
    """The staged archives of one run, as the flow holds them: made and locked here, written by
    the slices (`write_region`), read back lazily (`dataset`)."""

    def __init__(self, staging: Path | str):
        self.staging = Path(staging)
        self.path = stage_path(staging)
        self._templates: dict[str, tuple[xr.Dataset, np.ndarray]] = {}
        # Locked before the stage exists, for as long as this object lives (and the process):
        # retention removes a stage only while it holds the lock itself.
        weakref.finalize(self, os.close, locks.hold(self.staging))
        self.path.mkdir(exist_ok=True)

    def create(self, product: str, template: xr.Dataset, points: list[str], chunk: int) -> None:
        """The product's staged store: ``template`` (its archive of one point) along all its
        ``points``, in chunks of ``chunk`` points (the slices'). Only the layout is written,
        and the point labels (`write_region` checks a slice's against them)."""
        if template.sizes[POINT] != 1:
            raise ValueError(f"the template of {product}'s staged archive must hold one point")
        n = len(points)
        ids = np.array([str(p) for p in points], dtype=object)
        with zarr_settings():
            group = zarr.open_group(_store(self.staging, product), mode="w-", zarr_format=3)
            labels = group.create_array(POINT, shape=(n,), chunks=(chunk,), dtype=str,
                                        dimension_names=(POINT,))
            labels[:] = ids
            for name in _along_point(template):
                var = template[name].variable
                shape = tuple(n if d == POINT else s for d, s in zip(var.dims, var.shape, strict=True))
                chunks = tuple(chunk if d == POINT else s for d, s in zip(var.dims, var.shape, strict=True))
                dtype = str if var.dtype.kind in "OSU" else var.dtype
                fill = np.nan if var.dtype.kind == "f" else None
                group.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
                                   compressors="auto" if dtype is str else (ARCHIVE_CODEC,),
                                   dimension_names=[str(d) for d in var.dims])
        self._templates[product] = (template, ids)

    def dataset(self, product: str) -> xr.Dataset:
        """The product's cycle as the slices wrote it: the template's coordinates, attributes
        and dtypes, its arrays along ``point`` read from the staged store, those along
        ``init_time`` lazily (xarray's lazy indexing: whoever reads a part of them, a shard of
        the append or the validation's sample, reads only that part), the others (a point's
        coordinates) at once."""
        template, ids = self._templates[product]
        with zarr_settings(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Failed to open Zarr store with consolidated")
            staged = xr.open_dataset(_store(self.staging, product), engine="zarr", chunks=None,
                                     cache=False, decode_cf=False, consolidated=False)
        variables: dict[Any, xr.Variable] = {}
        for name, var in template.variables.items():
            if name == POINT:
                variables[name] = xr.IndexVariable(var.dims, ids, var.attrs)
            elif name not in staged:
                variables[name] = var
            elif INIT in var.dims and staged[name].dtype == var.dtype:
                # lazily indexed: a reader (a shard of the append) reads only its rows; the
                # store's chunks tell a reader of scattered points (validation's sample) which
                # of them one read decodes together
                variables[name] = staged[name].variable.copy(deep=False)
                variables[name].attrs = dict(var.attrs)
                variables[name].encoding = {"preferred_chunks": staged[name].encoding["preferred_chunks"]}
            else:  # a point's coordinates (small), read at once
                variables[name] = xr.Variable(var.dims, staged[name].values.astype(var.dtype), var.attrs)
        return xr.Dataset({k: variables[k] for k in template.data_vars},
                          coords={k: variables[k] for k in template.coords}, attrs=template.attrs)


def write_region(staging: Path | str, product: str, ds: xr.Dataset, points: slice) -> None:
    """Write ``ds``, a slice's archive of ``product`` (its points ``points`` of the list), into
    the run's staged store (`ArchiveStage.create`); a slice whose points are not the store's
    at ``points`` is refused."""
    with zarr_settings():
        group = zarr.open_group(_store(staging, product), mode="r+")
        arrays = dict(group.arrays())
        labels = arrays[POINT][points]
        if not np.array_equal(np.asarray(labels, dtype=object),
                              np.array([str(p) for p in ds[POINT].values], dtype=object)):
            raise ValueError(f"{product}: the slice's points are not the staged store's at "
                             f"{points.start}:{points.stop}")
        for name in _along_point(ds):
            var = ds[name].variable
            arrays[name][tuple(points if d == POINT else slice(None) for d in var.dims)] = var.values


def remove_stage(staging: Path | str) -> None:
    """Remove the staged archives of the run staged at ``staging`` (none: nothing to do)."""
    shutil.rmtree(stage_path(staging), ignore_errors=True)


def _staging_parent(root: Path | str) -> Path:
    """Where the staging directories of ``root``'s runs are made (``Backend.new_staging``):
    ``runs/`` on a local root, the temporary directory for an object store."""
    return Path(tempfile.gettempdir()) if is_url(root) else Path(root) / RUNS


def remove_abandoned(root: Path | str) -> list[Path]:
    """Remove the staged archives of runs whose cycle is gone (nobody holds the lock of their
    staging directory); return the stages removed."""
    parent = _staging_parent(root)
    if not parent.is_dir():
        return []
    removed = []
    for stage in sorted(parent.glob(f"{STAGING_PREFIX}*/{STAGE_DIR}")):
        with locks.abandoned(stage.parent) as gone:
            if gone:
                shutil.rmtree(stage, ignore_errors=True)
                removed.append(stage)
    return removed
