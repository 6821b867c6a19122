"""Chrome JSON slice and flow lines by the compiled kernel (perfetto_kernel.format_rows): the pieces
chrome_slice_lines gives each kind's rows (chrome_lines' Ints, Micros, Tokens and literal bytes), turned into one
small program per kind and written row by row in one pass, the same bytes. Used for ranks of COMPILED_MIN_ROWS
slices or more, where numba's load (~0.4 s, in a thread during the layout pass: `warm_compiled`) pays for itself;
it needs no binary views, so it serves on pyarrow 16 too. Lines go into buffers of the writer's pool
(background_writes.BufferPool), used again once written."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.exporters.background_writes import BufferPool, Kernel, KernelJob, load_in_thread, ragged
from ktrace.exporters.chrome_lines import (
    INT_BYTES,
    MICROS_BYTES,
    OP_INT,
    OP_LITERAL,
    OP_MICROS,
    OP_TOKEN,
    Ints,
    Micros,
    Piece,
    Tokens,
    TokenTable,
)
from ktrace.exporters.chrome_slice_lines import _KIND_HEADS, NameTokens, _args, _Columns, flow_pieces
from ktrace.exporters.perfetto_slices import KINDS

I64 = NDArray[np.int64]

COMPILED_MIN_ROWS = int(os.environ.get("KTRACE_CHROME_COMPILED_ROWS", "500000"))
"""A rank with at least this many slices has its lines written by the compiled kernel; smaller ones by numpy.
KTRACE_CHROME_COMPILED_ROWS=0 always compiles; a huge value never does."""


class TextBlob:
    """Texts back to back (`data`) with their bounds (`offsets`): text c is data[offsets[c]:offsets[c + 1]]."""

    def __init__(self, texts: Sequence[bytes] = ()) -> None:
        self.data: NDArray[np.uint8] = np.zeros(0, np.uint8)
        self.offsets: I64 = np.zeros(1, np.int64)
        self.longest = 0
        self.extend(texts)

    @property
    def count(self) -> int:
        """Texts held."""
        return int(self.offsets.shape[0]) - 1

    def extend(self, texts: Sequence[bytes]) -> None:
        """Append `texts` (their codes follow the ones held)."""
        if not texts:
            return
        data, offsets = ragged(texts)
        self.data = np.concatenate([self.data, data])
        self.offsets = np.concatenate([self.offsets, self.offsets[-1] + offsets[1:]])
        self.longest = max(self.longest, int(np.diff(offsets).max()))

    @classmethod
    def of_table(cls, table: TokenTable) -> TextBlob:
        """The texts of a chrome_lines token table."""
        padded = table.padded.view(np.uint8).reshape(table.lengths.shape[0], -1)
        return cls([bytes(padded[j, :size]) for j, size in enumerate(table.lengths.tolist())])


@dataclass(frozen=True)
class Texts:
    """A text per line: text codes[i] of `blob`."""

    codes: I64
    blob: TextBlob


@dataclass(frozen=True)
class Whole:
    """A piece (Ints, Micros or Texts) given for all n rows of a `format_groups` call, at the same place of every
    group's pieces: its values are laid in their slot once, not gathered for each group and scattered back."""

    piece: Ints | Micros | Texts


CompiledPiece = Piece | Texts | Whole


class _Program:
    """Templates' programs, literals, slots and the combined token texts of one `format_groups` call."""

    def __init__(self, n: int, int_slots: int, token_slots: int) -> None:
        self.ops: list[tuple[int, int]] = []
        self.starts = [0]
        self.literals: list[bytes] = []
        self.bounds: list[int] = []
        self.ints = np.zeros((int_slots, n), np.int64)  # slot by slot: each piece's rows filled in one 1-D scatter
        self.valid = np.ones((int_slots, n), np.bool_)
        self.tokens = np.zeros((token_slots, n), np.int64)
        self.blobs: dict[int, tuple[int, TextBlob]] = {}  # id -> (first code in the combined texts, blob)
        self.codes = 0
        self.laid: dict[tuple[str, int], Whole | None] = {}  # slot -> the Whole laid there (None: groups' rows)

    def _blob_base(self, blob: TextBlob) -> int:
        if id(blob) not in self.blobs:
            self.blobs[id(blob)] = (self.codes, blob)
            self.codes += blob.count
        return self.blobs[id(blob)][0]

    def add(self, rows: I64, pieces: Sequence[CompiledPiece]) -> None:
        """The next template: its pieces' values go to the slots of `rows` (aligned with them; a Whole's: all)."""
        bound, int_slot, token_slot = 0, 0, 0
        for given in pieces:
            whole = given if isinstance(given, Whole) else None
            piece = given.piece if isinstance(given, Whole) else given
            at = slice(None) if whole is not None else rows
            if isinstance(piece, bytes):
                if self.ops and self.ops[-1][0] == OP_LITERAL and len(self.ops) > self.starts[-1]:
                    self.literals[-1] += piece
                else:
                    self.ops.append((OP_LITERAL, len(self.literals)))
                    self.literals.append(piece)
                bound += len(piece)
            elif isinstance(piece, Ints | Micros):
                if self._fresh("int", int_slot, whole):
                    self.ints[int_slot][at] = piece.values if isinstance(piece, Ints) else piece.ns
                    if isinstance(piece, Ints) and piece.valid is not None:
                        self.valid[int_slot][at] = piece.valid
                self.ops.append((OP_INT if isinstance(piece, Ints) else OP_MICROS, int_slot))
                bound += INT_BYTES if isinstance(piece, Ints) else MICROS_BYTES
                int_slot += 1
            else:
                texts = piece if isinstance(piece, Texts) else Texts(piece.codes, TextBlob.of_table(piece.table))
                base = self._blob_base(texts.blob)
                if self._fresh("token", token_slot, whole):
                    self.tokens[token_slot][at] = texts.codes + base
                self.ops.append((OP_TOKEN, token_slot))
                bound += texts.blob.longest
                token_slot += 1
        self.starts.append(len(self.ops))
        self.bounds.append(bound)

    def _fresh(self, kind: str, slot: int, whole: Whole | None) -> bool:
        """Whether a piece's values still go to its slot: a group's always, a Whole's the first time only (a Whole
        shares its slot with no other piece)."""
        key = (kind, slot)
        if key not in self.laid:
            self.laid[key] = whole
            return True
        if self.laid[key] is not whole:
            raise ValueError("a Whole piece must stand at the same place in every group, alone in its slot")
        return whole is None

    def texts(self) -> tuple[NDArray[np.uint8], I64]:
        """Every blob's texts back to back, and their bounds."""
        blobs = [blob for _, blob in sorted(self.blobs.values(), key=lambda b: b[0])]
        if not blobs:
            return np.zeros(0, np.uint8), np.zeros(1, np.int64)
        if len(blobs) == 1:  # a chunk with names only: the export's name blob as it is, not a copy per chunk
            return blobs[0].data, blobs[0].offsets
        data = np.concatenate([b.data for b in blobs])
        ends = np.concatenate([b.offsets[1:] for b in blobs])
        shift = np.repeat(np.cumsum([0, *(b.data.shape[0] for b in blobs[:-1])]), [b.count for b in blobs])
        return data, np.concatenate([[0], ends + shift]).astype(np.int64)


def _slots(pieces: Sequence[CompiledPiece]) -> tuple[int, int]:
    inner = [p.piece if isinstance(p, Whole) else p for p in pieces]
    return sum(isinstance(p, Ints | Micros) for p in inner), sum(isinstance(p, Tokens | Texts) for p in inner)


Lines = tuple[NDArray[np.uint8], int]
"""A buffer and the bytes of lines written at its start."""


def _format_rows() -> Kernel:
    from ktrace.exporters.perfetto_kernel import format_rows  # noqa: PLC0415 - numba only for large exports

    return format_rows


class Formatting(KernelJob):
    """Lines by the numba kernel (perfetto_kernel.format_rows), their inputs laid out (prepare_groups, in the
    caller's thread); `run` (KernelJob's) calls the kernel: the export runs it in the writer's thread, beside the
    placing of the next chunk."""

    def __init__(self, pool: BufferPool, bound: int = 0, inputs: tuple[np.ndarray, ...] = ()) -> None:
        """No inputs: no rows."""
        super().__init__(_format_rows, bound, inputs, pool)

    def lines(self) -> Lines:
        """Run now: the buffer (empty where no rows) and the bytes of the lines written at its start."""
        view, buffer = self.run()
        return (np.zeros(0, np.uint8) if buffer is None else buffer), len(view)


def prepare_groups(groups: Sequence[tuple[I64, Sequence[CompiledPiece]]], n: int, pool: BufferPool) -> Formatting:
    """The formatting of rows 0, ..., n - 1, their lines back to back in a buffer from `pool`: each row of
    groups[g]'s rows gets group g's pieces (their arrays aligned with those rows); every row is in one group."""
    if n == 0:
        return Formatting(pool)
    slots = [_slots(pieces) for _, pieces in groups]
    program = _Program(n, max(s[0] for s in slots), max(s[1] for s in slots))
    template = np.zeros(n, np.int64)
    for g, (rows, pieces) in enumerate(groups):
        template[rows] = g
        program.add(rows, pieces)
    literals, literal_off = ragged(program.literals)
    blob, blob_off = program.texts()
    bound = sum(rows.shape[0] * b for (rows, _), b in zip(groups, program.bounds, strict=True))
    ops = np.array(program.ops, np.int64).reshape(-1, 2)
    starts = np.array(program.starts, np.int64)
    inputs = (template, ops, starts, literals, literal_off, program.ints, program.valid, program.tokens, blob, blob_off)
    return Formatting(pool, bound, inputs)


def format_groups(groups: Sequence[tuple[I64, Sequence[CompiledPiece]]], n: int, pool: BufferPool) -> Lines:
    """The lines of rows 0, ..., n - 1 back to back in a buffer from `pool` (prepare_groups, run at once)."""
    return prepare_groups(groups, n, pool).lines()


def slice_lines_compiled(
    placed: pl.DataFrame, t0: int, names: NameTokens, name_texts: TextBlob, pool: BufferPool
) -> Lines:
    """chrome_slice_lines.slice_lines' bytes (the chunk's slice lines, each SEP first, in row order) by the
    compiled kernel, in a buffer from `pool`; `name_texts` follows `names` (the same texts, for the whole export)."""
    return slice_lines_prepared(placed, t0, names, name_texts, pool).lines()


def slice_lines_prepared(
    placed: pl.DataFrame,
    t0: int,
    names: NameTokens,
    name_texts: TextBlob,
    pool: BufferPool,
    places: tuple[I64, I64] | None = None,
) -> Formatting:
    """slice_lines_compiled's formatting, ready to run; `places`: the rows' out_pid and out_tid, where `placed`
    lacks those columns (no frame built to hold them)."""
    n = placed.height
    if n == 0:
        return Formatting(pool)
    kind = placed["kind"].to_physical().to_numpy().astype(np.int64)
    present = np.flatnonzero(np.bincount(kind, minlength=len(KINDS))).tolist()
    given = None if places is None else {"out_pid": places[0], "out_tid": places[1]}
    columns = _Columns(placed, {KINDS[k] for k in present}, given)
    tokens = names.codes(placed["name"])  # first: it may add names
    name_texts.extend(names.texts[name_texts.count :])
    start, end = columns.values["start_ns"], columns.values["end_ns"]
    every: list[CompiledPiece] = [  # each kind's line from its name to its args: every row's values laid once
        *(Whole(Texts(tokens, name_texts)), b',"pid":', Whole(columns.ints("out_pid", None))),
        *(b',"tid":', Whole(columns.ints("out_tid", None)), b',"ts":', Whole(Micros(start - t0))),
        *(b',"dur":', Whole(Micros(end - start)), b',"args":'),
    ]
    groups: list[tuple[I64, list[CompiledPiece]]] = []
    for k in present:
        rows = np.flatnonzero(kind == k) if len(present) > 1 else np.arange(n)
        groups.append((rows, [_KIND_HEADS[k], *every, *_args(KINDS[k], columns, rows), b"}"]))
    return prepare_groups(groups, n, pool)


def flow_lines_compiled(kind: str, fid: I64, pid: I64, tid: I64, rel_ns: I64, pool: BufferPool) -> Lines:
    """chrome_slice_lines.flow_lines' bytes by the compiled kernel, in a buffer from `pool`."""
    return flow_lines_prepared(kind, fid, pid, tid, rel_ns, pool).lines()


def flow_lines_prepared(kind: str, fid: I64, pid: I64, tid: I64, rel_ns: I64, pool: BufferPool) -> Formatting:
    """flow_lines_compiled's formatting, ready to run."""
    pieces = flow_pieces(kind, fid, pid, tid, rel_ns)
    return prepare_groups([(np.arange(fid.shape[0]), pieces)], fid.shape[0], pool)


def warm_compiled() -> threading.Thread:
    """The compiled kernel loaded in a thread (background_writes.load_in_thread), on one flow line."""
    one = np.ones(1, np.int64)
    return load_in_thread(lambda: flow_lines_compiled("s", one, one, one, one, BufferPool(0)))
