"""The optional post-processing stage (``[postprocess]``): a decaying-average bias correction.

Each cycle, for temp_2m, dewpoint_temperature and windspd_10m of every product that archives
them as (init_time, point, lead_time): the observations that arrived since the last cycle (in
``[postprocess] observations``, valid before the new run's init time) are matched with the
archived runs (pointcast.verify) and every forecast error ``f - o`` updates the bias estimate
of its cell (point, lead-time bin, UTC hour of day) with NCEP's decaying average

    b_new = (1 - w) * b_old + w * (f - o),   w = 0.02 by default

(Cui, Toth, Zhu and Hou 2012, "Bias correction for global ensemble forecast", Weather and
Forecasting 27, 396-410). While a cell has fewer than 1/w pairs its weight is 1/n, so its
estimate is the plain mean of its pairs and a cold start is not pulled towards zero. The new
run is archived with ``<variable>_corrected = raw - b`` beside the raw variable; the manifest
says what was corrected. The estimates live in ``<root>/postprocess/<product>.nc``.
docs/verification.md describes the scheme and its limits.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from . import publish, verify
from .config import Config

log = logging.getLogger(__name__)

CORRECTED = ("temp_2m", "dewpoint_temperature", "windspd_10m")
STATE_DIR = "postprocess"
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


def correct(archive: xr.Dataset, state: xr.Dataset, product: str) -> list[str]:
    """Add ``<name>_corrected`` beside each corrected variable of a run's archive dataset."""
    init = archive[publish.INIT].values[0]
    lead = archive[publish.LEAD].values
    lead_h = lead / np.timedelta64(1, "h")
    valid = init + lead
    hours = ((valid - valid.astype("datetime64[D]")) // np.timedelta64(1, "h")).astype(np.int64)
    bins = np.minimum(bin_index(lead_h), state.sizes["lead_bin"] - 1)
    added = []
    for element, name in targets(product).items():
        if name not in archive:
            continue
        est = state["bias"].sel(element=element).reindex(point=archive[publish.POINT].values, fill_value=0.0)
        b = est.values[:, bins, hours]  # (point, lead)
        raw = archive[name]
        lo, hi = verify.OBSERVED[element].valid
        values = np.clip(raw.values - b[None].astype(raw.dtype), lo, hi).astype(raw.dtype)
        attrs = {**raw.attrs, "long_name": f"{raw.attrs.get('long_name', name)}, bias-corrected",
                 "comment": f"raw value in {name}; {SCHEME}"}
        archive[f"{name}_corrected"] = (raw.dims, values, attrs)
        added.append(f"{name}_corrected")
    return added


def stage(cfg: Config, outputs: dict) -> tuple[dict, dict]:
    """Learn from the observations that arrived since the last cycle and correct the new
    run's archive datasets; returns the outputs and the manifest's account. A bad
    observation file is logged and the cycle goes on with the estimates it has."""
    pp = cfg.postprocess
    root = Path(cfg.output.root)
    try:
        obs = verify.read_observations([pp.observations], cfg).frame if pp.observations.is_dir() else None
        if obs is None:
            log.warning("postprocess: observations directory %s does not exist; nothing learnt", pp.observations)
    except verify.ObservationError as exc:
        log.error("postprocess: %s; nothing learnt this cycle", exc)
        obs = None
    account = {"scheme": SCHEME, "weight": pp.weight, "observations": str(pp.observations), "products": {}}
    out = dict(outputs)
    for pid, output in outputs.items():
        elements = list(targets(pid))
        if not elements:
            continue
        ds = output.archive.copy()
        init = ds[publish.INIT].values[0]
        nbins = int(bin_index(np.array([ds[publish.LEAD].values[-1] / np.timedelta64(1, "h")]))[0]) + 1
        previous = load_state(root, pid)
        state = _fit(previous, elements, [str(p) for p in ds[publish.POINT].values], nbins)
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
        added = correct(ds, state, pid)
        out[pid] = replace(output, archive=ds)
        account["products"][pid] = {
            "corrected": added, "pairs_learnt": learnt,
            "observations_through": state.attrs.get("observations_through"),
            "cells_with_estimate": int((state["count"] > 0).sum())}
        log.info("postprocess %s: learnt %d pairs, corrected %s", pid, learnt, ", ".join(added))
    return out, account
