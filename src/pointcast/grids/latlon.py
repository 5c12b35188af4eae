"""The regular lat/lon grid family: cells of a fixed number of degrees counted from 90N 180W,
keyed ``"R{row}C{col}"``.
"""

from __future__ import annotations

import re

import numpy as np

from .base import Coverage, ProductGrid, _as_float_arrays, _valid_latlon


class LatLonGrid(ProductGrid):
    """Regular lat/lon cells of ``res_deg``, counted from 90N (rows) and 180W (columns).

    Row ``i`` holds latitudes ``(90 - (i+1) res, 90 - i res]`` and column ``j`` longitudes
    ``[-180 + j res, -180 + (j+1) res)``: the indexing of the coverage raster, so a cell is
    covered or not as a whole. Longitude 180 belongs to the last column (the cell west of the
    antimeridian), latitude -90 to the last row. Key ``"R{i}C{j}"``.
    """

    _KEY = re.compile(r"R(\d{1,6})C(\d{1,6})")

    def __init__(self, name: str, res_deg: float, coverage: Coverage) -> None:
        self.name = name
        self.res_deg = res_deg
        self.nrow = round(180.0 / res_deg)
        self.ncol = round(360.0 / res_deg)
        self.coverage = coverage
        self.description = f"{res_deg:g} degree lat/lon cells from 90N 180W, key R<row>C<col>"

    def cell_indices(self, lats, lons) -> tuple[np.ndarray, np.ndarray]:
        lat, lon = _as_float_arrays(lats, lons)
        if not _valid_latlon(lat, lon).all():
            raise ValueError("invalid coordinates (lat outside -90..90, lon outside -180..180, or not finite)")
        row = np.clip(np.floor((90.0 - lat) / self.res_deg), 0, self.nrow - 1).astype(np.int64)
        col = np.clip(np.floor((lon + 180.0) / self.res_deg), 0, self.ncol - 1).astype(np.int64)
        return row, col

    def cell_key(self, lat: float, lon: float) -> str:
        row, col = self.cell_indices(np.array([lat], float), np.array([lon], float))
        return f"R{row[0]}C{col[0]}"

    def cell_keys(self, lats, lons) -> np.ndarray:
        row, col = self.cell_indices(lats, lons)
        keys = [f"R{a}C{b}" for a, b in zip(row.ravel().tolist(), col.ravel().tolist(), strict=True)]
        return np.array(keys, dtype=str).reshape(row.shape)

    def parse_key(self, key: str) -> tuple[int, int]:
        m = self._KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None or int(m.group(1)) >= self.nrow or int(m.group(2)) >= self.ncol:
            raise ValueError(f"invalid cell key {key!r} for grid {self.name} (expected R<row>C<col>)")
        return int(m.group(1)), int(m.group(2))

    def cell_centre(self, key: str) -> tuple[float, float]:
        row, col = self.parse_key(key)
        return 90.0 - (row + 0.5) * self.res_deg, -180.0 + (col + 0.5) * self.res_deg
