"""The compiled slice encoder (perfetto_kernel) writes the same bytes as the numpy encoder and as pb2 packets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference.perfetto_rows_ref import slice_packets_reference

from ktrace.exporters import perfetto as perfetto_module
from ktrace.exporters.perfetto import dense_codes, export_perfetto
from ktrace.exporters.perfetto_kernel import slice_packets
from ktrace.exporters.perfetto_slice_rows import IntArg, SliceRows, StrArg, encode_compiled, encode_numpy, split_rows

INT64 = st.integers(-(2**63), 2**63 - 1)
UINT = st.one_of(
    st.integers(0, 300), st.sampled_from([127, 128, 16383, 16384, 2**56, 2**63 - 1]), st.integers(0, 2**63 - 1)
)
"""Timestamps, iids and uuids (uint64 fields)."""
ARG = st.one_of(UINT, st.sampled_from([-1, -(2**63)]), INT64)
"""int_value (int64: negatives take 10 bytes)."""


def _column(values: st.SearchStrategy[int], n: int) -> st.SearchStrategy[np.ndarray]:
    return st.lists(values, min_size=n, max_size=n).map(lambda v: np.array(v, np.int64))


@st.composite
def slice_rows(draw: st.DrawFn) -> SliceRows:
    n = draw(st.integers(0, 12))
    col = _column(UINT, n)
    ids = st.integers(1, 2**64 - 1)
    ints = tuple(
        IntArg(
            draw(st.integers(1, 300)),
            draw(_column(ARG, n)),
            draw(st.none() | st.lists(st.booleans(), min_size=n, max_size=n).map(np.array)),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    strings = []
    for _ in range(draw(st.integers(0, 2))):
        table = draw(st.lists(st.text(max_size=140), min_size=1, max_size=4))
        codes = np.array(draw(st.lists(st.integers(-1, len(table) - 1), min_size=n, max_size=n)), np.int64)
        strings.append(StrArg(draw(st.integers(1, 200)), codes, table))
    n_flows, n_terms = draw(st.integers(0, 2 * n)), draw(st.integers(0, n))
    rows = st.integers(0, max(n - 1, 0))
    return SliceRows(
        seq=draw(st.integers(1, 2**20)),
        start=draw(col),
        end=draw(col),
        track=draw(col),
        name_iid=draw(col),
        ints=ints,
        strings=tuple(strings),
        flow_rows=np.array(draw(st.lists(rows, min_size=n_flows, max_size=n_flows)) if n else [], np.int64),
        flow_ids=np.array(draw(st.lists(ids, min_size=n_flows, max_size=n_flows)) if n else [], np.uint64),
        term_rows=np.array(draw(st.lists(rows, min_size=n_terms, max_size=n_terms)) if n else [], np.int64),
        term_ids=np.array(draw(st.lists(ids, min_size=n_terms, max_size=n_terms)) if n else [], np.uint64),
    )


@settings(max_examples=150, deadline=None)
@given(slice_rows())
def test_compiled_and_numpy_encoders_write_the_naive_twins_bytes(rows: SliceRows) -> None:
    expected = slice_packets_reference(rows)
    assert encode_compiled(rows) == expected
    assert encode_numpy(rows) == expected


@settings(max_examples=100, deadline=None)
@given(slice_rows(), st.integers(1, 13))
def test_batches_cut_from_a_chunk_encode_to_the_chunks_bytes(rows: SliceRows, size: int) -> None:
    parts = split_rows(rows, size)
    assert sum(p.start.shape[0] for p in parts) == rows.start.shape[0]
    assert b"".join(encode_numpy(p) for p in parts) == encode_numpy(rows)


def test_the_kernel_source_runs_as_python_too() -> None:
    """Plain-Python run of the kernel (what numba compiles), so a coverage run sees its lines."""
    rows = SliceRows(
        3,
        np.array([5, 2**40], np.int64),
        np.array([9, 2**62], np.int64),
        np.array([1, 300], np.int64),
        np.array([2, 7], np.int64),
        (IntArg(1, np.array([-5, 130], np.int64), np.array([True, False])),),
        (StrArg(12, np.array([1, -1], np.int64), ["a", "HtoD"]),),
        np.array([1, 1, 0], np.int64),
        np.array([4, 2**63, 9], np.uint64),
        np.array([0], np.int64),
        np.array([7], np.uint64),
    )
    original = slice_packets.py_func.__globals__  # the module's namespace: swap dispatchers for their Python
    names = (
        "slice_packets",
        "varint_len",
        "put_varint",
        "_put",
        "_put_fixed64",
        "_begin_te_len",
        "_packet_body",
        "_put_packet_head",
    )
    saved = {k: original[k] for k in names}
    try:
        for k in names:
            original[k] = saved[k].py_func
        python_bytes = encode_compiled(rows)
    finally:
        original.update(saved)
    assert python_bytes == slice_packets_reference(rows) == encode_compiled(rows)


@pytest.mark.parametrize("name", ["nccl", "resnet50", "tracelens", "dlrm", "cloverleaf"])
def test_real_traces_export_the_same_bytes_by_either_encoder(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, real_trace_path: Callable[[str], Path]
) -> None:
    import ktrace

    trace = ktrace.open(real_trace_path(name))
    export_perfetto(trace, tmp_path / "numpy.pftrace", chunk_rows=5_000)
    monkeypatch.setattr(perfetto_module, "COMPILED_MIN_ROWS", 0)
    export_perfetto(trace, tmp_path / "compiled.pftrace", chunk_rows=5_000)
    assert (tmp_path / "numpy.pftrace").read_bytes() == (tmp_path / "compiled.pftrace").read_bytes()


@pytest.mark.parametrize("dtype", [pl.String, pl.Categorical])
@pytest.mark.parametrize("values", [["b", None, "a", "b", None], [None, None], ["z", "y"], [None, "é", None]])
def test_dense_codes_index_the_sorted_distinct_strings(values: list[str | None], dtype: pl.DataType) -> None:
    codes, table = dense_codes(pl.Series(values, dtype=pl.String).cast(dtype))
    assert table == sorted({v for v in values if v is not None})
    assert [table[c] if c >= 0 else None for c in codes.tolist()] == values
