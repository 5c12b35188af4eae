"""Tests of pointcast.physics against MetPy (test-only oracle) and published values."""

import metpy.calc as mpcalc
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, strategies as st
from metpy.units import units

from pointcast import physics

T_GRID = np.arange(-40.0, 45.1, 2.5) + 273.15


# --- moisture and density ---------------------------------------------------------


def test_saturation_vapour_pressure_bolton_anchor():
    # Bolton (1980) eq. 10 is anchored at 6.112 hPa at 0 degC.
    assert physics.saturation_vapour_pressure(273.15) == pytest.approx(611.2, rel=1e-12)


@pytest.mark.parametrize(
    ("t_c", "es_pa"),
    # CRC Handbook of Chemistry and Physics, vapour pressure of water (IAPWS-95).
    [(10.0, 1228.2), (20.0, 2339.3), (25.0, 3169.9), (30.0, 4247.0), (40.0, 7384.9)],
)
def test_saturation_vapour_pressure_published_table(t_c, es_pa):
    # Bolton claims 0.1 % accuracy between -35 and 35 degC; 0.14 % at 40 degC.
    assert physics.saturation_vapour_pressure(t_c + 273.15) == pytest.approx(es_pa, rel=1.5e-3)


def test_saturation_vapour_pressure_matches_metpy():
    # MetPy >= 1.7 uses Ambaum (2020) instead of Bolton: the two agree within 0.8 % here.
    ours = physics.saturation_vapour_pressure(T_GRID)
    oracle = mpcalc.saturation_vapor_pressure(T_GRID * units.K).m_as("Pa")
    np.testing.assert_allclose(ours, oracle, rtol=8e-3)


def test_relative_humidity_matches_metpy():
    # Bolton's range (-30..40 degC, depressions up to 20 K); the two formulas for es
    # differ by up to 1 % in the ratio there.
    t, depression = np.meshgrid(np.arange(-30.0, 40.1, 2.5) + 273.15, np.arange(0.0, 20.1, 2.5))
    td = t - depression
    ours = physics.relative_humidity(t, td)
    oracle = mpcalc.relative_humidity_from_dewpoint(t * units.K, td * units.K).m_as("")
    np.testing.assert_allclose(ours, oracle, rtol=1e-2)
    # 20 degC with a 10 degC dewpoint: 52.5 %.
    assert physics.relative_humidity(293.15, 283.15) == pytest.approx(0.525, abs=1e-3)


def test_relative_humidity_saturated_and_clipped():
    assert physics.relative_humidity(280.0, 280.0) == 1.0
    assert physics.relative_humidity(280.0, 280.2) == 1.0
    assert 0.0 < physics.relative_humidity(280.0, 230.0) < 0.02


def test_mixing_ratio_matches_metpy():
    p = np.array([101325.0, 85000.0, 70000.0, 50000.0])
    td = np.array([295.0, 285.0, 270.0, 250.0])
    e = physics.saturation_vapour_pressure(td)
    exact = mpcalc.mixing_ratio(e * units.Pa, p * units.Pa, molecular_weight_ratio=0.622).m_as("")
    np.testing.assert_allclose(physics.mixing_ratio(p, td), exact, rtol=1e-12)
    chain = mpcalc.saturation_mixing_ratio(p * units.Pa, td * units.K).m_as("")
    np.testing.assert_allclose(physics.mixing_ratio(p, td), chain, rtol=1e-2)
    # Tropical surface air: Td 22 degC at 1000 hPa holds about 16.8 g/kg.
    assert physics.mixing_ratio(100000.0, 295.15) == pytest.approx(0.0168, abs=2e-4)


def test_virtual_temperature_matches_metpy():
    t = np.array([250.0, 288.15, 305.0])
    w = np.array([0.0005, 0.008, 0.025])
    oracle = mpcalc.virtual_temperature(t * units.K, w * units(""), molecular_weight_ratio=0.622).m_as("K")
    np.testing.assert_allclose(physics.virtual_temperature(t, w), oracle, rtol=1e-12)
    assert physics.virtual_temperature(288.15, 0.0) == 288.15


def test_air_density_matches_metpy():
    p = np.array([101325.0, 95000.0, 85000.0, 70000.0])
    t = np.array([288.15, 300.0, 275.0, 260.0])
    td = np.array([280.0, 297.0, 270.0, 240.0])
    w = mpcalc.saturation_mixing_ratio(p * units.Pa, td * units.K)
    oracle = mpcalc.density(p * units.Pa, t * units.K, w).m_as("kg/m^3")
    np.testing.assert_allclose(physics.air_density(p, t, td), oracle, rtol=1e-4)


def test_air_density_isa_sea_level():
    # ICAO standard atmosphere, dry air at 1013.25 hPa and 15 degC: 1.2250 kg/m3.
    assert physics.air_density(101325.0, 288.15, 100.0) == pytest.approx(1.2250, abs=1e-4)


def test_moist_air_is_lighter_than_dry_air():
    assert physics.air_density(101325.0, 303.15, 298.15) < physics.air_density(101325.0, 303.15, 150.0) - 0.01


# --- height corrections -----------------------------------------------------------


@pytest.mark.parametrize("dz", [10.0, 100.0, 200.0, 1500.0, -400.0])
def test_pressure_at_height_thickness_matches_metpy(dz):
    p0, t0 = 98000.0, 290.0
    tz = physics.lapse_rate_correction(t0, dz)
    pz = physics.pressure_at_height(p0, t0, tz, dz)
    thickness = mpcalc.thickness_hydrostatic(np.array([p0, pz]) * units.Pa, np.array([t0, tz]) * units.K)
    assert thickness.m_as("m") == pytest.approx(dz, rel=1e-5)


@pytest.mark.parametrize(("h", "isa_pa", "rel"), [(1000.0, 89874.6, 2e-5), (2000.0, 79495.2, 6e-5), (3000.0, 70108.5, 1.5e-4)])
def test_pressure_at_height_reproduces_standard_atmosphere(h, isa_pa, rel):
    # ICAO standard atmosphere table. The arithmetic mean temperature stands in for the
    # layer's exact (harmonic) mean: an error growing with the square of the layer depth.
    isa = 101325.0 * (1.0 - 0.0065 * h / 288.15) ** (9.80665 / (287.05287 * 0.0065))
    assert isa == pytest.approx(isa_pa, abs=0.5)
    p = physics.pressure_at_height(101325.0, 288.15, 288.15 - 0.0065 * h, h)
    assert p == pytest.approx(isa_pa, rel=rel)


def test_pressure_at_height_goes_down_with_negative_dz():
    p_top = physics.pressure_at_height(100000.0, 285.0, 282.0, 450.0)
    assert physics.pressure_at_height(p_top, 282.0, 285.0, -450.0) == pytest.approx(100000.0, rel=1e-12)
    # About 1 hPa per 8 m near sea level.
    assert physics.pressure_at_height(100000.0, 285.0, 285.05, -8.0) - 100000.0 == pytest.approx(96.3, abs=0.5)


def test_lapse_rate_correction():
    assert physics.lapse_rate_correction(288.15, 1000.0) == pytest.approx(281.65)
    assert physics.lapse_rate_correction(288.15, -200.0) == pytest.approx(289.45)
    assert physics.lapse_rate_correction(280.0, 100.0, rate=0.0098) == pytest.approx(279.02)


# --- apparent temperature (feel-like) ------------------------------------------------


def test_bom_vapour_pressure_published_table():
    # The BoM's Tetens-type expression against the CRC/IAPWS values above: within 0.7 %.
    for t_c, es_pa in [(10.0, 1228.2), (20.0, 2339.3), (25.0, 3169.9), (30.0, 4247.0), (40.0, 7384.9)]:
        assert physics.bom_vapour_pressure_hpa(t_c) * 100.0 == pytest.approx(es_pa, rel=7e-3)
    assert physics.bom_vapour_pressure_hpa(0.0) == pytest.approx(6.105, rel=1e-12)


@pytest.mark.parametrize(
    ("t_c", "rh", "ws", "q", "expected"),
    [
        # Worked by hand from the BoM formulas (e = rh * 6.105 exp(17.27 t / (237.7 + t))):
        # 30 degC: es = 6.105 * exp(1.935375) = 42.2878 hPa, e = 21.1439 at 50 %;
        # shade: 30 + 0.33 * 21.1439 - 0.7 * 2 - 4 = 31.5775
        (30.0, 0.5, 2.0, None, 31.5775),
        # sun, Q = 135 W/m2: 30 + 0.348 * 21.1439 - 1.4 + 0.7 * 135 / 12 - 4.25 = 39.5831
        (30.0, 0.5, 2.0, 135.0, 39.5831),
        # cold and windy: es(-5) = 6.105 * exp(-0.371079) = 4.21244, e = 3.36995 at 80 %;
        # -5 + 0.33 * 3.36995 - 0.7 * 8 - 4 = -13.4879
        (-5.0, 0.8, 8.0, None, -13.4879),
        # calm, saturated, 35 degC: es = 6.105 * exp(604.45 / 272.7 = 2.216538) = 56.0166;
        # 35 + 0.33 * 56.0166 - 4 = 49.4855
        (35.0, 1.0, 0.0, None, 49.4855),
    ],
)
def test_apparent_temperature_worked_examples(t_c, rh, ws, q, expected):
    got = physics.apparent_temperature(t_c + 273.15, None, ws, q, rh_fraction=rh)
    assert float(got) == pytest.approx(expected, abs=2e-3)


def test_apparent_temperature_independent_reference():
    # pythermalcomfort's documented example of the BoM shade form (its own vapour pressure
    # formula, rounded to 0.1 degC): at(tdb=25, rh=30, v=0.1) = 24.1.
    got = physics.apparent_temperature(298.15, None, 0.1, rh_fraction=0.3)
    assert round(float(got), 1) == 24.1


def test_apparent_temperature_from_dewpoint():
    # 20 degC, dewpoint 10 degC: e = 6.105 * exp(17.27 * 10 / 247.7) = 12.2595 hPa;
    # 20 + 0.33 * 12.2595 - 0.7 * 5 - 4 = 16.5456
    assert float(physics.apparent_temperature(293.15, 283.15, 5.0)) == pytest.approx(16.5456, abs=2e-3)
    # a saturated dewpoint equals 100 % relative humidity
    t = np.array([263.15, 283.15, 303.15])
    np.testing.assert_allclose(
        physics.apparent_temperature(t, t, 3.0), physics.apparent_temperature(t, None, 3.0, rh_fraction=1.0)
    )
    # and the dewpoint form matches rh = e(Td)/es(T) in the BoM's own vapour pressure
    rh = physics.bom_vapour_pressure_hpa(10.0) / physics.bom_vapour_pressure_hpa(20.0)
    assert physics.apparent_temperature(293.15, None, 5.0, rh_fraction=rh) == pytest.approx(16.5456, abs=2e-3)


def test_apparent_temperature_needs_humidity():
    with pytest.raises(TypeError, match="td_k or rh_fraction"):
        physics.apparent_temperature(293.15, None, 3.0)


def test_apparent_temperature_radiation_handling():
    t, td, ws = np.full(4, 303.15), np.full(4, 293.15), np.full(4, 2.0)
    q = np.array([np.nan, 0.0, 100.0, 135.0])
    got = physics.apparent_temperature(t, td, ws, q)
    shade = physics.apparent_temperature(t, td, ws)
    assert got[0] == shade[0]  # unknown radiation: the shade form
    # Q = 0 (night) in the radiation form differs from the shade form by 0.018 e - 0.25
    e = physics.bom_vapour_pressure_hpa(20.0)
    assert got[1] - shade[1] == pytest.approx(0.018 * e - 0.25, abs=1e-9)
    assert got[3] - got[2] == pytest.approx(0.7 * 35.0 / 12.0, abs=1e-9)


def test_apparent_temperature_monotonic():
    rh = np.linspace(0.1, 1.0, 10)
    at = physics.apparent_temperature(300.0, None, 2.0, rh_fraction=rh)
    assert np.all(np.diff(at) > 0)
    ws = np.linspace(0.0, 20.0, 11)
    at = physics.apparent_temperature(300.0, None, ws, 150.0, rh_fraction=0.5)
    assert np.all(np.diff(at) < 0)


def test_body_absorbed_radiation():
    np.testing.assert_allclose(physics.body_absorbed_radiation(np.array([-5.0, 0.0, 500.0, 900.0])), [0.0, 0.0, 75.0, 135.0])
    assert np.isnan(physics.body_absorbed_radiation(np.nan))
    # Full summer sun adds about 8 degC in light wind, 6 degC in a breeze (module docstring).
    for ws, gain in [(2.0, 8.0), (6.0, 6.0)]:
        sun = physics.apparent_temperature(303.15, 293.15, ws, physics.body_absorbed_radiation(900.0))
        shade = physics.apparent_temperature(303.15, 293.15, ws)
        assert float(sun - shade) == pytest.approx(gain, abs=0.25)


def test_apparent_temperature_keeps_dataarrays():
    coords = {"point": ["a", "b"]}
    t = xr.DataArray([290.0, 300.0], dims="point", coords=coords)
    td = xr.DataArray([280.0, 295.0], dims="point", coords=coords)
    ws = xr.DataArray([1.0, 4.0], dims="point", coords=coords)
    q = xr.DataArray([np.nan, 120.0], dims="point", coords=coords)
    for result in (physics.apparent_temperature(t, td, ws), physics.apparent_temperature(t, td, ws, q)):
        assert isinstance(result, xr.DataArray)
        assert list(result["point"].values) == ["a", "b"]
    np.testing.assert_allclose(
        physics.apparent_temperature(t, td, ws, q).values,
        physics.apparent_temperature(t.values, td.values, ws.values, q.values),
    )


# --- wind -----------------------------------------------------------------------


def _angle_diff(a, b):
    return np.abs((np.asarray(a) - np.asarray(b) + 180.0) % 360.0 - 180.0)


@pytest.mark.parametrize(
    ("u", "v", "direction"),
    [(0.0, -5.0, 0.0), (-5.0, 0.0, 90.0), (0.0, 5.0, 180.0), (5.0, 0.0, 270.0), (-3.0, -3.0, 45.0), (2.0, 2.0, 225.0)],
)
def test_wind_direction_cardinal(u, v, direction):
    assert physics.wind_direction(u, v) == pytest.approx(direction)


def test_wind_direction_calm_is_zero_and_never_360():
    assert physics.wind_direction(0.0, 0.0) == 0.0
    assert physics.wind_direction(-0.0, -0.0) == 0.0
    d = physics.wind_direction(np.array([1e-300, -1e-300]), np.array([-1.0, -1.0]))
    assert np.all((d >= 0.0) & (d < 360.0))
    np.testing.assert_allclose(_angle_diff(d, 0.0), 0.0, atol=1e-9)


def test_wind_direction_has_no_negative_zero():
    """A north wind with u = +0.0 makes atan2 give -0.0; the direction (and the published one,
    where 359.97 rounds to 360.0 and then to 0.0) is +0.0: the sign would show in the archive."""
    from pointcast.products.base import published_direction

    d = physics.wind_direction(np.array([0.0, -0.0, 1e-300]), np.array([-1.0, -1.0, -1.0]))
    assert d.tolist() == [0.0, 0.0, 0.0] and not np.signbit(d).any()
    u, v = physics.wind_components(np.array([5.0, 5.0]), np.array([359.97, 0.0]))
    published = published_direction(np.append(u, 0.0), np.append(v, -1.0))
    assert published.tolist() == [0.0, 0.0, 0.0] and not np.signbit(published).any()


def test_wind_matches_metpy():
    rng = np.random.default_rng(1)
    u, v = rng.normal(0, 8, 500), rng.normal(0, 8, 500)
    np.testing.assert_allclose(physics.wind_speed(u, v), mpcalc.wind_speed(u * units("m/s"), v * units("m/s")).m)
    oracle = mpcalc.wind_direction(u * units("m/s"), v * units("m/s")).m_as("degree")
    # MetPy returns 360 for a north wind where we return 0: compare modulo 360.
    np.testing.assert_allclose(_angle_diff(physics.wind_direction(u, v), oracle), 0.0, atol=1e-9)


finite = st.floats(-80, 80, allow_nan=False)


@given(finite, finite)
def test_wind_speed_is_hypot(u, v):
    assert physics.wind_speed(u, v) == pytest.approx(np.hypot(u, v), rel=1e-15, abs=0)


@given(finite, finite)
def test_wind_components_round_trip(u, v):
    direction = physics.wind_direction(u, v)
    assert 0.0 <= direction < 360.0
    u2, v2 = physics.wind_components(physics.wind_speed(u, v), direction)
    assert u2 == pytest.approx(u, abs=1e-9)
    assert v2 == pytest.approx(v, abs=1e-9)


@given(st.floats(0.01, 80), st.floats(0.0, 359.999))
def test_direction_round_trip(speed, direction):
    u, v = physics.wind_components(speed, direction)
    assert physics.wind_speed(u, v) == pytest.approx(speed, rel=1e-12)
    assert _angle_diff(physics.wind_direction(u, v), direction) < 1e-9


# --- xarray passes through ---------------------------------------------------------


def test_elementwise_functions_keep_dataarrays():
    coords = {"point": ["a", "b", "c"]}
    t = xr.DataArray([270.0, 285.0, 300.0], dims="point", coords=coords)
    td = xr.DataArray([265.0, 280.0, 301.0], dims="point", coords=coords)
    p = xr.DataArray([90000.0, 100000.0, 101000.0], dims="point", coords=coords)
    u = xr.DataArray([0.0, -3.0, 4.0], dims="point", coords=coords)
    v = xr.DataArray([0.0, -3.0, 0.0], dims="point", coords=coords)
    results = {
        "rh": physics.relative_humidity(t, td),
        "rho": physics.air_density(p, t, td),
        "p": physics.pressure_at_height(p, t, t - 1.0, 150.0),
        "t": physics.lapse_rate_correction(t, 150.0),
        "dir": physics.wind_direction(u, v),
        "spd": physics.wind_speed(u, v),
        "ghi": physics.clear_sky_ghi(xr.DataArray([-0.2, 0.0, 0.5], dims="point", coords=coords)),
    }
    for name, result in results.items():
        assert isinstance(result, xr.DataArray), name
        assert list(result["point"].values) == ["a", "b", "c"], name
    np.testing.assert_allclose(results["dir"].values, [0.0, 45.0, 270.0])
    np.testing.assert_allclose(results["rh"].values[2], 1.0)
    np.testing.assert_allclose(results["rho"].values, physics.air_density(p.values, t.values, td.values))


# --- solar geometry ----------------------------------------------------------------

GREENWICH = (51.4779, 0.0)
OBLIQUITY_2024 = 23.4386  # true obliquity of the ecliptic, 2024 (IAU 1980 + nutation)


def _noon(lat, lon, day):
    """Time and zenith (deg) of the highest sun over one UTC day, sampled every 10 s."""
    times = np.arange(np.datetime64(f"{day}T00:00"), np.datetime64(f"{day}T23:59:59"), np.timedelta64(10, "s"))
    cz = physics.cos_solar_zenith(np.array([lat]), np.array([lon]), times)[:, 0]
    i = int(np.argmax(cz))
    return times[i], np.degrees(np.arccos(cz[i]))


@pytest.mark.parametrize(
    ("day", "declination"),
    # USNO: 2024 June solstice 20 Jun 20:51 UTC, equinoxes 20 Mar 03:06 and 22 Sep 12:44,
    # December solstice 21 Dec 09:20; declination moves < 0.02 deg between then and noon.
    [("2024-06-20", OBLIQUITY_2024), ("2024-12-21", -OBLIQUITY_2024), ("2024-03-20", 0.16), ("2024-09-22", 0.0)],
)
def test_solar_noon_zenith_at_greenwich(day, declination):
    _, zenith = _noon(*GREENWICH, day)
    assert zenith == pytest.approx(GREENWICH[0] - declination, abs=0.03)


@pytest.mark.parametrize(
    ("day", "equation_of_time_min"),
    # Equation of time extremes: about +16.5 min on 3 November, -14.2 min on 11 February.
    [("2024-11-03", 16.5), ("2024-02-11", -14.2)],
)
def test_solar_noon_time_follows_equation_of_time(day, equation_of_time_min):
    noon, _ = _noon(*GREENWICH, day)
    expected = np.datetime64(f"{day}T12:00") - np.timedelta64(round(equation_of_time_min * 60), "s")
    assert abs((noon - expected) / np.timedelta64(1, "s")) <= 20


def test_solar_noon_moves_four_minutes_per_degree_west():
    noon_greenwich, _ = _noon(*GREENWICH, "2024-06-20")
    noon_west, _ = _noon(GREENWICH[0], -15.0, "2024-06-20")
    assert (noon_west - noon_greenwich) / np.timedelta64(1, "s") == pytest.approx(3600.0, abs=20.0)


def test_cos_solar_zenith_shape_and_sign():
    lat = np.array([0.0, 51.5, -33.9])
    lon = np.array([0.0, 0.0, 151.2])
    times = np.array(["2024-03-20T12:00", "2024-03-20T00:00"], dtype="datetime64[m]")
    cz = physics.cos_solar_zenith(lat, lon, times)
    assert cz.shape == (2, 3)
    # Equator at the equinox, 12 and 00 UTC: the sun 7.4 min of time (1.85 deg of hour
    # angle, the equation of time) from overhead and from the nadir.
    assert cz[0, 0] == pytest.approx(np.cos(np.radians(1.85)), abs=3e-5)
    assert cz[1, 0] == pytest.approx(-np.cos(np.radians(1.85)), abs=3e-5)
    # Sydney at 00 UTC is 10 h local: daytime. Greenwich at midnight: well below.
    assert cz[1, 2] > 0.5
    assert cz[1, 1] < -0.5
    scalar = physics.cos_solar_zenith(0.0, 0.0, times)
    assert scalar.shape == (2,)
    np.testing.assert_allclose(scalar, cz[:, 0])


def test_haurwitz_clear_sky():
    assert physics.clear_sky_ghi(1.0) == pytest.approx(1098.0 * np.exp(-0.059), rel=1e-12)
    assert physics.clear_sky_ghi(1.0) == pytest.approx(1035.1, abs=0.1)
    assert physics.clear_sky_ghi(0.5) == pytest.approx(1098.0 * 0.5 * np.exp(-0.118), rel=1e-12)
    with np.errstate(divide="raise", invalid="raise", over="raise"):
        night = physics.clear_sky_ghi(np.array([-1.0, -1e-12, 0.0, 1e-300]))
    np.testing.assert_array_equal(night, 0.0)
    assert np.isnan(physics.clear_sky_ghi(np.nan))


def test_clear_sky_ghi_mean_midpoint_and_integral():
    lat, lon = np.array([48.1, 40.0]), np.array([11.6, -3.7])
    starts = np.array(["2024-06-20T05:00", "2024-06-20T11:00", "2024-06-20T22:00"], dtype="datetime64[s]")
    mean = physics.clear_sky_ghi_mean(lat, lon, starts, 3600.0)
    assert mean.shape == (3, 2)
    fine = physics.clear_sky_ghi_mean(lat, lon, starts, 3600.0, substeps=3600)
    np.testing.assert_allclose(mean, fine, rtol=2e-3, atol=1e-6)
    assert np.all(mean[2] == 0.0)  # night in Munich and Madrid
    assert mean[1, 0] > 850.0
    one = physics.clear_sky_ghi_mean(lat, lon, starts, 3600.0, substeps=1)
    midpoints = starts + np.timedelta64(1800, "s")
    np.testing.assert_allclose(one, physics.clear_sky_ghi(physics.cos_solar_zenith(lat, lon, midpoints)))


def test_clear_sky_ghi_mean_per_interval_lengths():
    lat, lon = np.array([48.1]), np.array([11.6])
    starts = np.array(["2024-06-20T10:00", "2024-06-20T10:00"], dtype="datetime64[s]")
    mean = physics.clear_sky_ghi_mean(lat, lon, starts, np.array([900.0, 3 * 3600.0]))
    quarter = physics.clear_sky_ghi_mean(lat, lon, starts[:1], 900.0)
    three = physics.clear_sky_ghi_mean(lat, lon, starts[:1], 3 * 3600.0)
    np.testing.assert_allclose(mean, np.concatenate([quarter, three]))
    assert mean[0, 0] != pytest.approx(mean[1, 0], rel=1e-3)


@pytest.mark.parametrize("points", [1, 7, 500])
def test_clear_sky_ghi_mean_in_blocks_is_the_mean_over_all_sub_instants(points, monkeypatch):
    """Computed a block of intervals at a time (`CLEAR_SKY_BLOCK`; here 5 intervals, so that
    the last block of the 14 days is a short one): the same values, bit for bit, as the mean
    over every sub-instant of the series at once."""
    monkeypatch.setattr(physics, "CLEAR_SKY_BLOCK", 12 * points * 5)
    rng = np.random.default_rng(points)
    lat, lon = rng.uniform(-60.0, 70.0, points), rng.uniform(-180.0, 180.0, points)
    starts = np.datetime64("2026-06-20T00:00", "ns") + np.arange(1344) * np.timedelta64(15, "m")
    offsets = np.round((np.arange(12) + 0.5) / 12 * 900.0 * 1e9).astype("timedelta64[ns]")
    instants = (starts[:, np.newaxis] + offsets).ravel()
    whole = physics.clear_sky_ghi(physics.cos_solar_zenith(lat, lon, instants)).reshape(1344, 12, points).mean(axis=1)
    np.testing.assert_array_equal(physics.clear_sky_ghi_mean(lat, lon, starts, 900.0), whole)


# --- vertical interpolation ---------------------------------------------------------


def log_law(z, u_star=0.4, z0=0.03):
    return u_star / 0.4 * np.log(z / z0)


# Height levels 10, 100, 200 m followed by pressure levels at about 110 and 760 m.
LEVELS = np.array([10.0, 100.0, 200.0, 110.0, 760.0])


def test_interp_log_height_recovers_log_profile():
    targets = np.array([[50.0], [80.0], [150.0]])
    got = physics.interp_log_height(log_law(LEVELS), LEVELS, targets)
    assert got.shape == (3, 1)
    np.testing.assert_allclose(got[:, 0], log_law(targets[:, 0]), rtol=1e-12)


def test_interp_log_height_skips_missing_levels():
    heights = np.array([[10.0, 100.0, 200.0, np.nan, 760.0], [10.0, np.nan, 200.0, 110.0, 760.0]])
    values = log_law(np.nan_to_num(heights, nan=1.0))
    values[1, 3] = np.nan  # a level with a height but no value
    got = physics.interp_log_height(values, heights, np.array([80.0, 150.0]))
    np.testing.assert_allclose(got, log_law(np.array([80.0, 150.0])), rtol=1e-12)


def test_interp_log_height_power_law_above_and_below():
    heights = np.array([10.0, 100.0])
    profile = 5.0 * (heights / 10.0) ** 0.14
    targets = np.array([5.0, 150.0, 300.0])
    np.testing.assert_allclose(
        physics.interp_log_height(profile, heights, targets), 5.0 * (targets / 10.0) ** 0.14, rtol=1e-12
    )
    # Extrapolating a neutral log profile (open farmland, z0 = 3 cm) from 10/100 m to 200 m.
    assert physics.interp_log_height(log_law(heights), heights, 200.0) == pytest.approx(log_law(200.0), rel=0.02)


def test_interp_log_height_shear_exponent_is_clipped():
    heights = np.array([10.0, 100.0])
    # Exponent 1 is clipped to 0.6; a speed that falls with height gives exponent 0.
    assert physics.interp_log_height(np.array([1.0, 10.0]), heights, 200.0) == pytest.approx(10.0 * 2**0.6)
    assert physics.interp_log_height(np.array([8.0, 6.0]), heights, 200.0) == pytest.approx(6.0)
    assert physics.interp_log_height(np.array([0.0, 0.0]), heights, 200.0) == 0.0


def test_interp_log_height_needs_two_valid_levels():
    got = physics.interp_log_height(np.array([[5.0, np.nan], [5.0, 6.0]]), np.array([10.0, 100.0]), 50.0)
    assert np.isnan(got[0])
    assert got[1] == pytest.approx(5.0 + np.log(5.0) / np.log(10.0))
    with pytest.raises(ValueError, match="two levels"):
        physics.interp_log_height(np.array([5.0]), np.array([10.0]), 50.0)


def test_wind_at_height_inside_and_above():
    heights = np.array([10.0, 100.0, 200.0])
    speed = log_law(heights)
    # Veering with height: from 200 deg at 10 m to 230 deg at 200 m.
    direction = np.array([200.0, 220.0, 230.0])
    u, v = physics.wind_components(speed, direction)
    u50, v50 = physics.wind_at_height(u, v, heights, 50.0)
    w = np.log(50.0 / 10.0) / np.log(10.0)
    assert u50 == pytest.approx(u[0] + w * (u[1] - u[0]), rel=1e-12)
    assert v50 == pytest.approx(v[0] + w * (v[1] - v[0]), rel=1e-12)
    u300, v300 = physics.wind_at_height(u, v, heights, 300.0)
    alpha = np.log(speed[2] / speed[1]) / np.log(2.0)
    assert physics.wind_speed(u300, v300) == pytest.approx(speed[2] * 1.5**alpha, rel=1e-12)
    assert physics.wind_direction(u300, v300) == pytest.approx(230.0, abs=1e-9)
    # At a level the level's own wind comes back.
    u100, v100 = physics.wind_at_height(u, v, heights, 100.0)
    assert (u100, v100) == (pytest.approx(u[1]), pytest.approx(v[1]))


def test_wind_at_height_broadcasts_points_and_targets():
    heights = np.array([[10.0, 100.0, np.nan], [10.0, 100.0, 200.0]])
    u = np.array([[-3.0, -6.0, np.nan], [2.0, 4.0, 5.0]])
    v = np.zeros_like(u)
    targets = np.array([[100.0], [150.0]])
    got_u, got_v = physics.wind_at_height(u, v, heights, targets)
    assert got_u.shape == (2, 2)
    np.testing.assert_allclose(got_u[0], [-6.0, 4.0])
    np.testing.assert_allclose(got_u[1, 0], -6.0 * 1.5 ** (np.log(2.0) / np.log(10.0)))
    assert got_u[1, 1] == pytest.approx(4.0 + np.log(1.5) / np.log(2.0))
    np.testing.assert_array_equal(got_v, 0.0)


def test_interp_linear_height():
    heights = np.array([2.0, 100.0, np.nan, 450.0])
    temps = 290.0 - 0.008 * heights
    targets = np.array([0.0, 2.0, 50.0, 200.0, 450.0, 600.0])
    np.testing.assert_allclose(
        physics.interp_linear_height(np.nan_to_num(temps), heights, targets), 290.0 - 0.008 * targets, rtol=1e-12
    )
    # An inversion above 100 m: above the profile the top two levels' gradient continues.
    kinked = np.array([280.0, 279.0, 282.0])
    got = physics.interp_linear_height(kinked, np.array([2.0, 100.0, 300.0]), np.array([200.0, 400.0]))
    np.testing.assert_allclose(got, [280.5, 283.5])


def test_profile_functions_work_under_apply_ufunc():
    ds = xr.Dataset(
        {
            "speed": (("point", "level"), log_law(np.tile(LEVELS, (2, 1)))),
            "z": (("point", "level"), np.tile(LEVELS, (2, 1))),
        },
        coords={"point": ["p1", "p2"]},
    )
    got = xr.apply_ufunc(
        physics.interp_log_height, ds.speed, ds.z, 80.0, input_core_dims=[["level"], ["level"], []]
    )
    assert got.dims == ("point",)
    np.testing.assert_allclose(got.values, log_law(80.0), rtol=1e-12)


def test_dewpoint_from_relative_humidity_inverts_bolton_and_matches_metpy():
    import metpy.calc as mpcalc
    from metpy.units import units

    t = np.array([253.15, 273.15, 288.15, 303.15, 313.15])
    rh = np.array([0.2, 0.5, 0.75, 0.9, 1.0])
    td = physics.dewpoint_from_relative_humidity(t, rh)
    np.testing.assert_allclose(physics.relative_humidity(t, td), rh, rtol=1e-9)
    oracle = mpcalc.dewpoint_from_relative_humidity(t * units.kelvin, rh).to("K").magnitude
    np.testing.assert_allclose(td, oracle, atol=0.25)  # MetPy 1.7 uses Ambaum, not Bolton


def test_snow_fraction_thresholds():
    np.testing.assert_allclose(physics.snow_fraction(np.array([-5.0, 0.5, 1.5, 2.5, 10.0])),
                               [1.0, 1.0, 0.5, 0.0, 0.0])
