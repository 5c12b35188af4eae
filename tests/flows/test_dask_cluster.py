"""The cycle on dask.distributed: a LocalCluster it starts itself, and an existing cluster of
`dask scheduler` and `dask worker` processes at a tcp address. The work (message reads,
extraction, the slices' builds) must really run on the cluster's workers and publish the very
bytes the threads scheduler publishes."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import xarray as xr

from conftest import write_config

PRODUCTS = ("eu-short", "eu-wind")


def small_config(dest: Path, scheduler: str, root: str | None = None) -> Path:
    """Two products on IFS alone: the smallest cycle that still decodes, extracts,
    blends, builds and publishes JSON and Zarr. ``root``: an object store's URL as the output
    root, the model runs then cached in ``dest/cache`` (holding the shared sample runs)."""
    path = write_config(dest, scale=16)
    text = path.read_text()
    text = re.sub(r'^scheduler = .*$', f'scheduler = "{scheduler}"', text, flags=re.M)
    if root is not None:
        text = re.sub(r'^root = .*$', f'root = "{root}"\ncache = "cache"', text, flags=re.M)
        (dest / "output" / "cache").rename(dest / "cache")
    kept = []
    for block in re.split(r"(?m)^(?=\[products\.)", text):
        m = re.match(r"\[products\.([\w-]+)\]", block)
        if m is None:
            kept.append(block)
        elif m.group(1) in PRODUCTS:
            kept.append(re.sub(r"^models = .*$", 'models = ["ifs"]', block, flags=re.M))
    path.write_text("".join(kept))
    return path


def assert_same_output(a: Path, b: Path) -> None:
    """The same published JSON bytes (their stamps of the clock blanked) and the same archives."""
    from test_cycle import published_digests

    da_, db_ = published_digests(a), published_digests(b)
    assert len(da_) > 10 and da_.keys() == db_.keys()
    assert [rel for rel in da_ if da_[rel] != db_[rel]] == []
    for pid in PRODUCTS:
        with xr.open_zarr(a / "zarr" / f"{pid}.zarr") as x, xr.open_zarr(b / "zarr" / f"{pid}.zarr") as y:
            xr.testing.assert_identical(x.load(), y.load())


@pytest.fixture(scope="module")
def threads_run(tmp_path_factory, prefect_harness):
    from pointcast.flows.cycle import cycle

    cfg = small_config(tmp_path_factory.mktemp("threads"), "threads")
    cycle(str(cfg))
    return cfg.parent / "output"


def test_cycle_on_local_cluster_matches_threads(threads_run, tmp_path, prefect_harness):
    from pointcast.flows.cycle import cycle

    cfg = small_config(tmp_path, "local-cluster")
    cycle(str(cfg))
    assert_same_output(threads_run, tmp_path / "output")


def test_local_cluster_workers_keep_the_dynamic_mmap_threshold(tmp_path):
    """distributed's nannies give their workers MALLOC_TRIM_THRESHOLD_, which also fixes
    glibc's mmap threshold (mallopt(3)): the cycle's LocalCluster starts its workers without
    it, and with the other variables of ``distributed.nanny.pre-spawn-environ``."""
    from distributed import default_client

    from pointcast.cluster import dask_scheduler
    from pointcast.config import load_config

    cfg = load_config(small_config(tmp_path, "local-cluster"))
    with dask_scheduler(cfg):
        env = default_client().run(lambda: {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_",
                                                                          "OMP_NUM_THREADS")})
    assert len(env) == cfg.dask.workers
    assert all(e == {"MALLOC_TRIM_THRESHOLD_": None, "OMP_NUM_THREADS": "1"} for e in env.values()), env


@contextmanager
def cli_cluster(base: Path, workers: int = 2, first_worker_env: dict | None = None,
                scheduler_env: dict | None = None):
    """A dask cluster of the real commands: ``dask scheduler`` and ``dask worker`` processes
    on 127.0.0.1 (one thread each), started in their own directory, ``first_worker_env``
    added to the first worker's environment; yields its address and the workers' log files."""
    from dask.distributed import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    dask_cli = str(Path(sys.executable).parent / "dask")
    base.mkdir(parents=True, exist_ok=True)
    procs, logs = [], []
    try:
        procs.append(subprocess.Popen(
            [dask_cli, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            cwd=base, env={**os.environ, **(scheduler_env or {})}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=(base / "scheduler.log").open("wb")))
        for i in range(workers):
            logs.append(base / f"worker-{i}.log")
            procs.append(subprocess.Popen(
                [dask_cli, "worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard",
                 "--name", f"w{i}"], cwd=base, env={**os.environ, **((first_worker_env or {}) if i == 0 else {})},
                start_new_session=True, stdout=subprocess.DEVNULL, stderr=logs[-1].open("wb")))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=60)
        yield address, logs
    finally:
        # Each command in a session of its own, ended with its children (a nanny's worker):
        # SIGTERM, then SIGKILL for what is still there after a few seconds (a nanny that is
        # restarting a killed worker ignores SIGTERM for 20 s and more).
        for proc in reversed(procs):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)
            proc.wait()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:  # the group is gone
        pass


def test_cycle_on_a_cluster_of_dask_worker_processes_publishes_the_threads_bytes(threads_run, tmp_path,
                                                                                   prefect_harness):
    """A cluster of `dask scheduler` and two `dask worker` processes: the model is decoded and
    extracted (one task), and the slices built and written, by its workers (the scheduler's
    task stream says which worker ran what), and the run publishes the bytes the threads
    scheduler does."""
    from dask.distributed import Client, get_task_stream
    from dask.utils import key_split

    from pointcast.flows.cycle import cycle

    with cli_cluster(tmp_path / "cluster") as (address, _), Client(address) as client:
        cfg = small_config(tmp_path, address)
        with get_task_stream(client) as stream:
            cycle(str(cfg))
        workers = set(client.scheduler_info()["workers"])
        ran: dict[str, list] = {}
        for t in stream.data:
            ran.setdefault(key_split(t["key"]), []).append(t["worker"])
    assert len(ran["extract_model"]) == 1 and set(ran["extract_model"]) <= workers and len(workers) == 2, ran
    # a slice a worker at least, each on a worker
    assert len(ran["build_slice"]) >= 2 and set(ran["build_slice"]) <= workers, ran
    assert_same_output(threads_run, tmp_path / "output")
