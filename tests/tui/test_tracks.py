"""The track index: every row on exactly one sorted track, correlation links equal to a polars join."""

from __future__ import annotations

import numpy as np
import polars as pl

from ktrace.tui.first_rows import default_rows
from ktrace.tui.index_build import build_index
from ktrace.tui.steps import find_step, step_spans
from ktrace.tui.table_model import kernel_order
from ktrace.tui.tree_model import tree_roots


def test_every_kernel_and_api_row_is_on_one_sorted_track(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    index = build_index(synthetic_trace)
    for table in ("kernels", "memory", "api", "ranges"):
        tid, pos = index.place[table]
        assert (tid >= 0).all(), table
        for row in (0, synthetic_trace.table(table).height - 1):
            track = index.tracks[tid[row]]
            assert index.source(int(tid[row]), int(pos[row])) == (table, row)
            assert track.starts[pos[row]] == synthetic_trace.table(table)["start_ns"][row]
    for track in index.tracks:
        assert (np.diff(track.starts) >= 0).all()
    per_stream = synthetic_trace.kernels.group_by("rank", "stream").len()
    streams = [t for t in index.tracks if t.kind == "stream"]
    assert len(streams) == per_stream.height


def test_links_match_a_polars_join(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    index = build_index(synthetic_trace)
    k = synthetic_trace.kernels.with_row_index("k")
    a = synthetic_trace.api.with_row_index("a")
    joined = k.join(a, on=["rank", "correlation_id"]).sort("k")
    for row in joined.head(50).iter_rows(named=True):
        assert index.linked_rows("kernels", row["k"]) == [("api", row["a"])]
        assert ("kernels", row["k"]) in index.linked_rows("api", row["a"])


def test_kernel_order_filters_and_sorts_like_polars(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    order = kernel_order(synthetic_trace.kernels, sort=0, descending=True, text="GEMM")
    expected = (
        synthetic_trace.kernels.with_row_index("i")
        .filter(pl.col("name").cast(pl.String).str.to_lowercase().str.contains("gemm"))
        .with_columns(d=pl.col("end_ns") - pl.col("start_ns"))
    )
    assert set(order.tolist()) == set(expected["i"].to_list())
    dur = (synthetic_trace.kernels["end_ns"] - synthetic_trace.kernels["start_ns"]).to_numpy()[order]
    assert (np.diff(dur) <= 0).all()


def test_tree_and_default_rows(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    index = build_index(synthetic_trace)
    roots = tree_roots(index)
    assert [r.key for r in roots] == ["node0"]
    ranks = roots[0].expand()  # type: ignore[misc]
    assert [r.key for r in ranks] == ["node0/counters", "node0/0", "node0/1"]
    kids = ranks[1].expand()  # type: ignore[misc]
    assert any(c.label.startswith("GPU 0") for c in kids) and any(c.label.startswith("thread") for c in kids)
    rows = default_rows(index)
    assert {index.tracks[r].kind for r in rows} >= {"stream", "api", "counter"}


def test_steps_and_finding_a_step_by_number(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    steps = step_spans(synthetic_trace)
    assert len(steps) == 8 and steps.names[0] == "ProfilerStep#0"
    assert find_step(steps, "3") == 3 and find_step(steps, "ProfilerStep#5") == 5 and find_step(steps, "x") is None
    assert steps.containing(int(steps.starts[2]) + 1) == 2


def test_allocator_memory_is_a_counter_track_shown_at_first() -> None:
    """The allocator's memory timeline: an allocated and a reserved counter track per GPU, the first GPU's allocated
    bytes among the default rows, values as in the Perfetto export (the allocator's totals after each event)."""
    from reference.memory_trace import memory_trace

    index = build_index(memory_trace())
    counters = {t.label: t for t in index.tracks if t.kind == "counter"}
    assert set(counters) == {
        "gpu.mem_allocated_bytes[0]",
        "gpu.mem_reserved_bytes[0]",
        "gpu.mem_allocated_bytes[1]",
        "gpu.mem_reserved_bytes[1]",
    }
    allocated = counters["gpu.mem_allocated_bytes[0]"]
    assert allocated.values is not None
    assert allocated.values.tolist() == [164, 464, 964, 664, 164, 364, 414, 350]
    assert (np.diff(allocated.starts) >= 0).all()
    shown = [index.tracks[i].label for i in default_rows(index)]
    assert "gpu.mem_allocated_bytes[0]" in shown and "gpu.mem_allocated_bytes[1]" not in shown


def test_python_frames_get_their_own_row_beside_the_operators() -> None:
    """A thread's outermost Python frame spans its whole run: on the operators' row it would cover them."""
    from real_traces import fixture_path

    import ktrace
    from ktrace.tui.tracks import track_title_parts

    trace = ktrace.open(fixture_path("tracelens"))
    index = build_index(trace)
    rows = {track_title_parts(t): len(t.starts) for t in index.tracks if t.kind == "ops"}
    python = trace.ops.filter(pl.col("category") == "python_function").group_by("tid").len()
    assert rows[("operators", "T21587")] == trace.ops.filter(pl.col("category") == "cpu_op").height
    assert {k: v for k, v in rows.items() if k[0] == "Python"} == {
        ("Python", f"T{tid}"): n for tid, n in python.iter_rows()
    }
