"""The validation gate: a run is published only when every product passes.

Checks: every configured point and freq has its file; the archive holds the full horizon for
every point; no NaN but in an element whose inputs no model supplies there (the product's
``checks["degraded"]``: `build.input_gaps`); every element inside its valid range (CF valid_min/valid_max, which the
products take from the contract), from the facts each build slice found in its own rows of the
archive (`ArchiveFacts`: no process holds a product's whole archive); no JSON file has a null
value (from the files each slice wrote, `FileFacts`: nor does any process hold the names of a
run's million files), but for the quantile files, where null is the value of the times no
ensemble covers (`check_quantiles`); the JSON files parse, hold
exactly the contract's elements in its order, each of its type, inside its range or its
missing value (`check_entries`), have (for a `freq` file) one entry per step of the horizon
and daily (mrf) extremes that agree with the hourly (srf) temperatures of the same file
(checked in `PARSED_FILES` files spread over each product's paths); and the
products agree where they overlap (`AGREEMENT`: the short range equals the medium range over
its horizon, and the windpack at 10, 100 and 200 m equals the wind of the short range, since
they share one blend), on a sample of their points (`agreement_sample`). The report is the
run's ``validation.json`` (docs/contracts.md).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import orjson
import xarray as xr

from . import contract
from .config import Config
from .ensemble import QUANTILES
from .facts import ArchiveFacts, FileFacts, spread_paths
from .products import PRODUCTS, power
from .products.base import ProductOutput, is_quantile_file
from .products.eu_wind import ladder_answers
from .publish import POINT, StagedFiles


def archive_facts(ds: xr.Dataset) -> ArchiveFacts:
    """The `ArchiveFacts` of an archive in memory (a build slice's rows)."""
    facts = ArchiveFacts(points=[str(p) for p in ds.point.values])
    for name, var in ds.data_vars.items():
        values = var.values
        if not values.size:
            continue
        least, most = values.min(), values.max()
        if values.dtype.kind == "f" and (np.isnan(least) or np.isnan(most)):
            nan = np.isnan(values)
            first = dict(zip(var.dims, np.argwhere(nan)[0], strict=True))
            where = ", ".join(f"{d} {ds[d].values[i]}" for d, i in first.items() if d != "init_time")
            facts.nan[str(name)] = (int(nan.sum()), where)
            if nan.all():
                continue
            least, most = np.nanmin(values), np.nanmax(values)
        facts.least[str(name)], facts.most[str(name)] = float(least), float(most)
    return facts


def file_facts(files: Mapping[str, bytes], expected: list[str]) -> FileFacts:
    """The `FileFacts` of a product's ``files`` (a build slice's, or a whole product's held in
    memory), of which ``expected`` should all be there. The nulls are those the staging tree
    noted as the files passed (`publish.StagedFiles.with_null`), else found in the bytes; the
    quantile files' are none of them: null is their value where no ensemble covers
    (`check_quantiles`)."""
    rels = sorted(rel for rel in files if not rel.endswith("/index.json"))
    with_null = (sorted(set(files.with_null()).intersection(rels)) if isinstance(files, StagedFiles)
                 else [rel for rel in rels if b"null" in files[rel]])
    with_null = [rel for rel in with_null if not is_quantile_file(rel)]
    return FileFacts([f for f in expected if f not in files], with_null, spread_paths(rels))


def log_report(report: dict, log: logging.Logger | logging.LoggerAdapter) -> None:
    """Each error of ``report`` (`validate`) and its verdict, in the cycle's log."""
    for err in report["errors"]:
        log.error("validation: %s", err)
    log.info("validation %s: %s", "passed" if report["ok"] else "FAILED", report["products"])


def validate(outputs: dict[str, ProductOutput], cfg: Config) -> dict:
    """Return ``{"ok": bool, "errors": [...], "products": {id: facts}}``, and ``"power"``
    (its sites, lead times, variables and files) when the run has the sites' power. A product's
    archive and file facts are those its build slices found (`ProductOutput.facts`,
    `ProductOutput.file_facts`), else those of its archive, read whole, and of its files."""
    errors: list[str] = []
    facts: dict[str, dict] = {}
    extra: dict[str, dict] = {}
    for pid, out in outputs.items():
        if pid == power.ID:  # the sites' power, no product of the configuration (`products.power`)
            errors += power.check(out)
            extra[pid] = {"sites": int(out.archive.sizes["point"]), "lead_times": int(out.archive.sizes["lead_time"]),
                          "variables": len(out.archive.data_vars), "files": len(out.files)}
            continue
        pc = cfg.products[pid]
        ds = out.archive
        found = out.facts if out.facts is not None else archive_facts(ds)
        files = (out.file_facts if out.file_facts is not None
                 else file_facts(out.files, PRODUCTS[pid].expected_files(pc)))
        errors += [f"{pid}: missing file {m}" for m in files.missing[:10]]
        ids = set(found.points)
        errors += [f"{pid}: point {p.id} missing from the archive" for p in pc.points if p.id not in ids]
        span = (ds.lead_time.values[-1] - ds.lead_time.values[0]
                + (ds.lead_time.values[1] - ds.lead_time.values[0]))
        if span < np.timedelta64(pc.horizon_hours, "h"):
            errors.append(f"{pid}: horizon {span / np.timedelta64(1, 'h'):.2f} h < {pc.horizon_hours} h")
        degraded = out.checks.get("degraded", {})  # missing where no model supplies their inputs
        for name, var in ds.data_vars.items():
            # NaN by design where its attributes say (the quantiles beyond the ensembles)
            if name in found.nan and name not in degraded and "missing_where" not in var.attrs:
                count, where = found.nan[name]
                errors.append(f"{pid}: {name} has {count} NaN (first at {where})")
            lo, hi = var.attrs.get("valid_min"), var.attrs.get("valid_max")
            least, most = found.least.get(str(name)), found.most.get(str(name))
            if least is not None and most is not None and ((lo is not None and least < lo)
                                                           or (hi is not None and most > hi)):
                errors.append(f"{pid}: {name} outside [{lo}, {hi}]: min {least:.3f}, max {most:.3f}")
        errors += _files(pid, out.files, files, pc.horizon_hours)
        facts[pid] = {"points": len(ids), "lead_times": int(ds.sizes["lead_time"]),
                      "variables": len(ds.data_vars), "files": len(out.files)}
    errors += _consistency(outputs)
    return {"ok": not errors, "errors": errors, "products": facts, **extra}


def _files(pid: str, files: Mapping[str, bytes], found: FileFacts, horizon_hours: int) -> list[str]:
    """JSON files: no null in any; parse, full horizon and mrf extremes matching the srf hours
    in the files ``found`` spread over the paths (`FileFacts`), and in those with a null. One
    file at a time: a product's files may be read back from the staging tree
    (publish.StagedFiles)."""
    errors: list[str] = []
    for rel in sorted({*found.spread, *found.with_null}):
        data = files[rel]
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            errors.append(f"{pid}: {rel} is not valid JSON: {e}")
            continue
        if is_quantile_file(rel):
            errors += [f"{pid}: {rel}: {e}" for e in check_quantiles(pid, obj, horizon_hours)]
            continue
        answers = [obj]
        if isinstance(obj, dict) and "heights" in obj:  # a windpack ladder object: an answer per height
            try:
                answers = list(ladder_answers(obj).values())
            except (KeyError, TypeError, ValueError) as e:
                errors.append(f"{pid}: {rel} is not a ladder object: {e!r}")
                continue
        for answer in answers:
            errors += _answer(pid, rel, answer, b"null" in data, horizon_hours)
        if len(errors) > 20:
            return errors[:20] + [f"{pid}: more file errors not listed"]
    return errors


def _answer(pid: str, rel: str, obj: dict, null: bool, horizon_hours: int) -> list[str]:
    """A parsed answer of file ``rel``: nulls (walked only when its bytes hold ``null``),
    the contract's entries, the horizon's steps and the daily extremes."""
    errors = []
    series: dict[str, list] = {k: obj[k] for k in ("data", "srf", "mrf") if isinstance(obj.get(k), list)}
    for key, entries in series.items() if null else ():
        nulls = [(e.get("datetime") or e.get("date"), k) for e in entries for k, v in e.items()
                 if v is None]
        if nulls:
            errors.append(f"{pid}: {rel}: {len(nulls)} null value(s) in {key} "
                          f"(first: {nulls[0][1]} at {nulls[0][0]})")
    if not rel.startswith(f"{pid}/hourly/"):  # the global hourly files are no answers (docs/contracts.md)
        errors += [f"{pid}: {rel}: {e}" for e in check_entries(pid, obj)]
    step = contract.FREQ_MINUTES.get(obj.get("freq", ""))
    if step and "data" in series and len(series["data"]) != horizon_hours * 60 // step:
        errors.append(f"{pid}: {rel}: {len(series['data'])} entries, the {horizon_hours} h "
                      f"horizon at {obj['freq']} needs {horizon_hours * 60 // step}")
    if "srf" in series and "mrf" in series:
        errors += [f"{pid}: {rel}: {e}" for e in _daily_extremes(pid, series["srf"], series["mrf"])]
    return errors


def check_entries(pid: str, obj: dict) -> list[str]:
    """A parsed JSON file of product ``pid`` against the contract (`contract.product_tables`):
    its ``data`` (or ``srf`` and ``mrf``) entries hold exactly the contract's elements in its
    order, each value of the element's type and inside its range, codes or missing value. A
    null is reported by the caller, not here. The European ``unit`` object is the contract's."""
    errors = []
    tables = contract.product_tables(pid)
    if "data" in tables and obj.get("unit") != tables["data"].units:
        errors.append(f"unit {obj.get('unit')} is not the contract's {tables['data'].units}")
    for key, table in tables.items():
        entries = obj.get(key)
        if not isinstance(entries, list):
            errors.append(f"no {key} array")
            continue
        names = list(table.names)
        wrong = next((list(e) for e in entries if not isinstance(e, dict) or list(e) != names), None)
        if wrong is not None:
            errors.append(f"{key} entry keys {wrong} are not the contract's {names}")
            continue
        # Every entry has the table's keys in its order: its values, transposed, are the columns.
        columns = zip(*map(dict.values, entries), strict=True) if entries else ()  # none without entries
        for element, values in zip(table, columns, strict=False):
            problem = _bad_values(element, values)
            if problem:
                errors.append(f"{key} {element.name}: {problem}")
    return errors


def check_quantiles(pid: str, obj: dict, horizon_hours: int) -> list[str]:
    """A parsed quantile file (docs/api.md, "Extension: quantiles"): its keys in order, the
    quantiles and units of the contract (`contract.QUANTILE_DATA`), and per series one row
    per step of the horizon, each of a number per quantile, in range and not decreasing, or
    of nulls only (no ensemble covers the time: the one place a null is allowed)."""
    series = {e.name: (e, obj.get(e.name)) for e in contract.QUANTILE_DATA}
    head = ["product", "latitude", "longitude", "basetime", "updated_time", "start", "step_seconds", "quantiles",
            "unit", *series]
    if isinstance(obj.get(contract.QUANTILE_HEIGHTS), list) and isinstance(obj.get(contract.QUANTILE_WIND_AT), dict):
        head += [contract.QUANTILE_HEIGHTS, contract.QUANTILE_WIND_AT]
        at = obj[contract.QUANTILE_WIND_AT]
        if list(at) != [contract.height_name(h) for h in obj[contract.QUANTILE_HEIGHTS]]:
            return [f"{contract.QUANTILE_WIND_AT} keys {list(at)} are not its heights"]
        wind = contract.QUANTILE_DATA["wind_speed_quantiles"]
        series |= {f"{contract.QUANTILE_WIND_AT} {name}": (wind, rows) for name, rows in at.items()}
    if list(obj) != head:
        return [f"keys {list(obj)} are not {head}"]
    errors = []
    if obj["product"] != pid or obj["quantiles"] != list(QUANTILES):
        errors.append(f"product {obj['product']} or quantiles {obj['quantiles']} not {pid}, {list(QUANTILES)}")
    unit = {e.name: e.unit for e in contract.QUANTILE_DATA}
    if obj["unit"] != unit:
        errors.append(f"unit {obj['unit']} is not the contract's {unit}")
    step = obj["step_seconds"]
    steps = horizon_hours * 3600 // step if isinstance(step, int) and step > 0 and 3600 % step == 0 else None
    for name, (element, rows) in series.items():
        if (not isinstance(rows, list) or len(rows) != steps
                or not all(isinstance(r, list) and len(r) == len(QUANTILES) for r in rows)):
            errors.append(f"{name} is not {steps} rows of {len(QUANTILES)}")
            continue
        known = [r for r in rows if any(v is not None for v in r)]
        problem = _bad_values(element, tuple(v for r in known for v in r))
        if problem or any(None in r for r in known):
            errors.append(f"{name}: {problem or 'a row with a null among numbers'}")
        elif known and (np.diff(np.asarray(known, dtype=np.float64), axis=1) < 0).any():
            errors.append(f"{name}: decreasing quantiles in a row")
    return errors


_TYPES: dict[str, set[type]] = {"number": {int, float}, "integer": {int}, "string": {str}, "date-time": {str}}


def _bad_values(element: contract.Element, values: tuple) -> str | None:
    """What is wrong with an element's values (None: nothing; nulls are left to the caller)."""
    types = set(map(type, values))
    if type(None) in types:
        values = tuple(v for v in values if v is not None)
        types.discard(type(None))
    if not types <= _TYPES[element.type]:
        return f"values of type {sorted(t.__name__ for t in types - _TYPES[element.type])}, not {element.type}"
    if element.codes is not None:
        unknown = set(values) - set(element.codes) - {element.missing}
        return f"{sorted(unknown, key=str)[:5]} not among its codes" if unknown else None
    if element.valid is None or not values:
        return None
    v = np.asarray(values, dtype=np.float64)
    lo, hi = element.valid
    bad = ((v < lo) | (v > hi)) & (v != element.missing if element.missing is not None else True)
    if bad.any():
        return f"{v[bad][:5].tolist()} outside [{lo}, {hi}]" + (
            f" and not the missing value {element.missing}" if element.missing is not None else "")
    return None


def _daily_extremes(pid: str, srf: list[dict], mrf: list[dict]) -> list[str]:
    """maxtemp/mintemp of each local day the srf hours cover completely (24 hours)."""
    tables = contract.product_tables(pid)
    date, temp = tables["srf"]["date"].name, tables["srf"]["temp"].name
    day_date, high, low = (tables["mrf"][ref].name for ref in ("date", "maxtemp", "mintemp"))
    hours: dict[str, list[float]] = defaultdict(list)
    for e in srf:
        if isinstance(e.get(temp), (int, float)) and isinstance(e.get(date), str):
            hours[e[date][:10]].append(e[temp])
    errors = []
    for day in mrf:
        temps = hours.get(str(day.get(day_date))[:10], [])
        if len(temps) != 24 or not isinstance(day.get(high), (int, float)):
            continue
        if abs(day[high] - max(temps)) > 0.051 or abs(day[low] - min(temps)) > 0.051:
            errors.append(f"mrf {day[day_date][:10]} {high}/{low} {day[high]}/{day[low]} "
                          f"but its hours range {min(temps)}..{max(temps)}")
    return errors


# Products that must agree where they overlap: (product, variable, selection) pairs; a None
# variable compares every variable the two archives share.
_Side = tuple[str, str | None, dict[str, float]]  # (product, variable, selection)
AGREEMENT: tuple[tuple[_Side, _Side], ...] = (
    (("eu-short", None, {}), ("eu-medium", None, {})),
    *((("eu-short", contract.EU_DATA[f"{c}_{h}m"].name, {}),
       ("eu-wind", contract.WIND_DATA[c].name, {"height": float(h)}))
      for h in (10, 100, 200) for c in ("windspd", "u_windspd", "v_windspd")),
)


# Points whose series `AGREEMENT` compares, at most: a run's archives are read back from its
# staged stores (publish.stage), the chunk of a slice's points that holds each point sampled.
AGREEMENT_POINTS = 64


def agreement_sample(points: list[str]) -> list[str]:
    """The points of ``points`` (sorted ids) `AGREEMENT` compares: all of them when there are
    at most `AGREEMENT_POINTS`, else that many spread evenly over the sorted ids, the first
    and the last among them. Sorted ids are in no order of the points list, so the sample
    falls in most of the slices a run was built in, and a slice whose products disagree (one
    built from another slice's series) shows."""
    if len(points) <= AGREEMENT_POINTS:
        return points
    return [points[i] for i in np.unique(np.linspace(0, len(points) - 1, AGREEMENT_POINTS).round().astype(int))]


def _consistency(outputs: dict[str, ProductOutput]) -> list[str]:
    errors = []
    for (pa, va, sa), (pb, vb, sb) in AGREEMENT:
        if not {pa, pb} <= outputs.keys():
            continue
        a_ds, b_ds = outputs[pa].archive, outputs[pb].archive
        points = agreement_sample(sorted(set(map(str, a_ds.point.values)) & set(map(str, b_ds.point.values))))
        if a_ds.init_time.values[0] != b_ds.init_time.values[0] or not points:
            continue
        # The bias correction ([postprocess]) changes the 10 m wind of the products it corrects only.
        one_corrected = _corrected(a_ds) != _corrected(b_ds)
        lead = np.intersect1d(a_ds.lead_time.values, b_ds.lead_time.values)
        pairs = ([(v, v) for v in a_ds.data_vars if v in b_ds.data_vars] if va is None
                 else [(va, vb)])
        for na, nb in pairs:
            if na not in a_ds or nb not in b_ds or any(
                    k not in b_ds[nb].dims or v not in b_ds[k].values for k, v in sb.items()):
                continue
            if one_corrected and sb.get("height") == 10.0:
                continue
            a = _at_points(a_ds[na].sel({"lead_time": lead, **sa}), points)
            b = _at_points(b_ds[nb].sel({"lead_time": lead, **sb}), points)
            if not np.allclose(a, b, atol=0.011, equal_nan=True):
                errors.append(f"{pa} {na} and {pb} {nb} disagree by up to "
                              f"{np.nanmax(np.abs(a - b)):.3f} over their common lead times")
    return errors


READERS = 2  # chunks `_at_points` reads at once (decoding is numcodecs', outside the GIL)


def _at_points(var: xr.DataArray, points: list[str]) -> np.ndarray:
    """``var``'s values at ``points`` (in that order, as float64), read chunk of its store
    by chunk (``preferred_chunks`` along ``point``: a staged archive's slices). A lazily
    indexed Zarr array decodes every chunk one selection touches at once; the sample spreads
    over every slice, so read whole it held as many chunks as the run has slices: memory that
    grew with the points. `READERS` chunks are read at once."""
    positions = var.get_index(POINT).get_indexer(points)
    order = np.argsort(positions, kind="stable")
    step = var.encoding.get("preferred_chunks", {}).get(POINT, var.sizes[POINT])
    chunk_of = positions[order] // step
    groups = np.split(positions[order], np.flatnonzero(np.diff(chunk_of)) + 1)
    axis = var.get_axis_num(POINT)
    with ThreadPoolExecutor(READERS) as pool:
        read = np.concatenate(list(pool.map(lambda group: var.isel({POINT: group}).values.astype(np.float64),
                                            groups)), axis=axis)
    return np.take(read, np.argsort(order), axis=axis)


def _corrected(ds) -> bool:
    """Whether the archive holds bias-corrected elements (pointcast.postprocess)."""
    return any(name.endswith("_corrected") for name in ds.data_vars)
