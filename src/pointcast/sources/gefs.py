"""NOAA GEFS 0.25 deg, the GFS ensemble, as NOAA publishes it (``pgrb2sp25``).

Grid: 0.25 degree regular lat/lon, global, as GFS (``sources/gfs.py``). Runs at 00/06/12/18
UTC; the 0.25 degree files are 3-hourly to 240 h. A file a member and step:
``gefs.<YYYYMMDD>/<HH>/atmos/pgrb2sp25/<member>.t<HH>z.pgrb2s.0p25.f<FFF>``, the control
``gec00`` (perturbationNumber 0) and the perturbed members ``gep01``-``gep30``, each with its
wgrib2 ``.idx``.
"""

from __future__ import annotations

from ..gribtable import Encoding as _E, GribField, Processing
from .base import ModelSpec, RegularGrid, hours

_MS = "m s**-1"

FIELDS: tuple[GribField, ...] = (
    GribField("t2m", "2t", "heightAboveGround", param="TMP", encodings=(_E(167, "K"),)),
    GribField("u10", "10u", "heightAboveGround", param="UGRD", encodings=(_E(165, _MS),)),
    GribField("v10", "10v", "heightAboveGround", param="VGRD", encodings=(_E(166, _MS),)),
    GribField("u", "10u", "heightAboveGround", (10,), param="UGRD", encodings=(_E(165, _MS),)),
    GribField("v", "10v", "heightAboveGround", (10,), param="VGRD", encodings=(_E(166, _MS),)),
    # kg m-2 over windows that reset every 6 hours (as GFS's APCP).
    GribField("tp", "tp", "surface", processing=Processing.ACCUM_SINCE_START, param="APCP",
              encodings=(_E(228228, "kg m**-2", "0/1/8"),)),
)

GEFS = ModelSpec(
    id="gefs",
    name="NOAA GEFS (0.25 deg, 31 members)",
    grid=RegularGrid(lat_first=90.0, lon_first=0.0, lat_last=-90.0, lon_last=359.75,
                     dlat=0.25, dlon=0.25),
    steps=hours(*range(0, 241, 3)),
    fields=FIELDS,
    run_hours=(0, 6, 12, 18),
    resolution_km=25.0,
    members=31,
)
