"""Housekeeping: retention of runs and of cached model runs by configuration, and
a full disk that makes the cycle fail cleanly with the served run untouched.

A full disk is made two ways, both portable (no mount, no root): a real kernel EFBIG from
RLIMIT_FSIZE in the cycle's process (Python ignores SIGXFSZ, so the write fails instead of the
process dying), and ``POINTCAST_FAULT=enospc@<point>`` (pointcast/faults.py) raising ENOSPC
at a chosen write, to reach the Zarr append and the swap, which write small files.
"""

from __future__ import annotations

import os
import shutil

import pytest

from opscycle import SHORT, A, B, archived, b_published, make_world, served_run
from pointcast.config import ConfigError, load_config
from pointcast.publish import NoRoom, make_room, retain_cache


@pytest.fixture(scope="module")
def world(tmp_path_factory, prefect_harness):
    w = make_world(tmp_path_factory.mktemp("housekeeping"), SHORT)
    yield w
    w.forker.close()


def _failed_cleanly(world, root, result):
    assert result["signal"] == 0 and result["code"] == 1, result["log"][-4000:]
    assert "output disk full under" in result["log"] and "served run is unchanged" in result["log"]
    assert served_run(root) == world.run_a
    stores = archived(root)  # complete init times only: A, and B where its append committed
    assert set(stores) == set(SHORT) and all(v in ([A], [A, B]) for v in stores.values()), stores
    assert not list((root / "runs").glob(".staging-*"))  # its space is given back


def test_full_disk_fails_the_real_cycle_cleanly(world, tmp_path):
    """RLIMIT_FSIZE of 64 kB: the first larger JSON file fails with EFBIG, for real."""
    cfg = world.fresh(tmp_path / "t")
    root = cfg.parent / "output"
    result = world.forker.run(cfg, fsize=64_000)
    _failed_cleanly(world, root, result)
    assert "File too large" in result["log"]
    world.publish(cfg)  # room again: the same run publishes
    b_published(world, root)


@pytest.mark.parametrize("fault", ["enospc@write:3", "enospc@zarr:40", "enospc@zarr-commit:2",
                                   "enospc@run-staged", "enospc@current-tmp"])
def test_full_disk_during_publication(world, tmp_path, fault):
    cfg = world.fresh(tmp_path / "t")
    root = cfg.parent / "output"
    result = world.forker.run(cfg, env={"POINTCAST_FAULT": fault}, publish=world.publish_args)
    _failed_cleanly(world, root, result)
    assert "No space left on device" in result["log"]
    assert not list(root.glob("current.tmp-*"))
    world.publish(cfg)
    b_published(world, root)


def _cache_run(cache, kind, model, init, size=1000):
    d = cache / kind / model / init
    d.mkdir(parents=True)
    (d / "data.grib2").write_bytes(b"x" * size)
    return d


def test_retain_cache_keeps_the_newest_runs_per_model_and_those_in_use(tmp_path):
    cache = tmp_path / "cache"
    runs = {(kind, model, init): _cache_run(cache, kind, model, init)
            for kind in ("sample", "http") for model in ("ifs", "msm")
            for init in ("2026112000", "2026112006", "2026112012", "2026112018")}
    (cache / "coverage-europe-0123.npy").write_bytes(b"npy")
    (cache / "sample" / "landmask-40.npy").write_bytes(b"npy")
    other = cache / "sample" / "ifs" / "notes"
    other.mkdir()
    removed = retain_cache(cache, 2, in_use={("msm", "2026112000")})
    kept = {k for k, p in runs.items() if p.exists()}
    assert kept == {(k, m, i) for k in ("sample", "http") for m in ("ifs", "msm")
                    for i in ("2026112012", "2026112018")} | {("sample", "msm", "2026112000"),
                                                            ("http", "msm", "2026112000")}
    assert sorted(removed) == sorted(p for k, p in runs.items() if k not in kept)
    assert (cache / "coverage-europe-0123.npy").exists() and (cache / "sample" / "landmask-40.npy").exists()
    assert other.is_dir() and not list(cache.rglob(".trash-*"))
    # a size cap removes the oldest of what is left, never a run in use
    retain_cache(cache, 2, max_bytes=3500, in_use={("msm", "2026112000")})
    left = sorted(p.relative_to(cache).as_posix() for p in cache.glob("*/*/20*"))
    assert len(left) == 3 and {"http/msm/2026112000", "sample/msm/2026112000"} < set(left)
    assert [x for x in left if "/msm/2026112000" not in x][0].endswith("2026112018"), left
    with pytest.raises(ValueError):
        retain_cache(cache, 0)


def test_make_room_evicts_the_runs_not_needed_before_a_download(tmp_path):
    """Before a download: the runs of the cycle stay, one about to be downloaded takes a
    `keep` place, and the oldest others go while the cap would be exceeded; a download that
    still cannot fit is refused, naming the limit and the bytes."""
    cache = tmp_path / "cache"
    runs = {init: _cache_run(cache, "sample", "ifs", init, size=1000)
            for init in ("2026112000", "2026112006", "2026112012")}
    msm = _cache_run(cache, "sample", "msm", "2026112000", size=1000)
    in_use = {("ifs", "2026112018"), ("msm", "2026112000")}  # ifs's run is not there yet
    # keep 2: the new ifs run and 12 UTC; the cap leaves room for 1500 more bytes beside 2000
    removed = make_room(cache, 2, 3500, in_use, 1500, "ifs run 2026-11-20 18 UTC")
    assert sorted(removed) == [runs["2026112000"], runs["2026112006"]]
    assert runs["2026112012"].exists() and msm.exists()
    # 2500 bytes more: 12 UTC goes too, never msm's run in use
    assert make_room(cache, 2, 3500, in_use, 2500, "ifs run") == [runs["2026112012"]]
    with pytest.raises(NoRoom) as refused:
        make_room(cache, 2, 3500, in_use, 2600, "ifs run 2026-11-20 18 UTC (estimate)")
    assert msm.exists()
    assert str(refused.value) == (
        "ifs run 2026-11-20 18 UTC (estimate) needs 2.6e-06 GB (2600 bytes) in the cache; "
        "[output] cache_max_gb = 3.5e-06 leaves 2.5e-06 GB (2500 bytes) beside the 1e-06 GB "
        "(1000 bytes) of the runs this cycle uses: not downloaded")
    # the file system's free space, less its margin, is the other limit
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(NoRoom, match=r"its file system \(.*\) has .* free, .* above the margin"):
        make_room(cache, 2, None, in_use, free, "ifs run")
    assert make_room(cache, 2, None, in_use, 0, "ifs run") == []  # a cached run needs nothing


def test_a_run_the_cache_cannot_hold_is_not_fetched_and_the_served_run_stays(world, tmp_path):
    """A cap below the run's size: the model is dropped before any download, with the bytes
    and the limit in the log and the outcome; with nothing left to build, run A stays served."""
    import json

    from pointcast.flows.cycle import cycle

    cfg = world.fresh(tmp_path / "t", init="2026-11-22T00:00Z")  # a run no test has cached
    cfg.write_text(cfg.read_text().replace("keep_runs = 8", "keep_runs = 8\ncache_max_gb = 0.0001"))
    root = cfg.parent / "output"
    (root / "cache").unlink()  # its own cache, not the shared one
    (root / "cache").mkdir()
    state = cycle(str(cfg), return_state=True)
    assert state.is_failed()
    message = str(state.result(raise_on_failure=False))
    assert "ifs run 2026-11-22 00 UTC (estimate) needs" in message and "cache_max_gb = 0.0001" in message
    assert f"the previously published run {world.run_a} stays served" in message
    assert served_run(root) == world.run_a
    assert not list((root / "cache").glob("sample/ifs/*"))  # nothing was written
    last = json.loads((root / "cycles" / "last.json").read_text())
    assert "cache_max_gb" in json.dumps(last)


def test_retention_keys_are_read_and_checked(world, tmp_path):
    cfg = world.fresh(tmp_path / "t")
    text = cfg.read_text()
    assert load_config(cfg).output.keep_cache_runs == 2 and load_config(cfg).output.cache_max_gb is None
    cfg.write_text(text.replace("keep_runs = 8", "keep_runs = 8\nkeep_cache_runs = 3\ncache_max_gb = 1.5"))
    out = load_config(cfg).output
    assert out.keep_cache_runs == 3 and out.cache_max_gb == 1.5
    for bad, reason in (("keep_cache_runs = 0", "keep_cache_runs: must be >= 1"),
                        ("cache_max_gb = -2", "cache_max_gb: expected a positive number"),
                        ('cache_max_gb = "lots"', "cache_max_gb: expected a positive number")):
        cfg.write_text(text.replace("keep_runs = 8", f"keep_runs = 8\n{bad}"))
        with pytest.raises(ConfigError, match=f"pointcast.toml:4: output.{reason}"):
            load_config(cfg)


def test_cycle_applies_run_and_cache_retention(world, tmp_path):
    """keep_runs = 1, keep_cache_runs = 1: after run B only B is on disk, in runs/ and in the
    cache (run A's sample IFS run goes). Last in this module: it empties the shared cache of A."""
    cfg = world.fresh(tmp_path / "t")
    cfg.write_text(cfg.read_text().replace("keep_runs = 8", "keep_runs = 1\nkeep_cache_runs = 1"))
    root = cfg.parent / "output"
    cache = root / "cache" / "sample"
    assert sorted(os.listdir(cache / "ifs")) == ["2026112000", "2026112012"]
    world.publish(cfg)
    b_published(world, root)
    assert sorted(p.name for p in (root / "runs").iterdir()) == [".lock", world.run_b]
    assert os.listdir(cache / "ifs") == ["2026112012"]
