"""The memory timeline rank by rank (analysis.rank_reduce_memory) equals memory_timeline of the whole job: per
device, top operators added up over the ranks, churn over the job's span, never-freed figures, growth."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from reference.memory_trace import memory_trace

from ktrace.analysis.summary import summarize
from ktrace.fleet.engines import InProcessEngine, ProcessEngine
from ktrace.fleet.summary_map import summarize_store
from ktrace.model import store
from ktrace.model.builder import merge_traces
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace
from ktrace.presentation.summary_json import summary_to_dict
from ktrace.testing.fleet_compare import memory_timeline_differences


def _as_rank(trace: Trace, node: str, rank: int, shift: int, scale: int) -> Trace:
    """`trace` (one rank) as rank `rank` of `node`, `shift` ns later, its allocations `scale` times larger."""
    tables = {}
    for name in TABLES:
        t = trace.to_arrow(name)
        for i, column in enumerate(t.column_names):
            values = t.column(i).to_pylist()
            if column in ("node", "rank"):
                values = [node if column == "node" else rank] * t.num_rows
            elif column in ("ts_ns", "start_ns", "end_ns"):
                values = [None if v is None else v + shift for v in values]
            elif column in ("bytes", "total_allocated") and name == "allocations":
                values = [None if v is None else v * scale for v in values]
            else:
                continue
            field = t.schema.field(i)
            t = t.set_column(i, field, pa.array(values).cast(field.type) if values else pa.array([], field.type))
        tables[name] = t
    return Trace.from_arrow(tables, trace.meta)


def _job(tmp_path: Path, *, addresses: bool = True, totals: bool = True) -> Path:
    one = memory_trace(addresses=addresses, totals=totals)
    ranks = [_as_rank(one, f"n{r // 2}", r, 7 * r, r + 1) for r in range(5)]
    path = tmp_path / "memory.ktrace"
    store.write(merge_traces(ranks), path)
    return path


@pytest.mark.parametrize(("kind", "addresses", "totals"), [("in-process", True, True), ("processes", False, False)])
def test_the_memory_timeline_rank_by_rank_is_one_process(
    tmp_path: Path, kind: str, addresses: bool, totals: bool
) -> None:
    path = _job(tmp_path, addresses=addresses, totals=totals)
    single = summarize(store.read(path))
    with InProcessEngine() if kind == "in-process" else ProcessEngine(2) as engine:
        fleet = summarize_store(path, engine).summary
    m = fleet.memory_timeline
    assert single.memory_timeline is not None and m is not None
    assert memory_timeline_differences(single.memory_timeline, m) == []
    assert m.per_device.height == 10 and m.addresses is addresses and m.running_sum is not totals
    assert summary_to_dict(fleet)["memory_timeline"] == summary_to_dict(single)["memory_timeline"]
    assert [n for n in fleet.notes if n.startswith("memory_timeline")] == []


def test_memory_timeline_differences_sees_a_wrong_table(tmp_path: Path) -> None:
    import dataclasses

    import polars as pl

    single = summarize(store.read(_job(tmp_path))).memory_timeline
    assert single is not None
    wrong = dataclasses.replace(single, by_operator=single.by_operator.with_columns(pl.col("allocations") + 1))
    assert memory_timeline_differences(single, wrong) != []
    assert memory_timeline_differences(single, dataclasses.replace(single, events=1)) != []
