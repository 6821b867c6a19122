"""NCCL collectives by message size: count, total and median time, algbw and busbw as nccl-tests reports them.

The definitions are nccl-tests' (NVIDIA/nccl-tests, doc/PERFORMANCE.md):
- algbw = S / t, in GB/s (10^9 bytes/s), with t the mean time of the calls in a row (a kernel's duration);
- busbw = algbw x 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and all_to_all, 1 for
  broadcast, reduce, send and recv (n: the group size);
- S is "the size in bytes of the total array": the output for all_gather (`sendcount * sizeof(datatype) * n`),
  the input for reduce_scatter (`recvcount * sizeof(datatype) * n`), and the buffer for the others. Kineto's
  `In msg nelems` / `Out msg nelems` count elements of the whole input / output, so S = elements x the dtype's size.

TraceLens averages per-call bandwidths in GiB/s instead (benchmarks/RESULTS.md has the difference on a real trace);
the JSON keeps nccl-tests' numbers and says so (`definition`).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ktrace.analysis.collectives_skew import NO_COLLECTIVES, CollectiveSkew, comm_kernels, comm_skew
from ktrace.analysis.index import TraceIndex
from ktrace.model.trace import Trace

DEFINITION = "nccl-tests"
"""Which algbw/busbw definition the tables hold (NVIDIA/nccl-tests doc/PERFORMANCE.md)."""

NO_MESSAGE_SIZES = (
    "no message sizes: the NCCL kernels carry no `Collective name`, `In/Out msg nelems` and `dtype` args "
    "(PyTorch records them from 2.1 on)"
)

DTYPE_BYTES: dict[str, int] = {
    "Double": 8, "Float": 4, "Half": 2, "BFloat16": 2,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
    "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1, "Bool": 1,
    "UInt16": 2, "UInt32": 4, "UInt64": 8,
    "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16,
}  # fmt: skip
"""Bytes per element of the PyTorch dtype names Kineto writes in a collective's `dtype` arg."""

_KINDS = (
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("reducescatter", "reduce_scatter"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
)
"""Prefix of a Kineto `Collective name` (lower case, underscores dropped) -> the collective's canonical name."""

_EXACT = {"reduce": "reduce", "send": "send", "recv": "recv"}


def collective_kind(name: str) -> str:
    """The canonical collective of a Kineto `Collective name` ("allreduce", "_allgather_base",
    "reduce_scatter_tensor_coalesced", ...): all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce,
    send, recv; any other name as it is (gather, scatter, barrier, ...), for which busbw has no definition."""
    key = name.lower().replace("_", "")
    for prefix, kind in _KINDS:
        if key.startswith(prefix):
            return kind
    return _EXACT.get(key, name)


@dataclass(frozen=True)
class Collectives:
    """The collectives of a trace, as collectives_by_size and collective_skew compute them."""

    by_size: pl.DataFrame
    """collective, dtype, bytes, group_size, count, time_ns (total), median_ns, algbw_gbps, busbw_gbps; one row
    per (collective, dtype, bytes, group size), largest total time first."""
    calls: int
    """NCCL kernels in the trace."""
    sized_calls: int
    """Of those, the ones with a message size (the rows of by_size)."""
    reason: str | None
    """Why by_size is empty (NO_COLLECTIVES / NO_MESSAGE_SIZES); None when it is not."""
    skew: CollectiveSkew
    definition: str = DEFINITION


BY_SIZE_SCHEMA = {
    "collective": pl.String,
    "dtype": pl.String,
    "bytes": pl.Int64,
    "group_size": pl.Int32,
    "count": pl.UInt32,
    "time_ns": pl.Int64,
    "median_ns": pl.Float64,
    "algbw_gbps": pl.Float64,
    "busbw_gbps": pl.Float64,
}


def message_calls(kernels: pl.DataFrame) -> pl.DataFrame:
    """One row per NCCL kernel of `kernels` (schema v1's kernel columns) with a message size: collective
    (canonical), dtype, bytes (nccl-tests' S), group_size, duration_ns."""
    needed = ("collective", "in_nelems", "out_nelems", "comm_dtype", "group_size")
    if kernels.is_empty() or any(c not in kernels.columns for c in needed):
        return pl.DataFrame(schema={k: BY_SIZE_SCHEMA[k] for k in ("collective", "dtype", "bytes", "group_size")})
    named = kernels.filter(pl.col("collective").is_not_null())
    kinds = {str(n): collective_kind(str(n)) for n in named["collective"].cast(pl.String).unique()}
    rows = named.select(
        pl.col("collective").cast(pl.String).replace_strict(kinds, return_dtype=pl.String),
        pl.col("comm_dtype").cast(pl.String).alias("dtype"),
        pl.col("in_nelems"),
        pl.col("out_nelems"),
        pl.col("group_size").cast(pl.Int32),
        (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
    )
    size = pl.col("dtype").replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    elements = pl.when(pl.col("collective") == "all_gather").then("out_nelems").otherwise("in_nelems")
    return (
        rows.with_columns((elements * size).alias("bytes"))
        .filter(pl.col("bytes").is_not_null() & pl.col("group_size").is_not_null())
        .select("collective", "dtype", "bytes", "group_size", "duration_ns")
    )


def by_size(calls: pl.DataFrame) -> pl.DataFrame:
    """message_calls grouped per (collective, dtype, bytes, group size) with nccl-tests' algbw and busbw."""
    if calls.is_empty():
        return pl.DataFrame(schema=BY_SIZE_SCHEMA)
    keys = ["collective", "dtype", "bytes", "group_size"]
    rows = calls.group_by(keys).agg(
        pl.len().alias("count"),
        pl.col("duration_ns").sum().alias("time_ns"),
        pl.col("duration_ns").median().alias("median_ns"),
        pl.col("duration_ns").mean().alias("mean_ns"),
    )
    # bytes per ns is 10^9 bytes per second: GB/s
    algbw = pl.when(pl.col("mean_ns") > 0).then(pl.col("bytes") / pl.col("mean_ns"))
    return (
        rows.with_columns(algbw.alias("algbw_gbps"))
        .with_columns((pl.col("algbw_gbps") * _bus_factor_expr()).alias("busbw_gbps"))
        .sort(["time_ns", *keys], descending=[True, False, False, False, False])
        .select([pl.col(c).cast(t) for c, t in BY_SIZE_SCHEMA.items()])
    )


def _bus_factor_expr() -> pl.Expr:
    """busbw / algbw of each row's collective over its group_size n (nccl-tests); null where it defines none."""
    n = pl.col("group_size").cast(pl.Float64)
    kind = pl.col("collective")
    return (
        pl.when(n < 1)
        .then(None)
        .when(kind == "all_reduce")
        .then(2 * (n - 1) / n)
        .when(kind.is_in(["all_gather", "reduce_scatter", "all_to_all"]))
        .then((n - 1) / n)
        .when(kind.is_in(["broadcast", "reduce", "send", "recv"]))
        .then(pl.lit(1.0))
        .otherwise(None)
    )


def collectives(trace: Trace, *, index: TraceIndex | None = None) -> Collectives:
    """The trace's NCCL collectives by message size (nccl-tests' algbw/busbw) and their arrival skew across ranks.

    Args:
        trace: the trace.
        index: the trace's TraceIndex, if one exists.

    Returns:
        Collectives; by_size is empty with a `reason` when the trace has no NCCL kernel or none with a size.
    """
    return collectives_of(comm_kernels(trace, index=index))


def collectives_of(comm: pl.DataFrame) -> Collectives:
    """The Collectives of a trace's NCCL kernels (comm_kernels; the fleet reduce passes every rank's)."""
    calls = message_calls(comm)
    reason = NO_COLLECTIVES if comm.is_empty() else (NO_MESSAGE_SIZES if calls.is_empty() else None)
    return Collectives(
        by_size=by_size(calls), calls=comm.height, sized_calls=calls.height, reason=reason, skew=comm_skew(comm)
    )
