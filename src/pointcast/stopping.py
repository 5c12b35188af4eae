"""Stopping a cycle on SIGTERM or SIGINT: every task told at once, and a bound on how long it
takes.

A signal is handled in the main thread only; the cycle's tasks run in threads beside it (a
discovery waiting for a run, a fetch between retries, a model decoding). So a signal sets
`STOP`, which every wait of a task is on (`pause`, in place of ``time.sleep``) and every loop
of one looks at (`check`): the task raises `Stopped` at once, the main thread unwinds the
cycle (its staging tree and scratch stores removed, its outcome recorded, `current`
untouched), and the process exits with ``128 + signal`` (143 for SIGTERM, 130 for SIGINT), as a
shell reports a process a signal ended. What no event wakes, a request in flight (at most its
``timeout_seconds``), is bounded by a watchdog: `GRACE_SECONDS` after the signal it records the
outcome (the callbacks of `on_signals`) if the cycle has not, and ends the process.
docs/operations.md, "Failures and stopping".
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

STOP = threading.Event()
SIGNALS = (signal.SIGTERM, signal.SIGINT)
# From the signal to the end of the process at the latest: the cycle unwinds well within it
# (a few seconds), what is left then is a request in flight, which nothing else interrupts.
GRACE_SECONDS = 20.0

_received: list[int] = []  # the first signal, once one came
_last_words: list[Callable[[], None]] = []  # what the watchdog runs before it ends the process


class Stopped(Exception):
    """The cycle was told to stop (SIGTERM, SIGINT): raised where a task waits or loops."""


def reason() -> str:
    """Why the cycle stopped: "stopped by SIGTERM" ("" while it was not told to)."""
    return f"stopped by {signal.Signals(_received[0]).name}" if _received else ""


def exit_code() -> int:
    """The exit status of a process a signal stopped: 128 + the signal's number."""
    return 128 + _received[0] if _received else 1


def check() -> None:
    """Raise `Stopped` once the cycle is told to stop."""
    if STOP.is_set():
        raise Stopped(reason() or "stopped")


def pause(seconds: float) -> None:
    """Sleep ``seconds``, waking to raise `Stopped` as soon as the cycle is told to stop."""
    if STOP.wait(max(0.0, seconds)):
        raise Stopped(reason() or "stopped")


@contextmanager
def on_signals(last_words: Callable[[], None] | None = None) -> Iterator[None]:
    """For the block (in the main thread): SIGTERM and SIGINT set `STOP`, start the watchdog
    and then do what their handlers before did (Prefect's, inside a flow, raises its
    ``TerminationSignal``; Python's SIGINT ``KeyboardInterrupt``), or raise `Stopped` where
    there was none. A signal after the first is only logged: the clean-up it would interrupt
    is what the first one started. ``last_words()``: what the watchdog runs before it ends
    the process (record the cycle's outcome). Outside the main thread nothing is installed:
    signals are not delivered there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if last_words is not None:
        _last_words.append(last_words)
    # a handler not installed from Python (None) cannot be put back: such a signal is left alone
    previous: dict[int, Any] = {s: h for s in SIGNALS if (h := signal.getsignal(s)) is not None}

    def handler(signum: int, frame) -> None:
        if _received:  # handlers run in the main thread only, one after the other: no lock
            log.info("%s: the cycle is stopping already", signal.Signals(signum).name)
            return
        _received.append(signum)
        STOP.set()
        log.warning("%s: the cycle stops (its tasks are told; the process ends within %g s)",
                    signal.Signals(signum).name, GRACE_SECONDS)
        threading.Thread(target=_watchdog, name="stop-watchdog", daemon=True).start()
        before = previous[signum]
        if callable(before):
            before(signum, frame)
        raise Stopped(reason())

    for s in previous:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, before in previous.items():
            signal.signal(s, before)
        if last_words is not None:
            _last_words.remove(last_words)


def _watchdog() -> None:
    """`GRACE_SECONDS` after the signal: the outcome recorded (`on_signals`' last words), the
    threads still running named, and the process ended."""
    time.sleep(GRACE_SECONDS)
    running = sorted(t.name for t in threading.enumerate()
                     if t.is_alive() and not t.daemon and t is not threading.main_thread())
    for words in list(_last_words):
        try:
            words()
        except Exception as exc:  # noqa: BLE001 (the process ends: the log says why)
            log.error("the stopped cycle's outcome is not recorded: %s", exc)
    log.error("%s: still running %g s after it (%s): the process ends now", reason(),
              GRACE_SECONDS, ", ".join(running) or "the main thread")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(exit_code())
