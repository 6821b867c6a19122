"""The compiled Chrome JSON line writer (perfetto_kernel.format_rows, chrome_compiled_lines) writes the bytes of
its naive twin (tests/reference/chrome_rows_ref.py), of the numpy formatter and of the polars one, and a large
export by it is the export by numpy byte for byte."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference.chrome_rows_ref import format_rows_reference
from tangled_traces import tangled_trace
from test_chrome_lines import _chunks, _edge_ints, _odd, _placed

from ktrace.exporters import chrome_json
from ktrace.exporters.background_writes import BufferPool, background_writes
from ktrace.exporters.chrome_compiled_lines import (
    CompiledPiece,
    TextBlob,
    Texts,
    Whole,
    flow_lines_compiled,
    format_groups,
    slice_lines_compiled,
)
from ktrace.exporters.chrome_lines import INT_BYTES, MICROS_BYTES, Ints, Micros, Tokens, TokenTable, format_lines
from ktrace.exporters.chrome_slice_lines import NameTokens, flow_lines
from ktrace.exporters.perfetto_kernel import format_rows
from ktrace.testing import SyntheticConfig, generate

I64 = st.integers(-(2**63), 2**63 - 1)
OPS = st.lists(st.sampled_from(["literal", "int", "micros", "token"]), min_size=1, max_size=8)


@given(
    programs=st.lists(OPS, min_size=1, max_size=4),
    rows=st.integers(1, 40),
    values=st.lists(I64, min_size=1, max_size=50),
    texts=st.lists(st.binary(max_size=30), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_kernel_writes_what_its_naive_twin_writes(
    programs: list[list[str]], rows: int, values: list[int], texts: list[bytes], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    code = {"literal": 0, "int": 1, "micros": 2, "token": 3}
    ops, starts, bounds = [], [0], []
    for program in programs:
        for j, op in enumerate(program):
            ops.append((code[op], j % 3))
            bounds.append(0)
        starts.append(len(ops))
    literals = [b'{"a":', b"", b',"ph":"X","name":\xc3\xa9']
    literal_off = np.cumsum([0, *(len(t) for t in literals)]).astype(np.int64)
    blob = TextBlob(texts)
    template = rng.integers(0, len(programs), rows)
    ints = np.array(values, np.int64)[rng.integers(0, len(values), (3, rows))]
    ints[:, ::2] //= 2048  # µs of ns near the int64 ends: the floor division and its remainder both sides of 0
    valid = rng.random((3, rows)) < 0.8
    tokens = rng.integers(0, len(texts), (3, rows))
    args = (template, np.array(ops, np.int64).reshape(-1, 2), np.array(starts, np.int64))
    args += (np.frombuffer(bytearray(b"".join(literals)), np.uint8), literal_off, ints, valid, tokens)
    args += (blob.data, blob.offsets)
    expected = format_rows_reference(*args)
    out = np.zeros(len(expected) + 8, np.uint8)
    written = format_rows(out, *args)
    assert bytes(out[:written]) == expected


def test_format_groups_writes_what_the_numpy_formatter_writes() -> None:
    rng = np.random.default_rng(4)
    n = 3_000
    values, ns = _edge_ints(rng, n), _edge_ints(rng, n) // 4
    valid = rng.random(n) < 0.8
    texts = [b'"x"', b"null", b'"a \\" quoted \\\\ name\\u00e9\\n"', b'""']
    codes = rng.integers(0, len(texts), n)
    pieces = [b'{"v":', Ints(values, valid), b',"ts":', Micros(ns), b',"n":', Tokens(codes, TokenTable(texts)), b"}"]
    done = format_lines(pieces, n)
    assert done is not None
    odd = rng.random(n) < 0.5  # the same lines from two groups, one of them with the texts as a blob
    a, b = np.flatnonzero(odd), np.flatnonzero(~odd)
    blob = TextBlob(texts)
    part = [b'{"v":', Ints(values[b], valid[b]), b',"ts":', Micros(ns[b]), b',"n":', Texts(codes[b], blob), b"}"]
    pool = BufferPool(1)
    out, size = format_groups([(a, [p if isinstance(p, bytes) else _rows(p, a) for p in pieces]), (b, part)], n, pool)
    assert bytes(out[:size]) == bytes(done[0])
    assert out.shape[0] >= n * (2 * len(b'{"v":') + INT_BYTES + MICROS_BYTES)  # the bound, not the bytes written


def test_whole_pieces_are_laid_once_for_every_group() -> None:
    rng = np.random.default_rng(6)
    n = 500
    values, ns, kind = _edge_ints(rng, n), _edge_ints(rng, n) // 4, rng.integers(0, 3, n)
    blob = TextBlob([b'"x"', b'"yz"', b"null"])
    names = rng.integers(0, blob.count, n)
    groups = [np.flatnonzero(kind == k) for k in range(3)]
    heads = [b'{"k":0,"v":', b'{"k":1,"v":', b'{"k":22,"v":']

    every = [Whole(Ints(values)), Whole(Micros(ns)), Whole(Texts(names, blob))]  # the same objects in each group

    def pieces(k: int, rows: np.ndarray | None) -> list[CompiledPiece]:
        given = [Ints(values[rows]), Micros(ns[rows]), Texts(names[rows], blob)] if rows is not None else every
        v, t, name = given
        return [heads[k], v, b',"ts":', t, b',"n":', name, b',"r":', Ints(np.arange(n)[groups[k]]), b"}"]

    out, size = format_groups([(g, pieces(k, g)) for k, g in enumerate(groups)], n, BufferPool(1))
    want = bytes(out[:size])
    out, size = format_groups([(g, pieces(k, None)) for k, g in enumerate(groups)], n, BufferPool(1))
    assert bytes(out[:size]) == want
    with pytest.raises(ValueError, match="same place in every group"):
        format_groups([(groups[0], pieces(0, None)), (groups[1], pieces(1, groups[1]))], n, BufferPool(1))


def _rows(piece: Ints | Micros | Tokens, rows: np.ndarray) -> Ints | Micros | Tokens:
    if isinstance(piece, Ints):
        return Ints(piece.values[rows], None if piece.valid is None else piece.valid[rows])
    if isinstance(piece, Micros):
        return Micros(piece.ns[rows])
    return Tokens(piece.codes[rows], piece.table)


def test_slice_lines_match_the_polars_formatter() -> None:
    rng = np.random.default_rng(5)
    names, texts, pool = NameTokens(), TextBlob(), BufferPool(2)
    for k, chunk in enumerate(_chunks()):
        placed = _placed(_odd(chunk, rng, k) if k % 3 else chunk, rng)
        if k % 5 == 2:  # a NUL in a copy kind: the numpy formatter refuses it, this one writes it as polars does
            placed = placed.with_columns(pl.lit("a\x00b").cast(pl.Categorical).alias("copy_kind"))
        t0 = int(placed["start_ns"].min()) + (500_000 if k % 4 == 1 else 0)  # some starts before t0: negative ts
        out, size = slice_lines_compiled(placed, t0, names, texts, pool)
        assert bytes(out[:size]) == "".join(chrome_json._slice_lines(placed, t0).to_list()).encode()
        pool.give(out)
    assert texts.count == len(names.texts)


def test_flow_lines_match_the_numpy_formatter() -> None:
    rng = np.random.default_rng(9)
    ends = rng.integers(1, 10**9, 3_000), rng.choice([3, 4], 3_000), _edge_ints(rng, 3_000) // 3
    for kind in ("s", "f"):
        rel_ns = np.abs(_edge_ints(rng, 3_000)) // 8
        out, size = flow_lines_compiled(kind, *ends, rel_ns, BufferPool(0))
        assert bytes(out[:size]) == bytes(flow_lines(kind, *ends, rel_ns))


def test_a_pool_hands_back_written_buffers_only_long_enough_ones(tmp_path: Path) -> None:
    pool = BufferPool(1)
    first = pool.take(100)
    pool.give(first)
    assert pool.take(50) is first
    pool.give(first)
    assert pool.take(500).shape[0] >= 500  # the held one was too short: a new one
    with (tmp_path / "out").open("wb") as f, background_writes(f) as out:
        buffer = out.pool.take(4)
        buffer[:4] = np.frombuffer(b"abcd", np.uint8)
        out.write_job(lambda: (buffer.data[:4], buffer))  # a job's buffer goes back to the pool once written
    assert (tmp_path / "out").read_bytes() == b"abcd"
    assert out.pool.take(4) is buffer


@pytest.mark.parametrize("case", ["synthetic", "tangled"])
def test_an_export_by_the_compiled_writer_is_the_numpy_one(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case == "synthetic":
        trace = generate(SyntheticConfig(steps=2, kernels_per_step=400, streams=3, ranks=2, seed=1))
    else:
        trace = tangled_trace(
            seed=3, ranges=400, range_names=7, ties=slice(50, 60), calls=120, shared=10, kernel_ns=80,
            two_gpus=True, two_streams=True,
        )  # fmt: skip
    chrome_json.export_chrome_json(trace, tmp_path / "numpy.json")
    monkeypatch.setattr(chrome_json, "COMPILED_MIN_ROWS", 0)
    chrome_json.export_chrome_json(trace, tmp_path / "compiled.json")
    assert (tmp_path / "compiled.json").read_bytes() == (tmp_path / "numpy.json").read_bytes()
