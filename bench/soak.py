"""``disk_peak_vs_plan`` and ``archive_day_vs_plan``: the soak of ``make soak``
(``tests/flows/test_soak.py``: consecutive 3-hourly cycles on the sample source with the clock
set, MSM's upstream stopping for three runs in the middle) against ``pointcast plan``'s figures
for its configuration (``need.costs``, the sample's own message sizes).

The soak measures, while each cycle runs, the largest disk use of the cache, the scratch
stores and the published runs (the staging tree among them), sampled every 0.2 s, and takes
the largest of the cycles after the first ``keep_runs`` (once as many runs are kept as the
plan counts); and each product's archive growth at each new basetime, times its basetime
model's runs a day. It writes both, with the plan's, to the file ``POINTCAST_SOAK_REPORT``
names; its own test asserts them within 20 %.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(work: Path, cycles: int) -> dict:
    """The soak of ``cycles`` cycles: its report, and whether its tests passed."""
    work.mkdir(parents=True, exist_ok=True)
    report = work / "soak.json"
    report.unlink(missing_ok=True)
    env = dict(os.environ, POINTCAST_SOAK_CYCLES=str(cycles), POINTCAST_SOAK_REPORT=str(report))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           "tests/flows/test_soak.py", "-k", "disk_a_cycle_uses"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if not report.is_file():
        raise SystemExit(f"bench: the soak wrote no report (status {done.returncode}):\n{done.stdout[-4000:]}")
    return json.loads(report.read_text()) | {"passed": done.returncode == 0}
