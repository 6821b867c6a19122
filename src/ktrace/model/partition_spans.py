"""A store's partitions' time spans read from their Parquet footers (column statistics), without decoding a row.

The rank-by-rank summary (fleet.summary_map) cuts the job's time bins (the load balance's span, the rank heatmap's
bins) before any task reads a partition: each partition's span (`Trace.span_ns` of its trace) and GPU span (first
start, last end of its kernels and memory records) are here the minima and maxima that `store_files.write_table` records
for the time columns. The aligned clock shift is monotonic (a drift of parts per million moves a later time by
less than the time between), so the shifted extremes are the extremes of the shifted times, computed by
`alignment.with_clock` itself.

`footer_spans` returns None wherever the footers cannot say exactly, and the caller reads the partitions instead:
a live or unfinished capture (Arrow streams beside the Parquet), a non-empty table without min/max statistics of
its time columns, or a store whose times were aligned when written, read in the raw clock (undoing the drift
rounds twice and is not monotonic to the nanosecond).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from ktrace.model.alignment import with_clock
from ktrace.model.clock import clock_mode
from ktrace.model.layout import META_FILE
from ktrace.model.live import live_status
from ktrace.model.schema import SPAN_TABLES
from ktrace.model.store_checks import checked_meta, unreadable_parquet
from ktrace.model.trace import Trace, TraceMeta

Span = tuple[int, int]
_INSTANTS = ("counters", "allocations")
"""Tables of instants (ts_ns) that Trace.span_ns counts beside the span tables."""
_GPU_TABLES = ("kernels", "memory")
_Found = list[tuple[str, list[Span], list[Span]]]
"""Per partition: its node, its tables' spans and its GPU tables' spans."""


@dataclass(frozen=True)
class PartitionSpans:
    """One partition's spans, as its trace (store.read of the partition, in the asked clock) gives them."""

    span: Span | None
    """Trace.span_ns."""
    gpu: Span | None
    """(first start, last end) of its GPU records (kernels, memcpy, memset): rank_activity.gpu_span."""


def footer_spans(
    root: Path, parts: Sequence[tuple[str, Path]], *, clock: str | None = None, skip: Collection[str] = ()
) -> list[PartitionSpans] | None:
    """The PartitionSpans of each (node, folder) of `parts` (partitions of the finished store `root`, as
    store.partitions lists them), read in clock mode `clock` without the `skip` tables; None when the footers
    cannot say exactly (see the module docstring)."""
    if live_status(root) is not None or not (root / META_FILE).is_file():
        return None
    meta = checked_meta(root / META_FILE)  # checked as store.read checks it: one line if malformed
    alignment = meta.clock_alignment
    mode = clock_mode(clock)
    shifts = alignment is not None and alignment.shifts and alignment.applied != (mode == "aligned")
    if shifts and mode != "aligned":
        return None
    raw: _Found = []
    for node, folder in parts:
        if any(f.suffix == ".arrows" for f in folder.iterdir()):
            return None
        spans, gpus = [], []
        for name in (*SPAN_TABLES, *_INSTANTS):
            if name in skip or not (folder / f"{name}.parquet").exists():
                continue
            ends = ("ts_ns", "ts_ns") if name in _INSTANTS else ("start_ns", "end_ns")
            try:
                found = _extremes(folder / f"{name}.parquet", *ends)
            except _NoStatistics:
                return None
            if found is not None:
                spans.append(found)
                gpus += [found] if name in _GPU_TABLES else []
        raw.append((node, spans, gpus))
    if shifts:
        raw = _aligned(raw, meta)
    return [PartitionSpans(union_span(spans), union_span(gpus)) for _, spans, gpus in raw]


class _NoStatistics(Exception):
    """A non-empty row group without min/max statistics of the time columns."""


def _extremes(path: Path, first: str, last: str) -> Span | None:
    """(min of `first`, max of `last`) over the file's row groups; None for a file without rows (_NoStatistics
    when a row group lacks their statistics; TraceFormatError, one line, when the file is not Parquet)."""
    with unreadable_parquet(path):
        footer = pq.read_metadata(path)
    if footer.num_rows == 0:
        return None
    names = [footer.schema.column(i).name for i in range(footer.num_columns)]
    if first not in names or last not in names:
        raise _NoStatistics(path)
    lo: list[int] = []
    hi: list[int] = []
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        if group.num_rows == 0:
            continue
        a, b = group.column(names.index(first)).statistics, group.column(names.index(last)).statistics
        if a is None or b is None or not a.has_min_max or not b.has_min_max:
            raise _NoStatistics(path)
        lo.append(int(a.min))
        hi.append(int(b.max))
    return (min(lo), max(hi)) if lo else None


def _aligned(raw: _Found, meta: TraceMeta) -> _Found:
    """The spans moved to the reference host's clock by alignment.with_clock of a table holding their ends."""
    nodes = [node for node, spans, gpus in raw for _ in range(len(spans) + len(gpus))]
    ends = [s for _, spans, gpus in raw for s in (*spans, *gpus)]
    empty = Trace.from_arrow({}, meta)
    holder = empty.ranges.clear(len(ends)).with_columns(
        pl.Series("node", nodes, pl.String).cast(empty.ranges.schema["node"]),
        pl.Series("start_ns", [a for a, _ in ends], pl.Int64),
        pl.Series("end_ns", [b for _, b in ends], pl.Int64),
    )
    shifted = with_clock(dataclasses.replace(empty, ranges=holder), "aligned").ranges
    moved = iter(zip(shifted["start_ns"].to_list(), shifted["end_ns"].to_list(), strict=True))
    return [(node, [next(moved) for _ in spans], [next(moved) for _ in gpus]) for node, spans, gpus in raw]


def union_span(spans: Sequence[Span]) -> Span | None:
    """(first start, last end) of `spans`; None for none."""
    return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None
