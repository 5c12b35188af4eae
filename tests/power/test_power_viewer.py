"""The power meteogram and the sites on the map, in a real browser (Debian's chromium driven by
Playwright) over the suite's published run: the power curve, the capacity line, the P10-P90
and P25-P75 bands of the members' power, and the sites as circles by kind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from support.served import live_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
ARTIFACTS = Path(os.environ.get("POINTCAST_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[2] / "output" / "test-artifacts" / "viewer"))
POWER_CHART = """() => { const box = document.querySelector('[data-chart="power"]'), u = box._uplot;
  return {series: u.series.slice(1).map((s) => s.label), bands: (u.bands || []).map((b) => b.series.map((i) => u.series[i].label)),
          filled: u.data.slice(1).map((s) => s.filter((v) => v != null).length), points: u.data[0].length,
          legend: box.querySelector('h3').innerText}; }"""


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (Debian: apt-get install chromium)")
def test_power_meteogram_and_sites_on_the_map(published):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is in the test extras")
    _, root, _ = published
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with live_server(root) as (_, _, port), sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, chromium_sandbox=False)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"http://127.0.0.1:{port}/#/p/power/hornsea-1/1H")
            page.wait_for_selector("body[data-ready='#/p/power/hornsea-1/1H']", timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "power-hornsea-1.png"), full_page=True)
            chart = page.evaluate(POWER_CHART)
            assert chart["series"][:2] == ["power kW", "capacity kW"] and chart["points"] == 72
            assert chart["bands"] == [["P90", "P10"], ["P75", "P25"]]
            assert chart["filled"][0] == 72 and min(chart["filled"][2:]) > 0, chart
            # ICON-EU-EPS has the 10 m wind only: the hub's quantiles are ENS's
            assert "P10–P90" in chart["legend"] and "(ens;" in chart["legend"]
            page.goto(f"http://127.0.0.1:{port}/#/")
            page.wait_for_selector("body[data-ready='#/']", timeout=30_000)
            page.select_option("#map-product", "power")
            page.wait_for_selector("svg circle[data-kind='pv']", timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "power-map.png"), full_page=True)
            kinds = page.eval_on_selector_all("svg circle[data-kind]", "cs => cs.map((c) => c.dataset.kind)")
            assert kinds.count("wind") >= 5 and kinds.count("pv") >= 5
            assert not errors, errors
        finally:
            browser.close()
