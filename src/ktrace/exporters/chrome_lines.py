"""Chrome JSON event lines built by numpy: a row of fixed slots per line, padded with NUL bytes, then compacted.

Every line of one template (a slice kind, a flow end) is a sequence of pieces: literal text, integers, µs times
("%d.%03d" of ns, floor division as polars' `//` and `%`) and tokens from a table (pre-escaped names, quoted
strings, "null"). Each piece gets a slot of whole 4-byte words in a matrix of one row per line, as wide as the
piece's widest value among the rows: literals are copied from a template row, integers written four digits a word
from a 10,000-entry table (right-aligned, leading words and bytes NUL), tokens gathered from a NUL-padded table.
`bytes.translate` then drops every NUL in one C pass (~0.65 ns a byte): the lines, back to back. No value may hold
a NUL byte itself: `format_lines` refuses tokens that do (escaped JSON never does). The polars formatter in
chrome_json writes the same bytes (tests/unit/exporters/test_chrome_lines.py) and serves when this one refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
from numpy.typing import NDArray

I64 = NDArray[np.int64]
BoolArr = NDArray[np.bool_]
Words = NDArray[np.uint32]

_NUL = b"\x00"


def _table(texts: Sequence[bytes]) -> Words:
    return np.frombuffer(b"".join(texts), np.uint32)


_FULL = [b"%04d" % g for g in range(10_000)]
_DIGITS = _table(_FULL + [b"%4d" % g for g in range(10_000)]).copy()
"""Four digits of a group: index g (zero-padded, a word inside a number), 10,000 + g (leading word: NUL-padded)."""
_DIGITS.view(np.uint8)[_DIGITS.view(np.uint8) == ord(" ")] = 0
_UPPER = _DIGITS.copy()
"""As _DIGITS, for a word above the units word: the leading word of 0 is all NUL (nothing left to write)."""
_UPPER[10_000] = 0
_DIGITS_SIZE = np.count_nonzero(_DIGITS.view(np.uint8).reshape(-1, 4), axis=1).astype(np.int64)
_UPPER_SIZE = np.count_nonzero(_UPPER.view(np.uint8).reshape(-1, 4), axis=1).astype(np.int64)
"""Digits each word of _DIGITS and _UPPER holds."""
_FRACTION = _table([b".%03d" % f for f in range(1000)])
"""".ddd" of a µs time's ns remainder."""
_NULL_WORD = _table([b"null"])[0]
_MINUS = ord("-")

OP_LITERAL, OP_INT, OP_MICROS, OP_TOKEN = 0, 1, 2, 3
"""The compiled writer's program ops (perfetto_kernel.format_rows, programs by chrome_compiled_lines): (op, k) =
literal text k, the integer in int slot k (or null), the ns in int slot k as µs, the text of token slot k's token."""
INT_BYTES = 20
"""The longest integer written: -9223372036854775808."""
MICROS_BYTES = INT_BYTES + 4


@dataclass(frozen=True)
class Ints:
    """An integer per line (JSON `null` where `valid` is False)."""

    values: I64
    valid: BoolArr | None = None
    """None: every line has a value."""


@dataclass(frozen=True)
class Micros:
    """A time in ns per line, written as µs with three decimals ("%d.%03d")."""

    ns: I64


@dataclass(frozen=True)
class Tokens:
    """A text per line: `table[codes[i]]`, written as given (already escaped or quoted)."""

    codes: I64
    table: TokenTable


Piece = bytes | Ints | Micros | Tokens


class TokenTable:
    """Texts written as given, with a NUL-padded copy (one row of words per text) to gather from."""

    def __init__(self, texts: Sequence[bytes]) -> None:
        self.lengths: I64 = np.array([len(t) for t in texts], np.int64)
        self.clean = not any(_NUL in t for t in texts)
        """No text holds a NUL byte (one would be dropped with the padding)."""
        width = -(-int(self.lengths.max(initial=0)) // 4)
        self.padded: Words = np.frombuffer(b"".join(t.ljust(4 * width, _NUL) for t in texts), np.uint32).reshape(
            len(texts), width
        )


class _Layout:
    """Slots (in words) of one template's pieces and the template row holding its literals."""

    def __init__(self) -> None:
        self.literal = bytearray()
        self.words = 0

    def slot(self, words: int) -> int:
        """Reserve `words` words; the first one's index."""
        at = self.words
        self.literal += bytes(4 * words)
        self.words += words
        return at

    def text(self, text: bytes) -> int:
        """Reserve and fill a literal's words; its length."""
        at = self.slot(-(-len(text) // 4))
        self.literal[4 * at : 4 * at + len(text)] = text
        return len(text)


def _int_words(values: I64, valid: BoolArr | None) -> int:
    """Words of a slot that holds every value (its sign included) and "null"."""
    shown = values if valid is None else values[valid]
    if shown.size == 0:
        return 1
    return -(-max(len(str(int(shown.min()))), len(str(int(shown.max())))) // 4)


def _put_ints(rows: Words, at: int, words: int, ints: Ints) -> I64:
    """Write the integers right-aligned into words at, ..., at + words - 1 of each row; their lengths."""
    values = ints.values
    negative = values < 0 if values.size and values.min() < 0 else None
    low = values if negative is None else np.where(negative, -values, values).view(np.uint64)  # -(-2**63): 2**63
    count = np.zeros(values.shape[0], np.int64)
    for j in range(words):  # j = 0: the units word, rightmost
        table, sizes = (_UPPER, _UPPER_SIZE) if j else (_DIGITS, _DIGITS_SIZE)
        if j == words - 1:  # the leading word of every row (the slot fits the widest value)
            index = low + 10_000
        else:
            high = low // 10_000
            index = low - high * 10_000 + (high == 0).astype(low.dtype) * 10_000
            low = high
        rows[:, at + words - 1 - j] = table[index]
        count += sizes[index]
    lengths = count
    if negative is not None:
        which = np.flatnonzero(negative)
        rows.view(np.uint8)[which, 4 * (at + words) - count[which] - 1] = _MINUS
        lengths = count + negative
    if ints.valid is not None and not ints.valid.all():
        missing = np.flatnonzero(~ints.valid)
        rows[missing, at : at + words] = 0
        rows[missing, at + words - 1] = _NULL_WORD
        lengths[missing] = 4
    return lengths


Fill = tuple[int, int, Ints | Tokens | I64]
"""(first word, words, what goes there: integers, tokens, or a µs time's ns remainders)."""


def _lay_out(pieces: Sequence[Piece]) -> tuple[_Layout, list[Fill], int]:
    """Slots of the pieces (adjacent literals in one: less padding), what fills them, and the literals' bytes."""
    merged: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += piece
        else:
            merged.append(piece)
    layout, fixed = _Layout(), 0
    fills: list[Fill] = []
    for piece in merged:
        if isinstance(piece, bytes):
            fixed += layout.text(piece)
        elif isinstance(piece, Tokens):
            words = -(-int(piece.table.lengths[piece.codes].max(initial=0)) // 4)
            fills.append((layout.slot(words), words, piece))
        else:
            ints = piece if isinstance(piece, Ints) else Ints(piece.ns // 1000)
            words = _int_words(ints.values, ints.valid)
            fills.append((layout.slot(words), words, ints))
            if isinstance(piece, Micros):
                fills.append((layout.slot(1), 1, piece.ns - ints.values * 1000))
                fixed += 4
    return layout, fills, fixed


def format_lines(pieces: Sequence[Piece], rows: int) -> tuple[bytearray, I64] | None:
    """`rows` lines, each its pieces one after another, back to back; with each line's length in bytes.

    None where a token holds a NUL byte (the caller formats those lines another way).
    """
    if any(isinstance(p, Tokens) and not p.table.clean for p in pieces):
        return None
    layout, fills, fixed = _lay_out(pieces)
    buffer = bytearray(4 * rows * layout.words)  # translated in place of a copy: bytearray.translate
    matrix: Words = np.frombuffer(buffer, np.uint32).reshape(rows, layout.words)
    matrix[:] = np.frombuffer(bytes(layout.literal), np.uint32)
    lengths = np.full(rows, fixed, np.int64)
    for at, words, fill in fills:
        if isinstance(fill, Ints):
            lengths += _put_ints(matrix, at, words, fill)
        elif isinstance(fill, Tokens):
            matrix[:, at : at + words] = fill.table.padded[:, :words][fill.codes]
            lengths += fill.table.lengths[fill.codes]
        else:
            matrix[:, at] = _FRACTION[fill]
    return buffer.translate(None, _NUL), lengths


def int_column(series: pl.Series) -> tuple[I64, BoolArr | None]:
    """An integer column as int64 numpy values (0 where null) and where it is not null (None: nowhere null), from
    its Arrow buffers (no polars expression per column)."""
    array = series.to_arrow()
    if array.type != pa.int64():
        array = array.cast(pa.int64())
    validity, data = array.buffers()
    n, at = len(array), array.offset
    values = np.frombuffer(data, np.int64)[at : at + n] if data is not None else np.zeros(n, np.int64)
    if validity is None or not array.null_count:
        return values, None
    valid = np.unpackbits(np.frombuffer(validity, np.uint8), count=at + n, bitorder="little")[at:].astype(np.bool_)
    return np.where(valid, values, 0), valid


_MIX = [np.uint64(m) for m in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)]


def distinct_rows(columns: Sequence[NDArray[np.integer] | BoolArr]) -> tuple[I64, I64] | None:
    """The first row of each distinct tuple of the columns' values (in sorted order of a 64-bit mix of them) and
    each row's index among those: one numpy sort, each row checked against its tuple's first (None where two
    tuples share a mix: the caller groups another way)."""
    mixed = np.zeros(columns[0].shape[0], np.uint64)
    for j, column in enumerate(columns):
        mixed = (mixed ^ column.astype(np.int64).view(np.uint64)) * _MIX[j % len(_MIX)] + np.uint64(j)
    _, first, inverse = np.unique(mixed, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not all(np.array_equal(c[first][inverse], c) for c in columns):
        return None
    return first.astype(np.int64), inverse.astype(np.int64)
