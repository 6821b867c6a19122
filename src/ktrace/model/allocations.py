"""What the allocations table means over time: the bytes allocated on a device after each allocator event.

Shared by the memory timeline analysis and the Perfetto export (which may not import analysis), so the counter
track and the report's plot are the same numbers.
"""

from __future__ import annotations

import polars as pl

DEVICE_KEYS = ("node", "rank", "device")


def allocated_after(allocations: pl.DataFrame) -> pl.DataFrame:
    """The allocations rows sorted by node, rank, device, time (ties in table order), with ``allocated_bytes``: the
    allocator's `total_allocated` where every event of the device records it, else the running sum of `bytes` from
    the trace start (what the trace saw; memory allocated before it is unknown), and ``row``, the table row."""
    has_totals = pl.col("total_allocated").null_count().over(DEVICE_KEYS) == 0
    return (
        allocations.with_row_index("row")
        .sort(*DEVICE_KEYS, "ts_ns", "row")
        .with_columns(
            allocated_bytes=pl.when(has_totals)
            .then(pl.col("total_allocated"))
            .otherwise(pl.col("bytes").cum_sum().over(DEVICE_KEYS))
        )
    )
