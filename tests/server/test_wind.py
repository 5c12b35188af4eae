"""short-range/windpack (``pointcast.server.wind``): a precomputed hub height is its static file spliced;
any other height between 10 and 300 m is interpolated with the log rule from the two around it."""

from __future__ import annotations

import gzip
import json
import math
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from pointcast.server import create_app
from pointcast.server.wind import WindLadder
from served import (  # noqa: F401  (the fixtures client, live and tree)
    BERLIN,
    FREQ_STEPS,
    HORNSEA,
    LADDER,
    MADRID,
    MEDIUM,
    NEW_YORK,
    PARIS,
    RUN,
    SHORT,
    WIND,
    WIND_ANSWERS,
    WIND_KEYS,
    WIND_STEPS,
    _same_cell_neighbour,
    assert_error,
    call_app,
    client_fixture,
    direction_from,
    get,
    live_fixture,
    point_current,
    publish_run,
    tree_fixture,
    wind_bytes,
    wind_profile,
)

WIND_UNIT = {"datetime": "UTC", "windspd": "m/s", "windir": "degree", "u_windspd": "m/s", "v_windspd": "m/s"}


def wind_get(client: httpx.Client, latlon: str, freq: str, hubheight: str) -> httpx.Response:
    return get(client, WIND, f"latlon={latlon}&freq={freq}&hubheight={hubheight}")


def splice_expected(stored: bytes, lat: str, lon: str, hub: str) -> bytes:
    """The stored file with the coordinates and the hub_height value replaced (as text)."""
    head, sep, rest = stored.partition(b',"basetime"')
    assert head.startswith(b'{"latitude":') and sep
    old = b'"hub_height":' + json.dumps(json.loads(stored)["hub_height"]).encode()
    assert rest.count(old) == 1
    rest = rest.replace(old, b'"hub_height":' + json.dumps(hub).encode())
    return b'{"latitude":' + lat.encode() + b',"longitude":' + lon.encode() + sep + rest


@pytest.mark.parametrize("freq", list(FREQ_STEPS))
@pytest.mark.parametrize("hub,stored_height", [("100m", 100.0), ("100.0m", 100.0), ("0100.000m", 100.0),
                                                ("113m", 113.0), ("10m", 10.0), ("300m", 300.0)])
def test_windpack_precomputed_height_is_the_file_spliced(client, tree, freq, hub, stored_height):
    stored = wind_bytes(tree, freq, "hornsea-1", stored_height)
    r = wind_get(client, HORNSEA, freq, hub)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.content == b'{"53.885,1.791":' + splice_expected(stored, "53.885", "1.791", hub) + b"}"
    value = r.json()[HORNSEA]
    assert list(value) == WIND_KEYS and value["hub_height"] == hub
    assert value["unit"] == WIND_UNIT and list(value["unit"]) == list(WIND_UNIT)
    assert value["data"] == json.loads(stored)["data"]
    static = tree / "runs" / RUN / "json" / "eu-wind" / freq / "hornsea-1" / f"{stored_height:g}m.json"
    assert static.exists() == (stored_height == 113.0)  # static files at the hub heights only
    assert not static.exists() or static.read_bytes() == stored


def test_windpack_every_precomputed_height_is_its_static_answer(tree):
    """At each precomputed height the server answers the bytes a static file of that height
    holds: a hub height's file spliced, any other from the ladder object."""
    app = create_app(tree)
    at = {"paris": PARIS, "hornsea-1": HORNSEA, "berlin": BERLIN}
    base = tree / "runs" / RUN / "json" / "eu-wind"
    answers = {k[1:]: v for k, v in WIND_ANSWERS.items() if k[0] == base}
    assert len(answers) == 3 * (3 * len(LADDER) + 3)
    for (freq, pid, h), stored in answers.items():
        hub = f"{h:g}m"
        status, _, body = call_app(app, "GET", WIND, f"latlon={at[pid]}&freq={freq}&hubheight={hub}".encode())
        assert status == 200 and body == b"{" + json.dumps(at[pid]).encode() + b":" + splice_expected(
            stored, *at[pid].split(","), hub) + b"}", (freq, pid, hub)


def test_windpack_precomputed_echoes_the_requested_coordinates(client, tree):
    lat, lon = _same_cell_neighbour(53.885, 1.791)
    text = f"{lat},{lon}"
    r = wind_get(client, text, "1H", "80m")
    assert r.status_code == 200, r.text
    stored = wind_bytes(tree, "1H", "hornsea-1", 80.0)
    assert r.content == b"{" + json.dumps(text).encode() + b":" + splice_expected(stored, repr(lat), repr(lon), "80m") + b"}"
    # the same text twice is one key; another pair gets its own point
    r = wind_get(client, f"{text};{PARIS};{text}", "1H", "80m")
    assert list(r.json()) == [text, PARIS]
    assert r.json()[PARIS]["data"] == json.loads(wind_bytes(tree, "1H", "paris", 80.0))["data"]


def test_windpack_hub_height_echo_exactly_as_sent(client, tree):
    # Berlin has a configured hub height of 112.5 m: its file, spliced
    r = wind_get(client, BERLIN, "1H", "112.50m")
    assert r.status_code == 200, r.text
    stored = wind_bytes(tree, "1H", "berlin", 112.5)
    assert json.loads(stored)["hub_height"] == "112.5m"
    assert r.content == b'{"52.52,13.405":' + splice_expected(stored, "52.52", "13.405", "112.50m") + b"}"
    # Paris has not: interpolated between 100 m and 120 m, same echo
    r = wind_get(client, PARIS, "1H", "112.50m")
    assert r.status_code == 200, r.text
    assert b'"hub_height":"112.50m"' in r.content
    value = r.json()[PARIS]
    assert list(value) == WIND_KEYS and value["hub_height"] == "112.50m"
    assert value["data"] != json.loads(wind_bytes(tree, "1H", "paris", 100.0))["data"]
    assert value["data"] != json.loads(wind_bytes(tree, "1H", "paris", 120.0))["data"]


# point, requested height, the two precomputed heights around it
INTERPOLATED = [
    ("paris", PARIS, "90m", 80.0, 100.0),
    ("hornsea-1", HORNSEA, "90m", 80.0, 100.0),
    ("berlin", BERLIN, "90m", 80.0, 100.0),
    ("hornsea-1", HORNSEA, "112.9m", 100.0, 113.0),  # the hub height is a precomputed neighbour
    ("hornsea-1", HORNSEA, "115m", 113.0, 120.0),
    ("berlin", BERLIN, "145.25m", 140.0, 150.0),
    ("paris", PARIS, "10.5m", 10.0, 20.0),
    ("paris", PARIS, "299.99m", 250.0, 300.0),
]


@pytest.mark.parametrize("freq", list(FREQ_STEPS))
@pytest.mark.parametrize("pid,latlon,hub,z1,z2", INTERPOLATED)
def test_windpack_interpolates_with_the_log_rule(client, tree, freq, pid, latlon, hub, z1, z2):
    r = wind_get(client, latlon, freq, hub)
    assert r.status_code == 200, r.text
    value = r.json()[latlon]
    assert list(value) == WIND_KEYS
    z = float(hub[:-1])
    lower, upper = (json.loads(wind_bytes(tree, freq, pid, h)) for h in (z1, z2))
    assert {k: value[k] for k in ("basetime", "updated_time", "freq")} == {
        k: lower[k] for k in ("basetime", "updated_time", "freq")}
    assert value["freq"] == freq and value["hub_height"] == hub and value["unit"] == WIND_UNIT
    assert [e["datetime"] for e in value["data"]] == [e["datetime"] for e in lower["data"]]
    lat, lon = (float(x) for x in latlon.split(","))
    assert (value["latitude"], value["longitude"]) == (lat, lon)
    w = math.log(z / z1) / math.log(z2 / z1)
    for step, (got, lo, hi) in enumerate(zip(value["data"], lower["data"], upper["data"], strict=True)):
        assert list(got) == ["datetime", "windspd", "windir", "u_windspd", "v_windspd"]
        for comp in ("u_windspd", "v_windspd"):
            expected = lo[comp] + (hi[comp] - lo[comp]) * w  # the rule, from the stored values
            assert abs(got[comp] - expected) <= 0.005 + 1e-9, (step, comp)
            assert got[comp] == round(got[comp], 2)
        exact_u, exact_v = wind_profile(pid, step, z)  # the log law the fixture was built from
        assert abs(got["u_windspd"] - exact_u) <= 1e-2 + 1e-9
        assert abs(got["v_windspd"] - exact_v) <= 1e-2 + 1e-9
        assert abs(got["windspd"] - math.hypot(exact_u, exact_v)) <= 1e-2 + 1e-9


def test_windpack_90m_recovers_the_log_law(client):
    # 90 m from the 80 m and 100 m files equals a ln(90/z0) (the fixture's profile) to 1e-2
    value = wind_get(client, HORNSEA, "1H", "90m").json()[HORNSEA]
    for step, (a_u, a_v) in enumerate(WIND_STEPS):
        scale, z0 = 1.1, 0.0002
        assert abs(value["data"][step]["u_windspd"] - a_u * scale * math.log(90 / z0)) <= 1e-2
        assert abs(value["data"][step]["v_windspd"] - a_v * scale * math.log(90 / z0)) <= 1e-2


@pytest.mark.parametrize("hub", ["11m", "90m", "112.9m", "115m", "137.3m", "299.99m", "100m", "113m"])
@pytest.mark.parametrize("latlon", [PARIS, HORNSEA, BERLIN])
def test_windpack_speed_and_direction_follow_the_components(client, latlon, hub):
    value = wind_get(client, latlon, "1H", hub).json()[latlon]
    for step, entry in enumerate(value["data"]):
        u, v, speed, direction = entry["u_windspd"], entry["v_windspd"], entry["windspd"], entry["windir"]
        assert abs(speed - math.hypot(u, v)) <= 0.013
        assert 0.0 <= direction < 360.0 and direction == round(direction, 1)
        if speed == 0.0:
            assert direction == 0.0 and u == 0.0 and v == 0.0
            continue
        diff = abs((direction - direction_from(u, v) + 180.0) % 360.0 - 180.0)
        assert diff <= 0.05 + math.degrees(0.008 / max(speed - 0.01, 1e-3)), (step, entry)
    # the fixture's steps: south-west-ish, south-east-ish, calm, from north, from west, from north-east
    data = value["data"]
    assert 180 < data[0]["windir"] < 270 and 90 < data[1]["windir"] < 180
    assert data[2] == {**data[2], "windspd": 0.0, "windir": 0.0, "u_windspd": 0.0, "v_windspd": 0.0}
    assert (data[3]["windir"], data[4]["windir"], data[5]["windir"]) == (0.0, 270.0, 45.0)


@pytest.mark.parametrize("freq", ["15min", "30min"])
def test_windpack_subhourly_single_pair(client, freq):
    for hub in ("100m", "95m"):
        r = wind_get(client, HORNSEA, freq, hub)
        assert r.status_code == 200, r.text
        value = r.json()[HORNSEA]
        assert value["freq"] == freq
        times = [datetime.fromisoformat(e["datetime"]) for e in value["data"]]
        assert times[1] - times[0] == timedelta(minutes=FREQ_STEPS[freq])
        assert all(e["datetime"].endswith("+00:00") for e in value["data"])
    assert_error(wind_get(client, f"{HORNSEA};{PARIS}", freq, "100m"), 400, "400_002",
                 f'"latlon" is invalid value: 2 pairs, more than the 1 this operation takes with freq={freq}')
    assert_error(wind_get(client, f"{HORNSEA};{HORNSEA}", freq, "100m"), 400, "400_002")


def test_windpack_several_points_hourly(client, tree):
    r = wind_get(client, f"{HORNSEA};{PARIS}|{BERLIN}", "1H", "113m")
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == [HORNSEA, PARIS, BERLIN]
    assert body[HORNSEA]["data"] == json.loads(wind_bytes(tree, "1H", "hornsea-1", 113.0))["data"]  # its hub height
    assert all(v["hub_height"] == "113m" for v in body.values())
    assert wind_get(client, ";".join([HORNSEA, PARIS] * 5), "1H", "113m").status_code == 200
    assert_error(wind_get(client, ";".join([HORNSEA] * 11), "1H", "113m"), 400, "400_002",
                 '"latlon" is invalid value: 11 pairs, more than the 10 this operation takes with freq=1H')


@pytest.mark.parametrize(
    "query,status,code,message",
    [
        # hubheight required
        (f"latlon={HORNSEA}&freq=1H", 400, "400_001", '"hubheight" is required'),
        (f"latlon={HORNSEA}&freq=1H&hubheight=", 400, "400_001", '"hubheight" is required'),
        (f"latlon={HORNSEA}&freq=1H&hubheight=100m&hubheight=120m", 400, "400_002",
         '"hubheight" is invalid value: given several times with different values'),
        # the form <number>m
        *[(f"latlon={HORNSEA}&freq=1H&hubheight={bad}", 400, "400_002", '"hubheight" is invalid value')
          for bad in ["100", "m", "abcm", "-20m", "%2B20m", "+100m", "1e2m", "1E2m", "nanm", "NaNm", "infm", "9.m",
                      ".5m", "100M", "100%20m", "%20100m", "100m%20", "100mm", "100m2", "1,5m", "100_0m", "0x10m",
                      "%D9%A1%D9%A0%D9%A0m", "100%00m", "100.0.0m", "1" * 40 + "m"]],
        # 10..300 m, both included
        *[(f"latlon={HORNSEA}&freq=1H&hubheight={far}", 400, "400_003", f'"hubheight" is out of range: {far}')
          for far in ["5m", "0m", "9.99m", "300.01m", "301m", "300.0000000000000001m", "1000m", "000m"]],
        # order: required parameters, freq, latlon syntax and count, hubheight syntax, ranges, coverage, point
        ("freq=2H&hubheight=abc", 400, "400_001", '"latlon" is required'),
        (f"latlon={HORNSEA}&freq=2H", 400, "400_001", '"hubheight" is required'),
        (f"latlon={HORNSEA}&freq=2H&hubheight=abc", 400, "400_002", '"freq" is invalid value'),
        ("latlon=abc&freq=1H&hubheight=abc", 400, "400_002", '"latlon" is invalid value'),
        (f"latlon={HORNSEA};{PARIS}&freq=15min&hubheight=abc", 400, "400_002",
         '"latlon" is invalid value: 2 pairs, more than the 1 this operation takes with freq=15min'),
        ("latlon=91,0&freq=1H&hubheight=abc", 400, "400_002", '"hubheight" is invalid value'),
        ("latlon=91,0&freq=1H&hubheight=5m", 400, "400_003", '"latlon" is out of range: 91,0'),
        (f"latlon={NEW_YORK}&freq=1H&hubheight=5m", 400, "400_003", '"hubheight" is out of range: 5m'),
        (f"latlon={NEW_YORK}&freq=1H&hubheight=100m", 403, "403_001",
         f'"latlon" is outside the coverage of this operation: {NEW_YORK}'),
        (f"latlon={MADRID}&freq=1H&hubheight=100m", 404, "404_002",
         f'"latlon" has no forecast point in its grid cell: {MADRID}'),
        (f"latlon={MADRID}&freq=1H&hubheight=95m", 404, "404_002", None),
        (f"latlon={HORNSEA}&freq=1H&hubheight=100m%ff", 400, "400_002", '"hubheight" is invalid value'),
    ],
)
def test_windpack_error_codes(client, query, status, code, message):
    assert_error(get(client, WIND, query), status, code, message)


@pytest.mark.parametrize("hub", ["10m", "300m", "10.0m", "300.000m", "010m", "42m", "299.5m"])
def test_windpack_bounds_are_included(client, hub):
    r = wind_get(client, PARIS, "30min", hub)
    assert r.status_code == 200, r.text
    assert r.json()[PARIS]["hub_height"] == hub


def test_windpack_caching_headers(client):
    for hub in ("100m", "90m"):
        r = wind_get(client, HORNSEA, "1H", hub)
        common = get(client, SHORT, f"latlon={HORNSEA}&freq=1H")
        assert common.status_code == 404  # Hornsea is not a point of the fixture's eu-short
        medium = get(client, MEDIUM, f"latlon={PARIS}&freq=1H")
        assert r.headers["last-modified"] == medium.headers["last-modified"] == "Sun, 22 Nov 2026 03:46:07 GMT"
        assert r.headers["cache-control"].startswith("public, max-age=")
        age = int(r.headers["cache-control"].removeprefix("public, max-age="))
        assert 3 * 3600 - 120 < age <= 3 * 3600
        etag = r.headers["etag"]
        assert etag.startswith('"') and not etag.startswith("W/")
        again = wind_get(client, HORNSEA, "1H", hub)
        assert again.headers["etag"] == etag and again.content == r.content
        not_modified = get(client, WIND, f"latlon={HORNSEA}&freq=1H&hubheight={hub}", headers={"If-None-Match": etag})
        assert not_modified.status_code == 304 and not_modified.content == b""
        assert not_modified.headers["etag"] == etag
        since = get(client, WIND, f"latlon={HORNSEA}&freq=1H&hubheight={hub}",
                    headers={"If-Modified-Since": r.headers["last-modified"]})
        assert since.status_code == 304
        h = client.head(f"{WIND}?latlon={HORNSEA}&freq=1H&hubheight={hub}")
        assert h.status_code == 200 and h.content == b"" and h.headers["content-length"] == str(r.num_bytes_downloaded)
    tags = {wind_get(client, HORNSEA, freq, hub).headers["etag"]
            for freq in ("1H", "30min") for hub in ("100m", "100.0m", "90m", "90.0m")}
    assert len(tags) == 8  # another body, another tag


def test_windpack_parses_each_file_once(tree, monkeypatch):
    parsed = []
    original = WindLadder.from_bytes

    def counting(data, digest):
        parsed.append(digest)
        return original(data, digest)

    monkeypatch.setattr(WindLadder, "from_bytes", staticmethod(counting))
    app = create_app(tree)
    first = call_app(app, "GET", WIND, f"latlon={PARIS}&freq=1H&hubheight=90m".encode())
    assert first[0] == 200 and len(parsed) == 1
    for hub in ("90m", "85m", "99.9m", "90.0m", "100m"):
        assert call_app(app, "GET", WIND, f"latlon={PARIS}&freq=1H&hubheight={hub}".encode())[0] == 200
    assert len(parsed) == 1  # the ladder object, once
    assert call_app(app, "GET", WIND, f"latlon={BERLIN}&freq=1H&hubheight=150m".encode())[0] == 200
    assert len(parsed) == 1  # a configured hub height is its static file, spliced, not parsed
    kinds = sorted(key[0] for key in app._run.files.entries)
    # the ladder parsed once; each height text rendered once; Berlin's 150 m file and its bytes
    assert kinds == ["at"] * 5 + ["ladder", "wind"]
    assert len(app._run.answers.entries) == 6  # one for each query text


def test_windpack_missing_or_broken_files_are_404_002(tmp_path, caplog):
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=UTC))
    point_current(root, "r")
    wind = run / "json" / "eu-wind"
    (wind / "1H" / "paris.json").unlink()
    broken = json.loads((wind / "30min" / "paris.json").read_text())
    broken["u_windspd"][4][1] = None
    (wind / "30min" / "paris.json").write_text(json.dumps(broken))
    (wind / "15min" / "berlin" / "150m.json").write_text('{"latitude": 1, "longitude": 2, "basetime": "x"}')
    index = json.loads((wind / "index.json").read_text())
    index["points"][1]["heights"] = sorted(LADDER + [95.0, 113.0])  # hornsea-1: a height its ladder lacks
    index["points"][2]["heights"] = [100.0, 112.5, 120.0, 150.0]  # berlin: a short list, nothing below 100 m
    (wind / "index.json").write_text(json.dumps(index))
    app = create_app(root)

    def code(latlon, freq, hub):
        status, _, body = call_app(app, "GET", WIND, f"latlon={latlon}&freq={freq}&hubheight={hub}".encode())
        return status, json.loads(body).get("code") if status != 200 else None

    assert code(PARIS, "1H", "100m") == (404, "404_002")  # no ladder object
    assert code(PARIS, "1H", "90m") == (404, "404_002")
    assert code(PARIS, "15min", "60m") == (200, None)
    assert code(PARIS, "30min", "90m") == (404, "404_002")  # a null u: no ladder
    assert code(PARIS, "30min", "80m") == (404, "404_002")
    assert code(BERLIN, "15min", "150m") == (404, "404_002")  # no hub_height in the static file
    assert code(BERLIN, "15min", "145m") == (200, None)  # from the ladder object
    assert code(BERLIN, "1H", "150m") == (200, None)
    assert code(HORNSEA, "1H", "95m") == (404, "404_002")  # the index promises a row the ladder lacks
    assert code(HORNSEA, "1H", "97m") == (404, "404_002")
    assert code(HORNSEA, "1H", "113m") == (200, None)
    assert code(BERLIN, "1H", "50m") == (404, "404_002")  # never another height
    assert code(BERLIN, "1H", "110m") == (200, None)
    assert code(f"{HORNSEA};{PARIS}", "1H", "100m") == (404, "404_002")  # no partial answers
    (wind / "index.json").unlink()
    app = create_app(root)  # (an index is read once per run)
    assert code(HORNSEA, "1H", "100m") == (404, "404_002")


def test_windpack_gzip_files(tmp_path):
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=UTC))
    point_current(root, "r")
    app = create_app(root)
    hubs = ("80m", "90m", "113m")
    plain = {hub: call_app(app, "GET", WIND, f"latlon={HORNSEA}&freq=1H&hubheight={hub}".encode()) for hub in hubs}
    for path in (run / "json" / "eu-wind" / "1H" / "hornsea-1.json", run / "json" / "eu-wind" / "1H" / "hornsea-1" / "113m.json"):
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    app = create_app(root)
    for hub, expected in plain.items():
        got = call_app(app, "GET", WIND, f"latlon={HORNSEA}&freq=1H&hubheight={hub}".encode())
        assert got[0] == 200 and got[2] == expected[2]
