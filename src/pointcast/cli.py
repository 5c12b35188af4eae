"""`pointcast`: run a cycle, serve the schedule, serve the API, check the configuration, inspect
what an upstream file holds, verify the archived runs against observations."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from datetime import datetime
from pathlib import Path

from .config import DEFAULT_CONFIG, ConfigError, api_key_sha256, load_config, utc_time

# Prefect's local server would try to send usage telemetry: the pipeline runs offline.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pointcast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("run", "run one forecast cycle now"),
                       ("schedule", "serve the cycle as a Prefect deployment on its schedule"),
                       ("serve", "serve the published forecasts over HTTP"),
                       ("check", "validate the configuration and exit")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--config", default=DEFAULT_CONFIG, help=f"configuration file (default {DEFAULT_CONFIG})")
        if name == "run":
            p.add_argument("--at", type=_utc_time, metavar="TIME",
                           help="run the cycle as it would have run at this ISO time (e.g. 2026-11-20T03:00Z): "
                                "backfill the archive, replay an incident")
        if name == "serve":
            p.add_argument("--host", default="127.0.0.1")
            p.add_argument("--port", type=int, default=8080)
    p = sub.add_parser("hash-key", help="print the [server.api_keys] entry of an API key read from stdin")
    p.add_argument("name", help="the key's name in the configuration (it appears in logs; the key never does)")
    p.add_argument("--generate", action="store_true", help="make a new random key and print it too")
    p = sub.add_parser("verify", help="score the archived runs against observations (docs/verification.md)")
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"configuration file (default {DEFAULT_CONFIG})")
    p.add_argument("--from", dest="since", type=_utc_time, metavar="TIME",
                   help="only runs initialised at or after this ISO time (e.g. 2026-11-20T00:00Z)")
    p.add_argument("--until", type=_utc_time, metavar="TIME", help="only runs initialised at or before this ISO time")
    p.add_argument("obs", nargs="+", type=Path, metavar="OBS",
                   help="observation files (tidy CSV, or ISD-Lite USAF-WBAN-YEAR[.gz]) or directories of them")
    p = sub.add_parser("inspect", help="print as JSON what GRIB/NetCDF files hold, in canonical terms")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    if args.command == "hash-key":
        return hash_key(args.name, args.generate)
    if args.command == "inspect":
        from .inspect import dumps, inspect_files

        report = inspect_files(args.files)
        print(dumps(report))
        return 1 if any("error" in r for r in report) else 0
    if args.command == "serve":  # run/schedule log through Prefect's own handlers
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    notes: list[str] = []
    try:
        cfg = load_config(Path(args.config))
        if args.command != "serve":  # the server reads published runs, not the models
            from .sourcing import check_models

            notes = check_models(cfg)
    except ConfigError as exc:
        print(f"pointcast: configuration error: {exc}", file=sys.stderr)
        return 2

    if args.command == "check":
        for note in notes:
            print(f"note: {note}")
        print(f"{cfg.path}: ok ({', '.join(f'{pid}: {len(pc.points)} points' for pid, pc in cfg.products.items())})")
        return 0
    if args.command == "verify":
        return verify(cfg, args.obs, args.since, args.until)
    if args.command == "serve":
        from .server import serve

        serve(cfg.output.root, args.host, args.port, cfg.server.api_keys)
        return 0

    from pointcast.flows.cycle import cycle

    if args.command == "run":
        from pointcast import stopping

        with stopping.on_signals():
            try:
                state = cycle(str(cfg.path), now=args.at, return_state=True)
            except BaseException:  # the flow re-raises the signal's exception once it is stopped
                if not stopping.STOP.is_set():
                    raise
        if stopping.STOP.is_set():
            print(f"pointcast: cycle {stopping.reason()} before it finished; {served(cfg.output.root, 'is')}",
                  file=sys.stderr)
            return stopping.exit_code()
        if not state.is_completed():
            print(f"pointcast: cycle failed ({state.message}); {served(cfg.output.root, 'stays')}", file=sys.stderr)
            return 1
        run_id = state.result()
        from .publish import current_run

        serving = current_run(cfg.output.root)  # a run made at an earlier clock (--at) is not served
        print(f"published run {run_id}: {cfg.output.root}/current -> runs/{serving}"
              + ("" if serving == run_id else " (archived; a newer run stays served)"))
        return 0
    from prefect import serve as serve_deployments

    from pointcast.flows.cycle import deployment

    serve_deployments(deployment(cfg))
    return 0


def served(root, verb: str) -> str:
    """What is served after a cycle that did not publish, in words: "run <id> <verb> served", or
    that nothing is."""
    from pointcast.publish import current_run

    try:
        run_id = current_run(root)
    except Exception as exc:  # noqa: BLE001 (said, not raised: the cycle's failure is the news)
        return f"what is served cannot be read ({exc})"
    return f"run {run_id} {verb} served" if run_id else "nothing is served yet"


def _utc_time(text: str) -> datetime:
    try:
        return utc_time(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO time: {text!r}") from None


def verify(cfg, obs: list[Path], since: datetime | None, until: datetime | None) -> int:
    """Score the archive against the observation files; a bad file is exit status 2 with its
    file and line, and then nothing is written."""
    from .verify import ObservationError, run, summary

    try:
        report = run(cfg, obs, since, until)
    except (ObservationError, ValueError) as exc:
        print(f"pointcast: verify: {exc}; nothing written", file=sys.stderr)
        return 2
    print(f"{report.observations} observations within archived runs, {report.outside} outside them (skipped), "
          f"{report.flagged} outside their physical range (skipped)")
    for where in report.flagged_at:
        print(f"  flagged: {where}")
    for result in report.results:
        counts = ", ".join(f"{k} {sum(b['n'] for b in v['bins'])}" for k, v in result["variables"].items())
        print(f"{result['product']}: pairs {counts}")
        for line in summary(result):
            print(line)
    for path in report.written:
        print(f"wrote {path}")
    return 0 if report.results else 1


def hash_key(name: str, generate: bool) -> int:
    """The TOML lines for ``[server.api_keys.<name>]``: the key is read from stdin (not from the
    command line, which shells keep in their history) or made with ``--generate``."""
    if generate:
        key = secrets.token_urlsafe(32)
        print(f"# the new key (give it to the client; it is not stored anywhere): {key}")
    else:
        key = sys.stdin.readline().rstrip("\r\n")
        if not key or not key.isascii() or not key.isprintable() or key != key.strip() or len(key) > 256:
            print("pointcast: expected one API key on stdin (printable ASCII, no surrounding spaces, "
                  "at most 256 characters)", file=sys.stderr)
            return 2
    print(f"[server.api_keys.{name}]\nsha256 = \"{api_key_sha256(key.encode())}\"")
    return 0


if __name__ == "__main__":
    sys.exit(main())
