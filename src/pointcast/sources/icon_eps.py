"""DWD ICON-EU-EPS, the ICON ensemble over Europe, as DWD open data publishes it.

40 members (perturbationNumber 1-40; no control is published), on the native icosahedral
grid of the ICON-EU nest (cell centres from CLAT/CLON, as ICON-EU's). Runs at 00/06/12/18 UTC
to 120 h: hourly to 48 h, 3-hourly to 72 h, 6-hourly to 120 h. A file a parameter and step
holds every member.
"""

from __future__ import annotations

from ..gribtable import GribField, Processing
from .base import ModelSpec, RegularGrid, hours

FIELDS: tuple[GribField, ...] = (
    GribField("t2m", "2t", "heightAboveGround", param="T_2M"),
    GribField("u10", "10u", "heightAboveGround", param="U_10M"),
    GribField("v10", "10v", "heightAboveGround", param="V_10M"),
    GribField("u", "10u", "heightAboveGround", (10,), param="U_10M"),
    GribField("v", "10v", "heightAboveGround", (10,), param="V_10M"),
    # kg m-2 accumulated since the start.
    GribField("tp", "tp", "surface", processing=Processing.ACCUM_SINCE_START, param="TOT_PREC"),
)

ICON_EU_EPS = ModelSpec(
    id="icon-eu-eps",
    name="DWD ICON-EU-EPS (native grid, 40 members)",
    grid=RegularGrid(lat_first=29.5, lon_first=-23.5, lat_last=70.5, lon_last=62.5,
                     dlat=0.0625, dlon=0.0625),
    steps=hours(*range(0, 49), *range(51, 73, 3), *range(78, 121, 6)),
    fields=FIELDS,
    run_hours=(0, 6, 12, 18),
    resolution_km=13.0,
    members=40,
)
