"""Blend: several models on one 15-minute axis -> one seamless series per product.

Models are taken in the product's priority order (highest resolution first). At each time
and point a variable comes from the first model that has it there. Where a model ends (its
horizon, or the edge of its domain in time), states cross-fade linearly into the next model
over the last `SEAM` of the higher-resolution model, so no jump appears at the seam; interval
quantities (precipitation, radiation, gust) switch at the seam without fading, so each
interval's amount comes from exactly one model and totals stay consistent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from .catalogue import VARIABLES, Temporal

SEAM = np.timedelta64(3, "h")


def blend(members: Sequence[tuple[str, xr.Dataset]],
          until: Mapping[str, np.datetime64] | None = None) -> tuple[xr.Dataset, dict[str, list[str]]]:
    """Members are (model id, resampled dataset) in priority order, all on the same time axis.
    `until` ends a model's span early (a product's `max_lead_hours`): it supplies only the
    times before it, and fades out before it like at its own horizon.

    Returns the blended dataset and, per variable, the model that supplied each time step at
    the first point (for the manifest's account of the seams).
    """
    until = until or {}
    members = [(m, ds.where(ds.time < until[m]) if m in until else ds) for m, ds in members]
    names: list[str] = []
    for _, ds in members:
        names += [str(n) for n in ds.data_vars if n not in names]
    times = members[0][1].time.values
    out = xr.Dataset(coords=members[0][1].coords)
    used: dict[str, list[str]] = {}
    weights: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # _fade_weight's, shared by the variables
    for name in names:
        have = [(m, ds[name]) for m, ds in members if name in ds]
        template = have[0][1]
        result = None
        first = np.full(len(times), -1, dtype=np.int16)  # the model of each step at the first point
        for rank, (_, arr) in reversed(list(enumerate(have))):
            values = arr.transpose(*template.dims).values.astype(np.float64)
            valid = ~np.isnan(values)
            if result is None:  # the last model: nothing under it to fade into
                result = values
            elif VARIABLES[name].temporal is Temporal.STATE:
                _fade_over(result, values, valid, *_fade_weight(valid, times, weights))
            else:
                np.copyto(result, values, where=valid)
            first[valid.reshape(len(times), -1)[:, 0]] = rank
        assert result is not None  # every variable is some member's
        out[name] = (template.dims, result.astype(np.float32), template.attrs)
        used[name] = [have[i][0] if i >= 0 else "" for i in first]
    return out, used


def _fade_over(result: np.ndarray, values: np.ndarray, valid: np.ndarray, weight: np.ndarray,
               seams: np.ndarray) -> None:
    """``result`` <- ``values`` where valid, cross-faded by ``weight`` into what ``result``
    held. Only the steps ``seams`` have a weight below 1 where a value is: the others take the
    values as they are, without the arithmetic over the whole (time, point[, height]) array."""
    under = result[seams]
    w, v = weight[seams], values[seams]
    mixed = np.where(np.isnan(under), v, w * v + (1 - w) * under)
    np.copyto(result, values, where=valid)
    result[seams] = np.where(valid[seams], mixed, under)


def _fade_weight(valid: np.ndarray, times: np.ndarray,
                 known: dict[bytes, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """1 inside a model's span, falling linearly to 0 over its last SEAM (per series), and
    the steps where it is below 1 within some series' span (`_fade_over`). A series'
    weights depend only on where its span ends: ``known`` keeps them by those ends, for the
    other variables (most end where the others of their model do)."""
    flat = valid.reshape(len(times), -1)
    last = np.where(flat.any(axis=0), len(times) - 1 - np.argmax(flat[::-1], axis=0), -1)
    key = last.tobytes()
    if key not in known:
        ns = times.astype("datetime64[ns]").view(np.int64)  # integer arithmetic: datetime64's is slow
        end = ns[np.clip(last, 0, None)]
        remaining = (end[None, :] - ns[:, None]) / float(SEAM / np.timedelta64(1, "ns"))
        weight = np.clip(remaining, 0.0, 1.0)
        # A model whose span is the whole axis (it reaches the end) is not faded out.
        weight[:, last == len(times) - 1] = 1.0
        within = np.arange(len(times))[:, None] <= last[None, :]  # no step of an empty series
        seams = np.flatnonzero(((weight < 1) & within).any(axis=1))
        known[key] = weight, seams
    weight, seams = known[key]
    return weight.reshape(valid.shape), seams
