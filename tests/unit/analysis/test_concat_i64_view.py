"""concat_i64 of one table's single-chunk Int64 column without nulls is that column's own buffer (read-only, no
copy: 160 MB a column at 20 M kernels); anything else is copied into one writable int64 array as before."""

from __future__ import annotations

import numpy as np
import polars as pl

from ktrace.analysis.columns import concat_i64


def test_one_plain_column_is_not_copied() -> None:
    frame = pl.DataFrame({"t": pl.Series([5, 3, 9], dtype=pl.Int64)})
    out = concat_i64([frame, frame.clear()], "t")
    assert out.tolist() == [5, 3, 9]
    assert np.shares_memory(out, frame["t"].to_numpy())
    assert not out.flags.writeable


def test_nulls_chunks_and_several_tables_are_copied() -> None:
    nulls = pl.DataFrame({"t": pl.Series([5, None, 9], dtype=pl.Int64)})
    assert concat_i64([nulls], "t", -1).tolist() == [5, -1, 9]
    chunked = pl.concat([nulls.fill_null(1), nulls.fill_null(2)], rechunk=False)
    assert chunked["t"].n_chunks() == 2
    assert concat_i64([chunked], "t").tolist() == [5, 1, 9, 5, 2, 9]
    narrow = pl.DataFrame({"t": pl.Series([1, 2], dtype=pl.Int32)})
    both = concat_i64([narrow, narrow], "t")
    assert both.tolist() == [1, 2, 1, 2] and both.dtype == np.int64 and both.flags.writeable
