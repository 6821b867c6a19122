"""Shift a trace's timestamps by its clock alignment (meta.clock_alignment), or back to each host's own clock.

`store.read` aligns by default; `KTRACE_CLOCK=raw` (or `read(..., clock="raw")`) gives the timestamps as each host
recorded them. A single-host trace, or one whose alignment was impossible, is never shifted.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from ktrace.model.clock import ClockAlignment, HostClock
from ktrace.model.schema import SCHEMAS, TIME_COLUMNS
from ktrace.model.scrub import mark_scrubbed
from ktrace.model.trace import Trace


def with_clock(trace: Trace, mode: str = "aligned") -> Trace:
    """`trace` in clock `mode`: "aligned" (every host on the reference host's clock) or "raw" (as recorded).

    Does nothing when the trace already is in that mode or has no alignment that shifts anything.
    """
    alignment = trace.meta.clock_alignment
    if alignment is None or not alignment.shifts or alignment.applied == (mode == "aligned"):
        return trace
    sign = 1 if mode == "aligned" else -1
    frames = {name: _shift(trace.table(name), name, alignment, sign) for name in SCHEMAS}
    meta = dataclasses.replace(trace.meta, clock_alignment=dataclasses.replace(alignment, applied=mode == "aligned"))
    shifted = Trace(**frames, meta=meta)
    return mark_scrubbed(shifted) if trace.scrubbed else shifted  # the same strings as before


def _shift(frame: pl.DataFrame, name: str, alignment: ClockAlignment, sign: int) -> pl.DataFrame:
    columns = [c for c in TIME_COLUMNS if c in SCHEMAS[name].names]
    if not frame.height or not columns:
        return frame
    hosts = [h for h in alignment.hosts if h.offset_ns or h.drift_ppm]
    return frame.with_columns(pl.col(c) - sign * _correction(c, hosts, sign) for c in columns)


def _correction(column: str, hosts: list[HostClock], sign: int) -> pl.Expr:
    """offset + drift * (t - anchor) of the row's host, t read on that host's clock.

    Undoing (sign -1) does not know t yet: it evaluates the drift at the aligned time plus the offset and then
    once more at the raw time that gives, which leaves an error of drift² × (t - anchor): within a nanosecond.
    """
    expr: pl.Expr = pl.lit(0, pl.Int64)
    for h in hosts:
        term = pl.lit(h.offset_ns, pl.Int64)
        if h.drift_ppm:
            t = pl.col(column) if sign > 0 else pl.col(column) + _drift(pl.col(column) + h.offset_ns, h) + h.offset_ns
            term = term + _drift(t, h)
        expr = pl.when(pl.col("node") == h.host).then(term).otherwise(expr)
    return expr


def _drift(t: pl.Expr, h: HostClock) -> pl.Expr:
    return ((t - h.anchor_ns).cast(pl.Float64) * (h.drift_ppm * 1e-6)).round().cast(pl.Int64)
