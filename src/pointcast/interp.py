"""Extract (grid -> points, source levels -> heights) and resample (model steps -> product step).

Extract fuses with decode through dask: each message's grid is reduced to the points as soon
as it is decoded, so a run's full fields are never all in memory. A point's value is the
bilinear interpolation of the four source cells around its product-cell centre on a regular
grid, and on an unstructured grid (DWD's native ICON grids) the barycentric interpolation of
the three cells whose centres span the triangle around it (``barycentric``). How a grid is
sampled at a point set (the weights and the neighbourhoods of the precipitation probability)
is computed once per grid and point set and kept (``sampling``): every field of a run, and
every later run on the same grid, reuses it.

Resample puts every model on a 15-minute axis with each variable's own method from the
catalogue, so that blending and the 30min/1H products see one regular axis:
- states: monotone cubic (PCHIP) through the model's samples, no overshoot, no extrapolation;
  a wind through its speeds and its directions (not u and v apart, whose chord is slower);
- accumulations: the cumulative amount is interpolated linearly, so totals are kept exactly;
- radiation: the interval's clear-sky index times the clear-sky mean of each sub-interval, so
  energy is kept and radiation is zero whenever the sun is down;
- interval maxima (gust, neighbourhood probability): held over the sub-intervals of the
  window each message states (``_hold``).
After resampling, interval values belong to the interval that *starts* at their time stamp.
"""

from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
import functools
import hashlib
import os
from typing import ClassVar, Sequence

import dask
import dask.array as da
import numpy as np
import xarray as xr
from scipy.interpolate import PchipInterpolator
from scipy.spatial import Delaunay, cKDTree

from . import physics
from .catalogue import VECTORS, Elevation, Temporal, VARIABLES, variable

BASE_STEP = np.timedelta64(15, "m")
POP_RADIUS_KM = 25.0  # neighbourhood radius of the precipitation probability
POP_THRESHOLD_MM_H = 0.1  # wet when the interval's rate reaches this
KM_PER_DEG = 111.195
EARTH_RADIUS_KM = 6371.229  # ICON's sphere
# Cells searched around a point for the triangle holding it (enough to surround it on ICON's
# grids, where a cell centre has 12 neighbours within two rings).
TRIANGLE_CANDIDATES = 12
# Fields that only feed the vertical profile; the point dataset carries the profile's result.
PROFILE_INPUTS = {"u", "v", "t_pl", "u_pl", "v_pl", "z_pl", "u_ml", "v_ml", "hhl", "orog"}
# Threads the vertical profiles are computed on, the times split among them: numpy releases
# the GIL, and a 10,000-point list's profiles were seconds of one core while the other idled
# (the next model's decode waits for this extraction).
PROFILE_THREADS = len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class PointSet:
    """Points to extract: ids, the coordinates to sample (cell centres), optional elevation."""

    ids: np.ndarray
    lats: np.ndarray
    lons: np.ndarray
    elevation: np.ndarray  # metres; NaN where not configured

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def concat(cls, sets: Sequence[PointSet]) -> PointSet:
        """One point set of several, in order (ids may repeat across them)."""
        return cls(*(np.concatenate([getattr(s, f) for s in sets])
                     for f in ("ids", "lats", "lons", "elevation")))


@dataclass(frozen=True)
class Bilinear:
    """Indices and weights of the four source cells around each point (computed once a grid)."""

    y0: np.ndarray
    y1: np.ndarray
    x0: np.ndarray
    x1: np.ndarray
    wy: np.ndarray
    wx: np.ndarray
    inside: np.ndarray
    grid_ndim: ClassVar[int] = 2  # trailing axes of a field that are the grid: (lat, lon)

    def apply(self, field: np.ndarray) -> np.ndarray:
        """(..., lat, lon) -> (..., point); NaN for points outside the grid."""
        f00 = field[..., self.y0, self.x0]
        f01 = field[..., self.y0, self.x1]
        f10 = field[..., self.y1, self.x0]
        f11 = field[..., self.y1, self.x1]
        wy, wx = self.wy, self.wx
        out = (1 - wy) * ((1 - wx) * f00 + wx * f01) + wy * ((1 - wx) * f10 + wx * f11)
        return np.where(self.inside, out, np.nan).astype(np.float32)


def bilinear(lats: np.ndarray, lons: np.ndarray, plat: np.ndarray, plon: np.ndarray) -> Bilinear:
    """Weights on a regular grid with ascending `lats` and monotonic `lons` (global wrap aware)."""
    dlat = (lats[-1] - lats[0]) / (len(lats) - 1)
    dlon = (lons[-1] - lons[0]) / (len(lons) - 1)
    is_global = wraps_around(lons)
    fy = (plat - lats[0]) / dlat
    fx = ((plon - lons[0]) % 360.0) / dlon
    y0 = np.floor(fy).astype(int)
    x0 = np.floor(fx).astype(int)
    inside = (fy >= 0) & (fy <= len(lats) - 1)
    if is_global:
        x1 = (x0 + 1) % len(lons)
    else:
        inside &= fx <= len(lons) - 1
        x1 = np.minimum(x0 + 1, len(lons) - 1)
    y0c = np.clip(y0, 0, len(lats) - 1)
    x0c = np.clip(x0, 0, len(lons) - 1)
    y1 = np.minimum(y0c + 1, len(lats) - 1)
    return Bilinear(y0c, y1, x0c, np.clip(x1, 0, len(lons) - 1), (fy - y0).clip(0, 1),
                    (fx - x0).clip(0, 1), inside)


@dataclass(frozen=True)
class Barycentric:
    """The three cells around each point of an unstructured grid and their weights."""

    idx: np.ndarray  # (point, 3) cell indices
    w: np.ndarray  # (point, 3) weights, summing to 1
    inside: np.ndarray
    grid_ndim: ClassVar[int] = 1  # trailing axis of a field that is the grid: (cell,)

    def apply(self, field: np.ndarray) -> np.ndarray:
        """(..., cell) -> (..., point); NaN for points outside the grid or next to a missing cell."""
        out = (field[..., self.idx] * self.w).sum(axis=-1)
        return np.where(self.inside, out, np.nan).astype(np.float32)


def unit_vectors(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """(n, 3) points on the unit sphere."""
    phi, lam = np.radians(np.asarray(lat, float)), np.radians(np.asarray(lon, float))
    return np.stack([np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)], axis=-1)


def barycentric(tree: cKDTree, plat: np.ndarray, plon: np.ndarray) -> Barycentric:
    """Weights on an unstructured grid whose cell centres (unit vectors) are in ``tree``.

    The triangle around a point is a triangle of the Delaunay triangulation of the cell
    centres, made once for the cells near the points (a triangle of the whole grid's
    triangulation whose corners are all among those cells is one of theirs too) in a gnomonic
    projection (great circles are straight lines there, so "inside the plane triangle" is
    "inside the spherical triangle"). The weights are the point's direction written as a
    combination of its three cell centres' directions, scaled to sum to one: exact at a cell
    centre, never negative inside, continuous across triangle edges, and second-order accurate
    for smooth fields. A point is outside when no triangle holds it (beyond the domain) or the
    triangle's longest side exceeds three mesh spacings (across a concave edge of the domain).
    """
    n = tree.n
    if n < 3:
        raise ValueError("an unstructured grid needs at least 3 cells")
    cells = tree.data
    spacing = np.median(tree.query(cells[:: max(1, n // 2000)], k=2)[0][:, 1])
    p = unit_vectors(plat, plon)
    _, near = tree.query(p, k=min(TRIANGLE_CANDIDATES, n))
    sub = np.unique(near)
    centre = cells[sub].mean(axis=0)
    centre /= np.linalg.norm(centre)
    if (cells[sub] @ centre).min() < 0.2:
        raise ValueError("the cells around the points span more than a hemisphere")
    e1 = np.cross([0.0, 0.0, 1.0], centre)
    e1 = e1 / np.linalg.norm(e1) if np.linalg.norm(e1) > 1e-9 else np.array([1.0, 0.0, 0.0])
    e2 = np.cross(centre, e1)

    def plane(v: np.ndarray) -> np.ndarray:
        q = v / np.maximum(v @ centre, 1e-9)[:, None]
        return np.stack([q @ e1, q @ e2], axis=-1)

    found = np.full(len(p), -1)
    if len(sub) >= 3:
        tri = Delaunay(plane(cells[sub]))
        found = np.where(p @ centre > 0.2, tri.find_simplex(plane(p)), -1)
    idx = np.zeros((len(p), 3), dtype=np.int64)
    w = np.zeros((len(p), 3))
    ok = found >= 0
    if ok.any():
        idx[ok] = sub[tri.simplices[found[ok]]]
        corners = cells[idx[ok]]  # (point, corner, xyz)
        alpha = np.linalg.solve(np.transpose(corners, (0, 2, 1)), p[ok][:, :, None])[..., 0]
        alpha = np.clip(alpha, 0.0, None)
        w[ok] = alpha / alpha.sum(axis=1, keepdims=True)
        sides = np.linalg.norm(corners - np.roll(corners, 1, axis=1), axis=2).max(axis=1)
        ok[np.nonzero(ok)[0][sides > 3.0 * spacing]] = False
    return Barycentric(idx, w, ok)


def neighbourhood_cells(tree: cKDTree, plat: np.ndarray, plon: np.ndarray, around: Barycentric,
                        radius_km: float = POP_RADIUS_KM) -> tuple[np.ndarray, np.ndarray]:
    """``neighbourhood`` on an unstructured grid: the cells whose centres lie within
    ``radius_km`` (great-circle) of each point, from the KD-tree of the unit vectors, and at
    least the three cells around the point (a grid coarser than the radius, as for the
    regular grids' one-cell minimum). A point outside the grid gets none (NaN later)."""
    chord = 2.0 * np.sin(radius_km / EARTH_RADIUS_KM / 2.0)
    found = tree.query_ball_point(unit_vectors(plat, plon), r=chord)
    cells = [sorted(set(c) | set(tri.tolist())) if ok else []
             for c, tri, ok in zip(found, around.idx, around.inside)]
    return _pack(cells)


def _pack(cells: list) -> tuple[np.ndarray, np.ndarray]:
    width = max(1, max(len(c) for c in cells))
    idx = np.zeros((len(cells), width), dtype=np.int64)
    mask = np.zeros((len(cells), width), dtype=bool)
    for i, c in enumerate(cells):
        idx[i, :len(c)] = np.sort(np.asarray(c, dtype=np.int64))
        mask[i, :len(c)] = True
    return idx, mask


@dataclass(frozen=True)
class Sampling:
    """How one grid is sampled at one point set: the interpolation weights, and each point's
    neighbourhood (flat cell indices and mask) for the precipitation probability."""

    weights: Bilinear | Barycentric
    near_idx: np.ndarray
    near_mask: np.ndarray


class SamplingCache:
    """Samplings by (grid, point set), newest last; ``computed`` counts the ones built."""

    def __init__(self, size: int = 16):
        self.size = size
        self.computed = 0
        self._items: OrderedDict[tuple, Sampling] = OrderedDict()

    def get(self, ds: xr.Dataset, points: PointSet) -> Sampling:
        key = (_grid_id(ds), _points_id(points))
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        if "cell" in ds.dims:
            tree = cKDTree(unit_vectors(ds.clat.values, ds.clon.values))
            w = barycentric(tree, points.lats, points.lons)
            made = Sampling(w, *neighbourhood_cells(tree, points.lats, points.lons, w))
        else:
            made = Sampling(bilinear(ds.lat.values, ds.lon.values, points.lats, points.lons),
                            *neighbourhood(ds.lat.values, ds.lon.values, points.lats, points.lons))
        self.computed += 1
        self._items[key] = made
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return made


SAMPLINGS = SamplingCache()


def sampling(ds: xr.Dataset, points: PointSet) -> Sampling:
    """The sampling of ``ds``'s grid at ``points``, computed once per grid and point set."""
    return SAMPLINGS.get(ds, points)


def _grid_id(ds: xr.Dataset) -> tuple:
    if "cell" in ds.dims:
        return ("cell", ds.attrs.get("grid_uuid") or _digest(ds.clat.values, ds.clon.values))
    return ("latlon", _digest(ds.lat.values, ds.lon.values))


def _points_id(points: PointSet) -> str:
    return _digest(points.lats, points.lons)


def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha1()
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()


def wraps_around(lons: np.ndarray) -> bool:
    """Whether regular longitudes go round the globe (the last column neighbours the first)."""
    dlon = abs(lons[1] - lons[0])
    return abs(dlon * len(lons) - 360.0) < dlon / 2


def neighbourhood(lats: np.ndarray, lons: np.ndarray, plat: np.ndarray, plon: np.ndarray,
                  radius_km: float = POP_RADIUS_KM) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices (point, k) of the source cells within `radius_km` of each point, and a mask."""
    dlat = abs(lats[1] - lats[0])
    dlon = abs(lons[1] - lons[0])
    ry = max(1, int(np.ceil(radius_km / (dlat * KM_PER_DEG))))
    wrap = wraps_around(lons)  # across the antimeridian (or the 0/360 seam)
    cells = []
    for la, lo in zip(plat, plon):
        rx = max(1, int(np.ceil(radius_km / (dlon * KM_PER_DEG * max(np.cos(np.radians(la)), 0.05)))))
        cy = int(round((la - lats[0]) / (lats[1] - lats[0])))
        cx = int(round(((lo - lons[0]) % 360.0) / (lons[1] - lons[0])))
        yy, xx = np.mgrid[cy - ry:cy + ry + 1, cx - rx:cx + rx + 1]
        dist = KM_PER_DEG * np.hypot(yy * dlat - cy * dlat,
                                     (xx - cx) * dlon * np.cos(np.radians(la)))
        if wrap:
            xx = xx % len(lons)
        ok = (dist <= radius_km) & (yy >= 0) & (yy < len(lats)) & (xx >= 0) & (xx < len(lons))
        cells.append(yy[ok] * len(lons) + xx[ok])
    return _pack(cells)


def init_time(ds: xr.Dataset) -> np.datetime64:
    """The run's start, from the dataset attributes that decode sets."""
    return np.datetime64(ds.attrs["init"][:19], "ns")


def intervals(steps_minutes: Sequence[int], init: np.datetime64) -> tuple[np.ndarray, np.ndarray]:
    """(start, end] of each interval value of a variable: from its previous step (or the run's
    start) to its step, as decode leaves interval quantities."""
    ends = init + np.array(sorted(steps_minutes), dtype="timedelta64[m]")
    return np.concatenate([[init], ends[:-1]]), ends


def _pop_windows(times: np.ndarray, steps_minutes: Sequence[int], init: np.datetime64
                 ) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The windows the precipitation probability is taken over, for the rows ``times`` of a
    dataset whose precipitation has its own steps: each window's length in hours and its first
    row, at the row where it ends (NaN and -1 at the other rows), and the windows' ends in
    minutes. Intervals of an hour or longer are windows of their own; intervals shorter than
    an hour (ICON-D2's quarter hours) are summed into the clock hour they end in, and an hour
    they do not fill is left out."""
    starts, ends = intervals(steps_minutes, init)
    row = {int(t): k for k, t in enumerate(times.astype("datetime64[ns]").view(np.int64))}
    hour = np.timedelta64(1, "h")
    groups: dict[np.datetime64, list[int]] = {}
    for i, (start, end) in enumerate(zip(starts, ends)):
        label = end if end - start >= hour else init + -((init - end) // hour) * hour
        groups.setdefault(label, []).append(i)
    hours = np.full(len(times), np.nan, dtype=np.float32)
    first = np.full(len(times), -1, dtype=np.int64)
    out = []
    for label, members in groups.items():
        length = sum(ends[i] - starts[i] for i in members)
        if ends[members[-1]] != label or length < hour:
            continue  # an hour its quarter hours do not fill
        last = row[int(ends[members[-1]].astype("datetime64[ns]").astype(np.int64))]
        hours[last] = length / hour
        first[last] = row[int(ends[members[0]].astype("datetime64[ns]").astype(np.int64))]
        out.append(int((label - init) / np.timedelta64(1, "m")))
    return hours, first, out


def _window_chunks(first: np.ndarray, chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Time chunks near ``chunks`` in which no window (rows first..last) is split."""
    cut = np.ones(len(first) + 1, dtype=bool)  # where a chunk may start
    for last in np.flatnonzero(first >= 0):
        cut[first[last] + 1:last + 1] = False
    bounds = np.flatnonzero(cut)
    wanted = np.cumsum(chunks)[:-1]
    keep = sorted({0, len(first), *(bounds[np.searchsorted(bounds, w)] for w in wanted)})
    return tuple(int(b - a) for a, b in zip(keep, keep[1:]) if b > a)


def _pop_block(block: np.ndarray, idx: np.ndarray, mask: np.ndarray, hours: np.ndarray,
               first: np.ndarray, block_info=None) -> np.ndarray:
    t0 = block_info[0]["array-location"][0][0] if block_info else 0
    flat = block.reshape(block.shape[0], -1)
    cells = mask.sum(axis=1)
    out = np.full((block.shape[0], idx.shape[0]), np.nan, dtype=np.float32)
    for k in range(block.shape[0]):
        if not np.isfinite(hours[t0 + k]):
            continue
        rows = flat[first[t0 + k] - t0:k + 1]
        amounts = rows.sum(axis=0)[idx] if len(rows) > 1 else rows[0][idx]
        # An amount spread evenly over an interval longer than an hour, as precipitation is
        # resampled: at least 0.1 mm in each of its hours.
        wet = (mask & (amounts >= POP_THRESHOLD_MM_H * max(float(hours[t0 + k]), 1.0))).sum(axis=1)
        complete = (cells > 0) & ~np.isnan(np.where(mask, amounts, 0.0)).any(axis=1)
        out[k] = np.where(complete, 100.0 * wet / np.maximum(cells, 1), np.nan)
    return out


def extract(ds: xr.Dataset, points: PointSet, heights: Sequence[float],
            groups: Sequence[tuple[int, Sequence[float]]] | None = None) -> xr.Dataset:
    """Canonical gridded dataset -> point dataset (time, point[, height]), computed.

    Adds the wind and temperature at `heights` above ground (from the surface fields and the
    source's upper levels), the neighbourhood precipitation probability, and the elevation
    corrections of the catalogue where a point's elevation is configured. ``groups``: the
    points as consecutive groups (their number, the heights they need, among ``heights``),
    each profiled at its own heights only and NaN at the others; every point at every height
    when None. A model's points lists share one extraction: the windpack's thirty heights
    at the global and Japanese points, which need 10 m, were two thirds of IFS's profiles.
    """
    s = sampling(ds, points)
    w, nd = s.weights, s.weights.grid_ndim
    lazy = {}
    for name, arr in ds.data_vars.items():
        data = arr.data
        if not isinstance(data, da.Array):
            data = da.from_array(data, chunks=(1,) * (data.ndim - nd) + data.shape[-nd:])
        lazy[name] = data.map_blocks(w.apply, drop_axis=list(range(data.ndim - nd, data.ndim)),
                                     new_axis=data.ndim - nd, dtype=np.float32,
                                     chunks=data.chunks[:-nd] + ((len(points),),))
    if "tp" in ds:
        hours, first, pop_steps = _pop_windows(ds.time.values, ds.tp.attrs["steps_minutes"], init_time(ds))
        tp = ds.tp.data if isinstance(ds.tp.data, da.Array) else da.from_array(ds.tp.data)
        tp = tp.rechunk({0: _window_chunks(first, tp.chunks[0])})
        lazy["pop"] = tp.map_blocks(_pop_block, s.near_idx, s.near_mask, hours, first,
                                    drop_axis=list(range(1, 1 + nd)), new_axis=1, dtype=np.float32,
                                    chunks=(tp.chunks[0], (len(points),)))
    # The graph is already one task chain per message; optimising its ~10^4 layers costs more
    # than it saves on threads. On dask.distributed, where every task pays a scheduler round
    # trip, fusing the chains halves the time (bench/README.md).
    distributed = dask.config.get("scheduler", None) == "dask.distributed"
    values = dict(zip(lazy, dask.compute(*lazy.values(), optimize_graph=distributed)))

    out = xr.Dataset(coords={"time": ds.time.values, "point": points.ids})
    for name, val in values.items():
        if name in PROFILE_INPUTS:
            continue
        out[name] = (("time", "point"), val)
    if "d2m" not in values and {"rh2m", "t2m"} <= values.keys():
        # Sources that publish humidity instead of dewpoint (JMA MSM): one canonical dewpoint.
        out["d2m"] = (("time", "point"), physics.dewpoint_from_relative_humidity(
            values["t2m"].astype(np.float64), values["rh2m"] / 100.0).astype(np.float32))
        out = out.drop_vars("rh2m")
    orog = values["orog"] if "orog" in values else _surface_height(values, len(points))
    _profiles(out, values, ds, orog, np.asarray(heights, dtype=float),
              [(len(points), heights)] if groups is None else groups)
    _correct_elevation(out, points.elevation - orog)
    if "sf" not in out and {"tp", "t2m"} <= set(out.data_vars):
        _snowfall_from_temperature(out, ds)
    for name in out.data_vars:
        spec = variable(name)
        out[name].attrs.update(units=spec.units, long_name=spec.long_name)
        for key in ("steps_minutes", "starts_minutes"):
            if name in ds and key in ds[name].attrs:
                out[name].attrs[key] = ds[name].attrs[key]
    if "pop" in out:
        out["pop"].attrs["steps_minutes"] = pop_steps
    out.attrs.update(ds.attrs)
    return out


def _snowfall_from_temperature(out: xr.Dataset, ds: xr.Dataset) -> None:
    """The snowfall of a model that publishes none (GFS, JMA MSM): its precipitation times the
    snow fraction of the 2 m temperature ramp (``physics.snow_fraction``), at the mean of the
    temperatures that bound each interval, so that every product takes its snow from the
    model's snowfall by one rule (docs/method.md)."""
    steps = ds.tp.attrs["steps_minutes"]
    starts, ends = intervals(steps, init_time(ds))
    times = out.time.values
    at_end = np.searchsorted(times, ends)
    at_start = np.clip(np.searchsorted(times, starts), 0, len(times) - 1)
    t = out["t2m"].values.astype(np.float64)
    t_end = t[at_end]
    t_start = np.where((times[at_start] == starts)[:, None], t[at_start], np.nan)
    mean = np.where(np.isnan(t_start), t_end, 0.5 * (t_start + t_end))
    sf = np.full(out["tp"].shape, np.nan, dtype=np.float32)
    sf[at_end] = out["tp"].values[at_end] * physics.snow_fraction(mean - 273.15)
    out["sf"] = (("time", "point"), sf)
    out["sf"].attrs["steps_minutes"] = list(steps)


def _profiles(out: xr.Dataset, values: dict, ds: xr.Dataset, orog: np.ndarray,
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
            for col, arr in zip(cols, columns):
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
    if len(wind_h) == 1:  # only the 10 m wind (JMA MSM surface fields): no profile to follow
        wind_rows = slice(None)
        zs, us, vs = (a[0][..., np.newaxis] for a in (wind_h, wind_u, wind_v))
        cols_u, cols_v = ([_single_level(zs, a, h) for h in heights] for a in (us, vs))
    else:
        wind_rows = _rows_with_levels(wind_u)

        def winds(rows):
            zs, us, vs = _sorted_profiles(rows, wind_h, wind_u, wind_v)
            return [col for uv in physics.wind_at_heights(us, vs, zs, heights) for col in uv]

        columns = _by_rows(winds, wind_rows)
        cols_u, cols_v = columns[0::2], columns[1::2]
    if len(temp_h) == 1:  # no upper level at all (JMA MSM surface files)
        temps = [np.full((t_len, p_len), np.nan) for _ in heights]
    else:
        temp_rows = _rows_with_levels(temp_v)

        def temperatures(rows):
            zt, tt = _sorted_profiles(rows, temp_h, temp_v)
            return physics.interp_linear_heights(tt, zt, heights)

        temps = [_on_rows(t, temp_rows, t_len) for t in _by_rows(temperatures, temp_rows)]
    # No upper level above the ground (a model without pressure levels, or high terrain where
    # every level published is below the surface): the standard atmosphere's lapse rate from
    # the 2 m temperature.
    t2m = values["t2m"].astype(np.float64)
    temps = [np.where(np.isnan(t), t2m - physics.LAPSE_RATE * (h - 2.0), t) for t, h in zip(temps, heights)]
    return {"wind_u": (wind_rows, cols_u), "wind_v": (wind_rows, cols_v),
            "air_temperature": (slice(None), temps)}


def _rows_with_levels(levels: list[np.ndarray]) -> np.ndarray:
    """The times (rows of the (time, point) levels) at which two levels or more have a value
    somewhere. At the others no point has a profile and every height is NaN: ICON-D2's model
    levels are hourly on its 15-minute axis, three times in four."""
    return np.flatnonzero(sum(np.isfinite(a).any(axis=-1) for a in levels) >= 2)


def _by_rows(compute, rows: np.ndarray) -> list[np.ndarray]:
    """``compute(rows)``, a list of (row, point) arrays, computed on `PROFILE_THREADS` parts
    of ``rows`` at once and joined: a profile at a time is independent of the others, so the
    values are those of one call."""
    parts = [part for part in np.array_split(rows, PROFILE_THREADS) if len(part)]
    if len(parts) < 2:
        return compute(rows)
    with ThreadPoolExecutor(len(parts)) as pool:
        computed = list(pool.map(compute, parts))
    return [np.concatenate(columns) for columns in zip(*computed)]


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


def _single_level(heights: np.ndarray, values: np.ndarray, target: float) -> np.ndarray:
    """A one-level 'profile' gives its level's value there and nothing elsewhere."""
    return np.where(heights[..., 0] == target, values[..., 0], np.nan)


def _surface_height(values: dict, n_points: int) -> np.ndarray:
    """Model surface height where a source publishes no orography (JMA MSM surface files):
    from sea-level and surface pressure at the first time by the hypsometric equation, with the
    layer's mean temperature from the 2 m temperature and the standard lapse rate."""
    if not {"sp", "msl", "t2m"} <= values.keys():
        return np.zeros(n_points, dtype=np.float32)
    sp, msl, t = (values[k][0].astype(np.float64) for k in ("sp", "msl", "t2m"))
    z = np.zeros(n_points)
    for _ in range(3):  # the layer temperature depends on the height: converge by iteration
        z = physics.RD * (t + 0.5 * physics.LAPSE_RATE * z) / physics.G * np.log(msl / sp)
    return np.nan_to_num(z).astype(np.float32)


def _correct_elevation(out: xr.Dataset, dz: np.ndarray) -> None:
    """Apply each variable's catalogue correction where the point elevation is known."""
    known = np.isfinite(dz)
    if not known.any():
        return
    dz = np.where(known, dz, 0.0).astype(np.float32)
    t_before = out["t2m"].values.copy() if "t2m" in out else None
    for name in list(out.data_vars):
        kind = VARIABLES[name].elevation
        if kind is Elevation.LAPSE:
            out[name].values[:] = physics.lapse_rate_correction(out[name].values, _bcast(dz, out[name]))
        elif kind is Elevation.HYPSOMETRIC and t_before is not None:
            t_after = physics.lapse_rate_correction(t_before, dz)
            out[name].values[:] = physics.pressure_at_height(out[name].values, t_before, t_after, dz)


def _bcast(dz: np.ndarray, arr: xr.DataArray) -> np.ndarray:
    shape = [1] * arr.ndim
    shape[arr.dims.index("point")] = len(dz)
    return dz.reshape(shape)


# --- resample -----------------------------------------------------------------------------

def base_axis(start: np.datetime64, end: np.datetime64) -> np.ndarray:
    return np.arange(start, end + BASE_STEP, BASE_STEP).astype("datetime64[ns]")


def resample(ds: xr.Dataset, times: np.ndarray, lats: np.ndarray, lons: np.ndarray) -> xr.Dataset:
    """Point dataset on the model's own steps -> the 15-minute axis `times`.

    Interval variables come out as the value of [t, t + 15 min). Times the model does not
    cover are NaN, so blending can fall through to the next model.
    """
    init = init_time(ds)
    out = xr.Dataset(coords={"time": times, **{c: ds[c] for c in ds.coords if c not in ("time",)}})
    vectors = {n: pair for pair in VECTORS if set(pair) <= set(ds.data_vars) for n in pair}
    paired: dict[str, np.ndarray] = {}  # the other component of a vector already resampled
    for name, arr in ds.data_vars.items():
        kind = VARIABLES[name].temporal
        values = arr.transpose("time", ...).values
        if name in vectors:
            if name not in paired:
                paired.update(zip(vectors[name], _vector_pchip(ds, *vectors[name], times)))
            res = paired.pop(name)
        elif kind is Temporal.STATE:
            res = _pchip(ds.time.values, values, times)
        else:
            starts, ends = intervals(arr.attrs["steps_minutes"], init)
            pos = np.searchsorted(ds.time.values, ends)
            vals = values[pos]
            if kind is Temporal.ACCUMULATION:
                res = _conserve(starts, ends, vals, times)
            elif kind is Temporal.INTERVAL_MAX:
                if "starts_minutes" in arr.attrs:  # the windows the messages state
                    starts = init + np.array(arr.attrs["starts_minutes"], dtype="timedelta64[m]")
                res = _hold(starts, ends, vals, times, init)
            else:  # RADIATION
                clear_fine = _clear_sky_steps(np.asarray(times, "datetime64[ns]").tobytes(),
                                              np.asarray(lats, float).tobytes(), np.asarray(lons, float).tobytes())
                res = _clearsky(starts, ends, vals, times, clear_fine, lats, lons)
        if VARIABLES[name].nonnegative:
            res = np.where(res < 0, 0, res)
        out[name] = (arr.transpose("time", ...).dims, res.astype(np.float32), arr.attrs)
        out[name].attrs.pop("steps_minutes", None)
        out[name].attrs.pop("starts_minutes", None)
    out.attrs.update(ds.attrs)
    return out


def _vector_pchip(ds: xr.Dataset, u: str, v: str, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A vector's components at ``times`` from its speed and direction, each a monotone cubic.

    Components interpolated one by one follow the chord between two vectors: where the wind
    veers by 90 degrees at a steady 10 m/s, the speed halfway would be 7.1 m/s. The speed is
    interpolated on its own (exact at the steps, no overshoot), and so is the direction, each
    step's taken the short way round from the step before (a veer of more than 180 degrees
    between two steps is read as a backing of less)."""
    uu, vv = (ds[n].transpose("time", ...).values.astype(np.float64) for n in (u, v))
    angle = _unwrapped(np.arctan2(vv, uu))
    speed = _pchip(ds.time.values, np.hypot(uu, vv), times).astype(np.float32)
    turned = _pchip(ds.time.values, angle, times).astype(np.float32)  # float32 is enough for a value
    return speed * np.cos(turned), speed * np.sin(turned)


def _unwrapped(angle: np.ndarray) -> np.ndarray:
    """Angles (radians, time first) with 2 pi added or taken away so that each finite sample
    differs from the series' previous finite one by at most pi (numpy's unwrap across gaps)."""
    finite = np.isfinite(angle)
    rows = np.arange(len(angle)).reshape((-1,) + (1,) * (angle.ndim - 1))
    last = np.maximum.accumulate(np.where(finite, rows, -1), axis=0)
    before = np.concatenate([np.full((1,) + angle.shape[1:], -1), last[:-1]])
    prev = np.take_along_axis(angle, np.clip(before, 0, None), axis=0)
    step = np.where(finite & (before >= 0), angle - prev, 0.0)
    turn = np.cumsum((step + np.pi) % (2 * np.pi) - np.pi - step, axis=0)
    return angle + turn


@functools.lru_cache(maxsize=2)
def _clear_sky_steps(times: bytes, lats: bytes, lons: bytes) -> np.ndarray:
    """Clear-sky mean (time, point) of the 15-minute steps starting at ``times`` (the arrays'
    bytes: a cache key): the same for every member of a blend, so computed once for them
    (read-only)."""
    out = physics.clear_sky_ghi_mean(np.frombuffer(lats), np.frombuffer(lons),
                                     np.frombuffer(times, "datetime64[ns]"), BASE_STEP / np.timedelta64(1, "s"))
    out.setflags(write=False)
    return out


def _pchip(x: np.ndarray, y: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Monotone cubic through each series' finite samples at the ascending times ``xi``; NaN
    outside them (no extrapolation).

    Series sharing the same pattern of finite samples (the usual case: all points of a model
    inside its domain) are interpolated together.
    """
    flat = y.reshape(len(x), -1).astype(np.float64)
    out = np.full((len(xi), flat.shape[1]), np.nan)
    finite = np.isfinite(flat)
    xs_all = x.astype("datetime64[s]").astype(np.float64)
    xq = xi.astype("datetime64[s]").astype(np.float64)
    patterns: dict[bytes, list[int]] = {}
    for j in range(flat.shape[1]):
        patterns.setdefault(finite[:, j].tobytes(), []).append(j)
    for cols in patterns.values():
        rows = finite[:, cols[0]]
        if rows.sum() < 2:
            continue
        xs = xs_all[rows]
        lo, hi = np.searchsorted(xq, xs[0], "left"), np.searchsorted(xq, xs[-1], "right")
        # Every series alike (the usual case): slices, not a gather and a scatter of them all.
        cols = slice(None) if len(cols) == flat.shape[1] else cols
        fit = PchipInterpolator(xs, flat[rows][:, cols], axis=0, extrapolate=False)
        out[lo:hi, cols] = fit(xq[lo:hi])
    return out.reshape((len(xi),) + y.shape[1:])


def _interval_index(starts: np.ndarray, ends: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each 15-minute interval [t, t+15), the source interval (start, end] holding it."""
    k = np.searchsorted(ends, times + BASE_STEP, side="left")
    ok = (k < len(ends))
    k = np.clip(k, 0, len(ends) - 1)
    ok &= (starts[k] <= times) & (times + BASE_STEP <= ends[k])
    return k, ok


def _conserve(starts, ends, amounts, times) -> np.ndarray:
    """Spread each interval's amount evenly in time: cumulative amount interpolated linearly."""
    k, ok = _interval_index(starts, ends, times)
    frac = (BASE_STEP / (ends[k] - starts[k])).astype(np.float64)
    res = amounts[k] * _bcast_t(frac, amounts)
    return np.where(_bcast_t(ok, amounts), res, np.nan)


def _hold(starts, ends, vals, times, init) -> np.ndarray:
    """Maxima over windows -> the 15-minute steps: a step inside a window holds the window's
    maximum. A step between two windows (IFS to 90 h states the last hour of a 3-hour step;
    DWD's VMAX_10M the last hour where ICON-EU is 3-hourly) has no maximum of its own: it
    takes the linear interpolation in time between the two windows' maxima, placed at their
    centres, and a step before the first window (from the run's start) the first window's."""
    k, ok = _interval_index(starts, ends, times)
    res = np.where(_bcast_t(ok, vals), vals[k], np.nan)
    mid = times + BASE_STEP.astype("timedelta64[s]") / 2
    after = np.searchsorted(starts, mid, side="right")  # the first window starting after mid
    gap = ~ok & (times >= init) & (after < len(ends)) & (times + BASE_STEP <= starts[np.clip(after, 0, len(ends) - 1)])
    gap &= (after == 0) | (times >= ends[np.clip(after - 1, 0, None)])
    if gap.any():
        a = np.clip(after[gap] - 1, 0, None)
        b = after[gap]
        centre = starts + (ends - starts) / 2
        span = (centre[b] - centre[a]) / np.timedelta64(1, "s")
        w = np.where(span > 0, (mid[gap] - centre[a]) / np.timedelta64(1, "s") / np.where(span > 0, span, 1), 1.0)
        w = np.clip(w, 0.0, 1.0)
        res[gap] = (1 - _bcast_t(w, vals[a])) * vals[a] + _bcast_t(w, vals[a]) * vals[b]
    return res


def _clearsky(starts, ends, means, times, clear_fine, lats, lons) -> np.ndarray:
    """Interval mean flux -> 15-minute means through the interval's clear-sky index."""
    k, ok = _interval_index(starts, ends, times)
    # Clear-sky mean of each source interval, as the mean of its 15-minute parts (so the
    # energy of every source interval is kept exactly).
    n_src = len(ends)
    sums = np.zeros((n_src, clear_fine.shape[1]))
    counts = np.zeros(n_src)
    np.add.at(sums, k[ok], clear_fine[ok])
    np.add.at(counts, k[ok], 1)
    clear_src = sums / np.maximum(counts, 1)[:, None]
    # Intervals only partly inside the axis: use the clear-sky mean over the whole interval.
    partial = counts * (BASE_STEP / np.timedelta64(1, "s")) < (ends - starts) / np.timedelta64(1, "s")
    if partial.any():
        secs = ((ends - starts) / np.timedelta64(1, "s")).astype(float)
        clear_src[partial] = physics.clear_sky_ghi_mean(lats, lons, starts[partial].astype("datetime64[ns]"),
                                                        secs[partial])
    # Where the clear-sky mean is below 1 W/m2 but not 0 (twilight: the sun rises or sets in
    # the interval, and Haurwitz is near zero within a degree of the horizon while the
    # model's diffuse light is not), an index would be meaningless or huge: the interval's
    # mean is spread evenly over it instead, so its energy is kept. An interval of night
    # (clear sky 0) stays dark, whatever packing noise its accumulation differences carry.
    sunny = clear_src > 1.0
    index = means / _reshape_like(np.where(sunny, clear_src, 1.0), means)
    flat = np.where(_reshape_like(clear_src > 0.0, means), means, 0.0)
    res = np.where(_reshape_like(sunny, means)[k], index[k] * _reshape_like(clear_fine, means), flat[k])
    return np.where(_bcast_t(ok, means), res, np.nan)


def _reshape_like(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    """(T, P) -> broadcastable against (T, P, ...)."""
    return a.reshape(a.shape + (1,) * (like.ndim - a.ndim))


def _bcast_t(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    return a.reshape((-1,) + (1,) * (like.ndim - 1))


def aggregate(ds: xr.Dataset, start: np.datetime64, step: np.timedelta64, count: int) -> xr.Dataset:
    """15-minute series -> `count` steps of `step` from `start`, with each variable's method:
    states are sampled at the time stamps; interval values are summed (accumulations),
    averaged (radiation) or maximised (interval maxima) over [t, t + step).
    """
    n = int(step / BASE_STEP)
    stamps = start + np.arange(count) * step
    first = int(np.searchsorted(ds.time.values, start))
    if first + n * count > len(ds.time) or ds.time.values[first] != start:
        raise ValueError(f"15-minute axis does not cover {count} x {step} from {start}")
    out = xr.Dataset(coords={"time": stamps, **{c: ds[c] for c in ds.coords if c != "time"}})
    for name, arr in ds.data_vars.items():
        arr = arr.transpose("time", ...)
        block = arr.values[first:first + n * count]
        kind = VARIABLES[name].temporal
        if kind is Temporal.STATE or n == 1:
            res = block[::n]
        else:
            parts = block.reshape((count, n) + block.shape[1:])
            if kind is Temporal.ACCUMULATION:
                res = parts.sum(axis=1)
            elif kind is Temporal.RADIATION:
                res = parts.mean(axis=1)
            else:
                res = parts.max(axis=1)
        out[name] = (arr.dims, res, arr.attrs)
    out.attrs.update(ds.attrs)
    return out
