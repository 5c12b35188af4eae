"""The extraction a block of time steps at a time, into scratch stores (`interp.scratch`): the
series of many small blocks, written and read back a build slice at a time, are those of one
block, bit for bit; blocks shrink as the points grow; scratch directories go with their cycle
and retention removes what a killed one left."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import pointcast  # noqa: F401  (PROJ before ecCodes)
from pointcast import ingest, interp, physics
from pointcast.ingest import decode
from pointcast.interp import horizontal, scratch
from pointcast.publish.retention import retain_scratch
from pointcast.sample import SampleSource
from pointcast.sources import ICON_D2, MSM

INIT = np.datetime64("2026-11-20T00:00", "ns")
HEIGHTS = [10.0, 60.0, 100.0]


def _points(n: int, box: tuple[float, float, float, float], seed: int = 1) -> interp.PointSet:
    rng = np.random.default_rng(seed)
    elevation = np.where(rng.random(n) < 0.5, rng.uniform(0.0, 1500.0, n), np.nan)
    return interp.PointSet(np.array([f"p{i}" for i in range(n)]), rng.uniform(box[0], box[1], n),
                           rng.uniform(box[2], box[3], n), elevation)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """MSM (humidity for dewpoint, no orography, no snowfall: the steps carried from block to
    block) over 36 h, and ICON-D2 (quarter-hour precipitation in hourly windows, model
    levels) over 6 h, decoded."""
    cache = tmp_path_factory.mktemp("cache")
    now = datetime(2026, 11, 20, 5, tzinfo=UTC)
    out = {}
    for model, hours, box in ((MSM, 36, (33.0, 40.0, 132.0, 140.0)), (ICON_D2, 6, (47.0, 54.0, 6.0, 14.0))):
        src = SampleSource(scale=16, init="2026-11-20T00:00Z", horizon_hours=hours)
        fetched = src.fetch(src.discover(model, now), model, cache)
        out[model.id] = (decode(fetched.files, model.fields, model=model.id), _points(40, box))
        out[model.id + " files"] = fetched.files
    return out


@pytest.mark.parametrize("model", ["msm", "icon-d2"])
def test_small_blocks_written_and_read_by_slice_are_the_one_block_series(runs, model, tmp_path, monkeypatch):
    """Blocks of one decode block of steps, made in pieces of a step and of a few points (a
    points list's cut across), profiles a step at a time (`vertical._by_rows`), each list's
    store read a build slice at a time: the series of one block."""
    ds, pts = runs[model]
    groups = [(25, HEIGHTS), (15, [10.0])]  # two points lists sharing the extraction
    whole = interp.extract(ds, pts, HEIGHTS, groups)
    monkeypatch.setattr(interp.vertical, "PROFILE_PART_BYTES", 1)
    made = []  # the points of each piece
    series = horizontal._series
    monkeypatch.setattr(horizontal, "_series", lambda values, ds, times, points, *rest:
                        made.append((len(times), len(points))) or series(values, ds, times, points, *rest))
    blocks = list(interp.extract_blocks(ds, pts, HEIGHTS, groups, block_bytes=1000))
    assert {steps for steps, _ in made} == {1} and 1 < max(n for _, n in made) < 16
    assert len(blocks) >= 16 and blocks[0][0] == slice(0, 1)  # a step each
    small = xr.concat([b for _, b in blocks], "time", combine_attrs="override")
    xr.testing.assert_identical(small, whole)
    assert {n: v.attrs for n, v in small.variables.items()} == {n: v.attrs for n, v in whole.variables.items()}
    if model == "msm":
        assert {"d2m", "sf"} <= set(whole.data_vars) and "rh2m" not in whole

    parts = [scratch.Part(str(tmp_path / "0"), slice(0, 25), HEIGHTS, 10),
             scratch.Part(str(tmp_path / "1"), slice(25, 40), [10.0], 10)]
    monkeypatch.setattr(scratch, "WRITE_BYTES", 1)  # a chunk of points written at a time, a block of steps read
    scratch.write(iter(blocks), ds.time.values, parts)
    for part in parts:
        series = zarr.open_array(os.path.join(part.path, scratch.SERIES), mode="r")
        width = sum(len(part.heights) if "height" in v.dims else 1 for v in whole.data_vars.values())
        # a part's steps, every variable at every height of the part, a build slice's points
        assert series.shape == (ds.sizes["time"], width, part.points.stop - part.points.start)
        assert series.chunks == (1, width, 10)
        expected = whole.isel(point=part.points).sel(height=list(part.heights))
        for points in (slice(0, 10), slice(10, 20), slice(20, 25)):
            got = scratch.load(part.path, points)
            xr.testing.assert_identical(got, expected.isel(point=points))
            assert {n: (v.dtype, v.attrs) for n, v in got.variables.items()} == \
                   {n: (v.dtype, v.attrs) for n, v in expected.isel(point=points).variables.items()}


def test_many_points_decode_blocks_of_fewer_steps_each_message_once(runs, monkeypatch):
    """Decoded for many points (`ingest.decode`'s ``points``), ICON-D2's run comes in blocks of
    two steps instead of eight: extracted a decode block at a time, every message is decoded
    once (a difference's message at a block's first step and the precipitation windows across
    two blocks are handed on), and the series are those of one block."""
    ds, pts = runs["icon-d2"]
    whole = interp.extract(ds, pts, HEIGHTS)
    planes = sum(int(np.prod([ds.sizes[d] for d in v.dims if d not in ("time", "lat", "lon", "cell")]))
                 for v in ds.data_vars.values() if "time" in v.dims)
    many = decode(runs["icon-d2 files"], ICON_D2.fields, model="icon-d2",
                  points=ingest.BLOCK_BYTES // (4 * 2 * planes))
    assert ds.t2m.data.chunks[0][0] > 2 and set(many.t2m.data.chunks[0][:-1]) == {2}
    decoded = []
    read = ingest.values.read_values
    monkeypatch.setattr(ingest.values, "read_values", lambda path, offset, *rest, **kw:
                        decoded.append((path, offset, kw.get("parts"))) or read(path, offset, *rest, **kw))
    computed = []  # the blocks of fields computed at once
    blocks_of = horizontal._computed
    monkeypatch.setattr(horizontal, "_computed", lambda timed, blocks: computed.extend(blocks) or blocks_of(timed, blocks))
    parts = list(interp.extract_blocks(many, pts, HEIGHTS, block_bytes=1000))
    assert len(computed) > 4 and {rows.stop - rows.start for rows in computed[:-1]} == {2}
    assert len(decoded) == len(set(decoded)) > 0
    small = xr.concat([b for _, b in parts], "time", combine_attrs="override")
    xr.testing.assert_identical(small, whole)


def test_snowfall_takes_the_temperature_at_an_interval_start_from_the_block_before():
    """Quarter-hour precipitation over a 2 m temperature crossing the snow ramp, extracted a
    step a block: each interval's snow fraction is that of the mean of the temperatures at
    its start (the block before) and end, and the blocks give the one-block series."""
    lat, lon = np.arange(48.0, 49.71, 0.1), np.arange(1.5, 3.21, 0.1)
    steps = [15 * k for k in range(1, 9)]
    t_c = np.array([0.0, 2.0, 3.0, 1.0, 2.0, 0.0, 3.0, 1.0])
    ones = np.ones((len(steps), len(lat), len(lon)), np.float32)
    ds = xr.Dataset({"tp": (("time", "lat", "lon"), 2.0 * ones, {"steps_minutes": steps}),
                     "t2m": (("time", "lat", "lon"), (273.15 + t_c)[:, None, None].astype(np.float32) * ones)},
                    coords={"time": (INIT + np.array(steps, dtype="timedelta64[m]")).astype("datetime64[ns]"),
                            "lat": lat, "lon": lon}, attrs={"init": "2026-11-20T00:00:00+00:00"})
    pts = interp.PointSet(np.array(["paris"]), np.array([48.85]), np.array([2.35]), np.array([np.nan]))
    blocks = list(interp.extract_blocks(ds, pts, [10.0], block_bytes=1))
    assert [rows for rows, _ in blocks] == [slice(k, k + 1) for k in range(len(steps))]
    sf = np.concatenate([b.sf.values[:, 0] for _, b in blocks])
    t = (273.15 + t_c.astype(np.float32)).astype(np.float64) - 273.15
    mean = np.concatenate([[t[0]], 0.5 * (t[:-1] + t[1:])])  # the first interval starts off the axis
    np.testing.assert_allclose(sf, 2.0 * physics.snow_fraction(mean), rtol=1e-6)
    # The start's temperature counted: the end's alone would give another fraction.
    assert 0.0 < sf[1] < 2.0 and sf[1] != pytest.approx(2.0 * physics.snow_fraction(t[1]))
    np.testing.assert_array_equal(sf, interp.extract(ds, pts, [10.0]).sf.values[:, 0])


def test_blocks_have_fewer_steps_the_more_points():
    """The budgets are in bytes: ten times the points, about a tenth of the steps, within the
    budget, down to one decode block of steps of fields and one step of series, then pieces
    of fewer points."""
    budget = 64 << 20

    def steps(n: int) -> tuple[int, int]:
        timed = {"t2m": da.zeros((600, n), chunks=(4, n)), "u_pl": da.zeros((600, 5, n), chunks=(4, 1, n))}
        blocks, part, (steps, points) = horizontal._time_blocks(timed, 600, n, len(HEIGHTS), budget)
        rows = blocks[0].stop
        fields, series, making = horizontal._row_bytes(timed, n, len(HEIGHTS))
        assert rows % 4 == 0 and rows % part == 0 and part % steps == 0  # whole decode blocks, parts, pieces
        assert rows == 4 or rows * fields <= budget
        assert part == 1 or part * series <= 2 * budget
        assert steps * making * points // n <= 2 * budget or points == 1
        return rows, part, steps, points

    assert [steps(n) for n in (10_000, 100_000, 1_000_000, 10_000_000)] == \
           [(276, 138, 69, 10_000), (24, 12, 6, 100_000), (4, 2, 1, 1_000_000), (4, 1, 1, 1_016_800)]


def test_a_cycles_scratch_goes_with_it_and_retention_removes_a_killed_ones(tmp_path):
    cache = tmp_path / "cache"
    killed = scratch.directory(cache, "20261120T0000Z-killed")
    (killed / "ifs" / "0-europe.zarr").mkdir(parents=True)
    old = time.time() - 3600
    os.utime(killed, (old, old))
    with scratch.held(scratch.directory(cache, "20261120T0300Z-live")) as live:
        (live / "ifs").mkdir()
        os.utime(live, (old, old))
        with pytest.raises(RuntimeError, match="another cycle"):
            with scratch.held(live):
                pass
        assert retain_scratch(cache) == [killed]
        assert live.is_dir() and not killed.exists()
    assert not live.exists()
    with pytest.raises(ValueError):
        with scratch.held(live) as again:  # a cycle that fails: its scratch goes too
            (again / "ifs").mkdir()
            raise ValueError("failed")
    assert not live.exists()


@pytest.mark.parametrize("model", ["msm", "icon-d2"])
def test_points_extracted_apart_have_the_values_of_one_extraction(runs, model):
    """What blocks of points would rest on: a point's series do not depend on the other
    points. `vertical._rows_with_levels` profiles the steps where two levels have a value at
    any point, but a profile with fewer than two valid levels is NaN at every height
    whatever steps are profiled (`physics._bracket`), so points extracted apart, a block of
    points outside the grid among them (no step profiled), give the same values bit for bit."""
    ds, pts = runs[model]
    outside = (10.0, 100.0)  # off both models' domains
    pts = interp.PointSet(np.append(pts.ids, ["out0", "out1"]), np.append(pts.lats, [outside[0]] * 2),
                          np.append(pts.lons, [outside[1], outside[1] + 1.0]), np.append(pts.elevation, [np.nan, 50.0]))
    whole = interp.extract(ds, pts, HEIGHTS)
    apart = [interp.extract(ds, interp.PointSet(*(getattr(pts, f)[s] for f in ("ids", "lats", "lons", "elevation"))),
                            HEIGHTS) for s in (slice(0, 17), slice(17, 40), slice(40, 42))]
    assert np.isnan(apart[2].wind_u.values).all() and not np.isnan(whole.wind_u.values).all()
    xr.testing.assert_identical(xr.concat(apart, "point", combine_attrs="override"), whole)


def test_an_ensembles_members_share_the_ground_their_control_gives():
    """GEFS's files carry no ground height: it comes from the control's analysis pressures by
    the hypsometric equation (`surface_height`), and every member's temperature is moved from
    that one ground to the point's elevation, so members 3 K apart at the grid stay 3 K apart
    at the point (a member's own warmer column would put its ground higher)."""
    lat, lon = np.arange(45.0, 46.01, 0.25), np.arange(6.0, 7.01, 0.25)
    steps = [0, 180]
    shape = (len(steps), len(lat), len(lon))
    ground, t_c = 1500.0, 280.0
    msl = np.full(shape, 101325.0, np.float32)
    # the control's analysis: surface pressure at 1500 m under a 280 K screen temperature
    sp_0 = float(101325.0 * np.exp(-physics.G * ground / (physics.RD * (t_c + 0.5 * physics.LAPSE_RATE * ground))))
    sp = np.where(np.arange(len(steps))[:, None, None] == 0, sp_0, np.nan) * np.ones(shape)

    def member(dt: float) -> xr.Dataset:
        return xr.Dataset({"t2m": (("time", "lat", "lon"), np.full(shape, t_c + dt, np.float32)),
                           "sp": (("time", "lat", "lon"), sp.astype(np.float32), {"steps_minutes": [0]}),
                           "msl": (("time", "lat", "lon"), msl)},
                          coords={"time": (INIT + np.array(steps, dtype="timedelta64[m]")).astype("datetime64[ns]"),
                                  "lat": lat, "lon": lon}, attrs={"init": "2026-11-20T00:00:00+00:00"})

    pts = interp.PointSet(np.array(["valley"]), np.array([45.5]), np.array([6.5]), np.array([500.0]))
    blocks = list(interp.extract_members([(0, member(0.0)), (1, member(3.0))], pts, [10.0], None, ["t2m"]))
    t2m = np.concatenate([b.t2m.values for _, b in blocks])  # (time, member, point)
    lapse = physics.LAPSE_RATE * (ground - 500.0)  # 1000 m lower: 6.5 K warmer
    np.testing.assert_allclose(t2m[:, 0, 0], t_c + lapse, atol=0.05)
    np.testing.assert_allclose(t2m[:, 1, 0] - t2m[:, 0, 0], 3.0, atol=1e-4)
