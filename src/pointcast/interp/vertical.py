"""Source levels -> heights above ground, and point elevations.

The wind and temperature at the heights the products ask for, from what a model publishes:
the 10 m wind and 2 m temperature, winds on height levels, pressure levels (their geopotential
height above the model's ground) and ICON's model levels (heights from the run's own HHL).
The wind is interpolated in log height and extended beyond the levels by a power law
(``physics.wind_at_heights``), the temperature linear in height and extended by the lapse rate
of its outer levels, or the standard atmosphere's from the 2 m temperature where no upper
level is above the ground. Where a point's elevation is configured, each variable's catalogue
correction moves it from the model's ground to the point's (``correct_elevation``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xarray as xr

from .. import physics
from ..catalogue import VARIABLES, Elevation

# Fields that only feed the vertical profile; the point dataset carries the profile's result.
PROFILE_INPUTS = {"u", "v", "t_pl", "u_pl", "v_pl", "z_pl", "u_ml", "v_ml", "hhl", "orog"}
# Threads the vertical profiles are computed on, the times split among them: numpy releases
# the GIL, and the next model's decode waits for this extraction.
PROFILE_THREADS = len(os.sched_getaffinity(0))
# The profiles of a part of the times computed at once: their float64 copies (the levels'
# heights and values stacked, sorted, gathered) stay near this many bytes whatever the points.
PROFILE_PART_BYTES = 64 << 20
PROFILE_COPIES = 6


def profiles(out: xr.Dataset, values: dict, ds: xr.Dataset, orog: np.ndarray,
              heights: np.ndarray, groups: Sequence[tuple[int, Sequence[float]]]) -> None:
    """Wind and temperature at `heights` from the 10 m/2 m fields, height levels and pressure
    levels, for each group of points (`extract`) at its own heights."""
    fields = {name: np.full((len(out.time), len(out.point), len(heights)), np.nan, dtype=np.float32)
              for name in ("wind_u", "wind_v", "air_temperature")}
    column = {h: i for i, h in enumerate(heights.tolist())}
    first = 0
    for count, wanted in groups:
        points = slice(first, first + count)
        first += count
        if not len(wanted):
            continue
        cols = [column[h] for h in wanted]
        group = {k: v[..., points] for k, v in values.items()}  # the points are the last axis
        profiled = _profile(group, ds, orog[points], np.asarray(wanted, dtype=float), len(out.time), count)
        if profiled is None:  # no wind at any level
            return
        for name, (rows, columns) in profiled.items():
            for col, arr in zip(cols, columns, strict=True):
                fields[name][rows, points, col] = arr
    for name, arr in fields.items():
        out[name] = (("time", "point", "height"), arr)
    out.coords["height"] = heights
    out["height"].attrs.update(units="m", long_name="height above ground")


def _profile(values: dict, ds: xr.Dataset, orog: np.ndarray, heights: np.ndarray, t_len: int,
             p_len: int) -> dict | None:
    """Wind and temperature at `heights` for the points of ``values``: by name, the times
    (rows) computed and a (row, point) array a height (NaN at the other times)."""
    wind_h, wind_u, wind_v = [], [], []
    if "u10" in values:
        wind_h.append(np.full((t_len, p_len), 10.0))
        wind_u.append(values["u10"])
        wind_v.append(values["v10"])
    if "u" in values:
        for k, h in enumerate(ds.height.values):
            if h == 10 and "u10" in values:
                continue
            wind_h.append(np.full((t_len, p_len), float(h)))
            wind_u.append(values["u"][:, k])
            wind_v.append(values["v"][:, k])
    temp_h, temp_v = [np.full((t_len, p_len), 2.0)], [values["t2m"]]
    if "z_pl" in values:
        level_height = values["z_pl"] - orog[None, None, :]  # (time, plev, point) above ground
        for k in range(level_height.shape[1]):
            above = np.where(level_height[:, k] > 10.0, level_height[:, k], np.nan)
            if "u_pl" in values:
                wind_h.append(above)
                wind_u.append(values["u_pl"][:, k])
                wind_v.append(values["v_pl"][:, k])
            if "t_pl" in values:
                temp_h.append(above)
                temp_v.append(values["t_pl"][:, k])
    if "u_ml" in values and "hhl" in values:
        # ICON model levels, whatever their numbers (each run's own, sources/icon.py): full
        # level L lies halfway between half levels L and L + 1 (HHL, above sea level); a full
        # level whose half levels the run lacks has no height and is left out.
        half = {int(lv): k for k, lv in enumerate(ds.hlev.values)}
        for k, level in enumerate(ds.mlev.values):
            if int(level) not in half or int(level) + 1 not in half:
                continue
            top, bottom = values["hhl"][half[int(level)]], values["hhl"][half[int(level) + 1]]
            above = (0.5 * (top + bottom) - orog).astype(np.float64)
            wind_h.append(np.broadcast_to(above, (t_len, p_len)))
            wind_u.append(values["u_ml"][:, k])
            wind_v.append(values["v_ml"][:, k])
    if not wind_h:
        return None
    wind_rows: slice | np.ndarray
    if len(wind_h) == 1:  # only the 10 m wind (JMA MSM surface fields): no profile to follow
        wind_rows = slice(None)
        zs, us, vs = (a[0][..., np.newaxis] for a in (wind_h, wind_u, wind_v))
        cols_u, cols_v = ([_single_level(zs, a, h) for h in heights] for a in (us, vs))
    else:
        wind_rows = _rows_with_levels(wind_u)

        def winds(rows):
            zs, us, vs = _sorted_profiles(rows, wind_h, wind_u, wind_v)
            return [col for uv in physics.wind_at_heights(us, vs, zs, heights) for col in uv]

        columns = _by_rows(winds, wind_rows, len(wind_h), p_len)
        cols_u, cols_v = columns[0::2], columns[1::2]
        if len(wind_rows) < t_len:
            # A time with one level alone (an ensemble's 10 m wind past the steps its wind
            # above is fetched for, `pointcast.need`) still has that level's height.
            cols_u, cols_v = ([_at_level(_on_rows(col, wind_rows, t_len), wind_h, comps, h)
                               for col, h in zip(cols, heights, strict=True)]
                              for cols, comps in ((cols_u, wind_u), (cols_v, wind_v)))
            wind_rows = slice(None)
    if len(temp_h) == 1:  # no upper level at all (JMA MSM surface files)
        temps = [np.full((t_len, p_len), np.nan) for _ in heights]
    else:
        temp_rows = _rows_with_levels(temp_v)

        def temperatures(rows):
            zt, tt = _sorted_profiles(rows, temp_h, temp_v)
            return physics.interp_linear_heights(tt, zt, heights)

        temps = [_on_rows(t, temp_rows, t_len) for t in _by_rows(temperatures, temp_rows, len(temp_h), p_len)]
    # No upper level above the ground (a model without pressure levels, or high terrain where
    # every level published is below the surface): the standard atmosphere's lapse rate from
    # the 2 m temperature.
    t2m = values["t2m"].astype(np.float64)
    temps = [np.where(np.isnan(t), t2m - physics.LAPSE_RATE * (h - 2.0), t)
             for t, h in zip(temps, heights, strict=True)]
    return {"wind_u": (wind_rows, cols_u), "wind_v": (wind_rows, cols_v),
            "air_temperature": (slice(None), temps)}


def _rows_with_levels(levels: list[np.ndarray]) -> np.ndarray:
    """The times (rows of the (time, point) levels) at which two levels or more have a value
    somewhere. At the others no point has a profile and every height is NaN: ICON-D2's model
    levels are hourly on its 15-minute axis, three times in four."""
    return np.flatnonzero(sum(np.isfinite(a).any(axis=-1) for a in levels) >= 2)


def _by_rows(compute, rows: np.ndarray, levels: int, points: int) -> list[np.ndarray]:
    """``compute(rows)``, a list of (row, point) arrays, computed on parts of ``rows``
    `PROFILE_THREADS` at a time and joined: a profile at a time is independent of the others,
    so the values are those of one call. A part's profiles (``levels`` of ``points``, float64,
    sorted and gathered: `PROFILE_COPIES` copies) take at most about `PROFILE_PART_BYTES`."""
    per_row = PROFILE_COPIES * 8 * levels * points
    if len(rows) * per_row < PROFILE_PART_BYTES // 16:  # too little to be worth a thread pool
        return compute(rows)  # (an ensemble's members are profiled in small blocks, each)
    count = max(PROFILE_THREADS, -(-len(rows) * per_row // PROFILE_PART_BYTES))
    parts = [part for part in np.array_split(rows, count) if len(part)]
    if len(parts) < 2:
        return compute(rows)
    with ThreadPoolExecutor(min(PROFILE_THREADS, len(parts))) as pool:
        computed = list(pool.map(compute, parts))
    return [np.concatenate(columns) for columns in zip(*computed, strict=True)]


def _sorted_profiles(rows: np.ndarray, heights: list[np.ndarray], *values: list[np.ndarray]):
    """The levels' (time, point) heights and values at ``rows`` as (row, point, level)
    profiles, the levels sorted by height (absent heights last)."""
    z = np.stack([a[rows] for a in heights], axis=-1)
    order = np.argsort(np.where(np.isnan(z), np.inf, z), axis=-1)
    return [np.take_along_axis(z, order, axis=-1),
            *(np.take_along_axis(np.stack([a[rows] for a in v], axis=-1), order, axis=-1) for v in values)]


def _on_rows(values: np.ndarray, rows: np.ndarray, t_len: int) -> np.ndarray:
    """(row, point) values back on the time axis, NaN at the other times."""
    out = np.full((t_len,) + values.shape[1:], np.nan)
    out[rows] = values
    return out


def _at_level(column: np.ndarray, heights: list[np.ndarray], values: list[np.ndarray], target: float) -> np.ndarray:
    """``column`` (time, point) where it has a value, elsewhere the value of a level at the
    ``target`` height itself, where one has it."""
    out = column
    for z, v in zip(heights, values, strict=True):
        out = np.where(np.isnan(out) & (z == target), v, out)
    return out


def _single_level(heights: np.ndarray, values: np.ndarray, target: float) -> np.ndarray:
    """A one-level 'profile' gives its level's value there and nothing elsewhere."""
    return np.where(heights[..., 0] == target, values[..., 0], np.nan)


# What `surface_height` reads, at the first time.
SURFACE_INPUTS = ("sp", "msl", "t2m")


def surface_height(values: dict, n_points: int) -> np.ndarray:
    """Model surface height where a source publishes no orography (JMA MSM surface files, the
    GEFS members'): from sea-level and surface pressure at the first time by the hypsometric
    equation, with the layer's mean temperature from the 2 m temperature and the standard
    lapse rate. Unknown (NaN) without those pressures: the fields are then not corrected to
    the point's elevation (`correct_elevation`), rather than corrected from a ground at sea
    level."""
    if not set(SURFACE_INPUTS) <= values.keys():
        return np.full(n_points, np.nan, dtype=np.float32)
    sp, msl, t = (values[k][0].astype(np.float64) for k in SURFACE_INPUTS)
    z = np.zeros(n_points)
    for _ in range(3):  # the layer temperature depends on the height: converge by iteration
        z = physics.RD * (t + 0.5 * physics.LAPSE_RATE * z) / physics.G * np.log(msl / sp)
    return np.nan_to_num(z).astype(np.float32)


def correct_elevation(out: xr.Dataset, dz: np.ndarray) -> None:
    """Apply each variable's catalogue correction where the point elevation is known."""
    known = np.isfinite(dz)
    if not known.any():
        return
    dz = np.where(known, dz, 0.0).astype(np.float32)
    t_before = out["t2m"].values.copy() if "t2m" in out else None
    for name in list(out.data_vars):
        kind = VARIABLES[str(name)].elevation
        if kind is Elevation.LAPSE:
            out[name].values[:] = physics.lapse_rate_correction(out[name].values, _bcast(dz, out[name]))
        elif kind is Elevation.HYPSOMETRIC and t_before is not None:
            t_after = physics.lapse_rate_correction(t_before, dz)
            out[name].values[:] = physics.pressure_at_height(out[name].values, t_before, t_after, dz)


def _bcast(dz: np.ndarray, arr: xr.DataArray) -> np.ndarray:
    shape = [1] * arr.ndim
    shape[arr.dims.index("point")] = len(dz)
    return dz.reshape(shape)
