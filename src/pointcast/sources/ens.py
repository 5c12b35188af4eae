"""ECMWF ENS, the IFS ensemble, as ECMWF open data publishes it (stream ``enfo``).

Grid, runs and steps as the IFS (``sources/ifs.py``): 0.25 degree regular lat/lon, global;
runs at 00/06/12/18 UTC, the 00/12 UTC runs to 360 h (3-hourly to 144 h, 6-hourly after), the
06/18 UTC runs to 144 h (``ifs.steps_for_run``, ``sources.run_steps``). Published under the same
tree and on the same mirrors as the IFS (ECMWF, AWS, Azure, Google; ECMWF's open-data access
page, https://confluence.ecmwf.int/display/DAC/ECMWF+open+data%3A+real-time+forecasts+from+IFS+and+AIFS,
and its file-naming convention ``[ROOT]/[yyyymmdd]/[HH]z/ifs/[resol]/[stream]/
[yyyymmdd][HH]0000-[step][U]-[stream]-[type].[format]``). Data: CC-BY-4.0.

**Members and where they are (IFS cycle 50r1).** ENS has 51 members: a control and 50
perturbed forecasts. Until cycle 49r1 the open-data file of a step,
``<yyyymmdd>/<HH>z/ifs/0p25/enfo/<yyyymmddHH>0000-<step>h-enfo-ef.grib2``, held the control
(MARS ``type=cf``, perturbationNumber 0) and the perturbed members (``type=pf``, 1-50). IFS
cycle 50r1, operational from the 06 UTC run of 12 May 2026, stopped running the ex-HRES and the
ENS control separately: one forecast, called the ENS control, is disseminated as the
deterministic stream (``stream=oper``, ``type=fc``) and ``enfo:cf`` is discontinued (ECMWF,
"Implementation of IFS Cycle 50r1", https://confluence.ecmwf.int/display/FCST/Implementation+of+IFS+Cycle+50r1,
and its dissemination notes: "enfo:cf and waef:cf are going to be stopped", a requirement
for ``enfo:cf`` moves to ``oper:fc``). So since then ``enfo-ef`` holds the 50 perturbed members
and the control is the ``oper-fc`` file of the same step, the IFS's own (ECMWF's access page:
"Ensemble forecast (all 50 members)"; dynamical.org's ENS archiver,
dynamical-org/reformatters ``src/reformatters/ecmwf/ifs_ens/forecast_15_day_0_25_degree/
source_file_coord.py``, ``IFS_CYCLE_50R1_CUTOVER = 2026-05-12T06``: "the control member lives in
oper-fc; perturbed members remain in enfo-ef", and its index parser accepting number 0 as
``type`` cf or fc). The layout (``UPSTREAM``) therefore names two files a step
(``Layout.parts``): ``enfo-ef`` and ``oper-fc``, each with its ``.index``; the index
selection takes every member's message of the table's parameters (``index_wanted``: ``type``
``pf``, ``cf`` or ``fc``), so a file still holding the control as ``cf`` is read too. Runs
before 50r1 are older than discovery looks back (``lookback_runs``) and have no layout.

The ``.index`` (JSON lines, one a message) carries the MARS keys: ``domain``, ``date``,
``time``, ``expver``, ``class``, ``type`` (``pf``/``cf``/``fc``), ``stream``, ``step``,
``levtype``, ``number`` (the member; absent for ``fc``), ``param``, with ``_offset`` and
``_length`` (dynamical-org/reformatters ``tests/ecmwf/fixtures/mars_pf_sfc.idx``; the
``ecmwf-opendata`` client reads ``type=ef`` from the index as ``["cf", "pf"]``,
ecmwf/ecmwf-opendata ``ecmwf/opendata/client.py``, ``user_to_index``).

**Encoding.** The perturbed members are GRIB2 ensemble products (product definition template
4.1, 4.11 for the accumulations): ``perturbationNumber`` 1-50, ``numberOfForecastsInEnsemble``
51 (the count includes the control: ECMWF's local GRIB definition, "the total number of
forecasts in an ensemble; the number includes the control forecast",
https://codes.ecmwf.int/grib/format/grib1/local/1), ``typeOfEnsembleForecast`` (WMO code table
4.6: 0 unperturbed high-resolution control, 1 unperturbed low-resolution control, 2 negatively
and 3 positively perturbed). A real ECMWF ENS control message (TIGGE,
``tests/data/pygrib/ecmwf_tigge_cut.grib2``) carries template 4.1, perturbationNumber 0,
typeOfEnsembleForecast 1 and numberOfForecastsInEnsemble 51. The control in ``oper-fc`` is the
deterministic stream's message (MARS ``type=fc`` has no ``number``), which names no member:
it is member 0. Parameters: ``2t`` (167, K), ``10u``/``10v`` (165/166, m s-1), ``100u``/``100v``
(228246/228247, m s-1) and ``tp`` (228, m accumulated from the start), the same paramIds and
units as the IFS (ECMWF parameter database, https://codes.ecmwf.int/grib/param-db/; the
ensemble's open-data parameter list on the access page names 2t, 10u, 10v, 100u, 100v, tp
among others).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..gribtable import Encoding as _E, GribField, Processing
from .base import Layout, ModelSpec, RegularGrid, Upstream
from .ifs import UPSTREAM as IFS_UPSTREAM, G, index_wanted as ifs_index_wanted, steps_for_run

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
    # Surface geopotential (m2 s-2) at step 0 -> surface height (m): the control's oper-fc
    # file holds it (the IFS's row, sources/ifs.py), every member's ground (the members'
    # temperatures are corrected from it to the points' elevations).
    GribField("orog", "z", "surface", processing=Processing.CONSTANT, scale=1.0 / G,
              encodings=(_E(129, "m**2 s**-2"),)),
)

# MARS types of a member's message: perturbed, control (enfo before 50r1), control (oper since).
MEMBER_TYPES = frozenset({"pf", "cf", "fc"})


def index_wanted(entry: dict[str, Any], row: GribField) -> bool:
    """Whether an ``.index`` entry is a member's message of ``row``: every member's, the
    control's included (``MEMBER_TYPES``)."""
    return entry.get("type") in MEMBER_TYPES and ifs_index_wanted(entry, row)


def _file(stream: str, kind: str) -> dict[str, str]:
    return {"stream": stream, "kind": kind}


_STEM = ("{init:%Y%m%d}/{init:%H}z/ifs/0p25/{stream}/{init:%Y%m%d%H}0000-{step}h-{stream}-{kind}")

UPSTREAM = Upstream(
    mirrors=IFS_UPSTREAM.mirrors,
    # Since IFS cycle 50r1 (12 May 2026): the perturbed members in enfo-ef, the control in oper-fc.
    layouts=(Layout("enfo", f"{_STEM}.grib2", f"{_STEM}.index", index="ecmwf",
                    parts=(_file("enfo", "ef"), _file("oper", "fc"))),),
    select=index_wanted,
    licence=IFS_UPSTREAM.licence,
)

ENS = ModelSpec(
    id="ens",
    name="ECMWF ENS (open data, 0.25 deg, 51 members)",
    grid=RegularGrid(lat_first=90.0, lon_first=-180.0, lat_last=-90.0, lon_last=179.75,
                     dlat=0.25, dlon=0.25),
    steps=steps_for_run(0),
    fields=FIELDS,
    run_hours=(0, 6, 12, 18),
    # ECMWF's dissemination schedule ends a 00 UTC ENS (day 15) near 07:40 UTC; open data follow
    # it by an hour (ECMWF, "ECMWF open data: real-time forecasts", Availability)
    publication_delay=timedelta(hours=9),
    # 9 km (TCo1279) since IFS cycle 48r1 (ECMWF, "Implementation of IFS Cycle 48r1": ENS
    # from 18 to 9 km); published on 0.25 deg.
    resolution_km=9.0,
    upstream=UPSTREAM,
    members=51,
)
