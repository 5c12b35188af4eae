"""The validation gate: a run is published only when every product passes.

Checks: every configured point and freq has its file; the archive holds the full horizon for
every point; no NaN; every element inside its valid range (CF valid_min/valid_max); and the
products agree where they overlap (`AGREEMENT`: the short range equals the medium range,
and windpack at 100 m equals the 100 m wind of the short range, since they share one blend).
"""

from __future__ import annotations

import numpy as np

from .config import Config
from .products import PRODUCTS
from .products.base import ProductOutput


def validate(outputs: dict[str, ProductOutput], cfg: Config) -> dict:
    """Return ``{"ok": bool, "errors": [...], "products": {id: facts}}``."""
    errors: list[str] = []
    facts: dict[str, dict] = {}
    for pid, out in outputs.items():
        pc = cfg.products[pid]
        ds = out.archive
        missing = [f for f in PRODUCTS[pid].expected_files(pc) if f not in out.files]
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
                first = dict(zip(var.dims, np.argwhere(nan)[0]))
                where = ", ".join(f"{d} {ds[d].values[i]}" for d, i in first.items() if d != "init_time")
                errors.append(f"{pid}: {name} has {int(nan.sum())} NaN (first at {where})")
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


# Products that must agree where they overlap: (product, variable, selection) pairs.
AGREEMENT = (
    (("eu-short", "temp_2m", {}), ("eu-medium", "temp_2m", {})),
    (("eu-short", "windspd_100m", {}), ("eu-wind", "windspd", {"height": 100.0})),
)


def _consistency(outputs: dict[str, ProductOutput]) -> list[str]:
    errors = []
    for (pa, va, sa), (pb, vb, sb) in AGREEMENT:
        if not {pa, pb} <= outputs.keys():
            continue
        a_ds, b_ds = outputs[pa].archive, outputs[pb].archive
        points = sorted(set(map(str, a_ds.point.values)) & set(map(str, b_ds.point.values)))
        if a_ds.init_time.values[0] != b_ds.init_time.values[0] or not points:
            continue
        lead = np.intersect1d(a_ds.lead_time.values, b_ds.lead_time.values)
        a = a_ds[va].sel(point=points, lead_time=lead, **sa).values
        b = b_ds[vb].sel(point=points, lead_time=lead, **sb).values
        if not np.allclose(a, b, atol=0.011, equal_nan=True):
            errors.append(f"{pa} {va} and {pb} {vb} disagree by up to {np.nanmax(np.abs(a - b)):.3f}")
    return errors
