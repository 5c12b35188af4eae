"""The coverages of the products: Europe (land of the domain, the sea within 200 km of it and the
IHO North Sea), Japan (land administered by Japan and the sea within 2 km of it) and the world
(land north of 60S), each a raster built from the GLOBE land mask.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .base import _as_float_arrays
from .laea import laea_to_lonlat, lonlat_to_3035
from .land import _GLM_STEP, _land_any_blocks
from .raster import RasterCoverage

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
    building it reads the whole mask once, so it is cached like Europe's.
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
