"""Windpack (4.3) at a hub height between two precomputed ones: the u/v series of the two
height files and their interpolation (docs/api.md, "Precomputed heights and interpolation")."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from ..contract import WIND_DATA
from .grammar import HubHeight
from .splice import WindFile

WIND_UNIT = WIND_DATA.units


@dataclass(frozen=True)
class WindSeries:
    """The numbers of one height file, for interpolation."""

    basetime: str
    updated_time: str
    freq: str
    datetimes: list[str]
    u: np.ndarray
    v: np.ndarray
    digest: bytes

    @classmethod
    def from_file(cls, wind: WindFile) -> WindSeries:
        obj = json.loads(wind.json_without_coordinates())
        data = obj["data"]
        times = [entry["datetime"] for entry in data]
        if not all(isinstance(t, str) for t in times):
            raise ValueError("a datetime is not a string")
        columns = []
        for name in ("u_windspd", "v_windspd"):
            values = [entry[name] for entry in data]
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
                raise ValueError(f"{name} holds a non-number")
            column = np.asarray(values, dtype=np.float64)
            if not np.isfinite(column).all():
                raise ValueError(f"{name} is not finite")
            column.setflags(write=False)
            columns.append(column)
        header = [obj[k] for k in ("basetime", "updated_time", "freq")]
        if not all(isinstance(x, str) for x in header):
            raise ValueError("basetime, updated_time and freq must be strings")
        return cls(*header, times, columns[0], columns[1], wind.digest)

    @property
    def size(self) -> int:
        return self.u.nbytes + self.v.nbytes + sum(len(t) + 56 for t in self.datetimes)


def _round(values: np.ndarray, decimals: int) -> list[float]:
    return (np.round(values, decimals) + 0.0).tolist()  # + 0.0: no -0.0


def interpolate_wind(lower: WindSeries, upper: WindSeries, z1: float, z2: float, height: HubHeight) -> bytes:
    """The 2.2 object at a height between two precomputed ones, without its coordinates
    (``b',"basetime": ... }'``, to splice behind them).

    u and v are each linear in ln(z) between z1 and z2 (exact for the neutral logarithmic
    profile); speed and direction follow from the interpolated components, the direction
    rounded as the precomputed height files round it (``products.base.published_direction``)."""
    from ..products.base import published_direction  # imported on first use: it loads pandas and xarray

    if lower.datetimes != upper.datetimes or (lower.basetime, lower.freq) != (upper.basetime, upper.freq):
        raise ValueError(f"the {z1:g} m and {z2:g} m files do not share their time steps")
    w = math.log(height.metres / z1) / math.log(z2 / z1)
    u = lower.u + (upper.u - lower.u) * w
    v = lower.v + (upper.v - lower.v) * w
    speed = np.hypot(u, v)
    direction = published_direction(u, v)  # calm: exactly 0
    values = {"windspd": speed, "windir": direction, "u_windspd": u, "v_windspd": v}  # by contract ref
    columns = [lower.datetimes, *(_round(values[e.ref], e.decimals) for e in WIND_DATA.elements[1:])]
    data = [dict(zip(WIND_DATA.names, row)) for row in zip(*columns)]
    obj = {
        "basetime": lower.basetime,
        "updated_time": lower.updated_time,
        "freq": lower.freq,
        "hub_height": height.text,
        "unit": WIND_UNIT,
        "data": data,
    }
    return b"," + json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()[1:]
