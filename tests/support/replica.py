"""A replica of the real upstream trees, filled with a known atmosphere.

Written from the upstreams' own descriptions and real files, independently of pointcast's
sample source and tables (``src/pointcast/sources/``): nothing here imports them. Each writer
encodes a field the way that upstream does, with ecCodes:

* ECMWF open data (IFS): ``<YYYYMMDD>/<HH>z/ifs/0p25/oper/<YYYYMMDDHH>0000-<step>h-oper-fc.grib2``
  and its ``.index`` (JSON lines: MARS keys, ``_offset``, ``_length``); centre ecmf with the
  MARS local section (class od, stream oper, type fc); CCSDS packing; rows from 90 N, columns
  from 180 W. Steps 0-144 h by 3, 150-360 h by 6. ``tcc`` as paramId 164 in 0-1 (ECMWF's
  encoding since 20 November 2025, see Open-Meteo issue #1586); ``tp``/``sf`` m and
  ``ssrd``/``fdir`` J m-2 accumulated from the start; the gust ``10fg`` (paramId 49, a maximum)
  over ECMWF's post-processing period: the last hour up to 90 h, the last 3 h up to 144 h,
  the last 6 h after; ``mucape``; ``z`` at step 0; t/u/v/gh on pressure levels.
* NOAA GFS 0.25: ``gfs.<YYYYMMDD>/<HH>/atmos/gfs.t<HH>z.pgrb2.0p25.f<FFF>`` with wgrib2's
  ``.idx``; centre kwbc, master tables 2, local tables 1, complex packing with spatial
  differencing; columns from 0 E. APCP in 6-hour-reset buckets plus the run total from 0 h
  after the first bucket (real files carry both, "6-12 hour acc" and "0-12 hour acc"); DSWRF
  as NCEP's local 0/4/192, a 6-hour-reset average (the real sample of that kind in
  ``tests/data/real-grib``); TCDC both instantaneous and as a 6-hour-reset average; GUST
  instantaneous; HGT surface in every file.
* DWD v1 (ICON-EU, ICON-D2): ``v1/m/<model>/p/<PARAM>/[lvt1/<t>/lv1/<l>/]r/<YYYY-MM-DDTHH:MM>/s/
  PT<hhh>H<mm>M.grib2``, one message per file, native unstructured grid (template 3.101, grid
  numbers 27 and 47, a UUID) with CLAT/CLON; centre edzw, subcentre 255, tables 19/1 (as the
  real ICON samples); steps in minutes; CCSDS packing. ICON-EU has 74 levels (75 half levels),
  ICON-D2 65 (66). Pressure levels are DWD's (ICON-EU 1000, 950, 925, 850, 700 ..., ICON-D2
  1000, 975, 950, 850, 700 ...: ICON-D2 has no 925 hPa). The lowest model levels only are
  written (U/V and HHL), enough for the lowest kilometre and more, and HHL of half level 1
  (the top, which carries the column's level count as every HHL message does).
* JMA MSM Lsurf as RISH serves it: ``<YYYY>/<MM>/<DD>/Z__C_RJTD_<YYYYMMDDhh>0000_MSM_GPV_Rjp_Lsurf_
  FH<aa>-<bb>_grib2.bin``: one GRIB2 message per forecast time holding all its fields (sections
  1 and 3 once, 4-7 repeated per field), centre rjtd, simple packing; 1.5 m TMP/RH, TCDC/LCDC
  in %, APCP over the past hour, DSWRF the past hour's mean (none at the analysis time).

* The ensembles, every member (``perturbation``: the atmosphere with a known offset of the
  temperature and factors of the wind and the precipitation), as GRIB2 ensemble products
  (template 4.1, 4.11 for the accumulations; ``perturbationNumber``,
  ``numberOfForecastsInEnsemble``, ``typeOfEnsembleForecast`` 3 for a perturbed member):
  ECMWF ENS's 50 perturbed members in ``.../enfo/<YYYYMMDDHH>0000-<step>h-enfo-ef.grib2`` with
  its ``.index`` (MARS ``type`` pf, ``number``) on the IFS's grid and steps, the control being the
  IFS's ``oper-fc`` file of the step (ECMWF's dissemination since IFS cycle 50r1: ``enfo:cf`` is
  discontinued); NOAA GEFS ``gefs.<YYYYMMDD>/<HH>/atmos/pgrb2sp25/<gec00|gepNN>.t<HH>z.pgrb2s.
  0p25.f<FFF>``, a file a member and step to 240 h by 3, wgrib2's ``.idx`` with the member in a
  seventh field (``ENS=low-res ctl``, ``ENS=+N``), APCP in 6-hour-reset buckets; DWD ICON-EU-EPS
  in the legacy tree ``icon-eu-eps/grib/<HH>/<param>/icon-eu-eps_europe_icosahedral_single-level_
  <YYYYMMDDHH>_<FFF>_<param>.grib2.bz2``, the 40 members in a bzip2 file, native grid 37 with
  CLAT/CLON in ``..._time-invariant_<YYYYMMDDHH>_<clat|clon>.grib2.bz2``, hourly to 48 h,
  3-hourly to 72 h, 6-hourly to 120 h.

Grids are coarse (the encodings and layouts are the real ones): fields are linear in latitude
and in a longitude ``lam`` that folds at 90 E and 90 W (grid lines of every grid here), so
bilinear interpolation reproduces them exactly, across the dateline and Greenwich too.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import eccodes
import numpy as np

from pointcast.publish.durable import replace_bytes

UTC = UTC
G = 9.80665
RD = 287.04749  # J kg-1 K-1 (MetPy's dry-air gas constant)
GAMMA = 0.0065  # K m-1: the atmosphere's lapse rate at every height
Z0 = 0.1  # m: roughness length of the log wind profile
SHEAR_GAIN = 0.5  # the wind profile's departure from the log law aloft (``Atmosphere.profile``)
EXPONENT = G / (RD * GAMMA)


# ------------------------------------------------------------------------------------------
# The atmosphere: every value is a closed-form function of latitude, longitude and time
# (hours since T0), the same for every model.
# ------------------------------------------------------------------------------------------


def lam(lon):
    """Longitude folded into [-90, 90]: equal to lon between 90 W and 90 E, continuous round
    the globe, with its kinks on the 90 E and 90 W meridians."""
    w = np.mod(np.asarray(lon, dtype=float) + 90.0, 360.0) - 180.0
    return 90.0 - np.abs(w)


@dataclass(frozen=True)
class Atmosphere:
    t0: datetime  # hour 0 of the atmosphere (the runs' start)

    # -- static fields ------------------------------------------------------------------

    def orog(self, lat, lon):
        return 300.0 + 3.0 * lat + 2.0 * lam(lon)

    # -- fields at sea level and their column ---------------------------------------------

    def t_sea(self, lat, lon, t):
        return 290.0 - 0.12 * lat + 0.01 * lam(lon) + 0.01 * t

    def p_sea(self, lat, lon, t):
        return 101300.0 + 15.0 * lat + 3.0 * lam(lon) - 1.5 * t

    def temperature(self, lat, lon, t, z):
        """Air temperature (K) at ``z`` m above sea level."""
        return self.t_sea(lat, lon, t) - GAMMA * z

    def pressure(self, lat, lon, t, z):
        """Pressure (Pa) at ``z`` m above sea level (hydrostatic, constant lapse rate)."""
        t0 = self.t_sea(lat, lon, t)
        return self.p_sea(lat, lon, t) * ((t0 - GAMMA * z) / t0) ** EXPONENT

    def height_of(self, lat, lon, t, p):
        """Height (m above sea level) of the pressure ``p`` (Pa)."""
        t0 = self.t_sea(lat, lon, t)
        return t0 / GAMMA * (1.0 - (p / self.p_sea(lat, lon, t)) ** (1.0 / EXPONENT))

    def depression(self, lat, lon):
        """Dewpoint depression (K), the same at every height."""
        return 5.0 + 0.02 * lat + 0.005 * lam(lon)

    # -- wind: a profile over the model ground ---------------------------------------------

    def u10(self, lat, lon, t):
        return 4.0 + 0.04 * lat + 0.01 * lam(lon) + 0.004 * t

    def v10(self, lat, lon, t):
        return -2.0 + 0.03 * lat - 0.02 * lam(lon) - 0.003 * t

    @staticmethod
    def profile(h):
        """Wind at ``h`` m above the ground relative to 10 m: the log law (roughness Z0) times
        a factor growing from 1 at 10 m to 1.5 aloft (e-folding 150 m), so that the profile is
        not a straight line in ln(z): interpolating between levels 20-40 m apart is within
        0.1 m/s of it, between 10 m and levels 600 m up is not."""
        h = np.maximum(h, 10.0)
        gain = 1.0 + SHEAR_GAIN * (1.0 - np.exp(-(h - 10.0) / 150.0))
        return np.log(h / Z0) / math.log(10.0 / Z0) * gain

    def gust(self, lat, lon, t):
        """Instantaneous 10 m gust: linear in space, a 12-hour triangle wave in time."""
        tri = np.abs(np.mod(t, 12.0) - 6.0) / 6.0
        return 12.0 + 0.03 * lat + 0.01 * lam(lon) + 3.0 * tri

    def gust_max(self, lat, lon, a, b):
        """Maximum gust over (a, b] hours: at an end or at a kink (every 6 h) in between."""
        cands = [a, b] + [k * 6.0 for k in range(math.floor(a / 6) + 1, math.ceil(b / 6))]
        return np.max([self.gust(lat, lon, np.full(np.shape(lat), c)) for c in cands], axis=0)

    # -- clouds, visibility, CAPE ---------------------------------------------------------

    def tcc(self, lat, lon, t):
        """Total cloud cover, %."""
        return 45.0 + 0.35 * lat + 0.1 * lam(lon) + 0.03 * t

    def lcc(self, lat, lon, t):
        return 0.5 * self.tcc(lat, lon, t)

    def vis(self, lat, lon, t):
        return 30000.0 + 100.0 * lat + 0.0 * t

    def cape(self, lat, lon, t):
        return 200.0 + 2.0 * lat + 0.0 * t

    # -- precipitation: a rate constant over 6-hour windows, wet in every third one --------

    @staticmethod
    def wet(t):
        return (np.floor(np.asarray(t, dtype=float) / 6.0) % 3 == 1).astype(float)

    def rate(self, lat, lon):
        """Precipitation rate in a wet window, mm/h (kg m-2 h-1)."""
        return 1.0 + 0.006 * lat + 0.002 * lam(lon)

    SNOW_SHARE = 0.1  # snowfall as a share of precipitation (water equivalent)

    def precip(self, lat, lon, a, b):
        """Precipitation (kg m-2) over (a, b] hours."""
        return self.rate(lat, lon) * (self._wet_hours(b) - self._wet_hours(a))

    @classmethod
    def _wet_hours(cls, t):
        """Wet hours in (0, t]."""
        full, rest = divmod(t, 18.0)  # a period of three windows, one of them (6-12 h) wet
        return full * 6.0 + min(max(rest - 6.0, 0.0), 6.0)

    # -- radiation: clear-sky shape times a clearness, constant over each quarter hour -----

    def clearness(self, lat, lon):
        return 0.75 + 0.001 * lat + 0.0005 * lam(lon)

    DIRECT_SHARE = 0.6
    ALBEDO = 0.2

    def _cos_zenith(self, lat, lon, t):
        """Solar zenith cosine (Spencer 1971 declination and equation of time)."""
        when = self.t0 + timedelta(hours=float(t))
        day = when.timetuple().tm_yday
        gam = 2.0 * math.pi / 365.0 * (day - 1 + (when.hour - 12) / 24.0)
        decl = (0.006918 - 0.399912 * math.cos(gam) + 0.070257 * math.sin(gam)
                - 0.006758 * math.cos(2 * gam) + 0.000907 * math.sin(2 * gam)
                - 0.002697 * math.cos(3 * gam) + 0.00148 * math.sin(3 * gam))
        eqt = 229.18 * (0.000075 + 0.001868 * math.cos(gam) - 0.032077 * math.sin(gam)
                        - 0.014615 * math.cos(2 * gam) - 0.040849 * math.sin(2 * gam))
        minutes = when.hour * 60 + when.minute + when.second / 60.0
        hour_angle = np.radians((minutes + eqt + 4.0 * np.asarray(lon)) / 4.0 - 180.0)
        phi = np.radians(lat)
        return np.sin(phi) * math.sin(decl) + np.cos(phi) * math.cos(decl) * np.cos(hour_angle)

    def ssrd_quarters(self, lat, lon, hours: float) -> np.ndarray:
        """Global radiation (W m-2) of each quarter hour from 0 to ``hours``: shape
        (quarters, *lat.shape); the value of a quarter is the flux at its middle."""
        k = self.clearness(lat, lon)
        mids = (np.arange(int(round(hours * 4))) + 0.5) / 4.0
        out = np.empty((len(mids),) + np.shape(lat))
        for i, m in enumerate(mids):
            out[i] = 1000.0 * k * np.maximum(self._cos_zenith(lat, lon, m), 0.0) ** 1.2
        return out

    def ssrd_mean(self, quarters: np.ndarray, a: float, b: float) -> np.ndarray:
        """Mean global radiation over (a, b] hours from ``ssrd_quarters``."""
        return quarters[int(round(a * 4)):int(round(b * 4))].mean(axis=0)


# ------------------------------------------------------------------------------------------
# GRIB2 helpers
# ------------------------------------------------------------------------------------------


_PROTOTYPES: dict[tuple, int] = {}


TIME_KEYS = ("forecastTime", "stepRange")


def encode(base: int, keys: list[tuple[str, object]], values: np.ndarray, bits: int = 16) -> bytes:
    """A message: ``base`` with ``keys`` set in order, then ``values`` in at most ``bits``
    bits. A handle per kind of message (every key but the time) is kept and reused: only the
    time and values change (and the bit width, which complex packing narrows to the last
    values')."""
    times = [kv for kv in keys if kv[0] in TIME_KEYS]
    keys = [kv for kv in keys if kv[0] not in TIME_KEYS]
    h = _PROTOTYPES.get((base, *keys))
    if h is None:
        h = _PROTOTYPES[(base, *keys)] = _with(eccodes.codes_clone(base), keys)
    _with(h, times + [("bitsPerValue", bits)])
    eccodes.codes_set_values(h, np.ascontiguousarray(values, dtype=float).ravel())
    return eccodes.codes_get_message(h)


def _with(h: int, keys) -> int:
    for k, v in keys:
        if isinstance(v, str):
            eccodes.codes_set_string(h, k, v)
        else:
            eccodes.codes_set(h, k, v)
    return h


def release_prototypes() -> None:
    for h in _PROTOTYPES.values():
        eccodes.codes_release(h)
    _PROTOTYPES.clear()


def regular_base(centre: str, lat_first: float, lat_last: float, lon_first: float,
                 lon_last: float, dlat: float, dlon: float, init: datetime,
                 extra: list[tuple[str, object]] = ()) -> tuple[int, np.ndarray, np.ndarray]:
    """A GRIB2 handle on a regular lat/lon grid and the grid's (lat, lon) arrays (rows as
    written: from ``lat_first``)."""
    h = eccodes.codes_grib_new_from_samples("GRIB2")
    nlat = int(round(abs(lat_last - lat_first) / dlat)) + 1
    nlon = int(round((lon_last - lon_first) / dlon)) + 1
    for k, v in [("centre", centre), *extra,
                 ("dataDate", int(f"{init:%Y%m%d}")), ("dataTime", int(f"{init:%H%M}")),
                 ("significanceOfReferenceTime", 1), ("productionStatusOfProcessedData", 0),
                 ("typeOfProcessedData", 1), ("typeOfGeneratingProcess", 2),
                 ("Ni", nlon), ("Nj", nlat),
                 ("latitudeOfFirstGridPointInDegrees", lat_first),
                 ("longitudeOfFirstGridPointInDegrees", lon_first % 360.0),
                 ("latitudeOfLastGridPointInDegrees", lat_last),
                 ("longitudeOfLastGridPointInDegrees", lon_last % 360.0),
                 ("iDirectionIncrementInDegrees", dlon), ("jDirectionIncrementInDegrees", dlat),
                 ("jScansPositively", 0 if lat_first > lat_last else 1)]:
        eccodes.codes_set_string(h, k, v) if isinstance(v, str) else eccodes.codes_set(h, k, v)
    step = -dlat if lat_first > lat_last else dlat
    lats = lat_first + step * np.arange(nlat)
    lons = lon_first + dlon * np.arange(nlon)
    lat2, lon2 = np.meshgrid(lats, lons, indexing="ij")
    return h, lat2, lon2


def step_keys(start: float, end: float | None, unit: str = "h", stat: int | None = None,
              ) -> list[tuple[str, object]]:
    """Time keys: an instant at ``start`` (``end`` None) or a statistic over (start, end]."""
    code = {"h": 1, "m": 0}[unit]
    if end is None:
        return [("productDefinitionTemplateNumber", 0), ("indicatorOfUnitOfTimeRange", code),
                ("forecastTime", int(start))]
    return [("productDefinitionTemplateNumber", 8), ("typeOfStatisticalProcessing", stat),
            ("indicatorOfUnitOfTimeRange", code), ("stepUnits", unit),
            ("stepRange", f"{int(start)}-{int(end)}")]


def param(disc: int, cat: int, num: int) -> list[tuple[str, object]]:
    return [("discipline", disc), ("parameterCategory", cat), ("parameterNumber", num)]


def level(t1: int, v1: float | None = None, s1: int = 0, t2: int = 255, v2: float | None = None,
          s2: int = 0) -> list[tuple[str, object]]:
    keys: list[tuple[str, object]] = [("typeOfFirstFixedSurface", t1)]
    if v1 is not None:
        keys += [("scaleFactorOfFirstFixedSurface", s1), ("scaledValueOfFirstFixedSurface", v1)]
    keys.append(("typeOfSecondFixedSurface", t2))
    if v2 is not None:
        keys += [("scaleFactorOfSecondFixedSurface", s2), ("scaledValueOfSecondFixedSurface", v2)]
    return keys


def hours_of(init: datetime, t0: datetime) -> float:
    return (init - t0) / timedelta(hours=1)


# ------------------------------------------------------------------------------------------
# ECMWF open data
# ------------------------------------------------------------------------------------------

IFS_STEPS = tuple(range(0, 145, 3)) + tuple(range(150, 361, 6))
IFS_LEVELS = (1000, 925, 850, 700, 500)


# MARS names of the parameters (ECMWF's parameter database); 49 is "10fg" whatever its period.
IFS_NAMES = {167: "2t", 168: "2d", 134: "sp", 151: "msl", 165: "10u", 166: "10v",
             228246: "100u", 228247: "100v", 228239: "200u", 228240: "200v", 49: "10fg",
             228: "tp", 144: "sf", 169: "ssrd", 228021: "fdir", 164: "tcc", 3020: "vis",
             228235: "mucape", 129: "z", 130: "t", 131: "u", 132: "v", 156: "gh"}


def ifs_gust_window(step: int) -> int:
    """ECMWF's post-processing period ending at ``step``: 1 h to 90 h, 3 h to 144 h, 6 h after."""
    return 1 if step <= 90 else 3 if step <= 144 else 6


def write_ifs(root: Path, atm: Atmosphere, init: datetime, dres: float = 3.0) -> int:
    base, lat, lon = regular_base("ecmf", 90.0, -90.0, -180.0, 180.0 - dres, dres, dres, init,
                                  [("setLocalDefinition", 1), ("localDefinitionNumber", 1),
                                   ("marsClass", "od"), ("marsType", "fc"),
                                   ("marsStream", "oper"), ("experimentVersionNumber", "0001")])
    eccodes.codes_set(base, "packingType", "grid_ccsds")
    eccodes.codes_set(base, "bitsPerValue", 16)
    h0 = hours_of(init, atm.t0)
    orog = atm.orog(lat, lon)
    quarters = atm.ssrd_quarters(lat, lon, h0 + max(IFS_STEPS))
    run = root / f"{init:%Y%m%d}" / f"{init:%H}z" / "ifs" / "0p25" / "oper"
    run.mkdir(parents=True, exist_ok=True)
    n = 0
    for step in IFS_STEPS:
        t = h0 + step
        msgs: list[tuple[dict, bytes]] = []

        def add(pid, vals, *, lev=None, tol=None, rng=None, levtype="sfc", step=step, msgs=msgs):
            keys = [("paramId", pid)] if tol is None else [("typeOfLevel", tol), ("level", lev),
                                                            ("paramId", pid)]
            keys += [("stepRange", rng or str(step))]
            msg = encode(base, keys, vals)
            entry = {"domain": "g", "date": f"{init:%Y%m%d}", "time": f"{init:%H%M}",
                     "expver": "0001", "class": "od", "type": "fc", "stream": "oper",
                     "step": str(step), "levtype": levtype,
                     "param": IFS_NAMES[pid]}
            if lev is not None and levtype == "pl":
                entry["levelist"] = str(lev)
            msgs.append((entry, msg))

        t2 = atm.temperature(lat, lon, t, orog + 2.0)
        add(167, t2)
        add(168, t2 - atm.depression(lat, lon))
        add(134, atm.pressure(lat, lon, t, orog))
        add(151, atm.p_sea(lat, lon, t))
        u, v = atm.u10(lat, lon, t), atm.v10(lat, lon, t)
        add(165, u)
        add(166, v)
        for pu, pv, hgt in ((228246, 228247, 100.0), (228239, 228240, 200.0)):
            add(pu, u * atm.profile(hgt))
            add(pv, v * atm.profile(hgt))
        if step > 0:
            w = ifs_gust_window(step)
            add(49, atm.gust_max(lat, lon, t - w, t), rng=f"{step - w}-{step}")
        acc = atm.precip(lat, lon, h0, t) / 1000.0  # m from the start
        add(228, acc, rng=f"0-{step}")
        add(144, atm.SNOW_SHARE * acc, rng=f"0-{step}")
        joules = quarters[int(h0 * 4):int(t * 4)].sum(axis=0) * 900.0
        add(169, joules, rng=f"0-{step}")
        add(228021, atm.DIRECT_SHARE * joules, rng=f"0-{step}")
        add(164, atm.tcc(lat, lon, t) / 100.0)  # 0-1
        add(3020, atm.vis(lat, lon, t))
        add(228235, atm.cape(lat, lon, t))
        if step == 0:
            add(129, orog * G)
        for p in IFS_LEVELS:
            z = atm.height_of(lat, lon, t, p * 100.0)
            prof = atm.profile(z - orog)
            add(130, atm.temperature(lat, lon, t, z), lev=p, tol="isobaricInhPa", levtype="pl")
            add(131, u * prof, lev=p, tol="isobaricInhPa", levtype="pl")
            add(132, v * prof, lev=p, tol="isobaricInhPa", levtype="pl")
            add(156, z, lev=p, tol="isobaricInhPa", levtype="pl")
        stem = run / f"{init:%Y%m%d%H}0000-{step}h-oper-fc"
        blob, lines, off = bytearray(), [], 0
        for entry, msg in msgs:
            lines.append(json.dumps({**entry, "_offset": off, "_length": len(msg)}))
            blob += msg
            off += len(msg)
        stem.with_suffix(".grib2").write_bytes(bytes(blob))
        stem.with_suffix(".index").write_text("\n".join(lines) + "\n")
        n += len(msgs)
    release_prototypes()
    eccodes.codes_release(base)
    return n


# ------------------------------------------------------------------------------------------
# NOAA GFS
# ------------------------------------------------------------------------------------------

GFS_STEPS = tuple(range(0, 121)) + tuple(range(123, 385, 3))  # hourly to 120 h, 3-hourly to 384 h


def write_gfs(root: Path, atm: Atmosphere, init: datetime, dres: float = 3.0,
              last: int = max(GFS_STEPS)) -> int:
    """The GFS run at ``init`` to step ``last`` (h)."""
    base, lat, lon = regular_base("kwbc", 90.0, -90.0, 0.0, 360.0 - dres, dres, dres, init,
                                  [("subCentre", 0), ("tablesVersion", 2),
                                   ("localTablesVersion", 1),
                                   ("generatingProcessIdentifier", 96)])
    eccodes.codes_set(base, "packingType", "grid_complex_spatial_differencing")
    eccodes.codes_set(base, "bitsPerValue", 24)
    h0 = hours_of(init, atm.t0)
    orog = atm.orog(lat, lon)
    quarters = atm.ssrd_quarters(lat, lon, h0 + last)
    run = root / f"gfs.{init:%Y%m%d}" / f"{init:%H}" / "atmos"
    run.mkdir(parents=True, exist_ok=True)
    n = 0
    for step in (s for s in GFS_STEPS if s <= last):
        t = h0 + step
        when = "anl" if step == 0 else f"{step} hour fcst"
        msgs: list[tuple[str, str, str, bytes]] = []

        def add(name, where, keys, vals, time=None, *, step=step, when=when, msgs=msgs):
            msgs.append((name, where, time or when,
                         encode(base, keys + step_keys(step, None) if time is None else keys, vals,
                                bits=24)))

        hag = lambda m: level(103, m)  # noqa: E731
        u, v = atm.u10(lat, lon, t), atm.v10(lat, lon, t)
        t2 = atm.temperature(lat, lon, t, orog + 2.0)
        add("PRMSL", "mean sea level", param(0, 3, 1) + level(101), atm.p_sea(lat, lon, t))
        add("PRES", "surface", param(0, 3, 0) + level(1), atm.pressure(lat, lon, t, orog))
        add("HGT", "surface", param(0, 3, 5) + level(1), orog)
        add("TMP", "850 mb", param(0, 0, 0) + level(100, 85000),
            atm.temperature(lat, lon, t, atm.height_of(lat, lon, t, 85000.0)))
        add("TMP", "2 m above ground", param(0, 0, 0) + hag(2), t2)
        add("DPT", "2 m above ground", param(0, 0, 6) + hag(2), t2 - atm.depression(lat, lon))
        for m in (10, 80, 100):
            add("UGRD", f"{m} m above ground", param(0, 2, 2) + hag(m), u * atm.profile(m))
            add("VGRD", f"{m} m above ground", param(0, 2, 3) + hag(m), v * atm.profile(m))
        add("GUST", "surface", param(0, 2, 22) + level(1), atm.gust(lat, lon, t))
        add("VIS", "surface", param(0, 19, 0) + level(1), atm.vis(lat, lon, t))
        add("CAPE", "surface", param(0, 7, 6) + level(1), atm.cape(lat, lon, t))
        add("CAPE", "180-0 mb above ground", param(0, 7, 6) + level(108, 18000, 0, 108, 0),
            atm.cape(lat, lon, t) * 0.8)
        add("TCDC", "entire atmosphere", param(0, 6, 1) + level(10), atm.tcc(lat, lon, t))
        if step > 0:
            start = (step - 1) // 6 * 6
            window = f"{start}-{step} hour"
            add("APCP", "surface", param(0, 1, 8) + level(1) + step_keys(start, step, stat=1),
                atm.precip(lat, lon, h0 + start, t), f"{window} acc fcst")
            if start > 0:  # and the total from the run's start
                add("APCP", "surface", param(0, 1, 8) + level(1) + step_keys(0, step, stat=1),
                    atm.precip(lat, lon, h0, t), f"0-{step} hour acc fcst")
            add("DSWRF", "surface", param(0, 4, 192) + level(1) + step_keys(start, step, stat=0),
                atm.ssrd_mean(quarters, h0 + start, t), f"{window} ave fcst")
            add("TCDC", "entire atmosphere", param(0, 6, 1) + level(10)
                + step_keys(start, step, stat=0),
                np.mean([atm.tcc(lat, lon, x) for x in np.arange(h0 + start, t, 0.25) + 0.125],
                        axis=0), f"{window} ave fcst")
        path = run / f"gfs.t{init:%H}z.pgrb2.0p25.f{step:03d}"
        blob, lines = bytearray(), []
        for i, (name, where, time, msg) in enumerate(msgs):
            lines.append(f"{i + 1}:{len(blob)}:d={init:%Y%m%d%H}:{name}:{where}:{time}:")
            blob += msg
        path.write_bytes(bytes(blob))
        Path(f"{path}.idx").write_text("\n".join(lines) + "\n")
        n += len(msgs)
    release_prototypes()
    eccodes.codes_release(base)
    return n


# ------------------------------------------------------------------------------------------
# DWD ICON, v1 tree, native grids
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IconModel:
    name: str
    grid_number: int
    lat: tuple[float, float]
    lon: tuple[float, float]
    spacing: float  # degrees between the replica's cells
    levels: int  # full levels (half levels: levels + 1)
    written: int  # the lowest model levels written (the real tree has all of them)
    pressure: tuple[int, ...]  # hPa, a subset of DWD's
    hourly_to: int
    horizon: int
    quarter_hours: bool  # ICON-D2's 15-minute precipitation and radiation


ICON_EU = IconModel("icon-eu", 27, (29.5, 70.5), (-23.5, 62.5), 1.0, 74, 20,
                    (1000, 950, 925, 850, 700, 500), 78, 120, False)
ICON_D2 = IconModel("icon-d2", 47, (43.18, 58.08), (-3.94, 20.34), 0.4, 65, 16,
                    (1000, 975, 950, 850, 700, 500), 48, 48, True)


TOP_M = 22000.0  # m above sea level: ICON-D2's and ICON-EU's model top (half level 1)


def icon_half_heights(n_full: int, written: int) -> dict[int, float]:
    """Height above ground of half levels (DWD numbering, n_full + 1 = the ground) for the
    lowest ``written`` + 1 of them: a 20 m lowest layer, each layer 25 % thicker upwards
    (about ICON-D2's: 8 layers reach 400 m)."""
    out, z = {n_full + 1: 0.0}, 0.0
    for i in range(written):
        z += 20.0 * 1.25 ** i
        out[n_full - i] = z
    return out


def icon_cells(model: IconModel) -> tuple[np.ndarray, np.ndarray]:
    """Cell centres: a lattice with every other row shifted half a spacing (triangles)."""
    lats = np.arange(model.lat[0], model.lat[1] + 1e-9, model.spacing)
    rows = []
    for i, la in enumerate(lats):
        lo = np.arange(model.lon[0] + (model.spacing / 2 if i % 2 else 0.0),
                       model.lon[1] + 1e-9, model.spacing)
        rows.append(np.stack([np.full_like(lo, la), lo]))
    cells = np.concatenate(rows, axis=1)
    return cells[0], cells[1]


def v1_path(model: str, name: str, init: datetime, minutes: int, lvt: int | None = None,
            lv: int | None = None) -> str:
    lv_part = f"lvt1/{lvt}/lv1/{lv}/" if lvt is not None else ""
    return (f"v1/m/{model}/p/{name}/{lv_part}r/{init:%Y-%m-%dT%H:%M}/s/"
            f"PT{minutes // 60:03d}H{minutes % 60:02d}M.grib2")


def write_icon(root: Path, atm: Atmosphere, init: datetime, model: IconModel,
               last: int | None = None) -> int:
    """The ICON run at ``init`` in DWD's v1 tree, to step ``last`` (h; the model's horizon)."""
    lat, lon = icon_cells(model)
    h = eccodes.codes_grib_new_from_samples("GRIB2")
    for k, v in [("centre", "edzw"), ("subCentre", 255), ("tablesVersion", 19),
                 ("localTablesVersion", 1), ("generatingProcessIdentifier", 2),
                 ("significanceOfReferenceTime", 1), ("productionStatusOfProcessedData", 0),
                 ("typeOfProcessedData", 1), ("typeOfGeneratingProcess", 2),
                 ("dataDate", int(f"{init:%Y%m%d}")), ("dataTime", int(f"{init:%H%M}")),
                 ("gridDefinitionTemplateNumber", 101), ("numberOfGridUsed", model.grid_number),
                 ("numberOfGridInReference", 1),
                 ("uuidOfHGrid", uuid.uuid5(uuid.NAMESPACE_URL, model.name).hex),
                 ("packingType", "grid_ccsds"), ("bitsPerValue", 16)]:
        eccodes.codes_set_string(h, k, v) if isinstance(v, str) else eccodes.codes_set(h, k, v)
    h0 = hours_of(init, atm.t0)
    orog = atm.orog(lat, lon)
    half = icon_half_heights(model.levels, model.written)
    last = model.horizon if last is None else last
    quarters = atm.ssrd_quarters(lat, lon, h0 + last)
    n = 0

    def put(name, keys, vals, minutes, lvt=None, lv=None):
        nonlocal n
        path = root / v1_path(model.name, name, init, minutes, lvt, lv)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode(h, keys, vals))
        n += 1

    mins = lambda m: step_keys(m, None, "m")  # noqa: E731
    # Time-invariant fields at step 0
    put("CLAT", param(0, 191, 1) + level(1) + mins(0), lat, 0)
    put("CLON", param(0, 191, 2) + level(1) + mins(0), lon, 0)
    put("HSURF", param(0, 3, 6) + level(1, None, 0, 101) + mins(0), orog, 0)
    # The vertical grid's header (NV = 6: half levels, grid number, UUID), as DWD writes
    # the fields on model levels.
    vgrid = [("nlev", model.levels + 1), ("numberOfVGridUsed", model.grid_number),
             ("uuidOfVGrid", uuid.uuid5(uuid.NAMESPACE_URL, model.name + "/vertical").hex)]
    hybrid = [("genVertHeightCoords", 1), ("NV", 6)]
    # HHL of every half level is published; the lowest ones are written, and half level 1
    # (the model top, flat above the SLEVE decay), which every vertical grid has.
    for k, z in {1: TOP_M - orog, **half}.items():
        put("HHL", param(0, 3, 6) + hybrid + level(150, k, 0, 101) + vgrid + mins(0), orog + z,
            0, 150, k)
    steps = sorted(s for s in set(range(0, model.hourly_to + 1))
                   | set(range(model.hourly_to, model.horizon + 1, 3)) if s <= last)
    minutes = [s * 60 for s in steps]
    if model.quarter_hours:
        quarter_only = [m for m in range(0, last * 60 + 1, 15) if m % 60]
    else:
        quarter_only = []
    for m in sorted(minutes + quarter_only):
        t = h0 + m / 60.0
        whole = m % 60 == 0
        # Accumulations and means since the start (every step, and every quarter hour in D2)
        acc = atm.precip(lat, lon, h0, t)
        put("TOT_PREC", param(0, 1, 52) + level(1) + step_keys(0, m, "m", 1), acc, m)
        put("SNOW_GSP", param(0, 1, 56) + level(1) + step_keys(0, m, "m", 1),
            0.7 * atm.SNOW_SHARE * acc, m)
        put("SNOW_CON", param(0, 1, 55) + level(1) + step_keys(0, m, "m", 1),
            0.3 * atm.SNOW_SHARE * acc, m)
        mean = atm.ssrd_mean(quarters, h0, t) if m else np.zeros_like(lat)
        put("ASWDIR_S", param(0, 4, 198) + level(1) + step_keys(0, m, "m", 0),
            atm.DIRECT_SHARE * mean, m)
        put("ASWDIFD_S", param(0, 4, 199) + level(1) + step_keys(0, m, "m", 0),
            (1.0 - atm.DIRECT_SHARE) * mean, m)
        if not whole:
            continue
        put("ASOB_S", param(0, 4, 9) + level(1) + step_keys(0, m, "m", 0),
            (1.0 - atm.ALBEDO) * mean, m)
        t2 = atm.temperature(lat, lon, t, orog + 2.0)
        u, v = atm.u10(lat, lon, t), atm.v10(lat, lon, t)
        put("T_2M", param(0, 0, 0) + level(103, 2) + mins(m), t2, m)
        put("TD_2M", param(0, 0, 6) + level(103, 2) + mins(m), t2 - atm.depression(lat, lon), m)
        put("PS", param(0, 3, 0) + level(1) + mins(m), atm.pressure(lat, lon, t, orog), m)
        put("PMSL", param(0, 3, 1) + level(101) + mins(m), atm.p_sea(lat, lon, t), m)
        put("U_10M", param(0, 2, 2) + level(103, 10) + mins(m), u, m)
        put("V_10M", param(0, 2, 3) + level(103, 10) + mins(m), v, m)
        if m:
            put("VMAX_10M", param(0, 2, 22) + level(103, 10) + step_keys(m - 60, m, "m", 2),
                atm.gust_max(lat, lon, t - 1.0, t), m)
        put("CLCT", param(0, 6, 1) + level(1) + mins(m), atm.tcc(lat, lon, t), m)
        put("CLCL", param(0, 6, 22) + level(100, 80000, 0, 1) + mins(m), atm.lcc(lat, lon, t), m)
        put("CAPE_ML", param(0, 7, 6) + level(192) + mins(m), atm.cape(lat, lon, t), m)
        for p in model.pressure:
            z = atm.height_of(lat, lon, t, p * 100.0)
            prof = atm.profile(z - orog)
            lev = level(100, p * 100)
            put("T", param(0, 0, 0) + lev + mins(m), atm.temperature(lat, lon, t, z), m, 100, p * 100)
            put("U", param(0, 2, 2) + lev + mins(m), u * prof, m, 100, p * 100)
            put("V", param(0, 2, 3) + lev + mins(m), v * prof, m, 100, p * 100)
            put("FI", param(0, 3, 4) + lev + mins(m), z * G, m, 100, p * 100)
        for k in range(model.levels - model.written + 1, model.levels + 1):
            prof = atm.profile((half[k] + half[k + 1]) / 2.0)
            lev = hybrid + level(150, k, 0, 150, k + 1) + vgrid
            put("U", param(0, 2, 2) + lev + mins(m), u * prof, m, 150, k)
            put("V", param(0, 2, 3) + lev + mins(m), v * prof, m, 150, k)
    release_prototypes()
    eccodes.codes_release(h)
    return n


# ------------------------------------------------------------------------------------------
# JMA MSM, Lsurf
# ------------------------------------------------------------------------------------------

MSM_GROUPS = ((0, 15), (16, 33), (34, 39), (40, 51), (52, 78))


def _sections(msg: bytes) -> list[bytes]:
    """Sections 1-7 of a single-field GRIB2 message, in order."""
    out, pos = [], 16
    while msg[pos:pos + 4] != b"7777":
        n = int.from_bytes(msg[pos:pos + 4], "big")
        out.append(msg[pos:pos + n])
        pos += n
    return out


def multi_field(messages: list[bytes]) -> bytes:
    """One GRIB2 message holding every field of ``messages`` (same sections 1 and 3):
    sections 1 and 3 once, then 4-7 of each field, as JMA writes MSM."""
    first = _sections(messages[0])
    body = b"".join(s for s in first if s[4] in (1, 3))
    for m in messages:
        body += b"".join(s for s in _sections(m) if s[4] in (4, 5, 6, 7))
    total = 16 + len(body) + 4
    head = messages[0][:8] + total.to_bytes(8, "big")
    return head + body + b"7777"


def write_msm(root: Path, atm: Atmosphere, init: datetime, dlat: float = 0.4,
              dlon: float = 0.5) -> int:
    base, lat, lon = regular_base("rjtd", 47.6, 22.4, 120.0, 150.0, dlat, dlon, init,
                                  [("subCentre", 0), ("tablesVersion", 4),
                                   ("localTablesVersion", 1),
                                   ("generatingProcessIdentifier", 31)])
    eccodes.codes_set(base, "packingType", "grid_simple")
    eccodes.codes_set(base, "bitsPerValue", 16)
    h0 = hours_of(init, atm.t0)
    quarters = atm.ssrd_quarters(lat, lon, h0 + 78)
    # MSM carries no orography: its surface here is the replica's orography.
    orog = atm.orog(lat, lon)
    folder = root / f"{init:%Y}" / f"{init:%m}" / f"{init:%d}"
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for a, b in MSM_GROUPS:
        out = bytearray()
        for step in range(a, b + 1):
            t = h0 + step
            inst = step_keys(step, None)
            t15 = atm.temperature(lat, lon, t, orog + 1.5)
            rh = relative_humidity(t15, t15 - atm.depression(lat, lon))
            hag15 = level(103, 15, 1)
            fields = [
                (param(0, 3, 1) + level(101) + inst, atm.p_sea(lat, lon, t)),
                (param(0, 3, 0) + level(1) + inst, atm.pressure(lat, lon, t, orog)),
                (param(0, 2, 2) + level(103, 10) + inst, atm.u10(lat, lon, t)),
                (param(0, 2, 3) + level(103, 10) + inst, atm.v10(lat, lon, t)),
                (param(0, 0, 0) + hag15 + inst, t15),
                (param(0, 1, 1) + hag15 + inst, rh),
                (param(0, 6, 3) + level(1) + inst, atm.lcc(lat, lon, t)),
                (param(0, 6, 4) + level(1) + inst, 0.3 * atm.tcc(lat, lon, t)),
                (param(0, 6, 5) + level(1) + inst, 0.2 * atm.tcc(lat, lon, t)),
                (param(0, 6, 1) + level(1) + inst, atm.tcc(lat, lon, t)),
            ]
            if step > 0:
                fields.append((param(0, 1, 8) + level(1) + step_keys(step - 1, step, stat=1),
                               atm.precip(lat, lon, t - 1, t)))
                fields.append((param(0, 4, 7) + level(1) + step_keys(step - 1, step, stat=0),
                               atm.ssrd_mean(quarters, t - 1, t)))
            out += multi_field([encode(base, keys, vals) for keys, vals in fields])
            n += 1
        name = f"Z__C_RJTD_{init:%Y%m%d%H}0000_MSM_GPV_Rjp_Lsurf_FH{a:02d}-{b:02d}_grib2.bin"
        (folder / name).write_bytes(bytes(out))
    release_prototypes()
    eccodes.codes_release(base)
    return n


def relative_humidity(t, td):
    """Relative humidity (%) from temperature and dewpoint (K), Bolton (1980)."""
    def es(x):
        c = x - 273.15
        return 6.112 * np.exp(17.67 * c / (c + 243.5))
    return 100.0 * es(td) / es(t)


# ------------------------------------------------------------------------------------------
# Ensembles: every member is the atmosphere with a known perturbation (``perturbation``)
# ------------------------------------------------------------------------------------------

_GOLDEN = (0.6180339887, 0.7548776662, 0.5698402910)  # irrational steps: members' values scattered


def perturbation(member: int) -> tuple[float, float, float]:
    """Member ``member``'s departure from the atmosphere, the same at every place and time:
    (temperature offset K, wind factor, precipitation factor). The control (0) has none; the
    perturbed members' offsets span -2..2 K, their wind factors 0.6..1.4 and their
    precipitation factors 0.02..3 (log-uniform, so that some members' hours are wet and
    some are not, and some days reach 1 mm and some do not)."""
    if member == 0:
        return 0.0, 1.0, 1.0
    a, b, c = ((member * g) % 1.0 for g in _GOLDEN)
    return 4.0 * a - 2.0, 0.6 + 0.8 * b, 0.02 * 150.0 ** c


def member_keys(member: int, size: int, control_type: int = 1) -> list[tuple[str, object]]:
    """Section 4 of a member's message (template 4.1; 4.11 for the accumulations, set by the
    caller's step keys): WMO code table 4.6, ``control_type`` for the control (0 or 1), 3
    (positively perturbed) for the others."""
    return [("typeOfEnsembleForecast", control_type if member == 0 else 3),
            ("perturbationNumber", member), ("numberOfForecastsInEnsemble", size)]


def ensemble_step_keys(start: float, end: float | None, unit: str = "h",
                       stat: int | None = None) -> list[tuple[str, object]]:
    """``step_keys`` for an ensemble member: template 4.1 (instant) or 4.11 (statistic)."""
    keys = step_keys(start, end, unit, stat)
    return [("productDefinitionTemplateNumber", 1 if end is None else 11)] + keys[1:]


def encode_member(base: int, keys: list[tuple[str, object]], values: np.ndarray,
                  bits: int = 16) -> bytes:
    """``encode`` with the product template set first, so that the keys after it (parameter,
    level, member) land in the template's section 4."""
    return encode(base, sorted(keys, key=lambda kv: kv[0] != "productDefinitionTemplateNumber"),
                  values, bits)


ENS_MEMBERS = 51  # the control (oper-fc since IFS cycle 50r1) and 50 perturbed members


def write_ens(root: Path, atm: Atmosphere, init: datetime, dres: float = 3.0) -> int:
    """ECMWF ENS's perturbed members (1-50) in ``<...>/enfo/<YYYYMMDDHH>0000-<step>h-enfo-ef
    .grib2`` and its ``.index`` (MARS ``type`` pf, ``number``), on the IFS's grid and steps.
    The control is the IFS's own ``oper-fc`` file of the step (``write_ifs``), as ECMWF
    disseminates it since IFS cycle 50r1 (12 May 2026: ``enfo:cf`` discontinued)."""
    base, lat, lon = regular_base("ecmf", 90.0, -90.0, -180.0, 180.0 - dres, dres, dres, init,
                                  [("setLocalDefinition", 1), ("localDefinitionNumber", 1),
                                   ("marsClass", "od"), ("marsType", "pf"),
                                   ("marsStream", "enfo"), ("experimentVersionNumber", "0001"),
                                   ("typeOfProcessedData", 4), ("typeOfGeneratingProcess", 4)])
    eccodes.codes_set(base, "packingType", "grid_ccsds")
    eccodes.codes_set(base, "bitsPerValue", 16)
    h0 = hours_of(init, atm.t0)
    orog = atm.orog(lat, lon)
    run = root / f"{init:%Y%m%d}" / f"{init:%H}z" / "ifs" / "0p25" / "enfo"
    run.mkdir(parents=True, exist_ok=True)
    n = 0
    for step in IFS_STEPS:
        t = h0 + step
        t2 = atm.temperature(lat, lon, t, orog + 2.0)
        u, v = atm.u10(lat, lon, t), atm.v10(lat, lon, t)
        acc = atm.precip(lat, lon, h0, t) / 1000.0  # m from the start
        inst = ensemble_step_keys(step, None)
        blob, lines = bytearray(), []
        for k in range(1, ENS_MEMBERS):
            dt, fw, fp = perturbation(k)
            ens = member_keys(k, ENS_MEMBERS)
            for pid, keys, vals in (
                    (167, inst, t2 + dt), (165, inst, fw * u), (166, inst, fw * v),
                    (228246, inst, fw * u * atm.profile(100.0)),
                    (228247, inst, fw * v * atm.profile(100.0)),
                    (228, ensemble_step_keys(0, step, stat=1), fp * acc)):
                msg = encode_member(base, [("paramId", pid), *ens, *keys], vals)
                entry = {"domain": "g", "date": f"{init:%Y%m%d}", "time": f"{init:%H%M}",
                         "expver": "0001", "class": "od", "type": "pf", "stream": "enfo",
                         "step": str(step), "levtype": "sfc", "number": str(k),
                         "param": IFS_NAMES[pid]}
                lines.append(json.dumps({**entry, "_offset": len(blob), "_length": len(msg)}))
                blob += msg
        stem = run / f"{init:%Y%m%d%H}0000-{step}h-enfo-ef"
        stem.with_suffix(".grib2").write_bytes(bytes(blob))
        stem.with_suffix(".index").write_text("\n".join(lines) + "\n")
        n += len(lines)
    release_prototypes()
    eccodes.codes_release(base)
    return n


GEFS_MEMBERS = 31  # gec00 and gep01-gep30
GEFS_STEPS = tuple(range(0, 241, 3))


def write_gefs(root: Path, atm: Atmosphere, init: datetime, dres: float = 3.0) -> int:
    """NOAA GEFS ``pgrb2sp25``: a file a member and step, ``gec00`` (the control) and
    ``gep01``-``gep30``, each with wgrib2's ``.idx`` (the member as its seventh field, ``ENS=low-res
    ctl`` / ``ENS=+N``); encoded as GFS (``write_gfs``) but as ensemble products; APCP in
    6-hour-reset buckets, none at f000; PRES at the surface and PRMSL at every step (the
    tables read them at the analysis: the model's ground)."""
    base, lat, lon = regular_base("kwbc", 90.0, -90.0, 0.0, 360.0 - dres, dres, dres, init,
                                  [("subCentre", 2), ("tablesVersion", 2),
                                   ("localTablesVersion", 1),
                                   ("generatingProcessIdentifier", 107),
                                   ("typeOfGeneratingProcess", 4)])
    eccodes.codes_set(base, "packingType", "grid_complex_spatial_differencing")
    eccodes.codes_set(base, "bitsPerValue", 24)
    h0 = hours_of(init, atm.t0)
    orog = atm.orog(lat, lon)
    run = root / f"gefs.{init:%Y%m%d}" / f"{init:%H}" / "atmos" / "pgrb2sp25"
    run.mkdir(parents=True, exist_ok=True)
    n = 0
    for step in GEFS_STEPS:
        t = h0 + step
        when = "anl" if step == 0 else f"{step} hour fcst"
        start = (step - 1) // 6 * 6
        t2 = atm.temperature(lat, lon, t, orog + 2.0)
        u, v = atm.u10(lat, lon, t), atm.v10(lat, lon, t)
        bucket = atm.precip(lat, lon, h0 + start, t)
        inst = ensemble_step_keys(step, None)
        for k in range(GEFS_MEMBERS):
            dt, fw, fp = perturbation(k)
            ens = member_keys(k, GEFS_MEMBERS)
            kind = [("typeOfProcessedData", 3 if k == 0 else 4)]
            fields = [("PRES", "surface", param(0, 3, 0) + level(1) + inst,
                       atm.pressure(lat, lon, t, orog), when),
                      ("PRMSL", "mean sea level", param(0, 3, 1) + level(101) + inst,
                       atm.p_sea(lat, lon, t), when),
                      ("TMP", "2 m above ground", param(0, 0, 0) + level(103, 2) + inst, t2 + dt, when),
                      ("UGRD", "10 m above ground", param(0, 2, 2) + level(103, 10) + inst, fw * u, when),
                      ("VGRD", "10 m above ground", param(0, 2, 3) + level(103, 10) + inst, fw * v, when)]
            if step > 0:
                fields.append(("APCP", "surface", param(0, 1, 8) + level(1)
                               + ensemble_step_keys(start, step, stat=1), fp * bucket,
                               f"{start}-{step} hour acc fcst"))
            blob, lines = bytearray(), []
            for i, (name, where, keys, vals, time) in enumerate(fields):
                msg = encode_member(base, kind + keys + ens, vals, bits=24)
                member = "low-res ctl" if k == 0 else f"+{k}"
                lines.append(f"{i + 1}:{len(blob)}:d={init:%Y%m%d%H}:{name}:{where}:{time}:ENS={member}")
                blob += msg
            path = run / f"{'gec' if k == 0 else 'gep'}{k:02d}.t{init:%H}z.pgrb2s.0p25.f{step:03d}"
            path.write_bytes(bytes(blob))
            Path(f"{path}.idx").write_text("\n".join(lines) + "\n")
            n += len(lines)
    release_prototypes()
    eccodes.codes_release(base)
    return n


ICON_EU_EPS = IconModel("icon-eu-eps", 37, (29.5, 70.5), (-23.5, 62.5), 1.0, 74, 0, (), 48, 120,
                        False)
EPS_MEMBERS = 40  # ICON-EPS publishes no control
EPS_STEPS = tuple(range(0, 49)) + tuple(range(51, 73, 3)) + tuple(range(78, 121, 6))


def write_icon_eu_eps(root: Path, atm: Atmosphere, init: datetime) -> int:
    """DWD ICON-EU-EPS in DWD's legacy tree, bzip2-compressed: ``icon-eu-eps/grib/<HH>/<param>/
    icon-eu-eps_europe_icosahedral_single-level_<YYYYMMDDHH>_<FFF>_<param>.grib2.bz2``, the 40
    members a file (one message each), and CLAT/CLON and HSURF (one message, no member) in
    ``..._time-invariant_<YYYYMMDDHH>_<clat|clon|hsurf>.grib2.bz2``; native grid 37 (template 3.101), encoded as ICON-EU (``write_icon``)
    but as ensemble products. Hourly to 48 h, 3-hourly to 72 h, 6-hourly to 120 h."""
    import bz2

    model = ICON_EU_EPS
    lat, lon = icon_cells(model)
    h = eccodes.codes_grib_new_from_samples("GRIB2")
    for k, v in [("centre", "edzw"), ("subCentre", 255), ("tablesVersion", 19),
                 ("localTablesVersion", 1), ("generatingProcessIdentifier", 2),
                 ("significanceOfReferenceTime", 1), ("productionStatusOfProcessedData", 0),
                 ("typeOfProcessedData", 4), ("typeOfGeneratingProcess", 4),
                 ("dataDate", int(f"{init:%Y%m%d}")), ("dataTime", int(f"{init:%H%M}")),
                 ("gridDefinitionTemplateNumber", 101), ("numberOfGridUsed", model.grid_number),
                 ("numberOfGridInReference", 1),
                 ("uuidOfHGrid", uuid.uuid5(uuid.NAMESPACE_URL, model.name).hex),
                 ("packingType", "grid_ccsds"), ("bitsPerValue", 16)]:
        eccodes.codes_set_string(h, k, v) if isinstance(v, str) else eccodes.codes_set(h, k, v)
    h0 = hours_of(init, atm.t0)
    orog = atm.orog(lat, lon)
    stem = root / "icon-eu-eps" / "grib" / f"{init:%H}"
    n = 0

    def put(name: str, kind: str, messages: list[bytes]) -> None:
        nonlocal n
        path = stem / name / f"icon-eu-eps_europe_icosahedral_{kind}_{name}.grib2.bz2"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bz2.compress(b"".join(messages)))
        n += len(messages)

    mins = lambda m: step_keys(m, None, "m")  # noqa: E731
    run = f"{init:%Y%m%d%H}"
    put("clat", f"time-invariant_{run}", [encode(h, param(0, 191, 1) + level(1) + mins(0), lat)])
    put("clon", f"time-invariant_{run}", [encode(h, param(0, 191, 2) + level(1) + mins(0), lon)])
    put("hsurf", f"time-invariant_{run}", [encode(h, param(0, 3, 6) + level(1, None, 0, 101) + mins(0), orog)])
    for step in EPS_STEPS:
        t, m = h0 + step, step * 60
        t2 = atm.temperature(lat, lon, t, orog + 2.0)
        u, v = atm.u10(lat, lon, t), atm.v10(lat, lon, t)
        acc = atm.precip(lat, lon, h0, t)
        inst = ensemble_step_keys(m, None, "m")
        files: dict[str, list[bytes]] = {"t_2m": [], "u_10m": [], "v_10m": [], "tot_prec": []}
        for k in range(1, EPS_MEMBERS + 1):
            dt, fw, fp = perturbation(k)
            ens = member_keys(k, EPS_MEMBERS)
            for name, keys, vals in (
                    ("t_2m", param(0, 0, 0) + level(103, 2) + inst, t2 + dt),
                    ("u_10m", param(0, 2, 2) + level(103, 10) + inst, fw * u),
                    ("v_10m", param(0, 2, 3) + level(103, 10) + inst, fw * v),
                    ("tot_prec", param(0, 1, 52) + level(1)
                     + ensemble_step_keys(0, m, "m", 1), fp * acc)):
                files[name].append(encode_member(h, keys + ens, vals))
        for name, messages in files.items():
            put(name, f"single-level_{run}_{step:03d}", messages)
    release_prototypes()
    eccodes.codes_release(h)
    return n


def _write(job: tuple[str, Path, Atmosphere, datetime]) -> int:
    name, root, atm, init = job
    if name == "ifs":
        return write_ifs(root / "ecmwf", atm, init)
    if name == "gfs":
        return write_gfs(root / "noaa", atm, init)
    if name == "msm":
        return write_msm(root / "jma", atm, init)
    if name == "ens":
        return write_ens(root / "ecmwf", atm, init)
    if name == "gefs":
        return write_gefs(root / "noaa", atm, init)
    if name == "icon-eu-eps":
        return write_icon_eu_eps(root / "dwd", atm, init)
    return write_icon(root / "dwd", atm, init, {"icon-eu": ICON_EU, "icon-d2": ICON_D2}[name])


def publish(root: Path, atm: Atmosphere, init: datetime, processes: int = 2) -> dict[str, int]:
    """The whole replica under ``root``: ``ecmwf/``, ``noaa/``, ``dwd/``, ``jma/``, the
    ensembles beside their centres' models; the models are written in ``processes`` forked
    processes. Returns the messages written per model."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    names = ["icon-eu", "ens", "icon-eu-eps", "gefs", "ifs", "icon-d2", "gfs", "msm"]  # longest first
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        counts = pool.map(_write, [(n, root, atm, init) for n in names])
        return dict(zip(names, counts, strict=True))


# ------------------------------------------------------------------------------------------
# Trees that lack something: a field, a step kind, a level (an upstream that changed)
# ------------------------------------------------------------------------------------------


def drop_ifs_fields(root: Path, params: set[str], levtypes: set[str] = frozenset()) -> int:
    """Take the messages of ``params`` (MARS short names) and of the level types ``levtypes``
    out of every IFS file under ``root`` (``ecmwf/``), rewriting each file and its ``.index``
    as ECMWF would publish the thinner run. Returns the messages removed."""
    removed = 0
    for index in sorted(root.rglob("*-oper-fc.index")):
        data = index.with_suffix(".grib2").read_bytes()
        blob, lines = bytearray(), []
        for line in index.read_text().splitlines():
            entry = json.loads(line)
            if entry["param"] in params or entry["levtype"] in levtypes:
                removed += 1
                continue
            msg = data[entry["_offset"]:entry["_offset"] + entry["_length"]]
            lines.append(json.dumps({**entry, "_offset": len(blob)}))
            blob += msg
        # Replaced, not rewritten: a tree of hard links to the shared replica
        # (`test_truth_replica.shared_replica`) changes in its own files only.
        replace_bytes(index.with_suffix(".grib2"), bytes(blob), sync=False)
        replace_bytes(index, ("\n".join(lines) + "\n").encode(), sync=False)
    return removed


def drop_dwd_files(root: Path, model: str, param: str, keep=lambda path: False) -> int:
    """Remove the files of ``param`` of ``model`` from the DWD tree under ``root`` (``dwd/``)
    but those ``keep`` names. Returns the files removed."""
    gone = [p for p in (root / "dwd").glob(f"**/m/{model}/p/{param}/**/*.grib2") if not keep(p)]
    for p in gone:
        p.unlink()
    return len(gone)
