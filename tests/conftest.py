"""Shared fixtures: a small real cycle (real GRIB, real Prefect, real dask, real Zarr)."""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import pointcast  # noqa: F401  (first: it binds pyproj to its own PROJ before a test module imports ecCodes)

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # no network here
# Coverage rasters (grids/raster.py) are built once per machine and shared by the test processes
# (the global one reads the whole land mask): the cache is keyed by what the raster depends on.
os.environ.setdefault("POINTCAST_CACHE_DIR", os.path.join(tempfile.gettempdir(), "pointcast-test-coverage"))
# The sample source's runs of `write_config`'s configurations are generated once per test
# session, by whichever test process asks first (under a lock), in a directory the session's
# processes share (named by the first process, which removes it at the end); each configuration
# gets them in its own cache (`write_config`), where the sample source finds them complete and
# writes nothing.
_OWN_SAMPLES = "POINTCAST_TEST_SAMPLES" not in os.environ
SAMPLES = Path(os.environ.setdefault("POINTCAST_TEST_SAMPLES",
                                     os.path.join(tempfile.gettempdir(), f"pointcast-test-samples-{os.getpid()}")))
ROOT = Path(__file__).resolve().parent.parent
# The tests are grouped by stage (tests/<stage>/, no __init__.py: plain modules, every basename
# unique); the harnesses and the helpers several stages share are in tests/support/. Test modules
# import one another and those by bare name (`from test_cycle import serving`, `import replica`),
# while pytest's default "prepend" import mode puts only the directory of each file it collects on
# sys.path, as it collects it: all of them go there now, before collection. A subprocess that
# imports a test module puts `TEST_PATH` on its own sys.path.
TEST_PATH = [str(ROOT / "tests"), *sorted(str(d) for d in (ROOT / "tests").iterdir()
                                          if d.is_dir() and d.name != "data" and not d.name.startswith((".", "_")))]
sys.path[:0] = [d for d in TEST_PATH if d not in sys.path]
REAL_GRIB = ROOT / "tests" / "data" / "real-grib"  # real operational files, README.md there
INIT = "2026-11-20T00:00Z"
# The sample ensembles' members in `write_config`'s configurations (the sample source's
# `members`): the first 10 of each, a fifth of ENS's and GEFS's messages to write and decode;
# the truth test's replica has every member of the upstreams.
MEMBERS = 10


def write_config(dest: Path, *, init: str = INIT, scale: int = 16, points: str | None = None,
                 samples: bool = True, ensembles: bool = False) -> Path:
    """A copy of the shipped configuration, made small: coarse sample grids, a fixed run; its
    cache holds the sample runs already (`SAMPLES`) unless ``samples`` is False. Without
    ``ensembles`` its products name none (the neighbourhood probability, no quantiles): a
    cycle of three ensembles takes several times a deterministic one, and the tests of
    anything but the ensembles run many cycles (the `published` run has them); with them, each
    ensemble has its first `MEMBERS` members."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "points").mkdir(exist_ok=True)
    for points_file in (ROOT / "config" / "points").glob("*.csv"):
        shutil.copy(points_file, dest / "points" / points_file.name)
    if points is not None:
        (dest / "points" / "europe.csv").write_text(points)
    shutil.copytree(ROOT / "config" / "sites", dest / "sites", dirs_exist_ok=True)
    text = (ROOT / "config" / "pointcast.toml").read_text()
    lines = []
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.split("#")[0].strip()
        key = stripped.split("=")[0].strip()
        if section == "[sources.sample]" and key == "scale":
            line = f"scale = {scale}\nmembers = {MEMBERS}"
        elif section == "[sources.sample]" and key == "init":
            line = f'init = "{init}"'
        elif section == "[output]" and key == "root":
            line = 'root = "output"'
        elif section and section.startswith("[products.") and key == "ensembles" and not ensembles:
            continue
        lines.append(line)
    path = dest / "pointcast.toml"
    path.write_text("\n".join(lines) + "\n")
    if samples:
        for of_ensembles in (False, True) if ensembles else (False,):
            shutil.copytree(sample_runs(init, scale, of_ensembles), dest / "output" / "cache" / "sample",
                            dirs_exist_ok=True, copy_function=_link)
    return path


def _link(src: str, dst: str) -> None:
    """A hard link to a sample file (a copy across file systems): a configuration's cache is
    ten thousand files, which the suite would otherwise write, and delete, some twenty times.
    Sharing them is safe because nothing writes into a cached file: the cycle's writers
    replace files (temporary file, rename), so a test that damages a cached file must too."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _made_once(name: str, make) -> Path:
    """``SAMPLES/name``, made by ``make(directory)`` once per test session, by whichever test
    process asks first (under a lock of its own), the others waiting for it and reading it."""
    done = SAMPLES / name
    SAMPLES.mkdir(exist_ok=True)
    with open(SAMPLES / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (done / "complete").exists():
            shutil.rmtree(done, ignore_errors=True)
            make(done)
            (done / "complete").touch()
    return done


def sample_runs(init: str, scale: int, ensembles: bool = False) -> Path:
    """The ``sample`` directory of a cache holding the sample runs of the models of
    `write_config`'s products, or (``ensembles``) of their ensembles, as their cycle fetches
    them (pointcast.flows.cycle's discover and fetch): the ensembles are made only for an init
    time whose configuration has them."""
    from pointcast.config import load_config
    from pointcast.flows.cycle import discover, fetch

    def make(done: Path) -> None:
        cfg = load_config(write_config(done, init=init, scale=scale, samples=False, ensembles=True))
        for m in sorted({m for pc in cfg.products.values() for m in (pc.ensembles if ensembles else pc.models)}):
            fetch.fn(cfg, discover.fn(cfg, m, datetime.now(UTC), timedelta(0)))

    name = f"{init.replace(':', '')}-{scale}" + ("-ensembles" if ensembles else "")
    return _made_once(name, make) / "output" / "cache" / "sample"


# Modules of about a minute or more (`make test` lists the slowest tests), longest first. `make test`
# hands whole modules to its two processes in collection order (``--dist loadfile
# --no-loadscope-reorder``; xdist's own order puts the modules with the most tests first, which
# left the replica's two-minute truth test alone at the end of the run): collected first, the
# long modules share the two processes and the many short ones fill the gaps.
LONG_MODULES = ("truth/test_truth_replica.py", "server/test_server_hardening.py", "flows/test_crash.py",
                "flows/test_cycle.py", "flows/test_model_drop.py", "flows/test_degraded_replica.py",
                "validate/test_validation.py", "sources/test_remote_sources.py", "flows/test_freshness.py",
                "flows/test_degraded.py", "publish/test_s3_output.py", "verify/test_verify.py")


def pytest_collection_modifyitems(config, items):
    first = {name: k for k, name in enumerate(LONG_MODULES)}
    tests = ROOT / "tests"
    if gone := [name for name in LONG_MODULES if not (tests / name).is_file()]:
        raise pytest.UsageError(f"tests/conftest.py: LONG_MODULES names modules that are gone: {gone}")
    items.sort(key=lambda item: first.get(item.path.relative_to(tests).as_posix(), len(first)))


def pytest_unconfigure(config):
    if _OWN_SAMPLES and not hasattr(config, "workerinput"):
        shutil.rmtree(SAMPLES, ignore_errors=True)


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def published(prefect_harness):
    """One complete cycle on the sample source, with the ensembles; returns (config path,
    output root, run id). Made once per test session, by whichever test process asks first
    (`_made_once`, beside the shared sample runs), the others reading the same
    run: a cycle of every member of three ensembles is the suite's costliest fixture. Its
    users read it; the two that run a cycle over it again (tests/flows/test_cycle.py) leave
    its published run as it is."""
    from pointcast.flows.cycle import cycle

    def make(base: Path) -> None:
        (base / "run_id").write_text(cycle(str(write_config(base, ensembles=True))))

    base = _made_once("published", make)
    return base / "pointcast.toml", base / "output", (base / "run_id").read_text()
