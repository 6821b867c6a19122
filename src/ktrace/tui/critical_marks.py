"""The `c` key of the timeline: the GPU records on the median step's critical path, as timeline slices.

Runs in a worker (analysis.critical_path over the app's analysis index); the timeline paints the slices it
returns in the critical style until `c` is pressed again.
"""

from __future__ import annotations

from ktrace.analysis.critical_path import critical_path
from ktrace.analysis.index import TraceIndex
from ktrace.model.display_text import printable
from ktrace.model.trace import Trace
from ktrace.model.units import format_ns
from ktrace.tui.messages import CriticalPathReady
from ktrace.tui.tracks import TrackIndex


def critical_marks(trace: Trace, analysis: TraceIndex | None, tracks: TrackIndex) -> CriticalPathReady:
    """(track id, slice position) of every GPU record on the critical path, and a line saying what it is."""
    ix = TraceIndex.of(trace, analysis)
    cp = critical_path(trace, index=ix)
    if cp is None:
        return CriticalPathReady([], "no critical path: the trace has no CPU operators or runtime calls")
    n_kernels = ix.gpu_columns().n_kernels
    found = (
        tracks.locate("kernels", r) if r < n_kernels else tracks.locate("memory", r - n_kernels)
        for r in cp.path_records.tolist()
    )
    marks = [f for f in found if f is not None]
    share = {r["category"]: r["share"] for r in cp.composition.iter_rows(named=True)}
    waiting = f", {share['rank_wait'] * 100:.0f} % waiting for another rank" if "rank_wait" in share else ""
    return CriticalPathReady(
        marks,
        f"critical path of {printable(cp.label)}: {format_ns(cp.length_ns)}, {share['cpu'] * 100:.0f} % CPU"
        f"{waiting}; {len(marks)} GPU records marked (c clears)",
        (cp.start_ns, cp.end_ns),
    )
