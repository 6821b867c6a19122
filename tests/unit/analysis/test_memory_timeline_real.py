"""The memory timeline on the real traces with allocator events, against an independent reading of the file (plain
json, summing Bytes of the GPU `[memory]` events in time order)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ktrace
from ktrace.analysis.memory_timeline import memory_timeline


def _gpu_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    mem = [e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    return sorted(mem, key=lambda e: e["ts"])  # stable: ties keep file order, as the table does


@pytest.mark.parametrize("name", ["tracelens", "resnet50"])
def test_figures_match_a_plain_json_reading(name: str, real_trace_path: Callable[[str], Path]) -> None:
    path = real_trace_path(name)
    events = _gpu_events(path)
    m = memory_timeline(ktrace.open(path))
    assert m is not None and m.source == "allocator"
    row = m.per_device.row(0, named=True)
    sizes = [e["args"]["Bytes"] for e in events]
    assert row["allocations"] == sum(1 for b in sizes if b > 0)
    assert row["frees"] == sum(1 for b in sizes if b < 0)
    assert row["allocated_bytes"] == sum(b for b in sizes if b > 0)
    assert row["freed_bytes"] == -sum(b for b in sizes if b < 0)
    if "Total Allocated" in events[0]["args"]:  # PyTorch 2: the allocator's own totals
        totals = [e["args"]["Total Allocated"] for e in events]
        assert not m.running_sum and row["peak_allocated_bytes"] == max(totals)
        assert row["peak_reserved_bytes"] == events[totals.index(max(totals))]["args"]["Total Reserved"]
        live: dict[int, int] = {}  # address -> bytes of the block allocated there, until freed
        for e in events:
            a = e["args"]
            if a["Bytes"] > 0:
                live[a["Addr"]] = a["Bytes"]
            else:
                live.pop(a["Addr"], None)
        assert (row["never_freed"], row["never_freed_bytes"]) == (len(live), sum(live.values()))
    else:  # PyTorch 1.9: a running sum of Bytes from the trace start
        running, peak = 0, 0
        for b in sizes:
            running += b
            peak = max(peak, running)
        assert m.running_sum and row["peak_allocated_bytes"] == peak and row["end_allocated_bytes"] == running
