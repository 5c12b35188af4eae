"""The OpenAPI 3 document of ``/openapi.json``, generated from the contract (`pointcast.contract`).

Every parameter schema, every element of a data entry (its name, JSON type, range, codes and
missing value), every freq and error code comes from the contract the products render from and
the validation checks against, so the document says what is published. Each element of the
API's tables is a required property and entries admit no other key, so a missing, renamed or
mistyped element breaks the schema. The ``format`` names of the parameters are ours: they tell
a test generator (tests/server/test_server_hardening.py) which values are worth trying.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import __version__, contract
from .operations import OPERATIONS

_NUM = {"type": "number"}
_STR = {"type": "string"}
_TIME = {"type": "string", "format": "date-time"}

PARAMETERS: dict[str, dict[str, contract.Param]] = {
    op.name: {p.name: p for p in op.params} for op in contract.OPERATIONS}
"""Operation name -> parameter name -> its documentation (the contract's)."""

_SUCCESS = {"eu": "EuForecasts", "wind": "WindForecasts", "global": "GlobalWx", "japan": "JapanWx",
            "quantiles": "Quantiles", "power": "Power", "catalog": "Catalog"}
_CACHE_HEADERS = {
    "ETag": {"required": True, "schema": _STR,
             "description": "run and content (weak for global/wx and ss1wx: without requestId)"},
    "Cache-Control": {"required": True, "schema": _STR, "description": "public, max-age until the next update"},
    "Last-Modified": {"schema": _STR, "description": "the run's publication time"},
    "X-Pointcast-Synthetic": {"schema": {"type": "string", "enum": ["true"]},
                              "description": "only when the run was made from synthetic model runs (sample source)"},
}


def _obj(required: Iterable[str], closed: bool = False, **properties: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "required": list(required), "properties": properties}
    if closed:
        out["additionalProperties"] = False
    return out


def element_schema(e: contract.Element) -> dict[str, Any]:
    """The JSON Schema of one element's values: its type, then its codes or range, and its missing value."""
    if e.type == "date-time":
        return dict(_TIME, description=e.about)
    schema: dict[str, Any] = {"type": e.type}
    if e.unit not in (None, "1", "NA"):
        schema["description"] = f"{e.about} ({e.unit})"
    elif e.about:
        schema["description"] = e.about
    if e.codes is not None:
        schema["enum"] = [*e.codes, *(() if e.missing is None else (e.missing,))]
    elif e.valid is not None and e.missing is None:
        schema.update(minimum=e.valid[0], maximum=e.valid[1])
    elif e.valid is not None:
        schema["anyOf"] = [{"minimum": e.valid[0], "maximum": e.valid[1]}, {"enum": [e.missing]}]
    return schema


def entry_schema(table: contract.Table) -> dict[str, Any]:
    """A data entry: every element of the table required, in its order, and nothing else."""
    return _obj(table.names, closed=True, **{e.name: element_schema(e) for e in table})


def _eu(table: contract.Table, extra: dict[str, Any]) -> dict[str, Any]:
    """A forecast object of spec 2.1 / 2.2 (``extra``: the fields after ``freq``, before ``unit``)."""
    head = {"latitude": _NUM, "longitude": _NUM, "basetime": _TIME, "updated_time": _TIME,
            "freq": {"type": "string", "enum": list(contract.FREQS)}, **extra}
    units = table.units
    unit = _obj(units, closed=True, **{k: {"type": "string", "enum": [v]} for k, v in units.items()})
    return _obj((*head, "unit", "data"), **head, unit=unit, data={"type": "array", "items": entry_schema(table)})


def _wx(tables: dict[str, contract.Table]) -> dict[str, Any]:
    """The answer of spec 2.3 / 2.4: a requestId and one wxdata element of srf and mrf entries."""
    series: dict[str, Any] = {k: {"type": "array", "items": entry_schema(t)} for k, t in tables.items()}
    element = _obj(("lat", "lon", "srf", "mrf"), lat=_NUM, lon=_NUM, **series)
    return _obj(("requestId", "wxdata"), requestId={"type": "string", "format": "uuid"},
                wxdata={"type": "array", "minItems": 1, "maxItems": 1, "items": element})


def _quantiles() -> dict[str, Any]:
    """The quantile extension's object: per series one row per time of a number (or null, where
    no ensemble covers the time) per quantile; eu-wind's precomputed heights without
    ``hubheight``, the requested one with it."""
    def rows(e: contract.Element) -> dict[str, Any]:
        value = {"type": e.type, "nullable": True,  # OpenAPI 3.0's null
                 **({"minimum": e.valid[0], "maximum": e.valid[1]} if e.valid else {})}
        return {"type": "array", "description": f"{e.about} ({e.unit}), one row per time",
                "items": {"type": "array", "items": value}}

    data = contract.QUANTILE_DATA
    head: dict[str, Any] = {
        "product": {"type": "string", "enum": list(contract.BY_PRODUCT)},
        "latitude": _NUM, "longitude": _NUM, "basetime": _TIME, "updated_time": _TIME,
        "start": dict(_TIME, description="the first row's time (UTC)"),
        "step_seconds": {"type": "integer", "minimum": 1},
        "quantiles": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}},
        "unit": _obj(data.names, closed=True, **{e.name: {"type": "string", "enum": [e.unit]} for e in data})}
    series: dict[str, Any] = {e.name: rows(e) for e in data}
    windpack: dict[str, Any] = {
        "hub_height": dict(_STR, description="eu-wind with hubheight: the requested height"),
        contract.QUANTILE_HEIGHTS: {"type": "array", "items": _NUM,
                                    "description": "eu-wind without hubheight: the precomputed heights (m)"},
        contract.QUANTILE_WIND_AT: {"type": "object", "additionalProperties": rows(data["wind_speed_quantiles"]),
                                    "description": "eu-wind without hubheight: the wind speed at each height"}}
    return _obj((*head, *series), **head, **series, **windpack)


def _power() -> dict[str, Any]:
    """The power extension's object (docs/api.md, "Extension: power"): the site, its capacity
    and one entry per time of the contract's power table; a percentile is null where no
    ensemble covers the time (and always for a solar plant)."""
    table = contract.POWER_DATA
    entry = entry_schema(table)
    for name in contract.POWER_QUANTILES:
        entry["properties"][name] = dict(entry["properties"][name], nullable=True)
    head: dict[str, Any] = {
        "site": _STR, "name": _STR, "kind": {"type": "string", "enum": ["wind", "pv"]}, "product": _STR,
        "latitude": _NUM, "longitude": _NUM, "capacity_kw": dict(_NUM, minimum=0), "basetime": _TIME,
        "updated_time": _TIME, "freq": {"type": "string", "enum": list(contract.FREQS)},
        "unit": _obj(table.names, closed=True, **{k: {"type": "string", "nullable": True}
                                                 for k in table.names}),
        "quantiles_from": {"type": "array", "items": _STR,
                           "description": "the ensembles the percentiles come from, in priority order"}}
    return _obj((*head, "data"), **head, data={"type": "array", "items": entry})


def schemas() -> dict[str, Any]:
    """The components' schemas: the answers of every kind and the error bodies."""
    keyed = "one key per requested pair, its text as sent"
    return {
        "EuForecasts": {"type": "object", "description": keyed,
                        "additionalProperties": {"$ref": "#/components/schemas/EuForecast"}},
        "EuForecast": _eu(contract.tables("eu")["data"], {}),
        "WindForecasts": {"type": "object", "description": keyed,
                          "additionalProperties": {"$ref": "#/components/schemas/WindForecast"}},
        "WindForecast": _eu(contract.tables("wind")["data"], {"hub_height": _STR}),
        "GlobalWx": _wx(contract.tables("global")),
        "JapanWx": _wx(contract.tables("japan")),
        "Quantiles": _quantiles(),
        "Power": _power(),
        "Catalog": _obj(("run_id", "synthetic", "products"), run_id=_STR, synthetic={"type": "boolean"},
                        products={"type": "array", "items": _obj(
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
            for status, codes in contract.ERROR_CODES.items()
        },
    }


def document(served: Iterable[tuple[str, str, tuple[str, ...]]], secured: bool = False) -> dict[str, Any]:
    """The OpenAPI 3 document of the contract's operations (``secured``: API keys are configured).

    ``served`` is what the server answers, (operation name, path, parameter names) each: every
    one must be an operation of the contract with exactly its path and parameters (RuntimeError)."""
    ops = {op.name: op for op in contract.OPERATIONS}
    paths: dict[str, Any] = {}
    for name, path, params in served:
        op = ops.get(name)
        documented = PARAMETERS.get(name)
        if op is None or documented is None or op.path != path or set(documented) != set(params):
            raise RuntimeError(f"the contract does not document exactly the parameters of {path}: "
                               f"{sorted(documented or ())} != {sorted(params)}")
        responses: dict[str, Any] = {
            "200": {"description": "the forecast", "headers": _CACHE_HEADERS, "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{_SUCCESS[op.answer]}"}}}},
            "304": {"description": "not modified (If-None-Match / If-Modified-Since)", "headers": _CACHE_HEADERS},
        }
        for status in sorted({*op.errors, *((401, 429) if secured else ())}):
            response: dict[str, Any] = {
                "description": contract.ERROR_TEXT[status],
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/Error{status}"}}},
            }
            if status == 429:
                response["headers"] = {"Retry-After": {"required": True, "schema": {"type": "integer", "minimum": 1},
                                                       "description": "seconds until the key may ask again"}}
            responses[str(status)] = response
        operation: dict[str, Any] = {
            "operationId": op.product or op.name,
            "summary": op.summary,
            **({"description": f"Section {op.spec_section} of the forecast service specification; "
                               "the answer is documented in docs/api.md."} if op.spec_section else {}),
            **({"description": "An extension of pointcast, not in the forecast service specification; "
                               "the answer is documented in docs/api.md.", "x-extension": True}
               if op.extension else {}),
            "parameters": [
                {"name": p, "in": "query", "required": documented[p].required,
                 "description": documented[p].description, "schema": documented[p].schema}
                for p in params
            ],
            "responses": responses,
        }
        if secured:
            operation["security"] = [{"ApiKey": []}]
        paths[path] = {"get": operation}
    components: dict[str, Any] = {"schemas": schemas()}
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


def openapi_document(secured: bool = False) -> dict[str, Any]:
    """The OpenAPI 3 document of the served operations (``secured``: API keys are configured)."""
    return document(((op.name, op.path, op.params) for op in OPERATIONS.values() if op.name != "openapi"), secured)
