"""The ground under the synthetic weather: land and sea (from ``global_land_mask``), a smooth
orography of Gaussian ridges at the real mountain ranges of Europe, Asia and Japan (zero over
sea, smoother on coarser grids), and ICON's terrain-following half levels over it."""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import numpy as np

from ..sources.icon import LEVEL_COUNTS, SLEVE_DECAY, VERTICAL_GRIDS
from .grids import R_EARTH

# Mountain ranges as Gaussian ridges: lat, lon, height (m), sigma along/across (km), azimuth of
# the ridge axis (deg clockwise from north).
RIDGES: tuple[tuple[float, float, float, float, float, float], ...] = (
    (45.8, 7.0, 2300, 130, 55, 15),  # western Alps
    (46.5, 9.8, 2500, 190, 65, 75),  # central Alps
    (47.2, 13.2, 1900, 200, 65, 90),  # eastern Alps
    (42.7, 0.8, 1800, 210, 45, 100),  # Pyrenees
    (60.8, 8.0, 1300, 200, 90, 15),  # southern Scandinavian mountains
    (63.3, 11.8, 1000, 220, 75, 30),
    (66.5, 15.5, 1000, 230, 70, 35),
    (69.0, 19.5, 900, 200, 60, 55),
    (49.2, 20.5, 1100, 170, 50, 90),  # western Carpathians (Tatra)
    (47.8, 24.8, 1000, 200, 55, 135),  # eastern Carpathians
    (45.5, 25.0, 1400, 170, 45, 80),  # southern Carpathians
    (31.3, -6.8, 2300, 300, 80, 60),  # High Atlas
    (34.8, 1.0, 1300, 380, 90, 75),  # Tell/Saharan Atlas
    (57.0, -4.6, 650, 110, 60, 40),  # Scottish Highlands
    (43.0, 12.6, 1200, 330, 50, 135),  # Apennines
    (43.6, 18.0, 1300, 330, 70, 130),  # Dinaric Alps
    (42.6, 24.0, 1400, 240, 60, 90),  # Balkan/Rila
    (40.4, -3.8, 700, 380, 260, 60),  # Iberian Meseta
    (37.1, -3.2, 1700, 110, 40, 80),  # Sierra Nevada
    (45.3, 2.9, 900, 120, 100, 0),  # Massif Central
    (48.2, 8.2, 800, 90, 40, 15),  # Black Forest
    (50.3, 13.0, 700, 120, 45, 60),  # Ore Mountains
    (64.8, -18.5, 800, 150, 110, 90),  # Iceland
    (42.8, 44.0, 2800, 350, 70, 115),  # Caucasus
    (39.0, 34.0, 1100, 520, 260, 90),  # Anatolian plateau
    (38.5, 44.5, 1800, 300, 150, 90),  # Armenian highlands
    (42.0, -110.0, 2200, 1300, 320, 160),  # Rocky Mountains
    (-20.0, -68.0, 3700, 2500, 200, 175),  # Andes
    (33.0, 86.0, 4800, 1300, 550, 95),  # Tibet and Himalaya
    (9.0, 39.0, 2000, 500, 320, 30),  # Ethiopian highlands
    (-26.0, 27.0, 1300, 800, 500, 45),  # southern African plateau
    (73.0, -40.0, 2600, 1000, 480, 170),  # Greenland ice sheet
    (-80.0, 45.0, 2800, 2000, 1200, 90),  # East Antarctica
    # Asia (IFS's area reaches Japan).
    (60.0, 59.5, 700, 1200, 90, 5),  # Urals
    (42.0, 80.0, 3800, 800, 130, 80),  # Tian Shan
    (37.5, 72.0, 4200, 400, 150, 60),  # Pamir and Hindu Kush
    (48.5, 89.0, 2500, 500, 120, 130),  # Altai
    (52.0, 96.0, 2000, 500, 120, 100),  # Sayan
    (47.0, 103.0, 1600, 900, 450, 80),  # Mongolian plateau
    (32.0, 50.0, 2000, 900, 120, 135),  # Zagros
    (36.2, 52.0, 2800, 300, 50, 95),  # Elburz
    (33.0, 56.0, 1200, 800, 500, 110),  # Iranian plateau
    (34.0, 108.0, 2200, 400, 60, 90),  # Qinling
    (37.0, 113.5, 1300, 350, 60, 20),  # Taihang
    (26.0, 104.0, 1800, 500, 300, 90),  # Yunnan-Guizhou plateau
    (27.0, 117.5, 1100, 300, 60, 50),  # Wuyi
    (47.0, 121.0, 1000, 600, 100, 20),  # Greater Khingan
    (46.0, 136.0, 1000, 500, 80, 40),  # Sikhote-Alin
    (49.0, 143.0, 900, 400, 30, 0),  # Sakhalin
    (41.5, 128.0, 1600, 150, 60, 45),  # Changbai, northern Korea
    (37.3, 128.8, 1100, 200, 30, 155),  # Taebaek, Korea
    (23.6, 121.0, 2800, 170, 35, 15),  # Taiwan's Central Range
    # Japan (MSM's 5 km grid resolves these).
    (36.35, 137.6, 2200, 60, 18, 10),  # Hida Mountains (Northern Alps)
    (35.75, 137.85, 1800, 40, 12, 15),  # Kiso Mountains (Central Alps)
    (35.45, 138.2, 2200, 55, 18, 20),  # Akaishi Mountains (Southern Alps)
    (35.36, 138.73, 2600, 14, 14, 0),  # Mount Fuji
    (36.9, 139.0, 1500, 80, 25, 40),  # Echigo and Mikuni Mountains
    (39.3, 140.85, 1100, 220, 22, 5),  # Ou Mountains (Tohoku's spine)
    (38.9, 140.1, 1000, 150, 18, 5),  # Dewa Mountains, Chokai, Gassan
    (39.6, 141.5, 800, 120, 30, 0),  # Kitakami Highlands
    (37.4, 140.55, 600, 80, 25, 5),  # Abukuma Highlands
    (42.75, 142.85, 1400, 90, 18, 155),  # Hidaka Mountains (Hokkaido)
    (43.6, 142.8, 1600, 50, 25, 45),  # Daisetsuzan and Tokachi (Hokkaido)
    (44.3, 142.5, 800, 120, 25, 0),  # Teshio and Kitami Mountains (Hokkaido)
    (44.05, 145.05, 1200, 40, 8, 45),  # Shiretoko
    (34.1, 135.9, 1300, 70, 30, 10),  # Kii Mountains
    (35.1, 133.4, 900, 200, 25, 65),  # Chugoku Mountains
    (33.75, 133.4, 1400, 140, 20, 70),  # Shikoku Mountains
    (32.4, 131.1, 1200, 110, 30, 30),  # Kyushu Mountains
)


class LandMask:
    """Land and sea at 1/40 degree, and the land fraction of 0.25-degree cells smoothed by one
    cell, derived from the 1 km mask of ``global_land_mask``.

    The package keeps its full mask (~1 GB) in memory once imported, so the mask is streamed
    from the package's ``.npz`` instead (every 3rd row and column) and the result, 13 MB of
    packed bits, is kept in memory and under ``<cache>/sample/`` for the next process."""

    RES = 40  # cells per degree
    FILE = "landmask-40.npy"

    def __init__(self, bits: np.ndarray):
        from scipy.ndimage import gaussian_filter

        if bits.shape != (180 * self.RES, 360 * self.RES // 8):
            raise ValueError(f"land mask has shape {bits.shape}")
        self.bits = bits  # packed along longitude, rows from 90 N, columns from 180 W
        land = np.unpackbits(bits, axis=1).reshape(720, self.RES // 4, 1440, self.RES // 4)
        frac = land.mean(axis=(1, 3), dtype=np.float64)
        self.frac025 = gaussian_filter(frac, sigma=1.0, mode=("nearest", "wrap"))

    @classmethod
    def load(cls, cache_root: Path | None = None) -> LandMask:
        global _LAND_MASK
        if _LAND_MASK is not None:
            return _LAND_MASK
        path = Path(cache_root) / "sample" / cls.FILE if cache_root is not None else None
        bits = None
        if path is not None and path.exists():
            try:
                bits = np.load(path, allow_pickle=False)
            except (OSError, ValueError):
                bits = None
        if bits is None:
            bits = cls._derive()
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                with open(tmp, "wb") as fh:
                    np.save(fh, bits, allow_pickle=False)
                os.replace(tmp, path)
        _LAND_MASK = cls(bits)
        return _LAND_MASK

    @classmethod
    def _derive(cls) -> np.ndarray:
        import importlib.util
        import zipfile

        from numpy.lib import format as npformat

        spec = importlib.util.find_spec("global_land_mask")
        if spec is None or spec.origin is None:
            raise RuntimeError("global_land_mask is not installed")
        npz = Path(spec.origin).parent / "globe_combined_mask_compressed.npz"
        keep = 120 // cls.RES  # the package's mask has 120 cells per degree
        rows = []
        with zipfile.ZipFile(npz) as zf, zf.open("mask.npy") as fh:
            version = npformat.read_magic(fh)
            read_header = (npformat.read_array_header_1_0 if version == (1, 0)
                           else npformat.read_array_header_2_0)
            (nrow, ncol), fortran, dtype = read_header(fh)
            if fortran or dtype != np.bool_ or (nrow, ncol) != (180 * 120, 360 * 120):
                raise RuntimeError(f"unexpected land mask layout {nrow}x{ncol} {dtype}")
            block = 720
            for _ in range(nrow // block):
                water = np.frombuffer(fh.read(block * ncol), dtype=np.uint8).reshape(block, ncol)
                rows.append(water[1::keep, 1::keep] == 0)
        return np.packbits(np.concatenate(rows), axis=1)

    def is_land(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """Land (True) at ``lat``, ``lon`` (degrees, broadcast against each other: a column and
        a row for a regular grid, two columns for the cells of an unstructured one)."""
        n = self.RES
        i = np.clip(np.floor((90.0 - np.asarray(lat)) * n), 0, 180 * n - 1).astype(np.intp)
        j = np.mod(np.floor((np.asarray(lon) + 180.0) * n), 360 * n).astype(np.intp)
        byte = self.bits[i, j >> 3]
        return ((byte >> (7 - (j & 7))) & 1).astype(bool)

    def fraction(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """Smoothed land fraction (0..1), bilinear between 0.25-degree cells (``lat`` and
        ``lon`` broadcast as in ``is_land``)."""
        from scipy.ndimage import map_coordinates

        frac = self.frac025
        padded = np.concatenate([frac[:, -1:], frac, frac[:, :1]], axis=1)
        lat2, lon2 = np.broadcast_arrays(np.asarray(lat), np.asarray(lon))
        i = (89.875 - lat2) / 0.25
        j = (lon2 + 179.875) / 0.25 + 1.0
        return map_coordinates(padded, [i.ravel(), j.ravel()], order=1,
                                mode="nearest").reshape(lat2.shape)


_LAND_MASK: LandMask | None = None


def mountain_ridges(lat: np.ndarray, lon: np.ndarray, grid_km: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mountain ridges (m, over land and sea alike) and their slope (m per m, eastwards and
    northwards, analytic) at ``lat``, ``lon`` (broadcast as in ``LandMask.is_land``). A model
    with a coarser grid sees the ridges smoothed by its grid spacing (lower, wider)."""
    phi = np.radians(lat)
    shape = np.broadcast_shapes(np.shape(lat), np.shape(lon))
    h, dhdx, dhdy = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for rlat, rlon, height, along, across, azimuth in RIDGES:
        sa, sc = math.hypot(along, grid_km), math.hypot(across, grid_km)
        margin = 5.0 * max(sa, sc) / 111.2  # degrees of latitude beyond which it is ~0
        if rlat < lat.min() - margin or rlat > lat.max() + margin:
            continue
        peak = height * along * across / (sa * sc)
        dlon = np.radians((lon - rlon + 180.0) % 360.0 - 180.0)
        x = R_EARTH / 1000.0 * np.cos(phi) * dlon  # km east
        y = R_EARTH / 1000.0 * (phi - math.radians(rlat))  # km north
        az = math.radians(azimuth)
        a = x * math.sin(az) + y * math.cos(az)
        c = x * math.cos(az) - y * math.sin(az)
        hr = peak * np.exp(-0.5 * ((a / sa) ** 2 + (c / sc) ** 2))
        h = h + hr
        # d/da and d/dc (m per km), turned back to east/north, in m per m.
        da, dc = -hr * a / (sa * sa), -hr * c / (sc * sc)
        dhdx = dhdx + (da * math.sin(az) + dc * math.cos(az)) * 1e-3
        dhdy = dhdy + (da * math.cos(az) - dc * math.sin(az)) * 1e-3
    return h, dhdx, dhdy


def orography(lat: np.ndarray, lon: np.ndarray, land: np.ndarray, landfrac: np.ndarray,
              grid_km: float, ridges: np.ndarray | None = None) -> np.ndarray:
    """Surface height (m): smooth ridges plus a low plateau over land, 0 over sea."""
    if ridges is None:
        ridges = mountain_ridges(lat, lon, grid_km)[0]
    h = 120.0 * np.clip(landfrac, 0.0, 1.0) ** 2 + ridges
    return np.where(land, h, 0.0)


@functools.cache
def flat_half_level_heights(model_id: str) -> tuple[float, ...]:
    """Heights (m) of the half levels 1..N+1 of ``model_id`` over flat terrain at sea level,
    N = ``icon.LEVEL_COUNTS``: ICON's level distribution ``a(k) = H (2/pi arccos(((k-1)/M)
    **s))**x`` over the column of ``icon.VERTICAL_GRIDS`` (M levels), ``x`` found by bisection
    so that the lowest layer is ``lowest_layer_m`` thick; a nest (ICON-EU) takes the lowest N
    layers of that column."""
    g, n = VERTICAL_GRIDS[model_id], LEVEL_COUNTS[model_id]
    k = np.arange(g.levels + 1, dtype=np.float64)  # k - 1 of half levels 1..M+1
    base = 2.0 / math.pi * np.arccos((k / g.levels) ** g.stretch)
    lo, hi = 0.5, 10.0  # the lowest layer thins as x grows
    for _ in range(100):
        x = 0.5 * (lo + hi)
        lo, hi = (x, hi) if g.top_m * base[-2] ** x > g.lowest_layer_m else (lo, x)
    a = g.top_m * base ** x
    return tuple(float(v) for v in a[g.levels - n:])


def half_level_height(model_id: str, level: int, orog: np.ndarray) -> np.ndarray:
    """Height above sea level (m) of ICON half level ``level`` over the surface height
    ``orog``: the flat-terrain height ``a`` of the level (``flat_half_level_heights``) on top
    of the terrain, whose imprint decays upwards as in ICON's SLEVE coordinate,
    ``z = a + b(a) orog`` with ``b(a) = sinh((H/d)**n - (a/d)**n) / sinh((H/d)**n)``. The
    lowest half level is the surface itself; above it the layers are thinner over mountains
    (the lowest 469 m of ICON-EU's flat column shrink to about 320 m over 2000 m of
    orography). ICON also keeps very thin layers from getting thinner still over high terrain;
    the sample does not (its orography is smooth)."""
    a = flat_half_level_heights(model_id)[level - 1]
    d, n, top = SLEVE_DECAY
    b = math.sinh((top / d) ** n - (a / d) ** n) / math.sinh((top / d) ** n)
    return (a + b * np.asarray(orog, dtype=np.float64)).astype(np.float32)

