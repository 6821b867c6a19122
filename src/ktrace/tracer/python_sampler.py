"""PythonSampler: the Python stacks of a traced process's threads, read every few ms by a thread of its own.

`ktrace run --python-sample MS` starts one in each traced process. It installs no hook (no sys.settrace or
sys.setprofile, in any thread): every MS ms, while a capture window is open, it reads `sys._current_frames()`
and walks each thread's frames, as py-spy and pyinstrument's timer thread do from outside and inside. The cost
lands on the program only as the GIL the sampler takes for the walk (benchmarks/python_sampler.py measures it).
ktrace's own threads (named "ktrace-...") are not sampled.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from ktrace.tracer.background import start_background
from ktrace.tracer.config import ConfigError

MIN_SAMPLE_MS, MAX_SAMPLE_MS = 1, 1000
"""The range of --python-sample."""
THREAD_PREFIX = "ktrace-"
"""Threads whose name starts with this are ktrace's own and are never sampled."""
MAX_CACHED_STACKS = 20_000
"""Distinct stacks kept with their id (the stream's dictionary); past this, both start over at the next drain."""
_REFRESH_THREADS_NS = 1_000_000_000
"""How often the thread ident -> (native id, name) map is read again (a thread id can be reused)."""

SEPARATOR = ";"
"""Between the frames of a stack; the same as ktrace.model.schema.STACK_SEPARATOR (the model is not imported
here: the hook stays cheap until the writer thread loads pyarrow)."""


def check_sample_interval(ms: int) -> int:
    """Validate --python-sample (MIN_SAMPLE_MS to MAX_SAMPLE_MS)."""
    if not MIN_SAMPLE_MS <= ms <= MAX_SAMPLE_MS:
        raise ConfigError(f"--python-sample {ms}: must be between {MIN_SAMPLE_MS} and {MAX_SAMPLE_MS} ms (try 10)")
    return ms


def frame_label(code: CodeType) -> str:
    """One frame of a stored stack: `file:first_line function` (the function's first line, so that every sample
    of a function has one label whatever line it runs)."""
    name = getattr(code, "co_qualname", code.co_name)
    return f"{code.co_filename}:{code.co_firstlineno} {name}".replace(SEPARATOR, ",")


class PythonSampler:
    """Samples every Python thread of this process but ktrace's own, every `interval_ms` ms while `recording()`.

    Args:
        interval_ms: the sampling interval (MIN_SAMPLE_MS to MAX_SAMPLE_MS).
        recording: whether a capture window is open now (Windows.active); read at every tick.
        pid: this process's id (the pid column).
    """

    def __init__(self, interval_ms: int, recording: Callable[[], bool], pid: int) -> None:
        self.interval_s = interval_ms / 1000
        self.recording = recording
        self.pid = pid
        self.ticks = 0
        """Ticks that sampled (a window was open)."""
        self._rows: list[tuple[int, int, int]] = []
        """(ts_ns, tid, stack id) taken since the last drain."""
        self._lock = threading.Lock()
        self._stacks: dict[tuple[CodeType, ...], int] = {}
        """A stack's code objects -> its id: its index in `_texts`."""
        self._texts: list[str] = []
        """Every stack's text so far, by id: the dictionary of the stream's stack column, which only grows (the
        capture stream writes only its new entries: a stack's text is written once, not once per sample)."""
        self._threads: dict[int, tuple[int, str]] = {}
        self._threads_read_ns = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the sampler thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"{THREAD_PREFIX}python-sampler", daemon=True)
            start_background(self._thread)

    def stop(self) -> None:
        """Stop sampling; the rows taken so far stay for drain()."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            if self.recording():
                self.sample_once()
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay < 0:  # the walk took longer than a tick (or the GIL was held): skip the missed ticks
                next_at, delay = time.monotonic(), 0.0
            self._stop.wait(delay)

    def sample_once(self) -> None:
        """Take one sample of every thread but ktrace's (the sampler thread calls this every tick)."""
        frames = sys._current_frames()
        now = time.time_ns()
        try:
            with self._lock:  # (drain takes the rows and may start the stack ids over)
                for ident, frame in frames.items():
                    tid = self._native_id(ident, now)
                    if tid is not None:
                        self._rows.append((now, tid, self._stack_of(frame)))
        finally:
            del frames  # never keep another thread's frames (and their locals) alive past the tick
        self.ticks += 1

    def _native_id(self, ident: int, now: int) -> int | None:
        """The kernel thread id of Python thread `ident`; None for ktrace's own threads."""
        known = self._threads.get(ident)
        if known is None or now - self._threads_read_ns > _REFRESH_THREADS_NS:
            self._threads = {t.ident: (t.native_id or t.ident, t.name) for t in threading.enumerate() if t.ident}
            self._threads_read_ns = now
            known = self._threads.get(ident)
        if known is None:  # a thread not started by `threading` (a C extension's): its ident is all we know
            return ident
        return None if known[1].startswith(THREAD_PREFIX) else known[0]

    def _stack_of(self, frame: FrameType) -> int:
        """The id of the frame's stack (its text made the first time it is seen)."""
        codes = []
        f: FrameType | None = frame
        while f is not None:
            codes.append(f.f_code)
            f = f.f_back
        key = tuple(codes)
        stack = self._stacks.get(key)
        if stack is None:
            stack = self._stacks[key] = len(self._texts)
            self._texts.append(SEPARATOR.join(frame_label(code) for code in reversed(codes)))
        return stack

    def drain(self) -> Any:
        """The rows taken since the last drain as an Arrow table of the samples stream (None if there are none);
        the writer thread calls this, so pyarrow is imported there."""
        with self._lock:
            rows, self._rows = self._rows, []
            texts = list(self._texts)
            if len(self._texts) >= MAX_CACHED_STACKS:  # start over: the stream then writes a new dictionary whole
                self._stacks, self._texts = {}, []
        if not rows:
            return None
        import pyarrow as pa

        ts, tids, stacks = zip(*rows, strict=True)
        return pa.table(
            {
                "ts_ns": pa.array(ts, pa.int64()),
                "pid": pa.array([self.pid] * len(rows), pa.int64()),
                "tid": pa.array(tids, pa.int64()),
                "stack": pa.DictionaryArray.from_arrays(pa.array(stacks, pa.int32()), pa.array(texts, pa.string())),
            }
        )
