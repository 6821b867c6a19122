"""The ranks the others waited for: per collective instance its last arriver, per rank the wait it caused.

In a synchronous job every rank's step ends at about the same time: the straggler is the rank that arrives last at
the collectives while the others spin inside their communication kernels. From the communication kernels' start
times (the kernels `breakdown.record_types` calls COMMUNICATION):

- **Instances.** One collective instance is the same collective on every rank that ran it. Instances are matched
  within each process group where the kernels name theirs (Kineto's `Process Group Name`, kernels.process_group),
  by kernel name and order (model.clock_matching.order_keys, as clock alignment matches collectives); else by
  kernel name and order alone. `matched_by` says which. No trace ktrace imports carries a collective's sequence
  number on its kernels, so order stands for it.
- **Last arriver.** The ranks that entered last, read against the instance's end on each rank's own clock
  (arrival = kernel start - kernel end: a collective ends together on every rank, so no clock alignment is needed;
  ties: every rank arriving at that time). The others wait `last arrival - their arrival`; the instance's
  `waited_ns` is that wait averaged over the others, its `lateness_ns` the last arrival less the median rank's. An
  instance nobody waited at (every rank arrived together) has no last arriver.
- **Per rank.** waited_ns_per_step: the waited_ns of the instances it arrived last at, summed and divided by the
  job's steps; late_collectives: how many. Why it was late: its window before each of those collectives (from the
  end of its previous communication kernel, or its first step's start or GPU record, to the late start) against the median over
  the instance's ranks of the same window: its compute kernels (union of the non-communication kernels), GPU idle
  time (CPU or launch gaps: no GPU record running), data loading (CPU ranges named like DataLoader) and sync calls
  (idle.sync_spans), each the excess per step over the median rank; `why` names the largest.
- **Ties collapse.** Ranks with the same waited time per step (as format_ns shows it), late collective count and
  why make one row of `table` ("ranks 5, 13, 21": rank_list).

The map side (`collective_windows`) needs one rank's records only: a worker holding one rank's partition gives
exactly that rank's rows, and `waited_for` over the rows of every rank equals the whole trace's result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.breakdown import KERNEL_TYPES, record_types
from ktrace.analysis.columns import node_rank_ids
from ktrace.analysis.idle import SYNC_API_RE, sync_spans
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rank_activity import covered_between, rank_unions
from ktrace.model.clock_matching import order_keys
from ktrace.model.trace import Trace
from ktrace.model.units import format_ns

I64 = npt.NDArray[np.int64]
DATA_LOADING_RE = r"DataLoader"
"""CPU range names that are data loading (PyTorch's `enumerate(DataLoader)#...__next__`)."""
COMPONENTS = ("compute", "gpu_idle", "data_loading", "sync")
"""What a window before a collective holds: columns `<component>_ns` of WINDOW_SCHEMA."""
WHY_TEXT = {
    "compute": "compute kernels",
    "gpu_idle": "CPU/launch gaps (GPU idle)",
    "data_loading": "data loading",
    "sync": "sync calls",
}
MATCHED_BY_ORDER = "kernel name and order"
MATCHED_BY_GROUP = "process group, kernel name and order"
NO_COLLECTIVES = "no communication kernels"
ONE_RANK = "one rank: no collective ran on 2 or more ranks"
NOBODY_WAITED = "every collective started at the same time on its ranks"
_KEYS = ["node", "rank"]
WINDOW_SCHEMA = pl.Schema(
    {
        "node": pl.String,
        "rank": pl.Int32,
        "name": pl.String,
        "process_group": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        **{f"{c}_ns": pl.Int64 for c in COMPONENTS},
    }
)
INSTANCE_SCHEMA = pl.Schema(
    {
        "key": pl.String,
        "name": pl.String,
        "ranks": pl.UInt32,
        "last_node": pl.String,
        "last_rank": pl.Int32,
        "last_start_ns": pl.Int64,
        "lateness_ns": pl.Float64,
        "waited_ns": pl.Float64,
        "end_ns": pl.Int64,
    }
)
PER_RANK_SCHEMA = pl.Schema(
    {
        "node": pl.String,
        "rank": pl.Int32,
        "waited_ns_per_step": pl.Float64,
        "late_collectives": pl.UInt32,
        "compute_excess_ns_per_step": pl.Float64,
        "gpu_idle_excess_ns_per_step": pl.Float64,
        "data_loading_excess_ns_per_step": pl.Float64,
        "sync_excess_ns_per_step": pl.Float64,
        "why": pl.String,
    }
)
TABLE_SCHEMA = pl.Schema(
    {
        "node": pl.String(),
        "rank": pl.Int32(),
        "waited_ns_per_step": pl.Float64(),
        "late_collectives": pl.UInt32(),
        "why": pl.String(),
        "nodes": pl.List(pl.String),
        "ranks": pl.List(pl.Int32),
    }
)


@dataclass(frozen=True)
class WaitedFor:
    """The collective instances' last arrivers and the wait each rank caused."""

    instances: pl.DataFrame
    """INSTANCE_SCHEMA: per instance at which a rank waited, its last arriver (one row per last rank on a tie)."""
    per_rank: pl.DataFrame
    """PER_RANK_SCHEMA: every rank that arrived last somewhere, the worst first."""
    table: pl.DataFrame
    """TABLE_SCHEMA: per_rank with ties collapsed (node, rank: the first of `nodes`, `ranks`), the worst first."""
    matched_by: str | None
    """MATCHED_BY_GROUP or MATCHED_BY_ORDER; None without instances."""
    caveat: str
    """order_keys' caveat (ranks ran different numbers of a kernel), "" when none."""
    reason: str | None
    """Why nobody is in the table (NO_COLLECTIVES, ONE_RANK, NOBODY_WAITED), None when someone is."""


def collective_windows(
    trace: Trace, *, steps: pl.DataFrame | None = None, index: TraceIndex | None = None
) -> pl.DataFrame:
    """WINDOW_SCHEMA: every communication kernel of every rank, with what its window before it held (see the module
    doc); one rank's trace gives exactly that rank's rows.

    Args:
        trace: the trace.
        steps: node, rank, start_ns of its steps (stragglers' STEP_SCHEMA): a rank's first window starts at its
            first step's start when that is before its first GPU record.
        index: the trace's TraceIndex, if one exists.
    """
    from ktrace.analysis._kernels.intervals import merge_intervals

    ix = TraceIndex.of(trace, index)
    k = trace.kernels
    is_comm = record_types(trace, index=ix)[: k.height] == KERNEL_TYPES.index("COMMUNICATION")
    if not is_comm.any():
        return pl.DataFrame(schema=WINDOW_SCHEMA)
    group = pl.col("process_group") if "process_group" in k.columns else pl.lit(None)
    comm = (
        k.filter(pl.Series(is_comm))
        .select(
            pl.col("node").cast(pl.String),
            pl.col("rank").cast(pl.Int32),
            pl.col("name").cast(pl.String),
            group.cast(pl.String).alias("process_group"),
            pl.col("start_ns").cast(pl.Int64),
            pl.col("end_ns").cast(pl.Int64),
        )
        .sort("node", "rank", "start_ns", "end_ns", "name")
    )
    u = rank_unions(trace, index=ix)
    ids = u.keys.with_row_index("gid").with_columns(pl.col("gid").cast(pl.Int64))
    comm = comm.join(ids, on=_KEYS, how="left", maintain_order="left")
    first = pl.DataFrame({"gid": u.busy[0], "first_ns": u.busy[1]}).group_by("gid").agg(pl.col("first_ns").min())
    if steps is not None and steps.height:
        first_step = steps.group_by(_KEYS).agg(step_ns=pl.col("start_ns").min()).join(ids, on=_KEYS)
        first = first.join(first_step.select("gid", "step_ns"), on="gid", how="left").select(
            "gid", first_ns=pl.min_horizontal("first_ns", "step_ns")
        )
    comm = comm.join(first, on="gid", how="left", maintain_order="left").with_columns(
        w0=pl.min_horizontal(
            pl.coalesce(pl.col("end_ns").cum_max().shift(1).over(_KEYS), pl.col("first_ns")), pl.col("start_ns")
        )
    )
    qg, a, b = comm["gid"].to_numpy(), comm["w0"].to_numpy(), comm["start_ns"].to_numpy()
    n = u.keys.height
    g, gid, s, e = ix.sorted_intervals("rank")
    compute = record_types(trace, index=ix)[g.perm] == KERNEL_TYPES.index("COMPUTATION")
    compute_ns = covered_between(*merge_intervals(gid[compute], s[compute], e[compute]), n, qg, a, b)
    busy_ns = covered_between(*u.busy, n, qg, a, b)
    sync = sync_spans(trace, SYNC_API_RE, u.keys)
    sync_ns = _covered_spans(sync, qg, a, b)
    data_ns = _covered_ranges(trace, u.keys, qg, a, b)
    return comm.select(
        *_KEYS,
        "name",
        "process_group",
        "start_ns",
        "end_ns",
        compute_ns=pl.Series(compute_ns, dtype=pl.Int64),
        gpu_idle_ns=pl.Series(b - a - busy_ns, dtype=pl.Int64),
        data_loading_ns=pl.Series(data_ns, dtype=pl.Int64),
        sync_ns=pl.Series(sync_ns, dtype=pl.Int64),
    ).cast(WINDOW_SCHEMA)


def _covered_spans(found: tuple[Any, I64], qg: I64, a: I64, b: I64) -> I64:
    """Time inside each window [a, b) of rank qg during which a sync call was in progress (found: idle.sync_spans'
    spans over its own rank groups, and the group of each rank qg)."""
    spans, group_of = found
    bounds: I64 = spans.bounds
    mg = np.repeat(np.arange(bounds.size - 1, dtype=np.int64), np.diff(bounds))
    sg = np.where(qg >= 0, group_of[np.maximum(qg, 0)], -1).astype(np.int64)
    return covered_between(mg, spans.start, spans.end, bounds.size - 1, sg, a, b)


def _covered_ranges(trace: Trace, keys: pl.DataFrame, qg: I64, a: I64, b: I64) -> I64:
    """Time inside each window [a, b) of rank qg (a row of `keys`) covered by the rank's data loading ranges."""
    from ktrace.analysis._kernels.intervals import merge_intervals

    r = trace.ranges
    names = r["name"].unique().cast(pl.String)
    loading = names.filter(names.str.contains(DATA_LOADING_RE)).to_list()
    found = r.filter(pl.col("name").cast(pl.String).is_in(loading) & ~pl.col("on_gpu"))
    if not found.height:
        return np.zeros(qg.size, np.int64)
    all_keys, (ids, key_ids) = node_rank_ids([found, keys])
    order = np.lexsort((found["start_ns"].to_numpy(), ids))
    mg, ms, me = merge_intervals(
        ids[order], found["start_ns"].to_numpy()[order].astype(np.int64), found["end_ns"].to_numpy()[order]
    )
    rg = np.where(qg >= 0, key_ids[np.maximum(qg, 0)], -1).astype(np.int64)
    return covered_between(mg, ms, me, all_keys.height, rg, a, b)


def _empty(reason: str, matched_by: str | None = None, caveat: str = "") -> WaitedFor:
    return WaitedFor(
        pl.DataFrame(schema=INSTANCE_SCHEMA),
        pl.DataFrame(schema=PER_RANK_SCHEMA),
        pl.DataFrame(schema=TABLE_SCHEMA),
        matched_by,
        caveat,
        reason,
    )


def waited_for(windows: pl.DataFrame, steps: int) -> WaitedFor:
    """The ranks the others waited for, from the collective_windows rows of every rank and the job's steps."""
    if not windows.height:
        return _empty(NO_COLLECTIVES)
    calls = windows.cast(WINDOW_SCHEMA).sort("node", "rank", "start_ns", "end_ns", "name")
    if calls.select(_KEYS).n_unique() < 2:
        return _empty(ONE_RANK)
    named = calls["process_group"].null_count() < calls.height
    match = pl.when(pl.col("process_group").is_not_null()).then(pl.format("pg {}: {}", "process_group", "name"))
    keys, caveat = order_keys(calls.select(*_KEYS, match.otherwise("name").alias("name"), "end_ns"))
    calls = calls.with_columns(keys["key"])
    matched_by = MATCHED_BY_GROUP if named else MATCHED_BY_ORDER
    shared = calls.filter(pl.len().over("key") >= 2)
    if not shared.height:
        return _empty(ONE_RANK, matched_by, caveat)
    late = _late_arrivals(shared)
    if not late.height:
        return _empty(NOBODY_WAITED, matched_by, caveat)
    per_rank = _per_rank(late, shared, max(1, steps))
    return WaitedFor(late.select(list(INSTANCE_SCHEMA)), per_rank, _collapsed(per_rank), matched_by, caveat, None)


def _late_arrivals(calls: pl.DataFrame) -> pl.DataFrame:
    """One row per (instance, rank arriving last) where some rank arrived earlier: INSTANCE_SCHEMA's columns.

    A rank's arrival is read against the instance's end on its own clock (`start - end`, the time it spent inside
    the collective before everyone left it), not as a start time compared across hosts: a collective ends at the
    same moment on every rank, so this needs no clock alignment, and hosts whose clocks are seconds apart (a store
    written without alignment) or microseconds apart (what alignment leaves) rank their arrivals alike."""
    arrival = pl.col("start_ns") - pl.col("end_ns")
    last = arrival.max().over("key")
    stats = calls.with_columns(
        arrival_ns=arrival,
        last_arrival_ns=last,
        is_last=arrival == last,
        ranks=pl.len().over("key").cast(pl.UInt32),
        lateness_ns=(last - arrival.median().over("key")).cast(pl.Float64),
        end_max=pl.col("end_ns").max().over("key"),
    )
    waited = (
        stats.filter(~pl.col("is_last"))
        .group_by("key")
        .agg(waited_ns=(pl.col("last_arrival_ns") - pl.col("arrival_ns")).mean().cast(pl.Float64))
    )
    return (
        stats.filter(pl.col("is_last"))
        .join(waited, on="key", how="inner")
        .select(
            "key",
            "name",
            "ranks",
            pl.col("node").alias("last_node"),
            pl.col("rank").alias("last_rank"),
            pl.col("start_ns").alias("last_start_ns"),
            "lateness_ns",
            "waited_ns",
            pl.col("end_max").alias("end_ns"),
        )
        .sort("last_start_ns", "key", "last_node", "last_rank")
        .cast(INSTANCE_SCHEMA)
    )


def _per_rank(late: pl.DataFrame, calls: pl.DataFrame, steps: int) -> pl.DataFrame:
    """Per rank arriving last somewhere: the wait it caused per step, its late collectives and why (vs median)."""
    cols = [f"{c}_ns" for c in COMPONENTS]
    medians = calls.group_by("key").agg(pl.col(c).median().alias(f"median_{c}") for c in cols)
    mine = calls.join(
        late.select("key", pl.col("last_node").alias("node"), pl.col("last_rank").alias("rank"), "waited_ns"),
        on=["key", *_KEYS],
    ).join(medians, on="key")
    excess = [
        ((pl.col(f"{c}_ns") - pl.col(f"median_{c}_ns")).sum() / steps).alias(f"{c}_excess_ns_per_step")
        for c in COMPONENTS
    ]
    out = mine.group_by(_KEYS).agg(
        (pl.col("waited_ns").sum() / steps).alias("waited_ns_per_step"),
        pl.len().cast(pl.UInt32).alias("late_collectives"),
        *excess,
    )
    why = [_why(row) for row in out.iter_rows(named=True)]
    return (
        out.with_columns(why=pl.Series(why, dtype=pl.String))
        .sort(["waited_ns_per_step", "node", "rank"], descending=[True, False, False])
        .cast(PER_RANK_SCHEMA)
        .select(list(PER_RANK_SCHEMA))
    )


def _why(row: dict[str, object]) -> str:
    """ "compute kernels +5.00 ms/step": the window component most above the median rank's; GPU idle explained by
    data loading or sync calls (half of it or more) names those first."""
    excess = {c: float(row[f"{c}_excess_ns_per_step"]) for c in COMPONENTS}  # type: ignore[arg-type]
    top = max(COMPONENTS, key=lambda c: (excess[c], -COMPONENTS.index(c)))
    if excess[top] <= 0:
        return "no more compute, gaps, data loading or sync than the median rank before its late starts"
    text = f"{WHY_TEXT[top]} +{format_ns(excess[top])}/step"
    if top == "gpu_idle":
        cpu = max(("data_loading", "sync"), key=lambda c: excess[c])
        if excess[cpu] >= 0.5 * excess[top]:
            text = f"{WHY_TEXT[cpu]} +{format_ns(excess[cpu])}/step, {text}"
    return text


def _collapsed(per_rank: pl.DataFrame) -> pl.DataFrame:
    """per_rank with the ranks of equal figures (waited per step as format_ns shows it, late count, why) in one
    row, in per_rank's order."""
    shown = pl.Series([format_ns(v) for v in per_rank["waited_ns_per_step"].to_list()], dtype=pl.String)
    found = collapse_ties(per_rank.with_columns(shown=shown), ["shown", "late_collectives", "why"])
    return found.cast(TABLE_SCHEMA).select(list(TABLE_SCHEMA))


def collapse_ties(frame: pl.DataFrame, same: list[str], summed: tuple[str, ...] = ()) -> pl.DataFrame:
    """`frame` (node, rank and figures, one row per rank, in the order to show) with the ranks whose `same` columns
    are equal in one row, where `frame` first has one of them: that first rank's columns (`summed` ones summed over
    the tied ranks), plus `nodes` and `ranks` (List) naming all of them."""
    rest = [c for c in frame.columns if c not in same]
    return frame.group_by(same, maintain_order=True).agg(
        *(pl.col(c).sum() if c in summed else pl.col(c).first() for c in rest),
        nodes=pl.col("node"),
        ranks=pl.col("rank"),
    )
