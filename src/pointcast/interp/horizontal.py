"""Grid -> points: a model's gridded fields sampled at the points of the products.

Extract fuses with decode through dask: each message's grid is reduced to the points as soon
as it is decoded, so a run's full fields are never all in memory. A point's value is the
bilinear interpolation of the four source cells around its product-cell centre on a regular
grid, and on an unstructured grid (DWD's native ICON grids) the barycentric interpolation of
the three cells whose centres span the triangle around it (``barycentric``). How a grid is
sampled at a point set (the weights and the neighbourhoods of the precipitation probability)
is computed once per grid and point set and kept (``sampling``): every field of a run, and
every later run on the same grid, reuses it.

``extract`` is the stage's one entry: the points' values, the precipitation probability of
each point's neighbourhood, and through ``vertical`` the wind and temperature at heights above
ground and the elevation corrections.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import dask
import dask.array as da
import numpy as np
import xarray as xr
from dask.core import flatten, get_dependencies
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from scipy.spatial import Delaunay, cKDTree

from .. import physics
from ..catalogue import variable
from .temporal import init_time, intervals, snowfall_from_temperature
from .vertical import PROFILE_INPUTS, SURFACE_INPUTS, correct_elevation, profiles, surface_height

POP_RADIUS_KM = 25.0  # neighbourhood radius of the precipitation probability
POP_THRESHOLD_MM_H = 0.1  # wet when the interval's rate reaches this
KM_PER_DEG = 111.195
EARTH_RADIUS_KM = 6371.229  # ICON's sphere
# Cells searched around a point for the triangle holding it (enough to surround it on ICON's
# grids, where a cell centre has 12 neighbours within two rings).
TRIANGLE_CANDIDATES = 12


@dataclass(frozen=True)
class PointSet:
    """Points to extract: ids, the coordinates to sample (cell centres), optional elevation."""

    ids: np.ndarray
    lats: np.ndarray
    lons: np.ndarray
    elevation: np.ndarray  # metres; NaN where not configured

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, at: slice) -> PointSet:
        """The points of a slice."""
        return PointSet(self.ids[at], self.lats[at], self.lons[at], self.elevation[at])

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
    spacing = np.median(np.asarray(tree.query(cells[:: max(1, n // 2000)], k=2)[0])[:, 1])
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
                        radius_km: float = POP_RADIUS_KM) -> Neighbourhoods:
    """``neighbourhood`` on an unstructured grid: the cells whose centres lie within
    ``radius_km`` (great-circle) of each point, from the KD-tree of the unit vectors, and at
    least the three cells around the point (a grid coarser than the radius, as for the
    regular grids' one-cell minimum). A point outside the grid gets none (NaN later)."""
    chord = 2.0 * np.sin(radius_km / EARTH_RADIUS_KM / 2.0)
    found = tree.query_ball_point(unit_vectors(plat, plon), r=chord)
    cells = [sorted(set(c) | set(tri.tolist())) if ok else []
             for c, tri, ok in zip(found, around.idx, around.inside, strict=True)]
    return _pack(cells)


@dataclass(frozen=True)
class Neighbourhoods:
    """The source cells of each point's neighbourhood (flat indices), one point's after the
    other: those of point ``i`` are ``cells[bounds[i]:bounds[i + 1]]``. Not padded to the
    largest neighbourhood: near the poles a regular grid's cells within the radius span the
    whole row, ten times a mid-latitude point's."""

    cells: np.ndarray
    bounds: np.ndarray

    def of(self, i: int) -> np.ndarray:
        return self.cells[self.bounds[i]:self.bounds[i + 1]]

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.bounds)


def _pack(cells: list) -> Neighbourhoods:
    bounds = np.zeros(len(cells) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in cells], out=bounds[1:])
    flat = np.empty(bounds[-1], dtype=np.int64)
    for i, c in enumerate(cells):
        flat[bounds[i]:bounds[i + 1]] = np.sort(np.asarray(c, dtype=np.int64))
    return Neighbourhoods(flat, bounds)


def _per_point(flags: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """How many of each point's cells ``flags`` holds (``flags``: one a cell, as
    `Neighbourhoods.cells`)."""
    total = np.zeros(len(flags) + 1, dtype=np.int64)
    np.cumsum(flags, out=total[1:])
    return total[bounds[1:]] - total[bounds[:-1]]


@dataclass(frozen=True)
class Sampling:
    """How one grid is sampled at one point set: the interpolation weights, and each point's
    neighbourhood for the precipitation probability."""

    weights: Bilinear | Barycentric
    near: Neighbourhoods


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
            made = Sampling(w, neighbourhood_cells(tree, points.lats, points.lons, w))
        else:
            made = Sampling(bilinear(ds.lat.values, ds.lon.values, points.lats, points.lons),
                            neighbourhood(ds.lat.values, ds.lon.values, points.lats, points.lons))
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
                  radius_km: float = POP_RADIUS_KM) -> Neighbourhoods:
    """The source cells within `radius_km` of each point (flat indices), and its nearest cell
    where that is on the grid."""
    dlat = abs(lats[1] - lats[0])
    dlon = abs(lons[1] - lons[0])
    ry = max(1, int(np.ceil(radius_km / (dlat * KM_PER_DEG))))
    wrap = wraps_around(lons)  # across the antimeridian (or the 0/360 seam)
    cells = []
    for la, lo in zip(plat, plon, strict=True):
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
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
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
    return tuple(int(b - a) for a, b in zip(keep, keep[1:], strict=False) if b > a)


def _pop_block(block: np.ndarray, near_cells: np.ndarray, bounds: np.ndarray, hours: np.ndarray,
               first: np.ndarray, block_info=None) -> np.ndarray:
    """The precipitation probability at the rows of ``block`` where a window ends: the share
    of each point's neighbourhood (`Neighbourhoods`) wet over the window, NaN where a cell of
    it is missing."""
    t0 = block_info[0]["array-location"][0][0] if block_info else 0
    flat = block.reshape(block.shape[0], -1)
    cells = np.diff(bounds)
    out = np.full((block.shape[0], len(cells)), np.nan, dtype=np.float32)
    for k in range(block.shape[0]):
        if not np.isfinite(hours[t0 + k]):
            continue
        rows = flat[first[t0 + k] - t0:k + 1]
        amounts = (rows.sum(axis=0) if len(rows) > 1 else rows[0])[near_cells]
        # An amount spread evenly over an interval longer than an hour, as precipitation is
        # resampled: at least 0.1 mm in each of its hours.
        wet = _per_point(amounts >= POP_THRESHOLD_MM_H * max(float(hours[t0 + k]), 1.0), bounds)
        complete = (cells > 0) & (_per_point(np.isnan(amounts), bounds) == 0)
        out[k] = np.where(complete, 100.0 * wet / np.maximum(cells, 1), np.nan)
    return out


def extract(ds: xr.Dataset, points: PointSet, heights: Sequence[float],
            groups: Sequence[tuple[int, Sequence[float]]] | None = None,
            block_bytes: int | None = None) -> xr.Dataset:
    """Canonical gridded dataset -> point dataset (time, point[, height]), computed: the
    parts of `extract_blocks` joined along the time axis (one part, by default, for a few
    thousand points)."""
    blocks = [block for _, block in extract_blocks(ds, points, heights, groups, block_bytes)]
    if len(blocks) == 1:
        return blocks[0]
    return xr.concat(blocks, "time", data_vars="all", coords="minimal", compat="override",
                     combine_attrs="override")


# The fields at the points of one block of time steps stay near this many bytes, and the
# series of a part of its steps (yielded, and written, at once) near twice as many, as do
# the pieces of a part made at once (`_row_bytes`): blocks, parts and pieces have fewer steps
# the more points there are, and pieces fewer points once they are down to one step, so an
# extraction's memory does not grow with the points. The floor: one decode block of steps of
# fields (fewer steps the more points, `ingest.values.block_steps`, down to one) and one step
# of series.
BLOCK_BYTES = 64 << 20
MEMBER_BLOCK_BYTES = BLOCK_BYTES // 8  # an ensemble member's (`extract_members`)


def extract_members(members: Sequence[tuple[int, xr.Dataset]], points: PointSet, heights: Sequence[float],
                    groups: Sequence[tuple[int, Sequence[float]]] | None, keep: Sequence[str]
                    ) -> Iterator[tuple[slice, xr.Dataset]]:
    """An ensemble's members (perturbation number, decoded run) -> its point dataset with a
    ``member`` dimension, a block of time steps at a time: each member extracted as a run of
    its own (`extract_blocks`, with the same weights: one sampling of the grid), the
    variables ``keep`` only, and the members side by side. Each member's blocks take an eighth
    of a deterministic run's byte budget (`MEMBER_BLOCK_BYTES`): the blocks of every member are
    held at once, and blocks much smaller than that cost more in overhead (each is profiled,
    corrected and assembled on its own) than in memory. The model's ground, where the run
    carries none (`surface_height`), is the first member's (the control's, where one is
    published) for every member: it is one model's ground, and a member's own temperature
    would move it."""
    first = members[0][1]
    ground = None if "orog" in first else _first_surface(first, points)
    runs = [extract_blocks(ds, points, heights, groups, MEMBER_BLOCK_BYTES, derived=False, surface=ground)
            for _, ds in members]
    numbers = np.array([k for k, _ in members])
    for parts in zip(*runs, strict=True):
        rows = parts[0][0]
        if any(r != rows for r, _ in parts):
            raise ValueError("the members' steps differ: an ensemble run's members must have the same steps")
        yield rows, xr.concat([block[[v for v in keep if v in block]] for _, block in parts],
                              dim=xr.DataArray(numbers, dims="member", name="member"), coords="minimal",
                              compat="override", join="exact", combine_attrs="override").transpose("time", ...)


def _first_surface(ds: xr.Dataset, points: PointSet) -> np.ndarray:
    """`surface_height` at the points from the run's first step (what it reads of it only)."""
    w = sampling(ds, points).weights
    first = {name: w.apply(np.asarray(ds[name].isel(time=slice(0, 1)).values, dtype=np.float32))
             for name in SURFACE_INPUTS if name in ds}
    return surface_height(first, len(points))


def extract_blocks(ds: xr.Dataset, points: PointSet, heights: Sequence[float],
                   groups: Sequence[tuple[int, Sequence[float]]] | None = None,
                   block_bytes: int | None = None, derived: bool = True,
                   surface: np.ndarray | None = None) -> Iterator[tuple[slice, xr.Dataset]]:
    """Canonical gridded dataset -> the point dataset (time, point[, height]) a block of time
    steps at a time: each block's rows of the time axis and its series, computed, in order.

    Adds the wind and temperature at `heights` above ground (from the surface fields and the
    source's upper levels), the neighbourhood precipitation probability, and the elevation
    corrections of the catalogue where a point's elevation is configured. ``groups``: the
    points as consecutive groups (their number, the heights they need, among ``heights``),
    each profiled at its own heights only and NaN at the others; every point at every height
    when None: a model's points lists share one extraction, and a list that needs only
    10 m is not profiled at the heights of another. A block of fields holds whole decode blocks
    of steps and about ``block_bytes`` (`BLOCK_BYTES`) of fields at the points; its series
    are yielded in parts of about twice as many bytes, each made in pieces of steps, or of
    points of a step, of about as many (`_time_blocks`). Every value is the one a single
    block would give: what a step needs of the steps before it (the model's surface height
    from the first step, the temperature where a precipitation interval starts) is carried
    from block to block, and no point's series depends on the other points'. ``derived``:
    whether to make the neighbourhood probability and a snowfall the source does not publish
    (not for an ensemble's members, of which neither is kept). ``surface``: the model's ground
    at the points where the run carries no orography, if known beforehand (`extract_members`).
    """
    s = sampling(ds, points)
    w, nd = s.weights, s.weights.grid_ndim
    lazy: dict[str, da.Array] = {}
    for name, arr in ds.data_vars.items():
        data = arr.data
        if not isinstance(data, da.Array):
            data = da.from_array(data, chunks=(1,) * (data.ndim - nd) + data.shape[-nd:])
        lazy[str(name)] = data.map_blocks(w.apply, drop_axis=list(range(data.ndim - nd, data.ndim)),
                                     new_axis=data.ndim - nd, dtype=np.float32,
                                     chunks=data.chunks[:-nd] + ((len(points),),))
    pop_steps = None
    if "tp" in ds and derived:
        hours, first, pop_steps = _pop_windows(ds.time.values, ds.tp.attrs["steps_minutes"], init_time(ds))
        tp = ds.tp.data if isinstance(ds.tp.data, da.Array) else da.from_array(ds.tp.data)
        tp = tp.rechunk({0: _window_chunks(first, tp.chunks[0])})
        lazy["pop"] = tp.map_blocks(_pop_block, s.near.cells, s.near.bounds, hours, first,
                                    drop_axis=list(range(1, 1 + nd)), new_axis=1, dtype=np.float32,
                                    chunks=(tp.chunks[0], (len(points),)))
    timed = {name: arr for name, arr in lazy.items() if "time" in ds[name if name != "pop" else "tp"].dims}
    constant = _compute({name: arr for name, arr in lazy.items() if name not in timed})
    earlier: dict[int, Any] = {}
    budget = BLOCK_BYTES if block_bytes is None else block_bytes
    computed, part, (steps, per_piece) = _time_blocks(timed, ds.sizes["time"], len(points),
                                                      len(heights), budget)
    groups = [(len(points), heights)] if groups is None else groups
    for block, fields in zip(computed, _computed(timed, computed), strict=True):
        for start in range(block.start, block.stop, part):
            rows = slice(start, min(start + part, block.stop))
            out = None
            for piece_start in range(rows.start, rows.stop, steps):
                piece = slice(piece_start, min(piece_start + steps, rows.stop))
                within = slice(piece.start - block.start, piece.stop - block.start)
                values = {**{name: v[within] for name, v in fields.items()}, **constant}
                if surface is None:  # at the first step (`surface_height`), for every block
                    surface = values["orog"] if "orog" in values else surface_height(values, len(points))
                orog = values["orog"] if "orog" in values else surface
                for first_point in range(0, len(points), per_piece):
                    at = slice(first_point, min(first_point + per_piece, len(points)))
                    made, earlier[first_point] = _series(
                        {name: v[..., at] for name, v in values.items()}, ds, ds.time.values[piece],
                        points[at], orog[at], heights, _groups_at(groups, at), earlier.get(first_point),
                        derived)
                    if piece == rows and at == slice(0, len(points)):
                        out, made = made, None
                        continue
                    if out is None:
                        out = _empty_like(made, ds.time.values[rows], points.ids)
                    for name, var in made.data_vars.items():
                        out[name].values[piece.start - rows.start:piece.stop - rows.start, at] = var.values
                    made = None  # not held while the next piece is made
            assert out is not None  # a part has one step at least
            if pop_steps is not None and "pop" in out:
                out["pop"].attrs["steps_minutes"] = pop_steps
            yield rows, out


def _empty_like(piece: xr.Dataset, times: np.ndarray, ids: np.ndarray) -> xr.Dataset:
    """A part of an extraction to fill with its pieces (`extract_blocks`): the variables,
    attributes and coordinates of ``piece`` at the times and points ``ids``."""
    sizes: dict[Hashable, int] = {"time": len(times), "point": len(ids)}
    out = xr.Dataset(coords={"time": times, "point": ids,
                             **{c: piece[c] for c in piece.coords if c not in sizes}}, attrs=piece.attrs)
    for name, var in piece.data_vars.items():
        shape = tuple(sizes.get(d, n) for d, n in var.sizes.items())
        out[name] = (var.dims, np.empty(shape, var.dtype), var.attrs)
    return out


def _groups_at(groups: Sequence[tuple[int, Sequence[float]]], at: slice) -> list[tuple[int, Sequence[float]]]:
    """The groups of points (`extract_blocks`) of the points ``at``."""
    out, first = [], 0
    for count, wanted in groups:
        inside = min(first + count, at.stop) - max(first, at.start)
        if inside > 0:
            out.append((inside, wanted))
        first += count
    return out


_Key = TypeVar("_Key", bound=Hashable)


def _compute(lazy: dict[_Key, da.Array | Delayed]) -> dict[_Key, Any]:
    # The graph is already one task chain per message: optimising its many layers costs more
    # than it saves on threads. On dask.distributed, where every task pays a scheduler round
    # trip, fusing the chains saves more than it costs.
    distributed = dask.config.get("scheduler", None) == "dask.distributed"
    return dict(zip(lazy, dask.compute(*lazy.values(), optimize_graph=distributed), strict=True))


def _computed(timed: dict[str, da.Array], blocks: list[slice]) -> Iterator[dict[str, np.ndarray]]:
    """The fields of each block of rows (``timed`` at its rows), computed in turn. What the
    graph of a block shares with a later one's is computed once and handed on as data: the
    message a difference needs at a decode block's first step (read for the block before,
    or further back where a variable has no value at every step: ICON-D2's hourly radiation
    on its quarter-hour axis), a precipitation window across blocks (`_window_chunks`) and
    the decode blocks under it. So no message is decoded twice, however small the blocks."""
    if len(blocks) == 1:
        yield _compute({name: arr[blocks[0]] for name, arr in timed.items()})
        return
    graphs = [_graph(timed, rows) for rows in blocks]
    needs = [{key: get_dependencies(graph, key) for key in graph} for _, graph in graphs]
    carried: dict = {}
    for k, (lazy, graph) in enumerate(graphs):
        graph.update((key, carried[key]) for key in carried.keys() & graph.keys())
        # What a later block reads of this one's graph (not what only this graph reads).
        keep = sorted({d for later in needs[k + 1:] for key, deps in later.items() if key not in graph
                       for d in deps if d in graph}, key=str)
        computed = _compute({**{name: da.Array(graph, a.name, a.chunks, dtype=a.dtype)
                                for name, a in lazy.items()},
                             **{key: Delayed(key, graph) for key in keep}})
        carried = {key: value for key, value in carried.items()
                   if any(key in later for later in needs[k + 1:])}
        carried.update((key, computed.pop(key)) for key in keep)
        graphs[k], needs[k] = ({}, {}), {}  # done
        yield computed


def _graph(timed: dict[str, da.Array], rows: slice) -> tuple[dict[str, da.Array], dict]:
    """``timed`` at ``rows``, and the graph that computes them alone (a dict: `_computed`
    puts data in place of tasks)."""
    lazy = {name: arr[rows] for name, arr in timed.items()}
    keys = {key for a in lazy.values() for key in flatten(a.__dask_keys__())}
    return lazy, dict(HighLevelGraph.merge(*(a.dask for a in lazy.values())).cull(keys))


def _row_bytes(timed: dict[str, da.Array], n_points: int, n_heights: int) -> tuple[int, int, int]:
    """Bytes a time step of an extraction makes: of its fields at the points (with their
    levels, float32), of the series made of them (the fields but the profiles' inputs,
    counted whole, and the wind and temperature at the heights, float32), and of the series
    while they are made (those in float64 too; the profiles' own copies are bounded apart,
    `vertical.PROFILE_PART_BYTES`)."""
    fields = 4 * sum(int(np.prod(arr.shape[1:])) for arr in timed.values())
    return fields, fields + 4 * 3 * n_heights * n_points, fields + (4 + 8) * 3 * n_heights * n_points


def _time_blocks(timed: dict[str, da.Array], n_times: int, n_points: int, n_heights: int,
                 block_bytes: int) -> tuple[list[slice], int, tuple[int, int]]:
    """The rows of the time axis in blocks computed at once, of equal length (but the last):
    as many steps as make ``block_bytes`` of fields at the points, in whole decode blocks
    (the first time chunk of the decoded fields), one decode block at least; the steps of the
    parts whose series are yielded at once (a divisor of a block's steps): as many as make
    twice ``block_bytes`` of series (`_row_bytes`), one at least; and the steps and points of
    the pieces of a part made at once: as many steps (a divisor of a part's) as make twice
    ``block_bytes`` of series being made, one at least, and every point, or as many as make
    that much in one step, one at least."""
    decoded = [arr.chunks[0][0] for arr in timed.values() if len(arr.chunks[0]) and arr.chunks[0][0]]
    step = min(decoded, default=1)
    fields, series, making = (max(1, b) for b in _row_bytes(timed, n_points, n_heights))
    rows = min(max(step, block_bytes // fields // step * step), -(-max(n_times, 1) // step) * step)
    part = _divisor(rows, 2 * block_bytes // series)
    steps = _divisor(part, 2 * block_bytes // making)
    points = max(1, min(n_points, 2 * block_bytes // -(-making // max(n_points, 1))))
    return ([slice(first, min(first + rows, n_times)) for first in range(0, max(n_times, 1), rows)],
            part, (steps, points))


def _divisor(n: int, at_most: int) -> int:
    """The largest divisor of ``n`` up to ``at_most``, 1 at least."""
    return max(d for d in range(1, max(1, min(n, at_most)) + 1) if n % d == 0)


def _series(values: dict[str, np.ndarray], ds: xr.Dataset, times: np.ndarray, points: PointSet,
            orog: np.ndarray, heights: Sequence[float], groups, earlier, derived: bool = True):
    """One block's point dataset from its fields at the points (``values``): the dewpoint of a
    source that publishes humidity, the profiles, the elevation corrections, the snowfall of
    a source that publishes none. Returns it and the temperature the next block's snowfall
    needs (`snowfall_from_temperature`)."""
    out = xr.Dataset(coords={"time": times, "point": points.ids})
    for name, val in values.items():
        if name in PROFILE_INPUTS:
            continue
        out[name] = (("time", "point"), val)
    if "d2m" not in values and {"rh2m", "t2m"} <= values.keys():
        # Sources that publish humidity instead of dewpoint (JMA MSM): one canonical dewpoint.
        out["d2m"] = (("time", "point"), physics.dewpoint_from_relative_humidity(
            values["t2m"].astype(np.float64), values["rh2m"] / 100.0).astype(np.float32))
        out = out.drop_vars("rh2m")
    profiles(out, values, ds, orog, np.asarray(heights, dtype=float),
             [(len(points), heights)] if groups is None else groups)
    correct_elevation(out, points.elevation - orog)
    if derived and "sf" not in out and {"tp", "t2m"} <= set(out.data_vars):
        earlier = snowfall_from_temperature(out, ds, earlier)
    for name in map(str, out.data_vars):
        spec = variable(name)
        out[name].attrs.update(units=spec.units, long_name=spec.long_name)
        for key in ("steps_minutes", "starts_minutes"):
            if name in ds and key in ds[name].attrs:
                out[name].attrs[key] = ds[name].attrs[key]
    out.attrs.update(ds.attrs)
    return out, earlier
