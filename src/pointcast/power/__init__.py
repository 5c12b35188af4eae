"""Power of wind farms and solar plants from the forecast's fields (docs/method.md, "Power").

`wind`: a farm's power from hub-height wind and air density through its turbine's
density-corrected power curve (`pointcast.turbines`), and the quantiles of the members' power.
`pv`: a plant's AC power from global, direct and diffuse radiation, air temperature and wind
with pvlib. Both are vectorised over any (site, time[, member]) arrays: the build stage calls
them once per site or per list, never per time step.
"""
