"""The job's critical path of a many-rank store, rank by rank: the same CriticalPath as
`critical_path(store.read(STORE))`, without one process holding the job.

Each task opens only its own partition (as summary_map's do). A first pass returns each rank's step ranges, spans
and collective counts (analysis.critical_path_parts.rank_steps: small); the client chooses the step and every
rank's window as one process would. When ranks ran different numbers of some collective, a pass over the ranks
that ran collectives returns those kernels' end times, from which the client corrects each rank's order as
clock alignment does (collective_lags). The last pass cuts each rank's trace to what its window's graph reads
(window_cut: one step of one rank); the client concatenates the cuts, builds every rank's graph, joins them at
the collectives and takes the longest path (critical_path.path_of_windows). Its memory is bounded by one step of
every rank, not by the job.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from ktrace.analysis.critical_path import CriticalPath, path_of_windows
from ktrace.analysis.critical_path_graph import Window
from ktrace.analysis.critical_path_parts import (
    CUT_TABLES,
    RankCut,
    RankSteps,
    collective_ends,
    collective_lags,
    cut_keys,
    first_window,
    job_windows,
    rank_steps,
    spread_collectives,
    window_cut,
)
from ktrace.analysis.index import TraceIndex
from ktrace.fleet.engines import Engine
from ktrace.model import store
from ktrace.model.alignment import clock_mode
from ktrace.model.errors import ProgressFn, TraceFormatError, no_progress
from ktrace.model.layout import is_store
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace

_STEP_TABLES = ("ops", "api", "kernels", "memory", "ranges")
"""Tables the first pass reads (steps, spans, launch windows of inferred steps, collectives)."""


@dataclass(frozen=True)
class RankTask:
    """One partition of the store and what its task needs from the client (picklable: it travels to workers)."""

    store: str
    node: str
    rank: int
    clock: str
    """The client's clock mode (a worker does not see the client's KTRACE_CLOCK)."""
    annotation: str | None = None
    steps_pattern: str | None = None
    collectives: frozenset[str] = frozenset()
    """collective_ends: the kernels whose end times the client needs."""
    window: Window | None = None
    lags: tuple[tuple[str, int], ...] = ()
    offsets: tuple[int, int] = (0, 0)
    """window_cut: the index of the rank's first kernel and first memory record among the job's GPU records."""

    def label(self) -> str:
        """How errors and progress name the task."""
        return f"{self.store}: node={self.node}/rank={self.rank}"

    def read(self, tables: tuple[str, ...]) -> Trace:
        """The partition's trace, holding `tables` only."""
        skip = [t for t in TABLES if t not in tables]
        return store.read(self.store, clock=self.clock, only={(self.node, self.rank)}, skip=skip)


def steps_task(task: RankTask) -> RankSteps:
    """First pass: the rank's RankSteps."""
    return rank_steps(
        task.read(_STEP_TABLES), task.node, task.rank, annotation=task.annotation, steps_pattern=task.steps_pattern
    )


def ends_task(task: RankTask) -> pl.DataFrame:
    """Second pass (when ranks ran different numbers of a collective): the end times of those collectives."""
    return collective_ends(task.read(("kernels",)), task.node, task.rank, set(task.collectives))


def cut_task(task: RankTask) -> RankCut:
    """Last pass: the rank's window cut."""
    assert task.window is not None
    return window_cut(task.read(CUT_TABLES), task.window, dict(task.lags), *task.offsets)


def job_critical_path(
    path: Path,
    engine: Engine,
    *,
    annotation: str | None = None,
    instance: int = 0,
    steps_pattern: str | None = None,
    progress: ProgressFn = no_progress,
) -> CriticalPath | None:
    """critical_path(store.read(path)) (the whole job's, across ranks) computed rank by rank on `engine`.

    Returns:
        None where critical_path returns None (no CPU events, no such annotation instance, a cycle).

    Raises:
        TraceFormatError: `path` is not a store, or has no partition.
    """
    root = Path(path)
    if not root.is_dir() or not is_store(root):
        raise TraceFormatError(f"{root}: the rank-by-rank critical path needs a .ktrace store (import the trace first)")
    clock = clock_mode()
    tasks = [
        RankTask(str(root), node, rank, clock, annotation, steps_pattern) for node, rank, _ in store.partitions(root)
    ]
    if not tasks:
        raise TraceFormatError(f"{root}: the store has no partition")
    found_parts = dict(engine.map(steps_task, tasks, describe=RankTask.label))
    parts = [found_parts[i] for i in range(len(tasks))]
    found = first_window(parts, annotation, instance)
    if found is None:
        return None
    first, scope, label = found
    windows = job_windows(parts, first, scope)
    lags = _lags(engine, tasks, parts)
    kernel_offsets = np.cumsum([0] + [p.kernels for p in parts])
    memory_offsets = np.cumsum([0] + [p.memory for p in parts]) + int(kernel_offsets[-1])
    at = {(t.node, t.rank): i for i, t in enumerate(tasks)}
    cuts = []
    for w in windows:
        i = at[(w.node, w.rank)]
        offsets = (int(kernel_offsets[i]), int(memory_offsets[i]))
        rank_lags = tuple(sorted(lags.get((w.node, w.rank), {}).items()))
        cuts.append(dataclasses.replace(tasks[i], window=w, lags=rank_lags, offsets=offsets))
    done: dict[int, RankCut] = {}
    for n, (i, cut) in enumerate(engine.map(cut_task, cuts, describe=RankTask.label), 1):
        done[i] = cut
        progress(n, len(cuts))
    return _joined_path(root, clock, [done[i] for i in range(len(cuts))], windows, scope, label)


def _lags(engine: Engine, tasks: list[RankTask], parts: list[RankSteps]) -> dict[tuple[str, int], dict[str, int]]:
    spread = spread_collectives(parts)
    if not spread:
        return {}
    asked = [
        dataclasses.replace(t, collectives=frozenset(spread))
        for t, p in zip(tasks, parts, strict=True)
        if p.collectives
    ]
    ends = [e for _, e in engine.map(ends_task, asked, describe=RankTask.label)]
    return collective_lags(ends)


def _joined_path(
    root: Path, clock: str, cuts: list[RankCut], windows: list[Window], scope: str, label: str
) -> CriticalPath | None:
    """The path of the concatenated cuts, its GPU records renumbered as the whole job's."""
    empty = store.read(root, clock=clock, only=(), skip=TABLES)
    frames = {name: pl.concat([c.tables[name] for c in cuts], how="vertical") for name in CUT_TABLES}
    trace = dataclasses.replace(
        empty,
        ops=frames["ops"],
        api=frames["api"],
        kernels=frames["kernels"],
        memory=frames["memory"],
        syncs=frames["syncs"],
    )
    records = np.concatenate([c.kernel_records for c in cuts] + [c.memory_records for c in cuts])
    keys = cut_keys([k for c in cuts for k in c.kernel_keys], int(records.size))
    result = path_of_windows(TraceIndex(trace), windows, scope, label, keys)
    if result is None:
        return None
    return dataclasses.replace(result, path_records=np.sort(records[result.path_records]))
