"""The API contract is written once: rendering, validation and /openapi.json follow it.

- Renaming one element in the contract (``pointcast.contract``) renames it in a rendered point
  file, in what the validation accepts and in the served OpenAPI document, and the validation
  then refuses a file rendered before the rename.
- /openapi.json lists every element of the spec's tables (transcribed here from the spec, not
  from the code) as a required, typed property of its entries, in the spec's order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import xarray as xr

from conftest import TEST_PATH
from pointcast.config import Point, ProductConfig
from pointcast.validate import check_entries
from test_cycle import SPEC_UNITS

HERE = Path(__file__).resolve().parent
BASETIME = datetime(2026, 11, 20, 0, tzinfo=UTC)

# The spec's tables, field by field: (name, type as the spec writes it). "number" admits an integer
# (the spec's own "number (integer in practice)" for humidity; rhum and pop are integer %, docs/api.md).
SPEC_EU = [("datetime", "date-time"), ("weather_type", "string"),
           *((name, "number") for name in list(SPEC_UNITS)[2:])]
SPEC_WIND = [("datetime", "date-time"), ("windspd", "number"), ("windir", "number"), ("u_windspd", "number"),
             ("v_windspd", "number")]
SPEC_GLOBAL_SRF = [("date", "date-time"), ("wx", "integer"), ("temp", "number"), ("prec", "number"),
                   ("arpress", "number"), ("wndspd", "number"), ("wnddir", "number"), ("rhum", "number"),
                   ("solrad", "number")]
SPEC_GLOBAL_MRF = [("date", "date-time"), ("wx", "integer"), ("maxtemp", "number"), ("mintemp", "number"),
                   ("prec", "number"), ("pop", "number"), ("rhum", "number"), ("solrad", "number")]
SPEC_JAPAN_SRF = [("date", "date-time"), ("wx", "integer"), ("temp", "number"), ("prec", "number"),
                  ("arpress", "number"), ("wndspd", "number"), ("wnddir", "number"), ("rhum", "number"),
                  ("feelidx", "integer"), ("feeltmp", "number")]
SPEC_JAPAN_MRF = [("date", "date-time"), ("wx", "integer"), ("maxtemp", "number"), ("mintemp", "number"),
                  ("pop", "number")]


def render_eu_short() -> dict:
    """One eu-short point file (1H, 3 hours) rendered from a small 15-minute canonical series."""
    from pointcast.products import PRODUCTS
    from pointcast.products.base import RunContext

    start = np.datetime64(BASETIME.replace(tzinfo=None), "ns")
    times = start + np.arange(16) * np.timedelta64(15, "m")
    ramp = np.linspace(0.0, 1.0, len(times))[:, None]
    surface = {"t2m": 285.0 + 2 * ramp, "d2m": 280.0 + ramp, "sp": 101000.0 + 0 * ramp, "msl": 101300.0 + 0 * ramp,
               "tp": 0.2 * ramp, "sf": 0 * ramp, "ssrd": 200.0 * ramp, "fdir": 100.0 * ramp, "gust": 8.0 + ramp,
               "tcc": 50.0 + 10 * ramp, "pop": 20.0 + 0 * ramp, "vis": 20000.0 + 0 * ramp, "cape_mu": 0 * ramp}
    heights = np.array([10.0, 100.0, 200.0])
    profile = {"wind_u": 5.0 + ramp[..., None] + heights / 100, "wind_v": 3.0 - ramp[..., None] + 0 * heights,
               "air_temperature": 284.0 - heights / 100 + 0 * ramp[..., None]}
    series = xr.Dataset({**{k: (("time", "point"), v) for k, v in surface.items()},
                         **{k: (("time", "point", "height"), v) for k, v in profile.items()}},
                        coords={"time": times, "point": ["paris"], "height": heights})
    cfg = ProductConfig(id="eu-short", points_file=HERE / "points.csv",
                        points=(Point("paris", "Paris", 48.8566, 2.3522),), models=("sample",), freqs=("1H",),
                        horizon_hours=3)
    ctx = RunContext(basetime=BASETIME, generated=BASETIME, next_update=BASETIME, models={})
    out = PRODUCTS["eu-short"].build(series, cfg, ctx)
    return json.loads(out.files["eu-short/1H/paris.json"])


RENAMED = """
import json, sys
from pathlib import Path
sys.path[:0] = {tests!r}
from pointcast import contract
contract.EU_DATA = contract.EU_DATA.renamed("humidity", "relative_humidity")  # the one change
from pointcast.server import create_app
from pointcast.validate import check_entries
from test_contract import render_eu_short
old = json.loads(Path(sys.argv[1]).read_text())
new = render_eu_short()
print(json.dumps({{"file": new, "new": check_entries("eu-short", new), "old": check_entries("eu-short", old),
                  "openapi": json.loads(create_app(Path(sys.argv[2])).openapi[0])}}))
"""


def test_renaming_an_element_in_the_contract_renames_it_everywhere(tmp_path):
    before = render_eu_short()
    assert check_entries("eu-short", before) == []
    assert "humidity" in before["unit"] and all("humidity" in e for e in before["data"])
    (tmp_path / "before.json").write_text(json.dumps(before))
    (tmp_path / "root").mkdir()
    run = subprocess.run([sys.executable, "-c", RENAMED.format(tests=TEST_PATH), str(tmp_path / "before.json"),
                          str(tmp_path / "root")], capture_output=True, text=True, timeout=120, cwd=HERE)
    assert run.returncode == 0, run.stderr
    after = json.loads(run.stdout)
    # the rendered file: the new name in its place, the same values
    renamed = after["file"]
    assert list(renamed["unit"]) == [("relative_humidity" if k == "humidity" else k) for k in before["unit"]]
    assert [e["relative_humidity"] for e in renamed["data"]] == [e["humidity"] for e in before["data"]]
    assert not any("humidity" in e for e in renamed["data"])
    # the validation: the renamed file passes, the file of the old contract does not
    assert after["new"] == []
    assert after["old"] and any("humidity" in error for error in after["old"]), after["old"]
    # the served document
    entry = after["openapi"]["components"]["schemas"]["EuForecast"]["properties"]["data"]["items"]
    assert "relative_humidity" in entry["required"] and "humidity" not in entry["required"]
    assert entry["properties"]["relative_humidity"]["type"] == "integer"
    assert entry["required"] == list(renamed["data"][0])


def _check_entry(schema: dict, spec: list[tuple[str, str]]) -> None:
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == [name for name, _ in spec], "every element required, in the spec's order"
    assert list(schema["properties"]) == [name for name, _ in spec]
    for name, kind in spec:
        prop = schema["properties"][name]
        if kind == "date-time":
            assert (prop["type"], prop["format"]) == ("string", "date-time"), name
        elif kind == "number":
            assert prop["type"] in ("number", "integer"), name
        else:
            assert prop["type"] == kind, name


def test_every_spec_element_is_a_required_typed_property(tmp_path):
    from pointcast.server import create_app

    doc = json.loads(create_app(tmp_path).openapi[0])  # the bytes /openapi.json answers
    schemas = doc["components"]["schemas"]
    for name, spec in (("EuForecast", SPEC_EU), ("WindForecast", SPEC_WIND)):
        forecast = schemas[name]["properties"]
        _check_entry(forecast["data"]["items"], spec)
        assert forecast["unit"]["required"] == [n for n, _ in spec]
    eu_units = schemas["EuForecast"]["properties"]["unit"]["properties"]
    assert {k: v["enum"] for k, v in eu_units.items()} == {k: [u] for k, u in SPEC_UNITS.items()}
    for name, srf, mrf in (("GlobalWx", SPEC_GLOBAL_SRF, SPEC_GLOBAL_MRF), ("JapanWx", SPEC_JAPAN_SRF, SPEC_JAPAN_MRF)):
        element = schemas[name]["properties"]["wxdata"]["items"]["properties"]
        _check_entry(element["srf"]["items"], srf)
        _check_entry(element["mrf"]["items"], mrf)
    for path, answer in (("/V1/forecast/medium-range/common", "EuForecasts"),
                         ("/V1/forecast/short-range/common", "EuForecasts"),
                         ("/V1/forecast/short-range/windpack", "WindForecasts"),
                         ("/api/v2/global/wx", "GlobalWx"), ("/api/v1/ss1wx", "JapanWx")):
        ok = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok == {"$ref": f"#/components/schemas/{answer}"}, path


def test_the_real_cycles_files_are_what_the_document_says(published):
    """Every product's answer as served (a point file in its answer's frame) conforms to the
    document's schema; a renamed element, an unknown wx code or a value out of its range does not."""
    import copy
    import uuid

    from jsonschema import Draft4Validator

    from pointcast.server import create_app
    from test_cycle import run_dir

    _, root, _ = published
    doc = json.loads(create_app(root).openapi[0])
    base = run_dir(root) / "json"

    def validator(name):
        return Draft4Validator({"$ref": f"#/components/schemas/{name}", "components": doc["components"]})

    def first(pattern):
        return json.loads(next(p for p in sorted(base.glob(pattern)) if p.name != "index.json").read_bytes())

    eu, wind = first("eu-medium/15min/*.json"), first("eu-wind/1H/*/100m.json")
    answers = {"EuForecasts": {"48.8566,2.3522": eu}, "WindForecasts": {"53.885,1.791": wind},
               **{name: {"requestId": str(uuid.uuid4()), "wxdata": [first(f"{product}/*.json")]}
                  for name, product in (("GlobalWx", "global"), ("JapanWx", "japan"))}}
    for name, answer in answers.items():
        errors = [e.message for e in validator(name).iter_errors(answer)]
        assert not errors, (name, errors[:3])

    def breaks(name, edit):
        answer = copy.deepcopy(answers[name])
        edit(answer)
        return not validator(name).is_valid(answer)

    assert breaks("EuForecasts", lambda a: a["48.8566,2.3522"]["data"][7].update(
        rh=a["48.8566,2.3522"]["data"][7].pop("humidity")))
    assert breaks("EuForecasts", lambda a: a["48.8566,2.3522"]["data"][0].update(weather_type="Sunny"))
    assert breaks("WindForecasts", lambda a: a["53.885,1.791"]["data"][0].update(windir=360.5))
    assert breaks("JapanWx", lambda a: a["wxdata"][0]["srf"][0].update(wx=600))
    assert breaks("GlobalWx", lambda a: a["wxdata"][0]["mrf"][1].update(maxtemp=-999.0))
    assert not breaks("GlobalWx", lambda a: a["wxdata"][0]["mrf"][0].update(maxtemp=-9999.0))  # the missing value
