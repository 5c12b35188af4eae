"""Work spread over processes, for the CPU-bound Python of the build stage.

Rendering a run's JSON is Python holding the GIL; threads cannot share it out. The children
are forked from a lean server process (multiprocessing's ``forkserver``, with the build stage
imported once: `PRELOAD`), not from the cycle's: a child forked from the cycle would start
at the cycle's RSS (its page tables copied, and every page the child touches copied again),
so the largest process would grow with whatever the cycle holds. A slice's inputs go in
pickled, as to a dask worker, and its results (facts, file names) come back through a pipe.
Children die with the server, which dies with the cycle (``PR_SET_PDEATHSIG``): a killed
cycle leaves no child writing into its staging tree.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_PR_SET_PDEATHSIG = 1
# Imported by the fork server before it forks a child: what every build slice needs.
PRELOAD = ["pointcast.build"]


class ChildFailed(RuntimeError):
    """A forked child died, or raised an exception that could not be sent back."""


def fork_map(fn: Callable[[T], R], items: Sequence[T], processes: int) -> list[R]:
    """``[fn(item) for item in items]``, each call in a child process (``fn`` and the items
    pickled: a module-level function or a `functools.partial` of one), at most ``processes``
    at a time. The first failure (an exception of ``fn``, re-raised here, or a child that died)
    stops the others and raises."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    results: list[Any] = [None] * len(items)
    todo = list(enumerate(items))
    running: dict[Any, tuple[int, Any]] = {}  # pipe end -> (item index, process)
    try:
        while todo or running:
            while todo and len(running) < processes:
                i, item = todo.pop(0)
                recv, send = ctx.Pipe(duplex=False)
                child = ctx.Process(target=_child, args=(fn, item, send), daemon=True)
                child.start()
                send.close()
                running[recv] = (i, child)
            for conn in wait(list(running)):
                assert isinstance(conn, Connection)  # `wait` hands back the pipe ends it was given
                i, child = running.pop(conn)
                try:
                    ok, value = conn.recv()
                except EOFError:
                    child.join()
                    raise ChildFailed(f"the process of item {i} died (exit code {child.exitcode})") from None
                finally:
                    conn.close()
                child.join()
                if not ok:
                    raise value
                results[i] = value
    finally:
        for conn, (_, child) in running.items():
            child.kill()
            child.join()
            conn.close()
    return results


def _child(fn: Callable, item: Any, conn) -> None:
    parent = os.getppid()  # the fork server
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the server died before the line above
        os._exit(1)
    try:
        result = (True, fn(item))
    except BaseException as e:  # sent back, raised in the parent
        result = (False, e)
    try:
        conn.send(result)
    except Exception as e:  # a result or exception that does not pickle
        conn.send((False, ChildFailed("".join(traceback.format_exception(e if result[0] else result[1])))))
