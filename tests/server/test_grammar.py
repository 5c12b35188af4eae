"""The request grammar (``pointcast.server.grammar``): its parsers, and the errors of the common operations
(codes, messages, unknown paths, other methods, hostile query strings over a raw socket)."""

from __future__ import annotations

import json

import pytest

from pointcast.grids import grid_for
from pointcast.server import ApiError
from pointcast.server.grammar import check_hubheight_range, parse_coordinate, parse_hubheight, parse_pairs, parse_query
from served import (  # noqa: F401  (the fixtures client, live and tree)
    BERLIN,
    HOSTILE,
    MADRID,
    MEDIUM,
    NEW_YORK,
    PARIS,
    SHORT,
    WIND,
    assert_error,
    client_fixture,
    get,
    live_fixture,
    raw_get,
    tree_fixture,
)


def test_invalid_freq_exact_body(client):
    r = get(client, MEDIUM, f"latlon={PARIS}&freq=2H")
    assert r.status_code == 400
    assert r.content == b'{"status": 400, "code": "400_002", "message": "\\"freq\\" is invalid value"}'
    assert r.json() == {"status": 400, "code": "400_002", "message": '"freq" is invalid value'}


@pytest.mark.parametrize(
    "query,status,code,message",
    [
        ("", 400, "400_001", '"latlon" is required'),
        ("freq=1H", 400, "400_001", '"latlon" is required'),
        ("latlon=&freq=1H", 400, "400_001", '"latlon" is required'),
        (f"latlon={PARIS}", 400, "400_001", '"freq" is required'),
        (f"latlon={PARIS}&freq=", 400, "400_001", '"freq" is required'),
        (f"latlon={PARIS}&freq=1h", 400, "400_002", '"freq" is invalid value'),
        ("latlon=abc&freq=1H", 400, "400_002", '"latlon" is invalid value'),
        ("latlon=48.8566&freq=1H", 400, "400_002", '"latlon" is invalid value'),
        ("latlon=48.8566,2.3522,3&freq=1H", 400, "400_002", '"latlon" is invalid value'),
        (f"latlon={PARIS};&freq=1H", 400, "400_002", '"latlon" is invalid value'),
        ("latlon=" + ";".join([PARIS] * 11) + "&freq=1H", 400, "400_002",
         '"latlon" is invalid value: 11 pairs, more than the 10 this operation takes with freq=1H'),
        (f"latlon={PARIS};{BERLIN}&freq=15min", 400, "400_002",
         '"latlon" is invalid value: 2 pairs, more than the 1 this operation takes with freq=15min'),
        (f"latlon={PARIS};{BERLIN}&freq=30min", 400, "400_002",
         '"latlon" is invalid value: 2 pairs, more than the 1 this operation takes with freq=30min'),
        (f"latlon={PARIS}&latlon={BERLIN}&freq=1H", 400, "400_002", '"latlon" is invalid value: given several times with different values'),
        (f"latlon={PARIS}&freq=1H&freq=15min", 400, "400_002", '"freq" is invalid value: given several times with different values'),
        ("latlon=90.5,2.3522&freq=1H", 400, "400_003", '"latlon" is out of range: 90.5,2.3522'),
        ("latlon=-91,0&freq=1H", 400, "400_003", '"latlon" is out of range: -91,0'),
        ("latlon=48.8566,180.01&freq=1H", 400, "400_003", '"latlon" is out of range: 48.8566,180.01'),
        (f"latlon={PARIS};0,-181&freq=1H", 400, "400_003", '"latlon" is out of range: 0,-181'),
        (f"latlon={NEW_YORK}&freq=1H", 403, "403_001", f'"latlon" is outside the coverage of this operation: {NEW_YORK}'),
        (f"latlon={PARIS};{NEW_YORK}&freq=1H", 403, "403_001", None),
        (f"latlon={MADRID}&freq=1H", 404, "404_002", f'"latlon" has no forecast point in its grid cell: {MADRID}'),
        (f"latlon={PARIS};{MADRID}&freq=15min", 400, "400_002", None),
    ],
)
@pytest.mark.parametrize("path", [MEDIUM, SHORT])
def test_error_codes(client, path, query, status, code, message):
    if code in ("403_001", "404_002"):
        grid = grid_for("eu-medium")
        assert grid.covers(40.4168, -3.7038) and grid.covers(48.8566, 2.3522)
        assert not grid.covers(40.7128, -74.006)
    assert_error(get(client, path, query), status, code, message)


@pytest.mark.parametrize("path", ["/V1", "/V1/forecast/medium-range/common/", "/v1/forecast/medium-range/common",
                                  "/V1/forecast/short-range/windpack/", "/api/v2/global/wx/", "/api/v1/ss1wx/",
                                  "/API/v1/ss1wx", "/api/v1/ss1wx.json", "/../etc/passwd",
                                  "/runs/20261122T00Z/json/eu-medium/index.json", "/current/json/eu-medium/1H/paris.json"])
def test_unknown_path_404_001(client, path):
    assert_error(client.get(path, params={"latlon": PARIS, "freq": "1H"}), 404, "404_001", "no such resource")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_405(client, method):
    r = client.request(method, MEDIUM, params={"latlon": PARIS, "freq": "1H"})
    assert_error(r, 405, "405_001", "method not allowed")
    assert r.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("query", HOSTILE, ids=lambda q: repr(q[:40]))
def test_hostile_queries_never_5xx(live, query):
    _, _, port = live
    for path, extra in ((MEDIUM, b""), (SHORT, b""), ("/catalog", b""), (WIND, b"&hubheight=100m"), (WIND, b"")):
        status, headers, body = raw_get(port, path.encode() + b"?" + query + extra)
        assert status < 500, (status, body)
        assert "x-injected" not in headers
        if status >= 400 and headers.get("content-type") == "application/json":
            err = json.loads(body)
            assert set(err) == {"status", "code", "message"} and err["status"] == status


@pytest.mark.parametrize(
    "query",
    [q for q in HOSTILE if b"%00" in q or b"%ff" in q or b"%ED" in q or b"%C0" in q or b"%zz" in q or q.endswith(b"%4")
     or b"1e400" in q or b"NaN" in q or b"nan" in q or b"inf" in q or b"passwd" in q],
    ids=lambda q: repr(q[:40]),
)
def test_hostile_queries_are_400_002(live, query):
    _, _, port = live
    status, headers, body = raw_get(port, MEDIUM.encode() + b"?" + query)
    assert status == 400, body
    assert json.loads(body)["code"] == "400_002"
    assert headers["cache-control"] == "no-store"


def test_parsers():
    assert parse_query(b"a=1&b=%2B+x&&c&a=2") == {"a": ["1", "2"], "b": ["+ x"], "c": [""]}
    pairs = parse_pairs("1,2;-3.5,+4|5e0, 6 ", 10)
    assert [(p.text, p.lat, p.lon) for p in pairs] == [("1,2", 1, 2), ("-3.5,+4", -3.5, 4), ("5e0, 6 ", 5, 6)]


def test_hubheight_parser():
    assert parse_hubheight("112.50m").text == "112.50m" and parse_hubheight("112.50m").metres == 112.5
    for bad in ["", "m", "100", "9.m", ".5m", "1e2m", "-1m", "100M", " 100m", "100 m", "١٠٠m"]:
        with pytest.raises(ApiError) as err:
            parse_hubheight(bad)
        assert err.value.code == "400_002"
    check_hubheight_range(parse_hubheight("10m"))
    check_hubheight_range(parse_hubheight("300.000m"))
    with pytest.raises(ApiError) as err:
        check_hubheight_range(parse_hubheight("300.0000000000000001m"))
    assert err.value.code == "400_003"


def test_coordinate_parser():
    assert parse_coordinate("35.6812", "lat") == 35.6812
    assert parse_coordinate(" +3.56812e1\t", "lat") == 35.6812
    assert parse_coordinate("-0", "lon") == 0.0 and parse_coordinate("91", "lat") == 91.0  # range: later
    for bad in ["", " ", "nan", "inf", "1e400", "0x1", "1_0", "35,6", "٣٥", "35.6812°", "1" * 33]:
        with pytest.raises(ApiError) as err:
            parse_coordinate(bad, "lat")
        assert (err.value.code, err.value.message) == ("400_002", '"lat" is invalid value')
