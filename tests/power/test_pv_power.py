"""PV power against known truth: the SPA paper's sun, the sun at the middle of the interval,
the Erbs decomposition, the Sandia/PVWatts equations evaluated by hand, night, clipping at the
AC limit and the azimuth convention."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pvlib
import pytest

from pointcast.config import PV_MOUNTINGS
from pointcast.power import pv

HOUR = np.timedelta64(1, "h")
PLANT = dict(tilt=30.0, azimuth=180.0, dc_kwp=1000.0, ac_kw=800.0, losses_pct=14.0, temp_coeff_pct=-0.35,
             mounting="open_rack_glass_polymer")


def day(date: str = "2024-06-21") -> np.ndarray:
    start = np.datetime64(f"{date}T00:00")
    return np.arange(start, start + np.timedelta64(24, "h"), HOUR)


def test_spa_paper_example():
    # Reda and Andreas (2004), the SPA's reference example: 17 October 2003 12:30:30 MST (-7 h),
    # 39.742476 N 105.1786 W: azimuth 194.34024, topocentric zenith 50.11162 degrees (with
    # refraction at 820 hPa and 11 degC, and delta T 67 s, where pointcast takes 1013.25 hPa,
    # 12 degC and pvlib's delta T: a few thousandths of a degree apart).
    start = np.array([np.datetime64("2003-10-17T19:30:00")])
    sun = pv.solar_geometry([39.742476], [-105.1786], start, np.timedelta64(61, "s"))
    assert sun.azimuth[0, 0] == pytest.approx(194.34024, abs=0.01)
    assert sun.apparent_zenith[0, 0] == pytest.approx(50.11162, abs=0.01)
    assert sun.zenith[0, 0] > sun.apparent_zenith[0, 0]  # refraction lifts the sun


def test_sun_at_the_middle_of_each_interval():
    starts = day()
    sun = pv.solar_geometry([48.1, 35.7], [11.6, 139.7], starts, HOUR)
    assert sun.zenith.shape == (2, 24)
    for k, (lat, lon) in enumerate([(48.1, 11.6), (35.7, 139.7)]):
        middle = pd.DatetimeIndex(starts + np.timedelta64(30, "m"), tz="UTC")
        ref = pvlib.solarposition.get_solarposition(middle, lat, lon, method="nrel_numpy")
        np.testing.assert_allclose(sun.apparent_zenith[k], ref["apparent_zenith"].values, atol=1e-3)
        np.testing.assert_allclose(sun.azimuth[k], ref["azimuth"].values, atol=1e-3)
        ends = pvlib.solarposition.get_solarposition(middle + pd.Timedelta("30min"), lat, lon, method="nrel_numpy")
        assert np.abs(sun.zenith[k] - ends["zenith"].values).max() > 5.0  # the end of the hour is not the middle


def test_night_is_zero_and_nan_stays_nan():
    starts = day()
    sun = pv.solar_geometry([48.1], [11.6], starts, HOUR)
    night = sun.zenith[0] > 90.0
    ghi = np.where(night, 0.0, 300.0)[None, :]
    ac = pv.plant_ac_kw(ghi, np.full(ghi.shape, 15.0), np.full(ghi.shape, 2.0), sun, **PLANT)
    assert night.sum() >= 5 and (ac[0, night] == 0.0).all()
    assert (ac[0, sun.apparent_zenith[0] < 85.0] > 10.0).all()
    ghi[0, 12] = np.nan
    assert np.isnan(pv.plant_ac_kw(ghi, 15.0, 2.0, sun, **PLANT)[0, 12])


def test_clipping_at_the_ac_limit():
    starts = day()
    sun = pv.solar_geometry([40.0], [0.0], starts, HOUR)
    ghi = np.clip(1000.0 * np.cos(np.radians(sun.zenith)), 0.0, None)
    ac = pv.plant_ac_kw(ghi, 10.0, 5.0, sun, **{**PLANT, "dc_kwp": 1500.0})
    assert ac.max() == pytest.approx(800.0, abs=1e-9) and (ac[0, 10:14] == pytest.approx(800.0))
    assert (ac <= 800.0 + 1e-9).all()


def test_south_facing_beats_north_facing_at_noon():
    starts = np.array([np.datetime64("2024-03-20T11:30")])  # local noon near 0 E, the hour around it
    sun = pv.solar_geometry([48.0, -33.0], [0.0, 0.0], starts, HOUR)
    ghi = np.array([[600.0], [700.0]])
    beam = np.array([[450.0], [550.0]])
    south = pv.plant_ac_kw(ghi, 15.0, 2.0, sun, direct_horizontal=beam, **PLANT)
    north = pv.plant_ac_kw(ghi, 15.0, 2.0, sun, direct_horizontal=beam, **{**PLANT, "azimuth": [0.0, 0.0]})
    assert south[0, 0] > 1.3 * north[0, 0]  # northern hemisphere: facing south (180) wins
    assert north[1, 0] > 1.3 * south[1, 0]  # southern hemisphere: facing north (0) wins


def test_diffuse_on_a_horizontal_plant_by_hand():
    # Horizontal modules under diffuse light only: the plane of array receives the diffuse
    # horizontal irradiance whole (Perez's sky terms add up to it at tilt 0) and no beam, so
    # every later step is a published equation evaluated here by hand.
    starts = np.array([np.datetime64("2024-06-21T11:00")])
    sun = pv.solar_geometry([48.1], [11.6], starts, HOUR)
    e, t_air, ws = 400.0, 22.0, 3.0
    ac = pv.plant_ac_kw(np.array([[e]]), t_air, ws, sun, direct_horizontal=np.array([[0.0]]),
                        **{**PLANT, "tilt": 0.0, "dc_kwp": 100.0, "ac_kw": 90.0})
    a, b, delta_t = -3.56, -0.075, 3.0  # Sandia, open rack, glass/polymer (King et al. 2004)
    t_cell = e * math.exp(a + b * ws) + t_air + e / 1000.0 * delta_t
    dc = 100.0 * e / 1000.0 * (1.0 - 0.0035 * (t_cell - 25.0)) * (1.0 - 0.14)  # PVWatts v5 DC, 14 % losses
    pdc0 = 90.0 / 0.96  # the inverter's DC rating so that it delivers 90 kW AC
    zeta = dc / pdc0
    eta = 0.96 / 0.9637 * (-0.0162 * zeta - 0.0059 / zeta + 0.9858)  # PVWatts v5 inverter (Dobos 2014)
    assert round(t_cell, 2) == 32.28
    assert ac[0, 0] == pytest.approx(eta * dc, rel=1e-9)


def test_global_only_is_split_by_erbs():
    # Where a product has global radiation only, the direct part is Erbs' (1982): the same power
    # as when the direct part computed from Erbs' diffuse fraction is given.
    starts = day()[8:16]
    sun = pv.solar_geometry([48.1], [11.6], starts, HOUR)
    ghi = np.array([[250.0, 450.0, 650.0, 750.0, 800.0, 700.0, 500.0, 300.0]])
    kt = pvlib.irradiance.clearness_index(ghi, sun.zenith, sun.dni_extra)
    erbs = np.where(kt <= 0.22, 1.0 - 0.09 * kt,
                    np.where(kt <= 0.8, 0.9511 - 0.1604 * kt + 4.388 * kt**2 - 16.638 * kt**3 + 12.336 * kt**4,
                             0.165))  # Erbs, Klein and Duffie (1982), eq. 1
    split = pv.plant_ac_kw(ghi, 20.0, 3.0, sun, **PLANT)
    given = pv.plant_ac_kw(ghi, 20.0, 3.0, sun, direct_horizontal=ghi * (1.0 - erbs), **PLANT)
    # Erbs-Driesse differs from Erbs' fraction by less than 0.0005 (Driesse et al. 2024)
    np.testing.assert_allclose(split, given, rtol=0.003)


def test_members_share_the_geometry_and_mountings_per_site():
    starts = day()
    sun = pv.solar_geometry([48.1, 52.5], [11.6, 13.4], starts, HOUR)
    ghi = np.clip(800.0 * np.cos(np.radians(sun.zenith)), 0.0, None)
    members = np.stack([ghi, 0.5 * ghi, ghi], axis=-1)  # (site, time, member)
    plant = {**PLANT, "mounting": ["open_rack_glass_polymer", "insulated_back_glass_polymer"]}
    ac = pv.plant_ac_kw(members, 25.0, 1.0, sun, **plant)
    assert ac.shape == (2, 24, 3)
    np.testing.assert_array_equal(ac[..., 0], pv.plant_ac_kw(ghi, 25.0, 1.0, sun, **plant))
    np.testing.assert_array_equal(ac[..., 0], ac[..., 2])
    assert ac[..., 0].max() > ac[..., 1].max() > 0
    # an insulated back runs hotter than an open rack: less power at the same light
    one = {**PLANT, "mounting": "insulated_back_glass_polymer"}
    hot = pv.plant_ac_kw(ghi[:1] * 0.7, 25.0, 1.0, sun, **one)
    cool = pv.plant_ac_kw(ghi[:1] * 0.7, 25.0, 1.0, sun, **PLANT)
    assert (hot <= cool + 1e-9).all() and (hot < cool).any()


def test_config_mountings_are_pvlibs_sapm_sets():
    assert set(PV_MOUNTINGS) <= set(pvlib.temperature.TEMPERATURE_MODEL_PARAMETERS["sapm"])
