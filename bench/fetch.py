"""``fetch_bytes_vs_needed``: the bytes the cycle's discovery and fetch stages take from a
loopback mirror of the upstreams, over the bytes of the messages some product reads.

The mirror is the tests' (``tests/support/mirror.py``: a real HTTP server on 127.0.0.1, the
upstreams' layouts and index formats): an IFS sample run and an ENS run of every member, of
one start, in ECMWF's tree (ENS's control is the IFS's ``oper-fc`` file). Two products read
them as the European ones do: ``eu-medium`` (IFS, ENS, 10 m quantiles) to ``HORIZON`` hours
and ``eu-wind`` (ENS at hub heights) to ``WIND_HORIZON``. The stages run as the flow runs them
(``sourcing.find_run``, ``need.needs``, ``sourcing.fetch_run``, the IFS first) into an
empty cache; the bytes fetched are the bodies of the data files the mirror sent, the bytes
needed the index lengths of the messages of each run's ``need`` at each step, a file two
models share counted once. The indexes are reported apart: a line of an index is some 250
bytes whatever the message, which is about 1 MB upstream (0.03 %) but 1.7 KB on the tests'
tiny ensemble grid, where they would make most of the difference.
"""

from __future__ import annotations

import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HORIZON, WIND_HORIZON, STEPS = 24, 6, list(range(0, 31, 3))
INIT = datetime(2026, 11, 20, 0, tzinfo=UTC)

CONFIG = """\
[output]
root = "{root}/output"

[sources.mirror]
type = "http"
base_url = "{url}"
wait_minutes = 0.5
retry_seconds = 0.1
horizon_hours = {steps}
progress = false

[models.ifs]
source = "mirror"
[models.ens]
source = "mirror"

[products.eu-medium]
points = "{points}/europe.csv"
models = ["ifs"]
ensembles = ["ens"]
freqs = ["1H"]
horizon_hours = {horizon}

[products.eu-wind]
points = "{points}/europe.csv"
models = ["ifs"]
ensembles = ["ens"]
freqs = ["1H"]
horizon_hours = {wind}
"""


def measure(work: Path, scale: int) -> dict:
    """(bytes fetched, bytes needed, their ratio) of one fetch of both runs."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from mirror import Mirror, publish_ensemble, publish_sample
    from pointcast.config import load_config
    from pointcast.need import needs
    from pointcast.sources import MODELS
    from pointcast.sources.remote import parse_index, run_files
    from pointcast.sourcing import fetch_run, find_run

    tree = work / "mirror"
    if not (tree / "published").exists():
        publish_ensemble(tree, "ens", INIT, STEPS)
        # the IFS's oper-fc files (the ENS control's too) as the sample writes them
        publish_sample(tree, work / "sample-cache", "ifs", f"{INIT:%Y-%m-%dT%H:%MZ}", scale=scale,
                       horizon_hours=max(STEPS))
        (tree / "published").touch()
    shutil.rmtree(work / "output", ignore_errors=True)  # a fetch into an empty cache
    with Mirror(tree) as mirror:
        path = work / "pointcast.toml"
        path.write_text(CONFIG.format(root=work, url=mirror.url("ecmwf"), points=ROOT / "config" / "points",
                                      steps=max(STEPS), horizon=HORIZON, wind=WIND_HORIZON))
        cfg = load_config(path)
        now = INIT + timedelta(hours=5)
        runs = {m: find_run(cfg, m, now, timedelta(hours=HORIZON)) for m in ("ifs", "ens")}
        wanted = needs(cfg, runs)
        for m in ("ifs", "ens"):
            fetch_run(cfg, runs[m], wanted[m])
        sent = mirror.gets("")
        fetched = sum(r.sent for r in sent if r.path.endswith(".grib2"))
        indexes = sum(r.sent for r in sent if not r.path.endswith(".grib2"))
    needed: dict[tuple[str, int], int] = {}  # (file, offset) -> length: a shared file once
    for m, run in runs.items():
        model, need = MODELS[m], wanted[m]
        up = model.upstream
        assert up is not None and up.select is not None
        layout = next(lay for lay in up.layouts if run.source.endswith("/" + lay.name))
        for f in run_files(layout, model, run.init, need.steps(run.steps), need):
            rows = need.rows_at(round(f.first_step_h * 60))
            text = (tree / "ecmwf" / (f.index_path or "")).read_text()
            for e in parse_index(text, layout.index or ""):
                if any(up.select(e, r) for r in rows):
                    needed[(f.path, e["_offset"])] = e["_length"]
    total = sum(needed.values())
    return {"fetched": fetched, "indexes": indexes, "needed": total, "ratio": fetched / total,
            "message_bytes": total / len(needed)}
