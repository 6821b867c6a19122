"""collectives_skew.collective_skew: arrival skew (last start - first start) against transfer time (the last
arriver's kernel time) per collective instance, and the skew each rank and process group suffered, checked against
hand-computed values on generated 2-rank and 8-rank traces."""

from __future__ import annotations

from tests.real_traces import fixture_path

import ktrace
from ktrace.analysis.collectives_skew import MATCHED_BY_GROUP, MATCHED_BY_ORDER, ONE_RANK, collective_skew
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)"
SENDRECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long)"


def _ranks(kernels: dict[int, list[tuple[str, int, int]]], groups: dict[int, list[str]] | None = None) -> Trace:
    """A trace of one node: per rank, its kernels as (name, start_ns, duration_ns) and, if given, their process
    groups (Kineto's `Process Group Name`)."""
    b = TraceBuilder("n0", 0)
    for rank, rows in kernels.items():
        b.add(
            "kernels",
            {
                "start_ns": [s for _, s, _ in rows],
                "end_ns": [s + d for _, s, d in rows],
                "device": [rank] * len(rows),
                "stream": [7] * len(rows),
                "name": [n for n, _, _ in rows],
                "process_group": groups[rank] if groups else [None] * len(rows),
            },
            rank=rank,
        )
    return b.build()


def test_two_ranks_split_skew_from_transfer() -> None:
    trace = _ranks(
        {
            0: [(ALLREDUCE, 1_000, 500), ("sgemm", 2_000, 100), (ALLREDUCE, 5_000, 400)],
            1: [(ALLREDUCE, 1_300, 200), (ALLREDUCE, 4_900, 450)],
        }
    )
    skew = collective_skew(trace)
    assert (skew.matched_by, skew.reason, skew.caveat) == (MATCHED_BY_ORDER, None, "")
    rows = skew.instances.select("ranks", "first_start_ns", "last_rank", "skew_ns", "transfer_ns").rows()
    # first: rank 1 arrives 300 ns late and then takes 200; second: rank 0 arrives 100 ns late and takes 400
    assert rows == [(2, 1_000, 1, 300, 200), (2, 4_900, 0, 100, 400)]
    assert skew.per_rank.select("rank", "instances", "skew_suffered_ns").rows() == [(0, 2, 300), (1, 2, 100)]
    assert skew.per_group.rows() == [("[0, 1]", 2, 400, 400, 600)]


def test_eight_ranks_sum_what_each_rank_waited() -> None:
    # instance 1 (all-reduce): rank r starts at 1_000 + 10 r, rank 7 last (70 ns after rank 0), 50 ns each;
    # instance 2 (send/recv): rank r starts at 9_000 + 5 (7 - r), rank 0 last (35 ns), 20 ns for rank 0
    trace = _ranks(
        {r: [(ALLREDUCE, 1_000 + 10 * r, 50), (SENDRECV, 9_000 + 5 * (7 - r), 20 if r == 0 else 30)] for r in range(8)}
    )
    skew = collective_skew(trace)
    rows = skew.instances.select("name", "ranks", "last_rank", "skew_ns", "transfer_ns").rows()
    assert rows == [(ALLREDUCE, 8, 7, 70, 50), (SENDRECV, 8, 0, 35, 20)]
    waited = {r: (70 - 10 * r) + (35 - 5 * (7 - r)) for r in range(8)}  # last start - own start, both instances
    assert dict(skew.per_rank.select("rank", "skew_suffered_ns").rows()) == waited
    group = skew.per_group.row(0, named=True)
    assert group["process_group"] == "[0, 1, 2, 3, 4, 5, 6, 7]"
    assert (group["instances"], group["skew_ns"], group["transfer_ns"]) == (2, 105, 70)
    assert group["skew_suffered_ns"] == sum(waited.values())


def test_ranks_that_ran_a_collective_more_often_are_matched_by_their_shift() -> None:
    # rank 1's capture starts one all-reduce later: its first pairs with rank 0's second
    starts0 = [0, 13_000, 21_000, 38_000, 44_000]  # irregular, so only the right shift leaves a constant gap
    trace = _ranks({0: [(ALLREDUCE, s, 100) for s in starts0], 1: [(ALLREDUCE, s + 7, 100) for s in starts0[1:]]})
    skew = collective_skew(trace)
    assert skew.caveat.startswith("ranks ran different numbers of")
    assert skew.instances["skew_ns"].to_list() == [7, 7, 7, 7]


def test_process_groups_running_one_kernel_are_matched_apart() -> None:
    # 4 ranks all-reduce in group "dp" (rank r at 1_000 + 10 r, 50 ns each); ranks 0-1 then in "tp01" at 5_000 +
    # 20 r, ranks 2-3 in "tp23" earlier, at 500 + 20 (r - 2) (30 ns each). By kernel name and order alone rank 2's
    # first all-reduce (tp23) would pair with rank 0's first (dp).
    kernels, groups = {}, {}
    for r in range(4):
        dp, tp = (ALLREDUCE, 1_000 + 10 * r, 50), (ALLREDUCE, 5_000 + 20 * r if r < 2 else 500 + 20 * (r - 2), 30)
        kernels[r] = [dp, tp] if r < 2 else [tp, dp]
        groups[r] = ["dp", "tp01"] if r < 2 else ["tp23", "dp"]
    skew = collective_skew(_ranks(kernels, groups))
    assert skew.matched_by == MATCHED_BY_GROUP
    rows = skew.instances.select("process_group", "ranks", "last_rank", "skew_ns", "transfer_ns").rows()
    assert rows == [("tp23", 2, 3, 20, 30), ("dp", 4, 3, 30, 50), ("tp01", 2, 1, 20, 30)]
    assert skew.per_group.select("process_group", "skew_ns").rows() == [("dp", 30), ("tp01", 20), ("tp23", 20)]
    waited = dict(skew.per_rank.select("rank", "skew_suffered_ns").rows())
    assert waited == {0: 30 + 20, 1: 20 + 0, 2: 10 + 20, 3: 0 + 0}


def test_the_importer_keeps_the_process_group_name() -> None:
    kernels = ktrace.open(fixture_path("nccl")).kernels
    named = kernels.filter(kernels["process_group"].is_not_null())
    assert named.height == 21 and set(named["process_group"].cast(str)) == {"0"}  # as Kineto's args say


def test_one_rank_says_why() -> None:
    skew = collective_skew(ktrace.open(fixture_path("nccl")))
    assert (skew.reason, skew.matched_by, skew.instances.height) == (ONE_RANK, None, 0)


def test_the_dlrm_ranks_share_every_collective() -> None:
    skew = collective_skew(ktrace.open(fixture_path("dlrm")))
    assert skew.instances.height == 8 and set(skew.instances["ranks"]) == {8}
    assert skew.per_rank.height == 8
    assert skew.per_group["skew_suffered_ns"].sum() == skew.per_rank["skew_suffered_ns"].sum()
    assert (skew.instances["skew_ns"] >= 0).all() and (skew.instances["transfer_ns"] > 0).all()


def test_the_nccl_fixture_on_two_ranks_matches_within_its_process_group() -> None:
    """hta-a100-nccl-rank0of2 with a copy of its rank as rank 1, whose i-th collective starts i x 1 µs later: every
    one of its 21 collectives (15 all-reduce, 6 broadcast, all in group "0") is one instance, its skew that delay."""
    import polars as pl

    trace = ktrace.open(fixture_path("nccl"))
    k = trace.kernels
    comm = (pl.col("collective").is_not_null()).cast(pl.Int64)
    late = (comm.cum_sum() - 1).clip(lower_bound=0) * comm * 1_000  # order by start: the i-th collective i µs late
    ordered = k.sort("start_ns")
    copy = ordered.with_columns(
        pl.lit(1, pl.Int32).alias("rank"),
        (pl.col("start_ns") + late).alias("start_ns"),
        (pl.col("end_ns") + late).alias("end_ns"),
    )
    from dataclasses import replace

    skew = collective_skew(replace(trace, kernels=pl.concat([ordered, copy])))
    assert skew.matched_by == MATCHED_BY_GROUP and "no collective sequence number" in skew.matched_by
    assert skew.instances.height == 21 and set(skew.instances["process_group"]) == {"0"}
    by_start = skew.instances.sort("first_start_ns")
    assert by_start["skew_ns"].to_list() == [1_000 * i for i in range(21)]
    assert by_start["last_rank"].to_list()[1:] == [1] * 20
    durations = ordered.filter(pl.col("collective").is_not_null()).select(pl.col("end_ns") - pl.col("start_ns"))
    assert by_start["transfer_ns"].to_list() == durations.to_series().to_list()
    assert skew.per_rank.select("rank", "skew_suffered_ns").rows() == [(0, sum(1_000 * i for i in range(21))), (1, 0)]


def test_custom_all_reduce_kernels_are_collectives_as_everywhere_else() -> None:
    """breakdown.communication_names counts vLLM's custom all-reduce; an NCCL-only name pattern missed it."""
    custom = "void vllm::cross_device_reduce_1stage<half, 8>(vllm::RankData*, vllm::RankSignals, int)"
    skew = collective_skew(_ranks({0: [(custom, 1_000, 50)], 1: [(custom, 1_040, 30)]}))
    assert skew.instances.select("name", "skew_ns", "transfer_ns").rows() == [(custom, 40, 30)]
    assert skew.matched_by == MATCHED_BY_ORDER and "no collective sequence number" in skew.matched_by
