"""The OpenAPI 3 document of the operations, served at ``/openapi.json``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import __version__
from .grammar import FREQS
from .grammar import HUB_HEIGHT_SYNTAX as _HUB_HEIGHT_SYNTAX
from .grammar import NUMBER_SYNTAX as _NUMBER_SYNTAX
from .operations import OPERATIONS
from .wind import WIND_UNIT

# --------------------------------------------------------------------------- the OpenAPI document
#
# /openapi.json is generated from OPERATIONS and the parameter schemas below (one per
# operation and parameter name, in the order of ``Operation.params``): what the parsers above
# accept, as JSON Schema. A pattern here may be looser than its parser (ranges, lengths and
# finiteness are checked by the parser), never stricter. The ``format`` names are ours: they
# tell a test generator (tests/test_server_hardening.py) which values are worth trying.

_PAIR_SYNTAX = f"{_NUMBER_SYNTAX},{_NUMBER_SYNTAX}"


@dataclass(frozen=True)
class Param:
    """One query parameter of an operation, as documented."""

    schema: dict[str, Any]
    description: str
    required: bool = True


_EU_PARAMS = {
    "latlon": Param(
        {"type": "string", "format": "latlon-pairs", "pattern": f"^{_PAIR_SYNTAX}(?:[;|]{_PAIR_SYNTAX})*$"},
        "lat,lon pairs in decimal degrees separated by ';' (or '|'): up to 10 with freq=1H, one with 15min/30min",
    ),
    "freq": Param({"type": "string", "enum": list(FREQS)}, "time step of the answer"),
}
PARAMETERS: dict[str, dict[str, Param]] = {  # operation name -> parameter name -> Param
    "4.1": _EU_PARAMS,
    "4.2": _EU_PARAMS,
    "4.3": {
        **_EU_PARAMS,
        "hubheight": Param(
            {"type": "string", "format": "hub-height", "pattern": f"^{_HUB_HEIGHT_SYNTAX}$"},
            "height above ground in metres with an 'm' suffix, 10m to 300m (e.g. 100m, 112.5m)",
        ),
    },
    "4.4": {
        "latlon": Param(
            {"type": "string", "format": "lat-slash-lon", "pattern": f"^{_NUMBER_SYNTAX}/{_NUMBER_SYNTAX}$"},
            "one point, <lat>/<lon> in decimal degrees (WGS84); land north of 60 S",
        ),
        "tz": Param(
            {"type": "string", "format": "time-zone"},
            "IANA time zone name (e.g. Europe/Paris) for the dates; default: the point's own zone",
            required=False,
        ),
    },
    "4.5": {
        "lat": Param({"type": "number", "minimum": -90, "maximum": 90}, "latitude in decimal degrees (Japan's land)"),
        "lon": Param({"type": "number", "minimum": -180, "maximum": 180}, "longitude in decimal degrees"),
    },
    "catalog": {},
}
ERROR_CODES: dict[int, tuple[str, ...]] = {  # the codes of design.md section 4, by status
    400: ("400_001", "400_002", "400_003"),
    401: ("401_001", "401_002"),
    403: ("403_001",),
    404: ("404_001", "404_002"),
    429: ("429_001",),
}
_OPERATION_ERRORS: dict[str, tuple[int, ...]] = {  # operation name -> its error statuses (401/429: with keys)
    "4.1": (400, 403, 404), "4.2": (400, 403, 404), "4.3": (400, 403, 404), "4.4": (400, 403, 404),
    "4.5": (400, 403, 404), "catalog": (404,),
}
_SUMMARIES = {
    "4.1": "European medium range forecast (14 days), spec 2.1",
    "4.2": "European short range forecast (72 hours), spec 2.1",
    "4.3": "European short range wind at a hub height (72 hours), spec 2.2",
    "4.4": "Global forecast (srf 72 h hourly, mrf 14 days daily), spec 2.3",
    "4.5": "Japan 1 km forecast (srf 72 h hourly, mrf 10 days daily), spec 2.4",
    "catalog": "What the current run serves: products, points, basetime",
}
_SUCCESS = {"4.1": "EuForecasts", "4.2": "EuForecasts", "4.3": "WindForecasts", "4.4": "GlobalWx", "4.5": "JapanWx",
            "catalog": "Catalog"}


def _obj(required: Iterable[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": properties}


_NUM = {"type": "number"}
_INT = {"type": "integer"}
_STR = {"type": "string"}
_TIME = {"type": "string", "format": "date-time"}
_SRF_GLOBAL = ("date", "wx", "temp", "prec", "arpress", "wndspd", "wnddir", "rhum", "solrad")
_MRF_GLOBAL = ("date", "wx", "maxtemp", "mintemp", "prec", "pop", "rhum", "solrad")
_SRF_JAPAN = ("date", "wx", "temp", "prec", "arpress", "wndspd", "wnddir", "rhum", "feelidx", "feeltmp")
_MRF_JAPAN = ("date", "wx", "maxtemp", "mintemp", "pop")
_INTEGERS = frozenset({"wx", "wnddir", "rhum", "feelidx", "pop"})


def _entry(keys: tuple[str, ...]) -> dict[str, Any]:
    return _obj(keys, **{k: _TIME if k == "date" else _INT if k in _INTEGERS else _NUM for k in keys})


def _wx(srf: tuple[str, ...], mrf: tuple[str, ...]) -> dict[str, Any]:
    element = _obj(("lat", "lon", "srf", "mrf"), lat=_NUM, lon=_NUM,
                   srf={"type": "array", "items": _entry(srf)}, mrf={"type": "array", "items": _entry(mrf)})
    return _obj(("requestId", "wxdata"), requestId={"type": "string", "format": "uuid"},
                wxdata={"type": "array", "minItems": 1, "maxItems": 1, "items": element})


_FORECAST = ("latitude", "longitude", "basetime", "updated_time", "freq", "unit", "data")
_SCHEMAS: dict[str, Any] = {
    "EuForecasts": {"type": "object", "description": "one key per requested pair, its text as sent",
                    "additionalProperties": {"$ref": "#/components/schemas/EuForecast"}},
    "EuForecast": _obj(
        _FORECAST, latitude=_NUM, longitude=_NUM, basetime=_TIME, updated_time=_TIME,
        freq={"type": "string", "enum": list(FREQS)}, unit={"type": "object", "additionalProperties": _STR},
        data={"type": "array", "items": _obj(("datetime",), datetime=_TIME)},
    ),
    "WindForecasts": {"type": "object", "description": "one key per requested pair, its text as sent",
                      "additionalProperties": {"$ref": "#/components/schemas/WindForecast"}},
    "WindForecast": _obj(
        (*_FORECAST[:5], "hub_height", "unit", "data"), latitude=_NUM, longitude=_NUM, basetime=_TIME,
        updated_time=_TIME, freq={"type": "string", "enum": list(FREQS)}, hub_height=_STR,
        unit=_obj(WIND_UNIT, **{k: {"type": "string", "enum": [v]} for k, v in WIND_UNIT.items()}),
        data={"type": "array", "items": _obj(WIND_UNIT, datetime=_TIME, windspd=_NUM, windir=_NUM,
                                             u_windspd=_NUM, v_windspd=_NUM)},
    ),
    "GlobalWx": _wx(_SRF_GLOBAL, _MRF_GLOBAL),
    "JapanWx": _wx(_SRF_JAPAN, _MRF_JAPAN),
    "Catalog": _obj(("run_id", "products"), run_id=_STR, products={"type": "array", "items": _obj(
        ("product", "operations", "points"), product=_STR, operations={"type": "array", "items": _STR},
        points={"type": "array", "items": {"type": "object"}})}),
    **{
        f"Error{status}": {
            "type": "object",
            "required": ["status", "code", "message"],
            "additionalProperties": False,
            "properties": {"status": {"type": "integer", "enum": [status]},
                           "code": {"type": "string", "enum": list(codes)}, "message": _STR},
        }
        for status, codes in ERROR_CODES.items()
    },
}
_CACHE_HEADERS = {
    "ETag": {"required": True, "schema": _STR, "description": "run and content (weak for 4.4/4.5: without requestId)"},
    "Cache-Control": {"required": True, "schema": _STR, "description": "public, max-age until the next update"},
    "Last-Modified": {"schema": _STR, "description": "the run's publication time"},
}
_STATUS_TEXT = {400: "invalid request", 401: "missing or invalid API key", 403: "outside the coverage",
                404: "no such resource, or no data for the point", 429: "rate limited"}


def openapi_document(secured: bool = False) -> dict[str, Any]:
    """The OpenAPI 3 document of OPERATIONS (``secured``: API keys are configured)."""
    paths: dict[str, Any] = {}
    for op in OPERATIONS.values():
        if op.name == "openapi":
            continue
        params = PARAMETERS.get(op.name)
        if params is None or set(params) != set(op.params):
            raise RuntimeError(f"PARAMETERS[{op.name!r}] does not document exactly the parameters of {op.path}: "
                               f"{sorted(params or ())} != {sorted(op.params)}")
        responses: dict[str, Any] = {
            "200": {"description": "the forecast", "headers": _CACHE_HEADERS,
                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{_SUCCESS[op.name]}"}}}},
            "304": {"description": "not modified (If-None-Match / If-Modified-Since)", "headers": _CACHE_HEADERS},
        }
        for status in sorted({*_OPERATION_ERRORS[op.name], *((401, 429) if secured else ())}):
            response: dict[str, Any] = {
                "description": _STATUS_TEXT[status],
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/Error{status}"}}},
            }
            if status == 429:
                response["headers"] = {"Retry-After": {"required": True, "schema": {"type": "integer", "minimum": 1},
                                                       "description": "seconds until the key may ask again"}}
            responses[str(status)] = response
        operation: dict[str, Any] = {
            "operationId": op.product or op.name,
            "summary": _SUMMARIES[op.name],
            "parameters": [
                {"name": name, "in": "query", "required": params[name].required,
                 "description": params[name].description, "schema": params[name].schema}
                for name in op.params
            ],
            "responses": responses,
        }
        if secured:
            operation["security"] = [{"ApiKey": []}]
        paths[op.path] = {"get": operation}
    components: dict[str, Any] = {"schemas": _SCHEMAS}
    if secured:
        components["securitySchemes"] = {"ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "pointcast", "version": __version__,
                 "description": "Precomputed point weather forecasts (docs/api.md). Errors: "
                                "{\"status\", \"code\", \"message\"}; a 5xx is a bug."},
        "paths": paths,
        "components": components,
    }
