"""Stragglers: a planted slow rank is named first, with the kernel that makes it slow; per step the slowest
and fastest ranks; part + combine over single-rank traces equals the whole trace's result."""

from __future__ import annotations

import pytest
from fleet_traces import GEMM_NS, LAYOUT, SLOW_GEMM_NS, STEP_NS, STEPS, STRAGGLER, fleet_trace
from polars.testing import assert_frame_equal

from ktrace.analysis.stragglers import GPU_IDLE, combine_stragglers, stragglers, stragglers_part


def test_planted_straggler_is_named_first_with_its_kernels() -> None:
    s = stragglers(fleet_trace())
    assert s.basis == "steps"
    first = s.table.row(0, named=True)
    assert (first["node"], first["rank"]) == STRAGGLER
    # work = step - communication: 700 ns (the copy kernel runs beside the gemm) vs 300 for the others
    assert first["work_mean_ns"] == STEP_NS - (STEP_NS - SLOW_GEMM_NS)
    assert first["slower_pct"] == pytest.approx(100 * (SLOW_GEMM_NS / GEMM_NS - 1))
    assert first["slowest_steps"] == STEPS and first["steps"] == STEPS
    assert first["step_mean_ns"] == STEP_NS
    assert s.table["slower_pct"].to_list()[1:] == [0.0] * (len(LAYOUT) - 1)
    causes = s.causes.filter(node=STRAGGLER[0], rank=STRAGGLER[1])
    assert causes["name"].to_list() == ["gemm", "slow_copy_kernel"]
    assert causes["excess_ns_per_step"].to_list() == [SLOW_GEMM_NS - GEMM_NS, 100]
    assert causes["median_ns_per_step"].to_list() == [GEMM_NS, 0]
    assert first["causes"].startswith("gemm +400 ns/step; slow_copy_kernel +100 ns/step")
    assert s.causes.filter(rank=0).height == 0  # only ranks slower than the median get causes


def test_slowest_and_fastest_rank_of_every_step() -> None:
    per_step = stragglers(fleet_trace()).per_step
    assert per_step["step"].to_list() == list(range(STEPS))
    assert set(zip(per_step["slowest_node"], per_step["slowest_rank"], strict=True)) == {STRAGGLER}
    assert set(zip(per_step["fastest_node"], per_step["fastest_rank"], strict=True)) == {LAYOUT[0]}
    assert per_step["median_work_ns"].to_list() == [float(GEMM_NS)] * STEPS
    assert per_step["spread_pct"].to_list() == pytest.approx([100 * (SLOW_GEMM_NS - GEMM_NS) / GEMM_NS] * STEPS)


def test_without_steps_each_rank_span_is_one_step() -> None:
    s = stragglers(fleet_trace(steps=False))
    assert s.basis == "span"
    assert (s.table["node"][0], s.table["rank"][0]) == STRAGGLER
    assert s.per_step["step"].to_list() == [0]


def test_a_rank_idle_in_its_steps_shows_gpu_idle() -> None:
    from ktrace.model.builder import TraceBuilder

    whole = fleet_trace()
    b = TraceBuilder()
    for table in ("kernels", "ranges"):
        frame = whole.table(table)
        for (node, rank), part in frame.group_by("node", "rank", maintain_order=True):
            if (node, rank) == ("a", 1) and table == "kernels":
                part = part.filter(part["start_ns"] >= STEP_NS)  # no GPU work in its first step
            b.add(table, part.drop("node", "rank").to_arrow(), node=str(node), rank=int(rank))
    s = stragglers(b.build())
    row = s.table.filter(node="a", rank=1).row(0, named=True)
    assert row["work_mean_ns"] == pytest.approx((STEP_NS + 2 * GEMM_NS) / STEPS)
    assert GPU_IDLE in row["causes"]


def test_parts_of_single_rank_traces_combine_to_the_whole() -> None:
    parts = [stragglers_part(fleet_trace(layout=(key,))) for key in reversed(LAYOUT)]
    combined = combine_stragglers(parts)
    whole = stragglers(fleet_trace())
    assert_frame_equal(combined.table, whole.table)
    assert_frame_equal(combined.per_step, whole.per_step)
    assert_frame_equal(combined.causes, whole.causes)


def test_one_rank_has_no_causes() -> None:
    s = stragglers(fleet_trace(layout=(("a", 0),)))
    assert s.table.height == 1 and s.causes.height == 0 and s.table["slower_pct"][0] == 0.0


def test_fleet_job_straggler_is_found_although_every_rank_steps_alike() -> None:
    """ktrace.testing.fleet: 64 ranks on 8 hosts (clocks apart by up to 2 s), one rank computing 1.6x slower; the
    others wait for it inside their collectives, so every rank's step takes the same time and only work tells."""
    from ktrace.testing.fleet import FleetConfig, generate_fleet

    job = generate_fleet(FleetConfig())
    s = stragglers(job.trace)
    first = s.table.row(0, named=True)
    assert (first["node"], first["rank"]) == job.straggler
    assert first["slowest_steps"] == first["steps"] == FleetConfig().steps
    assert s.table["step_mean_ns"].max() / s.table["step_mean_ns"].min() < 1.001  # type: ignore[operator]
    assert first["slower_pct"] > 50 > s.table["slower_pct"][1]
    assert set(zip(s.per_step["slowest_node"], s.per_step["slowest_rank"], strict=True)) == {job.straggler}
    assert s.causes.filter(node=job.straggler[0], rank=job.straggler[1])["kind"].to_list() == ["kernel"] * 3


def test_a_sync_seen_twice_or_on_two_threads_at_once_is_waited_once() -> None:
    """A GPU sync record and its cudaStreamSynchronize call cover the same time, and a second thread's call overlaps
    them: the rank waited for the union of the spans (800 ns), not their sum (1,500 ns)."""
    from ktrace.analysis.stragglers import SYNC_WAIT
    from ktrace.model.builder import TraceBuilder

    whole = fleet_trace()
    b = TraceBuilder()
    for table in ("kernels", "ranges"):
        for (node, rank), part in whole.table(table).group_by("node", "rank", maintain_order=True):
            b.add(table, part.drop("node", "rank").to_arrow(), node=str(node), rank=int(rank))
    b.add("syncs", {"start_ns": [100], "end_ns": [600], "sync_type": ["stream"]}, node="a", rank=1)
    api = {"start_ns": [100, 400], "end_ns": [600, 900], "pid": [1, 1], "tid": [1, 2], "domain": ["runtime"] * 2}
    b.add("api", {**api, "name": ["cudaStreamSynchronize"] * 2}, node="a", rank=1)
    waits = stragglers_part(b.build()).waits.filter(node="a", rank=1, name=SYNC_WAIT)
    assert waits["wait_ns"].to_list() == [800]
