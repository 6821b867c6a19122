"""operators.group_key: several key columns' codes as one Int64 that is equal exactly where the codes are (nulls a
value of their own), and None where it cannot be (one column, negative codes, radixes past 2^62)."""

from __future__ import annotations

import numpy as np
import polars as pl

from ktrace.analysis.operators import group_key


def test_equal_keys_exactly_where_the_codes_are() -> None:
    rng = np.random.default_rng(7)
    name = pl.Series("name", rng.integers(0, 5, 2000), dtype=pl.UInt32)
    dims = pl.Series("dims", rng.integers(0, 300, 2000), dtype=pl.UInt32)
    codes = pl.DataFrame([name, dims]).with_columns(
        pl.when(pl.int_range(pl.len()) % 7 == 0).then(None).otherwise(pl.col("dims")).alias("dims")
    )
    key = group_key(codes)
    assert key is not None
    keyed = codes.with_columns(key.alias("key"))
    assert keyed.select(pl.struct("name", "dims").n_unique()).item() == keyed["key"].n_unique()
    assert keyed.group_by("key").agg(pl.struct("name", "dims").n_unique().alias("n"))["n"].max() == 1


def test_no_key_where_one_cannot_be_made() -> None:
    assert group_key(pl.DataFrame({"name": pl.Series([1, 2], dtype=pl.UInt32)})) is None
    assert group_key(pl.DataFrame({"a": [1, -2], "b": [0, 1]})) is None
    assert group_key(pl.DataFrame({"a": ["x", "y"], "b": [0, 1]})) is None
    assert group_key(pl.DataFrame({"a": [0, 1 << 40], "b": [0, 1 << 30]})) is None
