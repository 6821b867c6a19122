"""release_free_memory: the C heap's free pages go back to the OS after an import (glibc), nothing elsewhere;
one_arena: threads started after it allocate from the main heap."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ktrace.importers import kineto
from ktrace.model import heap


def _rss_anon_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_free_heap_pages_are_returned() -> None:
    assert heap._glibc("malloc_trim", ctypes.c_size_t) is not None
    # 40 MB of 1 KB blocks (malloc'd, below the mmap threshold), then free all but every 64th: the survivors pin the
    # heap's top, so glibc keeps the freed pages until malloc_trim hands them back.
    blocks = [bytearray(1024) for _ in range(40_000)]
    keep = blocks[::64]
    del blocks
    before = _rss_anon_kb()
    assert heap.release_free_memory()
    assert _rss_anon_kb() < before - 10_000
    assert len(keep) == 625


def test_each_imported_file_releases_its_intermediates(
    real_trace_path: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(kineto, "release_memory", lambda: calls.append(1))
    kineto.import_kineto(real_trace_path("alexnet"))
    per_file = len(calls)  # after the tables are built (the slices, the µs columns) and after the file
    assert per_file == 2
    kineto.import_kineto(real_trace_path("dlrm"))  # a folder of 8 rank files: as often after each
    assert len(calls) == per_file * (1 + 8)


_ARENAS = """
import ctypes, sys, threading
from ktrace.model import heap
if sys.argv[1] == "one":
    assert heap.one_arena()
def allocate():
    global kept
    kept = [bytearray(512) for _ in range(2000)]  # small blocks: from the thread's arena, not mappings of their own
thread = threading.Thread(target=allocate)
thread.start()
thread.join()
ctypes.CDLL(None).malloc_stats()  # each arena's figures, on stderr
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="M_ARENA_MAX is glibc's")
@pytest.mark.parametrize(("setting", "arenas"), [("default", 2), ("one", 1)])
def test_one_arena_keeps_new_threads_on_the_main_heap(setting: str, arenas: int) -> None:
    found = subprocess.run([sys.executable, "-c", _ARENAS, setting], capture_output=True, text=True, check=True)
    assert found.stderr.count("Arena ") == arenas, found.stderr
