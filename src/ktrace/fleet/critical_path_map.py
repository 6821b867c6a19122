"""The job's critical path of a many-rank store, rank by rank: the same CriticalPath as
`critical_path(store.read(STORE))`, without one process holding the job.

Each task opens only its own partition (as summary_map's do). A first pass returns each rank's step ranges, spans
and collective counts (analysis.critical_path_parts.rank_steps: small); the client chooses the step and every
rank's window as one process would. When ranks ran different numbers of some collective, a pass over the ranks
that ran collectives returns those kernels' end times, from which the client corrects each rank's order as
clock alignment does (collective_lags). The last pass builds each rank's graph of its window on its own trace
(rank_graph: one step of one rank) and returns it with the rows of its events; the client puts them together
(join_rank_graphs), joins them at the collectives and takes the longest path (critical_path.path_of_windows). It
holds the chosen step's graph of every rank and the rows of its events, never a rank's trace.
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
    GRAPH_TABLES,
    RankGraph,
    RankSteps,
    collective_ends,
    collective_lags,
    first_window,
    job_windows,
    join_rank_graphs,
    rank_graph,
    rank_steps,
    spread_collectives,
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
    """rank_graph: the rank's window of the chosen step."""
    lags: tuple[tuple[str, int], ...] = ()
    """rank_graph: (kernel name, lag) of the rank's collectives whose order collective_lags corrects."""
    offsets: tuple[int, int] = (0, 0)
    """rank_graph: the index of the rank's first kernel and first memory record among the job's GPU records."""

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


def graph_task(task: RankTask) -> RankGraph:
    """Last pass: the rank's graph of its window."""
    assert task.window is not None
    return rank_graph(task.read(GRAPH_TABLES + ("syncs",)), task.window, dict(task.lags), *task.offsets)


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
    graph_tasks = []
    for w in windows:
        i = at[(w.node, w.rank)]
        offsets = (int(kernel_offsets[i]), int(memory_offsets[i]))
        rank_lags = tuple(sorted(lags.get((w.node, w.rank), {}).items()))
        graph_tasks.append(dataclasses.replace(tasks[i], window=w, lags=rank_lags, offsets=offsets))
    done: dict[int, RankGraph] = {}
    for n, (i, graph) in enumerate(engine.map(graph_task, graph_tasks, describe=RankTask.label), 1):
        done[i] = graph
        progress(n, len(graph_tasks))
    joined = join_rank_graphs(
        [done[i] for i in range(len(graph_tasks))], store.read(root, clock=clock, only=(), skip=TABLES)
    )
    result = path_of_windows(TraceIndex(joined.trace), windows, scope, label, joined.keys, joined.graphs)
    if result is None:
        return None
    return dataclasses.replace(result, path_records=np.sort(joined.records[result.path_records]))


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
