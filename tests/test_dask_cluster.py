"""The cycle on dask.distributed: a LocalCluster it starts itself, and an existing cluster at a
tcp address. The work must really run on the cluster's workers and publish what the threads
scheduler publishes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from conftest import write_config

PRODUCTS = ("eu-short", "eu-wind")


def small_config(dest: Path, scheduler: str) -> Path:
    """Two products on IFS alone: the smallest cycle that still decodes, extracts,
    blends, builds and publishes JSON and Zarr."""
    path = write_config(dest, scale=16)
    text = path.read_text()
    text = re.sub(r'^scheduler = .*$', f'scheduler = "{scheduler}"', text, flags=re.M)
    kept = []
    for block in re.split(r"(?m)^(?=\[products\.)", text):
        m = re.match(r"\[products\.([\w-]+)\]", block)
        if m is None:
            kept.append(block)
        elif m.group(1) in PRODUCTS:
            kept.append(re.sub(r"^models = .*$", 'models = ["ifs"]', block, flags=re.M))
    path.write_text("".join(kept))
    return path


def leaves(obj, path=""):
    """Numeric leaves of a JSON document by path (strings such as publication times skipped)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{path}/{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{path}/{i}")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield path, float(obj)


def assert_same_output(a: Path, b: Path) -> None:
    ja, jb = (sorted(p.relative_to(r / "current" / "json").as_posix()
                     for p in (r / "current" / "json").rglob("*.json")) for r in (a, b))
    assert ja == jb and len(ja) > 10
    for rel in ja:
        da_, db_ = (dict(leaves(json.loads((r / "current" / "json" / rel).read_bytes()))) for r in (a, b))
        assert da_.keys() == db_.keys(), rel
        np.testing.assert_allclose(list(da_.values()), list(db_.values()), rtol=1e-6, atol=1e-6,
                                   err_msg=rel)
    for pid in PRODUCTS:
        with xr.open_zarr(a / "zarr" / f"{pid}.zarr") as x, xr.open_zarr(b / "zarr" / f"{pid}.zarr") as y:
            assert set(x.data_vars) == set(y.data_vars) and x.sizes == y.sizes
            xr.testing.assert_allclose(x.load(), y.load(), rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def threads_run(tmp_path_factory, prefect_harness):
    from flows.cycle import cycle

    cfg = small_config(tmp_path_factory.mktemp("threads"), "threads")
    cycle(str(cfg))
    return cfg.parent / "output"


def test_cycle_on_local_cluster_matches_threads(threads_run, tmp_path, prefect_harness):
    from flows.cycle import cycle

    cfg = small_config(tmp_path, "local-cluster")
    cycle(str(cfg))
    assert_same_output(threads_run, tmp_path / "output")


def test_cycle_on_existing_cluster_runs_on_its_workers(threads_run, tmp_path, prefect_harness):
    from dask.distributed import Client, LocalCluster, get_task_stream
    from dask.utils import key_split

    from flows.cycle import cycle

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        cfg = small_config(tmp_path, cluster.scheduler_address)
        with get_task_stream(client) as stream:
            cycle(str(cfg))
        # The messages were read, and reduced to the points, by the cluster's workers.
        ran: dict[str, set] = {}
        for t in stream.data:
            ran.setdefault(key_split(t["key"]), set()).add(t["worker"])
        assert len(ran.get("read_values", ())) == 2 and len(ran.get("apply", ())) >= 1, ran
    assert_same_output(threads_run, tmp_path / "output")
