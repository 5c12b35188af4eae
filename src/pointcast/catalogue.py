"""The catalogue: the one place where a canonical variable is defined.

Every stage asks the catalogue how to treat a variable instead of carrying per-variable
branches (the Open-Meteo way): its SI unit, valid range, how it behaves in time (state,
accumulation, interval mean, interval maximum), and whether it is corrected to a point's
elevation. Sources map their own GRIB encodings onto these names (``sources/``).

Interval quantities (accumulations, means, maxima) are stored after decode as the value of
the interval that *ends* at the time stamp; products re-express them for the interval that
*starts* at the published time stamp (see ``products/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Temporal(StrEnum):
    """How a variable behaves in time, which fixes how it is de-accumulated and resampled."""

    STATE = "state"  # instantaneous; interpolated smoothly (monotone cubic)
    ACCUMULATION = "accumulation"  # amount over the interval; split/summed so totals are kept
    RADIATION = "radiation"  # interval-mean flux; resampled through the clear-sky index
    INTERVAL_MAX = "interval_max"  # maximum over the interval; held over its sub-intervals
    CONSTANT = "constant"  # does not depend on time (orography)


class Elevation(StrEnum):
    """Correction applied when a point's elevation differs from the model's surface height."""

    LAPSE = "lapse"  # temperature-like: standard lapse rate 0.0065 K/m
    HYPSOMETRIC = "hypsometric"  # surface pressure: hypsometric equation


@dataclass(frozen=True)
class Variable:
    name: str
    units: str  # canonical unit, CF/UDUNITS spelling
    long_name: str
    valid_range: tuple[float, float]
    temporal: Temporal
    standard_name: str | None = None
    elevation: Elevation | None = None
    nonnegative: bool = False  # clip tiny negative values left by interpolation
    # A model run without it is not used: the weather code of every product and the elements
    # people read first are made from it. A run lacking any other variable is used without
    # it, its elements missing where no other model of the blend supplies them (docs/method.md,
    # "Degraded runs").
    essential: bool = False


def _v(*args, **kwargs) -> Variable:
    return Variable(*args, **kwargs)


S, A, R, M, C = (Temporal.STATE, Temporal.ACCUMULATION, Temporal.RADIATION,
                 Temporal.INTERVAL_MAX, Temporal.CONSTANT)

VARIABLES: dict[str, Variable] = {v.name: v for v in (
    # Near-surface fields, as decoded from the sources.
    _v("t2m", "K", "2 m temperature", (180.0, 340.0), S, "air_temperature", Elevation.LAPSE, essential=True),
    _v("d2m", "K", "2 m dewpoint temperature", (170.0, 320.0), S, "dew_point_temperature",
       Elevation.LAPSE),
    _v("rh2m", "%", "relative humidity near the surface (2 m, or 1.5 m for JMA)", (0.0, 100.0), S,
       "relative_humidity", nonnegative=True),
    _v("sp", "Pa", "surface pressure", (40000.0, 110000.0), S, "surface_air_pressure",
       Elevation.HYPSOMETRIC),
    _v("msl", "Pa", "mean sea level pressure", (85000.0, 110000.0), S,
       "air_pressure_at_mean_sea_level"),
    _v("u10", "m s-1", "10 m eastward wind", (-100.0, 100.0), S, "eastward_wind", essential=True),
    _v("v10", "m s-1", "10 m northward wind", (-100.0, 100.0), S, "northward_wind", essential=True),
    _v("gust", "m s-1", "10 m wind gust, maximum over the interval", (0.0, 120.0), M,
       "wind_speed_of_gust", nonnegative=True),
    _v("tp", "kg m-2", "total precipitation over the interval", (0.0, 500.0), A,
       "precipitation_amount", nonnegative=True, essential=True),
    _v("sf", "kg m-2", "snowfall (water equivalent) over the interval", (0.0, 500.0), A,
       "snowfall_amount", nonnegative=True),
    _v("ssrd", "W m-2", "global (surface downwelling shortwave) radiation, interval mean",
       (0.0, 1400.0), R, "surface_downwelling_shortwave_flux_in_air", nonnegative=True),
    _v("fdir", "W m-2", "direct shortwave radiation on a horizontal surface, interval mean",
       (0.0, 1400.0), R, "surface_direct_downwelling_shortwave_flux_in_air", nonnegative=True),
    _v("tcc", "%", "total cloud cover", (0.0, 100.0), S, "cloud_area_fraction", nonnegative=True, essential=True),
    _v("vis", "m", "horizontal visibility", (0.0, 100000.0), S, "visibility_in_air",
       nonnegative=True),
    # CAPE of one parcel kind a variable: the kinds differ by hundreds of J/kg in one
    # atmosphere (the most unstable parcel's is the largest), so they are never mixed.
    _v("cape_mu", "J kg-1", "convective available potential energy, most unstable parcel",
       (0.0, 10000.0), S, "atmosphere_convective_available_potential_energy", nonnegative=True),
    _v("cape_ml", "J kg-1", "convective available potential energy, mixed-layer parcel",
       (0.0, 10000.0), S, "atmosphere_convective_available_potential_energy", nonnegative=True),
    _v("cape_sb", "J kg-1", "convective available potential energy, surface-based parcel",
       (0.0, 10000.0), S, "atmosphere_convective_available_potential_energy", nonnegative=True),
    _v("orog", "m", "model surface height above sea level", (-500.0, 9000.0), C,
       "surface_altitude"),
    _v("lcc", "%", "low cloud cover", (0.0, 100.0), S, "low_type_cloud_area_fraction",
       nonnegative=True),
    _v("ssr", "W m-2", "net shortwave radiation at the surface, interval mean", (0.0, 1400.0), R,
       "surface_net_downward_shortwave_flux", nonnegative=True),
    # Wind on height-above-ground levels (10, 100, 200 m where a source publishes them).
    _v("u", "m s-1", "eastward wind on height levels", (-150.0, 150.0), S, "eastward_wind"),
    _v("v", "m s-1", "northward wind on height levels", (-150.0, 150.0), S, "northward_wind"),
    # Model-level fields (ICON): wind on full levels, and the height of the half levels above
    # sea level (HHL, time-invariant), from which each full level's height above ground follows.
    _v("u_ml", "m s-1", "eastward wind on model levels", (-150.0, 150.0), S, "eastward_wind"),
    _v("v_ml", "m s-1", "northward wind on model levels", (-150.0, 150.0), S, "northward_wind"),
    _v("hhl", "m", "height of model half levels above sea level", (-500.0, 80000.0), C),
    # Pressure-level fields, for the profile above the surface.
    _v("t_pl", "K", "temperature on pressure levels", (170.0, 340.0), S, "air_temperature"),
    _v("u_pl", "m s-1", "eastward wind on pressure levels", (-150.0, 150.0), S, "eastward_wind"),
    _v("v_pl", "m s-1", "northward wind on pressure levels", (-150.0, 150.0), S,
       "northward_wind"),
    _v("z_pl", "m", "geopotential height of pressure levels", (-1000.0, 20000.0), S,
       "geopotential_height"),
    # Point-level variables made by extract (vertical profile, neighbourhood probability).
    _v("wind_u", "m s-1", "eastward wind at height above ground", (-150.0, 150.0), S,
       "eastward_wind"),
    _v("wind_v", "m s-1", "northward wind at height above ground", (-150.0, 150.0), S,
       "northward_wind"),
    _v("wind_speed", "m s-1", "wind speed at height above ground (an ensemble member's)", (0.0, 150.0), S,
       "wind_speed", nonnegative=True),
    _v("air_temperature", "K", "air temperature at height above ground", (170.0, 340.0), S,
       "air_temperature", Elevation.LAPSE),
    _v("pop", "%", "neighbourhood probability of at least 0.1 mm of precipitation in the hour",
       (0.0, 100.0), M,
       nonnegative=True),
    # Made from an ensemble's members (pointcast.ensemble): a probability and the amounts of
    # a clock hour, held over its quarters; quantiles of states, blended as states.
    _v("pop_ens", "%", "share of ensemble members with at least 0.1 mm of precipitation in the hour",
       (0.0, 100.0), M, nonnegative=True),
    _v("pop_neighbourhood", "%", "neighbourhood probability of at least 0.1 mm of precipitation in "
       "the hour (from the deterministic blend, kept beside the ensemble's)", (0.0, 100.0), M,
       nonnegative=True),
    _v("tp_members", "kg m-2", "each ensemble member's precipitation in the hour", (0.0, 500.0), M,
       nonnegative=True),
    _v("tp_q", "kg m-2", "quantiles of the ensemble members' precipitation in the hour", (0.0, 500.0), M,
       nonnegative=True),
    _v("t2m_q", "K", "quantiles of the ensemble members' 2 m temperature", (180.0, 340.0), S),
    _v("wspd_q", "m s-1", "quantiles of the ensemble members' wind speed at height above ground",
       (0.0, 150.0), S, nonnegative=True),
)}

# Eastward and northward components of one vector: resampled in time together, so that the
# speed between two steps follows the speeds, not the chord between the two vectors.
VECTORS: tuple[tuple[str, str], ...] = (("u10", "v10"), ("u", "v"), ("u_ml", "v_ml"),
                                        ("u_pl", "v_pl"), ("wind_u", "wind_v"))


def variable(name: str) -> Variable:
    try:
        return VARIABLES[name]
    except KeyError:
        raise KeyError(f"{name!r} is not in the catalogue of canonical variables") from None
