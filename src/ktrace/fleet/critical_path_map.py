"""The job's critical path of a many-rank store, rank by rank: the same CriticalPath as
`critical_path(store.read(STORE))`, without one process holding the job.

Each task opens only its own partition (as summary_map's do), once in the common case. The first (node, rank)'s
median step is read first (the guess); then one pass returns each rank's step ranges, spans and collective counts
(analysis.critical_path_parts.rank_steps: small) and its graph of the guessed step (rank_graph: one step of one
rank, with the rows of its events only). The client chooses the step and every rank's window as one process
would (first_window, job_windows); a rank whose guessed window is not its window (the first rank's steps were
not the kind the job's are) has its graph built again (graph_task). When ranks ran different numbers of some
collective, a pass over the ranks that ran collectives returns those kernels' end times, from which the client
corrects each rank's order as clock alignment does (collective_lags, relagged). The client puts the graphs
together (join_rank_graphs), joins them at the collectives (critical_path_ranks.join_graph_arrays, widening each
array as it joins them) and takes the longest path (critical_path.path_of_windows). It holds the chosen step's
graph of every rank (packed in narrow dtypes, critical_path_packed) and the few columns of its events' rows the
path reads, never a rank's trace; it loads the longest-path kernels while the graphs arrive (PassFold).
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from pathlib import Path

import numpy as np
import polars as pl

from ktrace.analysis.critical_path import CriticalPath, path_of_windows
from ktrace.analysis.critical_path_graph import Graph, Window
from ktrace.analysis.critical_path_parts import (
    GRAPH_TABLES,
    RankGraph,
    RankSteps,
    collective_ends,
    collective_lags,
    first_window,
    job_windows,
    join_rank_graphs,
    load_longest_path,
    own_window,
    rank_graph,
    rank_steps,
    relagged,
    spread_collectives,
)
from ktrace.analysis.critical_path_ranks import JobGraph, join_graph_arrays, range_name
from ktrace.analysis.index import TraceIndex
from ktrace.fleet.engines import Engine
from ktrace.fleet.rank_tasks import Guess, RankTask, first_partition
from ktrace.model import store
from ktrace.model.clock import clock_mode
from ktrace.model.errors import ProgressFn, TraceFormatError, no_progress
from ktrace.model.layout import is_store
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace

_STEP_TABLES = ("ops", "api", "kernels", "memory", "ranges")
"""Tables the first pass reads (steps, spans, launch windows of inferred steps, collectives)."""


RankPass = tuple[RankSteps, Window | None, RankGraph | None]
"""A rank's RankSteps, and the window and graph of the guessed step (None, None without a guess or a window)."""


def steps_task(task: RankTask) -> RankPass:
    """First pass: the rank's RankSteps, and its graph of the guessed step."""
    trace = task.read(_STEP_TABLES + (("syncs",) if task.guess is not None else ()))
    part = rank_steps(trace, task.node, task.rank, annotation=task.annotation, steps_pattern=task.steps_pattern)
    window = None if task.guess is None else own_window(part, *task.guess)
    return part, window, None if window is None else rank_graph(trace, window, {}, 0, 0)


def ends_task(task: RankTask) -> pl.DataFrame:
    """Second pass (when ranks ran different numbers of a collective): the end times of those collectives."""
    return collective_ends(task.read(("kernels",)), task.node, task.rank, set(task.collectives))


def graph_task(task: RankTask) -> RankGraph:
    """Last pass, for the ranks whose guessed window was not the job's: the rank's graph of its window."""
    assert task.window is not None
    return rank_graph(task.read(GRAPH_TABLES + ("syncs",)), task.window, {}, 0, 0)


def job_critical_path(
    path: Path,
    engine: Engine,
    *,
    annotation: str | None = None,
    instance: int = 0,
    steps_pattern: str | None = None,
    skip: tuple[str, ...] = (),
    progress: ProgressFn = no_progress,
) -> CriticalPath | None:
    """critical_path(store.read(path)) (the whole job's, across ranks) computed rank by rank on `engine`; with
    `skip` (tables not read, as store.read's), critical_path(store.read(path, skip=skip)).

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
        RankTask(str(root), node, rank, clock, annotation, steps_pattern, skip=tuple(skip))
        for node, rank, _ in store.partitions(root)
    ]
    if not tasks:
        raise TraceFormatError(f"{root}: the store has no partition")
    guess = guess_task(engine, tasks[first_task(tasks)]) if annotation is None else None
    passes = PassFold(len(tasks))
    guessed = [dataclasses.replace(t, guess=guess) for t in tasks]
    for done, (i, found_pass) in enumerate(engine.map(steps_task, guessed, describe=RankTask.label), 1):
        passes.add(i, (found_pass,))
        progress(done, len(tasks))
    return path_of_passes(root, engine, tasks, passes.ready(), annotation=annotation, instance=instance)


def path_of_passes(
    root: Path,
    engine: Engine,
    tasks: list[RankTask],
    passes: dict[int, RankPass],
    *,
    annotation: str | None = None,
    instance: int = 0,
    empty: Trace | None = None,
) -> CriticalPath | None:
    """The job's critical path from every partition's first pass (`passes[i]`: tasks[i]'s RankPass, its graph
    that of the guessed step where there was a guess): the windows chosen, the graphs not of them built again on
    `engine`, the collective lags applied, the graphs joined. `passes` is emptied: the client lets each rank's
    graph go once it is joined. fleet.summary_map computes the passes inside its own
    (one read of each partition for both). `empty`: the store read without partitions (its meta), when the caller
    has it."""
    clock = tasks[0].clock
    parts = [passes[i][0] for i in range(len(tasks))]
    found = first_window(parts, annotation, instance)
    if found is None:
        return None
    first, scope, label = found
    windows = job_windows(parts, first, scope)
    at = {(t.node, t.rank): i for i, t in enumerate(tasks)}
    graphs = {i: graph for i, (_, _, graph) in passes.items() if graph is not None}
    again = [(at[(w.node, w.rank)], w) for w in windows if passes[at[(w.node, w.rank)]][1] != w]
    passes.clear()  # the graphs are held once, in `graphs`, and each goes when joined
    redo = [dataclasses.replace(tasks[i], window=w) for i, w in again]
    for j, graph in engine.map(graph_task, redo, describe=RankTask.label):
        graphs[again[j][0]] = graph
    lags = _lags(engine, tasks, parts)
    kernel_offsets = np.cumsum([0] + [p.kernels for p in parts])
    memory_offsets = np.cumsum([0] + [p.memory for p in parts]) + int(kernel_offsets[-1])
    ordered = []
    for w in windows:
        i = at[(w.node, w.rank)]
        g = graphs.pop(i)
        ordered.append(
            dataclasses.replace(
                g,
                kernel_records=g.kernel_records + int(kernel_offsets[i]),
                memory_records=g.memory_records + int(memory_offsets[i]),
                kernel_keys=relagged(g.kernel_keys, lags.get((w.node, w.rank), {})),
            )
        )
    graphs.clear()  # a rank's graph of another step than its window's
    joined = join_rank_graphs(ordered, empty or store.read(root, clock=clock, only=(), skip=TABLES))
    ordered.clear()
    ix = TraceIndex(joined.trace)
    if len(windows) > 1:
        built: JobGraph | Graph = join_graph_arrays(joined.arrays, sum(joined.sync_records), windows, joined.keys)
    else:
        built = joined.graph(0)
    records = joined.records
    del joined  # its per-rank graphs: `built` holds them joined
    result = path_of_windows(ix, windows, scope, label, built)
    if result is None:
        return None
    return dataclasses.replace(result, path_records=np.sort(records[result.path_records]))


class PassFold:
    """The partitions' RankPasses as they arrive (fleet.summary_map computes them inside its own pass), and the
    longest-path kernels loaded in a thread meanwhile once the graphs will run them compiled
    (critical_path_parts.load_longest_path): ~0.3 s the client no longer spends after the last partial."""

    def __init__(self, partitions: int) -> None:
        self.passes: dict[int, RankPass] = {}
        self.partitions = partitions
        """How many passes will come: the job's graph is projected from those that came."""
        self._edges = 0
        self._loading: threading.Thread | None = None

    def add(self, first: int, found: tuple[RankPass, ...]) -> None:
        """The passes of consecutive partitions, the first being partition `first`."""
        for j, rank_pass in enumerate(found):
            self.passes[first + j] = rank_pass
            self._edges += 0 if rank_pass[2] is None else rank_pass[2].graph.arrays["src"].size
        if self._loading is None:  # the joined graph's edges, projected from the partitions so far
            self._loading = load_longest_path(self._edges * self.partitions // max(1, len(self.passes)))

    def ready(self) -> dict[int, RankPass]:
        """Every pass, once the kernels' load (if started) is done."""
        if self._loading is not None:
            self._loading.join()
        return self.passes


def first_task(tasks: list[RankTask]) -> int:
    """The index of the task whose median step is the guess: the job's first rank with steps is the first
    (node, rank) most often (rank_tasks.first_partition)."""
    return first_partition([(t.node, t.rank) for t in tasks])


def guess_of(part: RankSteps) -> Guess | None:
    """The first partition's median step, its range name and step method (the job's choice when the first rank
    has steps under the method the job takes), None when it has no steps."""
    if part.median is None:
        return None
    window = part.median[0]
    return window, range_name(part.steps, window), part.method


def guess_task(engine: Engine, first: RankTask, start: str | None = None) -> Guess | None:
    """guess_of the first task's steps, read on `engine` (a worker reads the partition, not the client). `start`:
    a module the engine's other workers import meanwhile (the one whose tasks come next: a worker process spends
    ~0.5 s importing polars, pyarrow and the analyses), so that every worker has started when those begin."""
    items: list[RankTask | str] = [first, *([start] * (engine.workers - 1) if start else [])]
    found = [p for _, p in engine.map(steps_or_start, items, describe=_item_label) if p is not None]
    return guess_of(found[0][0])


def steps_or_start(item: RankTask | str) -> RankPass | None:
    """Map task of guess_task: steps_task of a RankTask, or the import of a module (None)."""
    if isinstance(item, str):
        importlib.import_module(item)
        return None
    return steps_task(item)


def _item_label(item: RankTask | str) -> str:
    return item if isinstance(item, str) else item.label()


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
