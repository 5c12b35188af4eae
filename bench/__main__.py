"""pointcast's reference benchmark: ``python -m bench [--scale 1|N|quick]`` (``make bench``).

Prints one ``name: value`` line per figure with its target beside it; lines starting
with ``#`` are context. Everything generated (configuration, points, sample runs, output)
lives in the work directory (default ``$TMPDIR/pointcast-bench``), never in the repository;
the sample runs are written once per scale and reused by later benchmarks.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pointcast  # noqa: F401  (PROJ before ecCodes)
from pointcast.config import DaskConfig, load_config
from pointcast.products.base import _render as render_module

from . import decode, fetch, http, soak
from .workload import clear_outputs, settle, write_config

QUICK_SCALE, QUICK_POINTS = 16, 100
GROUPS = ("fetch", "soak", "decode", "cycle", "http", "ensembles", "power", "points", "dask", "output", "scale")
POWER_SITES = 200  # power_cycle_overhead: wind farms, and as many solar plants
EUROPE = ("eu-medium", "eu-short", "eu-wind")  # the products of the European points list
SCALE_FACTOR = 50  # points_50k_cost: 50,000 points a list against 1,000


def ensemble_grid(scale: int) -> int:
    """The ensembles' sample scale of the reference workload: the deterministic models' own,
    so the figure measures the upstreams' grids at scale 1 (the sample's coarser default
    grid for the ensembles shrinks the floor but not the work a point and member); the
    largest divisor of 1440 up to it, as the sample requires of a scale."""
    return max(d for d in range(1, scale + 1) if 1440 % d == 0)


def line(name: str, value, target: str = "", note: str = "") -> None:
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    extra = "  ".join(x for x in (f"(target {target})" if target else "", note) if x)
    print(f"{name}: {text}" + (f"  {extra}" if extra else ""), flush=True)


def cycle(config: Path, profile: Path | None = None) -> dict:
    """One cycle in its own process (so its peak RSS is its own)."""
    args = [sys.executable, "-m", "bench.cycle_run", str(config)]
    if profile:
        args += ["--profile", str(profile)]
    root = Path(__file__).resolve().parent.parent
    # Output to files and a session of its own: a process the cycle leaves behind (Prefect's
    # temporary server after the cycle was killed) must neither hold a pipe open nor outlive it.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(args, cwd=root, stdout=out, stderr=err, text=True, start_new_session=True)
        status = proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if status:
        sys.stderr.write(stdout[-4000:] + stderr[-8000:])
        why = " (SIGKILL: out of memory?)" if status == -signal.SIGKILL else ""
        raise SystemExit(f"bench: the cycle on {config} failed (status {status}){why}")
    return json.loads(stdout.strip().splitlines()[-1])


def tree_bytes(path: Path, suffix: str | None = None) -> int:
    return sum(p.stat().st_size for p in path.rglob("*")
               if p.is_file() and (suffix is None or p.name.endswith(suffix)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default=os.environ.get("BENCH_SCALE", "1"),
                        help="sample scale: 1 = full operational grids (default), N = every Nth "
                             f"row/column, 'quick' = scale {QUICK_SCALE} with {QUICK_POINTS} points")
    parser.add_argument("--quick", action="store_true", help="same as --scale quick")
    parser.add_argument("--points", type=int, help="points per points list (default 1000)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "pointcast-bench")
    parser.add_argument("--wrk-seconds", type=int, help="duration of each wrk run (default 10, quick 5)")
    parser.add_argument("--wrk-rounds", type=int, default=3,
                        help="server_vs_nginx: alternating rounds of server and nginx, median ratio (default 3)")
    parser.add_argument("--profile", type=Path, help="also write cProfile statistics of the cycle here")
    parser.add_argument("--repeat", type=int, default=2,
                        help="decode: alternate ecCodes and pointcast this many times, best of each (default 2)")
    parser.add_argument("--ensemble-scale", type=int,
                        help="ensembles: the sample's ensemble_scale (default --scale: the ensembles on "
                             "the grids the deterministic models are measured on; at scale 1 the upstream "
                             "grids, about 20 GB of sample runs written once; 4 x --scale is the "
                             "sample's own default, which make run uses)")
    parser.add_argument("--soak-cycles", type=int, default=16,
                        help="soak: the 3-hourly cycles of the soak (default 16, two simulated days)")
    parser.add_argument("--products", help="comma-separated product ids to keep (default: all)")
    parser.add_argument("--only", default=",".join(GROUPS),
                        help=f"comma-separated figure groups to measure (default all: {','.join(GROUPS)}); "
                             "cycle figures need 'cycle', http needs a published run from it")
    parser.add_argument("--scale-curve", default="5,10",
                        help="scale: the multiples of the points a list measured on the way to "
                             f"{SCALE_FACTOR}x, each only when the guards allow (default 5,10)")
    parser.add_argument("--max-rss-gb", type=float,
                        help="scale: run a cycle only if the memory of its processes together, "
                             "extrapolated from the smaller cycles, stays below this (default 70%% "
                             "of the memory available when the group starts)")
    args = parser.parse_args(argv)
    quick = args.quick or args.scale == "quick"
    only = set(args.only.split(","))
    if only - set(GROUPS) or ({"http", "points"} & only and "cycle" not in only):
        parser.error(f"--only takes {', '.join(GROUPS)}; http and points need cycle")
    curve = sorted({int(k) for k in args.scale_curve.split(",") if k} - {1, SCALE_FACTOR})
    if any(k < 1 or k > SCALE_FACTOR for k in curve):
        parser.error(f"--scale-curve takes multiples between 1 and {SCALE_FACTOR}")
    if args.wrk_rounds < 1:
        parser.error("--wrk-rounds takes 1 or more")
    scale = QUICK_SCALE if quick else int(args.scale)
    n = args.points or (QUICK_POINTS if quick else 1000)
    seconds = args.wrk_seconds or (5 if quick else 10)
    work = args.work / f"scale-{scale}"

    keep = set(args.products.split(",")) if args.products else None
    tag = "" if keep is None else "-" + "-".join(sorted(keep))
    # Every variant has an output root of its own (so no timed cycle follows the removal of
    # another's output) and one sample cache, written once.
    config = functools.partial(write_config, scale=scale, cache=work / "cache", products=keep)
    base = config(work / f"p{n}{tag}", points=n)
    variants = {"cycle": base} if "cycle" in only else {}
    if "dask" in only:
        # The whole cycle on k processes: with forked build processes (while the configuration
        # has them) k of those too, so that nothing but the number of processes differs.
        forks = ({"build_processes": k} if "build_processes" in
                 {f.name for f in dataclasses.fields(DaskConfig)} else {} for k in (1, 2))
        variants |= {f"cluster{k}": config(work / f"p{n}{tag}-cluster{k}", points=n,
                                           scheduler="local-cluster", workers=k, **b)
                     for k, b in zip((1, 2), forks, strict=True)}
    if {"output", "scale"} & only:
        variants["gzip"] = config(work / f"p{n}{tag}-gzip", points=n, json="gzip")
    if "scale" in only:
        variants |= {f"gzip{k}": config(work / f"p{k * n}{tag}-gzip", points=k * n, json="gzip")
                     for k in (*curve, SCALE_FACTOR)}
    if "points" in only:
        variants["points"] = config(work / f"p{10 * n}{tag}", points=10 * n)
    if "power" in only:
        variants["power"] = config(work / f"p{n}{tag}-power", points=n, sites=POWER_SITES)
    if "ensembles" in only:
        variants["ensembles"] = config(work / f"p{n}{tag}-ensembles", points=n, ensembles=True,
                                       ensemble_scale=args.ensemble_scale or ensemble_grid(scale))
    cfg = load_config(base)
    models = list(dict.fromkeys(m for pc in cfg.products.values() for m in pc.models))
    print(f"# pointcast bench: scale {scale}, {n} points per list, products "
          f"{', '.join(f'{p} ({len(pc.points)})' for p, pc in cfg.products.items())}, models "
          f"{', '.join(models)}", flush=True)
    print(f"# machine: {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
          f"{platform.python_implementation()} {platform.python_version()}; work dir {work}",
          flush=True)
    # A checkout whose extension was never built (a second git worktree, `pip install` without
    # a compiler) renders with numpy: the same bytes, but a slower cycle than `make bench`'s.
    if render_module.__name__.endswith("_render_numpy"):
        print("# rendering: numpy (pointcast._render is not built here): the cycle figures are "
              "slower than with the compiled extension `make` builds", flush=True)
    if "fetch" in only:
        got = fetch.measure(work / "fetch", scale)
        line("fetch_bytes_vs_needed", got["ratio"], "<= 1.05",
             f"{got['fetched'] / 1e6:.2f} MB of messages fetched / {got['needed'] / 1e6:.2f} MB some product "
             f"reads (IFS scale {scale}, ENS every member, loopback mirror)")
        print(f"# fetch: the indexes read besides, {got['indexes'] / 1e6:.2f} MB (a message here is "
              f"{got['message_bytes'] / 1e3:.1f} KB on average, about 1 MB upstream)", flush=True)
    if "soak" in only:
        got = soak.measure(work / "soak", args.soak_cycles)
        line("disk_peak_vs_plan", got["peak_disk_bytes"] / got["plan_peak_disk_bytes"], "<= 1.2",
             f"the largest disk of cache, scratch and runs while a cycle runs {got['peak_disk_bytes'] / 1e6:.2f} MB / "
             f"plan's peak_disk_bytes {got['plan_peak_disk_bytes'] / 1e6:.2f} MB ({got['cycles']} soak cycles)")
        print(f"# soak: archive growth {got['archive_bytes_per_day'] / 1e3:.0f} KB a day / plan's "
              f"archive_bytes_per_day {got['plan_archive_bytes_per_day'] / 1e3:.0f} KB = "
              f"{got['archive_bytes_per_day'] / got['plan_archive_bytes_per_day']:.2f}; the soak's tests "
              f"{'passed' if got['passed'] else 'FAILED'}", flush=True)
    if only <= {"fetch", "soak"}:
        return 0
    roots = {k: load_config(c).output.root for k, c in variants.items()}
    # Removed before the decode figures, which create no files: they count towards the wait.
    removed_at = clear_outputs(list(roots.values()))
    t0 = time.perf_counter()
    for m in models:  # written once per scale (slow at scale 1), then read from the cache
        decode.fetched_files(cfg, m)
    print(f"# sample runs ready in {time.perf_counter() - t0:.0f} s", flush=True)

    if "decode" in only or "cycle" in only:  # the ecCodes time is the cycle's floor too
        dec = decode.measure(cfg, models, cfg.dask.workers, args.repeat)
        ecc = sum(d["eccodes_s"] for d in dec.values())
        pc_s = sum(d["pointcast_s"] for d in dec.values())
        print("# decode: " + ", ".join(f"{m} {d['messages']} msgs ecCodes {d['eccodes_s']:.1f} s "
                                       f"pointcast {d['pointcast_s']:.1f} s" for m, d in dec.items()),
              flush=True)
        line("decode_vs_eccodes", ecc / pc_s, ">= 0.8")
    settle(removed_at)
    one = cycle_figures(args, cfg, base, n, ecc, seconds, work, only) if "cycle" in only else None
    if "ensembles" in only:
        ensemble_figures(variants["ensembles"], models, ecc if "decode" in only or "cycle" in only else None,
                         n, args.repeat)
    if "power" in only:
        plain = one or cycle(base)
        powered = cycle(variants["power"])
        line("power_cycle_overhead", powered["wall_s"] / plain["wall_s"], "<= 1.15",
             f"{POWER_SITES} wind farms and {POWER_SITES} solar plants {powered['wall_s']:.1f} s / "
             f"no sites {plain['wall_s']:.1f} s ({n} points a list)")
    if "dask" in only:
        runs = {k: cycle(variants[f"cluster{k}"]) for k in (1, 2)}
        walls = {k: r["wall_s"] for k, r in runs.items()}
        line("dask_2_workers_speedup", walls[1] / walls[2], ">= 1.7",
             f"the whole cycle, LocalCluster of 1-thread workers: 1 worker {walls[1]:.1f} s / "
             f"2 workers {walls[2]:.1f} s")
        # What the cores allow: the 2-worker cycle cannot take less than its CPU seconds over
        # the machine's cores, and the 1-worker cycle already uses more than one core (its
        # flow, the cluster's scheduler and a slice's write threads beside the worker).
        cores, cpu = os.cpu_count() or 1, {k: r["cpu_s"] for k, r in runs.items()}
        print(f"# dask: CPU of the cycles' processes 1 worker {cpu[1]:.0f} s ({cpu[1] / walls[1]:.2f} "
              f"cores on average), 2 workers {cpu[2]:.0f} s ({cpu[2] / walls[2]:.2f}): on {cores} "
              f"cores the 2-worker cycle takes at least {cpu[2] / cores:.1f} s, a speedup of at most "
              f"{walls[1] * cores / cpu[2]:.2f} on this machine", flush=True)
    if "points" in only:  # last: its output is the largest, the others' are removed first
        settle(clear_outputs([root for k, root in roots.items() if k != "points"]))
        ten = cycle(variants["points"])
        line("points_10x_cost", ten["wall_s"] / one["wall_s"], "<= 3",
             f"{10 * n} points {ten['wall_s']:.1f} s / {n} points {one['wall_s']:.1f} s")
        print(f"# peak memory of the {10 * n}-point cycle: {ten['rss_gb']:.2f} GB RSS; with its "
              f"build processes' own pages {ten['tree_gb']:.2f} GB", flush=True)
    if {"output", "scale"} & only:
        if "points" in only:  # the largest output so far
            settle(clear_outputs([roots["points"]]))
        base_gzip = cycle(variants["gzip"])
        print(f"# cycle ({n} points, threads, [output] json = \"gzip\"): {base_gzip['wall_s']:.1f} s, "
              f"largest process {base_gzip['process_peak_gb']:.2f} GB ({base_gzip['process_peak_of']}), "
              f"all together {base_gzip['tree_gb']:.2f} GB", flush=True)
        output_figures(variants["gzip"], base_gzip["run_id"])
        if "scale" in only:
            scale_figures(args, variants, roots, n, curve, base_gzip, scale)
    return 0


def ensemble_figures(config: Path, models: list[str], ecc: float | None, n: int, repeat: int) -> None:
    """The cycle with the products' ensembles against plain ecCodes decoding every message the
    tables name, the deterministic models' (``ecc``, measured already, or here) and the
    ensembles' (every member's), and the largest process of that cycle."""
    cfg = load_config(config)
    ensembles = list(dict.fromkeys(e for pc in cfg.products.values() for e in pc.ensembles))
    for m in ensembles:  # written once per scale, then read from the cache
        decode.fetched_files(cfg, m)
    floor = {m: d["eccodes_s"] for m, d in decode.measure(cfg, ensembles, cfg.dask.workers, repeat,
                                                          pointcast=False).items()}
    if ecc is None:
        ecc = sum(d["eccodes_s"] for d in decode.measure(cfg, models, cfg.dask.workers, repeat,
                                                         pointcast=False).values())
    total = ecc + sum(floor.values())
    print("# ensembles: plain ecCodes " + ", ".join(f"{m} {s:.1f} s" for m, s in floor.items())
          + f", deterministic models {ecc:.1f} s", flush=True)
    run = cycle(config)
    line("ens_cycle_vs_decode_floor", run["wall_s"] / total, "<= 2.5",
         f"cycle with {', '.join(ensembles)} ({n} points a list) {run['wall_s']:.1f} s / ecCodes decode "
         f"{total:.1f} s")
    line("ens_peak_rss_gb", run["process_peak_gb"], "<= 6",
         f"the largest process ({run['process_peak_of']}); all together {run['tree_gb']:.2f} GB")


def output_figures(config: Path, run_id: str) -> None:
    """Files and bytes a run writes per point of each European product in gzip mode; the
    figures are the largest product's. The target of 12 files is the windpack's own
    design (3 hub heights x 3 freqs, and a ladder a freq), so it is read per product; the
    note gives each product's count and their sum, what a point on all three lists costs."""
    cfg = load_config(config)
    pids = [p for p in EUROPE if p in cfg.products]
    if not pids:
        line("output_files_per_point", "skipped", "<= 12", "no European product configured")
        line("output_bytes_per_point", "skipped", "<= 0.5 MB", "no European product configured")
        return
    files, size = {}, {}
    for pid in pids:
        found = [p for p in (cfg.output.root / "runs" / run_id / "json" / pid).rglob("*")
                 if p.is_file() and p.name not in ("index.json", "index.json.gz")]
        points = len(cfg.products[pid].points)
        files[pid], size[pid] = len(found) / points, sum(p.stat().st_size for p in found) / points
    each = ", ".join(f"{pid} {files[pid]:.3g}" for pid in pids)
    line("output_files_per_point", max(files.values()), "<= 12",
         f"the largest of the European products, every object under json/<product>/ but "
         f"index.json, per point ({each}; a point on all three lists: {sum(files.values()):.3g})")
    each = ", ".join(f"{pid} {size[pid] / 1e6:.3g}" for pid in pids)
    line("output_bytes_per_point", f"{max(size.values()) / 1e6:.3g} MB", "<= 0.5 MB",
         f"the same, [output] json = \"gzip\" ({each} MB; all three: {sum(size.values()) / 1e6:.3g} MB)")


def scale_figures(args, variants: dict, roots: dict, n: int, curve: list[int], base: dict,
                  scale: int) -> None:
    """The cycle with `SCALE_FACTOR` times the points against ``base`` (gzip mode both), after
    the multiples of ``curve``; a cycle runs only when its memory and output, extrapolated
    from the cycles before it, fit the machine."""
    limit = args.max_rss_gb or 0.7 * _meminfo_gb("MemAvailable")
    grids = f"grids at scale {scale}" + (" (quick)" if scale > 1 else " (the upstreams' own)")
    print(f"# scale: {grids}; a cycle runs only if its processes together are predicted below "
          f"{limit:.1f} GB (--max-rss-gb) and its output fits the disk", flush=True)
    output = roots["gzip"]
    per_point = (_tree_size(output / "runs") + _tree_size(output / "zarr")) / n
    done = {1: base}
    big = SCALE_FACTOR * n
    why = ""
    for k in (*curve, SCALE_FACTOR):
        gb, disk = _predict(done, k), per_point * k * n / 1e9
        free = _free_gb(roots[f"gzip{k}"])
        if gb > limit or disk > 0.9 * free:
            why = (f"{k * n} points would need about {gb:.1f} GB together (linear in the points from "
                   + ", ".join(f"{j * n}: {r['tree_gb']:.2f} GB" for j, r in sorted(done.items()))
                   + f"; --max-rss-gb {limit:.1f}) and {disk:.1f} GB of output ({free:.0f} GB free)")
            print(f"# scale: {why}: not run", flush=True)
            break
        if k == SCALE_FACTOR:  # the largest output: the others' are removed first
            settle(clear_outputs([r for key, r in roots.items() if key != f"gzip{k}"]))
        done[k] = r = cycle(variants[f"gzip{k}"])
        print(f"# scale curve: {k * n} points {r['wall_s']:.1f} s ({r['wall_s'] / base['wall_s']:.2f} "
              f"x {n} points), largest process {r['process_peak_gb']:.2f} GB ({r['process_peak_of']}), "
              f"all together {r['tree_gb']:.2f} GB", flush=True)
    if SCALE_FACTOR not in done:
        for name, target in (("points_50k_cost", "<= 30"), ("scale_peak_rss_gb", "<= 4"),
                             ("scale_rss_growth", "<= 1.5")):
            line(name, "skipped", target, why)
        return
    top = done[SCALE_FACTOR]
    line("points_50k_cost", top["wall_s"] / base["wall_s"], "<= 30",
         f"{big} points {top['wall_s']:.1f} s / {n} points {base['wall_s']:.1f} s, {grids}, gzip")
    line("scale_peak_rss_gb", top["process_peak_gb"], "<= 4",
         f"{top['process_peak_of']}; all processes together {top['tree_gb']:.2f} GB")
    line("scale_rss_growth", top["process_peak_gb"] / base["process_peak_gb"], "<= 1.5",
         f"{top['process_peak_gb']:.2f} GB / {base['process_peak_gb']:.2f} GB at {n} points")


def _predict(done: dict, k: int) -> float:
    """Memory (GB) of the cycle with ``k`` times the points: linear through the two largest
    measured, proportional to the points from a single one; never below the largest."""
    (k1, r1), *rest = sorted(done.items(), reverse=True)
    if not rest:
        return r1["tree_gb"] * k / k1
    k0, r0 = rest[0]
    slope = (r1["tree_gb"] - r0["tree_gb"]) / (k1 - k0)
    return max(r1["tree_gb"], r1["tree_gb"] + slope * (k - k1))


def _meminfo_gb(key: str) -> float:
    text = Path("/proc/meminfo").read_text()
    return next(int(x.split()[1]) for x in text.splitlines() if x.startswith(key + ":")) * 1024 / 1e9


def _free_gb(path: Path) -> float:
    path.mkdir(parents=True, exist_ok=True)
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 1e9


def _tree_size(path: Path) -> int:
    return tree_bytes(path) if path.exists() else 0


def cycle_figures(args, cfg, base: Path, n: int, ecc: float, seconds: int, work: Path,
                  only: set[str]) -> dict:
    """The cycle of ``base``, its output sizes and (``http``) the server against nginx."""
    one = cycle(base, args.profile)
    print(f"# cycle ({n} points, threads): {one['wall_s']:.1f} s, run {one['run_id']}", flush=True)
    line("cycle_vs_decode_floor", one["wall_s"] / ecc, "<= 3",
         f"cycle {one['wall_s']:.1f} s / ecCodes decode {ecc:.1f} s")
    line("peak_rss_gb", max(one["rss_gb"], one["tree_gb"]), "<= 6",
         f"the cycle's process {one['rss_gb']:.2f} GB; with its build processes' own pages "
         f"{one['tree_gb']:.2f} GB")
    output = cfg.output.root
    run = output / "runs" / one["run_id"]
    for pid, pc in cfg.products.items():
        tree = run / "json" / pid
        zarr = output / "zarr" / f"{pid}.zarr"
        line(f"output_bytes_per_point.{pid}", tree_bytes(tree, ".json") // len(pc.points), "",
             f"json; gzip {tree_bytes(tree, '.json.gz') // len(pc.points)}, "
             f"zarr {tree_bytes(zarr) // len(pc.points)}")

    missing = http.missing_tools()
    if "http" not in only:
        pass
    elif missing or "eu-short" not in cfg.products:
        why = (f"{' and '.join(missing)} not installed: run `make bench-deps` (Debian packages)"
               if missing else "no eu-short product configured")
        line("server_vs_nginx", "skipped", ">= 0.5", why)
    else:
        pts = [(p.lat, p.lon) for p in cfg.products["eu-short"].points]
        h = http.measure(base, pts, work / "http", seconds, args.wrk_rounds)
        server, nginx = (statistics.median(r["rps"] for r in h[k]) for k in ("server_1", "nginx_1"))
        line("server_vs_nginx", statistics.median(h["ratios"]), ">= 0.5",
             f"median of {len(h['ratios'])} alternating rounds "
             f"({', '.join(f'{r:.2f}' for r in h['ratios'])}); median server {server:.0f} req/s, "
             f"nginx {nginx:.0f} req/s ({h['bytes_1']} bytes, 64 connections)")
        p99 = {k: statistics.median(r["p99_ms"] for r in h[k]) for k in ("server_1", "nginx_1")}
        line("server_rps_1_point", server, "", f"p99 {p99['server_1']:.1f} ms (median of the rounds)")
        line("server_rps_10_points", h["server_10"]["rps"], "", f"p99 {h['server_10']['p99_ms']:.1f} ms")
        line("server_rps_1_point_unique", h["server_1_unique"]["rps"], "",
             f"p99 {h['server_1_unique']['p99_ms']:.1f} ms; a new query text every request (no kept answer)")
        line("nginx_rps_1_point", nginx, "", f"p99 {p99['nginx_1']:.1f} ms (median of the rounds)")
        line("gzip_content_encoding", f"server={'yes' if h['server_gzip'] else 'no'} "
             f"nginx={'yes' if h['nginx_gzip'] else 'no'}", "",
             "precompressed .json.gz served with Content-Encoding: gzip")

    return one


if __name__ == "__main__":
    sys.exit(main())
