"""A chunk of Chrome JSON slice lines (`ph: X`) and flow ends (`ph: s`/`f`) formatted by chrome_lines' numpy slots.

A chunk's slices are split by kind (each kind has its own args) and by the length class of their name (names go
in a slot as wide as the longest in the group: classes of powers of two keep the padding under half the name),
each group formatted as one template, and the lines put back in file order by one Arrow `take`. Names repeat: each
distinct name is JSON-escaped once (`json.dumps`, as the polars formatter in chrome_json does) and kept, NUL-padded,
in its class's table for the whole export; rows gather it by the name's categorical code.
"""

from __future__ import annotations

import functools
import itertools
import json

import numpy as np
import polars as pl
import pyarrow as pa
from numpy.typing import NDArray

from ktrace.exporters.chrome_lines import (
    Ints,
    Micros,
    Piece,
    Tokens,
    TokenTable,
    distinct_rows,
    format_lines,
    int_column,
)
from ktrace.exporters.perfetto_slices import KINDS
from ktrace.model.schema import LAUNCH_CONFIG

I64 = NDArray[np.int64]

SEP = b",\n"
"""Before each event line (chrome_json's SEP)."""
COLUMNS = (
    *("start_ns", "end_ns", "name", "kind", "correlation_id", *LAUNCH_CONFIG),
    *("bytes", "copy_kind", "src_kind", "dst_kind"),
)
"""The slice columns a chunk needs to be written (not sync_type, domain) and its flows' ends noted (chrome_layout):
not pid, tid, device or stream, which the layout pass turned into each slice's place code."""
_KIND_HEADS = [SEP + b'{"ph":"X","cat":"' + k.encode() + b'","name":' for k in KINDS]
"""Each slice kind's line up to its name; all in the first data buffer of the lines' views."""
_BLOCKS = 16
"""Name blocks kept apart at most (then joined into one): each is a data buffer of every chunk's views."""


@functools.cache
def arrow_builds_views() -> bool:
    """Whether this pyarrow builds a binary-view array from buffers with its data buffers (pyarrow 16 refuses the
    variadic buffers: the export then writes every slice line with the polars formatter, as before)."""
    view = np.array([[13, int.from_bytes(b"abcd", "little"), 0, 0]], np.int32)
    try:
        built = pa.Array.from_buffers(pa.binary_view(), 1, [None, pa.py_buffer(view), pa.py_buffer(b"abcd" * 4)])
        return bool(built.cast(pa.large_binary())[0].as_py() == b"abcd" * 3 + b"a")
    except (ValueError, NotImplementedError, pa.ArrowException):
        return False


def _views(texts: list[bytes], buffer: int, offsets: I64) -> NDArray[np.int32]:
    """Arrow binary views of `texts` stored in data buffer `buffer` at `offsets`: up to 12 bytes inline."""
    out = np.zeros((len(texts), 4), np.int32)
    for j, text in enumerate(texts):
        if len(text) <= 12:
            out[j] = np.frombuffer(len(text).to_bytes(4, "little") + text.ljust(12, b"\0"), np.int32)
        else:
            out[j] = (len(text), np.frombuffer(text[:4], np.int32)[0], buffer, offsets[j])
    return out


_HEAD_VIEWS = _views(_KIND_HEADS, 0, np.cumsum([0, *(len(h) for h in _KIND_HEADS[:-1])]))


class NameTokens:
    """The JSON string literal of every name met so far (`json.dumps`, once each), by categorical code, as an
    Arrow binary view into blocks of bytes kept for the whole export."""

    def __init__(self) -> None:
        self.texts: list[bytes] = [b"null"]
        self.blocks: list[bytes] = [b"null"]
        self.views = _views([b"null"], 1, np.zeros(1, np.int64))  # data buffer 0 holds _KIND_HEADS
        self.where = np.full(0, -1, np.int64)  # per categorical code: token; -1: not met yet

    def buffers(self) -> list[bytes]:
        """The data buffers every view points into: the kind heads, then the name blocks."""
        return [b"".join(_KIND_HEADS), *self.blocks]

    def _add(self, texts: list[bytes]) -> None:
        if len(self.blocks) >= _BLOCKS:  # one block for all, the views re-pointed
            self.blocks = []
            texts, self.texts = self.texts + texts, []
            self.views = self.views[:0]
        at = np.zeros(len(texts), np.int64)
        np.cumsum([len(t) for t in texts[:-1]], out=at[1:])
        self.views = np.concatenate([self.views, _views(texts, 1 + len(self.blocks), at)])
        self.texts += texts
        self.blocks.append(b"".join(texts))

    def codes(self, names: pl.Series) -> I64:
        """The token (row of `views`) of each row of a Categorical name column."""
        physical = names.to_physical()
        nulls = physical.is_null().to_numpy() if physical.null_count() else None
        phys = physical.fill_null(0).to_numpy().astype(np.int64)
        top = int(phys.max(initial=-1)) + 1
        if top > self.where.size:
            self.where = np.concatenate([self.where, np.full(max(top - self.where.size, self.where.size), -1)])
        found = self.where[phys]
        new = found < 0
        if nulls is not None:
            new &= ~nulls
        if new.any():
            at = np.flatnonzero(new)
            fresh, first = np.unique(phys[at], return_index=True)
            self.where[fresh] = len(self.texts) + np.arange(fresh.size)
            self._add([json.dumps(t).encode() for t in names.gather(at[first]).cast(pl.String).to_list()])
            found = self.where[phys]
        if nulls is not None:
            found[nulls] = 0
        return found


class _Columns:
    """A chunk's integer columns as numpy (values, and where not null), each converted once (chrome_lines.int_column)."""

    def __init__(self, frame: pl.DataFrame, kinds: set[str], given: dict[str, I64] | None = None) -> None:
        """`given`: columns as numpy values (never null) instead of the frame's (out_pid and out_tid)."""
        self.frame = frame
        names = ["correlation_id"] if kinds & {"api", "sync", "kernel", "memory"} else []
        names += [*LAUNCH_CONFIG] if "kernel" in kinds else []
        names += ["bytes"] if "memory" in kinds else []
        names += ["start_ns", "end_ns", "out_pid", "out_tid"]
        self.values: dict[str, I64] = {}
        self.valid: dict[str, NDArray[np.bool_]] = {}
        for c in names:
            values, valid = (given[c], None) if given and c in given else int_column(frame[c])
            self.values[c] = values
            if valid is not None:
                self.valid[c] = valid

    def micros(self, rows: I64) -> Micros:
        """The durations of the slices at `rows`."""
        return Micros(self.values["end_ns"][rows] - self.values["start_ns"][rows])

    def ints(self, column: str, rows: I64 | None) -> Ints:
        """The column's values at `rows` (None: every row)."""
        valid = self.valid.get(column)
        if rows is None:
            return Ints(self.values[column], valid)
        return Ints(self.values[column][rows], None if valid is None else valid[rows])


def _quoted_text(series: pl.Series) -> Tokens:
    """'"value"' (as written, not escaped: the polars formatter's concat_str) or null, per row."""
    index: dict[str | None, int] = {}
    codes = np.array([index.setdefault(t, len(index)) for t in series.cast(pl.String).to_list()], np.int64)
    table = TokenTable([b"null" if t is None else b'"' + t.encode() + b'"' for t in index])
    return Tokens(codes, table)


def _args(kind: str, frame: _Columns, rows: I64) -> list[Piece]:
    """The pieces of a slice's args object, by kind (chrome_json._args)."""
    if kind == "kernel":
        grid, block, rest = LAUNCH_CONFIG[:3], LAUNCH_CONFIG[3:6], LAUNCH_CONFIG[6:]
        pieces: list[Piece] = [b'{"grid":[']
        for names, close in ((grid, b'],"block":['), (block, b"],")):
            for j, c in enumerate(names):
                pieces += [b"," if j else b"", frame.ints(c, rows)]
            pieces.append(close)
        for j, c in enumerate((*rest, "correlation_id")):
            pieces += [(b"," if j else b"") + b'"' + c.encode() + b'":', frame.ints(c, rows)]
        return [*pieces, b"}"]
    if kind == "memory":
        pieces = [b'{"bytes":', frame.ints("bytes", rows)]
        for c in ("copy_kind", "src_kind", "dst_kind"):
            pieces += [b',"' + c.encode() + b'":', _quoted_text(frame.frame[c].gather(rows))]
        return [*pieces, b',"correlation_id":', frame.ints("correlation_id", rows), b"}"]
    if kind in ("api", "sync"):
        return [b'{"correlation_id":', frame.ints("correlation_id", rows), b"}"]
    return [b"{}"]


def slice_lines(placed: pl.DataFrame, t0: int, names: NameTokens) -> memoryview | None:
    """The chunk's slice lines (each SEP first), in its row order; `placed` has out_pid and out_tid. None where
    chrome_lines refuses a value, or this pyarrow cannot build binary views (the caller uses the polars formatter).

    Each line is up to five Arrow binary views, written back to back by one cast of the views to a binary array:
    its kind's head, its name, the rest formatted kind by kind; a kernel's rest stops before its args, which are
    a token per distinct launch configuration, then its correlation id.
    """
    n = placed.height
    if n == 0:
        return memoryview(b"")
    if not arrow_builds_views():
        return None
    kind = placed["kind"].to_physical().to_numpy().astype(np.int64)
    order = np.argsort(kind, kind="stable")
    edges = [0, *(np.flatnonzero(np.diff(kind[order])) + 1).tolist(), n]
    columns = _Columns(placed, {KINDS[k] for k in np.unique(kind).tolist()})
    tokens = names.codes(placed["name"])  # first: it may add names
    buffers: list[bytes | bytearray] = [*names.buffers()]
    grouped = np.zeros((n, 5, 4), np.int32)  # per line, kind by kind: head, name, rest, two more for kernels
    grouped[:, 0] = _HEAD_VIEWS[kind[order]]
    grouped[:, 1] = names.views[tokens[order]]
    for a, b in itertools.pairwise(edges):
        rows = order[a:b]
        k = KINDS[int(kind[rows[0]])]
        times: list[Piece] = [
            *(b',"pid":', columns.ints("out_pid", rows), b',"tid":', columns.ints("out_tid", rows)),
            *(b',"ts":', Micros(columns.values["start_ns"][rows] - t0), b',"dur":', columns.micros(rows)),
        ]
        configs = _launch_configs(columns, rows) if k == "kernel" else None
        segments: list[tuple[I64, I64 | None, list[Piece]]]  # (rows formatted, which one each row takes, pieces)
        if configs is None:
            segments = [(rows, None, [*times, b',"args":', *_args(k, columns, rows), b"}"])]
        else:  # the args up to the correlation id: formatted once per distinct configuration
            firsts, taken = configs
            args = _args(k, columns, firsts)[:-3]  # but the correlation id and "}"
            correlation: list[Piece] = [b'"correlation_id":', columns.ints("correlation_id", rows), b"}}"]
            segments = [(rows, None, times), (firsts, taken, [b',"args":', *args, b","]), (rows, None, correlation)]
        for j, (at, which, pieces) in enumerate(segments, 2):  # views 2, 3, 4 of each line
            done = format_lines(pieces, at.size)
            if done is None:
                return None
            blob, lengths = done
            segment = _segment_views(pieces[0], lengths, len(buffers))
            grouped[a:b, j] = segment if which is None else segment[which]
            buffers.append(blob)
    views = np.empty_like(grouped)
    views[order] = grouped  # the lines back in row order
    lines = pa.Array.from_buffers(
        pa.binary_view(), 5 * n, [None, pa.py_buffer(views), *(pa.py_buffer(b) for b in buffers)]
    ).cast(pa.large_binary())
    _, offsets, data = lines.buffers()
    assert offsets is not None and data is not None
    return memoryview(data)[: int(np.frombuffer(offsets, np.int64)[5 * n])]


def _segment_views(first: Piece, lengths: I64, buffer: int) -> NDArray[np.int32]:
    """Views of lines formatted back to back into data buffer `buffer`; each starts with the literal `first` and
    is over 12 bytes long (never inline)."""
    assert isinstance(first, bytes) and len(first) >= 4
    out = np.empty((lengths.shape[0], 4), np.int32)
    out[:, 0] = lengths
    out[:, 1] = np.frombuffer(first[:4], np.int32)[0]
    out[:, 2] = buffer
    out[0, 3] = 0
    np.cumsum(lengths[:-1], out=out[1:, 3])
    return out


def _launch_configs(columns: _Columns, rows: I64) -> tuple[I64, I64] | None:
    """Kernels' launch configurations repeat: the first of `rows` with each distinct one, and each row's index
    among those. None where they hardly repeat (or on a mix collision): each row's args are formatted."""
    ints = [columns.ints(c, rows) for c in LAUNCH_CONFIG]
    distinct = distinct_rows([i.values for i in ints] + [i.valid for i in ints if i.valid is not None])
    if distinct is None or distinct[0].shape[0] > max(64, rows.shape[0] // 16):
        return None
    return rows[distinct[0]], distinct[1]


def flow_pieces(kind: str, fid: I64, pid: I64, tid: I64, rel_ns: I64) -> list[Piece]:
    """The pieces of the `s` (launch) or `f` (GPU record) ends of some flows."""
    head = b'{"ph":"s","cat":"launch"' if kind == "s" else b'{"ph":"f","bp":"e","cat":"launch"'
    return [
        *(SEP + head + b',"name":"launch","id":', Ints(fid), b',"pid":', Ints(pid)),
        *(b',"tid":', Ints(tid), b',"ts":', Micros(rel_ns), b"}"),
    ]


def flow_lines(kind: str, fid: I64, pid: I64, tid: I64, rel_ns: I64) -> bytearray:
    """The `s` (launch) or `f` (GPU record) ends of some flows, as tests/reference/chrome_flows_ref.py writes them (the
    reference of the tests): integers only, so format_lines never refuses them."""
    done = format_lines(flow_pieces(kind, fid, pid, tid, rel_ns), fid.shape[0])
    if done is None:  # only a token holding NUL is refused, and flows have no tokens
        raise RuntimeError("format_lines refused flow lines, which hold integers only")
    return done[0]
