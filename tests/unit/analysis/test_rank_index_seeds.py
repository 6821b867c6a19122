"""seed_rank_indexes (analysis.rank_index_seeds): a rank's index seeded from a joined trace's holds exactly what it
would build itself (rank ids of every table, GPU columns, runtime call times, launch rows)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rank_index_seeds import seed_rank_indexes
from ktrace.model import store
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.testing.synthetic import SyntheticConfig, generate


def _same(a: object, b: object) -> None:
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and np.array_equal(a, b) and a.dtype == b.dtype
    elif isinstance(a, pl.DataFrame):
        assert isinstance(b, pl.DataFrame) and a.equals(b) and a.schema == b.schema
    else:
        assert a == b


def _assert_seeds(trace: Trace, root: Path) -> None:
    store.write(trace, root)
    parts = [(n, r) for n, r, _ in store.partitions(root)]
    joined, each = store.read_each(root, set(parts))
    indexes = [TraceIndex(t) for t in each]
    seed_rank_indexes(TraceIndex(joined), indexes, parts)
    for own, seeded in zip(each, indexes, strict=True):
        built = TraceIndex(own)
        for name in TABLES:
            for a, b in zip(built.table_rank_ids(name), seeded.table_rank_ids(name), strict=True):
                _same(a, b)
        for a, b in zip(built.api_times(), seeded.api_times(), strict=True):
            _same(a, b)
        _same(built.launch_rows(), seeded.launch_rows())
        c, s = built.gpu_columns(), seeded.gpu_columns()
        for field in dataclasses.fields(c):
            _same(getattr(c, field.name), getattr(s, field.name))


def test_fleet_ranks(tmp_path: Path) -> None:
    _assert_seeds(generate_fleet(FleetConfig(ranks=6, hosts=3, steps=3, kernels_per_step=6)).trace, tmp_path / "f")


@pytest.mark.parametrize("ranks", [1, 4])
def test_ranks_with_memory_records_and_a_rank_without_gpu_records(ranks: int, tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5, ranks=ranks, nodes=min(ranks, 2)))
    assert trace.memory.height > 0
    last = pl.col("rank") != ranks - 1
    cpu_only = dataclasses.replace(trace, kernels=trace.kernels.filter(last), memory=trace.memory.filter(last))
    _assert_seeds(trace, tmp_path / "all")
    _assert_seeds(cpu_only, tmp_path / "cpu_only")


def test_the_seeds_are_what_the_index_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seeded index builds nothing (a key renamed in TraceIndex would leave the seed unread, and the values the
    index builds itself would still compare equal): its builders fail here (RV4)."""
    import ktrace.analysis.critical_path_parts as parts_module
    import ktrace.analysis.index as index_module
    from ktrace.analysis.critical_path_parts import _collective_rows
    from ktrace.analysis.critical_path_task_steps import ranks_steps

    trace = generate_fleet(FleetConfig(ranks=4, hosts=2, steps=3, kernels_per_step=6)).trace
    root = tmp_path / "s"
    store.write(trace, root)
    parts = [(n, r) for n, r, _ in store.partitions(root)]
    joined, each = store.read_each(root, set(parts))
    indexes = [TraceIndex(t) for t in each]
    joined_index = TraceIndex(joined)
    seed_rank_indexes(joined_index, indexes, parts)
    ranks_steps(joined_index, parts, indexes)

    def built(*_: object) -> None:
        raise AssertionError("built, not seeded")

    for name in ("build_gpu_columns", "build_launch_rows", "local_rank_ids", "concat_i64"):
        monkeypatch.setattr(index_module, name, built)
    monkeypatch.setattr(parts_module, "_find_collective_rows", built)
    for ix in indexes:
        ix.gpu_columns(), ix.launch_rows(), ix.api_times(), _collective_rows(ix)
        for name in TABLES:
            ix.table_rank_ids(name)


def test_ranks_that_do_not_make_up_the_joined_trace_are_refused(tmp_path: Path) -> None:
    trace = generate_fleet(FleetConfig(ranks=2, hosts=1, steps=2, kernels_per_step=4)).trace
    store.write(trace, tmp_path / "s")
    parts = [(n, r) for n, r, _ in store.partitions(tmp_path / "s")]
    joined, each = store.read_each(tmp_path / "s", set(parts))
    with pytest.raises(ValueError, match="do not make up"):
        seed_rank_indexes(TraceIndex(joined), [TraceIndex(each[0])], parts[:1])
