"""Decode workers (importers/kineto_workers): the trace is the one the main process alone would import, whatever
the slices hold: real traces, cuts inside strings, damage, exact timestamps, a worker that dies."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from real_traces import fixture_path

from ktrace.importers import kineto_decode, kineto_workers
from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_workers import WORKERS_ENV, worker_count
from ktrace.model.errors import TraceFormatError
from ktrace.testing import assert_trace_equal

pytestmark = pytest.mark.skipif(
    not kineto_workers.sys.platform.startswith("linux"), reason="decode workers are forked: Linux only"
)


class Spy:
    """Counts what the workers did in this (the main) process: slices merged, slices given back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.merged = 0
        self.restored = 0
        oldest = kineto_workers.SliceWorkers.oldest
        restore = kineto_decode.EventSplitter.restore

        def spy_oldest(workers: kineto_workers.SliceWorkers) -> Any:
            piece, decoded, exact = oldest(workers)
            self.merged += decoded is not None
            return piece, decoded, exact

        def spy_restore(splitter: kineto_decode.EventSplitter, pending: list[Any]) -> None:
            self.restored += len(pending)
            restore(splitter, pending)

        monkeypatch.setattr(kineto_workers.SliceWorkers, "oldest", spy_oldest)
        monkeypatch.setattr(kineto_decode.EventSplitter, "restore", spy_restore)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    yield Spy(monkeypatch)


def both(path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, workers: int = 2) -> tuple[Any, Any]:
    """(the trace imported by `workers` decode workers, the trace imported in this process), in `chunk`-byte slices."""
    monkeypatch.setattr(kineto_decode, "CHUNK_BYTES", chunk)
    monkeypatch.setenv(WORKERS_ENV, str(workers))
    parallel = import_kineto(path)
    monkeypatch.setenv(WORKERS_ENV, "0")
    return parallel, import_kineto(path)


@pytest.mark.parametrize(("name", "chunk"), [("alexnet", 20_000), ("resnet50", 1 << 20), ("tracelens", 2 << 20)])
def test_real_traces_are_the_same_with_workers(
    name: str, chunk: int, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    parallel, alone = both(fixture_path(name), monkeypatch, chunk)
    assert_trace_equal(parallel, alone)
    assert spy.merged >= 3  # slices really went through the workers


def _events(names: list[str]) -> list[dict[str, Any]]:
    return [
        {"ph": "X", "cat": "user_annotation", "name": n, "pid": 1, "tid": 2, "ts": 1000 + 10 * i, "dur": 5}
        for i, n in enumerate(names)
    ]


def _doc(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 0}).encode()


def _read_back_alike(path: Path, names: list[str], monkeypatch: pytest.MonkeyPatch, spy: Spy, chunk: int) -> None:
    """Ranges named `names`, imported with workers and without: the same trace, every range in it, some slices
    merged from the workers and some given back to the main process."""
    path.write_bytes(_doc(_events(names)))
    parallel, alone = both(path, monkeypatch, chunk)
    assert_trace_equal(parallel, alone)
    assert parallel.ranges.height == len(names)
    assert spy.merged >= 3 and spy.restored >= 1


def test_a_cut_inside_a_string_is_read_again_by_the_main_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    """Names holding `}, {` make the splitter cut inside strings: those slices fail in the workers and the
    main process reads the stream on from the first of them, as it would have alone."""
    names = [f"plain {i}" for i in range(400)] + [f"tricky {i} }}, {{ " * 40 for i in range(400)]
    _read_back_alike(tmp_path / "tricky.json", names, monkeypatch, spy, chunk=2048)


def test_damage_in_the_middle_is_salvaged_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy) -> None:
    text = gzip.decompress(fixture_path("alexnet").read_bytes())
    at = text.index(b'"cat": "kernel"', len(text) // 2)
    path = tmp_path / "damaged.json"
    path.write_bytes(text[:at] + b"###" + text[at:])
    parallel, alone = both(path, monkeypatch, chunk=8192)
    assert_trace_equal(parallel, alone)
    assert parallel.meta.health["dropped_events"] >= 1
    assert spy.restored >= 1


def test_a_truncated_gzip_is_read_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy) -> None:
    data = fixture_path("alexnet").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    parallel, alone = both(path, monkeypatch, chunk=8192)
    assert_trace_equal(parallel, alone)
    assert parallel.meta.health["truncated_input"] == 1
    assert spy.merged >= 3


def test_exact_timestamps_are_read_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy) -> None:
    """Epoch µs with ns fractions: the workers switch to exact decoding on their own, as the main process does."""
    t0 = 1712195495505583
    events = [
        f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {t0 + 10 * i}.{i % 1000:03d}, '
        f'"dur": 1.001, "args": {{"correlation": {i}, "device": 0, "stream": 7}}}}'
        for i in range(2000)
    ]
    path = tmp_path / "exact.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + ",\n".join(events) + "]}")
    parallel, alone = both(path, monkeypatch, chunk=16_384)
    assert_trace_equal(parallel, alone)
    assert parallel.kernels.sort("start_ns")["start_ns"][3] == (t0 + 30) * 1000 + 3
    assert spy.merged >= 3


def test_a_worker_that_dies_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy) -> None:
    """A worker killed mid-file (out of memory, a signal): the main process reads on from its slice."""
    real = kineto_workers.decode_events

    def dies_on_marker(text: Any, *args: Any) -> Any:
        if b"doomed" in bytes(text):
            os._exit(9)
        return real(text, *args)

    monkeypatch.setattr(kineto_workers, "decode_events", dies_on_marker)  # (the workers are forked: they see it)
    names = [f"op {i}" for i in range(600)] + ["doomed"] + [f"op {i}" for i in range(600, 1200)]
    _read_back_alike(tmp_path / "doomed.json", names, monkeypatch, spy, chunk=4096)


def test_errors_are_the_main_process_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "chrome.json"
    path.write_bytes(
        json.dumps({"traceEvents": [{"ph": "X", "name": "x", "ts": i, "dur": 1} for i in range(2000)]}).encode()
    )
    monkeypatch.setattr(kineto_decode, "CHUNK_BYTES", 4096)
    monkeypatch.setenv(WORKERS_ENV, "2")
    with pytest.raises(TraceFormatError, match="not a PyTorch profiler"):
        import_kineto(path)


def test_no_worker_outlives_the_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_decode, "CHUNK_BYTES", 4096)
    monkeypatch.setenv(WORKERS_ENV, "2")
    import_kineto(fixture_path("alexnet"))
    assert multiprocessing.active_children() == []


def test_how_many_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert worker_count(1 << 20, gzipped=True) == 0  # small files: forking costs more than it saves
    assert worker_count(kineto_workers.MIN_PLAIN_BYTES - 1, gzipped=False) == 0
    big = worker_count(kineto_workers.MIN_GZIP_BYTES, gzipped=True)
    cpus = len(os.sched_getaffinity(0))
    assert big == (0 if cpus < 2 else min(cpus, kineto_workers.MAX_DEFAULT_WORKERS))
    monkeypatch.setattr(kineto_workers.os, "sched_getaffinity", lambda pid: {0})
    assert worker_count(kineto_workers.MIN_GZIP_BYTES, gzipped=True) == 0  # one CPU: nothing to share
    monkeypatch.setattr(kineto_workers.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert worker_count(kineto_workers.MIN_PLAIN_BYTES, gzipped=False) == big
    monkeypatch.setenv(WORKERS_ENV, "0")
    assert worker_count(1 << 40, gzipped=True) == 0
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert worker_count(10, gzipped=False) == 3
    monkeypatch.setenv(WORKERS_ENV, "lots")
    assert worker_count(1 << 20, gzipped=True) == 0
    monkeypatch.setattr(kineto_workers.multiprocessing.current_process(), "daemon", True, raising=False)
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert worker_count(1 << 40, gzipped=True) == 0  # daemonic processes (Dask workers) may not have children


def test_workers_the_system_refuses_leave_the_import_to_this_process(monkeypatch: pytest.MonkeyPatch, spy: Spy) -> None:
    """No process left to fork (EAGAIN) after the first worker: the one forked is ended, the file read here."""
    from multiprocessing.context import ForkProcess

    start, started = ForkProcess.start, []

    def start_once(proc: ForkProcess) -> None:
        if started:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        started.append(proc)
        start(proc)

    monkeypatch.setattr(ForkProcess, "start", start_once)
    parallel, alone = both(fixture_path("alexnet"), monkeypatch, chunk=20_000)
    assert_trace_equal(parallel, alone)
    assert spy.merged == 0 and len(started) == 1
    started[0].join(timeout=5)
    assert started[0].exitcode is not None and multiprocessing.active_children() == []


def test_slices_out_before_exact_times_turned_on_are_read_as_one_process_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    """Epoch-µs times with ns fractions first, then as strings: one process reads every slice after the first
    fractional one exactly, where a string `ts` is no repair; slices already out with the workers, read plainly,
    counted each string as one (72 against 3, found in review). The main process reads those again."""
    t0 = 1712195495505583
    events = [
        f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": '
        + (f"{t0 + 10 * i}.{i:03d}" if i < 20 else f'"{t0 + 10 * i}.{i % 1000:03d}"')
        + f', "dur": 1.0, "args": {{"correlation": {i}, "device": 0, "stream": 7}}}}'
        for i in range(600)
    ]
    path = tmp_path / "strings.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + ",\n".join(events) + "]}")
    parallel, alone = both(path, monkeypatch, chunk=4096)
    assert_trace_equal(parallel, alone)
    assert parallel.meta.health["repaired_events"] == alone.meta.health["repaired_events"] == 3
    assert parallel.meta.notes == alone.meta.notes
    assert spy.merged >= 3


def test_a_stuck_worker_is_ended_and_its_slice_read_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    """A worker that never answers (a lock inherited at the fork, held forever) does not hang the import."""
    import time

    real = kineto_workers.decode_events

    def sticks_on_marker(text: Any, *args: Any) -> Any:
        if b"stuck" in bytes(text):
            time.sleep(600)
        return real(text, *args)

    monkeypatch.setattr(kineto_workers, "decode_events", sticks_on_marker)
    monkeypatch.setattr(kineto_workers, "REPLY_TIMEOUT_S", 0.5)
    names = [f"op {i}" for i in range(600)] + ["stuck"] + [f"op {i}" for i in range(600, 1200)]
    _read_back_alike(tmp_path / "stuck.json", names, monkeypatch, spy, chunk=4096)
    assert multiprocessing.active_children() == []


LATE_WORKER = """
import os, sys, time
from ktrace.importers import kineto_workers
serve = kineto_workers._serve
def late(*args):
    time.sleep(1.0)  # forked, not yet asking to die with its parent (as with strace delaying the child)
    serve(*args)
kineto_workers._serve = late
workers = kineto_workers.SliceWorkers(1, False)
print(workers.procs[0].pid, flush=True)
os.kill(os.getpid(), 9)  # the import killed just after starting its worker
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[:1] not in ([b"Z"], [b"X"])
    except OSError:
        return False


def test_a_worker_whose_import_is_killed_before_it_starts_does_not_outlive_it() -> None:
    """PR_SET_PDEATHSIG set after the parent died never fires: the worker lived on (holding the output's lock and
    the caller's stdout), blocked on its task pipe, whose write end it holds itself."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", LATE_WORKER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    worker = int(proc.stdout.readline())
    proc.wait(timeout=60)
    deadline = time.monotonic() + 15
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    survived = _running(worker)
    if survived:
        os.kill(worker, signal.SIGKILL)
    proc.stdout.close()
    assert not survived, "the decode worker outlived the import"
