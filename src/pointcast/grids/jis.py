"""The JIS X 0410 regional mesh: third-order cells (30" of latitude x 45" of longitude), keyed
by their 8-digit mesh code.
"""

from __future__ import annotations

import math
import re

import numpy as np

from .base import Coverage, ProductGrid, _as_float_arrays, _valid_latlon

_JIS_ROWS_PER_DEG = 120  # third-order mesh: 30" of latitude
_JIS_COLS_PER_DEG = 80  # third-order mesh: 45" of longitude
_JIS_LON0 = 100.0
_JIS_MAX_INDEX = 100 * 80  # first-order codes have two digits: 00..99
_JIS_TOLERANCE = 1e-9  # in cells (about 1 micrometre): decimal edges such as 35.675 stay on the edge
_JIS_KEY = re.compile(r"(\d{2})(\d{2})([0-7])([0-7])(\d)(\d)")


def _jis_indices(lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Third-order row/column counted from 0N, 100E; ValueError outside the mesh domain."""
    if not _valid_latlon(lat, lon).all():
        raise ValueError("invalid coordinates (lat outside -90..90, lon outside -180..180, or not finite)")
    row = np.floor(lat * _JIS_ROWS_PER_DEG + _JIS_TOLERANCE).astype(np.int64)
    col = np.floor((lon - _JIS_LON0) * _JIS_COLS_PER_DEG + _JIS_TOLERANCE).astype(np.int64)
    if ((row < 0) | (row >= _JIS_MAX_INDEX) | (col < 0) | (col >= _JIS_MAX_INDEX)).any():
        raise ValueError("coordinates outside the JIS X 0410 mesh domain (0..66.67N, 100..180E)")
    return row, col


def _jis_code(row: int, col: int, order: int = 3) -> str:
    p, q, r = row // 80, row % 80 // 10, row % 10
    u, v, w = col // 80, col % 80 // 10, col % 10
    code = f"{p:02d}{u:02d}"
    if order >= 2:
        code += f"{q}{v}"
    if order >= 3:
        code += f"{r}{w}"
    return code


def _jis_index(lat: float, lon: float) -> tuple[int, int]:
    """(row, column) of third-order cells counted from 0N, 100E."""
    lat = float(lat)
    lon = float(lon)
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        raise ValueError(f"invalid coordinates lat={lat!r} lon={lon!r}")
    row = math.floor(lat * _JIS_ROWS_PER_DEG + _JIS_TOLERANCE)
    col = math.floor((lon - _JIS_LON0) * _JIS_COLS_PER_DEG + _JIS_TOLERANCE)
    if not (0 <= row < _JIS_MAX_INDEX and 0 <= col < _JIS_MAX_INDEX):
        raise ValueError(
            f"lat={lat!r} lon={lon!r} is outside the JIS X 0410 mesh domain (0..66.67N, 100..180E)"
        )
    return row, col


def jis_mesh_code(lat: float, lon: float, order: int = 3) -> str:
    """JIS X 0410 mesh code of (lat, lon): 4 digits (order 1), 6 (order 2) or 8 (order 3).

    First order (1 degree of longitude x 40' of latitude): ``floor(lat * 1.5)`` and
    ``floor(lon - 100)``, two digits each; second order: the 8 x 8 subdivision (row digit then
    column digit, 0-7); third order: the 10 x 10 subdivision of that (0-9). A point on a cell
    edge belongs to the cell north and east of it (a cell holds its south and west edges).
    """
    if order not in (1, 2, 3):
        raise ValueError(f"order must be 1, 2 or 3, got {order!r}")
    return _jis_code(*_jis_index(lat, lon), order)


class JisMeshGrid(ProductGrid):
    """JIS X 0410 third-order ("standard") regional mesh: 30" of latitude x 45" of longitude.

    About 0.93 km north-south and 1.0-1.2 km east-west in Japan (1.14 km at 35N). The cell key
    is the 8-digit third-order mesh code (``jis_mesh_code``), e.g. Tokyo Station
    (35.681236N 139.767125E) lies in ``"53394611"``. The code is defined from 0N 100E to
    66.67N 200E; ``cell_key`` raises ValueError outside it (east of 180E is not a valid
    longitude here).
    """

    def __init__(self, name: str, coverage: Coverage) -> None:
        self.name = name
        self.coverage = coverage
        self.description = 'JIS X 0410 third-order mesh (30" x 45"), key: the 8-digit mesh code'

    def cell_index(self, lat: float, lon: float) -> tuple[int, int]:
        """(row, column) of third-order cells counted from 0N, 100E."""
        return _jis_index(lat, lon)

    def cell_key(self, lat: float, lon: float) -> str:
        return _jis_code(*self.cell_index(lat, lon))

    def cell_keys(self, lats, lons) -> np.ndarray:
        lat, lon = _as_float_arrays(lats, lons)
        row, col = _jis_indices(lat, lon)
        keys = [_jis_code(a, b) for a, b in zip(row.ravel().tolist(), col.ravel().tolist(), strict=True)]
        return np.array(keys, dtype=str).reshape(lat.shape)

    def parse_key(self, key: str) -> tuple[int, int]:
        """(row, column) of an 8-digit mesh code; ValueError for a malformed one."""
        m = _JIS_KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None:
            raise ValueError(
                f"invalid cell key {key!r} for grid {self.name} (expected an 8-digit JIS X 0410 "
                "third-order mesh code, second-order digits 0-7)"
            )
        p, u, q, v, r, w = (int(g) for g in m.groups())
        return p * 80 + q * 10 + r, u * 80 + v * 10 + w

    def cell_bounds(self, key: str) -> tuple[float, float, float, float]:
        """(south, west, north, east) of the cell ``key``, degrees."""
        row, col = self.parse_key(key)
        return (
            row / _JIS_ROWS_PER_DEG,
            _JIS_LON0 + col / _JIS_COLS_PER_DEG,
            (row + 1) / _JIS_ROWS_PER_DEG,
            _JIS_LON0 + (col + 1) / _JIS_COLS_PER_DEG,
        )

    def cell_centre(self, key: str) -> tuple[float, float]:
        row, col = self.parse_key(key)
        return (row + 0.5) / _JIS_ROWS_PER_DEG, _JIS_LON0 + (col + 0.5) / _JIS_COLS_PER_DEG
