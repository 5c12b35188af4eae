"""Scratch stores: a model's extracted point series on disk until the cycle's build reads them.

An extraction (`horizontal.extract_blocks`) is written a block of time steps at a time, each
block as a region of one store per points list (`write`), so that no process holds every
point's series: the build reads each slice of a list's points from its store (`load`). A
store is one Zarr array of every variable's series side by side, ``(time, column, point)``
(`Layout`: a column a variable, or a variable at a height), in chunks of a block's steps,
every column and a build slice's points: a block is written as a chunk a slice, not a chunk a
slice and variable (a block has fewer steps the more points, so the chunks of a store grew as
the square of the points: docs/performance.md). The stores live under
``<cache dir>/scratch/<run id>/`` (`directory`), which every dask worker sees at the same
path, and go when the cycle ends; a directory whose cycle was killed is removed by the next
cycle (`publish.retention.retain_scratch`), which tells it from a live one by the lock its
cycle holds (`held`, `pointcast.locks`).
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numcodecs
import numpy as np
import xarray as xr
import zarr

from .. import locks, stopping
from ..heap import release_freed

SCRATCH_DIR = "scratch"  # under the cache directory
# Light compression: the series are read once, and the heights a list's points do not need
# (NaN) shrink to almost nothing.
CODEC = numcodecs.Blosc(cname="lz4", clevel=1, shuffle=numcodecs.Blosc.SHUFFLE)
LAYOUT, SERIES = "layout.pickle", "series"  # a store's files: its `Layout`, its Zarr array
# The bytes of the chunks written (or read) in one go: a few of them, each a build slice's
# points of a block of steps.
WRITE_BYTES = 16 << 20


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


@dataclass(frozen=True)
class Layout:
    """What a store holds besides its series: the coordinates and attributes of the
    extraction, and each variable's dims, dtype, attributes and columns (`columns`)."""

    coords: xr.Dataset  # the coordinates (the whole time axis) and the dataset's attributes
    variables: dict[Hashable, tuple[tuple[Hashable, ...], np.dtype, dict, slice]]  # name -> dims, dtype, attrs, columns

    @classmethod
    def of(cls, first: xr.Dataset, times: np.ndarray) -> Layout:
        """The layout of an extraction whose first block is ``first``."""
        coords = xr.Dataset(coords={"time": times, **{c: first[c] for c in first.coords if c != "time"}},
                            attrs=first.attrs)
        variables: dict[Hashable, tuple[tuple[Hashable, ...], np.dtype, dict, slice]] = {}
        start = 0
        for name, var in first.data_vars.items():
            if var.dims[0] != "time" or "point" not in var.dims:
                raise ValueError(f"{name}: a scratch store holds (time, point, ...) series, not {var.dims}")
            width = int(np.prod([var.sizes[d] for d in var.dims if d not in ("time", "point")], dtype=int))
            variables[name] = (var.dims, var.dtype, dict(var.attrs), slice(start, start + width))
            start += width
        return cls(coords, variables)

    @property
    def width(self) -> int:
        return max((cols.stop for *_, cols in self.variables.values()), default=0)

    @property
    def dtype(self) -> np.dtype:
        return np.result_type(*(dtype for _, dtype, *_ in self.variables.values()))


def column_order(dims: Sequence[Hashable]) -> list[Hashable]:
    """A variable's dims in the order of its columns: time, its other dims (its heights),
    point."""
    return ["time", *(d for d in dims if d not in ("time", "point")), "point"]


def columns(var: xr.DataArray) -> np.ndarray:
    """A variable's series as ``(time, column, point)``: its dims between time and point
    (`column_order`) are its columns."""
    values = var.transpose(*column_order(var.dims)).values
    return values.reshape(values.shape[0], -1, values.shape[-1])


def write(blocks: Iterable[tuple[slice, xr.Dataset]], times: np.ndarray, parts: Iterable[Part]) -> None:
    """Each block of an extraction (its rows of ``times``, the run's time axis, and its series)
    into the stores of ``parts``, as a region of time: a part's store holds its points at its
    heights, in chunks of the blocks' steps and of ``point_chunk`` points. The stores are made
    at the first block (they must not exist), inside the cycle's scratch directory, which is
    never made again once its cycle removed it. A cycle told to stop ends the writing before
    the next block (`pointcast.stopping`)."""
    parts = list(parts)
    block: xr.Dataset | None
    sub: xr.Dataset | None
    for rows, block in blocks:
        stopping.check()
        for part in parts:
            sub = block.isel(point=part.points)
            if "height" in sub.dims:
                sub = sub.sel(height=list(part.heights))
            if rows.start == 0:
                _create(part, sub, times, rows.stop - rows.start)
            _write_rows(part, sub, rows)
        block = sub = None  # not held while the next block is made
        release_freed()  # the blocks before this one
    release_freed()


def _create(part: Part, first: xr.Dataset, times: np.ndarray, rows: int) -> None:
    """The store of ``part`` for an extraction whose first block is ``first``, empty."""
    layout = Layout.of(first, times)
    path = Path(part.path)
    path.parent.mkdir(exist_ok=True)  # the model's, in the cycle's directory (`held`, `directory`)
    path.mkdir()
    (path / LAYOUT).write_bytes(pickle.dumps(layout, protocol=pickle.HIGHEST_PROTOCOL))
    n = first.sizes["point"]
    zarr.create_array(path / SERIES, shape=(len(times), layout.width, n), dtype=layout.dtype,
                      chunks=(rows, layout.width, max(1, min(part.point_chunk, n))),
                      compressors=CODEC, fill_value=np.nan, zarr_format=2)


def _write_rows(part: Part, block: xr.Dataset, rows: slice) -> None:
    """``block`` into the rows of its part's store, a few chunks of points at a time (a chunk
    of points is every variable's, so the block's columns are put side by side first)."""
    array = zarr.open_array(Path(part.path) / SERIES, mode="r+")
    series = [columns(var) for var in block.data_vars.values()]
    n = array.shape[2]
    step = _in_one_go(array.chunks[2], (rows.stop - rows.start) * array.shape[1] * array.chunks[2]
                      * array.dtype.itemsize)
    for first in range(0, n, step):
        at = slice(first, min(first + step, n))
        array[rows, :, at] = np.concatenate([s[..., at] for s in series], axis=1)


def _in_one_go(chunk: int, chunk_bytes: int) -> int:
    """The length along an axis in chunks of ``chunk`` (``chunk_bytes`` each) written or read
    in one go: as many chunks as make `WRITE_BYTES`, at least one."""
    return chunk * max(1, WRITE_BYTES // max(1, chunk_bytes))


def load(path: str, points: slice) -> xr.Dataset:
    """A slice of the points of a store `write` made, in memory, as the extraction gave them:
    read a few chunks of steps at a time, each put into every variable's array (the slice's
    series are held once, not once as the store's columns and again as variables)."""
    layout = pickle.loads((Path(path) / LAYOUT).read_bytes())
    array = zarr.open_array(Path(path) / SERIES, mode="r")
    out = layout.coords.isel(point=points, missing_dims="ignore")
    n = len(range(*points.indices(array.shape[2])))
    sizes = {**out.sizes, "point": n}
    values, views = {}, {}
    for name, (dims, dtype, _, _) in layout.variables.items():
        values[name] = np.empty([sizes[d] for d in dims], dtype)
        views[name] = values[name].transpose([dims.index(d) for d in column_order(dims)])
    steps = _in_one_go(array.chunks[0], array.chunks[0] * array.shape[1] * n * array.dtype.itemsize)
    for first in range(0, array.shape[0], steps):
        rows = slice(first, min(first + steps, array.shape[0]))
        block = np.asarray(array[rows, :, points])
        for name, (*_, cols) in layout.variables.items():
            view = views[name][rows]
            view[...] = block[:, cols].reshape(view.shape)
    for name, (dims, _, attrs, _) in layout.variables.items():
        out[name] = xr.Variable(dims, values[name], attrs)
    return out
