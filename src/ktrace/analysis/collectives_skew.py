"""Arrival skew of NCCL collectives across ranks, split from transfer time as TraceLens splits them.

One collective instance is the same collective on every rank that ran it. TraceLens matches instances by process
group and the collective's sequence number; no trace ktrace imports carries that number on its kernels (Kineto's
`record_param_comms` args name the group, its ranks and sizes, not a sequence: see hta-a100-nccl-rank0of2), so the
fallback is order, said in `matched_by`: the i-th kernel of a name on each rank (model.clock_matching.order_keys,
each rank's order shifted to fit when ranks ran different numbers of it), counted within each process group where
the kernels name theirs (Kineto's `Process Group Name`, kernels.process_group: two groups running the same kernel
are then never mixed). The communication kernels are those every other view counts (breakdown.communication_names:
NCCL/RCCL and custom all-reduce kernels) and any kernel with a `collective` arg. For an instance:
- arrival skew = last start - first start (the time the first arriver waits for the last);
- transfer time = the last arriver's kernel time (from its start, everyone is there);
- each rank suffers last start - its own start.
An instance's process group is the group's name where the kernels carry it, else the ranks that ran it
("[0, 1, 2, 3]", as Kineto writes `Process Group Ranks`).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.index import TraceIndex
from ktrace.model.clock_matching import order_keys
from ktrace.model.trace import Trace

NO_COLLECTIVES = "no collectives: no NCCL kernel in this trace"
NO_SEQUENCE = "no collective sequence number in the trace"
MATCHED_BY_ORDER = f"kernel name and order ({NO_SEQUENCE}, no process group)"
MATCHED_BY_GROUP = f"process group, kernel name and order ({NO_SEQUENCE})"
ONE_RANK = "one rank: arrival skew needs the same collective on 2 or more ranks"
NO_SHARED = "no collective ran on 2 or more ranks"

INSTANCE_SCHEMA = {
    "key": pl.String,
    "name": pl.String,
    "process_group": pl.String,
    "ranks": pl.UInt32,
    "first_start_ns": pl.Int64,
    "last_rank": pl.Int32,
    "skew_ns": pl.Int64,
    "transfer_ns": pl.Int64,
}
PER_RANK_SCHEMA = {"node": pl.String, "rank": pl.Int32, "instances": pl.UInt32, "skew_suffered_ns": pl.Int64}
PER_GROUP_SCHEMA = {
    "process_group": pl.String,
    "instances": pl.UInt32,
    "skew_ns": pl.Int64,
    "skew_suffered_ns": pl.Int64,
    "transfer_ns": pl.Int64,
}


@dataclass(frozen=True)
class CollectiveSkew:
    """Arrival skew against transfer time per collective instance, and the skew each rank and group suffered."""

    instances: pl.DataFrame
    """INSTANCE_SCHEMA: one row per collective instance run by 2+ ranks, in order of its first start."""
    per_rank: pl.DataFrame
    """PER_RANK_SCHEMA: per rank, the instances it ran and the time it waited for their last arrivers."""
    per_group: pl.DataFrame
    """PER_GROUP_SCHEMA: per process group (its ranks), instances, total skew, total waited, total transfer."""
    matched_by: str | None
    """How instances were matched across ranks (MATCHED_BY_ORDER); None when none were."""
    caveat: str
    """order_keys' caveat (ranks ran different numbers of a kernel), "" when none."""
    reason: str | None
    """Why there are no instances (ONE_RANK, NO_SHARED), None when there are."""


def comm_kernels(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """The communication kernels of `trace`: breakdown.communication_names' names, or a `collective` arg."""
    kernels = trace.kernels
    if kernels.is_empty():
        return kernels
    is_comm = pl.col("name").cast(pl.String).is_in(communication_names(trace, index=index))
    if "collective" in kernels.columns:
        is_comm = is_comm | pl.col("collective").is_not_null()
    return kernels.filter(is_comm)


def _empty(reason: str, caveat: str = "") -> CollectiveSkew:
    return CollectiveSkew(
        instances=pl.DataFrame(schema=INSTANCE_SCHEMA),
        per_rank=pl.DataFrame(schema=PER_RANK_SCHEMA),
        per_group=pl.DataFrame(schema=PER_GROUP_SCHEMA),
        matched_by=None,
        caveat=caveat,
        reason=reason,
    )


def collective_skew(
    trace: Trace, *, comm: pl.DataFrame | None = None, index: TraceIndex | None = None
) -> CollectiveSkew:
    """Arrival skew and transfer time of each collective instance across the ranks of `trace`.

    Args:
        trace: the trace.
        comm: its NCCL kernels (comm_kernels), if the caller has them.
        index: the trace's TraceIndex, if one exists (communication_names is shared through it).

    Returns:
        CollectiveSkew; empty with a `reason` without NCCL kernels, with fewer than 2 ranks or no collective shared by 2 of them.
    """
    return comm_skew(comm_kernels(trace, index=index) if comm is None else comm)


def comm_skew(comm: pl.DataFrame) -> CollectiveSkew:
    """collective_skew of a trace's NCCL kernels (comm_kernels: node, rank, name, start_ns, end_ns and, where the
    trace has it, process_group; the fleet reduce passes every rank's)."""
    if comm.is_empty():
        return _empty(NO_COLLECTIVES)
    group = pl.col("process_group") if "process_group" in comm.columns else pl.lit(None)
    calls = comm.select(
        pl.col("node").cast(pl.String),
        pl.col("rank").cast(pl.Int32),
        pl.col("name").cast(pl.String),
        pl.col("start_ns").cast(pl.Int64),
        pl.col("end_ns").cast(pl.Int64),
        group.cast(pl.String).alias("group"),
    ).sort("node", "rank", "start_ns", maintain_order=True)
    if calls.select("node", "rank").n_unique() < 2:
        return _empty(ONE_RANK)
    by_group = calls["group"].null_count() < calls.height
    # within a named process group, the order counts that group's kernels only
    match = pl.when(pl.col("group").is_not_null()).then(pl.format("pg {}: {}", "group", "name")).otherwise("name")
    keys, caveat = order_keys(calls.select("node", "rank", match.alias("name"), "end_ns"))
    calls = calls.with_columns(keys["key"])
    instances = _instances(calls)
    if instances.is_empty():
        return _empty(NO_SHARED, caveat)
    waits = calls.join(instances.select("key", "last_start_ns", "process_group"), on="key", how="inner").with_columns(
        (pl.col("last_start_ns") - pl.col("start_ns")).alias("skew_suffered_ns")
    )
    per_rank = (
        waits.group_by("node", "rank")
        .agg(pl.len().alias("instances"), pl.col("skew_suffered_ns").sum())
        .sort("node", "rank")
    )
    suffered = waits.group_by("process_group").agg(pl.col("skew_suffered_ns").sum())
    per_group = (
        instances.group_by("process_group")
        .agg(pl.len().alias("instances"), pl.col("skew_ns").sum(), pl.col("transfer_ns").sum())
        .join(suffered, on="process_group")
        .sort("skew_ns", "process_group", descending=[True, False])
    )
    return CollectiveSkew(
        instances=instances.select([pl.col(c).cast(t) for c, t in INSTANCE_SCHEMA.items()]),
        per_rank=per_rank.select([pl.col(c).cast(t) for c, t in PER_RANK_SCHEMA.items()]),
        per_group=per_group.select([pl.col(c).cast(t) for c, t in PER_GROUP_SCHEMA.items()]),
        matched_by=MATCHED_BY_GROUP if by_group else MATCHED_BY_ORDER,
        caveat=caveat,
        reason=None,
    )


def _instances(calls: pl.DataFrame) -> pl.DataFrame:
    """One row per key run by 2+ ranks: first start, last arriver, skew, transfer, and its process group (the
    group's name, else the ranks that ran it)."""
    return (
        calls.sort("start_ns", "node", "rank")
        .group_by("key", maintain_order=True)
        .agg(
            pl.col("name").first(),
            pl.len().alias("ranks"),
            pl.col("start_ns").min().alias("first_start_ns"),
            pl.col("start_ns").max().alias("last_start_ns"),
            pl.col("rank").last().alias("last_rank"),
            (pl.col("end_ns") - pl.col("start_ns")).last().alias("transfer_ns"),
            pl.col("rank").sort().cast(pl.String).str.join(", ").alias("process_group"),
            pl.col("group").drop_nulls().first(),
        )
        .filter(pl.col("ranks") >= 2)
        .with_columns(
            pl.coalesce("group", pl.format("[{}]", "process_group")).alias("process_group"),
            (pl.col("last_start_ns") - pl.col("first_start_ns")).alias("skew_ns"),
        )
        .sort("first_start_ns", "key")
    )
