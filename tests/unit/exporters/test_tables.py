"""Parquet and CSV table export."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from ktrace.exporters.tables import export_tables
from ktrace.model.errors import KtraceError
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace
from ktrace.testing import assert_trace_equal


def test_parquet_tables_read_back_to_the_same_trace(tmp_path: Path, synthetic_trace: Trace) -> None:
    files = export_tables(synthetic_trace, tmp_path / "out", "parquet")
    assert sorted(files) == sorted(TABLES)
    back = Trace.from_arrow({name: pq.read_table(path) for name, path in files.items()}, synthetic_trace.meta)
    assert_trace_equal(back, synthetic_trace)


def test_csv_tables_have_every_row_and_plain_strings(tmp_path: Path, synthetic_trace: Trace) -> None:
    files = export_tables(synthetic_trace, tmp_path / "out", "csv")
    kernels = pl.read_csv(files["kernels"])
    assert kernels.height == synthetic_trace.kernels.height
    assert kernels["name"].dtype == pl.String
    assert kernels["start_ns"].to_list() == synthetic_trace.kernels["start_ns"].to_list()


def test_output_that_is_a_file_is_refused(tmp_path: Path, synthetic_trace: Trace) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(KtraceError, match="not a folder"):
        export_tables(synthetic_trace, tmp_path / "f", "csv")


def test_csv_text_cells_never_start_a_formula(tmp_path: Path) -> None:
    from ktrace.model.builder import TraceBuilder

    names = ['=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)", "\tx", "\ry", "plain", "a=b"]
    b = TraceBuilder(node="=cmd|' /C calc'!A0", rank=0)
    b.add(
        "kernels",
        {"start_ns": list(range(8)), "end_ns": list(range(1, 9)), "device": [0] * 8, "stream": [-1] * 8, "name": names},
    )
    export_tables(b.build(), tmp_path / "out", "csv")
    kernels = pl.read_csv(tmp_path / "out" / "kernels.csv")
    assert kernels["name"].to_list() == ["'" + n for n in names[:6]] + names[6:]
    assert kernels["node"].to_list() == ["'=cmd|' /C calc'!A0"] * 8
    assert kernels["stream"].to_list() == [-1] * 8  # numbers (negative ones too) stay numbers
