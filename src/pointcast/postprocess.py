"""The optional post-processing stage (``[postprocess]``): a decaying-average bias correction.

Each cycle, before the products are built, for temp_2m, dewpoint_temperature and windspd_10m
of every product that archives them as (init_time, point, lead_time): the observations that
arrived since the last cycle (in ``[postprocess] observations``, valid before the new run's
init time) are matched with the archived raw forecasts (pointcast.verify) and every forecast
error ``f - o`` updates the bias estimate of its cell (point, lead-time bin, UTC hour of day)
with NCEP's decaying average

    b_new = (1 - w) * b_old + w * (f - o),   w = 0.02 by default

(Cui, Toth, Zhu and Hou 2012, "Bias correction for global ensemble forecast", Weather and
Forecasting 27, 396-410). While a cell has fewer than 1/w pairs its weight is 1/n, so its
estimate is the plain mean of its pairs and a cold start is not pulled towards zero. The
blended series are corrected (``raw - b``) before the products derive and render them, so the
published JSON is corrected; the archive keeps the raw element beside ``<name>_corrected``,
and the manifest says what was corrected. The estimates live in
``<root>/postprocess/<product>.nc``.
docs/verification.md describes the scheme and its limits.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from . import physics, publish, verify
from .config import Config
from .interp import BASE_STEP
from .products import eu_common

log = logging.getLogger(__name__)

CORRECTED = ("temp_2m", "dewpoint_temperature", "windspd_10m")
STATE_DIR = "postprocess"
KELVIN = eu_common.KELVIN
WIND_HEIGHT = 10.0  # the height of windspd_10m in the series' wind_u, wind_v
SCHEME = "decaying-average bias per point, lead-time bin and UTC hour of day (NCEP, Cui et al. 2012)"


def targets(product: str) -> dict[str, str]:
    """Element -> archive variable of the corrected elements a product archives without a
    height dimension (the windpack's winds by height are not corrected)."""
    names = verify.ARCHIVE_NAMES.get(product, {})
    return {e: names[e][0] for e in CORRECTED if e in names and not names[e][1]}


def bin_index(lead_h: np.ndarray) -> np.ndarray:
    """Index of verify.lead_bin's bins: 0-71 the hours, then one per 6 hours."""
    lo, _ = verify.lead_bin(lead_h)
    return np.where(lo < 72, lo, 72 + (lo - 72) / 6).astype(np.int64)


def _state_path(root: Path, product: str) -> Path:
    return root / STATE_DIR / f"{product}.nc"


def load_state(root: Path, product: str) -> xr.Dataset | None:
    path = _state_path(root, product)
    if not path.is_file():
        return None
    with xr.open_dataset(path, engine="scipy") as ds:
        return ds.load()


def _save_state(root: Path, product: str, ds: xr.Dataset) -> None:
    """One NetCDF-3 file (scipy writes it; no optional library), replaced whole."""
    path = _state_path(root, product)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(4)}")
    try:
        ds.to_netcdf(tmp, engine="scipy")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _empty_state(elements: list[str], points: list[str], nbins: int) -> xr.Dataset:
    shape = (len(elements), len(points), nbins, 24)
    return xr.Dataset(
        {"bias": (("element", "point", "lead_bin", "hour"), np.zeros(shape),
                  {"long_name": "decaying-average forecast error (forecast minus observation)"}),
         "count": (("element", "point", "lead_bin", "hour"), np.zeros(shape, dtype=np.int32),
                   {"long_name": "forecast-observation pairs learnt"})},
        coords={"element": elements, "point": points, "lead_bin": np.arange(nbins), "hour": np.arange(24)})


def _fit(state: xr.Dataset | None, elements: list[str], points: list[str], nbins: int) -> xr.Dataset:
    """The state on these elements, points and bins (new cells start empty)."""
    fresh = _empty_state(elements, points, nbins)
    if state is None:
        return fresh
    kept = state.reindex_like(fresh, fill_value=0)
    kept.attrs = state.attrs
    return kept


def learn(state: xr.Dataset, m: verify.Matches, element: str, weight: float) -> int:
    """Update the element's estimates with the pairs of ``m``, oldest observation first."""
    points = {p: k for k, p in enumerate(state.point.values.tolist())}
    valid_step = m.init + (m.lead_h * 3600).round().astype("timedelta64[s]")
    hours = ((valid_step - valid_step.astype("datetime64[D]")) // np.timedelta64(1, "h")).astype(np.int64)
    bins = bin_index(m.lead_h)
    e = state.element.values.tolist().index(element)
    bias, count = state["bias"].values, state["count"].values
    n = 0
    for k in np.lexsort((m.init, m.valid)):
        p = points.get(m.point[k])
        if p is None or bins[k] >= bias.shape[2]:
            continue
        cell = (e, p, bins[k], hours[k])
        count[cell] += 1
        w = max(weight, 1.0 / count[cell])
        bias[cell] = (1 - w) * bias[cell] + w * (m.forecast[k] - m.observed[k])
        n += 1
    return n


def merged(states: list[xr.Dataset]) -> xr.Dataset:
    """One estimate for the products built from the same blended series (eu-short and
    eu-medium), so that they agree where they overlap: each cell's from the product that
    learnt it from the most pairs."""
    if len(states) == 1:
        return states[0]
    both = xr.concat(states, dim="product", join="outer", fill_value=0)
    return both.isel(product=both["count"].argmax("product"))


def correct_series(series: xr.Dataset, state: xr.Dataset, start: np.datetime64) -> xr.Dataset:
    """The blended series of a run starting at ``start`` with the learnt bias of each step's
    cell removed, before the product derives and renders anything: its elements (humidity,
    feel-like temperature, daily extremes, weather codes) follow from the corrected series.
    The dewpoint stays at or below the temperature; the 10 m wind keeps its direction, its
    components scaled by corrected / raw speed (a calm stays calm). A cell learnt nothing
    has a bias of 0: its values are unchanged."""
    times = series.time.values
    hours = ((times - times.astype("datetime64[D]")) // np.timedelta64(1, "h")).astype(np.int64)
    bins = np.minimum(bin_index((times - start) / np.timedelta64(1, "h")), state.sizes["lead_bin"] - 1)
    ids = series.point.values

    def bias(element: str) -> xr.DataArray:
        est = state["bias"].sel(element=element).reindex(point=ids, fill_value=0.0).values
        return xr.DataArray(est[:, bins, hours].T, dims=("time", "point"))

    def limited(values: xr.DataArray, element: str, offset: float = 0.0) -> xr.DataArray:
        lo, hi = verify.OBSERVED[element].valid
        return values.clip(lo + offset, hi + offset)

    out = series.copy()
    elements = state.element.values.tolist()
    if "temp_2m" in elements:
        out["t2m"] = limited(series.t2m - bias("temp_2m"), "temp_2m", KELVIN).astype(series.t2m.dtype)
    if "dewpoint_temperature" in elements:
        out["d2m"] = limited(series.d2m - bias("dewpoint_temperature"), "dewpoint_temperature", KELVIN)
    if "d2m" in out:
        out["d2m"] = np.minimum(out.d2m, out.t2m).astype(series.d2m.dtype)
    if "windspd_10m" in elements:
        u, v = (series[c].sel(height=WIND_HEIGHT) for c in ("wind_u", "wind_v"))
        raw = physics.wind_speed(u, v)
        speed = limited(raw - bias("windspd_10m"), "windspd_10m")
        factor = xr.where(raw > 0, speed / raw.where(raw > 0), 1.0)
        at = series.height == WIND_HEIGHT
        for c in ("wind_u", "wind_v"):
            out[c] = xr.where(at, series[c] * factor, series[c]).transpose(*series[c].dims).astype(series[c].dtype)
    return out


def keep_raw(archive: xr.Dataset, series: xr.Dataset, product: str) -> list[str]:
    """The archive of a product built from the corrected series: its corrected elements move
    to ``<name>_corrected`` and the raw ones (the same elements of the uncorrected ``series``
    at the archive's steps, from which the correction learns) go back under their names."""
    lead = archive[publish.LEAD].values
    sampled = series.sel(time=archive[publish.INIT].values[0] + lead)
    fields = eu_common.Fields(sampled, lead[1] - lead[0])
    added = []
    for element, name in targets(product).items():
        corrected = archive[name]
        raw = eu_common.BY_KEY[element].compute(fields).T[None].astype(corrected.dtype)
        attrs = {**corrected.attrs, "long_name": f"{corrected.attrs.get('long_name', name)}, bias-corrected",
                 "comment": f"raw value in {name}; {SCHEME}"}
        archive[f"{name}_corrected"] = (corrected.dims, corrected.values, attrs)
        archive[name] = (corrected.dims, raw, corrected.attrs)
        added.append(f"{name}_corrected")
    return added


def prepare(cfg: Config, inits: dict[str, datetime]) -> tuple[dict[str, xr.Dataset], dict]:
    """Before the builds: learn from the observations that arrived since the last cycle and
    are valid before the product's run (``inits``: the earliest init time of its models, so
    that nothing the run verifies is learnt whichever model starts it); save and return each
    product's estimates, and the manifest's account. A bad observation file is logged and
    the cycle goes on with the estimates it has."""
    pp = cfg.postprocess
    if pp.observations is None:  # the configuration asks for them where the correction is on
        raise ValueError("postprocess: the correction learns from observations, and none are configured")
    root = Path(cfg.output.root)
    try:
        obs = verify.read_observations([pp.observations], cfg).frame if pp.observations.is_dir() else None
        if obs is None:
            log.warning("postprocess: observations directory %s does not exist; nothing learnt", pp.observations)
    except verify.ObservationError as exc:
        log.error("postprocess: %s; nothing learnt this cycle", exc)
        obs = None
    account: dict[str, Any] = {"scheme": SCHEME, "weight": pp.weight, "observations": str(pp.observations), "products": {}}
    states = {}
    for pid, pc in cfg.products.items():
        elements = list(targets(pid))
        if not elements:
            continue
        init = np.datetime64(inits[pid], "ns")
        last = np.array([pc.horizon_hours - BASE_STEP / np.timedelta64(1, "h")])
        state = _fit(load_state(root, pid), elements, [p.id for p in pc.points], int(bin_index(last)[0]) + 1)
        through = state.attrs.get("observations_through")
        learnt = 0
        if obs is not None and len(obs):
            new = obs[obs["time"] < init]
            if through:
                new = new[new["time"] > np.datetime64(pd.Timestamp(through).tz_convert(None), "ns")]
            archive = verify.Archive.open(root, pid) if len(new) else None
            if archive is not None:
                try:
                    for element in elements:
                        m = verify.match(archive, new, element)
                        if m is not None:
                            learnt += learn(state, m, element, pp.weight)
                finally:
                    archive.close()
            if len(new):
                state.attrs["observations_through"] = pd.Timestamp(new["time"].max()).tz_localize("UTC").isoformat()
        _save_state(root, pid, state)
        states[pid] = state
        account["products"][pid] = {
            "corrected": [f"{targets(pid)[e]}_corrected" for e in elements], "pairs_learnt": learnt,
            "observations_through": state.attrs.get("observations_through"),
            "cells_with_estimate": int((state["count"] > 0).sum())}
        log.info("postprocess %s: learnt %d pairs", pid, learnt)
    return states, account


def learnt(cfg: Config, runs: Mapping[str, Any]) -> tuple[dict[str, xr.Dataset], dict]:
    """With `[postprocess]` on, before the builds: the bias estimates learnt from the
    observations valid before each product's run (`prepare`), by product, and the manifest's
    account of them; with it off, nothing. ``runs``: the cycle's model runs (``RunRef``), by
    model."""
    if not cfg.postprocess.enabled:
        return {}, {"enabled": False}
    inits = {pid: min(runs[m].init for m in pc.models).replace(tzinfo=None) for pid, pc in cfg.products.items()}
    states, account = prepare(cfg, inits)
    return states, {"enabled": True, **account}


def applied(cfg: Config, outputs: Mapping[str, Any], writer: publish.TreeWriter, account: dict) -> dict:
    """After validation: the verification files (`pointcast verify`) carried into the new
    run's tree; the manifest's account of the corrections (``account``, `learnt`) of the
    products built this cycle (a carried product is not corrected)."""
    for name, data in verify.published_files(Path(cfg.output.root)).items():
        writer.put(f"{verify.VERIFICATION_DIR}/{name}", data)
    if not account["enabled"]:
        return account
    return {**account, "products": {pid: entry for pid, entry in account["products"].items() if pid in outputs}}
