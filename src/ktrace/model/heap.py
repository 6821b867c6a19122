"""Give the C heap's free pages back to the operating system once a big import's intermediates are gone.

glibc's malloc keeps the pages of freed small blocks inside its heap, and an import frees a lot of them: the decoded
events of each slice, the per-slice Arrow columns, the gunzip thread's blocks (in that thread's arena). On the tiled
real traces ~70 MB stayed resident after the Kineto import for ~25 MB of tables, and every analysis ran on top of it.
`malloc_trim(0)` returns those pages in a few milliseconds. Elsewhere (macOS, musl) there is nothing to call.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library this process already uses
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return the C heap's free pages to the operating system; True if some were returned (glibc only)."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
