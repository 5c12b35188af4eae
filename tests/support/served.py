"""What the server's tests serve: a run tree written by hand (every product's cells from the real
``pointcast.grids.grid_for``), the real server (``pointcast.server.Server``: uvloop, httptools) on
127.0.0.1 with its fixtures, and the requests and checks the tests of tests/server/ share."""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import threading
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from pointcast.grids import grid_for
from pointcast.server import Server, create_app

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

UPDATED = datetime(2026, 11, 22, 3, 41, 7, tzinfo=UTC)

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


def iso(dt: datetime) -> str:
    return dt.isoformat()


def publish_run(root: Path, run_id: str, basetime: datetime, *, next_update: datetime | None = None, temp: float = 10.0) -> Path:
    """Write one run in the layout of docs/contracts.md (index.json + point files)."""
    run = root / "runs" / run_id
    updated = basetime + timedelta(hours=3, minutes=41, seconds=7)
    next_update = next_update or datetime.now(UTC) + timedelta(hours=3)
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


# The fixtures are named apart from their functions so that a module importing them has no name
# its tests' parameters redefine.
@pytest.fixture(scope="module", name="tree")
def tree_fixture(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("output")
    publish_run(root, "20261122T00Z", datetime(2026, 11, 22, 0, tzinfo=UTC))
    point_current(root, "20261122T00Z")
    return root


@pytest.fixture(scope="module", name="live")
def live_fixture(tree):
    with live_server(tree) as server:
        yield server


@pytest.fixture(scope="module", name="client")
def client_fixture(live) -> httpx.Client:
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


def _same_cell_neighbour(lat: float, lon: float) -> tuple[float, float]:
    grid = grid_for("eu-medium")
    for dlat, dlon in [(0.003, 0.003), (-0.003, 0.003), (0.003, -0.003), (-0.003, -0.003), (0.001, 0.0), (0.0, 0.001)]:
        if grid.cell_key(lat + dlat, lon + dlon) == grid.cell_key(lat, lon):
            return round(lat + dlat, 4), round(lon + dlon, 4)
    raise AssertionError("no neighbour in the same cell")


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


WIND_KEYS = ["latitude", "longitude", "basetime", "updated_time", "freq", "hub_height", "unit", "data"]


RUN = "20261122T00Z"


TOKYO = ("35.6812", "139.7671")


def assert_request_id(value: str) -> uuid.UUID:
    rid = uuid.UUID(value)
    assert rid.version == 4 and rid.variant == uuid.RFC_4122
    assert str(rid) == value  # canonical: lower case, hyphenated
    return rid


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
