"""Resampling keeps totals and the sun's schedule; blending picks models by lead time."""

import numpy as np
import pytest
import xarray as xr

from pointcast import interp, physics
from pointcast.blend import SEAM, blend
from pointcast.interp import BASE_STEP, aggregate, base_axis, horizontal, resample, temporal, vertical

INIT = np.datetime64("2026-06-21T00:00", "ns")
LATS = np.array([48.85, 60.17])
LONS = np.array([2.35, 24.94])


def point_ds(var, values, steps_h, init=INIT, interval=True, extra_dims=()):
    times = init + (np.array(steps_h) * 3600).astype("timedelta64[s]")
    ds = xr.Dataset(coords={"time": times.astype("datetime64[ns]"), "point": ["paris", "helsinki"]})
    ds[var] = (("time", "point") + extra_dims, np.asarray(values, dtype=np.float32))
    if interval:
        ds[var].attrs["steps_minutes"] = [int(h * 60) for h in steps_h]
    ds.attrs["init"] = str(init.astype("datetime64[s]")) + "+00:00"
    return ds


def test_accumulation_totals_kept_from_irregular_steps():
    steps = [3, 6, 9, 12, 18, 24]
    amounts = np.array([[1.2, 0.0], [3.0, 0.6], [0.0, 0.3], [0.6, 0.0], [6.0, 1.2], [0.0, 2.4]])
    ds = point_ds("tp", amounts, steps)
    axis = base_axis(INIT, INIT + np.timedelta64(24, "h") - BASE_STEP)
    out = resample(ds, axis, LATS, LONS)
    np.testing.assert_allclose(out.tp.sum("time").values, amounts.sum(axis=0), rtol=1e-5)
    # The 3 h amount is spread evenly over its twelve quarter hours.
    np.testing.assert_allclose(out.tp.values[:12, 0], 0.1, rtol=1e-5)
    # Hourly aggregation keeps the totals too.
    hourly = aggregate(out, INIT, np.timedelta64(1, "h"), 24)
    np.testing.assert_allclose(hourly.tp.sum("time").values, amounts.sum(axis=0), rtol=1e-5)


def test_state_interpolation_is_monotone_and_exact_at_samples():
    steps = [0, 3, 6, 9]
    temps = np.array([[280.0, 270.0], [284.0, 271.0], [284.5, 275.0], [281.0, 275.0]])
    ds = point_ds("t2m", temps, steps, interval=False)
    axis = base_axis(INIT, INIT + np.timedelta64(9, "h"))
    out = resample(ds, axis, LATS, LONS)
    np.testing.assert_allclose(out.t2m.values[::12], temps, rtol=1e-6)
    # PCHIP does not overshoot the samples between them.
    seg = out.t2m.values[12:25, 0]
    assert seg.max() <= 284.5 + 1e-4 and seg.min() >= 284.0 - 1e-4
    # No extrapolation beyond the model's last step.
    longer = resample(ds, base_axis(INIT, INIT + np.timedelta64(10, "h")), LATS, LONS)
    assert np.isnan(longer.t2m.values[-1]).all()


def test_state_series_with_different_samples_are_each_interpolated_on_their_own():
    """Series with a missing sample are fitted apart from the others, as if alone."""
    steps = [0, 3, 6, 9]
    temps = np.array([[280.0, 270.0], [284.0, np.nan], [284.5, 275.0], [281.0, 275.0]])
    axis = base_axis(INIT, INIT + np.timedelta64(9, "h"))
    both = resample(point_ds("t2m", temps, steps, interval=False), axis, LATS, LONS).t2m.values
    for j in range(2):
        alone = point_ds("t2m", np.repeat(temps[:, [j]], 2, axis=1), steps, interval=False)
        np.testing.assert_array_equal(both[:, j], resample(alone, axis, LATS, LONS).t2m.values[:, 0])
    assert not np.isnan(both).any()


def test_radiation_zero_at_night_and_energy_kept():
    steps = list(range(3, 49, 3))
    axis = base_axis(INIT, INIT + np.timedelta64(48, "h") - BASE_STEP)
    clear = physics.clear_sky_ghi_mean(LATS, LONS, axis, 900.0)
    # 3-hour means of a 70 % clear-sky day.
    three = clear.reshape(16, 12, 2).mean(axis=1) * 0.7
    ds = point_ds("ssrd", three, steps)
    out = resample(ds, axis, LATS, LONS)
    np.testing.assert_allclose(out.ssrd.values.reshape(16, 12, 2).mean(axis=1), three, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(out.ssrd.values, 0.7 * clear, rtol=1e-4, atol=1e-3)
    night = clear <= 0
    assert night.any() and (out.ssrd.values[night] == 0).all()


def test_twilight_radiation_is_kept_where_the_clear_sky_is_dark():
    """A model's light at dawn and dusk (diffuse, where Haurwitz's clear sky is below 1 W/m2)
    is spread evenly over its interval, not dropped: every hour with sun keeps its mean. An
    hour of night stays dark (a model's mean there is packing noise)."""
    steps = list(range(1, 25))
    axis = base_axis(INIT, INIT + np.timedelta64(24, "h") - BASE_STEP)
    clear = physics.clear_sky_ghi_mean(LATS, LONS, axis, 900.0).reshape(24, 4, 2).mean(axis=1)
    means = np.where(clear > 0, np.maximum(0.7 * clear, 3.0), 0.5)  # 3 W/m2 of twilight
    out = resample(point_ds("ssrd", means, steps), axis, LATS, LONS)
    twilight, night = (clear > 0) & (clear <= 1.0), clear == 0
    assert twilight.any() and night.any()
    hourly = out.ssrd.values.reshape(24, 4, 2)
    day = ~night[:, None, :].repeat(4, axis=1)
    np.testing.assert_allclose(hourly.mean(axis=1)[~night], means[~night], rtol=1e-4)
    np.testing.assert_allclose(hourly.transpose(0, 2, 1)[twilight], 3.0, rtol=1e-6)  # flat
    assert (hourly[~day] == 0).all()  # night stays dark, whatever noise its mean carries


def test_gust_held_over_its_interval():
    ds = point_ds("gust", [[10.0, 5.0], [20.0, 7.0]], [1, 2])
    axis = base_axis(INIT, INIT + np.timedelta64(2, "h") - BASE_STEP)
    out = resample(ds, axis, LATS, LONS)
    np.testing.assert_allclose(out.gust.values[:, 0], [10] * 4 + [20] * 4)
    hourly = aggregate(out, INIT, np.timedelta64(1, "h"), 2)
    np.testing.assert_allclose(hourly.gust.values[:, 1], [5, 7])


def _member(values, n):
    times = base_axis(INIT, INIT + (n - 1) * BASE_STEP)
    ds = xr.Dataset({"t2m": (("time", "point"), values), "tp": (("time", "point"), values)},
                    coords={"time": times, "point": ["a", "b"]})
    return ds


def test_blend_priority_seam_and_fallback():
    n = 96  # 24 h
    hi = np.full((n, 2), 10.0)
    hi[48:, :] = np.nan  # the high-resolution model ends after 12 h
    hi[:, 1] = np.nan  # and does not cover point b at all (outside its domain)
    lo = np.full((n, 2), 20.0)
    out, used = blend([("hi", _member(hi, n)), ("lo", _member(lo, n))])
    t = out.t2m.values
    steps_in_seam = int(SEAM / BASE_STEP)
    assert (t[: 48 - steps_in_seam, 0] == 10).all()  # before the seam: high-res only
    assert (np.diff(t[47 - steps_in_seam:48, 0]) > 0).all()  # linear cross-fade
    assert (t[48:, 0] == 20).all() and (t[:, 1] == 20).all()
    # Interval quantities switch without fading.
    assert (out.tp.values[:48, 0] == 10).all() and (out.tp.values[48:, 0] == 20).all()
    assert used["tp"][0] == "hi" and used["tp"][-1] == "lo"


def test_blend_fades_each_series_over_the_end_of_its_own_span():
    """Series ending at different steps fade each over their own last SEAM, by the weight's
    formula, into the next model; a series without values takes the next model's."""
    n = 96
    times = base_axis(INIT, INIT + (n - 1) * BASE_STEP)
    hi = np.linspace(0.0, 9.5, n)[:, None].repeat(3, axis=1)
    ends = [30, 60]  # the first step without a value, points a and b; c has none
    hi[ends[0]:, 0], hi[ends[1]:, 1], hi[:, 2] = np.nan, np.nan, np.nan
    lo = np.full((n, 3), 20.0)
    members = [(m, xr.Dataset({"t2m": (("time", "point"), v)}, coords={"time": times, "point": ["a", "b", "c"]}))
               for m, v in (("hi", hi), ("lo", lo))]
    t = blend(members)[0].t2m.values
    step = np.arange(n)
    for j, end in enumerate(ends):
        weight = np.clip((end - 1 - step) / (SEAM / BASE_STEP), 0.0, 1.0)
        expected = np.where(step < end, weight * hi[:, j] + (1 - weight) * 20.0, 20.0)
        np.testing.assert_allclose(t[:, j], expected, rtol=1e-6)
    assert (t[:, 2] == 20).all()


def test_temperature_aloft_without_a_level_above_ground_follows_the_standard_lapse_rate():
    """High terrain where every published pressure level is below the surface: the 100 and
    200 m temperatures come from the 2 m one less 0.0065 K/m, not NaN (which failed the run)."""
    t2m = np.array([[280.0, 270.0]])  # (time, point)
    z_pl = np.array([[[110.0, 2100.0], [760.0, 2900.0]]])  # (time, plev, point), metres amsl
    t_pl = np.array([[[279.0, 275.0], [275.0, 271.0]]])
    orog = np.array([0.0, 3000.0])  # point 1 stands above both levels
    values = {"t2m": t2m, "u10": np.ones((1, 2)), "v10": np.ones((1, 2)), "z_pl": z_pl, "t_pl": t_pl}
    out = xr.Dataset(coords={"time": [np.datetime64("2026-11-20T00:00", "ns")], "point": ["a", "b"]})
    heights = np.array([10.0, 100.0, 200.0])
    vertical.profiles(out, values, xr.Dataset(), orog, heights, [(2, heights)])
    t = out["air_temperature"].values[0]  # (point, height)
    # Point a: between 2 m (280 K) and the 1000 hPa level 110 m above ground (279 K).
    np.testing.assert_allclose(t[0, 1], 280.0 + (279.0 - 280.0) * 98.0 / 108.0, rtol=1e-6)
    np.testing.assert_allclose(t[1, 1:], 270.0 - 0.0065 * np.array([98.0, 198.0]), rtol=1e-6)


def test_temperature_aloft_without_pressure_levels_follows_the_standard_lapse_rate():
    """A model with no pressure levels at all (JMA MSM surface files): 100/200 m temperatures
    are the 2 m temperature less 0.0065 K/m (0.637 K and 1.287 K below it), not NaN."""
    t2m = np.array([[280.0, 270.0], [281.0, 271.0]])
    values = {"t2m": t2m, "u10": np.ones((2, 2)), "v10": np.ones((2, 2))}
    out = xr.Dataset(coords={"time": INIT + np.arange(2) * np.timedelta64(1, "h"), "point": ["a", "b"]})
    heights = np.array([10.0, 100.0, 200.0])
    vertical.profiles(out, values, xr.Dataset(), np.zeros(2), heights, [(2, heights)])
    t = out["air_temperature"].values  # (time, point, height)
    np.testing.assert_allclose(t[..., 1], t2m - 0.637, rtol=1e-6)
    np.testing.assert_allclose(t[..., 2], t2m - 1.287, rtol=1e-6)


def test_wind_veering_between_steps_keeps_its_speed():
    """A steady 10 m/s wind veering from south (u=0, v=10) to west (u=10, v=0) over 3 h:
    interpolating u and v alone gives 7.07 m/s halfway; the speed stays 10 m/s, the direction
    turns monotonically, and the components are exact at the steps."""
    u = np.array([[0.0, 3.0], [10.0, 3.0]])
    v = np.array([[10.0, 4.0], [0.0, 4.0]])
    ds = point_ds("u10", u, [0, 3], interval=False)
    ds["v10"] = (("time", "point"), v.astype(np.float32))
    axis = base_axis(INIT, INIT + np.timedelta64(3, "h"))
    out = resample(ds, axis, LATS, LONS)
    speed = np.hypot(out.u10.values, out.v10.values)
    np.testing.assert_allclose(speed[:, 0], 10.0, rtol=1e-5)
    np.testing.assert_allclose(speed[:, 1], 5.0, rtol=1e-5)  # a steady wind stays as it is
    np.testing.assert_allclose(out.u10.values[[0, -1], 0], [0.0, 10.0], atol=1e-5)
    direction = physics.wind_direction(out.u10.values[:, 0], out.v10.values[:, 0])
    assert direction[0] == pytest.approx(180.0) and direction[-1] == pytest.approx(270.0)
    assert (np.diff(direction) > 0).all()


def test_gust_covers_the_window_its_message_states():
    """IFS to 90 h: the maximum at a 3-hourly step is that of the last hour only (stepRange
    2-3, 5-6); then 3-hour windows. The last hour holds its maximum, the hours between two
    windows the interpolation between the windows' maxima at their centres, the hours before
    the first window the first window's: a last-hour gust is not spread over three hours."""
    ds = point_ds("gust", [[12.0, 5.0], [18.0, 5.0], [15.0, 5.0]], [3, 6, 9])
    ds.gust.attrs["starts_minutes"] = [120, 300, 360]
    axis = base_axis(INIT, INIT + np.timedelta64(9, "h") - BASE_STEP)
    hourly = aggregate(resample(ds, axis, LATS, LONS), INIT, np.timedelta64(1, "h"), 9).gust.values[:, 0]
    between = [12.0 + 6.0 * (3.875 - 2.5) / 3.0, 12.0 + 6.0 * (4.875 - 2.5) / 3.0]
    np.testing.assert_allclose(hourly, [12, 12, 12, *between, 18, 15, 15, 15], rtol=1e-6)


def _grid_tp(amounts, steps_min):
    """tp (time, lat, lon) on a 0.1 degree grid around Paris, the same amount in every cell."""
    lat, lon = np.arange(48.0, 49.71, 0.1), np.arange(1.5, 3.21, 0.1)
    times = INIT + np.array(steps_min, dtype="timedelta64[m]")
    data = np.asarray(amounts, dtype=np.float32)[:, None, None] * np.ones((1, len(lat), len(lon)), np.float32)
    ds = xr.Dataset({"tp": (("time", "lat", "lon"), data, {"steps_minutes": list(steps_min)}),
                     "t2m": (("time", "lat", "lon"), np.full_like(data, 280.0))},
                    coords={"time": times.astype("datetime64[ns]"), "lat": lat, "lon": lon})
    ds.attrs["init"] = str(INIT.astype("datetime64[s]")) + "+00:00"
    return ds


def test_precipitation_probability_is_for_one_hour_whatever_the_model_interval():
    """pop is the share of neighbourhood cells with at least 0.1 mm in the hour: quarter hours
    (ICON-D2) are summed into their hour first, and an amount over 3 hours (IFS) counts as
    spread evenly (0.1 mm in each hour: 0.3 mm)."""
    points = interp.PointSet(np.array(["paris"]), np.array([48.85]), np.array([2.35]), np.array([np.nan]))
    # Hour 1: 0.08 mm in one quarter (wet by a 15-minute threshold, dry over the hour);
    # hour 2: 0.03 mm in each quarter (0.12 mm: wet).
    quarters = _grid_tp([0.0, 0.0, 0.08, 0.0, 0.03, 0.03, 0.03, 0.03], [15 * k for k in range(1, 9)])
    out = interp.extract(quarters, points, [10.0])
    assert out.pop.attrs["steps_minutes"] == [60, 120]
    np.testing.assert_allclose(out.pop.values[[3, 7], 0], [0.0, 100.0])
    hourly = aggregate(resample(out, base_axis(INIT, INIT + np.timedelta64(2, "h") - BASE_STEP), LATS[:1], LONS[:1]),
                       INIT, np.timedelta64(1, "h"), 2)
    np.testing.assert_allclose(hourly.pop.values[:, 0], [0.0, 100.0])
    three = interp.extract(_grid_tp([0.29, 0.3], [180, 360]), points, [10.0])
    np.testing.assert_allclose(three.pop.values[:, 0], [0.0, 100.0])


def test_a_model_without_snowfall_gets_it_from_the_temperature_ramp():
    """GFS and MSM publish no snowfall: extraction gives them precipitation times the snow
    fraction at the mean of the 2 m temperatures bounding each interval (all snow at <= 0.5
    degC, all rain at >= 2.5 degC): 1.5 degC on average is half snow."""
    ds = _grid_tp([0.0, 2.0, 2.0], [0, 60, 120])
    ds["t2m"].values[:] = np.array([273.15, 276.15, 278.15])[:, None, None]  # 0, 3, 5 degC
    points = interp.PointSet(np.array(["paris"]), np.array([48.85]), np.array([2.35]), np.array([np.nan]))
    out = interp.extract(ds, points, [10.0])
    np.testing.assert_allclose(out.sf.values[1:, 0], [2.0 * 0.5, 0.0], atol=1e-5)  # means 1.5 and 4 degC
    assert out.sf.attrs["steps_minutes"] == [0, 60, 120]


def test_the_weather_type_reads_one_kind_of_cape_for_the_whole_horizon():
    """Each model's CAPE is a canonical variable of its own parcel; the weather type reads the
    most unstable parcel's, IFS's, and IFS ends every European blend of the shipped config."""
    from pathlib import Path

    from pointcast import codes
    from pointcast.config import load_config
    from pointcast.sources import MODELS

    kinds = {m: [r.var for r in spec.fields if r.var.startswith("cape")] for m, spec in MODELS.items()
             if not spec.members}  # the ensembles' members feed probabilities and quantiles only
    assert kinds == {"ifs": ["cape_mu"], "icon-eu": ["cape_ml"], "icon-d2": ["cape_ml"],
                     "gfs": ["cape_sb"], "msm": []}
    assert codes.CAPE == "cape_mu"
    cfg = load_config(Path(__file__).resolve().parents[2] / "config" / "live.toml")
    assert all(pc.models[-1] == "ifs" for pid, pc in cfg.products.items() if pid.startswith("eu-"))


def test_quarter_hours_of_one_hour_stay_in_one_chunk():
    """Rows 1-4 and 5-8 are two hours of quarter hours: chunks of 3 rows move their cuts to
    the next hour's start, so a block holds its hours whole."""
    first = np.array([-1, -1, -1, -1, 1, -1, -1, -1, 5])
    assert horizontal._window_chunks(first, (3, 3, 3)) == (5, 4)
    assert horizontal._window_chunks(np.array([0, 1, 2, 3]), (2, 2)) == (2, 2)  # hourly: unchanged


def test_wind_direction_turns_the_short_way_across_the_branch_cut():
    """From a wind blowing towards 179.4 degrees (math angle) to one towards -179.4: 1.1
    degrees apart, not 358.9; numpy's unwrap also holds across missing samples."""
    u = np.array([[-10.0, -10.0], [-10.0, -10.0]])
    v = np.array([[0.1, 0.1], [-0.1, -0.1]])
    ds = point_ds("u10", u, [0, 3], interval=False)
    ds["v10"] = (("time", "point"), v.astype(np.float32))
    out = resample(ds, base_axis(INIT, INIT + np.timedelta64(3, "h")), LATS, LONS)
    assert (out.u10.values[:, 0] < -9.99).all()
    angles = np.radians([[170.0], [np.nan], [-170.0], [175.0], [np.nan], [-100.0]])
    finite = ~np.isnan(angles[:, 0])
    np.testing.assert_allclose(temporal._unwrapped(angles)[finite], np.unwrap(angles[finite], axis=0))


def test_member_statistics_made_a_part_of_the_points_at_a_time_are_the_whole(monkeypatch):
    """An ensemble's members are resampled and reduced to their statistics a few points at a
    time (`build.MEMBER_STATISTICS_BYTES`: the members on the 15-minute axis at every height
    of a slice would be gigabytes): one point a part gives what all points at once give."""
    from pointcast import build

    rng = np.random.default_rng(7)
    init = np.datetime64("2026-11-20T00:00", "ns")
    steps = np.array([0, 180, 360, 540, 720])
    n_member, n_point, heights = 5, 7, [10.0, 100.0]
    shape = (len(steps), n_member, n_point)
    tp = np.cumsum(rng.gamma(0.5, 1.0, shape), axis=0)
    tp[0] = 0.0
    ds = xr.Dataset(
        {"t2m": (("time", "member", "point"), 275.0 + rng.normal(0, 2, shape)),
         "tp": (("time", "member", "point"), np.diff(tp, axis=0, prepend=0.0), {"steps_minutes": steps[1:].tolist()}),
         "wind_u": (("time", "member", "point", "height"), rng.normal(0, 5, shape + (2,))),
         "wind_v": (("time", "member", "point", "height"), rng.normal(0, 5, shape + (2,)))},
        coords={"time": init + steps.astype("timedelta64[m]"), "member": np.arange(n_member),
                "point": [f"p{j}" for j in range(n_point)], "height": heights},
        attrs={"init": "2026-11-20T00:00:00+00:00"})
    ds["tp"][0] = np.nan
    where = interp.PointSet(ds.point.values, np.linspace(40, 50, n_point), np.linspace(0, 10, n_point),
                            np.full(n_point, np.nan))
    axis = base_axis(init, init + np.timedelta64(12, "h") - BASE_STEP)
    whole = build._member_statistics(ds, axis, where, want_members=True)
    monkeypatch.setattr(build, "MEMBER_STATISTICS_BYTES", 1)
    parts = build._member_statistics(ds, axis, where, want_members=True)
    assert set(whole.data_vars) == {"pop_ens", "tp_q", "tp_members", "t2m_q", "wspd_q"}
    xr.testing.assert_identical(parts, whole)


def test_member_quantiles_are_numpys_linear_quantiles_and_nan_where_a_member_is_missing():
    """The quantiles over the members (sorted, not partitioned: `ensemble.quantiles`) are
    numpy's default (Hyndman and Fan's type 7) at every time, point and height, ties and
    51 members included, and NaN wherever one member is."""
    from pointcast import ensemble

    rng = np.random.default_rng(3)
    values = rng.normal(280.0, 3.0, (6, 51, 4, 2)).astype(np.float32)
    values[1, :, 0] = 281.5  # every member alike
    values[2, :20, 1] = 279.0  # ties
    values[4, 7, 2, 1] = np.nan  # one member missing at one point and height
    da = xr.DataArray(values, dims=("time", "member", "point", "height"),
                      coords={"member": np.arange(51), "height": [10.0, 100.0]})
    q = ensemble.quantiles(da.transpose("member", "point", "time", "height"),
                            xr.DataArray(list(ensemble.QUANTILES), dims="quantile"))
    assert q.dims == ("time", "quantile", "point", "height")
    assert q["quantile"].values.tolist() == list(ensemble.QUANTILES)
    expected = np.moveaxis(np.quantile(values.astype(np.float64), ensemble.QUANTILES, axis=1), 0, 1)
    np.testing.assert_allclose(q.values, expected, rtol=0, atol=1e-4)
    assert np.isnan(q.values[4, :, 2, 1]).all() and np.isfinite(np.delete(q.values, 4, axis=0)).all()
