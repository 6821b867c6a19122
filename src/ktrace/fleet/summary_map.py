"""Map-reduce summary of a many-rank store: rank_partial on the engine's workers, reduce_partials on the client.

Each task opens only its own partition (`store.read(only=...)`), in two passes: the first returns the partition's
span, its GPU records' span and its annotation ranges' extents (the job's spans set the time bins of the load
balance and of the rank heatmap, and the extents the annotation histograms' bins, as in one process), the second
its RankPartial. The job's critical path rides along (fleet.critical_path_map): the first pass also returns each
rank's steps, the second its graph of the first rank's median step, and the client joins them (path_of_passes,
building again the few graphs of another step). The client keeps the per-rank rows and merges histograms and totals as the partials arrive
(analysis.rank_reduce), so it never holds a frame of events; the result is the Summary `summarize()` gives.

`ktrace summary|report|check STORE` take this path, for speed and memory only, when the store has
FLEET_MIN_RANKS ranks or more, or when `--workers` / `--cluster` is given.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ktrace.analysis.critical_path_graph import Window
from ktrace.analysis.critical_path_parts import RankGraph, RankSteps, own_window, rank_graph, rank_steps
from ktrace.analysis.critical_path_summary import critical_path_notes
from ktrace.analysis.gpu_peaks import GpuPeaks
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rank_activity import HeatmapBins, gpu_span, job_bins
from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.rank_partials import RankPartial, rank_partial
from ktrace.analysis.rank_reduce import FleetResult, reduce_partials
from ktrace.analysis.rank_reduce_annotations import Extent, annotation_extent, job_extents
from ktrace.analysis.rank_reduce_usage import UsageBins
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.inputs import bin_ns_of
from ktrace.analysis.rules.rank_rules import RuleFold, rank_rule_part
from ktrace.analysis.utilization import MAX_BINS, busy_time
from ktrace.fleet.critical_path_map import RankPass, RankTask, first_task, guess_of, path_of_passes
from ktrace.fleet.engines import Engine, open_engine
from ktrace.model import store
from ktrace.model.alignment import clock_mode
from ktrace.model.errors import ProgressFn, TraceFormatError, no_progress
from ktrace.model.layout import is_store
from ktrace.model.schema import TABLES
from ktrace.presentation.summary_json import summary_to_dict

FLEET_MIN_RANKS = 16
"""Stores with this many ranks (partitions of rank >= 0) or more are summarized rank by rank: below it one
process holds the whole job easily (the 8-rank DLRM folder: 2,104 kernels)."""


@dataclass(frozen=True)
class PartitionTask:
    """One partition of a store, and what its partial needs from the job (picklable: it travels to workers)."""

    store: str
    node: str
    rank: int
    job_span: tuple[int, int] | None = None
    steps_pattern: str | None = None
    heatmap_bins: HeatmapBins | None = None
    clock: str = "aligned"
    """The client's clock mode (model.alignment.clock_mode): a Dask worker does not see the client's KTRACE_CLOCK."""
    annotations: tuple[str, ...] | None = None
    """The user's annotation patterns (None: the default candidates, those some rank has)."""
    extents: Mapping[str, Extent] = field(default_factory=dict)
    """The job's extent per annotation pattern (second pass)."""
    by_shape: bool = False
    skip: tuple[str, ...] = ()
    """Tables not to read (store.read's skip: ("ops",) for --no-ops)."""
    rules_config: RulesConfig | bool = False
    """The rules' config (True: the defaults) for the partial's RuleParts; False: no rules."""
    usage_bins: UsageBins | None = None
    """The job's bins of the system usage and utilization curves (second pass, when asked for: the report's)."""
    path_window: Window | None = None
    """The rank's window of the critical path's guessed step (critical_path_map.guess_of the first rank's steps,
    critical_path_parts.own_window): the second pass builds the rank's graph of it beside its partial."""

    def label(self) -> str:
        """How errors and progress name the task."""
        return f"{self.store}: node={self.node}/rank={self.rank}"


@dataclass(frozen=True)
class PartitionSpans:
    """What the first pass returns of one partition."""

    span: tuple[int, int] | None
    """Trace.span_ns."""
    gpu: tuple[int, int] | None
    """rank_activity.gpu_span: the job's heatmap bins are cut over their union, as gpu_bins does."""
    extents: dict[str, Extent]
    """Its ranges' durations per annotation pattern."""
    device_span: int
    """The longest first-to-last GPU record span of its devices (utilization.busy_time's span_ns; 0: none)."""
    devices: int
    """Its devices with GPU records."""
    steps: RankSteps
    """critical_path_parts.rank_steps: the critical path's first pass, in the same read."""


def partition_span(task: PartitionTask) -> PartitionSpans:
    """Map task of the first pass: the spans of one partition (PartitionSpans)."""
    trace = store.read(task.store, clock=task.clock, only={(task.node, task.rank)}, skip=task.skip)
    ix = TraceIndex(trace)
    busy = busy_time(trace, per="device", index=ix)
    longest = int(busy["span_ns"].max() or 0) if busy.height else 0  # type: ignore[arg-type]
    extents = annotation_extent(trace, task.annotations)
    steps = rank_steps(trace, task.node, task.rank, steps_pattern=task.steps_pattern)
    return PartitionSpans(trace.span_ns(), gpu_span(trace, index=ix), extents, longest, busy.height, steps)


def usage_bins(found: list[PartitionSpans], job_span: tuple[int, int] | None) -> UsageBins:
    """The job's UsageBins from its partitions' first pass: rules.inputs.auto_bin_ns of the whole job (its longest
    device span / 100, 1-500 ms) from its first GPU record, and timeline_utilization's guard on the bin count."""
    bin_ns = bin_ns_of(pl.DataFrame({"span_ns": [max((f.device_span for f in found), default=0)]}))
    gpus = [f.gpu for f in found if f.gpu is not None]
    start, end = (min(a for a, _ in gpus), max(b for _, b in gpus)) if gpus else (0, 0)
    too_many = (end - start) // bin_ns * sum(f.devices for f in found) > MAX_BINS
    return UsageBins(bin_ns, start, job_span[0] if job_span else 0, too_many)


PartialPass = tuple[RankPartial, Window | None, RankGraph | None]
"""A partition's RankPartial, and its window and graph of the critical path's guessed step (critical_path_map's
RankPass but the steps, which the first pass returned)."""


def partition_partial(task: PartitionTask) -> PartialPass:
    """Map task of the second pass: the RankPartial of one partition, with its RuleParts when the task asks for
    the rules (rules.rank_rules.rank_rule_part, on the same TraceIndex), and its graph of the guessed step."""
    trace = store.read(task.store, clock=task.clock, only={(task.node, task.rank)}, skip=task.skip)
    ix = TraceIndex(trace)
    partial = rank_partial(
        trace,
        job_span=task.job_span,
        steps_pattern=task.steps_pattern,
        heatmap_bins=task.heatmap_bins,
        annotations=task.extents,
        by_shape=task.by_shape,
        usage_bins=task.usage_bins,
        index=ix,
    )
    if task.rules_config is not False:
        config = None if task.rules_config is True else task.rules_config
        partial = dataclasses.replace(partial, rules=rank_rule_part(trace, config, index=ix))
    window = task.path_window
    return partial, window, None if window is None else rank_graph(trace, window, {}, 0, 0)


def store_ranks(path: str | os.PathLike[str]) -> int:
    """Ranks (partitions of rank >= 0) of a .ktrace store; 0 for anything else (a Kineto file, an nsys export)."""
    root = Path(path)
    if not root.is_dir() or not is_store(root):
        return 0
    return sum(1 for _, rank, _ in store.partitions(root) if rank >= 0)


def wants_fleet(path: str | os.PathLike[str], workers: int | None, cluster: str | None) -> bool:
    """Whether `ktrace summary|report|check` take the map-reduce path for `path` (see the module docstring)."""
    if workers is not None or cluster is not None:
        return True
    return store_ranks(path) >= FLEET_MIN_RANKS


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
        progress: called with (done, total) as partials arrive.

    Raises:
        TraceFormatError: `path` is not a store, or has no partition.
    """
    root = Path(path)
    if not root.is_dir() or not is_store(root):
        raise TraceFormatError(f"{root}: the map-reduce summary needs a .ktrace store (import the trace first)")
    clock = clock_mode()  # here, not on the workers: one usage error, and the client's mode wherever they run
    tasks = [
        PartitionTask(
            str(root),
            node,
            rank,
            None,
            steps_pattern,
            clock=clock,
            annotations=annotations,
            by_shape=by_shape,
            skip=skip,
        )
        for node, rank, _ in store.partitions(root)
    ]
    if not tasks:
        raise TraceFormatError(f"{root}: the store has no partition")
    found = [s for _, s in sorted(engine.map(partition_span, tasks, describe=PartitionTask.label), key=lambda x: x[0])]
    spans = [f.span for f in found if f.span is not None]
    job_span = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    bins = job_bins([f.gpu for f in found], spans)
    extents = job_extents([f.extents for f in found], annotations)
    usage = usage_bins(found, job_span) if system_usage else None
    path_tasks = [RankTask(str(root), t.node, t.rank, clock, None, steps_pattern, skip=skip) for t in tasks]
    guess = guess_of(found[first_task(path_tasks)].steps)
    tasks = [
        dataclasses.replace(
            t,
            job_span=job_span,
            heatmap_bins=bins,
            extents=extents,
            rules_config=rules_config,
            usage_bins=usage,
            path_window=None if guess is None else own_window(f.steps, *guess),
        )
        for t, f in zip(tasks, found, strict=True)
    ]
    passes: dict[int, RankPass] = {}

    config = None if rules_config is False else RulesConfig() if rules_config is True else rules_config
    fold = None if config is None else RuleFold(config)

    def partials() -> Iterator[RankPartial]:
        mapped = engine.map(partition_partial, tasks, describe=PartitionTask.label)
        for done, (i, (partial, window, graph)) in enumerate(mapped, 1):
            progress(done, len(tasks))
            passes[i] = (found[i].steps, window, graph)
            if fold is not None and partial.rules is not None:  # folded as it comes, not kept per rank
                fold.add(partial.rules)
                partial = dataclasses.replace(partial, rules=None)
            yield partial

    result = reduce_partials(partials(), top=top, by_shape=by_shape, gpu_peaks=gpu_peaks)
    critical = path_of_passes(root, engine, path_tasks, passes)
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
) -> FleetResult:
    """summarize_store on the engine `open_engine(workers=, cluster=)` picks for the store's partitions (a Dask
    `Client` or cluster object may be passed as `cluster`); the engine is closed afterwards."""
    n = sum(1 for _ in store.partitions(Path(path))) if Path(path).is_dir() else 1
    with open_engine(workers=workers, cluster=cluster, tasks=n) as engine:
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
        )
