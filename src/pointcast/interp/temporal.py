"""Model steps -> the product steps: every model on one 15-minute axis, then each product's step.

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
``aggregate`` takes the 15-minute series to a product's step with the same methods.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import xarray as xr
from scipy.interpolate import PchipInterpolator

from .. import physics
from ..catalogue import VARIABLES, VECTORS, Temporal

BASE_STEP = np.timedelta64(15, "m")


def init_time(ds: xr.Dataset) -> np.datetime64:
    """The run's start, from the dataset attributes that decode sets."""
    return np.datetime64(ds.attrs["init"][:19], "ns")


def intervals(steps_minutes: Sequence[int], init: np.datetime64) -> tuple[np.ndarray, np.ndarray]:
    """(start, end] of each interval value of a variable: from its previous step (or the run's
    start) to its step, as decode leaves interval quantities."""
    ends = init + np.array(sorted(steps_minutes), dtype="timedelta64[m]")
    return np.concatenate([[init], ends[:-1]]), ends



def snowfall_from_temperature(out: xr.Dataset, ds: xr.Dataset,
                              earlier: xr.DataArray | None = None) -> xr.DataArray | None:
    """The snowfall of a model that publishes none (GFS, JMA MSM): its precipitation times the
    snow fraction of the 2 m temperature ramp (``physics.snow_fraction``), at the mean of the
    temperatures that bound each interval, so that every product takes its snow from the
    model's snowfall by one rule (docs/method.md).

    ``out`` may be a block of the run's steps (`horizontal.extract_blocks`): ``earlier`` is
    then the 2 m temperature the block before returned, at the start of the interval that
    ends first in this block. Returns the one the next block needs (at the last start of an
    interval in this block or before it), None where there is none."""
    steps = ds.tp.attrs["steps_minutes"]
    every_start, every_end = intervals(steps, init_time(ds))
    t2m = out["t2m"] if earlier is None else xr.concat([earlier, out["t2m"]], "time")
    times = t2m.time.values
    mine = np.isin(every_end, out.time.values)  # the intervals that end in ``out``
    starts, ends = every_start[mine], every_end[mine]
    at_end = np.searchsorted(times, ends)
    at_start = np.clip(np.searchsorted(times, starts), 0, len(times) - 1)
    t = t2m.values.astype(np.float64)
    t_end = t[at_end]
    t_start = np.where((times[at_start] == starts)[:, None], t[at_start], np.nan)
    mean = np.where(np.isnan(t_start), t_end, 0.5 * (t_start + t_end))
    sf = np.full(out["tp"].shape, np.nan, dtype=np.float32)
    rows = np.searchsorted(out.time.values, ends)
    sf[rows] = out["tp"].values[rows] * physics.snow_fraction(mean - 273.15)
    out["sf"] = (("time", "point"), sf)
    out["sf"].attrs["steps_minutes"] = list(steps)
    kept = np.flatnonzero(np.isin(times, every_start))
    return t2m.isel(time=kept[-1:]) if len(kept) else earlier


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
        kind = VARIABLES[str(name)].temporal
        values = arr.transpose("time", ...).values
        if name in vectors:
            if name not in paired:
                paired.update(zip(vectors[name], _vector_pchip(ds, *vectors[name], times), strict=True))
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
        if VARIABLES[str(name)].nonnegative:
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
        take: slice | list[int] = slice(None) if len(cols) == flat.shape[1] else cols
        fit = PchipInterpolator(xs, flat[rows][:, take], axis=0, extrapolate=False)
        out[lo:hi, take] = fit(xq[lo:hi])
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
    with np.errstate(divide="ignore"):  # an empty interval (a run's step 0) holds no 15 minutes: not ok
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
        kind = VARIABLES[str(name)].temporal
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

