"""How the rank-by-rank summary cuts a store's partitions into tasks (fleet.summary_map): consecutive partitions,
a few tasks per worker, shrinking towards the end."""

from __future__ import annotations

from pathlib import Path

from ktrace.model.layout import partitions

TASK_BYTES = 64 * 2**20
"""Parquet bytes one task reads at most: a task covers several partitions (one read, one clock shift and one pass
of the analyses for all of them; on the 256-rank DLRM job a task per partition spent 0.2 s a rank on fixed costs)
but never more than this, so a worker's memory stays that of a few ranks of big traces."""
TASKS_PER_WORKER = 4
"""Tasks per worker when the partitions are small, about: enough for the engine to balance uneven ranks."""
TAIL_SHARE = 2 * TASKS_PER_WORKER
"""The guided tasks' floor: a (TAIL_SHARE x 2 x workers)-th of the partitions. At 256 DLRM ranks on 2 workers a
floor twice as high left the last tasks at 16, 16 and 12 ranks (0.4-0.5 s each), one worker idle for up to one of
them; at this floor (64, 48, 36, 27, 21, 15, 12, 9, 8, 8, 8) the map ended ~0.5 s sooner (5.4-5.7 s against 6.0-6.3,
three runs each); a floor half as high again was slower (5.7-5.8 s: each task's fixed costs)."""

Parts = tuple[tuple[str, int], ...]
"""The (node, rank) partitions a task covers, in model.layout.partitions order."""


def partition_groups(root: Path, workers: int, ranks_per_task: int | None = None) -> list[Parts]:
    """The store's partitions cut into tasks: consecutive partitions (one host's ranks together), at most
    `ranks_per_task` each (default below) and TASK_BYTES of Parquet a task.

    Default, several workers (guided): each task takes 1/(2 x workers) of the partitions left, never fewer than a
    (2 x TAIL_SHARE x workers)-th of them. The tasks shrink towards the end, so the workers finish nearly
    together (equal tasks left one worker running the last one alone while the other idled: up to a task's time on
    the job's wall), with 5-6 tasks a worker. One worker: TASKS_PER_WORKER equal tasks."""
    found = [(node, rank, sum(f.stat().st_size for f in folder.iterdir())) for node, rank, folder in partitions(root)]

    def size_left(left: int) -> int:
        if ranks_per_task:
            return ranks_per_task
        if workers <= 1:
            return max(1, -(-len(found) // TASKS_PER_WORKER))
        share = 2 * workers
        return max(1, -(-len(found) // (share * TAIL_SHARE)), -(-left // share))

    groups: list[Parts] = []
    current: list[tuple[str, int]] = []
    held = 0
    per_task = size_left(len(found))
    for i, (node, rank, size) in enumerate(found):
        if current and (len(current) >= per_task or held + size > TASK_BYTES):
            groups.append(tuple(current))
            current, held = [], 0
            per_task = size_left(len(found) - i)
        current.append((node, rank))
        held += size
    return [*groups, tuple(current)] if current else groups
