"""tracer.python_sampler: what one tick records (the program's threads, not ktrace's), that it installs no hook, and
that the capture stream writes each stack's text once (dictionary deltas) and reads back the same stacks."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest

from ktrace.model.capture import CaptureWriter, read_stream
from ktrace.model.display_text import printable
from ktrace.model.schema import STACK_SEPARATOR
from ktrace.tracer import python_sampler
from ktrace.tracer.python_sampler import SEPARATOR, PythonSampler


@contextmanager
def parked_thread(name: str, depth: int) -> Iterator[threading.Thread]:
    """A thread named `name` waiting `depth` frames below planted_wait until the block ends."""
    release, parked = threading.Event(), threading.Event()

    def planted_wait(d: int) -> None:
        if d:
            planted_wait(d - 1)
        else:
            parked.set()
            release.wait()

    thread = threading.Thread(target=planted_wait, args=(depth,), name=name)
    thread.start()
    parked.wait()
    try:
        yield thread
    finally:
        release.set()
        thread.join()


def stacks_of(table: pa.Table) -> list[str]:
    return [str(s) for s in table.column("stack").to_pylist()]


def test_a_tick_samples_the_programs_threads_but_not_ktraces() -> None:
    sampler = PythonSampler(10, lambda: True, 1)
    with parked_thread("worker", 3) as worker, parked_thread("ktrace-writer", 3) as ours:
        sampler.sample_once()
        table = sampler.drain()
    rows = dict(zip(table.column("tid").to_pylist(), stacks_of(table), strict=True))
    # the program's threads, not ktrace's (other tests of the same pytest process may leave threads of their own)
    assert {threading.main_thread().native_id, worker.native_id} <= set(rows) and ours.native_id not in rows
    frames = rows[worker.native_id].split(SEPARATOR)
    assert frames[-1].endswith(" Condition.wait")  # innermost last: Event.wait waits on a Condition
    assert sum(f.endswith(" parked_thread.<locals>.planted_wait") for f in frames) == 4
    assert rows[threading.main_thread().native_id].split(SEPARATOR)[-1].endswith(" PythonSampler.sample_once")
    assert sys.gettrace() is None and sys.getprofile() is None
    assert sampler.drain() is None  # drained


def test_the_sampler_thread_samples_only_while_recording() -> None:
    recording = threading.Event()
    sampler = PythonSampler(1, recording.is_set, 1)
    sampler.start()
    try:
        recording.wait(0.05)  # ticks pass with no window open
        assert sampler.ticks == 0 and sampler.drain() is None
        recording.set()
        while sampler.ticks < 3:
            time.sleep(0.005)
    finally:
        sampler.stop()
    assert sampler.drain().num_rows >= 3


def test_the_sampler_joins_frames_as_the_schema_says() -> None:
    assert SEPARATOR == STACK_SEPARATOR  # (the hook does not import the schema: pyarrow)
    stack = SEPARATOR.join(["/a/train.py:1 <module>", "/a/train.py:9 hot"])
    assert printable(stack) == stack  # ktrace view reads its traces made printable: a stack must stay whole
    code = compile("def f(): pass", "/odd;dir/x.py", "exec").co_consts[0]
    assert python_sampler.frame_label(code) == "/odd,dir/x.py:1 f"


@pytest.mark.parametrize("max_stacks", [20_000, 2])
def test_the_stream_writes_a_stack_once_and_reads_back_every_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_stacks: int
) -> None:
    monkeypatch.setattr(python_sampler, "MAX_CACHED_STACKS", max_stacks)  # 2: the ids start over at each drain
    sampler = PythonSampler(10, lambda: True, 1)
    writer = CaptureWriter(tmp_path, "h", 0)
    written: list[str] = []
    with parked_thread("deep", 60), parked_thread("other", 5):
        for _ in range(3):
            for _ in range(200):
                sampler.sample_once()
            table = sampler.drain()
            written += stacks_of(table)
            writer.append("samples", table)
    writer.close()
    stream = tmp_path / "node=h" / "rank=0" / "samples.arrows"
    assert stacks_of(read_stream(stream)) == written
    plain = sum(len(s.encode()) for s in written)
    assert stream.stat().st_size < plain / 20  # each distinct stack's text once (per drain, when ids start over)
