"""The export's writer thread: everything written, in order, and a failing write surfaces in the caller."""

from __future__ import annotations

import functools
import io
import threading

import numpy as np
import pytest

from ktrace.exporters.background_writes import BackgroundWriter, background_writes


class _Recording(io.RawIOBase):
    def __init__(self, fail_at: int | None = None) -> None:
        self.parts: list[bytes] = []
        self.threads: set[str] = set()
        self.fail_at = fail_at

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        if self.fail_at is not None and len(self.parts) == self.fail_at:
            raise OSError(28, "No space left on device")
        self.threads.add(threading.current_thread().name)
        self.parts.append(bytes(data))  # type: ignore[arg-type]
        return len(self.parts[-1])


def test_writes_arrive_whole_in_order_from_another_thread() -> None:
    sink = _Recording()
    chunks = [np.full(1000 + k, k % 251, np.uint8).data for k in range(50)]  # memoryviews, as the encoder gives
    with background_writes(sink) as out:  # type: ignore[arg-type]
        for c in chunks:
            assert out.write(c) == len(c)
        out.write(b"tail")
    assert b"".join(sink.parts) == b"".join(bytes(c) for c in chunks) + b"tail"
    assert sink.threads == {"ktrace-writer"}


def test_a_failing_write_raises_in_the_producer_without_hanging() -> None:
    sink = _Recording(fail_at=3)
    with pytest.raises(OSError, match="No space left"):
        with background_writes(sink) as out:  # type: ignore[arg-type]
            for _ in range(100):  # far more than the queue holds: the writer keeps draining after the failure
                out.write(b"x" * 10)
    assert len(sink.parts) == 3


def test_close_is_idempotent_and_rethrows() -> None:
    sink = _Recording(fail_at=0)
    writer = BackgroundWriter(sink)  # type: ignore[arg-type]
    writer.write(b"a")
    for _ in range(2):
        with pytest.raises(OSError):
            writer.close()


def test_jobs_run_in_the_writer_thread_in_turn_and_recycle_their_buffer() -> None:
    sink = _Recording()
    ran: list[str] = []
    with background_writes(sink) as out:  # type: ignore[arg-type]
        pool = out.pool

        def job(k: int) -> tuple[memoryview, np.ndarray]:
            ran.append(threading.current_thread().name)
            buffer = pool.take(8)
            buffer[:3] = [65 + k, 65 + k, 65 + k]
            return buffer.data[:3], buffer

        for k in range(5):
            out.write(b"<")
            out.write_job(functools.partial(job, k))
    assert b"".join(sink.parts) == b"<AAA<BBB<CCC<DDD<EEE"
    assert set(ran) == {"ktrace-writer"}
    assert pool.take(8).shape[0] >= 8  # a written job's buffer came back to the pool


def test_a_failing_job_raises_in_the_producer() -> None:
    sink = _Recording()

    def failing() -> tuple[bytes, None]:
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        with background_writes(sink) as out:  # type: ignore[arg-type]
            out.write(b"a")
            out.write_job(failing)
            for _ in range(10):
                out.write(b"b")
    assert sink.parts == [b"a"]
