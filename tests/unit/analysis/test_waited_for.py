"""waited_for: the rank the others waited for at the collectives, from the communication kernels' start times; the
wait it caused per step, why it was late against the median rank, ties in one row; parts of single-rank traces
combine to the whole trace's result; process groups are matched apart."""

from __future__ import annotations

import pytest
from fleet_traces import GEMM_NS, LAYOUT, NCCL, SLOW_GEMM_NS, STEP_NS, STEPS, STRAGGLER, fleet_trace
from polars.testing import assert_frame_equal

from ktrace.analysis.stragglers import combine_stragglers, stragglers, stragglers_part
from ktrace.analysis.summary import summarize
from ktrace.analysis.waited_for import (
    MATCHED_BY_GROUP,
    MATCHED_BY_ORDER,
    NOBODY_WAITED,
    ONE_RANK,
    collective_windows,
    waited_for,
)
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace
from ktrace.presentation.summary_json import summary_to_dict


def _job(
    gemm_ns: dict[int, int], *, groups: dict[int, str] | None = None, loader: dict[int, int] | None = None
) -> Trace:
    """Ranks on host "h": per step a gemm of gemm_ns[rank] from the step start, then an all-reduce to the step's end
    (process group groups[rank] where given); loader[rank]: a DataLoader range of that many ns at the step start,
    the gemm starting after it."""
    b = TraceBuilder()
    for rank, gemm in gemm_ns.items():
        wait = (loader or {}).get(rank, 0)
        names, starts, ends = [], [], []
        for step in range(STEPS):
            t = step * STEP_NS
            names += ["gemm", NCCL]
            starts += [t + wait, t + wait + gemm]
            ends += [t + wait + gemm, t + STEP_NS]
        kernels: dict[str, list[object]] = {
            "start_ns": starts,
            "end_ns": ends,
            "device": [0] * len(names),
            "stream": [7] * len(names),
            "name": names,
        }
        if groups is not None:
            kernels["process_group"] = [None if n == "gemm" else groups[rank] for n in names]
        b.add("kernels", kernels, node="h", rank=rank)
        ranges = {"pid": [1] * STEPS, "tid": [1] * STEPS, "depth": [0] * STEPS, "on_gpu": [False] * STEPS}
        steps = {"start_ns": [s * STEP_NS for s in range(STEPS)], "end_ns": [(s + 1) * STEP_NS for s in range(STEPS)]}
        b.add(
            "ranges",
            {**ranges, **steps, "name": [f"ProfilerStep#{s}" for s in range(STEPS)], "domain": ["ktrace"] * STEPS},
            node="h",
            rank=rank,
        )
        if wait:
            b.add(
                "ranges",
                {
                    **ranges,
                    "start_ns": [s * STEP_NS for s in range(STEPS)],
                    "end_ns": [s * STEP_NS + wait for s in range(STEPS)],
                    "name": ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] * STEPS,
                    "domain": ["user_annotation"] * STEPS,
                    "depth": [1] * STEPS,
                },
                node="h",
                rank=rank,
            )
    return b.build()


def test_the_planted_straggler_is_the_rank_the_others_waited_for() -> None:
    s = stragglers(fleet_trace())
    assert s.waited is not None and s.waited.matched_by == MATCHED_BY_ORDER and s.waited.reason is None
    first = s.waited_for.row(0, named=True)
    assert (first["node"], first["rank"]) == STRAGGLER and s.waited_for.height == 1
    # every other rank started its all-reduce at GEMM_NS, the straggler at SLOW_GEMM_NS: each waited 400 ns a step
    assert first["waited_ns_per_step"] == SLOW_GEMM_NS - GEMM_NS
    assert first["late_collectives"] == STEPS
    assert first["why"] == "compute kernels +400 ns/step"
    late = s.waited.instances
    assert late.height == STEPS and set(late["last_rank"]) == {STRAGGLER[1]}
    assert late["lateness_ns"].to_list() == [float(SLOW_GEMM_NS - GEMM_NS)] * STEPS


def test_the_waits_divide_by_the_steps_and_average_over_the_others() -> None:
    w = stragglers(_job({0: 100, 1: 300, 2: 500, 3: 900})).waited_for
    # rank 3 is last at each step's all-reduce; the others waited 800, 600 and 400 ns: 600 ns on average
    assert w["rank"].to_list() == [3] and w["waited_ns_per_step"].to_list() == [600.0]
    assert w["late_collectives"].to_list() == [STEPS]


def test_ranks_equally_late_for_the_same_reason_are_one_row() -> None:
    """Five copies of one slow rank (the fleet job's template ranks): one row naming them all, not five."""
    gemm = {r: GEMM_NS for r in range(16)} | {r: SLOW_GEMM_NS for r in (5, 13, 21, 29, 37)}
    s = stragglers(_job(gemm))
    assert s.waited is not None and s.waited.per_rank.height == 5
    assert s.waited_for.height == 1
    row = s.waited_for.row(0, named=True)
    assert row["ranks"] == [5, 13, 21, 29, 37] and (row["node"], row["rank"]) == ("h", 5)
    assert row["why"] == "compute kernels +400 ns/step" and row["waited_ns_per_step"] == SLOW_GEMM_NS - GEMM_NS


def test_the_step_time_view_shows_equal_ranks_once() -> None:
    """The old straggler table listed five identical copies of one slow rank; its step-time view keeps every rank in
    `table` (the JSON) and shows them as one row."""
    gemm = {r: GEMM_NS for r in range(16)} | {r: SLOW_GEMM_NS for r in (5, 13, 21, 29, 37)}
    s = stragglers(_job(gemm))
    assert s.table.height == 19
    view = s.step_time
    assert view["ranks"].to_list() == [[5, 13, 21, 29, 37], [r for r in range(16) if r not in (5, 13)]]
    first = view.row(0, named=True)
    assert first["slower_pct"] == pytest.approx(100 * (SLOW_GEMM_NS / GEMM_NS - 1))
    assert first["slowest_steps"] == STEPS and first["causes"].startswith("gemm +400 ns/step")


def test_late_after_data_loading_says_so() -> None:
    s = stragglers(_job({0: GEMM_NS, 1: GEMM_NS, 2: GEMM_NS}, loader={2: 250}))
    row = s.waited_for.row(0, named=True)
    assert row["rank"] == 2 and row["waited_ns_per_step"] == 250
    assert row["why"].startswith("data loading +250 ns/step, CPU/launch gaps (GPU idle) +250 ns/step")


def test_process_groups_are_matched_apart() -> None:
    """Ranks 0, 1 all-reduce in group "a", ranks 2, 3 in "b", at other times: by name and order alone the i-th
    kernels of all four would be one instance; by group, each group's late rank is its own."""
    s = stragglers(_job({0: 100, 1: 300, 2: 600, 3: 700}, groups={0: "a", 1: "a", 2: "b", 3: "b"}))
    assert s.waited is not None and s.waited.matched_by == MATCHED_BY_GROUP
    assert set(s.waited.instances["ranks"]) == {2}
    assert s.waited_for["rank"].to_list() == [1, 3]
    assert s.waited_for["waited_ns_per_step"].to_list() == [200.0, 100.0]


def test_parts_of_single_rank_traces_combine_to_the_whole() -> None:
    parts = [stragglers_part(fleet_trace(layout=(key,))) for key in reversed(LAYOUT)]
    combined, whole = combine_stragglers(parts), stragglers(fleet_trace())
    assert combined.waited is not None and whole.waited is not None
    assert_frame_equal(combined.waited_for, whole.waited_for)
    assert_frame_equal(combined.waited.per_rank, whole.waited.per_rank)
    assert_frame_equal(combined.waited.instances, whole.waited.instances)


def test_nobody_late_and_one_rank_say_why() -> None:
    same = stragglers(_job({0: GEMM_NS, 1: GEMM_NS}))
    assert same.waited is not None and same.waited.reason == NOBODY_WAITED and same.waited_for.is_empty()
    one = waited_for(collective_windows(fleet_trace(layout=(("a", 0),))), STEPS)
    assert one.reason == ONE_RANK and one.table.is_empty()


def test_the_summary_json_lists_waited_for_worst_first() -> None:
    found = summary_to_dict(summarize(fleet_trace()))["stragglers"]
    assert found["waited_for_matched_by"] == MATCHED_BY_ORDER
    assert found["waited_for"] == [
        {
            "node": STRAGGLER[0],
            "rank": STRAGGLER[1],
            "waited_ns_per_step": pytest.approx(SLOW_GEMM_NS - GEMM_NS),
            "late_collectives": STEPS,
            "why": "compute kernels +400 ns/step",
            "nodes": [STRAGGLER[0]],
            "ranks": [STRAGGLER[1]],
        }
    ]


def test_the_planted_straggler_is_found_on_hosts_whose_clocks_are_seconds_apart() -> None:
    """A store written without clock alignment (generate_fleet's hosts are up to 2 s apart): arrivals are read
    against each collective's end on the rank's own clock, so the planted rank is first, not a rank of the host
    whose clock runs latest (node5/47 at 1.45 s per step, when starts were compared across hosts)."""
    from ktrace.testing.fleet import FleetConfig, generate_fleet

    job = generate_fleet(FleetConfig(ranks=16, hosts=4, steps=4))
    assert job.straggler is not None and max(abs(v) for v in job.offsets_ns.values()) > 100_000_000
    found = stragglers(job.trace).waited_for
    first = found.row(0, named=True)
    assert (first["node"], first["rank"]) == job.straggler
    assert first["waited_ns_per_step"] < 10_000_000  # a step's worth, not the hosts' clock offsets
