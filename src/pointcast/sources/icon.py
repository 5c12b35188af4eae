"""DWD ICON-EU and ICON-D2, as DWD's open-data server publishes them on regular lat/lon grids.

ICON-EU: 0.0625 deg, lat 29.5..70.5, lon -23.5..62.5 (657 x 1377 points, first point in the
south-west, rows scanning northwards), runs 00/06/12/18 UTC (the sample runs every 6 h),
hourly steps to 78 h, then 3-hourly to 120 h.

ICON-D2: 0.02 deg, lat 43.18..58.08, lon -3.94..20.34 (746 x 1215 points), runs every 3 h,
hourly steps to 48 h; precipitation and radiation also every 15 minutes (``fine=True`` rows,
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
startStep/endStep); it has no step 0. ICON publishes no 100 m wind; the profile above 10 m
comes from the pressure levels.
"""

from __future__ import annotations

from datetime import timedelta

from .base import GribField, ModelSpec, Processing, RegularGrid, hours

G = 9.80665

PRESSURE_LEVELS: tuple[int, ...] = (1000, 950, 925, 850, 700)  # hPa

_I, _A, _M, _X, _C = (Processing.INSTANT, Processing.ACCUM_SINCE_START,
                      Processing.AVG_SINCE_START, Processing.INTERVAL, Processing.CONSTANT)


def _fields(*, vis: bool, fine: bool) -> tuple[GribField, ...]:
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
    ]
    if vis:
        rows.append(GribField("vis", "vis", "surface", param="VIS"))
    rows += [
        GribField("cape", "CAPE_ML", "unknown", param="CAPE_ML"),
        GribField("orog", "HSURF", "unknown", processing=_C, param="HSURF"),
        GribField("t_pl", "t", "isobaricInhPa", PRESSURE_LEVELS, param="T"),
        GribField("u_pl", "u", "isobaricInhPa", PRESSURE_LEVELS, param="U"),
        GribField("v_pl", "v", "isobaricInhPa", PRESSURE_LEVELS, param="V"),
        # Geopotential (m2 s-2) -> geopotential height (m).
        GribField("z_pl", "z", "isobaricInhPa", PRESSURE_LEVELS, scale=1.0 / G, param="FI"),
    ]
    return tuple(rows)


ICON_EU = ModelSpec(
    id="icon-eu",
    name="DWD ICON-EU (regular lat/lon 0.0625 deg)",
    grid=RegularGrid(lat_first=29.5, lon_first=-23.5, lat_last=70.5, lon_last=62.5,
                     dlat=0.0625, dlon=0.0625),
    steps=hours(*range(0, 79)) + hours(*range(81, 121, 3)),
    fields=_fields(vis=True, fine=False),
    run_hours=(0, 6, 12, 18),
    resolution_km=6.5,
)

ICON_D2 = ModelSpec(
    id="icon-d2",
    name="DWD ICON-D2 (regular lat/lon 0.02 deg)",
    grid=RegularGrid(lat_first=43.18, lon_first=-3.94, lat_last=58.08, lon_last=20.34,
                     dlat=0.02, dlon=0.02),
    steps=hours(*range(0, 49)),
    fields=_fields(vis=False, fine=True),
    run_hours=tuple(range(0, 24, 3)),
    fine_steps=tuple(timedelta(minutes=15 * k) for k in range(0, 48 * 4 + 1)),
    resolution_km=2.2,
)
