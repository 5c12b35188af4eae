"""pointcast.publish: the run tree (staging, atomic swap, retention) and the Zarr archive.

Everything runs on real files in tmp_path and real Zarr stores; crashes are simulated by
making one internal step raise and then checking what a reader sees.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from pathlib import Path

import fsspec
import numpy as np
import pytest
import xarray as xr
import zarr

from pointcast import publish as pub
from pointcast.publish import archive, local

# ---------------------------------------------------------------------------------------------
# run tree
# ---------------------------------------------------------------------------------------------


def files_for(tag: str) -> dict[str, bytes]:
    return {
        "eu-short/index.json": json.dumps({"product": "eu-short", "tag": tag}).encode(),
        "eu-short/1H/paris.json": f'{{"latitude": 48.85, "longitude": 2.35, "basetime": "{tag}"}}'.encode(),
        "eu-short/15min/paris.json": b'{"latitude": 48.85, "longitude": 2.35, "x": 1}',
    }


def make_run(root: Path, run_id: str, tag: str | None = None, ok: bool = True) -> Path:
    staging = pub.new_run_dir(root, run_id)
    pub.write_json_tree(staging, files_for(tag or run_id))
    return pub.publish_run(root, staging, run_id, {"products": {"eu-short": ["ifs"]}},
                           {"ok": ok, "checks": []}, ok)


def served(root: Path, rel: str = "eu-short/1H/paris.json") -> bytes:
    return (root / "current" / "json" / rel).read_bytes()


def test_new_run_dir_is_hidden_staging_in_runs(tmp_path):
    staging = pub.new_run_dir(tmp_path, "20261122T00")
    assert staging.parent == tmp_path / "runs"
    assert staging.name.startswith(".staging-20261122T00-")
    assert staging.is_dir()
    assert pub.new_run_dir(tmp_path, "20261122T00") != staging
    with pytest.raises(ValueError):
        pub.new_run_dir(tmp_path, "../evil")
    with pytest.raises(ValueError):
        pub.new_run_dir(tmp_path, "failed")


def test_publish_swaps_current_and_keeps_previous_readable(tmp_path):
    a = make_run(tmp_path, "run-a")
    assert a == tmp_path / "runs" / "run-a"
    link = tmp_path / "current"
    assert link.is_symlink() and os.readlink(link) == "runs/run-a"  # relative target
    assert b'"run-a"' in served(tmp_path)
    assert json.loads((a / "manifest.json").read_text())["run_id"] == "run-a"
    assert json.loads((a / "validation.json").read_text()) == {"ok": True, "checks": []}

    # run b is written but not yet published: current still serves a, b is invisible
    staging = pub.new_run_dir(tmp_path, "run-b")
    pub.write_json_tree(staging, files_for("run-b"))
    assert b'"run-a"' in served(tmp_path)
    assert not (tmp_path / "runs" / "run-b").exists()
    held = (tmp_path / "current").resolve() / "json" / "eu-short" / "1H" / "paris.json"

    pub.publish_run(tmp_path, staging, "run-b", {}, {"ok": True}, True)
    assert os.readlink(link) == "runs/run-b"
    assert b'"run-b"' in served(tmp_path)
    assert b'"run-a"' in held.read_bytes()  # the previous run stays readable in its directory
    assert not staging.exists()
    assert pub.current_run(tmp_path) == "run-b"
    assert not list(tmp_path.glob("current.tmp-*"))


def test_current_never_missing_during_swaps(tmp_path):
    make_run(tmp_path, "r00")
    stop = threading.Event()
    misses: list[str] = []

    def reader():
        while not stop.is_set():
            try:
                served(tmp_path)
            except OSError as e:  # missing/dangling current, missing file
                misses.append(repr(e))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 25):
            make_run(tmp_path, f"r{i:02d}")
    finally:
        stop.set()
        t.join()
    assert misses == []
    assert pub.current_run(tmp_path) == "r24"


def test_refused_run_goes_to_failed_and_current_unchanged(tmp_path):
    make_run(tmp_path, "good")
    with pytest.raises(pub.PublishRefused) as exc:
        make_run(tmp_path, "bad", ok=False)
    failed = tmp_path / "runs" / "failed" / "bad"
    assert exc.value.path == failed
    assert (failed / "json" / "eu-short" / "1H" / "paris.json").is_file()
    assert json.loads((failed / "validation.json").read_text())["ok"] is False
    assert (failed / "manifest.json").is_file()
    assert not (tmp_path / "runs" / "bad").exists()
    assert pub.current_run(tmp_path) == "good"
    assert b'"good"' in served(tmp_path)
    # a second failed attempt of the same run replaces the first one, nothing accumulates
    with pytest.raises(pub.PublishRefused):
        make_run(tmp_path, "bad", tag="bad-again", ok=False)
    assert b"bad-again" in (failed / "json" / "eu-short" / "1H" / "paris.json").read_bytes()
    assert [p.name for p in (tmp_path / "runs" / "failed").iterdir()] == ["bad"]


def test_refused_first_run_leaves_no_current(tmp_path):
    with pytest.raises(pub.PublishRefused):
        make_run(tmp_path, "bad", ok=False)
    assert not os.path.lexists(tmp_path / "current")
    assert pub.current_run(tmp_path) is None


def test_interrupted_cycle_leaves_previous_run_served(tmp_path, monkeypatch):
    make_run(tmp_path, "run-a")
    real_write = pub.staging.write_bytes
    calls = {"n": 0}

    def failing_write(path, data, sync=True):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full (simulated)")
        real_write(path, data, sync)

    monkeypatch.setattr(pub.staging, "write_bytes", failing_write)
    staging = pub.new_run_dir(tmp_path, "run-b")
    with pytest.raises(OSError, match="simulated"):
        pub.write_json_tree(staging, files_for("run-b"))
    monkeypatch.undo()

    assert pub.current_run(tmp_path) == "run-a"
    assert b'"run-a"' in served(tmp_path)
    assert not (tmp_path / "runs" / "run-b").exists()
    # the half-written staging directory is hidden and cleaned up once stale
    assert staging.is_dir()
    old = time.time() - 2 * 3600
    for dirpath, _, _ in os.walk(staging):
        os.utime(dirpath, (old, old))
    removed = pub.retain(tmp_path, keep=5)
    assert staging in removed and not staging.exists()
    assert pub.current_run(tmp_path) == "run-a"


def test_idempotent_republish_keeps_existing_run(tmp_path, caplog):
    first = make_run(tmp_path, "run-a")
    manifest = (first / "manifest.json").read_bytes()
    again = make_run(tmp_path, "run-a")
    assert again == first
    assert (first / "manifest.json").read_bytes() == manifest  # untouched
    names = sorted(p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    assert names == ["run-a"]
    assert not list((tmp_path / "runs").glob(".staging-*"))
    assert not list((tmp_path / "runs").glob(".trash-*"))
    assert pub.current_run(tmp_path) == "run-a"

    # different bytes for an already-published run: the published one stays, with a warning
    with caplog.at_level("WARNING", logger="pointcast.publish"):
        make_run(tmp_path, "run-a", tag="changed")
    assert b'"run-a"' in served(tmp_path)
    assert "already published with different files" in caplog.text


def test_retain_keeps_newest_and_current(tmp_path):
    t0 = time.time() - 1000
    for i in range(1, 6):
        make_run(tmp_path, f"r{i}")
        os.utime(tmp_path / "runs" / f"r{i}" / "manifest.json", (t0 + 10 * i, t0 + 10 * i))
    make_run(tmp_path, "r2")  # re-publishing the same cycle points current back to r2
    assert pub.current_run(tmp_path) == "r2"

    with pytest.raises(pub.PublishRefused):
        make_run(tmp_path, "f-old", ok=False)
    with pytest.raises(pub.PublishRefused):
        make_run(tmp_path, "f-new", ok=False)
    failed = tmp_path / "runs" / "failed"
    os.utime(failed / "f-old" / "manifest.json", (t0 + 5, t0 + 5))
    os.utime(failed / "f-new" / "manifest.json", (t0 + 60, t0 + 60))
    fresh = pub.new_run_dir(tmp_path, "r6")

    removed = pub.retain(tmp_path, keep=3)
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name != "failed")
    assert runs == ["r2", "r4", "r5"]  # current (r2) + the two newest
    assert sorted(p.name for p in removed if p.parent.name == "runs") == ["r1", "r3"]
    assert sorted(p.name for p in failed.iterdir()) == ["f-new"]
    assert fresh.is_dir()  # a staging directory in use is not touched
    assert pub.current_run(tmp_path) == "r2" and b'"r2"' in served(tmp_path)

    pub.retain(tmp_path, keep=1)
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name != "failed")
    assert runs == ["r2"]  # never the current one, even though r5 is newer
    with pytest.raises(ValueError):
        pub.retain(tmp_path, keep=0)


def test_manifest_and_validation_are_plain_json(tmp_path):
    staging = pub.new_run_dir(tmp_path, "r1")
    pub.write_json_tree(staging, files_for("r1"))
    manifest = {"products": {"eu-short": {"ifs": np.datetime64("2026-11-22T00:00", "ns")}},
                "published_at": "2026-11-22T03:10:00+00:00"}
    validation = {"ok": True, "max_temp": np.float32(301.5), "nan_share": float("nan"),
                  "points": np.array([1, 2])}
    run = pub.publish_run(tmp_path, staging, "r1", manifest, validation, True)
    m = json.loads((run / "manifest.json").read_text())
    assert m == {"products": {"eu-short": {"ifs": "2026-11-22T00:00:00+00:00"}},
                 "published_at": "2026-11-22T03:10:00+00:00", "run_id": "r1"}
    v = json.loads((run / "validation.json").read_text())
    assert v == {"ok": True, "max_temp": 301.5, "nan_share": None, "points": [1, 2]}


@pytest.mark.parametrize("bad", ["../x.json", "/etc/passwd", "a/../../b.json", "a//b.json",
                                 "./a.json", "", "a\\..\\b.json"])
def test_path_escape_rejected(tmp_path, bad):
    staging = pub.new_run_dir(tmp_path, "r1")
    with pytest.raises(ValueError):
        pub.write_json_tree(staging, {"ok/fine.json": b"{}", bad: b"{}"})
    assert not (staging / "json").exists()  # checked before anything is written


def test_gzip_siblings_decompress_to_same_bytes(tmp_path):
    staging = pub.new_run_dir(tmp_path, "r1")
    files = files_for("r1")
    pub.write_json_tree(staging, files)
    for rel, data in files.items():
        plain = staging / "json" / rel
        assert plain.read_bytes() == data
        assert gzip.decompress((plain.parent / (plain.name + ".gz")).read_bytes()) == data
    # deterministic bytes: a re-run produces identical .gz files
    other = pub.new_run_dir(tmp_path, "r1")
    pub.write_json_tree(other, files)
    rel = "eu-short/index.json"
    assert ((staging / "json" / (rel + ".gz")).read_bytes()
            == (other / "json" / (rel + ".gz")).read_bytes())

    no_gz = pub.new_run_dir(tmp_path, "r2")
    pub.write_json_tree(no_gz, files, mode="plain")
    assert not list((no_gz / "json").rglob("*.gz"))
    with pytest.raises(ValueError, match="gzip sibling"):
        pub.write_json_tree(no_gz, {"a.json": b"1", "a.json.gz": b"2"})


@pytest.mark.parametrize("threads", [pub.WRITE_THREADS, 0])
def test_writer_batches_lose_no_file(tmp_path, threads):
    """Files cross the write batches by count and by size, and a read between them (the
    validation gate's) sees every file put before it; with a pool of writers and with the
    batches written in the caller's thread (a forked build process's writer)."""
    staging = pub.new_run_dir(tmp_path, "r1")
    writer = pub.TreeWriter(staging, threads=threads)
    files = writer.files()
    count, size = pub.WRITE_BATCH
    big = b"[" + b"1," * (size // 3) + b"1]"  # three make more than a batch's bytes
    expected = {}
    for i in range(2 * count + 5):
        rel = f"p/{i % 7}/{i}.json"
        expected[rel] = big if i % 50 == 3 else json.dumps({"i": i}).encode()
        files[rel] = expected[rel]
        if i == count + 1:
            assert files["p/1/1.json"] == expected["p/1/1.json"]
            assert (writer.base / rel).read_bytes() == expected[rel]  # drained, not batched
    writer.finish()
    on_disk = {str(p.relative_to(writer.base)): p for p in writer.base.rglob("*.json")}
    assert on_disk.keys() == expected.keys() == set(files)
    for rel, data in expected.items():
        assert on_disk[rel].read_bytes() == data
        assert gzip.decompress(Path(f"{on_disk[rel]}.gz").read_bytes()) == data


def test_current_that_is_a_directory_is_not_replaced(tmp_path):
    (tmp_path / "current").mkdir()
    with pytest.raises(pub.PublishError):
        make_run(tmp_path, "r1")
    assert (tmp_path / "current").is_dir() and not (tmp_path / "current").is_symlink()


# ---------------------------------------------------------------------------------------------
# archive
# ---------------------------------------------------------------------------------------------

HEIGHTS = [10.0, 100.0]


def cycle(init: str, points=("paris", "berlin", "oslo"), hours: int = 6, seed: int = 0,
          synthetic: int = 1) -> xr.Dataset:
    """A render-stage dataset: one init_time, CF attributes, a 4-D wind variable."""
    rng = np.random.default_rng(seed)
    lead = (np.arange(hours) * 3600 * 10**9).astype("timedelta64[ns]")
    n, m = len(points), len(lead)
    return xr.Dataset(
        {
            "air_temperature": (("init_time", "point", "lead_time"),
                                (273 + 20 * rng.random((1, n, m))).astype("float32"),
                                {"units": "K", "long_name": "air temperature at 2 m",
                                 "standard_name": "air_temperature"}),
            "wind_speed": (("init_time", "point", "lead_time", "height"),
                           (15 * rng.random((1, n, m, len(HEIGHTS)))).astype("float32"),
                           {"units": "m s-1", "long_name": "wind speed",
                            "standard_name": "wind_speed"}),
        },
        coords={
            "init_time": [np.datetime64(init, "ns")],
            "point": list(points),
            "lead_time": lead,
            "height": HEIGHTS,
            "lat": ("point", [float(sum(map(ord, p)) % 90) for p in points],
                    {"units": "degrees_north", "standard_name": "latitude"}),
        },
        attrs={"title": "pointcast eu-short", "source": "sample", "synthetic": synthetic,
               "Conventions": "CF-1.10"},
    )


def read(path: Path, **kw) -> xr.Dataset:
    return xr.open_zarr(path, **kw).load()


def test_archive_first_write_and_cf_attrs(tmp_path):
    ds = cycle("2026-11-22T00")
    path = pub.append_archive(tmp_path, "eu-short", ds)
    assert path == tmp_path / "zarr" / "eu-short.zarr"
    assert json.loads((path / "zarr.json").read_text())["zarr_format"] == 3
    got = read(path)
    assert dict(got.sizes) == {"init_time": 1, "point": 3, "lead_time": 6, "height": 2}
    assert got.init_time.dtype == np.dtype("datetime64[ns]")
    assert got.lead_time.dtype.kind == "m"
    assert list(got.point.values) == ["paris", "berlin", "oslo"]
    np.testing.assert_array_equal(got.lead_time.values, ds.lead_time.values)
    for name in ("air_temperature", "wind_speed"):
        np.testing.assert_array_equal(got[name].values, ds[name].values)
        assert got[name].attrs == ds[name].attrs  # units, long_name, standard_name
    assert got.attrs == ds.attrs
    assert got.lat.attrs["standard_name"] == "latitude"
    assert got.init_time.attrs["standard_name"] == "forecast_reference_time"
    assert got.lead_time.attrs["standard_name"] == "forecast_period"
    assert pub.archive_stores(tmp_path, "eu-short") == [path]


def test_archive_append_and_idempotent_reappend(tmp_path):
    a, b = cycle("2026-11-22T00", seed=1), cycle("2026-11-22T03", seed=2)
    path = pub.append_archive(tmp_path, "eu-short", a)
    assert pub.append_archive(tmp_path, "eu-short", b) == path
    before = read(path)
    for _ in range(2):  # the same cycle processed again, twice
        assert pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T03", seed=2)) == path
    pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00", seed=1))
    after = read(path)
    assert after.sizes["init_time"] == 2
    np.testing.assert_array_equal(after.init_time.values, [a.init_time.values[0],
                                                           b.init_time.values[0]])
    xr.testing.assert_identical(before, after)
    np.testing.assert_array_equal(after.air_temperature.sel(init_time=b.init_time).values,
                                  b.air_temperature.values)
    np.testing.assert_array_equal(after.wind_speed.isel(init_time=0).values,
                                  a.wind_speed.isel(init_time=0).values)
    assert pub.archive_stores(tmp_path, "eu-short") == [path]


def test_a_backfilled_cycle_is_read_in_its_place(tmp_path):
    """An earlier init_time appended after later ones (`pointcast run --at`, a backfill) is
    stored after them, committed like any append, and read in init_time order."""
    b, c, a = (cycle(f"2026-11-22T{h}", seed=k) for k, h in enumerate(("03", "06", "00"), 1))
    for ds in (b, c, a):
        path = pub.append_archive(tmp_path, "eu-short", ds)
    assert pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00", seed=3)) == path  # once
    stored = read(path)
    np.testing.assert_array_equal(stored.init_time.values, [x.init_time.values[0] for x in (b, c, a)])
    with pub.open_committed(path) as got:
        np.testing.assert_array_equal(got.init_time.values, [x.init_time.values[0] for x in (a, b, c)])
        for x in (a, b, c):
            np.testing.assert_array_equal(got.air_temperature.sel(init_time=x.init_time).values,
                                          x.air_temperature.values)


def test_archive_chunking_for_point_series(tmp_path):
    path = pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00"), point_chunk=1)
    pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T03"), point_chunk=1)
    ds = xr.open_zarr(path)
    assert ds.air_temperature.encoding["chunks"] == (1, 1, 6)
    assert ds.air_temperature.encoding["shards"] == (1, 3, 6)
    assert ds.wind_speed.encoding["chunks"] == (1, 1, 6, 2)
    assert ds.wind_speed.encoding["shards"] == (1, 3, 6, 2)
    assert ds.init_time.encoding["chunks"] == (1,)
    assert zarr.open_array(path / "air_temperature", mode="r").chunks == (1, 1, 6)
    series = ds.air_temperature.sel(point="berlin")  # a point's forecasts over all cycles
    assert series.chunks == ((1, 1), (6,))

    other = pub.append_archive(tmp_path / "x", "eu-wind", cycle("2026-11-22T00"),
                               point_chunk=2)
    ds = xr.open_zarr(other)
    assert ds.wind_speed.encoding["chunks"] == (1, 2, 6, 2)
    assert ds.wind_speed.encoding["shards"] == (1, 4, 6, 2)

    default = xr.open_zarr(pub.append_archive(tmp_path / "y", "eu-wind", cycle("2026-11-22T00")))
    assert default.wind_speed.encoding["chunks"] == (1, 3, 6, 2)  # the 3 points fit one chunk


def test_archive_chunks_hold_as_many_points_as_make_their_bytes(tmp_path):
    """A default chunk holds `CHUNK_BYTES` of a variable: many points of a short series, few
    of a long one with heights; the shard (one object) holds every point of the cycle."""
    points = [f"p{i:04d}" for i in range(1000)]
    init = np.datetime64("2026-11-22T00", "ns")
    hours = np.arange(336, dtype="timedelta64[h]").astype("timedelta64[ns]")
    ds = xr.Dataset(
        {"temp": (("init_time", "point", "lead_time"), np.zeros((1, 1000, 336), np.float32)),
         "wind": (("init_time", "point", "lead_time", "height"), np.zeros((1, 1000, 336, 8), np.float32))},
        coords={"init_time": [init], "point": points, "lead_time": hours, "height": np.arange(8.0)})
    path = pub.append_archive(tmp_path, "eu-medium", ds)
    stored = xr.open_zarr(path)
    assert stored.temp.encoding["chunks"] == (1, pub.CHUNK_BYTES // (336 * 4), 336)
    assert stored.wind.encoding["chunks"] == (1, pub.CHUNK_BYTES // (336 * 8 * 4), 336, 8)
    assert stored.temp.encoding["shards"][1] >= 1000
    assert [c.to_dict()["name"] for c in zarr.open_array(path / "temp", mode="r").compressors] == ["blosc"]
    xr.testing.assert_equal(stored.load(), ds)


def test_archive_dask_backed_input(tmp_path):
    ds = cycle("2026-11-22T00").chunk({"point": 1})
    path = pub.append_archive(tmp_path, "eu-short", ds)
    pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T03").chunk({"lead_time": 2}))
    got = read(path)
    assert got.sizes["init_time"] == 2
    np.testing.assert_array_equal(got.air_temperature.isel(init_time=0).values,
                                  ds.air_temperature.isel(init_time=0).values)


def test_archive_subset_run_is_reindexed(tmp_path):
    path = pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00"))
    # a point removed from the config, points reordered, a shorter horizon
    sub = cycle("2026-11-22T03", points=("oslo", "paris"), hours=4, seed=5)
    assert pub.append_archive(tmp_path, "eu-short", sub) == path
    got = read(path).sel(init_time=sub.init_time.values[0])
    assert list(got.point.values) == ["paris", "berlin", "oslo"]
    np.testing.assert_array_equal(
        got.air_temperature.sel(point=["oslo", "paris"]).isel(lead_time=slice(0, 4)).values,
        sub.air_temperature.isel(init_time=0).values)
    assert np.isnan(got.air_temperature.sel(point="berlin").values).all()
    assert np.isnan(got.wind_speed.isel(lead_time=slice(4, None)).values).all()


def test_archive_new_points_start_a_new_version(tmp_path, caplog):
    first = pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00"))
    before = read(first)
    grown = cycle("2026-11-22T03", points=("paris", "berlin", "oslo", "rome"))
    with caplog.at_level("WARNING", logger="pointcast.publish"):
        v2 = pub.append_archive(tmp_path, "eu-short", grown)
    assert v2 == tmp_path / "zarr" / "eu-short.v2.zarr"
    assert "'rome'" in caplog.text
    xr.testing.assert_identical(read(first), before)  # the old version is untouched
    got = read(v2)
    assert list(got.point.values) == ["paris", "berlin", "oslo", "rome"]
    assert got.sizes["init_time"] == 1
    # later cycles go to v2; a longer horizon starts v3
    assert pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T06", points=(
        "paris", "rome"))) == v2
    v3 = pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T09", points=(
        "paris", "berlin", "oslo", "rome"), hours=8))
    assert v3.name == "eu-short.v3.zarr"
    assert pub.archive_stores(tmp_path, "eu-short") == [first, v2, v3]
    # re-running an old cycle does not duplicate it into the newest version
    assert pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00")) == first
    assert read(v3).sizes["init_time"] == 1


def test_archive_synthetic_and_real_never_mix(tmp_path):
    first = pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00", synthetic=1))
    real = pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T03", synthetic=0))
    assert real != first and read(first).sizes["init_time"] == 1


def test_archive_rejects_malformed_input(tmp_path):
    two = xr.concat([cycle("2026-11-22T00"), cycle("2026-11-22T03")], dim="init_time")
    with pytest.raises(ValueError, match="exactly one init_time"):
        pub.append_archive(tmp_path, "eu-short", two)
    with pytest.raises(ValueError, match="lead_time"):
        pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00").drop_dims("lead_time"))
    with pytest.raises(ValueError):
        pub.append_archive(tmp_path, "../eu", cycle("2026-11-22T00"))


@pytest.mark.parametrize("step", ["_reserve_slot", "_write_slot", "_write_init_time", "_commit"])
def test_archive_crash_mid_append_keeps_complete_cycles(tmp_path, monkeypatch, step):
    a, b = cycle("2026-11-22T00", seed=1), cycle("2026-11-22T03", seed=2)
    path = pub.append_archive(tmp_path, "eu-short", a)
    before = read(path)
    real = getattr(archive, step)

    def crash(*args, **kwargs):
        if step == "_write_slot":  # die after part of the data is on disk
            store, ds, n = args
            real(store, ds[["air_temperature"]], n)
        elif step == "_commit":  # everything written, only the commit missing
            pass
        elif step == "_write_init_time":
            pass
        else:  # _reserve_slot: arrays resized, nothing else
            real(*args, **kwargs)
        raise KeyboardInterrupt(f"simulated crash in {step}")

    monkeypatch.setattr(archive, step, crash)
    with pytest.raises(KeyboardInterrupt):
        pub.append_archive(tmp_path, "eu-short", b)
    monkeypatch.undo()

    # the default reader sees exactly the committed, complete cycle
    xr.testing.assert_identical(read(path), before)
    # a reader bypassing consolidated metadata sees the reserved trailing entry, with its
    # init_time set only once the data is complete
    raw = read(path, consolidated=False)
    assert raw.sizes["init_time"] == 2
    last = raw.isel(init_time=-1)
    if step == "_commit":
        assert last.init_time.values == b.init_time.values[0]
        np.testing.assert_array_equal(last.wind_speed.values,
                                      b.wind_speed.isel(init_time=0).values)
    else:
        assert np.isnat(last.init_time.values)
    complete = raw.sel(init_time=raw.init_time.notnull())
    assert complete.sizes["init_time"] == (2 if step == "_commit" else 1)
    xr.testing.assert_identical(complete.isel(init_time=[0]).drop_encoding(),
                                before.drop_encoding())

    # the next append repairs the store; no duplicate, no NaT, identical values
    assert pub.append_archive(tmp_path, "eu-short", b) == path
    pub.append_archive(tmp_path, "eu-short", b)
    for got in (read(path), read(path, consolidated=False)):
        assert got.sizes["init_time"] == 2
        assert not np.isnat(got.init_time.values).any()
        np.testing.assert_array_equal(got.air_temperature.values,
                                      xr.concat([a, b], "init_time").air_temperature.values)
        np.testing.assert_array_equal(got.wind_speed.values,
                                      xr.concat([a, b], "init_time").wind_speed.values)


def test_archive_crash_during_first_write_leaves_no_store(tmp_path, monkeypatch):
    def crash(tmp, path):
        raise KeyboardInterrupt("simulated crash before the store is moved into place")

    monkeypatch.setattr(local, "_move_into_place", crash)
    with pytest.raises(KeyboardInterrupt):
        pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00"))
    monkeypatch.undo()
    assert not (tmp_path / "zarr" / "eu-short.zarr").exists()
    assert pub.archive_stores(tmp_path, "eu-short") == []

    # a kill -9 would leave the temporary directory behind: the next append ignores it
    (tmp_path / "zarr" / ".eu-short.zarr.tmp-dead").mkdir()
    path = pub.append_archive(tmp_path, "eu-short", cycle("2026-11-22T00"))
    assert read(path).sizes["init_time"] == 1
    assert not list((tmp_path / "zarr").glob(".*.tmp-*"))


def staged(staging: Path, ds: xr.Dataset, step: int) -> pub.ArchiveStage:
    """``ds`` written into a staged store of eu-short by slices of ``step`` points, as a run's
    build slices write it."""
    staging.mkdir(parents=True, exist_ok=True)
    stage = pub.ArchiveStage(staging)
    stage.create("eu-short", ds.isel(point=[0]), list(ds.point.values), step)
    for first in range(0, ds.sizes["point"], step):
        points = slice(first, first + step)
        pub.write_region(staging, "eu-short", ds.isel(point=points), points)
    return stage


def test_staged_cycles_append_shard_by_shard_as_in_memory_ones(tmp_path, monkeypatch):
    """Two cycles of 2,000 points and 30 days, each written into a staged store by slices of
    100 points and appended from it lazily under a shard budget of 128 kB: the archive reads
    back as the appends of the cycles in memory (whose store keeps one shard of every point,
    the layout of a small point set), its shards hold a bounded number of points, and the
    appends never hold more than a fraction of a cycle (traced allocations; loading it would
    be all of it)."""
    import tracemalloc

    points = [f"p{i:04d}" for i in range(2000)]
    cycles = [cycle(init, points=points, hours=720, seed=i).assign_coords(
        time_zone=("point", np.array(["Europe/Paris", "UTC"] * 1000, dtype=object)))
        for i, init in enumerate(("2026-11-22T00", "2026-11-22T03"))]
    memory = tmp_path / "memory"
    for ds in cycles:
        pub.append_archive(memory, "eu-short", ds, point_chunk=20)
    monkeypatch.setattr(archive, "SHARD_BYTES", 128 << 10)
    peaks = []
    for i, ds in enumerate(cycles):
        lazy = staged(tmp_path / f"staging-{i}", ds, 100).dataset("eu-short")
        assert not lazy.wind_speed.variable._in_memory  # lazily indexed: nothing read yet
        tracemalloc.start()
        path = pub.append_archive(tmp_path / "staged", "eu-short", lazy, point_chunk=20)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    whole = cycles[0].wind_speed.nbytes + cycles[0].air_temperature.nbytes  # 17 MB
    assert max(peaks) < whole / 3, (peaks, whole)
    xr.testing.assert_identical(read(path), read(memory / "zarr" / "eu-short.zarr"))
    # chunks of 20 points: 128 kB hold 1 of the wind (5,760 bytes a point), 2 of the temperature
    assert zarr.open_array(path / "wind_speed", mode="r").shards == (1, 20, 720, 2)
    assert zarr.open_array(path / "air_temperature", mode="r").shards == (1, 40, 720)
    assert zarr.open_array(memory / "zarr" / "eu-short.zarr" / "wind_speed", mode="r").shards == (1, 2000, 720, 2)


def test_a_slice_is_written_only_where_its_points_are(tmp_path):
    ds = cycle("2026-11-22T00", points=[f"p{i}" for i in range(6)])
    stage = staged(tmp_path / "staging", ds, 2)
    with pytest.raises(ValueError, match="not the staged store's at 2:4"):
        pub.write_region(tmp_path / "staging", "eu-short", ds.isel(point=slice(0, 2)), slice(2, 4))
    xr.testing.assert_identical(stage.dataset("eu-short").compute(), ds)


def test_retention_removes_the_staged_archives_of_dead_cycles_only(tmp_path):
    """A stage whose cycle holds it stays; one left by a cycle that died (nobody holds the
    lock of its staging directory) goes at the next retention, long before its JSON tree."""
    make_run(tmp_path, "r1")
    ds = cycle("2026-11-22T00")
    live = staged(pub.new_run_dir(tmp_path, "r2"), ds, 2)
    dead_staging = pub.new_run_dir(tmp_path, "r3")
    staged(dead_staging, ds, 2)
    import gc

    gc.collect()  # the stage of r3 is gone: its lock with it, as a killed cycle's
    assert pub.retain(tmp_path, keep=8) == [dead_staging / "archive"]
    assert dead_staging.is_dir() and live.path.is_dir()
    xr.testing.assert_identical(live.dataset("eu-short").compute(), ds)


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_a_product_carried_over_keeps_the_served_bytes(tmp_path, kind):
    """carry_product puts the served run's files of a product into a new run's staging tree
    (hard links on a local root, copies from an object store), returns its manifest entry
    with the run that built it, and nothing when no served run has the product."""
    import secrets

    root = tmp_path if kind == "local" else f"memory://pointcast-{secrets.token_hex(4)}/out"
    japan = {"japan/index.json": b'{"product": "japan"}', "japan/tokyo.json": b'{"lat": 35.68}'}

    def publish(run_id: str, carry: str | None = None) -> dict:
        writer = pub.TreeWriter(pub.new_run_dir(root, run_id))
        products = {"eu-short": {"basetime": run_id}}
        for rel, data in {**files_for(run_id), **({} if carry else japan)}.items():
            writer.put(rel, data)
        if carry:
            products[carry] = pub.carry_product(root, writer, carry)
        else:
            products["japan"] = {"basetime": run_id}
        writer.finish()
        pub.publish_run(root, writer.staging, run_id, {"products": products}, {"ok": True}, True)
        return products

    def read(run_id: str, rel: str) -> bytes:
        if kind == "local":
            return (tmp_path / "runs" / run_id / "json" / rel).read_bytes()
        fs, base = fsspec.core.url_to_fs(root)
        return fs.cat_file(f"{base}/runs/{run_id}/json/{rel}")

    writer = pub.TreeWriter(pub.new_run_dir(root, "r0"))
    assert pub.carry_product(root, writer, "japan") is None  # nothing served yet
    writer.abort()
    publish("r1")
    assert publish("r2", carry="japan")["japan"] == {"basetime": "r1", "carried_from": "r1"}
    assert publish("r3", carry="japan")["japan"] == {"basetime": "r1", "carried_from": "r1"}
    assert pub.current_run(root) == "r3"
    for rel, data in japan.items():
        assert read("r3", rel) == data
        if kind == "local":
            assert os.path.samefile(tmp_path / "runs" / "r1" / "json" / rel,
                                    tmp_path / "runs" / "r3" / "json" / rel)
            assert (tmp_path / "runs" / "r3" / "json" / f"{rel}.gz").is_file()
    assert read("r3", "eu-short/1H/paris.json").count(b"r3") == 1
    writer = pub.TreeWriter(pub.new_run_dir(root, "r4"))
    assert pub.carry_product(root, writer, "global") is None  # the served run lacks it
    writer.abort()


def test_archive_retention_drops_old_init_times_in_one_swap(tmp_path):
    """`archive_keep_days`: the init_times older than the limit before the newest go, the
    others read back unchanged (values, attributes, chunks); a store is compacted only once
    it holds a cycle a day past the limit; an older version left empty is removed."""
    inits = ["2026-11-10T00", "2026-11-12T00", "2026-11-13T12", "2026-11-14T00", "2026-11-15T00"]
    old = pub.append_archive(tmp_path, "eu-short", cycle("2026-11-09T00", points=("paris",), seed=9))
    for k, init in enumerate(inits):
        path = pub.append_archive(tmp_path, "eu-short", cycle(init, seed=k))
    assert pub.archive_stores(tmp_path, "eu-short") == [old, path] and path.name == "eu-short.v2.zarr"
    before = read(path)
    zarr_json = json.loads((path / "air_temperature" / "zarr.json").read_text())
    # 4 days before 15 Nov: 10 Nov is past the limit, but not by a day; v1 holds 9 Nov only
    assert archive.retain_archive(tmp_path, "eu-short", 4) == [old]
    assert read(path).sizes["init_time"] == 5 and not old.exists()
    assert archive.retain_archive(tmp_path, "eu-short", 2) == [path]  # 10 Nov: 3 days past
    after = read(path)
    np.testing.assert_array_equal(after.init_time.values, np.array(inits[2:], dtype="datetime64[ns]"))
    xr.testing.assert_identical(after, before.sel(init_time=after.init_time))
    assert json.loads((path / "air_temperature" / "zarr.json").read_text())["chunk_grid"] == zarr_json["chunk_grid"]
    assert sorted(p.name for p in (tmp_path / "zarr").iterdir()) == [".eu-short.lock", "eu-short.v2.zarr"]
    # appends go on into the compacted store
    pub.append_archive(tmp_path, "eu-short", cycle("2026-11-15T03", seed=7))
    assert read(path).sizes["init_time"] == 4


def test_archive_exchange_swaps_two_stores_whole(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "name").write_text(d.name)
    local.exchange(a, b)
    assert (a / "name").read_text() == "b" and (b / "name").read_text() == "a"
