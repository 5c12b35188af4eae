"""A process's heap: how many arenas glibc keeps, and memory freed given back."""

from __future__ import annotations

import ctypes

# glibc's mallopt parameter for the most arenas malloc creates (malloc.h: M_ARENA_MAX)
_M_ARENA_MAX = -8


def release_freed() -> None:
    """Give the memory freed inside glibc's heaps back to the system (``malloc_trim``). What
    dask's threads and a stage's many small objects free lands in heaps that ``free`` shrinks
    only from the top: the freed pages in between stay part of the process's RSS, on which
    the next stage's peak then sits. Nothing where the C library has no ``malloc_trim`` (not
    glibc)."""
    if _TRIM is not None:
        _TRIM(0)


def cap_arenas(arenas: int) -> None:
    """Let malloc create at most ``arenas`` arenas in this process (glibc's ``M_ARENA_MAX``;
    the ``MALLOC_ARENA_MAX`` environment variable, set from within). By default each thread
    that allocates gets one, up to eight a core: the cycle's threads (Prefect's, dask's, the flush and
    the appends) each come to own one, and each arena keeps what its thread freed, so the
    process's RSS grows with the threads that ever allocated, not with what is alive. Called
    before the threads start. Nothing where the C library has no ``mallopt`` (not glibc)."""
    if _MALLOPT is not None:
        _MALLOPT(_M_ARENA_MAX, arenas)


_LIBC = ctypes.CDLL(None)
_TRIM = getattr(_LIBC, "malloc_trim", None)
_MALLOPT = getattr(_LIBC, "mallopt", None)
