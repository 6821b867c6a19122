"""The map side of the rank-by-rank critical path (analysis.critical_path_parts): per-rank parts choose the same
windows as the whole trace, order collectives as the whole trace does, and cut a rank to one step's graph."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.critical_path import choose_window
from ktrace.analysis.critical_path_graph import GPU_RECORD, OPERATOR, RUNTIME, build_graph
from ktrace.analysis.critical_path_parts import (
    RankSteps,
    collective_ends,
    collective_lags,
    first_window,
    job_windows,
    join_rank_graphs,
    own_window,
    own_windows,
    rank_graph,
    rank_steps,
    spread_collectives,
    step_methods,
)
from ktrace.analysis.critical_path_ranks import collective_keys, range_name, rank_windows
from ktrace.analysis.index import TraceIndex
from ktrace.model import store
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet


@pytest.fixture(scope="module")
def job() -> Trace:
    return generate_fleet(FleetConfig(ranks=4, hosts=2, steps=6, kernels_per_step=8)).trace


def _parts(trace: Trace, root: Path, **options: str) -> tuple[Trace, dict[tuple[str, int], Trace], list[RankSteps]]:
    """The store's whole trace, each partition's trace, and each partition's RankSteps."""
    store.write(trace, root)
    ranks = {(n, r): store.read(root, only={(n, r)}) for n, r, _ in store.partitions(root)}
    parts = [rank_steps(t, n, r, **options) for (n, r), t in ranks.items()]
    return store.read(root), ranks, parts


def test_step_methods_follow_detect_steps_order() -> None:
    assert step_methods(None) == ("profiler_step", "annotation", "periodic")
    assert step_methods("iter") == ("annotation", "profiler_step", "periodic")


def test_a_rank_whose_steps_another_method_finds_is_left_out_as_in_one_process(job: Trace, tmp_path: Path) -> None:
    """Rank 0's steps are user annotations ("train_step 3"), the others' ProfilerStep#N: one process takes the
    ProfilerStep ranges for the whole job (rank 0 has none), so the first rank with steps is rank 1."""
    first_rank = pl.col("rank") == 0
    renamed = pl.when(first_rank).then(pl.col("name").cast(pl.String).str.replace("ProfilerStep#", "train_step "))
    ranges = job.ranges.with_columns(
        renamed.otherwise(pl.col("name").cast(pl.String)).cast(job.ranges.schema["name"]).alias("name"),
        pl.when(first_rank)
        .then(pl.lit("user"))
        .otherwise(pl.col("domain").cast(pl.String))
        .cast(job.ranges.schema["domain"])
        .alias("domain"),
    )
    whole, _, parts = _parts(dataclasses.replace(job, ranges=ranges), tmp_path / "mixed.ktrace")
    chosen = choose_window(TraceIndex(whole), None, 0)
    assert chosen is not None and chosen[0].rank == 1
    assert first_window(parts, None, 0) == chosen
    assert {p.rank: p.method for p in parts} == {0: 1, 1: 0, 2: 0, 3: 0}
    expected = rank_windows(TraceIndex(whole), chosen[0], "step", None, None)
    assert job_windows(parts, chosen[0], "step") == expected
    assert [w.rank for w in expected] == [1, 2, 3]  # rank 0 has no ProfilerStep: one process leaves it out
    # each worker's own windows of the guessed step (one query over its ranks' steps) are the client's choice
    name = range_name(parts[1].steps, chosen[0])
    assert own_windows(parts, chosen[0], name, parts[1].method) == [None, *expected]
    assert [own_window(p, chosen[0], name, parts[1].method) for p in parts] == [None, *expected]


def test_annotation_windows_equal_one_process(job: Trace, tmp_path: Path) -> None:
    whole, _, parts = _parts(job, tmp_path / "job.ktrace", annotation="ProfilerStep")
    ix = TraceIndex(whole)
    for instance in (0, 7, 23):
        chosen = choose_window(ix, "ProfilerStep", instance)
        assert chosen is not None and first_window(parts, "ProfilerStep", instance) == chosen
        assert job_windows(parts, chosen[0], "annotation") == rank_windows(
            ix, chosen[0], "annotation", "ProfilerStep", None
        )
    assert first_window(parts, "ProfilerStep", 24) is None and choose_window(ix, "ProfilerStep", 24) is None


def test_collective_keys_of_a_cut_are_the_whole_job_order(job: Trace, tmp_path: Path) -> None:
    """Rank 2 ran two collectives fewer (its first ones): the whole trace's keys shift its order by a lag, and
    the keys of a rank's graph, from collective_lags, are the whole trace's."""
    comm = communication_names(job)
    rows = job.kernels.with_row_index("row")
    mine = rows.filter(pl.col("name").cast(pl.String).is_in(comm) & (pl.col("rank") == 2)).sort("start_ns")
    dropped = set(mine["row"].head(2).to_list())
    trace = dataclasses.replace(job, kernels=job.kernels[[i for i in range(job.kernels.height) if i not in dropped]])
    whole, ranks, parts = _parts(trace, tmp_path / "fewer.ktrace")
    spread = spread_collectives(parts)
    assert spread
    lags = collective_lags([collective_ends(ranks[(p.node, p.rank)], p.node, p.rank, spread) for p in parts])
    assert set(lags) == {(parts[2].node, 2)} and all(lag < 0 for lag in lags[(parts[2].node, 2)].values())
    ix = TraceIndex(whole)
    ids, names = collective_keys(ix)
    chosen = first_window(parts, None, 0)
    assert chosen is not None
    windows = job_windows(parts, chosen[0], "step")
    assert len(windows) == len(parts)
    for window in windows:
        at = [(p.node, p.rank) for p in parts].index((window.node, window.rank))
        kernel_offset = sum(p.kernels for p in parts[:at])
        part = rank_graph(
            ranks[(window.node, window.rank)], window, lags.get((window.node, window.rank), {}), kernel_offset, 0
        )
        expected = [names[i] if i >= 0 else None for i in ids[part.kernel_records].tolist()]
        assert part.kernel_keys == expected and any(expected)


def test_rank_graphs_joined_are_the_whole_trace_graphs_of_one_step(job: Trace, tmp_path: Path) -> None:
    whole, ranks, parts = _parts(job, tmp_path / "job.ktrace")
    chosen = first_window(parts, None, 0)
    assert chosen is not None
    windows = job_windows(parts, chosen[0], "step")
    order = [(p.node, p.rank) for p in parts]
    found = []
    for window in windows:
        at = order.index((window.node, window.rank))
        kernel_offset = sum(p.kernels for p in parts[:at])
        memory_offset = sum(p.kernels for p in parts) + sum(p.memory for p in parts[:at])
        found.append(rank_graph(ranks[(window.node, window.rank)], window, {}, kernel_offset, memory_offset))
    joined = join_rank_graphs(found, whole)
    assert 0 < joined.trace.kernels.height <= whole.kernels.height // 3  # one step of six
    assert 0 < joined.trace.api.height <= whole.api.height // 3
    ix = TraceIndex(whole)
    for i, window in enumerate(windows):
        full, mine = build_graph(ix, window), joined.graph(i)
        for name in ("ev_kind", "ev_start", "ev_end", "src", "dst", "weight", "etype", "event"):
            assert np.array_equal(getattr(mine, name), getattr(full, name)), name
        assert mine.sync_records == full.sync_records
        for kind, table in ((OPERATOR, "ops"), (RUNTIME, "api")):
            hit = mine.ev_kind == kind
            ours = joined.trace.table(table)[mine.ev_row[hit]]  # their times are the graph's ev_start / ev_end
            assert ours.equals(whole.table(table)[full.ev_row[hit]].select("name"))
        on_gpu = mine.ev_kind == GPU_RECORD
        assert on_gpu.any() and np.array_equal(joined.records[mine.ev_row[on_gpu]], full.ev_row[on_gpu])
