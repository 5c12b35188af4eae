"""The truth test: the shipped ``config/live.toml``, with nothing changed but
each source's ``mirrors``, run against a loopback replica of the real upstream trees
(``tests/support/replica.py``: ECMWF open data, NOAA GFS, DWD's v1 tree, JMA MSM as RISH serves it,
and the ensembles ENS, GEFS, ICON-EU-EPS)
filled with a known atmosphere; every element of the five operations is compared with the
exact answer at the product cell centres (``grids.grid_for``) and the points' elevations.

Tolerances: temperature 0.3 K; wind 0.3 m/s and 3 deg; pressure 0.5 hPa; humidity
3 %; cloud cover 5 %; precipitation 0.05 mm per native interval of the model; radiation 2 W/m2
on the mean over the native interval. Interval elements are compared over blocks that hold
whole native intervals of every model that can supply that lead (``native_block``); daily sums
with 0.05 mm per native interval the day holds. Codes (weather_type, wx, wnddir, feelidx) are
compared where no input moved within its tolerance changes them, by the rules of docs/method.md
and docs/api.md ("Code tables"); day and night by the sun at the middle of the hour.

The ensembles (ENS, GEFS, ICON-EU-EPS in their real trees, every member the atmosphere with a
known perturbation, ``replica.perturbation``): every published hourly probability (eu
``precipitation_proba``, global's and japan's archived hourly ``pop``) is the exact share of
the covering ensemble's members with 0.1 mm in the clock hour, every daily ``pop`` the share
whose day reaches 1 mm, within one member's weight (a member at the threshold may fall either
side of it through the packing) plus the rounding; the archives' quantiles of temperature,
wind speed and hourly precipitation are the truth offset or scaled by numpy's linear
quantiles of the perturbations, within the tolerances above; the manifest names each product's
ensembles, their members, and the seams of ``probability_from`` at each ensemble's last step.

Not compared, and why: ``wx`` of the daily (mrf) entries (the day's "dominant weathers" are a
ranking of the hourly codes, not a function of the atmosphere); the gust of ICON-EU's 3-hourly
steps (78-120 h: DWD's VMAX_10M covers the last hour of the step only, so the hours before it
are unknown to any decoder). The atmosphere's states change slowly in time (linear, so that
PCHIP is exact), so a time shift of a state is seen only through interval elements and codes.

``test_decode_reads_the_replica_as_the_atmosphere`` is the same truth one stage earlier: each
model's decode of its replica files against the atmosphere at the model's own points.
"""

from __future__ import annotations

import functools
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import replica
from conftest import ROOT, _made_once
from mirror import Mirror
from replica import Atmosphere, relative_humidity

UTC = UTC
INIT = datetime(2026, 11, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 20, 2, 30, tzinfo=UTC)
# Each source of config/live.toml -> its tree in the replica (the ensembles beside their centres' models).
PREFIXES = {"ecmwf": "ecmwf", "noaa": "noaa", "dwd": "dwd", "jma": "jma",
            "ecmwf-ens": "ecmwf", "noaa-gefs": "noaa", "dwd-eps": "dwd"}
CYCLE_TIMEOUT_S = 300  # a cycle still waiting for files (DWD's 404s) by then fails the test

TOL = {"temp": 0.3, "wind": 0.3, "dir": 3.0, "hpa": 0.5, "rh": 3.0, "cloud": 5.0,
       "prec": 0.05, "rad": 2.0, "vis": 50.0, "density": 0.005, "pop": 1.0, "feel": 0.5}

atm = Atmosphere(INIT)


# ------------------------------------------------------------------------------------------
# The exact answers
# ------------------------------------------------------------------------------------------


def hours(when: datetime) -> float:
    return (when - INIT) / timedelta(hours=1)


EPSILON = 0.6219569  # MetPy's molecular weight ratio of water vapour to dry air


@functools.cache
def truth(lat: float, lon: float, elevation: float) -> Truth:
    return Truth(lat, lon, elevation)


class Truth:
    """The atmosphere at one product cell centre and a point's elevation."""

    def __init__(self, lat: float, lon: float, elevation: float):
        self.lat, self.lon, self.z = lat, lon, elevation

    @functools.cached_property
    def q(self) -> np.ndarray:
        return atm.ssrd_quarters(np.array(self.lat), np.array(self.lon), 400.0)

    def t(self, t, above=2.0):
        return float(atm.temperature(self.lat, self.lon, t, self.z + above))

    def td(self, t):
        return self.t(t) - float(atm.depression(self.lat, self.lon))

    def p(self, t, above=0.0):
        return float(atm.pressure(self.lat, self.lon, t, self.z + above))

    def msl(self, t):
        return float(atm.p_sea(self.lat, self.lon, t))

    def rh(self, t):
        return float(relative_humidity(self.t(t), self.td(t)))

    def wind(self, t, h=10.0):
        f = float(atm.profile(h))
        return (float(atm.u10(self.lat, self.lon, t)) * f, float(atm.v10(self.lat, self.lon, t)) * f)

    def prec(self, a, b):
        return float(atm.precip(self.lat, self.lon, a, b))

    def ssrd(self, a, b):
        return float(atm.ssrd_mean(self.q, a, b))

    def gust(self, a, b):
        return float(atm.gust_max(np.array(self.lat), np.array(self.lon), a, b))

    def tcc(self, t):
        return float(atm.tcc(self.lat, self.lon, t))

    def density(self, t):
        """Moist air density at the surface, as MetPy's ``density`` (checked in
        ``test_density_formula_is_metpys``)."""
        return moist_density(self.p(t), self.t(t), self.td(t))


def moist_density(p, t, td):
    c = td - 273.15
    e = 611.2 * math.exp(17.67 * c / (c + 243.5))  # Bolton (1980), MetPy's saturation_vapor_pressure
    w = EPSILON * e / (p - e)
    return p / (287.04749 * t * (1 + w / EPSILON) / (1 + w))


def direction(u: float, v: float) -> float:
    return math.degrees(math.atan2(-u, -v)) % 360.0


def angle_diff(a: float, b: float) -> float:
    return abs((a - b + 180.0) % 360.0 - 180.0)


def native_block(lead_h: float, product: str = "eu") -> float:
    """Hours of a block holding whole native intervals of every model that can supply this
    lead in ``product``: hourly ICON and MSM to 78 h (GFS to 120 h in the global product),
    then IFS 3-hourly to 144 h and 6-hourly after."""
    return 1.0 if lead_h < (120 if product == "global" else 78) else 3.0 if lead_h < 144 else 6.0


def stable(fn, *ranges) -> object | None:
    """``fn``'s value where every corner of ``ranges`` (value, tolerance) gives the same;
    None where an input within its tolerance could change it."""
    import itertools

    values = {fn(*c) for c in itertools.product(*[(v - e, v, v + e) for v, e in ranges])}
    return values.pop() if len(values) == 1 else None


def weather_type(cloud, prec, snow_share, t2m_c, vis, cape):
    """docs/method.md, "Weather type", for this atmosphere's inputs."""
    if prec < 0.1:
        if vis < 1000:
            return "Fog"
        return ("Clear sky" if cloud <= 12.5 else "Mainly clear" if cloud <= 37.5
                else "Partly cloudy" if cloud <= 75 else "Overcast")
    if cape >= 1000 and prec >= 1:
        return "Thunderstorm"
    if snow_share >= 0.8:
        return "Snow showers" if cape >= 500 else "Heavy snow" if prec * snow_share >= 2.5 else "Snow"
    if snow_share >= 0.2:
        return "Sleet"
    light, overcast = prec < 0.5, cloud > 75
    if t2m_c <= 0:
        return "Freezing drizzle" if light and overcast else "Freezing rain"
    if cape >= 500:
        return "Rain showers"
    if light and overcast:
        return "Drizzle"
    return "Heavy rain" if prec >= 4 else "Rain"


def snow_share_from_t(t_c: float) -> float:
    return min(max((2.5 - t_c) / 2.0, 0.0), 1.0)


def wx_hourly(cloud, prec, t_c, day, wind):
    """docs/method.md and docs/api.md ("Code tables"): the srf code of one hour."""
    if prec >= 0.1:
        f = snow_share_from_t(t_c)
        if f >= 0.8:
            return 950 if prec * f >= 2.5 or wind >= 15 else 400
        if f >= 0.2:
            return 430
        return 850 if prec >= 10 or wind >= 15 else 300 if prec >= 1 else 650
    if t_c >= 35:
        return 550
    if cloud < 85:
        return 100 if day else 500
    return 200


def compass16(speed, deg):
    if speed < 0.3:
        return 0
    s = int(((deg % 360.0) + 11.25) // 22.5) % 16
    return 16 if s == 0 else s


def feelidx(at_c):
    bounds = (-10.0, -5.0, 5.0, 15.0, 25.0, 28.0, 32.0, 36.0, 40.0)
    return 1 + sum(at_c >= b for b in bounds)


def daylight(lat, lon, mid_h):
    return float(atm._cos_zenith(np.array(lat), np.array(lon), mid_h))


# ------------------------------------------------------------------------------------------
# The ensembles' exact answers: member k is the atmosphere with ``replica.perturbation(k)``
# (a temperature offset, a wind factor, a precipitation factor, the same everywhere), and
# every stage from the members' messages to a point's hourly series is linear in the values,
# so a member's value at a point is the truth's offset or scaled.
# ------------------------------------------------------------------------------------------

# Member numbers: ENS's control (the IFS's oper-fc) and 50 perturbed; GEFS's gec00 and 30;
# ICON-EU-EPS's 40, no control.
MEMBERS = {"ens": range(0, replica.ENS_MEMBERS), "gefs": range(0, replica.GEFS_MEMBERS),
           "icon-eu-eps": range(1, replica.EPS_MEMBERS + 1)}
# The replica's last step of each (hours after INIT), as upstream: ENS to 360 h, GEFS to 240 h,
# ICON-EU-EPS to 120 h.
LAST_STEP = {"ens": max(replica.IFS_STEPS), "gefs": max(replica.GEFS_STEPS),
             "icon-eu-eps": max(replica.EPS_STEPS)}
# The ensembles with the wind aloft (ENS's 100 m), which alone give the windpack's column.
WIND_ALOFT = ("ens",)
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
HOURLY_MM, DAILY_MM = 0.1, 1.0  # at least this much in the hour, in the day, counts as wet


def factors(ensemble: str, which: int) -> np.ndarray:
    """The members' temperature offsets (0), wind factors (1) or precipitation factors (2)."""
    return np.array([replica.perturbation(k)[which] for k in MEMBERS[ensemble]])


@functools.cache
def member_quantiles(ensemble: str, which: int) -> np.ndarray:
    return np.quantile(factors(ensemble, which), QUANTILES)  # linear (Hyndman and Fan type 7)


def covering(ensembles: tuple[str, ...], t: float, hourly: bool = False) -> str | None:
    """The first of ``ensembles`` with every member at ``t`` (hours), or over the clock hour
    holding ``t`` for an hourly amount (``hourly``); None where none has."""
    end = math.floor(t) + 1.0 if hourly else t
    return next((e for e in ensembles if end <= LAST_STEP[e] + 1e-9), None)


def at_seam(ensembles: tuple[str, ...], t: float) -> bool:
    """Whether ``t`` is the last step of one of ``ensembles`` with another after it: there
    both have every member, and either may give an instant's quantiles (not compared)."""
    return any(abs(t - LAST_STEP[e]) < 1e-9 for e in ensembles[:-1])


def member_share(ensemble: str, amount: float, threshold: float) -> tuple[float, float]:
    """Per cent of the members whose ``amount`` (the truth's) reaches ``threshold``, and the
    tolerance of a published one: one member's weight (a member at the threshold may fall
    either side of it through the 16-bit packing) plus the rounding to whole per cent."""
    f = factors(ensemble, 2)
    return 100.0 * float(np.mean(f * amount >= threshold - 1e-4)), 100.0 / len(f) + 0.5


def hourly_pop(ensembles: tuple[str, ...], tr: Truth, t: float) -> tuple[float, float]:
    """The hourly probability at ``t``: the share of the covering ensemble's members with
    0.1 mm in the clock hour, or (none covers) the neighbourhood probability: every cell of
    the replica is wet in a wet window."""
    e = covering(ensembles, t, hourly=True)
    if e is None:
        return 100.0 * float(atm.wet(t)), TOL["pop"]
    hour = math.floor(t)
    return member_share(e, tr.prec(hour, hour + 1), HOURLY_MM)


# ------------------------------------------------------------------------------------------
# Running the shipped configuration against the replica
# ------------------------------------------------------------------------------------------


def live_config(dest: Path, mirror: Mirror) -> Path:
    """config/live.toml with each source's ``mirrors`` pointed at the replica, and nothing
    else changed (its points files beside it, as in the repository)."""
    (dest / "points").mkdir(parents=True)
    for f in (ROOT / "config" / "points").glob("*.csv"):
        shutil.copy(f, dest / "points" / f.name)
    out = []
    for line in (ROOT / "config" / "live.toml").read_text().splitlines():
        out.append(line)
        name = line.strip().removeprefix("[sources.").removesuffix("]")
        if line.startswith("[sources.") and name in PREFIXES:
            out.append(f'mirrors = ["{mirror.url(PREFIXES[name])}"]')
    path = dest / "live.toml"
    path.write_text("\n".join(out) + "\n")
    return path


DRIVER = """
import sys
from datetime import datetime
from pointcast.flows.cycle import cycle
state = cycle(sys.argv[1], now=datetime.fromisoformat(sys.argv[2]), return_state=True)
print("cycle state:", state.type.value, state.message, flush=True)
sys.exit(0 if state.is_completed() else 1)
"""


def run_cycle(config: Path, home: Path) -> subprocess.CompletedProcess | str:
    """A real Prefect run of one cycle in its own process (so that a cycle stuck waiting can
    be stopped): the completed process, or the tail of its output when it timed out."""
    from prefect.settings import PREFECT_API_URL

    # The session's Prefect server (conftest's harness), not an ephemeral one per process.
    env = dict(os.environ, PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_API_URL=PREFECT_API_URL.value())
    log = home / "cycle.log"
    home.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(config), NOW.isoformat()],
                                cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(CYCLE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return f"timed out after {CYCLE_TIMEOUT_S} s:\n" + log.read_text()[-6000:]
    return subprocess.CompletedProcess(proc.args, proc.returncode, log.read_text(), "")


# ------------------------------------------------------------------------------------------
# Comparing
# ------------------------------------------------------------------------------------------


class Report:
    """Mismatches by (operation, element): the number of values compared, of values off,
    the largest error and an example."""

    def __init__(self):
        self.n = defaultdict(int)
        self.bad: dict[tuple[str, str], list] = defaultdict(list)

    def check(self, op, element, got, want, tol, where):
        if want is None:  # undecidable within the tolerances: not compared
            return
        self.n[op, element] += 1
        if got is None or (isinstance(got, (int, float)) and got == -9999):
            self.bad[op, element].append((math.inf, where, got, want))
            return
        if isinstance(want, str) or tol is None:
            if got != want:
                self.bad[op, element].append((math.inf, where, got, want))
            return
        err = angle_diff(got, want) if element.startswith(("windir", "wnddir_deg")) else abs(got - want)
        if not err <= tol + 1e-6:
            self.bad[op, element].append((err, where, got, round(want, 3)))

    def check_many(self, op, element, got, want, tol, wheres):
        """``check`` of arrays (``want`` NaN: no value is published there, NaN wanted)."""
        got, want = np.asarray(got, float), np.asarray(want, float)
        self.n[op, element] += got.size
        off = ~(np.abs(got - want) <= tol + 1e-6) & ~(np.isnan(got) & np.isnan(want))
        for i in zip(*np.nonzero(off), strict=True):
            self.bad[op, element].append((abs(got[i] - want[i]), wheres(i), round(float(got[i]), 3),
                                          round(float(want[i]), 3)))

    def summary(self) -> str:
        lines = []
        for key in sorted(self.bad):
            rows = self.bad[key]
            worst = max(rows, key=lambda r: r[0])
            lines.append(f"{key[0]} {key[1]}: {len(rows)}/{self.n[key]} off, worst {worst[0]:.3g} "
                         f"at {worst[1]} (got {worst[2]}, want {worst[3]}); first: "
                         + "; ".join(f"{w} got {g} want {x}" for _, w, g, x in rows[:3]))
        return "\n".join(lines)


def points(name: str) -> list[dict]:
    rows = []
    for line in (ROOT / "config" / "points" / name).read_text().splitlines()[1:]:
        if not line.strip() or line.startswith("#"):
            continue
        pid, _, lat, lon, elev, hubs = (line.split(",") + [""])[:6]
        rows.append({"id": pid, "lat": float(lat), "lon": float(lon), "elev": float(elev or 0),
                     "hubs": [float(h) for h in hubs.split(";") if h]})
    return rows


def centre(product: str, p: dict) -> tuple[float, float]:
    from pointcast.grids import grid_for

    grid = grid_for(product)
    return grid.cell_centre(grid.cell_key(p["lat"], p["lon"]))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def check_europe(rep: Report, op: str, product: str, body: dict, pts: dict[str, dict], freq_h: float,
                 ensembles: tuple[str, ...]):
    for key, fc in body.items():
        p = pts[key]
        clat, clon = centre(product, p)
        tr = truth(clat, clon, p["elev"])
        for e in fc["data"]:
            t0 = at(e["datetime"])
            t = hours(t0)
            where = f"{p['id']} {e['datetime']}"
            chk = lambda el, want, tol, e=e, where=where: rep.check(op, el, e.get(el), want, tol, where)  # noqa: E731
            chk("temp_2m", tr.t(t) - 273.15, TOL["temp"])
            chk("temp_100m", tr.t(t, 100) - 273.15, TOL["temp"])
            chk("temp_200m", tr.t(t, 200) - 273.15, TOL["temp"])
            chk("dewpoint_temperature", tr.td(t) - 273.15, TOL["temp"])
            chk("humidity", tr.rh(t), TOL["rh"])
            chk("pressure_sfc", tr.p(t) / 100, TOL["hpa"])
            chk("pressure_100m", tr.p(t, 100) / 100, TOL["hpa"])
            chk("pressure_200m", tr.p(t, 200) / 100, TOL["hpa"])
            chk("sea_surface_pressure", tr.msl(t) / 100, TOL["hpa"])
            for h in (10, 100, 200):
                u, v = tr.wind(t, h)
                chk(f"u_windspd_{h}m", u, TOL["wind"])
                chk(f"v_windspd_{h}m", v, TOL["wind"])
                chk(f"windspd_{h}m", math.hypot(u, v), TOL["wind"])
                chk(f"windir_{h}m", direction(u, v), TOL["dir"])
            chk("total_cloud_cover", tr.tcc(t), TOL["cloud"])
            chk("visibility", float(atm.vis(clat, clon, t)), TOL["vis"])
            chk("air_density", tr.density(t), TOL["density"])
            rate = tr.prec(t, t + freq_h) / freq_h
            chk("precipitation", rate, TOL["prec"])
            chk("snowfall", atm.SNOW_SHARE * rate, TOL["prec"])
            chk("precipitation_proba", *hourly_pop(ensembles, tr, t))
            wt = stable(lambda c, r, tc, clat=clat, clon=clon, t=t: weather_type(c, r, atm.SNOW_SHARE, tc,
                                                                                 float(atm.vis(clat, clon, t)),
                                                                                 float(atm.cape(clat, clon, t))),
                        (tr.tcc(t), TOL["cloud"]), (rate, TOL["prec"]),
                        (tr.t(t) - 273.15, TOL["temp"]))
            chk("weather_type", wt, None)
        # Interval elements over native blocks: gust (maximum), radiation (mean)
        series = {at(e["datetime"]): e for e in fc["data"]}
        blocks = defaultdict(list)
        for when, e in series.items():
            lead = hours(when)
            size = native_block(lead)
            blocks[(lead // size) * size, size].append(e)
        for (start, size), entries in blocks.items():
            if len(entries) * freq_h < size - 1e-9:
                continue  # the series' end cuts the block
            where = f"{p['id']} +{start:g}h/{size:g}h"
            rad = lambda el, entries=entries: float(np.mean([x[el] for x in entries]))  # noqa: E731
            mean = tr.ssrd(start, start + size)
            rep.check(op, "total_solar_radiation", rad("total_solar_radiation"), mean, TOL["rad"], where)
            rep.check(op, "solar_radiation_dir", rad("solar_radiation_dir"),
                      atm.DIRECT_SHARE * mean, TOL["rad"], where)
            rep.check(op, "solar_radiation_diff", rad("solar_radiation_diff"),
                      (1 - atm.DIRECT_SHARE) * mean, TOL["rad"], where)
            if not 78 <= start < 120:
                rep.check(op, "windgust", max(x["windgust"] for x in entries),
                          tr.gust(start, start + size), TOL["wind"], where)


def check_windpack(rep: Report, body: dict, pts: dict[str, dict], hub: float):
    for key, fc in body.items():
        p = pts[key]
        clat, clon = centre("eu-wind", p)
        tr = truth(clat, clon, p["elev"])
        for e in fc["data"]:
            t = hours(at(e["datetime"]))
            u, v = tr.wind(t, hub)
            where = f"{p['id']} {hub:g}m {e['datetime']}"
            rep.check("windpack", "u_windspd", e["u_windspd"], u, TOL["wind"], where)
            rep.check("windpack", "v_windspd", e["v_windspd"], v, TOL["wind"], where)
            rep.check("windpack", "windspd", e["windspd"], math.hypot(u, v), TOL["wind"], where)
            rep.check("windpack", "windir", e["windir"], direction(u, v), TOL["dir"], where)


def check_srf(rep: Report, op: str, product: str, body: dict, p: dict, ensembles: tuple[str, ...]):
    (wx,) = body["wxdata"]
    clat, clon = centre(product, p)
    tr = truth(clat, clon, p["elev"])
    for e in wx["srf"]:
        t = hours(at(e["date"]))
        where = f"{p['id']} {e['date']}"
        chk = lambda el, want, tol, e=e, where=where: rep.check(op, el, e.get(el), want, tol, where)  # noqa: E731
        temp = tr.t(t) - 273.15
        u, v = tr.wind(t)
        speed = math.hypot(u, v)
        chk("temp", temp, TOL["temp"])
        prec = tr.prec(t, t + 1)
        chk("prec", prec, TOL["prec"])
        chk("arpress", tr.msl(t) / 100, TOL["hpa"])
        chk("wndspd", speed, TOL["wind"])
        chk("wnddir", stable(lambda s, d: compass16(s, d), (speed, TOL["wind"]),
                             (direction(u, v), TOL["dir"])), None)
        chk("rhum", tr.rh(t), TOL["rh"])
        if "solrad" in e:
            chk("solrad", tr.ssrd(t, t + 1), TOL["rad"])
        cz = daylight(clat, clon, t + 0.5)
        wx_code = None if abs(cz) < 0.02 else stable(
            lambda c, r, tc, w, cz=cz: wx_hourly(c, r, tc, cz > 0, w), (tr.tcc(t), TOL["cloud"]),
            (prec, TOL["prec"]), (temp, TOL["temp"]), (speed, TOL["wind"]))
        chk("wx", wx_code, None)
        if "feeltmp" in e:
            e_hpa = 6.105 * math.exp(17.27 * (tr.td(t) - 273.15) / (237.7 + tr.td(t) - 273.15))
            q = 0.15 * tr.ssrd(t, t + 1)
            at_c = temp + 0.348 * e_hpa - 0.70 * speed + 0.70 * q / (speed + 10.0) - 4.25
            chk("feeltmp", at_c, TOL["feel"])
            chk("feelidx", stable(feelidx, (at_c, TOL["feel"])), None)
    # mrf: local days of the zone, each holding the hours that start on it
    for e in wx["mrf"]:
        # Local midnight. No zone changes its offset between 20 November and 4 December.
        day0 = datetime.fromisoformat(e["date"])
        start = max(hours(day0.astimezone(UTC)), 0.0)
        hrs = list(np.arange(start, hours(day0.astimezone(UTC)) + 24.0, 1.0))
        where = f"{p['id']} {e['date']}"
        # The share of the members whose day reaches 1 mm, of the first ensemble with the
        # whole (remaining) day; the highest hourly probability where none has it.
        ens = covering(ensembles, hrs[-1], hourly=True)
        day_end = hours(day0.astimezone(UTC)) + 24.0
        pop = (member_share(ens, tr.prec(hrs[0], day_end), DAILY_MM) if ens else
               (100.0 * max(float(atm.wet(h)) for h in hrs), TOL["pop"]))
        rep.check(op, "pop", e.get("pop"), *pop, where)
        if start > hours(day0.astimezone(UTC)):
            # A first day the run starts after its midnight: no whole-day values (the spec's
            # missing value; docs/method.md, "The first local day").
            for el in ("maxtemp", "mintemp", "prec", "rhum", "solrad"):
                if el in e:
                    rep.check(op, f"{el} of a partial first day", e[el] == -9999, True, None, where)
            continue
        temps = [tr.t(h) - 273.15 for h in hrs]
        rep.check(op, "maxtemp", e.get("maxtemp"), max(temps), TOL["temp"], where)
        rep.check(op, "mintemp", e.get("mintemp"), min(temps), TOL["temp"], where)
        if "prec" in e:  # 0.05 mm per native interval the day holds
            intervals = math.ceil(sum(1.0 / native_block(h, product) for h in hrs))
            rep.check(op, "prec", e["prec"], tr.prec(hrs[0], hrs[-1] + 1), TOL["prec"] * intervals,
                      where)
        if "rhum" in e:
            rep.check(op, "rhum", e["rhum"], float(np.mean([tr.rh(h) for h in hrs])), TOL["rh"], where)
        if "solrad" in e:
            rep.check(op, "solrad", e["solrad"], float(np.mean([tr.ssrd(h, h + 1) for h in hrs])),
                      TOL["rad"], where)


def check_archive(rep: Report, root: Path, product: str, pts: dict[str, dict], ensembles: tuple[str, ...]):
    """The ensemble statistics of a product's archive: the quantiles of temperature, of the
    wind speed (10 m; the windpack's at 10 and 100 m, the heights ENS publishes) and of the
    precipitation in the clock hour, each the truth offset or scaled by the quantiles of
    the covering ensemble's perturbations; and global's and japan's hourly ``pop``."""
    import xarray as xr

    ds = xr.open_zarr(root / "zarr" / f"{product}.zarr").isel(init_time=-1)
    times = (ds.init_time.values + ds.lead_time.values - np.datetime64(INIT.replace(tzinfo=None))) \
        / np.timedelta64(1, "h")
    op = f"{product} archive"
    np.testing.assert_allclose(ds["quantile"].values, QUANTILES)
    no_value = np.full(len(QUANTILES), np.nan)

    def shifted(column, t, which, value, scale):
        if at_seam(column, t):
            return None
        e = covering(column, t)
        return no_value if e is None else value + member_quantiles(e, which) if not scale \
            else value * member_quantiles(e, which)

    def instants(got, want):
        """The rows of the instants compared (``shifted`` None: at a seam, not compared)."""
        rows = [i for i, w in enumerate(want) if w is not None]
        return got[rows], np.array([want[i] for i in rows]), rows

    heights = [10.0, 100.0] if "height" in ds["wind_speed_quantiles"].dims else [None]
    for pid in ds.point.values:
        p = pts[str(pid)]
        clat, clon = centre(product, p)
        tr = truth(clat, clon, p["elev"])
        here = ds.sel(point=pid)
        # Every ensemble's members are corrected to the point's elevation: ENS's from its
        # control's ground (z), ICON-EU-EPS's from HSURF, GEFS's from its control's analysis
        # pressures. Over the 3 hours a state cross-fades into the next ensemble
        # (`blend.SEAM`) the two mix: not compared.
        fading = [covering(ensembles, t) != covering(ensembles, t + 3.0) for t in times]
        got, want, rows = instants(here["temperature_quantiles"].values,
                                   [None if fade else shifted(ensembles, t, 0, tr.t(t) - 273.15, False)
                                    for t, fade in zip(times, fading, strict=True)])
        rep.check_many(op, "temperature_quantiles", got, want, TOL["temp"],
                       lambda i, pid=pid, rows=rows: f"{pid} +{times[rows[i[0]]]:g}h q{QUANTILES[i[1]]}")
        hourly = [covering(ensembles, t, hourly=True) for t in times]
        amounts = [tr.prec(math.floor(t), math.floor(t) + 1) for t in times]
        want = np.array([no_value if e is None else a * member_quantiles(e, 2) for e, a in zip(hourly, amounts, strict=True)])
        rep.check_many(op, "precipitation_quantiles", here["precipitation_quantiles"].values, want, TOL["prec"],
                       lambda i, pid=pid: f"{pid} +{times[i[0]]:g}h q{QUANTILES[i[1]]}")
        for h in heights:
            wind = here["wind_speed_quantiles"] if h is None else here["wind_speed_quantiles"].sel(height=h)
            column = ensembles if h is None else tuple(e for e in ensembles if e in WIND_ALOFT)
            got, want, rows = instants(wind.values, [shifted(column, t, 1, math.hypot(*tr.wind(t, h or 10.0)), True)
                                                     for t in times])
            rep.check_many(op, "wind_speed_quantiles", got, want, TOL["wind"],
                           lambda i, pid=pid, h=h, rows=rows: f"{pid} {h or 10:g}m +{times[rows[i[0]]]:g}h "
                                                              f"q{QUANTILES[i[1]]}")
        if "pop" in here:  # the hourly probability the daily pop is made from (global, japan)
            want, tol = zip(*(hourly_pop(ensembles, tr, t) for t in times), strict=True)
            rep.check_many(op, "pop", here["pop"].values, np.array(want), np.array(tol),
                           lambda i, pid=pid: f"{pid} +{times[i[0]]:g}h")


def product_ensembles(config: Path) -> dict[str, tuple[str, ...]]:
    from pointcast.config import load_config

    return {pid: tuple(p.ensembles) for pid, p in load_config(config).products.items()}


def check_ensemble_manifest(manifest: dict) -> None:
    """The manifest names each product's ensembles (config/live.toml's), their members, and
    where each takes the probability from: the first ensemble by lead time, to its last step."""
    assert {e: manifest["models"][e]["members"] for e in MEMBERS} == {e: len(m) for e, m in MEMBERS.items()}
    for pid, ensembles in product_ensembles(ROOT / "config" / "live.toml").items():
        product = manifest["products"][pid]
        assert tuple(product["ensembles"]) == ensembles, (pid, product["ensembles"])
        segments = product["probability_from"]
        steps = np.arange(hours(at(segments[0]["from"])), hours(at(segments[-1]["to"])) + 0.125, 0.25)
        assert [s["source"] for s in segments] == list(dict.fromkeys(
            covering(ensembles, t, hourly=True) or "neighbourhood" for t in steps)), (pid, segments)
        for seg, following in zip(segments, segments[1:], strict=False):
            assert hours(at(following["from"])) == LAST_STEP[seg["source"]], (pid, segments)


# ------------------------------------------------------------------------------------------


def test_density_formula_is_metpys():
    from metpy.calc import density, mixing_ratio, saturation_vapor_pressure
    from metpy.units import units

    p, t, td = 95000.0, 285.0, 279.0
    w = mixing_ratio(saturation_vapor_pressure(td * units.K), p * units.Pa)
    want = density(p * units.Pa, t * units.K, w).to("kg/m^3").m
    assert moist_density(p, t, td) == pytest.approx(want, rel=1e-5)


def test_replica_decodes_to_the_atmosphere(tmp_path):
    """The replica's own check: what ecCodes reads back is the atmosphere (packing only)."""
    import eccodes

    replica.write_msm(tmp_path, atm, INIT)
    (f,) = tmp_path.rglob("*FH40-51_grib2.bin")
    eccodes.codes_grib_multi_support_on()
    try:
        with open(f, "rb") as fh:
            got = []
            while (h := eccodes.codes_grib_new_from_file(fh)) is not None:
                got.append((eccodes.codes_get(h, "shortName"), eccodes.codes_get(h, "endStep"),
                            eccodes.codes_get_array(h, "latitudes"),
                            eccodes.codes_get_array(h, "longitudes"), eccodes.codes_get_values(h)))
                eccodes.codes_release(h)
    finally:
        eccodes.codes_grib_multi_support_off()
    assert len(got) == 12 * 12 and f.read_bytes().count(b"GRIB") == 12  # 12 steps, 12 fields
    for name, step, lat, lon, values in got:
        if name == "prmsl":
            np.testing.assert_allclose(values, atm.p_sea(lat, lon, step), atol=1.0)
        if name == "avg_sdswrf":
            q = atm.ssrd_quarters(lat, lon, step)
            np.testing.assert_allclose(values, atm.ssrd_mean(q, step - 1, step), atol=0.1)


# ------------------------------------------------------------------------------------------
# Each model's decode of the replica against the atmosphere at its own grid points
# ------------------------------------------------------------------------------------------


def _ifs_files(root):
    run = root / "ecmwf" / "20261120" / "00z" / "ifs" / "0p25" / "oper"
    return [run / f"20261120000000-{s}h-oper-fc.grib2" for s in (0, 3, 87, 90, 93, 96, 144, 150, 156)]


def _gfs_files(root):
    run = root / "noaa" / "gfs.20261120" / "00" / "atmos"
    return [run / f"gfs.t00z.pgrb2.0p25.f{s:03d}" for s in range(0, 14)]


def _dwd_files(model, hours_):
    def files(root):
        base = root / "dwd" / "v1" / "m" / model / "p"
        out = [f for f in base.rglob("*.grib2")
               if int(f.name[2:5]) + int(f.name[6:8]) / 60 in hours_]
        centres = [f for f in out if f.parts[-6] in ("CLAT", "CLON")]
        return centres + [f for f in out if f not in centres]
    return files


def _msm_files(root):
    return sorted(root.rglob("*_FH00-15_grib2.bin"))


DECODED = {
    "ifs": (_ifs_files, replica.write_ifs, "ecmwf", ()),
    "gfs": (_gfs_files, replica.write_gfs, "noaa", (3.0, 13)),
    "icon-eu": (_dwd_files("icon-eu", {0, 1, 2, 78, 81, 84}), replica.write_icon, "dwd",
                (replica.ICON_EU, 84)),
    "icon-d2": (_dwd_files("icon-d2", {k / 4 for k in range(9)}), replica.write_icon, "dwd",
                (replica.ICON_D2, 2)),
    "msm": (_msm_files, replica.write_msm, "jma", ()),
}


def expected(var, ds, lat, lon, t, prev, level, orog, half):
    """The canonical value of ``var`` at the model's points (``None``: not compared)."""
    screen = 1.5 if ds.attrs.get("model") == "msm" else 2.0
    if var == "t2m":
        return atm.temperature(lat, lon, t, orog + screen)
    if var == "d2m":
        return atm.temperature(lat, lon, t, orog + screen) - atm.depression(lat, lon)
    if var == "rh2m":
        t2 = atm.temperature(lat, lon, t, orog + screen)
        return relative_humidity(t2, t2 - atm.depression(lat, lon))
    if var == "sp":
        return atm.pressure(lat, lon, t, orog)
    if var == "msl":
        return atm.p_sea(lat, lon, t)
    if var in ("u10", "v10", "u", "v"):
        f = atm.u10 if var.startswith("u") else atm.v10
        return f(lat, lon, t) * atm.profile(level or 10.0)
    if var in ("u_pl", "v_pl", "t_pl", "z_pl"):
        z = atm.height_of(lat, lon, t, level * 100.0)
        if var == "t_pl":
            return atm.temperature(lat, lon, t, z)
        if var == "z_pl":
            return z
        f = atm.u10 if var == "u_pl" else atm.v10
        return np.where(z - orog > 10.0, f(lat, lon, t) * atm.profile(z - orog), np.nan)
    if var in ("u_ml", "v_ml"):
        f = atm.u10 if var == "u_ml" else atm.v10
        return f(lat, lon, t) * atm.profile((half[level] + half[level + 1]) / 2.0)
    if var == "hhl":
        return orog + half[level] if level in half else np.full_like(orog, replica.TOP_M)
    if var == "orog":
        return orog
    if var == "tcc":
        return atm.tcc(lat, lon, t)
    if var == "lcc":
        return atm.lcc(lat, lon, t)
    if var == "vis":
        return atm.vis(lat, lon, t)
    if var == "cape":
        return atm.cape(lat, lon, t)
    if prev is None:
        return None
    if var == "gust":
        if ds.attrs.get("model") == "gfs":
            return atm.gust(lat, lon, t)  # GFS publishes the gust at the valid time only
        if ds.attrs.get("model") == "ifs":  # ECMWF's post-processing period, not the step's
            return atm.gust_max(lat, lon, t - replica.ifs_gust_window(round(t)), t)
        if ds.attrs.get("model") == "icon-eu" and t - prev > 1:
            return None  # VMAX_10M covers the last hour only: the hours before are unknown
        return atm.gust_max(lat, lon, prev, t)
    if var in ("tp", "sf"):
        share = atm.SNOW_SHARE if var == "sf" else 1.0
        return share * atm.precip(lat, lon, prev, t)
    if var in ("ssrd", "fdir", "ssr"):
        share = {"ssrd": 1.0, "fdir": atm.DIRECT_SHARE, "ssr": 1.0 - atm.ALBEDO}[var]
        q = atm.ssrd_quarters(lat, lon, t)
        return share * atm.ssrd_mean(q, prev, t)
    return None


DECODE_TOL = {"t2m": 0.05, "d2m": 0.3, "rh2m": 1.0, "sp": 5.0, "msl": 5.0, "tcc": 0.5,
              "lcc": 0.5, "vis": 10.0, "cape": 1.0, "orog": 1.0, "hhl": 1.0, "z_pl": 1.0,
              "t_pl": 0.05, "tp": 0.01, "sf": 0.01, "ssrd": 0.5, "fdir": 0.5, "ssr": 0.5}


@pytest.mark.parametrize("model", ["gfs", "icon-d2", "icon-eu", "ifs", "msm"])
def test_decode_reads_the_replica_as_the_atmosphere(model, tmp_path):
    """Decode (pointcast's tables, ``ingest.decode``) of each upstream's real encoding gives the
    canonical variables of the atmosphere: units, meaning and interval of every field."""
    from pointcast.ingest import decode
    from pointcast.sources import MODELS

    pick, write, prefix, extra = DECODED[model]
    write(tmp_path / prefix, atm, INIT, *extra)
    ds = decode(pick(tmp_path), MODELS[model].fields, model=model)
    ds.attrs["model"] = model
    if "cell" in ds.dims:
        lat, lon = ds.clat.values, ds.clon.values
    else:
        lat, lon = np.meshgrid(ds.lat.values, ds.lon.values, indexing="ij")
    orog = atm.orog(lat, lon)
    icon = {"icon-eu": replica.ICON_EU, "icon-d2": replica.ICON_D2}.get(model)
    half = replica.icon_half_heights(icon.levels, icon.written) if icon else {}
    times = [hours(datetime.fromisoformat(str(t)[:19]).replace(tzinfo=UTC)) for t in ds.time.values]
    bad = []
    for var in ds.data_vars:
        da = ds[var]
        level_dim = next((d for d in da.dims if d in ("height", "plev", "mlev", "hlev")), None)
        levels = list(da[level_dim].values) if level_dim else [None]
        values = da.values
        for li, lev in enumerate(levels):
            if "time" not in da.dims:
                got = values[li] if level_dim else values
                want = expected(var, ds, lat, lon, 0.0, None, lev, orog, half)
                cases = [(0.0, got, want)]
            else:
                cases = []
                defined = [i for i in range(len(times))
                           if np.isfinite(values[i][li] if level_dim else values[i]).any()]
                for k, i in enumerate(defined):
                    prev = times[defined[k - 1]] if k else None
                    got = values[i][li] if level_dim else values[i]
                    cases.append((times[i], got, expected(var, ds, lat, lon, times[i], prev, lev,
                                                          orog, half)))
            for t, got, want in cases:
                if want is None:
                    continue
                err = np.nanmax(np.abs(np.asarray(got, float) - want)) if np.isfinite(want).any() else 0
                missing = np.isnan(got) & np.isfinite(want)
                tol = DECODE_TOL.get(var, TOL["wind"])
                if missing.any() or not err <= tol:
                    i = np.nanargmax(np.abs(np.asarray(got, float) - want))
                    bad.append(f"{var}{'' if lev is None else f'[{lev}]'} +{t:g}h: max error "
                               f"{err:.3g} (got {np.ravel(got)[i]:.4g}, want {np.ravel(want)[i]:.4g})"
                               + (f", {missing.sum()} missing" if missing.any() else ""))
    missing_vars = sorted({f.var for f in MODELS[model].fields if f.edition != 1} - set(ds.data_vars)
                          - ({"vis"} if model.startswith("icon") else set()))
    if missing_vars:
        bad.append(f"not decoded: {missing_vars}")
    assert not bad, f"{model}: decoded values off the atmosphere:\n" + "\n".join(bad)


def compare_all(root: Path) -> Report:
    """Every element of the five operations served from the published tree at ``root``
    against the truth."""
    from served import live_server

    rep = Report()
    run = root / "runs" / os.readlink(root / "current").rsplit("/", 1)[-1]
    ensembles = {pid: tuple(p.get("ensembles", ())) for pid, p in
                 json.loads((run / "manifest.json").read_text())["products"].items()}
    eu = {f"{p['lat']},{p['lon']}": p for p in points("europe.csv")}
    with live_server(root) as (client, _, _):
        keys = list(eu)
        for path, product, op in (("/V1/forecast/medium-range/common", "eu-medium", "medium-range"),
                                  ("/V1/forecast/short-range/common", "eu-short", "short-range")):
            for i in range(0, len(keys), 10):
                r = client.get(path, params={"latlon": ";".join(keys[i:i + 10]), "freq": "1H"})
                assert r.status_code == 200, r.text
                check_europe(rep, op, product, r.json(), eu, 1.0, ensembles[product])
            for freq, h in (("15min", 0.25), ("30min", 0.5)):
                r = client.get(path, params={"latlon": "50.1109,8.6821", "freq": freq})
                assert r.status_code == 200, r.text
                check_europe(rep, f"{op} {freq}", product, r.json(), eu, h, ensembles[product])
        for p in eu.values():
            for hub in sorted({10.0, 75.0, 100.0, 300.0, *p["hubs"]}):
                r = client.get("/V1/forecast/short-range/windpack",
                               params={"latlon": f"{p['lat']},{p['lon']}", "freq": "1H",
                                       "hubheight": f"{hub:g}m"})
                assert r.status_code == 200, r.text
                check_windpack(rep, r.json(), eu, hub)
        for p in points("global.csv"):
            r = client.get("/api/v2/global/wx", params={"latlon": f"{p['lat']}/{p['lon']}"})
            assert r.status_code == 200, r.text
            check_srf(rep, "global", "global", r.json(), p, ensembles["global"])
        for p in points("japan.csv"):
            r = client.get("/api/v1/ss1wx", params={"lat": p["lat"], "lon": p["lon"]})
            assert r.status_code == 200, r.text
            check_srf(rep, "japan", "japan", r.json(), p, ensembles["japan"])
    pts = {p["id"]: p for name in ("europe.csv", "global.csv", "japan.csv") for p in points(name)}
    for product, names in ensembles.items():
        if names:
            check_archive(rep, root, product, pts, names)
    # Every element of every operation was compared (codes: where decidable)
    europe = ["temp_2m", "temp_100m", "temp_200m", "dewpoint_temperature", "humidity",
              "pressure_sfc", "pressure_100m", "pressure_200m", "sea_surface_pressure",
              *[f"{c}_{h}m" for c in ("u_windspd", "v_windspd", "windspd", "windir")
                for h in (10, 100, 200)], "total_cloud_cover", "visibility", "air_density",
              "precipitation", "snowfall", "precipitation_proba", "weather_type",
              "total_solar_radiation", "solar_radiation_dir", "solar_radiation_diff", "windgust"]
    wanted = {(op, el) for op in ("medium-range", "short-range", "medium-range 15min",
                                  "short-range 15min", "medium-range 30min", "short-range 30min")
              for el in europe}
    wanted |= {("windpack", el) for el in ("u_windspd", "v_windspd", "windspd", "windir")}
    wanted |= {("global", el) for el in ("wx", "temp", "prec", "arpress", "wndspd", "wnddir",
                                         "rhum", "solrad", "maxtemp", "mintemp", "pop")}
    wanted |= {("japan", el) for el in ("wx", "temp", "prec", "arpress", "wndspd", "wnddir",
                                        "rhum", "feeltmp", "feelidx", "maxtemp", "mintemp", "pop")}
    wanted |= {(f"{pid} archive", el) for pid in ("eu-medium", "eu-short", "eu-wind", "global", "japan")
               if ensembles[pid] for el in ("temperature_quantiles", "wind_speed_quantiles", "precipitation_quantiles")}
    wanted |= {(f"{pid} archive", "pop") for pid in ("global", "japan") if ensembles[pid]}
    assert not wanted - set(rep.n), f"never compared: {sorted(wanted - set(rep.n))}"
    return rep


def shared_replica() -> tuple[Path, dict[str, int]]:
    """The replica of ``atm`` at INIT, ensembles included, and the messages written per model:
    published once a test session (`conftest._made_once`), served as it is by the truth test
    and thinned in a copy of hard links by tests/flows/test_degraded_replica.py."""
    def make(done: Path) -> None:
        (done / "written.json").write_text(json.dumps(replica.publish(done / "tree", atm, INIT)))

    made = _made_once("replica", make)
    return made / "tree", json.loads((made / "written.json").read_text())


def test_live_configuration_publishes_the_truth(tmp_path, prefect_harness):
    t_start = time.monotonic()
    tree, written = shared_replica()
    t_written = time.monotonic()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with Mirror(tree) as mirror:
        cfg = live_config(tmp_path / "config", mirror)
        done = run_cycle(cfg, tmp_path / "prefect")
        served = sorted({r.path.split("/")[1] for r in mirror.requests})
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t_cycle = time.monotonic()
    assert not isinstance(done, str), f"the cycle did not finish: {done}"
    assert done.returncode == 0, f"the cycle failed:\n{done.stdout[-6000:]}"
    assert served == sorted(set(PREFIXES.values()))
    root = tmp_path / "output" / "live"
    run_id = os.readlink(root / "current").rsplit("/", 1)[-1]
    manifest = json.loads((root / "runs" / run_id / "manifest.json").read_text())
    assert manifest["synthetic"] is False
    assert manifest["dropped"] == {}, manifest["dropped"]
    assert {m: v["init"][:16] for m, v in manifest["models"].items()} == {
        m: "2026-11-20T00:00" for m in written}

    check_ensemble_manifest(manifest)

    t_end0 = time.monotonic()
    rep = compare_all(root)
    t_end = time.monotonic()
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    print(f"replica {t_written - t_start:.0f} s ({written}), cycle {t_cycle - t_written:.0f} s "
          f"({cpu:.0f} s CPU), queries {t_end - t_end0:.0f} s; {sum(rep.n.values())} values compared")
    assert not rep.bad, "elements off the truth:\n" + rep.summary()
