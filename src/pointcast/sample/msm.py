"""JMA MSM as JMA's surface GPV ("Lsurf") writes it.

One file per range of steps holding every field of those steps,
``Z__C_RJTD_<YYYYMMDDhh>0000_MSM_GPV_Rjp_Lsurf_FH<aa>-<bb>_grib2.bin`` with FH00-15, FH16-33
and FH34-39 for every run and FH40-51, FH52-78 for the 00/12 UTC runs, directly in the run
directory. A file is **one multi-field GRIB2 message** (``multi_field``: sections 1 and 3
once, then sections 4-7 repeated for each field; wgrib2 lists its fields as 1.1, 1.2 ...,
ecCodes reads them with multi-field support on), as a 72-field FH34-39 file of the real
archive is; inside it step after step, each step in JMA's element order (PRMSL, PRES, UGRD,
VGRD, TMP, RH, LCDC, TCDC, then APCP and DSWRF from step 1). Centre ``rjtd`` (subcentre 0),
GRIB master tables 2, local tables 1, earth shape 6 (sphere), rows from north to south,
``grid_simple`` 12-bit packing, steps in hours; temperature and humidity at 1.5 m (scale
factor 1, value 15); APCP (0/1/8, accumulation) and DSWRF (0/4/7, average) over the hour
before the step (``k-1``-``k``), template 4.8. MCDC and HCDC, which real files also hold, are
not written (no catalogue name). Header keys that no reader of the fields depends on
(generating process identifier, type of processed data) are left at ecCodes' defaults: not
checked against a real MSM file (none is at hand). See ``sources/msm.py``.
"""

from __future__ import annotations

import numpy as np

from ..catalogue import variable
from ..gribtable import Processing
from ..sources.base import ModelSpec, RunRef
from ..sources.msm import file_group, file_name
from .encode import H10, SFC, Encoder, Product, Writer, products_of, quantity, set_parameter, to_raw
from .grids import SampleGrid
from .weather import Weather, integrate

# JMA's GPV: simple packing at 12 bits (JMA's published file sizes, see sources/msm.py).
PACKING = "grid_simple"
BITS = 12

# JMA encodings (GRIB2 keys as in JMA's GPV format descriptions), by JMA element name.
_JMA_QUANTITY = {
    "PRMSL": "msl", "PRES": "sp", "UGRD": "u10", "VGRD": "v10", "TMP": "t2m", "RH": "rh2m",
    "LCDC": "lcc", "TCDC": "tcc", "APCP": "tp_int", "DSWRF": "ghi_int_avg",
}
# The screen level: 1.5 m above the ground (scale factor 1, scaled value 15).
_H15 = dict(typeOfFirstFixedSurface=103, scaleFactorOfFirstFixedSurface=1,
            scaledValueOfFirstFixedSurface=15)
_JMA_KEYS: dict[str, dict[str, int]] = {
    "PRMSL": dict(parameterCategory=3, parameterNumber=1, typeOfFirstFixedSurface=101),
    "PRES": dict(parameterCategory=3, parameterNumber=0, **SFC),
    "UGRD": dict(parameterCategory=2, parameterNumber=2, **H10),
    "VGRD": dict(parameterCategory=2, parameterNumber=3, **H10),
    "TMP": dict(parameterCategory=0, parameterNumber=0, **_H15),
    "RH": dict(parameterCategory=1, parameterNumber=1, **_H15),
    "LCDC": dict(parameterCategory=6, parameterNumber=3, **SFC),
    "TCDC": dict(parameterCategory=6, parameterNumber=1, **SFC),
    # The past hour: precipitation accumulated (1), radiation averaged (0) over (k-1, k].
    "APCP": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=8,
                 typeOfStatisticalProcessing=1, **SFC),
    "DSWRF": dict(productDefinitionTemplateNumber=8, parameterCategory=4, parameterNumber=7,
                  typeOfStatisticalProcessing=0, **SFC),
}
# JMA's percentages are written at most this high: 12-bit packing rounds to a quantum of up
# to 1/32 %, and a field whose minimum is not 0 could otherwise decode a hair above 100 %.
JMA_PERCENT_MAX = 99.98


def _parameter(h: int, product: Product) -> None:
    set_parameter(h, dict(_JMA_KEYS[product.param]))


def write_files(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
                writer: Writer) -> None:
    """JMA's Lsurf files: one file per range of steps (``msm.FILE_GROUPS``), each holding every
    field of its steps, step by step in JMA's element order (the table's order). The hourly
    precipitation and radiation start at step 1 (no window ends at step 0). A run capped
    below a range's end (``horizon_hours``) writes that range's file with the steps it has."""
    init = run.init
    prods = products_of(model)
    enc = Encoder(grid, init, centre="rjtd", packing=PACKING, parameter=_parameter, bits=BITS)
    main = [int(s.total_seconds() // 60) for s in run.steps]
    if any(m % 60 for m in main):
        raise ValueError("MSM steps are whole hours")
    run_id = f"{init:%Y%m%d%H}"
    last = main[-1] // 60
    chunks: list[bytes] = []
    try:
        for snap in integrate(weather, init, main, [], (), ()):
            step = snap.minute // 60
            for p in prods:
                statistical = p.processing is not Processing.INSTANT
                if statistical and snap.interval_start is None:
                    continue  # the past hour's precipitation and radiation start at step 1
                values = to_raw(snap.q[quantity(p, _JMA_QUANTITY[p.param])], p)
                if variable(p.rows[0].var).units == "%":
                    values = np.minimum(values, JMA_PERCENT_MAX)
                # The window of the statistics: since the previous step, (k-1, k].
                start = snap.interval_start // 60 if statistical and snap.interval_start is not None else 0
                chunks.append(enc.message(p, values, end=step, start=start))
            group = file_group(step)
            if step == group[1] or step == last:
                writer.write(file_name(run_id, group), multi_field(chunks))
                chunks = []
    finally:
        enc.close()


def _sections(message: bytes) -> list[bytes]:
    """Sections 1-7 of a GRIB2 message of one field, as bytes."""
    out, pos = [], 16
    while message[pos:pos + 4] != b"7777":
        size = int.from_bytes(message[pos:pos + 4], "big")
        out.append(message[pos:pos + size])
        pos += size
    return out


def multi_field(messages: list[bytes]) -> bytes:
    """The fields of ``messages`` (GRIB2, one field each, with the same sections 1 and 3 and
    no section 2) as one multi-field message, as JMA writes its GPV: sections 0, 1 and 3
    once, then sections 4-7 of each field in turn, then ``7777``."""
    parts = [_sections(m) for m in messages]
    head = parts[0][:2]
    if any(p[:2] != head or len(p) != 6 for p in parts):
        raise ValueError("the fields of one multi-field message share sections 1 and 3")
    body = b"".join([*head, *(section for p in parts for section in p[2:])])
    sec0 = messages[0][:8] + (16 + len(body) + 4).to_bytes(8, "big")
    return sec0 + body + b"7777"

