"""ss1wx (Japan): the answer's shape, its requestId, the JIS X 0410 mesh cells of the real Japan grid, its
errors and caching headers, and hostile queries."""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from pointcast.grids import grid_for
from pointcast.server import create_app
from served import (  # noqa: F401  (the fixtures client, live and tree)
    HOSTILE,
    JAPAN_POINTS,
    MRF_KEYS,
    RUN,
    SRF_KEYS,
    SS1WX,
    TOKYO,
    assert_error,
    assert_request_id,
    call_app,
    client_fixture,
    get,
    live_fixture,
    point_current,
    publish_run,
    raw_get,
    tree_fixture,
)

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
    assert all(b - a == timedelta(hours=1) for a, b in zip(srf_times, srf_times[1:], strict=False))
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
        (f"{tokyo}&lat=35.7", 400, "400_002", '"lat" is invalid value: given several times with different values'),
        (f"{tokyo}&lat=35.68120", 400, "400_002", '"lat" is invalid value: given several times with different values'),
        (f"{tokyo}&lon=", 400, "400_002", '"lon" is invalid value: given several times with different values'),
        (f"{tokyo}&lon=139.7671&lon=140", 400, "400_002", '"lon" is invalid value: given several times with different values'),
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
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=UTC))
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
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=UTC))
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
        # the same freshness, counted down from the clock (a second may pass between answers)
        assert 0 <= age - int(again.headers["cache-control"].removeprefix("public, max-age=")) <= 2
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
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=UTC), temp=10.0)
    publish_run(root, "b", datetime(2026, 11, 22, 3, tzinfo=UTC), temp=20.0)
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
