"""gzip answers (``Content-Encoding: gzip``) and the served HTTP behaviour.

Every operation's gzip answer must decode, with Python's gzip, zlib's streaming decoder (what
urllib3 uses), httpx and ``curl --compressed``, to exactly the bytes of its identity answer; an
answer without ``Accept-Encoding`` stays identity. The gzip stream is assembled per request from
deflate blocks cached per run (``compress.Deflated``) and stored blocks, with a combined CRC-32:
that arithmetic is checked against zlib on its own. The last tests drive ``pointcast serve``'s
server on a raw socket: pipelining, ``Connection: close``, HTTP/1.0, WebSocket.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import shutil
import socket
import subprocess
import threading
import time
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import numpy as np
import pytest

from pointcast.grids import grid_for
from pointcast.products.global_wx import STORED_DECIMALS, render_zone
from pointcast.server import create_app
from pointcast.server.compress import Deflated, Piece, accepts_gzip, gzip_chunks
from served import (
    BERLIN,
    HORNSEA,
    MEDIUM,
    PARIS,
    ROME,
    SHORT,
    SS1WX,
    TOKYO,
    WIND,
    call_app,
    live_server,
    point_current,
    publish_run,
)

GLOBAL = "/api/v2/global/wx"
RUN = "20261122T00Z"
LONDON = (51.5074, -0.1278)
# one request per operation and shape: (path, query)
REQUESTS = [
    (MEDIUM, f"latlon={PARIS}&freq=1H"),
    (MEDIUM, f"latlon={ROME}&freq=15min"),
    (MEDIUM, f"latlon={PARIS};{ROME}|{BERLIN}&freq=1H"),  # several points
    (SHORT, f"latlon={BERLIN}&freq=1H"),
    (SHORT, f"latlon={PARIS}&freq=30min"),
    (WIND, f"latlon={HORNSEA}&freq=1H&hubheight=113m"),  # a hub height: its static file
    (WIND, f"latlon={HORNSEA}&freq=1H&hubheight=113.0m"),  # the same file, another echo
    (WIND, f"latlon={HORNSEA}&freq=1H&hubheight=100m"),  # a precomputed height: the ladder's row
    (WIND, f"latlon={HORNSEA}&freq=1H&hubheight=100.0m"),  # the same row, another echo
    (WIND, f"latlon={PARIS}&freq=15min&hubheight=113.5m"),  # interpolated
    (WIND, f"latlon={BERLIN};{HORNSEA}&freq=1H&hubheight=90m"),
    (GLOBAL, f"latlon={LONDON[0]}/{LONDON[1]}"),  # the point's own zone
    (GLOBAL, f"latlon={LONDON[0]}/{LONDON[1]}&tz=Asia/Tokyo"),  # rendered in another zone
    (SS1WX, f"lat={TOKYO[0]}&lon={TOKYO[1]}"),
    ("/catalog", ""),
    ("/openapi.json", ""),
]
_REQUEST_ID = re.compile(rb'"requestId":"[0-9a-f-]{36}"')


def normalised(body: bytes) -> bytes:
    """global/wx and ss1wx carry a fresh requestId per request: compare the rest."""
    return _REQUEST_ID.sub(b'"requestId":"*"', body, count=1)


def publish_global(run: Path, updated: datetime, next_update: datetime) -> None:
    """A global point (London) as products/global_wx.py writes it: its element in its own zone
    and its hourly file, from which the server renders other zones."""
    base = run / "json" / "global"
    (base / "hourly").mkdir(parents=True)
    hours = 342
    rng = np.random.default_rng(8)
    values = {k: np.round(rng.uniform(0, 30, hours), dec or 0).tolist() for k, dec in STORED_DECIMALS.items()}
    values["wx"] = rng.choice([100.0, 200.0, 300.0, 500.0], hours).tolist()  # weather codes
    values["wnddir"] = rng.integers(0, 17, hours).astype(float).tolist()  # 16 sectors, 0 calm
    hourly = {"start": "2026-11-22T00:00:00+00:00", **values}
    (base / "hourly" / "london.json").write_text(json.dumps(hourly, separators=(",", ":")))
    arrays = {k: np.asarray(v)[:, None] for k, v in values.items()}
    element = render_zone([LONDON], np.datetime64("2026-11-22T00:00", "ns"), arrays, ZoneInfo("Europe/London"))[0]
    (base / "london.json").write_bytes(element)
    index = {"product": "global", "updated_time": updated.isoformat(), "next_update": next_update.isoformat(),
             "points": [{"id": "london", "name": "London", "lat": LONDON[0], "lon": LONDON[1],
                         "cell": grid_for("global").cell_key(*LONDON), "time_zone": "Europe/London"}]}
    (base / "index.json").write_text(json.dumps(index))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("gzip-output")
    run = publish_run(root, RUN, datetime(2026, 11, 22, 0, tzinfo=UTC))
    publish_global(run, datetime(2026, 11, 22, 3, 41, 7, tzinfo=UTC),
                   datetime.now(UTC) + timedelta(hours=3))
    point_current(root, RUN)
    return root


@pytest.fixture(scope="module")
def live(tree):
    with live_server(tree) as (client, app, port):
        yield client, app, port


def read_response(f, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response from a socket file (the server always sends Content-Length)."""
    status_line = f.readline()
    if not status_line:
        raise EOFError("connection closed")
    headers = {}
    while (line := f.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    status = int(status_line.split()[1])
    length = 0 if method == "HEAD" or status == 304 else int(headers["content-length"])
    return status, headers, f.read(length)


def request(path: str, query: str, *, method: str = "GET", headers: str = "", version: str = "1.1") -> bytes:
    target = f"{path}?{query}" if query else path
    return f"{method} {target} HTTP/{version}\r\nHost: localhost\r\n{headers}\r\n".encode()


def fetch(port: int, path: str, query: str, headers: str = "", method: str = "GET", body: bytes = b""):
    """One request on its own connection; the raw bytes of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request(path, query, method=method, headers=headers) + body)
        with s.makefile("rb") as f:
            return read_response(f, method)


def gunzip_one_member(data: bytes) -> bytes:
    """zlib's streaming gzip decoder (urllib3's): exactly one member, nothing after it."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(data) + d.flush()
    assert d.eof and d.unused_data == b""
    return out


# --------------------------------------------------------------------------- the arithmetic


def test_deflated_crc_combines_like_zlib():
    rng = random.Random(8)
    for head_len in (0, 1, 7, 300):
        for tail_len in (0, 1, 3, 100, 4095, 65535, 65536, 300_001):
            head = rng.randbytes(head_len)
            tail = bytes(rng.choice(b'{}[],:"0123456789.abc') for _ in range(tail_len))
            piece = Deflated(tail)
            assert piece.after(zlib.crc32(head)) == zlib.crc32(head + tail), (head_len, tail_len)
            assert piece.length == tail_len
            assert zlib.decompressobj(-zlib.MAX_WBITS).decompress(piece.raw) == tail
    for crc in (0, 1, 0xFFFFFFFF, 0x80000000, 0xDEADBEEF):  # every nibble table is reached
        tail = b"x" * 1000
        expected = zlib.crc32(tail, crc)  # zlib continuing from crc = crc of some bytes + tail
        assert Deflated(tail).after(crc) == expected


def test_gzip_chunks_decode_to_the_joined_parts():
    rng = random.Random(9)
    big = Piece(json.dumps([rng.random() for _ in range(20000)]).encode(), ("big",))
    small = Piece(b',"x":1}', ("small",))
    empty = Piece(b"", ("empty",))
    long_literal = rng.randbytes(140_000)  # more than two stored blocks of 65,535 bytes
    cases = [
        [],
        [b""],
        [b"{", b"}"],
        [big],
        [b'{"a":', big, b"}"],
        [big, big, small],
        [b"[", small, b",", empty, b",", big, long_literal, b"]"],
        [long_literal],
        [long_literal, big],
    ]
    cache: dict[tuple[str, ...], Deflated] = {}
    for parts in cases:
        joined = b"".join(parts)
        body = b"".join(gzip_chunks(parts, lambda p: cache.setdefault(p.key, Deflated(p))))
        assert gzip.decompress(body) == joined
        assert gunzip_one_member(body) == joined
    assert set(cache) == {("big",), ("small",), ("empty",)}  # each piece deflated once


@pytest.mark.parametrize("header,gzip_ok", [
    (None, False),
    (b"", False),
    (b"gzip", True),
    (b"GZip", True),
    (b"x-gzip", True),
    (b"gzip, deflate", True),  # httpx
    (b"gzip, deflate, br, zstd", True),  # browsers, curl --compressed
    (b"deflate, br", False),
    (b"identity", False),
    (b"*", True),
    (b"*;q=0", False),
    (b"gzip;q=0", False),
    (b"gzip; q=0.000", False),
    (b"gzip;q=0.001", True),
    (b"gzip;q=1.000", True),
    (b"gzip;q=0.5, identity", False),  # identity preferred
    (b"gzip;q=0.5, identity;q=0.5", True),  # a tie: the smaller answer
    (b"gzip, identity;q=0", True),
    (b"identity;q=0", False),  # nothing acceptable: identity anyway (RFC 9110 12.5.3)
    (b"br, *;q=0.1", True),
    (b"*;q=0.2, identity;q=0.5", False),
    (b"gzip;q=2", False),  # a malformed q: the member is ignored
    (b"gzip;q=nan", False),
    (b"gzip;q=0.5e1", False),
    (b" , ,gzip ; q = 0.7 ", True),
])
def test_accept_encoding(header, gzip_ok):
    assert accepts_gzip(header) is gzip_ok


# --------------------------------------------------------------------------- every operation, live


@pytest.mark.parametrize("path,query", REQUESTS)
def test_gzip_answer_decodes_to_the_identity_answer(live, path, query):
    client, app, port = live
    status, plain_headers, plain = fetch(port, path, query)
    assert status == 200, plain
    assert "content-encoding" not in plain_headers and plain_headers["vary"] == "Accept-Encoding"
    assert int(plain_headers["content-length"]) == len(plain)
    status, headers, body = fetch(port, path, query, "Accept-Encoding: gzip\r\n")
    assert status == 200
    assert headers["content-encoding"] == "gzip" and headers["vary"] == "Accept-Encoding"
    assert int(headers["content-length"]) == len(body) < len(plain)
    assert body[:3] == b"\x1f\x8b\x08"
    assert normalised(gzip.decompress(body)) == normalised(plain)  # byte for byte
    assert normalised(gunzip_one_member(body)) == normalised(plain)
    assert headers["etag"] == plain_headers["etag"][:-1] + '-gzip"'  # another representation, another tag
    for name in ("cache-control", "last-modified", "content-type"):
        assert headers.get(name) == plain_headers.get(name)
    # httpx asks for gzip (and deflate) and decodes
    r = client.get(f"{path}?{query}")
    assert r.headers["content-encoding"] == "gzip" and normalised(r.content) == normalised(plain)
    # HEAD: the gzip answer's headers, no body
    status, head_headers, nothing = fetch(port, path, query, "Accept-Encoding: gzip\r\n", method="HEAD")
    assert status == 200 and nothing == b""
    assert head_headers["content-length"] == headers["content-length"] and head_headers["content-encoding"] == "gzip"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize("path,query", [REQUESTS[0], REQUESTS[2], REQUESTS[7], REQUESTS[10], REQUESTS[11]])
def test_curl_compressed_decodes_to_the_identity_answer(live, path, query):
    _, _, port = live
    url = f"http://127.0.0.1:{port}{path}?{query}"
    _, _, plain = fetch(port, path, query)
    out = subprocess.run(["curl", "-sS", "--compressed", "-D", "-", url], capture_output=True, check=True).stdout
    head, _, decoded = out.partition(b"\r\n\r\n")
    assert b"\r\ncontent-encoding: gzip\r\n" in head.lower()
    assert normalised(decoded) == normalised(plain)


@pytest.mark.parametrize("accept,encoded", [
    ("gzip;q=0", False), ("identity", False), ("identity;q=0.9, gzip;q=0.5", False), ("*", True),
    ("x-gzip", True), ("br", False),
])
def test_q_values_choose_the_encoding(live, accept, encoded):
    _, _, port = live
    status, headers, body = fetch(port, MEDIUM, f"latlon={PARIS}&freq=1H", f"Accept-Encoding: {accept}\r\n")
    assert status == 200 and headers["vary"] == "Accept-Encoding"
    assert (headers.get("content-encoding") == "gzip") is encoded
    assert body.startswith(b"\x1f\x8b") is encoded


def test_conditional_requests_compare_the_chosen_representation(live):
    _, _, port = live
    gz = "Accept-Encoding: gzip\r\n"
    query = f"latlon={PARIS}&freq=1H"
    _, plain, _ = fetch(port, MEDIUM, query)
    _, packed, body = fetch(port, MEDIUM, query, gz)
    status, headers, nothing = fetch(port, MEDIUM, query, gz + f"If-None-Match: {packed['etag']}\r\n")
    assert status == 304 and nothing == b"" and headers["etag"] == packed["etag"]
    assert headers["vary"] == "Accept-Encoding" and "content-encoding" not in headers
    # a cache holding the identity answer does not get a 304 for the gzip one, nor the reverse
    status, _, again = fetch(port, MEDIUM, query, gz + f"If-None-Match: {plain['etag']}\r\n")
    assert status == 200 and again == body
    assert fetch(port, MEDIUM, query, f"If-None-Match: {packed['etag']}\r\n")[0] == 200
    assert fetch(port, MEDIUM, query, gz + f"If-Modified-Since: {packed['last-modified']}\r\n")[0] == 304


@pytest.mark.parametrize("path,query,status", [
    (MEDIUM, "latlon=1,2&freq=2H", 400), (SS1WX, "lat=37.5665&lon=126.978", 403), ("/nowhere", "", 404),
])
def test_errors_stay_identity(live, path, query, status):
    _, _, port = live
    got, headers, body = fetch(port, path, query, "Accept-Encoding: gzip\r\n")
    assert got == status and "content-encoding" not in headers and json.loads(body)["status"] == status


def test_asgi_callable_sends_the_same_gzip_bytes(live, tree):
    _, _, port = live
    app = create_app(tree)
    for path, query in REQUESTS[:9]:
        status, headers, body = call_app(app, "GET", path, query.encode(), [(b"accept-encoding", b"gzip")])
        assert status == 200 and headers[b"content-encoding"] == b"gzip"
        assert body == fetch(port, path, query, "Accept-Encoding: gzip\r\n")[2]  # deterministic bytes


def test_deflate_forms_are_cached_within_the_bound(tree):
    app = create_app(tree, max_cache_bytes=2500)  # about one point file and its deflate form
    gz = [(b"accept-encoding", b"gzip")]
    for _ in range(3):
        for path, query in REQUESTS[:9]:
            plain = call_app(app, "GET", path, query.encode())[2]
            status, _, body = call_app(app, "GET", path, query.encode(), gz)
            assert status == 200 and gzip.decompress(body) == plain
            run = app.current_run()
            assert run.files.size <= 2500
    roomy = create_app(tree)
    call_app(roomy, "GET", MEDIUM, f"latlon={PARIS}&freq=1H".encode(), gz)
    assert sorted(k[0] for k in roomy.current_run().files.entries) == ["gzip", "point"]


# --------------------------------------------------------------------------- HTTP


def test_pipelined_requests_are_answered_in_order(live):
    _, _, port = live
    asks = [
        (MEDIUM, f"latlon={PARIS}&freq=1H", "GET", "Accept-Encoding: gzip\r\n"),
        (SHORT, f"latlon={BERLIN}&freq=1H", "HEAD", ""),
        ("/catalog", "", "GET", ""),
        ("/nowhere", "", "GET", ""),
        (MEDIUM, f"latlon={PARIS}&freq=1H", "GET", ""),
        (MEDIUM, f"latlon={PARIS}&freq=1H", "POST", "Content-Length: 5\r\n"),
    ]
    expected = [fetch(port, path, query, headers, method, b"hello" if method == "POST" else b"")
                for path, query, method, headers in asks]
    payload = b"".join(request(path, query, method=method, headers=headers) + (b"hello" if method == "POST" else b"")
                       for path, query, method, headers in asks)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        with s.makefile("rb") as f:
            got = [read_response(f, method) for _, _, method, _ in asks]
    for (status, headers, body), (status_, headers_, body_) in zip(got, expected, strict=True):
        assert (status, body) == (status_, body_)
        assert {k: v for k, v in headers.items() if k != "date"} == {k: v for k, v in headers_.items() if k != "date"}
    assert [g[0] for g in got] == [200, 200, 200, 404, 200, 405]


def test_many_pipelined_answers_arrive_in_order(live):
    """About 10 MB of answers pipelined by a client that reads late."""
    _, app, port = live
    openapi = bytes(app.openapi[0])
    rome = fetch(port, MEDIUM, f"latlon={ROME}&freq=1H")[2]
    asks = [("/openapi.json", "") if i % 3 else (MEDIUM, f"latlon={ROME}&freq=1H") for i in range(900)]
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        sender = threading.Thread(target=s.sendall, args=(b"".join(request(path, query) for path, query in asks),))
        sender.start()
        time.sleep(0.3)
        with s.makefile("rb") as f:
            for path, _ in asks:
                status, _, body = read_response(f)
                assert status == 200 and body == (openapi if path == "/openapi.json" else rome)
        sender.join()


def test_connection_close_and_http_10(live):
    _, _, port = live
    first = request(MEDIUM, f"latlon={PARIS}&freq=1H")
    closing = request(SHORT, f"latlon={PARIS}&freq=1H", headers="Connection: close\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(first + closing + first)
        with s.makefile("rb") as f:
            assert read_response(f)[0] == 200
            status, headers, _ = read_response(f)
            assert status == 200 and headers["connection"] == "close"
            assert f.read() == b""  # closed: the third request is not answered
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request(MEDIUM, f"latlon={PARIS}&freq=1H", version="1.0"))
        with s.makefile("rb") as f:
            status, headers, body = read_response(f)
            assert status == 200 and headers["connection"] == "close" and json.loads(body)
            assert f.read() == b""


def test_websocket_upgrade_is_not_taken(live):
    """The upgrade is ignored (RFC 9110 7.8): the request is answered over HTTP/1.1 and the
    connection closes, since the bytes after it would be another protocol's."""
    _, _, port = live
    handshake = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request("/catalog", "", headers=handshake) + b"\x81\x05hello")
        with s.makefile("rb") as f:
            status, headers, body = read_response(f)
            assert status == 200 and headers["connection"] == "close" and json.loads(body)
            assert f.read() == b""
    assert httpx.get(f"http://127.0.0.1:{port}/catalog").status_code == 200  # still serving
