"""HTA-style temporal breakdown (idle / compute / non-compute per rank) and kernel-type time breakdown.

API:

- ``KERNEL_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY")``.
- ``typed_activity(trace) -> pl.DataFrame``: gpu_activity plus a `kernel_type` column.
- ``type_coverage(trace, per="rank") -> (keys, ns[n_groups, 8])``: ns spent with each subset of
  kernel types active (bit 0 compute, bit 1 communication, bit 2 memory).
- ``temporal_breakdown(trace) -> pl.DataFrame``: per (node, rank) HTA's idle, compute, non-compute
  time within the GPU span, plus the explicit TensorBoard-style split (compute only, compute
  overlapping communication, communication only, memory only).
- ``kernel_type_breakdown(trace, include_memory=True, per="rank") -> pl.DataFrame``: time per
  kernel-type combination ("COMPUTATION", "COMPUTATION overlapping COMMUNICATION", ...), HTA's
  `get_gpu_kernel_breakdown` first table, per group and with its share.

Kernel types follow HTA's three kinds, with ktrace's own rule for which kernel communicates:
COMMUNICATION = a kernel the precision classifier calls communication (`communication_names`: NCCL/RCCL
collectives and custom all-reduce kernels such as `multimem_all_reduce_kernel`, which HTA's ``^nccl.*Kernel``
misses; on the Kineto traces of shared/traces both select the same names), MEMORY = memcpy/memset records,
COMPUTATION = every other kernel. HTA also
counts Kineto's GPU-side `cuda_sync` rows as GPU events (busy, non-compute); ktrace does not (they
are waits), see benchmarks/RESULTS.md.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import Per
from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.precision import classify_names
from ktrace.model.trace import Trace

KERNEL_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY")
_COMM_NAMES = Slot[list[str]]("communication_names")
_TYPED = Slot[pl.DataFrame]("typed_activity")
_COVERAGE = Slot[tuple[pl.DataFrame, npt.NDArray[np.int64]]]("type_coverage")
_RECORD_TYPES = Slot[npt.NDArray[np.int64]]("record_types")


def communication_names(trace: Trace, *, index: TraceIndex | None = None) -> list[str]:
    """Kernel names the precision classifier calls communication (NCCL/RCCL collectives, custom all-reduce).

    One definition for the breakdown, the overlap, the rules and the precision table. It is wider than HTA's
    NCCL_KERNEL_RE (``^nccl.*Kernel``): it also counts custom all-reduce kernels (``multimem_all_reduce_kernel``);
    on every Kineto trace in shared/traces the two select exactly the same names.
    """

    def compute() -> list[str]:
        classes = classify_names(trace.kernels["name"].unique())
        return sorted(classes.filter(pl.col("precision") == "communication")["name"].to_list())

    return TraceIndex.of(trace, index).get(_COMM_NAMES, compute)


def typed_activity(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """gpu_activity(trace, with_names=True) plus `kernel_type` (one of KERNEL_TYPES) and `type_bit`."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_TYPED, lambda: _typed_activity(ix))


def _typed_activity(ix: TraceIndex) -> pl.DataFrame:
    trace = ix.trace
    act = ix.gpu_activity(with_names=True)
    comm_names = communication_names(trace, index=ix)
    has_collective = trace.kernels["collective"].is_not_null().to_numpy()
    collective = np.zeros(act.height, dtype=bool)
    collective[: has_collective.size] = has_collective  # gpu_activity puts kernels first
    ktype = (
        pl.when(pl.col("kind") != "kernel")
        .then(pl.lit("MEMORY"))
        .when(pl.Series(collective) | ((pl.col("kind") == "kernel") & pl.col("name").is_in(comm_names)))
        .then(pl.lit("COMMUNICATION"))
        .otherwise(pl.lit("COMPUTATION"))
    )
    return act.with_columns(kernel_type=ktype).with_columns(
        type_bit=pl.col("kernel_type").replace_strict(
            {t: 1 << i for i, t in enumerate(KERNEL_TYPES)}, return_dtype=pl.Int64
        )
    )


def type_coverage(
    trace: Trace, per: Per = "rank", types: tuple[str, ...] = KERNEL_TYPES, *, index: TraceIndex | None = None
) -> tuple[pl.DataFrame, npt.NDArray[np.int64]]:
    """Time spent with each subset of kernel types active, between a group's first and last record.

    Args:
        trace: the trace.
        per: "rank", "device" or "stream".
        types: kernel types to sweep (others are ignored entirely).
        index: the trace's TraceIndex.

    Returns:
        (keys frame with one row per group, int64 [n_groups, 8] ns per state mask); mask bit i is
        KERNEL_TYPES[i]; state 0 is idle time between the group's first and last swept record.
    """
    ix = TraceIndex.of(trace, index)
    return ix.get(_COVERAGE, lambda: _type_coverage(ix, per, types), per, tuple(types))


def record_types(trace: Trace, *, index: TraceIndex | None = None) -> npt.NDArray[np.int64]:
    """Index into KERNEL_TYPES of every GPU record (GpuColumns order), as typed_activity classifies them."""
    ix = TraceIndex.of(trace, index)
    return ix.get(_RECORD_TYPES, lambda: _record_types(ix))


def _record_types(ix: TraceIndex) -> npt.NDArray[np.int64]:
    c = ix.gpu_columns()
    k = ix.trace.kernels
    out = np.full(c.size, KERNEL_TYPES.index("MEMORY"), np.int64)
    comm = (
        k.select(pl.col("collective").is_not_null() | pl.col("name").is_in(communication_names(ix.trace, index=ix)))
        .to_series()
        .fill_null(False)
        .to_numpy()
    )
    kernels = out[: k.height]
    kernels[:] = KERNEL_TYPES.index("COMPUTATION")
    kernels[comm] = KERNEL_TYPES.index("COMMUNICATION")
    return out


def _type_coverage(ix: TraceIndex, per: Per, types: tuple[str, ...]) -> tuple[pl.DataFrame, npt.NDArray[np.int64]]:
    from ktrace.analysis._kernels.sweep import type_coverage as sweep

    g = ix.row_groups(per)
    swept = np.array([t in types for t in KERNEL_TYPES])
    kinds = record_types(ix.trace, index=ix)[g.perm]
    type_idx = kinds if swept.all() else np.where(swept[kinds], kinds, -1)
    cov = sweep(g.bounds, *ix.sorted_times(per), type_idx, len(KERNEL_TYPES))
    # A group is present if any of its records is of a swept type: one reduceat over the non-empty groups'
    # starts (empty groups in between add nothing), instead of a per-record group id array.
    present = np.zeros(g.n_groups, np.bool_)
    nonempty = np.diff(g.bounds) > 0
    if type_idx.size and nonempty.any():
        present[nonempty] = np.maximum.reduceat(type_idx, g.bounds[:-1][nonempty]) >= 0
    return g.keys[np.flatnonzero(present)], cov[present]


def mask_sum(cov: npt.NDArray[np.int64], need: int, without: int = 0) -> npt.NDArray[np.int64]:
    """Time of each group in states that include every bit of `need` and none of `without`."""
    masks = np.arange(cov.shape[1])
    sel = ((masks & need) == need) & ((masks & without) == 0)
    return cov[:, sel].sum(axis=1)


def temporal_breakdown(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Per (node, rank): idle, compute and non-compute GPU time, HTA's `get_temporal_breakdown`.

    span = last GPU record end - first start (kernels, memcpy, memset); idle = span - busy union;
    compute = union of COMPUTATION kernels (communication/memory overlapping compute count as compute,
    as in HTA); non_compute = span - compute - idle. The explicit split follows TensorBoard's
    distributed view: compute_only, compute_comm_overlap, comm_only (communication not hidden by
    compute), memory_only (memcpy/memset alone).

    Args:
        trace: the trace.
        index: the trace's TraceIndex.

    Returns:
        Frame: node, rank, span_ns, idle_ns, compute_ns, non_compute_ns, idle_pct, compute_pct,
        non_compute_pct, compute_only_ns, compute_comm_overlap_ns, comm_only_ns, memory_only_ns.
    """
    keys, cov = type_coverage(trace, per="rank", index=index)
    span = cov.sum(axis=1)
    idle = cov[:, 0]
    compute = mask_sum(cov, 1)
    non_compute = span - compute - idle
    den = np.maximum(span, 1).astype(np.float64)
    return keys.with_columns(
        span_ns=pl.Series(span, dtype=pl.Int64),
        idle_ns=pl.Series(idle, dtype=pl.Int64),
        compute_ns=pl.Series(compute, dtype=pl.Int64),
        non_compute_ns=pl.Series(non_compute, dtype=pl.Int64),
        idle_pct=pl.Series(100 * idle / den),
        compute_pct=pl.Series(100 * compute / den),
        non_compute_pct=pl.Series(100 * non_compute / den),
        compute_only_ns=pl.Series(mask_sum(cov, 1, 2), dtype=pl.Int64),
        compute_comm_overlap_ns=pl.Series(mask_sum(cov, 3), dtype=pl.Int64),
        comm_only_ns=pl.Series(mask_sum(cov, 2, 1), dtype=pl.Int64),
        memory_only_ns=pl.Series(cov[:, 4], dtype=pl.Int64),
    )


def kernel_type_breakdown(
    trace: Trace, include_memory: bool = True, per: Per = "rank", *, index: TraceIndex | None = None
) -> pl.DataFrame:
    """Time per kernel-type combination, HTA's `get_gpu_kernel_breakdown` kernel-type table.

    Args:
        trace: the trace.
        include_memory: also sweep memcpy/memset as MEMORY (HTA's include_memory_kernels, default True).
        per: "rank" (HTA), "device" or "stream".
        index: the trace's TraceIndex.

    Returns:
        Long frame: key columns, kernel_type (e.g. "COMPUTATION overlapping COMMUNICATION"),
        time_ns, share_pct (of the group's busy time). Combinations with no time are left out.
    """
    types = KERNEL_TYPES if include_memory else KERNEL_TYPES[:2]
    keys, cov = type_coverage(trace, per=per, types=types, index=index)
    labels = [" overlapping ".join(t for i, t in enumerate(KERNEL_TYPES) if m >> i & 1) for m in range(8)]
    rows = [(gi, m) for gi in range(cov.shape[0]) for m in range(1, 8) if cov[gi, m] > 0]
    gi = np.array([r[0] for r in rows], dtype=np.int64)
    m = np.array([r[1] for r in rows], dtype=np.int64)
    busy = cov[:, 1:].sum(axis=1)
    time = cov[gi, m] if rows else np.zeros(0, np.int64)
    return keys[gi].with_columns(
        kernel_type=pl.Series([labels[x] for x in m.tolist()], dtype=pl.String),
        time_ns=pl.Series(time, dtype=pl.Int64),
        share_pct=pl.Series(100.0 * time / np.maximum(busy[gi], 1), dtype=pl.Float64),
    )
