"""European short-range wind at hub height (short-range/windpack).

For every point, the default ladder of heights and the point's own hub heights are
precomputed at 1H, 30min and 15min over the product's horizon. Wind at a height comes from the
extract stage's vertical profile (10 m wind, the source's height levels, ICON model levels and
pressure levels), then blending and resampling exactly like the common products, so that
windpack at 100 m equals `windspd_100m` of short-range/common.

Per point and freq the run holds one ladder object with every precomputed height
(``<freq>/<id>.json``, `ladder_answers` reads it back) and one static windpack answer per configured
hub height (``<freq>/<id>/<height>m.json``): a static host serves what operators configure, in
two objects per point and freq fewer than one per height. The server answers any other height
between 10 m and 300 m from the ladder object (log-profile rule, docs/api.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from .. import physics
from ..config import ProductConfig, WindSite
from ..contract import HUB_HEIGHT_RANGE_M, WIND_DATA, WINDPACK_LADDER, height_name
from .base import (
    Files,
    ProductOutput,
    Records,
    RunContext,
    Texts,
    archive_frame,
    array,
    ensemble_archive,
    freq_series,
    iso,
    numbers,
    published_direction,
    put_quantiles,
    put_with_records,
    quantile_paths,
    render_index,
    strings,
    with_arrays,
)
from .global_wx import point_time_zone

if TYPE_CHECKING:
    from ..publish import StagedFiles

LADDER = WINDPACK_LADDER
UNITS = WIND_DATA.units


def point_heights(point) -> list[float]:
    """The heights precomputed for a point (its ladder object): the ladder and its configured
    hub heights."""
    return sorted(set(LADDER) | set(point.hub_heights))


def ladder_answers(obj: dict) -> dict[float, dict]:
    """The windpack answers (without the requested ``hub_height`` text's variants) a
    parsed ladder object holds, by height: what the validation checks against the contract.
    KeyError, TypeError or ValueError when it is not a ladder object."""
    heights, times = obj["heights"], obj["datetime"]
    columns = [obj[e.name] for e in WIND_DATA.elements[1:]]
    if not all(len(c) == len(heights) and all(len(row) == len(times) for row in c) for c in columns):
        raise ValueError("a column does not hold one row of datetime's length per height")
    head = {k: obj[k] for k in ("latitude", "longitude", "basetime", "updated_time", "freq")}
    return {h: {**head, "hub_height": height_name(h), "unit": obj["unit"],
                "data": [dict(zip(WIND_DATA.names, row, strict=True))
                         for row in zip(times, *(c[k] for c in columns), strict=True)]}
            for k, h in enumerate(heights)}


class EuWind:
    variables = ("wind_u", "wind_v")
    shortest_horizon_hours = 1  # any horizon: the objects hold the steps up to it

    def __init__(self, product_id: str, path: str):
        self.id = product_id
        self.path = path

    def heights(self, cfg: ProductConfig) -> list[float]:
        return sorted({h for p in cfg.points for h in point_heights(p)})

    def ensemble_heights(self, cfg: ProductConfig) -> list[float]:
        """Its quantiles at every height (`ensemble_archive`), and its wind farms' hub heights,
        where the members' power is made: the blend's column holds those too, and an
        ensemble gives a column whole or not at all (`ensemble.statistics`)."""
        return sorted({*self.heights(cfg), *(s.hub_height_m for s in cfg.sites if isinstance(s, WindSite))})

    def inputs(self) -> dict[str, frozenset[str]]:
        return {e.name: frozenset(self.variables) for e in WIND_DATA if e.ref in CF_NAMES}

    def expected_files(self, cfg: ProductConfig) -> list[str]:
        return [rel for freq in cfg.freqs for p in cfg.points
                for rel in (f"{self.id}/{freq}/{p.id}.json",
                            *(f"{self.id}/{freq}/{p.id}/{height_name(h)}.json" for h in p.hub_heights))
                ] + quantile_paths(self.id, cfg)

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext,
              files: Files | StagedFiles | None = None) -> ProductOutput:
        files = Files() if files is None else files
        basetime, updated = iso(ctx.basetime), iso(ctx.generated)
        own = [point_heights(p) for p in cfg.points]
        # The wind, and the ensembles' quantiles where the product has ensembles (`ensemble_archive`).
        quantiles = [v for v in ("t2m_q", "tp_q", "wspd_q") if v in series]
        for freq, step, ds in freq_series(series[[*self.variables, *quantiles]], cfg, ctx):  # noqa: B007 (step: after the loop)
            wind = _wind(ds)
            stamps = strings([iso(t) for t in ds.time.values])
            # Per height: its points (a hub height is often one point's alone), each one's
            # column in the texts, and the texts of every numeric element.
            columns: dict[float, tuple[dict[int, int], dict[str, Texts]]] = {}
            for k, h in enumerate(ds.height.values.tolist()):
                users = [j for j, heights in enumerate(own) if h in heights]
                texts = {e.name: numbers(wind[e.ref][:, users, k], e.decimals) for e in WIND_DATA.elements[1:]}
                columns[h] = ({j: i for i, j in enumerate(users)}, texts)
                # The static answers at the configured hub heights.
                hubs = [i for i, j in enumerate(users) if h in cfg.points[j].hub_heights]
                if hubs:
                    rows = Records({WIND_DATA.elements[0].name: stamps,
                                    **{n: Texts(t.table, t.index[hubs]) for n, t in texts.items()}})
                    for r, i in enumerate(hubs):
                        p = cfg.points[users[i]]
                        put_with_records(
                            files, f"{self.id}/{freq}/{p.id}/{height_name(h)}.json",
                            {"latitude": p.lat, "longitude": p.lon, "basetime": basetime,
                             "updated_time": updated, "freq": freq, "hub_height": height_name(h),
                             "unit": UNITS}, "data", rows, r)
            times = array(stamps, 0)
            for j, p in enumerate(cfg.points):
                at = [(columns[h][0][j], columns[h][1]) for h in own[j]]
                data = with_arrays(
                    {"latitude": p.lat, "longitude": p.lon, "basetime": basetime, "updated_time": updated,
                     "freq": freq, "unit": UNITS, "heights": own[j]},
                    **{WIND_DATA.elements[0].name: times},
                    **{e.name: b"[" + b",".join(array(texts[e.name], i) for i, texts in at) + b"]"
                       for e in WIND_DATA.elements[1:]})
                files.put(f"{self.id}/{freq}/{p.id}.json", data, b"null" in data)
        # The archive keeps the finest series (the last one yielded), and the quantile files its.
        archive = self._archive(ds, wind, cfg, ctx, step)
        put_quantiles(files, self.id, cfg, ctx, archive, step, point_heights)
        return ProductOutput(files=files, archive=archive)

    def index(self, cfg: ProductConfig, ctx: RunContext) -> bytes:
        return render_index(self.id, self.path, cfg, ctx,
                            lambda p: {"heights": point_heights(p), "time_zone": point_time_zone(p.lat, p.lon)},
                            height_range_m=list(HUB_HEIGHT_RANGE_M), ladder=list(LADDER))

    def _archive(self, ds, wind, cfg, ctx: RunContext, step) -> xr.Dataset:
        out = archive_frame(self.id, cfg, ctx, ds.time.values, step,
                            height=("height", ds.height.values.astype(np.float64)))
        for e in WIND_DATA:
            if e.ref not in CF_NAMES:
                continue
            # (time, point, height) -> (init_time, point, lead_time, height)
            if e.unit is None or e.valid is None:
                raise ValueError(f"{e.name}: an archived element needs a unit and a valid range")
            values = wind[e.ref].transpose(1, 0, 2)[None].astype(np.float32)
            out[e.name] = (("init_time", "point", "lead_time", "height"), values,
                           {"units": e.unit.replace("m/s", "m s-1"), "long_name": e.about,
                            "standard_name": CF_NAMES[e.ref], "valid_min": e.valid[0], "valid_max": e.valid[1]})
        out["height"].attrs.update(units="m", long_name="height above ground", positive="up")
        return ensemble_archive(out, ds, heights=True)


# The CF standard names of the archive's variables, by ref.
CF_NAMES = {"windspd": "wind_speed", "windir": "wind_from_direction", "u_windspd": "eastward_wind",
            "v_windspd": "northward_wind"}


def _wind(ds: xr.Dataset) -> dict[str, np.ndarray]:
    """The numeric elements of `contract.WIND_DATA` (time, point, height), by ref."""
    u = ds.wind_u.transpose("time", "point", "height").values.astype(np.float64)
    v = ds.wind_v.transpose("time", "point", "height").values.astype(np.float64)
    return {"windspd": physics.wind_speed(u, v),
            "windir": published_direction(u, v),
            "u_windspd": u, "v_windspd": v}
