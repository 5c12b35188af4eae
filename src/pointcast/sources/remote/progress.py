"""What a fetch reports while it runs: a progress bar on a terminal (rich), and a line in the
log every tenth of the files (the flow's log when running in Prefect).
"""

from __future__ import annotations

import logging
import sys
import threading
import time

log = logging.getLogger(__name__)


def logger() -> logging.Logger | logging.LoggerAdapter:
    """The flow's logger inside a Prefect run (so progress shows in the flow's logs)."""
    try:
        from prefect import get_run_logger

        return get_run_logger()
    except Exception:  # outside a flow or task run
        return log


class FetchProgress:
    """Files and bytes done: a rich progress bar on a terminal, a log line every tenth."""

    def __init__(self, what: str, total: int, logger, bar: bool):
        self.what, self.total, self.logger = what, total, logger
        self.done = self.bytes = self.cached = 0
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._next_log = 0.1
        self._bar = None
        if bar and total and sys.stderr.isatty():
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total} files"),
                                 DownloadColumn(), TimeRemainingColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(what, total=total)

    def step(self, nbytes: int, cached: bool) -> None:
        with self._lock:
            self.done += 1
            self.bytes += nbytes
            self.cached += cached
            if self._bar is not None:
                self._bar.update(self._task, advance=1)
            if self.done / self.total >= self._next_log or self.done == self.total:
                self._next_log = (int(self.done * 10 / self.total) + 1) / 10
                dt = max(time.monotonic() - self.t0, 1e-6)
                self.logger.info("%s: %d/%d files (%d from the cache), %.1f MB downloaded, "
                                 "%.2f MB/s", self.what, self.done, self.total, self.cached,
                                 self.bytes / 1e6, self.bytes / 1e6 / dt)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()

