"""Meteorological formulas of the derive stage (docs/method.md, "Formulas").

Pure, vectorised functions; SI units unless a name says otherwise. The element-wise
functions use only numpy ufuncs and ``xr.where``, so numpy arrays stay numpy arrays and
xarray DataArrays (dask-backed or not) keep their dimensions and coordinates. The solar
and vertical-profile functions index along axes and return numpy arrays; wrap them with
``xr.apply_ufunc`` to keep labels.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

G = 9.80665
"""Standard gravity, m/s2 (CGPM 1901)."""
RD = 287.047
"""Specific gas constant of dry air, J/kg/K."""
EPSILON = 0.622
"""Rd/Rv, the ratio of the molar masses of water vapour and dry air."""
LAPSE_RATE = 0.0065
"""Temperature lapse rate of the ICAO standard atmosphere, K/m."""

_T0 = 273.15
_SHEAR_EXPONENT_RANGE = (0.0, 0.6)


# --- moisture and density ---------------------------------------------------------


def saturation_vapour_pressure(t_k):
    """Saturation vapour pressure over liquid water, Pa.

    Bolton (1980, Mon. Wea. Rev. 108, eq. 10), the form MetPy used up to 1.6; within
    0.1 % of Wexler's values between -35 and 35 degC. Over water also below 0 degC, as
    NWP dewpoints and the WMO humidity definition are with respect to water.
    """
    return 611.2 * np.exp(17.67 * (t_k - _T0) / (t_k - 29.65))


def relative_humidity(t_k, td_k):
    """Relative humidity e(Td)/es(T) as a fraction, clipped to [0, 1].

    Clipped because interpolated or blended Td can exceed T by a few hundredths of a
    kelvin, and supersaturation is not a forecast value.
    """
    return np.clip(saturation_vapour_pressure(td_k) / saturation_vapour_pressure(t_k), 0.0, 1.0)


def dewpoint_from_relative_humidity(t_k, rh_fraction):
    """Dewpoint (K) from temperature and relative humidity: Bolton's formula inverted, so that
    `relative_humidity(t, dewpoint_from_relative_humidity(t, rh)) == rh` (sources such as JMA MSM
    publish humidity instead of dewpoint)."""
    e = np.clip(rh_fraction, 1e-6, 1.0) * saturation_vapour_pressure(t_k)
    x = np.log(e / 611.2)
    return 273.15 + 243.5 * x / (17.67 - x)


SNOW_ALL_BELOW_C = 0.5
RAIN_ALL_ABOVE_C = 2.5


def snow_fraction(t2m_c):
    """Share of precipitation falling as snow, from the 2 m temperature alone: all snow at or
    below 0.5 degC, all rain at or above 2.5 degC, linear in between (the usual temperature
    threshold method, e.g. Auer 1974 found 50 % snow near 1.5 degC). Used where a source gives no
    snowfall of its own."""
    return np.clip((RAIN_ALL_ABOVE_C - t2m_c) / (RAIN_ALL_ABOVE_C - SNOW_ALL_BELOW_C), 0.0, 1.0)


def mixing_ratio(p_pa, td_k):
    """Water-vapour mixing ratio w = eps*e/(p - e), kg/kg, with e = es(Td).

    Wallace and Hobbs (2006, Atmospheric Science, ch. 3), without the e << p shortcut.
    """
    e = saturation_vapour_pressure(td_k)
    return EPSILON * e / (p_pa - e)


def virtual_temperature(t_k, mixing_ratio):
    """Virtual temperature T*(w + eps)/(eps*(1 + w)), K (Wallace and Hobbs 2006, ch. 3; as MetPy).

    The temperature dry air would need to have the density of the moist air.
    """
    return t_k * (mixing_ratio + EPSILON) / (EPSILON * (1.0 + mixing_ratio))


def air_density(p_pa, t_k, td_k):
    """Density of moist air, p/(Rd*Tv), kg/m3: the ideal-gas law for the mixture."""
    return p_pa / (RD * virtual_temperature(t_k, mixing_ratio(p_pa, td_k)))


# --- feel-like temperature ---------------------------------------------------------

BODY_ABSORBED_FRACTION = 0.15
"""Q / global radiation: shortwave absorbed per m2 of body surface per W/m2 of global horizontal
irradiance, for `body_absorbed_radiation` (derivation in its docstring)."""


def bom_vapour_pressure_hpa(t_c):
    """Saturation vapour pressure 6.105*exp(17.27*t/(237.7 + t)), hPa, t in degC.

    The Tetens-type expression of the Australian Bureau of Meteorology's apparent-temperature
    page (used there with e = rh/100 * this), kept so that the apparent temperature is the
    BoM's to the digit. It is within 0.7 % of `saturation_vapour_pressure` (Bolton) from 0 to
    40 degC and 1.3 % down to -30 degC: at most 0.17 degC of apparent temperature (saturated
    air at 40 degC). Evaluated at the dewpoint it gives the actual vapour pressure.
    """
    return 6.105 * np.exp(17.27 * t_c / (237.7 + t_c))


def body_absorbed_radiation(ghi_w_m2):
    """Q of `apparent_temperature` from global horizontal irradiance: BODY_ABSORBED_FRACTION * GHI.

    Q is the extra radiation a person in the sun absorbs per m2 of body surface. For a standing
    person with sunlit surroundings under a high summer sun, the irradiance on the body's
    surface is about 0.4 times the global horizontal irradiance: direct beam on the projected
    area (projected-area factor 0.2-0.3 at solar elevations of 60-30 degrees, Fanger 1970;
    ISO 7726) plus half the diffuse sky and half the light reflected by ground of albedo 0.2
    (more than 0.4 when the sun is low, but then the irradiance itself is small). Times the shortwave absorptivity
    of a clothed person, 0.7 (ISO 7726), and the effective radiating area of a standing body,
    0.72 (Fanger 1970) minus the extra long-wave emission of sun-warmed clothing, this is
    0.7 * 0.72 * 0.4 = 0.2; we take 0.15, at the low end, so that full summer sun (GHI 900 W/m2,
    Q = 135 W/m2) adds 8 degC in light wind (2 m/s) and 6 degC in a 6 m/s breeze, the size of
    the sun's effect the US National Weather Service states for its heat index (up to 15 degF).
    Negative or missing irradiance gives Q = 0 or NaN (the shade form then applies to NaN).
    """
    return BODY_ABSORBED_FRACTION * np.maximum(ghi_w_m2, 0.0)


def apparent_temperature(t_k, td_k, wind_10m, net_radiation_w_m2=None, *, rh_fraction=None):
    """Apparent ("feel-like") temperature, degC: Steadman's, in the Australian BoM's form.

    Steadman (1994, "Norms of apparent temperature in Australia", Aust. Met. Mag. 43, 1-16), as
    published by the Australian Bureau of Meteorology ("Thermal Comfort observations: about
    the formula for the apparent temperature"):

    * shade, or radiation unknown: AT = Ta + 0.33 e - 0.70 ws - 4.00
    * with radiation:              AT = Ta + 0.348 e - 0.70 ws + 0.70 Q / (ws + 10) - 4.25

    Ta air temperature (degC, from ``t_k``), e water vapour pressure (hPa), ws wind speed at
    10 m (m/s), Q net radiation absorbed per m2 of body surface (W/m2; from global radiation
    with `body_absorbed_radiation`). e comes from the dewpoint ``td_k`` (K) as
    `bom_vapour_pressure_hpa` (Td), or, when ``td_k`` is None, from ``rh_fraction`` (relative
    humidity as a fraction 0..1, like `relative_humidity`) as rh * `bom_vapour_pressure_hpa` (Ta),
    the BoM's own expression. Where ``net_radiation_w_m2`` is None or NaN the shade form is used
    (at night pass Q = 0: the two forms then differ by 0.018 e - 0.25, under 0.3 degC).
    """
    ta = t_k - _T0
    if td_k is not None:
        e = bom_vapour_pressure_hpa(td_k - _T0)
    elif rh_fraction is not None:
        e = rh_fraction * bom_vapour_pressure_hpa(ta)
    else:
        raise TypeError("apparent_temperature needs td_k or rh_fraction")
    shade = ta + 0.33 * e - 0.70 * wind_10m - 4.00
    if net_radiation_w_m2 is None:
        return shade
    sun = ta + 0.348 * e - 0.70 * wind_10m + 0.70 * net_radiation_w_m2 / (wind_10m + 10.0) - 4.25
    return xr.where(np.isnan(net_radiation_w_m2), shade, sun)


# --- height corrections -----------------------------------------------------------


def pressure_at_height(p_sfc_pa, t_sfc_k, t_z_k, dz_m):
    """Pressure dz metres above a level of pressure p, Pa.

    Hypsometric equation with the layer-mean temperature (mean of the two ends),
    p*exp(-g*dz/(Rd*Tmean)) (Wallace and Hobbs 2006, ch. 3). Pass virtual temperatures
    for the moist form; with air temperatures the thickness is short by Tv/T - 1, under
    0.5 % in mid-latitudes. A negative dz goes down, which corrects model surface
    pressure to a point's own elevation.
    """
    t_mean = 0.5 * (t_sfc_k + t_z_k)
    return p_sfc_pa * np.exp(-G * dz_m / (RD * t_mean))


def lapse_rate_correction(t_k, dz_m, rate=LAPSE_RATE):
    """Temperature moved dz metres up (dz = point elevation - model surface height), K.

    Uses the standard-atmosphere lapse rate by default, the usual correction for the
    height difference between a point and its model grid cell.
    """
    return t_k - rate * dz_m


# --- wind -----------------------------------------------------------------------


def wind_speed(u, v):
    """Horizontal wind speed |(u, v)|, m/s."""
    return np.hypot(u, v)


def wind_direction(u, v):
    """Meteorological wind direction, degrees in [0, 360): where the wind blows FROM.

    0 = from north, 90 = from east (WMO-No. 306 convention); exactly 0 when calm, as
    the direction of a zero vector is undefined and atan2 would return 180.
    """
    # atan2 is within [-180, 180] degrees: np.mod by 360 adds 360 to a negative angle, which
    # is all that is done here, without the division (and + 0.0 makes -0.0 the 0.0 np.mod gives).
    angle = np.degrees(np.arctan2(-u, -v))
    direction = xr.where(angle < 0.0, angle + 360.0, angle) + 0.0
    # A tiny negative angle plus 360 rounds up to exactly 360.0.
    direction = xr.where(direction >= 360.0, 0.0, direction)
    # Calm exactly where the speed is 0, without computing the speed again (hypot).
    return xr.where((u == 0.0) & (v == 0.0), 0.0, direction)


def wind_components(speed, direction_deg):
    """(u, v) from speed and meteorological direction: the inverse of the two above."""
    rad = np.radians(direction_deg)
    return -speed * np.sin(rad), -speed * np.cos(rad)


# --- solar geometry and clear-sky radiation -------------------------------------------


def _solar_declination_and_equation_of_time(times):
    """Solar declination (rad) and equation of time (minutes) at UTC datetime64 times.

    The NOAA Solar Calculator's algorithm (Meeus 1991, Astronomical Algorithms,
    ch. 24-25, low-accuracy solar coordinates): about 0.01 deg in declination and a few
    seconds in the equation of time, where the Spencer (1971) Fourier fits are off by up
    to 0.5 deg and 1 minute in this decade. UTC is used for TT (an error below 0.001 deg).
    """
    days = (times - np.datetime64("2000-01-01T12:00", "ns")) / np.timedelta64(1, "D")
    jc = days / 36525.0  # Julian centuries since J2000.0
    mean_long = np.radians(np.mod(280.46646 + jc * (36000.76983 + jc * 0.0003032), 360.0))
    mean_anom = np.radians(357.52911 + jc * (35999.05029 - 0.0001537 * jc))
    ecc = 0.016708634 - jc * (0.000042037 + 0.0000001267 * jc)
    centre = (
        np.sin(mean_anom) * (1.914602 - jc * (0.004817 + 0.000014 * jc))
        + np.sin(2 * mean_anom) * (0.019993 - 0.000101 * jc)
        + np.sin(3 * mean_anom) * 0.000289
    )
    omega = np.radians(125.04 - 1934.136 * jc)
    apparent_long = np.radians(np.degrees(mean_long) + centre - 0.00569 - 0.00478 * np.sin(omega))
    mean_obliquity = 23.0 + (26.0 + (21.448 - jc * (46.815 + jc * (0.00059 - jc * 0.001813))) / 60.0) / 60.0
    obliquity = np.radians(mean_obliquity + 0.00256 * np.cos(omega))
    declination = np.arcsin(np.sin(obliquity) * np.sin(apparent_long))
    y = np.tan(obliquity / 2.0) ** 2
    eot_rad = (
        y * np.sin(2 * mean_long)
        - 2 * ecc * np.sin(mean_anom)
        + 4 * ecc * y * np.sin(mean_anom) * np.cos(2 * mean_long)
        - 0.5 * y * y * np.sin(4 * mean_long)
        - 1.25 * ecc * ecc * np.sin(2 * mean_anom)
    )
    return declination, 4.0 * np.degrees(eot_rad)


def cos_solar_zenith(lat_deg, lon_deg, times):
    """Signed cosine of the solar zenith angle, shape times.shape + broadcast(lat, lon).shape.

    Negative at night (no clipping), so callers can tell how far below the horizon the
    sun is. Hour angle from true solar time = UTC + equation of time + 4 min/deg of east
    longitude (NOAA Solar Calculator); no refraction, which matters only at the horizon.
    """
    lat = np.radians(np.asarray(lat_deg, dtype=float))
    lon = np.asarray(lon_deg, dtype=float)
    lat, lon = np.broadcast_arrays(lat, lon)
    times = np.asarray(times, dtype="datetime64[ns]")
    declination, eot_min = _solar_declination_and_equation_of_time(times)
    minutes_of_day = (times - times.astype("datetime64[D]")) / np.timedelta64(1, "m")
    # hour angle = time part + longitude part, so cos(zenith) = sin(lat) sin(dec)
    # + cos(lat) cos(dec) (cos t cos l - sin t sin l): one product of a (time, 3) by a
    # (3, point) matrix instead of a cosine per time and point. einsum, not BLAS: BLAS picks
    # its kernels by the matrices' sizes, so a block of times gave other last bits than the
    # whole series (clear_sky_ghi_mean computes in blocks); einsum sums the three terms in
    # one order whatever the sizes.
    time_angle = np.radians((minutes_of_day + eot_min) / 4.0 - 180.0).ravel()
    dec = declination.ravel()
    by_time = np.stack([np.sin(dec), np.cos(dec) * np.cos(time_angle), -np.cos(dec) * np.sin(time_angle)], axis=-1)
    shape, lat, lon_angle = lat.shape, lat.ravel(), np.radians(lon).ravel()
    by_point = np.stack([np.sin(lat), np.cos(lat) * np.cos(lon_angle), np.cos(lat) * np.sin(lon_angle)])
    return np.einsum("tk,kp->tp", by_time, by_point).reshape(times.shape + shape)


def clear_sky_ghi(cos_zenith):
    """Clear-sky global horizontal irradiance, W/m2: Haurwitz (1945), 1098*cosZ*exp(-0.059/cosZ).

    Zero when the sun is at or below the horizon, and where cosZ < 0.001 (the sun less than
    0.06 deg up), where the formula gives under 3e-26 W/m2: there exp would only underflow
    towards its limit 0, which is slow arithmetic for nothing.
    """
    cz = np.maximum(cos_zenith, 0.0)
    return 1098.0 * cz * np.exp(-0.059 / np.maximum(cz, 1e-3)) * (cz >= 1e-3)


# Sub-instants x points that clear_sky_ghi_mean computes at a time, so that its temporaries
# stay in the CPU cache instead of each pass going over arrays of the whole series (the
# values are the same, bit for bit, whatever the block).
CLEAR_SKY_BLOCK = 1 << 16


def clear_sky_ghi_mean(lat, lon, starts, seconds, substeps=12):
    """Mean clear-sky GHI over each interval [start, start + seconds), shape (T, P), W/m2.

    Midpoint rule over `substeps` equal sub-intervals: the weights for spreading an
    interval-mean radiation onto shorter steps (or back) must follow the sun within
    the interval, not its value at one instant. `seconds` is a scalar or one per start.
    """
    starts = np.asarray(starts, dtype="datetime64[ns]")
    seconds = np.broadcast_to(np.asarray(seconds, dtype=float), starts.shape)
    fractions = (np.arange(substeps) + 0.5) / substeps
    offsets_ns = np.round(seconds[:, np.newaxis] * fractions * 1e9).astype("timedelta64[ns]")
    times = starts[:, np.newaxis] + offsets_ns
    shape = np.broadcast_shapes(np.shape(lat), np.shape(lon))
    out = np.empty((starts.size,) + shape)
    step = max(1, CLEAR_SKY_BLOCK // (substeps * math.prod(shape)))
    for first in range(0, starts.size, step):
        block = times[first:first + step]
        ghi = clear_sky_ghi(cos_solar_zenith(lat, lon, block.ravel()))
        out[first:first + step] = ghi.reshape(block.shape + shape).mean(axis=1)
    return out


# --- vertical interpolation ---------------------------------------------------------


def _levels(heights, valid, coordinate):
    """The profiles' levels in `coordinate` (log or identity) of height, ascending along the
    last axis with the invalid ones last (+inf), each one's original index, how many are
    valid, and the coordinate: sorted once for every target height (`_bracket`)."""
    if heights.shape[-1] < 2:
        raise ValueError(f"a profile needs at least two levels, got shape {heights.shape}")
    x = np.where(valid, coordinate(np.where(valid, heights, 1.0)), np.inf)
    order = np.argsort(x, axis=-1, kind="stable")  # valid levels first, ascending
    x = np.take_along_axis(x, order, axis=-1)
    return x, order, np.isfinite(x).sum(axis=-1), coordinate


def _bracket(levels, target):
    """Locate target between the two nearest valid levels along the last axis (`_levels`).

    Returns the original level indices (lower, upper) of the bracketing pair and the
    fractional position w of the target in the levels' coordinate of height:
    0 <= w <= 1 inside, w > 1 above the top valid level, w < 0 below the lowest.
    The pair is the top (bottom) two valid levels when the target is above (below)
    the profile. w is NaN where fewer than two levels are valid.
    """
    x, order, n_valid, coordinate = levels
    xt = coordinate(np.asarray(target, dtype=float))
    shape = np.broadcast_shapes(x.shape[:-1], xt.shape)
    x = np.broadcast_to(x, shape + x.shape[-1:])
    order = np.broadcast_to(order, x.shape)
    n_valid = np.broadcast_to(n_valid, shape)
    xt = np.broadcast_to(xt, shape)

    n_at_or_below = (x <= xt[..., np.newaxis]).sum(axis=-1)
    upper = np.clip(n_at_or_below, 1, np.maximum(n_valid - 1, 1))[..., np.newaxis]
    lower = upper - 1

    def pick(a, i):
        return np.take_along_axis(a, i, axis=-1)[..., 0]

    x_lo, x_hi = pick(x, lower), pick(x, upper)
    with np.errstate(invalid="ignore"):
        w = np.where(n_valid >= 2, (xt - x_lo) / (x_hi - x_lo), np.nan)
    return pick(order, lower), pick(order, upper), w


def _gather(values, index):
    values = np.broadcast_to(values, index.shape + values.shape[-1:])
    return np.take_along_axis(values, index[..., np.newaxis], axis=-1)[..., 0]


def _shear_exponent(speed_lo, speed_hi, z_lo, z_hi):
    """Power-law shear exponent ln(s_hi/s_lo)/ln(z_hi/z_lo), clipped to [0, 0.6].

    Hellmann's power law (Emeis 2018, Wind Energy Meteorology, ch. 3); the clip keeps
    extrapolation between "no shear" and the large exponents of stable nights.
    An undefined ratio (a calm level) falls back to 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.log(speed_hi / speed_lo) / np.log(z_hi / z_lo)
    alpha = np.nan_to_num(alpha, nan=0.0, posinf=_SHEAR_EXPONENT_RANGE[1], neginf=0.0)
    return np.clip(alpha, *_SHEAR_EXPONENT_RANGE)


def _power_law_factor(w, target, z_lo, z_hi, alpha):
    """(z/z_ref)**alpha from the nearest valid level; 1 inside the profile."""
    z_ref = np.where(w > 1.0, z_hi, z_lo)
    return np.where((w > 1.0) | (w < 0.0), (target / z_ref) ** alpha, 1.0)


def interp_log_height(values, heights, target):
    """Positive, wind-speed-like values at height `target`, from a profile (..., L).

    Linear in ln(z) between the bracketing valid levels: exact for the neutral
    logarithmic wind profile u*/k ln(z/z0). Outside the profile, a power law from the
    nearest valid level, v*(z/z_ref)**alpha, with alpha from the two nearest valid
    levels clipped to [0, 0.6]. Levels whose height or value is NaN (absent, below
    ground) are skipped; levels may come in any order (e.g. pressure levels appended
    after height levels). `target` broadcasts against values.shape[:-1]; fewer than
    two valid levels give NaN.
    """
    values = np.asarray(values, dtype=float)
    heights = np.asarray(heights, dtype=float)
    target = np.asarray(target, dtype=float)
    valid = np.isfinite(heights) & (heights > 0.0) & np.isfinite(values)
    lower, upper, w = _bracket(_levels(heights, valid, np.log), target)
    v_lo, v_hi = _gather(values, lower), _gather(values, upper)
    z_lo, z_hi = _gather(heights, lower), _gather(heights, upper)
    inside = v_lo + np.clip(w, 0.0, 1.0) * (v_hi - v_lo)
    alpha = _shear_exponent(v_lo, v_hi, z_lo, z_hi)
    return inside * _power_law_factor(w, target, z_lo, z_hi, alpha)


def wind_at_height(u, v, heights, target):
    """Wind components (u, v) at height `target` from profiles of shape (..., L).

    Inside the profile u and v are each linear in ln(z), as in `interp_log_height`.
    Outside it, the nearest valid level's vector is scaled by (z/z_ref)**alpha, with
    alpha from the wind speeds of the two nearest valid levels clipped to [0, 0.6]:
    the power law applies to the speed and keeps the direction.
    """
    return wind_at_heights(u, v, heights, [target])[0]


def wind_at_heights(u, v, heights, targets):
    """`wind_at_height` at each of `targets`, the profiles sorted once for all of them."""
    u = np.asarray(u, dtype=float)
    v = np.asarray(v, dtype=float)
    heights = np.asarray(heights, dtype=float)
    valid = np.isfinite(heights) & (heights > 0.0) & np.isfinite(u) & np.isfinite(v)
    levels = _levels(heights, valid, np.log)
    out = []
    for target in targets:
        target = np.asarray(target, dtype=float)
        lower, upper, w = _bracket(levels, target)
        u_lo, u_hi = _gather(u, lower), _gather(u, upper)
        v_lo, v_hi = _gather(v, lower), _gather(v, upper)
        z_lo, z_hi = _gather(heights, lower), _gather(heights, upper)
        alpha = _shear_exponent(wind_speed(u_lo, v_lo), wind_speed(u_hi, v_hi), z_lo, z_hi)
        factor = _power_law_factor(w, target, z_lo, z_hi, alpha)
        wc = np.clip(w, 0.0, 1.0)
        out.append(((u_lo + wc * (u_hi - u_lo)) * factor, (v_lo + wc * (v_hi - v_lo)) * factor))
    return out


def interp_linear_height(values, heights, target):
    """Values (temperature-like) at height `target`, linear in height, from profiles (..., L).

    Between the bracketing valid levels linear interpolation; above (below) the
    profile linear extrapolation from the top (bottom) two valid levels, i.e. their
    lapse rate. NaN levels are skipped, levels may come in any order; `target`
    broadcasts against values.shape[:-1].
    """
    return interp_linear_heights(values, heights, [target])[0]


def interp_linear_heights(values, heights, targets):
    """`interp_linear_height` at each of `targets`, the profiles sorted once for all of them."""
    values = np.asarray(values, dtype=float)
    heights = np.asarray(heights, dtype=float)
    valid = np.isfinite(heights) & np.isfinite(values)
    levels = _levels(heights, valid, np.asarray)
    out = []
    for target in targets:
        lower, upper, w = _bracket(levels, target)
        v_lo, v_hi = _gather(values, lower), _gather(values, upper)
        out.append(v_lo + w * (v_hi - v_lo))
    return out
