"""The compact weather summary of the global (global/wx) and Japan (ss1wx) products.

Both publish hourly srf entries and daily mrf entries with the units, codes and missing values
of docs/api.md. This module holds what they share: the hourly quantities from the
blended canonical series, the local days of a time zone, and the daily aggregates of a day's
hours. An hourly entry describes the hour that starts at its date; a local day's codes and
extremes are those of the hours that start on that day's date in the zone (with a 30 or 45
minute offset they start at half or quarter past the local hour), its total and means those
of the day from midnight to midnight, an hour cut by a midnight counted by its share.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import xarray as xr

from .. import codes, contract, ensemble, physics
from ..config import ProductConfig
from .base import Records, numbers, strings, with_arrays

HOUR = np.timedelta64(1, "h")

# The hourly precipitation a day's total is summed from, where the published one is rounded
# (global: its hourly file keeps both); else the day's total is summed from "prec".
FINE_PREC = "prec_fine"

# The hourly quantities of the archive: the srf elements of the global product and the hourly
# probability of precipitation its daily pop is made from.
HOURLY: tuple[contract.Element, ...] = (*(e for e in contract.GLOBAL_SRF if e.type != "date-time"),
                                        contract.HOURLY_POP)
HOURLY_DECIMALS = {e.ref: e.decimals for e in HOURLY}


def archive_attrs(e: contract.Element) -> dict:
    """CF attributes of an element's archive variable."""
    if e.valid is None:
        raise ValueError(f"{e.name}: an archived element needs a valid range")
    return {"units": e.unit, "long_name": e.about, "valid_min": e.valid[0], "valid_max": e.valid[1]}


class WxProduct:
    """A product of wxdata elements (srf and mrf entries), from the 10 m wind only."""

    # tp_members: each ensemble member's hourly precipitation, for the probability of a day
    variables = ("t2m", "d2m", "wind_u", "wind_v", "tp", "sf", "tcc", "msl", "ssrd", "pop", "tp_members")

    def __init__(self, product_id: str, path: str):
        self.id = product_id
        self.path = path

    def heights(self, cfg: ProductConfig) -> list[float]:
        return [10.0]

    def ensemble_heights(self, cfg: ProductConfig) -> list[float]:
        return [10.0]

    def inputs(self) -> dict[str, frozenset[str]]:
        return HOURLY_INPUTS


_WIND = frozenset({"wind_u", "wind_v"})
_FEEL = frozenset({"t2m", "d2m", "ssrd"}) | _WIND
HOURLY_INPUTS: dict[str, frozenset[str]] = {
    "wx": frozenset({"tcc", "tp", "sf", "t2m"}) | _WIND, "temp": frozenset({"t2m"}), "prec": frozenset({"tp"}),
    "arpress": frozenset({"msl"}), "wndspd": _WIND, "wnddir": _WIND, "rhum": frozenset({"t2m", "d2m"}),
    "solrad": frozenset({"ssrd"}), "pop": frozenset({"pop"}), "feeltmp": _FEEL, "feelidx": _FEEL,
}
"""The canonical variables of each archived hourly element, by name (`hourly_fields`,
`japan.feel_fields`)."""


def hourly_fields(ds: xr.Dataset, lats: np.ndarray, lons: np.ndarray) -> dict[str, np.ndarray]:
    """The srf quantities (time, point) from the hourly canonical series (interval values
    belong to the hour that starts at their time)."""
    def get(name):
        return ds[name].transpose("time", "point").values.astype(np.float64)

    t2m, d2m = get("t2m"), np.minimum(get("d2m"), get("t2m"))
    u = ds.wind_u.sel(height=10.0).transpose("time", "point").values.astype(np.float64)
    v = ds.wind_v.sel(height=10.0).transpose("time", "point").values.astype(np.float64)
    speed = physics.wind_speed(u, v)
    prec = get("tp")  # kg m-2 over the hour = mm in that hour
    temp = t2m - 273.15
    snow = np.minimum(get("sf"), prec)  # the model's snowfall, or its estimate (interp)
    # Day or night by the sun at the middle of the hour (in minutes: numpy divides a
    # timedelta64 of hours in whole hours).
    daylight = physics.cos_solar_zenith(lats, lons, ds.time.values + np.timedelta64(30, "m")) > 0
    return {
        "wx": codes.wx_hourly(get("tcc"), prec, snow, temp, daylight, wind_ms=speed),
        "temp": temp, "prec": prec, "arpress": get("msl") / 100.0, "wndspd": speed,
        "wnddir": codes.compass16(speed, physics.wind_direction(u, v)),
        "rhum": np.round(100.0 * physics.relative_humidity(t2m, d2m)),
        "solrad": get("ssrd"), "pop": np.round(get("pop")),
    }


def local_times(times: np.ndarray, zone: ZoneInfo) -> list[datetime]:
    """UTC datetime64 values as aware datetimes in `zone` (its offset in force at each)."""
    seconds = times.astype("datetime64[s]").astype(np.int64).tolist()
    return [datetime.fromtimestamp(s, UTC).astimezone(zone) for s in seconds]


def local_days(local: list[datetime], ndays: int) -> tuple[list[np.ndarray], list[str]]:
    """Hour indices of the first `ndays` local days, from the day holding the first hour, and
    each day's date (local midnight with the offset in force then). ValueError when the hours
    end before the last day is complete: its last hour must end at the next local midnight. A
    run starting at local midnight (JMA MSM's 15 UTC run in Japan) ends exactly there."""
    first = local[0].date()
    index = np.array([(t.date() - first).days for t in local])
    days = [np.flatnonzero(index == k) for k in range(ndays)]
    zone = local[0].tzinfo
    end = datetime.combine(first + timedelta(days=ndays), time(0), tzinfo=zone)
    # As instants: aware datetimes of one zone compare by their wall clocks.
    if not len(days[-1]) or (local[days[-1][-1]].astimezone(UTC) + timedelta(hours=1)
                             < end.astimezone(UTC)):
        raise ValueError(f"the series ends before local day {ndays} is complete")
    dates = [datetime.combine(local[idx[0]].date(), time(0), tzinfo=zone).isoformat() for idx in days]
    return days, dates


# The mrf quantities that describe a whole day: a first day the forecast starts after its
# local midnight shows the API's missing value for them, not the value of its last hours
# (a "maximum" of the three hours before midnight is no day's maximum).
WHOLE_DAY = ("maxtemp", "mintemp", "prec", "rhum", "solrad")


def whole_first_day(local: list[datetime]) -> bool:
    """Whether the series covers the whole first local day: it starts at its midnight (a
    start at 00:30 or 00:45 in a zone off the hour misses the day's first minutes)."""
    return (local[0].hour, local[0].minute) == (0, 0)


def day_shares(local: list[datetime], days: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each local day, the hours that overlap it from its midnight to the next and the
    share of each inside it: 1 for an hour within the day, the minutes before (after) the
    midnight for an hour a midnight cuts (zones 30 or 45 minutes off the hour). An hour's
    amount is even within it, as the 15-minute series spreads each native interval (interp)."""
    zone = local[0].tzinfo
    starts = np.array([t.timestamp() for t in local])
    out = []
    for idx in days:
        date = local[idx[0]].date()
        day0 = datetime.combine(date, time(0), tzinfo=zone).timestamp()
        day1 = datetime.combine(date + timedelta(days=1), time(0), tzinfo=zone).timestamp()
        share = np.clip(np.minimum(starts + 3600.0, day1) - np.maximum(starts, day0), 0.0, 3600.0) / 3600.0
        inside = np.flatnonzero(share > 0)
        out.append((inside, share[inside]))
    return out


@dataclass(frozen=True)
class Members:
    """An ensemble's members' hourly precipitation (time, member, point: the series'
    ``tp_members``), each member's ensemble and the product's ensembles in priority order."""

    amounts: np.ndarray
    ensembles: np.ndarray
    order: tuple[str, ...]

    @classmethod
    def of(cls, ds: xr.Dataset, order: tuple[str, ...]) -> Members | None:
        if "tp_members" not in ds:
            return None
        tp = ds["tp_members"].transpose("time", "member", "point")
        return cls(tp.values.astype(np.float64), tp["ensemble"].values, order)


def daily_fields(hourly: dict[str, np.ndarray], days: list[np.ndarray],
                 shares: list[tuple[np.ndarray, np.ndarray]], *, first_whole: bool,
                 members: Members | None = None) -> dict[str, np.ndarray]:
    """The mrf aggregates (day, point) of each day: wx combined (codes.wx_daily), extremes of
    temperature over the hours that start on the day (``days``); total precipitation and
    means of humidity and radiation over the day itself, each hour weighted by its share of
    it (``day_shares``). ``pop``: the probability of the day from the ensembles' members'
    day totals (``members``, `ensemble.day_probability`), else (no ensemble covers the whole
    day) the highest hourly probability of the day. Unless ``first_whole``, the first day's
    `WHOLE_DAY` quantities are missing (-9999): its wx and pop are those of its remaining
    hours, what is still to come that day."""
    def each(name, reduce):
        return np.stack([reduce(hourly[name][idx]) for idx in days])

    def total(name):
        return np.stack([_hours_total(hourly[name][idx] * w[:, None]) for idx, w in shares])

    length = np.array([w.sum() for _, w in shares])[:, None]
    out = {
        "wx": np.stack([codes.wx_daily(hourly["wx"][idx].T) for idx in days]),
        "maxtemp": each("temp", lambda a: a.max(axis=0)),
        "mintemp": each("temp", lambda a: a.min(axis=0)),
        "prec": total(FINE_PREC if FINE_PREC in hourly else "prec"),
        "pop": each("pop", lambda a: a.max(axis=0)),
        "rhum": np.round(total("rhum") / length),
        "solrad": total("solrad") / length,
    }
    if members is not None:
        day = np.stack([ensemble.day_probability(members.amounts[idx], members.ensembles, members.order, w)
                        for idx, w in shares])
        out["pop"] = np.where(np.isnan(day), out["pop"], np.round(day))
    if not first_whole:
        for name in WHOLE_DAY:
            out[name][0] = codes.MISSING_NUMBER
    return out


def _hours_total(hours: np.ndarray) -> np.ndarray:
    """The sum over the hours (axis 0), added in order. numpy sums one column pairwise but
    several row by row, so a point's daily value would depend on how many points share its
    time zone (the build renders them together, the server one at a time)."""
    return hours.cumsum(axis=0)[-1]


def wx_elements(coords: list[tuple[float, float]], srf_dates: list[str], hourly: dict[str, np.ndarray],
                srf_table: contract.Table, day_dates: list[str], daily: dict[str, np.ndarray],
                mrf_table: contract.Table) -> list[bytes]:
    """The wxdata elements ``{lat, lon, srf, mrf}`` of points (the columns of ``hourly`` and
    ``daily``, by ref): the first hours as srf entries, the days as mrf entries, with the
    elements of their contract tables at their published precision."""
    hours = len(srf_dates)

    def records(table, dates, values):
        return Records({e.name: strings(dates) if e.type == "date-time"
                        else numbers(values[e.ref], e.decimals, e.missing)
                        for e in table})

    srf = records(srf_table, srf_dates, {k: v[:hours] for k, v in hourly.items()})
    mrf = records(mrf_table, day_dates, daily)
    return [with_arrays({"lat": lat, "lon": lon}, srf=srf.at(j), mrf=mrf.at(j))
            for j, (lat, lon) in enumerate(coords)]
