"""ranks_steps (analysis.critical_path_task_steps): the RankSteps of a fleet task's ranks from their joined trace
equal rank_steps on each rank's own trace, and each rank's index gets the collective rows its own would compute."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest
from fleet_traces import user_step_ranges

from ktrace.analysis.critical_path_parts import COLLECTIVE_ROWS, _find_collective_rows, rank_steps
from ktrace.analysis.critical_path_task_steps import ranks_steps
from ktrace.analysis.index import TraceIndex
from ktrace.model import store
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet


@pytest.fixture(scope="module")
def job() -> Trace:
    return generate_fleet(FleetConfig(ranks=6, hosts=2, steps=20, kernels_per_step=8)).trace  # 20: a rhythm to infer


def _without_ranges(job: Trace, ranks: set[int]) -> Trace:
    """The job with no ranges on `ranks`: their steps are inferred from their kernels (the periodic method)."""
    return dataclasses.replace(job, ranges=job.ranges.filter(~pl.col("rank").is_in(sorted(ranks))))


def _assert_same(trace: Trace, root: Path, pattern: str | None = None) -> list[int]:
    store.write(trace, root)
    parts = [(n, r) for n, r, _ in store.partitions(root)]
    joined, each = store.read_each(root, set(parts))
    indexes = [TraceIndex(t) for t in each]
    found = ranks_steps(TraceIndex(joined), parts, indexes, steps_pattern=pattern)
    for (node, rank), ix, got in zip(parts, indexes, found, strict=True):
        alone = store.read(root, only={(node, rank)})
        expected = rank_steps(alone, node, rank, steps_pattern=pattern)
        for field in dataclasses.fields(expected):
            want, have = getattr(expected, field.name), getattr(got, field.name)
            if isinstance(want, pl.DataFrame):
                assert have.equals(want) and have.schema == want.schema, field.name
            else:
                assert have == want, field.name
        rows, own_rows = ix.get(COLLECTIVE_ROWS, lambda: None), _find_collective_rows(TraceIndex(alone))
        assert rows is not None and rows.equals(own_rows) and rows.schema == own_rows.schema
        assert rows.height > 0
    return [p.method for p in found]


def test_profiler_steps_of_every_rank(job: Trace, tmp_path: Path) -> None:
    assert _assert_same(job, tmp_path / "job.ktrace") == [0] * 6


def test_ranks_whose_steps_other_methods_find(job: Trace, tmp_path: Path) -> None:
    """Rank 1 is annotated "train_step N" (the annotation method), ranks 3 and 4 have no ranges (periodic)."""
    mixed = _without_ranges(user_step_ranges(job, 1), {3, 4})
    assert _assert_same(mixed, tmp_path / "mixed.ktrace") == [0, 1, 0, 2, 2, 0]


def test_a_steps_pattern_tried_first(job: Trace, tmp_path: Path) -> None:
    methods = _assert_same(user_step_ranges(job, 2, "iteration"), tmp_path / "pattern.ktrace", r"iteration (\d+)")
    assert methods == [1, 1, 0, 1, 1, 1]  # step_methods("..."): annotation first, then ProfilerStep
