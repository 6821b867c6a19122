"""The "per rank" rules' costliest inputs of each rank, cut from a fleet task's joined trace.

A fleet task (fleet.summary_map) runs the "per rank" rules on each of its ranks' own traces (rank_rules), while
its partial has already analysed the task's joined trace (several whole ranks, each one block of every table, in
the ranks' order: analysis.rank_index_seeds). An input that is per thread or per record is its rank's share of
the joined trace's, so each rank's index is seeded with that share instead of building it again:

- RooflineGap's modeled calls (hardware.GAP_INPUTS): a call's model, its outermost call and the GPU records it
  owns are all found on its own thread, so a rank's calls are the joined calls of its rows, in the same order
  (~12 ms of polars calls and cost models a DLRM rank, the costliest rule there).
- LowOccupancy's launch figures per kernel (kernels.kernel_figures: a kernel's duration, and its SM count by its
  own rank and device): the rank's block of the joined trace's kernels (~2.6 ms a DLRM rank).
- Its kernels' statistics per name (kernels.kernel_stats, LowOccupancy's and FP32Matmul's shares): the joined
  trace's per (node, rank, name), which groups each rank's kernels alone (~2.7 ms a DLRM rank); the shares are
  divided again as a one-rank trace divides them (a sum over a window rounds the last bit otherwise), and the launch
  figures' means are the rank's own.
- Its GPUs' busy time (utilization.busy_time per device: LowGPUUtilization's bins and span): the joined trace's
  rows of the rank, each device's union of its own records.
- The rank's training steps (steps.detect_steps with the defaults, which step_spans, the phases and the rules
  read): the rows of its ranges under the first method that finds some on it, each method's steps found per rank
  (analysis.critical_path_task_steps cuts the same; the task's critical path asks the joined trace for them too). A
  rank without step ranges (its steps inferred from its own kernels) finds its own (~4 ms a DLRM rank).

Nothing is seeded that an index computed already (TraceIndex.seed), and a layout not as described raises
(rank_index_seeds.table_blocks). The seeds go under the Slots the analyses keep these results by (KERNEL_STATS_SLOT,
STEPS_SLOT, ...): test_rank_rule_seeds checks that a seeded rank builds none of them, and that each equals its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ktrace.analysis.critical_path_task_steps import range_steps
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import (
    EFFICIENCY_COLUMNS,
    KERNEL_FIGURES_SLOT,
    KERNEL_STATS_SLOT,
    efficiency_means,
    efficiency_sums,
    kernel_figures,
    kernel_stats,
)
from ktrace.analysis.op_attribution import IS_OPERATOR
from ktrace.analysis.rank_index_seeds import table_blocks
from ktrace.analysis.roofline import modeled_calls, no_roofline_reason
from ktrace.analysis.rules.hardware import GAP_INPUTS, GapInputs
from ktrace.analysis.steps import STEPS_SLOT
from ktrace.analysis.utilization import BUSY_SLOT, busy_time

_PART_KEYS = {"node": pl.String, "rank": pl.Int32}


def seed_rule_inputs(joined: TraceIndex, indexes: Sequence[TraceIndex], parts: Sequence[tuple[str, int]]) -> None:
    """Seed each of `indexes` (the traces of `parts`, one (node, rank) each, in the joined trace's order, as
    rank_index_seeds.seed_rank_indexes takes them) with its share of `joined`'s rule inputs."""
    firsts = table_blocks(joined, indexes, parts)
    _seed_gap_inputs(joined, indexes, parts, firsts["ops"])
    figures, kernels = kernel_figures(joined.trace, index=joined), firsts["kernels"]
    for i, ix in enumerate(indexes):
        ix.seed((KERNEL_FIGURES_SLOT, ()), figures.slice(int(kernels[i]), int(kernels[i + 1] - kernels[i])))
    where = dict(zip(parts, indexes, strict=True))
    _seed_kernel_stats(joined, where)
    _seed_steps(joined, where)
    for part, busy in _by_rank(busy_time(joined.trace, "device", index=joined)).items():
        if part in where:  # a rank without GPU records has no row: its own (empty) frame
            where[part].seed((BUSY_SLOT, ("device",)), busy)


def _by_rank(frame: pl.DataFrame) -> dict[tuple[str, int], pl.DataFrame]:
    """`frame`'s rows per (node, rank), each in the frame's order."""
    found = frame.partition_by("node", "rank", maintain_order=True, as_dict=True)
    return {(str(node), int(rank)): rows for (node, rank), rows in found.items()}


def _seed_kernel_stats(joined: TraceIndex, where: dict[tuple[str, int], TraceIndex]) -> None:
    """kernel_stats(rank): its rows of the joined trace's per rank, with its own launch figures' means per name."""
    for part, rows in _by_rank(kernel_stats(joined.trace, per_rank=True, index=joined)).items():
        ix = where.get(part)
        if ix is None:
            continue
        means = efficiency_means(efficiency_sums(ix.trace, index=ix)).select("name", *EFFICIENCY_COLUMNS)
        stats = rows.drop("node", "rank").with_columns(  # shares of the rank's sums, as its own are divided
            time_share=pl.col("total_ns") / pl.col("total_ns").sum(),
            count_share=pl.col("count") / pl.col("count").sum(),
        )
        ix.seed(
            (KERNEL_STATS_SLOT, (False,)),
            stats.join(means, on="name", how="left", nulls_equal=True, maintain_order="left"),
        )


def _seed_steps(joined: TraceIndex, where: dict[tuple[str, int], TraceIndex]) -> None:
    """detect_steps(rank) with the defaults ("auto": ProfilerStep ranges, else step-named ranges, else periodic): the
    rank's steps under the first range method finding some on it (critical_path_task_steps.range_steps)."""
    for part, (_, steps) in range_steps(joined.trace, joined, list(where), None).items():
        where[part].seed((STEPS_SLOT, (None, "auto")), steps)


def _seed_gap_inputs(
    joined: TraceIndex, indexes: Sequence[TraceIndex], parts: Sequence[tuple[str, int]], op_firsts: np.ndarray
) -> None:
    found = modeled_calls(joined.trace, joined)
    ops = joined.trace.ops
    is_operator = ops.select(IS_OPERATOR).to_series().to_numpy() if ops.height else np.zeros(0, bool)
    operators = np.concatenate([[0], np.cumsum(is_operator, dtype=np.int64)])[op_firsts]
    bounds = _call_blocks(found.coded, parts) if found.reason is None else None
    for i, ix in enumerate(indexes):
        reason = no_roofline_reason(ix.trace.ops, int(operators[i + 1] - operators[i]))
        if reason is None and bounds is None:
            raise ValueError("rank_rule_seeds: a rank has modeled calls where the joined trace has none")
        c = ix.gpu_columns()
        total = int((c.end - c.start).astype(np.int64).sum())
        coded = pl.DataFrame() if reason is not None or bounds is None else found.coded[bounds[i] : bounds[i + 1]]
        ix.seed((GAP_INPUTS, ()), GapInputs(coded, total, reason))


def _call_blocks(coded: pl.DataFrame, parts: Sequence[tuple[str, int]]) -> np.ndarray:
    """The first row of each part's calls in `coded` (and the end): the calls are in ops order, so each part's
    are one block, in the parts' order (checked)."""
    order = pl.DataFrame(list(parts), schema=_PART_KEYS, orient="row").with_row_index("part")
    keys = coded.select(pl.col("node").cast(pl.String), pl.col("rank").cast(pl.Int32))
    part = keys.join(order, on=["node", "rank"], how="left", maintain_order="left")["part"]
    at = part.to_numpy()
    if part.null_count() or np.any(np.diff(at.astype(np.int64)) < 0):
        raise ValueError("rank_rule_seeds: the modeled calls are not one block per rank in the ranks' order")
    return np.searchsorted(at, np.arange(len(parts) + 1), "left")
