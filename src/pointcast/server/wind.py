"""Windpack (short-range/windpack) from a point's ladder object (``<freq>/<point id>.json``, products/eu_wind.py):
the answer at one of its heights, or between two of them by interpolation (docs/api.md,
"Precomputed heights and interpolation")."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from ..contract import WIND_DATA
from .grammar import HubHeight

WIND_UNIT = WIND_DATA.units


@dataclass(frozen=True)
class WindLadder:
    """The numbers of one ladder object: every element (but datetime) as (height, time)."""

    basetime: str
    updated_time: str
    freq: str
    heights: tuple[float, ...]
    datetimes: list[str]
    columns: dict[str, np.ndarray]  # by contract ref
    digest: bytes

    @classmethod
    def from_bytes(cls, data: bytes, digest: bytes) -> WindLadder:
        obj = json.loads(data)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        basetime, updated, freq = (obj.get(k) for k in ("basetime", "updated_time", "freq"))
        if not (isinstance(basetime, str) and isinstance(updated, str) and isinstance(freq, str)):
            raise ValueError("basetime, updated_time and freq must be strings")
        times = obj.get("datetime")
        if not isinstance(times, list) or not all(isinstance(t, str) for t in times):
            raise ValueError("datetime is not an array of strings")
        heights = obj.get("heights")
        if (not isinstance(heights, list) or not heights
                or not all(isinstance(h, (int, float)) and not isinstance(h, bool) for h in heights)):
            raise ValueError("heights is not an array of numbers")
        columns = {}
        for e in WIND_DATA.elements[1:]:
            rows = obj.get(e.name)
            if (not isinstance(rows, list) or len(rows) != len(heights)
                    or not all(isinstance(r, list) and len(r) == len(times) for r in rows)):
                raise ValueError(f"{e.name} is not one array of {len(times)} per height")
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for r in rows for x in r):
                raise ValueError(f"{e.name} holds a non-number")
            column = np.asarray(rows, dtype=np.float64).reshape(len(heights), len(times))
            if not np.isfinite(column).all():
                raise ValueError(f"{e.name} is not finite")
            column.setflags(write=False)
            columns[e.ref] = column
        return cls(basetime, updated, freq, tuple(float(h) for h in heights), times, columns, digest)

    @property
    def size(self) -> int:
        return sum(c.nbytes for c in self.columns.values()) + sum(len(t) + 56 for t in self.datetimes)

    def row(self, metres: float) -> int:
        """The row of a height of the ladder object; ValueError when it has none."""
        try:
            return self.heights.index(metres)
        except ValueError:
            raise ValueError(f"the ladder object has no {metres:g} m row") from None


def _round(values: np.ndarray, decimals: int | None) -> list[float]:
    if decimals is None:  # the contract gives every number its decimals
        raise ValueError("a wind number without its published decimals")
    return (np.round(values, decimals) + 0.0).tolist()  # + 0.0: no -0.0


def log_profile(lower: np.ndarray, upper: np.ndarray, z: float, z1: float, z2: float) -> np.ndarray:
    """A wind quantity at height ``z`` between its values at the heights z1 < z2 around it:
    linear in ln(z), exact for the neutral logarithmic profile u(z) = (u*/k) ln(z/z0), whose
    components (at a constant direction, its speed too) are linear in ln(z) (docs/api.md,
    "Precomputed heights and interpolation")."""
    w = math.log(z / z1) / math.log(z2 / z1)
    return lower + (upper - lower) * w


def wind_at(ladder: WindLadder, height: HubHeight, z1: float, z2: float | None = None) -> bytes:
    """The 2.2 object at ``height`` without its coordinates (``b',"basetime": ... }'``, to
    splice behind them): the ladder's row z1 as published when ``z2`` is None, else between
    the rows z1 < z2.

    Between two heights u and v are each interpolated by `log_profile`; speed and direction
    follow from the interpolated components, the direction rounded as the precomputed heights
    round it (``products.base.published_direction``)."""
    lower = ladder.row(z1)
    if z2 is None:
        values = [ladder.columns[e.ref][lower].tolist() for e in WIND_DATA.elements[1:]]
    else:
        from ..products.base import published_direction  # imported on first use: it loads pandas and xarray

        upper = ladder.row(z2)
        u, v = (log_profile(ladder.columns[ref][lower], ladder.columns[ref][upper], height.metres, z1, z2)
                for ref in ("u_windspd", "v_windspd"))
        between = {"windspd": np.hypot(u, v), "windir": published_direction(u, v),  # calm: exactly 0
                   "u_windspd": u, "v_windspd": v}
        values = [_round(between[e.ref], e.decimals) for e in WIND_DATA.elements[1:]]
    data = [dict(zip(WIND_DATA.names, row, strict=True)) for row in zip(ladder.datetimes, *values, strict=True)]
    obj = {
        "basetime": ladder.basetime,
        "updated_time": ladder.updated_time,
        "freq": ladder.freq,
        "hub_height": height.text,
        "unit": WIND_UNIT,
        "data": data,
    }
    return b"," + json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()[1:]
