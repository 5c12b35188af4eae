"""Shared fixtures: a small real cycle (real GRIB, real Prefect, real dask, real Zarr)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import pointcast  # noqa: F401  (loads PROJ before any test imports ecCodes, see pointcast/__init__.py)

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # no network here
# Coverage rasters (grids/raster.py) are built once per machine and shared by the test processes
# (the global one reads the whole land mask): the cache is keyed by what the raster depends on.
os.environ.setdefault("POINTCAST_CACHE_DIR", os.path.join(tempfile.gettempdir(), "pointcast-test-coverage"))
ROOT = Path(__file__).resolve().parent.parent
REAL_GRIB = ROOT.parent / "shared" / "data" / "real-grib"
INIT = "2026-11-20T00:00Z"


def write_config(dest: Path, *, init: str = INIT, scale: int = 16, points: str | None = None) -> Path:
    """A copy of the shipped configuration, made small: coarse sample grids, a fixed run."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "points").mkdir(exist_ok=True)
    for points_file in (ROOT / "config" / "points").glob("*.csv"):
        shutil.copy(points_file, dest / "points" / points_file.name)
    if points is not None:
        (dest / "points" / "europe.csv").write_text(points)
    text = (ROOT / "config" / "pointcast.toml").read_text()
    lines = []
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.split("#")[0].strip()
        key = stripped.split("=")[0].strip()
        if section == "[sources.sample]" and key == "scale":
            line = f"scale = {scale}"
        elif section == "[sources.sample]" and key == "init":
            line = f'init = "{init}"'
        elif section == "[output]" and key == "root":
            line = 'root = "output"'
        lines.append(line)
    path = dest / "pointcast.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def published(tmp_path_factory, prefect_harness):
    """One complete cycle on the sample source; returns (config path, output root, run id)."""
    from flows.cycle import cycle

    cfg = write_config(tmp_path_factory.mktemp("cycle"))
    run_id = cycle(str(cfg))
    return cfg, cfg.parent / "output", run_id
