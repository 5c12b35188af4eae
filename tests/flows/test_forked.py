"""pointcast.forked: slices built in processes of their own, and how their failures surface."""

from __future__ import annotations

import os
import signal
from functools import partial

import numpy as np
import pytest

from pointcast.forked import ChildFailed, fork_map

SHARED = np.arange(1_000_000, dtype=np.int64)


def _work(i: int) -> tuple[int, int, int]:
    return i, os.getpid(), int(SHARED[i * 1000:(i + 1) * 1000].sum())


def test_results_come_back_in_order_from_other_processes():
    got = fork_map(_work, list(range(7)), 3)
    assert [g[0] for g in got] == list(range(7))
    assert [g[2] for g in got] == [int(SHARED[i * 1000:(i + 1) * 1000].sum()) for i in range(7)]
    pids = {g[1] for g in got}
    assert os.getpid() not in pids and len(pids) == 7  # a process per item


def _raises(i: int) -> int:
    if i == 2:
        raise ValueError(f"slice {i} is bad")
    return i


def test_an_exception_in_a_child_is_raised_in_the_parent():
    with pytest.raises(ValueError, match="slice 2 is bad"):
        fork_map(_raises, [0, 1, 2, 3], 2)


def _dies(i: int) -> int:
    if i == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # out of memory, say
    return i


def test_a_child_that_dies_fails_the_map():
    with pytest.raises(ChildFailed, match="died"):
        fork_map(_dies, [0, 1, 2], 2)


def _unpicklable(i: int):
    return lambda: i


def test_a_result_that_cannot_come_back_is_named():
    with pytest.raises(ChildFailed, match="pickle"):
        fork_map(_unpicklable, [0], 1)


def _peak_rss_mb(_: int, given: np.ndarray) -> tuple[float, int]:
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return peak / 1024, int(given.sum())


def test_a_child_starts_lean_whatever_the_parent_holds():
    """A child is forked from the fork server, not from the caller: it does not start at the
    caller's RSS (the extracted series of every point, in a cycle), and gets what it is given
    pickled."""
    held = np.ones(400 << 20, dtype=np.uint8)  # 400 MB the caller touched
    given = np.arange(1000)
    (peak, total), = fork_map(partial(_peak_rss_mb, given=given), [0], 1)
    assert total == int(given.sum())
    assert peak < 300, f"the child peaked at {peak:.0f} MB beside the caller's {held.nbytes >> 20} MB"
