"""Log-bin histograms: quantiles read back within the stated bound of the exact order statistics; merging adds."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from ktrace.analysis.log_histogram import RELATIVE_ERROR, bin_codes, bin_values, histogram, merge_histograms, quantiles

QS = (0.0, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0)
values = st.lists(st.integers(-(10**13), 10**13), min_size=1, max_size=300)


@given(values)
def test_every_value_reads_back_within_the_relative_error(xs: list[int]) -> None:
    v = np.array(xs, dtype=np.int64)
    back = bin_values(bin_codes(v))
    assert np.all(np.abs(back - v) <= RELATIVE_ERROR * np.abs(v) * (1 + 1e-9))


@given(values)
def test_codes_are_monotone_in_the_value(xs: list[int]) -> None:
    v = np.sort(np.array(xs, dtype=np.int64))
    assert np.all(np.diff(bin_codes(v)) >= 0)


@given(values)
def test_quantiles_are_within_the_bound_of_polars_linear_quantiles(xs: list[int]) -> None:
    v = np.array(xs, dtype=np.int64)
    hist = histogram(pl.DataFrame({"k": [0] * v.size, "x": v}), ["k"], "x")
    got = quantiles(hist["bin"].to_numpy(), hist["count"].to_numpy(), QS)
    s = np.sort(v).astype(np.float64)
    for q, approx in zip(QS, got, strict=True):
        exact = pl.Series(v).cast(pl.Float64).quantile(q, "linear")
        h = (v.size - 1) * q
        bound = RELATIVE_ERROR * max(abs(s[int(np.floor(h))]), abs(s[int(np.ceil(h))]))
        assert abs(approx - exact) <= bound * (1 + 1e-9) + 1e-6


@given(values, values)
def test_merged_histograms_equal_the_histogram_of_all_values(a: list[int], b: list[int]) -> None:
    def hist(xs: list[int]) -> pl.DataFrame:
        return histogram(pl.DataFrame({"k": ["x"] * len(xs), "v": xs}), ["k"], "v")

    assert merge_histograms([hist(a), hist(b)], ["k"]).equals(hist(a + b))
