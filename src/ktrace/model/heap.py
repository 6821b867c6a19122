"""The C heap's free pages handed back to the operating system: once a big import's intermediates are gone
(`release_free_memory`), and as they are freed while a big trace is summarized (`map_large_blocks`).

glibc's malloc keeps the pages of freed small blocks inside its heap, and an import frees a lot of them: the decoded
events of each slice, the per-slice Arrow columns, the gunzip thread's blocks (in that thread's arena). On the tiled
real traces ~70 MB stayed resident after the Kineto import for ~25 MB of tables, and every analysis ran on top of it.
`malloc_trim(0)` returns those pages in a few milliseconds.

glibc serves a block above M_MMAP_THRESHOLD (128 KiB) from a mapping of its own and unmaps it on free, but it raises
that threshold to the size of every such block freed (up to 32 MiB on 64-bit): once an analysis has freed a 15 MB
numpy array, every later array up to that size comes from the heap, and the heap's free pages stay resident until
`malloc_trim`, and only where no live block sits above them. Summarizing the 20 M-event owlv2 x150 store held
~240 MB of such pages at its peak (whole command: 2,611 -> 2,375 MB with the threshold fixed). Setting the threshold
(mallopt) turns the raising off for the rest of the process; polars and Arrow allocate through their own jemalloc and
are not affected. Elsewhere (macOS, musl) there is nothing to call.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from typing import Any

M_MMAP_THRESHOLD = -3
"""mallopt's parameter number for the mmap threshold (glibc's malloc.h)."""
M_ARENA_MAX = -8
"""mallopt's parameter number for the most arenas (glibc's malloc.h)."""
LARGE_BLOCK_BYTES = 256 * 1024
"""Blocks of this size and above are mapped on their own: numpy arrays of more than 32 k int64."""


@functools.cache
def _glibc(name: str, *argtypes: Any) -> Callable[..., int] | None:
    """`name` from the C library this process already uses, returning a C int; None off Linux or off glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):  # not glibc
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function


def release_free_memory() -> bool:
    """Return the C heap's free pages to the operating system; True if some were returned (glibc only)."""
    trim = _glibc("malloc_trim", ctypes.c_size_t)
    return bool(trim(0)) if trim is not None else False


def map_large_blocks(nbytes: int = LARGE_BLOCK_BYTES) -> bool:
    """From now on, serve every C heap block of `nbytes` or more from its own mapping, returned to the operating
    system when freed (glibc only: True if the setting took)."""
    mallopt = _glibc("mallopt", ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, nbytes)) if mallopt is not None else False


def one_arena() -> bool:
    """From now on, threads that start allocate from the main C heap instead of an arena of their own (glibc only:
    True if the setting took; threads that allocated already keep theirs).

    glibc gives each thread that allocates an arena (up to 8 a core), and a block freed in one arena serves only
    that arena's threads: the rank-by-rank summary's client joins the job's critical-path graph in a thread while its
    reduce finishes in the main one, and the two arenas' free pages added up to ~20 MB of its peak (256 ranks: 494-504
    MB, 476-477 with one arena, the same wall time). Not for a process whose threads allocate at once and often
    (Parquet readers): they would queue on the one heap's lock."""
    mallopt = _glibc("mallopt", ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_ARENA_MAX, 1)) if mallopt is not None else False
