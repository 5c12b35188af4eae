"""``pointcast inspect FILE...``: what a GRIB2, GRIB1 or NetCDF file holds, in canonical terms.

For every field of every GRIB message (each field of a multi-field GRIB2 message, such as
JMA's MSM files, with its ``field`` number): the canonical name the model tables give it
(``sources/``: the table of the model of the message's centre first, then the others; the
raw parameter when no table knows it), the unit (after the conversion decode applies, e.g.
IFS tcc in 0-1 to per cent; a field decode would refuse is reported as such), the level, the
run, the valid time or interval, how the value is processed over that interval
(instantaneous, accumulated, averaged, maximum, minimum; from the run start or over the last
step; ECMWF's GRIB1 accumulations as accumulated), and the grid. For NetCDF: each data variable with its
units, dimensions, time span, ``cell_methods`` and the name the catalogue gives its
``standard_name``. Whatever is odd (no table row, a level type ecCodes cannot name, a
message that does not decode, a grid pointcast cannot extract from) is reported in
``notes``; a file that cannot be read at all gets an ``error``. Nothing raises.
"""

from __future__ import annotations

import bz2
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import eccodes

from .catalogue import VARIABLES, variable
from .gribtable import GribField
from .ingest import fields_of, judge, matches
from .sources import MODELS
from .sources.base import ModelSpec

UTC = UTC
CENTRE_MODELS = {"ecmf": ("ifs",), "kwbc": ("gfs",), "rjtd": ("msm",),
                 "edzw": ("icon-eu", "icon-d2")}
# An ensemble member's message (it names its member) is read by the centre's ensemble first.
CENTRE_ENSEMBLES = {"ecmf": ("ens",), "kwbc": ("gefs",), "edzw": ("icon-eu-eps",)}
# WMO GRIB2 code table 4.6, type of ensemble forecast.
ENSEMBLE_TYPES = {0: "control (unperturbed high-resolution control forecast)",
                  1: "control (unperturbed low-resolution control forecast)",
                  2: "perturbed (negatively perturbed forecast)",
                  3: "perturbed (positively perturbed forecast)",
                  4: "multi-model forecast"}
STEP_WORDS = {"instant": "instantaneous", "accum": "accumulated", "avg": "average",
              "max": "maximum", "min": "minimum", "diff": "difference", "rms": "root mean square",
              "sd": "standard deviation"}


def inspect_files(paths: list[Path]) -> list[dict[str, Any]]:
    return [inspect_file(Path(p)) for p in paths]


def inspect_file(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"file": str(path)}
    try:
        data = path.read_bytes()
    except OSError as exc:
        return out | {"error": f"cannot read: {exc.strerror or exc}"}
    if data[:3] == b"BZh":
        try:
            data = bz2.decompress(data)
            out["compression"] = "bz2"
        except (OSError, ValueError) as exc:
            return out | {"error": f"not a valid bz2 file: {exc}"}
    if data[:3] == b"CDF" or data[:8] == b"\x89HDF\r\n\x1a\n":
        return out | _netcdf(path, data)
    start = data.find(b"GRIB", 0, 1 << 16)
    if start < 0:
        return out | {"error": "neither GRIB nor NetCDF (no GRIB or NetCDF signature)"}
    return out | _grib(data)


# ------------------------------------------------------------------------------------------
# GRIB
# ------------------------------------------------------------------------------------------


def _grib(data: bytes) -> dict[str, Any]:
    fields: list[dict[str, Any]] = []
    notes: list[str] = []
    pos = count = 0
    while True:
        start = data.find(b"GRIB", pos)
        if start < 0:
            break
        if start > pos and data[pos:start].strip(b"\0\n\r "):
            notes.append(f"{start - pos} bytes of something else before byte {start}")
        length = _declared_length(data, start)
        if length is None or start + length > len(data):
            notes.append(f"message at byte {start} is truncated (declares "
                         f"{length} bytes, {len(data) - start} left)")
            break
        count += 1
        parts = fields_of(data, start) or [data[start:start + length]]
        for k, raw in enumerate(parts, 1):
            where = {"message": count} | ({"field": k} if len(parts) > 1 else {})
            try:
                fields.append(where | _message(raw, start, length))
            except Exception as exc:  # ecCodes raises its own classes for broken messages
                fields.append(where | {"offset": start, "length": length,
                                       "notes": [f"does not decode: {exc}"]})
        pos = start + length
    edition = sorted({f["edition"] for f in fields if "edition" in f})
    out: dict[str, Any] = {"format": "GRIB" + "/".join(map(str, edition)) if edition else "GRIB",
                           "messages": count, "fields": fields}
    if notes:
        out["notes"] = notes
    return out


def _declared_length(data: bytes, at: int) -> int | None:
    if len(data) < at + 16:
        return None
    edition = data[at + 7]
    if edition == 2:
        return int.from_bytes(data[at + 8:at + 16], "big")
    if edition == 1:
        return int.from_bytes(data[at + 4:at + 7], "big")
    return None


def _get(h, key: str, ktype=None) -> Any:
    try:
        if not eccodes.codes_is_defined(h, key):
            return None
        return eccodes.codes_get(h, key, ktype) if ktype else eccodes.codes_get(h, key)
    except Exception:  # a key ecCodes cannot compute for this message
        return None


def _message(raw: bytes, offset: int, length: int) -> dict[str, Any]:
    h = eccodes.codes_new_from_message(raw)
    try:
        return _describe(h, offset, length)
    finally:
        eccodes.codes_release(h)


def _describe(h, offset: int, length: int) -> dict[str, Any]:
    notes: list[str] = []
    edition = int(_get(h, "edition"))
    centre = _get(h, "centre")
    short = _get(h, "shortName")
    param_id, grib_units = _get(h, "paramId"), _get(h, "units")
    step_type = _get(h, "stepType") or "instant"
    eccodes.codes_set(h, "stepUnits", "m")
    start_m, end_m = _get(h, "startStep", int), _get(h, "endStep", int)
    if edition == 1 and step_type == "instant" and _get(h, "stepTypeForConversion") == "accum":
        # ECMWF's GRIB1 accumulations (ssrd, tp ...) are written as forecasts at the step; the
        # parameter runs from the start (what ecCodes' GRIB1 -> GRIB2 conversion reads).
        step_type, start_m = "accum", 0
    tol = _get(h, "typeOfLevel")
    level = _get(h, "level", int)
    if edition == 2:
        raw_param = f"{_get(h, 'discipline')}/{_get(h, 'parameterCategory')}/{_get(h, 'parameterNumber')}"
    else:
        raw_param = f"{_get(h, 'table2Version')}/{_get(h, 'indicatorOfParameter')}"
    msg = _Msg(short, tol, level, step_type, edition, param_id, grib_units, raw_param)
    ensemble = _ensemble(h)
    model, rows = _rows_for(msg, centre, ensemble is not None)
    entry: dict[str, Any] = {"offset": offset, "length": length, "edition": edition,
                             "centre": centre}
    factor, refused = judge(rows[0], msg) if rows else (1.0, None)
    if refused:
        entry |= {"name": rows[0].var, "known": False, "table": model, "units": grib_units,
                  "refused": refused}
        notes.append(f"the {model} table's row for {rows[0].var} expects another encoding: "
                     "decode refuses this field")
    elif rows:
        row = rows[0]
        spec = variable(row.var)
        entry |= {"name": row.var, "known": True, "table": model, "long_name": spec.long_name,
                  "units": spec.units}
        if len(rows) > 1:
            entry["also"] = [r.var for r in rows[1:]]
        if row.scale * factor != 1.0 or row.offset != 0.0 or row.per_second:
            entry["conversion"] = _conversion(row, factor, grib_units)
    else:
        entry |= {"name": short if short not in (None, "unknown") else f"param {raw_param}",
                  "known": False, "units": _get(h, "units")}
        notes.append("no model table names this message" + (
            f" (ecCodes: shortName {short!r}, paramId {_get(h, 'paramId')})" if short else ""))
    entry |= {"shortName": short, "paramId": _get(h, "paramId"), "parameter": raw_param,
              "grib_name": _get(h, "name"), "grib_units": _get(h, "units")}
    entry["level"] = _level(h, tol, level, notes)
    entry |= _time(h, start_m, end_m, step_type, notes)
    entry["grid"] = _grid(h, notes)
    if ensemble is not None:
        entry["ensemble"] = ensemble
    if tol in (None, "unknown"):
        notes.append("typeOfLevel unknown to ecCodes (a local level type)")
    if notes:
        entry["notes"] = notes
    return entry


class _Msg:
    """The header fields ``ingest.matches`` and ``ingest.judge`` compare (decode's rules)."""

    def __init__(self, shortName, typeOfLevel, level, stepType, edition, paramId, units,
                 parameter):
        self.shortName, self.typeOfLevel, self.level = shortName, typeOfLevel, level
        self.stepType, self.edition = stepType, edition
        self.paramId, self.units, self.parameter = paramId, units, parameter


def _ensemble(h) -> dict[str, Any] | None:
    """The member of an ensemble product (templates 4.1, 4.11 ...): its number
    (``perturbationNumber``), its type (code table 4.6) and the ensemble's size; None for a
    message that names no member."""
    member = _get(h, "perturbationNumber", int)
    if member is None:
        return None
    kind = _get(h, "typeOfEnsembleForecast", int)
    return {"member": member, "type": kind,
            "type_name": ENSEMBLE_TYPES.get(kind, f"code {kind} (not in WMO table 4.6)")
            if kind is not None else None,
            "size": _get(h, "numberOfForecastsInEnsemble", int)}


def _rows_for(msg: _Msg, centre: str | None,
              member: bool = False) -> tuple[str | None, list[GribField]]:
    ensembles = CENTRE_ENSEMBLES.get(centre or "", ()) if member else ()
    order = [*ensembles, *CENTRE_MODELS.get(centre or "", ()), *MODELS]
    for mid in dict.fromkeys(order):
        model: ModelSpec = MODELS[mid]
        rows = [r for r in model.fields if matches(r, msg)]
        if rows:
            return mid, rows
    return None, []


def _conversion(row: GribField, factor: float, grib_units: str | None) -> str:
    parts = []
    scale = row.scale * factor
    if scale != 1.0 or row.offset != 0.0:
        parts.append(f"canonical = raw x {scale:g}" + (f" + {row.offset:g}" if row.offset else ""))
    if row.per_second:
        parts.append("divided by the interval's seconds (an amount becomes a mean flux)")
    return f"from {grib_units}: " + "; ".join(parts)


def _level(h, tol: str | None, level: int | None, notes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": tol, "value": level}
    if _get(h, "edition") == 2:
        first = _get(h, "typeOfFirstFixedSurface", int)
        scaled, factor = _get(h, "scaledValueOfFirstFixedSurface"), _get(h, "scaleFactorOfFirstFixedSurface")
        if first is not None:
            out["first_surface"] = first
        if isinstance(scaled, int) and isinstance(factor, int) and 0 < factor < 10 and scaled != 2147483647:
            exact = scaled / 10 ** factor
            if level is not None and exact != level:
                out["exact"] = exact
                notes.append(f"level {exact:g} (ecCodes rounds it to {level})")
        second = _get(h, "typeOfSecondFixedSurface", int)
        if second not in (None, 255):
            out["second_surface"] = second
    units = {"heightAboveGround": "m", "isobaricInhPa": "hPa", "depthBelowLandLayer": "m"}.get(tol or "")
    if units:
        out["units"] = units
    return out


def _time(h, start_m: int | None, end_m: int | None, step_type: str,
          notes: list[str]) -> dict[str, Any]:
    date, time_ = _get(h, "dataDate"), _get(h, "dataTime")
    out: dict[str, Any] = {}
    try:
        init = datetime(date // 10000, date // 100 % 100, date % 100, time_ // 100, time_ % 100,
                        tzinfo=UTC)
    except (TypeError, ValueError):
        notes.append(f"no valid reference time (dataDate {date}, dataTime {time_})")
        return out
    out["init"] = init.isoformat()
    if end_m is None:
        return out
    valid = init + timedelta(minutes=end_m)
    out["step"] = _duration(end_m)
    kind = STEP_WORDS.get(step_type, step_type)
    out["processing"] = kind
    if step_type == "instant" or start_m is None:
        out["valid"] = valid.isoformat()
        if step_type != "instant":
            notes.append(f"stepType {step_type!r} without a start step")
        return out
    out["interval"] = [(init + timedelta(minutes=start_m)).isoformat(), valid.isoformat()]
    since = "since the run start" if start_m == 0 else f"from step {_duration(start_m)}"
    out["how"] = f"{kind} over {_duration(end_m - start_m)}, {since}"
    if end_m == start_m:
        notes.append("zero-length interval (a constant field at the run start)")
    return out


def _duration(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    return f"{h}h" if not m else f"{h}h{m:02d}m"


def _grid(h, notes: list[str]) -> dict[str, Any]:
    gtype = _get(h, "gridType")
    out: dict[str, Any] = {"type": gtype, "points": _get(h, "numberOfDataPoints")}
    if gtype in ("regular_ll", "rotated_ll"):
        out |= {"ni": _get(h, "Ni"), "nj": _get(h, "Nj"),
                "lat_first": _get(h, "latitudeOfFirstGridPointInDegrees"),
                "lon_first": _get(h, "longitudeOfFirstGridPointInDegrees"),
                "lat_last": _get(h, "latitudeOfLastGridPointInDegrees"),
                "lon_last": _get(h, "longitudeOfLastGridPointInDegrees"),
                "dlat": _get(h, "jDirectionIncrementInDegrees"),
                "dlon": _get(h, "iDirectionIncrementInDegrees")}
    elif gtype == "unstructured_grid":
        out |= {"number_of_grid_used": _get(h, "numberOfGridUsed"),
                "number_of_grid_in_reference": _get(h, "numberOfGridInReference"),
                "uuid": _get(h, "uuidOfHGrid")}
        notes.append("unstructured grid: cell centres come from the model's CLAT/CLON or grid file")
    elif gtype in ("lambert", "polar_stereographic", "mercator", "lambert_azimuthal_equal_area"):
        out |= {"nx": _get(h, "Nx"), "ny": _get(h, "Ny"), "dx_m": _get(h, "DxInMetres"),
                "dy_m": _get(h, "DyInMetres")}
    else:
        notes.append(f"grid type {gtype!r}: described by its number of points only")
    if _get(h, "bitmapPresent"):
        out["bitmap"] = True
    out["packing"] = _get(h, "packingType")
    return out


# ------------------------------------------------------------------------------------------
# NetCDF
# ------------------------------------------------------------------------------------------

_BY_STANDARD_NAME = {v.standard_name: v.name for v in VARIABLES.values() if v.standard_name}
_CELL_WORDS = {"sum": "accumulated", "mean": "average", "maximum": "maximum",
               "minimum": "minimum", "point": "instantaneous"}


def _netcdf(path: Path, data: bytes) -> dict[str, Any]:
    import xarray as xr

    engine = "scipy" if data[:3] == b"CDF" else "netcdf4"
    try:
        ds = xr.open_dataset(path, engine=engine, decode_times=True)
    except Exception as exc:  # any reader error: report it
        return {"format": "NetCDF", "error": f"cannot open with {engine}: {exc}"}
    fields = []
    with ds:
        for name, da in ds.data_vars.items():
            try:
                fields.append(_nc_variable(str(name), da, ds))
            except Exception as exc:
                fields.append({"name": name, "known": False, "notes": [f"cannot describe: {exc}"]})
    fmt = "NetCDF3" if engine == "scipy" else "NetCDF4"
    return {"format": fmt, "fields": fields, "attrs": {k: str(v) for k, v in ds.attrs.items()}}


def _nc_variable(name: str, da, ds) -> dict[str, Any]:
    notes: list[str] = []
    std = da.attrs.get("standard_name")
    canonical = name if name in VARIABLES else _BY_STANDARD_NAME.get(std)
    entry: dict[str, Any] = {"variable": name, "name": canonical or name,
                             "known": canonical is not None,
                             "units": da.attrs.get("units"), "long_name": da.attrs.get("long_name"),
                             "standard_name": std, "dims": dict(zip(da.dims, da.shape, strict=True))}
    if canonical is None:
        notes.append("the catalogue has no variable of this name or standard_name")
    elif da.attrs.get("units") not in (None, variable(canonical).units):
        notes.append(f"units {da.attrs.get('units')!r}; the catalogue's are "
                     f"{variable(canonical).units!r}")
    for dim in da.dims:
        coord = ds[dim] if dim in ds.coords else None
        if coord is None or coord.size == 0:
            continue
        if coord.dtype.kind == "M":
            entry.setdefault("time", {})[dim] = [str(coord.values[0])[:19], str(coord.values[-1])[:19]]
        elif coord.dtype.kind in "fiu" and dim not in ("lat", "latitude", "lon", "longitude", "point"):
            entry.setdefault("levels", {})[dim] = [float(v) for v in coord.values[:20]]
    methods = da.attrs.get("cell_methods")
    if methods:
        words = [w for key, w in _CELL_WORDS.items() if f": {key}" in methods]
        entry["processing"] = words[0] if words else methods
        entry["cell_methods"] = methods
    grid: dict[str, Any] = {}
    for axis in ("lat", "latitude", "lon", "longitude"):
        if axis in ds.coords and ds[axis].size:
            values = ds[axis].values
            grid[axis] = [float(values.min()), float(values.max()), int(values.size)]
    if da.attrs.get("grid_mapping"):
        grid["grid_mapping"] = da.attrs["grid_mapping"]
    entry["grid"] = grid or None
    if notes:
        entry["notes"] = notes
    return entry


def dumps(report: list[dict[str, Any]]) -> str:
    return json.dumps(report, indent=2, default=str)
