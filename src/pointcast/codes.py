"""Weather-type labels (Europe) and 16-point compass codes (global, Japan).

weather_type
    One of the 16 WMO 4677-family labels of design.md §4, decided from model fields
    the way NWP post-processing usually does (present-weather symbol from rates,
    phase and instability). Rules, first match wins:

    * precipitation rate < 0.1 mm/h is dry (below the smallest amount a gauge reports);
    * dry: "Fog" when visibility < 1000 m (WMO definition of fog), otherwise the cloud
      class by total cloud cover on okta boundaries: <= 12.5 % (0-1 okta) "Clear sky",
      <= 37.5 % (2-3 oktas) "Mainly clear", <= 75 % (4-6 oktas) "Partly cloudy",
      else (7-8 oktas) "Overcast";
    * wet, CAPE >= 1000 J/kg and rate >= 1 mm/h: "Thunderstorm", whatever the phase
      (instability strong enough for deep convection plus a convective-sized rate);
    * wet, otherwise by snow fraction f = snow rate / precipitation rate:
      - f >= 0.8 (solid): "Snow showers" when CAPE >= 500 J/kg, else "Heavy snow" when
        the snow water equivalent is >= 2.5 mm/h (the US NWS heavy-snow rate of
        1 in/h at the usual 10:1 snow-to-liquid ratio), else "Snow";
      - 0.2 <= f < 0.8 (mixed): "Sleet" (no sleet-shower label exists);
      - f < 0.2 (liquid) and t2m <= 0 degC: freezing, a hazard that outranks showers:
        "Freezing drizzle" for a light rate from an overcast sky (as drizzle below),
        else "Freezing rain";
      - liquid above 0 degC: "Rain showers" when CAPE >= 500 J/kg, "Drizzle" when the
        rate is < 0.5 mm/h and the sky overcast (> 75 %, the low stratiform cloud
        drizzle falls from), "Heavy rain" at >= 4 mm/h, else "Rain". 0.5 and 4 mm/h
        are the UK Met Office observers' slight/moderate/heavy rain-rate bounds.

    Missing CAPE counts as 0 and missing visibility as no fog. Where a missing value
    decides the label (precipitation rate; cloud cover when dry without fog or when it
    would separate drizzle from rain; snow rate or temperature when wet) the label is
    None, which the publish validation rejects rather than guessing.

compass16
    Direction the wind blows from on 16 points, clockwise: 1 = NNE, 4 = E, 8 = S,
    12 = W, 16 = N; each sector is centred on a multiple of 22.5 deg and includes its
    anticlockwise edge (11.25 deg is NNE). 0 = calm (< 0.3 m/s, Beaufort 0);
    MISSING_CODE where speed or direction is missing.
"""

from __future__ import annotations

import numpy as np

WEATHER_TYPES = (
    "Clear sky",
    "Mainly clear",
    "Partly cloudy",
    "Overcast",
    "Fog",
    "Drizzle",
    "Freezing drizzle",
    "Rain",
    "Heavy rain",
    "Freezing rain",
    "Sleet",
    "Snow",
    "Heavy snow",
    "Rain showers",
    "Snow showers",
    "Thunderstorm",
)

MISSING_CODE = -99
"""Integer code for a missing value in the global and Japan products (design.md §4)."""
CALM_CODE = 0
CALM_SPEED = 0.3
"""Upper bound of Beaufort force 0, m/s."""
_SECTOR_EDGES_DEG = 11.25 + 22.5 * np.arange(16)

DRY_BELOW_MM_H = 0.1
FOG_VISIBILITY_M = 1000.0
CLOUD_CLASS_BOUNDS_PCT = (12.5, 37.5, 75.0)
THUNDER_CAPE_J_KG = 1000.0
THUNDER_RATE_MM_H = 1.0
SHOWER_CAPE_J_KG = 500.0
SOLID_FRACTION = 0.8
LIQUID_FRACTION = 0.2
HEAVY_SNOW_MM_H = 2.5
DRIZZLE_BELOW_MM_H = 0.5
HEAVY_RAIN_MM_H = 4.0


def weather_type(total_cloud_cover_pct, precip_rate_mm_h, snow_rate_mm_h, t2m_c, visibility_m, cape_j_kg):
    """Weather-type label per element (object array of str, None where undecidable).

    Rules and their sources are in the module docstring. Inputs broadcast together.
    """
    cloud, precip, snow, t2m, vis, cape = np.broadcast_arrays(
        *(
            np.asarray(a, dtype=float)
            for a in (total_cloud_cover_pct, precip_rate_mm_h, snow_rate_mm_h, t2m_c, visibility_m, cape_j_kg)
        )
    )
    cape = np.nan_to_num(cape, nan=0.0)
    clear_bound, mainly_clear_bound, partly_cloudy_bound = CLOUD_CLASS_BOUNDS_PCT

    wet = precip >= DRY_BELOW_MM_H
    fog = vis < FOG_VISIBILITY_M
    snow_fraction = np.clip(np.divide(snow, precip, out=np.zeros_like(precip), where=wet), 0.0, 1.0)
    solid = snow_fraction >= SOLID_FRACTION
    mixed = (snow_fraction >= LIQUID_FRACTION) & ~solid
    liquid = snow_fraction < LIQUID_FRACTION
    convective = cape >= SHOWER_CAPE_J_KG
    light = precip < DRIZZLE_BELOW_MM_H
    overcast = cloud > partly_cloudy_bound

    rules = (
        (np.isnan(precip), None),
        (~wet & fog, "Fog"),
        (~wet & np.isnan(cloud), None),
        (~wet & (cloud <= clear_bound), "Clear sky"),
        (~wet & (cloud <= mainly_clear_bound), "Mainly clear"),
        (~wet & (cloud <= partly_cloudy_bound), "Partly cloudy"),
        (~wet, "Overcast"),
        ((cape >= THUNDER_CAPE_J_KG) & (precip >= THUNDER_RATE_MM_H), "Thunderstorm"),
        (np.isnan(snow), None),
        (solid & convective, "Snow showers"),
        (solid & (snow >= HEAVY_SNOW_MM_H), "Heavy snow"),
        (solid, "Snow"),
        (mixed, "Sleet"),
        (np.isnan(t2m), None),
        (light & np.isnan(cloud) & ~(convective & (t2m > 0.0)), None),
        ((t2m <= 0.0) & light & overcast, "Freezing drizzle"),
        (t2m <= 0.0, "Freezing rain"),
        (convective, "Rain showers"),
        (light & overcast, "Drizzle"),
        (precip >= HEAVY_RAIN_MM_H, "Heavy rain"),
        (wet & liquid, "Rain"),
    )
    return np.select(
        [condition for condition, _ in rules],
        [np.full(precip.shape, label, dtype=object) for _, label in rules],
        default=None,
    )


def compass16(speed, direction_deg):
    """16-point compass code of the direction the wind blows from (module docstring).

    Returns an int array: 1..16 clockwise from NNE to N, 0 when calm, MISSING_CODE
    where speed, or the direction of a non-calm wind, is NaN.
    """
    speed, direction = np.broadcast_arrays(np.asarray(speed, dtype=float), np.asarray(direction_deg, dtype=float))
    calm = speed < CALM_SPEED
    missing = np.isnan(speed) | (~calm & np.isnan(direction))
    # Counting the sector edges at or below the direction is exact at every edge, where
    # floor((d + 11.25) / 22.5) can round a direction one ulp below an edge across it.
    sector = np.searchsorted(_SECTOR_EDGES_DEG, np.mod(direction, 360.0), side="right")
    code = np.where(sector == 0, 16, sector)
    return np.where(missing, MISSING_CODE, np.where(calm, CALM_CODE, code))
