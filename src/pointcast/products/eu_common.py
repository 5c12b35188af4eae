"""European common forecasts (spec 4.1 medium range, 4.2 short range).

Elements of spec 2.1 from the blended canonical series. Interval elements (precipitation,
snowfall, radiation, gust, precipitation probability) describe the step that *starts* at the
entry's datetime, as rates (kg/m2/h), means (W/m2) or maxima; states are instantaneous.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Callable

import numpy as np
import xarray as xr

from .. import codes, physics
from ..config import ProductConfig
from .base import (Files, ProductOutput, Records, RunContext, archive_frame, freq_series, iso,
                   numbers, published_direction, put_with_records, render_index, strings)
from .global_wx import point_time_zone

HEIGHTS = (10.0, 100.0, 200.0)
KELVIN = 273.15


@dataclass(frozen=True)
class Element:
    key: str
    unit: str
    decimals: int | None  # None: integer
    valid: tuple[float, float]
    compute: Callable[["Fields"], np.ndarray]
    long_name: str


class Fields:
    """Canonical series of one product step, with the derived quantities shared by elements."""

    def __init__(self, ds: xr.Dataset, step: np.timedelta64):
        self.ds = ds
        self.hours = step / np.timedelta64(1, "h")

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.ds:  # no model of the blend has it: NaN, which validation rejects
            return np.full((self.ds.sizes["time"], self.ds.sizes["point"]), np.nan)
        return self.ds[name].transpose("time", "point", ...).values.astype(np.float64)

    def at(self, name: str, height: float) -> np.ndarray:
        return self.ds[name].sel(height=height).transpose("time", "point").values.astype(np.float64)

    def wind(self, height: float) -> tuple[np.ndarray, np.ndarray]:
        return self.at("wind_u", height), self.at("wind_v", height)

    def temp(self, height: float) -> np.ndarray:
        return self["t2m"] if height == 2 else self.at("air_temperature", height)

    def dewpoint(self) -> np.ndarray:
        return np.minimum(self["d2m"], self["t2m"])

    def pressure(self, height: float) -> np.ndarray:
        """Hypsometric pressure at `height` above ground from surface pressure and the layer's temperature."""
        return physics.pressure_at_height(self["sp"], self["t2m"], self.temp(height), height)

    def rate(self, name: str) -> np.ndarray:
        return self[name] / self.hours

    def direct(self) -> np.ndarray:
        return np.minimum(self["fdir"], self["ssrd"])


def _wind_elements() -> list[Element]:
    out = []
    for comp, label, fn in (
        ("u_windspd", "eastward wind", lambda f, h: f.wind(h)[0]),
        ("v_windspd", "northward wind", lambda f, h: f.wind(h)[1]),
        ("windir", "wind direction (from, clockwise from north)",
         lambda f, h: published_direction(*f.wind(h))),
        ("windspd", "wind speed", lambda f, h: physics.wind_speed(*f.wind(h))),
    ):
        for h in HEIGHTS:
            unit = "degree" if comp == "windir" else "m/s"
            valid = (0.0, 360.0) if comp == "windir" else ((0.0, 150.0) if comp == "windspd" else (-150.0, 150.0))
            out.append(Element(f"{comp}_{int(h)}m", unit, 1 if comp == "windir" else 2, valid,
                               (lambda f, h=h, fn=fn: fn(f, h)), f"{label} at {int(h)} m"))
    return out


ELEMENTS: tuple[Element, ...] = (
    Element("humidity", "%", None, (0, 100),
            lambda f: np.round(100 * physics.relative_humidity(f["t2m"], f.dewpoint())), "relative humidity at 2 m"),
    Element("snowfall", "kg/m2/h", 2, (0, 200), lambda f: np.minimum(f.rate("sf"), f.rate("tp")),
            "snowfall rate (water equivalent)"),
    Element("precipitation", "kg/m2/h", 2, (0, 300), lambda f: f.rate("tp"), "precipitation rate"),
    Element("temp_2m", "°C", 2, (-90, 65), lambda f: f.temp(2) - KELVIN, "temperature at 2 m"),
    Element("temp_100m", "°C", 2, (-90, 65), lambda f: f.temp(100) - KELVIN, "temperature at 100 m"),
    Element("temp_200m", "°C", 2, (-90, 65), lambda f: f.temp(200) - KELVIN, "temperature at 200 m"),
    Element("dewpoint_temperature", "°C", 2, (-100, 40), lambda f: f.dewpoint() - KELVIN,
            "dewpoint temperature at 2 m"),
    Element("pressure_sfc", "hPa", 1, (400, 1100), lambda f: f["sp"] / 100, "surface pressure"),
    Element("pressure_100m", "hPa", 1, (400, 1100), lambda f: f.pressure(100) / 100, "pressure at 100 m"),
    Element("pressure_200m", "hPa", 1, (400, 1100), lambda f: f.pressure(200) / 100, "pressure at 200 m"),
    Element("sea_surface_pressure", "hPa", 1, (850, 1100), lambda f: f["msl"] / 100,
            "mean sea level pressure"),
    *_wind_elements(),
    Element("total_solar_radiation", "W/m2", 1, (0, 1400), lambda f: f["ssrd"], "global radiation"),
    Element("solar_radiation_dir", "W/m2", 1, (0, 1400), lambda f: f.direct(), "direct radiation (horizontal)"),
    Element("solar_radiation_diff", "W/m2", 1, (0, 1400), lambda f: f["ssrd"] - f.direct(), "diffuse radiation"),
    Element("windgust", "m/s", 2, (0, 150),
            lambda f: np.maximum(f["gust"], physics.wind_speed(*f.wind(10))), "wind gust at 10 m"),
    Element("total_cloud_cover", "%", 1, (0, 100), lambda f: f["tcc"], "total cloud cover"),
    Element("precipitation_proba", "%", 0, (0, 100), lambda f: f["pop"], "probability of precipitation"),
    Element("visibility", "m", 0, (0, 100000), lambda f: f["vis"], "visibility"),
    Element("air_density", "kg/m3", 3, (0.5, 1.6),
            lambda f: physics.air_density(f["sp"], f["t2m"], f.dewpoint()), "air density at the surface"),
)

# Spec 2.1 order of the data entry keys.
ORDER = ("datetime", "weather_type", "humidity", "snowfall", "precipitation", "temp_2m", "temp_100m",
         "temp_200m", "dewpoint_temperature", "pressure_sfc", "pressure_100m", "pressure_200m",
         "sea_surface_pressure", "u_windspd_10m", "u_windspd_100m", "u_windspd_200m",
         "v_windspd_10m", "v_windspd_100m", "v_windspd_200m", "windir_10m", "windir_100m",
         "windir_200m", "windspd_10m", "windspd_100m", "windspd_200m", "total_solar_radiation",
         "solar_radiation_dir", "solar_radiation_diff", "windgust", "total_cloud_cover",
         "precipitation_proba", "visibility", "air_density")
BY_KEY = {e.key: e for e in ELEMENTS}
UNITS = {"datetime": "UTC", "weather_type": "NA", **{e.key: e.unit for e in ELEMENTS}}
assert set(ORDER) == set(UNITS), "every spec element has exactly one definition"


def elements(ds: xr.Dataset, step: np.timedelta64) -> dict[str, np.ndarray]:
    """Every numeric element (time, point) plus weather_type labels for one product step."""
    f = Fields(ds, step)
    out = {e.key: e.compute(f) for e in ELEMENTS}
    out["weather_type"] = codes.weather_type(out["total_cloud_cover"], out["precipitation"],
                                             out["snowfall"], out["temp_2m"], out["visibility"],
                                             f[codes.CAPE])
    return out


class EuCommon:
    """4.1 and 4.2: the same elements over the product's horizon at 1H, 30min and 15min."""

    variables = None

    def __init__(self, product_id: str, path: str):
        self.id = product_id
        self.path = path

    def heights(self, cfg: ProductConfig) -> list[float]:
        return list(HEIGHTS)

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext,
              files: MutableMapping[str, bytes] | None = None) -> ProductOutput:
        files = Files() if files is None else files
        basetime, updated, units = iso(ctx.basetime), iso(ctx.generated), {k: UNITS[k] for k in ORDER}
        for freq, step, ds in freq_series(series, cfg, ctx):
            values = elements(ds, step)
            rows = Records({"datetime": strings([iso(t) for t in ds.time.values]),
                            **{k: strings(values[k]) if k == "weather_type"
                               else numbers(values[k], BY_KEY[k].decimals) for k in ORDER[1:]}})
            for j, p in enumerate(cfg.points):
                # latitude/longitude first and basetime next: the server splices the request's coordinates.
                put_with_records(files, f"{self.id}/{freq}/{p.id}.json",
                                 {"latitude": p.lat, "longitude": p.lon, "basetime": basetime,
                                  "updated_time": updated, "freq": freq, "unit": units}, "data", rows, j)
        # The archive keeps the finest series (the last one yielded).
        return ProductOutput(files=files, archive=self._archive(ds, values, cfg, ctx, step))

    def expected_files(self, cfg: ProductConfig) -> list[str]:
        return [f"{self.id}/{freq}/{p.id}.json" for freq in cfg.freqs for p in cfg.points]

    def index(self, cfg: ProductConfig, ctx: RunContext) -> bytes:
        # each point's own zone: the viewer shows its meteogram in local time (docs/viewer.md)
        return render_index(self.id, self.path, cfg, ctx,
                            point_extra=lambda p: {"time_zone": point_time_zone(p.lat, p.lon)})

    def _archive(self, ds, values, cfg, ctx: RunContext, step) -> xr.Dataset:
        out = archive_frame(self.id, cfg, ctx, ds.time.values, step)
        for e in ELEMENTS:
            out[e.key] = (("init_time", "point", "lead_time"), values[e.key].T[None].astype(np.float32),
                          {"units": e.unit.replace("°C", "degC"), "long_name": e.long_name,
                           "valid_min": e.valid[0], "valid_max": e.valid[1]})
        labels = codes.WEATHER_TYPES
        index = {label: i for i, label in enumerate(codes.WEATHER_TYPES)}
        # -1 marks a label that could not be decided (a missing input): validation rejects it.
        coded = np.vectorize(lambda label: index.get(label, -1), otypes=[np.int8])(values["weather_type"])
        out["weather_type"] = (("init_time", "point", "lead_time"), coded.T[None],
                               {"long_name": "weather type (WMO 4677 family label)",
                                "valid_min": 0, "valid_max": len(labels) - 1,
                                "flag_values": np.arange(len(labels), dtype=np.int8),
                                "flag_meanings": " ".join(l.lower().replace(" ", "_") for l in labels)})
        return out
