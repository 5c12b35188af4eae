"""DWD's v1 open-data scheme for ICON-EU and ICON-D2: native (unstructured) grids end to end.

The sample source writes small runs in the v1 tree (GRIB2 template 3.101, CLAT/CLON, one
message per file); they are read back with plain ecCodes, decoded, and extracted to points
with the barycentric weights of ``interp``, which are checked on their own too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import eccodes
import numpy as np
import pytest
import xarray as xr
from scipy.spatial import cKDTree

import pointcast  # noqa: F401  (PROJ before ecCodes)
from pointcast import blend, interp
from pointcast.config import load_config
from pointcast.ingest import DecodeError, decode
from pointcast.sample import LandMask, SampleSource, Weather, cell_grid
from pointcast.sources import ICON_D2, ICON_EU, IFS
from pointcast.sources.icon import NATIVE_GRIDS, v1_path
from pointcast.sourcing import make_source

UTC = UTC
INIT = "2026-11-20T00:00Z"
NOW = datetime(2026, 11, 20, 5, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
FLAT = [("berlin", 52.52, 13.40), ("paris", 48.85, 2.35), ("warsaw", 52.23, 21.01),
        ("hamburg", 53.55, 9.99)]


def headers(path: Path) -> list[dict]:
    """Every message of a file, with plain ecCodes."""
    out = []
    with open(path, "rb") as f:
        while (h := eccodes.codes_grib_new_from_file(f)) is not None:
            try:
                out.append({k: eccodes.codes_get(h, k) for k in (
                    "gridType", "numberOfDataPoints", "numberOfGridUsed", "numberOfGridInReference",
                    "uuidOfHGrid", "packingType", "shortName", "centre", "stepUnits")}
                           | {"values": eccodes.codes_get_values(h)})
            finally:
                eccodes.codes_release(h)
    return out


def points(rows=FLAT) -> interp.PointSet:
    return interp.PointSet(ids=np.array([r[0] for r in rows]), lats=np.array([r[1] for r in rows]),
                           lons=np.array([r[2] for r in rows]), elevation=np.full(len(rows), np.nan))


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dwd-v1")


@pytest.fixture(scope="module")
def runs(cache):
    src = SampleSource(scale=16, init=INIT, horizon_hours=6)
    return {m.id: src.fetch(src.discover(m, NOW), m, cache) for m in (ICON_EU, ICON_D2)}


@pytest.fixture(scope="module")
def decoded(runs):
    return {mid: decode(f.files, (ICON_EU if mid == "icon-eu" else ICON_D2).fields, model=mid)
            for mid, f in runs.items()}


def rel(fetched) -> set[str]:
    root = fetched.files[0].parents[0]
    while root.name != "v1":
        root = root.parent
    return {f.relative_to(root.parent).as_posix() for f in fetched.files}


# ------------------------------------------------------------------------------------------
# The v1 layout
# ------------------------------------------------------------------------------------------


def test_v1_paths_follow_dwds_scheme():
    init = datetime(2026, 11, 20, 6, tzinfo=UTC)
    assert v1_path("icon-eu", "T_2M", init, 0) == \
        "m/icon-eu/p/T_2M/r/2026-11-20T06:00/s/PT000H00M.grib2"
    assert v1_path("icon-d2", "TOT_PREC", init, 75) == \
        "m/icon-d2/p/TOT_PREC/r/2026-11-20T06:00/s/PT001H15M.grib2"
    # Pressure levels in Pa, model (full and half) levels by number.
    assert v1_path("icon-eu", "T", init, 720, "isobaricInhPa", 850) == \
        "m/icon-eu/p/T/lvt1/100/lv1/85000/r/2026-11-20T06:00/s/PT012H00M.grib2"
    assert v1_path("icon-d2", "U", init, 60, "generalVerticalLayer", 65) == \
        "m/icon-d2/p/U/lvt1/150/lv1/65/r/2026-11-20T06:00/s/PT001H00M.grib2"
    assert v1_path("icon-eu", "HHL", init, 0, "generalVertical", 61) == \
        "m/icon-eu/p/HHL/lvt1/150/lv1/61/r/2026-11-20T06:00/s/PT000H00M.grib2"
    assert v1_path("icon-eu", "T_2M", init, 120 * 60).endswith("/s/PT120H00M.grib2")
    with pytest.raises(ValueError, match="level"):
        v1_path("icon-eu", "T", init, 0, "isobaricInhPa")


def test_sample_writes_the_v1_tree_on_the_native_grid(runs):
    eu, d2 = rel(runs["icon-eu"]), rel(runs["icon-d2"])
    r = "r/2026-11-20T00:00/s"
    for path in (f"v1/m/icon-eu/p/T_2M/{r}/PT006H00M.grib2",
                 f"v1/m/icon-eu/p/CLAT/{r}/PT000H00M.grib2",
                 f"v1/m/icon-eu/p/CLON/{r}/PT000H00M.grib2",
                 f"v1/m/icon-eu/p/HSURF/{r}/PT000H00M.grib2",
                 f"v1/m/icon-eu/p/HHL/lvt1/150/lv1/1/{r}/PT000H00M.grib2",
                 f"v1/m/icon-eu/p/HHL/lvt1/150/lv1/75/{r}/PT000H00M.grib2",
                 f"v1/m/icon-eu/p/FI/lvt1/100/lv1/85000/{r}/PT003H00M.grib2",
                 f"v1/m/icon-eu/p/U/lvt1/150/lv1/74/{r}/PT002H00M.grib2"):
        assert path in eu, path
    # ICON-EU's 74 levels and ICON-D2's 65: HHL on every half level, none beyond
    for tree, model, nlev in ((eu, "icon-eu", 75), (d2, "icon-d2", 66)):
        hhl = {int(p.split("/lv1/")[1].split("/")[0]) for p in tree if "/p/HHL/" in p}
        assert hhl == set(range(1, nlev + 1)), model
        assert f"v1/m/{model}/p/V/lvt1/150/lv1/{nlev - 1}/{r}/PT001H00M.grib2" in tree
    # ICON-D2's 15-minute fields: a file per quarter hour; hourly fields only on the hour.
    assert f"v1/m/icon-d2/p/TOT_PREC/{r}/PT001H15M.grib2" in d2
    assert f"v1/m/icon-d2/p/ASWDIR_S/{r}/PT000H45M.grib2" in d2
    assert f"v1/m/icon-d2/p/T_2M/{r}/PT001H15M.grib2" not in d2
    # Upper-case parameter names for ICON-D2 too; constants once per run; no VIS in v1.
    assert f"v1/m/icon-d2/p/HSURF/{r}/PT000H00M.grib2" in d2
    assert not [p for p in eu | d2 if "/p/HSURF/" in p and not p.endswith("PT000H00M.grib2")]
    assert not [p for p in eu | d2 if "/p/VIS/" in p]


@pytest.mark.parametrize("mid", ["icon-eu", "icon-d2"])
def test_every_file_is_one_unstructured_message_of_one_grid(runs, mid):
    msgs = {}
    for f in runs[mid].files:
        assert f.suffix == ".grib2"  # uncompressed, unlike the legacy bz2 tree
        got = headers(f)
        assert len(got) == 1, f
        msgs[f] = got[0]
    grids = {(m["gridType"], m["numberOfDataPoints"], m["numberOfGridUsed"],
              m["numberOfGridInReference"], m["uuidOfHGrid"]) for m in msgs.values()}
    assert len(grids) == 1
    kind, n, number, ref, uuid = grids.pop()
    assert kind == "unstructured_grid" and number == NATIVE_GRIDS[mid].number and ref == 1
    assert len(uuid) == 32 and n > 1000
    assert {m["packingType"] for m in msgs.values()} == {"grid_ccsds"}
    assert {m["centre"] for m in msgs.values()} == {"edzw"}
    # CLAT/CLON decode as ecCodes' tlat/tlon and are the cell centres of the sample's grid.
    by_name = {m["shortName"]: m for m in msgs.values()}
    grid = cell_grid(ICON_EU if mid == "icon-eu" else ICON_D2, 16,
                     SampleSource().area)
    assert grid.uuid == uuid
    np.testing.assert_allclose(by_name["tlat"]["values"], grid.lats, atol=1e-4)
    np.testing.assert_allclose(by_name["tlon"]["values"], grid.lons, atol=1e-4)


def test_native_grid_spacing_matches_the_scale():
    """The Fibonacci lattice has one cell per (mesh size x scale) squared: the median distance
    to the nearest neighbour is about that mesh size, and the cells stay in the domain."""
    for model, scale in ((ICON_EU, 16), (ICON_D2, 8)):
        g = cell_grid(model, scale, SampleSource().area)
        nat = NATIVE_GRIDS[model.id]
        tree = cKDTree(interp.unit_vectors(g.lats, g.lons))
        nearest_km = tree.query(tree.data, k=2)[0][:, 1] * interp.EARTH_RADIUS_KM
        assert 0.8 < np.median(nearest_km) / (nat.spacing_km * scale) < 1.3
        assert g.lats.min() >= nat.lat_min and g.lats.max() <= nat.lat_max
        assert g.lons.min() >= nat.lon_min and g.lons.max() <= nat.lon_max
    with pytest.raises(ValueError, match="fewer than 3 cells"):
        cell_grid(ICON_D2, 16, (100.0, 10.0, 120.0, 20.0))


# ------------------------------------------------------------------------------------------
# Decode
# ------------------------------------------------------------------------------------------


def test_decode_gives_cells_with_their_centres(runs, decoded):
    ds = decoded["icon-eu"]
    assert ds.t2m.dims == ("time", "cell") and ds.hhl.dims == ("hlev", "cell")
    assert ds.u_pl.dims == ("time", "plev", "cell") and ds.orog.dims == ("cell",)
    assert "vis" not in ds  # not in DWD's v1 tree: visibility comes from another model
    f = next(p for p in runs["icon-eu"].files if "/p/T_2M/" in p.as_posix() and "PT003H" in p.name)
    raw = headers(f)[0]
    np.testing.assert_allclose(ds.t2m.sel(time="2026-11-20T03:00").values, raw["values"],
                               rtol=0, atol=1e-3)
    clat = next(p for p in runs["icon-eu"].files if "/p/CLAT/" in p.as_posix())
    np.testing.assert_array_equal(ds.clat.values, headers(clat)[0]["values"])
    assert ds.attrs["grid_uuid"] == raw["uuidOfHGrid"]
    # ICON-D2's quarter hours: precipitation on every 15 minutes, de-accumulated.
    d2 = decoded["icon-d2"]
    assert d2.tp.attrs["steps_minutes"][:5] == [0, 15, 30, 45, 60]
    tp = d2.tp.values
    assert np.nanmin(tp) >= -1e-3
    assert np.isnan(d2.t2m.sel(time="2026-11-20T00:15").values).all()


def test_cell_centres_are_kept_per_grid_and_required_once(runs, decoded, tmp_path):
    # Without CLAT/CLON, a grid seen before decodes from the centres kept for its UUID.
    files = [f for f in runs["icon-eu"].files if "/p/CLAT/" not in f.as_posix()
             and "/p/CLON/" not in f.as_posix()]
    again = decode(files, ICON_EU.fields, model="icon-eu")
    np.testing.assert_array_equal(again.clon.values, decoded["icon-eu"].clon.values)
    # A grid never seen and without its centres is a clear error naming the grid.
    t2m = next(f for f in files if "/p/T_2M/" in f.as_posix())
    h = eccodes.codes_new_from_message(t2m.read_bytes())
    try:
        eccodes.codes_set_string(h, "uuidOfHGrid", "ffffffffffffffffffffffffffffffff")
        other = tmp_path / "other.grib2"
        other.write_bytes(eccodes.codes_get_message(h))
    finally:
        eccodes.codes_release(h)
    with pytest.raises(DecodeError, match="ffffffffffffffffffffffffffffffff.*CLAT/CLON"):
        decode([other], ICON_EU.fields, model="icon-eu")


# ------------------------------------------------------------------------------------------
# Weights
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lattice():
    g = cell_grid(ICON_EU, 16, SampleSource().area)
    return g, cKDTree(interp.unit_vectors(g.lats, g.lons))


def test_weights_are_exact_at_cell_centres_and_sum_to_one(lattice):
    g, tree = lattice
    pick = np.arange(0, len(g.lats), 97)
    w = interp.barycentric(tree, g.lats[pick], g.lons[pick])
    inner = w.inside
    assert inner.mean() > 0.9  # all but cells on the domain's edge
    top = np.argmax(w.w, axis=1)
    np.testing.assert_array_equal(w.idx[inner, top[inner]], pick[inner])
    np.testing.assert_allclose(w.w[inner].max(axis=1), 1.0, atol=1e-9)
    rng = np.random.default_rng(1)
    lat, lon = rng.uniform(35, 65, 500), rng.uniform(-15, 55, 500)
    w = interp.barycentric(tree, lat, lon)
    assert w.inside.all()
    np.testing.assert_allclose(w.w.sum(axis=1), 1.0, atol=1e-12)
    assert (w.w >= 0).all()
    # The three cells are the ones around the point: none is farther than two mesh sizes.
    p = interp.unit_vectors(lat, lon)
    far = np.linalg.norm(tree.data[w.idx] - p[:, None, :], axis=-1).max(axis=1)
    assert far.max() * interp.EARTH_RADIUS_KM < 2.0 * NATIVE_GRIDS["icon-eu"].spacing_km * 16


def test_weights_interpolate_a_smooth_field_better_than_the_nearest_cell(lattice):
    g, tree = lattice

    def field(lat, lon):
        return 280.0 + 10.0 * np.sin(np.radians(2 * lat)) * np.cos(np.radians(lon)) \
            + 0.05 * lat

    rng = np.random.default_rng(7)
    lat, lon = rng.uniform(35, 65, 400), rng.uniform(-15, 55, 400)
    w = interp.barycentric(tree, lat, lon)
    got = w.apply(field(g.lats, g.lons).astype(np.float64))
    err = np.abs(got - field(lat, lon))
    nearest = np.abs(field(g.lats, g.lons)[tree.query(interp.unit_vectors(lat, lon))[1]]
                     - field(lat, lon))
    # Second-order accurate: about (104 km)^2 x curvature, well below the nearest cell's error.
    assert err.max() < 0.05
    assert err.mean() < 0.1 * nearest.mean()


def test_points_outside_the_grid_get_nan(lattice):
    g, tree = lattice
    w = interp.barycentric(tree, np.array([50.0, 10.0, 50.0]), np.array([10.0, 10.0, 100.0]))
    assert w.inside.tolist() == [True, False, False]
    out = w.apply(np.ones(len(g.lats)))
    assert out[0] == pytest.approx(1.0) and np.isnan(out[1:]).all()


def test_pop_neighbourhood_holds_the_cells_within_the_radius(lattice):
    g, tree = lattice
    lat, lon = np.array([50.0, 45.0]), np.array([10.0, 30.0])
    w = interp.barycentric(tree, lat, lon)
    for radius in (25.0, 300.0):
        near = interp.neighbourhood_cells(tree, lat, lon, w, radius)
        for i in range(2):
            got = set(near.of(i).tolist())
            # Great-circle distance by the haversine formula.
            p1, p2 = np.radians(lat[i]), np.radians(g.lats)
            dl = np.radians(g.lons - lon[i])
            h = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
            dist = 2 * interp.EARTH_RADIUS_KM * np.arcsin(np.sqrt(h))
            want = set(np.nonzero(dist <= radius)[0].tolist()) | set(w.idx[i].tolist())
            assert got == want


def test_weights_are_computed_once_per_grid_and_point_set(decoded, runs):
    ds = decoded["icon-d2"]
    pts = points()
    before = interp.SAMPLINGS.computed
    first = interp.extract(ds, pts, [10.0, 100.0])
    assert interp.SAMPLINGS.computed == before + 1  # one for every field of the run
    # Another decode of a run on the same grid (same uuidOfHGrid) reuses it.
    again = decode(runs["icon-d2"].files, ICON_D2.fields, model="icon-d2")
    interp.extract(again, pts, [10.0, 100.0])
    assert interp.SAMPLINGS.computed == before + 1
    interp.extract(ds, points(FLAT[:2]), [10.0])
    assert interp.SAMPLINGS.computed == before + 2
    t2m = first.t2m.sel(time="2026-11-20T01:00").values
    # Warsaw (21.0 E) lies east of ICON-D2's domain (20.5 E): no value, the next model's turn.
    assert np.isfinite(t2m[[0, 1, 3]]).all() and np.isnan(t2m[2])
    # Precipitation probability from the neighbourhood of cells, for each hour: ICON-D2's
    # quarter hours are summed into their hour first.
    pop = first.pop.values
    assert np.nanmin(pop) >= 0 and np.nanmax(pop) <= 100
    assert np.isfinite(first.pop.sel(time="2026-11-20T01:00").values[[0, 1, 3]]).all()
    assert np.isnan(first.pop.sel(time="2026-11-20T00:15").values).all()
    assert first.pop.attrs["steps_minutes"][:2] == [60, 120]


def test_extracted_values_follow_the_truth_at_the_points(decoded):
    """Sea-level pressure (smooth, independent of the terrain) interpolated from the cells
    agrees with the sample's truth computed at the points themselves."""
    pts = points()
    out = interp.extract(decoded["icon-eu"], pts, [10.0])
    truth_grid = SimpleNamespace(columns=lambda: (pts.lats[:, None], pts.lons[:, None]))
    weather = Weather(ICON_EU, truth_grid, LandMask.load())
    init = datetime(2026, 11, 20, tzinfo=UTC)
    from pointcast.sample import hours_since_epoch

    for h in (0, 3, 6):
        truth = weather.surface(hours_since_epoch(init) + h, h, full=False)["msl"][:, 0]
        got = out.msl.sel(time=f"2026-11-20T{h:02d}:00").values
        np.testing.assert_allclose(got, truth, atol=120.0)  # Pa, at ~100 km spacing


# ------------------------------------------------------------------------------------------
# Visibility and the default configuration
# ------------------------------------------------------------------------------------------


def test_visibility_comes_from_ifs_at_every_step(decoded, cache):
    """ICON's v1 trees have no VIS: the blend takes visibility from the next model that has it
    (IFS), for every 15-minute step, also where ICON supplies everything else."""
    pts = points()
    src = SampleSource(scale=16, init=INIT, horizon_hours=6)
    ifs = src.fetch(src.discover(IFS, NOW), IFS, cache)
    ifs_ds = decode(ifs.files, IFS.fields, model="ifs")
    start = np.datetime64("2026-11-20T00:00", "ns")
    axis = interp.base_axis(start, start + np.timedelta64(6, "h") - interp.BASE_STEP)
    members = [(m, interp.resample(interp.extract(ds, pts, [10.0]), axis, pts.lats, pts.lons))
               for m, ds in (("icon-d2", decoded["icon-d2"]), ("icon-eu", decoded["icon-eu"]),
                             ("ifs", ifs_ds))]
    assert all("vis" not in ds for m, ds in members[:2]) and "vis" in members[2][1]
    series, used = blend.blend(members)
    assert np.isfinite(series.vis.values).all()
    assert set(used["vis"]) == {"ifs"} and set(used["t2m"]) == {"icon-d2"}


def test_the_default_cycle_reads_the_v1_tree(tmp_path):
    cfg = load_config(ROOT / "config" / "pointcast.toml")
    sid = cfg.models["icon-d2"].source
    src = make_source(sid, cfg.source_for("icon-d2"))
    assert src.icon_layout == "v1"
    small = SampleSource(scale=32, init=INIT, horizon_hours=1, icon_layout=src.icon_layout)
    fetched = small.fetch(small.discover(ICON_D2, NOW), ICON_D2, tmp_path)
    assert all("/v1/m/icon-d2/p/" in f.as_posix() for f in fetched.files)
    legacy = SampleSource(scale=32, init=INIT, horizon_hours=1, icon_layout="legacy")
    old = legacy.fetch(legacy.discover(ICON_D2, NOW), ICON_D2, tmp_path / "legacy")
    assert all("/icon-d2/grib/00/" in f.as_posix() for f in old.files)
    assert decode(old.files, ICON_D2.fields, model="icon-d2").t2m.dims == ("time", "lat", "lon")
    with pytest.raises(ValueError, match="icon_layout"):
        SampleSource(icon_layout="v2")


def test_upstream_tables_name_dwds_v1_files_first_then_the_legacy_tree():
    """The HTTP source's URL table (``sources/remote/``): the v1 layout first, without VIS,
    the run directory's colon percent-encoded; the legacy bz2 tree as the fallback."""
    from pointcast.sources.remote import run_files

    init = datetime(2026, 11, 20, 6, tzinfo=UTC)
    v1, legacy = ICON_EU.upstream.layouts
    assert (v1.name, legacy.name, legacy.compression) == ("v1", "legacy", "bz2")
    paths = [f.path for f in run_files(v1, ICON_EU, init, (timedelta(0), timedelta(hours=1)))]
    assert "v1/m/icon-eu/p/T_2M/r/2026-11-20T06%3A00/s/PT001H00M.grib2" in paths
    assert "v1/m/icon-eu/p/FI/lvt1/100/lv1/85000/r/2026-11-20T06%3A00/s/PT001H00M.grib2" in paths
    assert "v1/m/icon-eu/p/HSURF/r/2026-11-20T06%3A00/s/PT000H00M.grib2" in paths
    assert not [p for p in paths if "/VIS/" in p or "HSURF/r/2026-11-20T06%3A00/s/PT001" in p]
    old = [f.path for f in run_files(legacy, ICON_EU, init, (timedelta(hours=1),))]
    assert ("icon-eu/grib/06/vis/icon-eu_europe_regular-lat-lon_single-level_2026112006_001_"
            "VIS.grib2.bz2") in old


def test_each_points_list_is_profiled_at_its_own_heights(decoded):
    """Lists sharing a model's extraction (`extract`'s groups): each list's points get the
    values of an extraction at its heights alone, and NaN at the other lists' heights."""
    ds = decoded["icon-d2"]
    pts = points()  # four points: a list of three at the windpack's heights, one at 10 m
    heights = [10.0, 60.0, 100.0, 140.0]
    grouped = interp.extract(ds, pts, heights, [(3, heights), (1, [10.0])])
    whole = interp.extract(ds, pts, heights)
    assert list(grouped.height.values) == heights
    for name in ("wind_u", "wind_v", "air_temperature"):
        xr.testing.assert_identical(grouped[name].isel(point=slice(0, 3)), whole[name].isel(point=slice(0, 3)))
        xr.testing.assert_identical(grouped[name].isel(point=[3]).sel(height=[10.0]),
                                    whole[name].isel(point=[3]).sel(height=[10.0]))
        assert np.isnan(grouped[name].isel(point=3).sel(height=[60.0, 100.0, 140.0]).values).all()
    assert np.isfinite(whole.wind_u.isel(point=0).values).sum() >= 8  # the comparison compared values


def test_profiles_split_among_threads_are_those_of_one_thread(decoded, monkeypatch):
    """The profiles' times are split among `interp.vertical.PROFILE_THREADS` threads: the values are
    those of one thread, bit for bit."""
    ds, pts, heights = decoded["icon-d2"], points(), [10.0, 60.0, 100.0, 140.0]
    monkeypatch.setattr(interp.vertical, "PROFILE_THREADS", 1)
    one = interp.extract(ds, pts, heights)
    monkeypatch.setattr(interp.vertical, "PROFILE_THREADS", 3)
    three = interp.extract(ds, pts, heights)
    xr.testing.assert_identical(one, three)
    profiled = np.isfinite(three.wind_u.sel(height=60.0).values).any(axis=1)  # times with a profile
    assert profiled.sum() >= 3
