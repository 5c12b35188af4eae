"""The fetch plan by need (pointcast.need): what each product reads of each model, only those
messages fetched over HTTP from a loopback mirror (tests/support/mirror.py) and decoded, ENS's
control taken from the IFS's copy of oper-fc, and `pointcast plan`'s sizes (the upstream's
index, or typical message sizes)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from conftest import ROOT
from mirror import Mirror, publish_ensemble
from pointcast.cli import main
from pointcast.config import ConfigError, load_config
from pointcast.ingest import decode_members, index_file
from pointcast.need import check_cache_cap, costs, needs, nominal_needs
from pointcast.sources import ENS, IFS, run_steps
from pointcast.sources.base import Need, RunRef, message_count
from pointcast.sources.remote import HttpSource

INIT = datetime(2026, 11, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 20, 5, tzinfo=UTC)
STEPS = [0, 3, 6]

CONFIG = """\
[output]
root = "output"
{output}

[sources.mirror]
type = "http"
base_url = "{url}"
wait_minutes = 0.05
retry_seconds = 0.05
timeout_seconds = 5.0
horizon_hours = 6
progress = false

[models.ifs]
source = "mirror"
[models.ens]
source = "mirror"
{models}

[products.eu-medium]
points = "{points}/europe.csv"
models = ["ifs"]
ensembles = ["ens"]
freqs = ["1H"]
horizon_hours = {medium}

[products.eu-wind]
points = "{points}/europe.csv"
models = ["ifs"]
ensembles = ["ens"]
freqs = ["1H"]
horizon_hours = {wind}
"""


def config(tmp_path, url="http://127.0.0.1:9", medium=336, wind=72, output="", models=""):
    path = tmp_path / "pointcast.toml"
    path.write_text(CONFIG.format(url=url, points=ROOT / "config" / "points", medium=medium, wind=wind,
                                  output=output, models=models))
    return load_config(path)


def last_hours(need: Need, var: str, level: int | None = None) -> float:
    return max(last for row, last in need.rows
               if row.var == var and (level is None or level in (row.levels or ()))) / 60


def test_ens_wind_above_10m_only_within_the_windpacks_reach(tmp_path):
    cfg = config(tmp_path)
    runs = {m.id: RunRef(m.id, INIT, run_steps(m, INIT), "mirror/oper") for m in (IFS, ENS)}
    ens = needs(cfg, runs)["ens"]
    # eu-wind's 72 h and the step after it (3-hourly there): its quantiles at 100 m
    assert last_hours(ens, "u", 100) == last_hours(ens, "v", 100) == 75
    # eu-medium's 10 m quantiles to its 336 h, and the 6-hourly step after it
    assert last_hours(ens, "u", 10) == last_hours(ens, "u10") == last_hours(ens, "t2m") == 342
    assert last_hours(ens, "tp") == 342
    # the IFS, the last model of both blends, every row of its table to 342 h
    assert {last for _, last in needs(cfg, runs)["ifs"].rows} == {342 * 60}


def test_a_newer_basetime_reads_further_into_an_older_run(tmp_path):
    cfg = config(tmp_path)
    runs = {"ifs": RunRef("ifs", INIT + timedelta(hours=12), run_steps(IFS, INIT), "x"),
            "ens": RunRef("ens", INIT, run_steps(ENS, INIT), "x")}
    ens = needs(cfg, runs)["ens"]
    assert last_hours(ens, "u", 100) == 72 + 12 + 3  # 84 h from the ENS run, and the step after


def test_without_ens_at_heights_the_100m_wind_is_not_read(tmp_path):
    cfg = config(tmp_path)
    cfg = replace(cfg, products={"eu-medium": cfg.products["eu-medium"]})
    runs = {m.id: RunRef(m.id, INIT, run_steps(m, INIT), "x") for m in (IFS, ENS)}
    assert not [row for row, _ in needs(cfg, runs)["ens"].rows if 100 in (row.levels or ())]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("need")
    publish_ensemble(root, "ens", INIT, STEPS)
    return root


def test_only_the_messages_of_the_need_are_fetched_and_decoded(tree, tmp_path):
    """ENS to 6 h with its 100 m wind to 3 h: the 100u/100v messages of 6 h are not requested,
    nor decoded."""
    with Mirror(tree) as mirror:
        src = HttpSource(name="m", mirrors=(mirror.url("ecmwf"),), wait_minutes=0.05, retry_seconds=0.05,
                         timeout_seconds=5.0, horizon_hours=6, progress=False)
        run = src.discover(ENS, NOW)
        need = Need(tuple((row, 3 * 60 if 100 in (row.levels or ()) else 6 * 60) for row in ENS.fields))
        fetched = src.fetch(run, ENS, tmp_path, need)
        whole = src.fetch(run, ENS, tmp_path / "whole")  # the table's every message
    got = {(m.shortName, m.end_minutes // 60) for f in fetched.files for m in index_file(f)}
    assert {("100u", h) for h in (0, 3)} <= got and not {("100u", 6), ("100v", 6)} & got
    assert ("10u", 6) in got
    size = sum(f.stat().st_size for f in fetched.files)
    assert size < sum(f.stat().st_size for f in whole.files)
    # decode reads the need too (the cache holding more is no matter): the control's files
    members = decode_members([f for f in whole.files if "oper-fc" in f.name], ENS.fields, model="ens", need=need)
    u100 = members[0][1]["u"].sel(height=100)
    assert u100.isnull().all(dim=[d for d in u100.dims if d != "time"]).values.tolist() == [False, False, True]


def test_the_ens_control_is_taken_from_the_ifs_copy_of_oper_fc(tree, tmp_path):
    with Mirror(tree) as mirror:
        src = HttpSource(name="m", mirrors=(mirror.url("ecmwf"),), wait_minutes=0.05, retry_seconds=0.05,
                         timeout_seconds=5.0, horizon_hours=6, progress=False)
        ifs_run = replace(src.discover(ENS, NOW), model="ifs", source="m/oper")
        src.fetch(ifs_run, IFS, tmp_path)  # the IFS's oper-fc: its rows (ENS's control among them)
        mirror.reset()
        fetched = src.fetch(src.discover(ENS, NOW), ENS, tmp_path)
        assert not mirror.gets(r"oper-fc\.grib2$")  # not downloaded a second time
        assert mirror.gets(r"enfo-ef\.grib2$")
    control = [m for f in fetched.files if "oper-fc" in f.name for m in index_file(f)]
    assert {m.shortName for m in control} == {"2t", "10u", "10v", "100u", "100v", "tp"}
    meta = json.loads(next(p for p in (tmp_path / "http" / "ens").rglob("*oper-fc.grib2.json")).read_text())
    assert meta["shared_from"].startswith("ifs/")


def test_plan_sizes_from_the_index_are_the_bytes_fetched(tree, tmp_path):
    with Mirror(tree) as mirror:
        cfg = config(tmp_path, url=mirror.url("ecmwf"), medium=6, wind=3)
        report = costs(cfg, now=NOW)
        ens = report["models"]["ens"]
        assert ens["size_from"] == "index"
        src = HttpSource(name="m", mirrors=(mirror.url("ecmwf"),), wait_minutes=0.05, retry_seconds=0.05,
                         timeout_seconds=5.0, horizon_hours=6, progress=False)
        run = src.discover(ENS, NOW)
        fetched = src.fetch(run, ENS, tmp_path / "cache", nominal_needs(cfg, 0)["ens"])
    marker = json.loads((tmp_path / "cache" / "http" / "ens" / "2026112000" / "complete").read_text())
    # the control is the IFS's (fetched with it): the plan counts it there, not twice
    control = sum(f.stat().st_size for f in fetched.files if "oper-fc" in f.name)
    assert ens["shared_with"] == "ifs"
    assert ens["bytes_per_run"] == pytest.approx(marker["bytes"] - control, rel=0.03)
    assert ens["messages_per_run"] == pytest.approx(
        sum(1 for f in fetched.files if "enfo-ef" in f.name for _ in index_file(f)), rel=0.03)


def test_plan_typical_sizes_without_the_upstream(tmp_path, capsys):
    cfg = config(tmp_path, medium=6, wind=3)  # nothing listens on the discard port
    report = costs(cfg, now=NOW)
    ens, ifs = report["models"]["ens"], report["models"]["ifs"]
    assert ens["size_from"] == ifs["size_from"] == "typical"
    need = nominal_needs(cfg, 0)["ens"]
    steps = tuple(s for s in run_steps(ENS, INIT) if s <= timedelta(hours=6))
    assert ens["messages_per_run"] == round(message_count(ENS, need.steps(steps), need) * 50 / 51)
    assert ens["bytes_per_run"] == round(message_count(ENS, need.steps(steps), need) * ENS.message_bytes * 50 / 51)
    assert ens["bytes_per_day"] == ens["bytes_per_run"] * ens["runs_per_day"]
    assert report["peak_disk_bytes"] == sum(report[k] for k in ("cache_bytes", "scratch_bytes", "staging_bytes",
                                                                "runs_bytes"))
    # one run of each model in use (`make_room` evicts the others first), ENS's copy of the control too
    assert report["cache_bytes"] == message_count(ENS, need.steps(steps), need) * ENS.message_bytes \
        + ifs["bytes_per_run"]
    assert main(["plan", "--config", str(cfg.path), "--json", "--offline"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["models"]["ens"]["size_from"] == "typical" and "archive_bytes_per_day" in printed


def test_messages_count_a_field_once_per_level_step_and_member():
    need = Need(tuple((row, 6 * 60) for row in ENS.fields))
    steps = tuple(timedelta(hours=h) for h in (0, 3, 6))
    # 2t, 10u, 10v, 100u, 100v at 0/3/6 h, tp at 0/3/6 h, z at 0 h; 51 members
    assert message_count(ENS, steps, need) == (5 * 3 + 3 + 1) * 51


SAMPLE = """\
[output]
root = "output"
cache_max_gb = {cap}

[sources.sample]
type = "sample"
scale = 32
area = [-25.0, 20.0, 150.0, 72.0]
init = "latest"

[models.ifs]
source = "sample"
[models.msm]
source = "sample"

[products.eu-short]
points = "{points}/europe.csv"
models = ["ifs"]
freqs = ["1H"]
horizon_hours = 72

[products.japan]
points = "{points}/japan.csv"
models = ["msm", "ifs"]
freqs = ["1H"]
horizon_hours = 240
"""


def test_check_and_make_room_ask_the_cache_for_the_same_bytes(tmp_path):
    """The cache need `pointcast check` holds a cap to (plan's cache_bytes: a run of each
    model) is what the cycle's fetches ask `publish.make_room` for, `Source.size` of each
    run's need: one estimate (for MSM at most what the sample then writes, exactly that once a
    run of the model is in the cache, to a byte a message); a run it wrote with more steps
    serves a need of fewer as it is."""
    from pointcast.sources import MODELS
    from pointcast.sourcing import make_source

    path = tmp_path / "pointcast.toml"
    path.write_text(SAMPLE.format(cap=1, points=ROOT / "config" / "points"))
    cfg = load_config(path)
    init = datetime(2026, 1, 1, tzinfo=UTC)  # `nominal_needs`' runs
    wanted = nominal_needs(cfg, 0)
    src = make_source("sample", cfg.source_for("ifs"))
    runs = {m: RunRef(m, init, run_steps(MODELS[m], init), "sample") for m in wanted}
    asked = {m: src.size(runs[m], MODELS[m], cfg.output.cache_dir, need) for m, need in wanted.items()}
    assert {s.how for s in asked.values()} == {"estimate"}
    report = costs(cfg, network=False)
    assert report["cache_bytes"] == sum(s.bytes for s in asked.values())
    check_cache_cap(cfg)
    path.write_text(SAMPLE.format(cap=report["cache_bytes"] * 0.9 / 1e9, points=ROOT / "config" / "points"))
    with pytest.raises(ConfigError, match="below one cycle's cache need"):
        check_cache_cap(load_config(path))

    msm = MODELS["msm"]
    fetched = src.fetch(runs["msm"], msm, cfg.output.cache_dir, wanted["msm"])
    written = json.loads((cfg.output.cache_dir / "sample" / "msm" / "2026010100" / "complete").read_text())["bytes"]
    assert asked["msm"].bytes >= written  # before a run of it: its grid at 16 bits, an upper bound
    later = init + timedelta(hours=12)  # then the bytes a message of the newest run in the cache
    assert src.size(RunRef("msm", later, run_steps(msm, later), "sample"), msm, cfg.output.cache_dir,
                    wanted["msm"]).bytes == pytest.approx(written, rel=0.01)
    shorter = Need(tuple((row, 6 * 60) for row, _ in wanted["msm"].rows))
    assert src.size(runs["msm"], msm, cfg.output.cache_dir, shorter).bytes == 0
    assert src.fetch(runs["msm"], msm, cfg.output.cache_dir, shorter).files == fetched.files
    assert src.size(runs["msm"], msm, cfg.output.cache_dir).how == "cached"


def test_check_rejects_a_cache_cap_below_a_cycles_need(tmp_path):
    cfg = config(tmp_path, output="cache_max_gb = 1")
    with pytest.raises(ConfigError) as err:
        check_cache_cap(cfg)
    text = str(err.value)
    assert "cache_max_gb" in text and "pointcast.toml" in text and ".toml:3:" in text and "GB" in text
    check_cache_cap(config(tmp_path, output="cache_max_gb = 100000"))


def test_run_hours_and_skipped_variables_are_checked_and_used(tmp_path):
    from pointcast.sourcing import check_models

    cfg = config(tmp_path, medium=6, wind=3, models='[models.gefs]\nsource = "mirror"\nrun_hours = [0, 12]')
    check_models(cfg)
    assert cfg.models["gefs"].run_hours == (0, 12)
    with pytest.raises(ConfigError, match=r"run_hours.*no run at \[3\]"):
        check_models(config(tmp_path, medium=6, wind=3, models='[models.gefs]\nsource = "mirror"\nrun_hours = [0, 3]'))
    with pytest.raises(ConfigError, match="essential"):
        check_models(config(tmp_path, medium=6, wind=3, models='[models.gefs]\nsource = "mirror"\nskip_variables = ["t2m"]'))


def test_the_10m_wind_of_a_time_without_the_wind_above():
    """ENS's 10 m wind past the steps its 100 m wind is fetched for: the 10 m height keeps
    its value (eu-medium's 10 m quantiles), the heights above have none."""
    import numpy as np
    import xarray as xr

    from pointcast.interp.vertical import _profile

    u10 = np.array([[3.0], [4.0]])
    u = np.array([[[3.0], [6.0]], [[4.0], [np.nan]]])  # (time, height, point): 100 m at t0 only
    values = {"u10": u10, "v10": u10 * 0, "u": u, "v": u * 0, "t2m": np.full((2, 1), 280.0)}
    ds = xr.Dataset(coords={"height": [10, 100]})
    rows, (at10, at100) = _profile(values, ds, np.zeros(1), np.array([10.0, 100.0]), 2, 1)["wind_u"]
    assert np.asarray(at10)[:, 0].tolist() == [3.0, 4.0]
    assert np.asarray(at100)[0, 0] == 6.0 and np.isnan(np.asarray(at100)[1, 0])
