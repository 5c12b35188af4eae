"""Power of the configured wind farms and solar plants (the power extension, docs/api.md).

A product of its own over the sites of every product with a ``sites`` list: each site's power
is made from its host product's blended series and members (`pointcast.build.build_power`,
docs/method.md "Power"); this module turns those numbers into the run's files and archive,
as the contract's power table (`contract.POWER_DATA`) says:

- ``power/<freq>/<site>.json``: the site's power (kW), capacity factor and P10..P90 at each
  freq its host product publishes, every value the mean over ``[datetime, datetime + freq)``;
- ``power/index.json``: the sites (id, name, kind, place, capacity, host product, freqs);
- the archive ``power.zarr``: (init_time, point, lead_time[, quantile]) at 15 minutes, with
  the inputs each site's power was made from (hub wind and air density, or global radiation).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..config import Site, WindSite
from ..contract import FREQ_MINUTES, POWER_DATA, POWER_OPERATION, POWER_PRODUCT, POWER_QUANTILES
from ..ensemble import QUANTILES
from .base import Files, ProductOutput, RunContext, dumps, iso

ID = POWER_PRODUCT
PATH = POWER_OPERATION.path
NO_QUANTILES = ("lead times no ensemble of the host product covers with every member, and every lead time of "
                "a solar plant (no ensemble's members carry radiation)")


@dataclass(frozen=True)
class SitePower:
    """One host product's sites and their power on the 15-minute axis ``times`` (starts),
    arrays (site, time): ``power_kw`` from the deterministic blend, ``members_kw`` (site,
    time, member) of each ensemble in priority order (the wind farms' rows; NaN for the solar
    plants and beyond an ensemble's horizon), and the inputs each power was made from."""

    product: str
    ctx: RunContext
    freqs: tuple[str, ...]
    sites: tuple[Site, ...]
    times: np.ndarray
    power_kw: np.ndarray
    members_kw: tuple[tuple[str, np.ndarray], ...]
    inputs: dict[str, np.ndarray]  # archive variable -> (site, time)
    models: tuple[str, ...]


def site_path(freq: str, site_id: str) -> str:
    return f"{ID}/{freq}/{site_id}.json"


def expected_files(parts: list[SitePower]) -> list[str]:
    return [f"{ID}/index.json"] + [site_path(f, s.id) for part in parts for f in part.freqs for s in part.sites]


def _mean_over(values: np.ndarray, per: int) -> np.ndarray:
    """The mean of every ``per`` consecutive steps along the second axis (the intervals of a
    coarser freq: the power of an interval is its quarter hours' mean)."""
    n = values.shape[1] // per
    return values[:, :n * per].reshape(values.shape[0], n, per, *values.shape[2:]).mean(axis=2)


def quantiles_kw(members: tuple[tuple[str, np.ndarray], ...], per: int) -> tuple[np.ndarray | None, list[str]]:
    """The `QUANTILES` of the members' interval power (site, interval, quantile): the members'
    power averaged over each interval first, then the quantiles of the averages (the quantile
    of a mean is not the mean of quantiles); each element from the first ensemble (in
    priority order) that has every member there, NaN where none has. None without ensembles."""
    out = None
    used = []
    for ensemble, kw in members:
        q = np.quantile(_mean_over(kw, per), list(QUANTILES), axis=-1)  # NaN where a member is
        q = np.moveaxis(q, 0, -1)
        if np.isfinite(q).any():
            used.append(ensemble)
        out = q if out is None else np.where(np.isnan(out), q, out)
    return out, used


def _rounded(values: np.ndarray, decimals: int | None) -> list:
    return [None if not np.isfinite(v) else round(float(v), decimals) for v in values.tolist()]


def render(parts: list[SitePower], files: Files) -> tuple[xr.Dataset, dict]:
    """Each site's files into ``files`` and the index; returns the archive of the run's power
    and the manifest's account of each site (its host product, models, ensembles and inputs)."""
    entries, manifest = [], {}
    elements = {e.name: e for e in POWER_DATA}
    for part in parts:
        capacity = np.array([s.capacity_kw for s in part.sites])
        for freq in part.freqs:
            per = FREQ_MINUTES[freq] // 15
            power = _mean_over(part.power_kw, per)
            starts = part.times[::per][:power.shape[1]]
            q, used = quantiles_kw(part.members_kw, per)
            stamps = [iso(t) for t in starts]
            for j, site in enumerate(part.sites):
                columns = {"power": _rounded(power[j], elements["power"].decimals),
                           "capacity_factor": _rounded(power[j] / capacity[j], elements["capacity_factor"].decimals)}
                for k, name in enumerate(POWER_QUANTILES):
                    columns[name] = (_rounded(q[j, :, k], elements[name].decimals) if q is not None
                                     else [None] * len(stamps))
                data = [dict(zip(POWER_DATA.names, row, strict=True))
                        for row in zip(stamps, *columns.values(), strict=True)]
                obj = {"site": site.id, "name": site.name, "kind": _kind(site), "product": part.product,
                       "latitude": site.lat, "longitude": site.lon, "capacity_kw": round(site.capacity_kw, 1),
                       "basetime": iso(part.ctx.basetime), "updated_time": iso(part.ctx.generated),
                       "freq": freq, "unit": POWER_DATA.units,
                       "quantiles_from": used if isinstance(site, WindSite) else [], "data": data}
                text = dumps(obj)
                files.put(site_path(freq, site.id), text, b"null" in text)
        for site in part.sites:
            entries.append({"id": site.id, "name": site.name, "kind": _kind(site), "lat": site.lat, "lon": site.lon,
                            "cell": site.id, "capacity_kw": round(site.capacity_kw, 1), "product": part.product,
                            "freqs": list(part.freqs), **_parameters(site)})
            manifest[site.id] = {"product": part.product, "kind": _kind(site), "models": list(part.models),
                                 "ensembles": [e for e, _ in part.members_kw] if isinstance(site, WindSite) else [],
                                 "inputs": _inputs(site)}
    first = min(parts, key=lambda p: p.ctx.basetime)
    files.put(f"{ID}/index.json", dumps({
        "product": ID, "path": PATH, "grid": None, "basetime": iso(first.ctx.basetime),
        "updated_time": iso(first.ctx.generated), "next_update": iso(first.ctx.next_update),
        "freqs": sorted({f for p in parts for f in p.freqs}, key=lambda f: -FREQ_MINUTES[f]),
        "points": entries}), False)
    return archive(parts), manifest


def _kind(site: Site) -> str:
    return "wind" if isinstance(site, WindSite) else "pv"


def _parameters(site: Site) -> dict:
    if isinstance(site, WindSite):
        return {"hub_height": site.hub_height_m, "turbine": site.curve.name, "turbines": round(site.turbines, 3),
                "farm_efficiency": site.efficiency}
    return {"dc_kwp": site.dc_kwp, "ac_kw": site.ac_kw, "tilt": site.tilt, "azimuth": site.azimuth}


def _inputs(site: Site) -> list[str]:
    """What a site's power is made from, as the manifest says it (docs/method.md, "Power")."""
    if isinstance(site, WindSite):
        return [f"wind_u, wind_v at {site.hub_height_m:g} m (hub)", "sp, t2m, d2m and the temperature at the hub "
                "(air density)", f"turbine {site.curve.name}"]
    return ["ssrd (global radiation)", "fdir (direct radiation) where the blend has it, else the Erbs split",
            "t2m", "u10, v10"]


def archive(parts: list[SitePower]) -> xr.Dataset:
    """The run's power on one 15-minute lead-time axis from the earliest basetime of the
    host products (a site's values at their valid times, NaN beyond its product's horizon)."""
    init = min(np.datetime64(p.ctx.basetime.replace(tzinfo=None), "ns") for p in parts)
    end = max(p.times[-1] for p in parts) + np.timedelta64(15, "m")
    lead = np.arange(np.timedelta64(0, "m"), end - init, np.timedelta64(15, "m")).astype("timedelta64[ns]")
    sites = [s for p in parts for s in p.sites]
    n = len(sites)
    power = np.full((n, len(lead)), np.nan, dtype=np.float32)
    quantiles = np.full((n, len(lead), len(QUANTILES)), np.nan, dtype=np.float32)
    inputs = {name: np.full((n, len(lead)), np.nan, dtype=np.float32) for name in _INPUTS}
    row = 0
    for p in parts:
        at = ((p.times - init) // np.timedelta64(15, "m")).astype(int)
        rows = slice(row, row + len(p.sites))
        power[rows, at] = p.power_kw
        q, _ = quantiles_kw(p.members_kw, 1)
        if q is not None:
            quantiles[rows, at] = q
        for name, values in p.inputs.items():
            inputs[name][rows, at] = values
        row += len(p.sites)
    dims = ("init_time", "point", "lead_time")
    ds = xr.Dataset(coords={
        "init_time": ("init_time", [init]), "point": ("point", [s.id for s in sites]), "lead_time": ("lead_time", lead),
        "quantile": ("quantile", np.array(QUANTILES, dtype=np.float64),
                     {"long_name": "probability of not exceeding the value among the members"}),
        "latitude": ("point", [s.lat for s in sites], {"units": "degrees_north", "standard_name": "latitude"}),
        "longitude": ("point", [s.lon for s in sites], {"units": "degrees_east", "standard_name": "longitude"}),
        "capacity": ("point", np.array([s.capacity_kw for s in sites], dtype=np.float64),
                     {"units": "kW", "long_name": "capacity: a farm's turbines x rated power, a plant's AC limit"}),
        "kind": ("point", np.array([_kind(s) for s in sites], dtype=object), {"long_name": "wind or pv"}),
        "product": ("point", np.array([p.product for p in parts for _ in p.sites], dtype=object),
                    {"long_name": "the product whose blend and members the power is made from"}),
    })
    ds["point"].attrs["long_name"] = "configured site id"
    ds["init_time"].attrs.update(long_name="the earliest basetime of the host products",
                                 standard_name="forecast_reference_time")
    ds["lead_time"].attrs.update(long_name="time since init_time", standard_name="forecast_period")
    ds["power"] = (dims, power[None], {"units": "kW", "long_name": "AC power of the site, mean over the interval, "
                                       "from the deterministic blend", "valid_min": 0.0,
                                       "missing_where": "lead times beyond the site's product horizon"})
    ds["power_quantiles"] = (dims + ("quantile",), quantiles[None], {
        "units": "kW", "long_name": "quantiles of the ensemble members' power", "missing_where": NO_QUANTILES})
    for name, (units, about, standard) in _INPUTS.items():
        ds[name] = (dims, inputs[name][None], {"units": units, "long_name": about, "missing_where": _INPUT_WHERE[name]}
                    | ({"standard_name": standard} if standard else {}))
    ds.attrs.update(title="pointcast power", Conventions="CF-1.10", product=ID, time_step="15 min",
                    interval_convention="interval elements describe [time, time + time_step)",
                    models=json.dumps({p.product: list(p.models) for p in parts}),
                    synthetic=int(any(m.get("synthetic") for p in parts for m in p.ctx.models.values())))
    if ds.attrs["synthetic"]:
        ds.attrs["comment"] = "SYNTHETIC DATA from the embedded sample source, not a real forecast"
    return ds


_INPUTS: Mapping[str, tuple[str, str, str | None]] = {
    "hub_wind_speed": ("m s-1", "wind speed at the hub height of the farm (deterministic blend)", "wind_speed"),
    "air_density": ("kg m-3", "moist air density at the hub height", "air_density"),
    "global_radiation": ("W m-2", "global horizontal radiation, interval mean",
                         "surface_downwelling_shortwave_flux_in_air"),
}
_INPUT_WHERE = {"hub_wind_speed": "solar plants", "air_density": "solar plants", "global_radiation": "wind farms"}


def output(parts: list[SitePower], files) -> ProductOutput:
    """The power output of the run (its files into ``files``), for validation and publishing."""
    ds, manifest = render(parts, files)
    return ProductOutput(files=files, archive=ds, checks={"sites": manifest, "parts": [
        (p.product, [s.id for s in p.sites], list(p.freqs), p.ctx.basetime, len(p.times)) for p in parts]})


def check(out: ProductOutput) -> list[str]:
    """The validation gate's checks of the power output: every site's file at each of its
    freqs, valid JSON of the contract's entries, no missing power, power within [0, capacity],
    quantiles ordered."""
    errors: list[str] = []
    capacity = dict(zip(out.archive.point.values.tolist(), out.archive.capacity.values.tolist(), strict=True))
    for product, ids, freqs, _, steps in out.checks["parts"]:
        for freq in freqs:
            want = steps * 15 // FREQ_MINUTES[freq]
            for site in ids:
                rel = site_path(freq, site)
                try:
                    obj = json.loads(out.files[rel])
                except (KeyError, ValueError) as e:
                    errors.append(f"{ID}: {rel}: missing or not JSON ({type(e).__name__})")
                    continue
                data = obj.get("data") or []
                if len(data) != want:
                    errors.append(f"{ID}: {rel}: {len(data)} entries, {product}'s horizon at {freq} needs {want}")
                if any(list(e) != list(POWER_DATA.names) for e in data):
                    errors.append(f"{ID}: {rel}: entry keys are not the contract's {list(POWER_DATA.names)}")
                    continue
                power = [e["power"] for e in data]
                if any(v is None for v in power):
                    errors.append(f"{ID}: {rel}: power missing at {sum(v is None for v in power)} times")
                elif power and not (min(power) >= 0 and max(power) <= capacity[site] * 1.0001 + 0.1):
                    errors.append(f"{ID}: {rel}: power outside [0, {capacity[site]:g}] kW")
                rows = [[e[k] for k in POWER_QUANTILES] for e in data]
                if any(None not in r and r != sorted(r) for r in rows):
                    errors.append(f"{ID}: {rel}: quantiles not ordered")
    return errors[:20]


__all__ = ["ID", "SitePower", "render", "output", "check", "expected_files", "site_path", "quantiles_kw"]
