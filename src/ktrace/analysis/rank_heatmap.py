"""Rank x time and rank x step heatmaps of GPU busy share and communication share (Nsight Systems'
``nccl_gpu_time_util_map``), small at any rank count: at most 200 time bins per rank.

API:

- ``rank_heatmap_part(trace, bins) -> pl.DataFrame``: the map side, from one rank's (or any subset's)
  records: node, rank, axis ("time" | "step"), bin (time bin or step number), span_ns (bin width or step
  duration), busy_ns, comm_ns.
- ``combine_rank_heatmap(parts, bins) -> RankHeatmap``: the reduce side (concatenate, sort by host and rank,
  divide by the spans).
- ``rank_heatmap(trace) -> RankHeatmap``: both over a whole trace, bins over its span (what summarize uses).

Shares: busy_share = GPU busy union / span (0-1), comm_share = union of communication kernels / span. A time
bin past a rank's last record counts as idle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.rank_activity import HeatmapBins, gpu_bins, step_activity, time_bin_activity
from ktrace.model.trace import Trace

_HEATMAP = Slot["RankHeatmap"]("rank_heatmap")
PART_SCHEMA = pl.Schema(
    {
        "node": pl.String,
        "rank": pl.Int32,
        "axis": pl.String,
        "bin": pl.Int64,
        "span_ns": pl.Int64,
        "busy_ns": pl.Int64,
        "comm_ns": pl.Int64,
    }
)


@dataclass(frozen=True)
class RankHeatmap:
    """Busy and communication share per rank and time bin, and per rank and training step."""

    bins: HeatmapBins
    ranks: pl.DataFrame
    """The matrix rows: node (String), rank (Int32), sorted by (node, rank)."""
    by_time: pl.DataFrame
    """node, rank, bin, busy_share, comm_share (0-1); every rank has every bin."""
    by_step: pl.DataFrame
    """node, rank, step, step_ns, busy_share, comm_share; empty without steps."""

    @property
    def n_steps(self) -> int:
        """Columns of the rank x step matrix: the most steps any rank has."""
        return int(self.by_step["step"].to_numpy().max()) + 1 if self.by_step.height else 0

    def matrix(self, axis: str, value: str) -> npt.NDArray[np.float64]:
        """[ranks, bins or steps] of `value` ("busy_share" | "comm_share") in `ranks` order (NaN where a rank
        has no such step)."""
        frame = self.by_time if axis == "time" else self.by_step
        col = "bin" if axis == "time" else "step"
        width = self.bins.n_bins if axis == "time" else self.n_steps
        out = np.full((self.ranks.height, width), np.nan)
        if not frame.height:
            return out
        row = self.ranks.with_row_index("row").join(frame, on=["node", "rank"], how="inner")
        out[row["row"].to_numpy(), row[col].to_numpy()] = row[value].to_numpy()
        return out

    def hosts(self) -> list[tuple[str, int, int]]:
        """(host, first matrix row, ranks) of each host, in row order."""
        nodes = self.ranks["node"].to_list()
        out: list[tuple[str, int, int]] = []
        for i, node in enumerate(nodes):
            if out and out[-1][0] == node:
                out[-1] = (node, out[-1][1], out[-1][2] + 1)
            else:
                out.append((node, i, 1))
        return out


def rank_heatmap_part(trace: Trace, bins: HeatmapBins, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """The per-rank rows of the heatmap (see the module docstring); one rank's trace gives that rank's rows."""
    ix = TraceIndex.of(trace, index)
    by_time = time_bin_activity(trace, bins, index=ix).select(
        "node", "rank", pl.lit("time").alias("axis"), "bin", pl.lit(bins.bin_ns).alias("span_ns"), "busy_ns", "comm_ns"
    )
    by_step = step_activity(trace, index=ix).select(
        "node", "rank", pl.lit("step").alias("axis"), pl.col("step").alias("bin"), "step_ns", "busy_ns", "comm_ns"
    )
    by_step = by_step.rename({"step_ns": "span_ns"})
    return pl.concat([by_time.cast(PART_SCHEMA), by_step.cast(PART_SCHEMA)])


def combine_rank_heatmap(parts: Iterable[pl.DataFrame], bins: HeatmapBins) -> RankHeatmap:
    """The heatmap of the ranks in `parts` (outputs of rank_heatmap_part with the same `bins`)."""
    rows = pl.concat([pl.DataFrame(schema=PART_SCHEMA), *parts]).sort("node", "rank", "axis", "bin")
    span = pl.col("span_ns")
    shares = rows.with_columns(
        busy_share=pl.when(span > 0).then(pl.col("busy_ns") / span).otherwise(0.0),
        comm_share=pl.when(span > 0).then(pl.col("comm_ns") / span).otherwise(0.0),
    )
    by_time = shares.filter(pl.col("axis") == "time").select("node", "rank", "bin", "busy_share", "comm_share")
    by_step = shares.filter(pl.col("axis") == "step").select(
        "node", "rank", pl.col("bin").alias("step"), pl.col("span_ns").alias("step_ns"), "busy_share", "comm_share"
    )
    ranks = rows.select("node", "rank").unique().sort("node", "rank")
    return RankHeatmap(bins, ranks, by_time, by_step)


def rank_heatmap(trace: Trace, *, index: TraceIndex | None = None) -> RankHeatmap:
    """The heatmap of every rank of `trace`, with bins over its GPU span (rank_activity.gpu_bins) (shared through the index)."""
    ix = TraceIndex.of(trace, index)

    def compute() -> RankHeatmap:
        bins = gpu_bins(trace, index=ix)
        return combine_rank_heatmap([rank_heatmap_part(trace, bins, index=ix)], bins)

    return ix.get(_HEATMAP, compute)
