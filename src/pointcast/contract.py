"""The API contract, written once: what each operation takes and what its answers hold.

docs/api.md says in words what is defined here: the five forecast operations, every element
with its unit, precision, range and missing value, the code tables and the errors. Everything
that names an element, its unit, precision, range or missing value, a freq, a query parameter
or an error code reads it from here: the products render from it (`pointcast.products`), the
validation gate checks against it (`pointcast.validate`), the configuration takes its freqs
from it (`pointcast.config`), the server parses with its grammar, and `/openapi.json` is
generated from it (`pointcast.server.openapi`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------- freqs

FREQS: tuple[str, ...] = ("1H", "30min", "15min")
"""The time steps of the European operations, coarsest first (their ``freq``)."""
FREQ_MINUTES: dict[str, int] = {"1H": 60, "30min": 30, "15min": 15}
HOURLY_FREQS: tuple[str, ...] = ("1H",)
"""The global and Japan products: hourly srf entries and daily mrf entries made from them."""

# --------------------------------------------------------------------------- limits

MAX_PAIRS = 10
"""latlon pairs per request with freq=1H."""
MAX_PAIRS_SUBHOURLY = 1
"""latlon pairs per request with freq=15min or 30min."""


def max_pairs(freq: str) -> int:
    return MAX_PAIRS if freq == "1H" else MAX_PAIRS_SUBHOURLY


HUB_HEIGHT_RANGE_M: tuple[int, int] = (10, 300)
"""hubheight, metres, both bounds included."""
WINDPACK_LADDER: tuple[float, ...] = (10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0, 160.0, 180.0,
                                      200.0, 250.0, 300.0)
"""Heights precomputed for every windpack point besides its own hub heights: any height between
them is interpolated from its two neighbours, never replaced by one (docs/api.md)."""


def height_name(metres: float) -> str:
    """A height as the windpack names it (``hub_height``, its file stem): ``100m``, ``112.5m``."""
    return f"{metres:g}m"


# --------------------------------------------------------------------------- query grammar

MAX_NUMBER_CHARS = 32
"""A coordinate (or a hub height) longer than this is not one."""
NUMBER_SYNTAX = r"[ \t]*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*"
"""A decimal degree: ASCII digits only (``float`` alone would take "1_0", "nan", "١٢")."""
PAIR_SEPARATORS = "[;|]"
"""Between the pairs of one latlon value: ``;``, and ``|`` too."""
PAIR_SYNTAX = f"{NUMBER_SYNTAX},{NUMBER_SYNTAX}"
HUB_HEIGHT_SYNTAX = r"([0-9]+(?:\.[0-9]+)?)m"
"""Plain decimal metres with a lower-case "m" (no sign, exponent or spaces)."""


@dataclass(frozen=True)
class Param:
    """One query parameter of an operation: its JSON Schema, as the parser accepts it (a
    pattern may be looser than the parser, which also checks ranges, never stricter)."""

    name: str
    schema: dict[str, Any]
    description: str
    required: bool = True


_LATLON_PAIRS = Param(
    "latlon", {"type": "string", "format": "latlon-pairs",
               "pattern": f"^{PAIR_SYNTAX}(?:{PAIR_SEPARATORS}{PAIR_SYNTAX})*$"},
    f"lat,lon pairs in decimal degrees separated by ';' (or '|'): up to {MAX_PAIRS} with freq=1H, "
    f"{MAX_PAIRS_SUBHOURLY} with 15min/30min",
)
_LATLON_PAIR = Param(
    "latlon", {"type": "string", "format": "latlon-pair", "pattern": f"^{PAIR_SYNTAX}$"},
    "one lat,lon pair in decimal degrees",
)
_FREQ = Param("freq", {"type": "string", "enum": list(FREQS)}, "time step of the answer")
_HUBHEIGHT = Param(
    "hubheight", {"type": "string", "format": "hub-height", "pattern": f"^{HUB_HEIGHT_SYNTAX}$"},
    f"height above ground in metres with an 'm' suffix, {HUB_HEIGHT_RANGE_M[0]}m to {HUB_HEIGHT_RANGE_M[1]}m "
    "(e.g. 100m, 112.5m)",
)
_LAT_SLASH_LON = Param(
    "latlon", {"type": "string", "format": "lat-slash-lon", "pattern": f"^{NUMBER_SYNTAX}/{NUMBER_SYNTAX}$"},
    "one point, <lat>/<lon> in decimal degrees (WGS84); land north of 60 S",
)
_TZ = Param("tz", {"type": "string", "format": "time-zone"},
            "IANA time zone name (e.g. Europe/Paris) for the dates; default: the point's own zone", required=False)
_LAT = Param("lat", {"type": "number", "minimum": -90, "maximum": 90}, "latitude in decimal degrees (Japan's land)")
_LON = Param("lon", {"type": "number", "minimum": -180, "maximum": 180}, "longitude in decimal degrees")

# --------------------------------------------------------------------------- errors

ERROR_CODES: dict[int, tuple[str, ...]] = {
    400: ("400_001", "400_002", "400_003"),
    401: ("401_001", "401_002"),
    403: ("403_001",),
    404: ("404_001", "404_002"),
    429: ("429_001",),
}
"""The error codes, by status (docs/api.md, "Errors")."""
ERROR_TEXT: dict[int, str] = {400: "invalid request", 401: "missing or invalid API key", 403: "outside the coverage",
                              404: "no such resource, or no data for the point", 429: "rate limited"}

# --------------------------------------------------------------------------- code tables (docs/api.md)

MISSING_NUMBER = -9999.0
"""A missing number in the global and Japan products."""
MISSING_CODE = -99
"""A missing integer code (wx, wnddir, feelidx) in the global and Japan products."""

WEATHER_TYPES: tuple[str, ...] = (
    "Clear sky", "Mainly clear", "Partly cloudy", "Overcast", "Fog", "Drizzle", "Freezing drizzle", "Rain",
    "Heavy rain", "Freezing rain", "Sleet", "Snow", "Heavy snow", "Rain showers", "Snow showers", "Thunderstorm",
)
"""The weather_type labels of the European products (WMO 4677 family); rules in `pointcast.codes`."""

WX_HOURLY_CODES: dict[int, str] = {
    100: "sunny", 200: "cloudy", 300: "rain", 400: "snow", 430: "sleet", 500: "clear", 550: "extreme heat",
    650: "light rain", 850: "heavy rain / storm", 950: "heavy snow / blizzard",
}  # fmt: skip
"""The single (srf) wx codes and their meaning (no 600 "thin cloud": no model of the global and
Japan blends has the cloud layers to decide it, docs/method.md)."""
WX_DAILY_CODES: dict[int, str] = {
    100: "sunny", 200: "cloudy", 300: "rain", 400: "snow",
    101: "sunny at times cloudy", 102: "sunny at times rain", 104: "sunny at times snow",
    110: "sunny later cloudy", 112: "sunny later rain", 115: "sunny later snow",
    201: "cloudy at times sunny", 202: "cloudy at times rain", 204: "cloudy at times snow",
    210: "cloudy later sunny", 212: "cloudy later rain", 215: "cloudy later snow",
    301: "rain at times sunny", 302: "rain at times stopping", 303: "rain at times snow",
    311: "rain later sunny", 313: "rain later cloudy", 315: "rain later snow",
    401: "snow at times sunny", 402: "snow at times stopping", 403: "snow at times rain",
    411: "snow later sunny", 413: "snow later cloudy", 414: "snow later rain",
}  # fmt: skip
"""Every combined (mrf) wx code, with its meaning (JMA's forecast code table)."""
CALM_CODE = 0
COMPASS16: dict[int, str] = {
    1: "NNE", 2: "NE", 3: "ENE", 4: "E", 5: "ESE", 6: "SE", 7: "SSE", 8: "S",
    9: "SSW", 10: "SW", 11: "WSW", 12: "W", 13: "WNW", 14: "NW", 15: "NNW", 16: "N",
}  # fmt: skip
"""wnddir: the 16-point compass sector the wind blows from, clockwise; `CALM_CODE` when calm."""
FEELIDX_LABELS: tuple[str, ...] = (
    "severe cold", "very cold", "cold", "slightly cold", "comfortable",
    "slightly warm", "warm", "muggy", "very hot", "extreme heat",
)  # fmt: skip
"""Names of feelidx 1..10 (index 0 = feelidx 1)."""

# --------------------------------------------------------------------------- elements


@dataclass(frozen=True)
class Element:
    """One field of a data entry, as published.

    ``type`` is its JSON type ("number", "integer", "string" or "date-time"); ``decimals`` the
    published decimals of a number (an "integer" has none); ``valid`` its allowed range;
    ``missing`` the value that stands for a missing one (None: never missing, a gap is refused
    before publication); ``codes`` the only values it can take. ``ref`` is the name the code
    reads it by, the published ``name`` unless that is changed here alone (`Table.renamed`)."""

    name: str
    type: str
    unit: str | None = None
    decimals: int | None = None
    valid: tuple[float, float] | None = None
    missing: float | int | None = None
    codes: tuple[Any, ...] | None = None
    about: str = ""
    ref: str = ""

    def __post_init__(self):
        if not self.ref:
            object.__setattr__(self, "ref", self.name)
        if self.type not in ("number", "integer", "string", "date-time"):
            raise ValueError(f"{self.name}: unknown type {self.type!r}")
        if (self.type == "number") != (self.decimals is not None):
            raise ValueError(f"{self.name}: a number has decimals, nothing else has")


@dataclass(frozen=True)
class Table:
    """The fields of a data entry in response order."""

    elements: tuple[Element, ...]
    _by_ref: dict[str, Element] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_by_ref", {e.ref: e for e in self.elements})
        if len(self._by_ref) != len(self.elements) or len({e.name for e in self.elements}) != len(self.elements):
            raise ValueError("an element is defined twice")

    def __iter__(self) -> Iterator[Element]:
        return iter(self.elements)

    def __len__(self) -> int:
        return len(self.elements)

    def __getitem__(self, ref: str) -> Element:
        return self._by_ref[ref]

    def __contains__(self, ref: str) -> bool:
        return ref in self._by_ref

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.elements)

    @property
    def units(self) -> dict[str, str | None]:
        """The ``unit`` object of a European forecast (exactly the entry's keys)."""
        return {e.name: e.unit for e in self.elements}

    def select(self, *refs: str) -> Table:
        return Table(tuple(self[r] for r in refs))

    def renamed(self, ref: str, name: str) -> Table:
        """The table with one element published under another name (the code still reads it by ``ref``)."""
        return Table(tuple(dataclasses.replace(e, name=name) if e.ref == ref else e for e in self.elements))


def _n(name, unit, decimals, valid, about, missing=None):
    return Element(name, "number", unit, decimals, valid, missing, about=about)


def _i(name, unit, valid, about, missing=None, codes=None):
    return Element(name, "integer", unit, None, valid, missing, codes, about=about)


def _eu(name, unit, decimals, valid, about):
    """A number of the European entries: -9999 where no model of the blend supplies its inputs
    (the run's manifest names the element, its lead times and why: ``degraded``)."""
    return _n(name, unit, decimals, valid, about, MISSING_NUMBER)


def _eu_wind(height: int) -> tuple[Element, ...]:
    """The European wind elements at one height, in their published order (u, v, direction, speed)."""
    return (_eu(f"u_windspd_{height}m", "m/s", 2, (-150.0, 150.0), f"eastward wind at {height} m"),
            _eu(f"v_windspd_{height}m", "m/s", 2, (-150.0, 150.0), f"northward wind at {height} m"),
            _eu(f"windir_{height}m", "degree", 1, (0.0, 360.0),
               f"wind direction (from, clockwise from north) at {height} m"),
            _eu(f"windspd_{height}m", "m/s", 2, (0.0, 150.0), f"wind speed at {height} m"))


_EU_WIND = [_eu_wind(h) for h in (10, 100, 200)]

EU_DATA = Table((
    Element("datetime", "date-time", "UTC", about="start of the step (UTC)"),
    Element("weather_type", "string", "NA", codes=WEATHER_TYPES, about="weather type (WMO 4677 family label)"),
    _i("humidity", "%", (0, 100), "relative humidity at 2 m", MISSING_NUMBER),
    _eu("snowfall", "kg/m2/h", 2, (0, 200), "snowfall rate (water equivalent)"),
    _eu("precipitation", "kg/m2/h", 2, (0, 300), "precipitation rate"),
    _eu("temp_2m", "°C", 2, (-90, 65), "temperature at 2 m"),
    _eu("temp_100m", "°C", 2, (-90, 65), "temperature at 100 m"),
    _eu("temp_200m", "°C", 2, (-90, 65), "temperature at 200 m"),
    _eu("dewpoint_temperature", "°C", 2, (-100, 40), "dewpoint temperature at 2 m"),
    _eu("pressure_sfc", "hPa", 1, (400, 1100), "surface pressure"),
    _eu("pressure_100m", "hPa", 1, (400, 1100), "pressure at 100 m"),
    _eu("pressure_200m", "hPa", 1, (400, 1100), "pressure at 200 m"),
    _eu("sea_surface_pressure", "hPa", 1, (850, 1100), "mean sea level pressure"),
    *(e for i in range(4) for e in (w[i] for w in _EU_WIND)),  # by component, then height
    _eu("total_solar_radiation", "W/m2", 1, (0, 1400), "global radiation"),
    _eu("solar_radiation_dir", "W/m2", 1, (0, 1400), "direct radiation (horizontal)"),
    _eu("solar_radiation_diff", "W/m2", 1, (0, 1400), "diffuse radiation"),
    _eu("windgust", "m/s", 2, (0, 150), "wind gust at 10 m"),
    _eu("total_cloud_cover", "%", 1, (0, 100), "total cloud cover"),
    _eu("precipitation_proba", "%", 0, (0, 100), "probability of precipitation"),
    _eu("visibility", "m", 0, (0, 100000), "visibility"),
    _eu("air_density", "kg/m3", 3, (0.5, 1.6), "air density at the surface"),
))
"""A data entry of the European common forecasts (medium-range and short-range common)."""

WIND_DATA = Table((
    Element("datetime", "date-time", "UTC", about="start of the step (UTC)"),
    _n("windspd", "m/s", 2, (0.0, 150.0), "wind speed"),
    _n("windir", "degree", 1, (0.0, 360.0), "direction the wind blows from, clockwise from north"),
    _n("u_windspd", "m/s", 2, (-150.0, 150.0), "eastward wind"),
    _n("v_windspd", "m/s", 2, (-150.0, 150.0), "northward wind"),
))
"""A data entry of the European wind forecast at a hub height (short-range windpack)."""

# The global and Japan entries: units, codes and missing values as docs/api.md lists them
# (units in udunits form, as the archive writes them). Numbers are -9999 when missing, codes -99.
_DATE = Element("date", "date-time", about="start of the hour (srf) or the local day (mrf), with its offset")
_WX_SRF = _i("wx", "1", (100, 950), "single weather code (docs/api.md)", MISSING_CODE, tuple(WX_HOURLY_CODES))
_TEMP = _n("temp", "degC", 1, (-90, 65), "temperature at 2 m", MISSING_NUMBER)
_PREC = _n("prec", "mm", 1, (0, 300), "precipitation in the hour", MISSING_NUMBER)
_ARPRESS = _n("arpress", "hPa", 1, (850, 1100), "mean sea level pressure", MISSING_NUMBER)
_WNDSPD = _n("wndspd", "m s-1", 1, (0, 150), "wind speed at 10 m", MISSING_NUMBER)
_WNDDIR = _i("wnddir", "1", (0, 16), "wind direction, 16-point compass (16 = N), 0 calm", MISSING_CODE,
             (CALM_CODE, *COMPASS16))
_RHUM = _i("rhum", "%", (0, 100), "relative humidity at 2 m", MISSING_NUMBER)
_SOLRAD = _n("solrad", "W m-2", 1, (0, 1400), "global radiation, mean over the hour", MISSING_NUMBER)
_WX_MRF = _i("wx", "1", (100, 415), "combined weather code of the local day (docs/api.md)", MISSING_CODE,
             tuple(WX_DAILY_CODES))
_MAXTEMP = _n("maxtemp", "degC", 1, (-90, 65), "highest hourly temperature of the local day", MISSING_NUMBER)
_MINTEMP = _n("mintemp", "degC", 1, (-90, 65), "lowest hourly temperature of the local day", MISSING_NUMBER)
_PREC_DAY = _n("prec", "mm", 1, (0, 24 * 300), "precipitation of the local day", MISSING_NUMBER)
_POP = _i("pop", "%", (0, 100), "probability of precipitation", MISSING_NUMBER)
_RHUM_DAY = _i("rhum", "%", (0, 100), "mean relative humidity of the local day", MISSING_NUMBER)
_SOLRAD_DAY = _n("solrad", "W m-2", 1, (0, 1400), "mean global radiation of the local day", MISSING_NUMBER)

GLOBAL_SRF = Table((_DATE, _WX_SRF, _TEMP, _PREC, _ARPRESS, _WNDSPD, _WNDDIR, _RHUM, _SOLRAD))
"""An hourly entry of the global forecast (global/wx)."""
GLOBAL_MRF = Table((_DATE, _WX_MRF, _MAXTEMP, _MINTEMP, _PREC_DAY, _POP, _RHUM_DAY, _SOLRAD_DAY))
"""A daily entry of the global forecast (global/wx)."""
JAPAN_SRF = Table((_DATE, _WX_SRF, _TEMP, _PREC, _ARPRESS, _WNDSPD, _WNDDIR, _RHUM,
                   _i("feelidx", "1", (1, 10), "feel-like index 1-10", MISSING_CODE, tuple(range(1, 11))),
                   _n("feeltmp", "degC", 1, (-100, 80), "apparent temperature (Steadman, BoM form)",
                      MISSING_NUMBER)))
"""An hourly entry of the Japan forecast (ss1wx)."""
JAPAN_MRF = Table((_DATE, _WX_MRF, _MAXTEMP, _MINTEMP, _POP))
"""A daily entry of the Japan forecast (ss1wx)."""
HOURLY_POP = _POP
"""The hourly probability of precipitation (archive, global hourly file); a daily ``pop`` no ensemble
covers is the highest of the day's."""

# --------------------------------------------------------------------------- extension: quantiles

QUANTILE_DATA = Table((
    Element("temperature", "number", "°C", 1, (-100.0, 70.0), about="quantiles of the members' 2 m temperature",
            ref="temperature_quantiles"),
    Element("precipitation", "number", "mm", 2, (0.0, 500.0),
            about="quantiles of the members' precipitation in the clock hour holding the time",
            ref="precipitation_quantiles"),
    Element("wind_speed", "number", "m/s", 1, (0.0, 150.0), about="quantiles of the members' wind speed at 10 m",
            ref="wind_speed_quantiles"),
))
"""The series of the quantile extension (docs/api.md, "Extension: quantiles"), by the archive
variable each is read from (``ref``): per time one row of the ensemble's quantiles, a row of
nulls where no ensemble of the product covers the time."""
QUANTILE_DIR = "quantiles"
"""A product's folder of quantile files in the run tree: ``<product>/quantiles/<point id>.json``."""
QUANTILE_HEIGHTS = "heights"
"""eu-wind's quantile file: the point's precomputed heights, and the wind speed at each."""
QUANTILE_WIND_AT = "wind_speed_at"

# --------------------------------------------------------------------------- extension: power

POWER_PRODUCT = "power"
"""The power extension's folder in the run tree (``power/<freq>/<site id>.json``) and its archive's name."""
POWER_QUANTILES: tuple[str, ...] = ("p10", "p25", "p50", "p75", "p90")
"""The published quantiles of the members' power, in the order of `ensemble.QUANTILES`."""
POWER_DATA = Table((
    Element("datetime", "date-time", about="start of the interval (UTC)"),
    Element("power", "number", "kW", 1, (0.0, 1e8),
            about="AC power of the site from the deterministic blend, mean over [datetime, datetime + freq)"),
    Element("capacity_factor", "number", "1", 3, (0.0, 1.0), about="power / the site's capacity"),
    *(Element(name, "number", "kW", 1, (0.0, 1e8), missing=None,
              about=f"{name[1:]}th percentile of the ensemble members' power (wind farms where an ensemble of "
                    "the host product covers the time with every member; null elsewhere)")
      for name in POWER_QUANTILES),
))
"""The entries of a site's power file (docs/api.md, "Extension: power")."""
_SITE = Param("site", {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
              "a configured site's id (the sites of /V1/forecast/power's index: /catalog, product power)")

# --------------------------------------------------------------------------- operations


@dataclass(frozen=True)
class Operation:
    """One documented GET operation: its path, product, parameters and answer.

    ``name`` is the operation's own, made from its path; ``spec_section`` the section of the
    forecast service specification it implements, a cross-reference for readers who have
    that document (the OpenAPI description carries it; docs/api.md needs no other)."""

    name: str
    path: str
    product: str | None
    params: tuple[Param, ...]
    summary: str
    answer: str  # the kind of answer: "eu", "wind", "global", "japan", "quantiles", "power" or "catalog" (`tables`)
    errors: tuple[int, ...]  # error statuses besides 401/429, which only API keys bring
    spec_section: str | None = None
    extension: bool = False  # ours, beside the specification (docs/api.md, "Extension: ...")


_FORECASTS: tuple[Operation, ...] = (
    Operation("medium-range-common", "/V1/forecast/medium-range/common", "eu-medium", (_LATLON_PAIRS, _FREQ),
              "European medium range forecast (14 days)", "eu", (400, 403, 404), "4.1"),
    Operation("short-range-common", "/V1/forecast/short-range/common", "eu-short", (_LATLON_PAIRS, _FREQ),
              "European short range forecast (72 hours)", "eu", (400, 403, 404), "4.2"),
    Operation("short-range-windpack", "/V1/forecast/short-range/windpack", "eu-wind",
              (_LATLON_PAIRS, _FREQ, _HUBHEIGHT),
              "European short range wind at a hub height (72 hours)", "wind", (400, 403, 404), "4.3"),
    Operation("global-wx", "/api/v2/global/wx", "global", (_LAT_SLASH_LON, _TZ),
              "Global forecast (srf 72 h hourly, mrf 14 days daily)", "global", (400, 403, 404), "4.4"),
    Operation("ss1wx", "/api/v1/ss1wx", "japan", (_LAT, _LON),
              "Japan 1 km forecast (srf 72 h hourly, mrf 10 days daily)", "japan", (400, 403, 404), "4.5"),
)
OPERATIONS: tuple[Operation, ...] = (
    *_FORECASTS,
    Operation("quantiles", "/V1/forecast/quantiles", None,
              (Param("product", {"type": "string", "enum": [op.product for op in _FORECASTS]},
                     "the product whose ensemble quantiles are answered"),
               _LATLON_PAIR,
               dataclasses.replace(_HUBHEIGHT, required=False,
                                   description=f"eu-wind only: {_HUBHEIGHT.description}; without it, every "
                                               "precomputed height of the point")),
              "Ensemble quantiles of a product at one point (extension, not in the specification)", "quantiles",
              (400, 403, 404), extension=True),
    Operation("power", "/V1/forecast/power", POWER_PRODUCT, (_SITE, _FREQ),
              "Power of a configured wind farm or solar plant, with the ensemble's P10-P90 (extension, not in the "
              "specification)", "power", (400, 404), extension=True),
    Operation("catalog", "/catalog", None, (), "What the current run serves: products, points, basetime",
              "catalog", (404,)),
)
"""The documented operations: the five forecast operations of the specification, the quantile
and power extensions and the catalog of the current run."""
BY_PRODUCT: dict[str, Operation] = {op.product: op for op in OPERATIONS if op.product and not op.extension}
"""The forecast operation of each product (`pointcast.products`); the power extension's folder is no such product."""
POWER_OPERATION: Operation = next(op for op in OPERATIONS if op.product == POWER_PRODUCT)


def tables(answer: str) -> dict[str, Table]:
    """The data entry tables of a kind of answer: ``data`` (European) or ``srf`` and ``mrf``.
    Read at call time, so that a table changed here is what every reader sees."""
    return {"eu": {"data": EU_DATA}, "wind": {"data": WIND_DATA},
            "global": {"srf": GLOBAL_SRF, "mrf": GLOBAL_MRF},
            "japan": {"srf": JAPAN_SRF, "mrf": JAPAN_MRF}, "power": {"data": POWER_DATA}}.get(answer, {})


def product_tables(product: str) -> dict[str, Table]:
    """The data entry tables of a product's JSON files (see `tables`)."""
    op = BY_PRODUCT.get(product)
    return tables(op.answer) if op else {}


PRODUCT_FREQS: dict[str, tuple[str, ...]] = {
    op.product: HOURLY_FREQS for op in OPERATIONS if op.product and op.answer in ("global", "japan")}
"""The products that cannot publish every freq: global and Japan, hourly srf entries (plus the
daily mrf entries made from them)."""
