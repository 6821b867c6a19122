"""The slowest and fastest ranks of every step, and the straggler table: which ranks are slow and why.

API:

- ``stragglers_part(trace) -> StragglerPart``: the map side, from one rank's (or any subset's) records.
- ``combine_stragglers(parts, top=10) -> Stragglers``: the reduce side.
- ``stragglers(trace) -> Stragglers``: both over a whole trace (what summarize uses).

Two views of the same ranks. **waited_for** (analysis.waited_for): the ranks the others waited for at the
collectives, from the communication kernels' start times: what users mean by a straggler. The **step-time view**
(`table`, `per_step`, `causes`) below: the ranks with the most work per step.

A rank's **work** in a step is the step's duration less the rank's communication time in it. In synchronous
training every rank leaves a step at the same collective, so step durations barely differ; the ranks that wait
for a straggler spend the wait inside NCCL kernels. Work removes that wait: the straggler is the rank with the
most work. Without training steps, each rank's GPU span (first to last record) is its one step.

A straggler's **causes** are what it spends more time on, per step, than the median rank: its non-communication
kernels that start inside its steps (by name; the part keeps each rank's TOP_KERNELS kernels by time, a kernel
outside a rank's list counts 0 there), its GPU idle time inside the steps (GPU_IDLE) and its host synchronizing
calls inside the steps (SYNC_WAIT: the time a synchronizing call was in progress, clipped to the steps; a sync's
GPU record and its API call, or calls on two threads at once, count once).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.idle import SYNC_API_RE, sync_spans
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.names import short_kernel_name
from ktrace.analysis.rank_activity import rank_unions, step_activity
from ktrace.analysis.utilization import busy_time
from ktrace.analysis.waited_for import WINDOW_SCHEMA, WaitedFor, collapse_ties, collective_windows, waited_for
from ktrace.model.trace import Trace
from ktrace.model.units import format_ns

TOP_KERNELS = 32
"""Kernels (by time) each rank's part keeps for the causes."""
CAUSES = 3
"""Causes named per straggler."""
CAUSE_NAME_CHARS = 48
"""Kernel names in the causes text are shortened to this many characters."""
_STRAGGLERS = Slot["Stragglers"]("stragglers")
_KEYS = ["node", "rank"]
STEP_SCHEMA = pl.Schema(
    {
        "node": pl.String,
        "rank": pl.Int32,
        "step": pl.Int64,
        "start_ns": pl.Int64,
        "step_ns": pl.Int64,
        "busy_ns": pl.Int64,
        "comm_ns": pl.Int64,
    }
)
KERNEL_SCHEMA = pl.Schema({"node": pl.String, "rank": pl.Int32, "name": pl.String, "kernel_ns": pl.Int64})
WAIT_SCHEMA = pl.Schema({"node": pl.String, "rank": pl.Int32, "name": pl.String, "wait_ns": pl.Int64})
GPU_IDLE = "GPU idle"
"""Wait cause: time in the rank's steps with no GPU record running."""
SYNC_WAIT = "sync calls"
"""Wait cause: host synchronizing calls (syncs table, APIs named like Synchronize) inside the steps."""


@dataclass(frozen=True)
class StragglerPart:
    """What one worker returns for its ranks: small tables, a few rows per rank and step."""

    steps: pl.DataFrame
    """STEP_SCHEMA: per rank and step, its start, duration, busy and communication ns."""
    kernels: pl.DataFrame
    """KERNEL_SCHEMA: each rank's TOP_KERNELS non-communication kernels by summed duration."""
    waits: pl.DataFrame
    """WAIT_SCHEMA: each rank's waits inside its steps: GPU_IDLE (step time with no GPU record) and SYNC_WAIT."""
    basis: str
    """"steps" (training steps) or "span" (no steps: each rank's GPU span is one step)."""
    collectives: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=WINDOW_SCHEMA))
    """waited_for.WINDOW_SCHEMA: each communication kernel's start, end and what its window before it held (a few
    rows per rank and step)."""


@dataclass(frozen=True)
class Stragglers:
    """Slowest and fastest ranks per step and the ranks ordered by how much slower than the median they are."""

    basis: str
    """"steps" or "span" (see StragglerPart.basis)."""
    per_step: pl.DataFrame
    """step, ranks, median_work_ns, slowest_node, slowest_rank, slowest_work_ns, fastest_node, fastest_rank,
    fastest_work_ns, spread_pct (100 * (slowest - fastest) / median)."""
    table: pl.DataFrame
    """node, rank, steps, step_mean_ns, work_mean_ns, slower_pct (100 * (work / the median rank's - 1)),
    slowest_steps (steps in which it was the slowest), causes (text: the top CAUSES causes); sorted by
    slower_pct, largest first."""
    causes: pl.DataFrame
    """node, rank, kind ("kernel" | "wait"), name, rank_ns_per_step, median_ns_per_step, excess_ns_per_step:
    the top CAUSES causes of each of the `top` slowest ranks slower than the median."""
    waited: WaitedFor | None = None
    """The ranks the others waited for at the collectives (waited.table: Stragglers.waited_for)."""

    @property
    def step_time(self) -> pl.DataFrame:
        """`table` with the ranks of equal figures (slower % to 0.1, work and step time as format_ns shows them) in
        one row, `nodes` and `ranks` naming them, slowest_steps summed (on a tie the first rank is the slowest),
        the first rank's causes (only the `top` slowest have theirs named): a job tiled from a few ranks' files
        shows each file's ranks once."""
        shown = [
            pl.col("slower_pct").round(1).alias("shown_pct"),
            pl.col("work_mean_ns").map_elements(format_ns, pl.String).alias("shown_work"),
            pl.col("step_mean_ns").map_elements(format_ns, pl.String).alias("shown_step"),
        ]
        same = ["shown_pct", "shown_work", "shown_step"]
        found = collapse_ties(self.table.with_columns(*shown), same, summed=("slowest_steps",))
        return found.select(*self.table.columns, "nodes", "ranks")

    @property
    def waited_for(self) -> pl.DataFrame:
        """waited_for.TABLE_SCHEMA: node, rank, waited_ns_per_step, late_collectives, why, nodes, ranks; the rank
        the others waited for most first, ties in one row."""
        return self.waited.table if self.waited is not None else waited_for(pl.DataFrame(), 1).table


def stragglers_part(trace: Trace, *, index: TraceIndex | None = None) -> StragglerPart:
    """The per-rank rows of the straggler analysis; one rank's trace gives exactly that rank's rows."""
    ix = TraceIndex.of(trace, index)
    steps = step_activity(trace, index=ix).cast(STEP_SCHEMA)
    basis = "steps"
    if not steps.height:
        basis, steps = "span", _span_steps(ix)
    window = steps.group_by(_KEYS).agg(w0=pl.col("start_ns").min(), w1=(pl.col("start_ns") + pl.col("step_ns")).max())
    comm = communication_names(trace, index=ix)
    kernels = (
        _in_window(trace.kernels, window)
        .filter(~pl.col("name").cast(pl.String).is_in(comm) & pl.col("collective").is_null())
        .group_by(*_KEYS, pl.col("name").cast(pl.String))
        .agg(kernel_ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
        .sort(["node", "rank", "kernel_ns", "name"], descending=[False, False, True, False])
        .group_by(_KEYS, maintain_order=True)
        .head(TOP_KERNELS)
    )
    sync_ns = (
        window.select(_KEYS)
        .with_columns(wait_ns=pl.Series(_waited_ns(trace, window), dtype=pl.Int64), name=pl.lit(SYNC_WAIT))
        .filter(pl.col("wait_ns") > 0)
    )
    idle = (
        steps.group_by(_KEYS)
        .agg(wait_ns=(pl.col("step_ns") - pl.col("busy_ns")).sum())
        .with_columns(name=pl.lit(GPU_IDLE))
    )
    waits = pl.concat(
        [idle.cast(WAIT_SCHEMA).select(list(WAIT_SCHEMA)), sync_ns.cast(WAIT_SCHEMA).select(list(WAIT_SCHEMA))]
    )
    collectives = collective_windows(trace, steps=steps, index=ix)
    return StragglerPart(steps, kernels.cast(KERNEL_SCHEMA).select(list(KERNEL_SCHEMA)), waits, basis, collectives)


def _waited_ns(trace: Trace, window: pl.DataFrame) -> npt.NDArray[np.int64]:
    """Per window row: the time inside [w0, w1) during which the rank had a synchronizing call in progress (a sync
    record and its API call, or calls on two threads at once, count once: idle.sync_spans merges them)."""
    spans, group = sync_spans(trace, SYNC_API_RE, window)
    out = np.zeros(window.height, np.int64)
    for row, (g, w0, w1) in enumerate(zip(group.tolist(), window["w0"].to_list(), window["w1"].to_list(), strict=True)):
        if g >= 0:
            a, b = spans.bounds[g], spans.bounds[g + 1]
            out[row] = int(np.clip(np.minimum(spans.end[a:b], w1) - np.maximum(spans.start[a:b], w0), 0, None).sum())
    return out


def _in_window(frame: pl.DataFrame, window: pl.DataFrame) -> pl.DataFrame:
    """Rows of `frame` overlapping their rank's window [w0, w1), with node as String and the window columns."""
    keyed = frame.with_columns(pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int32))
    joined = keyed.join(window, on=_KEYS, how="inner")
    return joined.filter((pl.col("end_ns") > pl.col("w0")) & (pl.col("start_ns") < pl.col("w1")))


def _span_steps(ix: TraceIndex) -> pl.DataFrame:
    """One step per rank: its GPU span, with its busy and communication time."""
    busy = busy_time(ix.trace, per="rank", index=ix)
    u = rank_unions(ix.trace, index=ix)
    cg, cs, ce = u.comm
    comm = np.bincount(cg, weights=ce - cs, minlength=u.keys.height).astype(np.int64)
    comm_frame = u.keys.with_columns(comm_ns=pl.Series(comm, dtype=pl.Int64))
    out = busy.select(
        pl.col("node").cast(pl.String),
        pl.col("rank").cast(pl.Int32),
        pl.lit(0, pl.Int64).alias("step"),
        pl.col("first_ns").alias("start_ns"),
        pl.col("span_ns").alias("step_ns"),
        "busy_ns",
    ).join(comm_frame, on=_KEYS, how="left")
    return out.with_columns(pl.col("comm_ns").fill_null(0)).cast(STEP_SCHEMA).select(list(STEP_SCHEMA))


def combine_stragglers(parts: Iterable[StragglerPart], *, top: int = 10) -> Stragglers:
    """The straggler analysis of the ranks in `parts`; causes are named for the `top` slowest ranks."""
    parts = list(parts)
    steps = pl.concat([pl.DataFrame(schema=STEP_SCHEMA), *(p.steps for p in parts)])
    kernels = pl.concat([pl.DataFrame(schema=KERNEL_SCHEMA), *(p.kernels for p in parts)])
    waits = pl.concat([pl.DataFrame(schema=WAIT_SCHEMA), *(p.waits for p in parts)])
    basis = "steps" if any(p.basis == "steps" for p in parts) else "span"
    steps = steps.with_columns(work_ns=pl.col("step_ns") - pl.col("comm_ns")).sort("node", "rank", "step")
    per_step = _per_step(steps)
    table = _rank_table(steps, per_step)
    causes = _causes(table.filter(pl.col("slower_pct") > 0).head(top), steps, kernels, waits)
    text = causes.group_by(_KEYS, maintain_order=True).agg(
        causes=pl.struct("kind", "name", "excess_ns_per_step").map_elements(_cause_text, pl.String).str.join("; ")
    )
    table = table.join(text, on=_KEYS, how="left").with_columns(pl.col("causes").fill_null(""))
    windows = pl.concat([pl.DataFrame(schema=WINDOW_SCHEMA), *(p.collectives for p in parts)])
    n_steps = int(steps.group_by(_KEYS).len()["len"].max() or 1) if steps.height else 1  # type: ignore[arg-type]
    return Stragglers(basis, per_step, table, causes, waited_for(windows, n_steps))


def _cause_text(cause: dict[str, object]) -> str:
    """ "gemm +400 ns/step": kernel names shortened (names.short_kernel_name), the full names are in `causes`."""
    name = str(cause["name"])
    shown = short_kernel_name(name, CAUSE_NAME_CHARS) if cause["kind"] == "kernel" else name
    return f"{shown} +{format_ns(float(cause['excess_ns_per_step']))}/step"  # type: ignore[arg-type]


def _per_step(steps: pl.DataFrame) -> pl.DataFrame:
    """Slowest and fastest rank of each step (ties: the first by host and rank)."""
    if not steps.height:
        return pl.DataFrame(
            schema={
                "step": pl.Int64,
                "ranks": pl.UInt32,
                "median_work_ns": pl.Float64,
                "slowest_node": pl.String,
                "slowest_rank": pl.Int32,
                "slowest_work_ns": pl.Int64,
                "fastest_node": pl.String,
                "fastest_rank": pl.Int32,
                "fastest_work_ns": pl.Int64,
                "spread_pct": pl.Float64,
            }
        )
    work = pl.col("work_ns")
    out = steps.group_by("step").agg(
        ranks=pl.len(),
        median_work_ns=work.median().cast(pl.Float64),
        slowest_node=pl.col("node").get(work.arg_max()),
        slowest_rank=pl.col("rank").get(work.arg_max()),
        slowest_work_ns=work.max(),
        fastest_node=pl.col("node").get(work.arg_min()),
        fastest_rank=pl.col("rank").get(work.arg_min()),
        fastest_work_ns=work.min(),
    )
    spread = (pl.col("slowest_work_ns") - pl.col("fastest_work_ns")) / pl.col("median_work_ns")
    return out.with_columns(spread_pct=pl.when(pl.col("median_work_ns") > 0).then(100.0 * spread).otherwise(0.0)).sort(
        "step"
    )


def _rank_table(steps: pl.DataFrame, per_step: pl.DataFrame) -> pl.DataFrame:
    per_rank = steps.group_by(_KEYS).agg(
        steps=pl.len().cast(pl.Int64), step_mean_ns=pl.col("step_ns").mean(), work_mean_ns=pl.col("work_ns").mean()
    )
    median = per_rank["work_mean_ns"].median() if per_rank.height else None
    med = float(median) if isinstance(median, (int, float)) and median > 0 else None
    slowest = per_step.group_by("slowest_node", "slowest_rank").agg(slowest_steps=pl.len().cast(pl.Int64))
    slowest = slowest.rename({"slowest_node": "node", "slowest_rank": "rank"})
    return (
        per_rank.with_columns(
            slower_pct=(100.0 * (pl.col("work_mean_ns") / med - 1.0)) if med else pl.lit(0.0, pl.Float64)
        )
        .join(slowest, on=_KEYS, how="left")
        .with_columns(pl.col("slowest_steps").fill_null(0))
        .sort(["slower_pct", "node", "rank"], descending=[True, False, False])
        .select("node", "rank", "steps", "step_mean_ns", "work_mean_ns", "slower_pct", "slowest_steps")
    )


_CAUSE_SCHEMA = pl.Schema(
    {
        "node": pl.String,
        "rank": pl.Int32,
        "kind": pl.String,
        "name": pl.String,
        "rank_ns_per_step": pl.Float64,
        "median_ns_per_step": pl.Float64,
        "excess_ns_per_step": pl.Float64,
    }
)


def _causes(slow: pl.DataFrame, steps: pl.DataFrame, kernels: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """Per slow rank: the kernels and idle causes whose time per step most exceeds the median rank's."""
    n_steps = steps.group_by(_KEYS).agg(n=pl.len())
    n_ranks = n_steps.height
    per_step = [
        kernels.join(n_steps, on=_KEYS).select(
            *_KEYS, pl.lit("kernel").alias("kind"), "name", v=pl.col("kernel_ns") / pl.col("n")
        ),
        waits.join(n_steps, on=_KEYS).select(
            *_KEYS, pl.lit("wait").alias("kind"), "name", v=pl.col("wait_ns") / pl.col("n")
        ),
    ]
    values = pl.concat(per_step)
    wanted = values.join(slow.select(_KEYS), on=_KEYS, how="semi")
    if not wanted.height or n_ranks < 2:
        return pl.DataFrame(schema=_CAUSE_SCHEMA)
    names = wanted.select("kind", "name").unique()
    medians = (
        values.join(names, on=["kind", "name"], how="semi")
        .group_by("kind", "name")
        .agg(pl.col("v").alias("vals"))
        .with_columns(
            median_ns_per_step=pl.col("vals").map_elements(
                lambda v: _median_with_zeros(v.to_numpy(), n_ranks), pl.Float64
            )
        )
        .drop("vals")
    )
    found = (
        wanted.join(medians, on=["kind", "name"])
        .rename({"v": "rank_ns_per_step"})
        .with_columns(excess_ns_per_step=pl.col("rank_ns_per_step") - pl.col("median_ns_per_step"))
        .filter(pl.col("excess_ns_per_step") > 0)
    )
    order = slow.select(_KEYS).with_row_index("order")
    return (
        found.join(order, on=_KEYS)
        .sort(["order", "excess_ns_per_step", "kind", "name"], descending=[False, True, False, False])
        .group_by(_KEYS, maintain_order=True)
        .head(CAUSES)
        .cast(_CAUSE_SCHEMA)
        .select(list(_CAUSE_SCHEMA))
    )


def _median_with_zeros(values: npt.NDArray[np.float64], n: int) -> float:
    """Median of `values` padded with zeros to `n` entries (ranks without the kernel or wait spend 0)."""
    padded = np.zeros(max(n, values.size))
    padded[: values.size] = values
    return float(np.median(padded))


def stragglers(trace: Trace, *, top: int = 10, index: TraceIndex | None = None) -> Stragglers:
    """The straggler analysis of every rank of `trace` (shared through the index)."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_STRAGGLERS, lambda: combine_stragglers([stragglers_part(trace, index=ix)], top=top), top)
