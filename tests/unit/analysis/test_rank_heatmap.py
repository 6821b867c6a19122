"""Rank x time and rank x step heatmaps: known shares on a hand-built 4-rank, 2-host trace; part + combine
over single-rank traces equals the whole trace's heatmap."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from fleet_traces import GEMM_NS, LAYOUT, SLOW_GEMM_NS, STEP_NS, STEPS, STRAGGLER, fleet_trace
from polars.testing import assert_frame_equal

from ktrace.analysis.rank_activity import MAX_TIME_BINS, HeatmapBins, gpu_bins
from ktrace.analysis.rank_heatmap import combine_rank_heatmap, rank_heatmap, rank_heatmap_part


def test_time_bins_hold_known_shares() -> None:
    bins = HeatmapBins(0, 500, 6)
    h = combine_rank_heatmap([rank_heatmap_part(fleet_trace(), bins)], bins)
    assert h.ranks.rows() == list(LAYOUT)
    busy, comm = h.matrix("time", "busy_share"), h.matrix("time", "comm_share")
    assert np.all(busy == 1.0)
    ordinary, slow = LAYOUT.index(("a", 0)), LAYOUT.index(STRAGGLER)
    # bin [0, 500): the all-reduce runs from the gemm's end; bin [500, 1000): only the all-reduce
    assert comm[ordinary].tolist() == [(500 - GEMM_NS) / 500, 1.0] * STEPS
    assert comm[slow].tolist() == [0.0, (STEP_NS - SLOW_GEMM_NS) / 500] * STEPS


def test_step_shares_and_one_column_per_step() -> None:
    h = rank_heatmap(fleet_trace())
    comm = h.matrix("step", "comm_share")
    assert comm.shape == (len(LAYOUT), STEPS)
    expected = [(STEP_NS - (SLOW_GEMM_NS if key == STRAGGLER else GEMM_NS)) / STEP_NS for key in LAYOUT]
    assert comm[:, 0].tolist() == pytest.approx(expected)
    assert np.all(h.matrix("step", "busy_share") == 1.0)
    assert h.by_step["step_ns"].unique().to_list() == [STEP_NS]


def test_whole_trace_uses_at_most_200_bins_over_the_gpu_span() -> None:
    trace = fleet_trace()
    h = rank_heatmap(trace)
    assert h.bins == gpu_bins(trace)
    assert h.bins.t0_ns == 0 and h.bins.n_bins <= MAX_TIME_BINS
    assert h.bins.t0_ns + h.bins.bin_ns * h.bins.n_bins >= STEPS * STEP_NS
    assert h.by_time.height == len(LAYOUT) * h.bins.n_bins


@pytest.mark.parametrize(("start", "end"), [(0, 1), (5, 205), (0, 10**12 + 7), (100, 100)])
def test_bins_cover_the_span_with_at_most_max_bins(start: int, end: int) -> None:
    bins = HeatmapBins.over(start, end)
    assert 1 <= bins.n_bins <= MAX_TIME_BINS
    assert bins.t0_ns == start and bins.t0_ns + bins.bin_ns * bins.n_bins >= end
    assert bins.t0_ns + bins.bin_ns * (bins.n_bins - 1) < max(end, start + 1)


def test_parts_of_single_rank_traces_combine_to_the_whole() -> None:
    whole = fleet_trace()
    bins = gpu_bins(whole)
    parts = [rank_heatmap_part(fleet_trace(layout=(key,), straggler=STRAGGLER), bins) for key in reversed(LAYOUT)]
    combined = combine_rank_heatmap(parts, bins)
    expected = rank_heatmap(whole)
    assert_frame_equal(combined.by_time, expected.by_time)
    assert_frame_equal(combined.by_step, expected.by_step)
    assert_frame_equal(combined.ranks, expected.ranks)


def test_a_window_between_steps_counts_partial_intervals() -> None:
    bins = HeatmapBins(150, 100, 3)  # [150, 250) gemm only, [250, 350) gemm 50 + nccl 50, [350, 450) nccl
    part = rank_heatmap_part(fleet_trace(layout=(("a", 0),)), bins).filter(pl.col("axis") == "time")
    assert part["busy_ns"].to_list() == [100, 100, 100]
    assert part["comm_ns"].to_list() == [0, 50, 100]


def test_hosts_are_runs_of_rows() -> None:
    assert rank_heatmap(fleet_trace()).hosts() == [("a", 0, 2), ("b", 2, 2)]


def test_fleet_job_heatmap_shows_the_straggler_communicating_least() -> None:
    """ktrace.testing.fleet on one clock: the straggler spends the least of each step in collectives."""
    from ktrace.testing.fleet import FleetConfig, generate_fleet

    job = generate_fleet(FleetConfig(max_offset_ns=0))
    h = rank_heatmap(job.trace)
    assert h.ranks.height == 64 and len(h.hosts()) == 8
    comm = h.matrix("step", "comm_share")
    row = h.ranks.rows().index(job.straggler)
    assert np.all(np.argmin(comm, axis=0) == row)
    assert h.matrix("time", "busy_share").shape == (64, h.bins.n_bins)


def test_a_rank_without_communication_has_zero_comm_share() -> None:
    from ktrace.model.builder import TraceBuilder

    whole = fleet_trace(layout=(("a", 0), ("a", 1)), straggler=None)
    b = TraceBuilder()
    for table in ("kernels", "ranges"):
        for (node, rank), part in whole.table(table).group_by("node", "rank", maintain_order=True):
            if rank == 1 and table == "kernels":
                part = part.filter(part["name"] == "gemm")  # this rank runs no collective
            b.add(table, part.drop("node", "rank").to_arrow(), node=str(node), rank=int(rank))
    h = rank_heatmap(b.build())
    assert h.matrix("step", "comm_share")[1].tolist() == [0.0] * STEPS
    assert h.matrix("step", "busy_share")[1].tolist() == [GEMM_NS / STEP_NS] * STEPS
