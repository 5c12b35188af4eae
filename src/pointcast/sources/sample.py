"""The embedded sample source: deterministic synthetic model runs written as real GRIB2.

``make run`` works offline because of this source. It stands in for the real upstreams and
writes what they write, byte for byte in format if not in content:

* IFS as ECMWF open data: one GRIB2 file per step holding every field of that step,
  ``<YYYYMMDD>/<HH>z/ifs/0p25/oper/<YYYYMMDDHH>0000-<step>h-oper-fc.grib2``, and beside it the
  ``.index`` file (JSON lines with ``_offset``/``_length`` and the MARS keys). Centre ``ecmf``,
  MARS local section (class od, type fc, stream oper, expver 0001), CCSDS packing
  (``grid_ccsds``, 16 bits, as ECMWF open data; the eccodes wheel writes it), accumulations as
  product definition template 8 with stepRange ``0-<step>``, the gust as the maximum over the
  previous 3 h (``141-144``) or 6 h (``144-150``), total cloud cover as paramId 164, a
  fraction in 0-1 (what open data carries now, see ``sources/ifs.py``).
* GFS as NOAA's pgrb2.0p25 files, one per step with its wgrib2 ``.idx``; DSWRF as NCEP's local
  parameter 0/4/192 (ecCodes ``sdswrf``), as in NOAA's files (see ``sources/gfs.py``).
* ICON-EU and ICON-D2 as DWD's open-data tree, one bz2-compressed GRIB2 file per parameter,
  step (and level): ``icon-eu/grib/<HH>/<param>/icon-eu_europe_regular-lat-lon_single-level_
  <YYYYMMDDHH>_<SSS>_<PARAM>.grib2.bz2``, ``..._pressure-level_<YYYYMMDDHH>_<SSS>_<LEVEL>_<PARAM>``,
  ``..._time-invariant_<YYYYMMDDHH>_<PARAM>``, model levels ``..._model-level_<YYYYMMDDHH>_
  <SSS>_<LEVEL>_<PARAM>``, half-level heights ``..._time-invariant_<YYYYMMDDHH>_<LEVEL>_HHL``;
  ICON-D2 ``icon-d2/grib/<HH>/<param>/icon-d2_germany_
  regular-lat-lon_single-level_<YYYYMMDDHH>_<SSS>_2d_<param>.grib2.bz2`` (pressure levels
  ``..._pressure-level_<YYYYMMDDHH>_<SSS>_<LEVEL>_<param>``, model levels ``..._model-level_
  <YYYYMMDDHH>_<SSS>_<LEVEL>_<param>``, constants ``..._time-invariant_<YYYYMMDDHH>_000_0_
  <param>``, half-level heights ``..._time-invariant_<YYYYMMDDHH>_000_<LEVEL>_hhl``; levels
  are not zero-padded). Centre ``edzw``, ``grid_simple`` 16-bit packing,
  accumulations (TOT_PREC, SNOW_*) with typeOfStatisticalProcessing 1, radiation means since
  the start (ASWDIR_S, ASWDIFD_S, ASOB_S) with 0, VMAX_10M with 2 (maximum over the hour before the
  step, also where ICON-EU's steps are 3-hourly, e.g. ``83-84``, as DWD publishes it). Every
  DWD step is encoded in minutes (indicatorOfUnitOfTimeRange 0), the hourly ones too, as in
  DWD's files; GRIB2 tables version 19, local tables version 1, earth shape 6, ICON-EU
  generating process 2 (checked against real ICON-EU files in ``/work/shared/data``).
  **15-minute files**: the ICON-D2 file of hour ``SSS`` of a 15-minute field holds four
  messages, the quarter hours ``SSS-1``:15, :30, :45 and ``SSS``:00 (the ``000`` file holds
  step 0 only), so the hourly file names are unchanged and a reader that only wants hours
  takes the last message. ASOB_S and CLCL are hourly in ICON-D2 too (one message per
  file). **Model levels**: the real counts (ICON-EU 74 full levels, ICON-D2 65), HHL on
  every half level once (1..75, 1..66), U and V at every step on the lowest full levels: those
  a reader picks from this HHL to span the hub heights, and one more above (a real tree has
  every level; the numbers follow from the heights: ICON-EU 61-74 at the default scale, where
  its terrain reaches 4 km). On the generalized vertical height coordinate with DWD's
  vertical-grid header (``nlev`` = the number of half levels, ``numberOfVGridUsed`` 4, a
  synthetic ``uuidOfVGrid``), see ``sources/icon.py``.
* JMA MSM as JMA's surface GPV ("Lsurf"): one file per range of steps holding every field of
  those steps, ``Z__C_RJTD_<YYYYMMDDhh>0000_MSM_GPV_Rjp_Lsurf_FH<aa>-<bb>_grib2.bin`` with
  FH00-15, FH16-33 and FH34-39 for every run and FH40-51, FH52-78 for the 00/12 UTC runs,
  directly in the run directory. A file is **one multi-field GRIB2 message** (``multi_field``:
  sections 1 and 3 once, then sections 4-7 repeated for each field; wgrib2 lists its fields
  as 1.1, 1.2 ..., ecCodes reads them with multi-field support on), as a 72-field FH34-39
  file of the real archive is; inside it step after step, each step in JMA's element
  order (PRMSL, PRES, UGRD, VGRD, TMP, RH, LCDC, TCDC, then APCP and DSWRF from step 1).
  Centre ``rjtd`` (subcentre 0), GRIB master tables 2, local tables 1, earth shape 6 (sphere),
  rows from north to south, ``grid_simple`` 12-bit packing, steps in hours; temperature and
  humidity at 1.5 m (scale factor 1, value 15); APCP (0/1/8, accumulation) and DSWRF (0/4/7,
  average) over the hour before the step (``k-1``-``k``), template 4.8. MCDC and HCDC, which
  real files also hold, are not written (no catalogue name). Header keys that no reader of
  the fields depends on (generating process identifier, type of processed data) are left at
  ecCodes' defaults: not checked against a real MSM file (none is at hand). See
  ``sources/msm.py``.

Everything sits under ``<cache>/sample/<model>/<YYYYMMDDHH>/`` with a ``README.txt`` saying the
data are synthetic and a ``complete`` marker written last (it records the parameters, so a
second fetch of the same run writes nothing, and a fetch with another scale or area rewrites
the run). Files are written under a temporary name and renamed.

The weather is one analytic "truth", a function of place and valid time that every model
samples on its own grid with small model-specific differences (depth and phase of the lows,
a temperature bias, precipitation efficiency, smoother orography on coarser grids, a phase
error growing with lead time): a smooth orography (Gaussian ridges at the real mountain
ranges of Europe, Asia and Japan, zero over sea), temperature by latitude and season with a
diurnal cycle by local solar time, a -6.5 K/km lapse rate, a train of lows (20-30 hPa,
eastwards at 10 m/s) crossing the Atlantic and Europe and another (10-26 hPa, 11 m/s) born
over eastern China that crosses Japan, the seasonal centres of the East Asian monsoon (the
Siberian high and Aleutian low in winter, the North Pacific high in summer), East Asia's
climate (cold continental winters, Japan's large annual cycle, the Kuroshio, humid monsoon
air), geostrophic winds turned towards low pressure near the ground, hypsometric surface
pressure and pressure-level heights, log wind profiles, humidity and cloud around the lows and
on windward slopes (orographic lift; drier in the lee: snow on Japan's Sea of Japan side in the
north-westerly winter monsoon, sunshine on the Pacific side), precipitation
only under cloud above 80 %, snow below about 1 degC, clear-sky radiation (Haurwitz) reduced by
cloud, net shortwave through an albedo (sea 0.07, land 0.17, snow 0.6 where the daily-mean
temperature is below -2 degC), low cloud as a share (30-90 %) of the total, gusts,
visibility and CAPE, relative humidity from the 2 m dewpoint. ICON's half levels follow the
terrain (``half_level_height``) and the
model-level winds are the same column as the 10 m, height-level and pressure-level winds
(``Weather.profile``). Accumulations, means and maxima are integrated over
sub-steps of at most 30 minutes (15 for ICON-D2's quarter hours), so they never decrease, and
interval means are zero when the sun stayed down.

Choices a reader of the files should know: interval fields (the gust maxima) start at the
first step after 0 (no interval ends at step 0); IFS surface geopotential is written at step 0
only; overcast is 99.99 % so that 16-bit packing never decodes above 100 % (JMA's 12-bit
percentages are capped at 99.98 % for the same reason); the DWD local section (254) is not
written (this ecCodes cannot encode it). The default area (``DEFAULT_AREA``, west -25, south
20, east 150, north 72) crops the global model to Europe and Asia as far as Japan; a regional
model is cropped to it too and must overlap it by at least 2 x 2 points.

Nothing depends on the wall clock or on unseeded randomness: the same model, init time, scale,
area and steps give byte-identical files.
"""

from __future__ import annotations

import bz2
import functools
import hashlib
import json
import logging
import math
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import eccodes
import numpy as np

from ..catalogue import variable
from ..config import HUB_HEIGHT_RANGE_M
from . import ifs
from .base import RUN_LEVELS, FetchedRun, GribField, ModelSpec, Processing, RunRef
from .icon import (CELL_CENTRES, LEVEL_COUNTS, NATIVE_GRIDS, NOT_IN_V1, SLEVE_DECAY,
                   VERTICAL_GRIDS, hub_levels, legacy_path, v1_path)
from .msm import file_group as msm_file_group
from .msm import file_name as msm_file_name

log = logging.getLogger(__name__)

# Part of the cached run's fingerprint: bump it when the files written change, so that
# runs cached by an older version are rewritten (2: CLCL, ASOB_S, ICON model levels, HHL;
# 3: JMA MSM, East Asian weather and orography, orographic lift, the wider default area;
# 4: ICON's real level counts, HHL on every half level; 5: MSM multi-field messages, GFS DSWRF
# as 0/4/192, IFS tcc as paramId 164 in 0-1, IFS gust windows as ECMWF posts them).
GENERATOR = "pointcast-sample/5"  # (GFS added without a bump: no earlier file changed)
SYNTHETIC_NOTE = ("SYNTHETIC DATA: written by pointcast's embedded sample source from an "
                  "analytic weather model; this is not a real forecast.")

DEFAULT_SCALE = 4
ICON_LAYOUTS = ("v1", "legacy")
# West, south, east, north: Europe, and Asia as far as Japan (MSM's whole domain lies inside,
# and IFS covers Japan beyond MSM's horizon).
DEFAULT_AREA = (-25.0, 20.0, 150.0, 72.0)

UTC = timezone.utc
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

R_EARTH = 6.371e6  # m
OMEGA = 7.292e-5  # s-1
G = 9.80665  # m s-2
RD = 287.05  # J kg-1 K-1
LAPSE = 0.0065  # K m-1
RHO = 1.2  # kg m-3, near-surface air density for the geostrophic wind
SUB_STEP_MIN = 30  # longest integration sub-step of accumulated and interval fields
# DWD's legacy regular lat/lon tree: simple packing, 16 bits. (DWD moved ICON output to
# "grid_ccsds" on 16 June 2026; ecCodes reads both, so readers must not assume either.)
DWD_PACKING = "grid_simple"
ECMWF_PACKING = "grid_ccsds"
# JMA's GPV: simple packing at 12 bits (JMA's published file sizes, see sources/msm.py).
JMA_PACKING = "grid_simple"
JMA_BITS = 12
# ICON model-level wind is written at every step up to this lead time (hours; None: all).
MODEL_LEVEL_HOURS: int | None = None
# Full levels written above those that span the hub heights (see Weather).
EXTRA_MODEL_LEVELS = 1

# ------------------------------------------------------------------------------------------
# Grids actually written: the operational grid, cropped to the area, every Nth row/column.
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleGrid:
    """A regular lat/lon grid in file order (rows along ``lats``, columns along ``lons``)."""

    lats: np.ndarray  # 1-D, first row first
    lons: np.ndarray  # 1-D, -180..180
    dlat: float  # positive increments
    dlon: float

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.lats), len(self.lons)

    @property
    def south_to_north(self) -> bool:
        return len(self.lats) < 2 or self.lats[1] > self.lats[0]


    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Latitudes as a column and longitudes as a row: fields are (lat, lon) arrays."""
        return self.lats.astype(float)[:, None], self.lons.astype(float)[None, :]

    def describe(self) -> str:
        nlat, nlon = self.shape
        return (f"{nlat} x {nlon} points, lat {self.lats[0]}..{self.lats[-1]}, lon "
                f"{self.lons[0]}..{self.lons[-1]}, spacing {self.dlat} x {self.dlon} deg")


@dataclass(frozen=True)
class CellGrid:
    """The cell centres of a native-style unstructured grid, in file order.

    A Fibonacci lattice stands in for ICON's refined icosahedron: points spread evenly over
    the sphere with one cell per ``spacing_km`` squared (ICON's effective mesh size is the
    square root of the mean cell area), cropped to the model's domain and the sample area. It
    has what a reader of ICON's grids must cope with (no rows or columns, neighbours found by
    distance only) and is made in milliseconds at any scale."""

    lats: np.ndarray  # degrees, one per cell
    lons: np.ndarray  # degrees, -180..180
    number: int  # numberOfGridUsed (the real model's)
    uuid: str  # uuidOfHGrid (this sample grid's own)
    spacing_km: float

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.lats),)

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Latitudes and longitudes both as columns: fields are (cell, 1) arrays."""
        return self.lats.astype(float)[:, None], self.lons.astype(float)[:, None]

    def describe(self) -> str:
        return (f"{len(self.lats)} cells of an unstructured grid (Fibonacci lattice standing "
                f"in for ICON grid {self.number}, uuidOfHGrid {self.uuid}), about "
                f"{self.spacing_km:g} km apart, lat {self.lats.min():.2f}..{self.lats.max():.2f}, "
                f"lon {self.lons.min():.2f}..{self.lons.max():.2f}")


def cell_grid(model: ModelSpec, scale: int, area: tuple[float, float, float, float]) -> CellGrid:
    """``model``'s native-style grid at ``scale`` times its mesh size, cropped to its domain and
    ``area`` (west, south, east, north). Only the lattice's latitude band is generated (the
    lattice index runs monotonically with latitude), so scale 1 costs no global array."""
    g = NATIVE_GRIDS[model.id]
    west, south, east, north = area
    south, north = max(south, g.lat_min), min(north, g.lat_max)
    west, east = max(west, g.lon_min), min(east, g.lon_max)
    spacing = g.spacing_km * scale
    n = max(3, round(4.0 * math.pi * (R_EARTH / 1000.0) ** 2 / spacing ** 2))
    # Lattice point i sits at z = 1 - (2 i + 1) / n and longitude i times the golden angle.
    lo = max(0, math.floor(((1.0 - math.sin(math.radians(north))) * n - 1.0) / 2.0))
    hi = min(n - 1, math.ceil(((1.0 - math.sin(math.radians(south))) * n - 1.0) / 2.0))
    i = np.arange(lo, hi + 1, dtype=np.float64)
    lat = np.degrees(np.arcsin(1.0 - (2.0 * i + 1.0) / n))
    lon = (np.degrees(i * (math.pi * (3.0 - math.sqrt(5.0)))) + 180.0) % 360.0 - 180.0
    keep = (lat >= south) & (lat <= north) & (lon >= west) & (lon <= east)
    if keep.sum() < 3:
        raise ValueError(f"sample area {area} leaves fewer than 3 cells of {model.id}'s native "
                         f"grid at scale {scale}")
    key = f"pointcast-sample {model.id} native grid {scale} {list(area)}"
    return CellGrid(lats=np.round(lat[keep], 6), lons=np.round(lon[keep], 6), number=g.number,
                    uuid=hashlib.md5(key.encode()).hexdigest(), spacing_km=spacing)


def _axis(first: float, last: float, step: float) -> np.ndarray:
    n = round(abs(last - first) / step) + 1
    sign = 1.0 if last >= first else -1.0
    return np.round(first + sign * step * np.arange(n), 6)


def sample_grid(model: ModelSpec, scale: int, area: tuple[float, float, float, float]) -> SampleGrid:
    """Crop ``model``'s grid to ``area`` (west, south, east, north) and keep every ``scale``-th
    row and column, counted from the first row/column of the operational grid (so coarser
    samples are subsets of finer ones)."""
    west, south, east, north = area
    g = model.grid
    lat = _axis(g.lat_first, g.lat_last, g.dlat)
    lon = _axis(g.lon_first, g.lon_last, g.dlon)
    eps = 1e-6
    # Grids stored 0..360 (GFS) are cropped in -180..180 like the others: the columns east of
    # 180 come first, so an area across the Greenwich meridian is one contiguous block.
    lon = np.round((lon + 180.0) % 360.0 - 180.0, 6)
    rows = np.nonzero((lat >= south - eps) & (lat <= north + eps)
                      & (np.arange(len(lat)) % scale == 0))[0]
    cols = np.nonzero((lon >= west - eps) & (lon <= east + eps)
                      & (np.arange(len(lon)) % scale == 0))[0]
    cols = cols[np.argsort(lon[cols], kind="stable")]
    if len(rows) < 2 or len(cols) < 2:
        raise ValueError(f"sample area {area} leaves fewer than 2x2 points of {model.id}'s grid "
                         f"at scale {scale}")
    if not np.allclose(np.diff(lon[cols]), g.dlon * scale, atol=1e-4):
        raise ValueError(f"sample area {area} at scale {scale}: the columns of {model.id}'s "
                         f"grid are not evenly spaced across the 0/360 seam")
    return SampleGrid(lats=lat[rows], lons=lon[cols], dlat=g.dlat * scale, dlon=g.dlon * scale)


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

# Mountain ranges as Gaussian ridges: lat, lon, height (m), sigma along/across (km), azimuth of
# the ridge axis (deg clockwise from north).
RIDGES: tuple[tuple[float, float, float, float, float, float], ...] = (
    (45.8, 7.0, 2300, 130, 55, 15),  # western Alps
    (46.5, 9.8, 2500, 190, 65, 75),  # central Alps
    (47.2, 13.2, 1900, 200, 65, 90),  # eastern Alps
    (42.7, 0.8, 1800, 210, 45, 100),  # Pyrenees
    (60.8, 8.0, 1300, 200, 90, 15),  # southern Scandinavian mountains
    (63.3, 11.8, 1000, 220, 75, 30),
    (66.5, 15.5, 1000, 230, 70, 35),
    (69.0, 19.5, 900, 200, 60, 55),
    (49.2, 20.5, 1100, 170, 50, 90),  # western Carpathians (Tatra)
    (47.8, 24.8, 1000, 200, 55, 135),  # eastern Carpathians
    (45.5, 25.0, 1400, 170, 45, 80),  # southern Carpathians
    (31.3, -6.8, 2300, 300, 80, 60),  # High Atlas
    (34.8, 1.0, 1300, 380, 90, 75),  # Tell/Saharan Atlas
    (57.0, -4.6, 650, 110, 60, 40),  # Scottish Highlands
    (43.0, 12.6, 1200, 330, 50, 135),  # Apennines
    (43.6, 18.0, 1300, 330, 70, 130),  # Dinaric Alps
    (42.6, 24.0, 1400, 240, 60, 90),  # Balkan/Rila
    (40.4, -3.8, 700, 380, 260, 60),  # Iberian Meseta
    (37.1, -3.2, 1700, 110, 40, 80),  # Sierra Nevada
    (45.3, 2.9, 900, 120, 100, 0),  # Massif Central
    (48.2, 8.2, 800, 90, 40, 15),  # Black Forest
    (50.3, 13.0, 700, 120, 45, 60),  # Ore Mountains
    (64.8, -18.5, 800, 150, 110, 90),  # Iceland
    (42.8, 44.0, 2800, 350, 70, 115),  # Caucasus
    (39.0, 34.0, 1100, 520, 260, 90),  # Anatolian plateau
    (38.5, 44.5, 1800, 300, 150, 90),  # Armenian highlands
    (42.0, -110.0, 2200, 1300, 320, 160),  # Rocky Mountains
    (-20.0, -68.0, 3700, 2500, 200, 175),  # Andes
    (33.0, 86.0, 4800, 1300, 550, 95),  # Tibet and Himalaya
    (9.0, 39.0, 2000, 500, 320, 30),  # Ethiopian highlands
    (-26.0, 27.0, 1300, 800, 500, 45),  # southern African plateau
    (73.0, -40.0, 2600, 1000, 480, 170),  # Greenland ice sheet
    (-80.0, 45.0, 2800, 2000, 1200, 90),  # East Antarctica
    # Asia (IFS's area reaches Japan).
    (60.0, 59.5, 700, 1200, 90, 5),  # Urals
    (42.0, 80.0, 3800, 800, 130, 80),  # Tian Shan
    (37.5, 72.0, 4200, 400, 150, 60),  # Pamir and Hindu Kush
    (48.5, 89.0, 2500, 500, 120, 130),  # Altai
    (52.0, 96.0, 2000, 500, 120, 100),  # Sayan
    (47.0, 103.0, 1600, 900, 450, 80),  # Mongolian plateau
    (32.0, 50.0, 2000, 900, 120, 135),  # Zagros
    (36.2, 52.0, 2800, 300, 50, 95),  # Elburz
    (33.0, 56.0, 1200, 800, 500, 110),  # Iranian plateau
    (34.0, 108.0, 2200, 400, 60, 90),  # Qinling
    (37.0, 113.5, 1300, 350, 60, 20),  # Taihang
    (26.0, 104.0, 1800, 500, 300, 90),  # Yunnan-Guizhou plateau
    (27.0, 117.5, 1100, 300, 60, 50),  # Wuyi
    (47.0, 121.0, 1000, 600, 100, 20),  # Greater Khingan
    (46.0, 136.0, 1000, 500, 80, 40),  # Sikhote-Alin
    (49.0, 143.0, 900, 400, 30, 0),  # Sakhalin
    (41.5, 128.0, 1600, 150, 60, 45),  # Changbai, northern Korea
    (37.3, 128.8, 1100, 200, 30, 155),  # Taebaek, Korea
    (23.6, 121.0, 2800, 170, 35, 15),  # Taiwan's Central Range
    # Japan (MSM's 5 km grid resolves these).
    (36.35, 137.6, 2200, 60, 18, 10),  # Hida Mountains (Northern Alps)
    (35.75, 137.85, 1800, 40, 12, 15),  # Kiso Mountains (Central Alps)
    (35.45, 138.2, 2200, 55, 18, 20),  # Akaishi Mountains (Southern Alps)
    (35.36, 138.73, 2600, 14, 14, 0),  # Mount Fuji
    (36.9, 139.0, 1500, 80, 25, 40),  # Echigo and Mikuni Mountains
    (39.3, 140.85, 1100, 220, 22, 5),  # Ou Mountains (Tohoku's spine)
    (38.9, 140.1, 1000, 150, 18, 5),  # Dewa Mountains, Chokai, Gassan
    (39.6, 141.5, 800, 120, 30, 0),  # Kitakami Highlands
    (37.4, 140.55, 600, 80, 25, 5),  # Abukuma Highlands
    (42.75, 142.85, 1400, 90, 18, 155),  # Hidaka Mountains (Hokkaido)
    (43.6, 142.8, 1600, 50, 25, 45),  # Daisetsuzan and Tokachi (Hokkaido)
    (44.3, 142.5, 800, 120, 25, 0),  # Teshio and Kitami Mountains (Hokkaido)
    (44.05, 145.05, 1200, 40, 8, 45),  # Shiretoko
    (34.1, 135.9, 1300, 70, 30, 10),  # Kii Mountains
    (35.1, 133.4, 900, 200, 25, 65),  # Chugoku Mountains
    (33.75, 133.4, 1400, 140, 20, 70),  # Shikoku Mountains
    (32.4, 131.1, 1200, 110, 30, 30),  # Kyushu Mountains
)


class LandMask:
    """Land and sea at 1/40 degree, and the land fraction of 0.25-degree cells smoothed by one
    cell, derived from the 1 km mask of ``global_land_mask``.

    The package keeps its full mask (~1 GB) in memory once imported, so the mask is streamed
    from the package's ``.npz`` instead (every 3rd row and column) and the result, 13 MB of
    packed bits, is kept in memory and under ``<cache>/sample/`` for the next process."""

    RES = 40  # cells per degree
    FILE = "landmask-40.npy"

    def __init__(self, bits: np.ndarray):
        from scipy.ndimage import gaussian_filter

        if bits.shape != (180 * self.RES, 360 * self.RES // 8):
            raise ValueError(f"land mask has shape {bits.shape}")
        self.bits = bits  # packed along longitude, rows from 90 N, columns from 180 W
        land = np.unpackbits(bits, axis=1).reshape(720, self.RES // 4, 1440, self.RES // 4)
        frac = land.mean(axis=(1, 3), dtype=np.float64)
        self.frac025 = gaussian_filter(frac, sigma=1.0, mode=("nearest", "wrap"))

    @classmethod
    def load(cls, cache_root: Path | None = None) -> "LandMask":
        global _LAND_MASK
        if _LAND_MASK is not None:
            return _LAND_MASK
        path = Path(cache_root) / "sample" / cls.FILE if cache_root is not None else None
        bits = None
        if path is not None and path.exists():
            try:
                bits = np.load(path, allow_pickle=False)
            except (OSError, ValueError):
                bits = None
        if bits is None:
            bits = cls._derive()
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                with open(tmp, "wb") as fh:
                    np.save(fh, bits, allow_pickle=False)
                os.replace(tmp, path)
        _LAND_MASK = cls(bits)
        return _LAND_MASK

    @classmethod
    def _derive(cls) -> np.ndarray:
        import importlib.util
        import zipfile

        from numpy.lib import format as npformat

        spec = importlib.util.find_spec("global_land_mask")
        if spec is None or spec.origin is None:
            raise RuntimeError("global_land_mask is not installed")
        npz = Path(spec.origin).parent / "globe_combined_mask_compressed.npz"
        keep = 120 // cls.RES  # the package's mask has 120 cells per degree
        rows = []
        with zipfile.ZipFile(npz) as zf, zf.open("mask.npy") as fh:
            version = npformat.read_magic(fh)
            read_header = (npformat.read_array_header_1_0 if version == (1, 0)
                           else npformat.read_array_header_2_0)
            (nrow, ncol), fortran, dtype = read_header(fh)
            if fortran or dtype != np.bool_ or (nrow, ncol) != (180 * 120, 360 * 120):
                raise RuntimeError(f"unexpected land mask layout {nrow}x{ncol} {dtype}")
            block = 720
            for _ in range(nrow // block):
                water = np.frombuffer(fh.read(block * ncol), dtype=np.uint8).reshape(block, ncol)
                rows.append(water[1::keep, 1::keep] == 0)
        return np.packbits(np.concatenate(rows), axis=1)

    def is_land(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """Land (True) at ``lat``, ``lon`` (degrees, broadcast against each other: a column and
        a row for a regular grid, two columns for the cells of an unstructured one)."""
        n = self.RES
        i = np.clip(np.floor((90.0 - np.asarray(lat)) * n), 0, 180 * n - 1).astype(np.intp)
        j = np.mod(np.floor((np.asarray(lon) + 180.0) * n), 360 * n).astype(np.intp)
        byte = self.bits[i, j >> 3]
        return ((byte >> (7 - (j & 7))) & 1).astype(bool)

    def fraction(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """Smoothed land fraction (0..1), bilinear between 0.25-degree cells (``lat`` and
        ``lon`` broadcast as in ``is_land``)."""
        from scipy.ndimage import map_coordinates

        frac = self.frac025
        padded = np.concatenate([frac[:, -1:], frac, frac[:, :1]], axis=1)
        lat2, lon2 = np.broadcast_arrays(np.asarray(lat), np.asarray(lon))
        i = (89.875 - lat2) / 0.25
        j = (lon2 + 179.875) / 0.25 + 1.0
        return map_coordinates(padded, [i.ravel(), j.ravel()], order=1,
                                mode="nearest").reshape(lat2.shape)


_LAND_MASK: LandMask | None = None


def _ridges(lat: np.ndarray, lon: np.ndarray, grid_km: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mountain ridges (m, over land and sea alike) and their slope (m per m, eastwards and
    northwards, analytic) at ``lat``, ``lon`` (broadcast as in ``LandMask.is_land``). A model
    with a coarser grid sees the ridges smoothed by its grid spacing (lower, wider)."""
    phi = np.radians(lat)
    shape = np.broadcast_shapes(np.shape(lat), np.shape(lon))
    h, dhdx, dhdy = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for rlat, rlon, height, along, across, azimuth in RIDGES:
        sa, sc = math.hypot(along, grid_km), math.hypot(across, grid_km)
        margin = 5.0 * max(sa, sc) / 111.2  # degrees of latitude beyond which it is ~0
        if rlat < lat.min() - margin or rlat > lat.max() + margin:
            continue
        peak = height * along * across / (sa * sc)
        dlon = np.radians((lon - rlon + 180.0) % 360.0 - 180.0)
        x = R_EARTH / 1000.0 * np.cos(phi) * dlon  # km east
        y = R_EARTH / 1000.0 * (phi - math.radians(rlat))  # km north
        az = math.radians(azimuth)
        a = x * math.sin(az) + y * math.cos(az)
        c = x * math.cos(az) - y * math.sin(az)
        hr = peak * np.exp(-0.5 * ((a / sa) ** 2 + (c / sc) ** 2))
        h = h + hr
        # d/da and d/dc (m per km), turned back to east/north, in m per m.
        da, dc = -hr * a / (sa * sa), -hr * c / (sc * sc)
        dhdx = dhdx + (da * math.sin(az) + dc * math.cos(az)) * 1e-3
        dhdy = dhdy + (da * math.cos(az) - dc * math.sin(az)) * 1e-3
    return h, dhdx, dhdy


def _orography(lat: np.ndarray, lon: np.ndarray, land: np.ndarray, landfrac: np.ndarray,
               grid_km: float, ridges: np.ndarray | None = None) -> np.ndarray:
    """Surface height (m): smooth ridges plus a low plateau over land, 0 over sea."""
    if ridges is None:
        ridges = _ridges(lat, lon, grid_km)[0]
    h = 120.0 * np.clip(landfrac, 0.0, 1.0) ** 2 + ridges
    return np.where(land, h, 0.0)


@functools.lru_cache(maxsize=None)
def flat_half_level_heights(model_id: str) -> tuple[float, ...]:
    """Heights (m) of the half levels 1..N+1 of ``model_id`` over flat terrain at sea level,
    N = ``icon.LEVEL_COUNTS``: ICON's level distribution ``a(k) = H (2/pi arccos(((k-1)/M)
    **s))**x`` over the column of ``icon.VERTICAL_GRIDS`` (M levels), ``x`` found by bisection
    so that the lowest layer is ``lowest_layer_m`` thick; a nest (ICON-EU) takes the lowest N
    layers of that column."""
    g, n = VERTICAL_GRIDS[model_id], LEVEL_COUNTS[model_id]
    k = np.arange(g.levels + 1, dtype=np.float64)  # k - 1 of half levels 1..M+1
    base = 2.0 / math.pi * np.arccos((k / g.levels) ** g.stretch)
    lo, hi = 0.5, 10.0  # the lowest layer thins as x grows
    for _ in range(100):
        x = 0.5 * (lo + hi)
        lo, hi = (x, hi) if g.top_m * base[-2] ** x > g.lowest_layer_m else (lo, x)
    a = g.top_m * base ** x
    return tuple(float(v) for v in a[g.levels - n:])


def half_level_height(model_id: str, level: int, orog: np.ndarray) -> np.ndarray:
    """Height above sea level (m) of ICON half level ``level`` over the surface height
    ``orog``: the flat-terrain height ``a`` of the level (``flat_half_level_heights``) on top
    of the terrain, whose imprint decays upwards as in ICON's SLEVE coordinate,
    ``z = a + b(a) orog`` with ``b(a) = sinh((H/d)**n - (a/d)**n) / sinh((H/d)**n)``. The
    lowest half level is the surface itself; above it the layers are thinner over mountains
    (the lowest 469 m of ICON-EU's flat column shrink to about 320 m over 2000 m of
    orography). ICON also keeps very thin layers from getting thinner still over high terrain;
    the sample does not (its orography is smooth)."""
    a = flat_half_level_heights(model_id)[level - 1]
    d, n, top = SLEVE_DECAY
    b = math.sinh((top / d) ** n - (a / d) ** n) / math.sinh((top / d) ** n)
    return (a + b * np.asarray(orog, dtype=np.float64)).astype(np.float32)


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

    def __init__(self, model: ModelSpec, grid: "SampleGrid | CellGrid", land: "LandMask"):
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
        ridges, dhdx, dhdy = _ridges(lat, lon, model.grid.dlat * 111.2)
        self.orog = _orography(lat, lon, self.land, lf, model.grid.dlat * 111.2,
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


# ------------------------------------------------------------------------------------------
# GRIB encoding
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Product:
    """One kind of message an upstream writes: a parameter on one level."""

    short_name: str  # as decoded (table value)
    param: str  # upstream name (DWD) or the short name (ECMWF)
    type_of_level: str
    level: int | None  # pressure level (hPa) or model level number where the rows give one
    rows: tuple[GribField, ...]

    @property
    def processing(self) -> Processing:
        return self.rows[0].processing

    @property
    def fine(self) -> bool:
        return any(r.fine for r in self.rows)

    @property
    def scale(self) -> float:
        return self.rows[0].scale

    @property
    def offset(self) -> float:
        return self.rows[0].offset


# Level types whose messages are one per level (the others encode their level in the name:
# IFS 100u, 200u).
LEVELLED = ("isobaricInhPa", "generalVerticalLayer", "generalVertical")
MODEL_LEVEL_TYPES = ("generalVerticalLayer", "generalVertical")


def products_of(model: ModelSpec, run_levels: Mapping[str, tuple[int, ...]] | None = None
                ) -> list[Product]:
    """The distinct messages behind a model's table (a message several rows map to, such as
    ICON's ASWDIR_S or IFS's 10u, is written once). Rows of another GRIB edition than 2
    (IFS's GRIB1 encodings) are not written: the sample writes GRIB2 only. The levels of
    ``RUN_LEVELS`` rows are ``run_levels[typeOfLevel]`` (``Weather.run_levels``)."""
    groups: dict[tuple, list[GribField]] = {}
    for row in model.fields:
        if row.edition not in (None, 2):
            continue
        levels = row.levels
        if levels == RUN_LEVELS:
            levels = (run_levels or {}).get(row.typeOfLevel, ())
            if not levels:
                continue
        for level in levels or (None,):
            # A row over several levels of one name (GFS ``u`` at 80 and 100 m) is one
            # message per level, whatever the level type.
            levelled = row.typeOfLevel in LEVELLED or len(levels or ()) > 1
            key = (row.shortName, row.param or row.shortName, row.typeOfLevel,
                   level if levelled else None)
            groups.setdefault(key, []).append(row)
    out = []
    for (short, param, tol, level), rows in groups.items():
        if len({(r.processing, r.scale, r.offset) for r in rows}) != 1:
            raise ValueError(f"{model.id}: rows of {short}/{param} disagree on processing/scale")
        out.append(Product(short, param, tol, level, tuple(rows)))
    return out


def _raw(canonical: np.ndarray, product: Product, param_id: int | None = None) -> np.ndarray:
    """Canonical values -> the upstream's encoding (canonical = raw * scale + offset), in the
    row's encoding of ``param_id`` where given (IFS tcc 164 is a fraction, 228164 per cent)."""
    scale = product.scale
    if param_id is not None:
        scale *= next((e.scale for e in product.rows[0].encodings if e.paramId == param_id), 1.0)
    if scale == 1.0 and product.offset == 0.0:
        return canonical
    return (canonical - product.offset) / scale


def _quantity(product: Product, kind: str) -> Any:
    """The canonical quantity a product encodes."""
    table = {"ecmwf": _ECMWF_QUANTITY, "dwd": _DWD_QUANTITY, "jma": _JMA_QUANTITY}[kind]
    key = product.short_name if kind == "ecmwf" else product.param
    if kind == "dwd" and product.type_of_level in MODEL_LEVEL_TYPES:
        name = _DWD_MODEL_LEVEL_QUANTITY[key]
    else:
        name = table[key]
    return (name, product.level) if product.type_of_level in LEVELLED else name


_ECMWF_QUANTITY = {
    "2t": "t2m", "2d": "d2m", "sp": "sp", "msl": "msl", "10u": "u10", "10v": "v10",
    "100u": ("u", 100), "100v": ("v", 100), "200u": ("u", 200), "200v": ("v", 200),
    "10fg3": "gust", "10fg": "gust", "tp": "tp_acc", "sf": "sf_acc", "ssrd": "ghi_acc",
    "fdir": "dir_acc", "tcc": "tcc", "vis": "vis", "mucape": "cape", "z": "orog",
    "t": "t_pl", "u": "u_pl", "v": "v_pl", "gh": "z_pl",
}
# ECMWF encodings, by decoded shortName: the paramId ECMWF writes. tcc: 164 (a fraction, 0-1),
# as ECMWF open data carries it since the 2025-11-20 12 UTC run (``sources/ifs.py``).
_ECMWF_PARAM_ID = {
    "2t": 167, "2d": 168, "sp": 134, "msl": 151, "10u": 165, "10v": 166, "100u": 228246,
    "100v": 228247, "200u": 228239, "200v": 228240, "10fg3": 228028, "10fg": 49, "tp": 228,
    "sf": 144, "ssrd": 169, "fdir": 228021, "tcc": 164, "vis": 3020, "mucape": 228235,
    "z": 129, "t": 130, "u": 131, "v": 132, "gh": 156,
}
# IFS gust (paramId 49 with the post-processing step as its window): the name ecCodes decodes
# follows the window's length in hours (sources/ifs.py).
_ECMWF_GUST_BY_INTERVAL = {1: "10fg", 3: "10fg3", 6: "10fg"}

_DWD_QUANTITY = {
    "T_2M": "t2m", "TD_2M": "d2m", "PS": "sp", "PMSL": "msl", "U_10M": "u10", "V_10M": "v10",
    "VMAX_10M": "gust", "TOT_PREC": "tp_acc", "SNOW_GSP": "sf_ls_acc", "SNOW_CON": "sf_cv_acc",
    "ASWDIR_S": "dir_avg", "ASWDIFD_S": "dif_avg", "CLCT": "tcc", "VIS": "vis",
    "CAPE_ML": "cape", "HSURF": "orog", "T": "t_pl", "U": "u_pl", "V": "v_pl", "FI": "z_pl",
    "CLCL": "lcc", "ASOB_S": "net_avg",
}
_DWD_MODEL_LEVEL_QUANTITY = {"U": "u_ml", "V": "v_ml", "HHL": "hhl"}
_H2 = dict(typeOfFirstFixedSurface=103, scaleFactorOfFirstFixedSurface=0,
           scaledValueOfFirstFixedSurface=2)
_H10 = dict(typeOfFirstFixedSurface=103, scaleFactorOfFirstFixedSurface=0,
            scaledValueOfFirstFixedSurface=10)
# DWD writes the surface with scale factor and value 0 (not missing), as in its real files.
_SFC = dict(typeOfFirstFixedSurface=1, scaleFactorOfFirstFixedSurface=0,
            scaledValueOfFirstFixedSurface=0)
# DWD encodings (GRIB2 keys as in DWD's parameter database), by DWD parameter name.
_DWD_KEYS: dict[str, dict[str, int]] = {
    "T_2M": dict(parameterCategory=0, parameterNumber=0, **_H2),
    "TD_2M": dict(parameterCategory=0, parameterNumber=6, **_H2),
    "PS": dict(parameterCategory=3, parameterNumber=0, **_SFC),
    "PMSL": dict(parameterCategory=3, parameterNumber=1, typeOfFirstFixedSurface=101),
    "U_10M": dict(parameterCategory=2, parameterNumber=2, **_H10),
    "V_10M": dict(parameterCategory=2, parameterNumber=3, **_H10),
    "VMAX_10M": dict(productDefinitionTemplateNumber=8, parameterCategory=2, parameterNumber=22,
                     typeOfStatisticalProcessing=2, **_H10),
    "TOT_PREC": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=52,
                     typeOfStatisticalProcessing=1, **_SFC),
    "SNOW_GSP": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=56,
                     typeOfStatisticalProcessing=1, **_SFC),
    "SNOW_CON": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=55,
                     typeOfStatisticalProcessing=1, **_SFC),
    "ASWDIR_S": dict(productDefinitionTemplateNumber=8, parameterCategory=4, parameterNumber=198,
                     typeOfStatisticalProcessing=0, **_SFC),
    "ASWDIFD_S": dict(productDefinitionTemplateNumber=8, parameterCategory=4,
                      parameterNumber=199, typeOfStatisticalProcessing=0, **_SFC),
    "CLCT": dict(parameterCategory=6, parameterNumber=1, **_SFC),
    # Cloud cover of the layer from the ground (second surface) up to 800 hPa (first).
    "CLCL": dict(parameterCategory=6, parameterNumber=22, typeOfFirstFixedSurface=100,
                 scaleFactorOfFirstFixedSurface=0, scaledValueOfFirstFixedSurface=80000,
                 typeOfSecondFixedSurface=1, scaleFactorOfSecondFixedSurface=0,
                 scaledValueOfSecondFixedSurface=0),
    "ASOB_S": dict(productDefinitionTemplateNumber=8, parameterCategory=4, parameterNumber=9,
                   typeOfStatisticalProcessing=0, **_SFC),
    # On the generalized vertical height coordinate (150), see Encoder._model_level.
    "HHL": dict(parameterCategory=3, parameterNumber=6),
    "VIS": dict(parameterCategory=19, parameterNumber=0, **_SFC),
    "CAPE_ML": dict(parameterCategory=7, parameterNumber=6, typeOfFirstFixedSurface=192),
    # Cell centres of the native grids (degrees), time-invariant.
    "CLAT": dict(parameterCategory=191, parameterNumber=1, **_SFC),
    "CLON": dict(parameterCategory=191, parameterNumber=2, **_SFC),
    "HSURF": dict(parameterCategory=3, parameterNumber=6, typeOfFirstFixedSurface=1,
                  typeOfSecondFixedSurface=101),
    "T": dict(parameterCategory=0, parameterNumber=0),
    "U": dict(parameterCategory=2, parameterNumber=2),
    "V": dict(parameterCategory=2, parameterNumber=3),
    "FI": dict(parameterCategory=3, parameterNumber=4),
}


# JMA encodings (GRIB2 keys as in JMA's GPV format descriptions), by JMA element name.
_JMA_QUANTITY = {
    "PRMSL": "msl", "PRES": "sp", "UGRD": "u10", "VGRD": "v10", "TMP": "t2m", "RH": "rh2m",
    "LCDC": "lcc", "TCDC": "tcc", "APCP": "tp_int", "DSWRF": "ghi_int_avg",
}
# The screen level: 1.5 m above the ground (scale factor 1, scaled value 15).
_H15 = dict(typeOfFirstFixedSurface=103, scaleFactorOfFirstFixedSurface=1,
            scaledValueOfFirstFixedSurface=15)
_JMA_KEYS: dict[str, dict[str, int]] = {
    "PRMSL": dict(parameterCategory=3, parameterNumber=1, typeOfFirstFixedSurface=101),
    "PRES": dict(parameterCategory=3, parameterNumber=0, **_SFC),
    "UGRD": dict(parameterCategory=2, parameterNumber=2, **_H10),
    "VGRD": dict(parameterCategory=2, parameterNumber=3, **_H10),
    "TMP": dict(parameterCategory=0, parameterNumber=0, **_H15),
    "RH": dict(parameterCategory=1, parameterNumber=1, **_H15),
    "LCDC": dict(parameterCategory=6, parameterNumber=3, **_SFC),
    "TCDC": dict(parameterCategory=6, parameterNumber=1, **_SFC),
    # The past hour: precipitation accumulated (1), radiation averaged (0) over (k-1, k].
    "APCP": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=8,
                 typeOfStatisticalProcessing=1, **_SFC),
    "DSWRF": dict(productDefinitionTemplateNumber=8, parameterCategory=4, parameterNumber=7,
                  typeOfStatisticalProcessing=0, **_SFC),
}
# JMA's percentages are written at most this high: 12-bit packing rounds to a quantum of up
# to 1/32 %, and a field whose minimum is not 0 could otherwise decode a hair above 100 %.
JMA_PERCENT_MAX = 99.98

# NCEP GFS encodings (GRIB2 keys as in NCEP's pgrb2 files), by (NCEP name, level type, level):
# the canonical quantity and the keys. Heights above ground take their level from the product.
_NCEP_QUANTITY = {
    "TMP": "t2m", "DPT": "d2m", "PRES": "sp", "PRMSL": "msl", "GUST": "gust_inst",
    "APCP": "tp_window", "DSWRF": "ghi_window_avg", "TCDC": "tcc", "VIS": "vis", "CAPE": "cape",
    "HGT": "orog",
}
_NCEP_KEYS: dict[str, dict[str, int]] = {
    "TMP": dict(parameterCategory=0, parameterNumber=0, **_H2),
    "DPT": dict(parameterCategory=0, parameterNumber=6, **_H2),
    "PRES": dict(parameterCategory=3, parameterNumber=0, **_SFC),
    "PRMSL": dict(parameterCategory=3, parameterNumber=1, typeOfFirstFixedSurface=101),
    "UGRD": dict(parameterCategory=2, parameterNumber=2, typeOfFirstFixedSurface=103,
                 scaleFactorOfFirstFixedSurface=0),
    "VGRD": dict(parameterCategory=2, parameterNumber=3, typeOfFirstFixedSurface=103,
                 scaleFactorOfFirstFixedSurface=0),
    "GUST": dict(parameterCategory=2, parameterNumber=22, **_SFC),
    # Over the 6-hour-reset window: accumulation (1), average (0).
    "APCP": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=8,
                 typeOfStatisticalProcessing=1, **_SFC),
    # NCEP's local number for DSWRF (0/4/192), as in NOAA's files; WMO's 0/4/7 is not used.
    "DSWRF": dict(productDefinitionTemplateNumber=8, parameterCategory=4, parameterNumber=192,
                  typeOfStatisticalProcessing=0, **_SFC),
    # Entire atmosphere (considered as a single layer): level type 10.
    "TCDC": dict(parameterCategory=6, parameterNumber=1, typeOfFirstFixedSurface=10),
    "VIS": dict(parameterCategory=19, parameterNumber=0, **_SFC),
    "CAPE": dict(parameterCategory=7, parameterNumber=6, **_SFC),
    "HGT": dict(parameterCategory=3, parameterNumber=5, **_SFC),
}
# wgrib2's level names in the .idx inventory.
_NCEP_LEVEL_NAMES = {"surface": "surface", "meanSea": "mean sea level",
                     "atmosphere": "entire atmosphere"}
# NOAA's order of these fields inside a pgrb2.0p25 file (by NCEP name and level).
_NCEP_ORDER = [("PRMSL", None), ("VIS", None), ("GUST", None), ("HGT", None), ("PRES", None),
               ("TMP", 2), ("DPT", 2), ("UGRD", 10), ("VGRD", 10), ("APCP", None),
               ("CAPE", None), ("TCDC", None), ("DSWRF", None), ("UGRD", 80), ("VGRD", 80),
               ("UGRD", 100), ("VGRD", 100)]
NCEP_PACKING = "grid_complex_spatial_differencing"
# NCEP's generating process for GFS forecasts (ON388 table A: 96, Global Forecast System).
NCEP_PROCESS_ID = 96

_CENTRE_KIND = {"ecmf": "ecmwf", "edzw": "dwd", "rjtd": "jma", "kwbc": "ncep"}


class Encoder:
    """GRIB2 messages of one model run: a base message with the grid, centre, reference time
    and packing, cloned once per product into a template that is reused for every step."""

    def __init__(self, grid: "SampleGrid | CellGrid", init: datetime, *, centre: str, packing: str,
                 bits: int = 16, process_id: int | None = None,
                 vertical: tuple[int, int, str] | None = None):
        self.kind = _CENTRE_KIND[centre]
        base = eccodes.codes_grib_new_from_samples("GRIB2")
        s = eccodes.codes_set
        s(base, "centre", centre)
        if self.kind == "jma":
            # Master tables 2 and local tables 1, as in JMA's GRIB2 format descriptions (the
            # same in its radar and nowcast GPV); not checked against a real MSM file.
            s(base, "subCentre", 0)
            s(base, "tablesVersion", 2)
            s(base, "localTablesVersion", 1)
        elif self.kind == "ncep":
            # As in a real GFS file (tables 2, local tables 1, subcentre 0).
            s(base, "subCentre", 0)
            s(base, "tablesVersion", 2)
            s(base, "localTablesVersion", 1)
        elif self.kind == "ecmwf":
            s(base, "subCentre", 0)
            s(base, "tablesVersion", 33)
            s(base, "grib2LocalSectionPresent", 1)
            s(base, "localDefinitionNumber", 1)
            s(base, "marsClass", "od")
            s(base, "marsType", "fc")
            s(base, "marsStream", "oper")
            s(base, "experimentVersionNumber", "0001")
        else:
            s(base, "subCentre", 255)
            s(base, "tablesVersion", 19)
            s(base, "localTablesVersion", 1)
        s(base, "significanceOfReferenceTime", 1)
        s(base, "productionStatusOfProcessedData", 0)
        s(base, "typeOfProcessedData", 1)  # forecast products
        s(base, "dataDate", int(init.strftime("%Y%m%d")))
        s(base, "dataTime", int(init.strftime("%H%M")))
        # A sphere of 6371229 m (6): DWD and ECMWF open data, and JMA's MSM (a public decoder
        # of the real Lsurf files, sus304/MSMgrib2Decorder after JMA's technical information
        # No. 500, refuses any other shape).
        if isinstance(grid, CellGrid):
            # DWD's native grids: template 3.101, the grid named by number and UUID (the
            # shape of the earth comes after the template, which resets it).
            s(base, "gridDefinitionTemplateNumber", 101)
            s(base, "numberOfDataPoints", len(grid.lats))
            s(base, "numberOfGridUsed", grid.number)
            s(base, "numberOfGridInReference", 1)
            eccodes.codes_set_string(base, "uuidOfHGrid", grid.uuid)
        s(base, "shapeOfTheEarth", 6)
        if isinstance(grid, SampleGrid):
            nlat, nlon = grid.shape
            s(base, "Ni", nlon)
            s(base, "Nj", nlat)
            s(base, "iScansNegatively", 0)
            s(base, "jScansPositively", 1 if grid.south_to_north else 0)
            s(base, "latitudeOfFirstGridPointInDegrees", float(grid.lats[0]))
            s(base, "longitudeOfFirstGridPointInDegrees", float(grid.lons[0]))
            s(base, "latitudeOfLastGridPointInDegrees", float(grid.lats[-1]))
            s(base, "longitudeOfLastGridPointInDegrees", float(grid.lons[-1]))
            s(base, "iDirectionIncrementInDegrees", grid.dlon)
            s(base, "jDirectionIncrementInDegrees", grid.dlat)
        s(base, "typeOfGeneratingProcess", 2)
        if process_id is not None:
            s(base, "generatingProcessIdentifier", process_id)
        s(base, "packingType", packing)
        s(base, "bitsPerValue", bits)
        self.bits = bits
        # (nlev, numberOfVGridUsed, uuidOfVGrid) of the model levels' vertical grid.
        self.vertical = vertical
        self._base = base
        self._templates: dict[tuple, int] = {}
        self._statistical: dict[tuple, bool] = {}

    def close(self) -> None:
        for h in self._templates.values():
            eccodes.codes_release(h)
        eccodes.codes_release(self._base)
        self._templates.clear()

    def _model_level(self, h: int, product: Product) -> None:
        """Level keys on the generalized vertical height coordinate (code table 4.5: 150), as
        DWD writes them: the vertical-grid header (NV = 6: number of half levels, the grid's
        number and UUID), full level L as the layer between half levels L and L+1
        (generalVerticalLayer), half level L with mean sea level as the second surface for
        HHL, the height above sea level (generalVertical)."""
        if self.vertical is None:
            raise ValueError(f"{product.param}: model levels need the vertical grid")
        nlev, number, uuid = self.vertical
        s = eccodes.codes_set
        s(h, "genVertHeightCoords", 1)
        s(h, "typeOfLevel", product.type_of_level)
        s(h, "nlev", nlev)
        s(h, "numberOfVGridUsed", number)
        eccodes.codes_set_string(h, "uuidOfVGrid", uuid)
        s(h, "scaleFactorOfFirstFixedSurface", 0)
        s(h, "scaledValueOfFirstFixedSurface", int(product.level))
        if product.type_of_level == "generalVerticalLayer":
            s(h, "typeOfSecondFixedSurface", 150)
            s(h, "scaleFactorOfSecondFixedSurface", 0)
            s(h, "scaledValueOfSecondFixedSurface", int(product.level) + 1)
        else:
            s(h, "typeOfSecondFixedSurface", 101)

    def _template(self, product: Product, minutes: bool) -> int:
        key = (product.short_name, product.param, product.type_of_level, product.level,
               minutes)
        h = self._templates.get(key)
        if h is None:
            h = eccodes.codes_clone(self._base)
            if self.kind == "ecmwf":
                eccodes.codes_set(h, "paramId", _ECMWF_PARAM_ID[product.short_name])
            else:
                table = {"dwd": _DWD_KEYS, "jma": _JMA_KEYS, "ncep": _NCEP_KEYS}[self.kind]
                keys = dict(table[product.param])
                if self.kind == "ncep" and product.param in ("UGRD", "VGRD"):
                    keys["scaledValueOfFirstFixedSurface"] = int(product.level or 10)
                eccodes.codes_set(h, "productDefinitionTemplateNumber",
                                  keys.pop("productDefinitionTemplateNumber", 0))
                eccodes.codes_set(h, "discipline", 0)
                for k, v in keys.items():
                    eccodes.codes_set(h, k, v)
            if product.type_of_level == "isobaricInhPa":
                eccodes.codes_set(h, "typeOfLevel", "isobaricInhPa")
                eccodes.codes_set(h, "level", int(product.level))
            elif product.type_of_level in MODEL_LEVEL_TYPES:
                self._model_level(h, product)
            eccodes.codes_set_long(h, "stepUnits", 0 if minutes else 1)
            self._statistical[key] = (
                eccodes.codes_get_long(h, "productDefinitionTemplateNumber") == 8)
            self._templates[key] = h
        return h

    def message(self, product: Product, values: np.ndarray, *, end: int, start: int = 0,
                minutes: bool = False, bits: int | None = None) -> bytes:
        """Encode ``values`` as ``product`` at step ``end`` (a statistic over ``start``-``end``
        for accumulations, means and maxima), in hours, or in minutes if ``minutes``.

        The product's template handle is reused: only the step keys and the values change
        from one message to the next, which keeps the per-message cost near the packing."""
        h = self._template(product, minutes)
        if self._statistical[(product.short_name, product.param, product.type_of_level,
                              product.level, minutes)]:
            eccodes.codes_set_long(h, "startStep", start)
            eccodes.codes_set_long(h, "endStep", end)
        else:
            eccodes.codes_set_long(h, "forecastTime", end)
        # A constant field is packed with 0 bits, after which ecCodes would pick 24: reset.
        eccodes.codes_set_long(h, "bitsPerValue", bits or self.bits)
        eccodes.codes_set_values(h, np.ascontiguousarray(values, dtype=np.float64).ravel())
        return eccodes.codes_get_message(h)


# ------------------------------------------------------------------------------------------
# Writing files
# ------------------------------------------------------------------------------------------


class _Writer:
    """Writes files under the run directory (temporary name, then rename), optionally
    bz2-compressing them, on a small thread pool (bz2 and file I/O release the GIL)."""

    def __init__(self, root: Path):
        self.root = root
        self.files: list[Path] = []
        self.bytes = 0
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sample-write")
        self._pending: list[Future] = []
        self._dirs: set[Path] = set()

    def write(self, rel: str, data: bytes, *, compress: bool = False, data_file: bool = True):
        path = self.root / rel
        if path.parent not in self._dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(path.parent)
        if data_file:
            self.files.append(path)
        self._pending.append(self._pool.submit(self._write, path, data, compress))
        if len(self._pending) > 64:
            self._drain(32)

    def _write(self, path: Path, data: bytes, compress: bool) -> int:
        if compress:
            data = bz2.compress(data, compresslevel=1)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return len(data)

    def _drain(self, keep: int = 0) -> None:
        while len(self._pending) > keep:
            self.bytes += self._pending.pop(0).result()

    def close(self) -> None:
        try:
            self._drain()
        finally:
            self._pool.shutdown(wait=True)


def _ifs_files(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
               writer: _Writer) -> None:
    init = run.init
    prods = products_of(model)
    enc = Encoder(grid, init, centre="ecmf", packing=ECMWF_PACKING)
    heights = tuple(sorted({lv for r in model.fields if r.typeOfLevel == "heightAboveGround"
                            for lv in (r.levels or ())}))
    levels = tuple(sorted({lv for r in model.fields if r.typeOfLevel == "isobaricInhPa"
                           for lv in r.levels or ()}, reverse=True))
    base = f"{init:%Y%m%d}/{init:%H}z/ifs/0p25/oper"
    main = [int(s.total_seconds() // 60) for s in run.steps]
    try:
        for snap in integrate(weather, init, main, [], heights, levels,
                              gust_window=lambda minute: 60 * ifs.gust_window_hours(minute // 60)):
            step = snap.minute // 60
            chunks: list[bytes] = []
            index: list[str] = []
            offset = 0
            for p in prods:
                proc = p.processing
                start = 0
                if proc is Processing.CONSTANT and step != 0:
                    continue
                if proc is Processing.INTERVAL:
                    if snap.interval_start is None:
                        continue  # no interval ends at step 0
                    start = snap.interval_start // 60
                    wanted = _ECMWF_GUST_BY_INTERVAL.get(step - start)
                    if wanted is None:
                        raise ValueError(f"no IFS gust encoding for a {step - start} h interval")
                    if wanted != p.short_name:
                        continue  # the other gust row encodes this interval
                values = _raw(snap.q[_quantity(p, "ecmwf")], p, _ECMWF_PARAM_ID[p.short_name])
                msg = enc.message(p, values, end=step, start=start)
                chunks.append(msg)
                entry: dict[str, Any] = {
                    "domain": "g", "date": f"{init:%Y%m%d}", "time": f"{init:%H%M}",
                    "expver": "0001", "class": "od", "type": "fc", "stream": "oper",
                }
                levtype = "pl" if p.type_of_level == "isobaricInhPa" else "sfc"
                if proc in (Processing.ACCUM_SINCE_START, Processing.INTERVAL):
                    entry.update(levtype=levtype, step=str(step))
                else:
                    entry["step"] = str(step)
                    if p.level is not None:
                        entry["levelist"] = str(p.level)
                    entry["levtype"] = levtype
                entry.update(param=p.param, _offset=offset, _length=len(msg))
                index.append(json.dumps(entry))
                offset += len(msg)
            name = f"{base}/{init:%Y%m%d%H}0000-{step}h-oper-fc"
            writer.write(f"{name}.grib2", b"".join(chunks))
            writer.write(f"{name}.index", ("\n".join(index) + "\n").encode(), data_file=False)
    finally:
        enc.close()


def vertical_grid(model: ModelSpec) -> tuple[int, int, str] | None:
    """The vertical-grid header of ``model``'s model-level fields: ``nlev`` (number of half
    levels of the whole column), ``numberOfVGridUsed`` (4: ICON's height-based SLEVE
    coordinate, ``ivctype`` 2, as ICON writes it) and ``uuidOfVGrid`` (a fixed hash of the
    model id here; DWD's is the UUID of its HHL field, which a reader pairs the model-level
    fields with)."""
    if model.id not in LEVEL_COUNTS:
        return None
    uuid = hashlib.md5(f"pointcast-sample {model.id} vertical grid".encode()).hexdigest()
    return LEVEL_COUNTS[model.id] + 1, 4, uuid


def model_level_minutes(main: list[int]) -> set[int]:
    """The steps (minutes) at which the model-level wind is written: every step of the run,
    as DWD publishes it (see MODEL_LEVEL_HOURS for a cap)."""
    if MODEL_LEVEL_HOURS is None:
        return set(main)
    return {m for m in main if m <= MODEL_LEVEL_HOURS * 60}


def _icon_messages(run: RunRef, model: ModelSpec, weather: Weather, enc: Encoder,
                   prods: list[Product], fine: list[int]):
    """Yield (product, minute, main step, message) of an ICON run in step order, as DWD
    publishes them: constants at step 0 only, model levels at ``model_level_minutes``, interval
    fields once their interval has begun, ``fine`` quarter hours for the fine products."""
    levels = tuple(sorted({lv for r in model.fields if r.typeOfLevel == "isobaricInhPa"
                           for lv in r.levels or ()}, reverse=True))
    main = [int(s.total_seconds() // 60) for s in run.steps]
    ml_minutes = model_level_minutes(main)
    for snap in integrate(weather, run.init, main, fine, (), levels, gust_window=60,
                          model_level_min=ml_minutes):
        minute = snap.minute
        for p in prods:
            proc = p.processing
            if not snap.main and not p.fine:
                continue
            if p.type_of_level == "generalVerticalLayer" and minute not in ml_minutes:
                continue
            if proc is Processing.CONSTANT and minute != 0:
                continue
            start = 0
            if proc is Processing.INTERVAL:
                if snap.interval_start is None:
                    continue
                start = snap.interval_start
            values = _raw(snap.q[_quantity(p, "dwd")], p)
            # DWD gives every step in minutes (ICON-EU's hourly steps too).
            yield p, minute, snap.main, enc.message(p, values, end=minute, start=start, minutes=True)


def _icon_encoder(run: RunRef, model: ModelSpec, grid, packing: str) -> Encoder:
    return Encoder(grid, run.init, centre="edzw", packing=packing,
                   process_id=2 if model.id == "icon-eu" else None, vertical=vertical_grid(model))


def _fine_minutes(run: RunRef, model: ModelSpec) -> list[int]:
    """The model's quarter hours up to the run's last step."""
    last = max(int(s.total_seconds() // 60) for s in run.steps)
    return [m for m in (int(s.total_seconds() // 60) for s in model.fine_steps) if m <= last]


def _icon_files(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
                writer: _Writer) -> None:
    init = run.init
    enc = _icon_encoder(run, model, grid, DWD_PACKING)
    hours_written = {int(s.total_seconds() // 60) for s in run.steps}
    # The 15-minute steps that belong to the hour files written: (SSS-1 h, SSS h].
    fine = [m for m in _fine_minutes(run, model) if -(-m // 60) * 60 in hours_written]

    def path(p: Product, step_h: int | None) -> str:
        return legacy_path(model.id, p.param, init, step_h, p.type_of_level, p.level)

    pending: dict[Product, list[bytes]] = {}  # 15-minute messages waiting for their hour file
    try:
        for p, minute, main_step, msg in _icon_messages(run, model, weather, enc, products_of(model, weather.run_levels), fine):
            if p.processing is Processing.CONSTANT:
                writer.write(path(p, None), msg, compress=True)
                continue
            pending.setdefault(p, []).append(msg)
            if main_step:
                writer.write(path(p, minute // 60), b"".join(pending.pop(p)), compress=True)
        if pending:
            raise RuntimeError(f"{model.id}: 15-minute messages after the last step")
    finally:
        enc.close()


# DWD's v1 tree: CCSDS packing at 16 bits (the cell centres at 24 bits, about 1 m).
DWD_V1_PACKING = "grid_ccsds"
CELL_CENTRE_BITS = 24


def _icon_v1_files(run: RunRef, model: ModelSpec, grid: "CellGrid", weather: Weather,
                   writer: _Writer) -> None:
    """DWD's v1 tree on the native-style grid: one uncompressed GRIB2 message per file at
    ``v1/`` + ``icon.v1_path`` (ICON-D2's quarter hours in files of their own), the cell
    centres as CLAT/CLON and the constants (HSURF, HHL) at step 0."""
    init = run.init
    prods = [p for p in products_of(model, weather.run_levels) if p.param not in NOT_IN_V1]
    enc = _icon_encoder(run, model, grid, DWD_V1_PACKING)

    def path(p: Product, minute: int) -> str:
        return "v1/" + v1_path(model.id, p.param, init, minute, p.type_of_level, p.level)

    try:
        for param, short in CELL_CENTRES.items():
            p = Product(short, param, "surface", None, ())
            values = grid.lats if param == "CLAT" else grid.lons
            writer.write(path(p, 0), enc.message(p, values, end=0, minutes=True,
                                                 bits=CELL_CENTRE_BITS))
        for p, minute, _, msg in _icon_messages(run, model, weather, enc, prods, _fine_minutes(run, model)):
            writer.write(path(p, minute), msg)
    finally:
        enc.close()


def _msm_files(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
               writer: _Writer) -> None:
    """JMA's Lsurf files: one file per range of steps (``msm.FILE_GROUPS``), each holding every
    field of its steps, step by step in JMA's element order (the table's order). The hourly
    precipitation and radiation start at step 1 (no window ends at step 0). A run capped
    below a range's end (``horizon_hours``) writes that range's file with the steps it has."""
    init = run.init
    prods = products_of(model)
    enc = Encoder(grid, init, centre="rjtd", packing=JMA_PACKING, bits=JMA_BITS)
    main = [int(s.total_seconds() // 60) for s in run.steps]
    if any(m % 60 for m in main):
        raise ValueError("MSM steps are whole hours")
    run_id = f"{init:%Y%m%d%H}"
    last = main[-1] // 60
    chunks: list[bytes] = []
    try:
        for snap in integrate(weather, init, main, [], (), ()):
            step = snap.minute // 60
            for p in prods:
                statistical = p.processing is not Processing.INSTANT
                if statistical and snap.interval_start is None:
                    continue  # the past hour's precipitation and radiation start at step 1
                values = _raw(snap.q[_quantity(p, "jma")], p)
                if variable(p.rows[0].var).units == "%":
                    values = np.minimum(values, JMA_PERCENT_MAX)
                # The window of the statistics: since the previous step, (k-1, k].
                start = snap.interval_start // 60 if statistical else 0
                chunks.append(enc.message(p, values, end=step, start=start))
            group = msm_file_group(step)
            if step == group[1] or step == last:
                writer.write(msm_file_name(run_id, group), multi_field(chunks))
                chunks = []
    finally:
        enc.close()


def _sections(message: bytes) -> list[bytes]:
    """Sections 1-7 of a GRIB2 message of one field, as bytes."""
    out, pos = [], 16
    while message[pos:pos + 4] != b"7777":
        size = int.from_bytes(message[pos:pos + 4], "big")
        out.append(message[pos:pos + size])
        pos += size
    return out


def multi_field(messages: list[bytes]) -> bytes:
    """The fields of ``messages`` (GRIB2, one field each, with the same sections 1 and 3 and
    no section 2) as one multi-field message, as JMA writes its GPV: sections 0, 1 and 3
    once, then sections 4-7 of each field in turn, then ``7777``."""
    parts = [_sections(m) for m in messages]
    head = parts[0][:2]
    if any(p[:2] != head or len(p) != 6 for p in parts):
        raise ValueError("the fields of one multi-field message share sections 1 and 3")
    body = b"".join([*head, *(section for p in parts for section in p[2:])])
    sec0 = messages[0][:8] + (16 + len(body) + 4).to_bytes(8, "big")
    return sec0 + body + b"7777"


def gfs_file_name(init: datetime, step_h: int) -> str:
    """NOAA's path of the pgrb2.0p25 file of ``step_h`` (relative to the bucket's root)."""
    return f"gfs.{init:%Y%m%d}/{init:%H}/atmos/gfs.t{init:%H}z.pgrb2.0p25.f{step_h:03d}"


def _ncep_quantity(p: Product) -> Any:
    if p.param in ("UGRD", "VGRD"):
        comp = "u" if p.param == "UGRD" else "v"
        return f"{comp}10" if p.level in (None, 10) else (comp, p.level)
    return _NCEP_QUANTITY[p.param]


def _ncep_level(p: Product) -> int | None:
    if p.param in ("UGRD", "VGRD"):
        return p.level or 10
    return 2 if p.param in ("TMP", "DPT") else None


def _gfs_files(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
               writer: _Writer) -> None:
    """NOAA's pgrb2.0p25 files: one per step with every field of the step (NOAA's order),
    and the wgrib2 ``.idx`` inventory beside each. APCP and DSWRF cover the window from the
    last 6-hourly reset (``gfs.reset_start``) and start at step 1; HGT is in every file."""
    from .gfs import reset_start

    init = run.init
    by_key = {(p.param, _ncep_level(p)): p for p in products_of(model)}
    missing = set(by_key) - set(_NCEP_ORDER)
    if missing:
        raise ValueError(f"gfs: no file position for {sorted(missing, key=str)}")
    prods = [by_key[k] for k in _NCEP_ORDER if k in by_key]
    heights = tuple(sorted({lv for r in model.fields if r.typeOfLevel == "heightAboveGround"
                            for lv in (r.levels or ()) if lv != 10}))
    main = [int(s.total_seconds() // 60) for s in run.steps]
    if any(m % 60 for m in main):
        raise ValueError("GFS steps are whole hours")
    resets = sorted({reset_start(m // 60) * 60 for m in main if m > 0})
    at_reset: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    enc = Encoder(grid, init, centre="kwbc", packing=NCEP_PACKING, process_id=NCEP_PROCESS_ID)
    date = f"{init:%Y%m%d%H}"
    try:
        for snap in integrate(weather, init, main, [r for r in resets if r not in main],
                              heights, ()):
            if snap.minute in resets:
                at_reset[snap.minute] = (snap.q["tp_acc"], snap.q["ghi_acc"])
            if not snap.main:
                continue
            step = snap.minute // 60
            q = snap.q
            start = 0
            if step > 0:
                start = reset_start(step)
                tp0, ghi0 = at_reset[start * 60]
                q["tp_window"] = q["tp_acc"] - tp0
                q["ghi_window_avg"] = (q["ghi_acc"] - ghi0) / ((step - start) * 3600.0)
            chunks: list[bytes] = []
            index: list[str] = []
            offset = 0
            for p in prods:
                statistical = p.processing in (Processing.ACCUM_SINCE_START,
                                               Processing.AVG_SINCE_START)
                if statistical and step == 0:
                    continue  # no window ends at the analysis
                values = _raw(q[_ncep_quantity(p)], p)
                msg = enc.message(p, values, end=step, start=start if statistical else 0)
                if statistical:
                    kind = "acc" if p.processing is Processing.ACCUM_SINCE_START else "ave"
                    when = f"{start}-{step} hour {kind} fcst"
                else:
                    when = "anl" if step == 0 else f"{step} hour fcst"
                lv = _ncep_level(p)
                level = (f"{lv} m above ground" if p.type_of_level == "heightAboveGround"
                         else _NCEP_LEVEL_NAMES[p.type_of_level])
                index.append(f"{len(index) + 1}:{offset}:d={date}:{p.param}:{level}:{when}:")
                chunks.append(msg)
                offset += len(msg)
            name = gfs_file_name(init, step)
            writer.write(name, b"".join(chunks))
            writer.write(f"{name}.idx", ("\n".join(index) + "\n").encode(), data_file=False)
            for r in [r for r in at_reset if r < start * 60]:
                del at_reset[r]
    finally:
        enc.close()


# ------------------------------------------------------------------------------------------
# The source
# ------------------------------------------------------------------------------------------


def _parse_init(value: Any) -> datetime | None:
    if value is None or (isinstance(value, str) and value.strip().lower() == "latest"):
        return None
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"sample source: init must be 'latest' or an ISO time, got "
                             f"{value!r}") from None
    else:
        raise ValueError(f"sample source: init must be 'latest' or an ISO time, got {value!r}")
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _floor_run(model: ModelSpec, when: datetime) -> datetime:
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    t = when.replace(minute=0, second=0, microsecond=0)
    for _ in range(48):
        if t.hour in model.run_hours:
            return t
        t -= timedelta(hours=1)
    raise ValueError(f"model {model.id} has no run hours")


@dataclass
class SampleSource:
    """Deterministic synthetic runs of the configured models, written like their upstreams."""

    name: str = "sample"
    scale: int = DEFAULT_SCALE
    area: tuple[float, float, float, float] = DEFAULT_AREA
    init: Any = "latest"
    horizon_hours: float | None = None  # cap on the steps (tests); None = the full horizon
    # DWD's tree for ICON-EU/ICON-D2: "v1" (native grids, DWD's only scheme after 30 November
    # 2026) or "legacy" (``icon-eu/grib/...`` bz2 files on regular lat/lon grids).
    icon_layout: str = "v1"
    _init: datetime | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if isinstance(self.scale, bool) or not isinstance(self.scale, int) or self.scale < 1:
            raise ValueError(f"sample source: scale must be an integer >= 1, got {self.scale!r}")
        try:
            area = tuple(float(v) for v in self.area)
        except (TypeError, ValueError):
            raise ValueError(f"sample source: area must be [west, south, east, north], got "
                             f"{self.area!r}") from None
        if len(area) != 4 or not (area[0] < area[2] and area[1] < area[3]):
            raise ValueError(f"sample source: area must be [west, south, east, north] with "
                             f"west < east and south < north, got {self.area!r}")
        if not (-180 <= area[0] and area[2] <= 180 and -90 <= area[1] and area[3] <= 90):
            raise ValueError(f"sample source: area {self.area!r} is outside -180..180/-90..90")
        self.area = area  # type: ignore[assignment]
        self._init = _parse_init(self.init)
        if self.horizon_hours is not None and self.horizon_hours < 0:
            raise ValueError("sample source: horizon_hours must be >= 0")
        if self.icon_layout not in ICON_LAYOUTS:
            raise ValueError(f"sample source: icon_layout must be one of {list(ICON_LAYOUTS)}, "
                             f"got {self.icon_layout!r}")

    @classmethod
    def from_options(cls, name: str, options: Mapping[str, Any]) -> "SampleSource":
        known = {"scale", "area", "init", "horizon_hours", "icon_layout"}
        unknown = sorted(set(options) - known - {"type"})
        if unknown:
            raise ValueError(f"source {name!r} (sample): unknown option(s) {unknown}; "
                             f"known: {sorted(known)}")
        kwargs = {k: v for k, v in options.items() if k in known}
        return cls(name=name, **kwargs)

    # -- the Source protocol -----------------------------------------------------------------

    def discover(self, model: ModelSpec, now: datetime) -> RunRef:
        from . import run_steps

        init = _floor_run(model, self._init or now)
        steps = run_steps(model, init)
        if self.horizon_hours is not None:
            steps = tuple(s for s in steps if s <= timedelta(hours=self.horizon_hours))
        return RunRef(model=model.id, init=init, steps=steps, source="sample", synthetic=True,
                      complete=True)

    def fetch(self, run: RunRef, model: ModelSpec, cache: Path) -> FetchedRun:
        if run.model != model.id:
            raise ValueError(f"run of {run.model!r} fetched as model {model.id!r}")
        if not run.steps:
            raise ValueError(f"run {run.model} {run.init:%Y%m%d%H} has no steps")
        init = (run.init.replace(tzinfo=UTC) if run.init.tzinfo is None
                else run.init.astimezone(UTC))
        run_dir = Path(cache) / "sample" / model.id / f"{init:%Y%m%d%H}"
        marker = run_dir / "complete"
        fingerprint = {
            "generator": GENERATOR, "model": model.id, "init": init.isoformat(),
            "steps_minutes": [int(s.total_seconds() // 60) for s in run.steps],
            "scale": self.scale, "area": list(self.area),
        }
        native = model.id in NATIVE_GRIDS and self.icon_layout == "v1"
        if model.id in NATIVE_GRIDS:
            fingerprint["icon_layout"] = self.icon_layout
        notes = (SYNTHETIC_NOTE,
                 f"sample {model.id} run {init:%Y-%m-%d %H} UTC, scale {self.scale} (every "
                 f"{self.scale}th row/column of the {model.grid.dlat} deg grid), area "
                 f"{list(self.area)}")
        if marker.exists():
            try:
                done = json.loads(marker.read_text())
            except (OSError, ValueError):
                done = {}
            if {k: done.get(k) for k in fingerprint} == fingerprint:
                files = tuple(run_dir / f for f in done.get("files", []))
                if all(f.exists() for f in files):
                    return FetchedRun(run=run, files=files, notes=notes)
            log.info("sample %s %s: cached run differs from the configuration, rewriting",
                     model.id, run_dir)
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        grid = (cell_grid if native else sample_grid)(model, self.scale, self.area)
        weather = Weather(model, grid, LandMask.load(cache))
        writer = _Writer(run_dir)
        try:
            writer.write("README.txt", _readme(model, init, grid, self).encode(),
                         data_file=False)
            if model.id == "ifs":
                _ifs_files(run, model, grid, weather, writer)
            elif native:
                _icon_v1_files(run, model, grid, weather, writer)
            elif model.id in ("icon-eu", "icon-d2"):
                _icon_files(run, model, grid, weather, writer)
            elif model.id == "msm":
                _msm_files(run, model, grid, weather, writer)
            elif model.id == "gfs":
                _gfs_files(run, model, grid, weather, writer)
            else:
                raise ValueError(f"the sample source has no writer for model {model.id!r}")
        finally:
            writer.close()
        files = tuple(writer.files)  # in step order
        record = dict(fingerprint, files=[str(f.relative_to(run_dir)) for f in files],
                      bytes=writer.bytes, note=SYNTHETIC_NOTE)
        tmp = marker.with_name(f"complete.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record) + "\n")
        os.replace(tmp, marker)
        log.info("sample %s %s: %d files, %.1f MB", model.id, f"{init:%Y%m%d%H}", len(files),
                 writer.bytes / 1e6)
        return FetchedRun(run=run, files=files, notes=notes)


def _readme(model: ModelSpec, init: datetime, grid: "SampleGrid | CellGrid",
            src: SampleSource) -> str:
    return (
        f"{SYNTHETIC_NOTE}\n\n"
        f"Model stood in for: {model.name} ({model.id}), run {init:%Y-%m-%d %H:%M} UTC.\n"
        f"Layout, parameter encoding, packing and step conventions follow the real upstream\n"
        f"(ECMWF open data for IFS, DWD open data for ICON, JMA's GPV for MSM), the values\n"
        f"do not.\n"
        f"Grid: {grid.describe()}\n"
        f"(scale {src.scale}: {src.scale} times the operational grid spacing, "
        f"area {list(src.area)}).\n"
        f"Generator: {GENERATOR} (pointcast.sources.sample).\n"
    )
