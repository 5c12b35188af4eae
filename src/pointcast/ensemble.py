"""Ensembles: the members' point series -> probabilities and quantiles, blended by lead time.

An ensemble (``sources.ModelSpec.members``) is extracted like a deterministic model, each
member through the same weights and the same vertical interpolation (`interp.extract_members`),
and resampled to the 15-minute axis member by member (`interp.resample`: accumulations keep
each member's totals). From them, for each time step (docs/method.md, "Precipitation
probability" and "Quantiles"):

- ``pop_ens``: the share of members with at least `HOURLY_THRESHOLD_MM` in the clock hour
  holding the step (the spec's hourly ``precipitation_proba`` and srf ``pop``);
- ``t2m_q``, ``tp_q``, ``wspd_q``: the `QUANTILES` of the members' 2 m temperature, of their
  precipitation in that clock hour and of their wind speed at each height the products
  publish quantiles at (``Product.ensemble_heights``: 10 m, or the windpack's), where every
  member has the wind at that height;
- ``tp_members``: each member's precipitation in that clock hour, for the probability of a
  whole day (`day_probability`).

A product's ensembles are blended by lead time in its priority order (`blend`): each
statistic comes from the first ensemble that has every member at that step (ICON-EU-EPS to
its 120 h, then ENS), the same rule as the deterministic blend without its cross-fade for the
probabilities. Where none has, the neighbourhood probability of the deterministic blend stays
(``pop``), and the manifest says which lead times take their probability, and each quantile
variable, from which ensemble (`probability_from`, `quantiles_from`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from . import blend as blend_stage

# What the members' extraction keeps: the rest of a member's fields feeds nothing here.
MEMBER_VARIABLES = ("t2m", "tp", "wind_u", "wind_v")
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
# At least this much in the hour counts as precipitation (Open-Meteo's and the neighbourhood
# probability's threshold), and at least this much in the day for a day's probability (the
# usual "1 mm or more" of a daily probability of precipitation, as JMA's).
HOURLY_THRESHOLD_MM = 0.1
DAILY_THRESHOLD_MM = 1.0
# float32 amounts spread over quarter hours and summed again differ from the exact sum by a
# few ulps: an amount within this of a threshold counts as reaching it.
_TOLERANCE_MM = 1e-4
NEIGHBOURHOOD = "neighbourhood"  # `probability_from`'s name for the deterministic fallback
NO_QUANTILES = "none"  # `quantiles_from`'s name for lead times no ensemble covers (no quantiles)


def clock_hours(values: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Amounts of 15-minute steps (time first) -> at each step, the total of the clock hour
    holding it (NaN where a quarter of it is NaN; an hour the axis cuts sums its quarters
    on the axis)."""
    hour = times.astype("datetime64[h]")
    starts = np.flatnonzero(np.r_[True, hour[1:] != hour[:-1]])
    sums = np.add.reduceat(values.astype(np.float64), starts, axis=0)
    return np.repeat(sums, np.diff(np.r_[starts, len(times)]), axis=0)


def statistics(members: xr.Dataset, want_members: bool) -> xr.Dataset:
    """One ensemble's statistics (the module's variables) from its members resampled to the
    15-minute axis, dims ``(time, member, point[, height])``. NaN where a member has no
    value (beyond the ensemble's horizon), so that the blend falls through to the next one."""
    times = members.time.values
    out = xr.Dataset(coords={c: members[c] for c in members.coords if c != "member"})
    quantile = xr.DataArray(list(QUANTILES), dims="quantile", name="quantile")
    if "tp" in members:
        tp = members["tp"].transpose("time", "member", ...)
        hourly = xr.DataArray(clock_hours(tp.values, times), dims=tp.dims, coords=tp.coords)
        complete = hourly.notnull().all("member")
        wet = (hourly >= HOURLY_THRESHOLD_MM - _TOLERANCE_MM).mean("member") * 100.0
        out["pop_ens"] = wet.where(complete).astype(np.float32)
        out["tp_q"] = quantiles(hourly, quantile)
        if want_members:
            out["tp_members"] = hourly.astype(np.float32)
    if "t2m" in members:
        out["t2m_q"] = quantiles(members["t2m"], quantile)
    if "wind_speed" in members:
        wspd = quantiles(members["wind_speed"], quantile)
        # An ensemble gives the whole column of heights its products publish quantiles at
        # (`Product.ensemble_heights`, the members extracted at those only) or none of it at
        # a time: ICON-EU-EPS, whose files have the wind at 10 m only, leaves the windpack's
        # heights to ENS rather than a column of 10 m from one ensemble under heights from
        # another. A product of 10 m quantiles has a column of 10 m: it never waits for the
        # wind above, which ENS is fetched with only within the windpack's reach (`need`).
        out["wspd_q"] = wspd.where(wspd.notnull().all("height")) if "height" in wspd.dims else wspd
    return out


def quantiles(values: xr.DataArray, quantile: xr.DataArray) -> xr.DataArray:
    """The ``quantile`` levels over the members, linear between order statistics (Hyndman and Fan's
    type 7, numpy's default), NaN where a member is; dims (time, quantile, ...). The members
    are sorted rather than partitioned as ``np.quantile`` does: numpy's vectorised float32
    sort of 51 members is about 8 times quicker than its partition at five ranks (bench
    ``ens_cycle_vs_decode_floor``, docs/performance.md), and the values are float32 anyway."""
    v = values.transpose("time", "member", ...)
    x = v.values.astype(np.float32)
    ranked = np.sort(x, axis=1)  # NaN last: masked below
    position = np.asarray(quantile.values, dtype=np.float64) * (x.shape[1] - 1)
    below = np.floor(position).astype(int)
    above = np.minimum(below + 1, x.shape[1] - 1)
    weight = (position - below).astype(np.float32).reshape((1, -1) + (1,) * (x.ndim - 2))
    q = ranked[:, below] + (ranked[:, above] - ranked[:, below]) * weight
    q[np.broadcast_to(np.isnan(x).any(axis=1, keepdims=True), q.shape)] = np.nan
    coords = {c: v[c] for c in v.coords if "member" not in v[c].dims}
    return xr.DataArray(q, dims=("time", "quantile", *v.dims[2:]), coords={**coords, "quantile": quantile.values})


def blend(per_ensemble: Sequence[tuple[str, xr.Dataset]]) -> tuple[xr.Dataset, dict[str, list[str]]]:
    """The statistics of a product's ensembles (`statistics`, in its priority order) as one
    series: each step's from the first ensemble that has it (`blend.blend`); and, by statistic,
    the ensemble of each step at the first point (and first height; "" where none has it): the
    manifest's `probability_from` and `quantiles_from`. ``tp_members``,
    which counts members of one ensemble, is not blended: the first ensemble's at a step
    with all its members is kept, its members side by side with the others' (`day_probability`)."""
    series, used = blend_stage.blend([(e, ds.drop_vars(["tp_members", "member"], errors="ignore"))
                                      for e, ds in per_ensemble])
    with_members = [(e, ds["tp_members"]) for e, ds in per_ensemble if "tp_members" in ds]
    if with_members:
        series["tp_members"] = xr.concat(
            [da.assign_coords(member=[f"{e}/{int(k)}" for k in da.member.values], ensemble=("member", [e] * da.sizes["member"]))
             for e, da in with_members], dim="member")
    return series, used


def day_probability(members: np.ndarray, ensembles: np.ndarray, order: Sequence[str],
                    shares: np.ndarray) -> np.ndarray:
    """The probability (%) of at least `DAILY_THRESHOLD_MM` in a day, per point: the share of
    the members of the first ensemble (in ``order``) with every member's every hour of the day
    whose day total reaches it. ``members``: each member's hourly amounts over the day's
    hours (hour, member, point: ``tp_members`` at the hours' starts), ``ensembles``: each
    member's ensemble, ``shares``: each hour's share of the day (a midnight cuts an hour in a
    zone off the hour). NaN where no ensemble covers the whole day."""
    out = np.full(members.shape[-1], np.nan)
    for e in order:
        mine = members[:, ensembles == e]
        if not mine.size:
            continue
        totals = (mine * shares[:, None, None]).sum(axis=0)
        complete = np.isfinite(totals).all(axis=0) & np.isnan(out)
        wet = (totals >= DAILY_THRESHOLD_MM - _TOLERANCE_MM).mean(axis=0) * 100.0
        out = np.where(complete, wet, out)
    return out
