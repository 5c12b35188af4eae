"""European short-range wind at hub height (spec 4.3, windpack).

For every point, the default ladder of heights and the point's own hub heights are
precomputed at 1H, 30min and 15min over the product's horizon. Wind at a height comes from the
extract stage's vertical profile (10 m wind, the source's height levels, ICON model levels and
pressure levels), then blending and resampling exactly like the common products, so that
windpack at 100 m equals `windspd_100m` of 4.2. The server answers any other height between
10 m and 300 m from the two precomputed heights around it (log-profile rule, docs/api.md).
"""

from __future__ import annotations

from collections.abc import MutableMapping

import numpy as np
import xarray as xr

from .. import physics
from ..config import ProductConfig
from ..contract import HUB_HEIGHT_RANGE_M, WIND_DATA, WINDPACK_LADDER, height_name
from .base import (Files, ProductOutput, Records, RunContext, archive_frame, freq_series, iso,
                   numbers, published_direction, put_with_records, render_index, strings)
from .global_wx import point_time_zone

LADDER = WINDPACK_LADDER
UNITS = WIND_DATA.units


def point_heights(point) -> list[float]:
    """The heights precomputed for a point: the ladder and its configured hub heights."""
    return sorted(set(LADDER) | set(point.hub_heights))


class EuWind:
    variables = ("wind_u", "wind_v")

    def __init__(self, product_id: str, path: str):
        self.id = product_id
        self.path = path

    def heights(self, cfg: ProductConfig) -> list[float]:
        return sorted({h for p in cfg.points for h in point_heights(p)})

    def expected_files(self, cfg: ProductConfig) -> list[str]:
        return [f"{self.id}/{freq}/{p.id}/{height_name(h)}.json"
                for freq in cfg.freqs for p in cfg.points for h in point_heights(p)]

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext,
              files: MutableMapping[str, bytes] | None = None) -> ProductOutput:
        files = Files() if files is None else files
        basetime, updated = iso(ctx.basetime), iso(ctx.generated)
        heights = [set(point_heights(p)) for p in cfg.points]
        for freq, step, ds in freq_series(series[list(self.variables)], cfg, ctx):
            wind = _wind(ds)
            stamps = strings([iso(t) for t in ds.time.values])
            for k, h in enumerate(ds.height.values):
                # Only the points with this height (a hub height is often one point's alone).
                users = [j for j, own in enumerate(heights) if h in own]
                rows = Records({e.name: stamps if e.type == "date-time" else
                                numbers(wind[e.ref][:, users, k], e.decimals) for e in WIND_DATA})
                for i, p in enumerate(cfg.points[j] for j in users):
                    put_with_records(
                        files, f"{self.id}/{freq}/{p.id}/{height_name(h)}.json",
                        {"latitude": p.lat, "longitude": p.lon, "basetime": basetime,
                         "updated_time": updated, "freq": freq, "hub_height": height_name(h),
                         "unit": UNITS}, "data", rows, i)
        # The archive keeps the finest series (the last one yielded).
        return ProductOutput(files=files, archive=self._archive(ds, wind, cfg, ctx, step))

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
            values = wind[e.ref].transpose(1, 0, 2)[None].astype(np.float32)
            out[e.name] = (("init_time", "point", "lead_time", "height"), values,
                           {"units": e.unit.replace("m/s", "m s-1"), "long_name": e.about,
                            "standard_name": CF_NAMES[e.ref], "valid_min": e.valid[0], "valid_max": e.valid[1]})
        out["height"].attrs.update(units="m", long_name="height above ground", positive="up")
        return out


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
