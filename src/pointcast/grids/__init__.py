"""Product grids: which cell a point falls in, and which points a product covers.

Every product answers a request from the precomputed point that shares the request's *cell*
(docs/api.md, "How a requested point is matched"), so a product's grid is the single place that says

* which cell a coordinate lies in (``cell_key`` / ``cell_keys``, a short text key),
* where a cell's centre is (``cell_centre``),
* whether a coordinate is inside the product's coverage (``covers`` / ``covers_many``).

``grid_for(product_id)`` returns the grid of a product; ``PRODUCT_GRIDS`` is the one mapping.

European products (eu-medium, eu-short, eu-wind) share ``EUROPE_2KM``: the 2 km cells of
EPSG:3035 (ETRS89-LAEA Europe) aligned to multiples of 2000 m. A point at projected coordinates
(x, y) lies in cell ``i = floor(x / 2000)``, ``j = floor(y / 2000)`` whose key is ``"E{i}N{j}"``
(for example the projection's natural origin 52N 10E, x = 4321000 m, y = 3210000 m, lies in
``"E2160N1605"``). The key counts 2 km steps from the projection's false origin, so the cell's
south-west corner is (2000 i, 2000 j) in EPSG:3035 metres.

European coverage (docs/config.md, "Coverage"): inside the domain box 34N..72N, 25W..45E,
every point on land, at sea within 200 km of land of the domain, or in the North Sea as
delimited by the IHO. Land comes from the offline ``global_land_mask`` package (GLOBE 1 km
land/sea mask); the 200 km buffer is computed once (a Euclidean distance transform on a 5 km
raster of the equal-area EPSG:3035 plane) and stored as a 0.05 degree lat/lon raster, so that
``covers`` is a table lookup. The raster is built lazily on first use, kept in memory
and, when a cache directory is configured (``set_cache_dir``, the ``POINTCAST_CACHE_DIR``
environment variable, or ``[output] cache``, else the user's XDG cache, set by
``config.load_config``), on disk.

The Japan product uses ``JAPAN_1KM``: the third-order mesh of JIS X 0410 (30" of latitude x 45"
of longitude), keyed by the 8-digit mesh code (``jis_mesh_code``; Tokyo Station lies in
``"53394611"``). Its coverage (``JAPAN_COVERAGE``) is the land administered by Japan (the same
land mask inside 24..45.6N, 122.9..146E, minus two documented polygons holding the land of other
states) plus the sea within 2 km of it, as a 30" raster cached like Europe's.

The global product uses ``GLOBAL_5KM``: 0.05 degree lat/lon cells counted from the north-west
corner (90N, 180W), key ``"R{row}C{col}"`` with ``row = floor((90 - lat) / 0.05)`` and
``col = floor((lon + 180) / 0.05)`` (see ``LatLonGrid`` for the edges). Its coverage
(``GLOBAL_COVERAGE``) is every 0.05 degree cell north of 60S that
holds land of the GLOBE mask: a coastal cell is covered as a whole, open ocean and Antarctica
are not. Same raster, same indexing, so a cell is covered or not as a whole.

The modules: ``base`` (the interfaces), one a grid family (``laea``, ``jis``, ``latlon``), and
the coverages (``coverages``: the three products' rules; ``raster``: rasters and their cache;
``land``: the land mask).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .base import Coverage, ProductGrid
from .coverages import (
    EUROPE_COVERAGE,
    GLOBAL_COVERAGE,
    GLOBAL_RES_DEG,
    JAPAN_COVERAGE,
    JAPAN_EXCLUDE_ASIA,
    JAPAN_EXCLUDE_SOUTHERN_KURILS,
    JAPAN_EXCLUDED_AREAS,
    NORTH_SEA_IHO,
    EuropeCoverage,
    GlobalCoverage,
    JapanCoverage,
)
from .jis import JisMeshGrid, jis_mesh_code
from .laea import LaeaGrid, laea_to_lonlat, lonlat_to_3035
from .latlon import LatLonGrid
from .raster import RasterCoverage, get_cache_dir, set_cache_dir, user_cache_dir

__all__ = [
    "ProductGrid",
    "LaeaGrid",
    "Coverage",
    "EuropeCoverage",
    "EUROPE_COVERAGE",
    "EUROPE_2KM",
    "RasterCoverage",
    "JapanCoverage",
    "JAPAN_COVERAGE",
    "JAPAN_EXCLUDE_ASIA",
    "JAPAN_EXCLUDE_SOUTHERN_KURILS",
    "JAPAN_EXCLUDED_AREAS",
    "JisMeshGrid",
    "JAPAN_1KM",
    "jis_mesh_code",
    "GlobalCoverage",
    "GLOBAL_COVERAGE",
    "LatLonGrid",
    "GLOBAL_5KM",
    "PRODUCT_GRIDS",
    "grid_for",
    "set_cache_dir",
    "get_cache_dir",
    "user_cache_dir",
    "NORTH_SEA_IHO",
    "lonlat_to_3035",
    "laea_to_lonlat",
]

EUROPE_2KM = LaeaGrid("europe-2km", 2000.0, EUROPE_COVERAGE)
JAPAN_1KM = JisMeshGrid("japan-1km", JAPAN_COVERAGE)
GLOBAL_5KM = LatLonGrid("global-0.05deg", GLOBAL_RES_DEG, GLOBAL_COVERAGE)

PRODUCT_GRIDS: Mapping[str, ProductGrid] = MappingProxyType(
    {
        "eu-medium": EUROPE_2KM,
        "eu-short": EUROPE_2KM,
        "eu-wind": EUROPE_2KM,
        "japan": JAPAN_1KM,
        "global": GLOBAL_5KM,
    }
)


def grid_for(product_id: str) -> ProductGrid:
    """The grid of ``product_id``; KeyError naming the known products otherwise."""
    try:
        return PRODUCT_GRIDS[product_id]
    except KeyError:
        known = ", ".join(sorted(PRODUCT_GRIDS))
        raise KeyError(f"no grid for product {product_id!r} (products with a grid: {known})") from None
