"""What one Kineto event, string, nesting level and file may cost, and the byte scanners that enforce it.

Every real trace passes these caps by orders of magnitude (the largest real event is a few KB, real nesting is
under 10 levels, real files inflate under 40:1); hostile files are cut, with a note saying what was cut, or
refused in one line. Each cap can be raised by an environment variable (KTRACE_MAX_EVENT_BYTES, ...).
"""

from __future__ import annotations

import os
import re

from ktrace.model.errors import TraceFormatError


def _env_int(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


MAX_EVENT_BYTES = _env_int("KTRACE_MAX_EVENT_BYTES", 32 << 20)
"""One event (and the header before traceEvents) may span this many bytes; a longer one is skipped."""
MAX_DEPTH = _env_int("KTRACE_MAX_JSON_DEPTH", 64)
"""JSON values nested deeper than this are replaced by null before decoding (msgspec recurses on nesting)."""
MAX_INFLATE_RATIO = _env_int("KTRACE_MAX_INFLATE_RATIO", 200)
"""A .json.gz stops being read once it has inflated to this many times its size (and past MIN_BOMB_BYTES)."""
MIN_BOMB_BYTES = _env_int("KTRACE_MIN_BOMB_BYTES", 256 << 20)
"""Inflated size below which the inflate ratio is never checked."""
MAX_WHITESPACE_RUN = 4096
"""Longer runs of JSON whitespace are squeezed to their first byte before buffering (a whitespace bomb)."""
MAX_TABLE_BYTES = _env_int("KTRACE_MAX_TABLE_BYTES", 2 << 30)
"""The Arrow columns one file's events make (before the tables are built) may reach this many bytes; reading
stops there, with a note. The real traces in fixtures/ make 43-52 bytes per event (the largest, 132 k events, 6 MB),
so 2 GiB is ~40 M events of a real trace; the worst input (benchmarks/worst_input.py: identical small kernel events,
~50 bytes each) reaches it at 41.3 M events of a 40 MB .json.gz, where `ktrace info` peaks at 2.8 GB (RESULTS.md)."""
MAX_RANK_FILES = _env_int("KTRACE_MAX_RANK_FILES", 1024)
"""A folder of Kineto traces may hold this many .json/.json.gz files (each costs ~50-100 ms and ~0.5 MB to
import even when tiny: 10,000 took 6.5 minutes and 1.9 GB)."""


def file_caps() -> dict[str, int]:
    """The caps on reading one file, by their environment variable, as this process read them at import: a task
    on another machine (a Dask worker) compares them with its own (fleet.rank_import)."""
    return {
        "KTRACE_MAX_EVENT_BYTES": MAX_EVENT_BYTES,
        "KTRACE_MAX_JSON_DEPTH": MAX_DEPTH,
        "KTRACE_MAX_INFLATE_RATIO": MAX_INFLATE_RATIO,
        "KTRACE_MIN_BOMB_BYTES": MIN_BOMB_BYTES,
        "KTRACE_MAX_TABLE_BYTES": MAX_TABLE_BYTES,
    }


class TablesFull(Exception):
    """One file's events have made MAX_TABLE_BYTES of columns (kineto_events.EventSink): the read stops here."""

    def __init__(self, table_bytes: int, cap: int) -> None:
        super().__init__(f"{table_bytes:,} bytes of tables, over the cap of {cap:,}")
        self.table_bytes = table_bytes
        self.cap = cap


def _size(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.3g} MiB"


def tables_full_note(events: int, cap: int) -> str:
    """The trace's note when TablesFull stopped the read after `events` events."""
    return (
        f"stopped reading after {events:,} events: their tables reached the cap of {_size(cap)} "
        "per file in memory (KTRACE_MAX_TABLE_BYTES raises it); the events after them and every key after "
        "traceEvents are not read"
    )


_WS = b" \t\r\n"
_WS_BYTES = frozenset(_WS)
_STEP = MAX_WHITESPACE_RUN // 2
"""Every run of MAX_WHITESPACE_RUN bytes covers a whole window between two samples taken this far apart."""
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*("?)|[\[\]{}]')
"""A string (group 1 is empty when it runs past the data) or a bracket."""
_AFTER_KEY = re.compile(rb"\s*:\s*\[")
_KEY_CUT = re.compile(rb"\s*(?::\s*)?")


_BLANKS = {c: bytes([c]) * (1 << 16) for c in _WS}
"""64 KiB of one whitespace byte: a run of one byte is recognized by a memcmp."""


def _run_end(block: bytes, pos: int, step: int = 1 << 16) -> int:
    """Offset of the first non-whitespace byte of `block` at or after `pos` (len(block) if none)."""
    while pos < len(block):
        piece = block[pos : pos + step]
        if len(piece) == step and piece == _BLANKS.get(piece[0]):
            pos += step
            continue
        rest = piece.lstrip(_WS)
        if rest:
            return pos + len(piece) - len(rest)
        pos += len(piece)
    return len(block)


def squeeze_whitespace(block: bytes) -> tuple[bytes, int]:
    """`block` with every run of MAX_WHITESPACE_RUN+ whitespace bytes cut to its first byte; (block, runs cut).

    Looks only at every _STEP-th byte until two samples in a row are whitespace and the window between them is
    all whitespace, so a real trace costs ~nothing (a regex over every byte ran at 15 MB/s).
    """
    samples = block[::_STEP]
    out: list[bytes] = []
    done = runs = k = 0
    while k < len(samples) - 1:
        lo = k * _STEP
        if (
            samples[k] in _WS_BYTES
            and samples[k + 1] in _WS_BYTES
            and lo >= done
            and not block[lo : lo + _STEP + 1].strip(_WS)
        ):
            back = block[max(done, lo - _STEP) : lo]
            start = lo - (len(back) - len(back.rstrip(_WS)))
            end = _run_end(block, lo + _STEP)
            if end - start >= MAX_WHITESPACE_RUN:
                out.append(block[done : start + 1])
                done = end
                runs += 1
            k = max(k + 1, -(-end // _STEP))
            continue
        k += 1
    if not runs:
        return block, 0
    out.append(block[done:])
    return b"".join(out), runs


class TopLevelKey:
    """Finds `"traceEvents": [` as a key of the top-level object only (a decoy nested in `metadata` is skipped).

    Fed the growing head of the document; remembers where it stopped, so each byte is scanned once.
    """

    def __init__(self, key: bytes = b'"traceEvents"') -> None:
        self.key = key
        self.pos = 0
        self.depth = 0

    def find(self, head: bytes | bytearray) -> int | None:
        """Offset just past the `[` opening the top-level key's array, or None if not in `head` yet."""
        while (m := _TOKEN.search(head, self.pos)) is not None:
            token = m.group()
            if token[:1] == b'"':
                if not m.group(1) or m.end() == len(head):
                    return None  # the string (or what follows it) is not all here yet: rescan it next time
                if self.depth == 1 and token == self.key:
                    after = _AFTER_KEY.match(head, m.end())
                    if after:
                        return after.end()
                    if _KEY_CUT.fullmatch(head, m.end()):
                        return None  # `"traceEvents" :` so far: the `[` may come in the next block
            else:
                self.depth += 1 if token in (b"{", b"[") else -1
            self.pos = m.end()
        return None


def flatten_deep(data: bytes | bytearray | memoryview, limit: int = MAX_DEPTH) -> tuple[bytes, int]:
    """`data` with every JSON value nested deeper than `limit` replaced by null; (data, values replaced).

    Brackets inside strings are skipped. Only used on data that made the decoder raise RecursionError.
    """
    out: list[bytes] = []
    depth = 0
    start = 0
    cut_from = -1
    replaced = 0
    view = bytes(data)
    for m in _TOKEN.finditer(view):
        token = m.group()
        if token[:1] == b'"':
            continue
        if token in (b"{", b"["):
            depth += 1
            if depth == limit + 1 and cut_from < 0:
                cut_from = m.start()
        else:
            if depth == limit + 1 and cut_from >= 0:
                out += [view[start:cut_from], b"null"]
                start = m.end()
                cut_from = -1
                replaced += 1
            depth -= 1
    if cut_from >= 0:  # never closed: cut to the end
        out += [view[start:cut_from], b"null"]
        start = len(view)
        replaced += 1
    out.append(view[start:])
    return b"".join(out), replaced


def value_starts(data: bytes | bytearray, end: int) -> list[int]:
    """Offsets in data[:end] of the `{` or `[` opening each top-level value (strings and nesting skipped)."""
    starts = []
    depth = 0
    for m in _TOKEN.finditer(data, 0, end):
        token = m.group()
        if token[:1] == b'"':
            continue
        if token in (b"{", b"["):
            if depth == 0:
                starts.append(m.start())
            depth += 1
        elif depth > 0:
            depth -= 1
    return starts


def inflate_cap(compressed_bytes: int) -> int:
    """Inflated bytes after which a gzip file is treated as a decompression bomb."""
    return max(MIN_BOMB_BYTES, compressed_bytes * MAX_INFLATE_RATIO)


def check_rank_files(count: int, folder: str) -> None:
    """Refuse a folder with more rank files than MAX_RANK_FILES (one line, exit 3)."""
    if count > MAX_RANK_FILES:
        raise TraceFormatError(
            f"{folder}: {count:,} .json files, more than the {MAX_RANK_FILES:,} rank files ktrace "
            "reads from one folder (KTRACE_MAX_RANK_FILES raises the cap)"
        )
