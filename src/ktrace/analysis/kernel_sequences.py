"""Frequent kernel sequences: the same run of consecutive kernels on one stream, repeated (fusion candidates).

HTA's "frequent CUDA kernel sequences" in spirit: on each stream, kernels in start order (memory operations
left out) are cut into windows of `length` consecutive kernels; a sequence is the tuple of kernel names of a
window. Occurrences of one sequence never overlap (counted greedily from the start of each stream), so
"aaaa" holds two occurrences of "aa", not three, and the total time counts each kernel at most once per
sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.analysis.columns import dense_ids
from ktrace.analysis.index import TraceIndex
from ktrace.model.trace import Trace

DEFAULT_LENGTH = 3
"""Kernels per sequence (HTA's min_pattern_len default)."""
SEQUENCE_COLUMNS = ("kernels", "count", "streams", "total_ns", "mean_ns", "time_share")
"""Columns of KernelSequences.top, in order."""


@dataclass(frozen=True)
class KernelSequences:
    """The most frequent kernel sequences of one length (see the module docstring)."""

    length: int
    """Kernels per sequence."""
    distinct: int
    """Distinct sequences that occur at least twice."""
    top: pl.DataFrame
    """SEQUENCE_COLUMNS: kernel names (a list), non-overlapping occurrences, streams where it occurs, total and
    mean time (sum of the kernels' durations per occurrence), share of all kernel time. By count, then total
    time, descending."""


def kernel_sequences(
    trace: Trace, *, length: int = DEFAULT_LENGTH, top: int = 10, index: TraceIndex | None = None
) -> KernelSequences | None:
    """The `top` sequences of `length` consecutive kernels repeated most often on a stream.

    Returns:
        KernelSequences (its table empty when nothing repeats); None when no stream has `length` kernels.
    """
    found = _occurrences(trace, length, TraceIndex.of(trace, index))
    if found is None:
        return None
    per, uniq, names, kernel_time = found
    repeated = per.filter(pl.col("count") >= 2)
    best = repeated.sort(["count", "total_ns", "seq"], descending=[True, True, False]).head(top)
    table = best.select(
        _labels(best["seq"].to_numpy(), uniq, names),
        pl.col("count").cast(pl.Int64),
        pl.col("streams").cast(pl.Int64),
        pl.col("total_ns").cast(pl.Int64),
        (pl.col("total_ns") / pl.col("count")).alias("mean_ns"),
        (pl.col("total_ns") / max(kernel_time, 1)).alias("time_share"),
    )
    return KernelSequences(length=length, distinct=repeated.height, top=table)


def sequence_counts(
    trace: Trace, *, length: int = DEFAULT_LENGTH, index: TraceIndex | None = None
) -> tuple[pl.DataFrame, int] | None:
    """Every sequence of `length` kernels (repeated or not), for the fleet reduce to add up over ranks (a stream
    lies in one rank): (``kernels``, ``count``, ``streams``, ``total_ns``; the trace's kernel time), None as
    kernel_sequences."""
    found = _occurrences(trace, length, TraceIndex.of(trace, index))
    if found is None:
        return None
    per, uniq, names, kernel_time = found
    table = per.select(
        _labels(per["seq"].to_numpy(), uniq, names),
        pl.col("count").cast(pl.Int64),
        pl.col("streams").cast(pl.Int64),
        pl.col("total_ns").cast(pl.Int64),
    )
    return table, kernel_time


def _labels(ids: np.ndarray, uniq: list[np.ndarray], names: list[str]) -> pl.Series:
    length = len(uniq)
    label = [[names[int(uniq[j][i])] if uniq[j][i] >= 0 else "" for j in range(length)] for i in ids]
    return pl.Series("kernels", label, dtype=pl.List(pl.String))


def _occurrences(
    trace: Trace, length: int, ix: TraceIndex
) -> tuple[pl.DataFrame, list[np.ndarray], list[str], int] | None:
    """Per sequence id (lexicographic in its names): non-overlapping occurrences, streams and total time; the
    ids' name codes, the names, and the kernel time of the trace."""
    from ktrace.analysis._kernels.sequences import first_fit_occurrences

    if length < 1:
        raise ValueError(f"kernel sequence length must be >= 1 (got {length})")
    c = ix.gpu_columns()
    groups = ix.row_groups("stream")
    # one pass over each per-record array, no copy where nothing is dropped: at 20 M kernels every array is 160 MB
    if groups.n_groups == 1:
        gid = np.zeros(groups.perm.size, np.int64)  # calloc'd: never written
    else:
        gid = np.repeat(np.arange(groups.n_groups, dtype=np.int64), np.diff(groups.bounds))
    rows = groups.perm
    if c.size > c.n_kernels:  # memory ops: keep the kernels
        is_kernel = rows < c.n_kernels
        rows, gid = rows[is_kernel], gid[is_kernel]
        del is_kernel
    if rows.size < length:
        return None
    codes, names = ix.kernel_name_codes()
    code = codes[rows]
    n = rows.size - length + 1
    window = np.flatnonzero(gid[:n] == gid[length - 1 :])  # the window's kernels share one stream
    if window.size == 0:
        return None
    every = window.size == n  # every window lies in one stream: its j-th kernels are a slice, not a gather
    seq, uniq = dense_ids([code[j : j + n] if every else code[window + j] for j in range(length)])
    del code
    kept = first_fit_occurrences(seq, window, length, int(uniq[0].size))
    first = window[kept]  # the first kernel of each counted occurrence
    del window
    cum = np.empty(rows.size + 1, np.int64)  # cumulative kernel time, built in place: no duration array
    cum[0] = 0
    np.take(c.end, rows, out=cum[1:])
    cum[1:] -= c.start[rows]
    np.cumsum(cum[1:], out=cum[1:])
    time = cum[first + length] - cum[first]
    kernel_time = int(cum[-1])
    del cum
    seq, stream = seq[kept], gid[first]
    frame = pl.DataFrame({"seq": seq, "stream": stream, "time": time})
    per = frame.group_by("seq").agg(count=pl.len(), streams=pl.col("stream").n_unique(), total_ns=pl.col("time").sum())
    return per, uniq, names, kernel_time
