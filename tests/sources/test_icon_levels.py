"""ICON's model levels come from each run's HHL, whatever their count (sources/icon.py,
``remote.plan_model_levels``): a v1 tree of ICON-EU with 60 levels (its count before DWD's
upgrade to 74) is served by the loopback mirror; the source learns the count from HHL, asks
for the levels that span the hub heights and nothing above them, and the wind interpolated
from them to hub heights is the sample's known profile."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace
from urllib.parse import unquote

import numpy as np
import pytest

from mirror import Mirror, publish_sample, spanning_levels
from pointcast import interp
from pointcast.ingest import decode
from pointcast.sample import LandMask, Weather, flat_half_level_heights, hours_since_epoch
from pointcast.sources import ICON_EU, icon
from pointcast.sources.remote import HttpSource, SourceUnavailable

UTC = UTC
INIT = datetime(2026, 11, 20, tzinfo=UTC)
HOURS = 1
LEVELS = 60  # another count than today's 74


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The sample's ICON-EU run written with 60 levels (HHL on half levels 1-61)."""
    base = tmp_path_factory.mktemp("icon-levels")
    patch = pytest.MonkeyPatch()
    patch.setitem(icon.LEVEL_COUNTS, "icon-eu", LEVELS)
    flat_half_level_heights.cache_clear()
    try:
        files = publish_sample(base / "tree", base / "sample", "icon-eu", "2026-11-20T00:00Z",
                               horizon_hours=HOURS, icon_layout="v1")
    finally:
        patch.undo()
        flat_half_level_heights.cache_clear()
    return base, files


@pytest.fixture(scope="module")
def fetched(tree):
    base, _ = tree
    with Mirror(base / "tree") as mirror:
        src = HttpSource(name="mirror", mirrors=(mirror.url("dwd"),), wait_minutes=0.05,
                         retry_seconds=0.05, timeout_seconds=5.0, horizon_hours=HOURS,
                         progress=False)
        run = src.fetch(src.discover(ICON_EU, datetime(2026, 11, 20, 3, tzinfo=UTC)), ICON_EU,
                        base / "cache")
        return run, [unquote(r.path) for r in mirror.gets()]


def test_another_level_count_is_learnt_from_hhl(tree, fetched):
    _, sample_files = tree
    nlev, lowest, full = spanning_levels(sample_files)
    assert (nlev, lowest) == (LEVELS + 1, LEVELS)
    run, got = fetched
    level_of = re.compile(r"/p/(HHL|U|V)/lvt1/150/lv1/(\d+)/")
    asked = {}
    for path in got:
        if m := level_of.search(path):
            asked.setdefault(m[1], set()).add(int(m[2]))
    # HHL of half level 1 (the count), then from the surface up; U and V on the spanning
    # full levels only, none of the levels the sample also holds above them
    assert {1, *full, nlev} <= asked["HHL"] <= {1, *range(full[0] - 3, nlev + 1)}
    assert asked["U"] == asked["V"] == set(full)
    ds = decode(run.files, ICON_EU.fields, model="icon-eu")
    assert tuple(ds.mlev.values) == full and tuple(ds.hlev.values) == (*full, nlev)
    assert ds.u_ml.sizes["time"] == HOURS + 1


def test_hub_height_wind_is_the_known_profile(fetched):
    """At cell centres (no horizontal interpolation), the wind at 100 and 150 m from the 10 m
    wind and the model levels is the sample's log profile there, over flat land, sea and
    mountains alike."""
    run, _ = fetched
    ds = decode(run.files, ICON_EU.fields, model="icon-eu")
    orog = ds.orog.values
    cells = [int(np.argmin(np.where(orog == 0.0, np.abs(ds.clat.values - 50.0), np.inf))),
             int(np.argmin(np.abs(orog - 150.0))), int(np.argmax(orog))]
    assert orog[cells[-1]] > 1500.0  # the levels are compressed over these mountains
    lats, lons = ds.clat.values[cells], ds.clon.values[cells]
    pts = interp.PointSet(ids=np.array(["sea", "plain", "mountain"]), lats=lats, lons=lons,
                          elevation=np.full(3, np.nan))
    heights = (100.0, 150.0)
    out = interp.extract(ds, pts, [10.0, *heights])
    truth_grid = SimpleNamespace(columns=lambda: (lats[:, None], lons[:, None]))
    weather = Weather(ICON_EU, truth_grid, LandMask.load())
    for h in range(HOURS + 1):
        s = weather.surface(hours_since_epoch(INIT) + h, h)
        truth = weather.profile(s, heights, ())
        for z in heights:
            got = out.sel(time=f"2026-11-20T{h:02d}:00", height=z)
            tu, tv = truth[("u", z)][:, 0], truth[("v", z)][:, 0]
            speed = np.hypot(tu, tv)
            # the level heights matter: taking each full level at its upper half level
            # instead of halfway is off by 0.1-0.25 m/s
            np.testing.assert_allclose(np.hypot(got.wind_u, got.wind_v), speed, atol=0.02,
                                       err_msg=f"{h} h {z} m")
            turn = np.degrees(np.angle((got.wind_u.values + 1j * got.wind_v.values)
                                       / (tu + 1j * tv)))
            assert np.abs(turn).max() < 0.5, (h, z, turn)


def test_a_missing_optional_field_is_dropped_with_a_note(tree):
    """A tree without CLCL and without geopotential on pressure levels (optional: the
    products can go without them) still gives the run, found complete at once, fetched without
    retrying them and with a note; a missing required field (T_2M at one step) is still
    waited for."""
    base, _ = tree
    with Mirror(base / "tree") as mirror:
        for method in ("HEAD", "GET"):  # not there at all (FI at 700 hPa is the run's last file)
            mirror.fail(r"/p/(CLCL|FI)/", "404", times=None, method=method)
        src = HttpSource(name="mirror", mirrors=(mirror.url("dwd"),), wait_minutes=0.05,
                         retry_seconds=0.05, timeout_seconds=5.0, horizon_hours=HOURS,
                         progress=False)
        run = src.discover(ICON_EU, datetime(2026, 11, 20, 3, tzinfo=UTC))
        assert run.init == INIT and not run.notes  # not "still being published"
        fetched = src.fetch(run, ICON_EU, base / "cache-optional")
        missing = (HOURS + 1) * (1 + len(icon.PRESSURE_LEVELS))
        assert [r.status for r in mirror.gets("/p/(CLCL|FI)/")] == [404] * missing  # no retry
        (note,) = [n for n in fetched.notes if "not published" in n]
        assert "dropped: " in note and "CLCL (" in note and "FI level " in note
        ds = decode(fetched.files, ICON_EU.fields, model="icon-eu")
        assert not {"lcc", "z_pl"} & set(ds.data_vars)
        assert {"t2m", "tcc", "u_pl", "u_ml", "hhl"} <= set(ds.data_vars)
        # the same run again: from the cache, the dropped files not asked for again
        mirror.reset()
        again = src.fetch(run, ICON_EU, base / "cache-optional")
        assert again.files == fetched.files and mirror.gets() == []
        mirror.fail(r"/p/T_2M/r/.*/s/PT001H00M", "404", times=None)
        with pytest.raises(SourceUnavailable, match="T_2M"):
            src.fetch(run, ICON_EU, base / "cache-required")
