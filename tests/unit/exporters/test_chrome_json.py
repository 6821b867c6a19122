"""Chrome JSON export: parses, X events nest per thread, flows pair up inside slices, names for every thread."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ktrace.exporters import chrome_json
from ktrace.exporters.chrome_json import export_chrome_json
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, generate

Spans = dict[tuple[int, int], list[tuple[Decimal, Decimal]]]


def _nesting_problems(slices: Spans) -> list[str]:
    problems = []
    for (pid, tid), spans in slices.items():
        stack: list[Decimal] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            if stack and end > stack[-1]:
                problems.append(f"pid {pid} tid {tid}: X at {start} overlaps without nesting")
            stack.append(end)
    return problems


def _flow_problems(events: list[dict[str, Any]], slices: Spans) -> list[str]:
    problems = []
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    if set(starts) != set(ends):
        problems.append("flows without both ends")
    for fid, f in ends.items():
        s = starts.get(fid)
        if s is None or (s["cat"], s["name"]) != (f["cat"], f["name"]) or f.get("bp") != "e":
            problems.append(f"flow {fid}: s/f do not match or f lacks bp:e")
            continue
        if Decimal(str(f["ts"])) < Decimal(str(s["ts"])):
            problems.append(f"flow {fid}: f before s")
        for end_ev in (s, f):
            t = Decimal(str(end_ev["ts"]))
            if not any(a <= t <= b for a, b in slices[(end_ev["pid"], end_ev["tid"])]):
                problems.append(f"flow {fid}: {end_ev['ph']} not inside a slice on its thread")
    return problems


def check_chrome_trace(events: list[dict[str, Any]]) -> list[str]:
    """Problems per perfetto.md §3.3.4 (empty when the JSON is sound)."""
    problems: list[str] = []
    slices: Spans = defaultdict(list)
    named: set[tuple[int, int | None]] = set()
    for e in events:
        if e["ph"] == "X":
            ts, dur = Decimal(str(e["ts"])), Decimal(str(e["dur"]))
            slices[(e["pid"], e["tid"])].append((ts, ts + dur))
            if ts < 0:
                problems.append(f"negative relative ts {ts}")
        elif e["ph"] == "M" and e["name"] in ("process_name", "thread_name"):
            named.add((e["pid"], e.get("tid")))
    problems += [
        f"pid {pid} tid {tid} has no name" for pid, tid in slices if (pid, None) not in named or (pid, tid) not in named
    ]
    return problems + _nesting_problems(slices) + _flow_problems(events, slices)


def _load(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def test_synthetic_multi_rank_chrome_json_is_sound(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=20, ranks=2, seed=4))
    counts = export_chrome_json(trace, tmp_path / "t.json.gz")
    doc = _load(tmp_path / "t.json.gz")
    events = doc["traceEvents"]
    assert check_chrome_trace(events) == []
    assert counts["slices"] == sum(e["ph"] == "X" for e in events) > 0
    assert counts["flows"] == sum(e["ph"] == "s" for e in events) > 0
    assert counts["counters"] == trace.counters.height
    assert min(float(e["ts"]) for e in events if "ts" in e) == 0.0


def test_relative_times_are_exact_to_the_ns(tmp_path: Path, synthetic_trace: Trace) -> None:
    export_chrome_json(synthetic_trace, tmp_path / "t.json")
    text = (tmp_path / "t.json").read_text()
    doc = json.loads(text, parse_float=Decimal)
    t0 = doc["metadata"]["trace_start_ns"]
    first = synthetic_trace.kernels.sort("start_ns").row(0, named=True)
    kernel = next(
        e
        for e in doc["traceEvents"]
        if e["ph"] == "X" and e["cat"] == "kernel" and e["ts"] * 1000 == first["start_ns"] - t0
    )
    assert kernel["dur"] * 1000 == first["end_ns"] - first["start_ns"]


def test_detector_catches_a_bad_flow_and_an_overlap() -> None:
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "p"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "t"}},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
        {"ph": "s", "id": 1, "cat": "launch", "name": "launch", "pid": 1, "tid": 1, "ts": 3},
    ]
    problems = check_chrome_trace(events)
    assert any("overlaps" in p for p in problems) and any("both ends" in p for p in problems)


@pytest.mark.parametrize("name", ["alexnet", "dlrm", "power_iteration"])
def test_real_trace_chrome_json_is_sound(tmp_path: Path, name: str, real_trace_path: Callable[[str], Path]) -> None:
    import ktrace

    export_chrome_json(ktrace.open(real_trace_path(name)), tmp_path / "t.json")
    assert check_chrome_trace(_load(tmp_path / "t.json")["traceEvents"]) == []


def test_non_finite_counter_values_are_written_as_null(tmp_path: Path) -> None:
    from ktrace.model.builder import TraceBuilder

    b = TraceBuilder(node="n", rank=0)
    b.add(
        "counters",
        {
            "ts_ns": [1, 2, 3, 4],
            "metric": ["gpu.util"] * 4,
            "instance": [0] * 4,
            "value": [1.0, float("inf"), float("-inf"), float("nan")],
        },
    )
    export_chrome_json(b.build(), tmp_path / "c.json")

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} written")

    doc = json.loads((tmp_path / "c.json").read_text(), parse_constant=refuse)
    values = [e["args"]["value"] for e in doc["traceEvents"] if e.get("ph") == "C"]
    assert values == [1.0, None, None, None]


def test_chrome_json_export_does_not_load_protobuf(tmp_path: Path) -> None:
    """Chrome JSON needs no protobuf: only the Perfetto path loads it (a fresh interpreter, a whole export)."""
    code = (
        "import sys\n"
        "from ktrace.exporters.chrome_json import export_chrome_json\n"
        "from ktrace.testing import SyntheticConfig, generate\n"
        "trace = generate(SyntheticConfig(steps=2, kernels_per_step=5, ranks=2, seed=3))\n"
        f"export_chrome_json(trace, {str(tmp_path / 't.json')!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('google', 'perfetto')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert (tmp_path / "t.json").stat().st_size > 1000


def test_allocator_memory_is_a_counter_track(tmp_path: Path) -> None:
    """The allocator's memory timeline as C events, the same numbers as the Perfetto counter tracks."""
    from reference.memory_trace import EVENTS, memory_trace

    counts = export_chrome_json(memory_trace(), tmp_path / "t.json")
    events = _load(tmp_path / "t.json")["traceEvents"]
    assert check_chrome_trace(events) == []
    assert counts["counters"] == 2 * len(EVENTS)
    allocated = [int(e["args"]["value"]) for e in events if e["ph"] == "C" and e["name"] == "GPU 0 memory allocated"]
    assert allocated == [164, 464, 964, 664, 164, 364, 414, 350]


def test_lines_written_a_chunk_at_a_time_are_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank's event lines are made and written CHUNK_ROWS at a time (never the rank's lines as one string, ~3x
    their size in memory): any chunk size writes the bytes of the lines joined at once."""
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=40, streams=2, ranks=2))
    whole = tmp_path / "whole.json"
    export_chrome_json(trace, whole)
    monkeypatch.setattr(chrome_json, "CHUNK_ROWS", 7)
    chunked = tmp_path / "chunked.json"
    export_chrome_json(trace, chunked)
    assert chunked.read_bytes() == whole.read_bytes()
    assert len(json.loads(whole.read_text())["traceEvents"]) > 7 * 20
