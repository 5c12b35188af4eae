"""GFS as NOAA's pgrb2.0p25 files: one per step with every field of the step in NOAA's order,
and the wgrib2 ``.idx`` inventory beside each. DSWRF as NCEP's local parameter 0/4/192
(ecCodes ``sdswrf``), as in NOAA's files (see ``sources/gfs.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np

from ..gribtable import Processing
from ..sources.base import ModelSpec, RunRef
from ..sources.gfs import reset_start
from .encode import H2, SFC, Encoder, Product, Writer, products_of, set_parameter, to_raw
from .grids import SampleGrid
from .weather import Weather, integrate

# NCEP GFS encodings (GRIB2 keys as in NCEP's pgrb2 files), by (NCEP name, level type, level):
# the canonical quantity and the keys. Heights above ground take their level from the product.
_NCEP_QUANTITY = {
    "TMP": "t2m", "DPT": "d2m", "PRES": "sp", "PRMSL": "msl", "GUST": "gust_inst",
    "APCP": "tp_window", "DSWRF": "ghi_window_avg", "TCDC": "tcc", "VIS": "vis", "CAPE": "cape",
    "HGT": "orog",
}
_NCEP_KEYS: dict[str, dict[str, int]] = {
    "TMP": dict(parameterCategory=0, parameterNumber=0, **H2),
    "DPT": dict(parameterCategory=0, parameterNumber=6, **H2),
    "PRES": dict(parameterCategory=3, parameterNumber=0, **SFC),
    "PRMSL": dict(parameterCategory=3, parameterNumber=1, typeOfFirstFixedSurface=101),
    "UGRD": dict(parameterCategory=2, parameterNumber=2, typeOfFirstFixedSurface=103,
                 scaleFactorOfFirstFixedSurface=0),
    "VGRD": dict(parameterCategory=2, parameterNumber=3, typeOfFirstFixedSurface=103,
                 scaleFactorOfFirstFixedSurface=0),
    "GUST": dict(parameterCategory=2, parameterNumber=22, **SFC),
    # Over the 6-hour-reset window: accumulation (1), average (0).
    "APCP": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=8,
                 typeOfStatisticalProcessing=1, **SFC),
    # NCEP's local number for DSWRF (0/4/192), as in NOAA's files; WMO's 0/4/7 is not used.
    "DSWRF": dict(productDefinitionTemplateNumber=8, parameterCategory=4, parameterNumber=192,
                  typeOfStatisticalProcessing=0, **SFC),
    # Entire atmosphere (considered as a single layer): level type 10.
    "TCDC": dict(parameterCategory=6, parameterNumber=1, typeOfFirstFixedSurface=10),
    "VIS": dict(parameterCategory=19, parameterNumber=0, **SFC),
    "CAPE": dict(parameterCategory=7, parameterNumber=6, **SFC),
    "HGT": dict(parameterCategory=3, parameterNumber=5, **SFC),
}
# wgrib2's level names in the .idx inventory.
_NCEP_LEVEL_NAMES = {"surface": "surface", "meanSea": "mean sea level",
                     "atmosphere": "entire atmosphere"}
# NOAA's order of these fields inside a pgrb2.0p25 file (by NCEP name and level).
_NCEP_ORDER = [("PRMSL", None), ("VIS", None), ("GUST", None), ("HGT", None), ("PRES", None),
               ("TMP", 2), ("DPT", 2), ("UGRD", 10), ("VGRD", 10), ("APCP", None),
               ("CAPE", None), ("TCDC", None), ("DSWRF", None), ("UGRD", 80), ("VGRD", 80),
               ("UGRD", 100), ("VGRD", 100)]
NCEP_PACKING = "grid_complex_spatial_differencing"
# NCEP's generating process for GFS forecasts (ON388 table A: 96, Global Forecast System).
NCEP_PROCESS_ID = 96


def _parameter(h: int, product: Product) -> None:
    keys = dict(_NCEP_KEYS[product.param])
    if product.param in ("UGRD", "VGRD"):
        keys["scaledValueOfFirstFixedSurface"] = int(product.level or 10)
    set_parameter(h, keys)


def gfs_file_name(init: datetime, step_h: int) -> str:
    """NOAA's path of the pgrb2.0p25 file of ``step_h`` (relative to the bucket's root)."""
    return f"gfs.{init:%Y%m%d}/{init:%H}/atmos/gfs.t{init:%H}z.pgrb2.0p25.f{step_h:03d}"


def _ncep_quantity(p: Product) -> Any:
    if p.param in ("UGRD", "VGRD"):
        comp = "u" if p.param == "UGRD" else "v"
        return f"{comp}10" if p.level in (None, 10) else (comp, p.level)
    return _NCEP_QUANTITY[p.param]


def _ncep_level(p: Product) -> int | None:
    if p.param in ("UGRD", "VGRD"):
        return p.level or 10
    return 2 if p.param in ("TMP", "DPT") else None


def ncep_steps(weather: Weather, init: datetime, model: ModelSpec, main: list[int],
               heights: tuple[int, ...]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Each main step's quantities (step and window start in hours, ``q``) with NCEP's
    statistics over the window since the last 6-hourly reset (``gfs.reset_start``): APCP
    (``tp_window``) and DSWRF (``ghi_window_avg``) where the weather has them; a window
    starts at step 1, none ends at the analysis. GFS and GEFS alike."""
    if any(m % 60 for m in main):
        raise ValueError(f"{model.id}: NCEP's steps are whole hours")
    resets = sorted({reset_start(m // 60) * 60 for m in main if m > 0})
    at_reset: dict[int, dict[str, np.ndarray]] = {}
    for snap in integrate(weather, init, main, [r for r in resets if r not in main], heights, ()):
        if snap.minute in resets:
            at_reset[snap.minute] = {k: snap.q[k] for k in ("tp_acc", "ghi_acc") if k in snap.q}
        if not snap.main:
            continue
        step, q, start = snap.minute // 60, snap.q, 0
        if step > 0:
            start = reset_start(step)
            before = at_reset[start * 60]
            q["tp_window"] = q["tp_acc"] - before["tp_acc"]
            if "ghi_acc" in before:
                q["ghi_window_avg"] = (q["ghi_acc"] - before["ghi_acc"]) / ((step - start) * 3600.0)
        yield step, start, q
        for r in [r for r in at_reset if r < start * 60]:
            del at_reset[r]


def idx_line(number: int, offset: int, init: datetime, p: Product, step: int, start: int,
             member: str = "") -> str:
    """wgrib2's inventory line of a message (``member``: GEFS's seventh field, ``ENS=+3``)."""
    if p.processing in (Processing.ACCUM_SINCE_START, Processing.AVG_SINCE_START):
        kind = "acc" if p.processing is Processing.ACCUM_SINCE_START else "ave"
        when = f"{start}-{step} hour {kind} fcst"
    else:
        when = "anl" if step == 0 else f"{step} hour fcst"
    lv = _ncep_level(p)
    level = f"{lv} m above ground" if p.type_of_level == "heightAboveGround" else _NCEP_LEVEL_NAMES[p.type_of_level]
    return f"{number}:{offset}:d={init:%Y%m%d%H}:{p.param}:{level}:{when}:{member}"


def ordered_products(model: ModelSpec) -> list[Product]:
    """``model``'s products in NOAA's order within a file."""
    by_key = {(p.param, _ncep_level(p)): p for p in products_of(model)}
    missing = set(by_key) - set(_NCEP_ORDER)
    if missing:
        raise ValueError(f"{model.id}: no file position for {sorted(missing, key=str)}")
    return [by_key[k] for k in _NCEP_ORDER if k in by_key]


def write_files(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
                writer: Writer) -> None:
    """NOAA's pgrb2.0p25 files: one per step with every field of the step (NOAA's order),
    and the wgrib2 ``.idx`` inventory beside each. APCP and DSWRF cover the window from the
    last 6-hourly reset (``ncep_steps``) and start at step 1; HGT is in every file."""
    init = run.init
    prods = ordered_products(model)
    heights = tuple(sorted({lv for r in model.fields if r.typeOfLevel == "heightAboveGround"
                            for lv in (r.levels or ()) if lv != 10}))
    main = [int(s.total_seconds() // 60) for s in run.steps]
    enc = Encoder(grid, init, centre="kwbc", packing=NCEP_PACKING, parameter=_parameter,
                  process_id=NCEP_PROCESS_ID)
    try:
        for step, start, q in ncep_steps(weather, init, model, main, heights):
            chunks: list[bytes] = []
            index: list[str] = []
            offset = 0
            for p in prods:
                statistical = p.processing in (Processing.ACCUM_SINCE_START,
                                               Processing.AVG_SINCE_START)
                if statistical and step == 0:
                    continue  # no window ends at the analysis
                values = to_raw(q[_ncep_quantity(p)], p)
                msg = enc.message(p, values, end=step, start=start if statistical else 0)
                index.append(idx_line(len(index) + 1, offset, init, p, step, start))
                chunks.append(msg)
                offset += len(msg)
            name = gfs_file_name(init, step)
            writer.write(name, b"".join(chunks))
            writer.write(f"{name}.idx", ("\n".join(index) + "\n").encode(), data_file=False)
    finally:
        enc.close()
