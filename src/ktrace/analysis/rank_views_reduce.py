"""The rank views of a many-rank job (rank x time / rank x step heatmap, stragglers) reduced from RankPartials.

Each partial carries its slice's rank_heatmap_part (cut in the job's time bins) and stragglers_part; the fold
concatenates them as they arrive, tagged with the step source its slice found, and at the end keeps the step
rows of the slices whose source is the one detect_steps picks for the whole job (one process picks one source
for every rank: a rank without it has no steps there). combine_rank_heatmap / combine_stragglers then run on the
kept rows, so the result equals rank_heatmap(trace) / stragglers(trace) of the whole job. The communication
kernels' windows (StragglerPart.collectives, for waited_for) do not depend on the step source: every slice's are
kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from ktrace.analysis.rank_activity import HeatmapBins
from ktrace.analysis.rank_heatmap import PART_SCHEMA, RankHeatmap, combine_rank_heatmap
from ktrace.analysis.rank_partials import RankPartial
from ktrace.analysis.stragglers import (
    KERNEL_SCHEMA,
    STEP_SCHEMA,
    WAIT_SCHEMA,
    StragglerPart,
    Stragglers,
    combine_stragglers,
)
from ktrace.analysis.waited_for import WINDOW_SCHEMA

_SOURCE = "view_step_source"
"""The column the fold tags each row with: the step source of the slice it came from."""
_VIEW_SOURCE_ORDER = ("profiler_step", "annotation", "periodic")
"""detect_steps' tries without a pattern (the rank views read phases.step_spans, pattern None)."""


def _tagged(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    return frame.with_columns(pl.lit(source, pl.String).alias(_SOURCE))


def _stack(frames: list[pl.DataFrame], schema: pl.Schema) -> pl.DataFrame:
    empty = pl.DataFrame(schema=schema).with_columns(pl.lit(None, pl.String).alias(_SOURCE))
    return pl.concat([empty, *frames], how="vertical_relaxed")


@dataclass
class ViewFold:
    """The running state: every slice's view rows, concatenated as they arrive (a few hundred rows a rank)."""

    bins: HeatmapBins | None = None
    heatmap: list[pl.DataFrame] = field(default_factory=list)
    steps: list[pl.DataFrame] = field(default_factory=list)
    kernels: list[pl.DataFrame] = field(default_factory=list)
    waits: list[pl.DataFrame] = field(default_factory=list)
    collectives: list[pl.DataFrame] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)

    def add(self, p: RankPartial) -> None:
        """Fold one partial in.

        Raises:
            ValueError: its heatmap bins differ from the earlier partials' (not cut in the same job's bins).
        """
        if self.bins is not None and p.heatmap_bins != self.bins:
            raise ValueError(f"rank partials cut in different heatmap bins: {self.bins} vs {p.heatmap_bins}")
        self.bins = p.heatmap_bins
        source = p.view_step_source if p.stragglers.basis == "steps" else "none"
        self.sources.add(source)
        self.heatmap.append(_tagged(p.heatmap, source))
        self.steps.append(_tagged(p.stragglers.steps, source))
        self.kernels.append(_tagged(p.stragglers.kernels, source))
        self.waits.append(_tagged(p.stragglers.waits, source))
        self.collectives.append(p.stragglers.collectives)

    def compact(self) -> None:
        """Concatenate what arrived so far (one frame per table instead of one per partial)."""
        self.heatmap = [_stack(self.heatmap, PART_SCHEMA)]
        self.steps = [_stack(self.steps, STEP_SCHEMA)]
        self.kernels = [_stack(self.kernels, KERNEL_SCHEMA)]
        self.waits = [_stack(self.waits, WAIT_SCHEMA)]
        self.collectives = [pl.concat([pl.DataFrame(schema=WINDOW_SCHEMA), *self.collectives])]

    def finish(self) -> tuple[RankHeatmap, Stragglers]:
        """The job's heatmap and straggler analysis (after every partial was added)."""
        self.compact()
        source = view_step_source(sorted(self.sources))
        keep = pl.col(_SOURCE) == source
        (heat,) = self.heatmap
        heat = heat.filter((pl.col("axis") == "time") | keep).drop(_SOURCE)
        bins = self.bins if self.bins is not None else HeatmapBins.over(0, 1)
        steps, kernels, waits = (
            frame.filter(keep).drop(_SOURCE) for frame in (self.steps[0], self.kernels[0], self.waits[0])
        )
        part = StragglerPart(steps, kernels, waits, "span" if source == "none" else "steps", self.collectives[0])
        return combine_rank_heatmap([heat], bins), combine_stragglers([part])


def view_step_source(sources: Sequence[str]) -> str:
    """The source phases.step_spans of the whole job uses: the first of detect_steps' tries any slice has
    ("none": no slice has steps, every rank's GPU span is its one step)."""
    return next((s for s in _VIEW_SOURCE_ORDER if s in set(sources)), "none")
