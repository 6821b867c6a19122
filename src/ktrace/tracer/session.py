"""CaptureSession: one traced process's recording: GPU records, Python-API ranges, threads, health.

A writer thread drains what the CUPTI callbacks copied out, decodes it to Arrow and appends it to this
process's partition at least every `flush_s` seconds, so a SIGKILL loses at most one interval. At least every
`publish_s` seconds it publishes what it appended (ktrace.model.live: readable while the job runs), and about
every second it applies the requests `ktrace ctl` left for the capture (ktrace.tracer.live_control).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ktrace.tracer.background import start_background
from ktrace.tracer.config import CaptureConfig
from ktrace.tracer.cpu_rows import ranges_table, thread_names
from ktrace.tracer.live_control import ControlPoller
from ktrace.tracer.python_sampler import PythonSampler
from ktrace.tracer.windows import Windows, initially_open, time_window_timers


class GpuBackend(Protocol):
    """What the session needs from a GPU activity source (ktrace.tracer.cupti_backend.CuptiBackend)."""

    def flush(self, forced: bool = False) -> None:
        """Ask CUPTI to deliver completed buffers."""

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        """Take every record tuple copied out so far, by kind name."""

    def set_recording(self, on: bool) -> None:
        """Enable/disable the cheap activity kinds when a window opens/closes."""

    def stop(self) -> None:
        """Disable every kind and force-flush (end of capture)."""

    def health(self) -> dict[str, int]:
        """Counts such as dropped records."""

    def name_of(self, domain: str, cbid: int) -> str:
        """API name of a callback id."""

    def gpu_timestamp(self) -> int:
        """Now on the clock of the GPU records (cupti.get_timestamp())."""

    def take_notes(self) -> list[str]:
        """Lines for the user that arose since start (each returned once)."""


class CaptureSession:
    """The recording of one process, written to `root/node=<node>/rank=<rank>/`.

    Args:
        root: the run folder (KTRACE_CAPTURE_DIR).
        config: the capture options.
        node: host name.
        rank: partition rank (RANK, LOCAL_RANK, 0 for a process without them, or the pid if that is taken).
    """

    def __init__(self, root: Path, config: CaptureConfig, node: str, rank: int) -> None:
        self.root, self.config, self.node, self.rank = root, config, node, rank
        self.pid = os.getpid()
        self.backend: GpuBackend | None = None
        self.notes: list[str] = []
        self.health: dict[str, int] = {}
        self.clock_pairs: list[Any] = []
        """ktrace.model.clock.ClockPair read when the GPU backend started and when it stops."""
        self.windows = Windows(not config.windowed, on_change=self._recording_changed)
        self._lock = threading.Lock()
        self._ranges: list[tuple[int, int, int, str, str, int]] = []
        self._seen_tids: set[int] = set()
        self._writer: Any = None
        self._decoder: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False
        self._closing = False
        self._dead = False
        self._timers = time_window_timers(config, self.windows)
        self._recording_listeners: list[Callable[[bool], None]] = []
        self._control = ControlPoller(root)
        ms = config.python_sample_ms
        self.sampler = PythonSampler(ms, lambda: self.windows.active, self.pid) if ms else None
        """The Python stack sampler (run --python-sample): samples while a window is open, from start() to close()."""
        self._next_publish = 0.0
        """time.monotonic() at which the next publish is due (0: at the first flush)."""
        self.step_window = config.steps
        """Steps [A, B) to record (run --steps, or `ktrace ctl --steps`); None: no step window."""
        self.step_index = -1
        self._step_start: int | None = None
        self._step_tid = 0
        self._step_work_end: int | None = None
        if config.windowed and initially_open(config):  # last: opening calls _recording_changed
            self.windows.open()

    # ----- recording (called from application threads) -----

    @property
    def closing(self) -> bool:
        """True while close() is writing the last rows (a signal handler running now must not close again)."""
        return self._closing and not self._closed

    @property
    def alive(self) -> bool:
        """False after close() or in a forked child."""
        return not (self._closed or self._dead)

    def record_range(self, name: str, domain: str, start_ns: int, end_ns: int, tid: int, depth: int) -> None:
        """Add one CPU range (ktrace.annotate, ktrace.step) to the capture."""
        if self.alive:
            with self._lock:
                self._ranges.append((start_ns, end_ns, tid, name, domain, depth))
                if self._step_start is not None and start_ns >= self._step_start and domain != "profiler_step":
                    self._step_work_end = max(end_ns, self._step_work_end or end_ns)

    def step(self) -> int:
        """Begin the next step: closes the previous step's range and moves --steps windows; returns its index."""
        now = time.time_ns()
        self.end_step(now)
        self.step_index += 1
        self._step_start, self._step_tid, self._step_work_end = now, threading.get_native_id(), None
        steps = self.step_window
        if steps is not None:
            if self.step_index == steps[0]:
                self.windows.open(now)
            elif self.step_index == steps[1]:
                self.windows.close(now)
        return self.step_index

    def end_step(self, now: int | None = None) -> None:
        """Close the open step's range at `now` (the end of a `with ktrace.step():` block, or the next step)."""
        if self._step_start is not None:
            self.record_range(
                f"ProfilerStep#{self.step_index}",
                "profiler_step",
                self._step_start,
                time.time_ns() if now is None else now,
                self._step_tid,
                0,
            )
            self._step_start = None

    def step_depth(self, tid: int) -> int:
        """How many levels a range opened now on thread `tid` sits below the step range (1 inside a step)."""
        return 1 if self._step_start is not None and tid == self._step_tid else 0

    def add_recording_listener(self, listener: Callable[[bool], None]) -> None:
        """Call `listener(True/False)` whenever detailed recording starts/stops (a window opens or closes: --delay,
        --steps, the profiler API, `ktrace ctl`), after the GPU kinds are switched. For recorders beside CUPTI."""
        self._recording_listeners.append(listener)

    def _recording_changed(self, on: bool) -> None:
        if not self.alive:
            return
        if self.backend is not None:
            self.backend.set_recording(on)
        for listener in list(self._recording_listeners):
            try:
                listener(on)
            except Exception as exc:  # a recorder's bug must not kill the job
                self.note(f"ktrace: a recorder failed to switch ({type(exc).__name__}: {exc})")

    # ----- `ktrace ctl` requests (writer thread) -----

    def record_from_now(self) -> None:
        """Open the capture window now, forgetting any step window and --delay/--duration timer."""
        self._take_over_window(None)
        self.windows.open()

    def stop_recording(self) -> None:
        """Close the capture window now, forgetting any step window and --delay/--duration timer."""
        self._take_over_window(None)
        self.windows.close()

    def record_steps(self, steps: tuple[int, int]) -> None:
        """Record steps [A, B) counted by ktrace.step(): nothing until step A begins (step() opens the window)."""
        self._take_over_window(steps)
        self.windows.close()

    def _take_over_window(self, steps: tuple[int, int] | None) -> None:
        """From now on `ktrace ctl` decides the window: the run's --delay/--duration timers no longer fire."""
        for timer in self._timers:
            timer.cancel()
        self.step_window = steps

    def record_clock_pair(self) -> None:
        """Read CLOCK_REALTIME and the GPU records' clock together (at GPU start and at close); never raises."""
        if self.backend is None:
            return
        from ktrace.tracer.clock_pairs import read_clock_pair

        try:
            self.clock_pairs.append(read_clock_pair(self.backend.gpu_timestamp))
        except Exception as exc:  # a tracer bug must not kill the job
            self.note(f"ktrace: could not read the CUPTI clock ({type(exc).__name__}: {exc})")

    def note(self, line: str) -> None:
        """Add a line for the user (shown by `ktrace run` at the end, kept in meta.json)."""
        if line not in self.notes:
            self.notes.append(line)

    # ----- writer thread -----

    def start(self) -> None:
        """Start the writer thread (idempotent)."""
        if self._thread is None and self.alive:
            self._thread = threading.Thread(target=self._loop, name="ktrace-writer", daemon=True)
            start_background(self._thread)
            if self.sampler is not None:
                self.sampler.start()

    def _loop(self) -> None:
        try:
            self._ensure_writer()  # import pyarrow/polars now, not at interpreter shutdown
        except Exception as exc:
            self.note(f"ktrace writer could not start: {type(exc).__name__}: {exc}")
        while not self._stop.wait(self._wait_s()):
            try:
                self._control.poll(self)
                self.flush_once()
            except Exception as exc:  # the job must never die because of the tracer
                self.note(f"ktrace writer error: {type(exc).__name__}: {exc}")
                self.health["writer_errors"] = self.health.get("writer_errors", 0) + 1

    def _wait_s(self) -> float:
        """Until the next flush: flush_s, or less when a publish falls due sooner."""
        until_publish = self._next_publish - time.monotonic() if self._next_publish else self.config.flush_s
        return max(0.0, min(self.config.flush_s, until_publish))

    def _publish_if_due(self, forced: bool) -> None:
        now = time.monotonic()
        if forced or now >= self._next_publish:
            self._writer.publish()
            self._next_publish = now + self.config.publish_s

    def flush_once(self, forced: bool = False) -> None:
        """Drain, decode and append everything recorded so far (writer thread, or close())."""
        if self._dead:
            return
        if self._finalized():  # `ktrace run` finalized (or published) the trace: we outlived its wait
            self._withdraw()  # (a writer thread that started after the finalize made its folder and marker)
            return
        self._ensure_writer()
        if self.backend is not None:
            self._decoder.name_of = self.backend.name_of
            self.backend.flush(forced)
            tables, health = self._decoder.decode(self.backend.drain())
            self._add_health(health)
            for line in self.backend.take_notes():
                self.note(line)
            for name, table in tables.items():
                self._append(name, table)
        with self._lock:
            ranges, self._ranges = self._ranges, []
        if ranges:
            self._append("ranges", ranges_table(ranges, self.pid))
        threads = self._new_threads()
        if threads is not None:
            self._writer.append("threads", threads)
        samples = self.sampler.drain() if self.sampler is not None else None
        if samples is not None:
            self._writer.append("samples", samples)
        self._publish_if_due(forced)
        self._write_meta()
        if self._finalized():  # finalized while this flush ran: take back what it wrote after the finalize
            self._withdraw()

    def _finalized(self) -> bool:
        return (self.root / "meta.json").exists() or (self._writer is not None and not self.root.is_dir())

    def _withdraw(self) -> None:
        """Stop writing, and remove what this process wrote into the trace after `ktrace run` finalized it (the
        finalize converted every stream there was and removed the bookkeeping files before)."""
        from ktrace.model.capture import PARTITION_META_FILE
        from ktrace.model.outputs import CAPTURE_MARKER

        self._dead = True
        if self._writer is None:
            return
        self._writer.close()
        folder = self._writer.folder
        for path in [folder / PARTITION_META_FILE, *folder.glob("*.arrows"), self.root / CAPTURE_MARKER]:
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if this process made it after the finalize: nothing else is in it

    def _append(self, name: str, table: Any) -> None:
        if name in ("kernels", "memory", "syncs", "api", "ranges") and table.num_rows:
            import pyarrow as pa

            mask = self.windows.mask(table.column("start_ns").to_numpy())
            if not mask.all():
                self._add_health({"outside_window_records": int((~mask).sum())})
                table = table.filter(pa.array(mask))
        if name == "ranges" and "pid" not in table.column_names:
            return
        self._writer.append(name, table)

    def _ensure_writer(self) -> None:
        if self._writer is not None:
            return
        from ktrace.model.capture import CaptureWriter  # deferred: pyarrow (~0.3 s), writer thread only
        from ktrace.tracer.columns import RecordDecoder, generic_api_name

        self._writer = CaptureWriter(self.root, self.node, self.rank)
        name_of = self.backend.name_of if self.backend is not None else generic_api_name
        self._decoder = RecordDecoder(name_of, self.pid)

    def _new_threads(self) -> Any:
        names = thread_names(self.pid)
        fresh = {tid: n for tid, n in names.items() if tid not in self._seen_tids}
        if not fresh:
            return None
        self._seen_tids.update(fresh)
        import pyarrow as pa

        return pa.table(
            {
                "pid": pa.array([self.pid] * len(fresh), pa.int64()),
                "tid": pa.array(list(fresh), pa.int64()),
                "name": pa.array(list(fresh.values())),
            }
        )

    def _add_health(self, counts: dict[str, int]) -> None:
        for k, v in counts.items():
            self.health[k] = self.health.get(k, 0) + int(v)

    def _write_meta(self, final: bool = False) -> None:
        # Until close() rewrites it, the partition says the process has not finished: a SIGKILL leaves that.
        health = dict(self.health) if final else {**self.health, "processes_not_closed": 1}
        if self.backend is not None:
            for k, v in self.backend.health().items():
                health[k] = health.get(k, 0) + int(v)
        from ktrace.model.control import CONTROL_KEY

        extra: dict[str, Any] = {"clock_pairs": [p.to_dict() for p in self.clock_pairs]} if self.clock_pairs else {}
        if self._control.answer is not None:
            extra[CONTROL_KEY] = self._control.answer.to_dict()
        self._writer.write_partition_meta(health, list(self.notes), extra)

    # ----- end -----

    def close(self) -> None:
        """Stop recording, write the last rows and close the partition (atexit, SIGTERM). A call made while one
        runs (a signal handler interrupting it) returns at once: the first finishes the work."""
        if self._closed or self._dead or self._closing:
            return
        self._closing = True
        try:
            self._finish()
        finally:  # (even if ending the step raised: `closing` must not stay true, or SIGTERM is ignored for good)
            self._closed = True
            if self._writer is not None:
                self._writer.close()

    def _finish(self) -> None:
        """close()'s work: end the last step, stop the threads and CUPTI, write the last rows and the meta."""
        # The last step has no next step() to end it: it ends with the last range recorded inside it, else now.
        self.end_step(self._step_work_end)
        self._stop.set()
        if self.sampler is not None:
            self.sampler.stop()
        for t in self._timers:
            t.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        if self.backend is not None:
            self.record_clock_pair()
            try:
                self.backend.stop()
            except Exception as exc:
                self.note(f"ktrace: CUPTI did not stop cleanly: {exc}")
        try:
            self.flush_once(forced=True)
            if self._dead:  # the trace was finalized without this process: nothing more goes into it
                return
            if self._decoder is not None:
                self._add_health(self._decoder.close())
            self._write_meta(final=True)
            if self._finalized():
                self._withdraw()
        except OSError as exc:  # a full disk: the job must not die of it; what was flushed stays readable
            self.note(f"ktrace writer error: {exc.strerror or exc}")

    def abandon(self) -> None:
        """Forget the session without touching files or CUPTI (in a forked child)."""
        self._dead = True
