"""The rank-by-rank critical path's tasks (fleet.critical_path_map): RankTask, one partition and what its task needs,
and which partition is the job's first rank (the one whose median step the job's critical path takes:
critical_path.choose_window's first (node, rank) with steps). Imports no polars: the rank-by-rank summary builds the
first rank's task before it imports the analyses (fleet.early_start)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ktrace.analysis.critical_path_graph import Window
    from ktrace.model.trace import Trace

Guess = tuple["Window", "str | None", int]
"""The first rank's median step: its window, range name and step method (critical_path_map.guess_of)."""


def first_partition(parts: Sequence[tuple[str, int]]) -> int:
    """The index in `parts` ((node, rank) pairs) of the first rank: the smallest (node, rank) of rank >= 0 (store
    order sorts rank=10 before rank=2), else of any rank."""
    ranked = [i for i, (_, rank) in enumerate(parts) if rank >= 0] or list(range(len(parts)))
    return min(ranked, key=lambda i: parts[i])


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
    guess: Guess | None = None
    """steps_task: the first rank's median step (window, range name, step method): build the rank's graph of the
    same step in the same pass (own_window), kept when the job's choice is the same."""
    window: Window | None = None
    """graph_task: the rank's window of the chosen step."""
    skip: tuple[str, ...] = ()
    """Tables the user left out (store.read's skip: ("ops",) for --no-ops), never read."""

    def label(self) -> str:
        """How errors and progress name the task."""
        return f"{self.store}: node={self.node}/rank={self.rank}"

    def read(self, tables: tuple[str, ...]) -> Trace:
        """The partition's trace, holding `tables` only."""
        from ktrace.model import store
        from ktrace.model.schema import TABLES

        skip = [t for t in TABLES if t not in tables or t in self.skip]
        return store.read(self.store, clock=self.clock, only={(self.node, self.rank)}, skip=skip)
