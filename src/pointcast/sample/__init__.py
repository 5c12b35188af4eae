"""The embedded sample source: deterministic synthetic model runs written as real GRIB2.

``make run`` works offline because of it. It stands in for the real upstreams
(``pointcast.sources``) and writes what they write, byte for byte in format if not in content:
the same file layouts, centres, parameter encodings, packing and step conventions, with values
from an analytic weather model.

- ``source``: the ``Source`` a cycle uses (``[sources.<name>] type = "sample"``): discover a
  run, fetch it into the cache (written once, reused while its parameters match).
- ``weather``: the synthetic atmosphere and its integration over a run's steps;
  ``terrain``: land, sea and orography under it; ``grids``: the grids it is sampled on.
- ``encode``: GRIB2 writing shared by the upstreams; one module per upstream's encoding and
  layout: ``ifs`` (ECMWF open data), ``icon`` (DWD open data, ICON-EU and ICON-D2), ``gfs``
  (NOAA), ``msm`` (JMA); ``ensemble``: ENS, ICON-EU-EPS and GEFS, members from the same
  weather plus a documented perturbation (``ensemble.perturbation``).

Choices a reader of the files should know: overcast is 99.99 % so that 16-bit packing never
decodes above 100 % (JMA's 12-bit percentages are capped at 99.98 % for the same reason).
"""

from .encode import products_of
from .grids import cell_grid, sample_grid
from .msm import multi_field
from .source import DEFAULT_AREA, SYNTHETIC_NOTE, SampleSource
from .terrain import LandMask, flat_half_level_heights
from .weather import Weather, cos_zenith, hours_since_epoch, lows, relative_humidity

__all__ = [
    "DEFAULT_AREA", "LandMask", "SYNTHETIC_NOTE", "SampleSource", "Weather", "cell_grid",
    "cos_zenith", "flat_half_level_heights", "hours_since_epoch", "lows", "multi_field",
    "products_of", "relative_humidity", "sample_grid",
]
