"""Product grids: EPSG:3035 2 km cells and the European coverage."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from pyproj import Geod

from pointcast import grids
from pointcast.grids import EUROPE_2KM, EUROPE_COVERAGE, PRODUCT_GRIDS, grid_for

GEOD = Geod(ellps="WGS84")


@pytest.fixture(autouse=True, scope="module")
def _memory_only_cache():
    """Keep the coverage raster in memory only (no writes under output/ from the tests)."""
    saved = grids._cache_dir, grids._cache_dir_explicit
    grids.set_cache_dir(None)
    yield
    grids._cache_dir, grids._cache_dir_explicit = saved


def dist_m(lat1, lon1, lat2, lon2) -> float:
    return GEOD.inv(lon1, lat1, lon2, lat2)[2]


# --- EPSG:3035 cells -----------------------------------------------------------------------------


def test_projection_false_origin():
    x, y = grids.lonlat_to_3035(10.0, 52.0)
    assert x == pytest.approx(4321000.0, abs=1e-3)
    assert y == pytest.approx(3210000.0, abs=1e-3)
    lon, lat = grids.laea_to_lonlat(4321000.0, 3210000.0)
    assert (lat, lon) == pytest.approx((52.0, 10.0), abs=1e-9)


def test_known_cell_key():
    # x = 4321000 -> i = 2160, y = 3210000 -> j = 1605
    assert EUROPE_2KM.cell_key(52.0, 10.0) == "E2160N1605"
    assert EUROPE_2KM.cell_index(52.0, 10.0) == (2160, 1605)


@pytest.mark.parametrize(
    "lat,lon",
    [(48.8566, 2.3522), (51.5074, -0.1278), (64.1466, -21.9426), (37.9755, 23.7348),
     (55.7558, 37.6173), (57.5, 2.0), (71.0, 25.0), (34.5, -24.5), (52.0, 10.0)],
)
def test_cell_key_round_trip(lat, lon):
    key = EUROPE_2KM.cell_key(lat, lon)
    clat, clon = EUROPE_2KM.cell_centre(key)
    # half the diagonal of a 2 km cell is 1.414 km (plus LAEA scale error, tiny here)
    assert dist_m(lat, lon, clat, clon) <= 1420.0
    assert EUROPE_2KM.cell_key(clat, clon) == key


def test_points_500m_apart_in_same_cell_share_key():
    clat, clon = EUROPE_2KM.cell_centre("E1900N1500")
    x, y = grids.lonlat_to_3035(clon, clat)
    lon1, lat1 = grids.laea_to_lonlat(x - 250.0, y)
    lon2, lat2 = grids.laea_to_lonlat(x + 250.0, y)
    assert dist_m(lat1, lon1, lat2, lon2) == pytest.approx(500.0, abs=5.0)
    assert EUROPE_2KM.cell_key(lat1, lon1) == EUROPE_2KM.cell_key(lat2, lon2) == "E1900N1500"


def test_points_across_a_cell_edge_differ():
    lon_w, lat_w = grids.laea_to_lonlat(3_800_000.0 - 1.0, 3_000_001.0)
    lon_e, lat_e = grids.laea_to_lonlat(3_800_000.0 + 1.0, 3_000_001.0)
    assert EUROPE_2KM.cell_key(lat_w, lon_w) == "E1899N1500"
    assert EUROPE_2KM.cell_key(lat_e, lon_e) == "E1900N1500"


def test_cell_keys_vectorised_matches_scalar():
    rng = np.random.default_rng(3)
    lats = rng.uniform(35, 71, 200)
    lons = rng.uniform(-24, 44, 200)
    keys = EUROPE_2KM.cell_keys(lats, lons)
    assert keys.shape == (200,)
    assert list(keys) == [EUROPE_2KM.cell_key(a, b) for a, b in zip(lats, lons)]
    assert EUROPE_2KM.cell_keys(lats.reshape(20, 10), lons.reshape(20, 10)).shape == (20, 10)


@pytest.mark.parametrize("lat,lon", [(91.0, 0.0), (0.0, 181.0), (math.nan, 10.0), (50.0, math.inf)])
def test_cell_key_rejects_invalid_coordinates(lat, lon):
    with pytest.raises(ValueError):
        EUROPE_2KM.cell_key(lat, lon)
    with pytest.raises(ValueError):
        EUROPE_2KM.cell_keys([50.0, lat], [10.0, lon])


@pytest.mark.parametrize("key", ["", "E12", "N1E2", "e1n2", "E1.5N2", "E1N2 ", None])
def test_cell_centre_rejects_malformed_keys(key):
    with pytest.raises(ValueError):
        EUROPE_2KM.cell_centre(key)


def test_cell_key_is_fast():
    EUROPE_2KM.cell_key(48.85, 2.35)  # transformer created here, once
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        EUROPE_2KM.cell_key(48.85, 2.35)
    per_call = (time.perf_counter() - t0) / n
    assert per_call < 50e-6, f"cell_key takes {per_call * 1e6:.1f} us"


# --- coverage ------------------------------------------------------------------------------------

COVERED = {
    "Paris": (48.8566, 2.3522),
    "Reykjavik": (64.1466, -21.9426),
    "Moscow (domain reaches 45E)": (55.7558, 37.6173),
    "North Sea oil field (>200 km from land)": (57.5, 2.0),
    "central North Sea (>250 km from land)": (56.5, 3.5),
    "100 km west of Ushant (Brittany)": (48.4421, -6.4917),
    "Hornsea 1": (53.885, 1.791),
    "Zugspitze": (47.4211, 10.9853),
    "Baltic, Kriegers Flak": (55.0333, 13.0333),
}
NOT_COVERED = {
    "mid-Atlantic": (45.0, -30.0),
    "New York": (40.7128, -74.0060),
    "Norwegian Sea north of the IHO limit, >200 km from land": (63.0, 0.0),
    "Atlantic 270 km west of Ireland": (53.0, -14.0),
    "centre of the Bay of Biscay, >200 km from land": (45.5, -5.0),
    "Svalbard (north of 72N)": (78.22, 15.65),
    "Canary Islands (south of 34N)": (28.29, -16.63),
    "Tokyo": (35.68, 139.69),
}


@pytest.mark.parametrize("name", list(COVERED))
def test_covered(name):
    lat, lon = COVERED[name]
    assert EUROPE_2KM.covers(lat, lon)
    assert grid_for("eu-short").covers(lat, lon)


@pytest.mark.parametrize("name", list(NOT_COVERED))
def test_not_covered(name):
    lat, lon = NOT_COVERED[name]
    assert not EUROPE_2KM.covers(lat, lon)


def test_covers_many_matches_covers_and_handles_bad_input():
    names = list(COVERED) + list(NOT_COVERED)
    pts = [COVERED.get(n) or NOT_COVERED[n] for n in names]
    lats = np.array([p[0] for p in pts] + [math.nan, 95.0, 50.0])
    lons = np.array([p[1] for p in pts] + [10.0, 10.0, math.inf])
    got = EUROPE_2KM.covers_many(lats, lons)
    assert got.dtype == bool
    assert list(got) == [EUROPE_2KM.covers(a, b) for a, b in zip(lats, lons)]
    assert list(got[: len(COVERED)]) == [True] * len(COVERED)
    assert not got[len(COVERED):].any()
    assert not EUROPE_2KM.covers(math.nan, 2.0)
    assert not EUROPE_2KM.covers(48.0, "east")


def test_domain_edges():
    assert EUROPE_2KM.covers(71.99, 25.0)  # Barents Sea coast of Norway
    assert not EUROPE_2KM.covers(72.01, 25.0)
    assert EUROPE_2KM.covers(64.0, -24.99)  # off western Iceland
    assert not EUROPE_2KM.covers(64.0, -25.01)
    assert EUROPE_2KM.covers(40.0, 44.99)  # Armenia
    assert not EUROPE_2KM.covers(40.0, 45.01)


def test_north_sea_polygon():
    poly = grids.NORTH_SEA_IHO
    pts = {
        (57.5, 2.0): True,  # central North Sea
        (60.9, 2.0): True,  # Viking Bank, south of 61N
        (51.3, 2.0): True,  # southern bight
        (61.1, 2.0): False,  # north of the 61N limit
        (60.0, -2.0): False,  # west of Shetland (Atlantic)
        (50.5, 0.0): False,  # English Channel
        (53.8, -5.0): False,  # Irish Sea
        (58.0, 9.5): False,  # Skagerrak
        (57.0, 11.5): False,  # Kattegat
    }
    lat = np.array([p[0] for p in pts])
    lon = np.array([p[1] for p in pts])
    assert list(grids._points_in_polygon(lon, lat, poly)) == list(pts.values())


def test_raster_shape_and_land_source():
    r = EUROPE_COVERAGE.raster
    assert r.shape == (760, 1400) and r.dtype == bool
    assert 0.5 < r.mean() < 0.95
    # the land mask read from global_land_mask, on a small box: Paris land, central North Sea not
    land = grids._land_any_blocks(49.0, 48.0, 2.0, 3.0, 6)  # 0.05 deg blocks
    assert land.shape == (20, 20) and land.all()
    sea = grids._land_any_blocks(57.0, 56.0, 3.0, 4.0, 6)
    assert not sea.any()


def test_disk_cache_round_trip(tmp_path, monkeypatch):
    cov = grids.EuropeCoverage()
    monkeypatch.setattr(cov, "build", lambda: EUROPE_COVERAGE.raster.copy())
    monkeypatch.setattr(grids, "_cache_dir", tmp_path)
    monkeypatch.setattr(grids, "_cache_dir_explicit", True)
    assert np.array_equal(cov.raster, EUROPE_COVERAGE.raster)
    files = list(tmp_path.glob("coverage-europe-*.npy"))
    assert len(files) == 1

    again = grids.EuropeCoverage()

    def fail():
        raise AssertionError("should have been loaded from the disk cache")

    monkeypatch.setattr(again, "build", fail)
    assert np.array_equal(again.raster, EUROPE_COVERAGE.raster)


def test_set_cache_dir_if_unset_respects_explicit_choice(tmp_path, monkeypatch):
    monkeypatch.delenv("POINTCAST_CACHE_DIR", raising=False)
    monkeypatch.setattr(grids, "_cache_dir", None)
    monkeypatch.setattr(grids, "_cache_dir_explicit", False)
    grids.set_cache_dir(tmp_path / "a", if_unset=True)
    assert grids.get_cache_dir() == tmp_path / "a"
    grids.set_cache_dir(tmp_path / "b")
    grids.set_cache_dir(tmp_path / "c", if_unset=True)
    assert grids.get_cache_dir() == tmp_path / "b"
    monkeypatch.setenv("POINTCAST_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setattr(grids, "_cache_dir_explicit", False)
    grids.set_cache_dir(tmp_path / "d", if_unset=True)
    assert grids.get_cache_dir() == tmp_path / "env"


# --- product -> grid -----------------------------------------------------------------------------


@pytest.mark.parametrize("pid", ["eu-medium", "eu-short", "eu-wind"])
def test_grid_for_european_products(pid):
    assert grid_for(pid) is EUROPE_2KM
    assert PRODUCT_GRIDS[pid] is EUROPE_2KM


def test_grid_for_unknown_product():
    with pytest.raises(KeyError, match="no grid for product 'nowcast'"):
        grid_for("nowcast")
    with pytest.raises(TypeError):
        PRODUCT_GRIDS["x"] = EUROPE_2KM  # one read-only mapping
