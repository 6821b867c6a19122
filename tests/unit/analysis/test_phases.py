"""Job phases (initialization / training loop / finalization) from step ranges."""

from __future__ import annotations

import pytest

from ktrace.analysis.phases import job_phases, step_spans
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace


def _trace(step_names: list[str]) -> Trace:
    b = TraceBuilder("n", 0)
    b.add(
        "api", {"start_ns": [0], "end_ns": [10], "pid": [1], "tid": [1], "domain": ["runtime"], "name": ["cudaMalloc"]}
    )
    n = len(step_names)
    b.add(
        "ranges",
        {
            "start_ns": [100 + 200 * i for i in range(n)],
            "end_ns": [290 + 200 * i for i in range(n)],
            "pid": [1] * n,
            "tid": [1] * n,
            "name": step_names,
            "domain": ["ktrace"] * n,
            "depth": [0] * n,
            "on_gpu": [False] * n,
        },
    )
    b.add("kernels", {"start_ns": [900], "end_ns": [1000], "device": [0], "name": ["k"]})
    return b.build()


def test_phases_follow_sagemaker_definitions() -> None:
    p = job_phases(_trace(["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]))
    # job 0..1000; steps 100..690
    assert (p.start_ns, p.end_ns, p.steps) == (0, 1000, 3)
    assert (p.init_ns, p.training_ns, p.finalize_ns) == (100, 590, 310)
    assert p.init_pct + p.training_pct + p.finalize_pct == pytest.approx(100.0)


def test_custom_pattern_and_no_steps() -> None:
    t = _trace(["phase_a", "phase_b"])
    assert job_phases(t).steps == 0 and job_phases(t).training_ns == 1000
    assert job_phases(t, pattern=r"^phase_\w$").init_ns == 100
    spans = step_spans(t, pattern=r"^phase_\w$")
    assert spans["step"].to_list() == [0, 1]


def test_empty_trace() -> None:
    assert job_phases(TraceBuilder().build()).duration_ns == 0


def test_one_step_counter_for_every_view() -> None:
    """Issue #17: the 8-rank DLRM job (1 step on each rank) read "steps 8" in the report and "1 steps" in the TUI.
    Steps are counted per rank everywhere, and the terminal says so."""
    import io

    from real_traces import fixture_path
    from rich.console import Console

    import ktrace
    from ktrace.analysis.summary import summarize
    from ktrace.report.terminal import render_summary
    from ktrace.tui.steps import step_spans as tui_step_spans

    trace = ktrace.open(fixture_path("dlrm"))
    summary = summarize(trace)
    assert summary.phases.steps == 1 == len(tui_step_spans(trace))
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=200))
    assert "steps 1 per rank" in out.getvalue()


def test_steps_per_rank_is_the_most_any_rank_has() -> None:
    """The TUI's step keys walk the first rank's steps; its count is the same one as the summary's, even when the
    first rank has fewer steps (its profiler window cut short)."""
    import polars as pl

    from ktrace.analysis.phases import steps_per_rank

    steps = pl.DataFrame({"node": ["a", "a", "a", "b"], "rank": [0, 1, 1, 2], "start_ns": [0, 0, 5, 0]})
    assert steps_per_rank(steps) == 2
    assert steps_per_rank(steps.head(0)) == 0
