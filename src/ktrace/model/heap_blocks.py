"""Large C heap blocks straight from the operating system, so that a freed array's pages go back when it is freed.

glibc's malloc serves a block above M_MMAP_THRESHOLD (128 KiB) from a mapping of its own and unmaps it on free, but
it raises that threshold to the size of every such block freed (up to 32 MiB on 64-bit): once an analysis has freed
a 15 MB numpy array, every later array up to that size comes from the heap, and the heap's free pages stay resident
until `malloc_trim` (model.heap), and only where no live block sits above them. Summarizing the 20 M-event owlv2
x150 store held ~240 MB of such pages at its peak (whole command: 2,611 -> 2,375 MB with the threshold fixed).
Setting the threshold (mallopt) turns the raising off for the rest of the process; polars and Arrow allocate
through their own jemalloc and are not affected. Elsewhere (macOS, musl) nothing is called.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable

M_MMAP_THRESHOLD = -3
"""mallopt's parameter number for the mmap threshold (glibc's malloc.h)."""
LARGE_BLOCK_BYTES = 256 * 1024
"""Blocks of this size and above are mapped on their own: numpy arrays of more than 32 k int64."""


@functools.cache
def _mallopt() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already uses
    except (OSError, AttributeError):  # not glibc
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def map_large_blocks(nbytes: int = LARGE_BLOCK_BYTES) -> bool:
    """From now on, serve every C heap block of `nbytes` or more from its own mapping, returned to the operating
    system when freed (glibc only: True if the setting took)."""
    mallopt = _mallopt()
    return bool(mallopt(M_MMAP_THRESHOLD, nbytes)) if mallopt is not None else False
