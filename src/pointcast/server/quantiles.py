"""The quantile extension (``/V1/forecast/quantiles``, docs/api.md "Extension: quantiles") from a
point's quantile file (``<product>/quantiles/<point id>.json``, products.base.put_quantiles):
the file itself behind the requested coordinates, or, for the windpack with a ``hubheight``,
the wind speed quantiles at that height: a precomputed height's row as published, any other
between the two precomputed heights around it by the windpack's rule (`wind.log_profile`)."""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..contract import QUANTILE_DATA, QUANTILE_HEIGHTS, QUANTILE_WIND_AT, height_name
from .compress import Piece
from .grammar import HubHeight
from .splice import PointFile
from .wind import log_profile

_WIND = QUANTILE_DATA["wind_speed_quantiles"]


@dataclass(frozen=True)
class QuantileFile:
    """A quantile file ready to answer from: its bytes after the coordinates, and, for the
    windpack, its object (the rows at each precomputed height)."""

    point: PointFile  # the tail after "longitude" (``b',"basetime": ... }'``) and a digest
    obj: dict[str, Any]

    @classmethod
    def from_bytes(cls, data: bytes, key: tuple[str, ...]) -> QuantileFile:
        """ValueError when ``data`` is no quantile file (no object, no product, no rows)."""
        obj = json.loads(data)
        if not isinstance(obj, dict) or not isinstance(obj.get("product"), str):
            raise ValueError("not a quantile file")
        for e in QUANTILE_DATA:
            if not isinstance(obj.get(e.name), list):
                raise ValueError(f"{e.name} is not an array")
        if QUANTILE_HEIGHTS in obj:
            heights, at = obj[QUANTILE_HEIGHTS], obj.get(QUANTILE_WIND_AT)
            if (not isinstance(heights, list) or not isinstance(at, dict)
                    or not all(isinstance(h, (int, float)) and height_name(h) in at for h in heights)
                    or heights != sorted(heights)):
                raise ValueError(f"{QUANTILE_HEIGHTS} and {QUANTILE_WIND_AT} do not agree")
        return cls(PointFile.from_bytes(data, key=key), obj)

    @property
    def size(self) -> int:
        return 2 * len(self.point.tail)  # the bytes and, about as large, the parsed rows

    def splice(self, lat_json: bytes, lon_json: bytes) -> list[bytes]:
        """The file's object behind the requested coordinates."""
        return [b'{"product":', json.dumps(self.obj["product"]).encode(), b',"latitude":', lat_json,
                b',"longitude":', lon_json, self.point.tail]

    def at_height(self, height: HubHeight, key: tuple[str, ...]) -> tuple[Piece, bytes] | None:
        """The object without its coordinates (``b',"basetime": ... }'``) with ``hub_height``
        and the wind speed quantiles at ``height`` in place of every height's, and a digest of
        what it is made of; None when the file has no precomputed heights around it."""
        heights = [float(h) for h in self.obj.get(QUANTILE_HEIGHTS, ())]
        z = height.metres
        i = bisect_left(heights, z)
        at = self.obj[QUANTILE_WIND_AT] if heights else {}
        if i < len(heights) and heights[i] == z:
            rows = at[height_name(z)]
        elif 0 < i < len(heights):
            z1, z2 = heights[i - 1], heights[i]
            lower, upper = (np.asarray(at[height_name(h)], dtype=np.float64) for h in (z1, z2))  # null -> NaN
            between = np.round(log_profile(lower, upper, z, z1, z2), _WIND.decimals or 0) + 0.0  # + 0.0: no -0.0
            rows = [[None if np.isnan(v) else v for v in row] for row in between.tolist()]
        else:  # never extrapolate, never another height
            return None
        head = ("basetime", "updated_time", "start", "step_seconds", "quantiles")
        obj = {**{k: self.obj.get(k) for k in head}, "hub_height": height.text, "unit": self.obj.get("unit"),
               **{e.name: rows if e is _WIND else self.obj[e.name] for e in QUANTILE_DATA}}
        tail = b"," + json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()[1:]
        digest = hashlib.blake2b(b"\0".join([self.point.digest, repr(z).encode()]), digest_size=16).digest()
        return Piece(tail, key), digest
