"""benchmarks/memory_split.py's readings of this process's memory, and the big-trace benchmarks' tiled input
(benchmarks/tile_kineto.tiled_copy: a .json.gz that is gzip, as big_trace.count_events reads it)."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def benchmarks() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import big_trace
        import memory_split
        import tile_kineto

        yield {"memory_split": memory_split, "tile_kineto": tile_kineto, "big_trace": big_trace}
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_resident_memory_splits_into_anonymous_and_file_pages(benchmarks: dict[str, ModuleType]) -> None:
    split = benchmarks["memory_split"]
    mb = split.status_mb()
    assert mb["RssAnon"] > 0 and mb["RssFile"] > 0
    assert mb["RssAnon"] + mb["RssFile"] <= mb["VmRSS"] + 1  # (+ shared memory pages, if any)
    held = bytearray(64 * 2**20)  # 64 MiB written: anonymous pages
    assert split.status_mb()["RssAnon"] - mb["RssAnon"] >= 60
    del held
    code = split.code_pages_mb()
    assert set(code) == set(split.CODE_FILES) and all(v >= 0 for v in code.values())


def test_the_tiled_trace_is_gzip_and_counted(benchmarks: dict[str, ModuleType], tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "Kernel", "name": "k", "ts": 20, "dur": 5, "args": {"correlation": 7}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "ts": 15, "dur": 2, "args": {"correlation": 7}},
    ]
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    tiled = benchmarks["tile_kineto"].tiled_copy(src, 4, tmp_path / "work")
    assert tiled.name == "t_x4.json.gz" and tiled.read_bytes()[:2] == b"\x1f\x8b"  # gzip magic
    assert json.loads(gzip.decompress(tiled.read_bytes()))["traceEvents"]
    assert benchmarks["big_trace"].count_events(tiled) == 1 + 2 * 4  # the profiler span once, the rest per copy
