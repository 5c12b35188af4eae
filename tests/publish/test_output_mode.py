"""``[output] json``: a run written as gzip only (``gzip``), as plain JSON only (``plain``), and
both (``both``, the default). A gzip-only run must hold the same JSON as a ``both`` run, byte
for byte once decompressed, and the real server must answer every operation over it as over
the ``both`` run, in gzip to clients that accept it and plain to those that do not."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import httpx
import pytest

from conftest import write_config
from pointcast import publish, viewer
from pointcast.config import ConfigError, load_config
from test_cycle import _STAMPS, serving

PRODUCTS = ("eu-medium", "eu-short", "eu-wind", "global", "japan")
# What differs between two runs of the same cycle, or between two answers: masked.
_VARYING = re.compile(rb'"(requestId|run_id|time|published_at|updated_time|next_update)": ?"[^"]*"')
_AGE = re.compile(rb'"age_s": \d+')  # the catalog's ages, the clock's


def small_config(dest: Path, mode: str | None) -> Path:
    """The five products on IFS alone, hourly, two points a list, coarse grids; the model runs
    cached beside ``dest`` so that the runs of several modes share them."""
    path = write_config(dest, scale=16)
    for name in ("europe", "global", "japan"):  # the header, London or Sapporo, a wind farm or the next city
        csv = dest / "points" / f"{name}.csv"
        rows = [r for r in csv.read_text().splitlines() if r and not r.startswith("#")]
        keep = [r for r in rows[1:] if r.startswith("hornsea-1,")] or rows[2:3]
        csv.write_text("\n".join([rows[0], rows[1], *keep]) + "\n")
    text = re.sub(r'^models = .*$', 'models = ["ifs"]', path.read_text(), flags=re.M)
    text = re.sub(r'^freqs = .*$', 'freqs = ["1H"]', text, flags=re.M)
    text = re.sub(r'^max_lead_hours = .*\n', "", text, flags=re.M)
    setting = f'json = "{mode}"\n' if mode else ""
    text = text.replace('root = "output"\n', f'root = "output"\ncache = "../cache"\n{setting}')
    path.write_text(text)
    return path


def tree(root: Path) -> dict[str, Path]:
    """The files of the served run's JSON tree, by relative path."""
    base = root / "current" / "json"
    return {p.relative_to(base).as_posix(): p for p in base.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, prefect_harness):
    """The same cycle written ``both`` and ``gzip``: output roots by mode."""
    from pointcast.flows.cycle import cycle

    base = tmp_path_factory.mktemp("modes")
    out = {}
    for mode in ("both", "gzip"):
        cfg = small_config(base / mode, None if mode == "both" else mode)
        assert load_config(cfg).output.json == mode
        cycle(str(cfg))
        out[mode] = cfg.parent / "output"
    return out


def test_gzip_mode_writes_each_json_once_as_the_both_runs_bytes(runs):
    both, gz = tree(runs["both"]), tree(runs["gzip"])
    products = [rel for rel in both if rel.split("/")[0] in PRODUCTS and rel.endswith(".json")]
    assert {rel.split("/")[0] for rel in products} == set(PRODUCTS) and len(products) > 15
    # Every JSON file of the gzip run (products, the run files) is its .gz alone; the viewer's
    # own files stay plain for any static host.
    assert not [rel for rel in gz if rel.endswith(".json") and not rel.startswith(f"{viewer.ASSETS}/")]
    assert {rel for rel in gz if not rel.endswith(".gz")} == set(viewer.files())
    assert ({rel.removesuffix(".gz") for rel in gz if rel.endswith(".gz")}
            == {rel for rel in both if rel.endswith(".json") and rel not in viewer.files()})
    for rel in products:
        stored = gz[rel + ".gz"].read_bytes()
        assert stored[4:8] == b"\0\0\0\0", rel  # mtime 0: the same JSON gives the same bytes
        assert _STAMPS.sub(b"", gzip.decompress(stored)) == _STAMPS.sub(b"", both[rel].read_bytes()), rel
    for rel in viewer.RUN_FILES:
        assert json.loads(gzip.decompress(gz[rel + ".gz"].read_bytes()))
    manifest = json.loads((runs["gzip"] / "current" / "manifest.json").read_bytes())  # outside the tree: plain
    assert set(manifest["products"]) == set(PRODUCTS)


def published_in(root: Path, run_id: str, mode: str, files: dict[str, bytes]) -> Path:
    staging = publish.new_run_dir(root, run_id)
    publish.write_json_tree(staging, files, mode)
    publish.publish_run(root, staging, run_id, {"products": {"eu-short": {"points": 1}}}, {"ok": True}, True, mode)
    return root / "current" / "json"


def test_plain_mode_writes_no_gz(tmp_path):
    """The tree, the run files and a verification copy of a ``plain`` run: no ``.gz``."""
    from pointcast import verify

    files = {"eu-short/index.json": b'{"points":[]}', "eu-short/1H/paris.json": b'{"data":[]}'}
    base = published_in(tmp_path, "r1", "plain", files)
    verify.publish_copy(base, {"index.json": b"{}"}, "plain")
    rels = {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()}
    assert not [rel for rel in rels if rel.endswith(".gz")]
    assert {*files, *viewer.RUN_FILES, "verification/index.json"} | set(viewer.files()) == rels


@pytest.mark.parametrize(("served", "mode"), [("both", "gzip"), ("gzip", "plain"), ("plain", "both")])
def test_a_carried_product_takes_the_new_runs_mode(tmp_path, served, mode):
    """A product carried over from a run written in another mode (the setting changed) comes
    in the forms of the new run's, with the same JSON."""
    files = {"eu-short/index.json": b'{"points":[]}', "eu-short/1H/paris.json": b'{"data":[1]}'}
    published_in(tmp_path, "r1", served, files)
    writer = publish.TreeWriter(publish.new_run_dir(tmp_path, "r2"), mode)
    assert publish.carry_product(tmp_path, writer, "eu-short")["carried_from"] == "r1"
    writer.finish()
    got = {p.relative_to(writer.base).as_posix() for p in writer.base.rglob("*") if p.is_file()}
    forms = {"both": ("", ".gz"), "plain": ("",), "gzip": (".gz",)}[mode]
    assert got == {rel + form for rel in files for form in forms}
    assert {rel: writer.read(rel) for rel in files} == files
    if mode != "plain":
        assert gzip.decompress(writer.path("eu-short/1H/paris.json.gz").read_bytes()) == files["eu-short/1H/paris.json"]


def requests_for(root: Path) -> list[tuple[str, dict]]:
    """One request per operation at the first point of its product (``root``: a ``both``
    run), the catalog, and two of the viewer's reads of the run tree."""
    base = root / "current" / "json"
    first = {pid: json.loads((base / pid / "index.json").read_bytes())["points"][0] for pid in PRODUCTS}
    at = {pid: f"{p['lat']},{p['lon']}" for pid, p in first.items()}
    wind = first["eu-wind"]
    return [
        ("/V1/forecast/medium-range/common", {"latlon": at["eu-medium"], "freq": "1H"}),
        ("/V1/forecast/short-range/common", {"latlon": at["eu-short"], "freq": "1H"}),
        ("/V1/forecast/short-range/windpack", {"latlon": f"{wind['lat']},{wind['lon']}", "freq": "1H",
                                                "hubheight": "97.5m"}),
        ("/api/v2/global/wx", {"latlon": f"{first['global']['lat']}/{first['global']['lon']}", "tz": "Asia/Tokyo"}),
        ("/api/v1/ss1wx", {"lat": first["japan"]["lat"], "lon": first["japan"]["lon"]}),
        ("/catalog", {}),
        ("/eu-wind/index.json", {}),
        ("/runs.json", {}),
    ]


def answers(base: str, requests, encoding: str) -> list[tuple[int, object]]:
    """Each request's status and JSON (``_VARYING`` and ``_AGE`` masked), sent with ``Accept-Encoding:
    encoding``; checks that Content-Encoding is gzip exactly when asked."""
    out = []
    with httpx.Client(base_url=base, timeout=30, headers={"Accept-Encoding": encoding}) as client:
        for path, params in requests:
            r = client.get(path, params=params)
            assert r.headers.get("content-encoding") == ("gzip" if encoding == "gzip" else None), (path, encoding)
            out.append((r.status_code, json.loads(_AGE.sub(b'"age_s": 0', _VARYING.sub(rb'"\1":""', r.content)))))
    return out


def test_server_answers_a_gzip_run_as_a_both_run(runs):
    requests = requests_for(runs["both"])
    with serving(runs["both"]) as base:
        expected = answers(base, requests, "identity")
        assert answers(base, requests, "gzip") == expected
    assert all(status == 200 for status, _ in expected)
    with serving(runs["gzip"]) as base:
        for encoding in ("identity", "gzip"):
            assert answers(base, requests, encoding) == expected, encoding


def test_bad_json_mode_names_file_key_and_line(tmp_path):
    cfg = small_config(tmp_path, "zip")
    line = cfg.read_text().splitlines().index('json = "zip"') + 1
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert (err.value.file, err.value.line, err.value.key) == (str(cfg), line, "output.json")
    assert "'both', 'plain', 'gzip'" in str(err.value) and "'zip'" in str(err.value)
