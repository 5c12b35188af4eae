"""IFS as ECMWF open data writes it.

One GRIB2 file per step holding every field of that step,
``<YYYYMMDD>/<HH>z/ifs/0p25/oper/<YYYYMMDDHH>0000-<step>h-oper-fc.grib2``, and beside it the
``.index`` file (JSON lines with ``_offset``/``_length`` and the MARS keys). Centre ``ecmf``,
MARS local section (class od, type fc, stream oper, expver 0001), CCSDS packing
(``grid_ccsds``, 16 bits, as ECMWF open data; the eccodes wheel writes it), accumulations as
product definition template 8 with stepRange ``0-<step>``, the gust as the maximum over the
previous 3 h (``141-144``) or 6 h (``144-150``), total cloud cover as paramId 164, a fraction
in 0-1 (what open data carries now, see ``sources/ifs.py``). Surface geopotential is written at
step 0 only; interval fields (the gust maxima) start at the first step after 0 (no interval
ends at step 0).
"""

from __future__ import annotations

import json
from typing import Any

import eccodes

from ..gribtable import Processing
from ..sources.base import ModelSpec, RunRef
from ..sources.ifs import gust_window_hours
from .encode import Encoder, Product, Writer, products_of, quantity, to_raw
from .grids import SampleGrid
from .weather import Weather, integrate

PACKING = "grid_ccsds"

_ECMWF_QUANTITY = {
    "2t": "t2m", "2d": "d2m", "sp": "sp", "msl": "msl", "10u": "u10", "10v": "v10",
    "100u": ("u", 100), "100v": ("v", 100), "200u": ("u", 200), "200v": ("v", 200),
    "10fg3": "gust", "10fg": "gust", "tp": "tp_acc", "sf": "sf_acc", "ssrd": "ghi_acc",
    "fdir": "dir_acc", "tcc": "tcc", "vis": "vis", "mucape": "cape", "z": "orog",
    "t": "t_pl", "u": "u_pl", "v": "v_pl", "gh": "z_pl",
}
# ECMWF encodings, by decoded shortName: the paramId ECMWF writes. tcc: 164 (a fraction, 0-1),
# as ECMWF open data carries it since the 2025-11-20 12 UTC run (``sources/ifs.py``).
_ECMWF_PARAM_ID = {
    "2t": 167, "2d": 168, "sp": 134, "msl": 151, "10u": 165, "10v": 166, "100u": 228246,
    "100v": 228247, "200u": 228239, "200v": 228240, "10fg3": 228028, "10fg": 49, "tp": 228,
    "sf": 144, "ssrd": 169, "fdir": 228021, "tcc": 164, "vis": 3020, "mucape": 228235,
    "z": 129, "t": 130, "u": 131, "v": 132, "gh": 156,
}
# IFS gust (paramId 49 with the post-processing step as its window): the name ecCodes decodes
# follows the window's length in hours (sources/ifs.py).
_ECMWF_GUST_BY_INTERVAL = {1: "10fg", 3: "10fg3", 6: "10fg"}


def _parameter(h: int, product: Product) -> None:
    eccodes.codes_set(h, "paramId", _ECMWF_PARAM_ID[product.short_name])


def write_files(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
                writer: Writer) -> None:
    """Every step's file and its index, in step order."""
    init = run.init
    prods = products_of(model)
    enc = Encoder(grid, init, centre="ecmf", packing=PACKING, parameter=_parameter)
    heights = tuple(sorted({lv for r in model.fields if r.typeOfLevel == "heightAboveGround"
                            for lv in (r.levels or ())}))
    levels = tuple(sorted({lv for r in model.fields if r.typeOfLevel == "isobaricInhPa"
                           for lv in r.levels or ()}, reverse=True))
    base = f"{init:%Y%m%d}/{init:%H}z/ifs/0p25/oper"
    main = [int(s.total_seconds() // 60) for s in run.steps]
    try:
        for snap in integrate(weather, init, main, [], heights, levels,
                              gust_window=lambda minute: 60 * gust_window_hours(minute // 60)):
            step = snap.minute // 60
            chunks: list[bytes] = []
            index: list[str] = []
            offset = 0
            for p in prods:
                proc = p.processing
                start = 0
                if proc is Processing.CONSTANT and step != 0:
                    continue
                if proc is Processing.INTERVAL:
                    if snap.interval_start is None:
                        continue  # no interval ends at step 0
                    start = snap.interval_start // 60
                    wanted = _ECMWF_GUST_BY_INTERVAL.get(step - start)
                    if wanted is None:
                        raise ValueError(f"no IFS gust encoding for a {step - start} h interval")
                    if wanted != p.short_name:
                        continue  # the other gust row encodes this interval
                values = to_raw(snap.q[quantity(p, _ECMWF_QUANTITY[p.short_name])], p,
                                _ECMWF_PARAM_ID[p.short_name])
                msg = enc.message(p, values, end=step, start=start)
                chunks.append(msg)
                entry: dict[str, Any] = {
                    "domain": "g", "date": f"{init:%Y%m%d}", "time": f"{init:%H%M}",
                    "expver": "0001", "class": "od", "type": "fc", "stream": "oper",
                }
                levtype = "pl" if p.type_of_level == "isobaricInhPa" else "sfc"
                if proc in (Processing.ACCUM_SINCE_START, Processing.INTERVAL):
                    entry.update(levtype=levtype, step=str(step))
                else:
                    entry["step"] = str(step)
                    if p.level is not None:
                        entry["levelist"] = str(p.level)
                    entry["levtype"] = levtype
                entry.update(param=p.param, _offset=offset, _length=len(msg))
                index.append(json.dumps(entry))
                offset += len(msg)
            name = f"{base}/{init:%Y%m%d%H}0000-{step}h-oper-fc"
            writer.write(f"{name}.grib2", b"".join(chunks))
            writer.write(f"{name}.index", ("\n".join(index) + "\n").encode(), data_file=False)
    finally:
        enc.close()
