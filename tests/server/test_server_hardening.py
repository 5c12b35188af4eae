"""The thin server against hostile input and without a key.

- ``/openapi.json`` is generated from the contract (``pointcast.contract``, ``pointcast.server.openapi``);
  schemathesis generates at least 5,000 requests from it (schema-conforming and
  schema-violating) against the real server (``pointcast serve``'s) serving the output of the test suite's
  real cycle (conftest ``published``): no 5xx, every answer conforms to the document, whose
  entries require every element of the spec's tables (errors: the JSON body of docs/api.md,
  "Errors").
- Explicit hostile queries for every operation over a raw socket.
- API keys (stored hashed), 401_001 / 401_002, the per-key token bucket (429_001 with
  Retry-After), no key in the logs, no file path from request text.

The hand-built run tree, the live server and the raw socket client are those of tests/support/served.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import re
import tomllib
from pathlib import Path

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings, strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conftest import write_config
from pointcast import cli, viewer
from pointcast.config import ApiKeyConfig, ConfigError, api_key_sha256, load_config
from pointcast.contract import ERROR_CODES
from pointcast.server import OPERATIONS, ApiError, create_app
from pointcast.server.access import Access, TokenBucket
from pointcast.server.grammar import parse_coordinate, parse_hubheight, parse_pairs
from pointcast.server.openapi import PARAMETERS, openapi_document
from served import (  # noqa: F401  (the fixtures tree and live)
    BERLIN,
    HORNSEA,
    JAPAN_POINTS,
    MEDIUM,
    PARIS,
    ROME,
    SHORT,
    SS1WX,
    WIND,
    assert_error,
    call_app,
    live_fixture,
    live_server,
    raw_get,
    tree_fixture,
)

GLOBAL = "/api/v2/global/wx"
SPEC_PATHS = {MEDIUM, SHORT, WIND, GLOBAL, SS1WX}  # the five forecast operations
FUZZ_REQUESTS = 5000
KEY = "pc-test-Zx81-hunter2-never-logged"
OTHER_KEY = "pc-test-other-key-0042"


def error_body(status: int, body: bytes) -> dict:
    err = json.loads(body)
    assert set(err) == {"status", "code", "message"}, err
    assert err["status"] == status and err["code"] in ERROR_CODES.get(status, (f"{status}_001",)), err
    return err


# --------------------------------------------------------------------------- the document


def test_openapi_document_is_served_and_generated_from_the_table(live):
    client, app, _ = live
    r = client.get("/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.headers["etag"] and r.headers["cache-control"] == "public, max-age=0"
    doc = r.json()
    assert doc["openapi"] == "3.0.3" and doc == openapi_document()
    documented = {path for path, op in OPERATIONS.items() if op.name != "openapi"}
    assert set(doc["paths"]) == documented
    assert SPEC_PATHS <= documented, "the five operations of the spec"
    # the spec's section numbers are a cross-reference in the description, not the operations' names
    for path, section in {MEDIUM: "4.1", SHORT: "4.2", WIND: "4.3", GLOBAL: "4.4", SS1WX: "4.5"}.items():
        assert doc["paths"][path]["get"]["description"].startswith(f"Section {section} "), path
    for path, item in doc["paths"].items():
        op = OPERATIONS[path]
        assert list(item) == ["get"]
        params = item["get"]["parameters"]
        assert [p["name"] for p in params] == list(op.params)
        assert all(p["in"] == "query" for p in params)
        responses = item["get"]["responses"]
        assert "500" not in responses and "401" not in responses  # open server
        for status, response in responses.items():
            if int(status) >= 400:
                ref = response["content"]["application/json"]["schema"]["$ref"]
                schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
                assert schema["required"] == ["status", "code", "message"]
                assert schema["properties"]["code"]["enum"] == list(ERROR_CODES[int(status)])
    assert r.headers["etag"] == client.get("/openapi.json").headers["etag"]
    assert client.get("/openapi.json", headers={"if-none-match": r.headers["etag"]}).status_code == 304
    assert app.openapi[0] == r.content


def test_parameter_table_names_exactly_the_parameters_of_each_operation(monkeypatch):
    for op in OPERATIONS.values():
        if op.name != "openapi":
            assert set(PARAMETERS[op.name]) == set(op.params), op.path
    medium = PARAMETERS["medium-range-common"]
    monkeypatch.setitem(PARAMETERS, "medium-range-common", {"latlon": medium["latlon"]})  # freq undocumented
    with pytest.raises(RuntimeError, match="freq"):
        openapi_document()


def _pattern(op: str, name: str) -> re.Pattern:
    return re.compile(PARAMETERS[op][name].schema["pattern"])


def _accepts(parse, text: str) -> bool:
    try:
        parse(text)
    except ApiError as err:
        return err.code != "400_002"  # a range error: the syntax was accepted
    return True


_numberish = st.text(alphabet="0123456789+-.eE \t,;|/m", max_size=24)


@settings(max_examples=400, deadline=None)
@given(text=_numberish | st.sampled_from(["48.8566,2.3522", " +1.5e3 , .5 |2,3", "112.50m", "35.6812/139.7671"]))
def test_patterns_are_never_stricter_than_the_parsers(text):
    # whatever a parser takes must match the documented pattern (a pattern may be looser)
    if _accepts(lambda t: parse_pairs(t, 10), text):
        assert _pattern("medium-range-common", "latlon").match(text), text
    if _accepts(parse_hubheight, text):
        assert _pattern("short-range-windpack", "hubheight").match(text), text
    if _accepts(lambda t: parse_coordinate(t, "lat"), text):
        assert re.fullmatch(r"[ \t]*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[ \t]*", text)


def test_secured_document_names_the_key_and_its_errors(tmp_path):
    app = create_app(tmp_path, api_keys=[ApiKeyConfig("ops", api_key_sha256(KEY.encode()))])
    doc = json.loads(app.openapi[0])
    assert doc["components"]["securitySchemes"] == {"ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}
    for item in doc["paths"].values():
        get = item["get"]
        assert get["security"] == [{"ApiKey": []}]
        assert {"401", "429"} <= set(get["responses"])
        assert get["responses"]["429"]["headers"]["Retry-After"]["required"] is True
    # the document itself needs no key
    status, _, body = call_app(app, "GET", "/openapi.json", b"")
    assert status == 200 and json.loads(body) == doc


# --------------------------------------------------------------------------- schemathesis

# Values worth trying for our own formats (the document's "format" names): the cycle's
# configured points (so that 200 answers are reached and checked against their schema),
# neighbours, out-of-range and hostile numbers.
_number = st.one_of(
    st.floats(-90, 90).map(repr),
    st.floats(-200, 200).map(lambda f: f"{f:.4f}"),
    st.integers(-400, 400).map(str),
    st.sampled_from(["1e400", "-1e400", "1e-400", " 1.5", "+2", ".5", "0" * 40, "48.8566", "2.3522"]),
)


def register_formats(catalog: dict) -> dict[str, list[tuple[float, float]]]:
    """Register the strategies of our formats, steered to the points of the served run's
    ``catalog``; returns each product's points (lat, lon)."""
    points = {p["product"]: [(q["lat"], q["lon"]) for q in p["points"]] for p in catalog["products"]}
    eu = [f"{lat},{lon}" for lat, lon in points["eu-short"]] + [HORNSEA, "40.4168,-3.7038", "40.7128,-74.006"]
    pair = st.sampled_from(eu) | st.tuples(_number, _number).map(",".join)
    formats = {
        "latlon-pairs": st.tuples(st.sampled_from([";", "|"]), st.lists(pair, min_size=1, max_size=12)).map(
            lambda t: t[0].join(t[1])),
        "latlon-pair": pair,  # the quantile extension's one pair
        "hub-height": st.one_of(
            st.sampled_from(["100m", "112.5m", "113m", "90m", "10m", "300m", "300.01m", "9.99m", "0m", "1000000m"]),
            st.decimals(0, 400, places=2).map(lambda d: f"{d}m"),
        ),
        "lat-slash-lon": st.one_of(
            st.sampled_from([f"{lat}/{lon}" for lat, lon in points["global"]] + ["-75.1/0", "0/0", "35.6812/139.7671"]),
            st.tuples(_number, _number).map("/".join),
        ),
        "time-zone": st.sampled_from(["Europe/Paris", "Asia/Tokyo", "UTC", "America/New_York", "Etc/GMT+5",
                                      "Mars/Olympus", "../../etc/passwd", "europe/paris", ""]) | st.text(max_size=12),
    }
    for name, strategy in formats.items():
        schemathesis.openapi.format(name, strategy)
    return points


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance, negative_data_rejection]


def schema_strategy(base: str, api_key: str | None = None):
    """Cases of every documented operation: schema-conforming and schema-violating ones
    (operations without parameters have no violating cases), and ss1wx at the configured points
    (its parameters are plain numbers: no format of ours steers them there)."""
    schema = schemathesis.openapi.from_url(base + "/openapi.json")
    headers = {"X-API-Key": api_key} if api_key else None
    catalog = requests.get(base + "/catalog", headers=headers, timeout=10).json()
    japan = register_formats(catalog)["japan"]
    strategies = []
    for path, item in schema.raw_schema["paths"].items():
        operation = schema[path]["GET"]
        strategies.append(operation.as_strategy(generation_mode=GenerationMode.POSITIVE, headers=headers))
        if item["get"]["parameters"]:
            strategies.append(operation.as_strategy(generation_mode=GenerationMode.NEGATIVE, headers=headers))
    strategies += [schema[SS1WX]["GET"].as_strategy(headers=headers, query={"lat": lat, "lon": lon})
                   for lat, lon in japan]
    return st.one_of(strategies)


def fuzz(base: str, examples: int, checks: list, api_key: str | None = None) -> dict[tuple[str, int], int]:
    """Send ``examples`` generated requests to the live server; returns (path, status) counts."""
    seen: dict[tuple[str, int], int] = {}
    session = requests.Session()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(case=schema_strategy(base, api_key))
    def run(case):
        response = case.call(base_url=base, session=session, timeout=10)
        key = (case.operation.path, response.status_code)
        seen[key] = seen.get(key, 0) + 1
        assert response.status_code < 500, (case.as_curl_command(), response.text)
        if response.status_code >= 400:
            error_body(response.status_code, response.content)
            assert response.headers["cache-control"] == ["no-store"]
        case.validate_response(response, checks=checks)

    run()
    return seen


@pytest.fixture(scope="module")
def cycle_root(published) -> Path:
    """The output root of the test suite's real cycle (conftest ``published``)."""
    return published[1]


def test_fuzz_5000_requests_from_the_openapi_document(cycle_root):
    with live_server(cycle_root) as (_, _, port):
        seen = fuzz(f"http://127.0.0.1:{port}", FUZZ_REQUESTS, CHECKS)
    assert sum(seen.values()) >= FUZZ_REQUESTS
    statuses = {status for _, status in seen}
    assert statuses <= {200, 400, 403, 404}, seen
    assert {200, 400, 403, 404} <= statuses, seen  # the generator reaches every outcome
    for path in SPEC_PATHS:
        assert seen.get((path, 200), 0) > 0 and seen.get((path, 400), 0) > 0, (path, seen)


def test_fuzz_with_api_keys(cycle_root):
    keys = [ApiKeyConfig("fuzz", api_key_sha256(KEY.encode()), rate_limit=1e6, burst=1000)]
    with live_server(cycle_root, api_keys=keys) as (_, _, port):
        seen = fuzz(f"http://127.0.0.1:{port}", 300, [*CHECKS, ignored_auth], api_key=KEY)
    assert sum(seen.values()) >= 300 and not any(status >= 500 for _, status in seen)
    assert any(status == 200 for _, status in seen)


# --------------------------------------------------------------------------- explicit hostile input

# a good query per operation; each case below replaces or adds parameters
GOOD = {
    MEDIUM: {"latlon": PARIS, "freq": "1H"},
    SHORT: {"latlon": ROME, "freq": "1H"},
    WIND: {"latlon": HORNSEA, "freq": "1H", "hubheight": "100m"},
    SS1WX: {"lat": str(JAPAN_POINTS[0][2]), "lon": str(JAPAN_POINTS[0][3])},
    GLOBAL: {"latlon": "48.8566/2.3522"},
}


def encode(params: list[tuple[bytes, bytes]]) -> bytes:
    return b"&".join(name + b"=" + value for name, value in params)


def hostile_values(name: str, good: bytes) -> list[tuple[str, bytes]]:
    """(what, raw value) replacing one parameter's value."""
    return [
        ("NUL", good + b"%00"),
        ("NUL inside", good[:2] + b"%00" + good[2:]),
        ("huge number", b"1e400"),
        ("huge digits", b"9" * 5000),
        ("NaN", b"NaN"),
        ("nan pair", b"nan,nan" if name == "latlon" else b"nan"),
        ("inf", b"inf"),
        ("-Infinity", b"-Infinity"),
        ("traversal", b"../../../../etc/passwd"),
        ("encoded traversal", b"..%2F..%2F..%2Findex"),
        ("invalid UTF-8", b"%ff%fe"),
        ("encoded surrogate", b"%ED%A0%80"),
        ("overlong UTF-8", b"%C0%AE%C0%AE%2F"),
        ("bad escape", good + b"%4"),
        ("CRLF", good + b"%0D%0AX-Injected:%201"),
    ]


def hostile_cases():
    for path, good in GOOD.items():
        params = [(k.encode(), v.encode()) for k, v in good.items()]
        for i, (name, value) in enumerate(params):
            for what, bad in hostile_values(name.decode(), value):
                yield path, f"{name.decode()}: {what}", encode(params[:i] + [(name, bad)] + params[i + 1:])
            yield path, f"{name.decode()} repeated differently", encode(params + [(name, value + b"0")])
        yield path, "NUL in a name", encode(params + [(b"x%00", b"1")])
        yield path, "invalid UTF-8 name", encode([(b"%ff", b"1")] + params)


HOSTILE_CASES = list(hostile_cases())


@pytest.mark.parametrize("path,what,query", HOSTILE_CASES, ids=[f"{p}-{w}" for p, w, _ in HOSTILE_CASES])
def test_hostile_values_are_400_with_the_error_body(live, path, what, query):
    _, _, port = live
    status, headers, body = raw_get(port, path.encode() + b"?" + query)
    assert status == 400, (status, body)
    err = error_body(400, body)
    assert err["code"] == "400_002", err  # invalid value (for ranges 400_003 would do, none is here)
    assert headers["cache-control"] == "no-store" and "x-injected" not in headers


@pytest.mark.parametrize("path", sorted(GOOD))
def test_repeated_same_value_is_the_single_answer(live, path):
    client, _, _ = live
    params = list(GOOD[path].items())
    once = client.get(path, params=params)
    twice = client.get(path, params=params + params)
    assert once.status_code == twice.status_code and once.status_code in (200, 404)
    if path not in (SS1WX, GLOBAL):  # those carry a fresh requestId
        assert once.content == twice.content


@pytest.mark.parametrize("path", sorted(GOOD))
@pytest.mark.parametrize("raw", [b"\xff\xfe", b"\xc3\x28", b"\x00", b"\x7f"], ids=["ff-fe", "bad-utf8", "nul", "del"])
def test_raw_bytes_in_the_request_line_never_5xx(live, path, raw):
    # httptools refuses raw control or non-ASCII bytes in the request line itself: the request
    # never reaches the app; the HTTP adapter answers the JSON 400_002 and closes (docs/api.md)
    _, _, port = live
    name = next(iter(GOOD[path]))
    status, headers, body = raw_get(port, path.encode() + b"?" + name.encode() + b"=" + raw + b"1")
    assert status == 400 and error_body(400, body)["code"] == "400_002", body
    assert headers["connection"] == "close" and headers["cache-control"] == "no-store"


@pytest.mark.parametrize("size", [8_000, 100_000, 1_000_000])
@pytest.mark.parametrize("path", sorted(GOOD))
def test_overlong_query_strings(live, path, size):
    _, _, port = live
    good = encode([(k.encode(), v.encode()) for k, v in GOOD[path].items()])
    for query in (b"x=" + b"a" * size + b"&" + good,  # long unknown parameter: ignored
                  good.replace(b"=", b"=" + b"1" * size, 1),  # the first value overlong
                  b"&" * size + good):  # empty segments
        status, headers, body = raw_get(port, path.encode() + b"?" + query)
        assert status < 500, body
        if len(path) + len(query) >= 65_536:  # refused by the HTTP adapter, in JSON too
            assert status == 400 and headers["connection"] == "close", body
            assert error_body(400, body)["message"] == "request target of 64 KiB or more"
        elif status >= 400:
            assert headers["content-type"] == "application/json", body
            error_body(status, body)


# --------------------------------------------------------------------------- no path from request text


def test_no_file_path_is_built_from_request_text(tree, monkeypatch):
    """Every file the server reads, during answers to traversal attempts and good requests,
    is an index.json or a point file named by the fixed tables and the run's index."""
    planted = tree / "runs" / "20261122T00Z" / "json" / "eu-medium"
    (planted / "evil").mkdir(exist_ok=True)
    (planted / "evil" / "paris.json").write_text('{"latitude":0,"longitude":0,"basetime":"planted"}')
    (tree / "secret.json").write_text('{"latitude":0,"longitude":0,"basetime":"secret"}')
    read: list[Path] = []
    original = Path.read_bytes

    def recording(self):
        read.append(self)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", recording)
    app = create_app(tree)  # cold caches: every answer reads files
    attempts = [
        (MEDIUM, b"latlon=48.8566,2.3522&freq=evil"),
        (MEDIUM, b"latlon=48.8566,2.3522&freq=../../../../secret"),
        (MEDIUM, b"latlon=48.8566,2.3522&freq=1H/../evil"),
        (MEDIUM, b"latlon=../evil/paris&freq=1H"),
        (MEDIUM, b"latlon=48.8566,2.3522&freq=%2E%2E%2Fevil"),
        (WIND, b"latlon=53.885,1.791&freq=1H&hubheight=../../../secret"),
        (WIND, b"latlon=53.885,1.791&freq=1H&hubheight=..%2F100m"),
        (SS1WX, b"lat=../../secret&lon=139.7671"),
        (GLOBAL, b"latlon=../../secret/1&tz=../../../../secret"),
        (GLOBAL, b"latlon=48.8566/2.3522&tz=../../../../etc/passwd"),
        ("/catalog", b"product=../secret"),
        ("/../secret.json", b""),
        ("/V1/forecast/medium-range/../../secret.json", b""),
    ]
    for path, query in attempts:
        status, _, body = call_app(app, "GET", path, query)
        assert status in (400, 404) or (path, status) == ("/catalog", 200), (path, query, status, body)
        assert b"planted" not in body and b"secret" not in body.split(b'"message"')[0]
    for path, query in [(MEDIUM, b"latlon=48.8566,2.3522&freq=1H"), (WIND, b"latlon=53.885,1.791&freq=1H&hubheight=90m"),
                        (SS1WX, b"lat=35.6812&lon=139.7671"), ("/catalog", b"")]:
        assert call_app(app, "GET", path, query)[0] == 200
    run = tree / "runs" / "20261122T00Z" / "json"
    allowed = re.compile(r"(eu-medium|eu-short|eu-wind|global|japan)/(index\.json|((1H|30min|15min)/)?"
                         r"[a-z0-9-]+(/[0-9.]+m)?\.json(\.gz)?)\Z")
    assert read, "the answers read files"
    for path in read:
        if Path(path).is_relative_to(viewer.HERE):  # the viewer's own files, read once (GET /)
            continue
        if Path(path) == run.parent / "manifest.json":  # the run's publication time (Last-Modified)
            continue
        if Path(path) == tree / "cycles" / "upstream.json":  # the models' newest runs (the stale flags)
            continue
        rel = Path(path).relative_to(run) if Path(path).is_relative_to(run) else path
        assert allowed.match(str(rel)), path
        assert ".." not in Path(path).parts and "evil" not in Path(path).parts


# --------------------------------------------------------------------------- API keys


def keyed_app(tree, **bucket) -> object:
    return create_app(tree, api_keys=[ApiKeyConfig("ops", api_key_sha256(KEY.encode()), **bucket),
                                      ApiKeyConfig("other", api_key_sha256(OTHER_KEY.encode()), **bucket)])


@pytest.fixture(scope="module")
def keyed(tree):
    keys = [ApiKeyConfig("ops", api_key_sha256(KEY.encode())),
            ApiKeyConfig("limited", api_key_sha256(OTHER_KEY.encode()), rate_limit=5.0, burst=2)]
    with live_server(tree, api_keys=keys) as server:
        yield server


def test_without_keys_the_service_is_open(live):
    client, app, _ = live
    assert app.access.open
    assert client.get(MEDIUM, params=GOOD[MEDIUM]).status_code == 200
    assert client.get(MEDIUM, params=GOOD[MEDIUM], headers={"X-API-Key": "anything"}).status_code == 200


@pytest.mark.parametrize("path", [MEDIUM, SHORT, WIND, SS1WX, GLOBAL, "/catalog"])
def test_missing_key_is_401_001(keyed, path):
    client, _, _ = keyed
    r = client.get(path, params=GOOD.get(path, {}))
    assert_error(r, 401, "401_001", '"X-API-Key" header is required')
    assert r.headers["www-authenticate"] == 'ApiKey header="X-API-Key"'
    assert_error(client.get(path, params=GOOD.get(path, {}), headers={"X-API-Key": ""}), 401, "401_001")


@pytest.mark.parametrize("value", ["wrong", KEY + "x", KEY[:-1], KEY.upper(), "x" * 300, KEY + "." * 300])
def test_invalid_key_is_401_002(keyed, value):
    client, _, _ = keyed
    r = client.get(MEDIUM, params=GOOD[MEDIUM], headers={"X-API-Key": value})
    assert_error(r, 401, "401_002", '"X-API-Key" is invalid')
    assert KEY not in r.text


@pytest.mark.parametrize("header", [b"X-API-Key", b"x-api-key", b"X-API-KEY", b"x-Api-kEy"])
def test_key_header_name_in_any_case(keyed, header):
    _, _, port = keyed
    target = MEDIUM.encode() + b"?latlon=48.8566,2.3522&freq=1H"
    status, _, body = raw_get(port, target, headers=header + b": " + KEY.encode() + b"\r\n")
    assert status == 200, body
    assert json.loads(body)[PARIS]["latitude"] == 48.8566


def test_two_key_headers_are_invalid(keyed):
    _, _, port = keyed
    two = b"X-API-Key: " + KEY.encode() + b"\r\nx-api-key: " + KEY.encode() + b"\r\n"
    status, _, body = raw_get(port, MEDIUM.encode() + b"?latlon=48.8566,2.3522&freq=1H", headers=two)
    assert status == 401 and error_body(401, body)["code"] == "401_002"


def test_key_checks_come_after_path_and_method(keyed):
    client, _, _ = keyed
    assert_error(client.get("/nope"), 404, "404_001")
    assert_error(client.post(MEDIUM), 405, "405_001")
    assert client.get("/openapi.json").status_code == 200  # the document needs no key
    # with a key, the request is checked as before
    assert_error(client.get(MEDIUM, params={"freq": "1H"}, headers={"X-API-Key": KEY}), 400, "400_001")


def test_rate_limit_429_with_retry_after_per_key(keyed):
    client, _, _ = keyed
    limited = {"X-API-Key": OTHER_KEY}
    answers = [client.get(MEDIUM, params=GOOD[MEDIUM], headers=limited) for _ in range(3)]
    assert [r.status_code for r in answers[:2]] == [200, 200]  # the burst
    body = assert_error(answers[2], 429, "429_001")
    assert answers[2].headers["retry-after"] == "1"  # 5 requests/s: a token within 0.2 s
    assert body["message"] == "rate limit exceeded: retry after 1 s"
    # other keys have their own bucket (and "ops" has no limit)
    assert all(client.get(MEDIUM, params=GOOD[MEDIUM], headers={"X-API-Key": KEY}).status_code == 200
               for _ in range(20))
    import time

    time.sleep(0.25)  # one token refilled
    assert client.get(MEDIUM, params=GOOD[MEDIUM], headers=limited).status_code == 200


def test_token_bucket():
    bucket = TokenBucket(rate=2.0, burst=3, now=100.0)
    assert [bucket.take(100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(100.0) == pytest.approx(0.5)
    assert bucket.take(100.25) == pytest.approx(0.25)  # half a token back, half missing
    assert bucket.take(100.5) == 0.0
    assert bucket.take(1000.0) == 0.0 and bucket.tokens == pytest.approx(2.0)  # capped at burst


def test_access_retry_after_is_whole_seconds_rounded_up():
    now = [0.0]
    access = Access([ApiKeyConfig("slow", api_key_sha256(b"k"), rate_limit=0.1, burst=1)], clock=lambda: now[0])
    headers = [(b"x-api-key", b"k")]
    assert access.admit(headers).name == "slow"
    with pytest.raises(ApiError) as err:
        access.admit(headers)
    assert (err.value.status, err.value.code, err.value.headers) == (429, "429_001", [(b"retry-after", b"10")])
    now[0] = 9.5
    with pytest.raises(ApiError) as err:
        access.admit(headers)
    assert err.value.headers == [(b"retry-after", b"1")]
    now[0] = 10.0
    assert access.admit(headers).name == "slow"


def test_keys_never_appear_in_logs(tree, caplog, monkeypatch):
    app = keyed_app(tree, rate_limit=0.001, burst=1)
    secret = KEY.encode()
    with caplog.at_level(logging.DEBUG):
        for headers in ([(b"x-api-key", secret)], [(b"x-api-key", secret)],  # the second is rate limited
                        [(b"x-api-key", secret + b"-wrong")], [(b"X-API-KEY", b"not-" + secret)]):
            call_app(app, "GET", MEDIUM, b"latlon=48.8566,2.3522&freq=1H", headers)

        def broken(*args):
            raise RuntimeError("a bug")

        monkeypatch.setitem(OPERATIONS, MEDIUM, dataclasses.replace(OPERATIONS[MEDIUM], handler=broken))
        # another query text: the one above has a kept answer, which would not reach the handler
        status, _, body = call_app(app, "GET", MEDIUM, b"latlon=48.8566,2.3522&freq=30min",
                                   [(b"x-api-key", OTHER_KEY.encode())])
        assert status == 500 and error_body(500, body)["code"] == "500_001"
    text = caplog.text
    assert "rate limited" in text and "unknown API key" in text and "unexpected error" in text  # logs were written
    assert "ops" in text  # the key's name identifies it
    for key in (KEY, OTHER_KEY, KEY + "-wrong"):
        assert key not in text
    assert all(KEY not in str(record.args) for record in caplog.records)


# --------------------------------------------------------------------------- configuration and CLI

SERVER_TABLE = f"""
[server]
rate_limit = 10
burst = 20

[server.api_keys.dashboard]
sha256 = "{api_key_sha256(KEY.encode())}"

[server.api_keys.batch-jobs]
sha256 = "{api_key_sha256(OTHER_KEY.encode()).upper()}"
rate_limit = 0.5
"""


def config_with(tmp_path: Path, table: str) -> Path:
    path = write_config(tmp_path, samples=False)
    path.write_text(path.read_text() + table)
    return path


def test_config_server_table(tmp_path):
    cfg = load_config(config_with(tmp_path, SERVER_TABLE))
    dashboard, batch = cfg.server.api_keys
    assert (dashboard.name, dashboard.sha256, dashboard.rate_limit, dashboard.burst) == (
        "dashboard", hashlib.sha256(KEY.encode()).hexdigest(), 10.0, 20)
    assert (batch.name, batch.sha256, batch.rate_limit, batch.burst) == (
        "batch-jobs", hashlib.sha256(OTHER_KEY.encode()).hexdigest(), 0.5, 20)
    assert KEY not in repr(cfg)
    assert load_config(config_with(tmp_path / "open", "")).server.api_keys == ()
    one = load_config(config_with(tmp_path / "one", f'[server.api_keys.a]\nsha256 = "{"ab" * 32}"\nrate_limit = 2.5\n'))
    assert one.server.api_keys[0].burst == 3  # a second's worth by default


@pytest.mark.parametrize("table,line,key,reason", [
    ('[server]\nport = 1\n', 2, "server.port", "unknown key"),
    ('[server.api_keys.a]\nsha256 = "hunter2"\n', 2, "server.api_keys.a.sha256", "64 hex digits"),
    (f'[server.api_keys.a]\nsha256 = "{"ab" * 32}"\n[server.api_keys.b]\nsha256 = "{"AB" * 32}"\n', 4,
     "server.api_keys.b.sha256", "the same key as [server.api_keys.a]"),
    (f'[server.api_keys.a]\nsha256 = "{"ab" * 32}"\nrate_limit = -1\n', 3, "server.api_keys.a.rate_limit", "positive"),
    (f'[server.api_keys.a]\nsha256 = "{"ab" * 32}"\nrate_limit = "fast"\n', 3, "server.api_keys.a.rate_limit",
     "expected a number"),
    (f'[server.api_keys.a]\nsha256 = "{"ab" * 32}"\nburst = 0\n', 3, "server.api_keys.a.burst", ">= 1"),
    (f'[server.api_keys.a]\nsha256 = "{"ab" * 32}"\nburst = 5\n', 3, "server.api_keys.a.burst", "needs a rate_limit"),
    (f'[server.api_keys.a]\nsha256 = "{"ab" * 32}"\nkey = "x"\n', 3, "server.api_keys.a.key", "unknown key"),
    ('[server]\nrate_limit = 5\n', 2, "server.rate_limit", "per API key"),
    ('[server]\napi_keys = 3\n', 2, "server.api_keys", "expected a table"),
    ('[server.api_keys."bad name"]\nsha256 = "x"\n', 1, "server.api_keys.bad name", "invalid key name"),
])
def test_config_server_errors_name_file_line_key(tmp_path, table, line, key, reason):
    path = config_with(tmp_path, "\n" + table)
    offset = path.read_text().count("\n") - table.count("\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (err.value.file, err.value.line, err.value.key) == (str(path), offset + line, key), str(err.value)
    assert reason in err.value.reason


def test_hash_key_command(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(KEY + "\n"))
    assert cli.main(["hash-key", "dashboard"]) == 0
    out = capsys.readouterr().out
    assert KEY not in out
    assert tomllib.loads(out) == {"server": {"api_keys": {"dashboard": {"sha256": hashlib.sha256(KEY.encode()).hexdigest()}}}}
    assert cli.main(["hash-key", "new", "--generate"]) == 0
    lines = capsys.readouterr().out.splitlines()
    key = lines[0].rsplit(" ", 1)[1]
    assert len(key) >= 40 and tomllib.loads("\n".join(lines[1:]))["server"]["api_keys"]["new"]["sha256"] == (
        api_key_sha256(key.encode()))
    monkeypatch.setattr("sys.stdin", io.StringIO(" spaced key\n"))
    assert cli.main(["hash-key", "x"]) == 2


def test_live_server_helper_passes_keys(keyed):
    client, app, _ = keyed
    assert not app.access.open and {k.name for k in app.access.keys.values()} == {"ops", "limited"}
    assert client.get("/catalog", headers={"x-api-key": KEY}).status_code == 200
    assert isinstance(client, httpx.Client)
