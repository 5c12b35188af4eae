"""ECMWF ENS, the IFS ensemble, as ECMWF open data publishes it (stream ``enfo``).

Grid: 0.25 degree regular lat/lon, global, as the HRES (``sources/ifs.py``). Runs at 00/06/12/18
UTC: 00/12 UTC to 360 h (3-hourly to 144 h, 6-hourly after), 06/18 UTC to 144 h. One file a
step, ``<yyyymmdd>/<HH>z/ifs/0p25/enfo/<init>-<step>h-enfo-ef.grib2``, holding the control
forecast (MARS ``type=cf``, perturbationNumber 0) and the perturbed members (``type=pf``,
1-50) of every parameter, with its ``.index``.
"""

from __future__ import annotations

from ..gribtable import Encoding as _E, GribField, Processing
from .base import ModelSpec, RegularGrid
from .ifs import steps_for_run

_MS = "m s**-1"

FIELDS: tuple[GribField, ...] = (
    GribField("t2m", "2t", "heightAboveGround", encodings=(_E(167, "K"),)),
    GribField("u10", "10u", "heightAboveGround", encodings=(_E(165, _MS),)),
    GribField("v10", "10v", "heightAboveGround", encodings=(_E(166, _MS),)),
    GribField("u", "10u", "heightAboveGround", (10,), encodings=(_E(165, _MS),)),
    GribField("u", "100u", "heightAboveGround", (100,), encodings=(_E(228246, _MS),)),
    GribField("v", "10v", "heightAboveGround", (10,), encodings=(_E(166, _MS),)),
    GribField("v", "100v", "heightAboveGround", (100,), encodings=(_E(228247, _MS),)),
    # m (of water equivalent) accumulated since the start -> kg m-2.
    GribField("tp", "tp", "surface", processing=Processing.ACCUM_SINCE_START, scale=1000.0,
              encodings=(_E(228, "m"),)),
)

ENS = ModelSpec(
    id="ens",
    name="ECMWF ENS (open data, 0.25 deg, 51 members)",
    grid=RegularGrid(lat_first=90.0, lon_first=-180.0, lat_last=-90.0, lon_last=179.75,
                     dlat=0.25, dlon=0.25),
    steps=steps_for_run(0),
    fields=FIELDS,
    run_hours=(0, 6, 12, 18),
    resolution_km=18.0,  # native TCo639; published on 0.25 deg
    members=51,
)
