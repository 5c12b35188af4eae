"""Japan 1 km forecast (spec 4.5, ss1wx): 72 hourly entries with feel-like values, 10 days.

Hourly (srf) entries describe the hour that starts at their date, in Asia/Tokyo (+09:00):
prec is the precipitation of that hour (mm), the weather code that hour's weather. Daily (mrf)
entries are local days of Asia/Tokyo starting with the day that holds the run's basetime (that
first day aggregates its remaining hours); wx combines the day's hourly codes
(`codes.wx_daily`), maxtemp/mintemp are the extremes of the hourly temperatures, pop the highest
hourly precipitation probability of the day.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import xarray as xr

from .. import codes, physics
from ..config import ProductConfig
from .base import ProductOutput, RunContext, archive_frame, dumps, number, render_index
from ..interp import aggregate

TOKYO = ZoneInfo("Asia/Tokyo")
SRF_HOURS = 72
MRF_DAYS = 10
HOUR = np.timedelta64(1, "h")


def hourly_fields(ds: xr.Dataset, lats: np.ndarray, lons: np.ndarray) -> dict[str, np.ndarray]:
    """The srf quantities (time, point) from the hourly canonical series."""
    def get(name):
        return ds[name].transpose("time", "point").values.astype(np.float64)

    t2m, d2m = get("t2m"), np.minimum(get("d2m"), get("t2m"))
    u = ds.wind_u.sel(height=10.0).transpose("time", "point").values.astype(np.float64)
    v = ds.wind_v.sel(height=10.0).transpose("time", "point").values.astype(np.float64)
    speed = physics.wind_speed(u, v)
    prec = get("tp")  # kg m-2 over the hour = mm in that hour
    snow = prec * physics.snow_fraction(t2m - 273.15)
    mid = ds.time.values + HOUR / 2
    daylight = physics.cos_solar_zenith(lats, lons, mid) > 0
    temp = t2m - 273.15
    feeltmp = physics.apparent_temperature(t2m, d2m, speed, physics.body_absorbed_radiation(get("ssrd")))
    return {
        "wx": codes.wx_hourly(get("tcc"), prec, snow, temp, daylight, wind_ms=speed),
        "temp": temp, "prec": prec, "arpress": get("msl") / 100.0, "wndspd": speed,
        "wnddir": codes.compass16(speed, physics.wind_direction(u, v)),
        "rhum": np.round(100.0 * physics.relative_humidity(t2m, d2m)),
        "feelidx": codes.feelidx(feeltmp), "feeltmp": feeltmp, "pop": get("pop"),
    }


SRF_KEYS = {"wx": None, "temp": 1, "prec": 1, "arpress": 1, "wndspd": 1, "wnddir": None, "rhum": None,
            "feelidx": None, "feeltmp": 1}
MRF_KEYS = {"wx": None, "maxtemp": 1, "mintemp": 1, "pop": None}


class Japan:
    def __init__(self, product_id: str, path: str):
        self.id = product_id
        self.path = path

    def heights(self, cfg: ProductConfig) -> list[float]:
        return [10.0]

    def expected_files(self, cfg: ProductConfig) -> list[str]:
        return [f"{self.id}/{p.id}.json" for p in cfg.points]

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext) -> ProductOutput:
        start = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
        ds = aggregate(series, start, HOUR, cfg.horizon_hours)
        lats = np.array([p.lat for p in cfg.points])
        lons = np.array([p.lon for p in cfg.points])
        hourly = hourly_fields(ds, lats, lons)
        local = [datetime.fromisoformat(str(t.astype("datetime64[s]"))).replace(tzinfo=ZoneInfo("UTC"))
                 .astimezone(TOKYO) for t in ds.time.values]
        days = self._days(local)
        daily = {
            "wx": np.stack([codes.wx_daily(hourly["wx"][idx].T) for idx in days]),
            "maxtemp": np.stack([hourly["temp"][idx].max(axis=0) for idx in days]),
            "mintemp": np.stack([hourly["temp"][idx].min(axis=0) for idx in days]),
            "pop": np.stack([np.round(hourly["pop"][idx].max(axis=0)) for idx in days]),
        }
        day_dates = [local[idx[0]].replace(hour=0, minute=0, second=0).isoformat() for idx in days]
        srf_dates = [t.isoformat() for t in local[:SRF_HOURS]]
        files = {f"{self.id}/{p.id}.json": self._render(p, j, srf_dates, hourly, day_dates, daily)
                 for j, p in enumerate(cfg.points)}
        files[f"{self.id}/index.json"] = render_index(self.id, self.path, cfg, ctx, time_zone="Asia/Tokyo")
        return ProductOutput(files=files, archive=self._archive(ds, hourly, cfg, ctx))

    @staticmethod
    def _days(local: list[datetime]) -> list[np.ndarray]:
        """Hour indices of each of the MRF_DAYS local days, starting with basetime's day."""
        first = local[0].date()
        index = np.array([(t.date() - first).days for t in local])
        days = [np.flatnonzero(index == k) for k in range(MRF_DAYS)]
        if len(days[-1]) < 24:
            raise ValueError(f"the series ends before local day {MRF_DAYS} is complete")
        return days

    def _render(self, p, j, srf_dates, hourly, day_dates, daily) -> bytes:
        srf = [{"date": d, **{k: number(hourly[k][i, j], dec) for k, dec in SRF_KEYS.items()}}
               for i, d in enumerate(srf_dates)]
        mrf = [{"date": d, **{k: number(daily[k][i, j], dec) for k, dec in MRF_KEYS.items()}}
               for i, d in enumerate(day_dates)]
        return dumps({"lat": p.lat, "lon": p.lon, "srf": srf, "mrf": mrf})

    def _archive(self, ds, hourly, cfg, ctx: RunContext) -> xr.Dataset:
        out = archive_frame(self.id, cfg, ctx, ds.time.values, HOUR)
        meta = {  # name: (units, long_name, valid range)
            "wx": ("1", "weather code (design.md)", (100, 950)),
            "temp": ("degC", "temperature at 2 m", (-90, 65)),
            "prec": ("mm", "precipitation in the hour", (0, 300)),
            "arpress": ("hPa", "mean sea level pressure", (850, 1100)),
            "wndspd": ("m s-1", "wind speed at 10 m", (0, 150)),
            "wnddir": ("1", "wind direction, 16-point compass (16 = N), 0 calm", (0, 16)),
            "rhum": ("%", "relative humidity at 2 m", (0, 100)),
            "feelidx": ("1", "feel-like index 1-10", (1, 10)),
            "feeltmp": ("degC", "apparent temperature (Steadman, BoM form)", (-100, 80)),
            "pop": ("%", "probability of precipitation", (0, 100)),
        }
        for name, (units, long_name, valid) in meta.items():
            out[name] = (("init_time", "point", "lead_time"), hourly[name].T[None].astype(np.float32),
                         {"units": units, "long_name": long_name, "valid_min": valid[0], "valid_max": valid[1]})
        return out
