"""Step inference never marks steps with a collective, nor inside an annotated step (issue 26, item 3).

A vLLM trace with one annotated step of 87.4 ms got 17 "periodic" steps of 3.83 ms, and the step table and the
critical path used them: the marker was the custom all-reduce that runs once per decoded token.
step_traces.decode_step writes such a step: a ProfilerStep holding 22 iterations of a compute kernel and an
all-reduce 3.83 ms apart.
"""

from __future__ import annotations

import pytest
from step_traces import NCCL, DecodeStep, decode_step

from ktrace.analysis.critical_path import critical_path
from ktrace.analysis.steps import detect_steps, step_stats

IRREGULAR = 1_000_000
"""Every other compute kernel 1 ms late: only the all-reduce keeps a period."""


@pytest.mark.parametrize(
    "step",
    [
        DecodeStep(jitter_ns=IRREGULAR),
        DecodeStep(jitter_ns=IRREGULAR, all_reduce=NCCL, nccl_args=True),
        DecodeStep(jitter_ns=IRREGULAR, all_reduce="my_all_reduce_kernel", nccl_args=True),
    ],
    ids=["vllm-custom-all-reduce", "nccl", "collective-args"],
)
def test_a_collective_never_marks_steps(step: DecodeStep) -> None:
    assert detect_steps(decode_step(step, with_range=False)).height == 0


def test_a_regular_compute_kernel_still_marks_steps_without_a_range() -> None:
    found = detect_steps(decode_step(with_range=False))
    assert set(found["source"]) == {"periodic"} and set(found["name"]) == {"decode_gemm"}
    assert found.height == DecodeStep().tokens - 1


@pytest.mark.parametrize(
    "step",
    [
        DecodeStep(),
        DecodeStep(outside=10),
        DecodeStep(step_name="train_step", domain="user_annotation"),
        DecodeStep(step_name="iteration 3", domain="nvtx", all_reduce=NCCL, nccl_args=True),
        DecodeStep(step_name="ProfilerStep#4 (graph)", domain="profiler_step"),
    ],
    ids=["profiler-step", "iterations-after-it", "user-step", "nvtx-step", "profiler-step-domain"],
)
def test_the_annotated_step_wins_and_nothing_is_inferred_inside_it(step: DecodeStep) -> None:
    trace = decode_step(step)
    assert detect_steps(trace, source="periodic").height == 0
    found = detect_steps(trace)
    if step.step_name != "ProfilerStep#4 (graph)":  # a range of the profiler_step domain is no step by its name
        assert found["name"].to_list() == [step.step_name] and found["duration_ns"].to_list() == [step.step_ns]
    stats = step_stats(trace)
    assert stats["steps"].to_list() == ([1] if found.height else [])
    cp = critical_path(trace)
    assert cp is not None
    assert cp.scope == ("step" if found.height else "trace") and "periodic" not in cp.label
    assert cp.label == (f"{step.step_name} (the only step)" if found.height else "whole trace")
    assert "decode_gemm" not in cp.label and "reduce" not in cp.label
