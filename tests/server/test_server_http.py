"""The HTTP adapter (``pointcast.server.http``, ``pointcast.server.service``) on a loopback
port, driven by real clients: http.client, and raw sockets where a client library would not
send the bytes (pipelining, malformed lines, slow readers, disconnects).

Most tests run a small ASGI app of their own (``Probe``) whose answers suspend or not, stream,
raise or return without answering, so that each path of the adapter is taken on purpose; the
last ones run ``pointcast serve`` itself (signals, log lines) and the app under uvicorn."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest

from conftest import write_config
from pointcast.server import Server, create_app
from pointcast.server.http import MAX_BODY_BYTES, MAX_TARGET_BYTES, ZERO_COPY
from test_server_gzip import read_response

FILE_DATA = bytes(range(256)) * 16_384  # 4 MiB, every offset's byte known


class Probe:
    """An ASGI app answering by path: ``/fast`` without suspending, ``/slow`` after a sleep,
    ``/stream`` in chunks of unknown total length, ``/big`` 4 MB at once, ``/body`` the size of
    the request body, ``/raise`` and ``/silent`` not at all, ``/file?MODE`` by ASGI's zero-copy
    send of ``FILE_DATA`` (see ``send_file``). It records what it saw."""

    def __init__(self):
        self.events: list[str] = []
        self.tasks: dict[str, object] = {}
        self.disconnected = threading.Event()
        self.file = open(os.memfd_create("probe"), "r+b", buffering=0)  # noqa: SIM115
        self.file.write(FILE_DATA)
        self.positions: list[int] = []

    async def send_file(self, mode: bytes, send) -> None:
        """``all``: offset 0, no count; ``range``: 5,000 bytes from 1,000; ``position``: no
        offset, from byte 10 of the file's position; ``chunked``: 3,000 bytes without a length,
        then an empty body; ``short``: a count the file does not hold."""
        size = len(FILE_DATA)
        length = {b"all": size, b"range": 5000, b"position": size - 10, b"short": 100}.get(mode)
        headers = [(b"content-type", b"application/octet-stream")]
        if length is not None:
            headers.append((b"content-length", b"%d" % length))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if mode == b"all":
            await send({"type": ZERO_COPY, "file": self.file, "offset": 0})
        elif mode == b"range":
            await send({"type": ZERO_COPY, "file": self.file, "offset": 1000, "count": 5000})
        elif mode == b"position":
            self.file.seek(10)
            await send({"type": ZERO_COPY, "file": self.file})
            self.positions.append(self.file.tell())
        elif mode == b"chunked":
            await send({"type": ZERO_COPY, "file": self.file, "offset": 0, "count": 3000, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        else:
            await send({"type": ZERO_COPY, "file": self.file, "offset": size - 50, "count": 100})

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                self.events.append(message["type"])
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        path = scope["path"]
        body = b""
        if path == "/file":
            assert ZERO_COPY in scope["extensions"]
            await self.send_file(scope["query_string"], send)
            return
        if path == "/slow":
            await asyncio.sleep(float(scope["query_string"] or b"0.05"))
            body = b"slow"
        elif path == "/fast":
            body = b"fast %s" % scope["query_string"]
        elif path == "/body":
            message = await receive()
            body = b"%d" % len(message["body"])
        elif path == "/big":
            body = b"x" * 4_000_000
        elif path == "/stream":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            for i in range(3):
                await send({"type": "http.response.body", "body": b"part%d;" % i, "more_body": True})
                await asyncio.sleep(0.01)
            await send({"type": "http.response.body", "body": b""})
            return
        elif path == "/hang":  # answers never; waits for the client to go away
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnected.set()
            return
        elif path == "/bare":  # a whole body without a Content-Length, then headers the adapter refuses
            headers = [(b"x-query", b"a\r\nb" if scope["query_string"] == b"crlf" else b"ok")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"bare"})
            return
        elif path == "/raise":
            raise ValueError("a bug")
        elif path == "/silent":
            return
        self.tasks[path] = asyncio.current_task()  # the task that carries the answer on, if any
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})


@contextmanager
def running(app, **options):
    server = Server(app, "127.0.0.1", 0, **options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(30), "server did not start"
    try:
        yield server
    finally:
        server.stop()
        thread.join(15)
        assert not thread.is_alive()


@pytest.fixture(scope="module")
def probe():
    app = Probe()
    with running(app, keep_alive_timeout=0.5) as server:
        yield app, server


def raw(method: str, target: str, headers: str = "", body: bytes = b"", version: str = "1.1") -> bytes:
    return f"{method} {target} HTTP/{version}\r\nHost: localhost\r\n{headers}\r\n".encode() + body


def exchange(port: int, payload: bytes, count: int, methods=None) -> tuple[list, bytes]:
    """Send ``payload`` at once, read ``count`` answers and whatever follows until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        with s.makefile("rb") as f:
            answers = [read_response(f, (methods or ["GET"] * count)[i]) for i in range(count)]
            s.settimeout(2)
            rest = f.read()
    return answers, rest


def error(answer, status: int = 400, code: str = "400_002") -> str:
    got, headers, body = answer
    assert got == status and headers["content-type"] == "application/json" and headers["cache-control"] == "no-store"
    parsed = json.loads(body)
    assert set(parsed) == {"status", "code", "message"} and (parsed["status"], parsed["code"]) == (status, code)
    return parsed["message"]


def test_pipelined_answers_keep_their_order_and_only_a_suspending_answer_is_a_task(probe):
    app, server = probe
    asks = ["/slow", "/fast?1", "/slow", "/fast?2", "/fast?3"]
    answers, _ = exchange(server.port, b"".join(raw("GET", a) for a in asks) + raw("HEAD", "/fast?4"),
                          6, ["GET"] * 5 + ["HEAD"])
    assert [a[2] for a in answers] == [b"slow", b"fast 1", b"slow", b"fast 2", b"fast 3", b""]
    assert answers[5][1]["content-length"] == "6"  # HEAD: the GET's length, no body
    assert app.tasks["/fast"] is None and app.tasks["/slow"] is not None
    assert all("date" in a[1] and "connection" not in a[1] for a in answers)


def test_connection_close_http_10_and_keep_alive_timeout(probe):
    _, server = probe
    answers, rest = exchange(server.port, raw("GET", "/fast?a", "Connection: close\r\n") + raw("GET", "/fast?b"), 1)
    assert answers[0][2] == b"fast a" and answers[0][1]["connection"] == "close" and rest == b""
    answers, rest = exchange(server.port, raw("GET", "/slow", version="1.0"), 1)
    assert answers[0][2] == b"slow" and answers[0][1]["connection"] == "close" and rest == b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(raw("GET", "/fast"))
        f = s.makefile("rb")
        assert read_response(f)[2] == b"fast "
        started = time.monotonic()
        assert f.read() == b""  # idle: closed after keep_alive_timeout
        assert 0.2 < time.monotonic() - started < 3
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n")  # a request stalled halfway
        assert s.recv(100) == b""


def test_request_bodies_are_read_whole_and_the_next_request_follows(probe):
    _, server = probe
    chunked = "Transfer-Encoding: chunked\r\n"
    payload = (raw("POST", "/body", "Content-Length: 5\r\n", b"hello") + raw("POST", "/fast?x", "Content-Length: 3\r\n", b"abc")
               + raw("PUT", "/body", chunked, b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n") + raw("GET", "/fast?y"))
    answers, _ = exchange(server.port, payload, 4)
    assert [a[2] for a in answers] == [b"5", b"fast x", b"7", b"fast y"]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:  # 100-continue
        s.sendall(raw("POST", "/body", "Content-Length: 2\r\nExpect: 100-continue\r\n"))
        f = s.makefile("rb")
        assert f.readline() == b"HTTP/1.1 100 Continue\r\n" and f.readline() == b"\r\n"
        s.sendall(b"ok")
        assert read_response(f)[2] == b"2"


@pytest.mark.parametrize("payload,message", [
    (b"GET /fast\x00 HTTP/1.1\r\n\r\n", "malformed HTTP request"),
    (b"NOT-HTTP\r\n\r\n", "malformed HTTP request"),
    (raw("GET", "/fast?" + "a" * MAX_TARGET_BYTES), "request target of 64 KiB or more"),
    (raw("GET", "/fast", "".join(f"x-{i}: {i}\r\n" for i in range(101))), "request headers over"),
    (raw("GET", "/fast", "x-big: " + "a" * 70_000 + "\r\n"), "request headers over"),
    (raw("POST", "/body", f"Content-Length: {MAX_BODY_BYTES + 1}\r\n"), "request body over"),
    (raw("POST", "/body", "Transfer-Encoding: chunked\r\n", b"%x\r\n" % (MAX_BODY_BYTES + 1) + b"a" * (MAX_BODY_BYTES + 1)),
     "request body over"),
], ids=["nul", "no-version", "long-target", "many-headers", "long-header", "content-length", "chunked-body"])
def test_bad_requests_get_the_json_400_after_the_answers_before_them(probe, payload, message):
    _, server = probe
    answers, rest = exchange(server.port, raw("GET", "/slow") + raw("GET", "/fast?1") + payload, 3)
    assert [a[2] for a in answers[:2]] == [b"slow", b"fast 1"]
    assert error(answers[2]).startswith(message) and answers[2][1]["connection"] == "close"
    assert rest == b""


def test_a_slow_reader_holds_back_reading_and_gets_every_byte(probe):
    """64 pipelined 4 MB answers: the server stops answering (and reading) while the client
    does not read, and every byte arrives in order once it does."""
    _, server = probe
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(b"".join(raw("GET", "/big") + raw("GET", f"/fast?{i}") for i in range(32)))
        time.sleep(0.5)
        (connection,) = [c for c in server.connections if not c.idle()]
        assert connection._writing_paused and connection._reading_paused and connection._queue
        f = s.makefile("rb")
        for i in range(32):
            assert read_response(f)[2] == b"x" * 4_000_000
            assert read_response(f)[2] == b"fast %d" % i


def test_the_adapter_frames_a_body_without_a_length_and_refuses_a_header_with_a_line_break(probe):
    _, server = probe
    answers, _ = exchange(server.port, raw("GET", "/bare") + raw("GET", "/bare"), 2)
    assert [(a[1]["content-length"], a[1]["x-query"], a[2]) for a in answers] == [("4", "ok", b"bare")] * 2
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/bare?crlf")  # a header holding CR LF would split the head: the JSON 500
    response = conn.getresponse()
    assert (response.status, json.loads(response.read())["code"]) == (500, "500_001")
    conn.close()


def test_zero_copy_sends_are_framed_and_ordered_like_bodies(probe):
    """ASGI's zero-copy send: a whole file, a range, from the file's position (which moves),
    HEAD, a body without a length (chunked), pipelined between ordinary answers; a slow reader
    gets every byte in order (what ``sendfile`` does not take goes through the transport); a
    count the file does not hold ends the connection after the bytes there are."""
    app, server = probe
    asks = [("GET", "/file?all"), ("GET", "/fast?1"), ("GET", "/file?range"), ("HEAD", "/file?range"),
            ("GET", "/file?position"), ("GET", "/fast?2")]
    answers, _ = exchange(server.port, b"".join(raw(m, t) for m, t in asks), len(asks), [m for m, _ in asks])
    assert [a[2] for a in answers] == [FILE_DATA, b"fast 1", FILE_DATA[1000:6000], b"", FILE_DATA[10:], b"fast 2"]
    assert answers[3][1]["content-length"] == "5000" and app.positions[-1] == len(FILE_DATA)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/file?chunked")
    response = conn.getresponse()
    assert response.getheader("transfer-encoding") == "chunked" and response.read() == FILE_DATA[:3000]
    conn.close()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(b"".join(raw("GET", "/file?all") + raw("GET", f"/fast?{i}") for i in range(8)))
        time.sleep(0.3)
        f = s.makefile("rb")
        for i in range(8):
            assert read_response(f)[2] == FILE_DATA
            assert read_response(f)[2] == b"fast %d" % i
    _, rest = exchange(server.port, raw("GET", "/file?short") + raw("GET", "/fast?never"), 0)
    head, _, body = rest.partition(b"\r\n\r\n")
    assert b"content-length: 100" in head and body == FILE_DATA[-50:]  # cut short, then closed


def test_streamed_answers_are_chunked_and_errors_are_json_500(probe):
    _, server = probe
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/stream")
    response = conn.getresponse()
    assert response.getheader("transfer-encoding") == "chunked" and response.read() == b"part0;part1;part2;"
    for path in ("/raise", "/silent"):
        conn.request("GET", path)
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())["code"]) == (500, "500_001")
    conn.request("GET", "/fast?still")  # the same connection goes on
    assert conn.getresponse().read() == b"fast still"
    conn.close()
    answers, rest = exchange(server.port, raw("GET", "/stream", version="1.0"), 0)  # HTTP/1.0: ends at the close
    assert rest.endswith(b"\r\n\r\npart0;part1;part2;") and b"transfer-encoding" not in rest.lower()


def test_a_client_gone_mid_answer_is_told_and_leaves_the_server_serving(probe):
    app, server = probe
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(raw("GET", "/hang"))
        time.sleep(0.1)
    assert app.disconnected.wait(5)  # receive() said http.disconnect
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(raw("GET", "/slow", "", b"") + raw("GET", "/big"))
        s.recv(10)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/fast?after")
    assert conn.getresponse().read() == b"fast after"


def test_graceful_shutdown_finishes_answers_and_runs_the_lifespan():
    app = Probe()
    with running(app) as server:
        assert app.events == ["lifespan.startup"]
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        busy = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        busy.sendall(raw("GET", "/slow?0.5") + raw("GET", "/fast?queued"))
        time.sleep(0.2)
        server.stop()
        f = busy.makefile("rb")
        assert [read_response(f)[2] for _ in range(2)] == [b"slow", b"fast queued"]
        assert f.read() == b"" and idle.recv(10) == b""
        time.sleep(0.2)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server.port), timeout=2)
    assert app.events == ["lifespan.startup", "lifespan.shutdown"]
    idle.close()
    busy.close()


def test_pointcast_serve_logs_and_stops_on_sigterm(tmp_path):
    """The CLI's server: its log lines, the open-service warning, a JSON answer, SIGTERM."""
    config = write_config(tmp_path, samples=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "pointcast.cli", "serve", "--config", str(config), "--port", str(port)],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    try:
        log = []
        while not any("listening on port" in line for line in log):
            line = proc.stderr.readline()
            assert line, "".join(log)
            log.append(line)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/V1/forecast/short-range/common?latlon=48.85,2.35&freq=1H")
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())["code"]) == (404, "404_002")  # nothing published
        proc.send_signal(signal.SIGTERM)
        out = "".join(log) + proc.stderr.read()
        assert proc.wait(20) == 0
    finally:
        proc.kill()
    assert f"serving {(tmp_path / 'output').resolve()} on http://127.0.0.1:{port}" in out
    assert "no [server.api_keys] configured" in out and "shutting down" in out and "stopped" in out


def test_the_app_runs_unchanged_under_uvicorn(tmp_path, monkeypatch):
    """The alternative docs/api.md gives: ``uvicorn --factory pointcast.server.service:app_from_config``."""
    import uvicorn

    monkeypatch.setenv("POINTCAST_CONFIG", str(write_config(tmp_path, samples=False)))
    config = uvicorn.Config("pointcast.server.service:app_from_config", factory=True, host="127.0.0.1", port=0,
                            loop="uvloop", http="httptools", log_level="warning")
    sock = config.bind_socket()
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    ours = create_app(tmp_path / "output")
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline
            time.sleep(0.05)
        with running(ours) as own:
            for path in ("/openapi.json", "/catalog?x=1", "/V1/forecast/short-range/common?latlon=48.85,2.35&freq=1H"):
                got = []
                for port in (sock.getsockname()[1], own.port):
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    conn.request("GET", path)
                    response = conn.getresponse()
                    headers = {k.lower(): v for k, v in response.getheaders() if k.lower() not in ("date", "server")}
                    got.append((response.status, headers, response.read()))
                    conn.close()
                assert got[0] == got[1], path
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
