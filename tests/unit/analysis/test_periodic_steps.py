"""Inferred (periodic) steps need confidence, and every view says they are inferred (issue #17, wrong numbers 6).

The periodic fallback used to take the most regular kernel with 3 runs or more: on owlv2 (one inference step that
runs the model five times) it found steps, on the alexnet and simple_add traces it made 3 "steps" of 0.8, 11 and
89 ms. Inferred steps must now repeat PERIODIC_MIN_STEPS times with intervals within PERIODIC_MAX_CV, and cover
PERIODIC_MIN_COVER of the rank's kernel span.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from real_traces import fixture_path
from rich.console import Console

import ktrace
from ktrace.analysis import steps
from ktrace.analysis.phases import job_phases
from ktrace.analysis.summary import Summary, summarize
from ktrace.model import TraceBuilder
from ktrace.model.trace import Trace
from ktrace.presentation.summary_json import summary_to_dict
from ktrace.report.terminal import render_summary


def _rendered(summary: Summary) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    render_summary(summary, console)
    return console.export_text()


LOOP = ("embed", "gemm", "relu", "gemm_bwd", "sgd")


def loop_trace(iterations: int, jitter: float = 0.02, init_ns: int = 0, seed: int = 0) -> Trace:
    """A loop of `iterations` iterations of ~1 ms, each the kernels of LOOP; iteration lengths vary by up to
    ±`jitter`; an `init_ns` long initialization kernel first."""
    rng = np.random.default_rng(seed)
    starts: list[int] = []
    names: list[str] = []
    t = init_ns
    if init_ns:
        starts.append(0)
        names.append("init")
    for _ in range(iterations):
        length = int(1_000_000 * (1 + rng.uniform(-jitter, jitter)))
        for j, name in enumerate(LOOP):
            starts.append(t + j * length // len(LOOP))
            names.append(name)
        t += length
    ends = [s + 100_000 for s in starts]
    if init_ns:
        ends[0] = init_ns - 1
    b = TraceBuilder()
    n = len(starts)
    b.add("kernels", {"start_ns": starts, "end_ns": ends, "device": [0] * n, "stream": [7] * n, "name": names})
    return b.build()


def test_a_regular_loop_is_found() -> None:
    s = steps.detect_steps(loop_trace(20))
    assert s.height == 19 and set(s["source"]) == {"periodic"}  # 20 runs of the marker: 19 intervals
    assert job_phases(loop_trace(20)).step_source == "periodic"


@pytest.mark.parametrize(
    ("trace", "why"),
    [
        (loop_trace(5), "too few repetitions (5 runs, 4 intervals; PERIODIC_MIN_STEPS is 5)"),
        (loop_trace(20, jitter=0.6), "intervals too irregular"),
        (loop_trace(20, init_ns=60_000_000), "the loop covers a quarter of the span"),
    ],
)
def test_an_unconvincing_period_gives_no_steps(trace: Trace, why: str) -> None:
    assert steps.detect_steps(trace).height == 0, why
    assert job_phases(trace).step_source == "none"


def test_the_smallest_convincing_loop_is_found() -> None:
    assert steps.detect_steps(loop_trace(steps.PERIODIC_MIN_STEPS + 1)).height == steps.PERIODIC_MIN_STEPS


@pytest.mark.parametrize("name", ["tracelens", "alexnet", "simple_add", "event_sync_multi_stream"])
def test_no_periodic_steps_in_traces_without_a_loop(name: str) -> None:
    """owlv2 is one inference step (the model runs five times in it); the other three have no loop of steps."""
    assert steps.detect_steps(ktrace.open(fixture_path(name)), source="periodic").height == 0


def test_owlv2_has_its_one_profiler_step() -> None:
    s = steps.detect_steps(ktrace.open(fixture_path("tracelens")))
    assert s["source"].to_list() == ["profiler_step"]


def test_a_real_loop_is_found() -> None:
    """power_iteration runs 44 iterations of the same cupy kernels (no step ranges in the nsys export)."""
    s = steps.detect_steps(ktrace.open(fixture_path("power_iteration")))
    assert s.height == 43 and set(s["source"]) == {"periodic"}


def test_views_say_steps_are_inferred() -> None:
    trace = loop_trace(20)
    summary = summarize(trace)
    as_json = summary_to_dict(summary)
    assert as_json["phases"]["step_source"] == "periodic"
    json.dumps(as_json)
    text = _rendered(summary)
    assert "steps 19 (inferred from a periodic kernel)" in text


def test_recorded_steps_are_not_called_inferred() -> None:
    b = TraceBuilder()
    b.add(
        "ranges",
        {
            "start_ns": [0, 100],
            "end_ns": [100, 200],
            "pid": [1, 1],
            "tid": [1, 1],
            "name": ["ProfilerStep#1", "ProfilerStep#2"],
            "domain": ["profiler_step"] * 2,
            "depth": [0, 0],
            "on_gpu": [False, False],
        },
    )
    b.add(
        "kernels", {"start_ns": [10, 110], "end_ns": [20, 120], "device": [0, 0], "stream": [7, 7], "name": ["k", "k"]}
    )
    summary = summarize(b.build())
    assert summary.phases.step_source == "profiler_step" and not summary.phases.steps_inferred
    assert "inferred" not in _rendered(summary)
