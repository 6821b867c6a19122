"""Annotation histograms (annotation_histograms.annotation_histogram) of a many-rank job, rank by rank.

Each slice ships its matching ranges' durations per pattern (annotation_part: a few per step and rank); the client
concatenates them and cuts the job's bins over the job's shortest and longest range (job_annotation), so the
bins' counts are those of one process exactly, with no pass over the ranks to find the job's extent first. Per
range name, counts, sums, minima and maxima add exactly (mean = sum / count); p50 and p95 are read back from merged
log-bin histograms (log_histogram.RELATIVE_ERROR). Without patterns from the user, the patterns are those of
DEFAULT_ANNOTATION_PATTERNS that some rank has (dashboard.default_annotations: job_annotations drops the others).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.annotation_histograms import AnnotationHistogram, matching_ranges
from ktrace.analysis.log_histogram import grouped_quantiles, histogram, merge_histograms
from ktrace.model.trace import Trace

ANNOTATION_BINS = 20
"""summarize's annotation_bins default."""


@dataclass(frozen=True)
class AnnotationPart:
    """One pattern on one slice (or merged slices): its ranges' durations, per-name totals and histograms."""

    pattern: str
    durations: npt.NDArray[np.int64]
    """Every matching range's duration (the job's bins are cut once all are in: job_annotation)."""
    stats: pl.DataFrame
    """name, count, total_ns, min_ns, max_ns."""
    histogram: pl.DataFrame
    """name, bin, count (log bins of the durations)."""


def annotation_part(trace: Trace, pattern: str) -> AnnotationPart:
    """The slice's ranges of `pattern`: their durations, per-name totals and histograms."""
    found = matching_ranges(trace, pattern)
    dur = found["dur_ns"].to_numpy().astype(np.int64, copy=False)
    d = pl.col("dur_ns")
    stats = found.group_by("name").agg(
        count=pl.len().cast(pl.Int64), total_ns=d.sum().cast(pl.Int64), min_ns=d.min(), max_ns=d.max()
    )
    return AnnotationPart(pattern, dur, stats, histogram(found, ["name"], "dur_ns"))


def merge_annotation_parts(parts: Sequence[AnnotationPart]) -> AnnotationPart:
    """The parts of one pattern as one: durations concatenated, per-name totals summed, histograms merged."""
    first = parts[0]
    durations = np.concatenate([p.durations for p in parts]).astype(np.int64, copy=False)
    frames = [p.stats for p in parts if p.stats.height]
    stats = (
        pl.concat(frames, how="vertical_relaxed")
        .group_by("name")
        .agg(pl.col("count").sum(), pl.col("total_ns").sum(), pl.col("min_ns").min(), pl.col("max_ns").max())
        if frames
        else first.stats
    )
    return AnnotationPart(first.pattern, durations, stats, merge_histograms([p.histogram for p in parts], ["name"]))


def job_annotation(part: AnnotationPart, bins: int = ANNOTATION_BINS) -> AnnotationHistogram:
    """annotation_histogram of the whole job from the merge of every rank's part."""
    q = grouped_quantiles(part.histogram, ["name"], (0.5, 0.95), "d").rename({"d_p50": "p50_ns", "d_p95": "p95_ns"})
    stats = (
        part.stats.join(q, on="name", how="left")
        .select(
            "name",
            "count",
            "total_ns",
            pl.col("min_ns").cast(pl.Int64),
            (pl.col("total_ns") / pl.col("count")).cast(pl.Float64).alias("mean_ns"),
            "p50_ns",
            "p95_ns",
            pl.col("max_ns").cast(pl.Int64),
        )
        .sort(["total_ns", "name"], descending=[True, False])
    )
    dur = part.durations
    if dur.size == 0:
        return AnnotationHistogram(part.pattern, 0, (), (), stats)
    lo, hi = int(dur.min()), int(dur.max())  # annotation_histogram's range: at least 1 ns wide
    counts, edges = np.histogram(dur, bins=bins, range=(float(lo), float(max(hi, lo + 1))))
    return AnnotationHistogram(
        part.pattern, int(dur.size), tuple(float(e) for e in edges), tuple(int(c) for c in counts), stats
    )


def job_annotations(parts: Sequence[AnnotationPart], user_patterns: bool) -> tuple[AnnotationHistogram, ...]:
    """job_annotation of each pattern's merged part; without `user_patterns` (the default candidates), only the
    patterns some rank has."""
    return tuple(job_annotation(p) for p in parts if user_patterns or p.durations.size)
