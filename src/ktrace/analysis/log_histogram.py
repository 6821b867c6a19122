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


def histogram(frame: pl.DataFrame, keys: Sequence[str], value: str) -> pl.DataFrame:
    """Counts per (keys..., bin) of the non-null `value` column of `frame`: keys, ``bin`` (Int64), ``count``
    (Int64). Histograms of several ranks concatenate and merge with merge_histograms."""
    v = frame.filter(pl.col(value).is_not_null())
    coded = v.select(*keys).with_columns(bin=pl.Series(bin_codes(v[value].to_numpy()), dtype=pl.Int64))
    return coded.group_by([*keys, "bin"]).agg(count=pl.len().cast(pl.Int64)).sort([*keys, "bin"])


def merge_histograms(parts: Sequence[pl.DataFrame], keys: Sequence[str]) -> pl.DataFrame:
    """The histograms of `parts` (frames of `histogram`) summed bin by bin: exact, in any order."""
    frames = [p for p in parts if p.height]
    if not frames:
        return parts[0].clear() if parts else pl.DataFrame()
    both = pl.concat(frames, how="vertical_relaxed")
    return both.group_by([*keys, "bin"]).agg(pl.col("count").sum()).sort([*keys, "bin"])


def quantiles(
    codes: npt.NDArray[np.int64], counts: npt.NDArray[np.int64], qs: Sequence[float]
) -> npt.NDArray[np.float64]:
    """Linear-interpolation quantiles (polars' "linear") of the values a histogram holds, each order statistic
    read back from its bin (within RELATIVE_ERROR of it). `codes` sorted ascending; NaN when empty."""
    n = int(counts.sum())
    if n == 0:
        return np.full(len(qs), np.nan)
    ends = np.cumsum(counts)  # order statistic i lies in the first bin whose end > i
    h = (n - 1) * np.asarray(qs, dtype=np.float64)
    lo, hi = np.floor(h).astype(np.int64), np.ceil(h).astype(np.int64)
    values = bin_values(codes)
    x_lo = values[np.searchsorted(ends, lo, side="right")]
    x_hi = values[np.searchsorted(ends, hi, side="right")]
    return np.where(lo == hi, x_lo, x_lo + (x_hi - x_lo) * (h - lo))


def grouped_quantiles(hist: pl.DataFrame, keys: Sequence[str], qs: Sequence[float], prefix: str) -> pl.DataFrame:
    """Quantiles of each group of a merged histogram: keys, ``{prefix}_p50``... (Float64, names as
    latency.latency_stats: p50, p90, p99_9)."""
    rows: dict[str, list[object]] = {k: [] for k in keys}
    names = [f"{prefix}_p{quantile_suffix(q)}" for q in qs]
    out: dict[str, list[float]] = {name: [] for name in names}
    ordered = hist.sort([*keys, "bin"])
    for key, part in ordered.group_by(list(keys), maintain_order=True):
        for k, value in zip(keys, key, strict=True):
            rows[k].append(value)
        qv = quantiles(part["bin"].to_numpy(), part["count"].to_numpy(), qs)
        for name, x in zip(names, qv, strict=True):
            out[name].append(float(x))
    schema = {k: hist.schema[k] for k in keys}
    return pl.DataFrame({**rows, **out}, schema={**schema, **dict.fromkeys(names, pl.Float64)})
