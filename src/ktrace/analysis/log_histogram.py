"""Mergeable histograms of int64 durations on fixed log-spaced bins, and quantiles read back from them.

The fleet reduce (analysis.rank_reduce) cannot ship every latency or kernel duration of every rank to the client,
so each rank sends, per group, the count of its values in each bin; counts of the same bin add exactly across
ranks, in any order.

Bins: 0 is its own bin; a value v != 0 goes to bin ``sign(v) * (1 + floor(log(|v|) / log(BIN_RATIO)))``, so the
bin of |v| is [r^k, r^(k+1)) with r = BIN_RATIO = 2^(1/128) (128 bins per doubling; 5,400 bins cover 1 ns to
1 hour on each side). Bin codes are monotone in the value, so sorted codes are sorted values.

Error bound: a bin is read back as 2 r^k r / (1 + r) (the harmonic mean of its edges), which is within
RELATIVE_ERROR = (r - 1) / (r + 1) < 0.0028 (0.27 %) of every value in the bin. A quantile with linear
interpolation between the order statistics x_lo and x_hi (polars' "linear", as the single-process path) is
read back within ``RELATIVE_ERROR * max(|x_lo|, |x_hi|)`` of the exact one, which for values of one sign is
``RELATIVE_ERROR * |exact|``. Counts, sums, minima and maxima are not taken from the histogram: they stay exact.

Exact where it is cheap: a group of whole microseconds (every value a multiple of 1,000 ns, as Kineto records
times) with at most EXACT_VALUES distinct values is sent as (value, count) rows (``bin`` null, ``value`` the value)
instead of bins, and stays exact once merged while it holds at most EXACT_VALUES distinct values. Such values
repeat (a kernel's, a runtime call's durations): on those traces the rank-by-rank quantiles are the one-process
ones, to the bit (the same order statistics, interpolated as polars does). Any other group is bins, and a merged
group that outgrows the bound (or one that any part sent as bins) becomes bins, its exact values binned as they
would have been. Whether a group ends exact depends on its values only (all whole microseconds, at most
EXACT_VALUES of them), never on how the ranks were cut into tasks nor on the merge order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.latency import quantile_suffix

BIN_RATIO = 2.0 ** (1 / 128)
"""Ratio of a bin's upper edge to its lower edge."""
RELATIVE_ERROR = (BIN_RATIO - 1) / (BIN_RATIO + 1)
"""Largest relative error of a value read back from its bin (and of a quantile of one-signed values)."""

_LOG_RATIO = float(np.log(BIN_RATIO))


def bin_codes(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The bin code of every value (see the module docstring)."""
    v = np.asarray(values, dtype=np.float64)
    mag = np.abs(v)
    k = np.floor(np.log(np.where(mag >= 1, mag, 1.0)) / _LOG_RATIO).astype(np.int64) + 1
    return np.where(v == 0, 0, np.sign(v).astype(np.int64) * np.where(mag >= 1, k, 1))


def bin_values(codes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The value a bin code is read back as: 0, or +-(the harmonic mean of the bin's edges)."""
    c = np.asarray(codes, dtype=np.int64)
    lo = np.exp((np.abs(c) - 1).astype(np.float64) * _LOG_RATIO)
    return np.where(c == 0, 0.0, np.sign(c) * 2.0 * lo * BIN_RATIO / (1.0 + BIN_RATIO))


EXACT_VALUES = 2048
"""A group of whole microseconds with at most this many distinct values is kept as exact (value, count) rows."""
EXACT_UNIT = 1000.0
"""Exact rows only for values that are all multiples of this (ns): Kineto's whole microseconds repeat; a capture's
nanoseconds mostly do not, and their bins are fewer than their values."""
_SCHEMA = {"bin": pl.Int64, "value": pl.Float64, "count": pl.Int64}
COLUMNS = tuple(_SCHEMA)
"""A histogram's columns after its keys: ``bin`` (a bin code; null on an exact row), ``value`` (an exact row's
value; null on a bin's), ``count``."""


def histogram(
    frame: pl.DataFrame, keys: Sequence[str], value: str, *, exact_values: int = EXACT_VALUES
) -> pl.DataFrame:
    """Counts per (keys..., bin) of the non-null `value` column of `frame`, or per (keys..., value) for a group of
    whole microseconds with at most `exact_values` distinct values: keys, then COLUMNS. Histograms of several ranks
    concatenate and merge with merge_histograms (with the same bound)."""
    v = frame.filter(pl.col(value).is_not_null()).select(*keys, pl.col(value).cast(pl.Float64).alias("value"))
    whole = (pl.col("value") % EXACT_UNIT == 0).all()
    few = v.group_by(keys).agg(exact=(pl.col("value").n_unique() <= exact_values) & whole)
    v = v.join(few, on=list(keys), how="left", nulls_equal=True)
    exact = v.filter(pl.col("exact")).group_by([*keys, "value"]).agg(count=pl.len().cast(pl.Int64))
    binned = v.filter(~pl.col("exact")).select(*keys, "value")
    return _rows(exact, binned.with_columns(count=pl.lit(1, pl.Int64)), keys)


def merge_histograms(
    parts: Sequence[pl.DataFrame], keys: Sequence[str], *, exact_values: int = EXACT_VALUES
) -> pl.DataFrame:
    """The histograms of `parts` (frames of `histogram`) summed bin by bin (value by value where exact, while a
    group holds at most `exact_values` values): the same in any order and grouping."""
    frames = [p for p in parts if p.height]
    if not frames:
        return parts[0].clear() if parts else pl.DataFrame()
    both = pl.concat(frames, how="vertical_relaxed")
    merged = both.group_by([*keys, "bin", "value"]).agg(pl.col("count").sum())
    grouped = merged.group_by(keys).agg(exact=(pl.col("bin").null_count() == pl.len()) & (pl.len() <= exact_values))
    merged = merged.join(grouped, on=list(keys), how="left", nulls_equal=True)
    exact = merged.filter(pl.col("exact")).select(*keys, "value", "count")
    inexact = merged.filter(~pl.col("exact"))
    binned = inexact.filter(pl.col("bin").is_null()).select(*keys, "value", "count")
    kept = inexact.filter(pl.col("bin").is_not_null()).select(*keys, "bin", "count")
    return _rows(exact, binned, keys, kept)


def _rows(
    exact: pl.DataFrame, to_bin: pl.DataFrame, keys: Sequence[str], binned: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One histogram frame: `exact` (keys, value, count) as exact rows, `to_bin` (keys, value, count) summed into
    their values' bins, with `binned` (keys, bin, count) rows."""
    coded = to_bin.select(*keys, pl.Series("bin", bin_codes(to_bin["value"].to_numpy()), pl.Int64), "count")
    bins = pl.concat([coded, *([] if binned is None else [binned])], how="vertical_relaxed")
    bins = bins.group_by([*keys, "bin"]).agg(pl.col("count").sum()).with_columns(value=pl.lit(None, pl.Float64))
    rows = exact.with_columns(bin=pl.lit(None, pl.Int64))
    out = pl.concat([r.select(*keys, *COLUMNS).cast(_SCHEMA) for r in (rows, bins)], how="vertical_relaxed")  # type: ignore[arg-type]
    return out.sort([*keys, "bin", "value"], nulls_last=False)


def quantiles(
    codes: npt.NDArray[np.int64], counts: npt.NDArray[np.int64], qs: Sequence[float]
) -> npt.NDArray[np.float64]:
    """Linear-interpolation quantiles (polars' "linear") of the values a histogram holds, each order statistic
    read back from its bin (within RELATIVE_ERROR of it). `codes` sorted ascending; NaN when empty."""
    return value_quantiles(bin_values(codes), counts, qs)


def value_quantiles(
    values: npt.NDArray[np.float64], counts: npt.NDArray[np.int64], qs: Sequence[float]
) -> npt.NDArray[np.float64]:
    """Linear-interpolation quantiles of `values` (ascending) each held `counts` times, as polars computes them
    (the order statistics x_lo, x_hi around (n - 1) q, then x_lo + (x_hi - x_lo) (h - lo)); NaN when empty."""
    n = int(counts.sum())
    if n == 0:
        return np.full(len(qs), np.nan)
    ends = np.cumsum(counts)  # order statistic i lies in the first row whose end > i
    h = (n - 1) * np.asarray(qs, dtype=np.float64)
    lo, hi = np.floor(h).astype(np.int64), np.ceil(h).astype(np.int64)
    x_lo = values[np.searchsorted(ends, lo, side="right")]
    x_hi = values[np.searchsorted(ends, hi, side="right")]
    return np.where(lo == hi, x_lo, x_lo + (x_hi - x_lo) * (h - lo))


def grouped_quantiles(hist: pl.DataFrame, keys: Sequence[str], qs: Sequence[float], prefix: str) -> pl.DataFrame:
    """Quantiles of each group of a merged histogram: keys, ``{prefix}_p50``... (Float64, names as
    latency.latency_stats: p50, p90, p99_9)."""
    rows: dict[str, list[object]] = {k: [] for k in keys}
    names = [f"{prefix}_p{quantile_suffix(q)}" for q in qs]
    out: dict[str, list[float]] = {name: [] for name in names}
    ordered = hist.sort([*keys, "bin", "value"], nulls_last=False)
    for key, part in ordered.group_by(list(keys), maintain_order=True):
        for k, value in zip(keys, key, strict=True):
            rows[k].append(value)
        counts = part["count"].to_numpy()
        if part["bin"].null_count() == part.height:  # exact rows, by value
            qv = value_quantiles(part["value"].to_numpy(), counts, qs)
        else:  # a group is all bins once merged (merge_histograms); a lone part's too (histogram)
            qv = quantiles(part["bin"].to_numpy(), counts, qs)
        for name, x in zip(names, qv, strict=True):
            out[name].append(float(x))
    schema = {k: hist.schema[k] for k in keys}
    return pl.DataFrame({**rows, **out}, schema={**schema, **dict.fromkeys(names, pl.Float64)})
