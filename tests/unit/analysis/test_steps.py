"""steps: detection, stats, outliers, attribution to steps and annotations (hand-computed answers)."""

from __future__ import annotations

import polars as pl
import pytest
from reference.handbuilt_trace import handbuilt_trace, two_rank_trace

from ktrace.analysis import steps
from ktrace.model import TraceBuilder
from ktrace.testing import SyntheticConfig, generate


def test_profiler_steps_detected() -> None:
    s = steps.detect_steps(handbuilt_trace())
    assert s.select("step", "start_ns", "end_ns", "duration_ns", "source").rows() == [
        (5, 0, 100, 100, "profiler_step"),
        (6, 100, 500, 400, "profiler_step"),
    ]


def _annotated(names: list[str]) -> TraceBuilder:
    b = TraceBuilder()
    n = len(names)
    b.add(
        "ranges",
        {
            "start_ns": [i * 100 for i in range(n)],
            "end_ns": [i * 100 + 90 for i in range(n)],
            "pid": [1] * n,
            "tid": [1] * n,
            "name": names,
            "domain": ["nvtx"] * n,
            "depth": [0] * n,
            "on_gpu": [False] * n,
        },
    )
    return b


def test_annotation_steps_with_default_pattern() -> None:
    t = _annotated(["step 3", "optimizer.step", "step 4", "train_step"]).build()
    s = steps.detect_steps(t)
    assert s.select("name", "step", "source").rows() == [
        ("step 3", 3, "annotation"),
        ("step 4", 4, "annotation"),
        ("train_step", 2, "annotation"),
    ]


def test_annotation_steps_with_custom_pattern() -> None:
    t = _annotated(["iterA", "fwd", "iterB"]).build()
    s = steps.detect_steps(t, pattern=r"^iter[AB]$")
    assert s.select("name", "step").rows() == [("iterA", 0), ("iterB", 1)]
    assert steps.detect_steps(t, source="profiler_step").height == 0


def test_periodic_fallback_picks_the_regular_kernel() -> None:
    b = TraceBuilder()
    starts = [0, 1000, 2000, 3000, 4000, 5000, 5, 17, 1500, 2600, 2900, 4100, 4200, 4950]
    names = ["marker"] * 6 + ["noise"] * 8
    b.add(
        "kernels",
        {"start_ns": starts, "end_ns": [s + 1 for s in starts], "device": [0] * 14, "stream": [7] * 14, "name": names},
    )
    s = steps.detect_steps(b.build())
    assert s.select("start_ns", "end_ns", "source").rows() == [(i * 1000, (i + 1) * 1000, "periodic") for i in range(5)]


def test_step_stats_and_histogram() -> None:
    st = steps.step_stats(handbuilt_trace()).row(0, named=True)
    assert (st["steps"], st["total_ns"], st["mean_ns"], st["min_ns"], st["max_ns"], st["p50_ns"]) == (
        2,
        500,
        250.0,
        100.0,
        400.0,
        250.0,
    )
    h = steps.step_histogram(handbuilt_trace(), bins=3)
    assert h["count"].to_list() == [1, 0, 1] and h["bin_start_ns"][0] == 100.0


def test_step_outliers_sagemaker_rule() -> None:
    durations = [100] * 20 + [1000]
    s = pl.DataFrame({"node": ["n"] * 21, "rank": [0] * 21, "step": list(range(21)), "duration_ns": durations})
    o = steps.step_outliers(TraceBuilder().build(), s, stddev=3.0)
    assert o.filter(pl.col("is_outlier"))["step"].to_list() == [20]
    v = steps.step_outlier_verdict(TraceBuilder().build(), s, stddev=3.0, n_outliers=0)
    assert (v.steps, v.outliers, v.triggered, v.worst_step) == (21, 1, True, 20)
    assert not steps.step_outlier_verdict(TraceBuilder().build(), s).triggered


def test_attribute_kernels_by_hand() -> None:
    a = steps.attribute_kernels(handbuilt_trace())
    got = a.select("kind", "correlation_id", "step", "annotation", "annotation_depth").sort("correlation_id").rows()
    # launches: corr 1 at 10 (forward), 2 at 30 (inner), 3 at 50 (no annotation), 4 at 380 (step 6), 5 at 45
    assert got == [
        ("kernel", 1, 5, "forward", 1),
        ("kernel", 2, 5, "inner", 2),
        ("kernel", 3, 5, None, None),
        ("memcpy", 4, 6, None, None),
        ("kernel", 5, 5, None, None),
    ]


def test_attribute_kernels_gpu_annotations_and_ranks() -> None:
    t = two_rank_trace()
    b = TraceBuilder("n1", 1)
    for name in ("kernels", "memory", "api", "ranges"):
        b.add(name, t.to_arrow(name))
    b.add(
        "ranges",
        {
            "start_ns": [1240],
            "end_ns": [1310],
            "pid": [0],
            "tid": [0],
            "name": ["gpu_fwd"],
            "domain": ["gpu_user_annotation"],
            "depth": [0],
            "on_gpu": [True],
            "device": [0],
            "stream": [7],
        },
    )
    a = steps.attribute_kernels(b.build())
    assert a.filter(pl.col("gpu_annotation") == "gpu_fwd").select("rank", "correlation_id").rows() == [(1, 2)]
    assert a.group_by("rank").len().sort("rank")["len"].to_list() == [5, 5]


def test_synthetic_trace_every_kernel_in_a_step() -> None:
    t = generate(SyntheticConfig(steps=4, kernels_per_step=30, ranks=2, seed=5))
    a = steps.attribute_kernels(t).filter(pl.col("kind") == "kernel")
    assert a.height == t.kernels.height and a["step"].null_count() == 0
    assert set(a["annotation"].unique().to_list()) <= {"forward", "backward", "optimizer.step", None}


@pytest.mark.parametrize("fn", [steps.detect_steps, steps.step_stats, steps.step_outliers, steps.attribute_kernels])
def test_empty_trace(fn) -> None:  # type: ignore[no-untyped-def]
    assert fn(TraceBuilder().build()).height == 0
