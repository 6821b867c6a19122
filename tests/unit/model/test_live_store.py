"""A capture read while it is written: only published, complete batches; said to be live; never written to."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from ktrace.model import store
from ktrace.model.capture import CaptureWriter, read_stream
from ktrace.model.live import live_status
from ktrace.model.output_lock import OutputLock

ROWS = 50
"""Ranges appended per batch: a consistent read holds a whole number of batches."""


def ranges(first: int, n: int = ROWS) -> pa.Table:
    starts = [first + i * 1000 for i in range(n)]
    return pa.table(
        {
            "start_ns": pa.array(starts, pa.int64()),
            "end_ns": pa.array([s + 500 for s in starts], pa.int64()),
            "pid": pa.array([7] * n, pa.int64()),
            "tid": pa.array([7] * n, pa.int64()),
            "name": pa.array([f"r{first}"] * n),
            "domain": pa.array(["user"] * n),
            "depth": pa.array([0] * n, pa.int32()),
            "on_gpu": pa.array([False] * n),
        }
    )


def begin_capture(tmp_path: Path) -> tuple[Path, OutputLock, CaptureWriter]:
    """A store as `ktrace run` holds it: the launcher's lock, and one process's partition."""
    root = tmp_path / "live.ktrace"
    root.mkdir()
    lock = OutputLock(root)
    lock.acquire()
    writer = CaptureWriter(root, "host", 0)
    (writer.folder / ".owner").write_text(str(os.getpid()))
    return root, lock, writer


def publish(writer: CaptureWriter) -> None:
    writer.publish()
    writer.write_partition_meta({"processes_not_closed": 1}, [])


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_a_reader_sees_what_was_published_and_says_live(tmp_path: Path) -> None:
    root, lock, writer = begin_capture(tmp_path)
    try:
        writer.append("ranges", ranges(1_000_000_000))
        assert store.read(root).ranges.height == 0  # nothing published yet: nothing read, and no error
        publish(writer)
        writer.append("ranges", ranges(3_000_000_000))  # appended, not yet published
        before = snapshot(root)
        trace = store.read(root)
        status = live_status(root)
        assert snapshot(root) == before  # reading wrote nothing into the store
        assert trace.ranges.height == ROWS
        assert status is not None and status.writer_pid == os.getpid()
        assert status.line == "live, 0 s recorded"
        assert any(n.startswith("live, 0 s recorded") for n in trace.meta.notes)
        assert "processes_not_closed" not in trace.meta.health  # a live process is not a broken one
        assert "recovered_tables" not in trace.meta.health
        publish(writer)
        status = live_status(root)
        assert store.read(root).ranges.height == 2 * ROWS
        assert status is not None and status.line == "live, 2 s recorded"  # newest record minus first
        assert status.recorded_s == pytest.approx(2.0000495, abs=1e-6)
        assert status.lag_s() is not None
    finally:
        writer.close()
        lock.release()
    # the launcher and its process died without finalizing: an interrupted capture, read whole and said so
    (writer.folder / ".owner").write_text("999999999")
    assert live_status(root) is None
    trace = store.read(root)
    assert trace.ranges.height == 2 * ROWS
    assert "meta.json missing: the capture did not finish" in trace.meta.notes


def test_a_reader_racing_the_writer_never_sees_a_half_written_batch(tmp_path: Path) -> None:
    root, lock, writer = begin_capture(tmp_path)
    done = threading.Event()
    published: list[int] = [0]

    def write() -> None:
        for i in range(60):
            writer.append("ranges", ranges(1_000_000_000 + i * ROWS * 1000))
            if i % 3 == 2:
                published.append(i + 1)  # (before the reader can see it)
                publish(writer)
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    seen = []
    try:
        while not done.is_set() or len(seen) < 3:
            n = store.read(root).ranges.height
            assert n % ROWS == 0 and n // ROWS in published  # whole batches, exactly as of one publish
            seen.append(n)
        thread.join()
        seen.append(store.read(root).ranges.height)
    finally:
        writer.close()
        lock.release()
    assert seen == sorted(seen) and seen[-1] == 60 * ROWS


def test_read_stream_with_a_limit_stops_at_complete_batches(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path, "host", 0)
    writer.append("ranges", ranges(1))
    first = writer.publish().stream_bytes["ranges"]
    writer.append("ranges", ranges(2))
    writer.close()
    path = writer.folder / "ranges.arrows"
    assert read_stream(path, first).num_rows == ROWS
    assert read_stream(path, first + 40).num_rows == ROWS  # a torn batch after it is left out
    assert read_stream(path).num_rows == 2 * ROWS
    assert read_stream(path, 0).num_rows == 0


def test_a_reader_racing_the_finalize_gets_the_live_or_the_finished_capture(tmp_path: Path) -> None:
    from ktrace.tracer.config import CaptureConfig
    from ktrace.tracer.finalize import finalize_run

    root, lock, writer = begin_capture(tmp_path)
    for i in range(20):
        writer.append("ranges", ranges(1_000_000_000 + i * ROWS * 1000))
    publish(writer)
    writer.append("ranges", ranges(5_000_000_000))  # never published: only the finished store holds it
    writer.close()
    (writer.folder / ".owner").unlink()
    finished = threading.Event()

    def finalize() -> None:
        finalize_run(root, ["train.py"], CaptureConfig(gpu=False), 0, [], "host", 0)
        finished.set()

    thread = threading.Thread(target=finalize)
    thread.start()
    seen = set()
    try:
        while not finished.is_set() or not seen:
            trace = store.read(root)  # never an error, never a half-converted store
            seen.add(trace.ranges.height)
            assert trace.ranges.height in (20 * ROWS, 21 * ROWS)
        thread.join()
    finally:
        lock.release()
    assert store.read(root).ranges.height == 21 * ROWS
    assert live_status(root) is None


def test_the_live_capture_of_a_store_run_force_replaces_is_found_beside_it(tmp_path: Path) -> None:
    from ktrace.model.live import live_capture_of
    from ktrace.testing import generate

    target = store.write(generate(), tmp_path / "run.ktrace")
    assert live_capture_of(target) is None  # a finished store nobody writes
    staged = tmp_path / ".ktrace-tmp-0123abcd-run.ktrace"  # where `ktrace run --force` records
    writer = CaptureWriter(staged, "host", 0)
    (writer.folder / ".owner").write_text(str(os.getpid()))
    lock = OutputLock(target)
    lock.acquire()
    try:
        assert live_capture_of(target) == staged and live_capture_of(staged) == staged
        assert live_status(target) is None
    finally:
        lock.release()
        writer.close()
    assert live_capture_of(target) is None
