"""pointcast: precomputed point weather forecasts from NWP model runs."""

__version__ = "0.1.0"
