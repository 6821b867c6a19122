"""The RankSteps of several ranks at once, from the trace that holds them all (a fleet task's partitions): the
same values critical_path_parts.rank_steps gives on each rank's own trace, without its fixed costs per rank.

A fleet task (fleet.summary_map) reads a few dozen partitions as one trace for its partial, and each partition as
a trace of its own for what judges one rank alone. rank_steps on each of those paid ~5 ms a rank in polars calls on
tiny frames (the step ranges, the GPU columns, the kernels' name codes, the communication names: ~1.2 s of CPU on
256 DLRM ranks, every core's time the one-process summary does not spend). Here the step ranges of every rank are
found by one detect_steps per method on the joined trace, and the collectives by one pass over its GPU records;
each rank's share is then cut out. Both are per-rank computations (the ranges of one rank's threads; a rank's
communication kernels in start order), so a rank's share of the joined result is its own result. A rank whose
steps would be inferred (the "periodic" method: its own kernels' rhythm) takes rank_steps on its own trace.

Each rank's collective rows are left in its own TraceIndex, where rank_graph (the rank's graph of its window)
finds them rather than computing them again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ktrace.analysis.critical_path import median_step
from ktrace.analysis.critical_path_parts import (
    COLLECTIVE_ROWS,
    RankSteps,
    collective_rows_frame,
    operator_spans,
    rank_steps,
    step_methods,
)
from ktrace.analysis.critical_path_ranks import communication_records, range_rows
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.steps import detect_steps
from ktrace.model.trace import Trace

Part = tuple[str, int]


def ranks_steps(
    index: TraceIndex, parts: Sequence[Part], indexes: Sequence[TraceIndex], *, steps_pattern: str | None = None
) -> list[RankSteps]:
    """[rank_steps(indexes[i].trace, *parts[i], steps_pattern=, index=indexes[i]) for each i], computed on
    `index`, the TraceIndex of the trace joining them (store.read_each's: each partition's rows, in `parts`
    order, one block of each table)."""
    joined = index.trace
    own = [ix.trace for ix in indexes]
    _seed_collective_rows(index, parts, indexes)
    found = range_steps(joined, index, parts, steps_pattern)
    out = []
    for part, trace, ix in zip(parts, own, indexes, strict=True):
        if part not in found:  # no step ranges: its steps (if any) are inferred from its own kernels
            out.append(rank_steps(trace, *part, steps_pattern=steps_pattern, index=ix))
            continue
        method, steps = found[part]
        operator_span, cpu_span = operator_spans(trace)
        rows = ix.get(COLLECTIVE_ROWS, _unseeded)
        out.append(
            RankSteps(
                node=part[0],
                rank=part[1],
                method=method,
                steps=range_rows(steps),
                median=median_step(ix, steps),
                operator_span=operator_span,
                cpu_span=cpu_span,
                annotated=None,
                collectives=dict(rows.group_by("name").len().iter_rows()),
                kernels=trace.kernels.height,
                memory=trace.memory.height,
            )
        )
    return out


def range_steps(
    joined: Trace, index: TraceIndex, parts: Sequence[Part], pattern: str | None
) -> dict[Part, tuple[int, pl.DataFrame]]:
    """(method, steps) of every rank of `parts` that has step ranges, under the first method finding some on it."""
    wanted = set(parts)
    found: dict[Part, tuple[int, pl.DataFrame]] = {}
    for method, source in enumerate(step_methods(pattern)):
        if source == "periodic" or len(found) == len(wanted):
            break
        steps = detect_steps(joined, pattern, source, index=index)  # type: ignore[arg-type]
        if not steps.height:
            continue
        for (node, rank), mine in steps.partition_by("node", "rank", maintain_order=True, as_dict=True).items():
            key = (str(node), int(rank))
            if key in wanted and key not in found:
                found[key] = (method, mine)
    return found


def _seed_collective_rows(index: TraceIndex, parts: Sequence[Part], indexes: Sequence[TraceIndex]) -> None:
    """Each rank's collective rows (critical_path_parts.collective_rows: its communication kernels by start, their
    rows in its own trace), cut from the joined trace's, set in each rank's TraceIndex."""
    c = index.gpu_columns()
    codes, names = index.kernel_name_codes()
    rec = communication_records(index)  # by rank id, start, row: each rank's in its own order
    keys = c.rank_keys
    rank_of_id = [(str(n), int(r)) for n, r in keys.select("node", "rank").iter_rows()]
    first_kernel = np.cumsum([0] + [ix.trace.kernels.height for ix in indexes])
    at = {part: i for i, part in enumerate(parts)}
    ids = c.rank_id[rec]
    bounds = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1], True]) if rec.size else np.zeros(1, np.int64)
    mine: dict[int, np.ndarray] = {}
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        mine[at[rank_of_id[int(ids[lo])]]] = rec[lo:hi]
    for i, ix in enumerate(indexes):
        rows = mine.get(i, np.zeros(0, np.int64))
        frame = collective_rows_frame(rows - first_kernel[i], [names[k] for k in codes[rows].tolist()], c.end[rows])
        ix.seed((COLLECTIVE_ROWS, ()), frame)  # the key TraceIndex.get gives the slot


def _unseeded() -> pl.DataFrame:
    raise AssertionError("collective rows are seeded before use")
