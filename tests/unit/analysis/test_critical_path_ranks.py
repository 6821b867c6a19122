"""Critical path across ranks: collectives join the ranks' graphs (hand-checked 3-rank jobs, the DLRM 8 ranks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ktrace.analysis.critical_path import RANK_WAIT, critical_path
from ktrace.analysis.critical_path_ranks import collective_keys
from ktrace.analysis.critical_path_summary import critical_path_notes
from ktrace.analysis.index import TraceIndex
from ktrace.model import Trace, TraceBuilder
from ktrace.model.builder import merge_traces
from ktrace.presentation.critical_path_json import critical_path_dict

DLRM = Path(__file__).resolve().parents[3] / "fixtures" / "traces" / "param-dlrm-v100-8rank"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
US = 1000


def _rank(
    rank: int,
    ops: list[tuple[int, int, str]],
    launches: list[tuple[int, int]],
    kernels: list[tuple[int, int, str]],
    node: str = "n0",
) -> Trace:
    """One rank on `node`, one thread, stream 7; times in µs; launch i (start, end) launches kernel i."""
    b = TraceBuilder(node, rank)
    n, k = len(launches), len(kernels)
    b.add(
        "ops",
        {
            "start_ns": [o[0] * US for o in ops],
            "end_ns": [o[1] * US for o in ops],
            "pid": [1] * len(ops),
            "tid": [1] * len(ops),
            "name": [o[2] for o in ops],
        },
    )
    b.add(
        "api",
        {
            "start_ns": [a[0] * US for a in launches],
            "end_ns": [a[1] * US for a in launches],
            "pid": [1] * n,
            "tid": [1] * n,
            "correlation_id": list(range(1, n + 1)),
            "domain": ["runtime"] * n,
            "name": ["cudaLaunchKernel"] * n,
        },
    )
    b.add(
        "kernels",
        {
            "start_ns": [x[0] * US for x in kernels],
            "end_ns": [x[1] * US for x in kernels],
            "device": [rank] * k,
            "stream": [7] * k,
            "correlation_id": list(range(1, k + 1)),
            "name": [x[2] for x in kernels],
        },
    )
    return b.build()


def _job(late_ops: list[tuple[int, int, str]], late_start: int) -> Trace:
    """Ranks 0 and 1: gemm [25, 75] then the all-reduce [75, 400] (it waits for rank 2), rank 0 then runs
    `post` [400, 420]. Rank 2 (the late one): its CPU ops `late_ops`, launches at late_start (+20), gemm
    [315, 365], its all-reduce [365, 400]."""
    on_time = [
        _rank(
            r,
            [(0, 50, "fwd")],
            [(10, 20), (30, 40), (42, 45)][: 3 - r],
            [(25, 75, "gemm"), (75, 400, NCCL), (400, 420, "post")][: 3 - r],
        )
        for r in (0, 1)
    ]
    s = late_start
    late = _rank(2, late_ops, [(s, s + 10), (s + 20, s + 30)], [(315, 365, "gemm"), (365, 400, NCCL)])
    return merge_traces([*on_time, late])


def test_late_rank_busy_on_cpu_puts_its_work_on_the_path() -> None:
    """Rank 2 spends 300 µs in slow_op before launching: the path runs slow_op 300 -> launch delay 15 -> gemm 50
    -> (crossing) the all-reduce's last 35 µs on rank 0 -> post 20 = 420 µs (by hand); rank 0's 290 µs of
    waiting is not on it, the crossing names rank 2 and slow_op."""
    trace = _job([(0, 335, "fwd"), (0, 300, "slow_op")], 300)
    cp = critical_path(trace)
    assert cp is not None and cp.ranks == 3
    assert cp.length_ns == 420 * US
    assert (cp.node, cp.rank) == ("n0", 0)  # the path ends with rank 0's post kernel
    comp = {r["category"]: r["ns"] for r in cp.composition.iter_rows(named=True)}
    assert comp["cpu"] == 300 * US and comp["launch_delay"] == 15 * US
    assert comp["gpu_compute"] == 70 * US and comp["communication"] == 35 * US and comp[RANK_WAIT] == 0
    assert cp.crossings is not None
    assert cp.crossings.to_dicts() == [
        {
            "on_path": "crossed",
            "collective": "ncclKernel_AllReduce_RING_LL_Sum_float #0",
            "late_node": "n0",
            "late_rank": 2,
            "waiting_node": "n0",
            "waiting_rank": 0,
            "waited_ns": 290 * US,
            "cause_kind": "operator",
            "cause_name": "slow_op",
            "cause_ns": 300 * US,
        }
    ]
    assert set(cp.path_segments.filter(pl.col("weight_ns") > 0)["rank"].to_list()) == {0, 2}
    assert critical_path_dict(cp)["crossings"][0]["late_rank"] == 2  # type: ignore[index]


def test_late_rank_idle_leaves_the_wait_on_the_path() -> None:
    """Rank 2's CPU records nothing before 300 µs (idle, or outside the trace): its chain to the all-reduce is
    10 + 15 + 50 = 65 µs < rank 0's 75 µs + 290 µs of waiting, so the path stays on rank 0 and its wait is
    rank_wait (290 µs), the transfer communication (35 µs): 75 + 325 + 20 = 420."""
    trace = _job([(300, 335, "fwd")], 300)
    cp = critical_path(trace)
    assert cp is not None and cp.length_ns == 420 * US
    comp = {r["category"]: r["ns"] for r in cp.composition.iter_rows(named=True)}
    assert comp[RANK_WAIT] == 290 * US and comp["communication"] == 35 * US
    assert cp.crossings is not None
    row = cp.crossings.row(0, named=True)
    assert cp.crossings.height == 1 and (row["on_path"], row["late_rank"], row["waiting_rank"]) == ("waited", 2, 0)
    assert (row["waited_ns"], row["cause_name"], row["cause_ns"]) == (290 * US, "", 0)
    from ktrace.presentation.summary_critical_path import crossing_rows

    shown = crossing_rows(cp)[0]  # a wait has no cause: "-" in the tables, not a blank and "0 ns"
    assert (shown["cause"], shown["cause_time_ns"], shown["waited_ns"]) == (None, None, 290 * US)
    # The all-reduce's item is its 35 µs transfer; the 290 µs wait is rank_wait, not the kernel's time.
    item = cp.items.filter(pl.col("name") == NCCL).row(0, named=True)
    assert (item["kind"], item["ns"]) == ("kernel", 35 * US)
    # A 2x faster all-reduce halves its 35 µs transfer, not rank 0's 290 µs wait: 17.5 µs saved.
    faster = cp.what_if.filter(pl.col("target") == NCCL).row(0, named=True)
    assert (faster["change"], faster["saved_ns"]) == ("2x faster", 17_500)
    # Rank 2 on time into the all-reduce: no rank waits, rank 0's path is 75 + 35 + 20 = 130 µs, longer than
    # rank 2's own chains (65 + 35 = 100 µs): 420 - 130 = 290 µs saved.
    on_time = cp.what_if.filter(pl.col("change") == "on time").row(0, named=True)
    assert on_time["target"] == "n0/2 into ncclKernel_AllReduce_RING_LL_Sum_float #0"
    assert on_time["saved_ns"] == 290 * US


def test_a_path_joining_ranks_says_how_they_were_joined() -> None:
    """Kernel records name no process group: ranks are matched by kernel name and order, which can join ranks of
    different groups (two SendRecv pairs): the summary says so whenever it joins ranks, and only then."""
    from ktrace.analysis.critical_path_summary import JOINED_BY_ORDER, critical_path_notes

    joined = critical_path(_job([(300, 335, "fwd")], 300))
    assert JOINED_BY_ORDER in critical_path_notes(joined)
    alone = critical_path(_job([(300, 335, "fwd")], 300), across_ranks=False)
    assert JOINED_BY_ORDER not in critical_path_notes(alone)


def test_one_rank_view_is_the_old_path() -> None:
    """across_ranks=False: rank 0 alone, its all-reduce span all communication, no rank_wait category."""
    trace = _job([(0, 335, "fwd"), (0, 300, "slow_op")], 300)
    cp = critical_path(trace, across_ranks=False)
    assert cp is not None and cp.ranks == 1 and cp.crossings is None
    assert cp.length_ns == 420 * US
    assert RANK_WAIT not in cp.composition["category"].to_list()
    assert "crossings" not in (critical_path_dict(cp) or {})


def test_collectives_are_keyed_by_order_per_kernel_name() -> None:
    trace = _job([(0, 335, "fwd")], 300)
    ix = TraceIndex.of(trace, None)
    keys, names = collective_keys(ix)
    assert names == [f"{NCCL}#0"]
    assert int((keys == 0).sum()) == 3 and int((keys == -1).sum()) == trace.kernels.height - 3


@pytest.mark.skipif(not DLRM.exists(), reason="DLRM fixture missing")
def test_dlrm_eight_ranks(tmp_path: Path) -> None:
    """The 8-rank DLRM job: every rank's ProfilerStep#10 joined; the path is at least as long as the longest
    one-rank path of the same step, and its collective time splits into communication and rank_wait."""
    from ktrace.fleet.folder_import import import_folder

    store = tmp_path / "dlrm.ktrace"
    import_folder(DLRM, store, workers=1)
    from ktrace.model import store as stores

    trace = stores.read(store)
    ix = TraceIndex.of(trace, None)
    cp = critical_path(trace, index=ix)
    assert cp is not None and cp.ranks == 8
    per_rank = max(
        p.length_ns
        for r in range(8)
        if (p := critical_path(trace, annotation="ProfilerStep#10", instance=r, index=ix, across_ranks=False))
    )
    assert cp.length_ns >= per_rank
    comp = {r["category"]: r["ns"] for r in cp.composition.iter_rows(named=True)}
    assert sum(comp.values()) == cp.length_ns
    keys, names = collective_keys(ix)
    assert len(names) == 3 + 5  # 3 all-reduces and 5 send/recvs, each run by all 8 ranks
    assert np.bincount(keys[keys >= 0]).tolist() == [8] * 8


def test_export_marks_land_on_the_rank_of_each_run() -> None:
    from ktrace.analysis.critical_path_marks import path_marks

    cp = critical_path(_job([(0, 335, "fwd"), (0, 300, "slow_op")], 300))
    assert cp is not None
    marks = path_marks(cp)
    assert {(m["rank"], m["message"].split(" ")[0]) for m in marks} >= {(2, "cpu"), (2, "gpu"), (0, "collective")}
    assert sum(m["end_ns"] - m["start_ns"] for m in marks if m["rank"] == 2) == 365 * US  # slow_op .. gemm end


def test_ranks_on_hosts_without_clock_alignment_get_a_note() -> None:
    """Rank 2 on another host and no clock alignment: still joined, with a note that the late rank is uncertain;
    the one-host job has no such note."""
    cp = critical_path(_job([(0, 335, "fwd"), (0, 300, "slow_op")], 300))
    assert cp is not None and cp.unaligned_hosts == 0
    assert not any("not aligned" in n for n in critical_path_notes(cp))
    late = _rank(2, [(0, 335, "fwd")], [(300, 310), (320, 330)], [(315, 365, "gemm"), (365, 400, NCCL)], node="n1")
    on_time = [_rank(r, [(0, 50, "fwd")], [(10, 20), (30, 40)], [(25, 75, "gemm"), (75, 400, NCCL)]) for r in (0, 1)]
    cp = critical_path(merge_traces([*on_time, late]))
    assert cp is not None and cp.ranks == 3 and cp.unaligned_hosts == 2
    assert any("2 hosts whose clocks are not aligned" in n for n in critical_path_notes(cp))


def test_tui_notice_names_the_waiting_share() -> None:
    """The TUI's `c` notice on a joined path says how much of it is waiting for another rank (rank 0's 290 µs of a
    420 µs path: 69 %)."""
    from ktrace.tui.critical_marks import critical_marks
    from ktrace.tui.index_build import build_index

    trace = _job([(300, 335, "fwd")], 300)
    ready = critical_marks(trace, None, build_index(trace))
    assert "69 % waiting for another rank" in ready.text


def _stepped(rank: int, steps: list[tuple[int, int, str]]) -> Trace:
    """One rank whose steps each hold one operator of the same span."""
    b = TraceBuilder("n0", rank)
    n = len(steps)
    spans = {"start_ns": [s[0] for s in steps], "end_ns": [s[1] for s in steps], "pid": [1] * n, "tid": [1] * n}
    b.add("ops", spans | {"name": ["op"] * n})
    names = {"name": [s[2] for s in steps], "domain": ["profiler_step"] * n}
    b.add("ranges", spans | names | {"depth": [0] * n, "on_gpu": [False] * n})
    return b.build()


def test_each_rank_contributes_its_window_of_the_same_step() -> None:
    """Rank 0's median step is ProfilerStep#1 [100, 200); rank 1 has it too, at [90, 210) (same name, nearest
    start); rank 2 numbered its steps differently: its step overlapping [100, 200) most is #8 [105, 195)."""
    from ktrace.analysis.critical_path import choose_window
    from ktrace.analysis.critical_path_ranks import rank_windows

    trace = merge_traces(
        [
            _stepped(0, [(0, 100, "ProfilerStep#0"), (100, 200, "ProfilerStep#1"), (200, 350, "ProfilerStep#2")]),
            _stepped(1, [(0, 90, "ProfilerStep#0"), (90, 210, "ProfilerStep#1"), (210, 300, "ProfilerStep#2")]),
            _stepped(2, [(0, 105, "ProfilerStep#7"), (105, 195, "ProfilerStep#8"), (195, 300, "ProfilerStep#9")]),
        ]
    )
    ix = TraceIndex.of(trace, None)
    found = choose_window(ix, None, 0)
    assert found is not None
    first, scope, _ = found
    windows = rank_windows(ix, first, scope, None, None)
    assert [(w.rank, w.start_ns, w.end_ns) for w in windows] == [(0, 100, 200), (1, 90, 210), (2, 105, 195)]
