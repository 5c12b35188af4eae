"""The ensembles as their upstreams write them: ECMWF ENS (open data, stream ``enfo``), DWD
ICON-EU-EPS and NOAA GEFS, members from the deterministic sample weather plus a documented
perturbation (``perturbation``) that tests can evaluate exactly.

**Values.** Member ``k`` of an ensemble is the sample weather of its deterministic twin (IFS for
ENS, ICON-EU for ICON-EU-EPS, GFS for GEFS: the same ``weather`` functions, flavour and
orography, so at a shared grid point the control equals the twin's run and the ensemble mean
sits near it) changed by ``perturbation(model_id, k)``: 2 m temperature plus ``t2m_k`` (K),
the wind vector at every height times ``wind`` (speed scaled, direction kept), precipitation
times ``precip`` (the rate, so every accumulation and window too; some members are dry). The
control (perturbationNumber 0) is unperturbed. The perturbed members' values are spread evenly
and shuffled by a fixed hash, per model and variable: ``t2m_k`` over -3..+3 K, ``wind`` over
0.7..1.3, ``precip`` over max(0, -0.5..2.5), so about a sixth of the members are dry and the mean
factor is about 1. They are constant through the run (a real ensemble's spread grows with lead
time; this one does not, so that shares and quantiles are exact at every step).

**Members.** All of the upstream's, or its first ``SampleSource.members`` (the control first
where it has one: ENS's and GEFS's 0, ICON-EU-EPS's 1), spread over the same ranges; the
messages still say the upstream's ensemble size, as a client that takes some members of a
real ensemble receives them. A cycle's cost grows with the members it decodes.

**Grids.** Coarser than the deterministic samples (``SampleSource.ensemble_scale``): ENS and
GEFS on every Nth row and column of their 0.25 degree grids (``grids.sample_grid``, so their
points are a subset of IFS's and GFS's samples when N is a multiple of their scale), ICON-EU-EPS
on a native-style lattice (``grids.cell_grid``) of N times its 13 km mesh.

**Encoding** (templates 4.1 instantaneous, 4.11 accumulations; typeOfGeneratingProcess 4):

- ENS, as since IFS cycle 50r1 (``sources/ens.py``): the 50 perturbed members in
  ``<YYYYMMDD>/<HH>z/ifs/0p25/enfo/<YYYYMMDDHH>0000-<step>h-enfo-ef.grib2``, one file a step
  holding every member of every parameter, with its ``.index`` (MARS keys with ``type`` ``pf``
  and ``number``); the control in the step's ``.../oper/...-oper-fc.grib2`` as the
  deterministic stream's message (``type`` ``fc``, no member). As ``ifs``: paramIds, CCSDS 16
  bits, MARS local section. Perturbed members: typeOfEnsembleForecast 3 (WMO code table 4.6:
  positively perturbed) and typeOfProcessedData 4 (perturbed forecast), numberOfForecastsIn
  Ensemble 51, as ECMWF's TIGGE messages (``tests/data/pygrib``: the control of that
  convention, type 1, number 0, 51 forecasts), not checked against a real ENS perturbed
  message.
- ICON-EU-EPS: one file a parameter and step holding all 40 members (1-40, no control), DWD's
  encoding of ICON-EU (``icon``), steps in minutes, CCSDS 16 bits (DWD's ICON packing since
  16 June 2026), typeOfEnsembleForecast 192 (DWD local), typeOfProcessedData 5 (control and
  perturbed), numberOfForecastsInEnsemble 40: what ICON's GRIB output writes for an ensemble
  (ICON's ``gribout_nml`` documentation, ``typeOfGeneratingProcess`` 4, "ensemble") and what
  public descriptions of the decoded ICON-EPS files report. Tree ``v1`` (``icon_layout``):
  ``v1/`` + ``sources.icon.v1_path("icon-eu-eps", ...)``, uncompressed (assumed: the v1 paths of
  ICON-EU applied to the ensemble); ``legacy``: ``icon-eu-eps/grib/<HH>/<param>/icon-eu-eps_
  europe_icosahedral_single-level_<YYYYMMDDHH>_<SSS>_<param>.grib2.bz2`` (parameter names in
  lower case), as DWD's ICON-EU-EPS tree. Both on the native grid (DWD publishes no lat/lon
  ICON-EU-EPS), numberOfGridUsed 37 (R03B07 nest, 13 km since November 2022), with the cell
  centres as CLAT/CLON and the ground height HSURF (the twin's orography, one message without
  a member) at step 0 (legacy: ``.../<clat|hsurf>/icon-eu-eps_europe_icosahedral_
  time-invariant_<YYYYMMDDHH>_<clat|hsurf>.grib2.bz2``).
- GEFS: one file a member and step, ``gefs.<YYYYMMDD>/<HH>/atmos/pgrb2sp25/<member>.t<HH>z.
  pgrb2s.0p25.f<FFF>`` (``gec00``, ``gep01``-``gep30``), with its wgrib2 ``.idx`` (lines ending
  ``ENS=low-res ctl`` or ``ENS=+<n>``), NCEP's encoding of GFS (``gfs``), APCP over the windows
  that reset every 6 hours (no APCP at f000), generating process 107 (NCEP ON388 table A:
  GEFS). Control typeOfEnsembleForecast 1 (low-resolution control) and typeOfProcessedData 3,
  perturbed 3 and 4, numberOfForecastsInEnsemble **30**: NCEP counts the perturbed members
  only (as reported from decoded GEFS files; ECMWF counts the control, 51). PRES at the
  surface and PRMSL (the twin's, every member) at f000 only, the one step the table reads them
  at (NOAA writes them at every step).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..gribtable import CELL_CENTRES, Processing
from ..sources import GFS, ICON_EU, IFS
from ..sources.base import ModelSpec, RunRef
from ..sources.gefs import GROUND_ROWS as GEFS_GROUND
from ..sources.icon import NativeGrid, v1_path
from . import gfs, icon, ifs
from .encode import Encoder, EnsembleKeys, Product, Writer, products_of, quantity, to_raw
from .grids import CellGrid, SampleGrid, cell_grid, sample_grid
from .weather import Weather, _hash01, integrate

# The deterministic model whose sample weather each ensemble perturbs.
TWINS: dict[str, ModelSpec] = {"ens": IFS, "icon-eu-eps": ICON_EU, "gefs": GFS}
# perturbationNumber of each ensemble's first member: 0 where a control is published.
FIRST_MEMBER = {"ens": 0, "icon-eu-eps": 1, "gefs": 0}
# ICON-EU-EPS's native grid: DWD grid 37, the R03B07 European nest (13 km).
ICON_EU_EPS_GRID = NativeGrid(37, 29.5, 70.5, -23.5, 62.5, 13.0)

ECMWF_ENSEMBLE = EnsembleKeys(size=51, control_type=1, perturbed_type=3, control_data=3,
                              perturbed_data=4)
DWD_ENSEMBLE = EnsembleKeys(size=40, control_type=192, perturbed_type=192, control_data=5,
                            perturbed_data=5)
NCEP_ENSEMBLE = EnsembleKeys(size=30, control_type=1, perturbed_type=3, control_data=3,
                             perturbed_data=4)
# NCEP's generating process for GEFS (ON388 table A: 107).
GEFS_PROCESS_ID = 107

T2M_SPREAD_K = (-3.0, 3.0)
WIND_FACTORS = (0.7, 1.3)
PRECIP_FACTORS = (-0.5, 2.5)  # clipped at 0: the members below are dry
_WIND_VARS = frozenset({"u10", "v10", "u", "v"})
# What fixes the model's ground (GEFS's analysis pressures, ICON-EU-EPS's HSURF): the twin's in
# every member, so the members share its ground.
_GROUND = frozenset({"sp", "msl", "orog"})


@dataclass(frozen=True)
class Perturbation:
    """How one member departs from the deterministic sample weather (module docstring)."""

    t2m_k: float = 0.0  # added to 2 m temperature, K
    wind: float = 1.0  # factor on the wind vector at every height
    precip: float = 1.0  # factor on the precipitation rate (and so on every accumulation)

    def apply(self, var: str, values: np.ndarray) -> np.ndarray:
        """The member's value of the catalogue variable ``var`` from the deterministic one
        (canonical units)."""
        if var == "t2m":
            return values + self.t2m_k
        if var in _WIND_VARS:
            return values * self.wind
        if var == "tp":
            return values * self.precip
        if var in _GROUND:
            return values
        raise ValueError(f"the sample ensembles perturb no {var!r}")


def members(model: ModelSpec, count: int | None = None) -> range:
    """The perturbationNumbers of ``model``'s members: its first ``count`` (the control first
    where the upstream publishes one; ``SampleSource.members``), or all of the upstream's."""
    first = FIRST_MEMBER[model.id]
    return range(first, first + min(model.members if count is None else count, model.members))


def perturbation(model_id: str, member: int, count: int | None = None) -> Perturbation:
    """The perturbation of ``member`` (perturbationNumber) of the ensemble ``model_id`` of
    ``count`` members (`members`): a pure function of the three, the same on every grid point
    and at every step. A smaller ensemble spreads its fewer members over the same ranges."""
    model = _ensemble(model_id)
    ids = members(model, count)
    if member not in ids:
        raise ValueError(f"{model_id} of {len(ids)} members has no member {member}")
    if member == 0:
        return Perturbation()
    perturbed = len(ids) - (1 if FIRST_MEMBER[model_id] == 0 else 0)
    j = member - 1
    seed = zlib.crc32(model_id.encode())

    def spread(salt: int, lo: float, hi: float) -> float:
        keys = [_hash01(seed, salt, i) for i in range(perturbed)]
        rank = sorted(range(perturbed), key=lambda i: (keys[i], i)).index(j)
        return lo + (hi - lo) * rank / max(perturbed - 1, 1)

    return Perturbation(t2m_k=spread(1, *T2M_SPREAD_K), wind=spread(2, *WIND_FACTORS),
                        precip=max(0.0, spread(3, *PRECIP_FACTORS)))


def weather_model(model: ModelSpec) -> ModelSpec:
    """The model the ensemble's ``Weather`` is made for: its deterministic twin (flavour,
    orography smoothing) with the ensemble's rows (no model levels)."""
    return replace(TWINS[model.id], fields=model.fields)


def grid(model: ModelSpec, scale: int, area: tuple[float, float, float, float]
         ) -> SampleGrid | CellGrid:
    """The ensemble's sample grid at ``scale`` times its grid spacing (module docstring)."""
    if model.id == "icon-eu-eps":
        return cell_grid(model, scale, area, ICON_EU_EPS_GRID)
    return sample_grid(model, scale, area)


def write_files(run: RunRef, model: ModelSpec, grid: SampleGrid | CellGrid, weather: Weather,
                writer: Writer, icon_layout: str, count: int | None = None) -> None:
    """Every file of an ensemble's run of ``count`` members (`members`), in step order."""
    if model.id == "ens":
        assert isinstance(grid, SampleGrid)
        _write_ens(run, model, grid, weather, writer, count)
    elif model.id == "icon-eu-eps":
        assert isinstance(grid, CellGrid)
        _write_icon_eps(run, model, grid, weather, writer, icon_layout, count)
    elif model.id == "gefs":
        assert isinstance(grid, SampleGrid)
        _write_gefs(run, model, grid, weather, writer, count)
    else:
        raise ValueError(f"the sample source has no ensemble writer for {model.id!r}")


def _ensemble(model_id: str) -> ModelSpec:
    from ..sources import MODELS

    model = MODELS.get(model_id)
    if model is None or not model.members or model_id not in TWINS:
        raise ValueError(f"{model_id!r} is not an ensemble the sample writes")
    return model


def _heights(model: ModelSpec) -> tuple[int, ...]:
    return tuple(sorted({lv for r in model.fields if r.typeOfLevel == "heightAboveGround"
                         for lv in (r.levels or ())}))


def _write_ens(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
               writer: Writer, count: int | None) -> None:
    """ENS as published since IFS cycle 50r1 (``sources/ens.py``): the perturbed members in
    the step's ``enfo-ef`` file, the control as the deterministic stream's message in its
    ``oper-fc`` file (template 4.0/4.8, no member), each file with its ``.index``."""
    init = run.init
    prods = products_of(model)
    ids = list(members(model, count))
    perts = {k: perturbation(model.id, k, count) for k in ids}
    encoders = {"enfo": Encoder(grid, init, centre="ecmf", packing=ifs.PACKING, parameter=ifs._parameter,
                                ensemble=ECMWF_ENSEMBLE),
                "oper": Encoder(grid, init, centre="ecmf", packing=ifs.PACKING, parameter=ifs._parameter)}
    main = [int(s.total_seconds() // 60) for s in run.steps]
    try:
        for snap in integrate(weather, init, main, [], _heights(model), ()):
            step = snap.minute // 60
            files: dict[str, tuple[list[bytes], list[str]]] = {"enfo": ([], []), "oper": ([], [])}
            for p in prods:
                constant = p.processing is Processing.CONSTANT
                if constant and step:
                    continue  # the orography, at step 0 only, as the IFS's
                if p.processing not in (Processing.INSTANT, Processing.ACCUM_SINCE_START) and not constant:
                    raise ValueError(f"ens: no sample encoding of {p.short_name}")
                det = snap.q[quantity(p, ifs._ECMWF_QUANTITY[p.short_name])]
                for k in [0] if constant else ids:  # the orography is the control's oper-fc field
                    stream = "oper" if k == 0 else "enfo"
                    values = to_raw(det if constant else perts[k].apply(p.rows[0].var, det), p)
                    msg = encoders[stream].message(p, values, end=step, start=0, member=k if k else None)
                    chunks, index = files[stream]
                    entry: dict[str, Any] = {
                        "domain": "g", "date": f"{init:%Y%m%d}", "time": f"{init:%H%M}",
                        "expver": "0001", "class": "od", "type": "pf" if k else "fc",
                        "stream": stream, "step": str(step), "levtype": "sfc",
                    }
                    if k:
                        entry["number"] = str(k)
                    entry.update(param=p.param, _offset=sum(map(len, chunks)), _length=len(msg))
                    index.append(json.dumps(entry))
                    chunks.append(msg)
            for stream, kind in (("enfo", "ef"), ("oper", "fc")):
                chunks, index = files[stream]
                name = f"{init:%Y%m%d}/{init:%H}z/ifs/0p25/{stream}/{init:%Y%m%d%H}0000-{step}h-{stream}-{kind}"
                writer.write(f"{name}.grib2", b"".join(chunks))
                writer.write(f"{name}.index", ("\n".join(index) + "\n").encode(), data_file=False)
    finally:
        for enc in encoders.values():
            enc.close()


def _icon_eps_path(layout: str, param: str, run: RunRef, minute: int) -> str:
    init = run.init
    if layout == "v1":
        return "v1/" + v1_path("icon-eu-eps", param, init, minute)
    name = param.lower()
    stem = f"icon-eu-eps/grib/{init:%H}/{name}/icon-eu-eps_europe_icosahedral"
    if param in CELL_CENTRES or param == "HSURF":
        return f"{stem}_time-invariant_{init:%Y%m%d%H}_{name}.grib2.bz2"
    return f"{stem}_single-level_{init:%Y%m%d%H}_{minute // 60:03d}_{name}.grib2.bz2"


def _write_icon_eps(run: RunRef, model: ModelSpec, grid: CellGrid, weather: Weather,
                    writer: Writer, layout: str, count: int | None) -> None:
    prods = products_of(model)
    ids = list(members(model, count))
    perts = {k: perturbation(model.id, k, count) for k in ids}
    compress = layout != "v1"
    enc = Encoder(grid, run.init, centre="edzw", packing=icon.V1_PACKING,
                  parameter=icon._parameter, ensemble=DWD_ENSEMBLE)
    # The cell centres: deterministic fields, one message each.
    centres = Encoder(grid, run.init, centre="edzw", packing=icon.V1_PACKING,
                      parameter=icon._parameter)
    main = [int(s.total_seconds() // 60) for s in run.steps]
    try:
        for param, short in CELL_CENTRES.items():
            p = Product(short, param, "surface", None, ())
            values = grid.lats if param == "CLAT" else grid.lons
            writer.write(_icon_eps_path(layout, param, run, 0),
                         centres.message(p, values, end=0, minutes=True,
                                         bits=icon.CELL_CENTRE_BITS), compress=compress)
        for snap in integrate(weather, run.init, main, [], (), ()):
            for p in prods:
                if p.processing is Processing.CONSTANT:  # HSURF: one message, no member, at step 0
                    if snap.minute == 0:
                        writer.write(_icon_eps_path(layout, p.param, run, 0),
                                     centres.message(p, to_raw(snap.q[icon._quantity(p)], p), end=0,
                                                     minutes=True), compress=compress)
                    continue
                if p.processing not in (Processing.INSTANT, Processing.ACCUM_SINCE_START):
                    raise ValueError(f"icon-eu-eps: no sample encoding of {p.param}")
                det = snap.q[icon._quantity(p)]
                msgs = [enc.message(p, to_raw(perts[k].apply(p.rows[0].var, det), p),
                                    end=snap.minute, start=0, minutes=True, member=k)
                        for k in ids]
                writer.write(_icon_eps_path(layout, p.param, run, snap.minute), b"".join(msgs),
                             compress=compress)
    finally:
        enc.close()
        centres.close()


def gefs_file_name(run: RunRef, member: int, step_h: int) -> str:
    """NOAA's path of a GEFS pgrb2s.0p25 member file (relative to the bucket's root)."""
    init = run.init
    who = "gec00" if member == 0 else f"gep{member:02d}"
    return (f"gefs.{init:%Y%m%d}/{init:%H}/atmos/pgrb2sp25/{who}.t{init:%H}z.pgrb2s.0p25."
            f"f{step_h:03d}")


def _write_gefs(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
                writer: Writer, count: int | None) -> None:
    init = run.init
    prods = gfs.ordered_products(model)
    ids = list(members(model, count))
    perts = {k: perturbation(model.id, k, count) for k in ids}
    main = [int(s.total_seconds() // 60) for s in run.steps]
    enc = Encoder(grid, init, centre="kwbc", packing=gfs.NCEP_PACKING, parameter=gfs._parameter,
                  process_id=GEFS_PROCESS_ID, ensemble=NCEP_ENSEMBLE)
    try:
        for step, start, q in gfs.ncep_steps(weather, init, model, main, ()):
            for k in ids:
                chunks: list[bytes] = []
                index: list[str] = []
                offset = 0
                ens = "ENS=low-res ctl" if k == 0 else f"ENS=+{k}"
                for p in prods:
                    statistical = p.processing is Processing.ACCUM_SINCE_START
                    if statistical and step == 0:
                        continue  # no window ends at the analysis
                    if p.rows[0] in GEFS_GROUND and step > 0:
                        continue  # the table reads them at the analysis only (NOAA writes them at every step)
                    values = to_raw(perts[k].apply(p.rows[0].var, q[gfs._ncep_quantity(p)]), p)
                    msg = enc.message(p, values, end=step, start=start if statistical else 0,
                                      member=k)
                    index.append(gfs.idx_line(len(index) + 1, offset, init, p, step, start, ens))
                    chunks.append(msg)
                    offset += len(msg)
                name = gefs_file_name(run, k, step)
                writer.write(name, b"".join(chunks))
                writer.write(f"{name}.idx", ("\n".join(index) + "\n").encode(), data_file=False)
    finally:
        enc.close()
