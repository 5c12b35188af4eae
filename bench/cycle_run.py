"""One timed cycle in a process of its own: ``python -m bench.cycle_run CONFIG [--profile F]``.

Prints one JSON line: wall seconds of the flow (Prefect's temporary server is started by a
warm-up flow first, so its start-up is not counted), the CPU seconds of the process and the
descendants it reaped in the meantime (`_cpu_seconds`: a LocalCluster's workers; not
Prefect's server nor the fork server of the build processes, which outlive the cycle), the
process's peak RSS, the largest peak RSS among its children (dask workers of a LocalCluster,
forked build processes), the peak memory of the process and its children together
(`TreeMemory`), the largest peak RSS of any one process of the cycle and which process that
was (`ProcessPeaks`), and the run id. The previous
run tree, pointer and archive under the output root are removed first (the sample cache is
kept; ``workload.clear_outputs``), so every measured cycle does the whole work.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# Prefect's temporary server starts before the timing (the warm-up flow); on a loaded machine
# its default 20 s start-up allowance fails the whole bench.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

from prefect import flow  # noqa: E402

import pointcast  # noqa: E402,F401  (PROJ before ecCodes)
from pointcast.config import load_config  # noqa: E402

from .workload import clear_outputs, settle  # noqa: E402


@flow
def _warm_up() -> int:
    return 1


class TreeMemory(threading.Thread):
    """The peak memory of this process and its descendants, sampled until ``stop``: this
    process's RSS and each descendant's private pages (a forked child's RSS counts again the
    pages it shares with the cycle). A descendant's pages are counted by the kernel walking its
    page tables (``smaps_rollup``), which costs more the larger the process (bench/README.md,
    ``peak_rss_gb``), and the sampling must not slow the cycle it measures. So a sample follows the previous one after ``every`` seconds or ``spacing`` times its own
    duration, whichever is longer: the sampling takes at most 1/``spacing`` of a core."""

    def __init__(self, every: float = 2.0, spacing: float = 50.0):
        super().__init__(daemon=True)
        self.every, self.spacing, self.peak, self._done = every, spacing, 0, threading.Event()

    def run(self) -> None:
        wait = self.every
        while not self._done.wait(wait):
            start, own = time.perf_counter(), os.getpid()
            self.peak = max(self.peak, _status_kib(own, "VmRSS") * 1024
                            + sum(_private(pid) for pid in _tree(own)[1:]))
            wait = max(self.every, self.spacing * (time.perf_counter() - start))

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak / 1e9


class ProcessPeaks(threading.Thread):
    """The largest peak RSS of any one process of the cycle: this process, every descendant
    (forked build processes, a LocalCluster's nannies and workers) and, for a ``tcp://``
    scheduler, every worker of that cluster, which is no child of ours.

    Each process's peak is the kernel's own high-water mark (``VmHWM``), read every ``every``
    seconds while the process lives (a cheap read, unlike `TreeMemory`'s page walk), so a
    sample only has to catch a process before it ends, not at its peak. Processes that end
    between two samples are covered once reaped by ``RUSAGE_CHILDREN`` (`peak`)."""

    def __init__(self, every: float = 0.2):
        super().__init__(daemon=True)
        self.every, self._done = every, threading.Event()
        self.peaks: dict[int, tuple[int, str]] = {}  # pid -> (bytes, command line)

    def run(self) -> None:
        own = os.getpid()
        while not self._done.wait(self.every):
            for pid in _tree(own):
                self._note(pid)

    def _note(self, pid: int) -> None:
        try:
            hwm = _status_kib(pid, "VmHWM") * 1024
        except (OSError, StopIteration):  # ended, or a zombie without memory
            return
        if hwm > self.peaks.get(pid, (0, ""))[0]:
            name = self.peaks[pid][1] if pid in self.peaks else _command(pid)
            self.peaks[pid] = (hwm, name)

    def stop(self, scheduler: str) -> dict:
        """Stop sampling; the largest peak (GB) and the process that reached it, counting the
        workers of a ``tcp://`` scheduler."""
        self._done.set()
        self.join()
        self._note(os.getpid())
        kib = 1024  # ru_maxrss is in KiB on Linux
        found = {"this process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * kib,
                 "a reaped child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * kib}
        for pid, (hwm, name) in self.peaks.items():
            key = "this process" if pid == os.getpid() else f"{name} (pid {pid})"
            found[key] = max(found.get(key, 0), hwm)
        if scheduler.startswith("tcp://"):
            from dask.distributed import Client

            with Client(scheduler, timeout=30) as client:
                for addr, hwm in client.run(_own_peak).items():
                    found[f"dask worker {addr}"] = hwm
        which = max(found, key=found.get)
        return {"process_peak_gb": found[which] / 1e9, "process_peak_of": which}


def _own_peak() -> int:
    """Bytes of peak RSS of the calling process or its largest reaped child (run on a worker)."""
    return 1024 * max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def _cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and of the descendants it has reaped: a
    LocalCluster's nannies, which reaped their workers, once the cycle has closed it."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(b" ".join(argv).decode(errors="replace").split())[:80]


def _tree(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += map(int, (task / "children").read_text().split())
        except OSError:  # the thread ended
            pass
    return [pid, *(p for child in children for p in _tree(child))]


def _status_kib(pid: int, key: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in text.splitlines() if line.startswith(key + ":"))


def _private(pid: int) -> int:
    """Bytes only this process maps (0 when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return sum(int(line.split()[1]) * 1024 for line in text.splitlines()
               if line.startswith(("Private_Clean:", "Private_Dirty:")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--profile", help="write cProfile statistics of the cycle to this file")
    args = parser.parse_args(argv)
    from pointcast.flows.cycle import cycle

    # Only these two are kept: the configuration whole (its points lists) would sit in the
    # measured process beside the cycle's own copy, and in every build process forked from it.
    cfg = load_config(Path(args.config))
    root, scheduler = cfg.output.root, cfg.dask.scheduler
    del cfg
    if "://" not in str(root):
        settle(clear_outputs([Path(root)]))
    _warm_up()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    memory, processes = TreeMemory(), ProcessPeaks()
    memory.start()
    processes.start()
    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    run_id = cycle(args.config)
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    tree_gb = memory.stop()
    peaks = processes.stop(scheduler)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    kib = 1024  # ru_maxrss is in KiB on Linux
    print(json.dumps({
        "wall_s": wall, "cpu_s": cpu, "run_id": run_id,
        "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * kib / 1e9,
        "children_rss_gb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * kib / 1e9,
        "tree_gb": tree_gb, **peaks,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
