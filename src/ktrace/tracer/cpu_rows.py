"""The CPU side's rows of a traced process: its ktrace.annotate/step ranges and its threads' names, as Arrow."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any


def ranges_table(ranges: list[tuple[int, int, int, str, str, int]], pid: int) -> Any:
    """(start_ns, end_ns, tid, name, domain, depth) rows of process `pid` -> a pyarrow table of the ranges stream."""
    import pyarrow as pa  # deferred: the startup hook must stay cheap

    c = list(zip(*ranges, strict=False))
    n = len(ranges)
    return pa.table(
        {
            "start_ns": pa.array(c[0], pa.int64()),
            "end_ns": pa.array(c[1], pa.int64()),
            "pid": pa.array([pid] * n, pa.int64()),
            "tid": pa.array(c[2], pa.int64()),
            "name": pa.array(c[3], pa.string()),
            "domain": pa.array(c[4], pa.string()),
            "depth": pa.array(c[5], pa.int32()),
            "on_gpu": pa.array([False] * n, pa.bool_()),
        }
    )


def thread_names(pid: int) -> dict[int, str]:
    """tid -> name of every thread of this process: Python names where known, else the kernel's comm."""
    names: dict[int, str] = {}
    task = Path(f"/proc/{pid}/task")
    try:
        for entry in task.iterdir():
            try:
                names[int(entry.name)] = (entry / "comm").read_text().strip()
            except (OSError, ValueError):
                continue
    except OSError:
        pass
    for t in threading.enumerate():
        if t.native_id is not None:
            names[t.native_id] = t.name
    return names
