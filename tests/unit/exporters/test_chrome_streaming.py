"""The Chrome JSON export reads a rank window by window (chrome_layout): every slice on the pid and tid (overlap lane
included) the whole-rank placement gives it, the flows of launch_pairs, and the same bytes at any window or chunk
size, with numpy memory that grows far less with the trace."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tangled_traces import launch_calls, tangled_trace

from ktrace.exporters import chrome_json
from ktrace.exporters.chrome_json import export_chrome_json
from ktrace.exporters.chrome_layout import LANE_TID, SPECIAL_TIDS
from ktrace.exporters.launches import Launches
from ktrace.exporters.perfetto_slices import STREAM_KINDS, THREAD_KINDS, launch_pairs, rank_slices
from ktrace.exporters.selection import select
from ktrace.exporters.track_layout import overlap_lanes
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, generate


def _tangled() -> Trace:
    """Ranges overlapping without nesting on two threads, ties in start, shared and early launches, two GPUs."""
    return tangled_trace(
        seed=11,
        ranges=300,
        range_names=5,
        ties=slice(40, 48),
        calls=100,
        shared=8,
        kernel_ns=300,
        two_gpus=True,
        two_streams=False,
    )


def _traces() -> list[Trace]:
    return [_tangled(), generate(SyntheticConfig(steps=3, kernels_per_step=120, streams=3, ranks=2, seed=7))]


def _export(trace: Trace, path: Path) -> dict[str, Any]:
    export_chrome_json(trace, path)
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _pids(events: list[dict[str, Any]]) -> dict[str, int]:
    return {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}


def _whole_rank_places(trace: Trace, node: str, rank: int, pids: dict[str, int]) -> tuple[pl.DataFrame, list[Any]]:
    """The rank's slices (file order) with the pid and tid the whole-rank export gave them, and its kept flows."""
    slices = rank_slices(trace, node, rank)
    cpu_pid = next(p for name, p in pids.items() if name.startswith(f"rank {rank} · {node}"))
    kind = pl.col("kind")
    tid = pl.col("tid").fill_null(0)
    for k, (t, _) in SPECIAL_TIDS.items():
        tid = pl.when(kind == k).then(pl.lit(t, pl.Int64)).otherwise(tid)
    tid = pl.when(kind.is_in(STREAM_KINDS)).then(pl.col("stream")).otherwise(tid)
    gpu_pid = {d: p for name, p in pids.items() if name.startswith(f"rank {rank} · GPU") for d in [int(name[-1])]}
    pid = (
        pl.when(kind.is_in([*THREAD_KINDS, "step"]))
        .then(pl.lit(cpu_pid, pl.Int64))
        .otherwise(pl.col("device").replace_strict(gpu_pid, default=cpu_pid, return_dtype=pl.Int64))
    )
    placed = slices.with_columns(pid.alias("out_pid"), tid.alias("out_tid"))
    key = placed.select(pl.struct("out_pid", "out_tid").rank("dense").cast(pl.Int64))[:, 0].to_numpy()
    lanes = overlap_lanes(key, placed["start_ns"].to_numpy(), placed["end_ns"].to_numpy())
    placed = placed.with_columns(pl.col("out_tid") + pl.Series(lanes) * LANE_TID)
    pairs = launch_pairs(placed).filter(pl.col("gpu_start") >= pl.col("launch_start"))
    return placed, list(pairs.select("launch_row", "gpu_row").iter_rows())


@pytest.mark.parametrize("which", [0, 1])
def test_windowed_export_places_slices_and_flows_as_the_whole_rank(which: int, tmp_path: Path) -> None:
    trace = _traces()[which]
    events = _export(trace, tmp_path / "t.json")["traceEvents"]
    pids = _pids(events)
    xs = [e for e in events if e["ph"] == "X"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    at, fid = 0, 1
    for node, rank in sorted({(str(n), int(r)) for n, r in trace.ranks if r >= 0}):
        placed, pairs = _whole_rank_places(trace, node, rank, pids)
        mine = xs[at : at + placed.height]
        assert [(e["pid"], e["tid"]) for e in mine] == list(placed.select("out_pid", "out_tid").iter_rows())
        if which == 0:
            assert any(e["tid"] >= LANE_TID for e in mine) and any(e["pid"] != mine[0]["pid"] for e in mine)
        for launch_row, gpu_row in pairs:
            assert (starts[fid]["pid"], starts[fid]["tid"]) == (mine[launch_row]["pid"], mine[launch_row]["tid"])
            assert (ends[fid]["pid"], ends[fid]["tid"], ends[fid]["ts"]) == (
                mine[gpu_row]["pid"],
                mine[gpu_row]["tid"],
                mine[gpu_row]["ts"],
            )
            fid += 1
        at += placed.height
    assert at == len(xs) and fid - 1 == len(starts) == len(ends)
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in xs} == named


@pytest.mark.parametrize(("window_rows", "chunk_rows"), [(1, 3), (5, 7), (50_000, 2)])
def test_any_window_and_chunk_size_writes_the_same_bytes(
    window_rows: int, chunk_rows: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, trace in enumerate(_traces()):
        export_chrome_json(trace, tmp_path / f"default{k}.json")
        with monkeypatch.context() as patch:
            patch.setattr(chrome_json, "WINDOW_ROWS", window_rows)
            patch.setattr(chrome_json, "CHUNK_ROWS", chunk_rows)
            export_chrome_json(trace, tmp_path / f"small{k}.json")
        assert (tmp_path / f"small{k}.json").read_bytes() == (tmp_path / f"default{k}.json").read_bytes()


def test_export_memory_does_not_grow_with_the_trace(tmp_path: Path) -> None:
    """numpy's peak during the export (tracemalloc) grew by ~260 B per added slice on the whole-rank path (the
    flow join, the lanes of every slice); read window by window only by what the layout keeps per launch (~23 B)."""
    sizes, peaks = [], []
    for steps in (20, 60):
        trace = generate(SyntheticConfig(steps=steps, kernels_per_step=2500, streams=4))
        sizes.append(trace.counts()["kernels"] + trace.counts()["api"])
        tracemalloc.start()
        try:
            export_chrome_json(trace, tmp_path / f"{steps}.json")
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    growth = (peaks[1] - peaks[0]) / (sizes[1] - sizes[0])
    assert growth < 40, f"{growth:.0f} B per added slice"


def test_counter_values_at_one_time_keep_the_table_order(tmp_path: Path) -> None:
    """C events sort by time, and values at one time keep the counters table's order: the same file every run
    (a hash join then an unstable sort shuffled them on a cut of a 2-node trace)."""
    whole = generate(SyntheticConfig(steps=3, kernels_per_step=30, ranks=4, nodes=2, seed=9))
    start = whole.span_ns()[0]
    trace = select(whole, window=(start + 10**8, start + 6 * 10**8), ranks=[1, 2])
    events = _export(trace, tmp_path / "t.json")["traceEvents"]
    pid = _pids(events)
    for node in ("node0", "node1"):  # the generator's counters are the hosts' (rank -1)
        got = [e["args"]["value"] for e in events if e["ph"] == "C" and e["pid"] == pid[f"{node} (host)"]]
        rows = trace.counters.filter(pl.col("node") == node)
        want = rows.with_row_index("at").sort("ts_ns", "at")["value"].to_list()
        assert got == want and len(set(rows["ts_ns"].to_list())) < len(want)  # ties at one time


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("ids", [[9, 5, 7, 5], [5, 7, 2**40], [-3, 4_000_000_000, 12]])
def test_launch_ids_match_as_a_plain_search(ids: list[int], dense: bool, tmp_path: Path) -> None:
    """Launches keys ids by offset where they are dense, else by place among the sorted ids (as 4-byte offsets
    from the first where they span under 2**32): a lookup finds exactly the launches' ids (nulls, ids between
    them, outside the span and far past it find none), each key giving back its id's earliest call."""
    launches = Launches(launch_calls(list(range(len(ids))), ids), "n", 0, tmp_path, dense=dense)
    asked = [None, *ids, 6, -4, 2**33 + 5, 2**40, 2**40 + 1, 2**62]
    at, found = launches.match(pl.Series(asked, dtype=pl.Int64))
    distinct = sorted(set(ids))
    assert found.tolist() == [v in distinct for v in asked]
    want = [v - min(ids) if launches.dense else distinct.index(v) for v in asked if v in distinct]
    assert at[found].tolist() == want
    assert launches.starts(at[found]).tolist() == [ids.index(v) for v in asked if v in distinct]
