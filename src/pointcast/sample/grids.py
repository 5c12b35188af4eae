"""The grids the sample writes: a model's operational grid cropped to the sample area with every
Nth row and column kept (``sample_grid``), or, for DWD's native ICON grids, a lattice of cell
centres standing in for the refined icosahedron (``cell_grid``)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from ..sources.base import ModelSpec
from ..sources.icon import NATIVE_GRIDS, NativeGrid

R_EARTH = 6.371e6  # m, the sphere of the sample's geometry (grids, terrain and weather)


@dataclass(frozen=True)
class SampleGrid:
    """A regular lat/lon grid in file order (rows along ``lats``, columns along ``lons``)."""

    lats: np.ndarray  # 1-D, first row first
    lons: np.ndarray  # 1-D, -180..180
    dlat: float  # positive increments
    dlon: float

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.lats), len(self.lons)

    @property
    def south_to_north(self) -> bool:
        return len(self.lats) < 2 or self.lats[1] > self.lats[0]


    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Latitudes as a column and longitudes as a row: fields are (lat, lon) arrays."""
        return self.lats.astype(float)[:, None], self.lons.astype(float)[None, :]

    def describe(self) -> str:
        nlat, nlon = self.shape
        return (f"{nlat} x {nlon} points, lat {self.lats[0]}..{self.lats[-1]}, lon "
                f"{self.lons[0]}..{self.lons[-1]}, spacing {self.dlat} x {self.dlon} deg")


@dataclass(frozen=True)
class CellGrid:
    """The cell centres of a native-style unstructured grid, in file order.

    A Fibonacci lattice stands in for ICON's refined icosahedron: points spread evenly over
    the sphere with one cell per ``spacing_km`` squared (ICON's effective mesh size is the
    square root of the mean cell area), cropped to the model's domain and the sample area. It
    has what a reader of ICON's grids must cope with (no rows or columns, neighbours found by
    distance only) and is made in milliseconds at any scale."""

    lats: np.ndarray  # degrees, one per cell
    lons: np.ndarray  # degrees, -180..180
    number: int  # numberOfGridUsed (the real model's)
    uuid: str  # uuidOfHGrid (this sample grid's own)
    spacing_km: float

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.lats),)

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Latitudes and longitudes both as columns: fields are (cell, 1) arrays."""
        return self.lats.astype(float)[:, None], self.lons.astype(float)[:, None]

    def describe(self) -> str:
        return (f"{len(self.lats)} cells of an unstructured grid (Fibonacci lattice standing "
                f"in for ICON grid {self.number}, uuidOfHGrid {self.uuid}), about "
                f"{self.spacing_km:g} km apart, lat {self.lats.min():.2f}..{self.lats.max():.2f}, "
                f"lon {self.lons.min():.2f}..{self.lons.max():.2f}")


def cell_grid(model: ModelSpec, scale: int, area: tuple[float, float, float, float],
              native: NativeGrid | None = None) -> CellGrid:
    """``model``'s native-style grid (``native``, by default ``NATIVE_GRIDS[model.id]``) at
    ``scale`` times its mesh size, cropped to its domain and ``area`` (west, south, east,
    north). Only the lattice's latitude band is generated (the lattice index runs
    monotonically with latitude), so scale 1 costs no global array."""
    g = native or NATIVE_GRIDS[model.id]
    west, south, east, north = area
    south, north = max(south, g.lat_min), min(north, g.lat_max)
    west, east = max(west, g.lon_min), min(east, g.lon_max)
    spacing = g.spacing_km * scale
    n = max(3, round(4.0 * math.pi * (R_EARTH / 1000.0) ** 2 / spacing ** 2))
    # Lattice point i sits at z = 1 - (2 i + 1) / n and longitude i times the golden angle.
    lo = max(0, math.floor(((1.0 - math.sin(math.radians(north))) * n - 1.0) / 2.0))
    hi = min(n - 1, math.ceil(((1.0 - math.sin(math.radians(south))) * n - 1.0) / 2.0))
    i = np.arange(lo, hi + 1, dtype=np.float64)
    lat = np.degrees(np.arcsin(1.0 - (2.0 * i + 1.0) / n))
    lon = (np.degrees(i * (math.pi * (3.0 - math.sqrt(5.0)))) + 180.0) % 360.0 - 180.0
    keep = (lat >= south) & (lat <= north) & (lon >= west) & (lon <= east)
    if keep.sum() < 3:
        raise ValueError(f"sample area {area} leaves fewer than 3 cells of {model.id}'s native "
                         f"grid at scale {scale}")
    key = f"pointcast-sample {model.id} native grid {scale} {list(area)}"
    return CellGrid(lats=np.round(lat[keep], 6), lons=np.round(lon[keep], 6), number=g.number,
                    uuid=hashlib.md5(key.encode()).hexdigest(), spacing_km=spacing)


def _axis(first: float, last: float, step: float) -> np.ndarray:
    n = round(abs(last - first) / step) + 1
    sign = 1.0 if last >= first else -1.0
    return np.round(first + sign * step * np.arange(n), 6)


def sample_grid(model: ModelSpec, scale: int, area: tuple[float, float, float, float]) -> SampleGrid:
    """Crop ``model``'s grid to ``area`` (west, south, east, north) and keep every ``scale``-th
    row and column, counted from the first row/column of the operational grid (so coarser
    samples are subsets of finer ones)."""
    west, south, east, north = area
    g = model.grid
    lat = _axis(g.lat_first, g.lat_last, g.dlat)
    lon = _axis(g.lon_first, g.lon_last, g.dlon)
    eps = 1e-6
    # Grids stored 0..360 (GFS) are cropped in -180..180 like the others: the columns east of
    # 180 come first, so an area across the Greenwich meridian is one contiguous block.
    lon = np.round((lon + 180.0) % 360.0 - 180.0, 6)
    rows = np.nonzero((lat >= south - eps) & (lat <= north + eps)
                      & (np.arange(len(lat)) % scale == 0))[0]
    cols = np.nonzero((lon >= west - eps) & (lon <= east + eps)
                      & (np.arange(len(lon)) % scale == 0))[0]
    cols = cols[np.argsort(lon[cols], kind="stable")]
    if len(rows) < 2 or len(cols) < 2:
        raise ValueError(f"sample area {area} leaves fewer than 2x2 points of {model.id}'s grid "
                         f"at scale {scale}")
    if not np.allclose(np.diff(lon[cols]), g.dlon * scale, atol=1e-4):
        raise ValueError(f"sample area {area} at scale {scale}: the columns of {model.id}'s "
                         f"grid are not evenly spaced across the 0/360 seam")
    return SampleGrid(lats=lat[rows], lons=lon[cols], dlat=g.dlat * scale, dlon=g.dlon * scale)
