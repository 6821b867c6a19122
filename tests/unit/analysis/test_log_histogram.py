"""Log-bin histograms: quantiles read back within the stated bound of the exact order statistics, or exactly
(polars' own, to the bit) where a group holds few distinct values; merging adds, in any order and grouping."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from ktrace.analysis.log_histogram import (
    RELATIVE_ERROR,
    bin_codes,
    bin_values,
    grouped_quantiles,
    histogram,
    merge_histograms,
)

QS = (0.0, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0)
values = st.lists(st.integers(-(10**13), 10**13), min_size=1, max_size=300)
micros = st.lists(st.integers(-(10**10), 10**10).map(lambda x: x * 1000), min_size=1, max_size=300)
few_values = st.lists(st.sampled_from([0, 1000, 3000, 7000, -5000, 10**9, 12**9 * 1000]), min_size=1, max_size=60)


def _quantiles(hist: pl.DataFrame) -> list[float]:
    return list(grouped_quantiles(hist, ["k"], QS, "x").row(0)[1:])


def _hist(xs: list[int], **options: int) -> pl.DataFrame:
    return histogram(
        pl.DataFrame({"k": [0] * len(xs), "x": xs}, schema={"k": pl.Int64, "x": pl.Int64}), ["k"], "x", **options
    )


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
def test_binned_quantiles_are_within_the_bound_of_polars_linear_quantiles(xs: list[int]) -> None:
    v = np.array(xs, dtype=np.int64)
    hist = _hist(xs, exact_values=0)
    assert hist["value"].null_count() == hist.height  # bins only
    s = np.sort(v).astype(np.float64)
    for q, approx in zip(QS, _quantiles(hist), strict=True):
        exact = pl.Series(v).cast(pl.Float64).quantile(q, "linear")
        h = (v.size - 1) * q
        bound = RELATIVE_ERROR * max(abs(s[int(np.floor(h))]), abs(s[int(np.ceil(h))]))
        assert abs(approx - exact) <= bound * (1 + 1e-9) + 1e-6


@given(micros)
def test_few_whole_microseconds_give_polars_quantiles_to_the_bit(xs: list[int]) -> None:
    hist = _hist(xs)  # at most 300 distinct values, all whole microseconds: exact rows
    assert hist["bin"].null_count() == hist.height
    expected = [pl.Series(xs, dtype=pl.Int64).quantile(q, "linear") for q in QS]
    assert _quantiles(hist) == expected


def test_nanoseconds_are_bins() -> None:
    """Values that are not all whole microseconds (a capture's nanoseconds) rarely repeat: bins, fewer rows."""
    assert _hist([1000, 2000, 2500])["value"].null_count() == 3  # three values, three bins
    assert _hist([1000, 2000, 2000])["bin"].null_count() == 2  # two exact rows


@given(st.lists(few_values, min_size=1, max_size=5), st.integers(1, 8), st.randoms())
def test_merging_depends_on_the_values_only(parts: list[list[int]], bound: int, rnd: object) -> None:
    """Groups cross the exact bound on the way (small bounds): the result is the histogram of all the values at
    once, whatever the parts and the merge order."""
    everything = [x for xs in parts for x in xs]
    hists = [_hist(xs, exact_values=bound) for xs in parts]
    at_once = merge_histograms(hists, ["k"], exact_values=bound)
    shuffled = list(hists)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    folded = shuffled[0]
    for h in shuffled[1:]:
        folded = merge_histograms([folded, h], ["k"], exact_values=bound)
    folded = merge_histograms([folded], ["k"], exact_values=bound)
    assert folded.equals(at_once) and at_once.equals(_hist(everything, exact_values=bound))
    exact = len(set(everything)) <= bound
    assert (at_once["bin"].null_count() == at_once.height) == exact
    if exact:  # the one-process quantiles
        assert _quantiles(at_once) == [pl.Series(everything, dtype=pl.Int64).quantile(q, "linear") for q in QS]


@given(st.one_of(values, micros), st.one_of(values, micros))
def test_merged_histograms_equal_the_histogram_of_all_values(a: list[int], b: list[int]) -> None:
    for bound in (2048, 0, 5):
        merged = merge_histograms(
            [_hist(a, exact_values=bound), _hist(b, exact_values=bound)], ["k"], exact_values=bound
        )
        assert merged.equals(_hist(a + b, exact_values=bound))
