"""DWD ICON-EU-EPS, the ICON ensemble's European nest, as DWD's open-data server publishes it.

40 members, ``perturbationNumber`` 1-40: ICON-EPS perturbs every member and publishes no
control (Open-Meteo's ICON reader, open-meteo/open-meteo ``Sources/App/Icon/Icon.swift``,
``countEnsembleMember`` 40). Runs at 00/06/12/18 UTC, each to 120 h: hourly to 48 h, 3-hourly
to 72 h, 6-hourly to 120 h (``Icon.swift``, ``getDownloadForecastSteps``: "Hourly data until
48h, 3 hourly until 72, then 6 hourly until 120h", "no side runs"), so every run has the same
steps (``sources.run_steps``).

**Grid.** The native icosahedral grid of the European nest only, no regular lat/lon rendering:
DWD grid 37, R03B07 nest ``N02`` (about 13 km), whose description DWD ships as
``icon_grid_0037_R03B07_N02.nc`` under https://opendata.dwd.de/weather/lib/cdo/ (Open-Meteo
remaps it with that grid, ``Sources/App/Icon/Cdo.swift``, ``iconGridName``). Its messages are
GRIB2 template 3.101 (``unstructured_grid``, ``numberOfGridUsed`` 37, ``uuidOfHGrid``); the
cell centres are the time-invariant fields CLAT and CLON of the run, fetched once per grid as
for ICON-EU's native tree (``sources/icon.py``, ``remote/fetch``: kept by ``uuidOfHGrid``).
``grid`` below is the lat/lon box of the nest, as ICON-EU's.

**Tree.** DWD publishes ICON-EU-EPS in its legacy tree (the v1 scheme of ICON-EU and ICON-D2,
``sources/icon.py``, names no ensemble: none found for ICON-EU-EPS), bzip2-compressed, parameter
names in lower case (Open-Meteo ``Sources/App/Icon/DownloadIconCommand.swift``: lower-case
names for ``iconEuEps``; public downloaders such as guidocioni/icon_eu_eps)::

    icon-eu-eps/grib/<HH>/<param>/icon-eu-eps_europe_icosahedral_single-level_<YYYYMMDDHH>_<FFF>_<param>.grib2.bz2
    icon-eu-eps/grib/<HH>/clat/icon-eu-eps_europe_icosahedral_time-invariant_<YYYYMMDDHH>_clat.grib2.bz2
    icon-eu-eps/grib/<HH>/hsurf/icon-eu-eps_europe_icosahedral_time-invariant_<YYYYMMDDHH>_hsurf.grib2.bz2

**A file a parameter and step holds the 40 members**, one message each (no member in the file
name). Encoding as ICON-EU's (``icon.ENCODINGS``; centre ``edzw``): T_2M (0/0/0, ``2t``, K),
U_10M/V_10M (0/2/2, 0/2/3, ``10u``/``10v``, m s-1) instantaneous, product template 4.1;
TOT_PREC (0/1/52, ``tp``, kg m-2) accumulated from the run start, template 4.11;
``numberOfForecastsInEnsemble`` 40. HSURF, the model's ground height (0/3/6, m, from the
surface to mean sea level as ICON-EU's), is the time-invariant file of each run beside CLAT
and CLON (Open-Meteo reads every ICON-EPS domain's elevation from it,
``Sources/App/Icon/DownloadIconCommand.swift``, ``convertSurfaceElevation``: ``hsurf/`` +
``<prefix>_icosahedral_time-invariant_<YYYYMMDDHH>_hsurf.grib2.bz2``, its first message): the
same for every member, so the decoder gives a message of it without a member, or one member's,
to all (``build.extract_model``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from ..gribtable import CELL_CENTRES, GribField, Processing
from .base import Layout, Mirror, ModelSpec, RegularGrid, Upstream, hours
from .icon import ENCODINGS

FIELDS: tuple[GribField, ...] = tuple(replace(r, encodings=(ENCODINGS[r.param, r.typeOfLevel],)) for r in (
    GribField("t2m", "2t", "heightAboveGround", param="T_2M"),
    GribField("u10", "10u", "heightAboveGround", param="U_10M"),
    GribField("v10", "10v", "heightAboveGround", param="V_10M"),
    GribField("u", "10u", "heightAboveGround", (10,), param="U_10M"),
    GribField("v", "10v", "heightAboveGround", (10,), param="V_10M"),
    # kg m-2 accumulated since the start.
    GribField("tp", "tp", "surface", processing=Processing.ACCUM_SINCE_START, param="TOT_PREC"),
    # The model's ground height, every member's: the elevation correction's reference (without
    # it the members stay at the model's ground).
    GribField("orog", "HSURF", "unknown", processing=Processing.CONSTANT, param="HSURF", optional=True),
))

def path_vars(row: GribField, level: int | None, minute: int) -> dict[str, Any] | None:
    """The file of ``row`` at a step (the single-level fields) or of a time-invariant row
    (HSURF, and the cell centres CLAT, CLON) in DWD's legacy ICON-EU-EPS tree."""
    if minute % 60:
        return None
    name = (row.param or row.shortName).lower()
    kind = ("time-invariant_{init:%Y%m%d%H}"
            if row.shortName in CELL_CENTRES.values() or row.processing is Processing.CONSTANT
            else f"single-level_{{init:%Y%m%d%H}}_{minute // 60:03d}")
    return {"path": f"icon-eu-eps/grib/{{init:%H}}/{name}/icon-eu-eps_europe_icosahedral_"
                    f"{kind}_{name}.grib2.bz2"}


UPSTREAM = Upstream(
    mirrors=(Mirror("dwd", "https://opendata.dwd.de/weather/nwp"),),
    layouts=(Layout("legacy", "", path_vars=path_vars, compression="bz2"),),
    licence="DWD open data, CC BY 4.0 (Deutscher Wetterdienst)",
)

ICON_EU_EPS = ModelSpec(
    id="icon-eu-eps",
    name="DWD ICON-EU-EPS (native grid, 40 members)",
    grid=RegularGrid(lat_first=29.5, lon_first=-23.5, lat_last=70.5, lon_last=62.5,
                     dlat=0.0625, dlon=0.0625),
    steps=hours(*range(0, 49), *range(51, 73, 3), *range(78, 121, 6)),
    fields=FIELDS,
    run_hours=(0, 6, 12, 18),
    # DWD's open data server holds the 120 h of ICON-EU-EPS about 4.5-5 h after the run's start
    publication_delay=timedelta(hours=5),
    resolution_km=13.0,
    upstream=UPSTREAM,
    members=40,
)
