"""NOAA GEFS 0.25 deg, the GFS ensemble (GEFS v12), as NOAA publishes it (``pgrb2sp25``).

Grid: 0.25 degree regular lat/lon, global, as GFS (``sources/gfs.py``): rows from 90 N to 90 S,
columns from 0 E to 359.75 E. Runs at 00/06/12/18 UTC; the 0.25 degree files (``pgrb2s``, the
most used surface fields) are 3-hourly from 0 to 240 h for every run (the 0.5 degree
``pgrb2a``/``pgrb2b`` files go on to 384 h and are not read here). 31 members: the control
``gec00`` and the perturbed members ``gep01``-``gep30``, **a file a member and step**::

    gefs.<YYYYMMDD>/<HH>/atmos/pgrb2sp25/<member>.t<HH>z.pgrb2s.0p25.f<FFF>

each with its wgrib2 ``.idx`` inventory beside it (dynamical.org's GEFS archiver,
dynamical-org/reformatters ``src/reformatters/noaa/gefs/gefs_config_models.py``: ``ge{c00|pNN}``
file names, the ``s`` files up to 240 h, ``noaa-gefs-pds.s3.amazonaws.com`` first and NOMADS's
``nomads.ncep.noaa.gov/pub/data/nccf/com/gens/prod`` as the fallback; Microsoft's description of
the NOAA GEFS open data, microsoft/AIforEarthDataSets ``data/noaa-gefs.md``). ``UPSTREAM``
names the same two mirrors in that order and one layout whose ``parts`` are the 31 members
(``{member}``), so a run's step is 31 files, each fetched by byte ranges from its index.

The inventory is wgrib2's, as for GFS, with the ensemble member in a seventh field: ``ENS=low-res
ctl`` for the control, ``ENS=+1`` ... ``ENS=+30`` for the members (a real ``gep01`` inventory,
reformatters ``tests/noaa/fixtures/gep01.t00z.pgrb2s.0p25.f015.idx``:
``15:6562241:d=2025080100:UGRD:10 m above ground:15 hour fcst:ENS=+1``; ``gec00`` in
``gec00.t00z.pgrb2a.0p50.f432.idx``). ``gfs.idx_wanted`` reads it (the member is in the file
name; the seventh field is not needed). Encodings, as the inventories show: TMP at 2 m and
UGRD/VGRD at 10 m instantaneous (``2t``, ``10u``, ``10v``: paramIds 167, 165, 166 as ecCodes
reads NCEP's 0/0/0 at 103/2 and 0/2/2, 0/2/3 at 103/10); APCP surface (0/1/8, kg m-2) over
windows that **reset every 6 hours** as GFS's (``12-15 hour acc`` at f015, ``6-9 hour acc`` at
f009, ``426-432 hour acc`` at f432; reformatters deaccumulates GEFS with
``window_reset_frequency = 6h``), none at f000; PRES at the surface and PRMSL at mean sea
level instantaneous (``sp``, ``prmsl``: paramIds 134 and 260074, Pa; lines 4 and 38 of that
``gep01`` inventory; reformatters reads both from the ``s`` files, ``common_gefs_template_
config.py``, ``gefs_file_type="s+a"``). The ``s`` files carry no ground height (HGT at the
surface is in the 0.5 degree ``pgrb2b`` files only, line 272 of reformatters'
``gec00.t00z.pgrb2b.0p50.f003.idx``, on another grid): the model's ground is taken from the two
pressures of the analysis (``GROUND_ROWS``). The messages are GRIB2 ensemble products
(template 4.1, 4.11 for APCP): ``perturbationNumber`` 0 for ``gec00`` and 1-30 for ``gep01``-
``gep30``, ``typeOfEnsembleForecast`` (WMO code table 4.6) 1, unperturbed low-resolution
control, for ``gec00`` and 3, positively perturbed, for the others (what wgrib2 prints as
``low-res ctl`` and ``+N``). Data: NOAA, public domain.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..gribtable import Encoding as _E, GribField, Processing
from .base import Layout, Mirror, ModelSpec, RegularGrid, Upstream, hours
from .gfs import idx_wanted

_MS = "m s**-1"

# Surface and sea-level pressure, read at the analysis only (`wanted`): the files carry no
# ground height, and the model's ground is what the pipeline takes from them, from the
# control's, by the hypsometric equation (`interp.vertical.surface_height`), to correct every
# member's temperature to a point's elevation. Optional: without them the members stay at
# the model's ground.
GROUND_ROWS: tuple[GribField, ...] = (
    GribField("sp", "sp", "surface", param="PRES", encodings=(_E(134, "Pa"),), optional=True),
    GribField("msl", "prmsl", "meanSea", param="PRMSL", encodings=(_E(260074, "Pa"),), optional=True),
)

FIELDS: tuple[GribField, ...] = (
    GribField("t2m", "2t", "heightAboveGround", param="TMP", encodings=(_E(167, "K"),)),
    GribField("u10", "10u", "heightAboveGround", param="UGRD", encodings=(_E(165, _MS),)),
    GribField("v10", "10v", "heightAboveGround", param="VGRD", encodings=(_E(166, _MS),)),
    GribField("u", "10u", "heightAboveGround", (10,), param="UGRD", encodings=(_E(165, _MS),)),
    GribField("v", "10v", "heightAboveGround", (10,), param="VGRD", encodings=(_E(166, _MS),)),
    # kg m-2 over windows that reset every 6 hours (as GFS's APCP).
    GribField("tp", "tp", "surface", processing=Processing.ACCUM_SINCE_START, param="APCP",
              encodings=(_E(228228, "kg m**-2", "0/1/8"),)),
    *GROUND_ROWS,
)

def wanted(entry: dict[str, Any], row: GribField) -> bool:
    """`gfs.idx_wanted`, the ground's pressures (`GROUND_ROWS`) at the analysis only (wgrib2's
    ``anl``): 2 of every member's messages at f000 instead of at all 81 steps."""
    if row in GROUND_ROWS and entry.get("time") != "anl":
        return False
    return idx_wanted(entry, row)


MEMBER_FILES: tuple[str, ...] = ("gec00", *(f"gep{n:02d}" for n in range(1, 31)))

_STEM = "gefs.{init:%Y%m%d}/{init:%H}/atmos/pgrb2sp25/{member}.t{init:%H}z.pgrb2s.0p25.f{step:03d}"

UPSTREAM = Upstream(
    mirrors=(
        Mirror("aws", "https://noaa-gefs-pds.s3.amazonaws.com"),
        Mirror("nomads", "https://nomads.ncep.noaa.gov/pub/data/nccf/com/gens/prod"),
    ),
    layouts=(Layout("pgrb2sp25", _STEM, f"{_STEM}.idx", index="wgrib2",
                    parts=tuple({"member": m} for m in MEMBER_FILES)),),
    select=wanted,
    licence="NOAA GEFS, public domain (US Government work)",
)

GEFS = ModelSpec(
    id="gefs",
    name="NOAA GEFS (0.25 deg, 31 members)",
    grid=RegularGrid(lat_first=90.0, lon_first=0.0, lat_last=-90.0, lon_last=359.75,
                     dlat=0.25, dlon=0.25),
    steps=hours(*range(0, 241, 3)),
    fields=FIELDS,
    run_hours=(0, 6, 12, 18),
    # NOMADS/AWS hold GEFS's last step (384 h) about 5-6 h after the run's start
    publication_delay=timedelta(hours=6),
    resolution_km=25.0,  # native C384 (about 25 km), published on 0.25 deg
    upstream=UPSTREAM,
    members=len(MEMBER_FILES),
)
