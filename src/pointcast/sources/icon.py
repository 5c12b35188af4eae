"""DWD ICON-EU and ICON-D2, as DWD's open-data server publishes them: on the models' native
icosahedral grids in its v1 tree (the only one from 30 November 2026, below), and on regular
lat/lon grids in the legacy tree, which the same rows still read.

ICON-EU: legacy grid 0.0625 deg, lat 29.5..70.5, lon -23.5..62.5 (657 x 1377 points, first
point in the south-west, rows scanning northwards), runs 00/06/12/18 UTC (the sample runs
every 6 h), hourly steps to 78 h, then 3-hourly to 120 h.

ICON-D2: legacy grid 0.02 deg, lat 43.18..58.08, lon -3.94..20.34 (746 x 1215 points), runs
every 3 h, hourly steps to 48 h; precipitation and radiation also every 15 minutes (``fine=True`` rows,
``ICON_D2.fine_steps``). DWD encodes every step in minutes (indicatorOfUnitOfTimeRange 0),
hourly ones included: read steps with ``stepUnits`` set, or from the validity time.

``shortName``/``typeOfLevel`` are what ecCodes 2.50 decodes from DWD's encoding (centre
``edzw``), ``param`` is DWD's parameter name used in the file names. ecCodes prefers the WMO
or ECMWF name where one exists (T_2M -> ``2t``, PMSL -> ``prmsl``, TOT_PREC -> ``tp``,
SNOW_GSP -> ``lsfwe``, SNOW_CON -> ``csfwe``, VMAX_10M -> ``max_i10fg``, FI on pressure levels
-> ``z``) and DWD's local name otherwise (``CLCT``, ``ASWDIR_S``, ``ASWDIFD_S``, ``CAPE_ML``,
``HSURF``). CAPE_ML (first fixed surface 192, DWD-local) and HSURF (surface to mean sea
level) have ``typeOfLevel`` ``unknown`` in ecCodes.

Rows sharing a canonical variable combine as documented in ``sources/ifs.py``: the value is the
sum of the rows present at that level and step, so ``sf`` = SNOW_GSP + SNOW_CON and
``ssrd`` = ASWDIR_S + ASWDIFD_S (ASWDIR_S also maps to ``fdir`` on its own). The radiation
fields are means from the start of the run (W m-2, ``AVG_SINCE_START``). VMAX_10M is the
maximum over the hour before the step, as DWD publishes it, also where ICON-EU's steps are
3-hourly (beyond 78 h the message at 84 h covers 83-84 h: read the window from the message's
startStep/endStep); it has no step 0. ICON publishes no 100 m wind: the profile above 10 m
comes from the lowest model levels (below) and the pressure levels.

Rows checked against real DWD files from https://opendata.dwd.de/weather/nwp/ (ecCodes 2.50):

* ``CLCL`` (low cloud cover, %): discipline 0, category 6, number 22, first fixed surface
  100 (isobaric, 80000 Pa), second 1 (ground). ecCodes decodes shortName ``CLCL``
  (paramId 502343), typeOfLevel ``unknown``, level 800 (hPa): the layer from the ground to
  800 hPa. The row has no ``levels`` (single-level field; its level key is 800, not 0).
* ``ASOB_S`` (net shortwave radiation at the surface, mean since the run start, W m-2):
  template 4.8, category 4, number 9, typeOfStatisticalProcessing 0. ecCodes decodes the
  ECMWF name ``avg_snswrf`` (paramId 235037), typeOfLevel ``surface``, stepType ``avg``; at
  step 0 the message is a zero-width mean (stepRange ``0m``, a constant 0 field).

Model levels (for the wind at hub heights). ICON's vertical coordinate is a terrain-following
height coordinate (SLEVE) numbered from the model top: full levels 1..N hold U and V, half
levels 1..N+1 their boundaries, N+1 being the surface. DWD encodes both on the "generalized
vertical height coordinate" (GRIB2 code table 4.5, 150) with the vertical-grid header
(``genVertHeightCoords`` 1: ``nlev`` = number of half levels, ``numberOfVGridUsed``,
``uuidOfVGrid``; NV = 6). ``nlev`` is what the CDI library, ICON's GRIB writer, calls the
"number of half levels of a generalized Z-axis" (``zaxisDefNlevRef``, which ICON's output
sets to ``nlevp1``):

* U, V on full level L: first fixed surface 150 / L, second 150 / L+1. ecCodes decodes
  ``u``/``v`` (paramId 131/132), typeOfLevel ``generalVerticalLayer``, level L.
* HHL, the geometric height of half level L above mean sea level (m, time-invariant):
  category 3, number 6, first fixed surface 150 / L, second 101 (mean sea level). ecCodes
  decodes ``HHL`` (paramId 500008), typeOfLevel ``generalVertical``, level L.

The files: ``<param>/icon-eu_europe_regular-lat-lon_model-level_<YYYYMMDDHH>_<SSS>_<L>_U
.grib2.bz2`` and ``hhl/icon-eu_europe_regular-lat-lon_time-invariant_<YYYYMMDDHH>_<L>_HHL
.grib2.bz2``; ICON-D2 ``u/icon-d2_germany_regular-lat-lon_model-level_<YYYYMMDDHH>_<SSS>_<L>_u
.grib2.bz2`` and ``hhl/icon-d2_germany_regular-lat-lon_time-invariant_<YYYYMMDDHH>_000_<L>_hhl
.grib2.bz2`` (level numbers not zero-padded; ICON-D2 parameter names in lower case).

**Which levels: chosen from each run's HHL, not from a table.** ICON-EU has 74 full levels
(75 half levels; 60 before DWD raised the global model from 90 to 120 levels) and ICON-D2 65
(66): DWD's "Database Reference for the Global and Regional ICON and ICON-EPS Forecasting
System" (version 2.3.1, 2024; its appendix tabulates the half-level heights over zero
orography), DWD's ICON-D2 description ("65 atmosphere levels"), and the public decoders that
read these trees (Open-Meteo ``Sources/App/Icon/Icon.swift``, ``numberOfModelFullLevels``:
ICON 120 "was 90", ICON-EU 74 "was 60", ICON-D2 65). The counts have changed before, so the
rows of the model-level fields name no level numbers (``levels=RUN_LEVELS``): a run's levels
are read from the run. The HTTP source (``remote.plan_model_levels``) fetches HHL of half
level 1, which every count has, reads the number of half levels from its vertical-grid header
(``nlev``), fetches HHL from the surface half level upwards until ``hub_levels`` finds the
full levels that span the hub heights (``config.HUB_HEIGHT_RANGE_M``, 10-300 m) at every
cell, and then asks for U and V on those full levels only. The 10 m wind is the profile's
bottom, so the lowest full level (about 10 m) and the levels up to the first one at or above
300 m everywhere are enough; over mountains the levels are compressed (SLEVE), so that first
level is chosen where the terrain is highest. The decoder takes whatever levels the files
carry, and interpolation puts each full level halfway between its half levels' HHL values
above the surface, whatever their numbers.

The sample source writes the real counts (``LEVEL_COUNTS``) with heights over flat terrain
from ICON's level distribution (``mo_init_vgrid``, ``itype_laydistr`` 1): ``a(k) = H (2/pi
arccos(((k-1)/N)**s))**x``, with ``x`` such that the lowest layer is ``min_lay_thckn`` = 20 m
thick (``VERTICAL_GRIDS``). ICON-D2: N = 65, H = 22 km, s = 0.65; ICON-EU is nested in the
global ICON and shares the lowest 74 of its 120 layers (global N = 120, H = 75 km, s = 0.9:
assumed, not DWD's operational namelist, which the sample does not need: a reader only sees
HHL). Over orography the levels follow the terrain and are compressed smoothly upwards (SLEVE
decay, ``SLEVE_DECAY``): ``HHL = HSURF + a + HSURF * (b(a) - 1)`` with ``b(a) = sinh((H/d)**n -
(a/d)**n) / sinh((H/d)**n)``, d = 4 km, n = 1.2, H = 22 km.

**Optional rows.** A row marked ``optional`` (``OPTIONAL_PARAMS``, and every pressure-level
row) is a field the products can go without: CLCL and ASOB_S (no product element reads them),
CAPE_ML (``codes.weather_type`` reads a missing CAPE as 0: no thunderstorm or shower class from
that model), VIS (not in the v1 trees, see below; the blend takes it from IFS) and T, U, V and
FI on pressure levels (the profile then comes from the 10 m wind, the model levels and, for
temperature, the lapse rate). The legacy trees carry all of them for both models: public
downloaders read ``clcl``, ``cape_ml`` and ``t``/``u``/``v``/``fi`` on pressure levels of both
(Open-Meteo's ``IconVariableDownloadable.swift``) and ``asob_s`` of ICON-D2; but an independent
replica of the v1 tree held only a subset, and a tree can lack a field on any day. The HTTP
source drops a missing optional file from the run with a note (``remote/``), and the decoder
yields no variable for a row without messages. The other rows are required: without one of
them the model is not used for that cycle.

**DWD's v1 scheme (native icosahedral grids).** From 30 November 2026 DWD publishes ICON-EU and
ICON-D2 only below ``https://opendata.dwd.de/weather/nwp/v1/``, on the models' native
triangular grids, one uncompressed GRIB2 message per file (``v1_path``)::

    m/<model>/p/<PARAM>/r/<YYYY-MM-DDTHH:MM>/s/PT<hhh>H<mm>M.grib2
    m/<model>/p/<PARAM>/lvt1/<level type>/lv1/<level>/r/<YYYY-MM-DDTHH:MM>/s/PT<hhh>H<mm>M.grib2

What was found (public downloaders and descriptions of DWD's v1 tree, e.g. dynamical.org's
ICON-EU archiver, Open-Meteo's ICON-D2-RUC reader): parameter names in upper case for every
model (``T_2M``, also for ICON-D2, whose legacy names were lower case); the run directory is the
ISO time with minutes and a literal colon, sent percent-encoded (``2026-11-20T00%3A00``); the
step is an ISO 8601 duration with three-digit hours and two-digit minutes (``PT001H15M``), so
ICON-D2's quarter hours are files of their own; ``lvt1`` is the GRIB2 type of the first fixed
surface: 100 (isobaric, level in Pa: ``lv1/85000``) and 150 (model levels: full levels for U/V,
half levels for HHL); time-invariant fields (HSURF, HHL, CLAT, CLON) sit at ``PT000H00M``;
packing ``grid_ccsds`` 16 bits; messages carry a bitmap (the lateral boundary zone, about 3 %
of ICON-D2's cells, is missing); grid definition template 3.101 (``unstructured_grid``:
``numberOfGridUsed``, ``numberOfGridInReference``, ``uuidOfHGrid``; ICON-EU is DWD grid 27,
R03B08 nest, ICON-D2 grid 47, R19B07, 542 040 cells). Cell centres: the parameters CLAT and
CLON (degrees; discipline 0, category 191, numbers 1 and 2, which ecCodes 2.50 names ``tlat``
and ``tlon``), or the grid file ``icon_grid_00NN_*.nc`` under ``/weather/lib/cdo/``.
Assumed (not verified against a live file): ICON-EU's grid number 27 and that VIS is absent
from the v1 trees of ICON-EU and ICON-D2. The legacy regular lat/lon
tree above stays readable with the same tables: the rows are the same, only paths and grids
differ, and a row with no message in a run (VIS in v1) simply yields no variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import numpy as np

from ..gribtable import CELL_CENTRES, RUN_LEVELS, Encoding as _E, GribField, Processing
from .base import Layout, Mirror, ModelSpec, RegularGrid, Upstream, hours

G = 9.80665

PRESSURE_LEVELS: tuple[int, ...] = (1000, 950, 925, 850, 700)  # hPa

# Full levels of each model as DWD runs it (module docstring). Only the sample source uses
# them: a reader learns a run's count from its HHL (``nlev`` = the number of half levels).
LEVEL_COUNTS: dict[str, int] = {"icon-eu": 74, "icon-d2": 65}


@dataclass(frozen=True)
class VerticalGrid:
    """ICON's level distribution over flat terrain (``mo_init_vgrid``, ``itype_laydistr`` 1)
    of the column a model's levels are the lowest ``LEVEL_COUNTS`` of."""

    levels: int  # N, full levels of the whole column
    top_m: float  # H
    stretch: float  # s
    lowest_layer_m: float = 20.0  # min_lay_thckn


VERTICAL_GRIDS: dict[str, VerticalGrid] = {
    "icon-eu": VerticalGrid(120, 75000.0, 0.9),  # the global column it is nested in
    "icon-d2": VerticalGrid(65, 22000.0, 0.65),
}
# SLEVE decay of the orography's imprint with height: (decay scale m, exponent, top m).
SLEVE_DECAY: tuple[float, float, float] = (4000.0, 1.2, 22000.0)


def hub_levels(hhl: Mapping[int, np.ndarray], top_m: float) -> tuple[int, ...] | None:
    """The full levels, top first, from the lowest one up to the first one whose height above
    the ground is at least ``top_m`` at every cell, from ``hhl``: half-level heights above sea
    level (NaN where a cell has none) by half-level number, the largest number being the
    surface and the others a contiguous run above it. None when the run of half levels does
    not reach that high yet."""
    surface = max(hhl)
    ground = np.asarray(hhl[surface], dtype=np.float64)
    for level in range(surface - 1, min(hhl) - 1, -1):
        if level not in hhl:
            raise ValueError(f"HHL of half level {level} is missing below half level {min(hhl)}")
        mid = 0.5 * (np.asarray(hhl[level], np.float64) + np.asarray(hhl[level + 1], np.float64))
        agl = mid - ground
        if np.isfinite(agl).any() and np.nanmin(agl) >= top_m:
            return tuple(range(level, surface))
    return None

_I, _A, _M, _X, _C = (Processing.INSTANT, Processing.ACCUM_SINCE_START,
                      Processing.AVG_SINCE_START, Processing.INTERVAL, Processing.CONSTANT)


def _fields(model_id: str, *, vis: bool, fine: bool) -> tuple[GribField, ...]:
    rows = [
        GribField("t2m", "2t", "heightAboveGround", param="T_2M"),
        GribField("d2m", "2d", "heightAboveGround", param="TD_2M"),
        GribField("sp", "sp", "surface", param="PS"),
        GribField("msl", "prmsl", "meanSea", param="PMSL"),
        GribField("u10", "10u", "heightAboveGround", param="U_10M"),
        GribField("v10", "10v", "heightAboveGround", param="V_10M"),
        GribField("gust", "max_i10fg", "heightAboveGround", processing=_X, param="VMAX_10M"),
        # kg m-2 accumulated since the start.
        GribField("tp", "tp", "surface", processing=_A, fine=fine, param="TOT_PREC"),
        GribField("sf", "lsfwe", "surface", processing=_A, fine=fine, param="SNOW_GSP"),
        GribField("sf", "csfwe", "surface", processing=_A, fine=fine, param="SNOW_CON"),
        # W m-2 averaged since the start.
        GribField("fdir", "ASWDIR_S", "surface", processing=_M, fine=fine, param="ASWDIR_S"),
        GribField("ssrd", "ASWDIR_S", "surface", processing=_M, fine=fine, param="ASWDIR_S"),
        GribField("ssrd", "ASWDIFD_S", "surface", processing=_M, fine=fine, param="ASWDIFD_S"),
        GribField("tcc", "CLCT", "surface", param="CLCT"),
        # Low cloud (ground to 800 hPa): decodes with level 800 and typeOfLevel unknown.
        GribField("lcc", "CLCL", "unknown", param="CLCL"),
        # Net shortwave at the surface, W m-2 averaged since the start (hourly, also in D2).
        GribField("ssr", "avg_snswrf", "surface", processing=_M, param="ASOB_S"),
    ]
    if vis:
        rows.append(GribField("vis", "vis", "surface", param="VIS"))
    rows += [
        GribField("cape_ml", "CAPE_ML", "unknown", param="CAPE_ML"),
        GribField("orog", "HSURF", "unknown", processing=_C, param="HSURF"),
        GribField("t_pl", "t", "isobaricInhPa", PRESSURE_LEVELS, param="T"),
        GribField("u_pl", "u", "isobaricInhPa", PRESSURE_LEVELS, param="U"),
        GribField("v_pl", "v", "isobaricInhPa", PRESSURE_LEVELS, param="V"),
        # Geopotential (m2 s-2) -> geopotential height (m).
        GribField("z_pl", "z", "isobaricInhPa", PRESSURE_LEVELS, scale=1.0 / G, param="FI"),
        # The model levels that span the hub heights (chosen per run from HHL, see the module
        # docstring) and their half-level heights above sea level.
        GribField("u_ml", "u", "generalVerticalLayer", RUN_LEVELS, param="U"),
        GribField("v_ml", "v", "generalVerticalLayer", RUN_LEVELS, param="V"),
        GribField("hhl", "HHL", "generalVertical", RUN_LEVELS, processing=_C, param="HHL"),
    ]
    return tuple(replace(r, optional=r.param in OPTIONAL_PARAMS
                         or r.typeOfLevel == "isobaricInhPa",
                         encodings=(ENCODINGS[r.param, r.typeOfLevel],)) for r in rows)


# What each row's message is, as ecCodes 2.50 reads DWD's GRIB2 (paramId, units, WMO or DWD
# local discipline/category/number): DWD's ICON database reference gives the numbers, and the
# real ICON-EU messages in tests/data/real-grib (CLCL 0/6/22, ASOB_S 0/4/9) decode as below.
# A message with another parameter or units is refused at decode (``ingest.judge``).
_MS = "m s**-1"
ENCODINGS: dict[tuple[str | None, str], _E] = {
    ("T_2M", "heightAboveGround"): _E(167, "K", "0/0/0"),
    ("TD_2M", "heightAboveGround"): _E(168, "K", "0/0/6"),
    ("PS", "surface"): _E(134, "Pa", "0/3/0"),
    ("PMSL", "meanSea"): _E(260074, "Pa", "0/3/1"),
    ("U_10M", "heightAboveGround"): _E(165, _MS, "0/2/2"),
    ("V_10M", "heightAboveGround"): _E(166, _MS, "0/2/3"),
    ("VMAX_10M", "heightAboveGround"): _E(237318, _MS, "0/2/22"),
    ("TOT_PREC", "surface"): _E(228228, "kg m**-2", "0/1/52"),
    ("SNOW_GSP", "surface"): _E(231058, "kg m**-2", "0/1/56"),
    ("SNOW_CON", "surface"): _E(231057, "kg m**-2", "0/1/55"),
    ("ASWDIR_S", "surface"): _E(500480, "W m-2", "0/4/198"),
    ("ASWDIFD_S", "surface"): _E(500481, "W m-2", "0/4/199"),
    ("CLCT", "surface"): _E(500046, "%", "0/6/1"),
    ("CLCL", "unknown"): _E(502343, "%", "0/6/22"),
    ("ASOB_S", "surface"): _E(235037, "W m**-2", "0/4/9"),
    ("VIS", "surface"): _E(3020, "m", "0/19/0"),
    ("CAPE_ML", "unknown"): _E(500153, "J kg-1", "0/7/6"),
    ("HSURF", "unknown"): _E(500007, "m", "0/3/6"),
    ("T", "isobaricInhPa"): _E(130, "K", "0/0/0"),
    ("U", "isobaricInhPa"): _E(131, _MS, "0/2/2"),
    ("V", "isobaricInhPa"): _E(132, _MS, "0/2/3"),
    ("FI", "isobaricInhPa"): _E(129, "m**2 s**-2", "0/3/4"),
    ("U", "generalVerticalLayer"): _E(131, _MS, "0/2/2"),
    ("V", "generalVerticalLayer"): _E(132, _MS, "0/2/3"),
    ("HHL", "generalVertical"): _E(500008, "m", "0/3/6"),
}


# Single-level fields a product can go without (module docstring); the pressure levels too.
OPTIONAL_PARAMS = frozenset({"CLCL", "ASOB_S", "CAPE_ML", "VIS"})


# Level types of the v1 paths (``lvt1``), by ecCodes typeOfLevel.
V1_LEVEL_TYPES = {"isobaricInhPa": 100, "generalVerticalLayer": 150, "generalVertical": 150}


@dataclass(frozen=True)
class NativeGrid:
    """A model's native (icosahedral, unstructured) grid: its GRIB2 identity and domain."""

    number: int  # numberOfGridUsed
    lat_min: float
    lat_max: float
    lon_min: float
    lon_max: float
    spacing_km: float  # effective mesh size, the square root of the mean cell area


NATIVE_GRIDS: dict[str, NativeGrid] = {
    # The ICON-EU nest (R03B08) covers a little more than its 0.0625 deg lat/lon rendering.
    "icon-eu": NativeGrid(27, 29.5, 70.5, -23.5, 62.5, 6.5),
    "icon-d2": NativeGrid(47, 43.04, 58.17, -4.16, 20.54, 2.2),
}


def v1_path(model_id: str, param: str, init: datetime, minutes: int,
            type_of_level: str | None = None, level: int | None = None) -> str:
    """A file's path in DWD's v1 tree, relative to ``.../weather/nwp/v1/`` (the run directory
    keeps its literal colon; URLs send it as ``%3A``)."""
    lv = ""
    if type_of_level in V1_LEVEL_TYPES:
        if level is None:
            raise ValueError(f"{model_id} {param}: a {type_of_level} field needs its level")
        value = level * 100 if type_of_level == "isobaricInhPa" else level  # hPa -> Pa
        lv = f"lvt1/{V1_LEVEL_TYPES[type_of_level]}/lv1/{value}/"
    return (f"m/{model_id}/p/{param}/{lv}r/{init:%Y-%m-%dT%H:%M}/s/"
            f"PT{minutes // 60:03d}H{minutes % 60:02d}M.grib2")


def legacy_path(model_id: str, param: str, init: datetime, step_h: int | None,
                type_of_level: str | None = None, level: int | None = None) -> str:
    """A file's path in DWD's legacy regular lat/lon tree, relative to ``.../weather/nwp/``
    (``step_h`` None: a time-invariant field; file names in the module docstring)."""
    d2 = model_id == "icon-d2"
    prefix = "icon-d2_germany" if d2 else "icon-eu_europe"
    name = param.lower() if d2 else param
    run_id = f"{init:%Y%m%d%H}"
    folder = f"{model_id}/grib/{init:%H}/{param.lower()}"
    if type_of_level == "generalVertical":  # HHL: time-invariant, one file per level
        inv = "_000" if d2 else ""
        return (f"{folder}/{prefix}_regular-lat-lon_time-invariant_{run_id}{inv}_"
                f"{level}_{name}.grib2.bz2")
    if step_h is None:
        inv = "_000_0" if d2 else ""
        return f"{folder}/{prefix}_regular-lat-lon_time-invariant_{run_id}{inv}_{name}.grib2.bz2"
    if type_of_level == "isobaricInhPa":
        return (f"{folder}/{prefix}_regular-lat-lon_pressure-level_{run_id}_{step_h:03d}_"
                f"{level}_{name}.grib2.bz2")
    if type_of_level == "generalVerticalLayer":
        return (f"{folder}/{prefix}_regular-lat-lon_model-level_{run_id}_{step_h:03d}_"
                f"{level}_{name}.grib2.bz2")
    single = "_2d" if d2 else ""
    return (f"{folder}/{prefix}_regular-lat-lon_single-level_{run_id}_{step_h:03d}{single}_"
            f"{name}.grib2.bz2")


# Parameters DWD's v1 trees of ICON-EU and ICON-D2 do not carry (see the module docstring).
NOT_IN_V1 = frozenset({"VIS"})


def _v1_vars(model_id: str):
    """Also names the CLAT/CLON files (``ingest.CELL_CENTRE_ROWS``) that ``remote/`` fetches
    once per grid."""
    def path_vars(row: GribField, level: int | None, minute: int) -> dict | None:
        if row.param in NOT_IN_V1:
            return None
        path = v1_path(model_id, row.param or row.shortName, _INIT_SENTINEL, minute,
                       row.typeOfLevel, level)
        return {"path": "v1/" + path.replace(_RUN_SENTINEL, "{init:%Y-%m-%dT%H}%3A00")}
    return path_vars


def _legacy_vars(model_id: str):
    def path_vars(row: GribField, level: int | None, minute: int) -> dict | None:
        if minute % 60 or row.shortName in CELL_CENTRES.values():
            # The quarter hours sit inside the hourly files; a lat/lon grid has no cell centres.
            return None
        step = None if row.processing is Processing.CONSTANT else minute // 60
        path = legacy_path(model_id, row.param or row.shortName, _INIT_SENTINEL, step,
                           row.typeOfLevel, level)
        return {"path": path.replace(f"{_INIT_SENTINEL:%Y%m%d%H}", "{init:%Y%m%d%H}")
                .replace(f"/grib/{_INIT_SENTINEL:%H}/", "/grib/{init:%H}/")}
    return path_vars


# A run time no real run has, replaced by template fields in the paths above.
_INIT_SENTINEL = datetime(1901, 1, 1, 7)
_RUN_SENTINEL = "1901-01-01T07:00"


def _upstream(model_id: str) -> Upstream:
    return Upstream(
        mirrors=(Mirror("dwd", "https://opendata.dwd.de/weather/nwp"),),
        # v1 first (DWD's only scheme after 30 November 2026), the legacy tree while it exists.
        layouts=(Layout("v1", "", path_vars=_v1_vars(model_id)),
                 Layout("legacy", "", path_vars=_legacy_vars(model_id), compression="bz2")),
        licence="DWD open data, CC BY 4.0 (Deutscher Wetterdienst)",
    )


ICON_EU = ModelSpec(
    id="icon-eu",
    name="DWD ICON-EU (regular lat/lon 0.0625 deg)",
    grid=RegularGrid(lat_first=29.5, lon_first=-23.5, lat_last=70.5, lon_last=62.5,
                     dlat=0.0625, dlon=0.0625),
    steps=hours(*range(0, 79)) + hours(*range(81, 121, 3)),
    fields=_fields("icon-eu", vis=True, fine=False),
    run_hours=(0, 6, 12, 18),
    # DWD's open data server holds ICON-EU's 120 h about 3.5-4 h after the run's start
    publication_delay=timedelta(hours=4),
    resolution_km=6.5,
    upstream=_upstream("icon-eu"),
)

ICON_D2 = ModelSpec(
    id="icon-d2",
    name="DWD ICON-D2 (regular lat/lon 0.02 deg)",
    grid=RegularGrid(lat_first=43.18, lon_first=-3.94, lat_last=58.08, lon_last=20.34,
                     dlat=0.02, dlon=0.02),
    steps=hours(*range(0, 49)),
    fields=_fields("icon-d2", vis=False, fine=True),
    run_hours=tuple(range(0, 24, 3)),
    # DWD's open data server holds ICON-D2's 48 h about 1.5-2 h after the run's start
    publication_delay=timedelta(hours=2),
    fine_steps=tuple(timedelta(minutes=15 * k) for k in range(0, 48 * 4 + 1)),
    resolution_km=2.2,
    upstream=_upstream("icon-d2"),
)
