"""What every product hands the publish stage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import numpy as np
import xarray as xr

from ..config import ProductConfig


@dataclass
class ProductOutput:
    files: dict[str, bytes]  # relative path under json/ -> bytes
    archive: xr.Dataset  # dims (init_time, point, lead_time[, height])
    checks: dict = field(default_factory=dict)  # product-specific validation facts


@dataclass(frozen=True)
class RunContext:
    basetime: datetime  # model run time of the product's first model
    updated: datetime  # publication time
    next_update: datetime  # when the next run is expected
    models: dict  # model id -> {"init", "source", "synthetic"}


class Product(Protocol):
    id: str

    def heights(self, cfg: ProductConfig) -> list[float]: ...

    def expected_files(self, cfg: ProductConfig) -> list[str]: ...

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext) -> ProductOutput: ...


def iso(t) -> str:
    """A UTC time as ISO 8601 with its offset, to the second."""
    if isinstance(t, datetime):
        return t.strftime("%Y-%m-%dT%H:%M:%S+00:00")
    return np.datetime_as_string(np.datetime64(t, "s"), unit="s") + "+00:00"


FREQ_STEPS = {"1H": np.timedelta64(60, "m"), "30min": np.timedelta64(30, "m"),
              "15min": np.timedelta64(15, "m")}


def freq_series(series: xr.Dataset, cfg: ProductConfig, ctx: RunContext):
    """Yield (freq, step, series aggregated to that step over the horizon), the finest last."""
    from ..interp import aggregate

    start = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
    for freq in sorted(cfg.freqs, key=lambda f: -FREQ_STEPS[f]):
        step = FREQ_STEPS[freq]
        yield freq, step, aggregate(series, start, step, int(np.timedelta64(cfg.horizon_hours, "h") / step))


def published_direction(u, v):
    """Wind direction (from, degrees) as published: one decimal, in [0, 360) (359.97 -> 0.0)."""
    from .. import physics

    return np.round(physics.wind_direction(u, v), 1) % 360.0


def number(value: float, decimals: int | None) -> float | int | None:
    """A JSON number rounded to the element's precision; None (null) for a gap, which the
    validation gate rejects before anything is published."""
    if not np.isfinite(value):
        return None
    return int(value) if decimals is None else round(float(value), decimals) + 0.0


def dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def render_index(product_id: str, path: str, cfg: ProductConfig, ctx: RunContext,
                 point_extra=lambda p: {}, **extra) -> bytes:
    """`index.json` of a product: its points with their grid cells, and the run's times."""
    from ..grids import grid_for

    grid = grid_for(product_id)
    return dumps({
        "product": product_id, "path": path, "grid": grid.name,
        "basetime": iso(ctx.basetime), "updated_time": iso(ctx.updated),
        "next_update": iso(ctx.next_update), "freqs": list(cfg.freqs), **extra,
        "points": [{"id": p.id, "name": p.name, "lat": p.lat, "lon": p.lon,
                    "cell": grid.cell_key(p.lat, p.lon), "elevation": p.elevation,
                    "hub_heights": list(p.hub_heights), **point_extra(p)} for p in cfg.points],
    })


def archive_frame(product_id: str, cfg: ProductConfig, ctx: RunContext, times: np.ndarray,
                  step: np.timedelta64, **coords) -> xr.Dataset:
    """The archive dataset's coordinates and CF/global attributes, before its variables."""
    init = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
    out = xr.Dataset(coords={
        "init_time": ("init_time", [init]),
        "point": ("point", [p.id for p in cfg.points]),
        "lead_time": ("lead_time", (times - init).astype("timedelta64[ns]")),
        **coords,
        "latitude": ("point", [p.lat for p in cfg.points]),
        "longitude": ("point", [p.lon for p in cfg.points]),
    })
    out["init_time"].attrs.update(long_name="model run time (basetime)", standard_name="forecast_reference_time")
    out["lead_time"].attrs.update(long_name="time since init_time", standard_name="forecast_period")
    out["latitude"].attrs.update(units="degrees_north", standard_name="latitude")
    out["longitude"].attrs.update(units="degrees_east", standard_name="longitude")
    out.attrs.update(
        title=f"pointcast {product_id}", Conventions="CF-1.10", product=product_id,
        time_step=f"{int(step / np.timedelta64(1, 'm'))} min",
        interval_convention="interval elements describe [time, time + time_step)",
        models=dumps(ctx.models).decode(),
        synthetic=int(any(m.get("synthetic") for m in ctx.models.values())),
    )
    if out.attrs["synthetic"]:
        out.attrs["comment"] = "SYNTHETIC DATA from the embedded sample source, not a real forecast"
    return out
