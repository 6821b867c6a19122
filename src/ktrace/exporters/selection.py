"""Cut a piece out of a trace before exporting it: a time window and/or some ranks."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import polars as pl

from ktrace.model.allocations import allocated_after
from ktrace.model.errors import ExitCode, KtraceError
from ktrace.model.schema import NODE_RANK, SPAN_TABLES, TABLES
from ktrace.model.trace import Trace

ABSOLUTE_NS_MIN = 10**12
"""Window bounds at or above this integer are absolute ns since the epoch; smaller ones are seconds."""
MAX_WINDOW_S = 1e9
"""Seconds bounds are at most ~31 years from the trace start (int64 ns holds ~292 years)."""


def _bound(text: str, trace_start: int) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        if text.isdigit() and int(text) >= ABSOLUTE_NS_MIN:
            value = int(text)
        else:
            seconds = float(text)
            if not math.isfinite(seconds) or abs(seconds) > MAX_WINDOW_S:
                raise ValueError(text)
            value = trace_start + round(seconds * 1e9)
    except ValueError:
        raise KtraceError(
            f"--window: {text[:40]!r} is neither seconds (1.5, at most {MAX_WINDOW_S:.0e}) nor absolute ns",
            ExitCode.USAGE,
        ) from None
    if not -(2**63) <= value < 2**63:
        raise KtraceError(f"--window: {text[:40]!r} is past the end of time (int64 ns)", ExitCode.USAGE)
    return value


def parse_window(spec: str, trace_start: int) -> tuple[int | None, int | None]:
    """Parse START:END: seconds relative to the trace start (1.5:3) or absolute epoch ns; either side may be empty.

    Raises:
        KtraceError: (exit code USAGE) for a malformed or empty window.
    """
    if spec.count(":") != 1:
        raise KtraceError(
            f"--window {spec!r}: expected START:END, e.g. 1.5:3 (seconds from the trace start)", ExitCode.USAGE
        )
    a, b = (_bound(part, trace_start) for part in spec.split(":"))
    if a is not None and b is not None and b <= a:
        raise KtraceError(f"--window {spec!r}: END must be after START", ExitCode.USAGE)
    return a, b


def parse_ranks(spec: str) -> list[int]:
    """Parse a rank list such as "0,1,3" (ranges "0-3" allowed).

    Raises:
        KtraceError: (exit code USAGE) for anything else.
    """
    from ktrace.model.layout import parse_rank_list

    try:
        return list(parse_rank_list(spec))
    except ValueError as exc:
        raise KtraceError(f"--ranks {spec!r}: {exc}", ExitCode.USAGE) from None


def select(
    trace: Trace, *, window: tuple[int | None, int | None] | None = None, ranks: Sequence[int] | None = None
) -> Trace:
    """The part of `trace` inside `window` (rows overlapping it, kept whole) and on `ranks`.

    Node-level rows (rank -1, e.g. launcher counters) are kept for the nodes of the selected ranks.

    Raises:
        KtraceError: when a requested rank is not in the trace.
    """
    frames = {name: trace.table(name) for name in TABLES}
    if ranks is not None:
        present = {r for _, r in trace.ranks if r != NODE_RANK}
        missing = sorted(set(ranks) - present)
        if missing:
            raise KtraceError(f"--ranks: rank(s) {missing} not in the trace (it has {sorted(present)})", ExitCode.USAGE)
        nodes = sorted({str(n) for n, r in trace.ranks if r in set(ranks)})
        keep = pl.col("rank").is_in(list(ranks)) | (
            (pl.col("rank") == NODE_RANK) & pl.col("node").cast(pl.String).is_in(nodes)
        )
        frames = {name: f.filter(keep) for name, f in frames.items()}
    if window is not None:
        lo, hi = window
        for name in SPAN_TABLES:  # spans: kept when they overlap the window
            frames[name] = _within(frames[name], "end_ns", "start_ns", lo, hi)
        # allocator events lacking the allocator's totals (PyTorch 1.9) are summed from the trace start: the sum
        # before the window is carried in as totals, so a cut's memory counter does not restart at 0
        frames["allocations"] = _with_totals(frames["allocations"])
        for name in ("counters", "allocations", "samples"):  # instants: kept inside the window
            frames[name] = _within(frames[name], "ts_ns", "ts_ns", lo, hi)
    return dataclasses.replace(trace, **frames)  # type: ignore[arg-type]


def _within(frame: pl.DataFrame, end: str, start: str, lo: int | None, hi: int | None) -> pl.DataFrame:
    """Rows whose `end` column is >= lo and whose `start` column is <= hi (an open bound keeps everything)."""
    if lo is not None:
        frame = frame.filter(pl.col(end) >= lo)
    if hi is not None:
        frame = frame.filter(pl.col(start) <= hi)
    return frame


def _with_totals(allocations: pl.DataFrame) -> pl.DataFrame:
    """`allocations` (table order) with `total_allocated` filled from model.allocations.allocated_after where a
    device's events lack it: the bytes allocated since the trace start, which a window must not lose."""
    if allocations.height == 0 or allocations["total_allocated"].null_count() == 0:
        return allocations
    after = allocated_after(allocations).sort("row")
    return allocations.with_columns(total_allocated=after["allocated_bytes"].cast(allocations["total_allocated"].dtype))
