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
