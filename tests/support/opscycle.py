"""A small real cycle for the operations tests (crash, validation, housekeeping).

The shipped configuration made cheap: IFS alone for the European products (its sample runs over
Europe and Japan are generated in about a second at scale 16), MSM + IFS for Japan, two points
each. Several
output roots share one sample cache (``<root>/cache`` is a symlink), and a world's two cycles run
once per test session (`make_world`). Checks of what a reader sees live here too.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import xarray as xr

from conftest import ROOT, _link, _made_once
from pointcast import viewer

INIT_A = "2026-11-20T00:00Z"
INIT_B = "2026-11-20T12:00Z"
A = np.datetime64("2026-11-20T00:00", "ns")  # their init times in the archive
B = np.datetime64("2026-11-20T12:00", "ns")
EU_POINTS = ("id,name,lat,lon,elevation,hub_heights\n"
             "paris,Paris,48.8566,2.3522,35,\n"
             "hornsea-1,Hornsea One,53.885,1.791,0,100\n")
JAPAN_POINTS = ("id,name,lat,lon,elevation,hub_heights\n"
                "tokyo,Tokyo,35.6812,139.7671,40,\n"
                "sapporo,Sapporo,43.0618,141.3545,20,\n")


HEAD = """\
[output]
root = "output"
keep_runs = {keep_runs}
{output}

[dask]
scheduler = "threads"
workers = 2

[sources.sample]
type = "sample"
scale = 16
area = [-25.0, 20.0, 150.0, 72.0]
init = "{init}"

[models.ifs]
source = "sample"
[models.msm]
source = "sample"
"""
PRODUCTS = {pid: f"""
[products.{pid}]
points = "points/europe.csv"
models = ["ifs"]
freqs = ["1H", "30min", "15min"]
horizon_hours = {hours}
""" for pid, hours in (("eu-medium", 336), ("eu-short", 72), ("eu-wind", 72))} | {"japan": """
[products.japan]
points = "points/japan.csv"
models = ["msm", "ifs"]
freqs = ["1H"]
horizon_hours = 240
"""}
SHORT = ("eu-short", "eu-wind")  # one blend, one archive pair the validation compares


def small_config(dest: Path, cache: Path, *, init: str = INIT_A, keep_runs: int = 8,
                 output: str = "", products: tuple[str, ...] = tuple(PRODUCTS)) -> Path:
    """The test configuration at `dest` with `products`, its output root's cache linked to
    `cache`; `output` adds lines to `[output]`."""
    (dest / "points").mkdir(parents=True, exist_ok=True)
    (dest / "points" / "europe.csv").write_text(EU_POINTS)
    (dest / "points" / "japan.csv").write_text(JAPAN_POINTS)
    path = dest / "pointcast.toml"
    path.write_text(HEAD.format(keep_runs=keep_runs, output=output, init=init)
                    + "".join(PRODUCTS[p] for p in products))
    root = dest / "output"
    root.mkdir(exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    if not (root / "cache").exists():
        (root / "cache").symlink_to(cache)
    return path


def served_run(root: Path) -> str:
    """The run `current` names, after checking every file of it parses (and its .gz matches)."""
    run = (root / "current").readlink()
    assert run.parts[0] == "runs" and len(run.parts) == 2, run
    run_dir = root / run
    manifest = json.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["run_id"] == run.name
    assert json.loads((run_dir / "validation.json").read_bytes())["ok"] is True
    # The API's objects; not the viewer's page and its copies of the run's own files (no .gz).
    files = sorted(f for f in (run_dir / "json").rglob("*.json")
                   if f.relative_to(run_dir / "json").parts[0] not in (*viewer.RUN_FILES, "viewer"))
    assert files, f"{run_dir} has no JSON files"
    for f in files:
        data = f.read_bytes()
        json.loads(data)
        assert gzip.decompress(f.with_name(f.name + ".gz").read_bytes()) == data, f
    return run.name


def b_published(world: World, root: Path) -> None:
    """Run B served and archived after run A in every store of the SHORT products."""
    assert served_run(root) == world.run_b
    assert archived(root) == {p: [A, B] for p in SHORT}
    assert not list(root.glob("current.tmp-*"))  # retention clears an interrupted swap's link


def archived(root: Path) -> dict[str, list[np.datetime64]]:
    """Init times of each product's archive, after checking each is complete (no NaT, no NaN)."""
    out = {}
    for store in sorted((root / "zarr").glob("*.zarr")):
        with xr.open_zarr(store) as ds:
            inits = ds.init_time.values
            assert not np.isnat(inits).any(), store
            assert len(set(inits)) == len(inits), f"{store}: duplicate init_time"
            for name, var in ds.data_vars.items():
                if var.dtype.kind == "f":
                    assert not np.isnan(var.values).any(), f"{store}: {name} has NaN"
            out[store.name.removesuffix(".zarr")] = list(inits)
    return out


# A process that imports the cycle once and forks one child per cycle to run: each child is a
# real cycle (its own Prefect flow run against the test's Prefect server), killable at will,
# without paying the import of Prefect, xarray and ecCodes again (seconds on a loaded host).
FORKER = r'''
import json, os, pickle, re, resource, signal, sys, time
import pointcast
from pointcast.flows.cycle import cycle, publish_run
from pointcast.config import load_config

for line in sys.stdin:
    req = json.loads(line)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.environ.update(req["env"])
        if req["fsize"]:  # writes beyond this many bytes fail with EFBIG (SIGXFSZ is ignored)
            resource.setrlimit(resource.RLIMIT_FSIZE, (req["fsize"], req["fsize"]))
        try:
            if req["publish"]:  # the publish stage alone, on outputs a real cycle built
                with open(req["publish"], "rb") as f:
                    args = pickle.load(f)
                print("published", publish_run.fn(load_config(req["config"]), *args), flush=True)
            else:
                print("published", cycle(req["config"]), flush=True)
            code = 0
        except BaseException as e:
            print("cycle raised:", repr(e), flush=True)
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(w)
    pattern = re.compile(req["kill_on"]) if req["kill_on"] else None
    log = []
    sent = None
    with os.fdopen(r, errors="replace") as out:
        for text in out:
            log.append(text)
            if pattern is not None and pattern.search(text):
                os.kill(pid, req["signal"])
                sent = time.monotonic()
                pattern = None
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0,
                      "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                      "after_signal_s": None if sent is None else time.monotonic() - sent,
                      "log": "".join(log)}), flush=True)
'''


class Forker:
    """Runs cycles in forked children of one pre-imported process (see FORKER), started for
    the first cycle (a module that only reads its world starts none)."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self._proc: subprocess.Popen | None = None

    @property
    def proc(self) -> subprocess.Popen:
        if self._proc is None:
            self._proc = subprocess.Popen([sys.executable, "-c", FORKER], cwd=ROOT, env=self.env, text=True,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self._proc

    def run(self, config: Path, *, env: dict[str, str] | None = None, kill_on: str | None = None,
            fsize: int | None = None, publish: Path | None = None, send: int = signal.SIGKILL) -> dict:
        """One cycle; `kill_on`: send it the signal `send` when a line of its log matches this regex (the
        result's ``after_signal_s``: how long it lived after); `publish`: only the publish stage,
        with the arguments pickled there (World.publish_args)."""
        req = {"config": str(config), "env": env or {}, "kill_on": kill_on, "fsize": fsize,
               "publish": publish and str(publish), "signal": int(send)}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the forking process died"
        return json.loads(line)

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)


def prefect_env() -> dict[str, str]:
    """This process's environment plus the URL of the running Prefect test server."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


@dataclass
class World:
    """A shared cache holding runs A and B, a template output root serving run A, and the
    arguments of run B's publish stage (pickled: run id, outputs, report, manifest)."""

    template: Path
    run_a: str
    run_b: str
    publish_args: Path
    forker: Forker

    def fresh(self, dest: Path, init: str = INIT_B) -> Path:
        """A copy of the template whose configuration now asks for run B."""
        shutil.copytree(self.template, dest, symlinks=True)
        cfg = dest / "pointcast.toml"
        cfg.write_text(cfg.read_text().replace(f'init = "{INIT_A}"', f'init = "{init}"'))
        return cfg

    def publish(self, cfg: Path):
        """Run B's publish stage in this process (no Prefect), as the cycle's last task does."""
        from pointcast.config import load_config
        from pointcast.flows.cycle import publish_run

        return publish_run.fn(load_config(cfg), *pickle.loads(self.publish_args.read_bytes()))


def make_world(base: Path, products: tuple[str, ...] = tuple(PRODUCTS)) -> World:
    """A world of `products` at `base`: a copy of the one this test session made first
    (`conftest._made_once`; two cycles), its cache hard-linked (the cycle replaces the files
    it writes there, `conftest._link`), the output roots copied (small, and unlike the
    cache nothing there is held to replacing the files it writes), so that each module's
    cycles change its own copy only."""
    made = _made_once("world-" + "-".join(products), lambda done: _first_world(done, products))
    shutil.copytree(made / "cache", base / "cache", copy_function=_link)
    for config in ("template", "warm-b"):
        shutil.copytree(made / config, base / config, symlinks=True)
        (base / config / "output" / "cache").unlink()
        (base / config / "output" / "cache").symlink_to(base / "cache")
    shutil.copy(made / "publish-b.pickle", base / "publish-b.pickle")
    run_a, run_b = (made / "runs").read_text().split()
    return World(base / "template", run_a, run_b, base / "publish-b.pickle", Forker(prefect_env()))


def _first_world(base: Path, products: tuple[str, ...]) -> None:
    """Publish run A in the template root and run B elsewhere (filling the cache), keeping
    what B's publish stage was given."""
    from prefect import task

    import pointcast.flows.cycle as flow

    cache = base / "cache"
    template = small_config(base / "template", cache, products=products)
    run_a = flow.cycle(str(template))
    args = base / "publish-b.pickle"
    original = flow.publish_run

    @task(name="publish_run")
    def keep_args(cfg, run_id, outputs, *rest):
        # The archives read from the run's staged stores, which publication removes: kept
        # loaded, for the publish stage replayed without them.
        loaded = {pid: replace(out, archive=out.archive.compute()) for pid, out in outputs.items()}
        args.write_bytes(pickle.dumps((run_id, loaded, *rest)))
        return original.fn(cfg, run_id, outputs, *rest)

    flow.publish_run = keep_args
    try:
        run_b = flow.cycle(str(small_config(base / "warm-b", cache, init=INIT_B, products=products)))
    finally:
        flow.publish_run = original
    (base / "runs").write_text(f"{run_a} {run_b}")
