"""A chunk of Chrome JSON slice lines (`ph: X`) and flow ends (`ph: s`/`f`) formatted by chrome_lines' numpy slots.

A chunk's slices are split by kind (each kind has its own args) and by the length class of their name (names go
in a slot as wide as the longest in the group: classes of powers of two keep the padding under half the name),
each group formatted as one template, and the lines put back in file order by one Arrow `take`. Names repeat: each
distinct name is JSON-escaped once (`json.dumps`, as the polars formatter in chrome_json does) and kept, NUL-padded,
in its class's table for the whole export; rows gather it by the name's categorical code.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import polars as pl
import pyarrow as pa
from numpy.typing import NDArray

from ktrace.exporters.chrome_lines import Ints, Micros, Piece, Tokens, TokenTable, format_lines
from ktrace.exporters.perfetto_slices import KINDS
from ktrace.model.schema import LAUNCH_CONFIG

I64 = NDArray[np.int64]

SEP = b",\n"
"""Before each event line (chrome_json's SEP)."""
_KIND_HEADS = [SEP + b'{"ph":"X","cat":"' + k.encode() + b'","name":' for k in KINDS]
"""Each slice kind's line up to its name; all in the first data buffer of the lines' views."""
_BLOCKS = 16
"""Name blocks kept apart at most (then joined into one): each is a data buffer of every chunk's views."""


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
    """A chunk's integer columns as numpy (values, and where not null), converted once, by one polars select."""

    def __init__(self, frame: pl.DataFrame, kinds: set[str]) -> None:
        self.frame = frame
        names = ["correlation_id"] if kinds & {"api", "sync", "kernel", "memory"} else []
        names += [*LAUNCH_CONFIG] if "kernel" in kinds else []
        names += ["bytes"] if "memory" in kinds else []
        nullable = [c for c in names if frame[c].null_count()]
        done = frame.select(
            *(pl.col(c).fill_null(0).cast(pl.Int64) for c in names),
            *(pl.col(c).is_not_null().alias(f"valid {c}") for c in nullable),
        )
        self.values = {c: done[c].to_numpy() for c in names}
        self.valid = {c: done[f"valid {c}"].to_numpy() for c in nullable}

    def ints(self, column: str, rows: I64) -> Ints:
        """The column's values at `rows`."""
        valid = self.valid.get(column)
        return Ints(self.values[column][rows], None if valid is None else valid[rows])


def _quoted_text(series: pl.Series) -> Tokens:
    """'"value"' (as written, not escaped: the polars formatter's concat_str) or null, per row."""
    physical = series.to_physical().fill_null(2**32 - 1).to_numpy()
    _, first, inverse = np.unique(physical, return_index=True, return_inverse=True)
    texts = series.gather(first).cast(pl.String).to_list()
    table = TokenTable([b"null" if t is None else b'"' + t.encode() + b'"' for t in texts])
    return Tokens(inverse.astype(np.int64).reshape(-1), table)


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
    chrome_lines refuses a value (the caller uses the polars formatter).

    Each line is three Arrow binary views: its kind's head, its name, and the rest, formatted kind by kind; one
    cast of the views to a binary array writes the lines back to back.
    """
    n = placed.height
    if n == 0:
        return memoryview(b"")
    kind = placed["kind"].to_physical().to_numpy().astype(np.int64)
    order = np.argsort(kind, kind="stable")
    edges = [0, *(np.flatnonzero(np.diff(kind[order])) + 1).tolist(), n]
    start, end = placed["start_ns"].to_numpy(), placed["end_ns"].to_numpy()
    pid, tid = placed["out_pid"].to_numpy(), placed["out_tid"].to_numpy()
    columns = _Columns(placed, {KINDS[k] for k in np.unique(kind).tolist()})
    tokens = names.codes(placed["name"])  # first: it may add names
    buffers: list[bytes | bytearray] = [*names.buffers()]
    views = np.empty((n, 3, 4), np.int32)  # per line: head, name, rest
    views[:, 0] = _HEAD_VIEWS[kind]
    views[:, 1] = names.views[tokens]
    for a, b in itertools.pairwise(edges):
        rows = order[a:b]
        k = KINDS[int(kind[rows[0]])]
        pieces: list[Piece] = [
            *(b',"pid":', Ints(pid[rows]), b',"tid":', Ints(tid[rows]), b',"ts":', Micros(start[rows] - t0)),
            *(b',"dur":', Micros(end[rows] - start[rows]), b',"args":', *_args(k, columns, rows), b"}"),
        ]
        done = format_lines(pieces, rows.size)
        if done is None:
            return None
        blob, lengths = done
        at = np.zeros(rows.size, np.int64)
        np.cumsum(lengths[:-1], out=at[1:])
        views[rows, 2, 0] = lengths
        views[rows, 2, 1] = _REST_PREFIX
        views[rows, 2, 2] = len(buffers)
        views[rows, 2, 3] = at
        buffers.append(blob)
    lines = pa.Array.from_buffers(
        pa.binary_view(), 3 * n, [None, pa.py_buffer(views), *(pa.py_buffer(b) for b in buffers)]
    ).cast(pa.large_binary())
    _, offsets, data = lines.buffers()
    assert offsets is not None and data is not None
    return memoryview(data)[: int(np.frombuffer(offsets, np.int64)[3 * n])]


_REST_PREFIX = np.frombuffer(b',"pi', np.int32)[0]
"""The first 4 bytes of a line after its name."""


def flow_lines(kind: str, fid: I64, pid: I64, tid: I64, rel_ns: I64) -> bytearray | None:
    """The `s` (launch) or `f` (GPU record) ends of some flows (chrome_json._flow_lines)."""
    head = b'{"ph":"s","cat":"launch"' if kind == "s" else b'{"ph":"f","bp":"e","cat":"launch"'
    pieces: list[Piece] = [
        *(SEP + head + b',"name":"launch","id":', Ints(fid), b',"pid":', Ints(pid)),
        *(b',"tid":', Ints(tid), b',"ts":', Micros(rel_ns), b"}"),
    ]
    done = format_lines(pieces, fid.shape[0])
    return None if done is None else done[0]
