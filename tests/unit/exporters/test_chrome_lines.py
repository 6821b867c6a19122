"""The numpy Chrome JSON line formatter (chrome_lines, chrome_slice_lines) writes the very bytes of the polars one
(chrome_json's _slice_lines, reference/chrome_flows_ref's flow lines): integers of every width and sign, nulls, µs
times on both sides of zero, names that need escaping, many names met chunk after chunk; and it refuses values
holding a NUL byte."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from reference.chrome_flows_ref import flow_lines_reference

from ktrace.exporters import chrome_json, chrome_slice_lines
from ktrace.exporters.chrome_lines import Ints, Micros, Tokens, TokenTable, format_lines
from ktrace.exporters.chrome_slice_lines import NameTokens, arrow_builds_views, flow_lines, slice_lines
from ktrace.exporters.perfetto_slice_windows import RankSlices
from ktrace.exporters.perfetto_tracks import process_order
from ktrace.model.schema import LAUNCH_CONFIG, NODE_RANK
from ktrace.testing import SyntheticConfig, generate

views = pytest.mark.skipif(
    not arrow_builds_views(),
    reason="this pyarrow (16, the floor) builds no binary views from buffers: the export writes slice lines with polars",
)

EDGES = [0, 1, 9, 10, 99, 9_999, 10_000, 10_001, 99_999_999, 100_000_000, 10**15, 2**53 + 1, 2**63 - 1]


def _edge_ints(rng: np.random.Generator, n: int) -> np.ndarray:
    edges = np.array(EDGES + [-e for e in EDGES] + [-(2**63)], np.int64)
    return np.where(rng.random(n) < 0.5, rng.choice(edges, n), rng.integers(-(10**12), 10**12, n))


def _reference(values: np.ndarray, valid: np.ndarray, ns: np.ndarray, codes: np.ndarray, texts: list[bytes]) -> bytes:
    lines = []
    for v, ok, t, c in zip(values.tolist(), valid.tolist(), ns.tolist(), codes.tolist(), strict=True):
        lines.append(
            b'{"v":%s,"ts":%d.%03d,"n":%s}' % (str(v).encode() if ok else b"null", t // 1000, t % 1000, texts[c])
        )
    return b"".join(lines)


@pytest.mark.parametrize("seed", range(4))
def test_format_lines_writes_what_python_formatting_writes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 2_000
    values, ns = _edge_ints(rng, n), _edge_ints(rng, n) // 4  # // 4: no overflow in the µs split
    valid = rng.random(n) < 0.8
    texts = [b'"x"', b"null", json.dumps('a " quoted \\ name\u00e9\n' * int(rng.integers(1, 9))).encode(), b'""']
    codes = rng.integers(0, len(texts), n)
    pieces = [b'{"v":', Ints(values, valid), b',"ts":', Micros(ns), b',"n":', Tokens(codes, TokenTable(texts)), b"}"]
    done = format_lines(pieces, n)
    assert done is not None
    blob, lengths = done
    assert bytes(blob) == _reference(values, valid, ns, codes, texts)
    assert lengths.sum() == len(blob)
    assert lengths[:5].tolist() == [
        len(_reference(values[i : i + 1], valid[i : i + 1], ns[i : i + 1], codes[i : i + 1], texts)) for i in range(5)
    ]


def test_format_lines_refuses_a_token_holding_nul() -> None:
    table = TokenTable([b'"ok"', b'"a\x00b"'])
    assert format_lines([b"{", Tokens(np.array([0, 1]), table), b"}"], 2) is None
    assert format_lines([b"{", Tokens(np.array([0, 0]), TokenTable([b'"ok"'])), b"}"], 2) is not None


def _chunks(trace_rows: int = 4_000) -> list[pl.DataFrame]:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=trace_rows // 4, streams=3, ranks=1, seed=3))
    node, rank = next(o for o in process_order(trace) if o[1] != NODE_RANK)
    return list(RankSlices(trace, node, rank, 700).chunks(900))


def _placed(chunk: pl.DataFrame, rng: np.random.Generator) -> pl.DataFrame:
    n = chunk.height
    return chunk.with_columns(
        out_pid=pl.Series(rng.choice([1, 7, 123_456], n)), out_tid=pl.Series(_edge_ints(rng, n) // 3)
    )


def _odd(chunk: pl.DataFrame, rng: np.random.Generator, k: int) -> pl.DataFrame:
    """Nulls in the args, names that need escaping (and some new in every chunk), a null name."""
    n = chunk.height
    names = ["plain", 'q"uote', "back\\slash", "tab\tnew\nline", "ünï©ødé ✓", "\x01ctl", "", f"new in chunk {k}"]
    name = pl.Series([names[i] for i in rng.integers(0, len(names), n)]).cast(pl.Categorical)
    name = name.scatter([0], [None]) if k % 2 else name
    blank = pl.Series(rng.random(n) < 0.3)
    nulled = [pl.when(blank).then(None).otherwise(pl.col(c)).alias(c) for c in (*LAUNCH_CONFIG, "correlation_id")]
    return chunk.with_columns(*nulled, name=name)


@views
def test_slice_lines_match_the_polars_formatter() -> None:
    rng = np.random.default_rng(5)
    names = NameTokens()
    for k, chunk in enumerate(_chunks()):
        placed = _placed(_odd(chunk, rng, k) if k % 3 else chunk, rng)
        t0 = int(placed["start_ns"].min()) + (500_000 if k % 4 == 1 else 0)  # some starts before t0: negative ts
        fast = slice_lines(placed, t0, names)
        assert fast is not None
        assert bytes(fast) == "".join(chrome_json._slice_lines(placed, t0).to_list()).encode()


@views
def test_names_stay_right_when_their_blocks_are_joined() -> None:
    chunk = _chunks(1_000)[0]
    names = NameTokens()
    for k in range(40):  # a new name block per chunk: joined into one past _BLOCKS
        name = pl.Series([f"kernel {k} {i % 7} " + "x" * (i % 30) for i in range(chunk.height)]).cast(pl.Categorical)
        placed = _placed(chunk.with_columns(name=name), np.random.default_rng(k))
        fast = slice_lines(placed, 0, names)
        assert fast is not None
        assert bytes(fast) == "".join(chrome_json._slice_lines(placed, 0).to_list()).encode()
    assert len(names.blocks) <= 16


@views
def test_memory_copy_kinds_and_a_nul_in_one() -> None:
    chunk = next(c for c in _chunks(8_000) if c.filter(pl.col("kind") == "memory").height)
    memory = chunk.filter(pl.col("kind") == "memory")
    placed = _placed(memory, np.random.default_rng(1))
    fast = slice_lines(placed, 0, NameTokens())
    assert fast is not None
    assert bytes(fast) == "".join(chrome_json._slice_lines(placed, 0).to_list()).encode()
    odd = placed.with_columns(pl.lit("a\x00b").cast(pl.Categorical).alias("copy_kind"))
    assert slice_lines(odd, 0, NameTokens()) is None  # the export writes these lines with polars


@pytest.mark.parametrize("kind", ["s", "f"])
def test_flow_lines_match_the_polars_formatter(kind: str) -> None:
    rng = np.random.default_rng(9)
    n = 3_000
    fid, pid, tid = rng.integers(1, 10**9, n), rng.choice([3, 4], n), _edge_ints(rng, n) // 3
    ts = np.abs(_edge_ints(rng, n)) // 8
    fast = flow_lines(kind, fid, pid, tid, ts)
    assert fast is not None
    assert bytes(fast) == "".join(flow_lines_reference(kind, fid, pid, tid, ts).to_list()).encode()


@views
@pytest.mark.parametrize("distinct", [False, True])
def test_kernel_args_by_configuration_token_or_formatted(distinct: bool) -> None:
    """Repeated launch configurations: one args token each; all distinct: every row's args formatted."""
    kernels = pl.concat([c.filter(pl.col("kind") == "kernel") for c in _chunks(8_000)])
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    if distinct:
        kernels = kernels.with_columns(grid_x=row * 7 - 50)
    else:  # five configurations, one with a null
        kernels = kernels.with_columns(*(((row % 5) * (j + 1)).alias(c) for j, c in enumerate(LAUNCH_CONFIG)))
        kernels = kernels.with_columns(registers_per_thread=pl.when(row % 5 == 3).then(None).otherwise(row % 5 + 32))
    placed = _placed(kernels, np.random.default_rng(2))
    rows = np.arange(placed.height)
    columns = chrome_slice_lines._Columns(placed, {"kernel"})
    assert (chrome_slice_lines._launch_configs(columns, rows) is None) == distinct
    fast = slice_lines(placed, 0, NameTokens())
    assert fast is not None
    assert bytes(fast) == "".join(chrome_json._slice_lines(placed, 0).to_list()).encode()


def test_without_binary_views_slice_lines_steps_aside_for_the_polars_formatter(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyarrow 16 builds no binary views from buffers: slice_lines gives None and the export writes the chunk with
    the polars formatter (the Chrome golden and streaming tests hold the bytes on the floor)."""
    placed = _placed(_chunks()[0], np.random.default_rng(1))
    monkeypatch.setattr(chrome_slice_lines, "arrow_builds_views", lambda: False)
    assert slice_lines(placed, 0, NameTokens()) is None
