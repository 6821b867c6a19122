"""Writes to a file from a second thread, in order, so that encoding the next batch overlaps writing this one.

A large export spends seconds in `write` (copying gigabytes into the page cache, or gzip's deflate): both release
the GIL, as does the compiled slice encoder, so on two cores the encoding and the writing run side by side. The
queue holds a few buffers at most (each an encoded chunk, ~20 MB), which bounds the memory it adds.
"""

from __future__ import annotations

import gzip
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ktrace.model.outputs import atomic_file

Buffer = bytes | bytearray | memoryview

_DONE = None
QUEUED_BUFFERS = 4
"""Buffers waiting to be written at most (the producer blocks beyond that)."""


class BackgroundWriter:
    """A write-only file whose writes happen in a thread, in the order given; errors surface on the next write
    or at close."""

    def __init__(self, out: IO[bytes], queued: int = QUEUED_BUFFERS) -> None:
        self._out = out
        self._queue: queue.Queue[Buffer | None] = queue.Queue(maxsize=queued)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ktrace-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (data := self._queue.get()) is not _DONE:
            if self._error is None:  # after a failure keep draining, so that the producer never blocks
                try:
                    self._out.write(data)
                except BaseException as exc:  # noqa: BLE001 - handed to the producer, re-raised there
                    self._error = exc

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def write(self, data: Buffer) -> int:
        """Queue `data` (kept alive, unchanged, until written); returns its length."""
        self._raise_error()
        self._queue.put(data)
        return len(data)

    def close(self) -> None:
        """Wait until everything queued is written; raise the first write error."""
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._thread.join()
        self._raise_error()


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
