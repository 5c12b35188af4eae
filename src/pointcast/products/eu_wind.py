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
from .base import (Files, ProductOutput, Records, RunContext, archive_frame, freq_series, iso,
                   numbers, published_direction, put_with_records, render_index, strings)
from .global_wx import point_time_zone

LADDER = (10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0, 160.0, 180.0, 200.0, 250.0, 300.0)
UNITS = {"datetime": "UTC", "windspd": "m/s", "windir": "degree", "u_windspd": "m/s", "v_windspd": "m/s"}
DECIMALS = {"windspd": 2, "windir": 1, "u_windspd": 2, "v_windspd": 2}


def point_heights(point) -> list[float]:
    """The heights precomputed for a point: the ladder and its configured hub heights."""
    return sorted(set(LADDER) | set(point.hub_heights))


def height_name(h: float) -> str:
    return f"{h:g}m"


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
                rows = Records({"datetime": stamps, **{name: numbers(arr[:, users, k], DECIMALS[name])
                                                       for name, arr in wind.items()}})
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
                            height_range_m=[10, 300], ladder=list(LADDER))

    def _archive(self, ds, wind, cfg, ctx: RunContext, step) -> xr.Dataset:
        out = archive_frame(self.id, cfg, ctx, ds.time.values, step,
                            height=("height", ds.height.values.astype(np.float64)))
        meta = {
            "windspd": ("m s-1", "wind speed", "wind_speed", (0.0, 150.0)),
            "windir": ("degree", "direction the wind blows from, clockwise from north",
                       "wind_from_direction", (0.0, 360.0)),
            "u_windspd": ("m s-1", "eastward wind", "eastward_wind", (-150.0, 150.0)),
            "v_windspd": ("m s-1", "northward wind", "northward_wind", (-150.0, 150.0)),
        }
        for name, (units, long_name, standard, valid) in meta.items():
            # (time, point, height) -> (init_time, point, lead_time, height)
            values = wind[name].transpose(1, 0, 2)[None].astype(np.float32)
            out[name] = (("init_time", "point", "lead_time", "height"), values,
                         {"units": units, "long_name": long_name, "standard_name": standard,
                          "valid_min": valid[0], "valid_max": valid[1]})
        out["height"].attrs.update(units="m", long_name="height above ground", positive="up")
        return out


def _wind(ds: xr.Dataset) -> dict[str, np.ndarray]:
    u = ds.wind_u.transpose("time", "point", "height").values.astype(np.float64)
    v = ds.wind_v.transpose("time", "point", "height").values.astype(np.float64)
    return {"windspd": physics.wind_speed(u, v),
            "windir": published_direction(u, v),
            "u_windspd": u, "v_windspd": v}
