"""A model that fails is dropped, never the cycle: real Prefect cycles on the sample source
whose cached runs are damaged the ways upstream data goes wrong (a truncated file, a field
relabelled so that no table row names it), checking what is dropped, why, what the products
fall back to, and that a product without its horizon model keeps its last good files served."""

from __future__ import annotations

import bz2
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import eccodes
import numpy as np
import pytest

from opscycle import EU_POINTS, HEAD, JAPAN_POINTS, archived, served_run

INIT_A, INIT_B, INIT_C = "2026-11-20T00:00Z", "2026-11-20T12:00Z", "2026-11-21T00:00Z"
PRODUCTS = """
[models.icon-eu]
source = "sample"

[products.eu-short]
points = "points/europe.csv"
models = ["icon-eu"]
freqs = ["1H"]
horizon_hours = 72

[products.japan]
points = "points/japan.csv"
models = ["msm", "ifs"]
freqs = ["1H"]
horizon_hours = 240
"""


def config(dest: Path, cache: Path, init: str) -> Path:
    """European points from ICON-EU alone (72 h), Japanese ones from MSM then IFS (240 h);
    the output root's cache is ``cache``, shared by the tests' roots."""
    (dest / "points").mkdir(parents=True, exist_ok=True)
    (dest / "points" / "europe.csv").write_text(EU_POINTS)
    (dest / "points" / "japan.csv").write_text(JAPAN_POINTS)
    path = dest / "pointcast.toml"
    # ICON-EU in DWD's legacy lat/lon tree, which carries every field of its table (v1 has
    # no visibility), so that it can end a blend.
    path.write_text(HEAD.format(keep_runs=8, output="", init=init)
                    .replace("scale = 16\n", 'scale = 32\nicon_layout = "legacy"\n', 1) + PRODUCTS)
    (dest / "output").mkdir(exist_ok=True)
    if not (dest / "output" / "cache").exists():
        (dest / "output" / "cache").symlink_to(cache)
    return path


def sample_run(cfg_path: Path, model: str) -> list[Path]:
    """The files of the sample run of ``model`` the cycle of ``cfg_path`` will read
    (written into the cache now, as the cycle's fetch would)."""
    from pointcast.config import load_config
    from pointcast.sources import MODELS
    from pointcast.sourcing import make_source

    cfg = load_config(cfg_path)
    src = make_source(cfg.models[model].source, cfg.source_for(model))
    run = src.discover(MODELS[model], datetime.now(UTC))
    return list(src.fetch(run, MODELS[model], cfg.output.cache_dir).files)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def relabel_t2m(files: list[Path]) -> int:
    """Make every 2 m temperature message (DWD's bz2 files) a surface temperature
    (typeOfFirstFixedSurface 1): real GRIB the table no longer names, so the decoded run
    lacks ``t2m``."""
    n = 0
    for f in files:
        if "_T_2M." not in f.name:
            continue
        h = eccodes.codes_new_from_message(bz2.decompress(f.read_bytes()))
        try:
            eccodes.codes_set(h, "typeOfFirstFixedSurface", 1)
            data = eccodes.codes_get_message(h)
        finally:
            eccodes.codes_release(h)
        f.write_bytes(bz2.compress(data))
        n += 1
    return n


def manifest(root: Path, run_id: str) -> dict:
    return json.loads((root / "runs" / run_id / "manifest.json").read_text())


@pytest.fixture(scope="module")
def world(tmp_path_factory, prefect_harness):
    """Run A published normally; the cache holds run B with a truncated IFS file and run C
    with a truncated MSM file and an ICON-EU whose 2 m temperature no row names."""
    from pointcast.flows.cycle import cycle

    base = tmp_path_factory.mktemp("drop")
    cache = base / "cache"
    cache.mkdir()
    cfg = config(base / "site", cache, INIT_A)
    run_a = cycle(str(cfg))
    ifs_b = sample_run(config(base / "b", cache, INIT_B), "ifs")[5]
    truncate(ifs_b)
    cfg_c = config(base / "c", cache, INIT_C)
    truncate(sample_run(cfg_c, "msm")[0])
    assert relabel_t2m(sample_run(cfg_c, "icon-eu")) > 10
    return {"base": base, "cache": cache, "cfg": cfg, "root": cfg.parent / "output", "a": run_a,
            "ifs_b": ifs_b.name}


def test_horizon_model_failing_keeps_its_products_served(world):
    """B: IFS does not decode. ICON-EU's product is built from B; Japan's (MSM then IFS)
    cannot be: its files of run A are carried into run B, neither validated nor archived
    again. Then C: MSM does not decode (Japan falls back to IFS alone) and ICON-EU lacks its
    2 m temperature: the European product is carried over from B, where it was built."""
    from pointcast.flows.cycle import cycle

    cfg, root, run_a = world["cfg"], world["root"], world["a"]
    cfg.write_text(cfg.read_text().replace(INIT_A, INIT_B))
    run_b = cycle(str(cfg))
    assert served_run(root) == run_b != run_a
    m = manifest(root, run_b)
    assert list(m["dropped"]) == ["ifs"]
    assert m["dropped"]["ifs"].startswith("ifs: decode failed: DecodeError: ")
    assert world["ifs_b"] in m["dropped"]["ifs"]  # the file that does not decode
    assert m["absent"] == {} and "ifs" not in m["models"]
    japan, before = m["products"]["japan"], manifest(root, run_a)["products"]["japan"]
    assert japan["carried_from"] == run_a and japan["basetime"] == before["basetime"]
    assert "needs ifs" in japan["carried_because"] and "DecodeError" in japan["carried_because"]
    assert m["products"]["eu-short"]["basetime"].startswith("2026-11-20T12:00")
    assert "carried_from" not in m["products"]["eu-short"]
    validation = json.loads((root / "runs" / run_b / "validation.json").read_text())
    assert validation["ok"] and validation["carried"] == {"japan": run_a}
    assert list(validation["products"]) == ["eu-short"]
    old, new = (sorted((root / "runs" / r / "json" / "japan").rglob("*")) for r in (run_a, run_b))
    assert [p.relative_to(root / "runs" / run_a) for p in old] == \
        [p.relative_to(root / "runs" / run_b) for p in new] and len(old) > 4
    for a, b in zip(old, new, strict=True):
        assert a.is_dir() or (a.read_bytes() == b.read_bytes() and os.path.samefile(a, b))
    a, b = np.datetime64("2026-11-20T00:00", "ns"), np.datetime64("2026-11-20T12:00", "ns")
    assert archived(root) == {"eu-short": [a, b], "japan": [a]}  # japan not appended twice
    assert cycle(str(cfg)) == run_b  # a re-run is recognised

    cfg.write_text(cfg.read_text().replace(INIT_B, INIT_C))
    run_c = cycle(str(cfg))
    assert served_run(root) == run_c
    m = manifest(root, run_c)
    assert sorted(m["dropped"]) == ["icon-eu", "msm"]
    assert "msm: decode failed: DecodeError" in m["dropped"]["msm"]
    assert "icon-eu: the run's files hold no field for t2m" in m["dropped"]["icon-eu"]
    assert m["products"]["japan"]["models"] == ["ifs"] and "carried_from" not in m["products"]["japan"]
    assert m["products"]["japan"]["basetime"].startswith("2026-11-21T00:00")
    assert m["products"]["eu-short"]["carried_from"] == run_b
    assert m["products"]["eu-short"]["basetime"].startswith("2026-11-20T12:00")
    c = np.datetime64("2026-11-21T00:00", "ns")
    assert archived(root) == {"eu-short": [a, b], "japan": [a, c]}


def test_nothing_to_carry_over_leaves_the_product_absent(world):
    """Run B in a root where nothing is served: Japan is absent from the run, and the
    manifest says why."""
    from pointcast.flows.cycle import cycle

    cfg = config(world["base"] / "fresh", world["cache"], INIT_B)
    root = cfg.parent / "output"
    run_id = cycle(str(cfg))
    m = manifest(root, run_id)
    assert served_run(root) == run_id and list(m["products"]) == ["eu-short"]
    assert list(m["absent"]) == ["japan"] and "needs ifs" in m["absent"]["japan"]
    assert not (root / "runs" / run_id / "json" / "japan").exists()
    assert list(archived(root)) == ["eu-short"]
