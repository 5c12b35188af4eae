"""server_vs_nginx: the thin server against nginx serving the same bytes, both loaded by wrk.

Both listen on 127.0.0.1 and run one process (``pointcast serve`` is one process;
nginx gets ``worker_processes 1``); wrk uses 2 threads and 64 connections and sends no
``Accept-Encoding``, so both serve the identity bytes. nginx and wrk are Debian packages
(``make bench-deps``); without them the figure is skipped.

The two are measured side by side: both stay up, and ``rounds`` rounds each load the server
and then nginx, the order turned round every other round (server, nginx; nginx, server; ...).
The figure is the median of the rounds' ratios. On a shared machine the speed a process gets
drifts by a factor of 2-3 within minutes, a Python process more than nginx: one server run
followed by one nginx run measured that drift as often as the servers.

``gzip_content_encoding``: each side is asked for the 1-point answer with ``Accept-Encoding:
gzip``; it counts only if the answer says ``Content-Encoding: gzip``, and such an answer that
does not decode to exactly the identity bytes stops the bench.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

NGINX_CONF = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
    default_type application/json;
    server {{
        listen 127.0.0.1:{port};
        location / {{ root {prefix}/html; gzip_static on; }}
    }}
}}
"""


def missing_tools() -> list[str]:
    return [t for t in ("nginx", "wrk") if shutil.which(t) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


@contextlib.contextmanager
def running(args: list[str], ready_url: str, log: Path):
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait(ready_url, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get(url: str, accept_gzip: bool = False) -> tuple[bytes, dict]:
    """The body as sent (urllib decodes nothing) and the headers (lower-case names)."""
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if accept_gzip else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read(), {k.lower(): v for k, v in r.headers.items()}


def serves_gzip(url: str, identity: bytes) -> bool:
    """Whether ``url`` answers ``Accept-Encoding: gzip`` with ``Content-Encoding: gzip`` bytes
    that decode to exactly ``identity`` (RuntimeError when they say gzip and do not)."""
    body, headers = get(url, accept_gzip=True)
    if headers.get("content-encoding") != "gzip":
        return False
    if gzip.decompress(body) != identity:
        raise RuntimeError(f"{url}: the gzip answer does not decode to the identity answer")
    return True


# Each request's latitude text gets digits of its own (far below the grid's resolution: the
# same cell, point and forecast), so that no two requests share a query text.
UNIQUE_LATITUDES = """
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
local n = 0
function request()
  n = n + 1
  return wrk.format(nil, "{prefix}000" .. id .. string.format("%07d", n) .. "{suffix}")
end
"""


def wrk(url: str, seconds: int, script: Path | None = None) -> dict:
    """Requests/s and p99 latency (ms) of ``url`` at 64 connections (``script``: wrk's Lua)."""
    args = ["wrk", "-t2", "-c64", f"-d{seconds}s", "--latency", url]
    out = subprocess.run(args + (["-s", str(script)] if script else []),
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"wrk {url}: {errors.group(1)} non-2xx responses")
    return {"rps": rps, "p99_ms": p99}


def measure(config: Path, points: list[tuple[float, float]], work: Path, seconds: int,
            rounds: int = 3) -> dict:
    """Figures of the server (1 and 10 points, short-range/common hourly) and of nginx on the 1-point bytes,
    in ``rounds`` alternating rounds; ``ratios`` are each round's server / nginx requests/s.
    ``server_1_unique``: the 1-point request with a query text never seen before, so that the
    server answers it anew every time instead of from the run's kept answers."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    path = "/V1/forecast/short-range/common"
    lat, lon = points[0]
    one = f"{base}{path}?latlon={lat},{lon}&freq=1H"
    unique = work / "unique.lua"
    unique.write_text(UNIQUE_LATITUDES.replace("{prefix}", f"{path}?latlon={lat}")
                      .replace("{suffix}", f",{lon}&freq=1H"))
    ten = (f"{base}{path}?latlon="
           + ";".join(f"{la},{lo}" for la, lo in points[:10]) + "&freq=1H")
    serve = [sys.executable, "-m", "pointcast.cli", "serve", "--config", str(config),
             "--host", "127.0.0.1", "--port", str(port)]
    out: dict = {"server_1": [], "nginx_1": [], "ratios": []}
    with running(serve, f"{base}/catalog", work / "server.log"):
        body, _ = get(one)
        out["server_gzip"] = serves_gzip(one, body)
        prefix = work / "nginx"
        shutil.rmtree(prefix, ignore_errors=True)
        (prefix / "html").mkdir(parents=True)
        (prefix / "tmp").mkdir()
        (prefix / "html" / "one.json").write_bytes(body)
        (prefix / "html" / "one.json.gz").write_bytes(gzip.compress(body, mtime=0))
        nport = free_port()
        (prefix / "nginx.conf").write_text(NGINX_CONF.format(prefix=prefix, port=nport))
        for p in prefix.rglob("*"):  # nginx workers run as an unprivileged user
            p.chmod(0o755 if p.is_dir() else 0o644)
        static = f"http://127.0.0.1:{nport}/one.json"
        nginx = ["nginx", "-p", str(prefix), "-c", str(prefix / "nginx.conf")]
        with running(nginx, static, work / "nginx.log"):
            same, _ = get(static)
            if same != body:
                raise RuntimeError("nginx does not serve the server's bytes")
            out["nginx_gzip"] = serves_gzip(static, body)
            for r in range(rounds):
                order = (("server_1", one), ("nginx_1", static))
                for key, url in order if r % 2 == 0 else order[::-1]:
                    out[key].append(wrk(url, seconds))
                out["ratios"].append(out["server_1"][-1]["rps"] / out["nginx_1"][-1]["rps"])
        out["server_10"] = wrk(ten, seconds)
        out["server_1_unique"] = wrk(one, seconds, unique)
    out["bytes_1"] = len(body)
    return out
