"""Scratch stores: a model's extracted point series on disk until the cycle's build reads them.

An extraction (`horizontal.extract_blocks`) is written a block of time steps at a time, each
block as a region of one Zarr store per points list (`write`), so that no process holds every
point's series: the build reads each slice of a list's points from its store (`load`). The
stores live under ``<cache dir>/scratch/<run id>/`` (`directory`), which every dask worker
sees at the same path, and go when the cycle ends; a directory whose cycle was killed is
removed by the next cycle (`publish.retention.retain_scratch`), which tells it from a live
one by the lock its cycle holds (`held`, `pointcast.locks`).
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import dask.array as da
import numcodecs
import numpy as np
import xarray as xr

from .. import locks
from ..heap import release_freed

SCRATCH_DIR = "scratch"  # under the cache directory
# Light compression: the series are read once, and the heights a list's points do not need
# (NaN) shrink to almost nothing.
CODEC = numcodecs.Blosc(cname="lz4", clevel=1, shuffle=numcodecs.Blosc.SHUFFLE)


@dataclass(frozen=True)
class Part:
    """One points list's store of a model's extraction: its points among the extraction's,
    its heights, and the points a chunk holds (a build slice's, so that a slice reads whole
    chunks)."""

    path: str
    points: slice
    heights: Sequence[float]
    point_chunk: int


def directory(cache_dir: Path | str, run_id: str) -> Path:
    """The scratch directory of a cycle."""
    return Path(cache_dir) / SCRATCH_DIR / run_id


@contextmanager
def held(path: Path) -> Iterator[Path]:
    """The cycle's scratch directory, made (emptied of what a killed cycle of the same run
    left), held while the cycle runs (`locks.hold`) and removed after it, whatever its end. A
    cycle of the same run running already holds it: an error."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        fd = locks.hold(path, wait=False)
    except BlockingIOError:
        raise RuntimeError(f"{path} is held by another cycle of the same run, running") from None
    try:
        for left in path.iterdir():  # by a killed cycle of the same run
            shutil.rmtree(left)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


def write(blocks: Iterable[tuple[slice, xr.Dataset]], times: np.ndarray, parts: Iterable[Part]) -> None:
    """Each block of an extraction (its rows of ``times``, the run's time axis, and its series)
    into the stores of ``parts``, as a region of time: a part's store holds its points at its
    heights, in chunks of the blocks' steps and of ``point_chunk`` points. The stores are made
    at the first block (they must not exist)."""
    parts = list(parts)
    for rows, block in blocks:
        for part in parts:
            sub = block.isel(point=part.points)
            if "height" in sub.dims:
                sub = sub.sel(height=list(part.heights))
            if rows.start == 0:
                _create(part, sub, times, rows.stop - rows.start)
            sub.drop_vars(list(sub.coords)).to_zarr(part.path, region={"time": rows}, mode="r+",
                                                    zarr_format=2, consolidated=False)
        block = sub = None  # not held while the next block is made
        release_freed()  # the blocks before this one
    release_freed()


def _create(part: Part, first: xr.Dataset, times: np.ndarray, rows: int) -> None:
    """The store of ``part`` with the variables of an extraction's first block, empty."""
    n = first.sizes["point"]
    chunk = {"time": rows, "point": max(1, min(part.point_chunk, n))}
    template = xr.Dataset(coords={"time": times, **{c: first[c] for c in first.coords if c != "time"}},
                          attrs=first.attrs)
    encoding = {}
    for name, var in first.data_vars.items():
        shape = tuple(len(times) if d == "time" else var.sizes[d] for d in var.dims)
        chunks = tuple(chunk.get(d, var.sizes.get(d)) for d in var.dims)
        # One dask chunk, never computed: only the layout is written (compute=False). In the
        # store's chunks, xarray would build a graph of every chunk first, and there are more
        # of them the more points (and the more points, the fewer steps a block): 15 s a
        # store at 50,000 points, most of the extraction's time.
        template[name] = (var.dims, da.zeros(shape, chunks=shape, dtype=var.dtype), var.attrs)
        encoding[name] = {"chunks": chunks, "compressors": (CODEC,)}
    template.to_zarr(part.path, mode="w-", compute=False, encoding=encoding, zarr_format=2,
                     consolidated=True)


def load(path: str, points: slice) -> xr.Dataset:
    """A slice of the points of a store `write` made, in memory, as the extraction gave them
    (no encoding kept: what is built from them is encoded afresh)."""
    with xr.open_zarr(path, chunks=None, consolidated=True) as ds:
        out = ds.isel(point=points).load()
    for var in out.variables.values():
        var.encoding = {}
    return out
