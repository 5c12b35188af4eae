"""pointcast.heap: memory freed on a thread given back, and the malloc arenas capped.

Each check runs in an interpreter of its own: in a test worker's process, the heap and the
arenas earlier tests left decide whether a new thread's allocations come from fresh pages, or
from an arena already there.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from pointcast import heap

_FREED_ON_A_THREAD = """
import os, threading
from pointcast import heap

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

heap.release_freed()
before = rss()
kept = []

def work():  # 96 MB in pieces below glibc's mmap threshold, freed but the last
    pieces = [bytearray(b"x" * (96 << 10)) for _ in range(1024)]
    kept.append(pieces.pop())
    del pieces

thread = threading.Thread(target=work)
thread.start()
thread.join()
freed = rss()
heap.release_freed()
print(before, freed, rss())
"""


@pytest.mark.skipif(heap._TRIM is None, reason="no malloc_trim: not glibc")
def test_memory_a_thread_freed_goes_back_to_the_system():
    """What an extraction block freed on dask's threads is no longer part of the process's
    RSS once `heap.release_freed` has run: glibc keeps it otherwise, below a block still
    held at the top of the thread's heap."""
    out = subprocess.run([sys.executable, "-c", _FREED_ON_A_THREAD], capture_output=True, text=True,
                         check=True).stdout
    before, freed, after = map(int, out.split())
    assert freed - before > 64 << 20  # kept although freed
    assert after - before < 16 << 20


_ARENAS_OF_EIGHT_THREADS = """
import ctypes, sys, tempfile, threading
from pointcast import heap

if sys.argv[1] != "default":
    heap.cap_arenas(int(sys.argv[1]))
hold = threading.Barrier(8)
kept = []

def work():  # a thread's first allocations below the mmap threshold take an arena
    kept.append([bytearray(4096) for _ in range(64)])
    hold.wait()  # all eight alive at once: none inherits a finished thread's arena

threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile("r") as out:
    stream = ctypes.c_void_p(libc.fopen(out.name.encode(), b"w"))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(out.read().count("<heap nr="))
"""


def _arenas(cap: str) -> int:
    return int(subprocess.run([sys.executable, "-c", _ARENAS_OF_EIGHT_THREADS, cap], capture_output=True,
                              text=True, check=True).stdout)


@pytest.mark.skipif(heap._MALLOPT is None, reason="no mallopt: not glibc")
def test_arenas_capped_however_many_threads_allocate():
    """Eight threads allocating at once get arenas of their own by default (glibc's limit is
    eight a core); capped, they share the cap's (the main arena counted)."""
    assert _arenas("default") > 2
    assert _arenas("2") == 2
    assert _arenas("1") == 1
