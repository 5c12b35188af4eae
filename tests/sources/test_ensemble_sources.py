"""The HTTP source fetching the three ensembles from a loopback mirror (tests/support/mirror.py)
in their upstreams' real layouts, every member, tiny grids: ECMWF ENS (the perturbed members in
``enfo-ef``, the control in ``oper-fc``, ``.index`` byte ranges), NOAA GEFS (a file per member
and step, wgrib2 ``.idx``), DWD ICON-EU-EPS (a bz2 file per parameter and step holding the 40
members, CLAT/CLON of the native grid fetched once)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conftest import ROOT
from mirror import EPS_UUID, Mirror, publish_ensemble
from pointcast.config import load_config
from pointcast.ingest import index_file
from pointcast.sources import ENS, GEFS, ICON_EU_EPS, MODELS
from pointcast.sources.remote import HttpSource, SourceUnavailable
from pointcast.sourcing import make_source

INIT = datetime(2026, 11, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 20, 5, tzinfo=UTC)
STEPS = {"ens": [0, 3], "gefs": [0, 3], "icon-eu-eps": [0, 1, 2]}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("ensembles")
    files = {m: publish_ensemble(root, m, INIT, steps) for m, steps in STEPS.items()}
    return root, files


@pytest.fixture
def mirror(tree):
    with Mirror(tree[0]) as m:
        yield m


def source(mirror: Mirror, prefix: str, horizon: int) -> HttpSource:
    return HttpSource(name="mirror", mirrors=(mirror.url(prefix),), wait_minutes=0.02,
                      retry_seconds=0.05, timeout_seconds=5.0, horizon_hours=horizon,
                      progress=False)


def test_ens_members_from_enfo_ef_and_the_control_from_oper_fc(mirror, tmp_path):
    src = source(mirror, "ecmwf", 3)
    run = src.discover(ENS, NOW)
    assert run.init == INIT and run.source == "mirror/enfo"
    fetched = src.fetch(run, ENS, tmp_path)
    names = sorted(f.name for f in fetched.files)
    assert names == ["20261120000000-0h-enfo-ef.grib2", "20261120000000-0h-oper-fc.grib2",
                     "20261120000000-3h-enfo-ef.grib2", "20261120000000-3h-oper-fc.grib2"]
    # every message of the table's parameters, in one range a file (nothing else is in it)
    assert all(len(mirror.gets(n + "$")) == 1 for n in names)
    msgs = [m for f in fetched.files for m in index_file(f)]
    assert {m.shortName for m in msgs} == {"2t", "10u", "10v", "100u", "100v", "tp"}
    got = {(m.shortName, m.member) for m in msgs}
    assert got == {(p, n) for p in ("2t", "10u", "10v", "100u", "100v", "tp")
                   for n in (None, *range(1, 51))}
    perturbed = [m for m in msgs if m.member]
    assert {(m.ensemble_type, m.ensemble_size) for m in perturbed} == {(3, 51)}
    assert "CC-BY-4.0" in fetched.notes[0]


def test_gefs_a_file_per_member_and_step(tree, mirror, tmp_path):
    src = source(mirror, "noaa", 3)
    run = src.discover(GEFS, NOW)
    assert run.init == INIT and [s.total_seconds() / 3600 for s in run.steps] == [0, 3]
    fetched = src.fetch(run, GEFS, tmp_path)
    assert len(fetched.files) == 2 * 31
    assert {f.name.split(".")[0] for f in fetched.files} == {"gec00", *(f"gep{n:02d}" for n in range(1, 31))}
    msgs = [m for f in fetched.files for m in index_file(f)]
    assert {(m.shortName, m.member) for m in msgs} == {
        (p, n) for p in ("2t", "10u", "10v", "tp", "sp", "prmsl") for n in range(31)}
    # the ground's pressures at the analysis only, though every file has them
    assert {m.end_minutes for m in msgs if m.shortName in ("sp", "prmsl")} == {0}
    assert {m.ensemble_type for m in msgs if m.member == 0} == {1}
    assert {m.ensemble_type for m in msgs if m.member} == {3}
    # the idx's "n:offset" ranges with an open end: the last message of a file runs to its end
    assert all(g.status == 206 for g in mirror.gets(r"pgrb2s\.0p25\.f\d+$"))


def test_gefs_member_missing_is_a_run_with_a_hole(tree, mirror, tmp_path):
    mirror.fail(r"gep17\.t00z\.pgrb2s\.0p25\.f000", "404", times=None)
    with pytest.raises(SourceUnavailable, match="gep17"):
        source(mirror, "noaa", 3).fetch(source(mirror, "noaa", 3).discover(GEFS, NOW), GEFS,
                                        tmp_path)


def test_icon_eu_eps_bz2_files_of_40_members_and_cell_centres_once(tree, mirror, tmp_path):
    src = source(mirror, "dwd", 2)
    run = src.discover(ICON_EU_EPS, NOW)
    assert run.init == INIT and run.source == "mirror/legacy"
    fetched = src.fetch(run, ICON_EU_EPS, tmp_path)
    grid = [f for f in fetched.files if "/grids/" in f.as_posix()]
    assert [f.name for f in grid] == ["CLAT.grib2.bz2", "CLON.grib2.bz2"]
    assert grid[0].parent.name == EPS_UUID
    data = [f for f in fetched.files if f not in grid]
    assert len(data) == 4 * 3 + 1 and all(f.name.endswith(".grib2.bz2") for f in data)
    hsurf = [m for f in data if "time-invariant" in f.name for m in index_file(f)]
    assert [(m.shortName, m.member) for m in hsurf] == [("HSURF", None)]  # every member's ground
    t2m = [m for f in data if "_t_2m" in f.name for m in index_file(f)]
    assert sorted({m.member for m in t2m}) == list(range(1, 41))
    assert {(m.ensemble_type, m.ensemble_size) for m in t2m} == {(3, 40)}
    # a second run on the grid asks for no cell centre again
    mirror.reset()
    again = source(mirror, "dwd", 2).fetch(run, ICON_EU_EPS, tmp_path)
    assert again.files == fetched.files and mirror.gets() == []


def test_live_configuration_names_the_ensembles_real_upstreams():
    cfg = load_config(ROOT / "config" / "live.toml")
    hosts = {}
    for m in ("ens", "gefs", "icon-eu-eps"):
        src = make_source(cfg.models[m].source, cfg.source_for(m))
        assert isinstance(src, HttpSource)
        hosts[m] = [u.url.split("/")[2] for u in src.upstream(MODELS[m]).mirrors]
    assert hosts == {"ens": ["data.ecmwf.int", "ecmwf-forecasts.s3.eu-central-1.amazonaws.com",
                             "ai4edataeuwest.blob.core.windows.net", "storage.googleapis.com"],
                     "gefs": ["noaa-gefs-pds.s3.amazonaws.com", "nomads.ncep.noaa.gov"],
                     "icon-eu-eps": ["opendata.dwd.de"]}
