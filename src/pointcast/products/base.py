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

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext) -> ProductOutput: ...


def iso(t) -> str:
    """A UTC time as ISO 8601 with its offset, to the second."""
    if isinstance(t, datetime):
        return t.strftime("%Y-%m-%dT%H:%M:%S+00:00")
    return np.datetime_as_string(np.datetime64(t, "s"), unit="s") + "+00:00"


def dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
