"""The critical path in the summary: the notes that explain a null or a limited one (its JSON value:
presentation.critical_path_json)."""

from __future__ import annotations

from ktrace.analysis.critical_path import CriticalPath

NO_CRITICAL_PATH = (
    "critical_path: no CPU operators or runtime calls to build a dependency graph from (or a dependency cycle "
    "that dropping backward launch/sync edges did not break)"
)
NO_SYNC_RECORDS = (
    "critical_path: the window has no CUDA synchronization records (Kineto writes cuda_sync events from "
    "PyTorch 2.1 on), so the path cannot pass from the GPU back to the CPU and CPU waits count as CPU time"
)


JOINED_BY_ORDER = (
    "critical_path: ranks are joined at NCCL kernels of the same name in the same order (Kineto kernel records name "
    "no process group): in a job with several groups (pipeline stages, tensor-parallel groups) ranks that never "
    "communicate may be joined; per rank: critical_path(trace, across_ranks=False)"
)


def critical_path_notes(cp: CriticalPath | None) -> tuple[str, ...]:
    """Why the summary's critical_path key is null, or what limits it."""
    if cp is None:
        return (NO_CRITICAL_PATH,)
    notes: tuple[str, ...] = (NO_SYNC_RECORDS,) if cp.sync_records == 0 else ()
    if cp.dropped_edges:
        notes += (
            f"critical_path: {cp.dropped_edges} launch/sync/collective edges dropped: their times went backwards "
            "(clock skew between CPU and GPU timestamps, or between hosts) and closed a cycle",
        )
    backward = cp.backward_edges()
    if backward:
        notes += (
            f"critical_path: {backward} edges of the path run backwards in time (a record that starts before its "
            "launch call, or a wait that ends before its record: clock skew between CPU and GPU timestamps), so the "
            "path can be longer than its window",
        )
    if cp.crossings is not None:
        notes += (JOINED_BY_ORDER,)
    if cp.unaligned_hosts:
        notes += (
            f"critical_path: the ranks joined at their collectives run on {cp.unaligned_hosts} hosts whose clocks "
            "are not aligned (see clock_alignment), so which rank entered a collective last is uncertain",
        )
    return notes
