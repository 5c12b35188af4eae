"""One timed cycle in a process of its own: ``python -m bench.cycle_run CONFIG [--profile F]``.

Prints one JSON line: wall seconds of the flow (Prefect's temporary server is started by a
warm-up flow first, so its start-up is not counted), the process's peak RSS, the largest
peak RSS among its children (dask workers of a LocalCluster), and the run id. The previous
run tree, pointer and archive under the output root are removed first (the sample cache is
kept; ``workload.clear_outputs``), so every measured cycle does the whole work.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

import pointcast  # noqa: E402,F401  (PROJ before ecCodes)
from prefect import flow  # noqa: E402

from pointcast.config import load_config  # noqa: E402

from .workload import clear_outputs, settle  # noqa: E402


@flow
def _warm_up() -> int:
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--profile", help="write cProfile statistics of the cycle to this file")
    args = parser.parse_args(argv)
    from flows.cycle import cycle

    cfg = load_config(Path(args.config))
    if "://" not in str(cfg.output.root):
        settle(clear_outputs([Path(cfg.output.root)]))
    _warm_up()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0 = time.perf_counter()
    run_id = cycle(args.config)
    wall = time.perf_counter() - t0
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    kib = 1024  # ru_maxrss is in KiB on Linux
    print(json.dumps({
        "wall_s": wall, "run_id": run_id,
        "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * kib / 1e9,
        "children_rss_gb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * kib / 1e9,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
