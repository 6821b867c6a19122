"""Timeline rules about memory operations and synchronization: pageable memcpy, sync memcpy/memset, sync APIs.

Sources: the nsys expert rules `cuda_memcpy_async`, `cuda_memcpy_sync`, `cuda_memset_sync` and `cuda_api_sync`
(analyses.md §3.2), which list offending calls by duration (top 50).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.frames import fmt_names, per_rank_span, rows_named, top_evidence
from ktrace.model.trace import Trace

MAX_EVIDENCE = Param("max_evidence", 50, "how many offending records to keep as evidence (longest first)")
DURATION_MS = (pl.col("end_ns") - pl.col("start_ns")) / 1e6

MEMOP_API = r"(?i)^cu(da)?Mem(cpy|set)"
"""CUDA runtime/driver calls that copy or set memory (cudaMemcpy*, cudaMemset*, cuMemcpy*, cuMemsetD*)."""
ASYNC = r"(?i)async"
SYNC_API = r"(?i)^cu(da)?(DeviceSynchronize|StreamSynchronize|EventSynchronize|CtxSynchronize)"
"""Host-blocking synchronization calls (nsys `cuda_api_sync` plus event and context syncs)."""


def _pageable(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    memory = trace.memory
    copies = memory.filter(pl.col("op") == "memcpy") if memory.height else memory
    if not copies.height:
        raise Skip("the trace has no memcpy records")
    kinds = copies.filter((pl.col("src_kind") != "unknown") | (pl.col("dst_kind") != "unknown"))
    if not kinds.height:
        raise Skip("the trace does not say which memcpys used pageable host memory (kinds unknown)")
    pageable = kinds.filter((pl.col("src_kind") == "pageable") | (pl.col("dst_kind") == "pageable"))
    total_ms = float(pageable.select(DURATION_MS.sum()).item() or 0.0)
    n_bytes = int(pageable["bytes"].sum() or 0)
    fired = pageable.height >= int(p["min_count"]) and total_ms >= float(p["min_total_ms"])
    message = (
        f"{pageable.height} of {kinds.height} memcpys ({total_ms:.2f} ms, {n_bytes / 1e6:.1f} MB) copied "
        "from or to pageable host memory: each one is staged through a driver buffer and blocks the host"
    )
    evidence = top_evidence(
        pageable.with_columns(pl.col("copy_kind").alias("name")), "memcpy", DURATION_MS, limit=int(p["max_evidence"])
    )
    by_kind = pageable.group_by(pl.col("copy_kind").cast(pl.String)).agg(pl.len()).sort("copy_kind")
    return Outcome(
        kinds.height,
        pageable.height,
        fired,
        message,
        evidence,
        details={
            "pageable_ms": round(total_ms, 6),
            "pageable_bytes": n_bytes,
            "by_copy_kind": dict(by_kind.iter_rows()),
        },
    )


PAGEABLE_MEMCPY = Rule(
    name="PageableMemcpy",
    family="timeline",
    description="Memcpys between the GPU and pageable (not page-locked) host memory.",
    recommendation="Allocate host buffers in pinned memory (DataLoader(pin_memory=True), tensor.pin_memory(), "
    "cudaHostAlloc) and copy with non_blocking=True so copies overlap compute.",
    params=(
        Param("min_count", 1, "fire when at least this many pageable memcpys are found"),
        Param("min_total_ms", 0.0, "... and they take at least this many ms in total"),
        MAX_EVIDENCE,
    ),
    check=_pageable,
    source="nsys analyze cuda_memcpy_async",
    fleet_mode="per rank",
)


def _sync_memops(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    calls = rows_named(trace.api, "name", MEMOP_API)
    if not calls.height:
        raise Skip("the trace has no cudaMemcpy/cudaMemset API calls")
    sync = rows_named(calls, "name", MEMOP_API, exclude=ASYNC)
    total_ms = float(sync.select(DURATION_MS.sum()).item() or 0.0)
    names = sync.group_by(pl.col("name").cast(pl.String)).agg(pl.len().alias("n")).sort("n", descending=True)
    fired = sync.height >= int(p["min_count"]) and total_ms >= float(p["min_total_ms"])
    message = (
        f"{sync.height} of {calls.height} memcpy/memset calls were synchronous "
        f"({fmt_names(names['name'].to_list())}), blocking the host for {total_ms:.2f} ms"
    )
    evidence = top_evidence(sync, "api", DURATION_MS, limit=int(p["max_evidence"]))
    return Outcome(
        calls.height,
        sync.height,
        fired,
        message,
        evidence,
        details={"sync_ms": round(total_ms, 6), "by_name": dict(names.iter_rows())},
    )


SYNC_MEMCPY = Rule(
    name="SyncMemcpy",
    family="timeline",
    description="Synchronous cudaMemcpy/cudaMemset calls that block the host until the GPU is done.",
    recommendation="Use cudaMemcpyAsync/cudaMemsetAsync on a stream (tensor.to(device, non_blocking=True)); avoid "
    "implicit copies such as .item(), .cpu() or printing a CUDA tensor inside the training loop.",
    params=(
        Param("min_count", 1, "fire when at least this many synchronous memcpy/memset calls are found"),
        Param("min_total_ms", 0.0, "... and they block the host for at least this many ms in total"),
        MAX_EVIDENCE,
    ),
    check=_sync_memops,
    source="nsys analyze cuda_memcpy_sync, cuda_memset_sync",
    fleet_mode="per rank",
)


def _sync_apis(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    api = trace.api
    if not api.height:
        raise Skip("the trace has no CUDA API calls")
    sync = rows_named(api, "name", SYNC_API)
    spans = per_rank_span(api)
    per_rank = (
        sync.group_by("node", "rank")
        .agg(pl.len().alias("calls"), DURATION_MS.sum().alias("sync_ms"))
        .join(spans, on=["node", "rank"], how="right")
        .with_columns(
            pl.col("calls").fill_null(0),
            pl.col("sync_ms").fill_null(0.0),
            ((pl.col("last_ns") - pl.col("first_ns")) / 1e6).alias("host_ms"),
        )
        .with_columns((100 * pl.col("sync_ms") / pl.col("host_ms")).fill_nan(0.0).alias("pct"))
        .sort("node", "rank")
    )
    limit = float(p["max_time_pct"])
    bad = per_rank.filter((pl.col("pct") > limit) & (pl.col("calls") >= int(p["min_calls"])))
    worst = per_rank.sort("pct", descending=True).row(0, named=True) if per_rank.height else None
    message = ""
    if worst is not None:
        message = (
            f"{bad.height} of {per_rank.height} ranks spent more than {limit:g} % of their host timeline in "
            f"synchronizing calls; worst rank {worst['rank']}: {worst['calls']} calls, "
            f"{worst['sync_ms']:.2f} ms = {worst['pct']:.1f} % of {worst['host_ms']:.1f} ms"
        )
    evidence = top_evidence(sync, "api", DURATION_MS, limit=int(p["max_evidence"]))
    details = {
        "per_rank": [
            {
                "node": str(r["node"]),
                "rank": r["rank"],
                "calls": r["calls"],
                "sync_ms": round(r["sync_ms"], 6),
                "pct": round(r["pct"], 4),
            }
            for r in per_rank.head(64).iter_rows(named=True)
        ]
    }
    return Outcome(per_rank.height, bad.height, bad.height > 0, message, evidence, details=details)


EXCESSIVE_SYNC = Rule(
    name="ExcessiveSync",
    family="timeline",
    description="Host-blocking synchronization calls (cudaDeviceSynchronize, cudaStreamSynchronize, "
    "cudaEventSynchronize) taking a large share of a rank's host timeline.",
    recommendation="Remove synchronizations from the training loop (.item(), .cpu(), torch.cuda.synchronize(), "
    "printing losses every step); order work with events (cudaStreamWaitEvent) instead.",
    params=(
        Param(
            "max_time_pct",
            5.0,
            "fire when sync calls take more than this % of a rank's host timeline (first to last CUDA API call)",
        ),
        Param("min_calls", 1, "... and the rank made at least this many sync calls"),
        MAX_EVIDENCE,
    ),
    check=_sync_apis,
    source="nsys analyze cuda_api_sync",
    fleet_mode="per rank",
)


RULES: tuple[Rule, ...] = (PAGEABLE_MEMCPY, SYNC_MEMCPY, EXCESSIVE_SYNC)
