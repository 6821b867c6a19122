"""The Perfetto export reads a rank window by window (perfetto_slice_windows, perfetto_rank_layout): the same rows,
tracks, lanes and flows as the whole-rank path (rank_slices, assign_tracks + overlap_lanes, launch_pairs), at any
window and chunk size, and numpy memory that grows far less with the trace (~20 B a slice, was ~140)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tangled_traces import tangled_trace

from ktrace.exporters.perfetto import export_perfetto
from ktrace.exporters.perfetto_layout import TrackTree
from ktrace.exporters.perfetto_rank_layout import RankLayout
from ktrace.exporters.perfetto_slice_rows import FlowChunks
from ktrace.exporters.perfetto_slice_windows import RankSlices
from ktrace.exporters.perfetto_slices import SLICE_COLUMNS, launch_pairs, rank_slices
from ktrace.exporters.perfetto_tracks import assign_tracks
from ktrace.exporters.track_layout import overlap_lanes
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, generate


def _tangled() -> Trace:
    """Ranges that overlap without nesting, across many clusters, ties in start, a launch after its kernel."""
    return tangled_trace(
        seed=3,
        ranges=400,
        range_names=7,
        ties=slice(50, 60),
        calls=120,
        shared=10,
        kernel_ns=80,
        two_gpus=False,
        two_streams=True,
    )


def _traces() -> list[Trace]:
    return [_tangled(), generate(SyntheticConfig(steps=4, kernels_per_step=150, streams=3, ranks=2, seed=5))]


@pytest.mark.parametrize("window_rows", [1, 7, 50_000])
@pytest.mark.parametrize("which", [0, 1])
def test_windows_are_the_whole_rank_sorted(which: int, window_rows: int) -> None:
    trace = _traces()[which]
    for node, rank in sorted({(str(n), int(r)) for n, r in trace.ranks if r >= 0}):
        whole = rank_slices(trace, node, rank).select(SLICE_COLUMNS)
        slices = RankSlices(trace, node, rank, window_rows)
        assert slices.height == whole.height
        for chunk_rows in (3, 1000):
            chunks = list(slices.chunks(chunk_rows))
            assert [c.height for c in chunks[:-1]] == [chunk_rows] * (len(chunks) - 1)
            assert_frame_equal(pl.concat(chunks), whole, categorical_as_str=True)


@pytest.mark.parametrize("window_rows", [1, 5, 50_000])
@pytest.mark.parametrize("which", [0, 1])
def test_layout_gives_the_whole_rank_tracks_lanes_and_flows(which: int, window_rows: int, tmp_path: Path) -> None:
    trace = _traces()[which]
    for node, rank in sorted({(str(n), int(r)) for n, r in trace.ranks if r >= 0}):
        whole = rank_slices(trace, node, rank)
        old_tree, new_tree = TrackTree(), TrackTree()
        proc = old_tree.process(("process", node, rank), "rank", 1)
        assert new_tree.process(("process", node, rank), "rank", 1) == proc
        track = assign_tracks(old_tree, proc, trace, node, rank, whole)
        lanes = overlap_lanes(track, whole["start_ns"].to_numpy(), whole["end_ns"].to_numpy())
        for t, k in sorted({(int(t), int(k)) for t, k in zip(track, lanes, strict=True) if k}):
            old_tree.lane(t, k)  # lane tracks are made by (track, lane), as the whole-rank export made them
        expected = np.array([old_tree.lane(int(t), int(k)) if k else t for t, k in zip(track, lanes, strict=True)])
        slices = RankSlices(trace, node, rank, window_rows)
        layout = RankLayout(trace, node, rank, slices, new_tree, proc, tmp_path)
        if which == 0:
            assert (lanes > 0).sum() > 3 and layout.lane_rows.size == (lanes > 0).sum()
        pairs = launch_pairs(whole)
        assert layout.pairs == pairs.height
        old_flows = FlowChunks(pairs, 11)
        row = 0
        for chunk in slices.chunks(4):
            np.testing.assert_array_equal(layout.tracks(chunk, row), expected[row : row + chunk.height])
            got, want = layout.flows(chunk, 11), old_flows.chunk(row, row + chunk.height)
            for g_rows, g_ids, w_rows, w_ids in (
                (got[0], got[1], want[0], want[1]),
                (got[2], got[3], want[2], want[3]),
            ):
                assert sorted(zip(g_rows.tolist(), g_ids.tolist(), strict=True)) == sorted(
                    zip(w_rows.tolist(), w_ids.tolist(), strict=True)
                )
            row += chunk.height
        assert [p.track_descriptor.name for p in new_tree.take_packets()] == [
            p.track_descriptor.name for p in old_tree.take_packets()
        ]


def _numpy_peak(trace: Trace, path: Path) -> int:
    tracemalloc.start()
    try:
        export_perfetto(trace, path, chunk_rows=5_000)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_export_memory_does_not_grow_with_the_trace(tmp_path: Path) -> None:
    """numpy's peak during the export (tracemalloc) grows by ~140 B per added slice on the whole-rank path; read
    window by window only by what the layout keeps per launch (~20 B a slice here)."""
    sizes, peaks = [], []
    for steps in (20, 60):
        trace = generate(SyntheticConfig(steps=steps, kernels_per_step=2500, streams=4))
        sizes.append(trace.counts()["kernels"] + trace.counts()["api"])
        peaks.append(_numpy_peak(trace, tmp_path / f"{steps}.pftrace"))
    growth = (peaks[1] - peaks[0]) / (sizes[1] - sizes[0])
    assert growth < 40, f"{growth:.0f} B per added slice"
