"""GPU activity distribution (kernels/memcpy/memset/sync time) and memory-op distribution (kind, bytes, GB/s)."""

from __future__ import annotations

import polars as pl

from ktrace.model.trace import Trace

ACTIVITIES = ("kernels", "memcpy", "memset", "sync")
"""Activity classes of the GPU activity distribution, in display order."""


def _dur() -> pl.Expr:
    return (pl.col("end_ns") - pl.col("start_ns")).cast(pl.Int64)


def activity_distribution(trace: Trace) -> pl.DataFrame:
    """Time the GPU spent in kernels, memcpy, memset and synchronization (SageMaker's activity pie).

    Times are sums of record durations (concurrent records both count), as in SageMaker Profiler and
    ``nsys stats cuda_gpu_sum``; the share is of the four together.

    Returns:
        ``activity`` (one of ACTIVITIES), ``count``, ``time_ns``, ``share`` (0-1); all four rows always.
    """
    mem = (
        trace.memory.lazy()
        .group_by(pl.col("op").cast(pl.String))
        .agg(count=pl.len().cast(pl.Int64), time_ns=_dur().sum())
        .collect()
    )
    by_op = {str(r["op"]): (int(r["count"]), int(r["time_ns"])) for r in mem.iter_rows(named=True)}
    rows = {
        "kernels": (trace.kernels.height, int(trace.kernels.select(_dur().sum()).item() or 0)),
        "memcpy": by_op.get("memcpy", (0, 0)),
        "memset": by_op.get("memset", (0, 0)),
        "sync": (trace.syncs.height, int(trace.syncs.select(_dur().sum()).item() or 0)),
    }
    frame = pl.DataFrame(
        {
            "activity": list(ACTIVITIES),
            "count": [rows[a][0] for a in ACTIVITIES],
            "time_ns": [rows[a][1] for a in ACTIVITIES],
        },
        schema={"activity": pl.String, "count": pl.Int64, "time_ns": pl.Int64},
    )
    return with_activity_share(frame)


def with_activity_share(frame: pl.DataFrame) -> pl.DataFrame:
    """activity_distribution's ``share`` added to its activity, count, time_ns (the fleet reduce sums those)."""
    total = max(int(frame["time_ns"].sum()), 1)
    return frame.with_columns(share=pl.col("time_ns") / total)


def host_memory_expr() -> pl.Expr:
    """The host side of a copy: src_kind for HtoD/HtoH, dst_kind for DtoH, "-" for device-only copies."""
    kind = pl.col("copy_kind").cast(pl.String)
    return (
        pl.when(kind.is_in(["HtoD", "HtoH"]))
        .then(pl.col("src_kind").cast(pl.String))
        .when(kind == "DtoH")
        .then(pl.col("dst_kind").cast(pl.String))
        .otherwise(pl.lit("-"))
    )


def memory_distribution(trace: Trace) -> pl.DataFrame:
    """Memory operations by op, copy kind and host memory (pinned vs pageable), with bytes and bandwidth.

    Returns:
        ``op`` (memcpy/memset), ``copy_kind`` (HtoD/DtoH/DtoD/HtoH/PtoP/unknown; memsets "-"),
        ``host_memory`` (pinned/pageable/... for copies touching the host, else "-"), ``count``,
        ``bytes``, ``time_ns``, ``time_share`` (of all memory-op time), ``bandwidth_gbps`` (total bytes /
        total time, GB/s = bytes per ns; null when time is 0), sorted by time descending.
    """
    is_copy = pl.col("op").cast(pl.String) == "memcpy"
    grouped = (
        trace.memory.lazy()
        .with_columns(
            op=pl.col("op").cast(pl.String),
            copy_kind=pl.when(is_copy).then(pl.col("copy_kind").cast(pl.String)).otherwise(pl.lit("-")),
            host_memory=pl.when(is_copy).then(host_memory_expr()).otherwise(pl.lit("-")),
            dur=_dur(),
        )
        .group_by(["op", "copy_kind", "host_memory"])
        .agg(
            count=pl.len().cast(pl.Int64),
            bytes=pl.col("bytes").fill_null(0).sum().cast(pl.Int64),
            time_ns=pl.col("dur").sum().cast(pl.Int64),
        )
        .collect()
    )
    return with_memory_shares(grouped)


def with_memory_shares(grouped: pl.DataFrame) -> pl.DataFrame:
    """memory_distribution's ``time_share`` and ``bandwidth_gbps`` added to its op, copy_kind, host_memory, count,
    bytes, time_ns (the fleet reduce sums those), sorted as memory_distribution."""
    total = max(int(grouped["time_ns"].sum()), 1)
    return grouped.with_columns(
        time_share=pl.col("time_ns") / total,
        bandwidth_gbps=pl.when(pl.col("time_ns") > 0)
        .then(pl.col("bytes") / pl.col("time_ns"))
        .otherwise(None)
        .cast(pl.Float64),
    ).sort(["time_ns", "op", "copy_kind", "host_memory"], descending=[True, False, False, False])
