"""Product grids: EPSG:3035 2 km cells, the JIS X 0410 mesh, the European and Japan coverages."""

from __future__ import annotations

import math
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from pyproj import Geod

from pointcast import grids
from pointcast.grids import (
    EUROPE_2KM,
    EUROPE_COVERAGE,
    JAPAN_1KM,
    JAPAN_COVERAGE,
    PRODUCT_GRIDS,
    grid_for,
    jis_mesh_code,
)

GEOD = Geod(ellps="WGS84")


@pytest.fixture(autouse=True, scope="module")
def _memory_only_cache():
    """Keep the coverage raster in memory only (no writes under output/ from the tests)."""
    saved = grids.raster._cache_dir, grids.raster._cache_dir_explicit
    grids.set_cache_dir(None)
    yield
    grids.raster._cache_dir, grids.raster._cache_dir_explicit = saved


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
    assert list(keys) == [EUROPE_2KM.cell_key(a, b) for a, b in zip(lats, lons, strict=True)]
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
    assert list(got) == [EUROPE_2KM.covers(a, b) for a, b in zip(lats, lons, strict=True)]
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
    assert list(grids.coverages._points_in_polygon(lon, lat, poly)) == list(pts.values())


def test_raster_shape_and_land_source():
    r = EUROPE_COVERAGE.raster
    assert r.shape == (760, 1400) and r.dtype == bool
    assert 0.5 < r.mean() < 0.95
    # the land mask read from global_land_mask, on a small box: Paris land, central North Sea not
    land = grids.land._land_any_blocks(49.0, 48.0, 2.0, 3.0, 6)  # 0.05 deg blocks
    assert land.shape == (20, 20) and land.all()
    sea = grids.land._land_any_blocks(57.0, 56.0, 3.0, 4.0, 6)
    assert not sea.any()


def test_disk_cache_round_trip(tmp_path, monkeypatch):
    cov = grids.EuropeCoverage()
    monkeypatch.setattr(cov, "build", lambda: EUROPE_COVERAGE.raster.copy())
    monkeypatch.setattr(grids.raster, "_cache_dir", tmp_path)
    monkeypatch.setattr(grids.raster, "_cache_dir_explicit", True)
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
    monkeypatch.setattr(grids.raster, "_cache_dir", None)
    monkeypatch.setattr(grids.raster, "_cache_dir_explicit", False)
    grids.set_cache_dir(tmp_path / "a", if_unset=True)
    assert grids.get_cache_dir() == tmp_path / "a"
    grids.set_cache_dir(tmp_path / "b")
    grids.set_cache_dir(tmp_path / "c", if_unset=True)
    assert grids.get_cache_dir() == tmp_path / "b"
    monkeypatch.setenv("POINTCAST_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setattr(grids.raster, "_cache_dir_explicit", False)
    grids.set_cache_dir(tmp_path / "d", if_unset=True)
    assert grids.get_cache_dir() == tmp_path / "env"


# --- product -> grid -----------------------------------------------------------------------------


@pytest.mark.parametrize("pid", ["eu-medium", "eu-short", "eu-wind"])
def test_grid_for_european_products(pid):
    assert grid_for(pid) is EUROPE_2KM
    assert PRODUCT_GRIDS[pid] is EUROPE_2KM


def test_grid_for_japan():
    assert grid_for("japan") is JAPAN_1KM
    assert JAPAN_1KM.coverage is JAPAN_COVERAGE
    with pytest.raises(KeyError, match="no grid for product 'asia'"):
        grid_for("asia")


def test_grid_for_unknown_product():
    with pytest.raises(KeyError, match="no grid for product 'nowcast'"):
        grid_for("nowcast")
    with pytest.raises(TypeError):
        PRODUCT_GRIDS["x"] = EUROPE_2KM  # one read-only mapping


# --- JIS X 0410 third-order mesh (japan) ----------------------------------------------------------


def reference_mesh_code(lat, lon) -> str:
    """The standard's own definition in exact arithmetic on minutes and seconds of arc.

    First order: 40' of latitude x 1 deg of longitude (code: lat in minutes // 40, lon - 100);
    second order: 1/8 of that (5' x 7'30"); third order: 1/10 of that (30" x 45").
    """
    lat_s = (lat if isinstance(lat, Fraction) else Fraction(str(lat))) * 3600  # seconds of arc
    lon_s = ((lon if isinstance(lon, Fraction) else Fraction(str(lon))) - 100) * 3600
    p, rest_lat = divmod(lat_s, 40 * 60)
    u, rest_lon = divmod(lon_s, 3600)
    q, rest_lat = divmod(rest_lat, 5 * 60)
    v, rest_lon = divmod(rest_lon, 450)
    r = rest_lat // 30
    w = rest_lon // 45
    return f"{int(p):02d}{int(u):02d}{int(q)}{int(v)}{int(r)}{int(w)}"


@pytest.mark.parametrize(
    "lat,lon,code",
    [
        # Tokyo Station, the usual published example of a third-order mesh code
        (35.681236, 139.767125, "53394611"),
        # its cell's south-west corner (a cell holds its south and west edges) and a point
        # a hair south-west of it, in the neighbouring cells
        (35.675, 139.7625, "53394611"),
        (35.6749999, 139.7624999, "53394600"),
        # the well-known first-order meshes of major cities (Sapporo 6441, Sendai 5740,
        # Nagoya 5236, Osaka 5235, Fukuoka 5030, Naha 3927), the lower digits worked out by
        # hand from the definition (e.g. Sendai: 38.2682 * 120 = 4592.18 -> 57, 3, 2;
        # 40.8694 * 80 = 3269.55 -> 40, 6, 9 -> 5740 36 29)
        (43.0618, 141.3545, "64414278"),
        (38.2682, 140.8694, "57403629"),
        (35.1815, 136.9066, "52366712"),
        (34.6937, 135.5023, "52350430"),
        (33.5904, 130.4017, "50303302"),
        (26.2124, 127.6792, "39272554"),
        # exact first-order corner 36N 139E: p = 36 * 1.5 = 54, u = 39, all sub-digits 0
        (36.0, 139.0, "54390000"),
        (35.99999, 138.99999, "53387799"),
    ],
)
def test_jis_mesh_codes(lat, lon, code):
    assert JAPAN_1KM.cell_key(lat, lon) == code
    assert reference_mesh_code(lat, lon) == code
    assert jis_mesh_code(lat, lon) == code
    assert jis_mesh_code(lat, lon, order=2) == code[:6]
    assert jis_mesh_code(lat, lon, order=1) == code[:4]


def test_jis_mesh_matches_reference_definition():
    rng = np.random.default_rng(11)
    lats = np.round(rng.uniform(24.0, 45.6, 500), 6)
    lons = np.round(rng.uniform(122.9, 146.0, 500), 6)
    want = [reference_mesh_code(float(a), float(b)) for a, b in zip(lats, lons, strict=True)]
    # plus points exactly on third-order edges, whose binary floats may fall a hair short of
    # the edge: they belong to the cell north and east of the edge, as the exact values do
    edge_lats = [Fraction(k, 120) for k in range(4200, 4300, 7)]
    edge_lons = [100 + Fraction(k, 80) for k in range(3100, 3200, 7)]
    want += [reference_mesh_code(a, b) for a, b in zip(edge_lats, edge_lons, strict=True)]
    lats = np.concatenate([lats, [float(x) for x in edge_lats]])
    lons = np.concatenate([lons, [float(x) for x in edge_lons]])
    assert list(JAPAN_1KM.cell_keys(lats, lons)) == want
    assert [JAPAN_1KM.cell_key(a, b) for a, b in zip(lats, lons, strict=True)] == want


def test_jis_cell_centre_and_bounds():
    assert JAPAN_1KM.cell_centre("53394611") == pytest.approx((35.675 + 1 / 240, 139.7625 + 1 / 160), abs=1e-12)
    south, west, north, east = JAPAN_1KM.cell_bounds("53394611")
    assert (south, west, north, east) == pytest.approx((35.675, 139.7625, 35.675 + 1 / 120, 139.7625 + 1 / 80))
    # a third-order cell is 30" x 45": about 0.93 km x 1.14 km at 35.7N
    assert dist_m(south, west, north, west) == pytest.approx(925.0, abs=5.0)
    assert dist_m(south, west, south, east) == pytest.approx(1130.0, abs=10.0)


@pytest.mark.parametrize(
    "lat,lon",
    [(35.681236, 139.767125), (43.0618, 141.3545), (26.2124, 127.6792), (24.4494, 122.9336), (45.5228, 141.9364),
     (35.3606, 138.7274), (0.001, 100.001), (66.66, 179.99)],
)  # fmt: skip
def test_jis_round_trip(lat, lon):
    key = JAPAN_1KM.cell_key(lat, lon)
    clat, clon = JAPAN_1KM.cell_centre(key)
    assert JAPAN_1KM.cell_key(clat, clon) == key
    south, west, north, east = JAPAN_1KM.cell_bounds(key)
    assert south <= lat < north and west <= lon < east
    # half the diagonal of a 30" x 45" cell is under 0.75 km
    assert dist_m(lat, lon, clat, clon) <= 750.0


def test_jis_cell_keys_vectorised_shape():
    lats = np.linspace(30.0, 44.0, 20).reshape(4, 5)
    lons = np.linspace(130.0, 144.0, 20).reshape(4, 5)
    keys = JAPAN_1KM.cell_keys(lats, lons)
    assert keys.shape == (4, 5)
    assert keys[1, 2] == JAPAN_1KM.cell_key(lats[1, 2], lons[1, 2])


@pytest.mark.parametrize(
    "lat,lon",
    [(91.0, 139.0), (35.0, 181.0), (math.nan, 139.0), (35.0, math.inf),
     (-0.001, 120.0), (66.67, 140.0), (35.0, 99.999), (48.85, 2.35)],
)  # fmt: skip
def test_jis_cell_key_rejects_coordinates_outside_the_mesh(lat, lon):
    with pytest.raises(ValueError):
        JAPAN_1KM.cell_key(lat, lon)
    with pytest.raises(ValueError):
        JAPAN_1KM.cell_keys([35.0, lat], [139.0, lon])
    with pytest.raises(ValueError):
        jis_mesh_code(lat, lon)


@pytest.mark.parametrize("key", ["", "5339461", "533946111", "53398611", "53394811", "5339461a", "E1N2", None, 53394611])
def test_jis_cell_centre_rejects_malformed_keys(key):
    with pytest.raises(ValueError):
        JAPAN_1KM.cell_centre(key)


def test_jis_mesh_code_order_must_be_1_2_or_3():
    with pytest.raises(ValueError):
        jis_mesh_code(35.0, 139.0, order=4)


def test_jis_cell_key_is_fast():
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        JAPAN_1KM.cell_key(35.681236, 139.767125)
    per_call = (time.perf_counter() - t0) / n
    assert per_call < 20e-6, f"cell_key takes {per_call * 1e6:.1f} us"


# --- Japan coverage ------------------------------------------------------------------------------------

JP_COVERED = {
    "Tokyo": (35.6812, 139.7671),
    "Sapporo": (43.0618, 141.3545),
    "Naha": (26.2124, 127.6792),
    "Fukuoka": (33.5904, 130.4017),
    "Osaka": (34.6937, 135.5023),
    "Mt Fuji summit": (35.3606, 138.7274),
    "Izuhara, Tsushima (50 km from Korea)": (34.2028, 129.2875),
    "Yonaguni, westernmost island": (24.4675, 123.0046),
    "Hateruma, southernmost inhabited island": (24.0590, 123.7770),
    "Chichijima, Ogasawara": (27.0944, 142.1919),
    "Minamidaito": (25.8459, 131.2439),
    "Wakkanai, near Cape Soya": (45.4156, 141.6731),
    "Cape Nosappu, easternmost point": (43.3853, 145.8167),
    "Rausu, across the Nemuro Strait from Kunashiri": (44.0206, 145.1897),
    "Kobe port, 1 km off the shore": (34.6700, 135.2000),
    "Uotsuri-jima, Senkaku Islands (administered by Japan)": (25.7431, 123.4742),
}
JP_NOT_COVERED = {
    "Seoul": (37.5665, 126.9780),
    "Busan": (35.1796, 129.0756),
    "Jeju": (33.4996, 126.5312),
    "Ulleungdo": (37.4845, 130.9057),
    "Liancourt Rocks / Takeshima (administered by South Korea)": (37.2417, 131.8667),
    "Vladivostok": (43.1155, 131.8855),
    "Korsakov, Sakhalin": (46.6333, 142.7800),
    "Cape Crillon, Sakhalin": (45.9000, 142.0800),
    "Yuzhno-Kurilsk, Kunashiri (administered by Russia)": (44.0306, 145.8636),
    "Taipei": (25.0330, 121.5654),
    "Shanghai": (31.2304, 121.4737),
    "open Pacific 30N 150E": (30.0, 150.0),
    "middle of Tokyo Bay, 7 km from the shore": (35.4800, 139.8000),
    "Sea of Japan 20 km off Niigata": (38.1000, 138.9000),
    "Paris": (48.8566, 2.3522),
}


@pytest.mark.parametrize("name", list(JP_COVERED))
def test_japan_covered(name):
    lat, lon = JP_COVERED[name]
    assert JAPAN_1KM.covers(lat, lon)
    assert grid_for("japan").covers(lat, lon)


@pytest.mark.parametrize("name", list(JP_NOT_COVERED))
def test_japan_not_covered(name):
    lat, lon = JP_NOT_COVERED[name]
    assert not JAPAN_1KM.covers(lat, lon)


def test_japan_and_europe_are_disjoint():
    for lat, lon in JP_COVERED.values():
        assert not EUROPE_2KM.covers(lat, lon)
    assert not JAPAN_1KM.covers(*COVERED["Paris"])


def test_japan_covers_many_matches_covers_and_handles_bad_input():
    names = list(JP_COVERED) + list(JP_NOT_COVERED)
    pts = [JP_COVERED.get(n) or JP_NOT_COVERED[n] for n in names]
    lats = np.array([p[0] for p in pts] + [math.nan, 95.0, 35.0])
    lons = np.array([p[1] for p in pts] + [139.0, 139.0, math.inf])
    got = JAPAN_1KM.covers_many(lats, lons)
    assert got.dtype == bool
    assert list(got) == [JAPAN_1KM.covers(a, b) for a, b in zip(lats, lons, strict=True)]
    assert list(got[: len(JP_COVERED)]) == [True] * len(JP_COVERED)
    assert not got[len(JP_COVERED):].any()
    assert not JAPAN_1KM.covers(math.nan, 139.0)
    assert not JAPAN_1KM.covers(35.0, "east")


def test_japan_buffer_is_about_2_km():
    # Along the parallel of Choshi's cape (Inubosaki, 35.7075N 140.8686E): the coast faces east,
    # so the distance east of the easternmost land cell is the distance to land.
    lat = 35.7075
    row = JAPAN_COVERAGE.raster[math.floor((JAPAN_COVERAGE.north - lat) * 120)]
    land = grids.land._land_any_blocks(36.0, 35.0, 140.0, 141.0, 1)[math.floor((36.0 - lat) * 120)]
    last_land = 140.0 + (np.nonzero(land)[0].max() + 0.5) / 120
    covered = JAPAN_COVERAGE.west + (np.nonzero(row)[0] + 0.5) / 120
    reach = covered[covered > last_land - 0.1].max()
    assert 1500.0 <= dist_m(lat, last_land, lat, reach) <= 2000.0


def test_japan_exclusion_polygons_hold_no_land_of_japan_and_all_foreign_land():
    # Foreign land near the lines; Japanese land just on the other side.
    foreign = [(37.2417, 131.8667), (37.4845, 130.9057), (35.0500, 129.0800), (34.7200, 128.4800),
               (33.1100, 126.2700), (43.4300, 145.9000), (43.7000, 145.5500), (44.3000, 145.9800),
               (42.3000, 130.7000), (45.5000, 137.7000)]  # fmt: skip
    japanese = [(34.7000, 129.3300), (34.4000, 129.1700), (32.6900, 128.6300), (32.0000, 128.3500),
                (36.2000, 133.1000), (42.1500, 139.4500), (45.4500, 141.0000), (43.3850, 145.8100),
                (43.5800, 145.3300), (44.3400, 145.3300), (33.2800, 129.0800)]  # fmt: skip
    lat = np.array([p[0] for p in foreign + japanese])
    lon = np.array([p[1] for p in foreign + japanese])
    excluded = JAPAN_COVERAGE.excluded(lat, lon)
    assert list(excluded) == [True] * len(foreign) + [False] * len(japanese)


def test_japan_raster_shape_and_cache_name(tmp_path, monkeypatch):
    r = JAPAN_COVERAGE.raster
    # 30" cells (the mask's own resolution) over 24..45.6N, 122.9..146E
    assert r.shape == (2592, 2772) and r.dtype == bool
    assert 0.05 < r.mean() < 0.12
    cov = grids.JapanCoverage()
    monkeypatch.setattr(cov, "build", lambda: r.copy())
    monkeypatch.setattr(grids.raster, "_cache_dir", tmp_path)
    monkeypatch.setattr(grids.raster, "_cache_dir_explicit", True)
    assert np.array_equal(cov.raster, r)
    assert len(list(tmp_path.glob("coverage-japan-*.npy"))) == 1
    assert grids.JapanCoverage(buffer_km=3.0)._cache_key() != cov._cache_key()


def test_shipped_japan_points_have_distinct_cells():
    from pointcast.config import load_points

    pts = load_points(Path(__file__).resolve().parents[2] / "config" / "points" / "japan.csv")
    keys = JAPAN_1KM.cell_keys([p.lat for p in pts], [p.lon for p in pts])
    assert len(set(keys)) == len(pts)
    assert JAPAN_1KM.covers_many([p.lat for p in pts], [p.lon for p in pts]).all()
