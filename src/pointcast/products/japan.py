"""Japan 1 km forecast (ss1wx): 72 hourly entries with feel-like values, 10 days.

Hourly (srf) entries describe the hour that starts at their date, in Asia/Tokyo (+09:00):
prec is the precipitation of that hour (mm), the weather code that hour's weather. Daily (mrf)
entries are local days of Asia/Tokyo starting with the day that holds the run's basetime (that
first day aggregates its remaining hours); wx combines the day's hourly codes
(`codes.wx_daily`), maxtemp/mintemp are the extremes of the hourly temperatures, pop the highest
hourly precipitation probability of the day.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import numpy as np
import xarray as xr

from .. import codes, physics
from ..config import ProductConfig
from ..contract import HOURLY_POP, JAPAN_MRF, JAPAN_SRF
from ..interp import aggregate
from .base import (
    Files,
    ProductOutput,
    RunContext,
    archive_frame,
    ensemble_archive,
    put_quantiles,
    quantile_paths,
    render_index,
)
from .wx import (
    HOUR,
    Members,
    WxProduct,
    archive_attrs,
    daily_fields,
    day_shares,
    hourly_fields,
    local_days,
    local_times,
    whole_first_day,
    wx_elements,
)

if TYPE_CHECKING:
    from ..publish import StagedFiles

TOKYO = ZoneInfo("Asia/Tokyo")
SRF_HOURS = 72
MRF_DAYS = 10


def feel_fields(ds: xr.Dataset, wndspd: np.ndarray) -> dict[str, np.ndarray]:
    """Apparent temperature (Steadman, BoM form with the solar term) and its feelidx band."""
    t2m = ds.t2m.transpose("time", "point").values.astype(np.float64)
    d2m = np.minimum(ds.d2m.transpose("time", "point").values.astype(np.float64), t2m)
    ssrd = ds.ssrd.transpose("time", "point").values.astype(np.float64)
    feeltmp = physics.apparent_temperature(t2m, d2m, wndspd, physics.body_absorbed_radiation(ssrd))
    return {"feelidx": codes.feelidx(feeltmp), "feeltmp": feeltmp}


# The hourly quantities of the archive: the srf elements and the hourly probability of precipitation.
HOURLY = (*(e for e in JAPAN_SRF if e.type != "date-time"), HOURLY_POP)


class Japan(WxProduct):
    # 10 local days from a basetime at Tokyo's midnight (MSM's 15 UTC run); no daylight saving there
    shortest_horizon_hours = MRF_DAYS * 24

    def expected_files(self, cfg: ProductConfig) -> list[str]:
        return [f"{self.id}/{p.id}.json" for p in cfg.points] + quantile_paths(self.id, cfg)

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext,
              files: Files | StagedFiles | None = None) -> ProductOutput:
        start = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
        ds = aggregate(series, start, HOUR, cfg.horizon_hours)
        lats = np.array([p.lat for p in cfg.points])
        lons = np.array([p.lon for p in cfg.points])
        hourly = hourly_fields(ds, lats, lons)
        hourly.update(feel_fields(ds, hourly["wndspd"]))
        local = local_times(ds.time.values, TOKYO)
        days, day_dates = local_days(local, MRF_DAYS)
        daily = daily_fields(hourly, days, day_shares(local, days), first_whole=whole_first_day(local),
                             members=Members.of(ds, cfg.ensembles))
        srf_dates = [t.isoformat() for t in local[:SRF_HOURS]]
        elements = wx_elements([(p.lat, p.lon) for p in cfg.points], srf_dates, hourly, JAPAN_SRF,
                               day_dates, daily, JAPAN_MRF)
        files = Files() if files is None else files
        for p, element in zip(cfg.points, elements, strict=True):
            files[f"{self.id}/{p.id}.json"] = element
        archive = self._archive(ds, hourly, cfg, ctx)
        put_quantiles(files, self.id, cfg, ctx, archive, HOUR)
        return ProductOutput(files=files, archive=archive)

    def index(self, cfg: ProductConfig, ctx: RunContext) -> bytes:
        return render_index(self.id, self.path, cfg, ctx, time_zone="Asia/Tokyo")

    def _archive(self, ds, hourly, cfg, ctx: RunContext) -> xr.Dataset:
        out = archive_frame(self.id, cfg, ctx, ds.time.values, HOUR)
        for e in HOURLY:
            out[e.name] = (("init_time", "point", "lead_time"), hourly[e.ref].T[None].astype(np.float32),
                           archive_attrs(e))
        return ensemble_archive(out, ds)
