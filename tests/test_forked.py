"""pointcast.forked: slices built in forked processes, and how their failures surface."""

from __future__ import annotations

import gc
import os
import signal

import numpy as np
import pytest

from pointcast.forked import ChildFailed, fork_map

# Inherited by the children, not pickled: what the build's children do with the extracted series.
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


def _frozen(i: int) -> int:
    return gc.get_freeze_count()


def test_children_do_not_collect_the_cycles_objects_and_the_cycle_does_again():
    """The parent's objects are frozen while children run (a child's collections would copy
    every page holding one) and thawed after, also when a child fails."""
    kept = [[i] for i in range(1000)]  # objects the collector tracks
    assert gc.get_freeze_count() == 0
    assert all(n >= len(kept) for n in fork_map(_frozen, [0, 1], 2))
    assert gc.get_freeze_count() == 0
    with pytest.raises(ValueError):
        fork_map(_raises, [2], 2)
    assert gc.get_freeze_count() == 0
