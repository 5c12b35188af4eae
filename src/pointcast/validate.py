"""The validation gate: a run is published only when every product passes.

Checks: every configured point and freq has its file; the archive holds the full horizon for
every point; no NaN; every element inside its valid range (CF valid_min/valid_max); and the
products agree where they overlap (the short range equals the medium range on their common
lead times, since both come from the same blend).
"""

from __future__ import annotations

import numpy as np

from .config import Config
from .products.base import ProductOutput


def validate(outputs: dict[str, ProductOutput], cfg: Config) -> dict:
    """Return ``{"ok": bool, "errors": [...], "products": {id: facts}}``."""
    errors: list[str] = []
    facts: dict[str, dict] = {}
    for pid, out in outputs.items():
        pc = cfg.products[pid]
        ds = out.archive
        missing = [f"{pid}/{freq}/{p.id}.json" for freq in pc.freqs for p in pc.points
                   if f"{pid}/{freq}/{p.id}.json" not in out.files]
        errors += [f"{pid}: missing file {m}" for m in missing[:10]]
        ids = set(map(str, ds.point.values))
        errors += [f"{pid}: point {p.id} missing from the archive" for p in pc.points if p.id not in ids]
        span = (ds.lead_time.values[-1] - ds.lead_time.values[0]
                + (ds.lead_time.values[1] - ds.lead_time.values[0]))
        if span < np.timedelta64(pc.horizon_hours, "h"):
            errors.append(f"{pid}: horizon {span / np.timedelta64(1, 'h'):.2f} h < {pc.horizon_hours} h")
        checked = 0
        for name, var in ds.data_vars.items():
            values = var.values
            nan = np.isnan(values) if values.dtype.kind == "f" else np.zeros(values.shape, bool)
            if nan.any():
                where = np.argwhere(nan)[0]
                point = str(ds.point.values[where[1]])
                lead = ds.lead_time.values[where[-1]] / np.timedelta64(1, "h") if var.ndim >= 3 else 0
                errors.append(f"{pid}: {name} has {int(nan.sum())} NaN (first at point {point}, "
                              f"lead {lead:g} h)")
            lo, hi = var.attrs.get("valid_min"), var.attrs.get("valid_max")
            if lo is not None and values.size:
                bad = (values < lo) | (values > hi)
                if bad.any():
                    errors.append(f"{pid}: {name} outside [{lo}, {hi}]: min {np.nanmin(values):.3f}, "
                                  f"max {np.nanmax(values):.3f}")
            checked += 1
        facts[pid] = {"points": len(ids), "lead_times": int(ds.sizes["lead_time"]),
                      "variables": checked, "files": len(out.files)}
    errors += _consistency(outputs)
    return {"ok": not errors, "errors": errors, "products": facts}


def _consistency(outputs: dict[str, ProductOutput]) -> list[str]:
    if not {"eu-short", "eu-medium"} <= outputs.keys():
        return []
    short, medium = outputs["eu-short"].archive, outputs["eu-medium"].archive
    common_points = sorted(set(map(str, short.point.values)) & set(map(str, medium.point.values)))
    if short.init_time.values[0] != medium.init_time.values[0] or not common_points:
        return []
    lead = np.intersect1d(short.lead_time.values, medium.lead_time.values)
    a = short.temp_2m.sel(point=common_points, lead_time=lead).values
    b = medium.temp_2m.sel(point=common_points, lead_time=lead).values
    if not np.allclose(a, b, atol=0.01, equal_nan=True):
        return [f"eu-short and eu-medium disagree on temp_2m by up to {np.nanmax(np.abs(a - b)):.2f} K"]
    return []
