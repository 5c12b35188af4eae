"""How old what is served is, and how a cycle's outcome reaches the operator: real Prefect
cycles on the sample source (run A; run B with IFS truncated, so that eu-medium and japan are
carried over from A; a cycle that publishes nothing), a real Prefect automation posting to a
webhook on the Degraded and Failed states, /catalog and /metrics through the real server, and
the status page in Chromium (docs/operations.md)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from opscycle import EU_POINTS, HEAD, JAPAN_POINTS
from test_model_drop import sample_run, truncate
from test_viewer import browser, needs_chromium  # noqa: F401 (browser: the module's fixture)

INIT_A, INIT_B = "2026-11-20T00:00Z", "2026-11-20T12:00Z"
BASE_A = datetime(2026, 11, 20, 0, tzinfo=UTC)
BASE_B = datetime(2026, 11, 20, 12, tzinfo=UTC)
NOW = BASE_B + timedelta(hours=2)  # the served clock: eu-short 2 h old, the carried products 14 h
PERIOD_H = 3  # [schedule] every_hours, the default
PRODUCTS = {"eu-short": """
[products.eu-short]
points = "points/europe.csv"
models = ["icon-eu"]
freqs = ["1H"]
horizon_hours = 72
""", "eu-medium": """
[products.eu-medium]
points = "points/europe.csv"
models = ["icon-eu", "ifs"]
freqs = ["1H"]
horizon_hours = 240
""", "japan": """
[products.japan]
points = "points/japan.csv"
models = ["msm", "ifs"]
freqs = ["1H"]
horizon_hours = 240
"""}
# What the lead's build records for an element served degraded (docs/contracts.md, "degraded").
DEGRADED = {"eu-short": {"wind_gust_10m": {"lead_times": [[0, 6], [48, 72]], "reason": "icon-eu has no gusts there"}}}


def config(dest: Path, cache: Path, init: str, products=tuple(PRODUCTS)) -> Path:
    (dest / "points").mkdir(parents=True, exist_ok=True)
    (dest / "points" / "europe.csv").write_text(EU_POINTS)
    (dest / "points" / "japan.csv").write_text(JAPAN_POINTS)
    path = dest / "pointcast.toml"
    # ICON-EU in DWD's legacy lat/lon tree (every field of its table: it ends eu-short's blend)
    path.write_text(HEAD.format(keep_runs=8, output="", init=init)
                    .replace("scale = 16\n", 'scale = 32\nicon_layout = "legacy"\n', 1)
                    + "\n[models.icon-eu]\nsource = \"sample\"\n" + "".join(PRODUCTS[p] for p in products))
    (dest / "output").mkdir(exist_ok=True)
    if not (dest / "output" / "cache").exists():
        (dest / "output" / "cache").symlink_to(cache)
    return path


class Webhook(BaseHTTPRequestHandler):
    """What the automation's notification block posts, kept in ``received``."""

    received: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        Webhook.received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def notification(flow_run_name: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [m for m in Webhook.received if m["text"].startswith(flow_run_name + ":")]
        if found:
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"no notification for {flow_run_name}: {Webhook.received}")


@pytest.fixture(scope="module")
def world(tmp_path_factory, prefect_harness):
    """The automation of docs/operations.md posting to a local webhook; run A, then run B
    (IFS truncated: eu-medium and japan, which IFS ends, carried), then a cycle publishing
    nothing (its only product needs IFS). The served manifest then gets a degraded element."""
    from prefect.automations import Automation, EventTrigger, Posture, SendNotification
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    from pointcast.flows.cycle import cycle
    from pointcast.outcome import last_cycle

    hook = HTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    block = CustomWebhookNotificationBlock(name="ops", url=f"http://127.0.0.1:{hook.server_port}/pointcast",
                                           json_data={"text": "{{body}}"})
    Automation(
        name="pointcast-cycle-not-clean",
        trigger=EventTrigger(expect={"prefect.flow-run.Degraded", "prefect.flow-run.Failed"},
                             match_related={"prefect.resource.role": "flow",
                                            "prefect.resource.name": "pointcast-cycle"},
                             posture=Posture.Reactive, threshold=1),
        actions=[SendNotification(block_document_id=block.save("pointcast-ops", overwrite=True),
                                  subject="pointcast: cycle {{ flow_run.state.name }}",
                                  body="{{ flow_run.name }}: {{ flow_run.state.name }}: {{ flow_run.state.message }}")],
    ).create()

    base = tmp_path_factory.mktemp("fresh")
    cache = base / "cache"
    cache.mkdir()
    cfg = config(base / "site", cache, INIT_A)
    root = cfg.parent / "output"
    # each cycle runs an hour after its runs start (what it records having found upstream)
    a = cycle(str(cfg), BASE_A + timedelta(hours=1), return_state=True)
    after_a = last_cycle(root)
    truncate(sample_run(config(base / "b", cache, INIT_B), "ifs")[5])
    cfg.write_text(cfg.read_text().replace(INIT_A, INIT_B))
    b = cycle(str(cfg), BASE_B + timedelta(hours=1), return_state=True)
    failing = config(base / "failing", cache, INIT_B, products=("eu-medium",))
    failed = cycle(str(failing), BASE_B + timedelta(hours=1), return_state=True)
    run_b = b.result()
    for manifest_path in (root / "runs" / run_b / "manifest.json", root / "runs" / run_b / "json" / "manifest.json"):
        manifest = json.loads(manifest_path.read_text())
        manifest_path.write_text(json.dumps({**manifest, "degraded": DEGRADED}))
    yield {"root": root, "a": a, "after_a": after_a, "b": b, "failed": failed,
           "failed_root": failing.parent / "output", "run_a": a.result(), "run_b": run_b}
    hook.shutdown()


def _flow_run(state):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(state.state_details.flow_run_id)


def test_a_cycle_with_a_dropped_model_ends_degraded_and_notifies(world):
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    from pointcast.outcome import last_cycle

    run_a, run_b = world["run_a"], world["run_b"]
    assert world["a"].name == "Completed" and world["after_a"]["status"] == "published"
    assert world["after_a"]["run_id"] == run_a and world["after_a"]["message"] == "complete"

    b = world["b"]
    assert b.is_completed() and b.name == "Degraded" and b.result() == run_b != run_a
    assert "ifs dropped (ifs: decode failed" in b.message
    assert f"eu-medium carried from {run_a}" in b.message and f"japan carried from {run_a}" in b.message
    flow_run = _flow_run(b)
    assert flow_run.state.name == "Degraded" and flow_run.state.type.value == "COMPLETED"
    with get_client(sync_client=True) as client:
        events = client.read_events(EventFilter(event=EventNameFilter(name=["prefect.flow-run.Degraded"]),
                                                resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run.id}"])), limit=50)
    assert len(events.events) == 1
    # the automation of docs/operations.md notified the webhook
    assert notification(flow_run.name)["text"] == f"{flow_run.name}: Degraded: {b.message}"

    outcome = last_cycle(world["root"])
    assert outcome["status"] == "degraded" and outcome["run_id"] == run_b
    assert list(outcome["dropped"]) == ["ifs"] and outcome["carried"] == {"eu-medium": run_a, "japan": run_a}
    assert outcome["message"] == b.message
    started, finished = (datetime.fromisoformat(outcome[k]) for k in ("started", "finished"))
    assert 0 < outcome["duration_s"] == pytest.approx((finished - started).total_seconds(), abs=1e-3)
    assert started == flow_run.start_time


def test_a_cycle_publishing_nothing_ends_failed_and_notifies(world):
    from pointcast.outcome import last_cycle

    failed = world["failed"]
    assert failed.is_failed() and "eu-medium" in failed.message
    flow_run = _flow_run(failed)
    assert notification(flow_run.name)["text"] == f"{flow_run.name}: Failed: {failed.message}"
    outcome = last_cycle(world["failed_root"])
    assert outcome["status"] == "failed" and outcome["run_id"] is None
    assert outcome["message"] == failed.message and outcome["duration_s"] > 0
    assert not (world["failed_root"] / "current").exists()


def test_outcome_of_a_manifest_with_degraded_elements(tmp_path):
    from pointcast.outcome import last_cycle, published_outcome, record_cycle

    manifest = {"run_id": "r1", "products": {"eu-short": {"basetime": "x"}}, "dropped": {}, "absent": {},
                "degraded": DEGRADED}
    outcome = published_outcome(manifest, BASE_B, BASE_B + timedelta(minutes=5))
    assert outcome["status"] == "degraded" and outcome["duration_s"] == 300.0
    assert outcome["degraded"] == {"eu-short": ["wind_gust_10m"]}
    assert outcome["message"] == "eu-short degraded: wind_gust_10m"
    record_cycle(tmp_path, outcome)
    assert last_cycle(tmp_path) == outcome
    assert not list((tmp_path / "cycles").glob(".*"))  # the temporary file is gone
    with pytest.raises(ValueError, match="published, degraded, failed"):
        record_cycle(tmp_path, {**outcome, "status": "fine"})


def _served(root: Path):
    """The real server on ``root``, its clock fixed at ``NOW``."""
    from pointcast.server import Server, create_app

    return Server(create_app(root, clock=NOW.timestamp), "127.0.0.1", 0)


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _samples(family, name: str) -> dict:
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples if s.name == name}


def test_catalog_and_metrics_say_how_old_each_product_is(world):
    """Through the real server at a clock 2 h after run B's basetime: eu-short is 2 h old,
    eu-medium and japan (carried from A) 14 h, over their basetime models' thresholds (ICON-EU
    13 h, MSM 9 h: docs/operations.md): stale."""
    server = _served(world["root"])
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(30)
    base = f"http://127.0.0.1:{server.port}"
    try:
        with httpx.Client(base_url=base, timeout=10) as client:
            catalog = client.get("/catalog")
            assert catalog.status_code == 200 and catalog.headers["etag"].startswith('W/"')
            products = {p["product"]: p for p in catalog.json()["products"]}
            assert products["eu-short"]["age_s"] == 7200 and products["eu-short"]["stale"] is False
            assert "carried_from" not in products["eu-short"]
            for pid in ("eu-medium", "japan"):
                assert products[pid]["age_s"] == 14 * 3600 and products[pid]["stale"] is True
                assert products[pid]["carried_from"] == world["run_a"]
            assert list(products["japan"])[:4] == ["product", "age_s", "stale", "carried_from"]
            gz = client.get("/catalog", headers={"accept-encoding": "gzip"})
            assert gz.headers["content-encoding"] == "gzip" and gz.json() == catalog.json()
            assert client.get("/catalog", headers={"if-none-match": catalog.headers["etag"]}).status_code == 304
            ok = client.get("/V1/forecast/short-range/common", params={"latlon": "48.8566,2.3522", "freq": "1H"})
            bad = client.get("/V1/forecast/short-range/common", params={"latlon": "x", "freq": "1H"})
            assert (ok.status_code, bad.status_code) == (200, 400)
            assert client.get("/nowhere").status_code == 404
            assert client.get("/manifest.json").status_code == 200
            assert client.post("/metrics").status_code == 405
            metrics = client.get("/metrics")
    finally:
        server.stop()
        thread.join(10)
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain; version=")
    families = _families(metrics.text)

    requests = _samples(families["pointcast_http_requests"], "pointcast_http_requests_total")
    assert requests == {
        (("operation", "/catalog"), ("status", "200")): 2, (("operation", "/catalog"), ("status", "304")): 1,
        (("operation", "/V1/forecast/short-range/common"), ("status", "200")): 1,
        (("operation", "/V1/forecast/short-range/common"), ("status", "400")): 1,
        (("operation", "other"), ("status", "404")): 1, (("operation", "viewer"), ("status", "200")): 1,
        (("operation", "/metrics"), ("status", "405")): 1,
    }
    latency = families["pointcast_http_request_duration_seconds"]
    counts = _samples(latency, "pointcast_http_request_duration_seconds_count")
    assert counts[(("operation", "/catalog"),)] == 3
    buckets = _samples(latency, "pointcast_http_request_duration_seconds_bucket")
    assert buckets[(("le", "+Inf"), ("operation", "/catalog"))] == 3

    ages = _samples(families["pointcast_product_age_seconds"], "pointcast_product_age_seconds")
    assert ages == {(("product", "eu-short"),): 7200.0, (("product", "eu-medium"),): 14 * 3600.0,
                    (("product", "japan"),): 14 * 3600.0}
    stale = _samples(families["pointcast_product_stale"], "pointcast_product_stale")
    carried = _samples(families["pointcast_product_carried"], "pointcast_product_carried")
    assert stale == carried == {(("product", "eu-short"),): 0.0, (("product", "eu-medium"),): 1.0,
                                (("product", "japan"),): 1.0}
    degraded = _samples(families["pointcast_product_degraded_elements"], "pointcast_product_degraded_elements")
    assert degraded == {(("product", "eu-short"),): 1.0, (("product", "eu-medium"),): 0.0,
                        (("product", "japan"),): 0.0}

    status = _samples(families["pointcast_last_cycle_status"], "pointcast_last_cycle_status")
    assert status == {(("status", "published"),): 0.0, (("status", "degraded"),): 1.0, (("status", "failed"),): 0.0}
    assert _samples(families["pointcast_last_cycle_dropped_model"], "pointcast_last_cycle_dropped_model") == {
        (("model", "ifs"),): 1.0}
    assert families["pointcast_last_cycle_dropped_models"].samples[0].value == 1.0
    outcome = json.loads((world["root"] / "cycles" / "last.json").read_text())
    assert families["pointcast_last_cycle_duration_seconds"].samples[0].value == outcome["duration_s"] > 0
    assert (families["pointcast_last_cycle_finished_timestamp_seconds"].samples[0].value
            == datetime.fromisoformat(outcome["finished"]).timestamp())


def test_each_app_counts_its_own_requests_and_metrics_never_fail_a_request(world):
    from pointcast.server import create_app

    one, two = create_app(world["root"]), create_app(world["failed_root"])
    assert one.respond("GET", "/catalog", b"", []).status == 200
    assert two.respond("GET", "/catalog", b"", []).status == 404  # nothing published there
    first = _families(one.respond("GET", "/metrics", b"", []).body.decode())
    second = _families(two.respond("GET", "/metrics", b"", []).body.decode())
    assert _samples(first["pointcast_http_requests"], "pointcast_http_requests_total") == {
        (("operation", "/catalog"), ("status", "200")): 1.0}
    assert _samples(second["pointcast_http_requests"], "pointcast_http_requests_total") == {
        (("operation", "/catalog"), ("status", "404")): 1.0}
    assert not second["pointcast_product_age_seconds"].samples  # nothing served
    assert _samples(second["pointcast_last_cycle_status"], "pointcast_last_cycle_status")[(("status", "failed"),)] == 1

    def broken(*args):
        raise RuntimeError("counting broke")

    one.metrics.observe = broken
    assert one.respond("GET", "/catalog", b"", []).status == 200


def _stale_over_http(root: Path, clock: datetime) -> tuple[dict[str, bool], dict[str, float]]:
    """/catalog's and /metrics' stale flags through the real server with its clock at ``clock``."""
    from pointcast.server import Server, create_app

    server = Server(create_app(root, clock=clock.timestamp), "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(30)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as client:
            catalog = {p["product"]: p["stale"] for p in client.get("/catalog").json()["products"]}
            metrics = _families(client.get("/metrics").text)
    finally:
        server.stop()
        thread.join(10)
    flags = _samples(metrics["pointcast_product_stale"], "pointcast_product_stale")
    return catalog, {labels[0][1]: value for labels, value in flags.items()}


def test_stale_when_a_newer_run_waits_upstream_or_the_model_stops(world, tmp_path):
    """Run B as published (eu-short from ICON-EU's 12 UTC run, threshold 6 + 4 + 3 = 13 h),
    through the real server. The cycles recorded what they found upstream, since their clock.
    A later cycle that finds ICON-EU's 18 UTC run complete at 21 UTC and serves nothing new
    makes eu-short stale a schedule period later (at 12 h of age, under the 13 h of rule 1);
    with no newer run found (the model stopped), it turns stale past 13 h, not before."""
    import shutil

    from pointcast.outcome import record_upstream, upstream_runs

    seen = upstream_runs(world["root"])
    assert seen["icon-eu"] == {"init": BASE_B, "complete_since": BASE_B + timedelta(hours=1)}
    assert seen["msm"] == {"init": BASE_B, "complete_since": BASE_B + timedelta(hours=1)}
    # IFS's run B was found complete, then dropped (its files truncated): what waits upstream
    assert seen["ifs"]["init"] == BASE_B
    manifest = json.loads((world["root"] / "current" / "manifest.json").read_text())
    assert {p: e["stale_after_hours"] for p, e in manifest["products"].items()} == {
        "eu-short": 13.0, "eu-medium": 13.0, "japan": 9.0}

    stopped = tmp_path / "stopped"
    shutil.copytree(world["root"], stopped, symlinks=True)
    catalog, metrics = _stale_over_http(stopped, BASE_B + timedelta(hours=13))
    assert catalog["eu-short"] is False and metrics["eu-short"] == 0.0
    catalog, metrics = _stale_over_http(stopped, BASE_B + timedelta(hours=13, seconds=1))
    assert catalog["eu-short"] is True and metrics["eu-short"] == 1.0

    waiting = tmp_path / "waiting"
    shutil.copytree(world["root"], waiting, symlinks=True)
    found = BASE_B + timedelta(hours=9)
    record_upstream(waiting, {"icon-eu": BASE_B + timedelta(hours=6)}, found)
    record_upstream(waiting, {"icon-eu": BASE_B + timedelta(hours=6)}, found + timedelta(hours=PERIOD_H))
    assert upstream_runs(waiting)["icon-eu"]["complete_since"] == found  # first seen, kept
    at = found + timedelta(hours=PERIOD_H)
    catalog, metrics = _stale_over_http(waiting, at)
    assert catalog["eu-short"] is False and metrics["eu-short"] == 0.0
    catalog, metrics = _stale_over_http(waiting, at + timedelta(seconds=1))
    assert catalog["eu-short"] is True and metrics["eu-short"] == 1.0


@needs_chromium
def test_status_page_shows_ages_and_degraded_elements(browser, world):  # noqa: F811 (the fixture)
    from test_cycle import serving

    with serving(world["root"]) as base:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error"
                and not msg.location.get("url", "").endswith("/verification/index.json") else None)
        try:
            page.clock.set_fixed_time(NOW)
            page.goto(base + "/")
            page.wait_for_selector("body[data-ready]", timeout=30_000)
            rows = {r.split("\t")[0]: r.split("\t") for r in page.locator("#products tr").all_inner_texts()[1:]}
            assert rows["eu-short"][2] == "2 h 0 min"
            for pid, after in (("eu-medium", 13), ("japan", 9)):
                assert rows[pid][2] == f"14 h 0 min — stale (over {after} h)"
                assert f"carried_from: {world['run_a']}" in rows[pid][-1]
            stale = page.locator("#products .age.stale")
            assert stale.count() == 2
            assert stale.first.evaluate("e => getComputedStyle(e).color") == "rgb(180, 35, 24)"
            cells = page.locator("#degraded tr").nth(1).locator("td")
            assert cells.all_inner_texts() == ["eu-short", "wind_gust_10m", "+0…+6 h, +48…+72 h",
                                               "icon-eu has no gusts there"]
            assert cells.first.evaluate("e => getComputedStyle(e).color") == "rgb(180, 35, 24)"
            page.screenshot(path=str(Path(world["root"]) / "status-degraded.png"), full_page=True)
            assert not errors, errors
        finally:
            page.close()
