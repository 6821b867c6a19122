"""summarize(): every number of the dashboard in one frozen Summary (its JSON: presentation.summary_json)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from ktrace.analysis import _kernels
from ktrace.analysis.annotation_histograms import AnnotationHistogram, annotation_histogram
from ktrace.analysis.collectives import Collectives, collectives
from ktrace.analysis.counters import counter_stats
from ktrace.analysis.critical_path import CriticalPath, critical_path
from ktrace.analysis.critical_path_summary import NO_CRITICAL_PATH, critical_path_notes
from ktrace.analysis.distributions import activity_distribution, memory_distribution
from ktrace.analysis.gpu_peaks import GpuPeaks
from ktrace.analysis.idle import device_idle_breakdown
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernel_sequences import DEFAULT_LENGTH, KernelSequences, kernel_sequences
from ktrace.analysis.kernels import kernel_stats, top_kernels
from ktrace.analysis.latency import latency_stats
from ktrace.analysis.memory_timeline import MemoryTimeline, memory_timeline
from ktrace.analysis.operator_shapes import with_shapes
from ktrace.analysis.operators import OperatorSummary, operator_summary
from ktrace.analysis.overlap import comm_compute_overlap
from ktrace.analysis.phases import JobPhases, job_phases, step_spans
from ktrace.analysis.precision import precision_distribution
from ktrace.analysis.python_samples import PythonProfile, python_profile
from ktrace.analysis.range_operators import range_operator_summary
from ktrace.analysis.roofline import Roofline, roofline
from ktrace.analysis.steps import detect_steps, step_stats
from ktrace.analysis.utilization import active_time_share, busy_time
from ktrace.model.heap import map_large_blocks, release_free_memory
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace

if TYPE_CHECKING:  # (the multi-rank analyses are imported by summarize where the trace has 2+ ranks)
    from ktrace.analysis.ranks import LoadBalance
    from ktrace.analysis.stragglers import Stragglers

T = TypeVar("T")
FLOAT_DIGITS = 6
"""Floats in the JSON documents (presentation.json_rows) are rounded to this many decimals (stable JSON across platforms)."""
LARGE_TRACE_ROWS = 1_000_000
"""From this many rows (every table), summarize maps large C heap blocks on their own (model.heap): the
analyses' freed numpy temporaries then leave the process instead of staying resident under the next analyses."""


@dataclass(frozen=True)
class Summary:
    """The dashboard numbers of one trace (SageMaker Profiler panels + Debugger's job summary).

    Every frame comes from one public analysis function (named in its field's docstring).
    """

    source: str
    ranks: int
    kernels: int
    phases: JobPhases
    active: pl.DataFrame
    """utilization.active_time_share: GPU/CPU active shares by timeline and counters."""
    busy: pl.DataFrame
    """utilization.busy_time per device: busy, idle, span."""
    idle: pl.DataFrame
    """idle.device_idle_breakdown: the device's idle time by cause (the gaps of its busy union; sums to busy's idle)."""
    top_by_time: pl.DataFrame
    top_by_count: pl.DataFrame
    latency: pl.DataFrame
    """latency.latency_stats by kind, one row per launch call (graph_runs="first": a CUDA graph launch counts
    once, by its first record): launch-to-run latency percentiles, both definitions, and API time."""
    steps: pl.DataFrame
    """Step spans from steps.detect_steps (phases.normalize_steps: node, rank, step, name, start_ns, end_ns)."""
    step_stats: pl.DataFrame
    """steps.step_stats: step-time statistics per rank."""
    precision: pl.DataFrame
    activity: pl.DataFrame
    memory: pl.DataFrame
    counters: pl.DataFrame
    overlap: pl.DataFrame
    """overlap.comm_compute_overlap per rank."""
    load_balance: LoadBalance | None
    """Only with 2 or more ranks."""
    operators: OperatorSummary | None = None
    """operators.operator_summary: framework operators and the GPU work they launched (None without ops)."""
    kernel_sequences: KernelSequences | None = None
    """kernel_sequences.kernel_sequences: the most frequent runs of consecutive kernels per stream."""
    memory_timeline: MemoryTimeline | None = None
    """memory_timeline.memory_timeline: GPU memory over time, its peak and who allocated it (None without data)."""
    critical_path: CriticalPath | None = None
    """critical_path.critical_path: the median step's critical path (None without CPU events)."""
    annotations: tuple[AnnotationHistogram, ...] = ()
    notes: tuple[str, ...] = ()
    stragglers: Stragglers | None = None
    """stragglers.stragglers: slowest/fastest ranks per step and the straggler table; only with 2 or more ranks."""
    roofline: Roofline | None = None
    """roofline.roofline: FLOPs, bytes, achieved TFLOP/s and TB/s per (operator, shapes, dtype), MFU per step."""
    collectives: Collectives | None = None
    """collectives.collectives: NCCL calls by message size (nccl-tests' busbw) and their arrival skew across ranks."""
    python_profile: PythonProfile | None = None
    """python_samples.python_profile: the Python sampling profile (`ktrace run --python-sample`); None without."""


def summarize(
    trace: Trace,
    *,
    top: int = 15,
    steps_pattern: str | None = None,
    annotations: tuple[str, ...] = (),
    annotation_bins: int = 20,
    by_shape: bool = False,
    gpu_peaks: Mapping[str, GpuPeaks] | None = None,
    index: TraceIndex | None = None,
) -> Summary:
    """Compose every analysis the dashboard shows.

    Args:
        trace: the trace.
        top: kernels listed in the top-by-time and top-by-count tables (the rest is "other").
        steps_pattern: regex of the step range names (default: steps.detect_steps' choice, else
            ``ProfilerStep#N``).
        annotations: regexes of ranges to histogram (SageMaker's custom histograms).
        annotation_bins: bins of those histograms.
        by_shape: add the operators by input shape (operators.by_shape) even when the trace records no shapes
            (with shapes it is always there).
        gpu_peaks: the rules file's [gpu_peaks."NAME"] rows (RulesConfig.gpu_peaks) for the roofline.
        index: the trace's TraceIndex (the rules and the report reuse what the summary computed).

    Returns:
        Summary.

    On a trace of LARGE_TRACE_ROWS rows or more (glibc only) this sets the process's malloc mmap threshold for the
    rest of its life (model.heap.map_large_blocks): numpy blocks of 256 KiB and more are mapped on their own, so a
    notebook or the TUI that summarizes a big trace keeps that setting (~5 % more CPU, the freed pages returned).
    """
    ix = TraceIndex.of(trace, index)
    if sum(trace.table(name).height for name in TABLES) >= LARGE_TRACE_ROWS:
        map_large_blocks()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="ktrace-summary") as threads:
        # independent analyses in threads where numba runs them (its kernels and polars/numpy passes release the
        # GIL); shared intermediate arrays are computed once (the index waits for a result another thread computes)
        pool = threads if runs_compiled(trace) else InPlace()
        latency = pool.submit(latency_stats, trace, by="kind", graph_runs="first", index=ix)
        idle = pool.submit(device_idle_breakdown, trace, index=ix)
        path_job = pool.submit(critical_path, trace, steps_pattern=steps_pattern, index=ix)
        raw_steps = detect_steps(trace, pattern=steps_pattern, index=ix)
        steps = step_spans(trace, pattern=steps_pattern, index=ix)
        stats = kernel_stats(trace, index=ix)
        active = active_time_share(trace, index=ix)
        overlap = comm_compute_overlap(trace, index=ix)
        n_ranks = int((ix.rank_pairs()["rank"] >= 0).sum())
        operators = operator_summary(trace, top=top, index=ix) or range_operator_summary(trace, top=top, index=ix)
        operators = with_shapes(trace, operators, asked=by_shape, top=top, index=ix)
        release_free_memory()
        sequences = kernel_sequences(trace, index=ix)
        memory_use = memory_timeline(trace, index=ix)
        release_free_memory()
        path = path_job.result()
        if n_ranks > 1:
            from ktrace.analysis.ranks import load_balance
            from ktrace.analysis.stragglers import stragglers
        return Summary(
            source=trace.meta.source,
            ranks=n_ranks,
            kernels=trace.kernels.height,
            phases=job_phases(trace, pattern=steps_pattern, index=ix),
            active=active,
            busy=busy_time(trace, per="device", index=ix),
            idle=idle.result(),
            top_by_time=top_kernels(trace, by="time", top=top, stats=stats),
            top_by_count=top_kernels(trace, by="count", top=top, stats=stats),
            latency=latency.result(),
            steps=steps,
            step_stats=step_stats(trace, steps=raw_steps),
            precision=precision_distribution(trace, index=ix),
            activity=activity_distribution(trace),
            memory=memory_distribution(trace),
            counters=counter_stats(trace),
            overlap=overlap,
            load_balance=load_balance(trace, pattern=steps_pattern, index=ix) if n_ranks > 1 else None,
            operators=operators,
            kernel_sequences=sequences,
            memory_timeline=memory_use,
            critical_path=path,
            roofline=roofline(trace, index=ix, overrides=dict(gpu_peaks or {})),
            collectives=collectives(trace, index=ix),
            python_profile=python_profile(trace, index=ix),
            annotations=tuple(annotation_histogram(trace, p, bins=annotation_bins) for p in annotations),
            notes=tuple(trace.meta.notes)
            + absent_notes(operators, sequences)
            + ((NO_MEMORY_TIMELINE,) if memory_use is None else ())
            + critical_path_notes(path),
            stragglers=stragglers(trace, index=ix) if n_ranks > 1 else None,
        )


def runs_compiled(trace: Trace) -> bool:
    """Whether the summary's kernels run compiled: numba is loaded, or a table has more rows than a kernel takes
    without it (analysis._kernels.NUMPY_MAX_ROWS). Only then do latency_stats, device_idle_breakdown and the
    critical path run in threads beside the other analyses: below, their kernels run as Python or numpy twins,
    and the critical path's longest paths as Python hold the GIL, so a thread buys little wall time while its
    memory stacks on the operators' pass (owlv2 x10, 1.3 M events, 8 alternated pairs: peak median 285 -> 282
    MiB, less CPU, wall not worse; RESULTS.md's B5 section)."""
    return _kernels.numba_loaded() or max(trace.table(name).height for name in TABLES) > _kernels.NUMPY_MAX_ROWS


class InPlace:
    """A ThreadPoolExecutor's submit() that runs the call at once in the calling thread (runs_compiled's other
    way): the analyses then run in turn, each at the lowest memory the ones before it leave."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """fn(*args, **kwargs) now, as a finished Future (its exception raised by result(), as a thread's)."""
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except Exception as error:  # noqa: BLE001 - kept for result(), where a thread's error is raised too
            done.set_exception(error)
        return done


NO_OPERATORS = (
    "operators: none in this trace (they come from Kineto cpu_op events, else from the CPU NVTX / "
    "ktrace.annotate ranges of nsys exports and ktrace captures; `ktrace import --no-ops` leaves them out)"
)
NO_SEQUENCES = f"kernel_sequences: no stream has {DEFAULT_LENGTH} kernels in a row"
NO_MEMORY_TIMELINE = (
    "memory_timeline: no GPU memory data in this trace (it comes from Kineto [memory] events, recorded with "
    "profile_memory=True, nsys CUDA memory usage events, or `ktrace run`'s NVML counters)"
)
ABSENT_DATA = frozenset({NO_OPERATORS, NO_SEQUENCES, NO_MEMORY_TIMELINE, NO_CRITICAL_PATH})
"""Notes that only say what a trace does not carry (not how to read its numbers): the terminal lists them last."""


def absent_notes(operators: OperatorSummary | None, sequences: KernelSequences | None) -> tuple[str, ...]:
    """Why the operators / kernel_sequences keys are null."""
    return ((NO_OPERATORS,) if operators is None else ()) + ((NO_SEQUENCES,) if sequences is None else ())
