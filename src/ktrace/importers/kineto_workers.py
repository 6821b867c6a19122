"""Decode a big Kineto file's slices in worker processes while the main process reads and splits the file.

msgspec's decode and the Arrow column builds hold the GIL, so threads cannot share them; forked processes
can. The main process inflates (its gunzip thread), cuts `traceEvents` into ~8 MB slices on the guess that
each cut falls between two events (EventSplitter.defer), hands each slice's text to a worker, and merges the
workers' Arrow tables back in file order. A worker decodes and stages its slice exactly as the main process
would (kineto_schema.decode_events, EventSink.stage) and pickles the result back.

Nothing is lost when the guess is wrong: a slice that does not decode (a cut inside a string, damage) or a
worker that dies sends the main process back to the one-process path from that slice on; the texts of every
slice not yet merged are kept until then (at most IN_FLIGHT_PER_WORKER per worker, which also bounds memory).
Slices handed out before an earlier one turned exact timestamps on are read again here, exactly, as one process
reads them. One known difference remains: an event over KTRACE_MAX_EVENT_BYTES whose text holds `}, {` may be cut
out at another boundary once the slices after it are put back in one piece (the one-process path meets such an
event block by block), so which bytes around it are dropped can differ (found in review, not on a real trace).

Used for files of at least MIN_GZIP_BYTES (.json.gz) or MIN_PLAIN_BYTES (.json), one worker per CPU (at most
MAX_DEFAULT_WORKERS, none on one CPU), on Linux, outside daemonic
processes (Dask workers may not fork) and never for the ranks a process pool imports (those run in parallel
already). `KTRACE_IMPORT_WORKERS=N` sets the number of workers; 0 turns them off.
"""

from __future__ import annotations

import gc
import mmap
import multiprocessing
import os
import queue
import signal
import sys
import threading
import warnings
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ktrace.importers import kineto_decode
from ktrace.importers.kineto_decode import SETTLE, EventSplitter, PendingSlice
from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_events import EventSink, Staged
from ktrace.importers.kineto_schema import EventSlice, code_of_type, decode_events, tagged_decoder

WORKERS_ENV = "KTRACE_IMPORT_WORKERS"
MAX_DEFAULT_WORKERS = 4
MIN_GZIP_BYTES = 8 << 20
"""A .json.gz this big (~100 MB of JSON, ~12 slices) or bigger is decoded by workers. Below it they cost more than
they save: nccl x10 (7.1 MB gzip, 87 MB of JSON) imported in 0.65 s with 2 workers and 0.67 s without, its peak
memory 340 MB against 236 MB; resnet50 x10 (9.0 MB, 1.12 vs 1.43 s) and owlv2 x10 (24.5 MB, 1.32 vs 2.17 s) gain."""
MIN_PLAIN_BYTES = 96 << 20
IN_FLIGHT_PER_WORKER = 2
REPLY_TIMEOUT_S = 300.0
"""A worker silent this long on one slice (~0.05 s of work) is taken for stuck (a lock it inherited at the fork
held forever): it is ended and the main process reads on from that slice."""
EXACT, PLAIN, STOP = b"e", b"p", b""
"""A task is EXACT or PLAIN (whether the file's times are read exactly so far), then either the number of the
worker's shared slot the slice's text was written to (one byte) and its length in decimal, or nothing and a
second message with the text (a slice too big for a slot); STOP ends the worker."""
SLOT_CHUNKS = 2
"""A shared slot holds this many slices of the splitter's size (a slice is its size plus part of an event)."""


def worker_count(file_bytes: int, gzipped: bool) -> int:
    """How many decode workers a file of this size gets (0: decode in this process)."""
    wanted = _wanted()
    if wanted == 0 or not sys.platform.startswith("linux") or multiprocessing.current_process().daemon:
        return 0
    if wanted is not None:
        return wanted
    cpus = len(os.sched_getaffinity(0))
    if file_bytes < (MIN_GZIP_BYTES if gzipped else MIN_PLAIN_BYTES) or cpus < 2:
        return 0  # (on one CPU a worker only adds its transfers to the same work)
    return min(MAX_DEFAULT_WORKERS, cpus)


def _wanted() -> int | None:
    """KTRACE_IMPORT_WORKERS as a count (None: not set or not a number >= 0, so the size decides)."""
    text = os.environ.get(WORKERS_ENV, "").strip()
    return int(text) if text.isdigit() else None


@dataclass
class Decoded:
    """What a worker made of one slice."""

    staged: Staged
    events: int
    report: DecodeReport
    """The slice's own decode report: drops, repairs and notes, and whether its times had to be read exactly."""


@dataclass
class Failed:
    """A slice a worker could not decode (the main process reads the stream on from it)."""

    why: str


def _serve(tasks: Connection, results: Connection, slots: list[mmap.mmap], with_ops: bool, parent: int) -> None:
    """A worker's loop: a task -> Decoded | Failed, until STOP (see EXACT). `parent`: the pid that forked it."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle: it ends the workers
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # (blocked across the fork: see _start)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sink = EventSink(with_ops=with_ops)
    try:
        while (flag := tasks.recv_bytes()) != STOP:
            exact, where = flag[:1] == EXACT, flag[1:]
            text: bytes | memoryview = (
                tasks.recv_bytes() if not where else memoryview(slots[where[0]])[: int(where[1:])]
            )
            report = DecodeReport(exact_ts=exact)
            sink.report = report
            try:
                events = decode_events(text, report, with_ops)
                reply: Decoded | Failed = Decoded(sink.stage(EventSlice(events, text)), len(events), report)
            except Exception as exc:  # noqa: BLE001 - the main process decodes this slice itself and reports it
                reply = Failed(type(exc).__name__)
            events = []  # (nothing may point into the slot once the reply is sent: the next task overwrites it)
            del text
            results.send(reply)
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 - the main process sees the worker gone and reads on itself
        pass
    finally:
        results.close()


def _die_with_parent(parent: int) -> None:
    """Ask Linux to end this process when its parent ends (a killed `ktrace` leaves no worker behind), and end now
    if `parent` is gone already: one killed between the fork and this call never sends the signal. (A worker that
    outlived it held the output's lock and the caller's stdout for good: its own task pipe's write end, inherited
    at the fork, never lets it read an end of file.)"""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


class SliceWorkers:
    """Worker processes and the slices handed to them, oldest first.

    Tasks go out through a thread per worker: a send blocks until the worker reads, and the worker reads only
    after its last reply has been read, so the main thread must never wait on a send itself.
    """

    def __init__(self, count: int, with_ops: bool) -> None:
        import pyarrow.compute  # noqa: F401 - loaded once here, not by each worker (dictionary_encode needs it)

        for exact in (False, True):
            tagged_decoder(with_ops, exact)
        code_of_type(with_ops)
        ctx = multiprocessing.get_context("fork")
        self.outboxes: list[queue.Queue[tuple[bytes, bytes] | None]] = []
        self.slot_bytes = SLOT_CHUNKS * kineto_decode.CHUNK_BYTES
        self.slots = [[mmap.mmap(-1, self.slot_bytes) for _ in range(IN_FLIGHT_PER_WORKER)] for _ in range(count)]
        """Shared memory the main process writes each slice's text to and a worker decodes it from (no copies
        through pipes, and the same pages every time): a worker has at most IN_FLIGHT_PER_WORKER slices, and
        each of its slices takes the slot after its last one's."""
        self.handed: list[int] = [0] * count
        self.feeders: list[threading.Thread] = []
        self.results: list[Connection] = []
        self.procs: list[Any] = []
        self.pending: deque[tuple[PendingSlice, int, bool]] = deque()
        """(slice, its worker, whether it went out to be read with exact times), oldest first."""
        self.limit = IN_FLIGHT_PER_WORKER * count
        self._next = 0
        self.closed = False
        thaw = gc.get_freeze_count() == 0  # (a caller's own freeze, the TUI's, is left as it was)
        gc.freeze()  # the collector leaves the inherited objects alone: fewer copy-on-write pages in each worker
        try:
            self._start(ctx, count, with_ops)
        except BaseException:
            self.close()  # (the workers already forked)
            raise
        finally:
            if thaw:
                gc.unfreeze()

    def _start(self, ctx: Any, count: int, with_ops: bool) -> None:
        with warnings.catch_warnings():  # Python 3.12+ warns on fork in a process with threads (polars' pool):
            warnings.simplefilter("ignore", DeprecationWarning)  # the child only decodes, it takes no lock of theirs
            for i in range(count):
                task_in, task_out = ctx.Pipe(duplex=False)
                reply_in, reply_out = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_serve,
                    args=(task_in, reply_out, self.slots[i], with_ops, os.getpid()),
                    name=f"ktrace-decode-{i}",
                    daemon=True,
                )
                blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # no Ctrl-C in the child
                try:  # before it ignores Ctrl-C (multiprocessing would print the KeyboardInterrupt's traceback)
                    proc.start()
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                self.procs.append(proc)
                task_in.close()
                reply_out.close()
                outbox: queue.Queue[tuple[bytes, bytes] | None] = queue.Queue()
                feeder = threading.Thread(target=_feed, args=(outbox, task_out), name=f"ktrace-feed-{i}", daemon=True)
                feeder.start()
                self.outboxes.append(outbox)
                self.feeders.append(feeder)
                self.results.append(reply_in)

    def submit(self, piece: PendingSlice, exact_ts: bool) -> None:
        """Hand a slice to the next worker in turn."""
        w = self._next
        self._next = (w + 1) % len(self.procs)
        flag, text = EXACT if exact_ts else PLAIN, piece.text
        if len(text) <= self.slot_bytes:
            slot = self.handed[w] % IN_FLIGHT_PER_WORKER
            self.slots[w][slot][: len(text)] = text
            flag, text = b"%s%c%d" % (flag, slot, len(text)), b""
        self.handed[w] += 1
        self.outboxes[w].put((flag, text))
        self.pending.append((piece, w, exact_ts))

    def oldest(self) -> tuple[PendingSlice, Decoded | None, bool]:
        """The oldest slice handed out, what became of it (None: it did not decode, or its worker died) and whether
        it went out to be read with exact times."""
        piece, w, exact = self.pending.popleft()
        try:
            reply = self.results[w].recv() if self.results[w].poll(REPLY_TIMEOUT_S) else None
        except (EOFError, OSError):
            reply = None
        return piece, reply if isinstance(reply, Decoded) else None, exact

    def close(self) -> None:
        """End the workers (slices still pending are dropped); once."""
        if self.closed:
            return
        self.closed = True
        for outbox in self.outboxes:
            outbox.put(None)
        for i, proc in enumerate(self.procs):  # (slices left: their results are not wanted; no feeder: never told)
            proc.join(timeout=0 if self.pending or i >= len(self.feeders) else 2)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for feeder in self.feeders:
            feeder.join()
        for reply in self.results:
            reply.close()
        for slots in self.slots:
            for slot in slots:
                slot.close()
        self.pending.clear()


def _feed(outbox: queue.Queue[tuple[bytes, bytes] | None], tasks: Connection) -> None:
    """Send each task to a worker until told to end (None), then STOP; a worker that is gone makes the rest of its
    tasks moot (they are taken and dropped)."""
    alive = True
    while (task := outbox.get()) is not None:
        if alive:
            alive = _send(tasks, *(m for m in task if m))
    if alive:
        _send(tasks, STOP)
    tasks.close()


def _send(tasks: Connection, *messages: bytes) -> bool:
    """False if the worker is gone."""
    try:
        for message in messages:
            tasks.send_bytes(message)
    except (OSError, ValueError):
        return False
    return True


def start_workers(count: int, with_ops: bool) -> SliceWorkers | None:
    """`count` decode workers, or None where the system refuses them (no memory or no process left to fork): the
    file is then read in this process."""
    try:
        return SliceWorkers(count, with_ops)
    except (OSError, RuntimeError):  # (RuntimeError: no thread left to start a feeder)
        return None


def read_in_workers(splitter: EventSplitter, pieces: Iterable[Any], sink: EventSink, workers: SliceWorkers) -> None:
    """Add every piece `splitter.run` yields to `sink`, in file order, the deferred ones decoded by `workers`."""
    try:
        for piece in pieces:
            if isinstance(piece, PendingSlice):
                workers.submit(piece, sink.report.exact_ts)
                while len(workers.pending) >= workers.limit and _merge_oldest(splitter, sink, workers):
                    pass
            elif piece is SETTLE:
                while workers.pending and _merge_oldest(splitter, sink, workers):
                    pass
            else:
                sink.add(piece)
    finally:
        workers.close()


def _merge_oldest(splitter: EventSplitter, sink: EventSink, workers: SliceWorkers) -> bool:
    """Merge the oldest pending slice; if it failed, give it and every later one back to the splitter (which
    reads the rest of the stream itself) and return False."""
    piece, decoded, exact = workers.oldest()
    if decoded is None:
        splitter.restore([piece, *(p for p, _, _ in workers.pending)])
        workers.close()
        return False
    report, theirs = sink.report, decoded.report
    if report.exact_ts and not exact:  # handed out before an earlier slice turned exact times on: read it here, as
        events = decode_events(piece.text, report, sink.with_ops)  # one process would have (exactly from the start:
        report.events += len(events)  # a plain first reading counts repairs, a `ts` string say, that it does not)
        sink.add(EventSlice(events, piece.text))
        return True
    report.events += decoded.events
    report.dropped_events += theirs.dropped_events
    report.repaired_events += theirs.repaired_events
    report.exact_ts = report.exact_ts or theirs.exact_ts
    report.notes += [n for n in theirs.notes if n not in report.notes]
    sink.merge(decoded.staged)
    return True
