"""Land from the offline ``global_land_mask`` package (the GLOBE 1 km land/sea mask), read in
blocks and pooled to the resolution a coverage raster needs.
"""

from __future__ import annotations

import importlib.util
import logging
import zipfile
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

_GLM_STEP = 120  # cells per degree of the global_land_mask raster (1/120 deg, about 1 km)


def _land_any_blocks(north: float, south: float, west: float, east: float, pool: int) -> np.ndarray:
    """Land of global_land_mask in the box, pooled by ``pool`` x ``pool`` mask cells ("any land").

    Row k covers latitudes (north - (k+1) d, north - k d], column l covers longitudes
    [west + l d, west + (l+1) d) with d = pool / 120 degrees: the same convention as
    ``globe.is_land`` (which truncates towards the row/column of the mask's lat/lon arrays).
    Only the needed rows are decompressed from the package's ``.npz`` (a plain zip holding a
    C-ordered boolean ``.npy`` "is ocean" array with lat from 90 to -90 and lon from -180
    to 180); if that layout ever changes we fall back to ``globe.is_land``.
    """
    r0 = round((90.0 - north) * _GLM_STEP)
    r1 = round((90.0 - south) * _GLM_STEP)
    c0 = round((west + 180.0) * _GLM_STEP)
    c1 = round((east + 180.0) * _GLM_STEP)
    if (r1 - r0) % pool or (c1 - c0) % pool:
        raise ValueError("box edges must fall on pool boundaries of the land mask")
    try:
        return _land_from_npz(r0, r1, c0, c1, pool)
    except Exception as exc:  # pragma: no cover - only if the package layout changes
        log.warning("reading global_land_mask data directly failed (%s); using globe.is_land", exc)
        return _land_from_globe(north, south, west, east, pool)


def _glm_npz_path() -> Path:
    spec = importlib.util.find_spec("global_land_mask")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("package global_land_mask is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "globe_combined_mask_compressed.npz"


def _land_from_npz(r0: int, r1: int, c0: int, c1: int, pool: int) -> np.ndarray:
    with zipfile.ZipFile(_glm_npz_path()) as zf, zf.open("mask.npy") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        if shape != (180 * _GLM_STEP, 360 * _GLM_STEP) or fortran or dtype != np.dtype(bool):
            raise ValueError(f"unexpected mask layout {shape} {dtype} fortran={fortran}")
        ncols = shape[1]
        # Skip the rows north of the box without keeping them.
        skip = r0 * ncols
        while skip:
            got = len(f.read(min(skip, 1 << 24)))
            if not got:
                raise ValueError("truncated land mask")
            skip -= got
        out = np.empty(((r1 - r0) // pool, (c1 - c0) // pool), bool)
        block_rows = pool * 64
        for start in range(0, r1 - r0, block_rows):
            n = min(block_rows, r1 - r0 - start)
            buf = f.read(n * ncols)
            if len(buf) != n * ncols:
                raise ValueError("truncated land mask")
            ocean = np.frombuffer(buf, dtype=bool).reshape(n, ncols)[:, c0:c1]
            land = ~ocean
            out[start // pool : (start + n) // pool] = land.reshape(
                n // pool, pool, (c1 - c0) // pool, pool
            ).any(axis=(1, 3))
    return out


def _land_from_globe(north: float, south: float, west: float, east: float, pool: int) -> np.ndarray:  # pragma: no cover
    from global_land_mask import globe

    d = 1.0 / _GLM_STEP
    nrow = round((north - south) * _GLM_STEP)
    ncol = round((east - west) * _GLM_STEP)
    lons = west + (np.arange(ncol) + 0.5) * d
    out = np.empty((nrow // pool, ncol // pool), bool)
    for k in range(nrow // pool):
        lats = north - (k * pool + np.arange(pool) + 0.5) * d
        la, lo = np.meshgrid(lats, lons, indexing="ij")
        land = globe.is_land(la, lo)
        out[k] = land.reshape(pool, ncol // pool, pool).any(axis=(0, 2))
    return out
