"""DWD ICON-EU and ICON-D2 over HTTP end to end, against a loopback mirror (tests/support/mirror.py)
serving the sample source's runs in DWD's v1 tree (native unstructured grids, one message per
file, CLAT/CLON and the constants at step 0) and in the legacy bz2 lat/lon tree: discovery,
the files fetched, the cell centres fetched once per grid, retries, the fallback to the legacy
tree, decoded values, and one real Prefect cycle."""

from __future__ import annotations

import json
import re
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest

from conftest import ROOT
from mirror import Mirror, publish_sample, spanning_levels
from pointcast.config import load_config
from pointcast.ingest import decode, index_file, message
from pointcast.sources import ICON_D2, ICON_EU
from pointcast.sources.remote import HttpSource, cell_centre_files, run_files
from pointcast.sourcing import make_source

UTC = UTC
H_EU, H_D2 = 3, 2  # hours of the sample runs (the tests are about transport)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """DWD's tree: ICON-EU 00 and 06 UTC in v1 (one grid), 12 UTC in the legacy tree only;
    ICON-D2 00 UTC in v1 and 03 UTC still being published (its last step, every field of
    it, kept aside), with a parameter no table asks for beside the wanted ones."""
    base = tmp_path_factory.mktemp("dwd")
    root = base / "tree"
    samples = {}
    for model, init, layout, hours in (("icon-eu", "2026-11-20T00:00Z", "v1", H_EU),
                                       ("icon-eu", "2026-11-20T06:00Z", "v1", H_EU),
                                       ("icon-eu", "2026-11-20T12:00Z", "legacy", H_EU),
                                       ("icon-d2", "2026-11-20T00:00Z", "v1", H_D2),
                                       ("icon-d2", "2026-11-20T03:00Z", "v1", H_D2)):
        cache = base / "sample" / f"{model}-{init[11:13]}"
        samples[model, init[11:13]] = (cache, publish_sample(
            root, cache, model, init, horizon_hours=hours, icon_layout=layout))
    d2 = root / "dwd" / "v1" / "m" / "icon-d2" / "p"
    foreign = d2 / "RELHUM_2M" / "r" / "2026-11-20T00:00" / "s" / "PT001H00M.grib2"
    foreign.parent.mkdir(parents=True)
    shutil.copyfile(d2 / "T_2M" / "r" / "2026-11-20T00:00" / "s" / "PT001H00M.grib2", foreign)
    held = base / "held"
    held.mkdir()
    for f in samples["icon-d2", "03"][1]:
        if f.name == f"PT{H_D2:03d}H00M.grib2":
            f.rename(held / f"{f.parent.parent.parent.parent.name}.grib2")
    return {"root": root, "samples": samples}


@pytest.fixture
def mirror(tree):
    with Mirror(tree["root"]) as m:
        yield m


def source(mirror: Mirror, hours: float, *prefixes: str, **kw) -> HttpSource:
    opts = dict(wait_minutes=0.02, retry_seconds=0.05, timeout_seconds=5.0, horizon_hours=hours,
                progress=False)
    opts.update(kw)
    return HttpSource(name="mirror", mirrors=tuple(mirror.url(p) for p in prefixes or ("dwd",)),
                      **opts)


def values(files, model, levels_of: dict | None = None) -> dict[str, np.ndarray]:
    """The decoded run; ``levels_of``: another run's values, whose model levels to keep (the
    sample holds levels a reader does not ask for)."""
    ds = decode(files, model.fields, model=model.id)
    if levels_of is not None:
        ds = ds.sel({d: levels_of[d] for d in ("hlev", "mlev") if d in levels_of})
    return {k: ds[k].values for k in ds.data_vars} | {
        c: ds[c].values for c in ("time", "clat", "clon", "lat", "lon", "hlev", "mlev")
        if c in ds.coords}


def assert_same(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for k in ours:
        np.testing.assert_array_equal(ours[k], theirs[k], err_msg=k)


def gets(mirror: Mirror, pattern: str = "") -> list[str]:
    return [unquote(r.path) for r in mirror.gets(pattern)]


# ------------------------------------------------------------------------------------------


def test_icon_d2_newest_complete_run_wanted_files_only_and_same_values(tree, mirror, tmp_path):
    src = source(mirror, H_D2)
    run = src.discover(ICON_D2, at("2026-11-20T04:10"))
    # 03 UTC was waited for (its last step is missing), then 00 UTC taken and the note says so
    assert run.init == at("2026-11-20T00:00") and run.source == "mirror/v1"
    assert len(run.notes) == 1 and "03 UTC (v1) was still being published" in run.notes[0]
    heads = [unquote(r.path) for r in mirror.requests if r.method == "HEAD"]
    assert "/dwd/v1/m/icon-d2/p/T_2M/r/2026-11-20T03:00/s/PT000H00M.grib2" in heads
    assert not gets(mirror)  # discovery downloads nothing

    fetched = src.fetch(run, ICON_D2, tmp_path)
    # exactly the table's files plus CLAT/CLON: not RELHUM_2M, no VIS (not in v1), no
    # VMAX_10M at step 0, each file once, nothing of the 03 UTC run; on the model levels HHL
    # of half level 1 (the count) and from the surface up, U and V on the spanning levels
    cache, sample_files = tree["samples"]["icon-d2", "00"]
    nlev, lowest, full = spanning_levels(sample_files)
    assert (nlev, lowest) == (66, 65) and full[0] < 62  # ICON-D2's 65 levels; hills lift it
    ml = "/dwd/v1/m/icon-d2/p/{}/lvt1/150/lv1/{}/r/2026-11-20T00:00/s/PT{:03d}H00M.grib2"
    wanted = {"/dwd/" + unquote(f.path) for f in
              [*cell_centre_files(ICON_D2.upstream.layouts[0], run.init).values()]
              + run_files(ICON_D2.upstream.layouts[0], ICON_D2, run.init, run.steps)} \
        | {ml.format("HHL", lv, 0) for lv in (1, *full, nlev)} \
        | {ml.format(p, lv, h) for p in "UV" for lv in full for h in range(H_D2 + 1)}
    got = gets(mirror)
    hhl_batch = {ml.format("HHL", lv, 0) for lv in range(full[0] - 3, full[0])}
    assert len(got) == len(set(got)) and wanted <= set(got) <= wanted | hhl_batch
    assert len(fetched.files) == len(wanted) - 1  # HHL of half level 1 only gave the count
    assert any(f"full levels {full[0]}-{full[-1]} span the hub heights" in n
               for n in fetched.notes)
    assert all(r.status == 200 and r.range is None for r in mirror.gets())
    assert not [p for p in got if "/RELHUM_2M/" in p or "/VIS/" in p or "T03:00" in p
                or "VMAX_10M/r/2026-11-20T00:00/s/PT000H00M" in p]
    # ICON-D2's 15-minute fields: files of their own, for the fine rows only
    quarter = {p.split("/p/")[1].split("/")[0] for p in got if "H15M.grib2" in p}
    assert quarter == {r.param for r in ICON_D2.fields if r.fine}

    ours = values(fetched.files, ICON_D2)
    assert_same(ours, values(sample_files, ICON_D2, ours))
    assert tuple(ours["mlev"]) == full and tuple(ours["hlev"]) == (*full, nlev)
    assert len(ours["time"]) == H_D2 * 4 + 1  # every quarter hour
    assert {"t2m", "tp", "ssrd", "u_ml", "hhl", "orog"} <= ours.keys() and "vis" not in ours
    # a re-run sends no request: the run and its grid are in the cache
    mirror.reset()
    again = source(mirror, H_D2).fetch(run, ICON_D2, tmp_path)
    assert again.files == fetched.files and mirror.gets() == []


def test_icon_eu_cell_centres_fetched_once_per_grid(tree, mirror, tmp_path):
    src = source(mirror, H_EU)
    first = src.fetch(src.discover(ICON_EU, at("2026-11-20T05:00")), ICON_EU, tmp_path)
    assert first.run.init == at("2026-11-20T00:00")
    assert sorted(p for p in gets(mirror) if "/p/CLAT/" in p or "/p/CLON/" in p) == [
        "/dwd/v1/m/icon-eu/p/CLAT/r/2026-11-20T00:00/s/PT000H00M.grib2",
        "/dwd/v1/m/icon-eu/p/CLON/r/2026-11-20T00:00/s/PT000H00M.grib2"]
    uuid = index_file(first.files[2])[0].grid.uuid
    grid_dir = tmp_path / "http" / "grids" / uuid
    assert first.files[:2] == (grid_dir / "CLAT.grib2", grid_dir / "CLON.grib2")
    assert [m.shortName for f in first.files[:2] for m in index_file(f)] == ["tlat", "tlon"]

    # the 06 UTC run is on the same grid: its constants (HSURF, HHL) are fetched again, its
    # cell centres are not
    mirror.reset()
    run = src.discover(ICON_EU, at("2026-11-20T07:00"))
    second = src.fetch(run, ICON_EU, tmp_path)
    assert run.init == at("2026-11-20T06:00") and second.files[:2] == first.files[:2]
    got = gets(mirror)
    assert not [p for p in got if "/p/CLAT/" in p or "/p/CLON/" in p]
    assert "/dwd/v1/m/icon-eu/p/HSURF/r/2026-11-20T06:00/s/PT000H00M.grib2" in got
    cache, sample_files = tree["samples"]["icon-eu", "06"]
    nlev, _, full = spanning_levels(sample_files)
    assert nlev == 75  # ICON-EU's 74 levels
    assert {int(p.split("/lv1/")[1].split("/")[0]) for p in got if "/p/HHL/" in p} >= {
        1, *full, nlev}  # once per run
    # decode finds the centres among the files handed in, not only in its process memory
    message._CELL_CENTRES.pop(uuid, None)
    ours = values(second.files, ICON_EU)
    assert_same(ours, values(sample_files, ICON_EU, ours))
    assert tuple(ours["mlev"]) == full


def test_cell_centre_files_are_required_and_named_by_parameter():
    # the grid itself: a run cannot go without it, so its files wait out the grace period like
    # any required file's (an optional file is dropped as soon as every mirror says 404)
    files = cell_centre_files(ICON_D2.upstream.layouts[0], at("2026-11-20T00:00"))
    assert sorted(files) == ["CLAT", "CLON"]
    assert all(f.param == param and f.field == param and not f.optional for param, f in files.items())


def test_404_on_v1_files_is_retried_and_a_dead_mirror_skipped(mirror, tmp_path):
    src = source(mirror, 1, "gone", "dwd", wait_minutes=0.2)
    run = src.discover(ICON_EU, at("2026-11-20T05:00"))
    mirror.reset()
    mirror.fail(r"/dwd/v1/m/icon-eu/p/T_2M/r/.*/s/PT001H00M\.grib2$", "404", times=2)
    mirror.fail(r"/dwd/v1/m/icon-eu/p/CLAT/", "500", times=1)
    fetched = src.fetch(run, ICON_EU, tmp_path)
    t2m = mirror.gets(r"/p/T_2M/r/.*PT001H00M")
    assert [(r.path.split("/")[1], r.status) for r in t2m] == [
        ("gone", 404), ("dwd", 404), ("gone", 404), ("dwd", 404), ("gone", 404), ("dwd", 200)]
    assert [r.status for r in mirror.gets(r"/dwd/.*/p/CLAT/")] == [500, 200]
    record = json.loads((tmp_path / "http" / "icon-eu" / "2026112000" / "complete").read_text())
    assert record["mirrors"] == {"mirror1": len({r.path for r in mirror.gets("^/dwd/")
                                                 if r.status == 200})}
    assert record["grid"] == [f.relative_to(tmp_path / "http").as_posix()
                              for f in fetched.files[:2]]
    ds = decode(fetched.files, ICON_EU.fields, model="icon-eu")
    assert np.isfinite(ds.t2m.sel(time="2026-11-20T01:00").values).all()


def test_a_field_the_tree_does_not_publish_is_dropped_in_seconds(mirror, tmp_path):
    """ICON-D2 00 UTC without surface pressure (PS) at any step (a tree that does not carry
    that field), with a deadline of 5 minutes: discovery takes the run at once (the other
    parameters of its last step are there, while a run still being written misses its last
    step for every parameter); the fetch, on two connections, gets every other file before
    it asks for a missing one again, and drops the field with a note within seconds."""
    src = source(mirror, H_D2, wait_minutes=5, connections=2, missing_minutes=0.02)
    gone = r"/p/PS/"
    for method in ("HEAD", "GET"):
        mirror.fail(gone, "404", times=None, method=method)
    t0 = time.monotonic()
    run = src.discover(ICON_D2, at("2026-11-20T02:10"))
    assert run.init == at("2026-11-20T00:00") and run.notes == ()
    fetched = src.fetch(run, ICON_D2, tmp_path)
    assert time.monotonic() - t0 < 60
    (note,) = [n for n in fetched.notes if "not published" in n]
    assert f"dropped: PS ({H_D2 + 1} files)" in note
    requests = mirror.gets()
    missing = [i for i, r in enumerate(requests) if re.search(gone, unquote(r.path))]
    others = [i for i, r in enumerate(requests) if not re.search(gone + "|/p/CL(AT|ON)/", unquote(r.path))]
    paths = [requests[i].path for i in missing]
    retries = [i for i, p in zip(missing, paths, strict=True) if paths.index(p) != missing.index(i)]
    assert len(set(paths)) == H_D2 + 1 and retries and min(retries) > max(others)
    assert all(requests[i].status == 404 for i in missing)
    assert not [f for f in fetched.files if re.search(gone, f.as_posix())]
    # the cache remembers what is not published: a re-run asks for nothing, says the same
    mirror.reset()
    again = source(mirror, H_D2).fetch(run, ICON_D2, tmp_path)
    assert again.files == fetched.files and mirror.gets() == [] and note in again.notes


def test_legacy_tree_is_the_fallback(tree, mirror, tmp_path):
    src = source(mirror, H_EU)
    run = src.discover(ICON_EU, at("2026-11-20T13:00"))
    assert run.init == at("2026-11-20T12:00") and run.source == "mirror/legacy"
    heads = [unquote(r.path) for r in mirror.requests if r.method == "HEAD"]
    assert heads[0].startswith("/dwd/v1/m/icon-eu/") and heads[-1].startswith("/dwd/icon-eu/grib/12/")
    fetched = src.fetch(run, ICON_EU, tmp_path)
    assert all(f.name.endswith(".grib2.bz2") for f in fetched.files)  # no cell centres here
    assert not (tmp_path / "http" / "grids").exists()
    cache, sample_files = tree["samples"]["icon-eu", "12"]
    ours = values(fetched.files, ICON_EU)
    assert_same(ours, values(sample_files, ICON_EU, ours))
    assert tuple(ours["mlev"]) == spanning_levels(sample_files)[2]
    assert "vis" in ours and ours["lat"].size > 1  # the lat/lon tree still has VIS


def test_live_configuration_reads_dwd_v1_first(tmp_path):
    cfg = load_config(ROOT / "config" / "live.toml")
    init = at("2026-11-20T06:00")
    for model in (ICON_EU, ICON_D2):
        src = make_source(cfg.models[model.id].source, cfg.source_for(model.id))
        up = src.upstream(model)
        assert [m.url for m in up.mirrors] == ["https://opendata.dwd.de/weather/nwp"]
        assert [lay.name for lay in up.layouts] == ["v1", "legacy"]
        files = run_files(up.layouts[0], model, init, model.steps)
        assert files[0].path == f"v1/m/{model.id}/p/T_2M/r/2026-11-20T06%3A00/s/PT000H00M.grib2"
        assert files[-1].path.endswith(f"/s/PT{model.horizon // timedelta(hours=1):03d}H00M.grib2")
        assert [f.path for f in cell_centre_files(up.layouts[0], init).values()] == [
            f"v1/m/{model.id}/p/{p}/r/2026-11-20T06%3A00/s/PT000H00M.grib2" for p in ("CLAT", "CLON")]
        assert "CC BY 4.0" in up.licence
    d2 = run_files(ICON_D2.upstream.layouts[0], ICON_D2, init, ICON_D2.steps)
    assert sum(bool(re.search(r"/TOT_PREC/r/.*H(15|30|45)M", f.path)) for f in d2) == 48 * 3


# ------------------------------------------------------------------------------------------
# One real cycle from the mirror
# ------------------------------------------------------------------------------------------


def _config(dest: Path, mirror: Mirror) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "points").mkdir(exist_ok=True)
    lines = (ROOT / "config" / "points" / "europe.csv").read_text().splitlines()
    points = [x for x in lines[1:] if x and not x.startswith("#")]
    (dest / "points" / "europe.csv").write_text("\n".join([lines[0], *points[:3]]) + "\n")
    path = dest / "pointcast.toml"
    path.write_text(f"""[output]
root = "output"

[sources.dwd]
type = "http"
base_url = "{mirror.url('dwd')}"
horizon_hours = {H_EU}
wait_minutes = 0.05
retry_seconds = 0.1
progress = false
[sources.ecmwf]
type = "http"
base_url = "{mirror.url('ecmwf')}"
horizon_hours = {H_EU}
wait_minutes = 0.05
retry_seconds = 0.1
progress = false

[models.icon-eu]
source = "dwd"
[models.ifs]
source = "ecmwf"

# ICON-EU's v1 tree has no VIS: visibility comes from IFS
[products.eu-short]
points = "points/europe.csv"
models = ["icon-eu", "ifs"]
freqs = ["1H"]
horizon_hours = {H_EU}
""")
    return path


def test_cycle_from_the_mirror_on_icon_eu(tree, prefect_harness, tmp_path):
    from pointcast.flows.cycle import cycle

    publish_sample(tree["root"], tmp_path / "sample", "ifs", "2026-11-20T06:00Z",
                   horizon_hours=H_EU)
    now = at("2026-11-20T07:00")
    with Mirror(tree["root"]) as mirror:
        cfg = _config(tmp_path, mirror)
        run_id = cycle(str(cfg), now=now)
        root = cfg.parent / "output"
        manifest = json.loads((root / "runs" / run_id / "manifest.json").read_text())
        assert manifest["synthetic"] is False and manifest["dropped"] == {}
        assert manifest["models"]["icon-eu"]["source"] == "dwd/v1"
        assert manifest["models"]["icon-eu"]["init"].startswith("2026-11-20T06:00")
        assert any("CC BY 4.0" in n for n in manifest["source_notes"]["icon-eu"])
        paris = next((root / "runs" / run_id / "json" / "eu-short").rglob("paris.json"))
        data = json.loads(paris.read_text())["data"]
        assert [d["datetime"][11:16] for d in data] == ["06:00", "07:00", "08:00"]
        assert all(-30 < d["temp_2m"] < 30 and d["visibility"] > 0 for d in data)
        assert manifest["products"]["eu-short"]["models"] == ["icon-eu", "ifs"]
        assert len(gets(mirror, "/p/CLAT/")) == 1


def test_cycle_discovery_skips_runs_too_short_for_the_horizon(tree, tmp_path):
    """A run whose range cannot reach the horizon (MSM 03 UTC: 39 h) is not waited for while
    it is being published: the cycle asks for the newest run long enough (00 UTC, 78 h)."""
    from pointcast.flows.cycle import discover

    publish_sample(tree["root"], tmp_path / "sample", "msm", "2026-11-20T00:00Z")
    publish_sample(tree["root"], tmp_path / "sample", "msm", "2026-11-20T03:00Z",
                   horizon_hours=15)  # FH00-15 out, FH16-33 and FH34-39 not yet
    (tmp_path / "points").mkdir()
    shutil.copy(ROOT / "config" / "points" / "japan.csv", tmp_path / "points")
    with Mirror(tree["root"]) as mirror:
        path = tmp_path / "pointcast.toml"
        path.write_text(f"""[output]
root = "output"
[sources.jma]
type = "http"
base_url = "{mirror.url('jma')}"
wait_minutes = 1
progress = false
[models.msm]
source = "jma"
[products.japan]
points = "points/japan.csv"
models = ["msm"]
freqs = ["1H"]
horizon_hours = 78
""")
        t0 = time.monotonic()
        run = discover.fn(load_config(path), "msm", at("2026-11-20T04:30"), timedelta(hours=78))
        assert time.monotonic() - t0 < 20  # not the minute of wait_minutes
        assert run.init == at("2026-11-20T00:00") and run.notes == ()
        assert mirror.requests and not [r for r in mirror.requests if "2026112003" in r.path]
