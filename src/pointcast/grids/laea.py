"""The EPSG:3035 (ETRS89-LAEA Europe) grid family: square cells of the equal-area plane, keyed
``"E{i}N{j}"``, and the transforms between degrees and EPSG:3035 metres.
"""

from __future__ import annotations

import math
import re
import threading

import numpy as np

from .base import Coverage, ProductGrid, _as_float_arrays, _valid_latlon

# EPSG:3035 transformers: created once per process, on first use.
# pyproj Transformers keep one PROJ object per thread internally, so sharing them is safe.

_transformer_lock = threading.Lock()
_fwd = None  # EPSG:4326 -> EPSG:3035, always_xy (lon, lat) -> (x, y)
_inv = None  # EPSG:3035 -> EPSG:4326, always_xy (x, y) -> (lon, lat)


def _transformers():
    global _fwd, _inv
    if _fwd is None:
        with _transformer_lock:
            if _fwd is None:
                from pyproj import Transformer

                inv = Transformer.from_crs("EPSG:3035", "EPSG:4326", always_xy=True)
                fwd = Transformer.from_crs("EPSG:4326", "EPSG:3035", always_xy=True)
                _inv = inv
                _fwd = fwd
    return _fwd, _inv


def lonlat_to_3035(lon, lat):
    """(lon, lat) in degrees -> (x, y) in EPSG:3035 metres; scalars or arrays."""
    fwd, _ = _transformers()
    return fwd.transform(lon, lat)


def laea_to_lonlat(x, y):
    """(x, y) in EPSG:3035 metres -> (lon, lat) in degrees; scalars or arrays."""
    _, inv = _transformers()
    return inv.transform(x, y)


class LaeaGrid(ProductGrid):
    """Square cells of EPSG:3035 (ETRS89-LAEA), aligned to multiples of ``cell_m`` metres.

    Key ``"E{i}N{j}"`` with ``i = floor(x / cell_m)``, ``j = floor(y / cell_m)``.
    """

    crs = "EPSG:3035"
    _KEY = re.compile(r"E(-?\d+)N(-?\d+)")

    def __init__(self, name: str, cell_m: float, coverage: Coverage) -> None:
        self.name = name
        self.cell_m = float(cell_m)
        self.coverage = coverage
        self.description = f"{cell_m / 1000:g} km cells of EPSG:3035 (ETRS89-LAEA), key E<i>N<j>"

    def cell_index(self, lat: float, lon: float) -> tuple[int, int]:
        lat = float(lat)
        lon = float(lon)
        if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
            raise ValueError(f"invalid coordinates lat={lat!r} lon={lon!r}")
        fwd, _ = _transformers()
        x, y = fwd.transform(lon, lat)
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError(f"lat={lat!r} lon={lon!r} cannot be projected to {self.crs}")
        return math.floor(x / self.cell_m), math.floor(y / self.cell_m)

    def cell_key(self, lat: float, lon: float) -> str:
        i, j = self.cell_index(lat, lon)
        return f"E{i}N{j}"

    def cell_indices(self, lats, lons) -> tuple[np.ndarray, np.ndarray]:
        lat, lon = _as_float_arrays(lats, lons)
        if not _valid_latlon(lat, lon).all():
            raise ValueError("invalid coordinates (lat outside -90..90, lon outside -180..180, or not finite)")
        x, y = lonlat_to_3035(lon, lat)
        x = np.asarray(x, float)
        y = np.asarray(y, float)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            raise ValueError(f"coordinates cannot be projected to {self.crs}")
        return np.floor(x / self.cell_m).astype(np.int64), np.floor(y / self.cell_m).astype(np.int64)

    def cell_keys(self, lats, lons) -> np.ndarray:
        i, j = self.cell_indices(lats, lons)
        keys = [f"E{a}N{b}" for a, b in zip(i.ravel().tolist(), j.ravel().tolist(), strict=True)]
        return np.array(keys, dtype=str).reshape(i.shape)

    def parse_key(self, key: str) -> tuple[int, int]:
        m = self._KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None:
            raise ValueError(f"invalid cell key {key!r} for grid {self.name} (expected E<i>N<j>)")
        return int(m.group(1)), int(m.group(2))

    def cell_centre(self, key: str) -> tuple[float, float]:
        i, j = self.parse_key(key)
        _, inv = _transformers()
        lon, lat = inv.transform((i + 0.5) * self.cell_m, (j + 0.5) * self.cell_m)
        return float(lat), float(lon)
