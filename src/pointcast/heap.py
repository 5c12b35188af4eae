"""Memory a process freed, given back to the system."""

from __future__ import annotations

import ctypes


def release_freed() -> None:
    """Give the memory freed inside glibc's heaps back to the system (``malloc_trim``). What
    dask's threads and a stage's many small objects free lands in heaps that ``free`` shrinks
    only from the top: the freed pages in between stay part of the process's RSS, on which
    the next stage's peak then sits. Nothing where the C library has no ``malloc_trim`` (not
    glibc)."""
    if _TRIM is not None:
        _TRIM(0)


_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None)
