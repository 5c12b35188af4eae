"""Product grids: which cell a point falls in, and which points a product covers.

Every product answers a request from the precomputed point that shares the request's *cell*
(design.md section 3), so a product's grid is the single place that says

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
``covers`` is a table lookup. The raster is built lazily on first use (1-2 s), kept in memory
and, when a cache directory is configured (``set_cache_dir``, the ``POINTCAST_CACHE_DIR``
environment variable, or ``<output root>/cache`` set by ``config.load_config``), on disk.

The Japan product uses ``JAPAN_1KM``: the third-order mesh of JIS X 0410 (30" of latitude x 45"
of longitude), keyed by the 8-digit mesh code (``jis_mesh_code``; Tokyo Station lies in
``"53394611"``). Its coverage (``JAPAN_COVERAGE``) is the land administered by Japan (the same
land mask inside 24..45.6N, 122.9..146E, minus two documented polygons holding the land of other
states) plus the sea within 2 km of it, as a 30" raster cached like Europe's.

The global product uses ``GLOBAL_5KM``: 0.05 degree lat/lon cells counted from the north-west
corner (90N, 180W), key ``"R{row}C{col}"`` with ``row = floor((90 - lat) / 0.05)`` and
``col = floor((lon + 180) / 0.05)`` (see ``LatLonGrid`` for the edges). Its coverage (``GLOBAL_COVERAGE``) is every 0.05 degree cell north of 60S that
holds land of the GLOBE mask: a coastal cell is covered as a whole, open ocean and Antarctica
are not. Same raster, same indexing, so a cell is covered or not as a whole.
"""

from __future__ import annotations

import abc
import hashlib
import importlib.metadata
import importlib.util
import logging
import math
import os
import re
import tempfile
import threading
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np

log = logging.getLogger(__name__)

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
    "NORTH_SEA_IHO",
    "lonlat_to_3035",
    "laea_to_lonlat",
]

# --------------------------------------------------------------------------------------------
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


def _as_float_arrays(lats, lons) -> tuple[np.ndarray, np.ndarray]:
    lat = np.asarray(lats, dtype=float)
    lon = np.asarray(lons, dtype=float)
    if lat.shape != lon.shape:
        lat, lon = np.broadcast_arrays(lat, lon)
    return lat, lon


def _valid_latlon(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    # NaN fails every comparison, so NaN/inf are invalid too.
    return (lat >= -90.0) & (lat <= 90.0) & (lon >= -180.0) & (lon <= 180.0)


# --------------------------------------------------------------------------------------------
# Coverage


class Coverage(abc.ABC):
    """Which coordinates a product serves."""

    description: str = ""

    @abc.abstractmethod
    def covers_many(self, lats, lons) -> np.ndarray:
        """Vectorised: boolean array, False for invalid or non-finite coordinates."""

    def covers(self, lat: float, lon: float) -> bool:
        return bool(self.covers_many(np.array([lat], float), np.array([lon], float))[0])


# --- the North Sea, IHO "Limits of Oceans and Seas", Special Publication 23, 3rd ed. 1953 ----
#
# The IHO describes the North Sea by its open-water limits:
#   South-west: a line joining Walde Lighthouse (France, 1 55'E) and Leathercoat Point
#               (England, 51 10'N).
#   North-west: Dunnet Head (3 22'W) - Tor Ness (58 47'N, Hoy) - Kame of Hoy (58 55'N) -
#               Breck Ness (58 58'N, Mainland) - Costa Head (3 14'W) - Inga Ness (59 17'N,
#               Westray) - Bow Head - Mull Head (Papa Westray) - Seal Skerry (North Ronaldsay) -
#               Horse Island (south point of the Shetland Islands).
#   North:      Fethaland Point (Mainland of Shetland) - Graveland Ness (60 39'N, Yell) -
#               Gloup Ness (1 04'W) - Spoo Ness (60 45'N, Unst) - Herma Ness (60 51'N) -
#               Muckle Flugga (60 51'N 0 53'W), thence up the meridian of 0 53'W to 61 00'N
#               and east along that parallel to the coast of Norway.
#   East:       the western limit of the Skagerrak, Hanstholm (57 07'N 8 36'E) -
#               the Naze (Lindesnes, 58 00'N 7 03'E).
# Between those limits the sea is bounded by the coasts of Great Britain and the continent;
# there the polygon below runs a little inland (over land, which is covered anyway), so it
# encloses exactly the IHO sea. Vertices are (lon, lat) in degrees, about 0.02 deg accurate.
NORTH_SEA_IHO: tuple[tuple[float, float], ...] = (
    (1.4000, 51.1667),  # Leathercoat Point (St Margaret's at Cliffe, Kent)
    (1.9167, 50.9950),  # Walde Lighthouse (Marck, Pas-de-Calais)
    (2.3000, 50.8500),  # inland: French Flanders
    (4.6000, 51.3000),  # inland: north of Antwerp
    (5.2000, 51.8000),  # inland: North Brabant / Gelderland
    (6.2000, 52.6000),  # inland: Overijssel
    (7.6000, 53.1000),  # inland: East Frisia
    (8.6000, 53.0000),  # inland: Lower Saxony, west of Bremen
    (9.7000, 53.5000),  # inland: west of Hamburg
    (9.3000, 54.5000),  # inland: Schleswig
    (9.2000, 55.5000),  # inland: southern Jutland
    (9.1000, 56.2000),  # inland: central Jutland
    (8.9000, 56.7500),  # inland: Thy / Limfjord
    (8.6000, 57.1167),  # Hanstholm (Skagerrak western limit)
    (7.0467, 57.9833),  # Lindesnes, "the Naze"
    (7.6000, 58.4000),  # inland: Agder
    (6.9000, 59.0000),  # inland: Rogaland
    (7.2000, 60.0000),  # inland: Hordaland
    (6.5000, 61.0000),  # 61N on the Norwegian coast (Sogn, inland)
    (-0.8833, 61.0000),  # 61N on the meridian of 0 53'W
    (-0.8833, 60.8550),  # Muckle Flugga
    (-0.8930, 60.8280),  # Herma Ness (Unst)
    (-0.9500, 60.7500),  # Spoo Ness (Unst)
    (-1.0667, 60.7100),  # Gloup Ness (Yell)
    (-1.2300, 60.6500),  # Graveland Ness (Yell)
    (-1.3050, 60.6350),  # Fethaland Point (Mainland of Shetland)
    (-1.3100, 59.8600),  # Horse Island (south point of Shetland)
    (-2.3833, 59.3900),  # Seal Skerry (North Ronaldsay)
    (-2.8700, 59.3830),  # Mull Head (Papa Westray)
    (-2.9000, 59.3650),  # Bow Head (Westray)
    (-3.0500, 59.2833),  # Inga Ness (Westray)
    (-3.2333, 59.1400),  # Costa Head (Mainland of Orkney)
    (-3.3500, 58.9667),  # Breck Ness (Mainland of Orkney)
    (-3.3833, 58.9167),  # Kame of Hoy
    (-3.3000, 58.7833),  # Tor Ness (Hoy)
    (-3.3722, 58.6706),  # Dunnet Head
    (-3.6000, 58.4500),  # inland: Caithness
    (-4.6000, 57.5000),  # inland: west of Inverness
    (-4.0000, 56.2000),  # inland: Stirling
    (-2.8000, 55.2000),  # inland: Scottish Borders
    (-1.6000, 54.0000),  # inland: North Yorkshire
    (-0.9000, 53.3000),  # inland: Nottinghamshire
    (0.0000, 52.2000),  # inland: Cambridgeshire
    (0.3000, 51.3000),  # inland: Kent
)


def _points_in_polygon(lon: np.ndarray, lat: np.ndarray, poly: Sequence[tuple[float, float]]) -> np.ndarray:
    """Even-odd rule, vectorised over points; polygon vertices (lon, lat), implicitly closed."""
    px = np.array([p[0] for p in poly], float)
    py = np.array([p[1] for p in poly], float)
    inside = np.zeros(lon.shape, bool)
    box = (lon >= px.min()) & (lon <= px.max()) & (lat >= py.min()) & (lat <= py.max())
    if not box.any():
        return inside
    x = lon[box]
    y = lat[box]
    acc = np.zeros(x.shape, bool)
    n = len(px)
    for k in range(n):
        x1, y1 = px[k], py[k]
        x2, y2 = px[(k + 1) % n], py[(k + 1) % n]
        if y1 == y2:
            continue
        crosses = (y1 > y) != (y2 > y)
        xint = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
        acc ^= crosses & (x < xint)
    inside[box] = acc
    return inside


# --- on-disk cache of coverage rasters ---------------------------------------------------------

_cache_dir: Path | None = None
_cache_dir_explicit = False


def set_cache_dir(path: str | os.PathLike | None, *, if_unset: bool = False) -> None:
    """Directory for cached coverage rasters (``None``: memory only).

    With ``if_unset=True`` the call only takes effect when neither an earlier explicit call nor
    the ``POINTCAST_CACHE_DIR`` environment variable chose a directory (``config.load_config``
    uses this to default to ``<output root>/cache``).
    """
    global _cache_dir, _cache_dir_explicit
    if if_unset and (_cache_dir_explicit or os.environ.get("POINTCAST_CACHE_DIR")):
        return
    _cache_dir = None if path is None else Path(path)
    _cache_dir_explicit = not if_unset


def get_cache_dir() -> Path | None:
    if _cache_dir_explicit:
        return _cache_dir
    env = os.environ.get("POINTCAST_CACHE_DIR")
    if env:
        return Path(env)
    return _cache_dir


# --- land from global_land_mask ----------------------------------------------------------------

_GLM_STEP = 120  # cells per degree of the global_land_mask raster (1/120 deg, about 1 km)


def _land_any_blocks(north: float, south: float, west: float, east: float, pool: int) -> np.ndarray:
    """Land of global_land_mask in the box, pooled by ``pool`` x ``pool`` mask cells ("any land").

    Row k covers latitudes (north - (k+1) d, north - k d], column l covers longitudes
    [west + l d, west + (l+1) d) with d = pool / 120 degrees: the same convention as
    ``globe.is_land`` (which truncates towards the row/column of the mask's lat/lon arrays).
    Only the needed rows are decompressed from the package's ``.npz`` (a plain zip holding a
    C-ordered boolean ``.npy`` "is ocean" array with lat from 90 to -90 and lon from -180
    to 180); if that layout ever changes we fall back to ``globe.is_land``.
    """
    r0 = round((90.0 - north) * _GLM_STEP)
    r1 = round((90.0 - south) * _GLM_STEP)
    c0 = round((west + 180.0) * _GLM_STEP)
    c1 = round((east + 180.0) * _GLM_STEP)
    if (r1 - r0) % pool or (c1 - c0) % pool:
        raise ValueError("box edges must fall on pool boundaries of the land mask")
    try:
        return _land_from_npz(r0, r1, c0, c1, pool)
    except Exception as exc:  # pragma: no cover - only if the package layout changes
        log.warning("reading global_land_mask data directly failed (%s); using globe.is_land", exc)
        return _land_from_globe(north, south, west, east, pool)


def _glm_npz_path() -> Path:
    spec = importlib.util.find_spec("global_land_mask")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("package global_land_mask is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "globe_combined_mask_compressed.npz"


def _land_from_npz(r0: int, r1: int, c0: int, c1: int, pool: int) -> np.ndarray:
    with zipfile.ZipFile(_glm_npz_path()) as zf, zf.open("mask.npy") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        if shape != (180 * _GLM_STEP, 360 * _GLM_STEP) or fortran or dtype != np.dtype(bool):
            raise ValueError(f"unexpected mask layout {shape} {dtype} fortran={fortran}")
        ncols = shape[1]
        # Skip the rows north of the box without keeping them.
        skip = r0 * ncols
        while skip:
            got = len(f.read(min(skip, 1 << 24)))
            if not got:
                raise ValueError("truncated land mask")
            skip -= got
        out = np.empty(((r1 - r0) // pool, (c1 - c0) // pool), bool)
        block_rows = pool * 64
        for start in range(0, r1 - r0, block_rows):
            n = min(block_rows, r1 - r0 - start)
            buf = f.read(n * ncols)
            if len(buf) != n * ncols:
                raise ValueError("truncated land mask")
            ocean = np.frombuffer(buf, dtype=bool).reshape(n, ncols)[:, c0:c1]
            land = ~ocean
            out[start // pool : (start + n) // pool] = land.reshape(
                n // pool, pool, (c1 - c0) // pool, pool
            ).any(axis=(1, 3))
    return out


def _land_from_globe(north: float, south: float, west: float, east: float, pool: int) -> np.ndarray:  # pragma: no cover
    from global_land_mask import globe

    d = 1.0 / _GLM_STEP
    nrow = round((north - south) * _GLM_STEP)
    ncol = round((east - west) * _GLM_STEP)
    lons = west + (np.arange(ncol) + 0.5) * d
    out = np.empty((nrow // pool, ncol // pool), bool)
    for k in range(nrow // pool):
        lats = north - (k * pool + np.arange(pool) + 0.5) * d
        la, lo = np.meshgrid(lats, lons, indexing="ij")
        land = globe.is_land(la, lo)
        out[k] = land.reshape(pool, ncol // pool, pool).any(axis=(0, 2))
    return out


# --- raster coverages ---------------------------------------------------------------------------


class RasterCoverage(Coverage):
    """A coverage stored as a boolean lat/lon raster over a box, looked up point by point.

    The box is ``south..north`` x ``west..east`` (edges included); nothing outside it is covered.
    Row ``k`` of the raster covers latitudes ``(north - (k+1) res, north - k res]``, column ``l``
    longitudes ``[west + l res, west + (l+1) res)``; the box's far edges fall into the last
    row/column. Subclasses say how the raster is built (``build``) and what identifies it
    (``_cache_params``); the raster is built once per process on first use and, when a cache
    directory is configured (see ``set_cache_dir``), kept on disk as
    ``coverage-<cache_name>-<hash>.npy``.
    """

    cache_name: str = "raster"

    def __init__(self, *, west: float, south: float, east: float, north: float, res_deg: float) -> None:
        self.west, self.south, self.east, self.north = west, south, east, north
        self.res_deg = res_deg
        self.nrow = round((north - south) / res_deg)
        self.ncol = round((east - west) / res_deg)
        self._raster: np.ndarray | None = None
        self._lock = threading.Lock()

    # -- public -----------------------------------------------------------------------------

    @property
    def raster(self) -> np.ndarray:
        """The boolean coverage raster (nrow x ncol), built on first access."""
        r = self._raster
        if r is None:
            with self._lock:
                if self._raster is None:
                    self._raster = self._load_or_build()
                r = self._raster
        return r

    def covers_many(self, lats, lons) -> np.ndarray:
        lat, lon = _as_float_arrays(lats, lons)
        ok = (lat >= self.south) & (lat <= self.north) & (lon >= self.west) & (lon <= self.east)
        out = np.zeros(lat.shape, bool)
        if not ok.any():
            return out
        r = self.raster
        k = np.clip(np.floor((self.north - lat[ok]) / self.res_deg), 0, self.nrow - 1).astype(np.intp)
        l = np.clip(np.floor((lon[ok] - self.west) / self.res_deg), 0, self.ncol - 1).astype(np.intp)
        out[ok] = r[k, l]
        return out

    def covers(self, lat: float, lon: float) -> bool:
        try:
            lat = float(lat)
            lon = float(lon)
        except (TypeError, ValueError):
            return False
        if not (self.south <= lat <= self.north and self.west <= lon <= self.east):
            return False
        k = min(max(math.floor((self.north - lat) / self.res_deg), 0), self.nrow - 1)
        l = min(max(math.floor((lon - self.west) / self.res_deg), 0), self.ncol - 1)
        return bool(self.raster[k, l])

    # -- building ---------------------------------------------------------------------------

    @abc.abstractmethod
    def build(self) -> np.ndarray:
        """Compute the coverage raster (no caching)."""

    @abc.abstractmethod
    def _cache_params(self) -> tuple:
        """Everything the raster depends on (besides the land mask version)."""

    def _cache_key(self) -> str:
        try:
            glm = importlib.metadata.version("global-land-mask")
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover
            glm = "unknown"
        params = repr(self._cache_params() + (glm,))
        return hashlib.sha256(params.encode()).hexdigest()[:16]

    def _load_or_build(self) -> np.ndarray:
        cache_dir = get_cache_dir()
        path = cache_dir / f"coverage-{self.cache_name}-{self._cache_key()}.npy" if cache_dir else None
        if path is not None and path.is_file():
            try:
                r = np.load(path, allow_pickle=False)
                if r.shape == (self.nrow, self.ncol) and r.dtype == bool:
                    log.debug("loaded %s coverage raster from %s", self.cache_name, path)
                    return r
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable coverage cache %s: %s", path, exc)
        r = self.build()
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".coverage-", suffix=".npy")
                with os.fdopen(fd, "wb") as fh:
                    np.save(fh, r, allow_pickle=False)
                os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache may be shared
                os.replace(tmp, path)
            except OSError as exc:
                log.warning("could not write coverage cache %s: %s", path, exc)
        return r


# --- European coverage --------------------------------------------------------------------------


class EuropeCoverage(RasterCoverage):
    """Land of the European domain, sea within ``buffer_km`` of it, and the IHO North Sea.

    The domain is the lat/lon box ``south..north`` x ``west..east`` (edges included); nothing
    outside it is covered, and only land inside it counts for the buffer. ``covers_many`` is a
    lookup in a boolean raster of ``res_deg`` cells (row 0 at ``north``, column 0 at ``west``),
    built once per process on first use.
    """

    cache_name = "europe"

    def __init__(
        self,
        *,
        west: float = -25.0,
        south: float = 34.0,
        east: float = 45.0,
        north: float = 72.0,
        buffer_km: float = 200.0,
        res_deg: float = 0.05,
        work_res_m: float = 5000.0,
        north_sea: Sequence[tuple[float, float]] = NORTH_SEA_IHO,
    ) -> None:
        super().__init__(west=west, south=south, east=east, north=north, res_deg=res_deg)
        self.buffer_km = buffer_km
        self.work_res_m = work_res_m
        self.north_sea = tuple(north_sea)
        self.description = (
            f"Europe: land of the domain {south:g}..{north:g}N, {abs(west):g}W..{east:g}E, "
            f"sea within {buffer_km:g} km of that land, and the North Sea (IHO limits)"
        )

    def _cache_params(self) -> tuple:
        return (
            "europe-coverage-v1",
            self.west, self.south, self.east, self.north,
            self.buffer_km, self.res_deg, self.work_res_m, self.north_sea,
        )

    def build(self) -> np.ndarray:
        """Compute the coverage raster (no caching)."""
        from scipy.ndimage import distance_transform_edt

        res = self.res_deg
        pool = round(res * _GLM_STEP)
        if not math.isclose(pool / _GLM_STEP, res):
            raise ValueError("res_deg must be a multiple of 1/120 degree")
        land = _land_any_blocks(self.north, self.south, self.west, self.east, pool)

        # Centres of the lat/lon raster cells and their EPSG:3035 coordinates.
        lat_c = self.north - (np.arange(self.nrow) + 0.5) * res
        lon_c = self.west + (np.arange(self.ncol) + 0.5) * res
        lat2, lon2 = np.meshgrid(lat_c, lon_c, indexing="ij")
        x, y = lonlat_to_3035(lon2, lat2)

        # Working raster on the (equal-area) EPSG:3035 plane, cells of work_res_m metres.
        s = self.work_res_m
        x0 = math.floor(x.min() / s) * s - s
        y0 = math.floor(y.min() / s) * s - s
        nx = int(math.ceil((x.max() - x0) / s)) + 2
        ny = int(math.ceil((y.max() - y0) / s)) + 2
        ix = ((x - x0) // s).astype(np.intp)
        iy = ((y - y0) // s).astype(np.intp)

        land_p = np.zeros((ny, nx), bool)
        # (a) every lat/lon land cell marks the plane cell its centre falls in (keeps islands) ...
        land_p[iy[land], ix[land]] = True
        # (b) ... and every plane cell whose centre lies on a land cell is land (fills gaps).
        gx = x0 + (np.arange(nx) + 0.5) * s
        gy = y0 + (np.arange(ny) + 0.5) * s
        gx2, gy2 = np.meshgrid(gx, gy)
        glon, glat = laea_to_lonlat(gx2, gy2)
        inbox = (
            np.isfinite(glat) & np.isfinite(glon)
            & (glat >= self.south) & (glat <= self.north)
            & (glon >= self.west) & (glon <= self.east)
        )
        k = np.clip(np.floor((self.north - glat[inbox]) / res), 0, self.nrow - 1).astype(np.intp)
        l = np.clip(np.floor((glon[inbox] - self.west) / res), 0, self.ncol - 1).astype(np.intp)
        land_p[inbox] |= land[k, l]

        dist = distance_transform_edt(~land_p, sampling=s)
        near = dist[iy, ix] <= self.buffer_km * 1000.0

        north_sea = _points_in_polygon(lon2, lat2, self.north_sea)
        return near | north_sea


EUROPE_COVERAGE = EuropeCoverage()


# --- Japan coverage -----------------------------------------------------------------------------
#
# Japan's islands lie inside the box 24.0..45.6N, 122.9..146.0E: Hateruma (24.05N) is the
# southernmost and Cape Irizaki on Yonaguni (122.93E) the westernmost land administered by
# Japan in it, Cape Soya (45.52N) the northernmost, Cape Nosappu (145.82E) the easternmost. The
# north edge at 45.6N keeps Sakhalin (south tip, Cape Crillon, 45.89N) out, and the west edge
# at 122.9E keeps Taiwan (east of it nothing north of 21.9N: Pengjia Islet, 122.08E) out. Not in
# the box, so not covered: Okinotorishima (20.4N 136.1E) and Minamitorishima (24.3N 154.0E),
# tiny islands without residents.
#
# Two polygons cut the land of other states out of the box. They run through the open sea
# between the coasts (positions from the land mask itself, about 1 km accurate), so no land
# administered by Japan falls in them and every coast keeps its buffer up to the line:
#
# * JAPAN_EXCLUDE_ASIA: the Asian mainland (China, North and South Korea, Russia's Primorye) with
#   its islands: the islets of the East China Sea north of 27.5N, Jeju, the islands of the
#   Korean south and west coasts, Ulleungdo and the Liancourt Rocks (Takeshima / Dokdo,
#   administered by South Korea). Its edge runs from 27.5N 126.5E (north-west of Okinawa and the
#   Senkaku Islands) to south of Jeju (32.5N), between Jeju and the Goto Islands, through the western channel of the Korea Strait
#   between Korea and Tsushima (about half way, 24 km from each), up the Sea of Japan west of Oki
#   and east of the Liancourt Rocks, and west of Okushiri, Rebun and Rishiri.
# * JAPAN_EXCLUDE_SOUTHERN_KURILS: the parts of Kunashiri and the Habomai Islands inside the box
#   (administered by Russia), cut along the middle of the Goyomai Strait (east of Cape Nosappu)
#   and of the Nemuro Strait (between Kunashiri and the Notsuke peninsula, Shibetsu, Rausu and the
#   Shiretoko peninsula).
#
# The rule is "land administered by Japan" (where Japan's own observations and forecasts are
# made); it takes no position on territorial claims. Vertices are (lon, lat) in degrees.
JAPAN_EXCLUDE_ASIA: tuple[tuple[float, float], ...] = (
    (122.0, 27.5),
    (126.5, 27.5),  # East China Sea, north-west of Okinawa and the Senkaku Islands (25.9N)
    (128.0, 32.5),  # south of Jeju (33.1N), north-west of the Danjo Islands (32.0N 128.4E)
    (128.3, 33.6),  # between Jeju (126.9E) and the Goto Islands (128.6E)
    (128.85, 34.45),  # western channel of the Korea Strait: Korea's islands 128.5E, Tsushima 129.17E
    (129.30, 34.92),  # between Busan (35.05N 129.08E) and Tsushima's north tip (34.71N)
    (130.30, 35.80),  # between Ulsan/Pohang (129.6E) and Yamaguchi (Mishima, 131.15E)
    (132.30, 37.00),  # west of Oki (133.0E), south-east of the Liancourt Rocks (131.87E)
    (132.30, 38.00),
    (139.00, 44.00),  # between Primorye (135.5E) and Hokkaido's west coast (141.6E)
    (140.30, 46.50),  # west of Rebun (141.0E)
    (122.0, 46.5),
)
JAPAN_EXCLUDE_SOUTHERN_KURILS: tuple[tuple[float, float], ...] = (
    (145.84, 43.20),  # Pacific south of Cape Nosappu (145.82E)
    (145.84, 43.41),  # Goyomai Strait: Cape Nosappu - Kaigara-jima
    (145.75, 43.50),
    (145.46, 43.63),  # Nemuro Strait entrance: Notsuke spit (145.34E) - Kunashiri (145.54E)
    (145.26, 43.78),
    (145.30, 43.92),
    (145.48, 44.05),  # off Rausu
    (145.60, 44.20),
    (145.68, 44.35),  # off Cape Shiretoko (44.35N 145.35E)
    (145.75, 44.80),
    (146.50, 44.80),
    (146.50, 43.20),
)
JAPAN_EXCLUDED_AREAS: tuple[tuple[tuple[float, float], ...], ...] = (JAPAN_EXCLUDE_ASIA, JAPAN_EXCLUDE_SOUTHERN_KURILS)

_EARTH_RADIUS_M = 6371008.8  # mean radius (IUGG)


class JapanCoverage(RasterCoverage):
    """Land administered by Japan and the sea within ``buffer_km`` of it.

    Land is the GLOBE 1 km mask of ``global_land_mask`` inside the box (see the comment above
    ``JAPAN_EXCLUDE_ASIA``) minus the ``exclude`` polygons; the raster has the mask's own
    resolution (1/120 degree, 30": the latitude step of the JIS third-order mesh). The buffer
    is a Euclidean distance on the sphere's local plane, computed in bands of 0.5 degree of
    latitude with the band's own east-west scale; a raster cell is covered when its centre is
    within ``buffer_km`` of the centre of a land cell and outside every excluded polygon.
    """

    cache_name = "japan"

    def __init__(
        self,
        *,
        west: float = 122.9,
        south: float = 24.0,
        east: float = 146.0,
        north: float = 45.6,
        buffer_km: float = 2.0,
        exclude: Sequence[Sequence[tuple[float, float]]] = JAPAN_EXCLUDED_AREAS,
    ) -> None:
        super().__init__(west=west, south=south, east=east, north=north, res_deg=1.0 / _GLM_STEP)
        self.buffer_km = buffer_km
        self.exclude = tuple(tuple(p) for p in exclude)
        self.description = (
            f"Japan: land administered by Japan within {south:g}..{north:g}N, {west:g}..{east:g}E "
            f"and the sea within {buffer_km:g} km of it"
        )

    def _cache_params(self) -> tuple:
        return ("japan-coverage-v1", self.west, self.south, self.east, self.north, self.buffer_km, self.exclude)

    def excluded(self, lats, lons) -> np.ndarray:
        """Vectorised: inside one of the excluded polygons."""
        lat, lon = _as_float_arrays(lats, lons)
        out = np.zeros(lat.shape, bool)
        for poly in self.exclude:
            out |= _points_in_polygon(lon, lat, poly)
        return out

    def build(self) -> np.ndarray:
        """Compute the coverage raster (no caching)."""
        from scipy.ndimage import distance_transform_edt

        res = self.res_deg
        land = _land_any_blocks(self.north, self.south, self.west, self.east, 1)
        lat_c = self.north - (np.arange(self.nrow) + 0.5) * res
        lon_c = self.west + (np.arange(self.ncol) + 0.5) * res
        lon2, lat2 = np.meshgrid(lon_c, lat_c)
        outside = self.excluded(lat2, lon2)
        land &= ~outside

        dy = _EARTH_RADIUS_M * math.radians(res)
        buffer_m = self.buffer_km * 1000.0
        margin = math.ceil(buffer_m / dy) + 1
        band = round(0.5 / res)
        near = np.zeros_like(land)
        for r0 in range(0, self.nrow, band):
            r1 = min(r0 + band, self.nrow)
            a0, a1 = max(r0 - margin, 0), min(r1 + margin, self.nrow)
            block = land[a0:a1]
            if not block.any():
                continue
            dx = dy * math.cos(math.radians(lat_c[(r0 + r1) // 2]))
            dist = distance_transform_edt(~block, sampling=(dy, dx))
            near[r0:r1] = dist[r0 - a0 : r1 - a0] <= buffer_m
        return near & ~outside


JAPAN_COVERAGE = JapanCoverage()


# --- global coverage ------------------------------------------------------------------------------

GLOBAL_RES_DEG = 0.05


class GlobalCoverage(RasterCoverage):
    """Land north of ``south`` (60S: Antarctica excluded), cell by cell at ``res_deg``.

    A cell is covered when any of its 1/120 degree GLOBE mask cells is land, so a 0.05 degree
    cell on a coastline is covered as a whole (its sea part lies at most 5.6 km from land).
    The raster is the land mask pooled to the product's own cells (3000 x 7200 at 0.05 degree);
    building it reads the whole mask once (about 10 s) and is cached like Europe's.
    """

    cache_name = "global"

    def __init__(self, *, south: float = -60.0, res_deg: float = GLOBAL_RES_DEG) -> None:
        super().__init__(west=-180.0, south=south, east=180.0, north=90.0, res_deg=res_deg)
        self.description = f"land north of {abs(south):g}S in {res_deg:g} degree cells (Antarctica excluded)"

    def _cache_params(self) -> tuple:
        return ("global-coverage-v1", self.south, self.res_deg)

    def build(self) -> np.ndarray:
        return _land_any_blocks(self.north, self.south, self.west, self.east, round(self.res_deg * _GLM_STEP))


GLOBAL_COVERAGE = GlobalCoverage()


# --------------------------------------------------------------------------------------------
# Grids


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
        keys = [f"E{a}N{b}" for a, b in zip(i.ravel().tolist(), j.ravel().tolist())]
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


EUROPE_2KM = LaeaGrid("europe-2km", 2000.0, EUROPE_COVERAGE)


# --- JIS X 0410 regional mesh ------------------------------------------------------------------

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


def jis_mesh_code(lat: float, lon: float, order: int = 3) -> str:
    """JIS X 0410 mesh code of (lat, lon): 4 digits (order 1), 6 (order 2) or 8 (order 3).

    First order (1 degree of longitude x 40' of latitude): ``floor(lat * 1.5)`` and
    ``floor(lon - 100)``, two digits each; second order: the 8 x 8 subdivision (row digit then
    column digit, 0-7); third order: the 10 x 10 subdivision of that (0-9). A point on a cell
    edge belongs to the cell north and east of it (a cell holds its south and west edges).
    """
    if order not in (1, 2, 3):
        raise ValueError(f"order must be 1, 2 or 3, got {order!r}")
    return _jis_code(*JAPAN_1KM.cell_index(lat, lon), order)


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

    def cell_key(self, lat: float, lon: float) -> str:
        return _jis_code(*self.cell_index(lat, lon))

    def cell_keys(self, lats, lons) -> np.ndarray:
        lat, lon = _as_float_arrays(lats, lons)
        row, col = _jis_indices(lat, lon)
        keys = [_jis_code(a, b) for a, b in zip(row.ravel().tolist(), col.ravel().tolist())]
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


JAPAN_1KM = JisMeshGrid("japan-1km", JAPAN_COVERAGE)


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
        keys = [f"R{a}C{b}" for a, b in zip(row.ravel().tolist(), col.ravel().tolist())]
        return np.array(keys, dtype=str).reshape(row.shape)

    def parse_key(self, key: str) -> tuple[int, int]:
        m = self._KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None or int(m.group(1)) >= self.nrow or int(m.group(2)) >= self.ncol:
            raise ValueError(f"invalid cell key {key!r} for grid {self.name} (expected R<row>C<col>)")
        return int(m.group(1)), int(m.group(2))

    def cell_centre(self, key: str) -> tuple[float, float]:
        row, col = self.parse_key(key)
        return 90.0 - (row + 0.5) * self.res_deg, -180.0 + (col + 0.5) * self.res_deg


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
