"""ECMWF IFS, as ECMWF open data publishes it (``data.ecmwf.int/forecasts``).

Grid: 0.25 degree regular lat/lon, global, rows from 90 N to 90 S, columns from 180 W to
179.75 E (GRIB2 stores the first longitude as 180.0; ecCodes reports it as -180..179.75).
Runs at 00/06/12/18 UTC. Steps: 0-144 h every 3 h, then 150-360 h every 6 h for the 00 and
12 UTC runs; the 06 and 18 UTC runs stop at 144 h (``steps_for_run``). ``IFS.steps`` holds the
full 00/12 UTC set, so ``IFS.horizon`` is 360 h.

The table below is written from what ecCodes 2.50 *decodes* from ECMWF's GRIB2 encoding
(``shortName``, ``typeOfLevel``), checked by ``tests/sources/test_sample_source.py`` against the files
the sample source writes. Points worth knowing:

* 100 m and 200 m winds decode as their own parameters (``100u``/``100v``, ``200u``/``200v``),
  not as ``u`` at a height level, so the canonical ``u``/``v`` on height levels has one row per
  level (10 m, 100 m, 200 m). The 10 m message serves both ``u10`` and ``u`` at 10 m.
* The wind gust is ECMWF's ``10fg`` (paramId 49, "10 metre wind gust since previous
  post-processing": WMO 0/2/22, statistical processing 2 = maximum, at 10 m, the length of
  time range being the post-processing step, 1, 3 or 6 hours; ECMWF parameter database,
  https://codes.ecmwf.int/grib/param-db/49, and the UERRA definition page
  https://confluence.ecmwf.int/display/UER/10+metre+wind+gust). IFS HRES post-processes
  hourly to 90 h, 3-hourly to 144 h and 6-hourly after (as Open-Meteo, which reads the full
  IFS output, documents: https://open-meteo.com/en/docs/ecmwf-api), so the open-data
  message at a 3-hourly step up to 90 h is the maximum of the **last hour only** (stepRange
  ``2-3``), from 93 h to 144 h that of the last 3 hours (``90-93``), after 144 h of the last
  6 (``144-150``); ``gust_window_hours`` says which. ecCodes 2.50 decodes a 1-hour or a 6-hour
  window as ``10fg`` (49) and a 3-hour one as ``10fg3`` (228028, whose definition is 49's with
  the length fixed to 3 h), so ``gust`` has two rows; exactly one of them is present at any
  step > 0 and none at step 0. The ``.index`` names the MARS parameter, ``10fg``, whatever the
  window (ecmwf-opendata users request ``param="10fg"`` at every step): the ``10fg3`` row has
  ``param = "10fg"``, and an index naming the window ``10fg3`` is read as well. Decode keeps
  each window as its message states it (``starts_minutes``), and resampling holds a maximum
  over its own window only (docs/method.md, "Wind gust").
* ``tp`` and ``sf`` are metres (of water equivalent) accumulated from the start of the run
  (stepRange ``0-<step>``), ``ssrd``/``fdir`` J m-2 accumulated from the start.
* ``tcc`` has two encodings that both decode as shortName ``tcc`` at ``entireAtmosphere``:
  paramId 228164 (WMO 0/6/1, per cent; ECMWF's GRIB2 in TIGGE, a real message in
  ``tests/data/pygrib``) and paramId 164 (0/6/192 in GRIB2, a fraction 0-1). ECMWF open data
  publishes 164, in 0-1, since the 2025-11-20 12 UTC run: open-meteo/open-meteo issue 1586
  ("cloud cover reported as a range 0-1") and its fix, pull request 1587, after ECMWF's forum
  notice "New parameters coming to ECMWF open data"; Pirate-Weather pull request 630 (May 2026:
  "ECMWF IFS has cloud cover already in the 0-1 range"). The row accepts both (``encodings``)
  and multiplies the fraction by 100; the sample writes 164.
* Every row names its encoding (paramId, ecCodes units): a message with another is refused at
  decode (``ingest.judge``). The paramIds are ECMWF's parameter database's.
* Surface geopotential ``z`` is written at step 0 only (time-invariant).
* ECMWF's GRIB1 dissemination (real-time cut-outs, MARS retrievals in GRIB1) encodes the
  near-surface parameters with level type 1, so ecCodes decodes ``10u``/``10v``/``2t``/``2d``
  with typeOfLevel ``surface`` and level 0 there (checked on a real HRES GRIB1 file,
  ``test_ECMWFRealtime_HRES-IFS_10u_20241104T00_S60.grib``). Those rows carry ``edition=1``:
  they match GRIB1 messages only, and the sample source (GRIB2 only) does not write them.
  (ECMWF gives every MARS ``levtype=sfc`` parameter level type 1 in GRIB1, so ``msl``,
  ``tcc``, ``100u`` ... decode at ``surface`` too; add edition-1 rows for them when a GRIB1
  feed needs them.)

Where runs come from (``UPSTREAM``, read by ``sources/remote/``): ECMWF's own server, then
the AWS, Azure and Google copies of the same tree (the mirrors ECMWF's ``ecmwf-opendata``
client knows), one GRIB2 file per step with its ``.index`` (JSON lines: the MARS keys,
``_offset``, ``_length``). The 06/18 UTC runs were published as stream ``scda`` (paths and
file names ``.../scda/...-scda-fc``) before ECMWF moved all four runs to ``oper``: the
``oper`` layout is tried first, ``scda`` after it. An index entry is a row's message when its
``param`` is the row's ``param`` or its shortName and its ``levtype`` (``pl`` or ``sfc``) and
``levelist`` match (``index_wanted``). Data: CC-BY-4.0 (ECMWF open data).

How a decoder combines rows (the convention the tables of all models follow): for a canonical
variable, the value at (level, step) is the **sum over the rows of that variable whose message
is present at that (level, step)**. Rows with different levels therefore stack along the level
axis (``u`` at 10/100/200 m), alternative encodings that never coexist at one step select
themselves (``10fg3``/``10fg``), and true components add up (ICON ``SNOW_GSP`` + ``SNOW_CON``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..gribtable import Encoding as _E, GribField, Processing
from .base import Layout, Mirror, ModelSpec, RegularGrid, Upstream, hours

G = 9.80665  # m s-2, converts geopotential (m2 s-2) to geopotential height (m)

PRESSURE_LEVELS: tuple[int, ...] = (1000, 925, 850, 700)  # hPa
HEIGHT_LEVELS: tuple[int, ...] = (10, 100, 200)  # m above ground

_SHORT = hours(*range(0, 145, 3))
_LONG = hours(*range(150, 361, 6))


def gust_window_hours(step_hours: int) -> int:
    """The window of the IFS gust at a step: ECMWF's post-processing step there (1 h to 90 h,
    3 h to 144 h, 6 h after)."""
    return 1 if step_hours <= 90 else 3 if step_hours <= 144 else 6


def steps_for_run(hour: int) -> tuple[timedelta, ...]:
    """Output steps of the IFS run starting at ``hour`` UTC (00/12: 360 h, 06/18: 144 h)."""
    if hour not in (0, 6, 12, 18):
        raise ValueError(f"IFS has no {hour:02d} UTC run")
    return _SHORT + _LONG if hour in (0, 12) else _SHORT


_MS = "m s**-1"
_I, _A, _X, _C = (Processing.INSTANT, Processing.ACCUM_SINCE_START, Processing.INTERVAL,
                  Processing.CONSTANT)

FIELDS: tuple[GribField, ...] = (
    GribField("t2m", "2t", "heightAboveGround", encodings=(_E(167, "K"),)),
    GribField("d2m", "2d", "heightAboveGround", encodings=(_E(168, "K"),)),
    GribField("sp", "sp", "surface", encodings=(_E(134, "Pa"),)),
    GribField("msl", "msl", "meanSea", encodings=(_E(151, "Pa"),)),
    GribField("u10", "10u", "heightAboveGround", encodings=(_E(165, _MS),)),
    GribField("v10", "10v", "heightAboveGround", encodings=(_E(166, _MS),)),
    GribField("u", "10u", "heightAboveGround", (10,), encodings=(_E(165, _MS),)),
    GribField("u", "100u", "heightAboveGround", (100,), encodings=(_E(228246, _MS),)),
    GribField("u", "200u", "heightAboveGround", (200,), encodings=(_E(228239, _MS),)),
    GribField("v", "10v", "heightAboveGround", (10,), encodings=(_E(166, _MS),)),
    GribField("v", "100v", "heightAboveGround", (100,), encodings=(_E(228247, _MS),)),
    GribField("v", "200v", "heightAboveGround", (200,), encodings=(_E(228240, _MS),)),
    # Maximum since the previous post-processing: the last hour to 90 h (10fg), the last 3 h
    # to 144 h (10fg3), the last 6 h after (10fg); in the .index all are param 10fg.
    GribField("gust", "10fg3", "heightAboveGround", processing=_X, param="10fg",
              encodings=(_E(228028, _MS),)),
    GribField("gust", "10fg", "heightAboveGround", processing=_X, encodings=(_E(49, _MS),)),
    # m (of water equivalent) accumulated since the start -> kg m-2.
    GribField("tp", "tp", "surface", processing=_A, scale=1000.0, encodings=(_E(228, "m"),)),
    GribField("sf", "sf", "surface", processing=_A, scale=1000.0,
              encodings=(_E(144, "m of water equivalent"),)),
    # J m-2 accumulated since the start -> interval mean W m-2.
    GribField("ssrd", "ssrd", "surface", processing=_A, per_second=True,
              encodings=(_E(169, "J m**-2"),)),
    GribField("fdir", "fdir", "surface", processing=_A, per_second=True,
              encodings=(_E(228021, "J m**-2"),)),
    # Per cent (228164) or a fraction (164, what open data carries now): see above.
    GribField("tcc", "tcc", "entireAtmosphere",
              encodings=(_E(228164, "%"), _E(164, "(0 - 1)", scale=100.0))),
    GribField("vis", "vis", "surface", encodings=(_E(3020, "m"),)),
    GribField("cape_mu", "mucape", "mostUnstableParcel", encodings=(_E(228235, "J kg**-1"),)),
    # Surface geopotential (m2 s-2) at step 0 -> surface height (m).
    GribField("orog", "z", "surface", processing=_C, scale=1.0 / G,
              encodings=(_E(129, "m**2 s**-2"),)),
    GribField("t_pl", "t", "isobaricInhPa", PRESSURE_LEVELS, encodings=(_E(130, "K"),)),
    GribField("u_pl", "u", "isobaricInhPa", PRESSURE_LEVELS, encodings=(_E(131, _MS),)),
    GribField("v_pl", "v", "isobaricInhPa", PRESSURE_LEVELS, encodings=(_E(132, _MS),)),
    GribField("z_pl", "gh", "isobaricInhPa", PRESSURE_LEVELS, encodings=(_E(156, "gpm"),)),
    # GRIB1 (ECMWF dissemination): the 2 m and 10 m parameters at level type "surface".
    GribField("t2m", "2t", "surface", edition=1, encodings=(_E(167, "K", "128/167"),)),
    GribField("d2m", "2d", "surface", edition=1, encodings=(_E(168, "K", "128/168"),)),
    GribField("u10", "10u", "surface", edition=1, encodings=(_E(165, _MS, "128/165"),)),
    GribField("v10", "10v", "surface", edition=1, encodings=(_E(166, _MS, "128/166"),)),
)


def index_wanted(entry: dict[str, Any], row: GribField) -> bool:
    """Whether an ECMWF ``.index`` entry is the message of ``row`` (GRIB2 rows only)."""
    if row.edition == 1 or entry.get("param") not in (row.param, row.shortName):
        return False
    if row.typeOfLevel == "isobaricInhPa":
        return entry.get("levtype") == "pl" and int(entry.get("levelist", -1)) in (row.levels or ())
    return entry.get("levtype") == "sfc"


def _layout(stream: str, run_hours: tuple[int, ...] | None) -> Layout:
    stem = f"{{init:%Y%m%d}}/{{init:%H}}z/ifs/0p25/{stream}/{{init:%Y%m%d%H}}0000-{{step}}h-{stream}-fc"
    return Layout(stream, f"{stem}.grib2", f"{stem}.index", index="ecmwf", run_hours=run_hours)


UPSTREAM = Upstream(
    mirrors=(
        Mirror("ecmwf", "https://data.ecmwf.int/forecasts"),
        Mirror("aws", "https://ecmwf-forecasts.s3.eu-central-1.amazonaws.com"),
        Mirror("azure", "https://ai4edataeuwest.blob.core.windows.net/ecmwf"),
        Mirror("google", "https://storage.googleapis.com/ecmwf-open-data"),
    ),
    # The current layout (stream oper for all four runs), then the older one (scda for 06/18).
    layouts=(_layout("oper", None), _layout("scda", (6, 18))),
    select=index_wanted,
    licence="ECMWF open data, CC-BY-4.0",
)

IFS = ModelSpec(
    id="ifs",
    name="ECMWF IFS HRES (open data, 0.25 deg)",
    grid=RegularGrid(lat_first=90.0, lon_first=-180.0, lat_last=-90.0, lon_last=179.75,
                     dlat=0.25, dlon=0.25),
    steps=_SHORT + _LONG,
    fields=FIELDS,
    run_hours=(0, 6, 12, 18),
    # ECMWF's dissemination schedule ends a 00 UTC HRES (day 10) near 06:30 UTC; open data follow
    # it by an hour (ECMWF, "ECMWF open data: real-time forecasts", Availability)
    publication_delay=timedelta(hours=8),
    resolution_km=9.0,  # native O1280; the published grid is 0.25 deg (~28 km)
    upstream=UPSTREAM,
)
