"""Writes to a file from a second thread, in order, so that encoding the next batch overlaps writing this one.

A large export spends seconds in `write` (copying gigabytes into the page cache, or gzip's deflate): both release
the GIL, as do the compiled encoders, whose kernel calls run in the writer's thread too (`write_job`), so on two
cores the preparing of the next batch runs beside the encoding and the writing of this one. The queue holds a few
buffers at most (each an encoded chunk, ~20 MB), which bounds the memory it adds.
"""

from __future__ import annotations

import gzip
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import numpy as np
from numpy.typing import NDArray

from ktrace.model.outputs import atomic_file

Buffer = bytes | bytearray | memoryview
Job = Callable[[], tuple[Buffer, NDArray[np.uint8] | None]]
"""Work run in the writer's thread, in turn: it returns the bytes to write and the pool buffer they lie in."""

_DONE = None
QUEUED_BUFFERS = 2
"""Buffers (or jobs, each holding a batch's kernel inputs) waiting to be written at most (the producer blocks beyond
that): two keep the writer busy while the producer prepares the next batch."""


class BufferPool:
    """Output buffers used again once written: a fresh buffer's pages fault in on first touch (~0.3 ns a byte, a
    third of what the compiled encoders cost), a written one's are resident already. Holds `keep` at most (the
    longest ones: batches of one kind come in a few sizes, and a short one would serve none)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._free: list[NDArray[np.uint8]] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> NDArray[np.uint8]:
        """A buffer of at least `size` bytes (its contents undefined): a free one if one is long enough."""
        with self._lock:
            fits = [k for k, buffer in enumerate(self._free) if buffer.shape[0] >= size]
            if fits:
                return self._free.pop(min(fits, key=lambda k: self._free[k].shape[0]))
        return np.empty(size + size // 4, np.uint8)  # room for the next batches' sizes

    def give(self, buffer: NDArray[np.uint8]) -> None:
        """Take back a buffer no longer read."""
        with self._lock:
            self._free.append(buffer)
            if len(self._free) > self.keep:
                del self._free[min(range(len(self._free)), key=lambda k: self._free[k].shape[0])]


class BackgroundWriter:
    """A write-only file whose writes happen in a thread, in the order given; errors surface on the next write
    or at close."""

    def __init__(self, out: IO[bytes], queued: int = QUEUED_BUFFERS) -> None:
        self._out = out
        self._queue: queue.Queue[tuple[Buffer, NDArray[np.uint8] | None] | Job | None] = queue.Queue(maxsize=queued)
        self._error: BaseException | None = None
        self.pool = BufferPool(2)
        """Buffers for jobs (KernelJob): a job takes one in the writer's thread when it runs (one at a time), and
        it comes back here once its bytes are written."""
        self._thread = threading.Thread(target=self._run, name="ktrace-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not _DONE:
            data: Buffer = b""
            recycle = None
            if self._error is None:  # after a failure keep draining, so that the producer never blocks
                try:
                    data, recycle = item() if callable(item) else item
                    self._out.write(data)
                except BaseException as exc:  # noqa: BLE001 - handed to the producer, re-raised there
                    self._error = exc
            del data, item
            if recycle is not None:
                self.pool.give(recycle)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def write(self, data: Buffer) -> int:
        """Queue `data` (kept alive, unchanged, until written); returns its length."""
        self._raise_error()
        self._queue.put((data, None))
        return len(data)

    def write_job(self, job: Job) -> None:
        """Queue `job`: the writer's thread runs it in turn and writes the bytes it returns (handing their pool
        buffer back once written). The compiled encoders' kernels run there (they release the GIL), so they overlap
        the producer's preparing of the next batch rather than following it."""
        self._raise_error()
        self._queue.put(job)

    def close(self) -> None:
        """Wait until everything queued is written; raise the first write error."""
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._thread.join()
        self._raise_error()


Kernel = Callable[..., int]
"""A compiled kernel: it writes into its first argument (a buffer) and returns the bytes written."""


class KernelJob:
    """A batch's inputs to a compiled kernel, laid out in the caller's thread; `run` calls the kernel, which
    releases the GIL: the exports run it in the writer's thread (BackgroundWriter.write_job), beside the preparing
    of the next batch."""

    def __init__(
        self, kernel: Callable[[], Kernel], bound: int, inputs: tuple[np.ndarray, ...], pool: BufferPool
    ) -> None:
        """`kernel`: gives the kernel (imported when first run: numba only for large exports); `bound`: the most
        bytes it writes; `inputs`: its arguments after the buffer (none: no rows, nothing to write)."""
        self.kernel, self.bound, self.inputs, self.pool = kernel, bound, inputs, pool

    @property
    def empty(self) -> bool:
        """No rows: `run` writes nothing."""
        return not self.inputs

    def run(self) -> tuple[memoryview, NDArray[np.uint8] | None]:
        """The bytes written (a view of the buffer's start) and the pool buffer they lie in (taken now: only the
        batch being written holds one; None when empty), as BackgroundWriter.write_job wants them."""
        if not self.inputs:
            return memoryview(b""), None
        out = self.pool.take(self.bound)
        written = self.kernel()(out, *self.inputs)
        self.inputs = ()  # let the inputs go once written
        return out.data[: int(written)], out


def ragged(parts: Sequence[bytes]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """`parts` back to back, read-only (np.frombuffer, the empty case too: one numba signature), and their bounds:
    part j is blob[offsets[j]:offsets[j + 1]]."""
    blob = np.frombuffer(b"".join(parts), np.uint8)
    return blob, np.concatenate(([0], np.cumsum([len(p) for p in parts], dtype=np.int64))).astype(np.int64)


def load_in_thread(load: Callable[[], object]) -> threading.Thread:
    """Run `load` (an export's compiled kernel's first call: numba loads it from its cache, ~0.4 s) in a thread, to
    overlap the layout pass before the first batch; join it before that batch's own call. A failure is dropped
    here: that call raises it."""

    def run() -> None:
        try:
            load()
        except Exception:  # noqa: BLE001, S110 - the export's own call raises the same error
            pass

    thread = threading.Thread(target=run, name="ktrace-numba-load", daemon=True)
    thread.start()
    return thread


@contextmanager
def background_writes(out: IO[bytes]) -> Iterator[BackgroundWriter]:
    """`out` written from a thread while the block runs; every write is done (or has raised) when it ends."""
    writer = BackgroundWriter(out)
    try:
        yield writer
    finally:
        writer.close()


@contextmanager
def streamed_output(path: str | Path) -> Iterator[BackgroundWriter]:
    """An export's output, written (and gzipped when `path` ends in .gz) in a second thread while the next batch is
    encoded; the file appears whole or not at all (Ctrl-C, disk full)."""
    p = Path(path)
    with atomic_file(p) as f:
        if p.suffix == ".gz":
            with (
                gzip.GzipFile(filename=str(p), mode="wb", compresslevel=6, fileobj=f) as gz,
                background_writes(gz) as out,  # type: ignore[arg-type]
            ):
                yield out
        else:
            with background_writes(f) as out:
                yield out
