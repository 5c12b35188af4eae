"""The reference workload: a configuration and points lists written into a work directory.

The configuration is the shipped ``config/pointcast.toml`` with the sample source at the
requested scale over the whole globe, a fixed run (so the sample files are written once and
reused), and every points list replaced by points drawn deterministically inside the coverage
of every product that uses it. Products are those of the shipped configuration, plus
``global`` when the code has that product but the shipped configuration does not list it.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import numpy as np

from pointcast.grids import grid_for

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "config" / "pointcast.toml"
INIT = "2026-11-20T00:00Z"  # a 00 UTC run: IFS reaches 15 days, MSM 78 h
WORLD = [-180.0, -90.0, 180.0, 90.0]
# Hub heights of today's turbines, 5 m apart: three per European point.
HUB_HEIGHTS = np.arange(60, 171, 5)
# ext4 without a journal (this machine's disk) does not reuse an inode freed in the last 60 s,
# or 360 s while its inode-table block is dirty, and walks past every such inode for each file
# it creates (fs/ext4/ialloc.c, recently_deleted), so creating a run's files right after a large
# removal costs many times the kernel time (docs/performance.md, "Measuring").
# A cycle in service never pays it (retention deletes the oldest run after publishing, hours
# before the next cycle), so a timed cycle never follows a removal by less than this.
SETTLE_SECONDS = 365


def draw_points(pids: list[str], n: int, seed: int, hub_heights: bool) -> str:
    """``n`` points (CSV text), each in a cell of its own of every product grid in ``pids``
    (the configuration refuses two points in one cell) and inside the coverage of every
    product; the same arguments always give the same points. ValueError when the coverage
    has fewer free cells than ``n`` points need."""
    grids = [grid_for(pid) for pid in pids]
    cov = grids[0].coverage
    box = [getattr(cov, k, d) for k, d in zip(("west", "south", "east", "north"), WORLD, strict=True)]
    rng = np.random.default_rng(seed)
    rows: list[str] = []
    cells: list[set[str]] = [set() for _ in grids]
    while len(rows) < n:
        before = len(rows)
        # Rounded as the CSV writes them: the configuration reads the rounded coordinates,
        # and rounding can move a point across a cell's edge (it did in 50,000 Japanese points).
        lats = np.round(rng.uniform(box[1], box[3], 20 * n), 5)
        lons = np.round(rng.uniform(box[0], box[2], 20 * n), 5)
        ok = np.ones(len(lats), bool)
        for g in grids:
            ok &= g.covers_many(lats, lons)
        lats, lons = lats[ok], lons[ok]
        keys = [g.cell_keys(lats, lons) for g in grids]
        for k, (lat, lon) in enumerate(zip(lats, lons, strict=True)):
            if any(key[k] in seen for key, seen in zip(keys, cells, strict=True)):
                continue
            for key, seen in zip(keys, cells, strict=True):
                seen.add(key[k])
            hubs = ""
            if hub_heights:
                hubs = ";".join(str(int(h)) for h in sorted(rng.choice(HUB_HEIGHTS, 3, replace=False)))
            rows.append(f"p{len(rows):05d},point {len(rows)},{lat:.5f},{lon:.5f},,{hubs}")
            if len(rows) == n:
                break
        if len(rows) - before < max(1, (n - before) // 100):  # 20 n draws: hardly a free cell
            raise ValueError(f"{', '.join(pids)}: only {len(rows)} points in distinct "
                             f"{grids[0].name} cells found for {n}")
    return "id,name,lat,lon,elevation,hub_heights\n" + "\n".join(rows) + "\n"


def clear_outputs(roots: list[Path]) -> float | None:
    """Remove the runs, pointer and archives under ``roots`` (never the sample cache) and sync;
    the ``time.monotonic()`` when done, None when there was nothing to remove (`settle`)."""
    removed = False
    for root in roots:
        for name in ("runs", "zarr"):
            removed |= (root / name).exists()
            shutil.rmtree(root / name, ignore_errors=True)
        (root / "current").unlink(missing_ok=True)
    if not removed:
        return None
    os.sync()
    return time.monotonic()


def settle(removed_at: float | None) -> None:
    """Wait until ``SETTLE_SECONDS`` have passed since a removal, so that the next timed cycle
    creates its files as a cycle in service does."""
    wait = 0.0 if removed_at is None else removed_at + SETTLE_SECONDS - time.monotonic()
    if wait > 0:
        print(f"# earlier output removed: waiting {wait:.0f} s before the timed cycle "
              "(freed inodes, bench/workload.py)", flush=True)
        time.sleep(wait)


def write_config(dest: Path, *, scale: int, points: int, scheduler: str = "threads",
                 workers: int = 2, cache: Path | None = None,
                 products: set[str] | None = None, json: str | None = None,
                 build_processes: int | None = None, ensembles: bool = False,
                 ensemble_scale: int | None = None, sites: int = 0) -> Path:
    """Write ``dest/pointcast.toml`` and its points lists; the output root is ``dest/output``,
    the sample cache ``cache`` (default ``dest/output/cache``); ``products`` keeps only those;
    ``json`` sets ``[output] json`` and ``build_processes`` ``[dask] build_processes`` (both
    left to the shipped configuration when None); without ``ensembles`` the products' ensembles
    are taken out (the figures but the ``ensembles`` group's measure the deterministic
    cycle); ``ensemble_scale`` sets the sample's (its default when None); ``sites``: that many
    wind farms and as many solar plants (`draw_sites`) instead of the shipped sites lists, none
    when 0 (every figure but ``power_cycle_overhead`` measures the cycle without power).
    Returns the path."""
    dest.mkdir(parents=True, exist_ok=True)
    text = re.sub(r"(?m)^sites\s*=.*\n", "", SHIPPED.read_text())
    if not ensembles:
        text = re.sub(r"(?m)^ensembles\s*=.*\n", "", text)
    if products is not None:
        blocks = re.split(r"(?m)^(?=\[)", text)
        text = "".join(b for b in blocks if not (m := re.match(r"\[products\.([\w-]+)\]", b))
                       or m.group(1) in products)
    text = _set(text, "output", "root", f'"{dest / "output"}"')
    if cache is not None:
        text = _set(text, "output", "cache", f'"{cache}"')
    text = _set(text, "dask", "scheduler", f'"{scheduler}"')
    text = _set(text, "dask", "workers", str(workers))
    if json is not None:
        text = _set(text, "output", "json", f'"{json}"')
    if build_processes is not None:
        text = _set(text, "dask", "build_processes", str(build_processes))
    text = _set(text, "sources.sample", "scale", str(scale))
    text = _set(text, "sources.sample", "area", str(WORLD))
    text = _set(text, "sources.sample", "init", f'"{INIT}"')
    if ensemble_scale is not None:
        text = _set(text, "sources.sample", "ensemble_scale", str(ensemble_scale))
    products = dict(re.findall(r'^\[products\.([\w-]+)\][^\[]*?^points\s*=\s*"([^"]+)"', text, re.M | re.S))
    models = {m for block in re.findall(r"^models\s*=\s*\[([^\]]*)\]", text, re.M)
              for m in re.findall(r'"([\w-]+)"', block)}
    for m in sorted(models):
        if not re.search(rf"^\[models\.{re.escape(m)}\]", text, re.M):
            text += f'\n[models.{m}]\nsource = "sample"\n'
    by_file: dict[str, list[str]] = {}
    for pid, rel in products.items():
        by_file.setdefault(rel, []).append(pid)
    for k, (rel, pids) in enumerate(sorted(by_file.items())):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        csv = draw_points(pids, points, seed=1000 + k, hub_heights="eu-wind" in pids)
        if not path.exists() or path.read_text() != csv:  # keep the mtime: same run id
            path.write_text(csv)
    if sites:
        hosts = [pid for pid in ("eu-wind", "global") if pid in products]
        for pid, csv in draw_sites(hosts, sites).items():
            path = dest / "sites" / f"{pid}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text() != csv:
                path.write_text(csv)
            text = re.sub(rf"(?m)^(\[products\.{re.escape(pid)}\][^\n]*\n)", rf'\1sites = "sites/{pid}.csv"\n', text)
    cfg = dest / "pointcast.toml"
    cfg.write_text(text)
    return cfg


def draw_sites(hosts: list[str], n: int) -> dict[str, str]:
    """``n`` wind farms (eu-wind's: hub heights of `HUB_HEIGHTS`, the IEC class 2 composite
    curve, 10-500 MW) and ``n`` solar plants (half under eu-wind, half under global when it is
    configured; 1-200 MWp, tilt 10-35, azimuth 150-210), sites CSV text by host product, at
    places drawn as the points are (`draw_points`); the same ``n`` always gives the same sites."""
    header = ("id,name,lat,lon,kind,hub_height,turbine,turbines,capacity_mw,farm_efficiency,restart_wind,"
              "dc_kwp,ac_kw,tilt,azimuth,losses,mounting,temp_coeff")
    rng = np.random.default_rng(77)
    rows: dict[str, list[str]] = {pid: [] for pid in hosts}
    pv_hosts = hosts if len(hosts) > 1 else hosts * 2
    wanted = [("eu-wind", "wind", n), (pv_hosts[0], "pv", n - n // 2), (pv_hosts[-1], "pv", n // 2)]
    for k, (pid, kind, count) in enumerate(wanted):
        places = draw_points([pid], count, seed=2000 + k, hub_heights=False).splitlines()[1:]
        for line in places:
            pid_, _, lat, lon, *_ = line.split(",")
            sid = f"{kind}-{pid_}-{k}"
            if kind == "wind":
                rows[pid].append(f"{sid},{sid},{lat},{lon},wind,{int(rng.choice(HUB_HEIGHTS))},iec-class-2-composite,,"
                                 f"{rng.uniform(10, 500):.1f},,,,,,,,,")
            else:
                dc = rng.uniform(1000, 200000)
                rows[pid].append(f"{sid},{sid},{lat},{lon},pv,,,,,,,{dc:.0f},{dc / 1.25:.0f},{rng.uniform(10, 35):.0f},"
                                 f"{rng.uniform(150, 210):.0f},,,")
    return {pid: "\n".join([header, *lines]) + "\n" for pid, lines in rows.items() if lines}


def _set(text: str, section: str, key: str, value: str) -> str:
    """Set ``key = value`` in ``[section]`` (appending the key, or the section, if missing)."""
    head = re.search(rf"^\[{re.escape(section)}\][^\n]*\n", text, re.M)
    if head is None:
        return text + f"\n[{section}]\n{key} = {value}\n"
    end = re.search(r"^\[", text[head.end():], re.M)
    stop = head.end() + (end.start() if end else len(text) - head.end())
    body = text[head.end():stop]
    line = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    body = line.sub(f"{key} = {value}", body, 1) if line.search(body) else f"{key} = {value}\n" + body
    return text[:head.end()] + body + text[stop:]
