"""What the allocations table means over time: the bytes allocated on a device after each allocator event.

Shared by the memory timeline analysis and the Perfetto export (which may not import analysis), so the counter
track and the report's plot are the same numbers.
"""

from __future__ import annotations

import polars as pl

DEVICE_KEYS = ("node", "rank", "device")


def new_device() -> pl.Expr:
    """True on a row whose (node, rank, device) differs from the previous row's (the first row's too): over rows in
    device order, its cum_sum numbers each device's run of events."""
    return pl.any_horizontal(*(pl.col(k).ne_missing(pl.col(k).shift(1)) for k in DEVICE_KEYS))


def allocated_after(allocations: pl.DataFrame) -> pl.DataFrame:
    """The allocations rows sorted by node, rank, device, time (ties in table order), with ``allocated_bytes``: the
    allocator's `total_allocated` where every event of the device records it, else the running sum of `bytes` from
    the trace start (what the trace saw; memory allocated before it is unknown), and ``row``, the table row."""
    ordered = allocations.with_row_index("row").sort(*DEVICE_KEYS, "ts_ns", "row")
    del allocations  # a frame the caller made for this call (the memory timeline's) goes before the windows
    # Sorted, a device's events are one run: the windows go over the run's number, where windows over the device
    # keys hashed the node String of every event (owlv2 x30, 368 k events: peak +80 -> +62 MB with the input)
    run = new_device().cum_sum()
    has_totals = pl.col("total_allocated").null_count().over(run) == 0
    return ordered.with_columns(
        allocated_bytes=pl.when(has_totals)
        .then(pl.col("total_allocated"))
        .otherwise(pl.col("bytes").cum_sum().over(run))
    )
