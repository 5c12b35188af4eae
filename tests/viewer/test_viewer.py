"""The viewer in a real browser (Debian's chromium driven by Playwright) over a real cycle.

The status page and one meteogram per product are loaded from `pointcast serve` and from a
plain static file server (`python -m http.server`) over the published run's json/ folder; what
they show is checked against the published files. Screenshots are kept in
output/test-artifacts/viewer/ (or $POINTCAST_TEST_ARTIFACTS).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from pointcast import publish, viewer
from test_cycle import run_dir, serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (Debian: apt-get install chromium; "
                                                          ".ci/run installs it): the viewer's browser tests need it")
ARTIFACTS = Path(os.environ.get("POINTCAST_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[2] / "output" / "test-artifacts" / "viewer"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# (product, point) whose meteogram is loaded; charts drawn -> series expected (without time;
# a chart with quantile bands has four more: the edges P10, P90, P25, P75)
METEOGRAMS = {
    ("eu-short", "paris"): {"temperature": 6, "precipitation": 1, "probability": 1, "wind": 6, "cloud": 1, "pressure": 1},
    ("eu-medium", "zugspitze"): {"temperature": 6, "precipitation": 1, "probability": 1, "wind": 6, "cloud": 1,
                                 "pressure": 1},
    ("eu-wind", "hollandse-kust-zuid"): {"hub-wind": 6, "profile": 1},
    ("global", "london"): {"temperature": 5, "precipitation": 1, "probability": 1, "wind": 5, "pressure": 1},
    ("japan", "tokyo"): {"temperature": 6, "precipitation": 1, "probability": 1, "wind": 5, "pressure": 1},
}
EDGES = ("P10", "P90", "P25", "P75")  # the band edge series, by label: the quantiles 0.1, 0.9, 0.25, 0.75

CHARTS = """() => [...document.querySelectorAll('.chart')].map((box) => {
  const u = box._uplot, c = box.querySelector('canvas');
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let painted = 0;
  for (let i = 3; i < px.length; i += 4) if (px[i]) painted++;
  return {name: box.dataset.chart, series: u.series.length - 1, points: u.data[0].length,
          filled: u.data.slice(1).map((s) => s.filter((v) => v != null).length), painted};
})"""
# a chart's times, its bands (as the labels of their two edge series), the edges' values and the
# legend saying what the bands are
BANDS = """(name) => {
  const box = document.querySelector(`[data-chart="${name}"]`), u = box._uplot;
  const legend = box.querySelector('.bands-legend');
  return {times: u.data[0], bands: (u.bands || []).map((b) => b.series.map((i) => u.series[i].label)),
          edges: Object.fromEntries(u.series.map((s, i) => [s.label, u.data[i]]).filter(([l]) => /^P[0-9]+$/.test(l))),
          bars: u.series.slice(1).map((s) => s.label), values: u.data.slice(1),
          legend: legend ? legend.innerText : null};
}"""


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is in the test extras")
    with sync_api.sync_playwright() as p:
        # the Debian package's binary, never a browser downloaded by Playwright
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, chromium_sandbox=False)
        yield browser
        browser.close()


def _static_server(folder: Path):
    """`python -m http.server` over ``folder`` on a free loopback port; (process, base URL)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(base + "/manifest.json", timeout=1)
            return proc, base
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("http.server did not start")


@pytest.fixture(scope="module")
def sites(published):
    """The two ways of serving the viewer: (name, base URL) of pointcast serve and a static host."""
    _, root, _ = published
    proc, static = _static_server(root / "current" / "json")
    try:
        with serving(root) as served:
            yield {"serve": served, "static": static}
    finally:
        proc.terminate()
        proc.wait(10)


def _open(browser, url: str, shot: str, viewport=(1200, 900)):
    """Load ``url`` until the page says it is ready; (page, console errors, optional files
    absent). A screenshot of the page is saved as ``shot``.png; with $POINTCAST_README_IMAGES
    set to a folder, the README's two (status.png, meteogram.png: the top of the page) too."""
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    errors: list[str] = []
    absent = set()

    def console(msg):
        if msg.type == "error":
            # an optional file the page asks for and tolerates (verification), absent here
            if msg.location.get("url", "").endswith("/verification/index.json"):
                absent.add("verification")
            else:
                errors.append(f"{msg.text} at {msg.location}")

    page.on("console", console)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.goto(url)
    page.wait_for_selector("body[data-ready]", timeout=30_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
    readme = {"status-static": "status", "meteogram-eu-short-static": "meteogram"}.get(shot)
    if readme and os.environ.get("POINTCAST_README_IMAGES"):
        page.set_viewport_size({"width": 1000, "height": 1250})
        page.reload()
        page.wait_for_selector("body[data-ready]", timeout=30_000)
        page.screenshot(path=os.path.join(os.environ["POINTCAST_README_IMAGES"], f"{readme}.png"))
    return page, errors, absent


def _utc_text(iso: str) -> str:
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M UTC")


@needs_chromium
@pytest.mark.parametrize("site", ["serve", "static"])
def test_status_page_shows_the_published_run(browser, sites, published, site):
    _, root, run_id = published
    tree = run_dir(root) / "json"
    manifest = json.loads((run_dir(root) / "manifest.json").read_bytes())
    assert json.loads((tree / "manifest.json").read_bytes()) == manifest  # the tree's copy
    page, errors, absent = _open(browser, sites[site] + "/", f"status-{site}")
    try:
        assert page.inner_text("#run-id") == run_id == manifest["run_id"]
        basetimes = sorted({p["basetime"] for p in manifest["products"].values()})
        assert page.inner_text("#run-basetime") == ", ".join(map(_utc_text, basetimes))
        assert page.inner_text("#validation .ok") == "passed"
        history = page.inner_text("#history")
        assert run_id in history and "published" in history
        products = page.locator("#products tr").all_inner_texts()[1:]
        for row, product in zip(products, ["eu-short", "eu-medium", "eu-wind", "global", "japan"], strict=True):
            index = json.loads((tree / product / "index.json").read_bytes())
            cells = row.split("\t")  # the third is the product's age (tests/flows/test_freshness.py)
            assert [cells[0], cells[1], cells[3]] == [product, _utc_text(index["basetime"]), str(len(index["points"]))]
        # the map: every point of the first product, each coloured by its first temperature
        index = json.loads((tree / "eu-short" / "index.json").read_bytes())
        circles = page.locator("#map circle")
        assert circles.count() == len(index["points"]) > 0
        first = index["points"][0]
        temp = json.loads((tree / "eu-short" / "1H" / f"{first['id']}.json").read_bytes())["data"][0]["temp_2m"]
        title = circles.nth(0).locator("title").text_content()
        assert title == f"{first['name']}: {temp:g} °C", title
        assert page.locator("#map path.land").get_attribute("d").count("M") > 20  # Natural Earth land drawn
        assert page.locator("#verification").is_hidden() == (not (tree / "verification" / "index.json").exists())
        # a click on a point opens its meteogram
        circles.nth(1).click()
        page.wait_for_selector(f"body[data-ready='#/p/eu-short/{index['points'][1]['id']}']", timeout=30_000)
        assert page.inner_text("#point-title").startswith(index["points"][1]["name"])
        assert not errors, errors
        assert absent <= {"verification"}
    finally:
        page.close()


@needs_chromium
def test_status_page_says_where_each_statistic_comes_from_and_its_tables_do_not_overlap(browser, sites, published):
    """At 1400 px: the models table lists under "used by" the products each ensemble feeds,
    the manifest's `probability_from` and `quantiles_from` read as lines of sources by lead
    time, and the models table stays clear of the validation table beside or under it."""
    _, root, _ = published
    manifest = json.loads((run_dir(root) / "manifest.json").read_bytes())
    page, errors, _ = _open(browser, sites["serve"] + "/", "status-1400", viewport=(1400, 1000))
    try:
        models = {r.split("\t")[0]: r.split("\t") for r in page.locator(".grid table").first.locator("tr").all_inner_texts()[1:]}
        used_by = {m: models[m][6] for m in ("ens", "icon-eu-eps", "gefs")}
        assert used_by == {"ens": "eu-short, eu-medium, eu-wind, global, japan",
                           "icon-eu-eps": "eu-short, eu-medium, eu-wind", "gefs": "global"}
        lines = {tuple(r.split("\t")[:2]): r.split("\t")[2]
                 for r in page.locator("#ensemble-sources tr").all_inner_texts()[1:]}
        def text(segments, basetime):
            def lead(iso):
                return round((datetime.fromisoformat(iso) - datetime.fromisoformat(basetime)).total_seconds() / 3600)
            return ", ".join(f"{s['source']} +{lead(s['from'])}…+{lead(s['to'])} h" for s in segments)

        for pid, entry in manifest["products"].items():
            assert lines[(pid, "probability of precipitation")] == text(entry["probability_from"], entry["basetime"])
            for name, segments in entry["quantiles_from"].items():
                assert lines[(pid, name.replace("_", " "))] == text(segments, entry["basetime"])
        # Europe: ICON-EU-EPS gives the probability, the temperature and 10 m wind quantiles,
        # ENS the windpack's wind column (ICON-EU-EPS has no wind above 10 m)
        for pid in ("eu-short", "eu-medium", "eu-wind"):
            assert lines[(pid, "probability of precipitation")].startswith("icon-eu-eps +0…")
            assert lines[(pid, "temperature quantiles")].startswith("icon-eu-eps +0…")
            first = "ens" if pid == "eu-wind" else "icon-eu-eps"
            assert lines[(pid, "wind speed quantiles")].startswith(f"{first} +0…")
        boxes = [page.locator(".grid table").first.bounding_box(), page.locator("#validation table").bounding_box()]
        a, b = boxes
        assert (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"]), boxes
        assert not errors, errors
    finally:
        page.close()


@needs_chromium
@pytest.mark.parametrize("site", ["serve", "static"])
def test_meteogram_of_every_product(browser, sites, published, site):
    _, root, run_id = published
    tree = run_dir(root) / "json"
    for (product, pid), expected in METEOGRAMS.items():
        index = json.loads((tree / product / "index.json").read_bytes())
        point = next(p for p in index["points"] if p["id"] == pid)
        page, errors, _ = _open(browser, f"{sites[site]}/#/p/{product}/{pid}", f"meteogram-{product}-{site}")
        try:
            charts = {c["name"]: c for c in page.evaluate(CHARTS)}
            assert {n: c["series"] for n, c in charts.items()} == expected, (product, charts)
            if product == "eu-wind":
                hubs = [f"{h:g}m" for h in point["hub_heights"]]
                data = [json.loads((tree / product / "1H" / pid / f"{h}.json").read_bytes())["data"] for h in hubs]
                first, key, zone = data[0][0]["windspd"], f"windspd_{point['hub_heights'][0]:g}m", point["time_zone"]
                assert charts["profile"]["points"] == len(point["heights"])
            elif product in ("global", "japan"):
                data = json.loads((tree / product / f"{pid}.json").read_bytes())
                first, key = data["srf"][0]["temp"], "temp"
                zone = point.get("time_zone") or index["time_zone"]
                assert page.locator("#days .day").count() == len(data["mrf"])
                data = [data["srf"]]
            else:
                data = [json.loads((tree / product / "1H" / f"{pid}.json").read_bytes())["data"]]
                first, key, zone = data[0][0]["temp_2m"], "temp_2m", point["time_zone"]
            for chart in charts.values():
                if chart["name"] != "profile":
                    assert chart["points"] == len(data[0]), (product, chart)
                assert all(n > 0 for n in chart["filled"]) and chart["painted"] > 2000, (product, chart)
            # a value read from the page equals the JSON, and times are the point's own
            cell = page.locator(f"#data tr:nth-child(2) td[data-key='{key}']").inner_text()
            assert float(cell) == first, (product, cell, first)
            assert f"times in {zone}" in page.inner_text("main")
            start = data[0][0].get("datetime") or data[0][0]["date"]
            local = datetime.fromisoformat(start).astimezone(ZoneInfo(zone)).strftime("%H:%M")
            assert page.locator("#data tr:nth-child(2) td").first.inner_text().endswith(local)
            if product == "eu-short":  # the UTC switch
                page.check("#utc")
                page.wait_for_selector("body[data-ready]", timeout=30_000)
                utc = datetime.fromisoformat(start).strftime("%H:%M")
                assert page.locator("#data tr:nth-child(2) td").first.inner_text().endswith(utc)
                assert "times in UTC" in page.inner_text("main")
            _assert_ensemble_charts(page, tree, product, point, data[0])
            assert not errors, (product, errors)
        finally:
            page.close()


def _assert_ensemble_charts(page, tree: Path, product: str, point: dict, rows: list[dict]) -> None:
    """The meteogram's quantile bands are the point's static quantile file (temperature, 10 m
    wind; eu-wind: the wind at the first hub height, then at the others chosen) and its
    probability bars the product's own probability element."""
    q = json.loads((tree / product / "quantiles" / f"{point['id']}.json").read_bytes())
    if product == "eu-wind":
        first, *more = point["hub_heights"]
        _assert_bands_are_the_quantiles(page, "hub-wind", q, q["wind_speed_at"][f"{first:g}m"])
        for height in more:  # the bands at another hub height, chosen
            page.select_option("#band-height", f"{height:g}")
            _assert_bands_are_the_quantiles(page, "hub-wind", q, q["wind_speed_at"][f"{height:g}m"])
        assert more, "the meteogram's windpack point has two hub heights"
        return
    _assert_bands_are_the_quantiles(page, "temperature", q, q["temperature"])
    _assert_bands_are_the_quantiles(page, "wind", q, q["wind_speed"])
    chart = page.evaluate(BANDS, "probability")
    if product == "global":  # the hourly file's pop at the meteogram's hours
        hourly = json.loads((tree / product / "hourly" / f"{point['id']}.json").read_bytes())
        start = datetime.fromisoformat(hourly["start"]).timestamp()
        expected = [hourly["pop"][round((t - start) / hourly["step_seconds"])] for t in chart["times"]]
    elif product == "japan":  # japan publishes the day's probability alone: each hour shows its day's
        days = json.loads((tree / product / f"{point['id']}.json").read_bytes())["mrf"]
        expected = [next(d["pop"] for d in days if 0 <= t - datetime.fromisoformat(d["date"]).timestamp() < 86400)
                    for t in chart["times"]]
    else:
        expected = [r["precipitation_proba"] for r in rows]
    assert chart["values"] == [expected] and any(expected), (product, chart["bars"])


def _assert_bands_are_the_quantiles(page, chart: str, q: dict, rows: list) -> None:
    """A chart's P10-P90 and P25-P75 bands, with a legend, whose edges are the quantile rows
    (from the file's ``start`` every ``step_seconds``) at the chart's times: its first, middle
    and last."""
    got = page.evaluate(BANDS, chart)
    assert got["bands"] == [["P90", "P10"], ["P75", "P25"]], (chart, got["bands"])
    assert "P10–P90" in got["legend"] and "P25–P75" in got["legend"] and "ensemble" in got["legend"], got["legend"]
    start, times = datetime.fromisoformat(q["start"]).timestamp(), got["times"]
    for i in sorted({0, len(times) // 2, len(times) - 1}):
        step = (times[i] - start) / q["step_seconds"]
        assert step == int(step), (chart, times[i])
        for label, level in zip(EDGES, (0.1, 0.9, 0.25, 0.75), strict=True):
            assert got["edges"][label][i] == rows[int(step)][q["quantiles"].index(level)] is not None, (chart, i, label)


def test_server_answers_only_the_files_the_tables_name(sites, published):
    """GET / and the viewer's assets from the package; run files by the tables; JSON errors."""
    _, root, _ = published
    base = sites["serve"]
    tree = run_dir(root) / "json"
    page = httpx.get(base + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.content == (tree / "index.html").read_bytes()
    for rel in ("manifest.json", "runs.json", "eu-short/index.json", "eu-short/15min/paris.json",
                "eu-wind/30min/hornsea-1/113m.json", "global/hourly/london.json", "japan/tokyo.json",
                "viewer/app.js", "viewer/vendor/uplot/LICENSE"):
        r = httpx.get(f"{base}/{rel}")
        assert r.status_code == 200 and r.content == (tree / rel).read_bytes(), rel
    for rel in ("eu-short/1H/nowhere.json", "eu-short/1H/%2E%2E/paris.json", "evil/1H/paris.json",
                "eu-wind/1H/hornsea-1/999m.json", "verification/secret.json", "viewer/missing.js", "index.json"):
        r = httpx.get(f"{base}/{rel}")
        assert r.status_code == 404 and r.json()["code"] == "404_001", rel
    r = httpx.post(base + "/")
    assert r.status_code == 405 and r.json()["code"] == "405_001"


def test_runs_json_lists_the_last_cycles_with_the_reasons_of_failures(tmp_path, caplog):
    """A published run's tree holds the viewer, the manifest and validation report, and the
    cycles before it: published, and refused with their first validation errors."""
    files = {"eu-short/index.json": b'{"points": []}'}

    def cycle(run_id: str, ok: bool, errors=()):
        staging = publish.new_run_dir(tmp_path, run_id)
        publish.write_json_tree(staging, files)
        manifest = {"products": {"eu-short": {"basetime": f"2026-11-22T{run_id[-2:]}:00:00+00:00"}},
                    "dropped": {"icon-d2": "source unavailable"} if run_id == "r06" else {},
                    "published_at": f"2026-11-22T{run_id[-2:]}:40:00+00:00"}
        try:
            publish.publish_run(tmp_path, staging, run_id, manifest, {"ok": ok, "errors": list(errors)}, ok)
        except publish.PublishRefused:
            assert not ok

    cycle("r00", True)
    cycle("r03", False, [f"eu-short: error {i}" for i in range(7)])
    cycle("r06", True)
    tree = tmp_path / "current" / "json"
    runs = json.loads((tree / "runs.json").read_bytes())["runs"]
    assert [(r["run_id"], r["status"]) for r in runs] == [("r06", "published"), ("r03", "failed"), ("r00", "published")]
    assert runs[0]["dropped"] == {"icon-d2": "source unavailable"} and runs[0]["basetime"] == "2026-11-22T06:00:00+00:00"
    assert runs[1]["errors"] == [f"eu-short: error {i}" for i in range(publish.HISTORY_ERRORS)]
    assert runs[1]["error_count"] == 7
    assert json.loads((tree / "manifest.json").read_bytes()) == json.loads((tree.parent / "manifest.json").read_bytes())
    assert json.loads((tree / "validation.json").read_bytes()) == {"ok": True, "errors": []}
    assert (tree / "index.html").read_bytes() == (Path(viewer.__file__).parent / "index.html").read_bytes()
    assert (tree / "viewer" / "vendor" / "uplot" / "LICENSE").is_file()
    assert not (tree / "viewer" / "vendor" / "refresh.sh").exists()
    assert not (tmp_path / "runs" / "failed" / "r03" / "json" / "index.html").exists()  # never served
    # the same run published again keeps its tree, without a warning about the viewer's files
    before = (tree / "runs.json").read_bytes()
    with caplog.at_level("INFO", logger="pointcast.publish"):
        cycle("r06", True)
    assert (tree / "runs.json").read_bytes() == before
    assert "already published with identical files" in caplog.text


@needs_chromium
def test_verification_summary_and_error_band(browser, published, tmp_path):
    """With verification files in the tree (the shape the verification stage publishes), the
    status page shows their summary and the meteogram a +-MAE band around the temperature."""
    _, root, _ = published
    tree = run_dir(root) / "json"
    site = tmp_path / "json"
    site.mkdir()
    for entry in tree.iterdir():  # the published tree, read-only, plus the verification files
        (site / entry.name).symlink_to(entry)
    bins = [{"lead_from_h": 0, "lead_to_h": 24, "n": 30, "bias": -0.5, "mae": 1.25, "rmse": 1.5,
             "persistence": {"bias": 0.1, "mae": 2.0, "rmse": 2.5}},
            {"lead_from_h": 24, "lead_to_h": 72, "n": 10, "bias": 1.0, "mae": 2.5, "rmse": 3.0,
             "persistence": {"bias": 0.2, "mae": 3.0, "rmse": 3.5}}]
    (site / "verification").mkdir()
    (site / "verification" / "index.json").write_text(json.dumps({"generated": "2026-11-20T03:00:00+00:00",
                                                                  "products": ["eu-short"]}))
    (site / "verification" / "eu-short.json").write_text(json.dumps(
        {"product": "eu-short", "generated": "2026-11-20T03:00:00+00:00",
         "variables": {"temp_2m": {"units": "degC", "bins": bins},
                       "precipitation_proba": {"units": "%", "bins": [
                           {"lead_from_h": 0, "lead_to_h": 1, "n": 30, "brier": 0.1, "persistence": {"brier": 0.3}},
                           {"lead_from_h": 30, "lead_to_h": 31, "n": 10, "brier": 0.2, "persistence": {"brier": None}}],
                           "reliability": [{"forecast_from": 0, "forecast_to": 10, "n": 25, "observed_frequency": 0.04},
                                           {"forecast_from": 10, "forecast_to": 20, "n": 0, "observed_frequency": None}]},
                       "temperature_quantiles": {"units": "degC", "quantiles": [0.1, 0.25, 0.5, 0.75, 0.9], "bins": [
                           {"lead_from_h": 0, "lead_to_h": 1, "n": 10, "crps": 0.5, "persistence": {"crps": 1.0}}]}}}))
    proc, base = _static_server(site)
    try:
        page, errors, absent = _open(browser, base + "/", "status-verification")
        rows = page.locator("#verification tr").all_inner_texts()
        # n-weighted over the bins: MAE (30 * 1.25 + 10 * 2.5) / 40, persistence (30 * 2 + 10 * 3) / 40
        assert rows[1].split("\t") == ["eu-short", "temp_2m", "degC", "40", "-0.13", "1.56", "1.88", "2.25", "–"], rows
        # the Brier score and the CRPS, n-weighted over the bins and by lead day, and the reliability table
        scores = page.locator("#verification-probabilistic tr").all_inner_texts()
        assert [r.split("\t") for r in scores[1:]] == [
            ["eu-short", "precipitation_proba", "Brier", "1", "40", "0.125", "0.3", "d1 0.100 · d2 0.200"],
            ["eu-short", "temperature_quantiles", "CRPS", "degC", "10", "0.5", "1", "d1 0.500"]], scores
        reliability = page.locator("#verification-reliability tr").all_inner_texts()
        assert [r.split("\t") for r in reliability] == [["product", "variable", "0-10 %", "10-20 %"],
                                                          ["eu-short", "precipitation_proba", "0.04 (25)", "–"]]
        assert not errors and not absent
        page.close()
        page, errors, absent = _open(browser, base + "/#/p/eu-short/paris", "meteogram-verification")
        charts = {c["name"]: c for c in page.evaluate(CHARTS)}
        assert charts["temperature"]["series"] == 8  # temperature, dewpoint, +MAE, -MAE, the quantile bands' edges
        band = page.evaluate("() => document.querySelector('[data-chart=temperature]')._uplot.data")
        rows = json.loads((tree / "eu-short" / "1H" / "paris.json").read_bytes())["data"]
        for i, lead in ((0, 0), (30, 30)):
            mae = 1.25 if lead < 24 else 2.5
            assert band[3][i] == pytest.approx(rows[i]["temp_2m"] + mae)
            assert band[4][i] == pytest.approx(rows[i]["temp_2m"] - mae)
        assert not errors and not absent
        page.close()
    finally:
        proc.terminate()
        proc.wait(10)


def test_with_api_keys_the_run_files_need_the_key_and_the_page_does_not(published):
    from pointcast.config import ApiKeyConfig, api_key_sha256
    from pointcast.server import create_app

    _, root, _ = published
    app = create_app(root, api_keys=[ApiKeyConfig("ops", api_key_sha256(b"k" * 32))])
    assert app.respond("GET", "/", b"", []).status == 200
    assert app.respond("GET", "/viewer/app.js", b"", []).status == 200
    for path in ("/manifest.json", "/eu-short/1H/paris.json"):
        denied = app.respond("GET", path, b"", [])
        assert denied.status == 401 and json.loads(denied.body)["code"] == "401_001"
        assert app.respond("GET", path, b"", [(b"x-api-key", b"k" * 32)]).status == 200
    assert app.respond("HEAD", "/", b"", []).status == 200
    assert app.respond("DELETE", "/manifest.json", b"", []).status == 405


# The columns of the temperature chart's canvas at some times, with its curves hidden: how many
# pixels hold the red of the quantile bands (the white or the faint seam shading has none).
BAND_PIXELS = """async (times) => {
  const u = document.querySelector('[data-chart=temperature]')._uplot;
  u.series.forEach((s, i) => { if (i && !/^P[0-9]+$/.test(s.label)) u.setSeries(i, {show: false}); });
  await new Promise((done) => requestAnimationFrame(done));  // uPlot redraws after the change
  const {top, height} = u.bbox;
  return times.map((t) => {
    const px = u.ctx.getImageData(Math.round(u.valToPos(t, 'x', true)), top, 1, height).data;
    let red = 0;  // the canvas is transparent over the page's white: red minus green, composed on white
    for (let i = 0; i < px.length; i += 4) if ((px[i] - px[i + 1]) * px[i + 3] / 255 > 15) red++;
    return red;
  });
}"""


@needs_chromium
def test_quantile_bands_leave_gaps_where_no_ensemble_covers(browser, published, tmp_path):
    """Hours whose quantiles are null (no ensemble covers them) show no band, neither one at 0
    nor one bridged across them; a point whose quantiles are all null shows none, its curves
    drawn. The published tree with two of eu-short's quantile files planted with nulls."""
    _, root, _ = published
    tree = run_dir(root) / "json"
    site = tmp_path / "json"
    planted = site / "eu-short" / "quantiles"
    for folder in (site, site / "eu-short", planted):  # the tree, linked, down to the planted files
        folder.mkdir()
        for entry in (tree / folder.relative_to(site)).iterdir():
            if entry.name not in ("eu-short", "quantiles"):
                (folder / entry.name).symlink_to(entry)
    paris = json.loads((tree / "eu-short" / "quantiles" / "paris.json").read_bytes())
    start, step = datetime.fromisoformat(paris["start"]).timestamp(), paris["step_seconds"]
    hole = range(24 * 3600 // step, 48 * 3600 // step)  # the second day: no ensemble
    for name in ("temperature", "wind_speed"):
        paris[name] = [[None] * 5 if i in hole else row for i, row in enumerate(paris[name])]
    (planted / "paris.json").write_text(json.dumps(paris))
    berlin = json.loads((tree / "eu-short" / "quantiles" / "berlin.json").read_bytes())
    for name in ("temperature", "precipitation", "wind_speed"):
        berlin[name] = [[None] * 5 for _ in berlin[name]]
    (planted / "berlin.json").write_text(json.dumps(berlin))
    proc, base = _static_server(site)
    try:
        page, errors, absent = _open(browser, base + "/#/p/eu-short/paris", "meteogram-quantile-gap")
        for chart in ("temperature", "wind"):
            got = page.evaluate(BANDS, chart)
            hours = [(t - start) / step for t in got["times"]]
            for label, values in got["edges"].items():
                assert [v is None for v in values] == [h in hole for h in hours], (chart, label)
        t12, t36, t60 = (start + hours * 3600 for hours in (12, 36, 60))
        covered, gap, again = page.evaluate(BAND_PIXELS, [t12, t36, t60])
        assert covered > 5 and again > 5 and gap == 0, (covered, gap, again)
        assert not errors and absent <= {"verification"}
        page.close()
        page, errors, absent = _open(browser, base + "/#/p/eu-short/berlin", "meteogram-quantile-none")
        charts = {c["name"]: c for c in page.evaluate(CHARTS)}
        for chart in ("temperature", "wind"):
            assert charts[chart]["filled"][2:] == [0, 0, 0, 0] and all(charts[chart]["filled"][:2]), charts[chart]
        assert page.evaluate(BAND_PIXELS, [t12, t36]) == [0, 0]
        assert not errors and absent <= {"verification"}
        page.close()
    finally:
        proc.terminate()
        proc.wait(10)
