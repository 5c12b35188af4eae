"""Wind-farm power: hub-height wind and air density -> kW (docs/method.md, "Wind power").

The power curve is corrected for air density as windpowerlib does
(`windpowerlib.power_output.power_curve_density_correction`, after Svenningsen 2010): each
tabulated wind speed v of the curve (measured at the standard density 1.225 kg/m3,
IEC 61400-12-1) moves to ``v * (1.225 / rho) ** p(v)``, with p = 1/3 up to 7.5 m/s, rising
linearly to 2/3 at 12.5 m/s and above, and the site's wind is read off the moved curve.
windpowerlib maps a Python function over the time steps; `turbine_power_kw` computes the same
numbers for whole arrays at once (tests/power/test_wind.py checks them against windpowerlib's
own function). Two choices differ from windpowerlib's, both outside the curve's tabulated
range: the cut-out applies to the wind itself (a turbine's controller stops on the wind it
measures, not on a density-scaled one), and between the last moved row and the cut-out the
last row's power holds rather than zero.
"""

from __future__ import annotations

import numpy as np

from .. import physics
from ..turbines import PowerCurve

__all__ = ["STANDARD_DENSITY", "hub_air_density", "density_exponent",
           "turbine_power_kw", "running", "farm_power_kw"]

STANDARD_DENSITY = 1.225
"""kg/m3: the density power curves are stated at (IEC 61400-12-1, the ISO standard atmosphere at sea level)."""
_EXPONENT_SPEEDS = (7.5, 12.5)  # m/s: windpowerlib's p(v) is 1/3 below, 2/3 above, linear between
_EXPONENTS = (1.0 / 3.0, 2.0 / 3.0)


def hub_air_density(p_sfc_pa, t_sfc_k, td_sfc_k, t_hub_k, hub_height_m):
    """Density of moist air at hub height, kg/m3: the ideal-gas law p/(Rd*Tv).

    Pressure from the surface's by the hypsometric equation (`physics.pressure_at_height`),
    the virtual temperature from the hub's temperature and the 2 m mixing ratio, taken as
    constant up to the hub (a well-mixed surface layer). Moist rather than dry: water vapour
    makes air up to 1-2 % lighter in warm humid weather, as much as a 150 m height change.
    """
    p_hub = physics.pressure_at_height(p_sfc_pa, t_sfc_k, t_hub_k, hub_height_m)
    tv = physics.virtual_temperature(t_hub_k, physics.mixing_ratio(p_sfc_pa, td_sfc_k))
    return p_hub / (physics.RD * tv)


def density_exponent(curve_speed_m_s):
    """p(v) of the density correction at a curve's tabulated speeds (windpowerlib's formula)."""
    return np.interp(curve_speed_m_s, _EXPONENT_SPEEDS, _EXPONENTS)


def turbine_power_kw(wind_speed, density, curve: PowerCurve):
    """One turbine's power, kW, at hub-height ``wind_speed`` (m/s) and air ``density`` (kg/m3)
    of any broadcastable shapes; NaN where either is NaN. No hysteresis (see `running`).

    The moved curve is not built element by element: each element's wind is carried back to
    the standard curve's speed axis through the inverse of the move (closed form where p is
    constant, a few Newton steps where it varies), which finds the row pair it falls between;
    the power is then interpolated between those two rows as moved to the element's density.
    """
    density = np.asarray(density, dtype=np.float64)
    w = np.atleast_1d(np.asarray(wind_speed, dtype=np.float64) + np.zeros_like(density))  # the broadcast shape
    v = curve.wind_speed_m_s
    log_ratio = np.log(STANDARD_DENSITY / density)  # at the density's own shape, often smaller
    (v_lo, v_hi), (p_lo, p_hi) = _EXPONENT_SPEEDS, _EXPONENTS
    slope = (p_hi - p_lo) / (v_hi - v_lo)
    # the move v -> v * exp(p(v) * log_ratio) inverted, w -> the standard curve's speed
    standard = w * np.exp(-p_lo * log_ratio)
    upper = w * np.exp(-p_hi * log_ratio)
    between = np.flatnonzero((standard > v_lo) & (upper < v_hi))  # p varies: Newton steps there
    standard = np.where(upper >= v_hi, upper, standard)
    if between.size:
        ratio = np.broadcast_to(log_ratio, w.shape)[np.unravel_index(between, w.shape)]
        target = w.ravel()[between]
        log_target = np.log(target)
        guess = np.clip(target * np.exp(-0.5 * (p_lo + p_hi) * ratio), v_lo, v_hi)
        for _ in range(3):  # quadratic convergence from within 2 % of the root: 1e-12 after three
            residual = np.log(guess) + (p_lo + slope * (guess - v_lo)) * ratio - log_target
            guess = guess - residual / (1.0 / guess + slope * ratio)
        standard.ravel()[between] = guess
    segment = np.searchsorted(v, standard, side="right")  # rows at or below w once moved
    # the segment's two ends (the rows below and above w, or sentinels: no power below the
    # first row, the last row's past it), gathered column by column (1-D takes are the fast ones)
    lower_v, lower_e, upper_v, upper_e, start, rise = (np.take(column, segment) for column in _segments(curve))
    x0 = lower_v * np.exp(lower_e * log_ratio)
    x1 = upper_v * np.exp(upper_e * log_ratio)
    power = start + rise * np.clip((w - x0) / (x1 - x0), 0.0, 1.0)  # NaN where w is
    power = np.where(w > curve.cut_out_m_s, 0.0, power)
    return power.reshape(np.broadcast_shapes(np.shape(wind_speed), density.shape))


def _segments(curve: PowerCurve) -> tuple[np.ndarray, ...]:
    """Per segment k = 0..n (between rows k-1 and k): its two rows' speeds and exponents, the
    power at its start and the rise over it; segment 0 has no power, segment n the last row's."""
    v, p = curve.wind_speed_m_s, curve.power_kw
    e = density_exponent(v)
    return (np.r_[0.0, v], np.r_[e[0], e], np.r_[v, v[-1] + 1.0], np.r_[e, e[-1]], np.r_[0.0, p],
            np.r_[0.0, np.diff(p), 0.0])


def running(wind_speed, cut_out_m_s: float, restart_m_s: float | None = None, axis: int = -1) -> np.ndarray:
    """Whether the turbines run at each time step, along ``axis`` (time): they stop when the
    wind exceeds the cut-out and, with a ``restart_m_s`` (hysteresis), start again only once it
    has fallen below that speed. Running before the first step. Without a restart speed they
    run wherever the wind is at most the cut-out."""
    w = np.asarray(wind_speed, dtype=np.float64)
    stop = w > cut_out_m_s
    if restart_m_s is None:
        return ~stop
    start = w < restart_m_s
    steps = np.arange(w.shape[axis]).reshape([-1 if a == axis % w.ndim else 1 for a in range(w.ndim)])
    last_event = np.maximum.accumulate(np.where(stop | start, steps, -1), axis=axis)
    # the state is the last event's: a start (or none yet) runs, a stop does not
    return (last_event < 0) | np.take_along_axis(start, np.maximum(last_event, 0), axis=axis)


def farm_power_kw(wind_speed, density, curve: PowerCurve, turbines: float, efficiency: float,
                  restart_m_s: float | None = None, axis: int = -1) -> np.ndarray:
    """A farm's power, kW: ``turbines`` x the density-corrected curve power x ``efficiency``
    (wake and availability losses; `config.DEFAULT_FARM_EFFICIENCY` where a site gives none),
    zero where `running` says the turbines stand. ``axis`` is time (for the hysteresis);
    ``turbines`` may be fractional (a capacity given in MW over a curve's rated power)."""
    power = turbine_power_kw(wind_speed, density, curve)
    return power * (turbines * efficiency) * running(wind_speed, curve.cut_out_m_s, restart_m_s, axis)
