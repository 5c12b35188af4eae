"""NOAA GFS 0.25 deg, as NOAA publishes it (``pgrb2.0p25`` on NOMADS and the AWS/Google buckets).

Grid: 0.25 degree regular lat/lon, global, rows from 90 N to 90 S, columns from 0 E to
359.75 E (1440 x 721 points). Runs at 00/06/12/18 UTC, every run to 384 h: hourly steps
0-120 h, then 3-hourly to 384 h. One file per step, ``gfs.<YYYYMMDD>/<HH>/atmos/
gfs.t<HH>z.pgrb2.0p25.f<FFF>``, holding every field of that step, with wgrib2's ``.idx``
inventory beside it. Centre ``kwbc`` (subcentre 0), GRIB master tables 2, local tables 1,
packing ``grid_complex_spatial_differencing`` (as a real GFS file shows).

Where runs come from (``UPSTREAM``, read by ``sources/remote/``): NOAA's Open Data bucket on
AWS (``noaa-gfs-bdp-pds``) first, then NOMADS, then the Google copy; each file with its
wgrib2 ``.idx`` inventory (``n:offset:d=YYYYMMDDHH:VAR:level:time:``). An inventory line is a
row's message when its VAR is the row's ``param``, its level is the row's level in wgrib2's
words and its time range is of the row's kind (``idx_wanted``: ``acc`` for accumulations,
``ave`` for averages, neither for instantaneous fields). Data: NOAA, public domain.

``shortName``/``typeOfLevel`` are what ecCodes 2.50 decodes from NCEP's encoding (checked by
writing each message with centre kwbc and reading it back, ``tests/sources/test_sample_source.py``):

* TMP/DPT at 2 m -> ``2t``/``2d``; PRES surface -> ``sp``; PRMSL -> ``prmsl`` (paramId 260074,
  not ECMWF's ``msl``).
* UGRD/VGRD at 10 m -> ``10u``/``10v``; at 80 m **and 100 m** -> plain ``u``/``v`` at
  ``heightAboveGround`` 80/100. (Unlike ECMWF's 100 m wind, which has its own paramId and
  decodes as ``100u``, NCEP writes the generic parameter 0/2/2 at level 103/100, and ecCodes
  keeps the generic name.) So ``u``/``v`` on height levels has one ``10u`` row for 10 m and one
  ``u`` row for 80 and 100 m.
* GUST surface (0/2/22) -> ``gust`` (paramId 260065), **instantaneous** (product template 4.0,
  stepType ``instant``): GFS publishes the gust at the valid time, not a maximum over the
  interval since the previous step. The catalogue's ``gust`` is the interval maximum; GFS has
  nothing better, so the row is ``INSTANT`` (the decoder only matches instant messages to
  instant rows anyway). It underestimates the interval maximum, more so at 3-hourly steps.
* APCP surface (0/1/8, template 4.8, accumulation) -> ``tp`` (kg m-2) and DSWRF surface
  (**0/4/192**, NCEP's local number, average) -> ``sdswrf`` (paramId 260087, W m-2), both over
  windows that **reset every 6 hours**. (WMO's 0/4/7, ``avg_sdswrf``, is not what NOAA writes:
  real GFS files in ``tests/data/real-grib`` and ``tests/data/pygrib`` hold 0/4/192; wgrib2
  names it DSWRF either way, so the ``.idx`` selection is unchanged.) Windows:
  stepRange ``0-1`` ... ``0-6``, then ``6-7`` ... ``6-12`` (after 120 h: ``120-123``,
  ``120-126``, ``126-129`` ...). ``ACCUM_SINCE_START``/``AVG_SINCE_START``: the decoder
  differences a window that continues the previous one (same start) and takes a window that
  starts where the previous one ended as the interval itself. Neither exists at step 0.
* TCDC entire atmosphere (first fixed surface 10) decodes as ``tcc`` with typeOfLevel
  ``atmosphere`` (not ``entireAtmosphere``, which is ECMWF's encoding). GFS's pgrb2 carries
  two such messages: the average over the 6-hour-reset window (``0-6 hour ave``, stepType
  ``avg``) and, since the FV3 GFS, the instantaneous total cloud (stepType ``instant``). The
  catalogue's ``tcc`` is a STATE (instantaneous) variable, so the row is the instant one
  (``INSTANT``; the average does not match it). The sample writes only the instant message.
* Real NCEP messages (``tests/data/pygrib``) show UGRD and VGRD at 10 m as two fields of one
  GRIB2 message (wgrib2's ``n.1``/``n.2``); the decoder reads each field
  (``ingest.scan._fields``), and an inventory's ``n.1``/``n.2`` lines fetch the one message.
* VIS surface -> ``vis``; CAPE surface (surface-based) -> ``cape``; HGT surface (0/3/5) ->
  ``orog`` (paramId 228002, m), which NOAA repeats in every file; the row is ``CONSTANT``
  (the decoder takes the first step).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..gribtable import Encoding as _E, GribField, Processing
from .base import Layout, Mirror, ModelSpec, RegularGrid, Upstream, hours

HEIGHT_LEVELS: tuple[int, ...] = (10, 80, 100)  # m above ground

STEPS = hours(*range(0, 121), *range(123, 385, 3))

_MS = "m s**-1"
_I, _A, _M, _C = (Processing.INSTANT, Processing.ACCUM_SINCE_START, Processing.AVG_SINCE_START,
                  Processing.CONSTANT)

# ``param`` is NCEP's name (wgrib2's inventory).
FIELDS: tuple[GribField, ...] = (
    GribField("t2m", "2t", "heightAboveGround", param="TMP", encodings=(_E(167, "K"),)),
    GribField("d2m", "2d", "heightAboveGround", param="DPT", encodings=(_E(168, "K"),)),
    GribField("sp", "sp", "surface", param="PRES", encodings=(_E(134, "Pa"),)),
    GribField("msl", "prmsl", "meanSea", param="PRMSL", encodings=(_E(260074, "Pa"),)),
    GribField("u10", "10u", "heightAboveGround", param="UGRD", encodings=(_E(165, _MS),)),
    GribField("v10", "10v", "heightAboveGround", param="VGRD", encodings=(_E(166, _MS),)),
    GribField("u", "10u", "heightAboveGround", (10,), param="UGRD", encodings=(_E(165, _MS),)),
    GribField("u", "u", "heightAboveGround", (80, 100), param="UGRD", encodings=(_E(131, _MS),)),
    GribField("v", "10v", "heightAboveGround", (10,), param="VGRD", encodings=(_E(166, _MS),)),
    GribField("v", "v", "heightAboveGround", (80, 100), param="VGRD", encodings=(_E(132, _MS),)),
    # Instantaneous gust at the valid time (see above).
    GribField("gust", "gust", "surface", param="GUST", encodings=(_E(260065, _MS),)),
    # kg m-2 over the 6-hour-reset window.
    GribField("tp", "tp", "surface", processing=_A, param="APCP",
              encodings=(_E(228228, "kg m**-2", "0/1/8"),)),
    # W m-2 averaged over the 6-hour-reset window: NCEP's local 0/4/192 (see above).
    GribField("ssrd", "sdswrf", "surface", processing=_M, param="DSWRF",
              encodings=(_E(260087, "W m**-2", "0/4/192"),)),
    GribField("tcc", "tcc", "atmosphere", param="TCDC", encodings=(_E(228164, "%", "0/6/1"),)),
    GribField("vis", "vis", "surface", param="VIS", encodings=(_E(3020, "m"),)),
    GribField("cape_sb", "cape", "surface", param="CAPE", encodings=(_E(59, "J kg**-1"),)),
    GribField("orog", "orog", "surface", processing=_C, param="HGT", encodings=(_E(228002, "m"),)),
)

# wgrib2's words for a level, by typeOfLevel; the 2 m and 10 m rows carry no level.
_IDX_LEVELS = {"surface": "surface", "meanSea": "mean sea level", "atmosphere": "entire atmosphere"}
_IMPLIED_HEIGHT = {"2t": 2, "2d": 2, "10u": 10, "10v": 10}
# What an inventory's time range says for each processing (wgrib2: "0-6 hour acc fcst").
_IDX_KIND = {_A: "acc", _M: "ave"}


def idx_wanted(entry: dict[str, Any], row: GribField) -> bool:
    """Whether a wgrib2 ``.idx`` line (``param``, ``level``, ``time``) is the message of ``row``."""
    if entry.get("param") != row.param:
        return False
    if row.typeOfLevel == "heightAboveGround":
        heights = row.levels or (_IMPLIED_HEIGHT[row.shortName],)
        levels = {f"{h} m above ground" for h in heights}
    else:
        levels = {_IDX_LEVELS[row.typeOfLevel]}
    if entry.get("level") not in levels:
        return False
    words = str(entry.get("time", "")).split()
    kind = _IDX_KIND.get(row.processing)
    return kind in words if kind else not {"acc", "ave", "max", "min"} & set(words)


_STEM = "gfs.{init:%Y%m%d}/{init:%H}/atmos/gfs.t{init:%H}z.pgrb2.0p25.f{step:03d}"

UPSTREAM = Upstream(
    mirrors=(
        Mirror("aws", "https://noaa-gfs-bdp-pds.s3.amazonaws.com"),
        Mirror("nomads", "https://nomads.ncep.noaa.gov/pub/data/nccf/com/gfs/prod"),
        Mirror("google", "https://storage.googleapis.com/global-forecast-system"),
    ),
    layouts=(Layout("pgrb2.0p25", _STEM, f"{_STEM}.idx", index="wgrib2"),),
    select=idx_wanted,
    licence="NOAA GFS, public domain (US Government work)",
)

GFS = ModelSpec(
    id="gfs",
    name="NOAA GFS (pgrb2, 0.25 deg)",
    grid=RegularGrid(lat_first=90.0, lon_first=0.0, lat_last=-90.0, lon_last=359.75,
                     dlat=0.25, dlon=0.25),
    steps=STEPS,
    fields=FIELDS,
    run_hours=(0, 6, 12, 18),
    # GFS's first steps reach NOMADS/AWS about 3.5 h after the run's start, the 120 h the
    # products take (and the 384 h) within the next hour
    publication_delay=timedelta(hours=4),
    resolution_km=13.0,  # native C768 cubed sphere; published on the 0.25 deg grid
    upstream=UPSTREAM,
)


def reset_start(step_h: int) -> int:
    """Start (h) of the 6-hour-reset window of APCP/DSWRF that ends at ``step_h`` > 0."""
    return (step_h - 1) // 6 * 6
