"""The rank-by-rank summary's start, before the client imports the analyses.

`ktrace summary|report|check STORE` takes the rank-by-rank path (fleet.summary_map) for a store of FLEET_MIN_RANKS
ranks or more, or with --workers / --cluster. Telling which, and starting the worker processes, needs only the
store's folder names: this module imports neither polars nor the analyses. The client then spends ~0.7 s importing
those while its workers start, import them too, and one of them reads the first rank's steps (the guess every
rank's graph is built for: fleet.critical_path_map.guess_task), instead of the workers starting only after the
client's imports.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from types import TracebackType

from ktrace.fleet.engines import Engine, open_engine
from ktrace.fleet.rank_tasks import Guess, RankTask, first_partition
from ktrace.model.clock import clock_mode
from ktrace.model.layout import is_store, partitions

FLEET_MIN_RANKS = 16
"""Stores with this many ranks (partitions of rank >= 0) or more are summarized rank by rank: below it one
process holds the whole job easily (the 8-rank DLRM folder: 2,104 kernels)."""
SUMMARY_MODULE = "ktrace.fleet.summary_map"
"""What the workers import while the client does: the module of the summary's tasks."""


def store_ranks(path: str | os.PathLike[str]) -> int:
    """Ranks (partitions of rank >= 0) of a .ktrace store; 0 for anything else (a Kineto file, an nsys export)."""
    root = Path(path)
    if not root.is_dir() or not is_store(root):
        return 0
    return sum(1 for _, rank, _ in partitions(root) if rank >= 0)


def wants_fleet(path: str | os.PathLike[str], workers: int | None, cluster: str | None) -> bool:
    """Whether `ktrace summary|report|check` take the map-reduce path for `path` (fleet.summary_map's docstring)."""
    if workers is not None or cluster is not None:
        return True
    return store_ranks(path) >= FLEET_MIN_RANKS


def first_guess(item: RankTask | str) -> Guess | None:
    """Map task: the first rank's guess (critical_path_map.guess_of of its steps), or the import of a module (None)."""
    if isinstance(item, str):
        importlib.import_module(item)
        return None
    from ktrace.fleet.critical_path_map import guess_of, steps_task

    return guess_of(steps_task(item)[0])


class EarlyStart:
    """An engine of worker processes started for a store's rank-by-rank summary, one worker reading the first
    rank's steps and the others importing the summary's module, in a thread of this process; `guess()` waits for
    it. A context manager: leaving it closes the engine."""

    def __init__(self, engine: Engine, first: RankTask | None) -> None:
        self.engine = engine
        self.first = first
        self._found: dict[int, Guess | None] = {}
        self._error: BaseException | None = None
        items: list[RankTask | str] = [first] if first is not None else []
        items += [SUMMARY_MODULE] * (engine.workers - len(items))

        def run() -> None:
            try:
                self._found = dict(engine.map(first_guess, items, describe=_label))
            except BaseException as exc:  # noqa: BLE001 - raised again in guess(), in the caller's thread
                self._error = exc

        self._thread = threading.Thread(target=run, name="ktrace-early-start", daemon=True)
        self._thread.start()

    def guess(self) -> Guess | None:
        """The first rank's guess (None: no steps on it, or no first rank), once its task and the imports are done.

        Raises:
            KtraceError: the task failed (as fleet.engines reports a task's error)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._found.get(0) if self.first is not None else None

    def __enter__(self) -> EarlyStart:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the engine (once, even on a second Ctrl-C); after an error, without waiting for the first rank's
        task first (closing cancels what has not started; the thread, a daemon, ends with the map)."""
        try:
            if exc_type is None:
                self._thread.join()
        finally:
            self.engine.__exit__(exc_type, exc, tb)  # (a Ctrl-C stops its workers at once)


def start_early(
    path: str | os.PathLike[str], workers: int | None, *, steps_pattern: str | None, skip: tuple[str, ...] = ()
) -> EarlyStart | None:
    """The EarlyStart of `path`'s rank-by-rank summary on `workers` local processes (default one per core), or None
    where it gains nothing: one worker (the tasks run in this process), or a path that is no store (the summary
    says so)."""
    root = Path(path)
    if not root.is_dir() or not is_store(root):
        return None
    parts = [(node, rank) for node, rank, _ in partitions(root)]
    engine = open_engine(workers=workers, tasks=max(1, len(parts)))
    if engine.workers <= 1:
        engine.close()
        return None
    first = parts[first_partition(parts)] if parts else None
    chosen = None if first is None else RankTask(str(root), *first, clock_mode(), None, steps_pattern, skip=tuple(skip))
    return EarlyStart(engine, chosen)


def _label(item: RankTask | str) -> str:
    return item if isinstance(item, str) else item.label()
