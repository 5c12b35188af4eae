"""Output roots given as fsspec URLs (object stores): the run tree, the `current` object and the
Zarr archive, on fsspec's in-memory store and on file:// URLs (no network)."""

from __future__ import annotations

import json
import re
import secrets

import fsspec
import numpy as np
import pytest
import xarray as xr

from pointcast import publish as pub
from pointcast.config import load_config
from test_dask_cluster import small_config


def archive(init: str, seed: int = 0) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    lead = (np.arange(6) * 3600 * 10**9).astype("timedelta64[ns]")
    return xr.Dataset(
        {"air_temperature": (("init_time", "point", "lead_time"),
                             (273 + 20 * rng.random((1, 2, 6))).astype("float32"), {"units": "K"})},
        coords={"init_time": [np.datetime64(init, "ns")], "point": ["paris", "oslo"], "lead_time": lead},
        attrs={"synthetic": 1})


def publish(root: str, run_id: str, tag: str, ok: bool = True):
    """Run ``r<n>`` is published at second n: retention orders runs by their manifests'
    ``published_at``, whole seconds, which the clock alone would make a tie or not by chance."""
    staging = pub.new_run_dir(root, run_id)
    pub.write_json_tree(staging, {"eu-short/1H/paris.json": json.dumps({"tag": tag}).encode()})
    manifest = {"tag": tag, "published_at": f"2026-11-22T00:00:{int(run_id[1:]):02d}+00:00"}
    return pub.publish_run(root, staging, run_id, manifest, {"ok": ok}, ok)


@pytest.fixture(params=["memory", "file"])
def root(request, tmp_path):
    if request.param == "memory":
        url = f"memory://pointcast-{secrets.token_hex(4)}/out"
        yield url
        fs, path = fsspec.core.url_to_fs(url)
        fs.rm(path, recursive=True)
    else:
        yield f"file://{tmp_path}/out"


def cat(root: str, rel: str) -> bytes:
    fs, path = fsspec.core.url_to_fs(root)
    return fs.cat_file(f"{path}/{rel}")


def test_run_tree_and_current_object(root):
    assert pub.current_run(root) is None
    first = publish(root, "r1", "one")
    assert first == f"{root}/runs/r1" and pub.current_run(root) == "r1"
    assert cat(root, "current") == b"r1\n"
    assert json.loads(cat(root, "runs/r1/json/eu-short/1H/paris.json")) == {"tag": "one"}
    assert json.loads(cat(root, "runs/r1/manifest.json"))["run_id"] == "r1"
    assert cat(root, "runs/r1/json/eu-short/1H/paris.json.gz")  # precompressed sibling uploaded
    publish(root, "r2", "two")
    assert pub.current_run(root) == "r2"
    # A refused run goes to runs/failed/ and `current` does not move.
    with pytest.raises(pub.PublishRefused):
        publish(root, "r3", "three", ok=False)
    assert pub.current_run(root) == "r2"
    assert json.loads(cat(root, "runs/failed/r3/validation.json")) == {"ok": False}
    # The same run published again keeps the published files.
    publish(root, "r2", "changed")
    assert json.loads(cat(root, "runs/r2/json/eu-short/1H/paris.json")) == {"tag": "two"}
    for run_id in ("r4", "r5"):
        publish(root, run_id, run_id)
    removed = pub.retain(root, keep=2)
    fs, path = fsspec.core.url_to_fs(root)
    left = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{path}/runs", detail=False))
    # r1 and r2 (current kept), and the failed r3, published before the oldest kept run
    assert left == ["failed", "r4", "r5"] and sorted(r.rsplit("/runs/", 1)[1] for r in removed) == [
        "failed/r3", "r1", "r2"]


def test_archive_appends_through_fsspec(root):
    a, b = archive("2026-11-22T00", 1), archive("2026-11-22T03", 2)
    url = pub.append_archive(root, "eu-short", a)
    assert url == f"{root}/zarr/eu-short.zarr"
    assert pub.append_archive(root, "eu-short", b) == url
    assert pub.append_archive(root, "eu-short", archive("2026-11-22T03", 2)) == url  # idempotent
    with xr.open_zarr(url) as got:
        assert got.sizes["init_time"] == 2
        np.testing.assert_array_equal(got.air_temperature.values[1], b.air_temperature.values[0])
    assert pub.archive_stores(root, "eu-short") == [url]


def test_config_takes_an_object_store_root(tmp_path):
    cfg = small_config(tmp_path, "threads")
    text = re.sub(r'^root = .*$', 'root = "s3://bucket/forecasts"', cfg.read_text(), flags=re.M)
    cfg.write_text(text)
    out = load_config(cfg).output
    assert out.root == "s3://bucket/forecasts" and out.cache_dir == tmp_path / "cache"


def test_cycle_publishes_to_an_object_store(tmp_path, prefect_harness):
    from pointcast.flows.cycle import cycle

    url = f"memory://pointcast-{secrets.token_hex(4)}/out"
    cfg = small_config(tmp_path, "threads", url)
    run_id = cycle(str(cfg))
    assert pub.current_run(url) == run_id
    manifest = json.loads(cat(url, f"runs/{run_id}/manifest.json"))
    assert manifest["run_id"] == run_id and set(manifest["products"]) == {"eu-short", "eu-wind"}
    fs, path = fsspec.core.url_to_fs(url)
    files = fs.find(f"{path}/runs/{run_id}/json/eu-short/1H")
    assert len(files) > 10 and json.loads(fs.cat_file(files[0]))
    with xr.open_zarr(f"{url}/zarr/eu-short.zarr") as arch:
        assert arch.sizes["init_time"] == 1 and len(arch.data_vars) > 5
        first = arch[sorted(arch.data_vars)[0]].load()
        assert first.notnull().any()
    assert (tmp_path / "cache" / "sample" / "ifs").is_dir()  # model runs stay local
    assert cycle(str(cfg)) == run_id  # recognised as published: nothing written again
    with xr.open_zarr(f"{url}/zarr/eu-short.zarr") as arch:
        assert arch.sizes["init_time"] == 1
    fs.rm(path, recursive=True)
