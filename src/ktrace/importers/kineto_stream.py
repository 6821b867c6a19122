"""Read a Kineto JSON (.json or .json.gz) as a stream of decompressed byte blocks, gunzip in a thread."""

from __future__ import annotations

import importlib
import queue
import re
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ktrace.importers.kineto_limits import MAX_INFLATE_RATIO, check_rank_files, inflate_cap
from ktrace.model.errors import ProgressFn, TraceFormatError

READ_BYTES = 1 << 20
"""Compressed (or plain) bytes read per step."""
GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of every gzip member."""
OUT_BYTES = 8 << 20
"""Most inflated bytes handed on at once."""
AHEAD_BLOCKS = 2
"""Inflated blocks the gunzip thread may hold ready for the decoder. Two keep the decoder fed; six (as before) held
~48 MB of text in memory at the import's peak (owlv2 x10 `ktrace info`: 276-279 -> 255-260 MB, same CPU)."""


def inflate_module() -> ModuleType:
    """ISA-L's zlib (3x faster inflate) when the optional `isal` package is installed, else zlib."""
    try:
        return importlib.import_module("isal.isal_zlib")
    except ImportError:
        return zlib


@dataclass
class StreamStatus:
    """What the reader found out about the file while streaming it."""

    total_bytes: int = 0
    """Size of the file on disk."""
    read_bytes: int = 0
    """Bytes of the file consumed so far."""
    truncated: str = ""
    """Why the stream ended early (truncated gzip, bad gzip data), or "" if it ended cleanly."""


class _Members:
    """Inflates a gzip stream member after member (concatenated .gz files are valid gzip)."""

    def __init__(self, inflate: ModuleType) -> None:
        self.inflate = inflate
        self.d = inflate.decompressobj(wbits=31)
        self.between_members = False
        """The last member ended exactly at the data seen so far."""
        self.finished = False
        """Bytes after a member that are not another member: ignored, like gzip(1) does."""

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """The text `data` inflates to, in pieces of at most OUT_BYTES (1 KB of gzip can inflate to 1 MB)."""
        while data:
            if self.between_members:
                if not GZIP_MAGIC.startswith(data[:2]):
                    self.finished = True
                    return
                self.d = self.inflate.decompressobj(wbits=31)
                self.between_members = False
            out = self.d.decompress(data, OUT_BYTES)
            yield out
            while not self.d.eof and (self.d.unconsumed_tail or len(out) == OUT_BYTES):  # more is pending
                out = self.d.decompress(self.d.unconsumed_tail, OUT_BYTES)
                yield out
            if not self.d.eof:
                return
            data = self.d.unused_data
            self.between_members = True


def _gunzip_blocks(path: Path, status: StreamStatus) -> Iterator[bytes]:
    """Decompressed blocks of a (possibly multi-member) gzip file; sets status.truncated on damage."""
    members = _Members(inflate_module())
    errors = (zlib.error, members.inflate.error)
    cap = inflate_cap(path.stat().st_size)
    inflated = 0
    with path.open("rb") as f:
        while data := f.read(READ_BYTES):
            status.read_bytes += len(data)
            try:
                for out in members.pieces(data):
                    inflated += len(out)
                    if inflated > cap:
                        yield out[: len(out) - (inflated - cap)]
                        status.truncated = (
                            f"stopped reading after {cap >> 20:,} MiB of text inflated from "
                            f"{status.read_bytes:,} compressed bytes (over {MAX_INFLATE_RATIO}:1, "
                            "a decompression bomb?; KTRACE_MAX_INFLATE_RATIO raises the cap)"
                        )
                        return
                    if out:
                        yield out
            except errors as exc:
                status.truncated = f"damaged gzip data after {status.read_bytes:,} bytes ({exc})"
                return
            if members.finished:
                return
    if not members.between_members:
        status.truncated = "truncated gzip file (the compressed stream ends early)"


def _plain_blocks(path: Path, status: StreamStatus) -> Iterator[bytes]:
    with path.open("rb") as f:
        while True:
            data = f.read(READ_BYTES * 8)
            status.read_bytes += len(data)
            if not data:
                return
            yield data


def is_gzip(path: Path) -> bool:
    """True if the file starts with the gzip magic bytes."""
    with path.open("rb") as f:
        return f.read(2) == GZIP_MAGIC


def kineto_files(folder: Path) -> list[Path]:
    """The .json / .json.gz files of a folder that open like a Chrome/Kineto trace, sorted by name.

    Judged by the opening bytes, not the name: `rank0.json` is a trace, `STATS.json` is not. A file whose
    opening cannot be read is kept, so that the importer says what is wrong with it.
    """
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz")))
    check_rank_files(len(files), str(folder))
    return [p for p in files if _opens_like_trace(p)]


_OPENS_ARRAY = re.compile(rb"[ \t\n\r\x0b\x0c]*\[")
"""Text whose first byte after blanks (as bytes.lstrip() strips them, without its copy of ~1 MB) is `[`."""


def _opens_like_trace(path: Path, peek: int = 1 << 16) -> bool:
    members = _Members(inflate_module())
    try:
        with path.open("rb") as f:
            head = f.read(peek)
        if head[:2] == GZIP_MAGIC:
            head = next(members.pieces(head), b"")
    except (OSError, zlib.error, members.inflate.error):
        return True
    return bool(_OPENS_ARRAY.match(head)) or b'"traceEvents"' in head or b'"ph"' in head  # not "schemaVersion":
    # a stats file about traces (shared/traces/*/STATS.json) has that key too


def byte_blocks(
    path: Path, status: StreamStatus, progress: ProgressFn, done_before: int = 0, grand_total: int = 0
) -> Iterator[bytes]:
    """Decompressed blocks of `path`; gzip is inflated in a background thread (zlib releases the GIL).

    Progress is reported in file bytes: (done_before + read, grand_total or file size).
    """
    try:
        status.total_bytes = path.stat().st_size
        gz = is_gzip(path)
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    total = grand_total or status.total_bytes
    source = _gunzip_blocks(path, status) if gz else _plain_blocks(path, status)
    if not gz:
        for block in source:
            progress(done_before + status.read_bytes, total)
            yield block
        return
    yield from _threaded(source, status, progress, done_before, total)


_DONE = object()


def _threaded(
    source: Iterator[bytes], status: StreamStatus, progress: ProgressFn, done_before: int, total: int
) -> Iterator[bytes]:
    """Run `source` in a thread, a few blocks ahead of the consumer."""
    q: queue.Queue[object] = queue.Queue(maxsize=AHEAD_BLOCKS)
    stop = threading.Event()
    errors: list[BaseException] = []

    def pump() -> None:
        try:
            for block in source:
                if stop.is_set():
                    return
                q.put(block)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer thread
            errors.append(exc)
        finally:
            q.put(_DONE)

    worker = threading.Thread(target=pump, name="ktrace-gunzip", daemon=True)
    worker.start()
    try:
        while (item := q.get()) is not _DONE:
            progress(done_before + status.read_bytes, total)
            assert isinstance(item, bytes)
            yield item
    finally:
        stop.set()
        _drain_queue(q, worker)
    if errors:
        exc = errors[0]
        if isinstance(exc, OSError):
            raise TraceFormatError(f"cannot read: {exc}") from exc
        raise exc


def _drain_queue(q: queue.Queue[object], worker: threading.Thread) -> None:
    """Unblock and join the pump thread (it may be waiting on a full queue)."""
    while worker.is_alive():
        try:
            q.get(timeout=0.05)
        except queue.Empty:
            pass
    worker.join()
