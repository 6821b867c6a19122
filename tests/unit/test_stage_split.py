"""benchmarks/stage_split.py's pure helpers: which traces of issue 29 it finds, what it sums as the command's
stages, the floor, and its one line per trace."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


@pytest.fixture(scope="module")
def stage_split() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import stage_split

        yield stage_split
    finally:
        sys.path.remove(str(BENCHMARKS))


def _split(module: ModuleType, *, workers: bool, spills: bool = False, numba: bool = True):  # type: ignore[no-untyped-def]
    stages = [
        ("start", 0.02, 0.02),
        ("imports", 0.3, 0.3),
        ("import numba", 0.2, 0.2),
        ("inflate", 0.4, 0.4),
        ("decode (msgspec)", 1.0, 1.0),
        ("columns (EventSink.add)", 0.5, 0.5),
        ("table build", 0.25, 0.25),
        ("scrub", 0.05, 0.05),
        ("store write", 0.7, 0.7),
        ("store read", 0.3, 0.3),
        ("render", 0.03, 0.03),
    ]
    if workers:
        stages.insert(6, ("decode + columns in workers", 0.9, 1.75))
    sections = [("latency_stats", 0.2, 0.2), ("critical_path", 0.5, 0.5), ("roofline", 0.1, 0.1), ("x", 0.0, 0.0)]
    facts = {"floor_s": 0.8, "msgspec_mb_per_cpu_s": 410.0, "cores": 2, "spills": spills, "numba_used": numba}
    facts.update({"workers": 2} if workers else {})
    return module.Split(stages, sections, facts)


def test_the_real_traces_of_the_issue_are_found_and_the_missing_one_named(stage_split: ModuleType) -> None:
    found, missing = stage_split.issue_traces(FIXTURES)
    assert [short for short, _, _ in found] == ["nccl", "resnet50", "owlv2"]
    assert missing == ["cuda-graph A100"]
    for _, path, events in found:
        stats = json.loads((path.parent / "STATS.json").read_text())
        assert path.is_file() and events == stats[path.name]["n_events"] > 40_000


def test_an_empty_folder_finds_nothing(stage_split: ModuleType, tmp_path: Path) -> None:
    assert stage_split.issue_traces(tmp_path) == ([], ["nccl", "resnet50", "owlv2", "cuda-graph A100"])


def test_the_command_decodes_in_its_workers_when_it_has_them_else_in_one_process(stage_split: ModuleType) -> None:
    assert stage_split.decode_seconds(_split(stage_split, workers=True)) == pytest.approx(0.9)
    assert stage_split.decode_seconds(_split(stage_split, workers=False)) == pytest.approx(1.5)
    assert stage_split.decode_seconds(_split(stage_split, workers=True), cpu=True) == pytest.approx(1.75)


def test_the_commands_stages_leave_the_store_and_numba_out_unless_it_pays_them(stage_split: ModuleType) -> None:
    fixed = 0.02 + 0.3 + 0.4 + 0.25 + 0.05 + 0.03
    analyses, numba = 0.8, 0.2
    assert stage_split.command_seconds(_split(stage_split, workers=True)) == pytest.approx(
        fixed + numba + 0.9 + analyses
    )
    spilled = _split(stage_split, workers=True, spills=True)
    assert stage_split.command_seconds(spilled) == pytest.approx(fixed + numba + 0.9 + analyses + 1.0)
    small = _split(stage_split, workers=False, numba=False)
    assert stage_split.command_seconds(small) == pytest.approx(fixed + 1.5 + analyses)
    assert stage_split.command_seconds(_split(stage_split, workers=True), cpu=True) == pytest.approx(
        fixed + numba + 1.75 + analyses
    )
    assert "(numba not loaded)" in stage_split.summary_line("t", 1, 1.0, small)


def test_the_floor_is_the_start_and_imports_plus_the_decode_over_the_cores(stage_split: ModuleType) -> None:
    assert stage_split.floor_seconds(0.05, 0.35, 800_000_000, 400e6, 2) == pytest.approx(1.4)
    assert stage_split.floor_seconds(0.05, 0.35, 800_000_000, 400e6, 0) == pytest.approx(2.4)  # (one core at least)


def test_one_line_per_trace_names_each_stage_and_the_ratio_to_the_floor(stage_split: ModuleType) -> None:
    line = stage_split.summary_line("owlv2 x10", 1_321_520, 3.2, _split(stage_split, workers=True))
    assert "\n" not in line
    assert line.startswith(
        "stage_split: owlv2 x10 1,321,520 events: command 3.20 s, stages 2.95 s (3.8 CPU s) = start 0.02"
    )
    assert "imports 0.30 + numba 0.20 + inflate 0.40" in line
    assert "decode and columns 0.90" in line and "build 0.30" in line and "render 0.03" in line
    assert "analyses 0.80 (critical_path 0.50, latency_stats 0.20, roofline 0.10)" in line
    assert line.endswith("floor 0.80 s (msgspec 410 MB/CPU s x 2 cores): command 4.0x floor")
    assert "spills" in stage_split.summary_line("t", 1, 1.0, _split(stage_split, workers=False, spills=True))


@pytest.fixture(scope="module")
def sections_module(stage_split: ModuleType) -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import stage_split_sections

        yield stage_split_sections
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_the_hook_times_every_section_of_summarize_one_at_a_time_and_changes_nothing(
    sections_module: ModuleType,
) -> None:
    import threading

    from ktrace.analysis import summary as module
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_json import summary_to_dict
    from ktrace.testing import SyntheticConfig, generate

    trace = generate(SyntheticConfig(steps=3, kernels_per_step=40))
    before = dict(vars(module))
    rows: list[tuple[str, float, float]] = []
    threads: set[str] = set()

    @contextmanager
    def timed(name: str) -> Iterator[None]:
        threads.add(threading.current_thread().name)
        yield
        rows.append((name, 1.0, 0.5))

    with sections_module.sections_timed(timed):
        hooked = summarize(trace)
    assert vars(module) == before  # (restored)
    assert summary_to_dict(hooked) == summary_to_dict(summarize(trace))
    names = [name for name, _, _ in sections_module.totals(rows)]
    assert names[:3] == ["latency_stats", "device_idle_breakdown", "critical_path"]  # summarize's order
    assert {"kernel_stats", "memory_timeline", "roofline", "top_kernels", "busy_time"} <= set(names)
    assert threads == {threading.current_thread().name}  # no section ran in the pool's threads
    assert dict((n, (w, c)) for n, w, c in sections_module.totals(rows))["top_kernels"] == (2.0, 1.0)  # called twice


def test_the_inline_executor_hands_back_results_and_exceptions_like_a_pool(sections_module: ModuleType) -> None:
    with sections_module.InlineExecutor(max_workers=2) as pool:
        assert pool.submit(divmod, 7, 2).result() == (3, 1)
        failed = pool.submit(divmod, 1, 0)
    with pytest.raises(ZeroDivisionError):
        failed.result()


def test_a_tile_repeats_every_event_but_the_once_ones_pytorch_1_9_memory_events_included(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from tile_kineto import tile
    finally:
        sys.path.remove(str(BENCHMARKS))
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "ts": 0, "dur": 100},
        {"ph": "i", "name": "Record Window End", "ts": 100},
        {"ph": "i", "name": "[memory]", "ts": 10, "pid": 1, "tid": 1, "args": {"Bytes": 512, "Addr": 1}},
        {"ph": "X", "cat": "Kernel", "name": "k", "ts": 20, "dur": 5, "args": {"correlation": 7}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "ts": 15, "dur": 2, "args": {"correlation": 7}},
    ]
    src, out = tmp_path / "t.json", tmp_path / "t_x3.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    assert tile(src, out, 3) == 3 + 3 * 3
    tiled = json.loads(out.read_text())["traceEvents"]
    memory = [e for e in tiled if e["name"] == "[memory]"]
    assert [e["ts"] for e in memory] == [10, 1110, 2210]  # each copy shifted by the span (100 us) + 1 ms
    assert sum(e["name"] == "Record Window End" for e in tiled) == 1
    assert sorted(e["args"]["correlation"] for e in tiled if e.get("cat") == "Kernel") == [7, 15, 23]
