"""The HTTP source end to end against a loopback mirror (tests/support/mirror.py) serving the sample
source's runs in each upstream's real layout: ECMWF open data (``.index``), NOAA GFS (wgrib2
``.idx``), JMA MSM (whole files); discovery, grouped byte ranges, retries, deadlines, rejected
downloads, the cache, and one real Prefect cycle fed from the mirror."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from mirror import Mirror, add_foreign_message, publish_sample
from pointcast.config import ConfigError, load_config
from pointcast.ingest import decode
from pointcast.sources import GFS, IFS, MODELS, MSM
from pointcast.sources.base import Need
from pointcast.sources.remote import HttpSource, SourceUnavailable, byte_ranges, parse_index, run_files
from pointcast.sourcing import make_source

UTC = UTC
H = 12  # hours of the sample runs in the mirror (kept short: the tests are about transport)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The upstream tree: IFS 00 UTC (oper) and 06 UTC (older scda layout), GFS 00 UTC, each
    data file with one foreign message in the middle; MSM 00 UTC complete, 03 UTC only half
    published (its FH16-33 file kept aside in ``held``)."""
    base = tmp_path_factory.mktemp("upstream")
    tree, cache = base / "tree", base / "sample-cache"
    foreign = {}
    for model, init, stream in (("ifs", "2026-11-20T00:00Z", "oper"),
                                ("ifs", "2026-11-20T06:00Z", "scda"),
                                ("gfs", "2026-11-20T00:00Z", "oper")):
        for f in publish_sample(tree, cache, model, init, horizon_hours=H, stream=stream):
            foreign[f] = add_foreign_message(f)
    publish_sample(tree, cache, "msm", "2026-11-20T00:00Z", horizon_hours=20)
    partial = publish_sample(tree, cache, "msm", "2026-11-20T03:00Z", horizon_hours=20)
    held = base / "held" / partial[1].name
    held.parent.mkdir()
    shutil.move(partial[1], held)
    return {"root": tree, "foreign": foreign, "held": held, "msm03_last": partial[1],
            "sample": cache}


@pytest.fixture
def mirror(tree):
    with Mirror(tree["root"]) as m:
        yield m


def source(mirror: Mirror, prefix: str, **kw) -> HttpSource:
    opts = dict(wait_minutes=0.02, retry_seconds=0.05, timeout_seconds=5.0, horizon_hours=H,
                progress=False)
    opts.update(kw)
    opts.setdefault("mirrors", (mirror.url(prefix),))
    return HttpSource(name="mirror", **opts)


def values(files, model) -> dict[str, np.ndarray]:
    ds = decode(files, model.fields, model=model.id)
    return {k: ds[k].values for k in ds.data_vars}


def sample_files(tree, model_id: str, init: str) -> list[Path]:
    run = tree["sample"] / "sample" / model_id / init
    return [p for p in sorted(run.rglob("*")) if p.is_file() and p.suffix not in (".index", ".idx", ".txt")
            and p.name != "complete"]


# ------------------------------------------------------------------------------------------


def test_index_parsing_and_grouping():
    ecmwf = parse_index('{"param": "2t", "_offset": 0, "_length": 10}\n'
                        '{"param": "2d", "_offset": 10, "_length": 5}\n', "ecmwf")
    assert [(e["param"], e["_offset"], e["_length"]) for e in ecmwf] == [("2t", 0, 10), ("2d", 10, 5)]
    idx = parse_index("1:0:d=2026112000:PRMSL:mean sea level:anl:\n"
                      "2:100:d=2026112000:VIS:surface:anl:\n3:250:d=2026112000:GUST:surface:anl:\n",
                      "wgrib2")
    assert [(e["param"], e["level"], e["_length"]) for e in idx] == [
        ("PRMSL", "mean sea level", 100), ("VIS", "surface", 150), ("GUST", "surface", None)]
    assert idx[0]["date"] == "2026112000"
    # adjacent messages merge, a gap splits, an open end stays open
    assert byte_ranges([idx[0], idx[2]]) == [(0, 100), (250, None)]
    assert byte_ranges(idx) == [(0, None)]
    assert byte_ranges(ecmwf[::-1]) == [(0, 15)]
    # NCEP's multi-field messages: UGRD and VGRD are fields 4.1 and 4.2 of one message, each
    # wanted alone is the whole message's range
    multi = parse_index("3:250:d=2026112000:GUST:surface:anl:\n"
                        "4.1:400:d=2026112000:UGRD:10 m above ground:anl:\n"
                        "4.2:400:d=2026112000:VGRD:10 m above ground:anl:\n"
                        "5:700:d=2026112000:TMP:2 m above ground:anl:\n", "wgrib2")
    assert [(e["n"], e["_offset"], e["_length"]) for e in multi] == [
        ("3", 250, 150), ("4.1", 400, 300), ("4.2", 400, 300), ("5", 700, None)]
    assert byte_ranges([multi[1]]) == byte_ranges([multi[2]]) == [(400, 300)]
    assert byte_ranges(multi[1:3]) == [(400, 300)]


def test_ecmwf_newest_run_only_wanted_messages_in_grouped_ranges(tree, mirror, tmp_path):
    src = source(mirror, "ecmwf")
    run = src.discover(IFS, at("2026-11-20T05:10"))
    assert run.init == at("2026-11-20T00:00") and run.source == "mirror/oper"
    assert max(run.steps).total_seconds() == H * 3600 and run.notes == ()
    fetched = src.fetch(run, IFS, tmp_path)
    assert len(fetched.files) == H // 3 + 1 and "CC-BY-4.0" in fetched.notes[0]
    for f in fetched.files:
        upstream = tree["root"] / "ecmwf" / f.relative_to(tmp_path / "http" / "ifs" / "2026112000")
        gets = mirror.gets(upstream.name + "$")
        # the foreign message splits the file's wanted messages into exactly two requests
        assert len(gets) == 2 and all(g.status == 206 for g in gets)
        assert sum(g.sent for g in gets) == upstream.stat().st_size - tree["foreign"][upstream]
        assert f.stat().st_size == sum(g.sent for g in gets)
    ours = values(fetched.files, IFS)
    theirs = values(sample_files(tree, "ifs", "2026112000"), IFS)
    assert ours.keys() == theirs.keys() and {"t2m", "tp", "u", "t_pl", "orog"} <= ours.keys()
    for k in ours:
        np.testing.assert_array_equal(ours[k], theirs[k])
    # a re-run downloads nothing: no GET at all, the cache answers
    mirror.reset()
    again = source(mirror, "ecmwf").fetch(run, IFS, tmp_path)
    assert again.files == fetched.files and mirror.gets() == []


def test_a_runs_bytes_are_known_from_the_index_before_it_is_downloaded(tree, mirror, tmp_path):
    """`size` reads the indexes (no data file): the bytes the fetch then downloads, exactly
    where every range has a length (ECMWF), the last message by the typical length where the
    index leaves it open (wgrib2); none once the run is in the cache; for files without an
    index (MSM) the estimate at the model's typical message size (`estimated_bytes`). The
    fetch takes the indexes `size` read: each is requested once."""
    for prefix, model, when in (("ecmwf", IFS, "2026-11-20T05:10"), ("noaa", GFS, "2026-11-20T04:00"),
                                ("jma", MSM, "2026-11-20T02:00")):
        src = source(mirror, prefix)
        run = src.discover(model, at(when))
        mirror.reset()
        size = src.size(run, model, tmp_path)
        assert all(r.path.endswith((".index", ".idx")) for r in mirror.requests), mirror.requests
        fetched = src.fetch(run, model, tmp_path)
        got = sum(f.stat().st_size for f in fetched.files)
        indexes = [r.path for r in mirror.gets(r"\.(index|idx)$")]
        assert len(indexes) == len(set(indexes)) == (0 if model is MSM else len(fetched.files)), indexes
        if model is IFS:
            assert size.how == "index" and size.bytes == got
        elif model is GFS:
            assert size.how == "index" and abs(size.bytes - got) < 0.1 * got, (size, got)
        else:  # the real upstream's message size: the mirror's sample files are far coarser
            assert size.how == "estimate" and size.bytes >= got, (size, got)
        assert src.size(run, model, tmp_path).bytes == 0
    # With a need: the bytes of its messages at its steps only, what a fetch of that need writes.
    src = source(mirror, "ecmwf")
    run = src.discover(IFS, at("2026-11-20T05:10"))
    need = Need(tuple((row, 3 * 60) for row in IFS.fields if row.var in ("t2m", "msl")))
    size = src.size(run, IFS, tmp_path / "need", need)
    fetched = src.fetch(run, IFS, tmp_path / "need", need)
    assert max(fetched.run.steps) == timedelta(hours=3)
    assert size.how == "index" and size.bytes == sum(f.stat().st_size for f in fetched.files)
    assert 0 < 4 * size.bytes < src.size(run, IFS, tmp_path / "whole").bytes
    assert src.size(run, IFS, tmp_path / "need", need).bytes == 0


def test_ecmwf_06_utc_run_in_the_older_scda_layout(mirror, tmp_path):
    src = source(mirror, "ecmwf")
    run = src.discover(IFS, at("2026-11-20T08:00"))
    assert run.init == at("2026-11-20T06:00") and run.source == "mirror/scda"
    # the current layout (oper) was asked first
    heads = [r.path for r in mirror.requests if r.method == "HEAD"]
    assert "/oper/" in heads[0] and any("/scda/" in p for p in heads)
    fetched = src.fetch(run, IFS, tmp_path)
    assert all("-scda-fc.grib2" in f.name for f in fetched.files)
    ds = decode(fetched.files, IFS.fields, model="ifs")
    assert str(ds.time.values[0])[:13] == "2026-11-20T06"


def test_gfs_idx_ranges_with_open_end(tree, mirror, tmp_path):
    src = source(mirror, "noaa")
    run = src.discover(GFS, at("2026-11-20T04:00"))
    assert run.init == at("2026-11-20T00:00") and len(run.steps) == H + 1
    fetched = src.fetch(run, GFS, tmp_path)
    for f in fetched.files:
        gets = mirror.gets(f.name + "$")
        assert [g.range.endswith("-") for g in gets] == [False, True]  # the last runs to the end
        upstream = tree["root"] / "noaa" / f.relative_to(tmp_path / "http" / "gfs" / "2026112000")
        assert f.stat().st_size == upstream.stat().st_size - tree["foreign"][upstream]
    ours, theirs = values(fetched.files, GFS), values(sample_files(tree, "gfs", "2026112000"), GFS)
    assert ours.keys() == theirs.keys()
    for k in ours:
        np.testing.assert_array_equal(ours[k], theirs[k])


def test_msm_run_being_published_is_waited_for_then_an_older_one_used(tree, mirror, tmp_path):
    src = source(mirror, "jma", horizon_hours=20)
    t0 = time.monotonic()
    run = src.discover(MSM, at("2026-11-20T04:30"))
    assert time.monotonic() - t0 >= 0.02 * 60 * 0.5  # it waited for the 03 UTC run
    assert run.init == at("2026-11-20T00:00")
    assert len(run.notes) == 1 and "03 UTC" in run.notes[0] and "still being published" in run.notes[0]
    assert run.notes[0].endswith("the older run 2026-11-20 00 UTC is used")
    fetched = src.fetch(run, MSM, tmp_path)
    assert [f.name for f in fetched.files] == [
        "Z__C_RJTD_20261120000000_MSM_GPV_Rjp_Lsurf_FH00-15_grib2.bin",
        "Z__C_RJTD_20261120000000_MSM_GPV_Rjp_Lsurf_FH16-33_grib2.bin"]
    assert all(g.range is None and g.status == 200 for g in mirror.gets(r"\.bin$"))
    assert "/jma/2026/11/20/" in mirror.gets(r"\.bin$")[0].path
    ours, theirs = values(fetched.files, MSM), values(sample_files(tree, "msm", "2026112000"), MSM)
    for k in theirs:
        np.testing.assert_array_equal(ours[k], theirs[k])


def test_no_older_run_is_claimed_when_there_is_none(mirror):
    """Only the 03 UTC run is looked at, and it is still being published at the deadline:
    the source gives up saying so, and does not claim an older run is used."""
    with pytest.raises(SourceUnavailable) as err:
        source(mirror, "jma", horizon_hours=20, lookback_runs=1).discover(MSM, at("2026-11-20T04:30"))
    assert "03 UTC (lsurf) was still being published at the deadline" in str(err.value)
    assert "older run" not in str(err.value)


def test_msm_run_completing_during_the_wait_is_taken(tree, mirror):
    src = source(mirror, "jma", horizon_hours=20, wait_minutes=0.25, retry_seconds=0.2)
    timer = threading.Timer(0.8, shutil.copyfile, (tree["held"], tree["msm03_last"]))
    timer.start()
    try:
        run = src.discover(MSM, at("2026-11-20T04:30"))
    finally:
        timer.join()
        tree["msm03_last"].unlink()
    assert run.init == at("2026-11-20T03:00") and run.notes == ()


def test_retry_after_500_and_fallback_to_the_next_mirror(mirror, tmp_path):
    src = HttpSource(name="two", mirrors=(mirror.url("gone"), mirror.url("ecmwf")),
                     wait_minutes=0.1, retry_seconds=0.05, horizon_hours=3, progress=False)
    mirror.fail(r"/ecmwf/.*-3h-oper-fc\.index$", "500", times=2)
    run = src.discover(IFS, at("2026-11-20T05:00"))
    fetched = src.fetch(run, IFS, tmp_path)
    index_gets = mirror.gets(r"-3h-oper-fc\.index$")
    assert [g.status for g in index_gets] == [404, 500, 404, 500, 404, 200]
    record = json.loads((tmp_path / "http" / "ifs" / "2026112000" / "complete").read_text())
    assert record["mirrors"] == {"mirror1": 2}
    assert len(fetched.files) == 2


@pytest.mark.parametrize("fault", ["truncate", "cut", "corrupt", "slow", "404"])
def test_bad_answers_are_rejected_and_retried(tree, mirror, tmp_path, fault):
    src = source(mirror, "noaa", horizon_hours=1, timeout_seconds=0.4, wait_minutes=0.1)
    run = src.discover(GFS, at("2026-11-20T01:00"))
    mirror.fail(r"f001$", fault, times=1, delay=1.5)
    fetched = src.fetch(run, GFS, tmp_path)
    gets = mirror.gets(r"f001$")
    # the bad answer (a corrupt one is found once both ranges are in), then both ranges again
    assert len(gets) == (4 if fault == "corrupt" else 3)
    f = fetched.files[-1]
    upstream = tree["root"] / "noaa" / f.relative_to(tmp_path / "http" / "gfs" / "2026112000")
    want = upstream.read_bytes()
    cut = tree["foreign"][upstream]
    first = len(want) - cut - gets[-1].sent
    assert f.read_bytes() == want[:first] + want[first + cut:]


def test_gives_up_cleanly_at_the_deadline(mirror, tmp_path):
    src = source(mirror, "ecmwf", horizon_hours=6, wait_minutes=0.02)
    run = src.discover(IFS, at("2026-11-20T05:00"))
    mirror.fail(r"-6h-oper-fc\.grib2$", "500", times=None)
    t0 = time.monotonic()
    with pytest.raises(SourceUnavailable, match=r"-6h-oper-fc\.grib2: gave up at the deadline"):
        src.fetch(run, IFS, tmp_path)
    assert time.monotonic() - t0 < 10
    run_dir = tmp_path / "http" / "ifs" / "2026112000"
    assert not (run_dir / "complete").exists()
    assert not list(run_dir.rglob("*-6h-oper-fc.grib2")) and not list(run_dir.rglob("*.tmp"))


def test_nothing_published_is_a_clear_error(mirror):
    with pytest.raises(SourceUnavailable, match=r"msm: no complete run in the 3 runs"):
        source(mirror, "nothing-here", lookback_runs=3).discover(MSM, at("2026-11-20T04:30"))


def test_tables_name_real_upstreams_and_config_overrides(mirror):
    assert [m.url for m in IFS.upstream.mirrors][:1] == ["https://data.ecmwf.int/forecasts"]
    assert [m.name for m in GFS.upstream.mirrors][:2] == ["aws", "nomads"]
    files = run_files(IFS.upstream.layouts[0], IFS, at("2026-11-20T12:00"), IFS.steps)
    assert files[-1].path == "20261120/12z/ifs/0p25/oper/20261120120000-360h-oper-fc.grib2"
    assert files[-1].index_path.endswith("-360h-oper-fc.index") and len(files) == 85
    files = run_files(MSM.upstream.layouts[0], MSM, at("2026-11-20T12:00"), MSM.steps)
    assert [f.path.rsplit("_", 2)[1] for f in files] == [
        "FH00-15", "FH16-33", "FH34-39", "FH40-51", "FH52-78"]
    # config overrides: extra mirrors after the table's, a layout's template replaced
    src = make_source("jma", type("C", (), {"type": "http", "options": {
        "extra_mirrors": ["http://127.0.0.1:1/x"],
        "layouts": {"lsurf": {"path": "{init:%Y%m%d}/{first}-{last}.bin"}}}})())
    up = src.upstream(MSM)
    assert up.mirrors[-1].url == "http://127.0.0.1:1/x" and len(up.mirrors) == 2
    assert run_files(up.layouts[0], MSM, at("2026-11-20T00:00"), MSM.steps)[0].path == "20261120/0-15.bin"
    with pytest.raises(ValueError, match="no layout"):
        HttpSource(name="x", layouts={"nope": {"path": "x"}}).upstream(MSM)


def _config(dest: Path, sources: str, products: str = "") -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "points").mkdir(exist_ok=True)
    # three of the shipped Japanese points keep the cycle quick
    lines = (ROOT / "config" / "points" / "japan.csv").read_text().splitlines()
    points = [x for x in lines[1:] if x and not x.startswith("#")]
    (dest / "points" / "japan.csv").write_text("\n".join([lines[0], *points[:3]]) + "\n")
    path = dest / "pointcast.toml"
    path.write_text(f"""[output]
root = "output"

{sources}

[models.ifs]
source = "ecmwf"
[models.msm]
source = "jma"

[products.japan]
points = "points/japan.csv"
models = ["msm", "ifs"]
freqs = ["1H"]
horizon_hours = 240
{products}""")
    return path


def test_config_http_source(tmp_path):
    cfg = load_config(_config(tmp_path / "a", """[sources.ecmwf]
type = "http"
[sources.jma]
type = "http"
base_url = "http://127.0.0.1:9/jma/"
wait_minutes = 5
connections = 2
layouts.lsurf.path = "{init:%Y}/{first}.bin"
"""))
    assert cfg.sources["ecmwf"].options == {}
    assert cfg.sources["jma"].options == {"mirrors": ("http://127.0.0.1:9/jma",), "wait_minutes": 5.0,
                                          "connections": 2,
                                          "layouts": {"lsurf": {"path": "{init:%Y}/{first}.bin"}}}
    for bad, key in (('mirrors = ["ftp://x"]', "mirrors"), ("wait_minutes = -1", "wait_minutes"),
                     ("retries = 3", "retries"), ("connections = 0", "connections"),
                     ("unreachable_minutes = -1", "unreachable_minutes")):
        path = _config(tmp_path / key, f'[sources.ecmwf]\ntype = "http"\n{bad}\n[sources.jma]\ntype = "http"\n')
        with pytest.raises(ConfigError) as err:
            load_config(path)
        assert f"sources.ecmwf.{key}" in str(err.value) and "pointcast.toml:6:" in str(err.value)


# ------------------------------------------------------------------------------------------
# One real cycle from the mirror
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cycle_tree(tree):
    """IFS 12 UTC to 240 h and MSM 12 UTC (78 h) of 19 November, for the Japan product."""
    for model in ("ifs", "msm"):
        publish_sample(tree["root"], tree["sample"], model, "2026-11-19T12:00Z",
                       horizon_hours=240 if model == "ifs" else None)
    return tree


def test_cycle_from_the_mirror_drops_what_is_missing(cycle_tree, prefect_harness, tmp_path):
    from pointcast.flows.cycle import cycle

    now = at("2026-11-19T20:00")
    with Mirror(cycle_tree["root"]) as mirror:
        sources = f"""[sources.ecmwf]
type = "http"
base_url = "{mirror.url('ecmwf')}"
horizon_hours = 240
wait_minutes = 0.05
retry_seconds = 0.1
[sources.jma]
type = "http"
base_url = "{mirror.url('jma')}"
wait_minutes = 0.05
retry_seconds = 0.1
progress = false"""
        cfg = _config(tmp_path / "ok", sources)
        run_id = cycle(str(cfg), now=now)
        root = cfg.parent / "output"
        manifest = json.loads((root / "runs" / run_id / "manifest.json").read_text())
        assert manifest["synthetic"] is False and manifest["dropped"] == {}
        assert manifest["models"]["ifs"]["source"] == "ecmwf/oper"
        assert manifest["models"]["msm"]["init"].startswith("2026-11-19T12:00")
        assert any("CC-BY-4.0" in n for n in manifest["source_notes"]["ifs"])
        obj = json.loads(next((root / "runs" / run_id / "json" / "japan").rglob("*.json")).read_text())
        assert obj
        gets = len(mirror.gets())
        # the same cycle again: the published run is recognised, nothing is downloaded
        assert cycle(str(cfg), now=now) == run_id and len(mirror.gets()) == gets

        # MSM's mirror has nothing: the cycle goes on with IFS alone and says why
        cfg2 = _config(tmp_path / "no-msm", sources.replace(mirror.url("jma"), mirror.url("empty")))
        run2 = cycle(str(cfg2), now=now)
        manifest = json.loads((cfg2.parent / "output" / "runs" / run2 / "manifest.json").read_text())
        assert list(manifest["dropped"]) == ["msm"] and "no complete run" in manifest["dropped"]["msm"]
        assert manifest["products"]["japan"]["models"] == ["ifs"]

        # IFS (the model reaching the horizon) missing: nothing is published, the reason is given
        cfg3 = _config(tmp_path / "no-ifs", sources.replace(mirror.url("ecmwf"), mirror.url("empty")))
        state = cycle(str(cfg3), now=now, return_state=True)
        assert state.is_failed() and "no product can be built" in state.message
        assert "no run has been published yet" in state.message and "stays served" not in state.message
        assert not (cfg3.parent / "output" / "current").exists()
        # ... and where a run is served, it stays served (the first cycle's output root)
        current = (root / "current").resolve()
        served = sorted((p.relative_to(current), p.stat().st_size) for p in current.rglob("*"))
        _config(cfg.parent, sources.replace(mirror.url("ecmwf"), mirror.url("empty")))
        state = cycle(str(cfg), now=at("2026-11-20T08:00"), return_state=True)
        assert state.is_failed() and f"the previously published run {run_id} stays served" in state.message
        assert (root / "current").readlink().name == run_id
        assert sorted((p.relative_to(current), p.stat().st_size) for p in current.rglob("*")) == served


def test_cycle_survives_a_missing_file_and_a_corrupt_one(cycle_tree, prefect_harness, tmp_path):
    """MSM's FH16-33 file is not published (404 on every request) while the run's last file
    is: MSM is dropped within seconds though its deadline is 5 minutes, the product falls back
    to IFS alone, the manifest and the failure say why. Then the file is corrupt on every
    answer: MSM is dropped at its deadline, the product again from IFS."""
    from pointcast.flows.cycle import cycle

    now = at("2026-11-19T20:00")
    with Mirror(cycle_tree["root"]) as mirror:
        sources = f"""[sources.ecmwf]
type = "http"
base_url = "{mirror.url('ecmwf')}"
horizon_hours = 240
wait_minutes = 0.05
retry_seconds = 0.1
[sources.jma]
type = "http"
base_url = "{mirror.url('jma')}"
wait_minutes = {{wait}}
missing_minutes = 0.02
retry_seconds = 0.1
progress = false"""
        cache = f'cache = "{tmp_path / "cache"}"\n'
        for case, fault, wait in (("missing", "404", 5), ("corrupt", "corrupt", 0.05)):
            mirror.reset()
            mirror.fail(r"_FH16-33_grib2\.bin$", fault, times=None)
            cfg = _config(tmp_path / case, sources.format(wait=wait))
            cfg.write_text(cfg.read_text().replace('root = "output"\n', 'root = "output"\n' + cache))
            t0 = time.monotonic()
            run_id = cycle(str(cfg), now=now)
            assert time.monotonic() - t0 < 120
            m = json.loads((cfg.parent / "output" / "runs" / run_id / "manifest.json").read_text())
            assert list(m["dropped"]) == ["msm"] and m["products"]["japan"]["models"] == ["ifs"]
            assert "FH16-33" in m["dropped"]["msm"] and "msm" not in m["models"]
            assert ("is not published" if case == "missing" else "gave up at the deadline (0.05 min): mirror0: BadDownload") in m["dropped"]["msm"]
            assert len(mirror.gets("_FH16-33_")) >= 2  # asked again before it was given up


def test_live_configuration_points_at_the_real_upstreams():
    cfg = load_config(ROOT / "config" / "live.toml")
    hosts = {}
    for m in ("ifs", "gfs", "msm"):
        src = make_source(cfg.models[m].source, cfg.source_for(m))
        assert isinstance(src, HttpSource)
        hosts[m] = [u.url.split("/")[2] for u in src.upstream(MODELS[m]).mirrors]
    assert hosts == {"ifs": ["data.ecmwf.int", "ecmwf-forecasts.s3.eu-central-1.amazonaws.com",
                             "ai4edataeuwest.blob.core.windows.net", "storage.googleapis.com"],
                     "gfs": ["noaa-gfs-bdp-pds.s3.amazonaws.com", "nomads.ncep.noaa.gov",
                             "storage.googleapis.com"],
                     "msm": ["database.rish.kyoto-u.ac.jp"]}
    assert cfg.sources["noaa"].options["horizon_hours"] == 120.0
    assert {cfg.models[m].source for m in ("icon-eu", "icon-d2")} == {"dwd"}


def test_per_field_layout_for_dwd_style_trees():
    """One file per field, level and step (DWD's trees): sub-hourly steps for the fine rows
    only, constants at step 0 only, files shared by two rows listed once."""
    from pointcast.sources import ICON_D2
    from pointcast.sources.base import Layout

    lay = Layout("v1", "p/{param}{lv}/r/{init:%Y-%m-%dT%H:%M}/s/PT{step:03d}H{minute:02d}M.grib2",
                 path_vars=lambda row, level, m: {
                     "param": row.param, "lv": "" if level is None else f"/lvt1/x/lv1/{level}"})
    files = [f.path for f in run_files(lay, ICON_D2, at("2026-11-20T00:00"), ICON_D2.steps[:2])]
    assert files[0] == "p/T_2M/r/2026-11-20T00:00/s/PT000H00M.grib2" and len(files) == len(set(files))
    quarter = {f.split("/")[1] for f in files if "PT000H15M" in f}
    assert quarter == {r.param for r in ICON_D2.fields if r.fine}
    assert not [f for f in files if "/HSURF/" in f and "PT000H00M" not in f]
    assert "p/HSURF/r/2026-11-20T00:00/s/PT000H00M.grib2" in files
    assert "p/U/lvt1/x/lv1/850/r/2026-11-20T00:00/s/PT001H00M.grib2" in files
    # The model levels are not the table's: each run's are planned from its HHL.
    assert not [f for f in files if "/HHL/" in f or re.search(r"/U/lvt1/x/lv1/\d\d/", f)]


# ------------------------------------------------------------------------------------------
# Upstreams that cannot be reached, an output root that cannot be written, a cycle stopped
# ------------------------------------------------------------------------------------------

UNRESOLVABLE = "http://pointcast-unreachable.invalid/jma"  # .invalid never resolves (RFC 6761)


@pytest.fixture(scope="module")
def refused():
    """The URL of a loopback port bound and not listening: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}/jma"


def test_unreachable_hosts_are_logged_and_given_up_in_unreachable_minutes(tree, mirror, refused, tmp_path,
                                                                          caplog):
    """No mirror can be connected to (a refused port, a name that does not resolve): each round
    is logged at INFO with the host, the error and the next try, and the source gives up after
    `unreachable_minutes` (here 1.2 s), not at its 5-minute deadline: in discovery, and in a
    fetch whose host went away after discovery."""
    src = source(mirror, "jma", mirrors=(refused, UNRESOLVABLE), wait_minutes=5, unreachable_minutes=0.02)
    # on the source's logger itself: Prefect's logging set-up may have replaced the root's handlers
    logger = logging.getLogger("pointcast.sources.remote")
    logger.addHandler(caplog.handler)
    t0 = time.monotonic()
    try:
        with caplog.at_level("INFO", logger=logger.name), \
                pytest.raises(SourceUnavailable, match=r"no mirror reachable for 0\.02 min") as err:
            src.discover(MSM, at("2026-11-20T04:30"))
    finally:
        logger.removeHandler(caplog.handler)
    assert time.monotonic() - t0 < 30
    host = refused.split("/")[2]
    assert f"cannot connect to {host}: ConnectError" in str(err.value)
    assert "cannot connect to pointcast-unreachable.invalid: ConnectError" in str(err.value)
    rounds = [r.getMessage() for r in caplog.records if r.levelname == "INFO" and "next try in" in r.getMessage()]
    assert len(rounds) >= 2 and all(host in m and "pointcast-unreachable.invalid" in m for m in rounds)
    assert re.search(r"next try in [\d.]+ s \(\d\d:\d\d:\d\d UTC\)", rounds[0])

    run = source(mirror, "jma").discover(MSM, at("2026-11-20T04:30"))  # found, then the host is gone
    t0 = time.monotonic()
    with pytest.raises(SourceUnavailable, match="no mirror reachable"):
        source(mirror, "jma", mirrors=(refused,), wait_minutes=5, unreachable_minutes=0.02).fetch(run, MSM, tmp_path)
    assert time.monotonic() - t0 < 30
    assert not list(tmp_path.rglob("complete")) and not list(tmp_path.rglob("*.bin"))


def _jma_unreachable(mirror: Mirror, refused: str, unreachable_minutes: float) -> str:
    return f"""[sources.ecmwf]
type = "http"
base_url = "{mirror.url('ecmwf')}"
horizon_hours = 240
wait_minutes = 0.05
retry_seconds = 0.1
[sources.jma]
type = "http"
mirrors = ["{refused}", "{UNRESOLVABLE}"]
wait_minutes = 30
unreachable_minutes = {unreachable_minutes}
retry_seconds = 0.2
progress = false"""


@pytest.fixture(scope="module")
def unreachable_site(cycle_tree, refused, prefect_harness, tmp_path_factory):
    """A cycle whose MSM upstream cannot be reached (a refused port, a name that does not
    resolve), `unreachable_minutes` 0.03 while `wait_minutes` is 30: (config, output root, run
    id, seconds the cycle took)."""
    from pointcast.flows.cycle import cycle

    with Mirror(cycle_tree["root"]) as mirror:
        cfg = _config(tmp_path_factory.mktemp("unreachable"), _jma_unreachable(mirror, refused, 0.03))
        t0 = time.monotonic()
        run_id = cycle(str(cfg), now=at("2026-11-19T20:00"))
        return cfg, cfg.parent / "output", run_id, time.monotonic() - t0


def test_an_unreachable_model_is_dropped_and_the_others_publish(unreachable_site, refused):
    cfg, root, run_id, took = unreachable_site
    assert took < 120  # the 30-minute deadline is not waited for
    assert (root / "current").readlink().name == run_id
    m = json.loads((root / "runs" / run_id / "manifest.json").read_text())
    assert list(m["dropped"]) == ["msm"] and m["products"]["japan"]["models"] == ["ifs"]
    why = m["dropped"]["msm"]
    assert "no mirror reachable for 0.03 min (unreachable_minutes)" in why
    assert f"cannot connect to {refused.split('/')[2]}" in why and "pointcast-unreachable.invalid" in why
    outcome = json.loads((root / "cycles" / "last.json").read_text())
    assert outcome["status"] == "degraded" and outcome["dropped"] == m["dropped"]


def _cli(cfg: Path) -> subprocess.Popen:
    """`pointcast run` as an operator starts it, on the session's Prefect server, its output
    (stdout and stderr) read line by line into ``proc.lines``."""
    from prefect.settings import PREFECT_API_URL

    env = dict(os.environ, PREFECT_API_URL=PREFECT_API_URL.value(), PREFECT_LOGGING_LEVEL="INFO")
    proc = subprocess.Popen([sys.executable, "-m", "pointcast.cli", "run", "--config", str(cfg)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc.lines = []  # type: ignore[attr-defined]
    threading.Thread(target=lambda: proc.lines.extend(proc.stdout), daemon=True).start()  # type: ignore[attr-defined]
    return proc


def test_sigterm_during_discovery_ends_the_cycle_at_once(unreachable_site, cycle_tree, refused):
    """`pointcast run` whose MSM discovery waits for an unreachable host (minutes of it allowed):
    SIGTERM while its task sleeps between rounds ends the process within seconds, exit 143,
    saying which run is served; the served run is unchanged, the outcome is recorded, no
    staging tree or scratch store is left."""
    cfg, root, run_id, _ = unreachable_site
    with Mirror(cycle_tree["root"]) as mirror:
        _config(cfg.parent, _jma_unreachable(mirror, refused, 10))
        proc = _cli(cfg)
        try:
            deadline = time.monotonic() + 180
            while sum("pointcast-unreachable.invalid" in line and "next try in" in line
                      for line in proc.lines) < 2:  # type: ignore[attr-defined]
                assert proc.poll() is None and time.monotonic() < deadline, "".join(proc.lines)  # type: ignore[attr-defined]
                time.sleep(0.2)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
        finally:
            proc.kill()
    out = "".join(proc.lines)  # type: ignore[attr-defined]
    assert time.monotonic() - t0 < 30, out
    assert code == 143, out
    assert f"pointcast: cycle stopped by SIGTERM before it finished; run {run_id} is served" in out
    assert "still running" not in out and "Retry" not in out  # every task woke, none retried: no watchdog
    assert (root / "current").readlink().name == run_id
    assert sorted(p.name for p in (root / "runs").iterdir() if p.name != ".lock") == [run_id]  # no staging
    outcome = json.loads((root / "cycles" / "last.json").read_text())
    assert outcome["status"] == "failed" and outcome["message"] == "stopped by SIGTERM before the cycle finished"
    assert not list((root / "cache" / "scratch").glob("*"))


def test_an_output_root_that_cannot_be_written_fails_before_any_download(cycle_tree, prefect_harness, tmp_path,
                                                                         capsys):
    """The root is a path under a regular file (which no permission lets root write either):
    `pointcast run` fails at once, exit 1, naming the root and the error, having asked the
    upstream nothing, and says that nothing is served."""
    from pointcast.cli import main

    with Mirror(cycle_tree["root"]) as mirror:
        cfg = _config(tmp_path, _jma_unreachable(mirror, "http://127.0.0.1:9/jma", 0.01))
        (tmp_path / "taken").write_text("a file, not a directory\n")
        cfg.write_text(cfg.read_text().replace('root = "output"', 'root = "taken/output"'))
        assert main(["run", "--config", str(cfg)]) == 1
        assert mirror.requests == []
    err = capsys.readouterr().err
    assert f"output root {tmp_path / 'taken' / 'output'} cannot be written: [Errno 20] Not a directory" in err
    assert err.rstrip().endswith("; nothing is served yet")
