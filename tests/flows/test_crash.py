"""Crash safety: cycles SIGKILLed at eighteen points, from fetching to retention,
leave the previous run served and the archive readable; the next cycle publishes.

Every test copies a template output root serving run A, then runs (parts of) the cycle of run
B in a real process that is killed: forked children of a pre-imported interpreter (opscycle.
Forker) and the `pointcast` CLI, reporting to the session's Prefect server. Early stages are
killed from outside when their log line appears; points inside publication are reached
deterministically with ``POINTCAST_FAULT=kill@<point>[:<n>]`` (pointcast/faults.py). The
points inside publication are exercised on the publish stage alone (the cycle's last task,
given what a real cycle built), so eighteen kills fit in well under a minute.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from opscycle import ROOT, SHORT, A, B, archived, b_published, make_world, prefect_env, served_run


@pytest.fixture(scope="module")
def world(tmp_path_factory, prefect_harness):
    w = make_world(tmp_path_factory.mktemp("crash"), SHORT)
    yield w
    w.forker.close()


def _killed(result: dict) -> None:
    assert result["signal"] == signal.SIGKILL, result["log"][-4000:]
    assert not any(line.startswith("published ") for line in result["log"].splitlines())


def _a_served_b_nowhere_partial(world, root) -> None:
    """What a reader sees after a crash: run A, complete; archives with A and perhaps B."""
    assert served_run(root) == world.run_a
    stores = archived(root)
    assert set(stores) == set(SHORT)
    for inits in stores.values():
        assert inits in ([A], [A, B]), stores


def test_killed_cycles_leave_the_previous_run_served_and_the_next_one_completes(world, tmp_path):
    """One output root, four real cycles killed at later and later stages (each passes the
    point the previous one died at), then a cycle that completes."""
    from pointcast.flows.cycle import cycle

    cfg = world.fresh(tmp_path / "t")
    root = cfg.parent / "output"
    for kill_on in (r"Task run 'fetch-\S+' - .* files ready",
                    r"decoded \d+ variables on \d+ times",
                    r"validation passed"):
        _killed(world.forker.run(cfg, kill_on=kill_on))
        _a_served_b_nowhere_partial(world, root)
    # `pointcast run` itself, killed in the middle of the Zarr append
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "pointcast"), "run",
                           "--config", str(cfg)], cwd=ROOT, capture_output=True, text=True,
                          env={**prefect_env(), "POINTCAST_FAULT": "kill@zarr:50"}, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-4000:]
    _a_served_b_nowhere_partial(world, root)
    # never served, removed after 1 h: one per cycle killed after its staging directory was
    # made (as the models start decoding, so that products build while later models decode):
    # killed on the first model decoded, on "validation passed" and in the Zarr append (one
    # fewer allowed: each kill races the process it stops)
    assert len(list((root / "runs").glob(".staging-*"))) in (2, 3)
    assert list((root / "runs").glob(".staging-*/archive"))  # their staged archives, until...
    assert cycle(str(cfg)) == world.run_b
    b_published(world, root)
    assert not list((root / "runs").glob(".staging-*/archive"))  # ...the next cycle's retention


def test_sigterm_while_building_stops_the_cycle_cleanly(world, tmp_path):
    """SIGTERM as the model is decoded and the products start building (its scratch stores
    written, its staging tree made): the cycle ends within seconds, recording its outcome; run A
    stays served, no archive gains B, no staging tree or scratch store is left (none made
    again after the clean-up)."""
    import json

    cfg = world.fresh(tmp_path / "t")
    root = cfg.parent / "output"
    result = world.forker.run(cfg, kill_on=r"decoded \d+ variables on \d+ times", send=signal.SIGTERM)
    # the flow re-raises the signal once it has unwound (Prefect): the default action ends it
    assert result["signal"] == signal.SIGTERM, result["log"][-4000:]
    assert result["after_signal_s"] < 30
    assert not any(line.startswith("published ") for line in result["log"].splitlines())
    assert served_run(root) == world.run_a
    assert archived(root) == {pid: [A] for pid in SHORT}
    assert not list((root / "runs").glob(".staging-*"))
    assert not (root / "cache" / "scratch" / world.run_b).exists()
    outcome = json.loads((root / "cycles" / "last.json").read_text())
    assert outcome["status"] == "failed" and outcome["message"] == "stopped by SIGTERM before the cycle finished"


# (test id, fault) inside the publish stage; write/zarr counts: the n-th durable file write
# (JSON and .gz files alternate, then Zarr objects) and the n-th Zarr object
PUBLISH_KILLS = [
    ("json-first-file-half-written", "kill@write:1"),
    ("gz-file-half-written", "kill@write:2"),
    ("json-tree-midway", "kill@json:9"),
    ("json-file-half-written-late", "kill@write:33"),
    ("zarr-first-object", "kill@zarr:1"),
    ("zarr-reserve", "kill@zarr:20"),
    ("zarr-slot", "kill@zarr:50"),
    ("zarr-chunk-half-written", "kill@write:94"),
    ("zarr-before-first-commit", "kill@zarr-commit:1"),
    ("zarr-one-product-committed", "kill@zarr-commit:2"),
    ("run-staged", "kill@run-staged"),
    ("run-renamed", "kill@run-renamed"),
    ("current-link-made", "kill@current-tmp"),
]


@pytest.mark.parametrize("fault", [k[1] for k in PUBLISH_KILLS], ids=[k[0] for k in PUBLISH_KILLS])
def test_killed_publication_leaves_the_previous_run_served(world, tmp_path, fault):
    cfg = world.fresh(tmp_path / "t")
    root = cfg.parent / "output"
    _killed(world.forker.run(cfg, env={"POINTCAST_FAULT": fault}, publish=world.publish_args))
    _a_served_b_nowhere_partial(world, root)
    world.publish(cfg)
    b_published(world, root)


def test_killed_during_retention(world, tmp_path):
    """Killed while deleting the old run (keep_runs = 1): the new run is already served,
    the half-deleted one is invisible under a .trash name, and the next pass finishes."""
    cfg = world.fresh(tmp_path / "t")
    cfg.write_text(cfg.read_text().replace("keep_runs = 8", "keep_runs = 1"))
    root = cfg.parent / "output"
    _killed(world.forker.run(cfg, env={"POINTCAST_FAULT": "kill@trash:1"}, publish=world.publish_args))
    b_published(world, root)
    assert not (root / "runs" / world.run_a).exists()
    assert len(list((root / "runs").glob(".trash-*"))) == 1
    world.publish(cfg)  # the same run again: kept as published, retention completes
    b_published(world, root)
    assert sorted(p.name for p in (root / "runs").iterdir()) == [".lock", world.run_b]


def _hung(_signum, _frame):
    raise TimeoutError("the cycle did not end within 120 s of its worker's death")


def test_a_worker_killed_mid_slice_fails_the_cycle_and_publishes_nothing(world, tmp_path):
    """The cycle on a cluster of two `dask worker` processes, the first SIGKILLed while
    writing a slice's files (``POINTCAST_FAULT`` in its environment only, and its nanny's
    restarts; the scheduler retries no task whose worker died): the cycle fails at once, run A
    stays served, no archive gains B, and the failed run's staging tree is gone. The healthy
    worker's slices end: the cycle broadcasts nothing to the workers (distributed's
    replication waits for ever for a worker that died; an alarm fails the test if it hangs)."""
    from dask.distributed import KilledWorker

    from pointcast.flows.cycle import cycle
    from test_dask_cluster import cli_cluster

    cfg = world.fresh(tmp_path / "t")
    root = cfg.parent / "output"
    with cli_cluster(tmp_path / "cluster", first_worker_env={"POINTCAST_FAULT": "kill@json:3"},
                     # one task a worker at a time: each of the two takes a slice
                     scheduler_env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0",
                                    "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0"}) as (address, logs):
        cfg.write_text(cfg.read_text().replace('scheduler = "threads"', f'scheduler = "{address}"'))
        previous = signal.signal(signal.SIGALRM, _hung)
        signal.alarm(120)
        try:
            with pytest.raises(KilledWorker, match="build_slice"):
                cycle(str(cfg))
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        assert any("signal 9" in log.read_text() for log in logs), [log.read_text()[-2000:] for log in logs]
    assert served_run(root) == world.run_a
    assert archived(root) == {pid: [A] for pid in SHORT}
    assert not list((root / "runs").glob(".staging-*"))
