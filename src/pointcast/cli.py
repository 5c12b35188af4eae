"""`pointcast`: run a cycle, serve the schedule, serve the API, inspect what was configured."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from .config import ConfigError, load_config

# Prefect's local server would try to send usage telemetry: the pipeline runs offline.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

DEFAULT_CONFIG = "config/pointcast.toml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pointcast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("run", "run one forecast cycle now"),
                       ("schedule", "serve the cycle as a Prefect deployment on its schedule"),
                       ("serve", "serve the published forecasts over HTTP"),
                       ("check", "validate the configuration and exit")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--config", default=DEFAULT_CONFIG, help=f"configuration file (default {DEFAULT_CONFIG})")
        if name == "serve":
            p.add_argument("--host", default="127.0.0.1")
            p.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    if args.command == "serve":  # run/schedule log through Prefect's own handlers
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(Path(args.config))
    except ConfigError as exc:
        print(f"pointcast: configuration error: {exc}", file=sys.stderr)
        return 2

    if args.command == "check":
        print(f"{cfg.path}: ok ({', '.join(f'{pid}: {len(pc.points)} points' for pid, pc in cfg.products.items())})")
        return 0
    if args.command == "serve":
        from .server import serve

        serve(cfg.output.root, args.host, args.port)
        return 0

    from flows.cycle import cycle

    if args.command == "run":
        state = cycle(str(cfg.path), return_state=True)
        if not state.is_completed():
            print(f"pointcast: cycle failed ({state.message}); the previously published run stays served",
                  file=sys.stderr)
            return 1
        run_id = state.result()
        print(f"published run {run_id}: {cfg.output.root / 'current'} -> runs/{run_id}")
        return 0
    from prefect import serve

    from flows.cycle import deployment

    serve(deployment(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
