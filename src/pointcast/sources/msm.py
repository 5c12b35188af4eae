"""JMA MSM (Meso-Scale Model), surface fields ("Lsurf") as JMA distributes them in GRIB2.

Grid: regular lat/lon, 0.0625 deg in longitude x 0.05 deg in latitude, 481 x 505 points,
first point 47.6 N 120.0 E (north-west corner), last 22.4 N 150.0 E; rows run from north to
south (``jScansPositively`` 0). The model itself runs at 5 km; the surface GPV is published on
this grid.

Runs and steps, as the Japan Meteorological Business Support Center (JMA's distributor)
describes them for runs from 16 June 2022 00 UTC on: 8 runs a day, every 3 hours. The 00 and 12 UTC runs reach 78 h, the 03, 06, 09, 15, 18 and 21 UTC runs 39 h
(``steps_for_run``); surface fields are hourly (pressure-level fields, not used here, 3-hourly).
History, for readers of old archives: all runs 39 h from 29 May 2013; the 00/12 UTC runs 51 h
from 5 March 2019 (12 UTC run) and 78 h from 16 June 2022. There is no 51 h range for the 06
and 18 UTC runs: those are 39 h runs like 03/09/15/21. ``MSM.steps`` holds the full
00/12 UTC set (0-78 h), so ``MSM.horizon`` is 78 h.

Files: every file holds all surface fields of a range of steps, named
``Z__C_RJTD_<YYYYMMDDhh>0000_MSM_GPV_Rjp_Lsurf_FH<aa>-<bb>_grib2.bin`` with the ranges
``FILE_GROUPS``: FH00-15, FH16-33, FH34-39 for every run, FH40-51 and FH52-78 for the 00/12 UTC
runs (the last two exist since 2019 and 2022). JMA's technical notice No. 373 (2013) gives
64/73/24 MB for the three original files, which then held 10 instantaneous fields and APCP:
about 12 bits per grid value with simple packing (template 5.0) over 481 x 505 points. The
sample writes ``grid_simple``, 12 bits (JMA's exact bit count per element is not checked).

Where runs come from (``UPSTREAM``, read by ``sources/remote/``): JMA sells the GPV through
JMBSC; the table's default mirror is the research archive of Kyoto University's Research
Institute for Sustainable Humanosphere (RISH), which keeps JMA's file names under
``<YYYY>/<MM>/<DD>/`` and serves them for research and education. Configure another mirror
(``[sources.<id>] mirrors = [...]``, ``layouts.lsurf.path``) where you have a licence. No
index exists: the Lsurf files are fetched whole (their length checked against
``Content-Length``) and a run is complete when its last file exists.

A Lsurf file is **one GRIB2 message of many fields**: sections 0, 1 and 3 once, then sections
4-7 for each field in turn (a FH34-39 file holds 72 fields), as JMA's technical information
No. 500 (annex 2-2, the MSM GPV's GRIB2 format) describes it and the public decoder
sus304/MSMgrib2Decorder reads the real files: template 5.0 with 12 bits, earth shape 6 (a
sphere), rows from north to south. ecCodes reads such a message field by field only with its
multi-field support on; wgrib2 lists the fields as 1.1, 1.2 ... The decoder reads every field
(``ingest.scan._fields``).

Elements of Lsurf (JMA names as wgrib2 prints them) and what ecCodes 2.50 decodes from them
(checked by writing JMA's encoding with centre ``rjtd`` and reading it back, see
``tests/sources/test_sample_source.py``):

  JMA    disc/cat/num           level              decoded shortName / typeOfLevel / level -> var
  PRMSL  0/3/1                  mean sea level     prmsl / meanSea / 0  -> msl
  PRES   0/3/0                  surface            sp / surface / 0  -> sp
  UGRD   0/2/2                  10 m above ground  10u / heightAboveGround / 10  -> u10
  VGRD   0/2/3                  10 m above ground  10v / heightAboveGround / 10  -> v10
  TMP    0/0/0                  1.5 m above ground t / heightAboveGround / 2 (*)  -> t2m
  RH     0/1/1                  1.5 m above ground r / heightAboveGround / 2 (*)  -> rh2m
  LCDC   0/6/3                  surface            lcc / surface / 0  -> lcc
  MCDC   0/6/4                  surface            mcc / surface / 0  (none)
  HCDC   0/6/5                  surface            hcc / surface / 0  (none)
  TCDC   0/6/1                  surface            unknown / surface / 0  -> tcc
  APCP   0/1/8, template 4.8    surface            unknown / surface / 0 (stepType accum)  -> tp
         accumulation (1)
  DSWRF  0/4/7, template 4.8    surface            avg_sdswrf / surface / 0 (stepType avg)  -> ssrd
         average (0)

(*) The screen level is 1.5 m (scale factor 1, scaled value 15). ecCodes reports the integer
``level`` key rounded to 2 (the double is 1.5). JMA's 1.5 m temperature and humidity serve as
the catalogue's 2 m temperature and near-surface relative humidity: the 0.5 m difference is
far below what the model resolves, and no 2 m field exists.

Points worth knowing:

* TCDC (0/6/1 at the surface) and APCP (0/1/8 accumulated) are NCEP-table parameters that
  ecCodes only names for centre ``kwbc``: for ``rjtd`` both decode as shortName ``unknown``
  (paramId 0), typeOfLevel ``surface``, level 0. They differ only in ``stepType`` (``instant``
  vs ``accum``) and in the GRIB2 parameter numbers. Their rows therefore share
  (shortName, typeOfLevel); a decoder must tell them apart by the step type (instant rows
  take instant messages, accumulation rows accumulated ones) or by the parameter triplet.
  ``param`` carries JMA's element name for the sample writer.
* APCP is the precipitation of the past hour: the message at step k covers (k-1, k] h
  (stepRange ``k-1``-``k``), kg m-2; there is no message at step 0. With the decoder's window
  rule (a window starting where the previous one ended is that interval's value) the
  ``ACCUM_SINCE_START`` processing yields the hourly amounts unchanged.
* DSWRF is the mean over the past hour (W m-2, stepRange ``k-1``-``k``, stepType ``avg``),
  from step 1; ``AVG_SINCE_START`` with hourly windows, no ``per_second``.
* MCDC and HCDC have no catalogue name and no row. Lsurf holds no dewpoint (the products
  derive it from RH and temperature), no gust, snowfall, visibility, CAPE, orography or winds
  above 10 m: the profile above the ground uses the 10 m wind.
"""

from __future__ import annotations

from datetime import timedelta

from ..gribtable import Encoding as _E, GribField, Processing
from .base import Layout, Mirror, ModelSpec, RegularGrid, Upstream, hours

RUN_HOURS: tuple[int, ...] = tuple(range(0, 24, 3))
LONG_RUN_HOURS: tuple[int, ...] = (0, 12)  # 78 h; the other runs 39 h
LONG_HORIZON_H = 78
SHORT_HORIZON_H = 39

# The steps (hours, inclusive) of each Lsurf file, as JMA groups them.
FILE_GROUPS: tuple[tuple[int, int], ...] = ((0, 15), (16, 33), (34, 39), (40, 51), (52, 78))

_LONG = hours(*range(0, LONG_HORIZON_H + 1))
_SHORT = hours(*range(0, SHORT_HORIZON_H + 1))


def steps_for_run(hour: int) -> tuple[timedelta, ...]:
    """Output steps of the MSM run starting at ``hour`` UTC: hourly to 78 h for the 00 and
    12 UTC runs, to 39 h for 03/06/09/15/18/21 UTC."""
    if hour not in RUN_HOURS:
        raise ValueError(f"MSM has no {hour:02d} UTC run")
    return _LONG if hour in LONG_RUN_HOURS else _SHORT


def file_name(init_yyyymmddhh: str, group: tuple[int, int]) -> str:
    """JMA's name of the Lsurf file holding the steps of ``group`` of the run."""
    a, b = group
    return f"Z__C_RJTD_{init_yyyymmddhh}0000_MSM_GPV_Rjp_Lsurf_FH{a:02d}-{b:02d}_grib2.bin"


def file_group(step_h: int) -> tuple[int, int]:
    """The FILE_GROUPS entry holding step ``step_h`` (hours)."""
    for a, b in FILE_GROUPS:
        if a <= step_h <= b:
            return a, b
    raise ValueError(f"MSM has no step {step_h} h")


_A, _M = Processing.ACCUM_SINCE_START, Processing.AVG_SINCE_START

FIELDS: tuple[GribField, ...] = (
    GribField("msl", "prmsl", "meanSea", param="PRMSL", encodings=(_E(260074, "Pa", "0/3/1"),)),
    GribField("sp", "sp", "surface", param="PRES", encodings=(_E(134, "Pa", "0/3/0"),)),
    GribField("u10", "10u", "heightAboveGround", param="UGRD",
              encodings=(_E(165, "m s**-1", "0/2/2"),)),
    GribField("v10", "10v", "heightAboveGround", param="VGRD",
              encodings=(_E(166, "m s**-1", "0/2/3"),)),
    # 1.5 m (the integer level key decodes as 2): used as the 2 m temperature.
    GribField("t2m", "t", "heightAboveGround", param="TMP", encodings=(_E(130, "K", "0/0/0"),)),
    GribField("rh2m", "r", "heightAboveGround", param="RH", encodings=(_E(157, "%", "0/1/1"),)),
    GribField("lcc", "lcc", "surface", param="LCDC", encodings=(_E(3073, "%", "0/6/3"),)),
    # TCDC and APCP both decode as "unknown" at the surface, without units (see the module
    # docstring): the parameter numbers (WMO table 4.2: per cent, kg m-2) and the step type
    # (instant / accum) are what tell them apart.
    GribField("tcc", "unknown", "surface", param="TCDC",
              encodings=(_E(0, "unknown", "0/6/1"),)),
    # kg m-2 over the past hour, (k-1, k].
    GribField("tp", "unknown", "surface", processing=_A, param="APCP",
              encodings=(_E(0, "unknown", "0/1/8"),)),
    # W m-2, mean over the past hour.
    GribField("ssrd", "avg_sdswrf", "surface", processing=_M, param="DSWRF",
              encodings=(_E(235035, "W m**-2", "0/4/7"),)),
)

UPSTREAM = Upstream(
    mirrors=(Mirror("rish", "http://database.rish.kyoto-u.ac.jp/arch/jmadata/data/gpv/original"),),
    # ``file_name`` as a template, under the mirror's <YYYY>/<MM>/<DD>/ directories.
    layouts=(Layout("lsurf", "{init:%Y/%m/%d}/Z__C_RJTD_{init:%Y%m%d%H}0000_MSM_GPV_Rjp_Lsurf_"
                             "FH{first:02d}-{last:02d}_grib2.bin", step_groups=FILE_GROUPS),),
    licence="JMA MSM GPV; terms of the configured mirror (RISH: research and education)",
)

MSM = ModelSpec(
    id="msm",
    name="JMA MSM (surface GPV, 0.0625 x 0.05 deg)",
    grid=RegularGrid(lat_first=47.6, lon_first=120.0, lat_last=22.4, lon_last=150.0,
                     dlat=0.05, dlon=0.0625),
    steps=_LONG,
    fields=FIELDS,
    run_hours=RUN_HOURS,
    # JMA's MSM GRIB2 reaches its distributors about 2-3 h after the run's start
    publication_delay=timedelta(hours=3),
    resolution_km=5.0,
    upstream=UPSTREAM,
)
