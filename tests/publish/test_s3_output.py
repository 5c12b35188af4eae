"""An output root on a real S3-compatible server (moto's, started here on 127.0.0.1): the objects
of a run carry the headers a CDN serves them with, read back over plain HTTP as a CDN reads
them, and the local staging tree of a cycle killed mid-upload is gone after the next cycle."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from conftest import ROOT
from opscycle import prefect_env
from pointcast import publish as pub
from test_dask_cluster import small_config

BUCKET = "forecasts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's S3 server in a process of its own, with a bucket; yields its endpoint URL and the
    environment that points boto (and so s3fs) at it."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "moto_server"),
                                 "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out)
    try:
        for _ in range(300):
            try:
                httpx.get(f"{endpoint}/moto-api/", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.1)
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
        assert httpx.put(f"{endpoint}/{BUCKET}").status_code == 200  # the bucket
        # ...readable by anyone, as the origin of a CDN that does not sign its requests
        public = {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{BUCKET}/*"}]}
        assert httpx.put(f"{endpoint}/{BUCKET}?policy", json=public).status_code in (200, 204)
        yield endpoint, env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """This process pointed at the server."""
    import s3fs

    endpoint, env = s3_server
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()  # none made before the environment was set
    return endpoint


def test_objects_carry_their_media_type_and_gzip_encoding(s3_env):
    """A run published by `publish_run`: each object's headers as S3 returns them."""
    endpoint = s3_env
    root = f"s3://{BUCKET}/unit"
    staging = pub.new_run_dir(root, "r1")
    paris = json.dumps({"point": "paris"}).encode()
    pub.write_json_tree(staging, {"eu-short/1H/paris.json": paris})
    pub.publish_run(root, staging, "r1", {}, {"ok": True}, True)
    assert not staging.exists()  # gone with the upload
    base = f"{endpoint}/{BUCKET}/unit"
    with httpx.stream("GET", f"{base}/runs/r1/json/eu-short/1H/paris.json.gz") as got:
        raw = b"".join(got.iter_raw())
    assert got.headers["content-encoding"] == "gzip"
    assert got.headers["content-type"] == "application/json"
    assert gzip.decompress(raw) == paris
    plain = httpx.get(f"{base}/runs/r1/json/eu-short/1H/paris.json")
    assert plain.content == paris and "content-encoding" not in plain.headers
    assert httpx.get(f"{base}/current").headers["content-type"] == "text/plain; charset=utf-8"


def test_killed_cycle_leaves_no_staging_and_the_next_one_is_served(s3_server, prefect_harness, tmp_path):
    """A real cycle on `s3://`, SIGKILLed in its upload (the files up, the manifest not), twice;
    then the next cycle: its run is served, over HTTP, with the headers a CDN passes on, and the
    killed cycle's local staging tree is gone. Both are `pointcast run` processes with a
    temporary directory of the test's own (where an object-store root's runs are staged)."""
    endpoint, env = s3_server
    root = f"s3://{BUCKET}/cycle"
    cfg = small_config(tmp_path / "cfg", "threads", root)
    # Five cities: each of the three cycles uploads its run object by object (what is tested
    # here), and the 42 points of the shipped list would only multiply the objects.
    points = cfg.parent / "points" / "europe.csv"
    rows = [r for r in points.read_text().splitlines() if r and not r.startswith("#")]
    points.write_text("\n".join(rows[:6]) + "\n")
    # A short path: the build's fork server puts its socket under TMPDIR, and a socket's path
    # has at most 107 bytes (pytest's own temporary paths grow with its runs' numbers).
    tmp = Path(tempfile.mkdtemp(prefix="pc-s3-"))
    env = {**prefect_env(), **env, "TMPDIR": str(tmp)}
    killed = _run(cfg, {**env, "POINTCAST_FAULT": "kill@upload"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-4000:]
    left = list(tmp.glob(".staging-*"))
    assert len(left) == 1 and list(left[0].glob("json/eu-short/1H/*.json.gz")), left
    base = f"{endpoint}/{BUCKET}/cycle"
    assert httpx.get(f"{base}/current").status_code == 404  # nothing served: no manifest uploaded
    uploaded = _keys(endpoint, "cycle/runs/")
    assert uploaded and not [k for k in uploaded if re.fullmatch(r"cycle/runs/[^/]+/manifest\.json", k)]
    # Killed again: that cycle removed the first one's tree as it started, before making its own.
    again = _run(cfg, {**env, "POINTCAST_FAULT": "kill@upload"})
    assert again.returncode == -signal.SIGKILL, again.stderr[-4000:]
    assert len(list(tmp.glob(".staging-*"))) == 1 and not left[0].exists()

    done = _run(cfg, env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert not list(tmp.glob(".staging-*"))  # swept by the cycle's retention
    shutil.rmtree(tmp, ignore_errors=True)
    run_id = httpx.get(f"{base}/current").text.strip()
    run = f"{base}/runs/{run_id}"
    manifest = httpx.get(f"{run}/manifest.json")
    assert manifest.headers["content-type"] == "application/json"
    assert manifest.json()["run_id"] == run_id
    files = sorted(k for k in _keys(endpoint, f"cycle/runs/{run_id}/json/eu-short/1H/") if k.endswith(".json.gz"))
    assert len(files) > 3, files
    for key in files[:3]:
        with httpx.stream("GET", f"{endpoint}/{BUCKET}/{key}") as got:
            raw = b"".join(got.iter_raw())
        assert got.status_code == 200, key
        assert got.headers["content-encoding"] == "gzip", key
        assert got.headers["content-type"] == "application/json", key
        assert json.loads(gzip.decompress(raw)) == httpx.get(f"{endpoint}/{BUCKET}/{key[:-3]}").json()
    for name, kind in (("index.html", "text/html"), ("viewer/app.js", "text/javascript"),
                       ("viewer/app.css", "text/css")):
        got = httpx.get(f"{run}/json/{name}")
        assert got.status_code == 200 and got.headers["content-type"] == f"{kind}; charset=utf-8", name


def _run(cfg, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``pointcast run`` of ``cfg`` in a process of its own."""
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "pointcast"), "run",
                           "--config", str(cfg)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)


def _keys(endpoint: str, prefix: str) -> list[str]:
    """The keys under ``prefix`` in the bucket, listed over HTTP (ListObjectsV2)."""
    keys, token = [], None
    while True:
        params = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
        text = httpx.get(f"{endpoint}/{BUCKET}", params=params).text
        keys += re.findall(r"<Key>([^<]+)</Key>", text)
        token = (re.findall(r"<NextContinuationToken>([^<]+)</NextContinuationToken>", text) or [None])[0]
        if token is None:
            return keys
