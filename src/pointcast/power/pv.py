"""Solar-plant power with pvlib: radiation, air temperature and wind -> AC kW (docs/method.md,
"PV power").

The chain, each step a pvlib function on whole arrays:

1. the sun's position by NREL's SPA (`pvlib.spa`, Reda and Andreas 2004) at the MIDDLE of each
   interval: radiation is a mean over the interval, so the sun at its end would be half an
   interval late (half an hour on hourly radiation);
2. where only global radiation exists, its direct and diffuse parts by the Erbs model in its
   continuous form (`pvlib.irradiance.erbs_driesse`; Erbs, Klein and Duffie 1982, Driesse et
   al. 2024); otherwise the direct part on the horizontal is divided by cos(zenith);
3. the plane of array by the Perez 1990 sky model (`get_total_irradiance(model="perez")`, all-sites
   coefficients, ground albedo 0.25), the beam through the cover glass by the physical
   incidence-angle model (`pvlib.iam.physical`, as PVWatts v5);
4. the cell temperature by the Sandia model (`pvlib.temperature.sapm_cell`, King et al. 2004),
   whose parameters are per mounting and whose wind is the 10 m wind a forecast has;
5. DC power by PVWatts v5 (`pvlib.pvsystem.pvwatts_dc`, Dobos 2014) with the plant's temperature
   coefficient, less its DC losses;
6. AC power by the PVWatts inverter (`pvlib.inverter.pvwatts`, nominal efficiency 0.96) sized
   so that its output clips at the plant's AC limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pvlib

__all__ = ["SolarGeometry", "solar_geometry", "INVERTER_EFFICIENCY", "ALBEDO", "plant_ac_kw"]

INVERTER_EFFICIENCY = 0.96  # PVWatts v5's nominal inverter efficiency (Dobos 2014)
ALBEDO = 0.25  # ground reflectance: pvlib's default, grass
_MAX_ZENITH_DEG = 87.0  # beyond it the direct part goes to diffuse (pvlib's decompositions' limit)
_PRESSURE_HPA = 1013.25  # for the refraction of the sun's elevation only
_AIR_TEMPERATURE_C = 12.0  # likewise (SPA's standard refraction)
_REFRACTION_DEG = 0.5667


@dataclass(frozen=True)
class SolarGeometry:
    """The sun at the middle of each interval, arrays (site, time): degrees, and the
    extraterrestrial normal irradiance (W/m2) that the Perez model and the decomposition need."""

    zenith: np.ndarray  # true (geometric), for the decomposition
    apparent_zenith: np.ndarray  # refracted, for the plane of array and the air mass
    azimuth: np.ndarray  # degrees clockwise from north
    dni_extra: np.ndarray


def solar_geometry(lat, lon, starts, interval: np.timedelta64) -> SolarGeometry:
    """The sun for sites at ``lat``, ``lon`` (1-D, one per site) over the intervals
    ``[starts, starts + interval)`` (``starts`` 1-D datetime64, UTC), at each interval's middle.
    One call per sites list and time axis serves the deterministic forecast and every member."""
    lat = np.asarray(lat, dtype=np.float64).reshape(-1, 1)
    lon = np.asarray(lon, dtype=np.float64).reshape(-1, 1)
    middle = np.asarray(starts, dtype="datetime64[ns]") + np.timedelta64(interval, "ns") // 2
    shape = (lat.shape[0], middle.shape[0])  # every array below broadcasts (site, 1) against (time,)
    unixtime = middle.astype(np.int64) / 1e9  # ns since 1970 -> s
    year = middle.astype("datetime64[Y]").astype(int) + 1970
    month = middle.astype("datetime64[M]").astype(int) % 12 + 1
    delta_t = pvlib.spa.calculate_deltat(year, month)
    # SPA's steps as pvlib.spa.solar_position_numpy takes them, cut in two: the Earth's (the
    # costly nutation series) once per time, the observer's for every (site, time) pair
    spa = pvlib.spa
    earth = (unixtime, 0.0, 0.0, 0.0, _PRESSURE_HPA, _AIR_TEMPERATURE_C, delta_t, _REFRACTION_DEG, 1)
    sidereal, right_ascension, declination = spa.solar_position_numpy(*earth, sst=True)
    (radius,) = spa.solar_position_numpy(*earth, esd=True)
    hour_angle = spa.local_hour_angle(sidereal, lon, right_ascension)
    parallax = spa.equatorial_horizontal_parallax(radius)
    u = spa.uterm(lat)
    x, y = spa.xterm(u, lat, 0.0), spa.yterm(u, lat, 0.0)
    delta_alpha = spa.parallax_sun_right_ascension(x, parallax, hour_angle, declination)
    topo_declination = spa.topocentric_sun_declination(declination, x, y, parallax, delta_alpha, hour_angle)
    topo_hour_angle = spa.topocentric_local_hour_angle(hour_angle, delta_alpha)
    e0 = spa.topocentric_elevation_angle_without_atmosphere(lat, topo_declination, topo_hour_angle)
    e = spa.topocentric_elevation_angle(e0, spa.atmospheric_refraction_correction(
        _PRESSURE_HPA, _AIR_TEMPERATURE_C, e0, _REFRACTION_DEG))
    azimuth = spa.topocentric_azimuth_angle(spa.topocentric_astronomers_azimuth(topo_hour_angle, topo_declination, lat))
    day_of_year = (middle - middle.astype("datetime64[Y]")).astype("timedelta64[D]").astype(int) + 1
    dni_extra = np.broadcast_to(pvlib.irradiance.get_extra_radiation(day_of_year.astype(np.float64)), shape)
    return SolarGeometry(zenith=spa.topocentric_zenith_angle(e0), apparent_zenith=spa.topocentric_zenith_angle(e),
                         azimuth=azimuth, dni_extra=np.array(dni_extra))


def plant_ac_kw(ghi, temp_air_c, wind_10m, sun: SolarGeometry, *, tilt, azimuth, dc_kwp, ac_kw, losses_pct,
                temp_coeff_pct, mounting: str | Sequence[str], direct_horizontal=None) -> np.ndarray:
    """AC power, kW, of plants whose fields are arrays (site, time) or (site, time, member):
    ``ghi`` the interval's mean global horizontal radiation (W/m2), ``direct_horizontal`` its
    direct part on the horizontal (None: split from ``ghi``), ``temp_air_c`` the 2 m air
    temperature, ``wind_10m`` the 10 m wind speed (m/s). The plant parameters are scalars or one
    value per site (pvlib's azimuth convention, 180 = south; ``temp_coeff_pct`` in %/degC,
    ``losses_pct`` the DC losses in %). NaN where the radiation is NaN; 0 at night."""
    ghi = np.maximum(np.asarray(ghi, dtype=np.float64), 0.0)
    ndim = ghi.ndim

    def per_site(x):
        a = np.asarray(x, dtype=np.float64)
        return a.reshape((-1,) + (1,) * (ndim - 1)) if a.ndim else a

    def per_step(x):  # geometry (site, time) against fields with trailing member axes
        return x.reshape(x.shape + (1,) * (ndim - 2))

    zenith, apparent, sun_azimuth, dni_extra = (per_step(a) for a in (
        sun.zenith, sun.apparent_zenith, sun.azimuth, sun.dni_extra))
    if direct_horizontal is None:
        split = pvlib.irradiance.erbs_driesse(ghi, zenith, dni_extra=dni_extra, max_zenith=_MAX_ZENITH_DEG)
        dni, dhi = split["dni"], split["dhi"]
    else:
        beam = np.clip(np.asarray(direct_horizontal, dtype=np.float64), 0.0, ghi)
        day = zenith < _MAX_ZENITH_DEG
        with np.errstate(divide="ignore", invalid="ignore"):
            dni = np.where(day, np.minimum(beam / np.cos(np.radians(zenith)), dni_extra), 0.0)
        dhi = np.where(day, ghi - beam, ghi)
    tilt, surface_azimuth = per_site(tilt), per_site(azimuth)
    airmass = pvlib.atmosphere.get_relative_airmass(apparent)
    poa = pvlib.irradiance.get_total_irradiance(
        tilt, surface_azimuth, apparent, sun_azimuth, dni, ghi, dhi, dni_extra=dni_extra, airmass=airmass,
        albedo=ALBEDO, model="perez")
    incidence = pvlib.irradiance.aoi(tilt, surface_azimuth, apparent, sun_azimuth)
    # without diffuse light the Perez sky brightness (its epsilon) is 0/0: the sky gives nothing
    diffuse = np.where(dhi > 0.0, poa["poa_diffuse"], poa["poa_ground_diffuse"])
    beam = np.maximum(poa["poa_direct"], 0.0)
    with np.errstate(invalid="ignore"):  # the modifier is NaN behind the modules, where no beam is
        effective = np.where(beam > 0.0, beam * pvlib.iam.physical(incidence), 0.0) + diffuse
    # the modules heat with all the light incident on them (as pvlib's ModelChain)
    temp_cell = pvlib.temperature.sapm_cell(beam + diffuse, temp_air_c, wind_10m, **_sapm_parameters(mounting, ndim))
    dc = pvlib.pvsystem.pvwatts_dc(effective, temp_cell, per_site(dc_kwp), per_site(temp_coeff_pct) / 100.0)
    dc = np.maximum(dc, 0.0) * (1.0 - per_site(losses_pct) / 100.0)
    ac = pvlib.inverter.pvwatts(dc, per_site(ac_kw) / INVERTER_EFFICIENCY, eta_inv_nom=INVERTER_EFFICIENCY)
    return np.where(np.isnan(ghi), np.nan, ac)


def _sapm_parameters(mounting: str | Sequence[str], ndim: int) -> dict[str, np.ndarray]:
    """The Sandia model's a, b and deltaT of each site's mounting (pvlib's table), per site."""
    table = pvlib.temperature.TEMPERATURE_MODEL_PARAMETERS["sapm"]
    names = [mounting] if isinstance(mounting, str) else list(mounting)
    shape = (-1,) + (1,) * (ndim - 1) if not isinstance(mounting, str) else ()
    return {k: np.array([table[m][k] for m in names], dtype=np.float64).reshape(shape) for k in ("a", "b", "deltaT")}
