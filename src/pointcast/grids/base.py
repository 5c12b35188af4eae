"""What a product grid and a coverage are (the interfaces every grid family implements), and
the coordinate checks they share.
"""

from __future__ import annotations

import abc

import numpy as np


def _as_float_arrays(lats, lons) -> tuple[np.ndarray, np.ndarray]:
    lat = np.asarray(lats, dtype=float)
    lon = np.asarray(lons, dtype=float)
    if lat.shape != lon.shape:
        lat, lon = np.broadcast_arrays(lat, lon)
    return lat, lon


def _valid_latlon(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    # NaN fails every comparison, so NaN/inf are invalid too.
    return (lat >= -90.0) & (lat <= 90.0) & (lon >= -180.0) & (lon <= 180.0)


class Coverage(abc.ABC):
    """Which coordinates a product serves."""

    description: str = ""

    @abc.abstractmethod
    def covers_many(self, lats, lons) -> np.ndarray:
        """Vectorised: boolean array, False for invalid or non-finite coordinates."""

    def covers(self, lat: float, lon: float) -> bool:
        return bool(self.covers_many(np.array([lat], float), np.array([lon], float))[0])


class ProductGrid(abc.ABC):
    """A product's point -> cell mapping plus its coverage."""

    name: str
    coverage: Coverage

    @abc.abstractmethod
    def cell_key(self, lat: float, lon: float) -> str:
        """Key of the cell holding (lat, lon); ValueError for invalid coordinates."""

    @abc.abstractmethod
    def cell_keys(self, lats, lons) -> np.ndarray:
        """Vectorised ``cell_key``: array of str; ValueError if any coordinate is invalid."""

    @abc.abstractmethod
    def cell_centre(self, key: str) -> tuple[float, float]:
        """(lat, lon) of the centre of the cell ``key``; ValueError for a malformed key."""

    def covers(self, lat: float, lon: float) -> bool:
        return self.coverage.covers(lat, lon)

    def covers_many(self, lats, lons) -> np.ndarray:
        return self.coverage.covers_many(lats, lons)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
