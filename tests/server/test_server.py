"""The thin server, end to end: a published run tree on disk, the real server
(``pointcast.server.Server``: uvloop, httptools) on 127.0.0.1, httpx (and a raw socket for bytes httpx would re-encode).

Every product's cells come from the real ``pointcast.grids.grid_for`` (the Japan fixture's too:
JIS X 0410 third-order mesh codes), and the server uses the same grids."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import os
import re
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pointcast.grids import grid_for
from pointcast.server import OPERATIONS, ApiError, Server, app as server_app, create_app
from pointcast.server.grammar import check_hubheight_range, parse_coordinate, parse_hubheight, parse_pairs, parse_query
from pointcast.server.splice import WX_LAYOUT, PointFile
from pointcast.server.wind import WindLadder

MEDIUM = "/V1/forecast/medium-range/common"
SS1WX = "/api/v1/ss1wx"
SHORT = "/V1/forecast/short-range/common"
WIND = "/V1/forecast/short-range/windpack"
PRODUCTS = {"eu-medium": MEDIUM, "eu-short": SHORT}  # the common products
FREQ_STEPS = {"1H": 60, "30min": 30, "15min": 15}

# id, name, lat, lon, elevation, hub_heights
POINTS = [
    ("paris", "Paris", 48.8566, 2.3522, 35.0, []),
    ("berlin", "Berlin", 52.52, 13.405, 34.0, [100, 150]),
    ("rome", "Rome", 41.9028, 12.4964, 21.0, []),
]
PARIS = "48.8566,2.3522"
BERLIN = "52.52,13.405"
ROME = "41.9028,12.4964"
MADRID = "40.4168,-3.7038"  # in Europe, no configured point there
HORNSEA = "53.885,1.791"
NEW_YORK = "40.7128,-74.006"  # outside the European coverage

UPDATED = datetime(2026, 11, 22, 3, 41, 7, tzinfo=timezone.utc)

# eu-wind: id, name, lat, lon, hub heights, roughness length z0 (m) of the fixture's log profile
WIND_POINTS = [
    ("paris", "Paris", 48.8566, 2.3522, [], 0.5),
    ("hornsea-1", "Hornsea 1", 53.885, 1.791, [113.0], 0.0002),
    ("berlin", "Berlin", 52.52, 13.405, [112.5, 150.0], 0.3),
]
LADDER = [10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0, 160.0, 180.0, 200.0, 250.0, 300.0]
# per step, u(z) = a_u ln(z/z0) and v(z) = a_v ln(z/z0): an exact neutral log profile
# (west-south-west, south-east, calm, from north, from west, from north-east)
WIND_STEPS = [(0.8, 0.3), (-0.5, 0.9), (0.0, 0.0), (0.0, -1.1), (1.2, 0.0), (-0.7, -0.7)]


def wind_heights(hubs: list[float]) -> list[float]:
    return sorted(set(LADDER) | set(hubs))


def wind_profile(pid: str, step: int, z: float) -> tuple[float, float]:
    """The fixture's exact (unrounded) components at height z."""
    n, (_, _, _, _, _, z0) = next((i, p) for i, p in enumerate(WIND_POINTS) if p[0] == pid)
    a_u, a_v = WIND_STEPS[step]
    scale = 1.0 + 0.1 * n
    return a_u * scale * math.log(z / z0), a_v * scale * math.log(z / z0)


def direction_from(u: float, v: float) -> float:
    """Where the wind blows from, degrees clockwise from north."""
    return (270.0 - math.degrees(math.atan2(v, u))) % 360.0


def compact(obj) -> bytes:
    """The product's JSON style (products/base.py): compact separators, UTF-8."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


# --------------------------------------------------------------------------- the run tree


def iso(dt: datetime) -> str:
    return dt.isoformat()


def publish_run(root: Path, run_id: str, basetime: datetime, *, next_update: datetime | None = None, temp: float = 10.0) -> Path:
    """Write one run in the layout of docs/contracts.md (index.json + point files)."""
    run = root / "runs" / run_id
    updated = basetime + timedelta(hours=3, minutes=41, seconds=7)
    next_update = next_update or datetime.now(timezone.utc) + timedelta(hours=3)
    for product in PRODUCTS:
        grid = grid_for(product)
        base = run / "json" / product
        base.mkdir(parents=True)
        index = {
            "product": product,
            "grid": "EPSG:3035 2 km",
            "basetime": iso(basetime),
            "updated_time": iso(updated),
            "next_update": iso(next_update),
            "points": [
                {
                    "id": pid,
                    "name": name,
                    "lat": lat,
                    "lon": lon,
                    "cell": grid.cell_key(lat, lon),
                    "elevation": elevation,
                    "hub_heights": hubs,
                }
                for pid, name, lat, lon, elevation, hubs in POINTS
            ],
        }
        (base / "index.json").write_text(json.dumps(index))
        for freq, minutes in FREQ_STEPS.items():
            (base / freq).mkdir()
            for n, (pid, _, lat, lon, _, _) in enumerate(POINTS):
                obj = {
                    "latitude": lat,
                    "longitude": lon,
                    "basetime": iso(basetime),
                    "updated_time": iso(updated),
                    "freq": freq,
                    "unit": {"datetime": "UTC", "temp_2m": "°C", "weather_type": "NA"},
                    "data": [
                        {
                            "datetime": iso(basetime + timedelta(minutes=minutes * step)),
                            "temp_2m": temp + n + step / 10,
                            "weather_type": "Partly cloudy",
                        }
                        for step in range(4)
                    ],
                }
                (base / freq / f"{pid}.json").write_text(json.dumps(obj, ensure_ascii=False))
    publish_wind(run / "json" / "eu-wind", basetime, updated, next_update)
    publish_japan(run / "json" / "japan", basetime, updated, next_update, temp=temp)
    # published once built and validated: later than the files' updated_time
    (run / "manifest.json").write_text(json.dumps({"published_at": iso(updated + timedelta(minutes=5))}))
    (run / "validation.json").write_text("{}")
    return run


# (eu-wind folder, freq, point id, height) -> the windpack answer at a precomputed height as a static
# file would hold it: what the server must answer from the ladder object, byte for byte.
WIND_ANSWERS: dict[tuple[Path, str, str, float], bytes] = {}
WIND_ELEMENTS = ["windspd", "windir", "u_windspd", "v_windspd"]


def publish_wind(base: Path, basetime: datetime, updated: datetime, next_update: datetime) -> None:
    """eu-wind: index.json with each point's heights; per freq and point its ladder object and
    a static file per hub height (docs/api.md, "Precomputed heights and interpolation")."""
    grid = grid_for("eu-wind")
    base.mkdir(parents=True)
    index = {
        "product": "eu-wind",
        "path": WIND,
        "grid": "EPSG:3035 2 km",
        "basetime": iso(basetime),
        "updated_time": iso(updated),
        "next_update": iso(next_update),
        "freqs": list(FREQ_STEPS),
        "height_range_m": [10, 300],
        "ladder": LADDER,
        "points": [
            {"id": pid, "name": name, "lat": lat, "lon": lon, "cell": grid.cell_key(lat, lon), "elevation": 0.0,
             "hub_heights": hubs, "heights": wind_heights(hubs)}
            for pid, name, lat, lon, hubs, _ in WIND_POINTS
        ],
    }
    (base / "index.json").write_bytes(compact(index))
    for freq, minutes in FREQ_STEPS.items():
        for pid, _, lat, lon, hubs, _ in WIND_POINTS:
            (base / freq / pid).mkdir(parents=True)
            unit = {"datetime": "UTC", "windspd": "m/s", "windir": "degree", "u_windspd": "m/s", "v_windspd": "m/s"}
            ladder = {"latitude": lat, "longitude": lon, "basetime": iso(basetime), "updated_time": iso(updated),
                      "freq": freq, "unit": unit, "heights": wind_heights(hubs), "datetime": [],
                      **{name: [] for name in WIND_ELEMENTS}}
            for h in wind_heights(hubs):
                data = []
                for step in range(len(WIND_STEPS)):
                    u, v = wind_profile(pid, step, h)
                    speed = math.hypot(u, v)
                    data.append({
                        "datetime": iso(basetime + timedelta(minutes=minutes * step)),
                        "windspd": round(speed, 2) + 0.0,
                        "windir": 0.0 if speed == 0 else round(direction_from(u, v), 1) % 360.0,
                        "u_windspd": round(u, 2) + 0.0,
                        "v_windspd": round(v, 2) + 0.0,
                    })
                obj = {"latitude": lat, "longitude": lon, "basetime": iso(basetime), "updated_time": iso(updated),
                       "freq": freq, "hub_height": f"{h:g}m", "unit": unit, "data": data}
                WIND_ANSWERS[base, freq, pid, h] = compact(obj)
                if h in hubs:
                    (base / freq / pid / f"{h:g}m.json").write_bytes(compact(obj))
                ladder["datetime"] = [e["datetime"] for e in data]
                for name in WIND_ELEMENTS:
                    ladder[name].append([e[name] for e in data])
            (base / freq / f"{pid}.json").write_bytes(compact(ladder))


# japan: id, name, lat, lon, elevation (all on land: inside the Japan coverage)
JAPAN_POINTS = [
    ("tokyo", "Tokyo Station", 35.6812, 139.7671, 3.0),
    ("sapporo", "Sapporo", 43.0618, 141.3545, 29.0),
    ("kyoto", "Kyoto", 35.0116, 135.7681, 47.0),
    ("naha", "Naha", 26.2124, 127.6809, 8.0),
]
JST = timezone(timedelta(hours=9))
SRF_KEYS = ["date", "wx", "temp", "prec", "arpress", "wndspd", "wnddir", "rhum", "feelidx", "feeltmp"]
MRF_KEYS = ["date", "wx", "maxtemp", "mintemp", "pop"]
SRF_WX = [100, 100, 500, 600, 200, 200, 650, 300, 300, 850, 200, 100]  # single codes, cycled
MRF_WX = [101, 110, 200, 212, 300, 311, 100, 201, 102, 213]  # the day's two weathers combined


def japan_element(n: int, lat: float, lon: float, basetime: datetime, temp: float) -> dict:
    """One wxdata element as the japan product writes it: lat, lon, srf (72 h), mrf (10 days)."""
    srf = []
    first = basetime.astimezone(JST)
    for step in range(72):
        t = temp + 2.0 * n + 4.0 * math.sin(2 * math.pi * ((first.hour + step - 9) % 24) / 24)
        wx = SRF_WX[(step // 6 + n) % len(SRF_WX)]
        wind = round(1.5 + 0.1 * ((step * 7 + n) % 40), 1)
        srf.append({
            "date": (first + timedelta(hours=step)).isoformat(),
            "wx": wx,
            "temp": round(t, 1),
            "prec": {650: 0.5, 300: 2.0, 850: 12.5}.get(wx, 0.0),
            "arpress": round(1016.0 - 0.2 * step + n, 1),
            "wndspd": wind,
            "wnddir": (step + 3 * n) % 16 + 1,
            "rhum": 55 + (step * 3 + n) % 40,
            "feelidx": 3 + (step // 12 + n) % 4,
            "feeltmp": round(t - 0.7 * wind, 1),
        })
    day = first.replace(hour=0)
    mrf = [
        {
            "date": (day + timedelta(days=d)).isoformat(),
            "wx": MRF_WX[(d + n) % len(MRF_WX)],
            "maxtemp": round(temp + 5.0 + n + 0.3 * d, 1),
            "mintemp": round(temp - 3.0 + n - 0.2 * d, 1),
            "pop": (10 * (d + n)) % 100,
        }
        for d in range(10)
    ]
    return {"lat": lat, "lon": lon, "srf": srf, "mrf": mrf}


def publish_japan(base: Path, basetime: datetime, updated: datetime, next_update: datetime, *, temp: float = 10.0) -> None:
    """japan: index.json (no freqs) and one wxdata element per point, ``<id>.json``."""
    grid = grid_for("japan")
    base.mkdir(parents=True)
    index = {
        "product": "japan",
        "grid": "JIS X 0410 third-order mesh (30\" x 45\")",
        "basetime": iso(basetime),
        "updated_time": iso(updated),
        "next_update": iso(next_update),
        "points": [
            {"id": pid, "name": name, "lat": lat, "lon": lon, "cell": grid.cell_key(lat, lon), "elevation": elevation}
            for pid, name, lat, lon, elevation in JAPAN_POINTS
        ],
    }
    (base / "index.json").write_bytes(compact(index))
    for n, (pid, _, lat, lon, _) in enumerate(JAPAN_POINTS):
        (base / f"{pid}.json").write_bytes(compact(japan_element(n, lat, lon, basetime, temp)))


def point_current(root: Path, run_id: str) -> None:
    """Swap ``current`` atomically, as the publisher does."""
    tmp = root / f".current.{run_id}.tmp"
    os.symlink(f"runs/{run_id}", tmp)
    os.replace(tmp, root / "current")


def point_file(root: Path, run_id: str, product: str, freq: str, pid: str) -> dict:
    return json.loads((root / "runs" / run_id / "json" / product / freq / f"{pid}.json").read_text())


def wind_bytes(root: Path, freq: str, pid: str, h: float, run_id: str = "20261122T00Z") -> bytes:
    """The answer at a precomputed height as its static file (a hub height's on disk) holds it."""
    return WIND_ANSWERS[root / "runs" / run_id / "json" / "eu-wind", freq, pid, h]


# --------------------------------------------------------------------------- live server


@contextmanager
def live_server(root: Path, api_keys=(), **options):
    """The app under ``pointcast serve``'s server (``pointcast.server.Server``) on a free port."""
    server = Server(create_app(root, api_keys=api_keys), "127.0.0.1", 0, **options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(15), "server did not start"
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as client:
        assert client.get("/openapi.json").status_code == 200  # answers
        try:
            yield client, server.app, server.port
        finally:
            server.stop()
            thread.join(15)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("output")
    publish_run(root, "20261122T00Z", datetime(2026, 11, 22, 0, tzinfo=timezone.utc))
    point_current(root, "20261122T00Z")
    return root


@pytest.fixture(scope="module")
def live(tree):
    with live_server(tree) as server:
        yield server


@pytest.fixture(scope="module")
def client(live) -> httpx.Client:
    return live[0]


def raw_get(port: int, target: bytes, method: bytes = b"GET", headers: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """One request with the target's bytes exactly as given (httpx would re-encode some)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(method + b" " + target + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" + headers + b"\r\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, hdrs, body


def get(client: httpx.Client, path: str, query: str, **kwargs) -> httpx.Response:
    """GET with the query string as written (httpx keeps valid %XX escapes)."""
    return client.get(f"{path}?{query}", **kwargs)


def assert_error(response: httpx.Response, status: int, code: str, message: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert set(body) == {"status", "code", "message"}
    assert body["status"] == status and body["code"] == code
    if message is not None:
        assert body["message"] == message
    return body


# --------------------------------------------------------------------------- success


@pytest.mark.parametrize("product,path", PRODUCTS.items())
def test_single_point_1h(client, tree, product, path):
    r = get(client, path, f"latlon={PARIS}&freq=1H")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert list(body) == [PARIS]
    stored = point_file(tree, "20261122T00Z", product, "1H", "paris")
    assert body[PARIS] == stored
    assert list(body[PARIS])[:3] == ["latitude", "longitude", "basetime"]
    assert body[PARIS]["basetime"] == "2026-11-22T00:00:00+00:00"


@pytest.mark.parametrize("separator", [";", "%3B", "%7C"])
def test_several_points(client, tree, separator):
    r = get(client, MEDIUM, f"latlon={BERLIN}{separator}{PARIS}{separator}{ROME}&freq=1H")
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == [BERLIN, PARIS, ROME]  # request order
    for key, pid in zip(body, ["berlin", "paris", "rome"]):
        assert body[key] == point_file(tree, "20261122T00Z", "eu-medium", "1H", pid)


def test_literal_pipe_separator(live):
    _, _, port = live
    status, headers, body = raw_get(port, f"{SHORT}?latlon={PARIS}|{ROME}&freq=1H".encode())
    assert status == 200, body
    assert list(json.loads(body)) == [PARIS, ROME]


def test_ten_pairs_allowed(client):
    latlon = ";".join([PARIS, BERLIN] * 5)
    r = get(client, MEDIUM, f"latlon={latlon}&freq=1H")
    assert r.status_code == 200
    assert list(r.json()) == [PARIS, BERLIN]  # the same text twice is one key


@pytest.mark.parametrize("freq", ["15min", "30min"])
@pytest.mark.parametrize("path", [MEDIUM, SHORT])
def test_subhourly_single_pair(client, tree, path, freq):
    r = get(client, path, f"latlon={BERLIN}&freq={freq}")
    assert r.status_code == 200, r.text
    value = r.json()[BERLIN]
    assert value["freq"] == freq
    times = [datetime.fromisoformat(e["datetime"]) for e in value["data"]]
    assert times[1] - times[0] == timedelta(minutes=FREQ_STEPS[freq])
    assert all(e["datetime"].endswith("+00:00") for e in value["data"])


def _same_cell_neighbour(lat: float, lon: float) -> tuple[float, float]:
    grid = grid_for("eu-medium")
    for dlat, dlon in [(0.003, 0.003), (-0.003, 0.003), (0.003, -0.003), (-0.003, -0.003), (0.001, 0.0), (0.0, 0.001)]:
        if grid.cell_key(lat + dlat, lon + dlon) == grid.cell_key(lat, lon):
            return round(lat + dlat, 4), round(lon + dlon, 4)
    raise AssertionError("no neighbour in the same cell")


def test_echo_of_requested_coordinates(client, tree):
    lat, lon = _same_cell_neighbour(48.8566, 2.3522)
    text = f"{lat},{lon}"
    r = get(client, MEDIUM, f"latlon={text}&freq=1H")
    assert r.status_code == 200, r.text
    value = r.json()[text]
    assert (value["latitude"], value["longitude"]) == (lat, lon)
    stored = point_file(tree, "20261122T00Z", "eu-medium", "1H", "paris")
    assert {k: v for k, v in value.items() if k not in ("latitude", "longitude")} == {
        k: v for k, v in stored.items() if k not in ("latitude", "longitude")
    }


@pytest.mark.parametrize(
    "sent,key,lat,lon",
    [
        ("%2B48.85660,2.3522", "+48.85660,2.3522", 48.8566, 2.3522),
        ("48.8566,%202.3522", "48.8566, 2.3522", 48.8566, 2.3522),
        ("48.8566,+2.3522", "48.8566, 2.3522", 48.8566, 2.3522),  # form encoding: + is a space
        ("4.88566e1,2.3522", "4.88566e1,2.3522", 48.8566, 2.3522),
        ("52.520,13.4050", "52.520,13.4050", 52.52, 13.405),
        ("%35%32.52,13.405", "52.52,13.405", 52.52, 13.405),
    ],
)
def test_keys_are_the_pair_text_exactly(client, sent, key, lat, lon):
    r = get(client, MEDIUM, f"latlon={sent}&freq=1H")
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == [key]
    assert (body[key]["latitude"], body[key]["longitude"]) == (lat, lon)
    assert isinstance(body[key]["latitude"], float)


def test_unknown_parameters_are_ignored(client):
    r = get(client, MEDIUM, f"apikey=x&latlon={PARIS}&foo=%E2%9C%93&freq=1H&freq=1H&latlon={PARIS}")
    assert r.status_code == 200
    assert list(r.json()) == [PARIS]


# --------------------------------------------------------------------------- errors


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
        ("latlon=" + ";".join([PARIS] * 11) + "&freq=1H", 400, "400_002", '"latlon" is invalid value'),
        (f"latlon={PARIS};{BERLIN}&freq=15min", 400, "400_002", '"latlon" is invalid value'),
        (f"latlon={PARIS};{BERLIN}&freq=30min", 400, "400_002", '"latlon" is invalid value'),
        (f"latlon={PARIS}&latlon={BERLIN}&freq=1H", 400, "400_002", '"latlon" is invalid value'),
        (f"latlon={PARIS}&freq=1H&freq=15min", 400, "400_002", '"freq" is invalid value'),
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


HOSTILE = [
    b"latlon=48.8566%00,2.3522&freq=1H",
    b"latlon=48.8566,2.3522&freq=1H%00",
    b"latlon=48.8566,2.3522&freq=1H&x=%00",
    b"latlon%00=48.8566,2.3522&freq=1H",
    b"latlon=1e400,2.3522&freq=1H",
    b"latlon=48.8566,-1e400&freq=1H",
    b"latlon=1e300,1e300&freq=1H",
    b"latlon=NaN,2.3522&freq=1H",
    b"latlon=nan,nan&freq=1H",
    b"latlon=inf,-inf&freq=1H",
    b"latlon=Infinity,2&freq=1H",
    b"latlon=1_0,2&freq=1H",
    b"latlon=0x10,2&freq=1H",
    b"latlon=%D9%A4%D9%A8,2&freq=1H",  # Arabic-Indic digits
    b"latlon=../../etc/passwd&freq=1H",
    b"latlon=..%2F..%2Fetc%2Fpasswd,1&freq=1H",
    b"latlon=48.8566,2.3522&freq=../../../etc/passwd",
    b"latlon=48.8566,2.3522&freq=1H/../../index",
    b"latlon=%ff%fe&freq=1H",
    b"latlon=48.8566,2.3522&freq=%ff%fe",
    b"%ff%fe=1&latlon=48.8566,2.3522&freq=1H",
    b"latlon=%ED%A0%80,1&freq=1H",  # an encoded surrogate is not UTF-8
    b"latlon=%C0%AE%C0%AE%2F,1&freq=1H",  # overlong encoding
    b"latlon=%zz&freq=1H",
    b"latlon=48.8566,2.3522%&freq=1H",
    b"latlon=48.8566,2.3522&freq=1H%4",
    b"latlon=" + b"9" * 5000 + b",1&freq=1H",
    b"latlon=" + b"1" * 40 + b",1&freq=1H",
    b"latlon=" + b"0." + b"1" * 100000 + b",1&freq=1H",
    b"latlon=" + b"48.8566,2.3522;" * 2000 + b"&freq=1H",
    b"latlon=" + b";" * 5000 + b"&freq=1H",
    b"latlon=" + b"," * 5000 + b"&freq=1H",
    b"x=" + b"a" * 60000 + b"&latlon=48.8566,2.3522&freq=1H",
    b"latlon&freq",
    b"latlon=&freq=",
    b"=&=&&&",
    b"&&&&",
    b"=",
    b"latlon==48.8566,2.3522&freq=1H",
    b"latlon=48.8566,,2.3522&freq=1H",
    b"latlon=,&freq=1H",
    b"latlon=48.8566;2.3522&freq=1H",
    b"latlon=48.8566,2.3522&latlon=&freq=1H",
    b"latlon=48.8566,2.3522&freq=1H&freq=1H&freq=15min",
    b"latlon=%2548.8566,2.3522&freq=1H",
    b"latlon=48.8566%2C2.3522&freq=1H",
    b"latlon=-0,-0&freq=1H",
    b"latlon=90,180&freq=1H",
    b"latlon=-90,-180&freq=1H",
    b"latlon=%0A48.8566,2.3522&freq=1H",
    b"latlon=48.8566,2.3522%0D%0AX-Injected:%201&freq=1H",
    b"latlon=%E2%80%AE48.8566,2.3522&freq=1H",
    b"latlon=48.8566,2.3522&freq=%E2%80%8B1H",
    b"latlon=48.8566,2.3522&freq=1H\xff",  # a raw non-ASCII byte (httptools refuses it: plain 400)
    b"latlon=\xc3\xa9,1&freq=1H",
]


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


# --------------------------------------------------------------------------- caching headers


def test_caching_headers(client, tree):
    r = get(client, MEDIUM, f"latlon={PARIS}&freq=1H")
    index = json.loads((tree / "current" / "json" / "eu-medium" / "index.json").read_text())
    manifest = json.loads((tree / "current" / "manifest.json").read_text())
    assert r.headers["last-modified"] == format_datetime(datetime.fromisoformat(manifest["published_at"]), usegmt=True)
    assert r.headers["last-modified"] == "Sun, 22 Nov 2026 03:46:07 GMT"  # the publication, not updated_time
    directive, _, max_age = r.headers["cache-control"].partition(", ")
    assert directive == "public" and max_age.startswith("max-age=")
    expected = datetime.fromisoformat(index["next_update"]) - datetime.now(timezone.utc)
    assert abs(int(max_age.removeprefix("max-age=")) - expected.total_seconds()) < 60
    etag = r.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/")
    # same request, same tag; another body, another tag
    assert get(client, MEDIUM, f"latlon={PARIS}&freq=1H").headers["etag"] == etag
    assert get(client, SHORT, f"latlon={PARIS}&freq=1H").headers["etag"] != etag
    assert get(client, MEDIUM, f"latlon={PARIS}&freq=30min").headers["etag"] != etag
    assert get(client, MEDIUM, "latlon=48.85660,2.3522&freq=1H").headers["etag"] != etag


def test_max_age_is_never_negative(tmp_path):
    root = tmp_path / "out"
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    publish_run(root, "old", datetime(2026, 11, 22, tzinfo=timezone.utc), next_update=past)
    point_current(root, "old")
    r = call_app(create_app(root), "GET", MEDIUM, f"latlon={PARIS}&freq=1H".encode())
    assert r[0] == 200 and r[1][b"cache-control"] == b"public, max-age=0"


def test_if_none_match_304(client):
    r = get(client, MEDIUM, f"latlon={PARIS};{ROME}&freq=1H")
    etag = r.headers["etag"]
    for header in (etag, f"W/{etag}", f'"nope", {etag}', "*"):
        again = get(client, MEDIUM, f"latlon={PARIS};{ROME}&freq=1H", headers={"If-None-Match": header})
        assert again.status_code == 304 and again.content == b""
        assert again.headers["etag"] == etag
        assert again.headers["cache-control"] == r.headers["cache-control"]
        assert again.headers["last-modified"] == r.headers["last-modified"]
    other = get(client, MEDIUM, f"latlon={PARIS};{ROME}&freq=1H", headers={"If-None-Match": '"nope"'})
    assert other.status_code == 200 and other.content == r.content


def test_if_modified_since_304(client):
    r = get(client, MEDIUM, f"latlon={PARIS}&freq=1H")
    lm = parsedate_to_datetime(r.headers["last-modified"])
    same = get(client, MEDIUM, f"latlon={PARIS}&freq=1H", headers={"If-Modified-Since": r.headers["last-modified"]})
    assert same.status_code == 304
    earlier = format_datetime(lm - timedelta(seconds=1), usegmt=True)
    assert get(client, MEDIUM, f"latlon={PARIS}&freq=1H", headers={"If-Modified-Since": earlier}).status_code == 200
    garbage = get(client, MEDIUM, f"latlon={PARIS}&freq=1H", headers={"If-Modified-Since": "yesterday"})
    assert garbage.status_code == 200


def test_head_is_get_without_body(client):
    start = time.monotonic()
    r = get(client, SHORT, f"latlon={BERLIN}&freq=1H")
    h = client.head(f"{SHORT}?latlon={BERLIN}&freq=1H")
    elapsed = time.monotonic() - start
    assert h.status_code == 200 and h.content == b""
    for name in ("content-type", "content-length", "content-encoding", "vary", "etag", "last-modified"):
        assert h.headers[name] == r.headers[name]
    # max-age counts the seconds to the next update: the HEAD may come a second later.
    ages = [int(x.headers["cache-control"].removeprefix("public, max-age=")) for x in (r, h)]
    assert 0 <= ages[0] - ages[1] <= int(elapsed) + 1, ages
    assert int(h.headers["content-length"]) == r.num_bytes_downloaded  # httpx asks for gzip: the bytes sent
    e = client.head(f"{SHORT}?latlon={BERLIN}&freq=2H")
    assert e.status_code == 400 and e.content == b"" and e.headers["cache-control"] == "no-store"
    assert client.head("/nowhere").status_code == 404


# --------------------------------------------------------------------------- catalog


def test_catalog(client, tree):
    r = client.get("/catalog")
    assert r.status_code == 200
    assert r.headers["etag"] and r.headers["last-modified"] and r.headers["cache-control"].startswith("public, max-age=")
    catalog = r.json()
    assert catalog["run_id"] == "20261122T00Z"
    products = {p["product"]: p for p in catalog["products"]}
    assert set(products) == set(PRODUCTS) | {"eu-wind", "japan"}
    medium = products["eu-medium"]
    assert medium["operations"] == [MEDIUM]
    assert medium["basetime"] == "2026-11-22T00:00:00+00:00"
    assert medium["updated_time"] == "2026-11-22T03:41:07+00:00"
    assert medium["freqs"] == ["1H", "30min", "15min"]
    points = {p["id"]: p for p in medium["points"]}
    assert points["paris"] == {"id": "paris", "name": "Paris", "lat": 48.8566, "lon": 2.3522}
    assert points["berlin"]["hub_heights"] == [100, 150]
    assert "heights" not in points["berlin"]
    wind = products["eu-wind"]
    assert wind["operations"] == [WIND] and wind["freqs"] == ["1H", "30min", "15min"]
    wind_points = {p["id"]: p for p in wind["points"]}
    assert wind_points["paris"]["heights"] == LADDER
    assert wind_points["hornsea-1"]["heights"] == LADDER[:6] + [113.0] + LADDER[6:]
    assert wind_points["hornsea-1"]["hub_heights"] == [113.0]
    assert wind_points["berlin"]["heights"] == sorted(LADDER + [112.5, 150.0])
    japan = products["japan"]
    assert japan["operations"] == [SS1WX] and japan["freqs"] == []
    assert japan["basetime"] == "2026-11-22T00:00:00+00:00" and japan["updated_time"] == "2026-11-22T03:41:07+00:00"
    assert japan["points"] == [{"id": pid, "name": name, "lat": lat, "lon": lon}
                               for pid, name, lat, lon, _ in JAPAN_POINTS]
    assert client.head("/catalog").content == b""
    assert client.get("/catalog", headers={"If-None-Match": r.headers["etag"]}).status_code == 304


# --------------------------------------------------------------------------- publication


def test_swapping_current_serves_the_new_run(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    query = f"latlon={PARIS}&freq=1H"
    with live_server(root) as (client, app, _):
        # nothing published yet
        assert_error(get(client, MEDIUM, query), 404, "404_002", "no forecast run published yet")
        assert_error(client.get("/catalog"), 404, "404_002", "no forecast run published yet")

        publish_run(root, "run-a", datetime(2026, 11, 22, 0, tzinfo=timezone.utc), temp=10.0)
        point_current(root, "run-a")
        a = get(client, MEDIUM, query)
        assert a.status_code == 200
        assert a.json()[PARIS]["basetime"] == "2026-11-22T00:00:00+00:00"
        assert app._run.run_id == "run-a" and app._run.cached_files == 2  # the file and its deflate form

        # the next run is written completely, then current is swapped
        publish_run(root, "run-b", datetime(2026, 11, 22, 3, tzinfo=timezone.utc), temp=20.0)
        assert get(client, MEDIUM, query).headers["etag"] == a.headers["etag"]
        point_current(root, "run-b")
        b = get(client, MEDIUM, query)
        assert b.status_code == 200
        assert b.json()[PARIS]["basetime"] == "2026-11-22T03:00:00+00:00"
        assert b.json()[PARIS]["data"][0]["temp_2m"] == 20.0
        assert b.headers["etag"] != a.headers["etag"]
        assert b.headers["last-modified"] != a.headers["last-modified"]
        assert get(client, MEDIUM, query, headers={"If-None-Match": a.headers["etag"]}).status_code == 200
        assert client.get("/catalog").json()["run_id"] == "run-b"
        assert app._run.run_id == "run-b"  # run-a's caches are gone

        # a retired run that is deleted does not matter any more
        point_current(root, "run-a")
        assert get(client, MEDIUM, query).json()[PARIS]["data"][0]["temp_2m"] == 10.0


def test_a_repeated_query_is_answered_from_its_runs_kept_answer(tmp_path, monkeypatch):
    """The operation runs once per run and query text; the request's own headers (gzip,
    If-None-Match, max-age) and ss1wx's requestId are still applied to every answer."""
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=timezone.utc), temp=10.0)
    publish_run(root, "b", datetime(2026, 11, 22, 3, tzinfo=timezone.utc), temp=20.0)
    parsed = []
    monkeypatch.setattr(server_app, "parse_query",
                        lambda query, known=(): parsed.append(query) or parse_query(query, known))
    now = [1_795_000_000.0]
    app = create_app(root, clock=lambda: now[0])
    query = f"latlon={PARIS}&freq=1H".encode()
    point_current(root, "a")
    first = call_app(app, "GET", MEDIUM, query)
    now[0] += 7
    second = call_app(app, "GET", MEDIUM, query)
    assert parsed == [query] and first[0] == second[0] == 200 and first[2] == second[2]
    assert first[1][b"etag"] == second[1][b"etag"]
    age = [int(r[1][b"cache-control"].rsplit(b"=", 1)[1]) for r in (first, second)]
    assert age[0] - age[1] == 7  # max-age is the request's, not the kept answer's
    assert call_app(app, "GET", MEDIUM, query, [(b"if-none-match", first[1][b"etag"])])[0] == 304
    gz = call_app(app, "GET", MEDIUM, query, [(b"accept-encoding", b"gzip")])
    assert gz[1][b"content-encoding"] == b"gzip" and gzip.decompress(gz[2]) == first[2]
    assert call_app(app, "HEAD", MEDIUM, query)[2] == b""
    assert parsed == [query]

    other = f"latlon={PARIS}&freq=1H&".encode()  # another text, the same request: answered anew
    assert call_app(app, "GET", MEDIUM, other)[2] == first[2] and parsed == [query, other]

    point_current(root, "b")  # a new run: its own answers
    b = call_app(app, "GET", MEDIUM, query)
    assert json.loads(b[2])[PARIS]["data"][0]["temp_2m"] == 20.0 and parsed[-1] == query and len(parsed) == 3

    japan = f"lat={TOKYO[0]}&lon={TOKYO[1]}".encode()
    ids = {json.loads(call_app(app, "GET", SS1WX, japan)[2])["requestId"] for _ in range(5)}
    assert len(ids) == 5 and parsed.count(japan) == 1  # a kept answer, a fresh id each time


def test_an_answer_asked_for_again_is_sent_from_its_body_file(tmp_path, monkeypatch):
    """Under a server offering ASGI's zero-copy send, the second request for a query text is
    answered from the answer's body in an in-memory file (``sendfile``): the same status,
    headers and bytes as the app gives any ASGI server, in identity and in gzip, for GET, HEAD
    and a conditional request, and no more such files than ``MAX_BODY_FILES``."""
    from pointcast.server import responses, run as server_run

    monkeypatch.setattr(server_run, "MAX_BODY_FILES", 2)
    monkeypatch.setattr(responses, "ZERO_COPY_BYTES", 256)  # the fixture's answers are small
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=timezone.utc))
    point_current(root, "a")
    queries = [f"latlon={PARIS}&freq=15min{'&' * k}" for k in range(3)]
    plain = create_app(root)  # called without the extension: joined bytes every time
    with live_server(root) as (client, app, _):
        for query in queries:
            for encoding in ("identity", "gzip"):
                asked = {"accept-encoding": encoding}
                status, expected, body = call_app(plain, "GET", MEDIUM, query.encode(), [(b"accept-encoding", encoding.encode())])
                assert len(body) >= responses.ZERO_COPY_BYTES
                expected = {k.decode(): v.decode() for k, v in expected.items() if k != b"cache-control"}
                for _ in range(3):
                    with client.stream("GET", f"{MEDIUM}?{query}", headers=asked) as r:
                        got = {k: v for k, v in r.headers.items() if k not in ("date", "cache-control")}
                        assert (r.status_code, got, b"".join(r.iter_raw())) == (status, expected, body)
                head = client.head(f"{MEDIUM}?{query}", headers=asked)
                assert head.headers["content-length"] == expected["content-length"] and head.content == b""
                conditional = {**asked, "if-none-match": expected["etag"]}
                assert client.get(f"{MEDIUM}?{query}", headers=conditional).status_code == 304
        files = app._run.body_files
        assert len(files.entries) == 2 and files.size == sum(f.size for f, _ in files.entries.values())
        assert all(f.size >= 256 and not f.file.closed for f, _ in files.entries.values())


def test_kept_answers_stay_within_their_own_bound(tmp_path, monkeypatch):
    """Answers are charged with every byte they hold, within a bound of their own: new query
    texts evict the oldest answers, never the files."""
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=timezone.utc))
    point_current(root, "a")
    parsed = []
    monkeypatch.setattr(server_app, "parse_query",
                        lambda query, known=(): parsed.append(query) or parse_query(query, known))
    one = call_app(create_app(root), "GET", MEDIUM, f"latlon={PARIS}&freq=1H".encode())
    bound = 2 * len(one[2])  # room for one answer, not for two
    app = create_app(root, max_answer_bytes=bound)
    queries = [f"latlon={PARIS}&freq=1H{'&' * k}".encode() for k in range(3)]
    for query in queries * 2:
        assert call_app(app, "GET", MEDIUM, query)[2] == one[2]
        assert app._run.answers.size <= bound and len(app._run.answers.entries) == 1
    assert len(parsed) == 7  # the one above, then every request: each answer evicted before it came again
    assert app._run.cached_files == 1  # the point file stayed
    [(_, size)] = app._run.answers.entries.values()
    assert size >= len(one[2])


def test_error_answers_are_not_kept(tmp_path, monkeypatch):
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=timezone.utc))
    point_current(root, "a")
    app = create_app(root)
    for _ in range(2):
        assert call_app(app, "GET", MEDIUM, b"latlon=48.8566,2.3522&freq=2H")[0] == 400
        assert call_app(app, "GET", MEDIUM, b"latlon=0,0&freq=1H")[0] == 403  # outside the coverage
    assert not app._run.answers.entries


def test_missing_product_or_point_file_is_404_002(tmp_path):
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=timezone.utc))
    point_current(root, "r")
    (run / "json" / "eu-short" / "index.json").unlink()
    (run / "json" / "eu-medium" / "15min" / "rome.json").unlink()
    app = create_app(root)
    status, _, body = call_app(app, "GET", SHORT, f"latlon={PARIS}&freq=1H".encode())
    assert status == 404 and json.loads(body)["code"] == "404_002"
    status, _, body = call_app(app, "GET", MEDIUM, f"latlon={ROME}&freq=15min".encode())
    assert status == 404 and json.loads(body)["code"] == "404_002"
    assert call_app(app, "GET", MEDIUM, f"latlon={ROME}&freq=30min".encode())[0] == 200


def test_point_cache_is_bounded(tmp_path):
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=timezone.utc))
    point_current(root, "r")
    size = (run / "json" / "eu-medium" / "1H" / "paris.json").stat().st_size
    app = create_app(root, max_cache_bytes=int(size * 2.5))
    for latlon in (PARIS, BERLIN, ROME, PARIS):
        assert call_app(app, "GET", MEDIUM, f"latlon={latlon}&freq=1H".encode())[0] == 200
    assert app._run.cached_files == 2


def test_index_ids_are_the_only_source_of_paths(tmp_path):
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=timezone.utc))
    point_current(root, "r")
    index_path = run / "json" / "eu-medium" / "index.json"
    index = json.loads(index_path.read_text())
    index["points"][0]["id"] = "../../../../etc/passwd"  # a broken index cannot reach outside
    index_path.write_text(json.dumps(index))
    status, _, body = call_app(create_app(root), "GET", MEDIUM, f"latlon={PARIS}&freq=1H".encode())
    assert status == 404 and json.loads(body)["code"] == "404_002"


def test_point_file_splice_and_fallback():
    compact = b'{"latitude":1.5,"longitude":2.5,"basetime":"t","data":[]}\n'
    spaced = b'{"latitude": 1.5, "longitude": 2.5, "basetime": "t", "data": []}'
    reordered = b'{"basetime": "t", "latitude": 1.5, "data": [], "longitude": 2.5}'
    for data in (compact, spaced, reordered):
        point = PointFile.from_bytes(data)
        spliced = json.loads(b"".join(point.splice(b"-3.0", b"4.25")))
        assert spliced == {"latitude": -3.0, "longitude": 4.25, "basetime": "t", "data": []}


def test_parsers():
    assert parse_query(b"a=1&b=%2B+x&&c&a=2") == {"a": ["1", "2"], "b": ["+ x"], "c": [""]}
    pairs = parse_pairs("1,2;-3.5,+4|5e0, 6 ", 10)
    assert [(p.text, p.lat, p.lon) for p in pairs] == [("1,2", 1, 2), ("-3.5,+4", -3.5, 4), ("5e0, 6 ", 5, 6)]


def test_operations_table():
    assert OPERATIONS[MEDIUM].product == "eu-medium" and OPERATIONS[SHORT].product == "eu-short"
    assert OPERATIONS[WIND].product == "eu-wind" and OPERATIONS[WIND].name == "short-range-windpack"
    assert OPERATIONS[SS1WX].product == "japan" and OPERATIONS[SS1WX].name == "ss1wx"
    assert OPERATIONS[SS1WX].params == ("lat", "lon")
    assert OPERATIONS["/catalog"].product is None


# --------------------------------------------------------------------------- short-range/windpack

WIND_KEYS = ["latitude", "longitude", "basetime", "updated_time", "freq", "hub_height", "unit", "data"]
WIND_UNIT = {"datetime": "UTC", "windspd": "m/s", "windir": "degree", "u_windspd": "m/s", "v_windspd": "m/s"}
RUN = "20261122T00Z"


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
    for step, (got, lo, hi) in enumerate(zip(value["data"], lower["data"], upper["data"])):
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
    assert_error(wind_get(client, f"{HORNSEA};{PARIS}", freq, "100m"), 400, "400_002", '"latlon" is invalid value')
    assert_error(wind_get(client, f"{HORNSEA};{HORNSEA}", freq, "100m"), 400, "400_002")


def test_windpack_several_points_hourly(client, tree):
    r = wind_get(client, f"{HORNSEA};{PARIS}|{BERLIN}", "1H", "113m")
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == [HORNSEA, PARIS, BERLIN]
    assert body[HORNSEA]["data"] == json.loads(wind_bytes(tree, "1H", "hornsea-1", 113.0))["data"]  # its hub height
    assert all(v["hub_height"] == "113m" for v in body.values())
    assert wind_get(client, ";".join([HORNSEA, PARIS] * 5), "1H", "113m").status_code == 200
    assert_error(wind_get(client, ";".join([HORNSEA] * 11), "1H", "113m"), 400, "400_002", '"latlon" is invalid value')


@pytest.mark.parametrize(
    "query,status,code,message",
    [
        # hubheight required
        (f"latlon={HORNSEA}&freq=1H", 400, "400_001", '"hubheight" is required'),
        (f"latlon={HORNSEA}&freq=1H&hubheight=", 400, "400_001", '"hubheight" is required'),
        (f"latlon={HORNSEA}&freq=1H&hubheight=100m&hubheight=120m", 400, "400_002", '"hubheight" is invalid value'),
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
        (f"latlon={HORNSEA};{PARIS}&freq=15min&hubheight=abc", 400, "400_002", '"latlon" is invalid value'),
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
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=timezone.utc))
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
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=timezone.utc))
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


# --------------------------------------------------------------------------- ss1wx (japan)

TOKYO = ("35.6812", "139.7671")
OSAKA = ("34.6937", "135.5023")  # Japanese land, no configured point in its cell
SEOUL = ("37.5665", "126.978")  # outside the Japan coverage
PACIFIC = ("30.0", "150.0")  # open sea


def ss1wx(client: httpx.Client, lat: str, lon: str, **kwargs) -> httpx.Response:
    return get(client, SS1WX, f"lat={lat}&lon={lon}", **kwargs)


def japan_bytes(root: Path, pid: str, run_id: str = RUN) -> bytes:
    return (root / "runs" / run_id / "json" / "japan" / f"{pid}.json").read_bytes()


def japan_spliced(stored: bytes, lat: str, lon: str) -> bytes:
    """The stored element with its coordinates replaced (as text)."""
    head, sep, rest = stored.partition(b',"srf"')
    assert head.startswith(b'{"lat":') and b',"lon":' in head and sep
    return b'{"lat":' + lat.encode() + b',"lon":' + lon.encode() + sep + rest


def assert_request_id(value: str) -> uuid.UUID:
    rid = uuid.UUID(value)
    assert rid.version == 4 and rid.variant == uuid.RFC_4122
    assert str(rid) == value  # canonical: lower case, hyphenated
    return rid


def _same_mesh_neighbour(lat: float, lon: float) -> tuple[float, float]:
    grid = grid_for("japan")
    for dlat, dlon in [(0.002, 0.003), (-0.002, 0.003), (0.002, -0.003), (-0.002, -0.003), (0.001, 0.0), (0.0, 0.001)]:
        if grid.cell_key(lat + dlat, lon + dlon) == grid.cell_key(lat, lon) and grid.covers(lat + dlat, lon + dlon):
            return round(lat + dlat, 4), round(lon + dlon, 4)
    raise AssertionError("no neighbour in the same mesh cell")


def _next_mesh_cell(lat: float, lon: float) -> tuple[float, float]:
    """A point on land in a mesh cell next to (lat, lon)'s, holding no configured point."""
    grid = grid_for("japan")
    for dlat, dlon in [(0.01, 0.0), (-0.01, 0.0), (0.0, 0.015), (0.0, -0.015)]:
        if grid.covers(lat + dlat, lon + dlon) and grid.cell_key(lat + dlat, lon + dlon) != grid.cell_key(lat, lon):
            return round(lat + dlat, 4), round(lon + dlon, 4)
    raise AssertionError("no neighbouring mesh cell on land")


def test_japan_grid_is_the_real_one():
    grid = grid_for("japan")
    assert grid.cell_key(35.6812, 139.7671) == "53394611"  # Tokyo Station's third-order mesh
    for _, _, lat, lon, _ in JAPAN_POINTS:
        key = grid.cell_key(lat, lon)
        assert grid.covers(lat, lon) and len(key) == 8 and key.isdigit()
    assert len({grid.cell_key(lat, lon) for _, _, lat, lon, _ in JAPAN_POINTS}) == len(JAPAN_POINTS)
    assert grid.covers(*map(float, OSAKA))
    assert grid.cell_key(*map(float, OSAKA)) not in {grid.cell_key(p[2], p[3]) for p in JAPAN_POINTS}
    for outside in (SEOUL, PACIFIC, ("48.8566", "2.3522"), ("90", "180"), ("-33.8688", "151.2093")):
        assert not grid.covers(*map(float, outside))


@pytest.mark.parametrize("pid,name,lat,lon,_elevation", JAPAN_POINTS)
def test_ss1wx_success_shape(client, tree, pid, name, lat, lon, _elevation):
    r = ss1wx(client, str(lat), str(lon))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert list(body) == ["requestId", "wxdata"]
    assert_request_id(body["requestId"])
    stored = japan_bytes(tree, pid)
    assert r.content == (b'{"requestId":"' + body["requestId"].encode() + b'","wxdata":['
                         + japan_spliced(stored, repr(lat), repr(lon)) + b"]}")
    (element,) = body["wxdata"]
    assert element == json.loads(stored)
    assert list(element) == ["lat", "lon", "srf", "mrf"]
    assert isinstance(element["lat"], float) and isinstance(element["lon"], float)
    assert len(element["srf"]) == 72 and len(element["mrf"]) == 10
    for entry in element["srf"]:
        assert list(entry) == SRF_KEYS
        assert all(isinstance(entry[k], int) for k in ("wx", "wnddir", "rhum", "feelidx"))
        assert entry["date"].endswith("+09:00")
    for entry in element["mrf"]:
        assert list(entry) == MRF_KEYS and entry["date"].endswith("T00:00:00+09:00")
    srf_times = [datetime.fromisoformat(e["date"]) for e in element["srf"]]
    assert all(b - a == timedelta(hours=1) for a, b in zip(srf_times, srf_times[1:]))
    assert element["srf"][9]["date"] == "2026-11-22T18:00:00+09:00"


def test_ss1wx_request_id_is_fresh_per_request(client):
    first, second = ss1wx(client, *TOKYO), ss1wx(client, *TOKYO)
    ids = [assert_request_id(r.json()["requestId"]) for r in (first, second)]
    assert ids[0] != ids[1]
    assert first.json()["wxdata"] == second.json()["wxdata"]
    assert first.headers["etag"] == second.headers["etag"]  # the forecast content did not change
    assert len(first.content) == len(second.content)
    many = {ss1wx(client, *TOKYO).json()["requestId"] for _ in range(20)}
    assert len(many) == 20


def test_ss1wx_echoes_the_requested_coordinates(client, tree):
    lat, lon = _same_mesh_neighbour(35.6812, 139.7671)
    r = ss1wx(client, str(lat), str(lon))
    assert r.status_code == 200, r.text
    (element,) = r.json()["wxdata"]
    assert (element["lat"], element["lon"]) == (lat, lon)
    stored = json.loads(japan_bytes(tree, "tokyo"))
    assert (element["srf"], element["mrf"]) == (stored["srf"], stored["mrf"])


@pytest.mark.parametrize(
    "lat,lon,echo",
    [
        ("35.68120", "139.76710", b'"lat":35.6812,"lon":139.7671'),
        ("%2B35.6812", "139.7671", b'"lat":35.6812,"lon":139.7671'),
        ("+35.6812", "139.7671", b'"lat":35.6812,"lon":139.7671'),  # form encoding: + is a space
        ("%2035.6812%09", "139.7671", b'"lat":35.6812,"lon":139.7671'),
        ("3.56812e1", "1.397671E2", b'"lat":35.6812,"lon":139.7671'),
        ("%33%35.6812", "139.7671", b'"lat":35.6812,"lon":139.7671'),
        ("43.0618", "141.3545", b'"lat":43.0618,"lon":141.3545'),
    ],
)
def test_ss1wx_number_syntax_and_echo(client, lat, lon, echo):
    r = ss1wx(client, lat, lon)
    assert r.status_code == 200, r.text
    assert r.content.startswith(b'{"requestId":"') and b'","wxdata":[{' + echo + b',"srf":[' in r.content


def test_ss1wx_unknown_parameters_and_same_repeats_are_accepted(client):
    r = get(client, SS1WX, f"apikey=x&lat={TOKYO[0]}&x=%E2%9C%93&lon={TOKYO[1]}&lat={TOKYO[0]}&latlon=1,2&&")
    assert r.status_code == 200, r.text
    assert r.json()["wxdata"][0]["lat"] == 35.6812


def _ss1wx_error_cases():
    tokyo = f"lat={TOKYO[0]}&lon={TOKYO[1]}"
    cases = [
        # required: absent or empty
        ("", 400, "400_001", '"lat" is required'),
        (f"lon={TOKYO[1]}", 400, "400_001", '"lat" is required'),
        (f"lat=&lon={TOKYO[1]}", 400, "400_001", '"lat" is required'),
        (f"lat={TOKYO[0]}", 400, "400_001", '"lon" is required'),
        (f"lat={TOKYO[0]}&lon=", 400, "400_001", '"lon" is required'),
        (f"lat={TOKYO[0]}&lon=&lon=", 400, "400_001", '"lon" is required'),
        ("lat&lon", 400, "400_001", '"lat" is required'),
        (f"latlon={TOKYO[0]},{TOKYO[1]}", 400, "400_001", '"lat" is required'),
        (f"LAT={TOKYO[0]}&LON={TOKYO[1]}", 400, "400_001", '"lat" is required'),  # names are case-sensitive
        # repeated with different values (even the same number written differently)
        (f"{tokyo}&lat=35.7", 400, "400_002", '"lat" is invalid value'),
        (f"{tokyo}&lat=35.68120", 400, "400_002", '"lat" is invalid value'),
        (f"{tokyo}&lon=", 400, "400_002", '"lon" is invalid value'),
        (f"{tokyo}&lon=139.7671&lon=140", 400, "400_002", '"lon" is invalid value'),
        # not a number
        *[(f"lat={bad}&lon={TOKYO[1]}", 400, "400_002", '"lat" is invalid value')
          for bad in ["abc", "NaN", "nan", "inf", "-Infinity", "1e400", "-1e309", "0x23", "35_6", "35,6812",
                      "35.6812,139.7671", "35.6812%2C139.7671", "35.6.8", ".", "e5", "%2B", "-", "35.6812N",
                      "%D9%A3%D9%A5", "%EF%BC%93%EF%BC%95", "35%206812", "1" * 40, "35.6812%00",
                      "..%2F..%2Fetc%2Fpasswd", "%ff", "%C3%28", "%zz", "35.6812%", "35.6812%4"]],
        *[(f"lat={TOKYO[0]}&lon={bad}", 400, "400_002", '"lon" is invalid value')
          for bad in ["abc", "nan", "inf", "1e400", "139.7671E", "139.7671%0D%0AX-Injected:%201", "%ED%A0%80"]],
        ("lat=abc&lon=1e400", 400, "400_002", '"lat" is invalid value'),
        ("lat=91&lon=abc", 400, "400_002", '"lon" is invalid value'),  # syntax before range
        ("lat%00=35.6812&lon=139.7671", 400, "400_002", '"query" is invalid value'),
        (f"{tokyo}&x=%zz", 400, "400_002", '"query" is invalid value'),
        # out of range
        ("lat=90.5&lon=139.7671", 400, "400_003", '"lat" is out of range: 90.5'),
        ("lat=-91&lon=139.7671", 400, "400_003", '"lat" is out of range: -91'),
        ("lat=1e300&lon=139.7671", 400, "400_003", '"lat" is out of range: 1e300'),
        ("lat=35.6812&lon=180.0001", 400, "400_003", '"lon" is out of range: 180.0001'),
        ("lat=35.6812&lon=-181", 400, "400_003", '"lon" is out of range: -181'),
        ("lat=35.6812&lon=499.7671", 400, "400_003", '"lon" is out of range: 499.7671'),
        ("lat=91&lon=181", 400, "400_003", '"lat" is out of range: 91'),
        # in range, outside the Japan coverage
        (f"lat={SEOUL[0]}&lon={SEOUL[1]}", 403, "403_001",
         f'"lat,lon" is outside the coverage of this operation: {SEOUL[0]},{SEOUL[1]}'),
        (f"lat={PACIFIC[0]}&lon={PACIFIC[1]}", 403, "403_001", None),
        ("lat=48.8566&lon=2.3522", 403, "403_001", None),
        ("lat=90&lon=180", 403, "403_001", '"lat,lon" is outside the coverage of this operation: 90,180'),
        ("lat=-90&lon=-180", 403, "403_001", None),
        ("lat=-0&lon=-0", 403, "403_001", None),
        (f"lat={TOKYO[1]}&lon={TOKYO[0]}", 400, "400_003", f'"lat" is out of range: {TOKYO[1]}'),  # swapped
        # inside the coverage, no configured point in the mesh cell
        (f"lat={OSAKA[0]}&lon={OSAKA[1]}", 404, "404_002",
         f'"lat,lon" has no forecast point in its grid cell: {OSAKA[0]},{OSAKA[1]}'),
    ]
    return cases


@pytest.mark.parametrize("query,status,code,message", _ss1wx_error_cases(), ids=lambda v: repr(v)[:60])
def test_ss1wx_error_codes(client, query, status, code, message):
    assert_error(get(client, SS1WX, query), status, code, message)


def test_ss1wx_next_mesh_cell_is_404_002(client):
    lat, lon = _next_mesh_cell(35.6812, 139.7671)
    assert_error(ss1wx(client, str(lat), str(lon)), 404, "404_002",
                 f'"lat,lon" has no forecast point in its grid cell: {lat},{lon}')


def test_ss1wx_other_methods_405(client):
    r = client.post(f"{SS1WX}?lat={TOKYO[0]}&lon={TOKYO[1]}")
    assert_error(r, 405, "405_001", "method not allowed")
    assert r.headers["allow"] == "GET, HEAD"


def test_ss1wx_no_run_or_no_product_is_404_002(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    app = create_app(root)

    def answer(lat, lon):
        status, _, body = call_app(app, "GET", SS1WX, f"lat={lat}&lon={lon}".encode())
        return status, json.loads(body)

    assert answer(*TOKYO) == (404, {"status": 404, "code": "404_002", "message": "no forecast run published yet"})
    assert answer(*SEOUL)[1]["code"] == "403_001"  # coverage is checked before the run
    assert answer("91", "0")[1]["code"] == "400_003"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=timezone.utc))
    point_current(root, "r")
    japan = run / "json" / "japan"
    (japan / "sapporo.json").unlink()
    (japan / "kyoto.json").write_bytes(b'{"lat": 35.0, "lon": 135.7, "srf": [')  # truncated
    (japan / "naha.json").write_bytes(b'\xff\xfe{"lat":1}')
    assert answer(*TOKYO)[0] == 200
    for _, _, lat, lon, _ in JAPAN_POINTS[1:]:
        assert answer(lat, lon) == (404, {"status": 404, "code": "404_002",
                                          "message": f'"lat,lon" has no forecast in the current run: {lat},{lon}'})
    (japan / "index.json").unlink()
    app = create_app(root)  # (an index is read once per run)
    assert answer(*TOKYO) == (404, {"status": 404, "code": "404_002",
                                    "message": "no published forecast for japan in the current run"})
    assert "japan" not in {p["product"] for p in json.loads(call_app(app, "GET", "/catalog", b"")[2])["products"]}


def test_ss1wx_gzip_and_spaced_files(tmp_path):

    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=timezone.utc))
    point_current(root, "r")
    plain = call_app(create_app(root), "GET", SS1WX, f"lat={TOKYO[0]}&lon={TOKYO[1]}".encode())
    path = run / "json" / "japan" / "tokyo.json"
    element = json.loads(path.read_bytes())
    path.with_name("tokyo.json.gz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    gz = call_app(create_app(root), "GET", SS1WX, f"lat={TOKYO[0]}&lon={TOKYO[1]}".encode())
    assert gz[0] == 200 and gz[2][len('{"requestId":"') + 36:] == plain[2][len('{"requestId":"') + 36:]
    assert gz[1][b"etag"] == plain[1][b"etag"]
    (path.with_name("tokyo.json.gz")).unlink()
    path.write_text(json.dumps(element, indent=2) + "\n")  # another layout: still spliced
    spaced = call_app(create_app(root), "GET", SS1WX, f"lat={TOKYO[0]}&lon={TOKYO[1]}".encode())
    assert spaced[0] == 200 and json.loads(spaced[2])["wxdata"] == [element]


def test_ss1wx_caching_headers(client):
    r = ss1wx(client, *TOKYO)
    etag = r.headers["etag"]
    assert re.fullmatch(r'W/"[0-9a-f]{32}-gzip"', etag)  # httpx asks for gzip: the gzip representation's tag
    assert r.headers["last-modified"] == "Sun, 22 Nov 2026 03:46:07 GMT"
    assert r.headers["cache-control"].startswith("public, max-age=")
    age = int(r.headers["cache-control"].removeprefix("public, max-age="))
    assert 3 * 3600 - 120 < age <= 3 * 3600
    # If-None-Match, weak comparison: the tag, its opaque part without W/, in a list, or *
    for header in (etag, etag[2:], f'"nope", {etag}', "*"):
        again = ss1wx(client, *TOKYO, headers={"If-None-Match": header})
        assert again.status_code == 304 and again.content == b"", header
        assert again.headers["etag"] == etag
        assert again.headers["cache-control"] == r.headers["cache-control"]
        assert again.headers["last-modified"] == r.headers["last-modified"]
        assert "content-type" not in again.headers
    assert ss1wx(client, *TOKYO, headers={"If-None-Match": 'W/"nope"'}).status_code == 200
    since = ss1wx(client, *TOKYO, headers={"If-Modified-Since": r.headers["last-modified"]})
    assert since.status_code == 304 and since.headers["etag"] == etag
    # the tag covers the forecast content: the same echo has the same tag, another echo or point another
    assert ss1wx(client, "35.68120", "139.76710").headers["etag"] == etag
    assert ss1wx(client, *map(str, _same_mesh_neighbour(35.6812, 139.7671))).headers["etag"] != etag
    assert ss1wx(client, "43.0618", "141.3545").headers["etag"] != etag


def test_ss1wx_head(client):
    r = ss1wx(client, *TOKYO)
    h = client.head(f"{SS1WX}?lat={TOKYO[0]}&lon={TOKYO[1]}")
    assert h.status_code == 200 and h.content == b""
    for name in ("content-type", "content-length", "content-encoding", "vary", "etag", "last-modified", "cache-control"):
        assert h.headers[name] == r.headers[name]
    assert int(h.headers["content-length"]) == r.num_bytes_downloaded  # httpx asks for gzip: the bytes sent
    e = client.head(f"{SS1WX}?lat={SEOUL[0]}&lon={SEOUL[1]}")
    assert e.status_code == 403 and e.content == b"" and e.headers["cache-control"] == "no-store"
    n = client.head(f"{SS1WX}?lat={TOKYO[0]}&lon={TOKYO[1]}", headers={"If-None-Match": r.headers["etag"]})
    assert n.status_code == 304 and n.headers["etag"] == r.headers["etag"]


def test_ss1wx_new_run_new_tag(tmp_path):
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=timezone.utc), temp=10.0)
    publish_run(root, "b", datetime(2026, 11, 22, 3, tzinfo=timezone.utc), temp=20.0)
    app = create_app(root)
    query = f"lat={TOKYO[0]}&lon={TOKYO[1]}".encode()
    point_current(root, "a")
    a = call_app(app, "GET", SS1WX, query)
    point_current(root, "b")
    b = call_app(app, "GET", SS1WX, query)
    assert a[0] == b[0] == 200 and a[1][b"etag"] != b[1][b"etag"]
    assert json.loads(b[2])["wxdata"][0]["srf"][0]["date"] == "2026-11-22T12:00:00+09:00"
    assert call_app(app, "GET", SS1WX, query, [(b"if-none-match", a[1][b"etag"])])[0] == 200
    assert call_app(app, "GET", SS1WX, query, [(b"if-none-match", b[1][b"etag"])])[0] == 304
    assert app._run.cached_files == 1 and len(app._run.answers.entries) == 1


JAPAN_HOSTILE = [
    b"lat=35.6812%00&lon=139.7671",
    b"lat=35.6812&lon=139.7671%00",
    b"lat%00=35.6812&lon=139.7671",
    b"lat=35.6812&lon=139.7671&x=%00",
    b"lat=%ff%fe&lon=139.7671",
    b"lat=35.6812&lon=%ED%A0%80",
    b"lat=%C0%AE%C0%AE%2F&lon=1",
    b"lat=%zz&lon=139.7671",
    b"lat=35.6812%&lon=139.7671",
    b"lat=35.6812&lon=139.7671%4",
    b"lat=1e400&lon=139.7671",
    b"lat=NaN&lon=139.7671",
    b"lat=35.6812&lon=inf",
    b"lat=-Infinity&lon=nan",
    b"lat=0x23&lon=139.7671",
    b"lat=../../etc/passwd&lon=139.7671",
    b"lat=35.6812&lon=..%2F..%2Findex",
    b"lat=" + b"9" * 5000 + b"&lon=139.7671",
    b"lat=0." + b"1" * 100000 + b"&lon=139.7671",
    b"lat=35.6812&lon=139.7671%0D%0AX-Injected:%201",
    b"lat=%E2%80%AE35.6812&lon=139.7671",
    b"lat=35.6812&lat=35.6813&lon=139.7671",
    b"lat=35.6812&lon=139.7671&lon=139.7671&lon=1",
    b"x=" + b"a" * 60000 + b"&lat=35.6812&lon=139.7671",
    b"lat=35.6812;139.7671&lon=1",
    b"lat=35.6812&lon=139.7671\xff",  # a raw non-ASCII byte (httptools refuses it: plain 400)
    b"lat=\xc3\xa9&lon=1",
    b"lat&lon",
    b"=&=&&&",
    b"lat==35.6812&lon=139.7671",
    b"lat=90&lon=180",
    b"lat=-0&lon=-0",
]


@pytest.mark.parametrize("query", JAPAN_HOSTILE + HOSTILE, ids=lambda q: repr(q[:40]))
def test_ss1wx_hostile_queries_never_5xx(live, query):
    _, _, port = live
    status, headers, body = raw_get(port, SS1WX.encode() + b"?" + query)
    assert status < 500, (status, body)
    assert "x-injected" not in headers
    if status >= 400 and headers.get("content-type") == "application/json":
        err = json.loads(body)
        assert set(err) == {"status", "code", "message"} and err["status"] == status


@pytest.mark.parametrize("query", [q for q in JAPAN_HOSTILE[:23] if len(q) < 60000],  # httptools refuses longer
                         ids=lambda q: repr(q[:40]))
def test_ss1wx_hostile_queries_are_400_002(live, query):
    _, _, port = live
    status, headers, body = raw_get(port, SS1WX.encode() + b"?" + query)
    assert status == 400, body
    assert json.loads(body)["code"] == "400_002"
    assert headers["cache-control"] == "no-store"


def test_japan_point_file_splice_and_fallback():
    compact_ = b'{"lat":35.6,"lon":139.7,"srf":[{"date":"d","wx":100}],"mrf":[]}\n'
    spaced = b'{"lat": 35.6, "lon": 139.7, "srf": [{"date": "d", "wx": 100}], "mrf": []}'
    reordered = b'{"srf": [{"date": "d", "wx": 100}], "lat": 35.6, "mrf": [], "lon": 139.7}'
    for data in (compact_, spaced, reordered):
        point = PointFile.from_bytes(data, WX_LAYOUT)
        spliced = json.loads(b"".join(point.splice(b"36.0", b"140.25")))
        assert spliced == {"lat": 36.0, "lon": 140.25, "srf": [{"date": "d", "wx": 100}], "mrf": []}
    assert b"".join(PointFile.from_bytes(compact_, WX_LAYOUT).splice(b"1.5", b"2.5")) == (
        b'{"lat":1.5,"lon":2.5,"srf":[{"date":"d","wx":100}],"mrf":[]}')


def test_warm_up_builds_every_grid_without_errors(tree, caplog):
    # the probes include points outside a grid's domain (the JIS mesh raises there): never asked for
    app = create_app(tree)
    with caplog.at_level("WARNING", logger="pointcast.server"):
        app.warm_up()
    assert [r for r in caplog.records if r.name.startswith("pointcast.server")] == []
    assert set(app._grids) == {"eu-medium", "eu-short", "eu-wind", "global", "japan"}
    assert app._run is not None and app._run.product("japan") is not None


def test_coordinate_parser():
    assert parse_coordinate("35.6812", "lat") == 35.6812
    assert parse_coordinate(" +3.56812e1\t", "lat") == 35.6812
    assert parse_coordinate("-0", "lon") == 0.0 and parse_coordinate("91", "lat") == 91.0  # range: later
    for bad in ["", " ", "nan", "inf", "1e400", "0x1", "1_0", "35,6", "٣٥", "35.6812°", "1" * 33]:
        with pytest.raises(ApiError) as err:
            parse_coordinate(bad, "lat")
        assert (err.value.code, err.value.message) == ("400_002", '"lat" is invalid value')



# --------------------------------------------------------------------------- property


def call_app(app, method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]] | None = None):
    """One request through the ASGI callable in-process, raw query bytes untouched."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query, "headers": headers or [],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start, body = sent
    return start["status"], dict(start["headers"]), body["body"]


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
