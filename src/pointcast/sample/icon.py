"""ICON-EU and ICON-D2 as DWD's open-data trees write them.

**v1** (``write_v1_files``, DWD's only tree from 30 November 2026): the native-style grid
(``grids.cell_grid``), one uncompressed GRIB2 message per file at ``v1/`` +
``sources.icon.v1_path`` (ICON-D2's quarter hours in files of their own), the cell centres as
CLAT/CLON, CCSDS packing at 16 bits.

**legacy** (``write_legacy_files``): regular lat/lon grids, one bz2-compressed GRIB2 file per
parameter, step (and level): ``icon-eu/grib/<HH>/<param>/icon-eu_europe_regular-lat-lon_
single-level_<YYYYMMDDHH>_<SSS>_<PARAM>.grib2.bz2``, ``..._pressure-level_<YYYYMMDDHH>_<SSS>_
<LEVEL>_<PARAM>``, ``..._time-invariant_<YYYYMMDDHH>_<PARAM>``, model levels ``..._model-level_
<YYYYMMDDHH>_<SSS>_<LEVEL>_<PARAM>``, half-level heights ``..._time-invariant_<YYYYMMDDHH>_
<LEVEL>_HHL``; ICON-D2 ``icon-d2/grib/<HH>/<param>/icon-d2_germany_regular-lat-lon_
single-level_<YYYYMMDDHH>_<SSS>_2d_<param>.grib2.bz2`` (pressure levels ``..._pressure-level_
<YYYYMMDDHH>_<SSS>_<LEVEL>_<param>``, model levels ``..._model-level_<YYYYMMDDHH>_<SSS>_
<LEVEL>_<param>``, constants ``..._time-invariant_<YYYYMMDDHH>_000_0_<param>``, half-level
heights ``..._time-invariant_<YYYYMMDDHH>_000_<LEVEL>_hhl``; levels are not zero-padded),
``grid_simple`` 16-bit packing. **15-minute files**: the ICON-D2 file of hour ``SSS`` of a
15-minute field holds four messages, the quarter hours ``SSS-1``:15, :30, :45 and ``SSS``:00
(the ``000`` file holds step 0 only), so the hourly file names are unchanged and a reader that
only wants hours takes the last message. ASOB_S and CLCL are hourly in ICON-D2 too (one
message per file).

Both: centre ``edzw``, accumulations (TOT_PREC, SNOW_*) with typeOfStatisticalProcessing 1,
radiation means since the start (ASWDIR_S, ASWDIFD_S, ASOB_S) with 0, VMAX_10M with 2
(maximum over the hour before the step, also where ICON-EU's steps are 3-hourly, e.g.
``83-84``, as DWD publishes it). Every DWD step is encoded in minutes (indicatorOfUnitOfTimeRange
0), the hourly ones too, as in DWD's files; GRIB2 tables version 19, local tables version 1,
earth shape 6, ICON-EU generating process 2 (checked against real ICON-EU files from DWD's
open-data server). The DWD local section (254) is not written (this ecCodes cannot encode
it). **Model levels**: the real counts (ICON-EU 74 full levels, ICON-D2 65), HHL on every half
level once (1..75, 1..66), U and V at every step on the lowest full levels: those a reader
picks from this HHL to span the hub heights, and one more above (a real tree has every level;
the numbers follow from the heights: ICON-EU 61-74 at the default scale, where its terrain
reaches 4 km). On the generalized vertical height coordinate with DWD's vertical-grid header
(``nlev`` = the number of half levels, ``numberOfVGridUsed`` 4, a synthetic ``uuidOfVGrid``),
see ``sources/icon.py``.
"""

from __future__ import annotations

import hashlib

from ..gribtable import CELL_CENTRES, Processing
from ..sources.base import ModelSpec, RunRef
from ..sources.icon import LEVEL_COUNTS, NOT_IN_V1, legacy_path, v1_path
from .encode import (
    H2,
    H10,
    MODEL_LEVEL_TYPES,
    SFC,
    Encoder,
    Product,
    Writer,
    products_of,
    quantity,
    set_parameter,
    to_raw,
)
from .grids import CellGrid, SampleGrid
from .weather import Weather, integrate

# DWD's legacy regular lat/lon tree: simple packing, 16 bits. (DWD moved ICON output to
# "grid_ccsds" on 16 June 2026; ecCodes reads both, so readers must not assume either.)
LEGACY_PACKING = "grid_simple"
# DWD's v1 tree: CCSDS packing at 16 bits (the cell centres at 24 bits, about 1 m).
V1_PACKING = "grid_ccsds"
CELL_CENTRE_BITS = 24
# ICON model-level wind is written at every step up to this lead time (hours; None: all).
MODEL_LEVEL_HOURS: int | None = None

_DWD_QUANTITY = {
    "T_2M": "t2m", "TD_2M": "d2m", "PS": "sp", "PMSL": "msl", "U_10M": "u10", "V_10M": "v10",
    "VMAX_10M": "gust", "TOT_PREC": "tp_acc", "SNOW_GSP": "sf_ls_acc", "SNOW_CON": "sf_cv_acc",
    "ASWDIR_S": "dir_avg", "ASWDIFD_S": "dif_avg", "CLCT": "tcc", "VIS": "vis",
    "CAPE_ML": "cape", "HSURF": "orog", "T": "t_pl", "U": "u_pl", "V": "v_pl", "FI": "z_pl",
    "CLCL": "lcc", "ASOB_S": "net_avg",
}
_DWD_MODEL_LEVEL_QUANTITY = {"U": "u_ml", "V": "v_ml", "HHL": "hhl"}
# DWD encodings (GRIB2 keys as in DWD's parameter database), by DWD parameter name.
_DWD_KEYS: dict[str, dict[str, int]] = {
    "T_2M": dict(parameterCategory=0, parameterNumber=0, **H2),
    "TD_2M": dict(parameterCategory=0, parameterNumber=6, **H2),
    "PS": dict(parameterCategory=3, parameterNumber=0, **SFC),
    "PMSL": dict(parameterCategory=3, parameterNumber=1, typeOfFirstFixedSurface=101),
    "U_10M": dict(parameterCategory=2, parameterNumber=2, **H10),
    "V_10M": dict(parameterCategory=2, parameterNumber=3, **H10),
    "VMAX_10M": dict(productDefinitionTemplateNumber=8, parameterCategory=2, parameterNumber=22,
                     typeOfStatisticalProcessing=2, **H10),
    "TOT_PREC": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=52,
                     typeOfStatisticalProcessing=1, **SFC),
    "SNOW_GSP": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=56,
                     typeOfStatisticalProcessing=1, **SFC),
    "SNOW_CON": dict(productDefinitionTemplateNumber=8, parameterCategory=1, parameterNumber=55,
                     typeOfStatisticalProcessing=1, **SFC),
    "ASWDIR_S": dict(productDefinitionTemplateNumber=8, parameterCategory=4, parameterNumber=198,
                     typeOfStatisticalProcessing=0, **SFC),
    "ASWDIFD_S": dict(productDefinitionTemplateNumber=8, parameterCategory=4,
                      parameterNumber=199, typeOfStatisticalProcessing=0, **SFC),
    "CLCT": dict(parameterCategory=6, parameterNumber=1, **SFC),
    # Cloud cover of the layer from the ground (second surface) up to 800 hPa (first).
    "CLCL": dict(parameterCategory=6, parameterNumber=22, typeOfFirstFixedSurface=100,
                 scaleFactorOfFirstFixedSurface=0, scaledValueOfFirstFixedSurface=80000,
                 typeOfSecondFixedSurface=1, scaleFactorOfSecondFixedSurface=0,
                 scaledValueOfSecondFixedSurface=0),
    "ASOB_S": dict(productDefinitionTemplateNumber=8, parameterCategory=4, parameterNumber=9,
                   typeOfStatisticalProcessing=0, **SFC),
    # On the generalized vertical height coordinate (150), see Encoder._model_level.
    "HHL": dict(parameterCategory=3, parameterNumber=6),
    "VIS": dict(parameterCategory=19, parameterNumber=0, **SFC),
    "CAPE_ML": dict(parameterCategory=7, parameterNumber=6, typeOfFirstFixedSurface=192),
    # Cell centres of the native grids (degrees), time-invariant.
    "CLAT": dict(parameterCategory=191, parameterNumber=1, **SFC),
    "CLON": dict(parameterCategory=191, parameterNumber=2, **SFC),
    "HSURF": dict(parameterCategory=3, parameterNumber=6, typeOfFirstFixedSurface=1,
                  typeOfSecondFixedSurface=101),
    "T": dict(parameterCategory=0, parameterNumber=0),
    "U": dict(parameterCategory=2, parameterNumber=2),
    "V": dict(parameterCategory=2, parameterNumber=3),
    "FI": dict(parameterCategory=3, parameterNumber=4),
}


def _parameter(h: int, product: Product) -> None:
    set_parameter(h, dict(_DWD_KEYS[product.param]))


def _quantity(product: Product):
    """The canonical quantity a product encodes."""
    table = _DWD_MODEL_LEVEL_QUANTITY if product.type_of_level in MODEL_LEVEL_TYPES else _DWD_QUANTITY
    return quantity(product, table[product.param])


def vertical_grid(model: ModelSpec) -> tuple[int, int, str] | None:
    """The vertical-grid header of ``model``'s model-level fields: ``nlev`` (number of half
    levels of the whole column), ``numberOfVGridUsed`` (4: ICON's height-based SLEVE
    coordinate, ``ivctype`` 2, as ICON writes it) and ``uuidOfVGrid`` (a fixed hash of the
    model id here; DWD's is the UUID of its HHL field, which a reader pairs the model-level
    fields with)."""
    if model.id not in LEVEL_COUNTS:
        return None
    uuid = hashlib.md5(f"pointcast-sample {model.id} vertical grid".encode()).hexdigest()
    return LEVEL_COUNTS[model.id] + 1, 4, uuid


def model_level_minutes(main: list[int]) -> set[int]:
    """The steps (minutes) at which the model-level wind is written: every step of the run,
    as DWD publishes it (see MODEL_LEVEL_HOURS for a cap)."""
    if MODEL_LEVEL_HOURS is None:
        return set(main)
    return {m for m in main if m <= MODEL_LEVEL_HOURS * 60}


def _icon_messages(run: RunRef, model: ModelSpec, weather: Weather, enc: Encoder,
                   prods: list[Product], fine: list[int]):
    """Yield (product, minute, main step, message) of an ICON run in step order, as DWD
    publishes them: constants at step 0 only, model levels at ``model_level_minutes``, interval
    fields once their interval has begun, ``fine`` quarter hours for the fine products."""
    levels = tuple(sorted({lv for r in model.fields if r.typeOfLevel == "isobaricInhPa"
                           for lv in r.levels or ()}, reverse=True))
    main = [int(s.total_seconds() // 60) for s in run.steps]
    ml_minutes = model_level_minutes(main)
    for snap in integrate(weather, run.init, main, fine, (), levels, gust_window=60,
                          model_level_min=ml_minutes):
        minute = snap.minute
        for p in prods:
            proc = p.processing
            if not snap.main and not p.fine:
                continue
            if p.type_of_level == "generalVerticalLayer" and minute not in ml_minutes:
                continue
            if proc is Processing.CONSTANT and minute != 0:
                continue
            start = 0
            if proc is Processing.INTERVAL:
                if snap.interval_start is None:
                    continue
                start = snap.interval_start
            values = to_raw(snap.q[_quantity(p)], p)
            # DWD gives every step in minutes (ICON-EU's hourly steps too).
            yield p, minute, snap.main, enc.message(p, values, end=minute, start=start, minutes=True)


def _icon_encoder(run: RunRef, model: ModelSpec, grid, packing: str) -> Encoder:
    return Encoder(grid, run.init, centre="edzw", packing=packing, parameter=_parameter,
                   process_id=2 if model.id == "icon-eu" else None, vertical=vertical_grid(model))


def _fine_minutes(run: RunRef, model: ModelSpec) -> list[int]:
    """The model's quarter hours up to the run's last step."""
    last = max(int(s.total_seconds() // 60) for s in run.steps)
    return [m for m in (int(s.total_seconds() // 60) for s in model.fine_steps) if m <= last]


def write_legacy_files(run: RunRef, model: ModelSpec, grid: SampleGrid, weather: Weather,
                       writer: Writer) -> None:
    """DWD's legacy tree on the regular grid: one bz2 file per parameter, step and level, the
    quarter hours of a 15-minute field in the file of the hour they end in."""
    init = run.init
    enc = _icon_encoder(run, model, grid, LEGACY_PACKING)
    hours_written = {int(s.total_seconds() // 60) for s in run.steps}
    # The 15-minute steps that belong to the hour files written: (SSS-1 h, SSS h].
    fine = [m for m in _fine_minutes(run, model) if -(-m // 60) * 60 in hours_written]

    def path(p: Product, step_h: int | None) -> str:
        return legacy_path(model.id, p.param, init, step_h, p.type_of_level, p.level)

    pending: dict[Product, list[bytes]] = {}  # 15-minute messages waiting for their hour file
    try:
        for p, minute, main_step, msg in _icon_messages(run, model, weather, enc, products_of(model, weather.run_levels), fine):
            if p.processing is Processing.CONSTANT:
                writer.write(path(p, None), msg, compress=True)
                continue
            pending.setdefault(p, []).append(msg)
            if main_step:
                writer.write(path(p, minute // 60), b"".join(pending.pop(p)), compress=True)
        if pending:
            raise RuntimeError(f"{model.id}: 15-minute messages after the last step")
    finally:
        enc.close()


def write_v1_files(run: RunRef, model: ModelSpec, grid: CellGrid, weather: Weather,
                   writer: Writer) -> None:
    """DWD's v1 tree on the native-style grid: one uncompressed GRIB2 message per file at
    ``v1/`` + ``icon.v1_path`` (ICON-D2's quarter hours in files of their own), the cell
    centres as CLAT/CLON and the constants (HSURF, HHL) at step 0."""
    init = run.init
    prods = [p for p in products_of(model, weather.run_levels) if p.param not in NOT_IN_V1]
    enc = _icon_encoder(run, model, grid, V1_PACKING)

    def path(p: Product, minute: int) -> str:
        return "v1/" + v1_path(model.id, p.param, init, minute, p.type_of_level, p.level)

    try:
        for param, short in CELL_CENTRES.items():
            p = Product(short, param, "surface", None, ())
            values = grid.lats if param == "CLAT" else grid.lons
            writer.write(path(p, 0), enc.message(p, values, end=0, minutes=True,
                                                 bits=CELL_CENTRE_BITS))
        for p, minute, _, msg in _icon_messages(run, model, weather, enc, prods, _fine_minutes(run, model)):
            writer.write(path(p, minute), msg)
    finally:
        enc.close()

