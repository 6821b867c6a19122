"""Custom annotation histograms: durations of any named range (exact name or regex), with bins.

Named annotation_histograms, not annotations: `from ktrace.analysis import annotations` would return the
`from __future__ import annotations` feature object bound in the package namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.model.trace import Trace

DEFAULT_ANNOTATION_PATTERNS = (r"^forward$", r"^backward$", r"^optimizer\.step$|^Optimizer\.step")
"""The ranges histogrammed when the user names none (dashboard.default_annotations: those the trace has)."""


@dataclass(frozen=True)
class AnnotationHistogram:
    """Histogram of the durations of the ranges a pattern selects."""

    pattern: str
    count: int
    """Number of ranges matched."""
    edges_ns: tuple[float, ...]
    """Bin edges (len = bins + 1); the last bin includes its right edge."""
    counts: tuple[int, ...]
    """Ranges per bin."""
    stats: pl.DataFrame
    """Per matched name: ``name``, ``count``, ``total_ns``, ``min_ns``, ``mean_ns``, ``p50_ns``, ``p95_ns``, ``max_ns``."""


def matching_ranges(trace: Trace, pattern: str, *, regex: bool = True, on_gpu: bool | None = None) -> pl.DataFrame:
    """Ranges whose name matches `pattern` (a regex, or the exact name with regex=False), with ``dur_ns``.

    Args:
        trace: the trace.
        pattern: regex searched in the name, or the exact name.
        regex: treat `pattern` as a regex.
        on_gpu: only GPU-side (True) or CPU-side (False) ranges; None keeps both.
    """
    name = pl.col("name").cast(pl.String)
    cond = name.str.contains(pattern) if regex else name == pattern
    if on_gpu is not None:
        cond = cond & (pl.col("on_gpu") == on_gpu)
    return (
        trace.ranges.lazy()
        .filter(cond)
        .select(
            pl.col("node").cast(pl.String),
            "rank",
            name.alias("name"),
            "start_ns",
            "end_ns",
            (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        )
        .collect()
    )


def annotation_histogram(
    trace: Trace, pattern: str, *, bins: int = 20, regex: bool = True, on_gpu: bool | None = None
) -> AnnotationHistogram:
    """Histogram of the durations of the ranges matching `pattern` (SageMaker's custom histograms).

    Args:
        trace: the trace.
        pattern: regex (or exact name with regex=False) of the ranges, e.g. ``"backward"``.
        bins: number of equal-width bins between the shortest and longest duration.
        regex: treat `pattern` as a regex.
        on_gpu: only GPU-side (True) or CPU-side (False) ranges; None keeps both.

    Returns:
        AnnotationHistogram; with no match, count 0 and empty edges/counts.
    """
    if bins < 1:
        raise ValueError("bins must be >= 1")
    found = matching_ranges(trace, pattern, regex=regex, on_gpu=on_gpu)
    dur = found["dur_ns"].to_numpy()
    if dur.size == 0:
        return AnnotationHistogram(pattern, 0, (), (), _stats(found))
    counts, edges = np.histogram(dur, bins=bins, range=(float(dur.min()), float(max(dur.max(), dur.min() + 1))))
    return AnnotationHistogram(
        pattern, int(dur.size), tuple(float(e) for e in edges), tuple(int(c) for c in counts), _stats(found)
    )


def _stats(found: pl.DataFrame) -> pl.DataFrame:
    d = pl.col("dur_ns")
    return (
        found.group_by("name")
        .agg(
            count=pl.len().cast(pl.Int64),
            total_ns=d.sum().cast(pl.Int64),
            min_ns=d.min().cast(pl.Int64),
            mean_ns=d.mean().cast(pl.Float64),
            p50_ns=d.quantile(0.5, "linear").cast(pl.Float64),
            p95_ns=d.quantile(0.95, "linear").cast(pl.Float64),
            max_ns=d.max().cast(pl.Int64),
        )
        .sort(["total_ns", "name"], descending=[True, False])
    )
