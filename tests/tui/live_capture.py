"""A CPU training loop's capture written as `ktrace run` writes one, batch by batch, for the live-view tests."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa

from ktrace.model import store
from ktrace.model.capture import CaptureWriter
from ktrace.model.output_lock import OutputLock
from ktrace.model.outputs import CAPTURE_MARKER
from ktrace.model.trace import TraceMeta

STEP_NS = 200_000_000
PID, MAIN, LOADER = 4242, 4242, 4250


class CpuLoop:
    """A CPU training loop's capture written batch by batch: steps with forward/backward ranges on the main thread,
    CPU counters, (from `add_loader`) a data-loader thread with ranges of its own, and (from `add_rank`) a second
    rank, a traced process of its own, doing the same."""

    def __init__(self, root: Path) -> None:
        root.mkdir()
        self.lock = OutputLock(root)  # held by the launcher while it records
        self.lock.acquire()
        self.writer = CaptureWriter(root, "host-a", 0)
        (self.writer.folder / ".owner").write_text(str(os.getpid()))  # the traced process's claim
        self.counters = CaptureWriter(root, "host-a", -1)
        self.start_ns = time.time_ns() - 60 * STEP_NS
        self.steps = 0
        self.loader = False
        self.ranks: list[CaptureWriter] = []
        """The writers of the ranks added after rank 0 (process PID + rank)."""
        self.writer.append("threads", pa.table({"pid": [PID], "tid": [MAIN], "name": ["MainThread"]}))

    @staticmethod
    def thread_row(tid: int, name: str) -> pa.Table:
        return pa.table({"pid": [PID], "tid": [tid], "name": [name]})

    def add_loader(self) -> None:
        self.loader = True
        self.writer.append("threads", self.thread_row(LOADER, "loader"))

    def add_rank(self) -> None:
        writer = CaptureWriter(self.writer.folder.parent.parent, "host-a", len(self.ranks) + 1)
        (writer.folder / ".owner").write_text(str(os.getpid()))
        self.ranks.append(writer)

    def append_steps(self, n: int) -> None:
        """Write n more steps (one batch per table, as the writer thread's flush does)."""
        starts, ends, names, depths, tids = [], [], [], [], []
        samples, values = [], []
        for i in range(self.steps, self.steps + n):
            t = self.start_ns + i * STEP_NS
            for name, a, b, depth in (
                (f"step {i}", 0, STEP_NS - 1_000, 0),
                ("forward", 1_000, STEP_NS // 2, 1),
                ("backward", STEP_NS // 2, STEP_NS - 2_000, 1),
            ):
                starts.append(t + a), ends.append(t + b), names.append(name), depths.append(depth), tids.append(MAIN)
            if self.loader:
                starts.append(t), ends.append(t + STEP_NS // 4), names.append("load batch"), depths.append(0)
                tids.append(LOADER)
            samples.append(t), values.append(50.0 + i % 7)
        rows = len(starts)
        for rank, writer in enumerate([self.writer, *self.ranks]):
            pid = PID + rank
            writer.append(
                "ranges",
                pa.table(
                    {
                        "start_ns": starts,
                        "end_ns": ends,
                        "pid": [pid] * rows,
                        "tid": [tid + rank for tid in tids],
                        "name": names,
                        "domain": ["ktrace"] * rows,
                        "depth": pa.array(depths, pa.int32()),
                        "on_gpu": [False] * rows,
                    }
                ),
            )
        self.counters.append(
            "counters",
            pa.table(
                {
                    "ts_ns": samples,
                    "metric": ["cpu.util"] * n,
                    "instance": pa.array([-1] * n, pa.int32()),
                    "value": values,
                }
            ),
        )
        self.steps += n
        for writer in (self.writer, *self.ranks, self.counters):  # what each writer thread does every --publish s
            writer.publish()
            writer.write_partition_meta({"processes_not_closed": 1}, [])

    def finish(self, root: Path) -> None:
        """What the end of `ktrace run` does to the store: the processes close, the launcher finalizes (streams to
        Parquet, meta.json, marker gone) and lets go of its lock."""
        for writer in (self.writer, *self.ranks, self.counters):
            writer.close()
            writer.write_partition_meta({}, [])
        store.finalize(root)
        store.write_meta(root, TraceMeta(source="ktrace run"))
        (root / CAPTURE_MARKER).unlink()
        self.lock.release()
