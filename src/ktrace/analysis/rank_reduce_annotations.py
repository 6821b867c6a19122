"""Annotation histograms (annotation_histograms.annotation_histogram) of a many-rank job, rank by rank.

The first pass finds each pattern's shortest and longest matching range on every rank (annotation_extent); the
client takes the job's, so every rank cuts its durations in the job's bins (annotation_part) and the bins' counts
add exactly. Per range name, counts, sums, minima and maxima add exactly (mean = sum / count); p50 and p95 are
read back from merged log-bin histograms (log_histogram.RELATIVE_ERROR). Without patterns from the user, the
patterns are those of DEFAULT_ANNOTATION_PATTERNS that some rank has (dashboard.default_annotations).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ktrace.analysis.annotation_histograms import DEFAULT_ANNOTATION_PATTERNS, AnnotationHistogram, matching_ranges
from ktrace.analysis.log_histogram import grouped_quantiles, histogram, merge_histograms
from ktrace.model.trace import Trace

ANNOTATION_BINS = 20
"""summarize's annotation_bins default."""
Extent = tuple[int, int] | None
"""(shortest, longest) duration of a pattern's ranges; None without a match."""


def annotation_extent(trace: Trace, patterns: Sequence[str] | None) -> dict[str, Extent]:
    """First pass: per pattern (the user's, or every default candidate when None), its ranges' extent."""
    out: dict[str, Extent] = {}
    for p in DEFAULT_ANNOTATION_PATTERNS if patterns is None else patterns:
        dur = matching_ranges(trace, p)["dur_ns"]
        out[p] = (int(dur.min()), int(dur.max())) if dur.len() else None  # type: ignore[arg-type]
    return out


def job_extents(found: Sequence[Mapping[str, Extent]], patterns: Sequence[str] | None) -> dict[str, Extent]:
    """The job's extent per pattern from every rank's; without user patterns, only the defaults some rank has."""
    names = list(DEFAULT_ANNOTATION_PATTERNS if patterns is None else patterns)
    out: dict[str, Extent] = {}
    for p in names:
        seen = [e for f in found if (e := f.get(p)) is not None]
        out[p] = (min(lo for lo, _ in seen), max(hi for _, hi in seen)) if seen else None
    return {p: e for p, e in out.items() if patterns is not None or e is not None}


@dataclass(frozen=True)
class AnnotationPart:
    """One pattern on one slice (or merged slices): counts in the job's bins, per-name totals and histograms."""

    pattern: str
    extent: Extent
    counts: tuple[int, ...]
    stats: pl.DataFrame
    """name, count, total_ns, min_ns, max_ns."""
    histogram: pl.DataFrame
    """name, bin, count (log bins of the durations)."""


def annotation_part(trace: Trace, pattern: str, extent: Extent, bins: int = ANNOTATION_BINS) -> AnnotationPart:
    """Second pass: the slice's ranges of `pattern` cut in the job's bins (`extent`: job_extents')."""
    found = matching_ranges(trace, pattern)
    dur = found["dur_ns"].to_numpy()
    counts: tuple[int, ...] = ()
    if extent is not None:
        counts = tuple(int(c) for c in np.histogram(dur, bins=bins, range=_range(extent))[0])
    d = pl.col("dur_ns")
    stats = found.group_by("name").agg(
        count=pl.len().cast(pl.Int64), total_ns=d.sum().cast(pl.Int64), min_ns=d.min(), max_ns=d.max()
    )
    return AnnotationPart(pattern, extent, counts, stats, histogram(found, ["name"], "dur_ns"))


def merge_annotation_parts(parts: Sequence[AnnotationPart]) -> AnnotationPart:
    """The parts of one pattern as one: bin counts and per-name totals summed, histograms merged."""
    first = parts[0]
    counts = tuple(int(c) for c in np.sum([p.counts for p in parts], axis=0)) if first.counts else ()
    frames = [p.stats for p in parts if p.stats.height]
    stats = (
        pl.concat(frames, how="vertical_relaxed")
        .group_by("name")
        .agg(pl.col("count").sum(), pl.col("total_ns").sum(), pl.col("min_ns").min(), pl.col("max_ns").max())
        if frames
        else first.stats
    )
    return AnnotationPart(
        first.pattern, first.extent, counts, stats, merge_histograms([p.histogram for p in parts], ["name"])
    )


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
    if part.extent is None:
        return AnnotationHistogram(part.pattern, 0, (), (), stats)
    edges = np.histogram_bin_edges(np.zeros(0), bins=bins, range=_range(part.extent))
    return AnnotationHistogram(part.pattern, int(sum(part.counts)), tuple(float(e) for e in edges), part.counts, stats)


def _range(extent: tuple[int, int]) -> tuple[float, float]:
    """annotation_histogram's histogram range: (shortest, longest), at least 1 ns wide."""
    lo, hi = extent
    return float(lo), float(max(hi, lo + 1))
