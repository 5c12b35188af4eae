"""European common forecasts (medium-range/common and short-range/common).

European elements (`contract.EU_DATA`) from the blended canonical series. Interval elements (precipitation,
snowfall, radiation, gust, precipitation probability) describe the step that *starts* at the
entry's datetime, as rates (kg/m2/h), means (W/m2) or maxima; states are instantaneous.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from .. import codes, contract, physics
from ..catalogue import VARIABLES
from ..config import ProductConfig
from .base import (
    Files,
    ProductOutput,
    Records,
    RunContext,
    archive_frame,
    ensemble_archive,
    freq_series,
    iso,
    numbers,
    published_direction,
    put_quantiles,
    put_with_records,
    quantile_paths,
    render_index,
    strings,
)
from .global_wx import point_time_zone

if TYPE_CHECKING:
    from ..publish import StagedFiles

HEIGHTS = (10.0, 100.0, 200.0)
KELVIN = 273.15


@dataclass(frozen=True)
class Element:
    """A numeric European element (`contract.EU_DATA`) and how it is computed."""

    spec: contract.Element
    compute: Callable[[Fields], np.ndarray]

    @property
    def key(self) -> str:
        return self.spec.name

    @property
    def unit(self) -> str:
        if self.spec.unit is None:
            raise ValueError(f"{self.key}: a numeric element needs a unit")
        return self.spec.unit

    @property
    def decimals(self) -> int | None:
        return self.spec.decimals

    @property
    def valid(self) -> tuple[float, float]:
        if self.spec.valid is None:
            raise ValueError(f"{self.key}: a numeric element needs a valid range")
        return self.spec.valid

    @property
    def long_name(self) -> str:
        return self.spec.about


class Fields:
    """Canonical series of one product step, with the derived quantities shared by elements."""

    def __init__(self, ds: xr.Dataset, step: np.timedelta64):
        self.ds = ds
        self.hours = step / np.timedelta64(1, "h")
        self.read: set[str] = set()  # the canonical variables read (`INPUTS`)

    def __getitem__(self, name: str) -> np.ndarray:
        self.read.add(name)
        if name not in self.ds:  # no model of the blend has it: the element's missing value
            return np.full((self.ds.sizes["time"], self.ds.sizes["point"]), np.nan)
        return self.ds[name].transpose("time", "point", ...).values.astype(np.float64)

    def at(self, name: str, height: float) -> np.ndarray:
        self.read.add(name)
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


def _wind(component: str, height: float) -> Callable[[Fields], np.ndarray]:
    if component == "u_windspd":
        return lambda f: f.wind(height)[0]
    if component == "v_windspd":
        return lambda f: f.wind(height)[1]
    if component == "windir":
        return lambda f: published_direction(*f.wind(height))
    return lambda f: physics.wind_speed(*f.wind(height))


# How each numeric element of `contract.EU_DATA` is computed, by its ref.
COMPUTE: dict[str, Callable[[Fields], np.ndarray]] = {
    "humidity": lambda f: np.round(100 * physics.relative_humidity(f["t2m"], f.dewpoint())),
    "snowfall": lambda f: np.minimum(f.rate("sf"), f.rate("tp")),
    "precipitation": lambda f: f.rate("tp"),
    "temp_2m": lambda f: f.temp(2) - KELVIN,
    "temp_100m": lambda f: f.temp(100) - KELVIN,
    "temp_200m": lambda f: f.temp(200) - KELVIN,
    "dewpoint_temperature": lambda f: f.dewpoint() - KELVIN,
    "pressure_sfc": lambda f: f["sp"] / 100,
    "pressure_100m": lambda f: f.pressure(100) / 100,
    "pressure_200m": lambda f: f.pressure(200) / 100,
    "sea_surface_pressure": lambda f: f["msl"] / 100,
    **{f"{c}_{int(h)}m": _wind(c, h) for c in ("u_windspd", "v_windspd", "windir", "windspd") for h in HEIGHTS},
    "total_solar_radiation": lambda f: f["ssrd"],
    "solar_radiation_dir": lambda f: f.direct(),
    "solar_radiation_diff": lambda f: f["ssrd"] - f.direct(),
    "windgust": lambda f: np.maximum(f["gust"], physics.wind_speed(*f.wind(10))),
    "total_cloud_cover": lambda f: f["tcc"],
    "precipitation_proba": lambda f: f["pop"],
    "visibility": lambda f: f["vis"],
    "air_density": lambda f: physics.air_density(f["sp"], f["t2m"], f.dewpoint()),
}
DATA = contract.EU_DATA
ELEMENTS: tuple[Element, ...] = tuple(Element(e, COMPUTE[e.ref]) for e in DATA if e.ref in COMPUTE)
# The entry's other fields: its time stamp and the label decided from the numeric elements.
assert [e.ref for e in DATA if e.ref not in COMPUTE] == ["datetime", "weather_type"], \
    "every European element is computed"
ORDER = DATA.names  # the published order of the data entry keys
BY_KEY = {e.spec.ref: e for e in ELEMENTS}
UNITS = DATA.units


# The elements weather_type is decided from, besides CAPE.
LABEL_FROM = ("total_cloud_cover", "precipitation", "snowfall", "temp_2m", "visibility")


def elements(ds: xr.Dataset, step: np.timedelta64,
             inputs: dict[str, frozenset[str]] | None = None) -> dict[str, np.ndarray]:
    """Every numeric element (time, point) plus weather_type labels for one product step, by
    ref; ``inputs``, when given, receives the canonical variables each one was computed from."""
    f = Fields(ds, step)
    out = {}
    for e in ELEMENTS:
        f.read = set()
        out[e.spec.ref] = e.compute(f)
        if inputs is not None:
            inputs[e.spec.ref] = frozenset(f.read)
    f.read = set()
    cloud, precipitation, snowfall, temp, visibility = (out[ref] for ref in LABEL_FROM)
    out["weather_type"] = codes.weather_type(cloud, precipitation, snowfall, temp, visibility, f[codes.CAPE])
    if inputs is not None:
        inputs["weather_type"] = frozenset(f.read).union(*(inputs[ref] for ref in LABEL_FROM))
    return out


def _inputs() -> dict[str, frozenset[str]]:
    """Each element's canonical inputs, by published name: read off its computation at one
    step of a series that has every variable (a model's lacking field then names the elements
    it costs: `build.degraded`)."""
    profiled = ("wind_u", "wind_v", "air_temperature")  # by height above the ground
    ds = xr.Dataset({n: (("time", "point"), np.ones((1, 1), np.float32)) for n in VARIABLES if n not in profiled}
                    | {n: (("time", "point", "height"), np.ones((1, 1, len(HEIGHTS)), np.float32))
                       for n in profiled},
                    coords={"height": list(HEIGHTS)})
    inputs: dict[str, frozenset[str]] = {}
    with np.errstate(all="ignore"):  # ones are no atmosphere: only the reads matter
        elements(ds, np.timedelta64(1, "h"), inputs)
    return {DATA[ref].name: deps for ref, deps in inputs.items()}



class EuCommon:
    """medium-range/common and short-range/common: the same elements over the product's horizon
    at 1H, 30min and 15min."""

    variables = None
    shortest_horizon_hours = 1  # any horizon: the objects hold the steps up to it

    def __init__(self, product_id: str, path: str):
        self.id = product_id
        self.path = path

    def heights(self, cfg: ProductConfig) -> list[float]:
        return list(HEIGHTS)

    def inputs(self) -> dict[str, frozenset[str]]:
        return INPUTS

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext,
              files: Files | StagedFiles | None = None) -> ProductOutput:
        files = Files() if files is None else files
        basetime, updated, units = iso(ctx.basetime), iso(ctx.generated), UNITS
        for freq, step, ds in freq_series(series, cfg, ctx):
            values = elements(ds, step)
            rows = Records({e.name: strings([iso(t) for t in ds.time.values]) if e.type == "date-time"
                            else strings(values[e.ref]) if e.type == "string"
                            else numbers(values[e.ref], e.decimals, e.missing) for e in DATA})
            for j, p in enumerate(cfg.points):
                # latitude/longitude first and basetime next: the server splices the request's coordinates.
                put_with_records(files, f"{self.id}/{freq}/{p.id}.json",
                                 {"latitude": p.lat, "longitude": p.lon, "basetime": basetime,
                                  "updated_time": updated, "freq": freq, "unit": units}, "data", rows, j)
        # The archive keeps the finest series (the last one yielded), and the quantile files its.
        archive = self._archive(ds, values, cfg, ctx, step)
        put_quantiles(files, self.id, cfg, ctx, archive, step)
        return ProductOutput(files=files, archive=archive)

    def expected_files(self, cfg: ProductConfig) -> list[str]:
        return [f"{self.id}/{freq}/{p.id}.json" for freq in cfg.freqs for p in cfg.points] + quantile_paths(self.id, cfg)

    def index(self, cfg: ProductConfig, ctx: RunContext) -> bytes:
        # each point's own zone: the viewer shows its meteogram in local time (docs/viewer.md)
        return render_index(self.id, self.path, cfg, ctx,
                            point_extra=lambda p: {"time_zone": point_time_zone(p.lat, p.lon)})

    def _archive(self, ds, values, cfg, ctx: RunContext, step) -> xr.Dataset:
        out = archive_frame(self.id, cfg, ctx, ds.time.values, step)
        for e in ELEMENTS:
            out[e.key] = (("init_time", "point", "lead_time"), values[e.spec.ref].T[None].astype(np.float32),
                          {"units": e.unit.replace("°C", "degC"), "long_name": e.long_name,
                           "valid_min": e.valid[0], "valid_max": e.valid[1]})
        labels = DATA["weather_type"].codes
        if labels is None:
            raise ValueError("weather_type: a coded element needs its codes")
        index = {label: i for i, label in enumerate(labels)}
        # -1 marks a label that could not be decided (a missing input): validation rejects it.
        coded = np.vectorize(lambda label: index.get(label, -1), otypes=[np.int8])(values["weather_type"])
        out[DATA["weather_type"].name] = (("init_time", "point", "lead_time"), coded.T[None],
                               {"long_name": DATA["weather_type"].about,
                                "valid_min": 0, "valid_max": len(labels) - 1,
                                "flag_values": np.arange(len(labels), dtype=np.int8),
                                "flag_meanings": " ".join(l.lower().replace(" ", "_") for l in labels)})
        return ensemble_archive(out, ds)


INPUTS = _inputs()
"""The canonical variables of each archived element, by name."""
