"""The app as a whole (``pointcast.server.app``): warm-up builds every grid; random queries to every
operation, through the ASGI callable in-process (hypothesis), are never answered with a 5xx."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pointcast.server import create_app
from pointcast.server.grammar import parse_query
from served import (  # noqa: F401  (the fixture tree)
    JAPAN_POINTS,
    MEDIUM,
    SHORT,
    SS1WX,
    WIND,
    WIND_KEYS,
    assert_request_id,
    call_app,
    tree_fixture,
)


def test_warm_up_builds_every_grid_without_errors(tree, caplog):
    # the probes include points outside a grid's domain (the JIS mesh raises there): never asked for
    app = create_app(tree)
    with caplog.at_level("WARNING", logger="pointcast.server"):
        app.warm_up()
    assert [r for r in caplog.records if r.name.startswith("pointcast.server")] == []
    assert set(app._grids) == {"eu-medium", "eu-short", "eu-wind", "global", "japan"}
    assert app._run is not None and app._run.product("japan") is not None


_TOKENS = [
    b"latlon", b"freq", b"=", b"&", b";", b"|", b",", b"%", b"%00", b"%ff", b"%fe", b"%2C", b"%3B", b"%7C", b"%2B",
    b"+", b" ", b"-", b".", b"e", b"E", b"1H", b"15min", b"30min", b"48.8566", b"2.3522", b"52.52", b"13.405",
    b"40.7128", b"-74.006", b"90", b"-180", b"180.0001", b"1e400", b"nan", b"inf", b"../../etc/passwd", b"\xff",
    b"\x00", b"%E2%9C%93", b"%C3", b"latlon=48.8566,2.3522", b"&freq=1H", b"&freq=15min",
    b"hubheight", b"&hubheight=", b"m", b"M", b"100m", b"112.5m", b"113m", b"300m", b"10m", b"9.99m", b"1e2m",
    b"latlon=53.885,1.791", b"&hubheight=90m",
    b"lat", b"lon", b"lat=", b"&lon=", b"35.6812", b"139.7671", b"43.0618", b"141.3545", b"lat=35.6812&lon=139.7671",
]
_hubheight = st.one_of(
    st.sampled_from([b"100m", b"112.50m", b"90m", b"10m", b"300m", b"300.01m", b"5m", b"m", b"100", b"-20m", b"1e2m",
                     b"nanm", b"infm", b"9.m", b"100M", b"%31%30%30m", b"100m%00", b""]),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode() + b"m"),
    st.decimals(0, 400, places=3).map(lambda d: str(d).encode() + b"m"),
    st.binary(max_size=8),
)
_number = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode()),
    st.floats(-90, 90).map(lambda f: f"{f:.4f}".encode()),
    st.integers(-1000, 1000).map(lambda i: str(i).encode()),
    st.sampled_from([b"48.8566", b"2.3522", b"52.52", b"13.405", b"", b"-", b"1e400", b"0x1"]),
)
_pair = st.tuples(_number, _number).map(lambda t: t[0] + b"," + t[1])
_structured = st.builds(
    lambda pairs, sep, freq, hub, extra: b"latlon=" + sep.join(pairs) + b"&freq=" + freq + hub + extra,
    st.lists(_pair | st.sampled_from([b"53.885,1.791", b"48.8566,2.3522"]), min_size=0, max_size=12),
    st.sampled_from([b";", b"|", b"%3B", b"%7C", b",", b"&"]),
    st.sampled_from([b"1H", b"15min", b"30min", b"", b"2H", b"%00", b"1H%ff"]),
    st.one_of(st.just(b""), _hubheight.map(lambda h: b"&hubheight=" + h)),
    st.sampled_from([b"", b"&freq=1H", b"&latlon=1,1", b"&x=%zz", b"&&", b"&hubheight=100m"]),
)
_windpack = st.builds(  # mostly well-formed, to reach the splice and the interpolation
    lambda pairs, freq, hub: b"latlon=" + b";".join(pairs) + b"&freq=" + freq + b"&hubheight=" + hub,
    st.lists(st.sampled_from([b"53.885,1.791", b"48.8566,2.3522", b"52.52,13.405", b"40.4168,-3.7038"]),
             min_size=1, max_size=3),
    st.sampled_from([b"1H", b"1H", b"15min", b"30min"]),
    _hubheight | st.decimals(10, 300, places=2).map(lambda d: str(d).encode() + b"m"),
)
_japan_lat = st.one_of(
    st.sampled_from([b"35.6812", b"43.0618", b"35.0116", b"26.2124", b"34.6937", b"35.68120", b"%2B35.6812",
                     b"+35.6812", b"3.56812e1", b"91", b"-90", b"", b"nan", b"inf", b"1e400", b"%00", b"%ff", b"35.6812%"]),
    st.floats(-0.004, 0.004).map(lambda d: f"{35.6812 + d:.4f}".encode()),  # around Tokyo Station's mesh cell
    st.floats(20, 46).map(lambda f: f"{f:.4f}".encode()),
    _number,
)
_japan_lon = st.one_of(
    st.sampled_from([b"139.7671", b"141.3545", b"135.7681", b"127.6809", b"135.5023", b"1.397671E2", b"181", b"",
                     b"-inf", b"%ED%A0%80", b"139.7671%0D%0A"]),
    st.floats(-0.006, 0.006).map(lambda d: f"{139.7671 + d:.4f}".encode()),
    st.floats(122, 154).map(lambda f: f"{f:.4f}".encode()),
    _number,
)
_japan_point = st.one_of(  # (lat, lon): the configured points, Tokyo's mesh cell and its neighbours, anything
    st.sampled_from([(f"{lat}".encode(), f"{lon}".encode()) for _, _, lat, lon, _ in JAPAN_POINTS]),
    st.tuples(st.floats(-0.006, 0.006), st.floats(-0.009, 0.009)).map(
        lambda d: (f"{35.6812 + d[0]:.4f}".encode(), f"{139.7671 + d[1]:.4f}".encode())),
    st.tuples(_japan_lat, _japan_lon),
)
_ss1wx = st.builds(  # mostly well-formed, to reach the coverage, the mesh cell and the splice
    lambda point, swap, extra: (b"lon=" + point[1] + b"&lat=" + point[0] if swap
                                else b"lat=" + point[0] + b"&lon=" + point[1]) + extra,
    _japan_point,
    st.booleans(),
    st.sampled_from([b"", b"", b"", b"&lat=35.6812", b"&lon=139.7671", b"&x=%zz", b"&&", b"&latlon=1,2", b"&lat="]),
)
_queries = st.one_of(
    _windpack,
    _ss1wx,
    st.lists(st.sampled_from(_TOKENS) | st.binary(max_size=6), max_size=25).map(b"".join),
    _structured,
    st.binary(max_size=200),
    st.text(max_size=60).map(lambda s: quote(s, safe="=&;,|").encode()),
)


@pytest.fixture(scope="module")
def inprocess_app(tree):
    return create_app(tree)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=_queries,
    path=st.sampled_from([MEDIUM, SHORT, WIND, WIND, SS1WX, SS1WX, "/catalog"]),
    method=st.sampled_from(["GET", "HEAD"]),
    conditions=st.lists(
        st.tuples(
            st.sampled_from([b"if-none-match", b"if-modified-since"]),
            st.one_of(st.binary(max_size=40), st.sampled_from([b"*", b'W/"x"', b"Sun, 22 Nov 2026 03:41:07 GMT", b"Mon, 99 Foo"])),
        ),
        max_size=3,
    ),
)
def test_random_queries_never_5xx(inprocess_app, query, path, method, conditions):
    status, headers, body = call_app(inprocess_app, method, path, query, conditions)
    assert status < 500, (query, body)
    if status == 304:
        assert body == b"" and b"etag" in headers
        return
    assert headers[b"content-type"] == b"application/json"
    if method == "HEAD":
        assert body == b""
        return
    payload = json.loads(body)
    if status >= 400:
        assert set(payload) == {"status", "code", "message"}
        assert payload["status"] == status and payload["code"].startswith(str(status))
        assert headers[b"cache-control"] == b"no-store"
    else:
        assert status == 200 and isinstance(payload, dict)
        if path == WIND:
            for value in payload.values():
                assert list(value) == WIND_KEYS
                hub = value["hub_height"]
                assert hub.endswith("m") and 10 <= float(hub[:-1]) <= 300
                assert parse_query(query)["hubheight"][0] == hub
        if path == SS1WX:
            assert list(payload) == ["requestId", "wxdata"]
            assert_request_id(payload["requestId"])
            (element,) = payload["wxdata"]
            assert list(element) == ["lat", "lon", "srf", "mrf"]
            params = parse_query(query)
            assert (element["lat"], element["lon"]) == (float(params["lat"][0]), float(params["lon"][0]))
            assert len(element["srf"]) == 72 and len(element["mrf"]) == 10
            assert headers[b"etag"].startswith(b'W/"')
