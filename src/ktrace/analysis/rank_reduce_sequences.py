"""kernel_sequences of a many-rank job from every rank's sequence counts (kernel_sequences.sequence_counts).

A stream belongs to one rank, so a sequence's non-overlapping occurrences, its streams and its time add up exactly
over the ranks; a sequence is repeated when its job-wide count is 2 or more (once on each of two ranks counts).
Ties are broken by the kernel names, as one process breaks them (its sequence ids are in name order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernel_sequences import DEFAULT_LENGTH, KernelSequences, sequence_counts
from ktrace.model.trace import Trace

_SEQUENCE_TOP = 10
"""kernel_sequences' default `top` (what summarize shows)."""
_COUNT_SCHEMA: dict[str, pl.DataType] = {
    "kernels": pl.List(pl.String),
    "count": pl.Int64(),
    "streams": pl.Int64(),
    "total_ns": pl.Int64(),
}


@dataclass(frozen=True)
class SequencePart:
    """One slice's kernel sequences (every one, repeated there or not) and kernel time; `found` False where
    kernel_sequences gives None (no stream with DEFAULT_LENGTH kernels)."""

    counts: pl.DataFrame
    kernel_time: int
    found: bool


def sequence_part(trace: Trace, *, index: TraceIndex | None = None) -> SequencePart:
    """The slice's SequencePart."""
    got = sequence_counts(trace, index=index)
    if got is None:
        return SequencePart(pl.DataFrame(schema=_COUNT_SCHEMA), 0, False)
    return SequencePart(got[0], got[1], True)


def merge_sequences(parts: Sequence[SequencePart]) -> SequencePart:
    """Several parts as one: counts, streams and times summed per sequence."""
    frames = [p.counts for p in parts if p.counts.height]
    counts = (
        pl.concat(frames).group_by("kernels").agg(pl.col("count", "streams", "total_ns").sum())
        if frames
        else parts[0].counts
    )
    return SequencePart(counts, sum(p.kernel_time for p in parts), any(p.found for p in parts))


def job_sequences(part: SequencePart) -> KernelSequences | None:
    """kernel_sequences of the whole job (from the merge of every rank's part)."""
    if not part.found:
        return None
    repeated = part.counts.filter(pl.col("count") >= 2).with_columns(_key=pl.col("kernels").list.join("\x00"))
    best = repeated.sort(["count", "total_ns", "_key"], descending=[True, True, False]).head(_SEQUENCE_TOP)
    table = best.select(
        "kernels",
        "count",
        "streams",
        "total_ns",
        (pl.col("total_ns") / pl.col("count")).alias("mean_ns"),
        (pl.col("total_ns") / max(part.kernel_time, 1)).alias("time_share"),
    )
    return KernelSequences(length=DEFAULT_LENGTH, distinct=repeated.height, top=table)
