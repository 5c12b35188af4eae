"""pointcast: precomputed point weather forecasts from NWP model runs."""

# pyproj must load its PROJ library before ecCodes does: the eccodes wheel's eckit bundles
# another libproj/libsqlite3, and whichever loads first wins. Loaded the other way round,
# PROJ reports "no database context specified" and can crash the process.
import pyproj  # noqa: F401  (import order matters, see above)

__version__ = "0.1.0"
