"""The synthetic atmosphere: one analytic "truth", a function of place and valid time, that every
model samples on its own grid, and its integration over a run's steps.

Every model sees the truth with small differences of its own (``FLAVOURS``: depth and phase of
the lows, a temperature bias, precipitation efficiency, smoother orography on coarser grids, a
phase error growing with lead time). The truth: the orography of ``terrain``, temperature by
latitude and season with a diurnal cycle by local solar time, a -6.5 K/km lapse rate, a train
of lows (20-30 hPa, eastwards at 10 m/s) crossing the Atlantic and Europe and another
(10-26 hPa, 11 m/s) born over eastern China that crosses Japan, the seasonal centres of the
East Asian monsoon (the Siberian high and Aleutian low in winter, the North Pacific high in
summer), East Asia's climate (cold continental winters, Japan's large annual cycle, the
Kuroshio, humid monsoon air), geostrophic winds turned towards low pressure near the ground,
hypsometric surface pressure and pressure-level heights, log wind profiles, humidity and cloud
around the lows and on windward slopes (orographic lift; drier in the lee: snow on Japan's Sea
of Japan side in the north-westerly winter monsoon, sunshine on the Pacific side),
precipitation only under cloud above 80 %, snow below about 1 degC, clear-sky radiation
(Haurwitz) reduced by cloud, net shortwave through an albedo (sea 0.07, land 0.17, snow 0.6
where the daily-mean temperature is below -2 degC), low cloud as a share (30-90 %) of the
total, gusts, visibility and CAPE, relative humidity from the 2 m dewpoint. ICON's half levels
follow the terrain (``terrain.half_level_height``) and the model-level winds are the same
column as the 10 m, height-level and pressure-level winds (``Weather.profile``).

Accumulations, means and maxima are integrated over sub-steps of at most 30 minutes (15 for
ICON-D2's quarter hours), so they never decrease, and interval means are zero when the sun
stayed down (``integrate``). Nothing depends on the wall clock or on unseeded randomness.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..config import HUB_HEIGHT_RANGE_M
from ..gribtable import RUN_LEVELS
from ..sources.base import ModelSpec
from ..sources.icon import LEVEL_COUNTS, hub_levels
from .grids import R_EARTH, CellGrid, SampleGrid
from .terrain import LandMask, half_level_height, mountain_ridges, orography

UTC = UTC
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

OMEGA = 7.292e-5  # s-1
G = 9.80665  # m s-2
RD = 287.05  # J kg-1 K-1
LAPSE = 0.0065  # K m-1
RHO = 1.2  # kg m-3, near-surface air density for the geostrophic wind
SUB_STEP_MIN = 30  # longest integration sub-step of accumulated and interval fields
# Full levels written above those that span the hub heights (see Weather).
EXTRA_MODEL_LEVELS = 1


# ------------------------------------------------------------------------------------------
# Sun


# ------------------------------------------------------------------------------------------


def hours_since_epoch(when: datetime) -> float:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - EPOCH).total_seconds() / 3600.0


def _solar_terms(th: float) -> tuple[float, float]:
    """Declination (rad) and equation of time (minutes) at ``th`` hours since 2000-01-01."""
    days = th / 24.0
    gam = 2.0 * math.pi * (days % 365.2422) / 365.2422
    decl = (0.006918 - 0.399912 * math.cos(gam) + 0.070257 * math.sin(gam)
            - 0.006758 * math.cos(2 * gam) + 0.000907 * math.sin(2 * gam)
            - 0.002697 * math.cos(3 * gam) + 0.00148 * math.sin(3 * gam))
    eqt = 229.18 * (0.000075 + 0.001868 * math.cos(gam) - 0.032077 * math.sin(gam)
                    - 0.014615 * math.cos(2 * gam) - 0.040849 * math.sin(2 * gam))
    return decl, eqt


def local_solar_hour(lon: np.ndarray | float, th: float) -> np.ndarray:
    """True local solar time (h) at longitude ``lon`` (deg) and ``th`` hours since 2000."""
    _, eqt = _solar_terms(th)
    return np.mod(th % 24.0 + eqt / 60.0 + np.asarray(lon) / 15.0, 24.0)


def cos_zenith(lat: np.ndarray | float, lon: np.ndarray | float, th: float) -> np.ndarray:
    """Cosine of the solar zenith angle (broadcasts ``lat`` against ``lon``)."""
    decl, _ = _solar_terms(th)
    phi = np.radians(lat)
    ha = np.radians((local_solar_hour(lon, th) - 12.0) * 15.0)
    return np.sin(phi) * math.sin(decl) + np.cos(phi) * math.cos(decl) * np.cos(ha)


# ------------------------------------------------------------------------------------------
# The synthetic weather


# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flavour:
    """How one model departs from the shared truth."""

    depth: float = 1.0  # depth of the lows
    phase_h_per_day: float = 0.0  # lows late (+) or early (-) by this many hours per forecast day
    bias_k: float = 0.0  # temperature bias
    precip: float = 1.0  # precipitation efficiency
    cloud: float = 1.0
    cape: float = 1.0  # IFS publishes most-unstable CAPE (larger than mixed-layer CAPE)


FLAVOURS: dict[str, Flavour] = {
    "ifs": Flavour(depth=0.97, phase_h_per_day=0.25, bias_k=-0.15, precip=0.92, cloud=0.98,
                   cape=1.15),
    "icon-eu": Flavour(depth=1.03, phase_h_per_day=-0.2, bias_k=0.25, precip=1.05),
    "icon-d2": Flavour(depth=1.01, phase_h_per_day=-0.1, bias_k=0.1, precip=1.1, cloud=1.02),
    "gfs": Flavour(depth=0.99, phase_h_per_day=0.3, bias_k=-0.3, precip=1.12, cloud=0.97),
    "msm": Flavour(depth=1.02, phase_h_per_day=-0.15, bias_k=0.2, precip=1.08, cloud=1.01),
}


def _hash01(*ints: int) -> float:
    """A deterministic number in [0, 1) from integers (no floating-point platform effects)."""
    v = 0x9E3779B9
    for i in ints:
        v = (v ^ (i & 0xFFFFFFFF)) * 0x01000193 % 2**32
        v = (v ^ (v >> 15)) * 0x2C1B3C6D % 2**32
    return ((v ^ (v >> 12)) % 2**32) / 2**32


@dataclass(frozen=True)
class Blob:
    """A Gaussian pressure anomaly: amp > 0 is a low (Pa below the background), amp < 0 a high."""

    lat: float
    lon: float
    amp: float
    radius: float  # m
    moist: float = 0.0  # weight of its humidity (fronts, warm conveyor belt), 0..1
    hemi: int = 1


LOW_PERIOD_H = 90.0  # a new low every 90 h in each hemisphere
LOW_LIFE_H = 216.0
LOW_SPEED = 10.0  # m s-1 eastwards
# East Asia: lows born over eastern China and the East China Sea (29-37 N, 112-126 E) every
# 72 h, living 150 h, moving east at 11 m/s and poleward by 14 degrees over their life, so that
# they cross Japan in their first two days (the Sea of Japan and south-coast lows) and deepen
# towards the Kurils and the Aleutians; 10-26 hPa deep when born in winter, 0.6 of that in
# summer.
EA_PHASE_H = 29.0
EA_PERIOD_H = 72.0
EA_LIFE_H = 150.0
EA_SPEED = 11.0
EA_DRIFT_DEG = 14.0


def season_index(th: float) -> float:
    """+1 in mid-July, -1 in mid-January (northern hemisphere), at ``th`` hours since 2000."""
    return math.cos(2.0 * math.pi * (th / 24.0 - 199.0) / 365.2422)


def _east_lon(lon0: float, lat0: float, lat1: float, dist_m: float) -> float:
    """Longitude reached after ``dist_m`` eastwards at constant speed while the latitude goes
    linearly from ``lat0`` to ``lat1`` (the exact integral of the zonal speed over cos(lat))."""
    p0, p1 = math.radians(lat0), math.radians(lat1)
    if abs(p1 - p0) < 1e-9:
        rad = dist_m / (R_EARTH * math.cos(p0))
    else:
        mercator = (math.log(math.tan(math.pi / 4 + p1 / 2))
                    - math.log(math.tan(math.pi / 4 + p0 / 2)))
        rad = dist_m / R_EARTH * mercator / (p1 - p0)
    return (lon0 + math.degrees(rad) + 180.0) % 360.0 - 180.0


def lows(th: float, depth: float = 1.0) -> list[Blob]:
    """The travelling lows alive at ``th`` (hours since 2000) plus the stationary centres.

    Stationary: the Azores high and the Icelandic low all year; over East Asia and the North
    Pacific the seasonal centres of the monsoon, the Siberian high and the Aleutian low in
    winter (north-westerly winter monsoon over Japan) and the North Pacific high in summer."""
    season = season_index(th)
    winter, summer = 0.5 * (1.0 - season), 0.5 * (1.0 + season)
    out: list[Blob] = [
        Blob(37.0, -32.0, -700.0, 1.3e6),  # Azores high
        Blob(63.0, -28.0, 600.0, 1.2e6),  # Icelandic low
        Blob(49.0, 103.0, -2200.0 * winter, 1.6e6),  # Siberian high
        Blob(52.0, 178.0, 1800.0 * winter, 1.6e6),  # Aleutian low
        Blob(32.0, 160.0, -1600.0 * summer, 2.0e6),  # North Pacific high
    ]
    for hemi, phase0 in ((1, 11.0), (-1, 47.0)):
        kmax = math.floor((th - phase0) / LOW_PERIOD_H)
        kmin = math.ceil((th - phase0 - LOW_LIFE_H) / LOW_PERIOD_H)
        for k in range(kmin, kmax + 1):
            age = th - phase0 - k * LOW_PERIOD_H
            if not 0.0 <= age < LOW_LIFE_H:
                continue
            r = [_hash01(k, hemi, salt) for salt in range(4)]
            life = math.sin(math.pi * age / LOW_LIFE_H)
            lat = hemi * (46.0 + 8.0 * r[0] + 7.0 * age / LOW_LIFE_H)
            lon0 = -52.0 + 18.0 * r[1] if hemi > 0 else -180.0 + 360.0 * r[1]
            lon = lon0 + math.degrees(LOW_SPEED * age * 3600.0
                                      / (R_EARTH * math.cos(math.radians(lat))))
            lon = (lon + 180.0) % 360.0 - 180.0
            amp = depth * (1800.0 + 1200.0 * r[2]) * life ** 0.8
            radius = (550e3 + 300e3 * r[3]) * (0.75 + 0.25 * life)
            out.append(Blob(lat, lon, amp, radius, moist=life ** 0.5, hemi=hemi))
    kmax = math.floor((th - EA_PHASE_H) / EA_PERIOD_H)
    kmin = math.ceil((th - EA_PHASE_H - EA_LIFE_H) / EA_PERIOD_H)
    for k in range(kmin, kmax + 1):
        age = th - EA_PHASE_H - k * EA_PERIOD_H
        if not 0.0 <= age < EA_LIFE_H:
            continue
        r = [_hash01(k, 2, salt) for salt in range(4)]  # train 2: East Asia
        life = math.sin(math.pi * age / EA_LIFE_H)
        lat0 = 29.0 + 8.0 * r[0]
        lat = lat0 + EA_DRIFT_DEG * age / EA_LIFE_H
        lon = _east_lon(112.0 + 14.0 * r[1], lat0, lat, EA_SPEED * age * 3600.0)
        # Deepest in winter and spring, shallower in summer (the season at the low's birth).
        strength = 0.6 + 0.4 * 0.5 * (1.0 - season_index(th - age))
        amp = depth * strength * (1000.0 + 1600.0 * r[2]) * life ** 0.8
        radius = (450e3 + 250e3 * r[3]) * (0.75 + 0.25 * life)
        out.append(Blob(lat, lon, amp, radius, moist=life ** 0.5, hemi=1))
    return out


def _zonal_msl(lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zonal-mean sea-level pressure (Pa) and its northward gradient (Pa m-1)."""
    s = np.abs(lat)
    sign = np.where(lat >= 0, 1.0, -1.0)
    e1 = 1000.0 * np.exp(-(((s - 33.0) / 13.0) ** 2))
    e2 = -900.0 * np.exp(-(((s - 62.0) / 11.0) ** 2))
    p = 101325.0 + e1 + e2
    dp_ddeg = e1 * (-2.0 * (s - 33.0) / 13.0 ** 2) + e2 * (-2.0 * (s - 62.0) / 11.0 ** 2)
    return p, sign * dp_ddeg * (180.0 / math.pi) / R_EARTH


def dewpoint(t: np.ndarray, rh: np.ndarray) -> np.ndarray:
    """Dewpoint (K) from temperature (K) and relative humidity (0..1), Magnus form."""
    a, b = 17.625, 243.04
    tc = t - 273.15
    gam = np.log(np.clip(rh, 1e-3, 1.0)) + a * tc / (b + tc)
    return b * gam / (a - gam) + 273.15


def relative_humidity(t: np.ndarray, td: np.ndarray) -> np.ndarray:
    a, b = 17.625, 243.04
    tc, tdc = t - 273.15, td - 273.15
    return np.exp(a * tdc / (b + tdc) - a * tc / (b + tc))


class Weather:
    """The shared truth sampled on one model's grid (float32 arithmetic on (lat, lon) arrays;
    latitude-only terms are (n, 1) columns and longitude-only terms (1, m) rows)."""

    def __init__(self, model: ModelSpec, grid: SampleGrid | CellGrid, land: LandMask):
        f4 = np.float32
        self.model = model
        self.flavour = FLAVOURS.get(model.id, Flavour())
        # (n, 1) and (1, m) on a regular grid; both (n, 1) on an unstructured one.
        lat, lon = grid.columns()
        self.lat_range = (float(lat.min()), float(lat.max()))
        self.lat = lat.astype(f4)
        self.lon = lon.astype(f4)
        phi = np.radians(lat)
        self.phi = phi.astype(f4)
        self.sinphi, self.cosphi = np.sin(phi).astype(f4), np.cos(phi).astype(f4)
        self.tanphi = np.tan(np.clip(phi, -1.5707, 1.5707)).astype(f4)
        self.rcos = (R_EARTH * np.cos(phi)).astype(f4)
        lf = np.clip(land.fraction(lat, lon), 0.0, 1.0)
        self.landfrac = lf.astype(f4)
        self.land = land.is_land(lat, lon)
        ridges, dhdx, dhdy = mountain_ridges(lat, lon, model.grid.dlat * 111.2)
        self.orog = orography(lat, lon, self.land, lf, model.grid.dlat * 111.2,
                              ridges).astype(f4)
        # Slope of the ridges (m/m): air blown up it rises (cloud, rain and snow on the
        # windward side), air blown down it sinks and dries (the lee).
        self.dhdx, self.dhdy = dhdx.astype(f4), dhdy.astype(f4)
        # Roughness length: sea, land, more over mountains.
        z0_land = 0.05 + 0.25 * np.clip(self.orog / 2000.0, 0.0, 1.0)
        self.z0 = np.exp(math.log(2e-4) * (1 - lf) + np.log(z0_land) * lf).astype(f4)
        sign = np.where(lat >= 0, 1.0, -1.0)
        f = 2.0 * OMEGA * np.sin(phi)
        fmin = 2.0 * OMEGA * math.sin(math.radians(15.0))
        tropics = 1.0 - np.exp(-((lat / 10.0) ** 2))
        self.geo = (tropics / (RHO * sign * np.maximum(np.abs(f), fmin))).astype(f4)
        self.trades = (-6.0 * (1.0 - tropics)).astype(f4)
        msl_zonal, dpdy_zonal = _zonal_msl(lat)
        self.msl_zonal, self.dpdy_zonal = msl_zonal.astype(f4), dpdy_zonal.astype(f4)
        # Friction: slower and turned towards low pressure near the ground, more over land.
        turn = np.radians(18.0 + 14.0 * lf) * sign
        self.k_cos = ((0.72 - 0.22 * lf) * np.cos(turn)).astype(f4)
        self.k_sin = ((0.72 - 0.22 * lf) * np.sin(turn)).astype(f4)
        # Climate: annual-mean sea-level temperature by latitude (300 K at the equator, 282 K
        # at 50 deg, 250 K at the poles), a warm north-east Atlantic and a warm Iberia/Maghreb;
        # seasonal amplitude growing with latitude and continentality; drier subtropics.
        la, lo = lat, lon
        gulf = np.exp(-(((la - 60.0) / 12.0) ** 2) - (((lo + 10.0) / 28.0) ** 2))
        iberia = np.exp(-(((la - 37.0) / 7.0) ** 2) - (((lo + 3.0) / 9.0) ** 2))
        # East Asia: the Siberian winter (colder, a much larger annual cycle inland), the
        # monsoon climate of China, Korea and Japan (large annual cycle also near the sea:
        # Sapporo -3/22 degC, Tokyo 5/27 degC in January/August), the Kuroshio warming
        # Japan's Pacific coast, and the humid monsoon air (no subtropical dryness there).
        siberia = np.exp(-(((la - 55.0) / 15.0) ** 2) - (((lo - 110.0) / 35.0) ** 2))
        monsoon = np.exp(-(((la - 38.0) / 10.0) ** 2) - (((lo - 128.0) / 22.0) ** 2))
        kuroshio = np.exp(-(((la - 32.0) / 4.0) ** 2) - (((lo - 136.0) / 10.0) ** 2))
        humid = np.exp(-(((la - 33.0) / 9.0) ** 2) - (((lo - 125.0) / 22.0) ** 2))
        self.t_annual = (300.0 - 50.0 * (np.abs(la) / 90.0) ** 1.74 + 4.0 * gulf + 3.0 * iberia
                         - 7.0 * siberia + 2.0 * kuroshio + self.flavour.bias_k).astype(f4)
        self.t_season_amp = (sign * (2.0 + 10.5 * np.abs(np.sin(phi)) * (0.3 + 0.7 * lf)
                                     + 14.0 * siberia * (0.5 + 0.5 * lf) + 4.0 * monsoon)
                             ).astype(f4)
        self.rh_base = (0.74 - 0.1 * lf - 0.2 * np.exp(-(((np.abs(la) - 27.0) / 9.0) ** 2))
                        + 0.12 * humid).astype(f4)
        # K, half the clear-sky daily range (dry air widens it, see surface()).
        self.diurnal_amp = (0.5 + 5.5 * lf).astype(f4)
        self.t_lapse = (LAPSE * self.orog).astype(f4)
        self.clear_alt = (1.0 + 0.06 * np.clip(self.orog, 0.0, 4000.0) / 1000.0).astype(f4)
        self.cape_base = (0.25 + 0.25 * (1.0 - lf)).astype(f4)
        # ICON model levels: half-level heights above sea level (HHL) of the whole column and
        # the height above the ground (halfway between its half levels) of each full level
        # the wind is written on: those a reader picks from this HHL to span the hub heights
        # (``icon.hub_levels``) and ``EXTRA_MODEL_LEVELS`` above them (a real tree has all).
        self.hhl: dict[int, np.ndarray] = {}
        self.full_agl: dict[int, np.ndarray] = {}
        self.run_levels: dict[str, tuple[int, ...]] = {}
        if any(r.levels == RUN_LEVELS for r in model.fields):
            half = range(1, LEVEL_COUNTS[model.id] + 2)
            self.hhl = {lv: half_level_height(model.id, lv, self.orog) for lv in half}
            span = hub_levels(self.hhl, HUB_HEIGHT_RANGE_M[1])
            if span is None:
                raise ValueError(f"{model.id}: the sample's model levels end below {HUB_HEIGHT_RANGE_M[1]} m")
            full = tuple(range(max(1, span[0] - EXTRA_MODEL_LEVELS), span[-1] + 1))
            for lv in full:
                self.full_agl[lv] = (0.5 * (self.hhl[lv] + self.hhl[lv + 1]) - self.orog
                                     ).astype(f4)
            self.run_levels = {"generalVertical": tuple(half), "generalVerticalLayer": full}

    # -- the state at the surface ----------------------------------------------------------

    def surface(self, th: float, lead_h: float, full: bool = True) -> dict[str, np.ndarray]:
        """Surface fields at ``th`` hours since 2000 (``lead_h`` into the run). ``full=False``
        skips what only the output steps need (visibility)."""
        fl, lf = self.flavour, self.landfrac
        decl, eqt = _solar_terms(th)
        lst = np.mod(self.lon / 15.0 + (th % 24.0 + eqt / 60.0), 24.0)  # (1, m)
        cz = self.sinphi * math.sin(decl) + self.cosphi * math.cos(decl) * np.cos(
            (lst - 12.0) * (math.pi / 12.0))
        h0 = np.degrees(np.arccos(np.clip(-self.tanphi * math.tan(decl), -1.0, 1.0)))
        sunrise = 12.0 - h0 / 15.0  # (n, 1), local solar hours
        rise = 15.0 - sunrise
        tau = np.mod(lst - sunrise, 24.0)
        # -1 at sunrise, +1 at 15 h local solar time: two cosine halves.
        shape = np.cos(np.where(tau < rise, tau * (math.pi / rise) + math.pi,
                                (tau - rise) * (math.pi / (24.0 - rise))))
        noon = np.clip(np.cos(self.phi - decl), 0.05, 1.0)

        # Pressure: zonal background plus the lows and highs, with analytic gradients.
        th_low = th - fl.phase_h_per_day * lead_h / 24.0
        shape2 = shape.shape
        msl = np.broadcast_to(self.msl_zonal, shape2).copy()
        dpdx = np.zeros(shape2, np.float32)
        dpdy = np.broadcast_to(self.dpdy_zonal, shape2).copy()
        moist = np.zeros(shape2, np.float32)
        warm = np.zeros(shape2, np.float32)
        for b in lows(th_low, fl.depth):
            reach = math.degrees(5.0 * b.radius / R_EARTH)
            if b.lat + reach < self.lat_range[0] or b.lat - reach > self.lat_range[1]:
                continue
            dlon = np.radians(np.mod(self.lon - b.lon + 180.0, 360.0) - 180.0)
            x = self.rcos * dlon
            y = R_EARTH * (self.phi - math.radians(b.lat))
            inv = 1.0 / (b.radius * b.radius)
            r2 = x * x + y * y
            ag = b.amp * np.exp(r2 * (-0.5 * inv))
            msl -= ag
            dpdx += ag * x * inv
            dpdy += ag * y * inv
            if b.moist > 0.0:
                r = b.radius
                # Warm conveyor belt north-east of the centre, cold front trailing south-west.
                xs, ys = x - 0.45 * r, y - b.hemi * 0.3 * r
                core = np.exp((xs * xs + ys * ys) * (-0.5 / (1.1 * r) ** 2))
                dx, dy = -0.5, -0.866 * b.hemi
                along = (x * dx + y * dy - 1.3 * r) * (1.0 / (1.1 * r))
                across = (y * dx - x * dy) * (1.0 / (0.22 * r))
                front = np.exp(-0.5 * across * across - along * along)
                np.maximum(moist, b.moist * np.maximum(0.34 * core, 0.3 * front), out=moist)
                warm += (3.0 * b.moist / r) * x * np.exp(r2 * (-0.5 / (1.6 * r) ** 2))
        # Geostrophic wind: cyclonic around lows (counter-clockwise in the north).
        ug = np.clip(self.trades - dpdy * self.geo, -60.0, 60.0)
        vg = np.clip(dpdx * self.geo, -60.0, 60.0)
        # Orographic lift (m/s) of the near-surface flow (about 0.6 of the geostrophic wind):
        # moister up to +0.33 on windward slopes, drier down to -0.15 in the lee.
        lift = 0.6 * (ug * self.dhdx + vg * self.dhdy)
        orographic = 0.22 * np.clip(lift * (1.0 / 0.15), -0.7, 1.5)

        # Temperature, humidity, cloud.
        season = season_index(th)
        rh_env = np.clip(self.rh_base + moist + orographic, 0.25, 0.995)
        x_ls = np.clip((rh_env - 0.62) * (1.0 / 0.31), 0.0, 1.0)
        c_ls = x_ls * (0.6 + 0.4 * x_ls)
        t_sl = self.t_annual + self.t_season_amp * season + warm  # daily mean at sea level
        t_mean2 = t_sl - self.t_lapse
        td = dewpoint(t_mean2, rh_env)
        heat = np.maximum(shape, 0.0) * np.clip(cz + 0.2, 0.0, 1.0)
        convpot = np.clip((td - 283.15) * 0.1, 0.0, 1.0) * lf * heat
        cloud = np.clip((c_ls + 0.45 * convpot * (1.0 - c_ls)) * fl.cloud, 0.0, 1.0)
        dry = 1.0 + 1.5 * np.clip(0.7 - rh_env, 0.0, 0.4)
        diurnal = self.diurnal_amp * dry * (1.0 - 0.6 * cloud) * (0.3 + 0.7 * noon) * shape
        t2m = t_mean2 + diurnal
        d2m = np.minimum(td, t2m)

        # Precipitation (mm/h): only where the cloud cover exceeds 80 %.
        wet = np.clip((cloud - 0.8) * 5.0, 0.0, 1.0)
        strat = 1.5 * wet * np.sqrt(wet)
        conv = 6.0 * convpot * convpot * wet
        rate = (strat + conv) * fl.precip
        snowfrac = np.clip((275.15 - t2m) * 0.5, 0.0, 1.0)
        snow = rate * snowfrac
        conv_share = conv * fl.precip / np.maximum(rate, 1e-12)

        # Radiation (W m-2): Haurwitz clear sky, reduced by cloud; direct <= global.
        czp = np.maximum(cz, 0.0)
        clear = np.where(cz > 0.0, 1098.0 * czp * np.exp(-0.057 / np.maximum(czp, 0.01)), 0.0)
        clear *= self.clear_alt
        c3 = cloud * cloud * cloud
        ghi = clear * (1.0 - 0.75 * c3 * np.sqrt(cloud))
        clr = 1.0 - cloud
        direct = clear * 0.78 * (1.0 - np.exp(-5.0 * czp)) * clr * clr
        # Albedo: open sea 0.07, snow-free land 0.17, snow-covered land 0.6; snow lies where
        # the daily-mean 2 m temperature is below -2 degC (fully below -7 degC).
        snow_cover = lf * np.clip((271.15 - t_mean2) * 0.2, 0.0, 1.0)
        albedo = 0.07 * (1.0 - lf) + 0.17 * (lf - snow_cover) + 0.6 * snow_cover
        net = ghi * (1.0 - albedo)

        # 10 m wind: geostrophic, slowed and turned by friction, mixed down by day over land.
        mix = 1.0 + 0.15 * shape * lf
        u10 = (ug * self.k_cos - vg * self.k_sin) * mix
        v10 = (ug * self.k_sin + vg * self.k_cos) * mix
        ws10 = np.hypot(u10, v10)

        # CAPE (J/kg): warm, humid afternoons over land; gusts above the mean wind.
        moist_c = np.clip((d2m - 279.15) * (1.0 / 14.0), 0.0, 1.4)
        cape = (fl.cape * 2600.0) * moist_c * np.sqrt(moist_c) * (self.cape_base
                                                                   + 0.75 * heat * lf)
        gust = ws10 * (1.3 + 0.25 * heat * lf) + 1.0 + 0.002 * cape * np.minimum(rate, 1.0)

        out = {
            "t2m": t2m, "d2m": d2m, "msl": msl, "t_sl": t_sl, "diurnal": diurnal,
            "ug": ug, "vg": vg, "u10": u10, "v10": v10, "shape": shape,
            # Overcast is 99.99 %: 100 % would decode a hair above 100 after 16-bit packing.
            "tcc": 99.99 * cloud, "rate": rate, "snow": snow, "conv_share": conv_share,
            "ghi": ghi, "direct": direct, "net": net, "gust": gust, "cape": cape,
            # Low cloud (ground to 800 hPa): a share of the total cover, larger in the moist
            # large-scale systems (fronts, warm conveyor belts), at most 90 % of it.
            "lcc": 99.99 * cloud * (0.3 + 0.6 * x_ls),
        }
        if full:
            rh2 = relative_humidity(t2m, d2m)
            vis_h = 50000.0 * np.sqrt(np.clip(1.0 - rh2, 2e-5, 1.0))
            vis_p = 45000.0 / (1.0 + 4.0 * rate * (1.0 + 3.0 * snowfrac))
            out["vis"] = np.clip(np.minimum(np.minimum(vis_h, vis_p), 45000.0), 50.0, 80000.0)
        return out

    # -- heights above ground and pressure levels ------------------------------------------

    def profile(self, s: Mapping[str, np.ndarray], heights: tuple[int, ...],
                levels: tuple[int, ...], model_levels: bool = False) -> dict[Any, np.ndarray]:
        """The column above the surface: winds at ``heights`` above ground, fields on the
        pressure ``levels``, and (``model_levels``) the wind on the model's full levels.

        One wind profile serves all three: the log profile of the 10 m wind up to 200 m above
        ground (stability-dependent exponent at night), blended between 200 and 1400 m into
        the geostrophic wind with its thermal shear aloft. So model-level, height-level and
        pressure-level winds are samples of the same column."""
        out: dict[Any, np.ndarray] = {}
        t_sl, msl, orog = s["t_sl"], s["msl"], self.orog
        out["sp"] = msl * (1.0 - LAPSE * orog / t_sl) ** (G / (RD * LAPSE))
        night = np.clip(-s["shape"], 0.0, 1.0)
        expo = 1.0 + 0.35 * night * self.landfrac
        log10 = np.log(10.0 / self.z0)

        def ratio(z: np.ndarray | float) -> np.ndarray:
            return (np.log(np.maximum(z, 10.0) / self.z0) / log10) ** expo

        def wind(zag: np.ndarray, p_hpa: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
            """The wind at ``zag`` m above ground where the pressure is ``p_hpa``."""
            rz = ratio(np.clip(zag, 10.0, 300.0))
            w = np.clip((zag - 200.0) / 1200.0, 0.0, 1.0)
            shear = 1.0 + 0.4 * (1000.0 - p_hpa) / 300.0
            u = (1.0 - w) * s["u10"] * rz + w * (s["ug"] * shear + 0.012 * (1000.0 - p_hpa))
            v = (1.0 - w) * s["v10"] * rz + w * s["vg"] * shear
            return u, v

        for z in heights:
            rz = ratio(float(z))
            out[("u", z)] = s["u10"] * rz
            out[("v", z)] = s["v10"] * rz
        for p in levels:
            zp = t_sl / LAPSE * (1.0 - (p * 100.0 / msl) ** (RD * LAPSE / G))
            zag = zp - orog
            u, v = wind(zag, float(p))
            out[("z_pl", p)] = zp
            out[("t_pl", p)] = (t_sl - LAPSE * zp
                                + s["diurnal"] * np.exp(-np.maximum(zag, 0.0) / 500.0))
            out[("u_pl", p)] = u
            out[("v_pl", p)] = v
        if model_levels:
            for lv, zag in self.full_agl.items():
                # Hypsometric pressure at the level (the inverse of z_pl above).
                p_hpa = 0.01 * msl * (1.0 - LAPSE * (orog + zag) / t_sl) ** (G / (RD * LAPSE))
                out[("u_ml", lv)], out[("v_ml", lv)] = wind(zag, p_hpa)
        return out


# ------------------------------------------------------------------------------------------
# Time integration: the quantities of every output time of a run


# ------------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """Everything the writers need at one output time (minutes after the init time)."""

    minute: int
    main: bool  # a step of the run (not only a 15-minute step)
    q: dict[Any, np.ndarray]  # canonical quantities
    interval_start: int | None = None  # start of the gust's window (None at step 0)


def integrate(weather: Weather, init: datetime, main_min: list[int], fine_min: list[int],
              heights: tuple[int, ...], levels: tuple[int, ...],
              gust_window: int | Callable[[int], int] | None = None,
              model_level_min: set[int] | None = None) -> Iterator[Snapshot]:
    """Walk the output times of a run in order (``main_min``: the steps, ``fine_min``: the
    15-minute steps), integrating the fluxes over sub-steps of at most ``SUB_STEP_MIN``
    minutes (midpoint rule): accumulations and means since the start, and the gust's maximum
    since the previous step, or over the last ``gust_window`` minutes before the step (a
    number, or a function of the step's minute) if that is shorter (DWD's VMAX_10M covers the
    last hour even where steps are 3-hourly; IFS's 10fg ECMWF's post-processing step).
    At every step after the first, the precipitation (``tp_int``) and mean global radiation
    (``ghi_int_avg``) of the interval since the previous step too (JMA's hourly windows).
    The wind on the model levels is computed at the steps in ``model_level_min`` (none if
    None)."""
    t0 = hours_since_epoch(init)
    shape = weather.orog.shape
    acc = {k: np.zeros(shape) for k in ("tp", "sf", "sf_ls", "sf_cv", "ghi", "dir", "net")}
    gusts: list[tuple[float, np.ndarray]] = []  # (minute, gust) since the previous step
    since = {k: np.zeros(shape) for k in ("tp", "ghi")}  # since the previous step
    mains = set(main_min)
    prev, prev_main = 0, None
    for minute in sorted(set(main_min) | set(fine_min)):
        if minute > prev:
            n = math.ceil((minute - prev) / SUB_STEP_MIN)
            dt = (minute - prev) / n
            for i in range(n):
                mid = prev + (i + 0.5) * dt
                s = weather.surface(t0 + mid / 60.0, mid / 60.0, full=False)
                hours_ = dt / 60.0
                acc["tp"] += s["rate"] * hours_
                acc["sf"] += s["snow"] * hours_
                acc["sf_cv"] += s["snow"] * s["conv_share"] * hours_
                acc["ghi"] += s["ghi"] * dt * 60.0
                acc["dir"] += s["direct"] * dt * 60.0
                acc["net"] += s["net"] * dt * 60.0
                since["tp"] += s["rate"] * hours_
                since["ghi"] += s["ghi"] * dt * 60.0
                gusts.append((mid, s["gust"]))
        acc["sf_ls"] = acc["sf"] - acc["sf_cv"]
        q: dict[Any, np.ndarray] = {
            "tp_acc": acc["tp"].copy(), "sf_acc": acc["sf"].copy(),
            "sf_ls_acc": acc["sf_ls"].copy(), "sf_cv_acc": acc["sf_cv"].copy(),
            "ghi_acc": acc["ghi"].copy(), "dir_acc": acc["dir"].copy(),
            "dif_acc": acc["ghi"] - acc["dir"], "net_acc": acc["net"].copy(),
        }
        secs = minute * 60.0
        for key in ("ghi", "dir", "dif", "net"):
            q[f"{key}_avg"] = q[f"{key}_acc"] / secs if secs > 0 else np.zeros(shape)
        main = minute in mains
        snap = Snapshot(minute, main, q)
        if main:
            s = weather.surface(t0 + minute / 60.0, minute / 60.0)
            if prev_main is not None:
                window = gust_window(minute) if callable(gust_window) else gust_window
                start = prev_main if window is None else max(prev_main, minute - window)
                gmax = s["gust"].copy()
                for mid, g in gusts:
                    if mid > start:
                        np.maximum(gmax, g, out=gmax)
                q["gust"] = gmax
                snap.interval_start = start
                q["tp_int"] = since["tp"].copy()
                q["ghi_int_avg"] = since["ghi"] / ((minute - prev_main) * 60.0)
            q.update({k: s[k] for k in ("t2m", "d2m", "msl", "u10", "v10", "tcc", "lcc", "vis",
                                        "cape")})
            q["gust_inst"] = s["gust"]  # the gust at the step itself (GFS)
            # Relative humidity (%) of the 2 m (JMA: 1.5 m) air, from its dewpoint.
            q["rh2m"] = np.clip(100.0 * relative_humidity(s["t2m"], s["d2m"]), 0.0, 100.0)
            q["orog"] = weather.orog
            q.update({("hhl", lv): h for lv, h in weather.hhl.items()})
            q.update(weather.profile(s, heights, levels, model_levels=bool(
                model_level_min and minute in model_level_min)))
            gusts = []
            since = {k: np.zeros(shape) for k in since}
            prev_main = minute
        prev = minute
        yield snap

