"""Map-reduce summary of a many-rank store: rank_partial on the engine's workers, reduce_partials on the client.

A task covers a few consecutive partitions (task_groups.partition_groups: a few tasks per worker, at most TASK_BYTES of
Parquet each) and reads them once (store.read_each), in one pass: the job's spans, which set the time bins of the
load balance and of the rank heatmap as in one process, come from the partitions' Parquet footers
(model.partition_spans; where the footers cannot say exactly, and for the report's usage bins, a first pass reads
the partitions for them), and the annotation histograms' bins are cut on the client from every rank's range
durations. Each task returns its RankPartial, computed over the task's ranks at once (a partial may hold any whole
ranks). What judges one rank alone runs on each partition's own trace: the "per rank" rules and the critical
path's parts. The job's critical path rides along (fleet.critical_path_map): a worker first reads the first rank's
steps (the guessed step, its median), then each task returns every rank's steps and graph of its own window of that
step, and the client joins them (path_of_passes, building again the few graphs of another step) in a thread while it
finishes the reduce. The client keeps the per-rank rows and merges histograms and totals as the partials arrive
(analysis.rank_reduce), so it never holds a frame of events; the result is the Summary `summarize()` gives.

`ktrace summary|report|check STORE` take this path, for speed and memory only, when the store has
FLEET_MIN_RANKS ranks or more, or when `--workers` / `--cluster` is given; fleet.early_start starts the workers
and the first rank's guess before the client imports this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ktrace.analysis.annotation_histograms import DEFAULT_ANNOTATION_PATTERNS
from ktrace.analysis.critical_path import CriticalPath
from ktrace.analysis.critical_path_parts import own_windows
from ktrace.analysis.critical_path_rank_graphs import ranks_graphs
from ktrace.analysis.critical_path_summary import critical_path_notes
from ktrace.analysis.critical_path_task_steps import ranks_steps
from ktrace.analysis.gpu_peaks import GpuPeaks
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rank_activity import HeatmapBins, gpu_span, job_bins
from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.rank_index_seeds import seed_rank_indexes
from ktrace.analysis.rank_partials import RankPartial, rank_partial
from ktrace.analysis.rank_reduce import FleetResult, reduce_partials
from ktrace.analysis.rank_reduce_usage import UsageBins
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.inputs import bin_ns_of
from ktrace.analysis.rules.rank_rules import RuleFold, rank_rule_parts
from ktrace.analysis.utilization import MAX_BINS, busy_time
from ktrace.fleet.critical_path_map import PassFold, RankPass, first_task, guess_task, path_of_passes
from ktrace.fleet.early_start import EarlyStart
from ktrace.fleet.engines import Engine, open_engine
from ktrace.fleet.rank_tasks import Guess, RankTask
from ktrace.fleet.task_groups import Parts, partition_groups
from ktrace.model import store
from ktrace.model.clock import clock_mode
from ktrace.model.errors import ProgressFn, TraceFormatError, no_progress
from ktrace.model.layout import is_store
from ktrace.model.partition_spans import PartitionSpans, footer_spans, union_span
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace
from ktrace.presentation.summary_json import summary_to_dict


@dataclass(frozen=True)
class PartitionTask:
    """Some partitions of a store, and what their partial needs from the job (picklable: it travels to workers)."""

    store: str
    parts: Parts
    job_span: tuple[int, int] | None = None
    steps_pattern: str | None = None
    heatmap_bins: HeatmapBins | None = None
    clock: str = "aligned"
    """The client's clock mode (model.clock.clock_mode): a Dask worker does not see the client's KTRACE_CLOCK."""
    annotations: tuple[str, ...] = ()
    """The annotation patterns to histogram (the user's, or every default candidate)."""
    by_shape: bool = False
    skip: tuple[str, ...] = ()
    """Tables not to read (store.read's skip: ("ops",) for --no-ops)."""
    rules_config: RulesConfig | bool = False
    """The rules' config (True: the defaults) for the partial's RuleParts; False: no rules."""
    usage_bins: UsageBins | None = None
    """The job's bins of the system usage and utilization curves (when asked for: the report's)."""
    path_guess: Guess | None = None
    """The first rank's median step (critical_path_map.guess_task): each partition's graph of its own window of that
    step (critical_path_parts.own_windows) is built beside the partial."""

    def label(self) -> str:
        """How errors and progress name the task."""
        (node, rank), more = self.parts[0], len(self.parts) - 1
        return f"{self.store}: node={node}/rank={rank}" + (f" (and {more} more partitions)" if more else "")

    def read(self, unused: tuple[str, ...] = ()) -> tuple[Trace, list[Trace]]:
        """The task's partitions as one trace, and each alone (store.read_each), without the `unused` tables."""
        return store.read_each(self.store, set(self.parts), clock=self.clock, skip=(*self.skip, *unused))


_SPANS_UNUSED = ("threads", "devices")
"""Tables the spans' pass does not read: nothing it computes looks at them (2 of a DLRM rank's 7 files)."""


@dataclass(frozen=True)
class TaskSpans:
    """What the spans' pass returns of a task's partitions (only where the footers cannot say, or for the
    report's usage bins)."""

    span: tuple[int, int] | None
    """Trace.span_ns."""
    gpu: tuple[int, int] | None
    """rank_activity.gpu_span: the job's heatmap bins are cut over their union, as gpu_bins does."""
    device_span: int
    """The longest first-to-last GPU record span of its devices (utilization.busy_time's span_ns; 0: none)."""
    devices: int
    """Its devices with GPU records."""


def partition_span(task: PartitionTask) -> TaskSpans:
    """Map task of the spans' pass: the spans of a task's partitions (TaskSpans)."""
    trace, _ = task.read(_SPANS_UNUSED)
    ix = TraceIndex(trace)
    busy = busy_time(trace, per="device", index=ix)
    longest = int(busy["span_ns"].max() or 0) if busy.height else 0  # type: ignore[arg-type]
    return TaskSpans(trace.span_ns(), gpu_span(trace, index=ix), longest, busy.height)


def usage_bins(found: list[TaskSpans], job_span: tuple[int, int] | None) -> UsageBins:
    """The job's UsageBins from its partitions' spans: rules.inputs.auto_bin_ns of the whole job (its longest
    device span / 100, 1-500 ms) from its first GPU record, and timeline_utilization's guard on the bin count."""
    bin_ns = bin_ns_of(pl.DataFrame({"span_ns": [max((f.device_span for f in found), default=0)]}))
    gpus = [f.gpu for f in found if f.gpu is not None]
    start, end = (min(a for a, _ in gpus), max(b for _, b in gpus)) if gpus else (0, 0)
    too_many = (end - start) // bin_ns * sum(f.devices for f in found) > MAX_BINS
    return UsageBins(bin_ns, start, job_span[0] if job_span else 0, too_many)


PartialPass = tuple[RankPartial, tuple[RankPass, ...]]
"""A task's RankPartial (its rules: a RuleParts per partition), and per partition its critical path's RankPass:
its steps, and its window and graph of the guessed step."""


def partition_partial(task: PartitionTask) -> PartialPass:
    """Map task: the RankPartial of a task's partitions (one pass of the analyses over all of them: rank_partial
    takes whole ranks), with a RuleParts per partition when the task asks for the rules ("per rank" rules judge each
    rank alone: rules.rank_rules.rank_rule_parts, their costliest inputs cut from the joined trace), and each
    partition's steps and graph of the guessed step (critical_path_rank_graphs.ranks_graphs)."""
    trace, each = task.read()
    joined = TraceIndex(trace)
    partial = rank_partial(
        trace,
        job_span=task.job_span,
        steps_pattern=task.steps_pattern,
        heatmap_bins=task.heatmap_bins,
        annotations=task.annotations,
        by_shape=task.by_shape,
        usage_bins=task.usage_bins,
        index=joined,
    )
    indexes = [TraceIndex(alone) for alone in each]  # a rank's rules, steps and graph share its index
    seed_rank_indexes(joined, indexes, task.parts)  # its GPU columns, launch rows, rank ids: the joined trace's
    if task.rules_config is not False:
        config = None if task.rules_config is True else task.rules_config
        rules = rank_rule_parts(joined, indexes, task.parts, config)  # costliest inputs cut from the joined
        partial = dataclasses.replace(partial, rules=rules)
    found = ranks_steps(joined, task.parts, indexes, steps_pattern=task.steps_pattern)
    windows = [None] * len(found) if task.path_guess is None else own_windows(found, *task.path_guess)
    graphs = ranks_graphs(joined, task.parts, indexes, windows)  # rank_graph of each rank's window, in one pass
    return partial, tuple(zip(found, windows, graphs, strict=True))


def _footers(root: Path, tasks: list[PartitionTask], system_usage: bool) -> list[PartitionSpans] | None:
    """Every partition's spans from its Parquet footers (model.partition_spans), in the tasks' order; None where
    they cannot say, or with `system_usage` (its bins need every device's span: a pass reads the partitions)."""
    if system_usage:
        return None
    listed = {(node, rank): folder for node, rank, folder in store.partitions(root)}
    parts = [(node, listed[(node, rank)]) for t in tasks for node, rank in t.parts]
    return footer_spans(root, parts, clock=tasks[0].clock, skip=tasks[0].skip)


def _job_bins(
    engine: Engine, tasks: list[PartitionTask], footers: list[PartitionSpans] | None, system_usage: bool
) -> tuple[tuple[int, int] | None, HeatmapBins, UsageBins | None]:
    """The job's span, heatmap bins and (with `system_usage`) usage bins: from the partitions' `footers`, else
    from a pass reading them (partition_span)."""
    found = None
    if footers is None:
        found = [
            s for _, s in sorted(engine.map(partition_span, tasks, describe=PartitionTask.label), key=lambda x: x[0])
        ]
        spans, gpus = [f.span for f in found], [f.gpu for f in found]
    else:
        spans, gpus = [f.span for f in footers], [f.gpu for f in footers]
    known = [s for s in spans if s is not None]
    job_span = union_span(known)
    usage = usage_bins(found, job_span) if found is not None and system_usage else None
    return job_span, job_bins(gpus, known), usage


def summarize_store(
    path: str | os.PathLike[str],
    engine: Engine,
    *,
    top: int = 15,
    steps_pattern: str | None = None,
    annotations: tuple[str, ...] | None = (),
    by_shape: bool = False,
    rules_config: RulesConfig | bool = False,
    skip: tuple[str, ...] = (),
    gpu_peaks: Mapping[str, GpuPeaks] | None = None,
    system_usage: bool = False,
    progress: ProgressFn = no_progress,
    ranks_per_task: int | None = None,
    guess: Callable[[], Guess | None] | None = None,
) -> FleetResult:
    """The FleetResult of a store, per-rank work on `engine` (benchmarks/fleet.py compares engines with it).

    Args:
        path: the store.
        engine: where the per-partition tasks run.
        top, steps_pattern, by_shape: as summarize's.
        annotations: patterns to histogram, as summarize's; None: the report's defaults
            (dashboard.default_annotations: forward/backward/optimizer ranges some rank has).
        rules_config: the rules' config (True: the defaults) to reduce the rules with; False: no rules.
        skip: tables not to read (store.read's: ("ops",) for --no-ops).
        gpu_peaks: gpu_peaks rows from a rules file, as summarize's.
        system_usage: also the job's system usage and utilization curves (FleetResult.system_usage, the report's).
        progress: called with (ranks done, ranks) as partials arrive.
        ranks_per_task: partitions a task covers at most (partition_groups; default a few tasks per worker).
        guess: the first rank's guess, computed already (early_start.EarlyStart.guess: it waits for it); default:
            read on `engine` here (critical_path_map.guess_task).

    Raises:
        TraceFormatError: `path` is not a store, or has no partition.
    """
    root = Path(path)
    if not root.is_dir() or not is_store(root):
        raise TraceFormatError(f"{root}: the map-reduce summary needs a .ktrace store (import the trace first)")
    clock = clock_mode()  # here, not on the workers: one usage error, and the client's mode wherever they run
    groups = partition_groups(root, engine.workers, ranks_per_task)
    if not groups:
        raise TraceFormatError(f"{root}: the store has no partition")
    patterns = DEFAULT_ANNOTATION_PATTERNS if annotations is None else annotations
    tasks = [
        PartitionTask(
            str(root),
            parts,
            None,
            steps_pattern,
            clock=clock,
            annotations=tuple(patterns),
            by_shape=by_shape,
            skip=skip,
        )
        for parts in groups
    ]
    path_tasks = [
        RankTask(str(root), n, r, clock, None, steps_pattern, skip=skip) for parts in groups for n, r in parts
    ]
    with ThreadPoolExecutor(1) as pool:  # the footers (and meta) are read while a worker reads the first rank's steps
        footers = pool.submit(_footers, root, tasks, system_usage)
        empty = pool.submit(store.read, root, clock=clock, only=(), skip=TABLES)
        if guess is None:
            path_guess = guess_task(engine, path_tasks[first_task(path_tasks)], start=__name__)  # the others start
        else:
            path_guess = guess()
        job_span, bins, usage = _job_bins(engine, tasks, footers.result(), system_usage)
    tasks = [
        dataclasses.replace(
            t, job_span=job_span, heatmap_bins=bins, rules_config=rules_config, usage_bins=usage, path_guess=path_guess
        )
        for t in tasks
    ]
    first = [sum(len(g) for g in groups[:i]) for i in range(len(groups))]  # each task's first partition
    passes = PassFold(len(path_tasks))

    config = None if rules_config is False else RulesConfig() if rules_config is True else rules_config
    fold = None if config is None else RuleFold(config)
    total = len(path_tasks)
    job: list[Future[CriticalPath | None]] = []

    def job_path() -> CriticalPath | None:
        return path_of_passes(root, engine, path_tasks, passes.ready(), empty=empty.result())

    def partials() -> Iterator[RankPartial]:
        done = 0
        for i, (partial, graphs) in engine.map(partition_partial, tasks, describe=PartitionTask.label):
            done += len(graphs)
            progress(done, total)
            passes.add(first[i], graphs)
            if fold is not None and partial.rules is not None:  # folded as it comes, not kept per rank
                for part in partial.rules:
                    fold.add(part)
                partial = dataclasses.replace(partial, rules=None)
            yield partial
        # every graph is in: the job's path (numpy, numba and polars, which let go of the GIL) is taken while the
        # reduce finishes its tables, on the cores the map's workers no longer use
        job.append(after.submit(job_path))

    with ThreadPoolExecutor(1, thread_name_prefix="ktrace-job-path") as after:
        result = reduce_partials(
            partials(), top=top, by_shape=by_shape, gpu_peaks=gpu_peaks, default_annotations=annotations is None
        )
        critical = (job[0] if job else after.submit(job_path)).result()  # (a reduce that stopped reading: now)
    summary = dataclasses.replace(
        result.summary, critical_path=critical, notes=result.summary.notes + critical_path_notes(critical)
    )
    rules = None
    if fold is not None:  # DroppedRecords counts the store's own health once (fleet_rules.merge_health)
        rules = fold.finish(summary, store.read(root, clock=clock, skip=TABLES).meta.health)
    return dataclasses.replace(result, summary=summary, engine=engine_label(engine), rules=rules)


def same_results(a: FleetResult, b: FleetResult) -> bool:
    """Whether two rank-by-rank results of one store (from different engines) hold the same numbers: their
    Summary's JSON (summary_to_dict, the straggler tables in it) and their rank heatmaps cell by cell.
    benchmarks/fleet.py prints it as "results identical"."""
    return summary_to_dict(a.summary) == summary_to_dict(b.summary) and _same_heatmap(a.rank_heatmap, b.rank_heatmap)


def _same_heatmap(a: RankHeatmap | None, b: RankHeatmap | None) -> bool:
    if a is None or b is None:
        return a is b
    frames = ("ranks", "by_time", "by_step")
    return a.bins == b.bins and all(getattr(a, f).equals(getattr(b, f)) for f in frames)


def engine_label(engine: Engine) -> str:
    """ "in-process", "processes (2 workers)", "dask (4 workers)"."""
    if engine.name == "in-process":
        return engine.name
    return f"{engine.name} ({engine.workers} worker{'s' if engine.workers != 1 else ''})"


def fleet_summary(
    path: str | os.PathLike[str],
    *,
    workers: int | None = None,
    cluster: str | object | None = None,
    top: int = 15,
    steps_pattern: str | None = None,
    annotations: tuple[str, ...] | None = (),
    by_shape: bool = False,
    rules_config: RulesConfig | bool = False,
    skip: tuple[str, ...] = (),
    gpu_peaks: Mapping[str, GpuPeaks] | None = None,
    system_usage: bool = False,
    progress: ProgressFn = no_progress,
    early: EarlyStart | None = None,
) -> FleetResult:
    """summarize_store on the engine `open_engine(workers=, cluster=)` picks for the store's partitions (a Dask
    `Client` or cluster object may be passed as `cluster`); the engine is closed afterwards. `early`: the engine
    started already, with the first rank's guess (early_start.start_early, same path and options), which the
    caller closes."""
    if early is not None:
        engine = early.engine
    else:
        n = sum(1 for _ in store.partitions(Path(path))) if Path(path).is_dir() else 1
        engine = open_engine(workers=workers, cluster=cluster, tasks=n)
    with engine if early is None else contextlib.nullcontext():
        return summarize_store(
            path,
            engine,
            top=top,
            steps_pattern=steps_pattern,
            annotations=annotations,
            by_shape=by_shape,
            rules_config=rules_config,
            skip=skip,
            gpu_peaks=gpu_peaks,
            system_usage=system_usage,
            progress=progress,
            guess=early.guess if early is not None else None,
        )
