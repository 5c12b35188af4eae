"""Global 5 km forecast (global/wx): 72 hourly entries and 14 local days, any time zone.

Hourly (srf) entries start at the run's basetime and describe the hour that starts at their
date; daily (mrf) entries are the local days of the zone in force, from the day that holds the
basetime (that first day aggregates its remaining hours). The zone in force is the request's
`tz`, or else the point's own zone (`timezonefinder`, offline data), published in index.json.

What depends on the zone is cheap; what is costly is not zone-dependent. So the build
publishes, per point:
- `global/<id>.json`: the wxdata element in the point's own zone, ready to serve (and to host
  statically);
- `global/hourly/<id>.json`: the hourly quantities in UTC at their published precision, and
  precipitation to 0.001 mm for the day totals (`STORED_DECIMALS`), and the ensembles'
  members' hourly precipitation to 0.001 mm (`members`: a day's `pop` is the share of members
  whose total in that zone's day reaches 1 mm), from which the server renders the element for
  any other zone with `render_zone` -- the same function the build uses, from the same
  rounded values, so both agree to the byte.
The series runs `horizon_hours` (at least 338 h: 14 local days from a basetime at local
midnight, one of them up to 26 hours long: `shortest_horizon_hours`).
"""

from __future__ import annotations

import base64
import functools
import json
import zlib
from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import numpy as np
import xarray as xr

from ..config import ProductConfig
from ..contract import GLOBAL_MRF, GLOBAL_SRF
from ..interp import aggregate
from .base import (
    Files,
    ProductOutput,
    RunContext,
    archive_frame,
    array,
    ensemble_archive,
    iso,
    numbers,
    put_quantiles,
    quantile_paths,
    render_index,
    with_arrays,
)
from .wx import (
    FINE_PREC,
    HOUR,
    HOURLY,
    HOURLY_DECIMALS,
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

SRF_HOURS = 72
MRF_DAYS = 14
LONGEST_DAY_HOURS = 26
"""The longest local day of any zone a request can name (`tz`): Antarctica/Troll's clocks move
from UTC+0 to UTC+2 in spring, so its autumn day back has 26 hours."""
# The hourly quantities every zone's element is built from: at their published precision, and
# precipitation to 0.001 mm (`wx.FINE_PREC`) for the day totals, so that a total is not the sum
# of 24 roundings to 0.1 mm (nor an hour's published value a rounding of a rounding).
STORED_DECIMALS = {**HOURLY_DECIMALS, FINE_PREC: 3}


@functools.cache
def _finder():
    from timezonefinder import TimezoneFinder

    return TimezoneFinder()


@functools.cache  # the build and the index ask for every point
def point_time_zone(lat: float, lon: float) -> str:
    """The IANA zone of a point (the ocean's nautical zone Etc/GMT+-N where no land zone is)."""
    name = _finder().timezone_at(lat=lat, lng=lon)
    if name is None:
        hours = round(lon / 15.0)
        name = "Etc/GMT" if hours == 0 else f"Etc/GMT{-hours:+d}"
    return name


def stored(hourly: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The hourly quantities rounded as stored (the base every zone's element is built from)."""
    hourly = {**hourly, FINE_PREC: hourly["prec"]}
    return {k: np.round(hourly[k], dec or 0) for k, dec in STORED_DECIMALS.items()}


# The members' hourly precipitation in an hourly file: thousandths of a mm as little-endian
# uint32, time-major (hour, member), zlib-compressed, base64; NO_MEMBER_VALUE where a member's
# ensemble does not reach the hour. Mostly zeros and gaps: a few kB a point for 82 members.
MEMBER_DECIMALS = 3
NO_MEMBER_VALUE = 0xFFFFFFFF


def stored_members(members: Members) -> Members:
    """The members' amounts rounded as stored (`pack_members`): every zone's day totals,
    the build's and the server's, are made from these."""
    return replace(members, amounts=np.round(members.amounts, MEMBER_DECIMALS))


def pack_members(amounts: np.ndarray) -> str:
    """One point's members' hourly amounts (hour, member; mm, NaN: none) as stored."""
    raw = np.where(np.isnan(amounts), NO_MEMBER_VALUE, np.rint(np.nan_to_num(amounts) * 10 ** MEMBER_DECIMALS))
    return base64.b64encode(zlib.compress(raw.astype("<u4").tobytes(), 6)).decode("ascii")


def unpack_members(text: str, hours: int, count: int) -> np.ndarray:
    """`pack_members` undone: (hour, member) in mm, NaN where no member value is."""
    raw = np.frombuffer(zlib.decompress(base64.b64decode(text, validate=True)), dtype="<u4")
    if raw.size != hours * count:
        raise ValueError(f"members: {raw.size} values for {hours} hours x {count} members")
    return np.where(raw == NO_MEMBER_VALUE, np.nan, raw / 10 ** MEMBER_DECIMALS).reshape(hours, count)


def render_zone(coords: list[tuple[float, float]], start: np.datetime64, hourly: dict[str, np.ndarray],
                zone: ZoneInfo, members: Members | None = None) -> list[bytes]:
    """wxdata elements ({lat, lon, srf, mrf}) in `zone` for points whose published hourly
    quantities are the columns of `hourly` (time, point), hour 0 starting at `start` (UTC).
    ``members``: their ensembles' members as stored (`stored_members`), for the daily pop
    (`daily_fields`)."""
    hours = len(hourly["wx"])
    local = local_times(start + np.arange(hours) * HOUR, zone)
    days, day_dates = local_days(local, MRF_DAYS)
    daily = daily_fields(hourly, days, day_shares(local, days), first_whole=whole_first_day(local),
                         members=members)
    srf_dates = [t.isoformat() for t in local[:SRF_HOURS]]
    return wx_elements(coords, srf_dates, hourly, GLOBAL_SRF, day_dates, daily, GLOBAL_MRF)


def read_hourly(data: bytes) -> tuple[np.datetime64, dict[str, np.ndarray], Members | None]:
    """A `global/hourly/<id>.json` file -> (start, hourly (time, 1) arrays, the members or None)
    for `render_zone`."""
    obj = json.loads(data)
    start = np.datetime64(obj["start"].removesuffix("+00:00"), "ns")
    hourly = {k: np.asarray(obj[k], dtype=np.float64)[:, None] for k in STORED_DECIMALS}
    if len({len(v) for v in hourly.values()}) != 1:
        raise ValueError("hourly arrays of different lengths")
    members = None
    if "members" in obj:
        m = obj["members"]
        ensembles = np.asarray(m["ensembles"], dtype=object)
        amounts = unpack_members(m["tp"], len(hourly["wx"]), len(ensembles))
        members = Members(amounts[:, :, None], ensembles, tuple(m["order"]))
    return start, hourly, members


class GlobalWx(WxProduct):
    # 14 local days in any zone from a basetime at its midnight, the longest day among them
    shortest_horizon_hours = (MRF_DAYS - 1) * 24 + LONGEST_DAY_HOURS

    def expected_files(self, cfg: ProductConfig) -> list[str]:
        return [f"{self.id}/{d}{p.id}.json" for p in cfg.points for d in ("", "hourly/")] + quantile_paths(self.id, cfg)

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext,
              files: Files | StagedFiles | None = None) -> ProductOutput:
        start = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
        ds = aggregate(series, start, HOUR, cfg.horizon_hours)
        lats = np.array([p.lat for p in cfg.points])
        lons = np.array([p.lon for p in cfg.points])
        hourly = stored(hourly_fields(ds, lats, lons))
        zones = [point_time_zone(p.lat, p.lon) for p in cfg.points]
        members = Members.of(ds, cfg.ensembles)
        members = None if members is None else stored_members(members)
        files = Files() if files is None else files
        by_zone = defaultdict(list)
        for j, zone in enumerate(zones):
            by_zone[zone].append(j)
        for zone, cols in by_zone.items():
            elements = render_zone([(cfg.points[j].lat, cfg.points[j].lon) for j in cols], start,
                                   {k: v[:, cols] for k, v in hourly.items()}, ZoneInfo(zone),
                                   None if members is None else replace(members, amounts=members.amounts[..., cols]))
            for j, element in zip(cols, elements, strict=True):
                files[f"{self.id}/{cfg.points[j].id}.json"] = element
        texts = {k: numbers(hourly[k], dec) for k, dec in STORED_DECIMALS.items()}
        for j, p in enumerate(cfg.points):
            head: dict = {"lat": p.lat, "lon": p.lon, "time_zone": zones[j], "start": iso(start), "step_seconds": 3600}
            if members is not None:
                head["members"] = {"order": list(members.order), "ensembles": members.ensembles.tolist(),
                                   "tp": pack_members(members.amounts[..., j])}
            files[f"{self.id}/hourly/{p.id}.json"] = with_arrays(head, **{k: array(t, j) for k, t in texts.items()})
        archive = self._archive(ds, hourly, zones, cfg, ctx)
        put_quantiles(files, self.id, cfg, ctx, archive, HOUR)
        return ProductOutput(files=files, archive=archive)

    def index(self, cfg: ProductConfig, ctx: RunContext) -> bytes:
        return render_index(self.id, self.path, cfg, ctx,
                            point_extra=lambda p: {"time_zone": point_time_zone(p.lat, p.lon)})

    def _archive(self, ds, hourly, zones, cfg, ctx: RunContext) -> xr.Dataset:
        out = archive_frame(self.id, cfg, ctx, ds.time.values, HOUR, time_zone=("point", np.array(zones, dtype=object)))
        out["time_zone"].attrs.update(long_name="the point's own IANA time zone (mrf days of the JSON)")
        for e in HOURLY:
            out[e.name] = (("init_time", "point", "lead_time"), hourly[e.ref].T[None].astype(np.float32),
                           archive_attrs(e))
        return ensemble_archive(out, ds)
