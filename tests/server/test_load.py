"""The server under load while runs are published underneath it.

``pointcast serve`` (its HTTP adapter on uvloop and httptools, in its own process, reading API keys
from the configuration) holds 200 concurrent keep-alive connections for 20 s
(``POINTCAST_LOAD_SECONDS`` sets it; docs/api.md's "Capacity" was measured over 60 s) while
this test republishes two different runs alternately through ``pointcast.publish`` (staging directory,
``publish_run``, atomic swap of ``current``). Every answer must be byte-equal to the answer of
one of the two runs for the same request, with that run's ETag (no answer mixes two runs);
there must be no error at all, and the server's RSS must stay flat after warm-up.

The figures (requests/s, latency percentiles, RSS) are logged; docs/api.md "Capacity" quotes
them. It checks correctness under sustained load, not a speed target (those live in bench/).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil
import pytest
import uvloop

from conftest import write_config
from pointcast import publish
from pointcast.config import api_key_sha256
from served import BERLIN, HORNSEA, MADRID, MEDIUM, PARIS, ROME, SHORT, SS1WX, WIND, publish_run

log = logging.getLogger(__name__)

# Seconds under load: forty publications underneath, and the RSS watched for twice the warm-up
# after it. Both processes take a core each for as long; the suite's share is kept short.
DURATION = float(os.environ.get("POINTCAST_LOAD_SECONDS", "20"))
CONNECTIONS = 200
SWAP_EVERY = 0.5  # seconds between publications
WARM_UP = min(10.0, DURATION / 3)  # seconds before the RSS baseline is taken
RSS_GROWTH_LIMIT = 32 * 1024 * 1024  # bytes above the post-warm-up baseline
KEY = "load-test-key-7f3a"
RUNS = {"20261122T00Z": (datetime(2026, 11, 22, 0, tzinfo=UTC), 10.0),
        "20261122T03Z": (datetime(2026, 11, 22, 3, tzinfo=UTC), 14.0)}
# the requests of the mix: every operation, precomputed and interpolated heights, several
# points, sub-hourly steps, the catalog and a 404_002 (a point without forecast)
REQUESTS = [
    (MEDIUM, f"latlon={PARIS}&freq=1H"),
    (MEDIUM, f"latlon={BERLIN};{PARIS};{ROME}&freq=1H"),
    (MEDIUM, f"latlon={ROME}&freq=15min"),
    (SHORT, f"latlon={BERLIN}&freq=30min"),
    (SHORT, f"latlon={PARIS}|{ROME}&freq=1H"),
    (WIND, f"latlon={HORNSEA}&freq=1H&hubheight=100m"),
    (WIND, f"latlon={BERLIN};{HORNSEA}&freq=1H&hubheight=90m"),
    (WIND, f"latlon={PARIS}&freq=15min&hubheight=113.5m"),
    (SS1WX, "lat=35.6812&lon=139.7671"),
    (SS1WX, "lat=43.0618&lon=141.3545"),
    ("/catalog", ""),
    (MEDIUM, f"latlon={MADRID}&freq=1H"),
]
_REQUEST_ID = re.compile(rb'"requestId":"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"')


def normalised(body: bytes) -> bytes:
    """ss1wx's requestId is fresh per request: compare the rest."""
    return _REQUEST_ID.sub(b'"requestId":"*"', body, count=1)


def run_files(run_id: str, basetime: datetime, temp: float, scratch: Path) -> dict[str, bytes]:
    """A run's JSON tree (relative path -> bytes), written by the server tests' fixture writer (served.py)."""
    tree = publish_run(scratch, run_id, basetime, temp=temp) / "json"
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def republish(root: Path, run_id: str, files: dict[str, bytes]) -> None:
    """One publication as the cycle makes it: stage, write the tree, publish_run (the swap)."""
    staging = publish.new_run_dir(root, run_id)
    publish.write_json_tree(staging, files, mode="plain")
    publish.publish_run(root, staging, run_id, {"products": {}}, {"ok": True}, ok=True)


async def keep_alive_get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         target: bytes) -> tuple[int, dict[str, str], bytes]:
    """One GET on a keep-alive HTTP/1.1 connection (the server always sends Content-Length).
    httpx's pool costs far more CPU per request than the server under test at 200 connections."""
    writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: " + KEY.encode() + b"\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head[:-4].decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split(" ")[1]), headers, await reader.readexactly(int(headers["content-length"]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


@pytest.fixture
def served(tmp_path):
    """`pointcast serve --config` in its own process over an output root with both runs."""
    config = write_config(tmp_path / "config", samples=False)
    config.write_text(config.read_text() + f'\n[server.api_keys.load]\nsha256 = "{api_key_sha256(KEY.encode())}"\n'
                      "rate_limit = 1000000\nburst = 1000000\n")
    root = tmp_path / "config" / "output"
    files = {run_id: run_files(run_id, basetime, temp, tmp_path / "scratch") for run_id, (basetime, temp) in RUNS.items()}
    for run_id in RUNS:
        republish(root, run_id, files[run_id])
    port = free_port()
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    server = subprocess.Popen(
        [sys.executable, "-m", "pointcast.cli", "serve", "--config", str(config), "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read().decode()
            try:
                if httpx.get(base + "/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        yield base, root, files, server
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stderr.close()


def expected_answers(base: str, root: Path, files: dict[str, dict[str, bytes]]) -> dict[str, list[tuple[int, bytes, str]]]:
    """Each run's (status, body, ETag) for every request of the mix, with nothing else going on."""
    answers = {}
    # identity, as the load's own requests (a gzip answer is another representation, another ETag)
    with httpx.Client(base_url=base, headers={"X-API-Key": KEY, "Accept-Encoding": "identity"}) as client:
        for run_id in RUNS:
            republish(root, run_id, files[run_id])
            answers[run_id] = []
            for path, query in REQUESTS:
                r = client.get(f"{path}?{query}")
                answers[run_id].append((r.status_code, normalised(r.content), r.headers.get("etag", "")))
    return answers


def test_200_connections_held_while_runs_are_published(served):
    base, root, files, server = served
    expected = expected_answers(base, root, files)
    a, b = (expected[run_id] for run_id in RUNS)
    for i, (path, _) in enumerate(REQUESTS):  # the two runs answer differently (except the 404)
        assert a[i][0] == b[i][0] == (404 if i == len(REQUESTS) - 1 else 200), (path, a[i][:1], b[i][:1])
        assert (a[i][1] != b[i][1] and a[i][2] != b[i][2]) or a[i][0] == 404, path
    assert len({etag for answers in expected.values() for _, _, etag in answers if etag}) == 2 * (len(REQUESTS) - 1)

    process = psutil.Process(server.pid)
    stop = threading.Event()
    swaps = 0
    rss: list[tuple[float, int]] = []
    connections: list[int] = []
    failures: list[str] = []

    def publisher() -> None:
        nonlocal swaps
        run_ids = list(RUNS)
        while not stop.wait(SWAP_EVERY):
            try:
                republish(root, run_ids[swaps % 2], files[run_ids[swaps % 2]])
                swaps += 1
            except Exception as exc:  # a failed publication is a failure of the test, reported below
                failures.append(f"publication failed: {exc!r}")
                return

    def sampler(start: float) -> None:
        while not stop.wait(1.0):
            rss.append((time.monotonic() - start, process.memory_info().rss))
            connections.append(sum(1 for c in process.net_connections("tcp") if c.status == psutil.CONN_ESTABLISHED))

    async def load() -> tuple[list[float], dict[str, int]]:
        latencies: list[float] = []
        by_run = dict.fromkeys(RUNS, 0)
        targets = [f"{path}?{query}".encode() for path, query in REQUESTS]
        deadline = time.monotonic() + DURATION

        async def worker(n: int) -> None:
            reader, writer = await asyncio.open_connection(host, port)  # one keep-alive connection each
            try:
                for i in itertools.count(n):
                    if time.monotonic() >= deadline or len(failures) >= 20:
                        return
                    index = i % len(REQUESTS)
                    t0 = time.perf_counter()
                    try:
                        status, headers, body = await asyncio.wait_for(keep_alive_get(reader, writer, targets[index]), 30)
                    except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, ValueError) as exc:
                        failures.append(f"{REQUESTS[index]}: {exc!r}")
                        return
                    latencies.append(time.perf_counter() - t0)
                    got = (status, normalised(body), headers.get("etag", ""))
                    for run_id in RUNS:
                        if got == expected[run_id][index]:
                            by_run[run_id] += 1
                            break
                    else:
                        failures.append(f"{REQUESTS[index]}: {status} {headers.get('etag')} "
                                        f"is the answer of neither run: {body[:200]!r}")
            finally:
                writer.close()

        await asyncio.gather(*(worker(n) for n in range(CONNECTIONS)))
        return latencies, by_run

    host, port = base.removeprefix("http://").split(":")
    start = time.monotonic()
    threads = [threading.Thread(target=publisher, daemon=True), threading.Thread(target=sampler, args=(start,), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        latencies, by_run = uvloop.run(load())
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    elapsed = time.monotonic() - start

    assert failures == [], failures[:5]
    assert server.poll() is None, "the server survived"
    latencies.sort()
    total = len(latencies)
    baseline = next(value for t, value in rss if t >= WARM_UP)
    peak = max(value for t, value in rss if t >= WARM_UP)
    log.warning(
        "load: %d connections, %.0f s, %d requests, %.0f requests/s, p50 %.1f ms, p99 %.1f ms, max %.1f ms; "
        "%d publications; answers by run %s; server RSS %.1f MiB after warm-up, peak %.1f MiB, final %.1f MiB; "
        "established connections (max) %d",
        CONNECTIONS, elapsed, total, total / elapsed, 1000 * percentile(latencies, 0.5),
        1000 * percentile(latencies, 0.99), 1000 * latencies[-1], swaps, by_run, baseline / 2**20, peak / 2**20,
        rss[-1][1] / 2**20, max(connections),
    )
    assert elapsed >= DURATION
    assert max(connections) >= CONNECTIONS, "200 connections held at once"
    assert swaps >= DURATION / 3, swaps  # a publication every 3 s at least (each one fsyncs a whole tree)
    assert min(by_run.values()) > total / 10, by_run  # both runs were served, in turn
    assert peak - baseline < RSS_GROWTH_LIMIT, [(round(t), v // 2**20) for t, v in rss]
