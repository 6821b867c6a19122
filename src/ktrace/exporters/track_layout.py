"""What the Perfetto and Chrome JSON exporters share, free of protobuf: counter track titles, the allocator's memory
timeline as counter rows, and the overlap lanes that keep every slice on a track properly nested (model.nesting's,
shared with the importers, run only where slices overlap)."""

from __future__ import annotations

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.model.allocations import allocated_after
from ktrace.model.nesting import nesting_lanes

COUNTER_TITLES = {
    "cpu.util": "CPU utilization",
    "cpu.core.util": "CPU core {i} utilization",
    "cpu.iowait_pct": "CPU I/O wait",
    "mem.used_bytes": "Host memory used",
    "mem.util": "Host memory utilization",
    "disk.read_bytes": "Disk read",
    "disk.write_bytes": "Disk write",
    "net.rx_bytes": "Network received",
    "net.tx_bytes": "Network sent",
    "gpu.util": "GPU {i} utilization",
    "gpu.mem_util": "GPU {i} memory utilization",
    "gpu.mem_used_bytes": "GPU {i} memory used",
    "gpu.mem_allocated_bytes": "GPU {i} memory allocated",
    "gpu.mem_reserved_bytes": "GPU {i} memory reserved",
    "gpu.power_w": "GPU {i} power",
    "gpu.sm_clock_mhz": "GPU {i} SM clock",
}
"""Counter metric -> display name ({i}: the instance: core, GPU or NIC index)."""


def counter_title(metric: str, instance: int | None) -> str:
    """Display name of a counter track, e.g. ("gpu.util", 0) -> "GPU 0 utilization"."""
    title = COUNTER_TITLES.get(metric)
    has_instance = instance is not None and instance >= 0
    if title is None:
        return f"{metric} [{instance}]" if has_instance else metric
    if "{i}" in title:
        return title.format(i=instance if has_instance else "").replace("  ", " ")
    return f"{title} [{instance}]" if has_instance else title


def overlap_lanes(track: NDArray[np.int64], start: NDArray[np.int64], end: NDArray[np.int64]) -> NDArray[np.int64]:
    """model.nesting.nesting_lanes of slices in file order, worked out only on the tracks where some slice starts
    before the one before it ended: a track of back-to-back slices (most GPU streams) keeps lane 0 without the
    replay. Lanes depend on each track's own slices only, so the result is the same."""
    lanes = np.zeros(track.shape[0], np.int64)
    if track.shape[0] < 2:
        return lanes
    small = track.min() >= 0 and track.max() < 1 << 16
    order = np.argsort(track.astype(np.uint16) if small else track, kind="stable")  # uint16: radix sort
    t = track[order]
    overlaps = (t[1:] == t[:-1]) & (start[order][1:] < end[order][:-1])
    busy = np.unique(t[1:][overlaps])
    if busy.size:
        rows = np.flatnonzero(np.isin(track, busy))
        lanes[rows] = nesting_lanes(track[rows], start[rows], end[rows])
    return lanes


ALLOCATED_METRIC = "gpu.mem_allocated_bytes"
RESERVED_METRIC = "gpu.mem_reserved_bytes"


def allocation_counters(allocations: pl.DataFrame) -> pl.DataFrame:
    """The memory timeline of allocator events as counter rows (node, rank, ts_ns, metric, instance = device, value):
    bytes allocated after each event (model.allocations.allocated_after) and reserved where the source records it.
    The Perfetto export and the TUI timeline draw them as counter tracks."""
    if not allocations.height:
        return pl.DataFrame(
            schema={
                "node": pl.String,
                "rank": pl.Int32,
                "ts_ns": pl.Int64,
                "metric": pl.String,
                "instance": pl.Int32,
                "value": pl.Float64,
            }
        )
    after = allocated_after(allocations).with_columns(pl.col("node").cast(pl.String))
    place = ("node", "rank", "ts_ns")
    allocated = after.select(*place, metric=pl.lit(ALLOCATED_METRIC), instance="device", value="allocated_bytes")
    reserved = after.filter(pl.col("total_reserved").is_not_null()).select(
        *place, metric=pl.lit(RESERVED_METRIC), instance="device", value="total_reserved"
    )
    return pl.concat([allocated, reserved]).with_columns(pl.col("value").cast(pl.Float64))
