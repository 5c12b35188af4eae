"""Error messages that say what is wrong, and answers that say they are made from synthetic
data, over real HTTP (the server and tree of tests/support/served.py): the codes are the
specification's as before, the messages name the limit, the empty optional value or the
products a parameter is for; a run whose manifest says ``"synthetic": true`` is served with
``X-Pointcast-Synthetic: true`` and its bodies exactly as a real run's."""

from __future__ import annotations

import json

import pytest

from pointcast.contract import MAX_PAIRS, MAX_PAIRS_SUBHOURLY
from served import (  # noqa: F401  (the fixtures client, live and tree)
    BERLIN,
    HORNSEA,
    MEDIUM,
    PARIS,
    SHORT,
    SS1WX,
    WIND,
    assert_error,
    client_fixture,
    get,
    live_fixture,
    live_server,
    raw_get,
    tree_fixture,
)

GLOBAL = "/api/v2/global/wx"
QUANTILES = "/V1/forecast/quantiles"
LONDON = "51.5074/-0.1278"


@pytest.mark.parametrize("path, extra", [(MEDIUM, ""), (SHORT, ""), (WIND, "&hubheight=100m")])
def test_more_pairs_than_an_operation_takes_names_the_limit(client, path, extra):
    eleven = ";".join([PARIS] * (MAX_PAIRS + 1))
    assert_error(get(client, path, f"latlon={eleven}&freq=1H{extra}"), 400, "400_002",
                 f'"latlon" is invalid value: {MAX_PAIRS + 1} pairs, more than the {MAX_PAIRS} this operation '
                 "takes with freq=1H")
    for freq in ("15min", "30min"):
        assert_error(get(client, path, f"latlon={PARIS};{BERLIN}&freq={freq}{extra}"), 400, "400_002",
                     f'"latlon" is invalid value: 2 pairs, more than the {MAX_PAIRS_SUBHOURLY} this operation '
                     f"takes with freq={freq}")
    # at the limit: answered
    ten = ";".join([PARIS] * MAX_PAIRS)
    assert get(client, path, f"latlon={ten}&freq=1H{extra}").status_code == 200


def test_the_quantiles_take_one_pair_and_say_so(client):
    assert_error(get(client, QUANTILES, f"product=eu-short&latlon={PARIS};{BERLIN}"), 400, "400_002",
                 '"latlon" is invalid value: 2 pairs, more than the 1 this operation takes')


def test_hubheight_on_a_product_without_heights_names_the_product_that_takes_it(client):
    for product in ("eu-short", "eu-medium", "global", "japan"):
        assert_error(get(client, QUANTILES, f"product={product}&latlon={PARIS}&hubheight=100m"), 400, "400_002",
                     f'"hubheight" is invalid value: product {product} has no heights; it is taken with '
                     "product=eu-wind")
    assert_error(get(client, QUANTILES, f"product=eu-wind&latlon={HORNSEA}&hubheight="), 400, "400_002",
                 '"hubheight" is invalid value: empty (it is optional: leave it out)')


def test_an_empty_tz_is_an_invalid_value_not_a_missing_one(client):
    """``tz`` is optional: given empty it names no zone (400_002), it is not "required"."""
    assert_error(get(client, GLOBAL, f"latlon={LONDON}&tz="), 400, "400_002",
                 '"tz" is invalid value: empty (it is optional: leave it out)')
    assert_error(get(client, GLOBAL, f"latlon={LONDON}&tz=Mars/Olympus_Mons"), 400, "400_002",
                 '"tz" is invalid value: not an IANA time zone name (e.g. Europe/Paris)')
    assert_error(get(client, GLOBAL, f"latlon={LONDON}&tz=Europe/Paris&tz=Asia/Tokyo"), 400, "400_002",
                 '"tz" is invalid value: given several times with different values')
    # absent, or a zone: past the parameters (this tree publishes no global product)
    for query in (f"latlon={LONDON}", f"latlon={LONDON}&tz=Europe/Paris"):
        assert_error(get(client, GLOBAL, query), 404, "404_002")
    assert_error(get(client, GLOBAL, "tz=Europe/Paris"), 400, "400_001", '"latlon" is required')


def test_a_real_run_carries_no_synthetic_header(client):
    r = get(client, MEDIUM, f"latlon={PARIS}&freq=1H")
    assert r.status_code == 200 and "x-pointcast-synthetic" not in r.headers
    catalog = client.get("/catalog").json()
    assert list(catalog)[:3] == ["run_id", "synthetic", "products"] and catalog["synthetic"] is False


def test_a_synthetic_run_says_so_on_every_answer(tree, tmp_path):
    """The same run with ``"synthetic": true`` in its manifest: every forecast answer (gzip,
    304 and HEAD too) carries the header, the bodies are byte for byte the real run's (the
    specification's shapes), and ``/catalog`` says ``"synthetic": true``; errors carry no header."""
    import shutil

    shutil.copytree(tree, tmp_path / "output", symlinks=True)
    root = tmp_path / "output"
    manifest = root / "runs" / "20261122T00Z" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "synthetic": True}))
    requests = [(MEDIUM, f"latlon={PARIS};{BERLIN}&freq=1H"), (SHORT, f"latlon={PARIS}&freq=15min"),
                (WIND, f"latlon={HORNSEA}&freq=1H&hubheight=113m"), (WIND, f"latlon={HORNSEA}&freq=1H&hubheight=90m"),
                (SS1WX, "lat=35.6812&lon=139.7671"), (QUANTILES, f"product=eu-wind&latlon={HORNSEA}")]
    with live_server(tree) as (real, _, _), live_server(root) as (client, _, port):
        for path, query in requests:
            r, plain = get(client, path, query), get(real, path, query)
            assert r.status_code == plain.status_code, (path, r.text)
            if r.status_code != 200:  # the fixture's tree has no quantile files: an error, no header
                assert "x-pointcast-synthetic" not in r.headers
                continue
            assert r.headers["x-pointcast-synthetic"] == "true", path
            assert "x-pointcast-synthetic" not in plain.headers
            if path == SS1WX:  # a fresh requestId per answer
                assert {**r.json(), "requestId": ""} == {**plain.json(), "requestId": ""}
            else:
                assert r.content == plain.content
            gz = get(client, path, query, headers={"Accept-Encoding": "gzip"})
            assert gz.headers["content-encoding"] == "gzip" and gz.headers["x-pointcast-synthetic"] == "true"
            again = get(client, path, query, headers={"If-None-Match": r.headers["etag"]})
            assert again.status_code == 304 and again.headers["x-pointcast-synthetic"] == "true"
            status, headers, body = raw_get(port, f"{path}?{query}".encode(), b"HEAD")
            assert status == 200 and headers["x-pointcast-synthetic"] == "true" and body == b""
        catalog = client.get("/catalog")
        assert catalog.headers["x-pointcast-synthetic"] == "true" and catalog.json()["synthetic"] is True
        bad = get(client, MEDIUM, f"latlon={PARIS}&freq=2H")
        assert bad.status_code == 400 and "x-pointcast-synthetic" not in bad.headers


def test_the_openapi_document_names_the_synthetic_flag(client):
    doc = client.get("/openapi.json").json()
    catalog = doc["components"]["schemas"]["Catalog"]
    assert catalog["properties"]["synthetic"] == {"type": "boolean"} and "synthetic" in catalog["required"]
    for path in (MEDIUM, WIND, SS1WX, GLOBAL, QUANTILES, "/catalog"):
        for status in ("200", "304"):
            header = doc["paths"][path]["get"]["responses"][status]["headers"]["X-Pointcast-Synthetic"]
            assert header["schema"] == {"type": "string", "enum": ["true"]} and not header.get("required")
